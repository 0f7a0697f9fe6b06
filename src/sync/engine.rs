//! The sync threads of a serving host (docs/sync.md "How it runs"): a writer and a reader, each
//! with a database connection of its own (like the change poller and the daily backup), so
//! nothing they do waits on a reply or delays one.
//!
//! - The **writer** looks at the outbox every [`WRITER_TICK`] and seals what it finds into a
//!   segment (pictures first): a write reaches the folder within a second.
//! - The **reader** looks at the folder when it starts, every [`READER_TICK`], and soon after a
//!   file-system notification (the `notify` crate: inotify, kqueue, ReadDirectoryChangesW) where
//!   the platform has one. What it applies is committed under a connection origin of its own, so
//!   this process's change poller announces it as a `changed` event like any other process's
//!   commit: open panels and drawers update.
//! - **One syncing process per database**: several hosts serve one database (the worker's, the
//!   side panel's, the CLI); only the one holding an exclusive lock on `<db>.sync-lock` runs the
//!   threads' work, the others try again every [`CLAIM_RETRY`] (a killed holder's lock goes with
//!   it).
//! - **Paused** (`sync pause`): no folder IO; operations are still recorded and sealed after
//!   `sync resume`. A failure (folder gone, key unreadable) is kept for `sync status` and tried
//!   again at the next tick; it never ends the host. At shutdown both threads stop between two
//!   steps and are joined.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::key;
use super::layout::Folder;
use super::reader::Reader;
use super::replica::{Device, Replica};
use super::status::Seen;
use super::writer::Writer;
use crate::secrets::SecretStore;

/// How often the writer looks at the outbox.
pub const WRITER_TICK: Duration = Duration::from_millis(250);
/// How often the reader looks at the folder without a notification.
pub const READER_TICK: Duration = Duration::from_secs(5);
/// After a notification, the reader waits this long for more before it looks (a syncer writes a
/// file and renames it: one look for both).
const SETTLE_NOTIFY: Duration = Duration::from_millis(150);
/// …but never longer than this in all: notifications that never stop (a syncer writing for
/// minutes) do not keep the reader from looking.
const SETTLE_MAX: Duration = Duration::from_secs(1);
/// How often the threads look whether a database that does not sync (or is paused) started.
pub const IDLE_TICK: Duration = Duration::from_secs(2);
/// How often a host without the lock tries to take it.
pub const CLAIM_RETRY: Duration = Duration::from_secs(5);
/// The first look waits this long after the start, off the busy first moments of a port.
const FIRST_LOOK: Duration = Duration::from_millis(300);

/// Opens a replica connection for a thread.
pub type Opener = Arc<dyn Fn() -> Result<Box<dyn Replica + Send>, String> + Send + Sync>;

/// What the threads share with the `sync.status` operation of this process.
#[derive(Default)]
pub struct Shared {
    pub seen: Mutex<Option<Seen>>,
    writer_error: Mutex<Option<String>>,
}

impl Shared {
    /// The last look, with the writer's last failure added.
    pub fn snapshot(&self) -> Option<Seen> {
        let mut s = self.seen.lock().ok()?.clone()?;
        if s.error.is_none() {
            s.error = self.writer_error.lock().ok().and_then(|e| e.clone());
        }
        Some(s)
    }
}

/// The engines running in this process, by database path (for `sync.status`).
fn live() -> &'static Mutex<HashMap<PathBuf, Arc<Shared>>> {
    static LIVE: OnceLock<Mutex<HashMap<PathBuf, Arc<Shared>>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

/// The engine of `db` in this process, if one runs.
pub fn shared_for(db: &Path) -> Option<Arc<Shared>> {
    live().lock().ok()?.get(db).cloned()
}

/// The exclusive lock that makes one process per database the syncing one.
struct Claim {
    path: PathBuf,
    held: Mutex<Option<std::fs::File>>,
    next_try: Mutex<Option<Instant>>,
}

