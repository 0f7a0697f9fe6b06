//! The native-messaging server: read a frame, decode, dispatch, reply (chunked when large),
//! then announce the change. A poller thread announces commits made by other host processes
//! within 1 s; a backup thread makes the daily backup when it is due. Stdin EOF is a normal
//! shutdown.

pub mod bodies;
pub mod dispatch;
pub mod ops;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::domain::images::UNSEEN_IMAGE_BYTES_BUDGET;
use crate::protocol::chunk::frames_for_reply;
use crate::protocol::envelope::{decode_request, error_reply, payload_reply};
use crate::protocol::frame::{read_frame, write_frames, FrameError};
use crate::protocol::limits::MAX_INBOUND_FRAME;
use crate::protocol::{ErrorCode, HostError};
use crate::store::{Daily, Store};
use bodies::BodyCache;
use dispatch::{dispatch_with, Ctx, Followup};

/// How often the poller looks for other processes' commits (the spec allows 1 s).
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How long after the start the poller opens its connection (see `serve`): past the first
/// request's reply, and with POLL_INTERVAL still far inside the 1 s announcement bound.
const POLLER_START_DELAY: Duration = Duration::from_millis(250);

/// Frames go out through one lock so replies and events never interleave mid-frame.
#[derive(Clone)]
pub struct Outbox {
    inner: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Outbox {
    pub fn new(w: Box<dyn Write + Send>) -> Self {
        Outbox { inner: Arc::new(Mutex::new(w)) }
    }

    /// Send frames in order under one lock. Returns false when the pipe is gone.
    fn send_all(&self, frames: &[String]) -> bool {
        let mut w = match self.inner.lock() {
            Ok(w) => w,
            Err(p) => p.into_inner(),
        };
        let bodies: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
        if let Err(e) = write_frames(&mut *w, &bodies) {
            tracing::warn!(error = %e, "cannot write frame");
            return false;
        }
        true
    }

    fn send_reply(&self, id: &Value, reply: String) -> bool {
        self.send_all(&frames_for_reply(id, reply))
    }
}

/// Serve until stdin closes. `host.hello` is answered before the database is opened; the
/// database is opened (created, migrated, salvaged) right after hello's reply, announced with a
/// `db` event, or by the first operation that needs it. If that fails the server still answers
/// `host.hello` (with `dbError`) and every other operation with the error, so the extension can
/// say exactly what is wrong.
pub fn serve(db: &Path, input: &mut impl Read, out: Outbox) -> i32 {
    let mut ctx = Ctx::new(db.to_path_buf());
    // this connection's memory: the request bodies it returned as text (PROTOCOL.md "Body deltas")
    let mut bodies = BodyCache::default();

    // The poller opens its own connection (a second schema parse, ~1 ms of CPU) only after
    // POLLER_START_DELAY: at once, it competed on 2 cores with this thread's answer to the
    // extension's first request (`host.hello`) and with the browser passing that answer on
    // (issue 6 scenario 9). It is started when the store opens and announces everything
    // committed after that point (`Ctx::poll_from`), so a later start misses nothing, and its
    // first look still comes well within the 1 s announcement bound.
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let mut stop_rx = Some(stop_rx);
    let mut poller = None;
    // The daily backup's thread starts with the poller; at shutdown `stopping` ends a copy under
    // way between two of its steps, and the thread gives the day back to the next host.
    let (backup_stop_tx, backup_stop_rx) = mpsc::channel::<()>();
    let mut backup_stop_rx = Some(backup_stop_rx);
    let stopping = Arc::new(AtomicBool::new(false));
    let mut backups = None;
    // The sync threads (docs/sync.md "How it runs") start with the poller too; their commits
    // carry an origin of their own, so the poller announces them like another process's.
    let mut sync_engine = None;

    let code = loop {
        match read_frame(input, MAX_INBOUND_FRAME) {
            Ok(None) => break 0,
            Ok(Some(body)) => {
                let open = handle_frame(&mut ctx, &mut bodies, &body, &out);
                if let Some((origin, seq)) = ctx.poll_from.take() {
                    if let Some(stop_rx) = stop_rx.take() {
                        let out = out.clone();
                        let db: PathBuf = db.to_path_buf();
                        let origin = origin.clone();
                        poller =
                            Some(thread::spawn(move || poll_foreign_changes(&db, origin, seq, out, stop_rx)));
                    }
                    if sync_engine.is_none() {
                        sync_engine = Some(start_sync(db, &origin));
                    }
                    if let Some(stop_rx) = backup_stop_rx.take() {
                        let db: PathBuf = db.to_path_buf();
                        let stopping = stopping.clone();
                        backups = Some(thread::spawn(move || daily_backups(&db, origin, stopping, stop_rx)));
                    }
                }
                if !open {
                    break 0;
                }
            }
            Err(FrameError::TooLarge { declared, cap }) => {
                send_too_large(&out, declared, cap);
                break 1;
            }
            Err(FrameError::Truncated { got, want }) => {
                tracing::info!(got, want, "stream ended inside a frame; nothing handled");
                break 0;
            }
            Err(FrameError::Io(e)) => {
                tracing::warn!(error = %e, "stdin read failed");
                break 1;
            }
        }
    };
    drop(stop_tx);
    stopping.store(true, Ordering::SeqCst);
    drop(backup_stop_tx);
    if let Some(p) = poller {
        let _ = p.join();
    }
    if let Some(b) = backups {
        let _ = b.join();
    }
    if let Some(e) = sync_engine {
        e.stop();
    }
    if let Some(Ok(s)) = ctx.store {
        s.close();
    }
    code
}

/// Start the sync engine's threads: each opens a connection of its own, whose origin differs from
/// this process's so that the poller announces what the reader applies.
fn start_sync(db: &Path, origin: &str) -> crate::sync::engine::Engine {
    use crate::sync::engine::{Engine, Opener};
    use crate::sync::replica::Replica;
    let (path, origin) = (db.to_path_buf(), format!("{origin}-sync"));
    let open: Opener = Arc::new(move || {
        Store::open_more(&path, origin.clone())
            .map(|s| Box::new(s) as Box<dyn Replica + Send>)
            .map_err(|e| format!("the sync threads cannot open the database: {e}"))
    });
    Engine::start(db, open, crate::secrets::system())
}

/// The `db` event (PROTOCOL.md §4): what `host.hello` would now say about the database.
fn send_db_event(ctx: &mut Ctx, out: &Outbox) -> bool {
    let mut ev = ctx.db_state();
    ev["event"] = Value::from("db");
    out.send_all(&[ev.to_string()])
}

/// The one reply to an oversized length prefix (the stream cannot be resynchronised after it).
fn send_too_large(out: &Outbox, declared: u64, cap: usize) {
    let e = HostError::new(
        ErrorCode::TooLarge,
        format!("frame of {declared} bytes exceeds the {cap}-byte cap; closing"),
    );
    tracing::warn!(declared, "oversized frame; closing");
    out.send_reply(&Value::Null, error_reply(&Value::Null, &e));
}

/// Serve nothing: the caller failed the origin check (reliability.md §8). Every frame is answered
/// with `forbidden_origin` (with the request's id when it can be read) until stdin closes; the
/// database is never opened and no handler runs. Framing rules still hold: an oversized prefix
/// gets `too_large` and ends the process, a truncated frame ends it silently.
pub fn refuse(input: &mut impl Read, out: Outbox, reason: &str) -> i32 {
    let e = HostError::new(ErrorCode::ForbiddenOrigin, reason);
    loop {
        match read_frame(input, MAX_INBOUND_FRAME) {
            Ok(None) | Err(FrameError::Truncated { .. }) => return 0,
            Ok(Some(body)) => {
                let id = match decode_request(&body) {
                    Ok(r) => r.id,
                    Err(rej) => rej.id,
                };
                tracing::debug!(id = %id, "refused a request from a forbidden caller");
                if !out.send_reply(&id, error_reply(&id, &e)) {
                    return 0;
                }
            }
            Err(FrameError::TooLarge { declared, cap }) => {
                send_too_large(&out, declared, cap);
                return 1;
            }
            Err(FrameError::Io(e)) => {
                tracing::warn!(error = %e, "stdin read failed");
                return 1;
            }
        }
    }
}

/// Handle one frame; false when the output pipe is gone.
fn handle_frame(ctx: &mut Ctx, bodies: &mut BodyCache, body: &[u8], out: &Outbox) -> bool {
    let req = match decode_request(body) {
        Ok(r) => r,
        Err(rej) => {
            tracing::debug!(error = %rej.error, "rejected frame");
            return out.send_reply(&rej.id, error_reply(&rej.id, &rej.error));
        }
    };
    let started = std::time::Instant::now();
    let outcome = dispatch_with(ctx, bodies, &req.op, req.args);
    let (reply, event, followup) = match outcome {
        Ok(r) => (payload_reply(&req.id, &r.result), r.event, r.followup),
        Err(e) => {
            tracing::debug!(op = %req.op, error = %e, "operation failed");
            (error_reply(&req.id, &e), None, None)
        }
    };
    let took = started.elapsed();
    let bytes = reply.len();
    // the reply first: the log line's file write is not on the caller's wait
    if !out.send_reply(&req.id, reply) {
        return false;
    }
    // `host.hello` was answered without the database; open it now, off hello's path, before
    // anything else (its `db` event goes out before the reply to any later request)
    if ctx.hello_answered {
        ctx.open_store();
    }
    if std::mem::take(&mut ctx.db_event_due) && !send_db_event(ctx, out) {
        return false;
    }
    tracing::debug!(op = %req.op, ms = took.as_millis() as u64, us = took.as_micros() as u64, bytes, "served");
    if let Some(ev) = event {
        if !out.send_all(&[ev.to_json().to_string()]) {
            return false;
        }
    }
    let open = match followup {
        Some(f) => run_followup(ctx, f, out),
        None => true,
    };
    // after the reply: a -wal checkpoint may wait for other processes' reads
    if let Some(store) = ctx.store_if_open() {
        store.tidy();
    }
    move_keys(ctx);
    open && expire_trash(ctx, out)
}

/// Once per process, after its first reply (off the path of `host.hello`): API keys still held
/// as text in the database file move to the secret store if one is reachable (PROTOCOL.md "API
/// keys"). A start whose file holds no such key does nothing but one settings read.
fn move_keys(ctx: &mut Ctx) {
    if !std::mem::take(&mut ctx.keys_move_due) {
        return;
    }
    let Some(store) = ctx.store_if_open() else { return };
    match store.move_keys_to_secret_store() {
        Ok(r) if r.moved > 0 => {
            tracing::info!(moved = r.moved, left = r.left, reason = ?r.reason, "API keys moved to the secret store")
        }
        Ok(r) if r.left > 0 => {
            tracing::info!(left = r.left, reason = ?r.reason, "API keys stay in the database file")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "moving API keys to the secret store failed"),
    }
}

/// How often this process looks whether the trash's expiry is due (the run itself is at most
/// hourly across every process: the last one is stored in the database).
const EXPIRY_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(10 * 60);
/// The first look waits this long after the start, off the busy first moments of a port (the
/// browser passing `host.hello`'s reply on, the panel's first reads).
pub(crate) const EXPIRY_FIRST_LOOK: std::time::Duration = std::time::Duration::from_secs(2);

/// Purge trash items older than `trashDays` (docs/keeps.md "The trash"): a host-started write
/// after a reply (the first one is `host.hello`'s), never on the path of a reply. False when
/// the output pipe is gone.
fn expire_trash(ctx: &mut Ctx, out: &Outbox) -> bool {
    let now = std::time::Instant::now();
    if now < ctx.next_expiry_look {
        return true;
    }
    ctx.next_expiry_look = now + EXPIRY_LOOK_EVERY;
    let Some(store) = ctx.store_if_open() else { return true };
    match store.trash_expire(false) {
        Ok(Some(w)) => {
            tracing::info!(purged = %w.result["purged"], "trash expiry ran");
            match w.event {
                Some(ev) => out.send_all(&[ev.to_json().to_string()]),
                None => true,
            }
        }
        Ok(None) => true,
        Err(e) => {
            tracing::warn!(error = %e, "trash expiry failed");
            true
        }
    }
}

/// Host-started work after a reply: its own transaction and its own `changed` event, no
/// clientRequestId (storage-model §11.5).
fn run_followup(ctx: &mut Ctx, f: Followup, out: &Outbox) -> bool {
    let Some(store) = ctx.store_if_open() else { return true };
    let r = match f {
        Followup::BoundImages => store.history_bound_images(UNSEEN_IMAGE_BYTES_BUDGET, None),
    };
    match r {
        Ok(w) => match w.event {
            Some(ev) => out.send_all(&[ev.to_json().to_string()]),
            None => true,
        },
        Err(e) => {
            tracing::warn!(error = %e, "byte-budget pass after attach failed");
            true
        }
    }
}

/// Announce commits made by other processes (another port, the CLI) within 1 s. Each sequence
/// number is announced once: this process's own commits are announced by the dispatcher.
fn poll_foreign_changes(db: &Path, origin: String, start_seq: i64, out: Outbox, stop: mpsc::Receiver<()>) {
    // a shutdown within the start delay ends the thread without opening anything
    if let Err(RecvTimeoutError::Disconnected) = stop.recv_timeout(POLLER_START_DELAY) {
        return;
    }
    let mut store = match Store::open_more(db, origin) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "change poller cannot open the database");
            return;
        }
    };
    let mut last_seen = start_seq;
    // None: look once right away, in case commits landed while this thread started
    let mut version: Option<i64> = None;
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(POLL_INTERVAL) {
        let v = match store.data_version() {
            Ok(v) => v,
            Err(_) => continue,
        };
        if version == Some(v) {
            continue;
        }
        // a failed read leaves `version` alone so the next tick tries again
        let Ok(events) = store.foreign_changes_after(last_seen) else { continue };
        version = Some(v);
        for ev in events {
            last_seen = last_seen.max(ev.seq);
            if ev.areas.is_null() {
                continue;
            }
            if !out.send_all(&[ev.to_json().to_string()]) {
                return;
            }
        }
    }
    store.close();
}