impl Claim {
    fn held(&self) -> bool {
        let Ok(mut h) = self.held.lock() else { return false };
        if h.is_some() {
            return true;
        }
        let Ok(mut next) = self.next_try.lock() else { return false };
        if next.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        *next = Some(Instant::now() + CLAIM_RETRY);
        *h = try_lock(&self.path);
        h.is_some()
    }
}

#[cfg(unix)]
fn try_lock(p: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .ok()?;
    // SAFETY: flock on a descriptor this function owns; non-blocking.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    (r == 0).then_some(f)
}

#[cfg(not(unix))]
fn try_lock(p: &Path) -> Option<std::fs::File> {
    // Windows: a file opened without sharing is exclusive to this process until it is closed.
    use std::os::windows::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).share_mode(0).open(p).ok()
}

/// The running threads; dropping it without [`Engine::stop`] leaves them running.
pub struct Engine {
    stop_tx: Vec<Sender<()>>,
    stopping: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    db: PathBuf,
}

fn now() -> i64 {
    crate::util::time::now_ms()
}

impl Engine {
    /// Start the writer and the reader for the database at `db`.
    pub fn start(db: &Path, open: Opener, secrets: Arc<dyn SecretStore>) -> Engine {
        let shared = Arc::new(Shared::default());
        if let Ok(mut l) = live().lock() {
            l.insert(db.to_path_buf(), shared.clone());
        }
        let claim = Arc::new(Claim {
            path: crate::util::paths::sync_lock_for(db),
            held: Mutex::new(None),
            next_try: Mutex::new(None),
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let (wtx, wrx) = mpsc::channel::<()>();
        let (rtx, rrx) = mpsc::channel::<()>();
        let mut threads = Vec::new();
        {
            let (open, secrets, shared, claim) =
                (open.clone(), secrets.clone(), shared.clone(), claim.clone());
            let stopping = stopping.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("keepsake-sync-writer".into())
                    .spawn(move || writer_loop(open, secrets, shared, claim, stopping, wrx))
                    .expect("spawn the sync writer"),
            );
        }
        {
            let nudge = rtx.clone();
            let stopping2 = stopping.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("keepsake-sync-reader".into())
                    .spawn(move || reader_loop(open, secrets, shared, claim, stopping2, rrx, nudge))
                    .expect("spawn the sync reader"),
            );
        }
        Engine { stop_tx: vec![wtx, rtx], stopping, threads, db: db.to_path_buf() }
    }

    /// Stop both threads between two steps and wait for them.
    pub fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // wake both now (the reader's channel also has the watcher's sender, so it would not see
        // a disconnect)
        for tx in self.stop_tx.drain(..) {
            let _ = tx.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Ok(mut l) = live().lock() {
            l.remove(&self.db);
        }
    }
}

/// Wait `d` for a nudge; false when the engine stops.
fn wait(rx: &Receiver<()>, d: Duration, stopping: &AtomicBool) -> bool {
    match rx.recv_timeout(d) {
        Ok(()) | Err(RecvTimeoutError::Timeout) => !stopping.load(Ordering::SeqCst),
        Err(RecvTimeoutError::Disconnected) => false,
    }
}

/// This device as the database says, if it syncs and is not paused.
fn active(r: &mut dyn Replica) -> Result<Option<Device>, String> {
    match r.sync_device() {
        Ok(Some(d)) if !d.paused => Ok(Some(d)),
        Ok(_) => Ok(None),
        Err(e) => Err(e.message),
    }
}

fn set(m: &Mutex<Option<String>>, v: Option<String>) {
    if let Ok(mut g) = m.lock() {
        if *g != v {
            if let Some(e) = &v {
                tracing::warn!(error = %e, "sync");
            }
            *g = v;
        }
    }
}