/// How long after the open the backup thread first looks whether the daily backup is due (off
/// the busy first moments of a port, as the trash's expiry).
const BACKUP_FIRST_LOOK: Duration = Duration::from_secs(2);

/// The daily backup (reliability.md §7 "Copies and backups"): a thread of its own with a
/// connection of its own, so a backup never delays a reply. It looks at `BACKUP_FIRST_LOOK`
/// after the open and then every hour (`domain::backups::CHECK_EVERY_MS`); whether a backup is
/// due, and which host makes it, is settled in the database (`Store::daily_backup`). The thread
/// runs at a lower CPU priority where the platform allows it.
fn daily_backups(db: &Path, origin: String, stopping: Arc<AtomicBool>, stop: mpsc::Receiver<()>) {
    if let Err(RecvTimeoutError::Disconnected) = stop.recv_timeout(BACKUP_FIRST_LOOK) {
        return;
    }
    lower_priority();
    let mut store = match Store::open_more(db, origin) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "the backup thread cannot open the database");
            return;
        }
    };
    let every = Duration::from_millis(crate::domain::backups::CHECK_EVERY_MS as u64);
    loop {
        match store.daily_backup(&|| stopping.load(Ordering::SeqCst)) {
            Ok(Daily::Ran(row)) => {
                tracing::debug!(outcome = row.outcome(), day = %row.day, "daily backup ran")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the daily backup failed"),
        }
        if let Err(RecvTimeoutError::Disconnected) = stop.recv_timeout(every) {
            break;
        }
    }
    store.close();
}

/// Nice 10 for the calling thread (Linux: a thread is a schedulable task of its own).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no preconditions; setpriority on our own thread id only changes its nice.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}