fn writer_loop(
    open: Opener,
    secrets: Arc<dyn SecretStore>,
    shared: Arc<Shared>,
    claim: Arc<Claim>,
    stopping: Arc<AtomicBool>,
    rx: Receiver<()>,
) {
    if !wait(&rx, FIRST_LOOK, &stopping) {
        return;
    }
    let mut replica: Option<Box<dyn Replica + Send>> = None;
    let mut writer: Option<(Device, Writer)> = None;
    loop {
        let mut tick = IDLE_TICK;
        if replica.is_none() {
            match open() {
                Ok(r) => replica = Some(r),
                Err(e) => set(&shared.writer_error, Some(e)),
            }
        }
        if let Some(r) = replica.as_deref_mut() {
            // a database that does not sync costs one small read per IDLE_TICK
            if syncs(r) && claim.held() {
                tick = WRITER_TICK;
                let err = step_writer(r, &*secrets, &mut writer);
                set(&shared.writer_error, err);
            } else {
                writer = None;
            }
        }
        if !wait(&rx, tick, &stopping) {
            break;
        }
    }
}

/// Set up and not paused (a failed read counts as yes: the step reports it).
fn syncs(r: &mut dyn Replica) -> bool {
    !matches!(active(r), Ok(None))
}

/// One look of the writer; the failure to report, if any.
fn step_writer(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    writer: &mut Option<(Device, Writer)>,
) -> Option<String> {
    let d = match active(r) {
        Ok(Some(d)) => d,
        Ok(None) => {
            *writer = None;
            return None;
        }
        Err(e) => return Some(e),
    };
    if writer.as_ref().is_none_or(|(old, _)| old != &d) {
        *writer = None;
        let key = match key::load(secrets, &d.key) {
            Ok(k) => k,
            Err(e) => return Some(e),
        };
        if let Err(e) = super::status::folder_reachable(&d) {
            return Some(e);
        }
        match Writer::start(r, &d, &key, now()) {
            Ok(w) => *writer = Some((d, w)),
            Err(e) => return Some(e.to_string()),
        }
    }
    let (_, w) = writer.as_mut().expect("set above");
    match w.flush(r, now()) {
        Ok(_) => None,
        Err(e) => {
            // start over at the next tick: the folder may have changed under us
            *writer = None;
            Some(e.to_string())
        }
    }
}

/// Whether a notification can mean a file arrived, changed or went: not a mere open or read
/// (inotify reports every open; the reader's own look opens every file, so waking on those made it
/// look again and again, and a folder someone kept reading — a status every 100 ms, a syncer's
/// scan — held it from looking at all). A file closed after writing does count.
fn wakes(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

/// A burst of notifications: return once none came for SETTLE_NOTIFY, or after SETTLE_MAX.
fn settle(rx: &Receiver<()>) {
    settle_for(rx, SETTLE_NOTIFY, SETTLE_MAX)
}

/// [`settle`] with its two times given: once none came for `quiet`, or after `max`.
fn settle_for(rx: &Receiver<()>, quiet: Duration, max: Duration) {
    let until = Instant::now() + max;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || rx.recv_timeout(quiet.min(left)).is_err() {
            return;
        }
    }
}

fn watch(folder: &Folder, nudge: Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut w = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if ev.is_ok_and(|ev| wakes(&ev.kind)) {
            let _ = nudge.send(());
        }
    })
    .inspect_err(
        |e| tracing::info!(error = %e, "no file-system notifications: the sync reader looks on a timer"),
    )
    .ok()?;
    match w.watch(&folder.base(), notify::RecursiveMode::Recursive) {
        Ok(()) => Some(w),
        Err(e) => {
            tracing::info!(error = %e, "the sync folder cannot be watched: the reader looks on a timer");
            None
        }
    }
}

fn reader_loop(
    open: Opener,
    secrets: Arc<dyn SecretStore>,
    shared: Arc<Shared>,
    claim: Arc<Claim>,
    stopping: Arc<AtomicBool>,
    rx: Receiver<()>,
    nudge: Sender<()>,
) {
    if !wait(&rx, FIRST_LOOK, &stopping) {
        return;
    }
    let mut replica: Option<Box<dyn Replica + Send>> = None;
    let mut reader: Option<(Device, Reader, Option<notify::RecommendedWatcher>)> = None;
    loop {
        let mut tick = IDLE_TICK;
        if replica.is_none() {
            match open() {
                Ok(r) => replica = Some(r),
                Err(e) => store_seen(&shared, None, Some(e)),
            }
        }
        if let Some(r) = replica.as_deref_mut() {
            if syncs(r) && claim.held() {
                tick = READER_TICK;
                step_reader(r, &*secrets, &shared, &mut reader, &nudge, &stopping);
            } else {
                reader = None;
                if let Ok(mut s) = shared.seen.lock() {
                    *s = None;
                }
            }
        }
        if !wait(&rx, tick, &stopping) {
            break;
        }
        // a burst of notifications: one look after it
        settle(&rx);
        if stopping.load(Ordering::SeqCst) {
            break;
        }
    }
}

fn store_seen(shared: &Shared, status: Option<super::reader::FolderStatus>, error: Option<String>) {
    if let Some(e) = &error {
        tracing::warn!(error = %e, "sync reader");
    }
    if let Ok(mut s) = shared.seen.lock() {
        let old = s.take().unwrap_or_default();
        *s = Some(Seen { status: status.unwrap_or(old.status), at: now(), error });
    }
}

fn step_reader(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    shared: &Shared,
    reader: &mut Option<(Device, Reader, Option<notify::RecommendedWatcher>)>,
    nudge: &Sender<()>,
    stopping: &Arc<AtomicBool>,
) {
    let d = match active(r) {
        Ok(Some(d)) => d,
        Ok(None) => {
            *reader = None;
            if let Ok(mut s) = shared.seen.lock() {
                *s = None;
            }
            return;
        }
        Err(e) => return store_seen(shared, None, Some(e)),
    };
    if reader.as_ref().is_none_or(|(old, _, _)| old != &d) {
        let key = match key::load(secrets, &d.key) {
            Ok(k) => k,
            Err(e) => {
                *reader = None;
                return store_seen(shared, None, Some(e));
            }
        };
        let folder = Folder::new(&d.folder);
        let w = watch(&folder, nudge.clone());
        *reader = Some((d.clone(), Reader::new(folder, &d.id, key).stop_on(stopping.clone()), w));
    }
    if stopping.load(Ordering::SeqCst) {
        return;
    }
    if let Err(e) = super::status::folder_reachable(&d) {
        // the watch is on a folder that went away: make it again when it is back
        *reader = None;
        return store_seen(shared, None, Some(e));
    }
    let (_, rd, _) = reader.as_mut().expect("set above");
    match rd.look(r, true, now(), &mut |_| {}) {
        Ok(st) => {
            if st.applied_segments > 0 {
                tracing::debug!(segments = st.applied_segments, ops = st.applied_ops, "sync applied");
            }
            store_seen(shared, Some(st), None)
        }
        Err(e) => store_seen(shared, None, Some(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind, RenameMode};
    use notify::EventKind;

    #[test]
    fn opens_and_reads_do_not_wake_the_reader_writes_do() {
        for k in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Any),
        ] {
            assert!(!wakes(&k), "{k:?}");
        }
        for k in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Any,
            EventKind::Other,
        ] {
            assert!(wakes(&k), "{k:?}");
        }
    }

    #[test]
    fn a_burst_that_never_stops_holds_the_reader_back_at_most_its_max() {
        // a quiet time far longer than any pause of the sending thread on a busy machine: only the
        // max can end the wait, so the burst never looks over by chance
        const QUIET: Duration = Duration::from_secs(120);
        const MAX: Duration = Duration::from_millis(500);
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let sender = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let _ = tx.send(());
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let t = Instant::now();
        settle_for(&rx, QUIET, MAX);
        let took = t.elapsed();
        stop.store(true, Ordering::SeqCst);
        sender.join().unwrap();
        eprintln!("settle under a notification every 20 ms returned after {took:?} (max {MAX:?})");
        assert!(took >= MAX, "it waited for the burst: {took:?}");
        assert!(took < QUIET, "the max ended the wait, not a quiet spell: {took:?}");
        // quiet: nothing comes, so the quiet time ends it long before the max
        let (_tx, rx) = mpsc::channel::<()>();
        let t = Instant::now();
        settle_for(&rx, Duration::from_millis(100), Duration::from_secs(120));
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(100) && took < Duration::from_secs(120), "{took:?}");
    }
}
