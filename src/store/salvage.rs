//! The corruption policy (reliability.md §7), the way Firefox Places does it.
//!
//! 1. A host that meets `SQLITE_CORRUPT` or `SQLITE_NOTADB` stops writing, answers `db_corrupt`
//!    and leaves a marker, `<db>.damaged`, beside the database ([`note_damage`]). Every host
//!    refuses writes while the marker exists.
//! 2. The next start that finds the marker re-checks the file (`PRAGMA integrity_check`; a
//!    healthy file only loses the stale marker) and, at most once per 24 h, moves the damaged
//!    file aside as `<db>.corrupt-<UTC time>` (with `-wal` and `-shm`). Keepsake never deletes
//!    these copies.
//! 3. It salvages the copy table by table into a fresh database built by our own migrations:
//!    `INSERT … SELECT` per table, and when that fails, row by row forward by rowid, then
//!    backward from the end, then by probing seeks past the damaged pages; a header that makes
//!    the file unreadable is rebuilt in a scratch copy first. Derived data (image references,
//!    search text, entry counts, positions) is rebuilt, images that were lost become a text
//!    note in their entries, and the change log is reset so every client reloads.
//! 4. `<db>.recovery.json` records what came back, per table, and where the damaged copy is;
//!    `keepsake-host doctor` reports it.
//!
//! **Moving aside without harming another process.** Renaming a database another process has
//! open is one of SQLite's "how to corrupt" cases: a process that opened the path a moment
//! earlier keeps the old inode but opens `-wal` and `-shm` *by name* (the new database's), and
//! its last close checkpoints that WAL into the wrong file and deletes it. So the file is never
//! renamed or deleted. With no SQLite connection to it in this process (recovery runs before
//! the process opens the database):
//!
//! - take SQLite's own POSIX locks, exclusively and without waiting: a write lock on the
//!   database's PENDING, RESERVED and SHARED bytes and on the `-shm` lock bytes including the
//!   dead-man switch. Every connection to a WAL database holds a read lock on the `-shm` DMS byte
//!   while it is open and a SHARED lock on the database after its first read, so a refused lock
//!   means some process has the file open: nothing is moved (this start answers `db_corrupt`;
//!   a later one retries). A process that has opened the path but not read yet blocks on these
//!   locks (its busy timeout) and then reads the repaired file through the same inode;
//! - copy the database, `-wal` and `-shm` byte for byte to the aside files (0600, fsynced);
//! - salvage from the aside copy into a scratch database;
//! - still holding the locks, empty `-wal` and `-shm` and overwrite the database in place with
//!   the scratch database's bytes (fsynced), then release the locks.
//!
//! Every access to the database, `-wal` and `-shm` while the locks are held goes through the
//! one handle that holds them: closing any other descriptor on those files would drop this
//! process's POSIX locks. A crash part-way leaves `completed: false` in the record; the next
//! start resumes from the aside copy instead of copying again.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rusqlite::config::DbConfig;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::maintenance::sidecar;
use super::open::{self, Mode};
use super::pagescan::{self, Val};
use super::{is_corrupt, migrate, StoreError};
use crate::domain::entry::{
    content_chars, image_part_count, image_part_url, is_image_part, parse_image_ref, referenced_blobs, role,
};
use crate::domain::sessions::{auto_name, search_text};
use crate::domain::text::lower;
use crate::util::time::now_ms;

/// A damaged file is moved aside at most once per this many milliseconds (Places: 24 h).
pub const MOVE_INTERVAL_MS: i64 = 24 * 60 * 60 * 1000;
/// What an image part lost in the damage becomes.
pub const LOST_IMAGE_TEXT: &str = "[image lost when the damaged database was repaired]";
const ASIDE_INFIX: &str = ".corrupt-";
const ASIDE_TIME: &str = "%Y%m%dT%H%M%SZ";
/// Derived tables: rebuilt from the entries, never copied.
const DERIVED: &[&str] = &["image_refs", "session_search", "search_docs", "search_pieces", "search_grams"];

/// `<db>.damaged`: written when a host meets the damage.
pub fn marker_path(db: &Path) -> PathBuf {
    sidecar(db, ".damaged")
}

/// `<db>.recovery.json`: the last recovery (what came back, where the damaged copy is).
pub fn record_path(db: &Path) -> PathBuf {
    sidecar(db, ".recovery.json")
}

fn scratch_path(db: &Path) -> PathBuf {
    sidecar(db, ".salvage-tmp")
}

/// One table's salvage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableReport {
    pub table: String,
    /// Rows copied into the new database.
    pub recovered: u64,
    /// Rows read but refused (unreadable text, failed constraints).
    pub refused: u64,
    /// Every page of the table could be read.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The recovery record (`<db>.recovery.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recovery {
    /// When the damaged file was moved aside (ms since the epoch).
    pub moved_at: i64,
    /// The damaged database as it was (kept; Keepsake never deletes it).
    pub damaged_copy: PathBuf,
    /// Its `-wal` / `-shm`, when there were any.
    pub sidecars: Vec<PathBuf>,
    /// What showed the damage.
    pub damage: String,
    /// False while the recovery is in progress (a crash resumes it).
    pub completed: bool,
    /// The 100-byte header was unreadable and was rebuilt in a scratch copy to read the rest.
    pub header_rebuilt: bool,
    /// Per table, in schema order.
    pub tables: Vec<TableReport>,
    pub rows_recovered: u64,
    /// Repairs made to keep the store's invariants (lost images, renumbered positions, …).
    pub repairs: Vec<String>,
    /// Run by `keepsake-host salvage` rather than at a start.
    pub by_command: bool,
}

fn private_new(p: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    o.open(p)
}

fn sync_dir(db: &Path) {
    if let Some(d) = db.parent() {
        if let Ok(f) = File::open(if d.as_os_str().is_empty() { Path::new(".") } else { d }) {
            let _ = f.sync_all();
        }
    }
}

/// How a [`HostError`](crate::protocol::HostError) message starts when the damage was found by
/// a check of our own (an image whose bytes no longer hash to their key, a stored row that no
/// longer parses) rather than by SQLite: `integrity_check` cannot confirm such damage, so the
/// next start trusts the report (kind `content` in the marker).
pub const CONTENT_DAMAGE: &str = "the database is damaged (content check)";

/// A `db_corrupt` error for damage found by a content check (see [`CONTENT_DAMAGE`]).
pub fn content_damage(what: impl std::fmt::Display) -> crate::protocol::HostError {
    crate::protocol::HostError::new(
        crate::protocol::ErrorCode::DbCorrupt,
        format!("{CONTENT_DAMAGE}: {what}"),
    )
}

/// Record that the database at `db` is damaged (once; later calls keep the first report).
/// Never fails: a read-only directory just gets no marker.
pub fn note_damage(db: &Path, error: &str) {
    let p = marker_path(db);
    if std::fs::symlink_metadata(&p).is_ok() {
        return;
    }
    tracing::error!(db = %db.display(), error, "the database is damaged; writes stop; the next start moves it aside and salvages it");
    let kind = if error.starts_with(CONTENT_DAMAGE) { "content" } else { "sqlite" };
    let body = json!({"detectedAt": now_ms(), "pid": std::process::id(), "error": error, "kind": kind});
    if let Ok(mut f) = private_new(&p) {
        let _ = f.write_all(format!("{body}\n").as_bytes());
        let _ = f.sync_all();
    }
}

/// Whether some host has reported damage that no start has dealt with yet.
pub fn damage_noted(db: &Path) -> bool {
    std::fs::symlink_metadata(marker_path(db)).is_ok()
}

/// The marker's contents (`{detectedAt, pid, error}`), if any.
pub fn read_marker(db: &Path) -> Option<Value> {
    let b = std::fs::read(marker_path(db)).ok()?;
    Some(serde_json::from_slice(&b).unwrap_or_else(|_| json!({})))
}

/// The last recovery record, if any.
pub fn load_record(db: &Path) -> Option<Recovery> {
    serde_json::from_slice(&std::fs::read(record_path(db)).ok()?).ok()
}

fn save_record(db: &Path, r: &Recovery) -> io::Result<()> {
    let path = record_path(db);
    let tmp = sidecar(db, &format!(".recovery.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let res = (|| {
        let mut f = private_new(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(r).map_err(io::Error::other)?)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)?;
        sync_dir(db);
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Damaged copies beside `db` (main files only), with the time in their names, oldest first.
pub fn aside_copies(db: &Path) -> Vec<(PathBuf, Option<i64>)> {
    let (Some(dir), Some(name)) = (db.parent(), db.file_name()) else { return Vec::new() };
    let prefix = format!("{}{ASIDE_INFIX}", name.to_string_lossy());
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let mut out: Vec<(PathBuf, Option<i64>)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let rest = n.strip_prefix(&prefix)?;
            if rest.ends_with("-wal") || rest.ends_with("-shm") {
                return None;
            }
            let stamp = rest.get(..16).unwrap_or(rest);
            let t = chrono::NaiveDateTime::parse_from_str(stamp, ASIDE_TIME)
                .ok()
                .map(|t| t.and_utc().timestamp_millis());
            Some((e.path(), t))
        })
        .collect();
    out.sort_by_key(|(p, t)| (*t, p.clone()));
    out
}

/// When a damaged copy of `db` was last moved aside.
pub fn last_move_ms(db: &Path) -> Option<i64> {
    let from_names = aside_copies(db).into_iter().filter_map(|(_, t)| t).max();
    let from_record = load_record(db).map(|r| r.moved_at);
    from_names.max(from_record)
}

fn fmt_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// `Some(what is wrong)` when the file at `db` is damaged, `None` when `integrity_check`
/// passes. Read-only: never writes the file, never deletes its WAL.
pub fn check_damage(db: &Path) -> Result<Option<String>, StoreError> {
    // WAL readers can meet SQLITE_BUSY without the busy handler running (another connection
    // recovering the WAL index): retry for a moment before giving up
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        match check_damage_once(db) {
            Err(StoreError::Busy(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            r => return r,
        }
    }
}

/// A non-empty file shorter than SQLite's smallest page cannot be a database, although SQLite
/// opens it as an empty one (and the first write would overwrite what is there).
pub fn too_short(db: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(db).ok()?;
    (m.is_file() && m.len() > 0 && m.len() < 512)
        .then(|| format!("the file is {} bytes long, too short to be a SQLite database", m.len()))
}

fn check_damage_once(db: &Path) -> Result<Option<String>, StoreError> {
    if let Some(s) = too_short(db) {
        return Ok(Some(s));
    }
    let flags =
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(db, flags)?;
    open::set_busy_wait(&conn)?;
    let lines: rusqlite::Result<Vec<String>> = conn.prepare("PRAGMA integrity_check").and_then(|mut s| {
        let rows = s.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    });
    match lines {
        Ok(l) if l == ["ok"] => Ok(None),
        Ok(l) => {
            let s: String = l.into_iter().take(5).collect::<Vec<_>>().join("; ").chars().take(600).collect();
            Ok(Some(format!("integrity_check: {s}")))
        }
        Err(e) if is_corrupt(&e) => Ok(Some(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// Called at every read-write start, before this process opens the database: deal with damage
/// a host reported (or finish an interrupted recovery). `Ok(None)`: nothing to do (or the
/// marker was stale). `Err(Corrupt)`: the file is damaged and could not be moved this time.
pub fn recover_at_start(db: &Path) -> Result<Option<Recovery>, StoreError> {
    let interrupted = load_record(db).is_some_and(|r| !r.completed);
    if !damage_noted(db) && !interrupted {
        return Ok(None);
    }
    recover(db, false)
}

/// `keepsake-host salvage`: check the database now and, if it is damaged, move it aside and
/// salvage it regardless of the 24-hour limit (still never while another process has it open).
/// `Ok(None)`: the database is healthy.
pub fn salvage_command(db: &Path) -> Result<Option<Recovery>, StoreError> {
    recover(db, true)
}

fn recover(db: &Path, by_command: bool) -> Result<Option<Recovery>, StoreError> {
    open::refuse_links(db)?;
    if std::fs::symlink_metadata(db).is_err() {
        let _ = std::fs::remove_file(marker_path(db));
        return if by_command {
            Err(StoreError::Path(format!("no database at {}", db.display())))
        } else {
            Ok(None)
        };
    }
    let before = load_record(db);
    let pending = before.clone().filter(|r| !r.completed && r.damaged_copy.exists());
    let damage = match &pending {
        Some(r) => r.damage.clone(),
        None => match check_damage(db)? {
            // SQLite sees nothing wrong, but a content check did: trust it
            None if read_marker(db).is_some_and(|m| m.get("kind") == Some(&json!("content"))) => {
                read_marker(db)
                    .and_then(|m| m.get("error").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| CONTENT_DAMAGE.to_owned())
            }
            None => {
                if damage_noted(db) {
                    tracing::info!(db = %db.display(), "integrity_check passes; removing a stale damage marker");
                    let _ = std::fs::remove_file(marker_path(db));
                }
                return Ok(None);
            }
            Some(d) => d,
        },
    };
    if pending.is_none() && !by_command {
        if let Some(last) = last_move_ms(db).filter(|t| now_ms() - t < MOVE_INTERVAL_MS) {
            note_damage(db, &damage);
            return Err(StoreError::Corrupt(format!(
                "{damage}. A damaged copy was already moved aside at {} and Keepsake moves one at most once per 24 h \
                 (not before {}); run `keepsake-host salvage` to repair it now, or `keepsake-host doctor` for details",
                fmt_utc(last),
                fmt_utc(last + MOVE_INTERVAL_MS)
            )));
        }
    }
    let mut lock = match Exclusive::acquire(db) {
        Ok(Some(l)) => l,
        Ok(None) => {
            note_damage(db, &damage);
            return Err(StoreError::Corrupt(format!(
                "{damage}. Another keepsake-host process has the file open, so it cannot be moved aside yet; it is \
                 moved aside and salvaged at the next start after they exit"
            )));
        }
        Err(e) => return Err(StoreError::Corrupt(format!("{damage}. It cannot be moved aside: {e}"))),
    };
    // Under the lock: another start may have finished the job meanwhile.
    let now_record = load_record(db);
    if now_record.as_ref().map(|r| (r.moved_at, r.completed))
        != before.as_ref().map(|r| (r.moved_at, r.completed))
        || (!by_command && pending.is_none() && !damage_noted(db))
    {
        return Ok(None);
    }
    let mut rec = match pending {
        Some(r) => r,
        None => {
            let (copy, sidecars) = lock.copy_aside(db).map_err(|e| {
                StoreError::Corrupt(format!("{damage}. It cannot be moved aside (copying it failed: {e})"))
            })?;
            Recovery {
                moved_at: now_ms(),
                damaged_copy: copy,
                sidecars,
                damage,
                by_command,
                ..Default::default()
            }
        }
    };
    save_record(db, &rec).map_err(|e| {
        StoreError::Corrupt(format!(
            "{}. Moved aside to {}, but the recovery record cannot be written ({e})",
            rec.damage,
            rec.damaged_copy.display()
        ))
    })?;
    tracing::warn!(db = %db.display(), copy = %rec.damaged_copy.display(), "moved the damaged database aside; salvaging");
    let scratch = scratch_path(db);
    remove_scratch(&scratch);
    let outcome = salvage_into(&rec.damaged_copy, &scratch);
    let result = outcome.and_then(|s| {
        lock.install(&scratch)
            .map_err(|e| StoreError::Other(format!("cannot write the repaired database: {e}")))?;
        Ok(s)
    });
    remove_scratch(&scratch);
    let s = result.map_err(|e| {
        StoreError::Corrupt(format!(
            "{}. Salvage failed ({e}); the damaged copy is kept at {}",
            rec.damage,
            rec.damaged_copy.display()
        ))
    })?;
    rec.header_rebuilt = s.header_rebuilt;
    rec.rows_recovered = s.tables.iter().map(|t| t.recovered).sum();
    rec.tables = s.tables;
    rec.repairs = s.repairs;
    rec.completed = true;
    if let Err(e) = save_record(db, &rec) {
        tracing::warn!(error = %e, "cannot update the recovery record");
    }
    let _ = std::fs::remove_file(marker_path(db));
    drop(lock);
    tracing::warn!(
        db = %db.display(),
        rows = rec.rows_recovered,
        copy = %rec.damaged_copy.display(),
        "salvaged the damaged database into a fresh one"
    );
    Ok(Some(rec))
}

fn remove_scratch(scratch: &Path) {
    for s in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(sidecar(scratch, s));
    }
    for extra in ["-src", "-pages"] {
        let src = sidecar(scratch, extra);
        for s in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(sidecar(&src, s));
        }
    }
}

// ---- the exclusive hold on the damaged file -------------------------------------------------

/// SQLite's lock bytes (os_unix.c): PENDING at 1 GiB, then RESERVED, then 510 SHARED bytes;
/// the `-shm` locks are 8 bytes at 120 followed by the dead-man switch.
#[cfg(unix)]
const PENDING_BYTE: i64 = 0x4000_0000;
#[cfg(unix)]
const DB_LOCK_LEN: i64 = 2 + 510;
#[cfg(unix)]
const SHM_LOCK_START: i64 = 120;
#[cfg(unix)]
const SHM_LOCK_LEN: i64 = 9;

/// The database, `-wal` and `-shm` held exclusively (see the module comment).
#[cfg_attr(not(unix), allow(dead_code))]
struct Exclusive {
    db: File,
    wal: Option<File>,
    shm: Option<File>,
}

#[cfg_attr(not(unix), allow(dead_code))]
fn open_rw_nofollow(p: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW);
    }
    o.open(p)
}

#[cfg(unix)]
fn try_write_lock(f: &File, start: i64, len: i64) -> io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: an all-zero flock is a valid value; fcntl only reads it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = start as _;
    fl.l_len = len as _;
    // SAFETY: F_SETLK on a descriptor we own with a properly initialised flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

impl Exclusive {
    /// `Ok(None)`: another process has the database open (retried for about a second, to ride
    /// out a host that is just exiting).
    #[cfg(unix)]
    fn acquire(db: &Path) -> io::Result<Option<Exclusive>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1000);
        loop {
            if let Some(x) = Self::try_once(db)? {
                return Ok(Some(x));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    #[cfg(unix)]
    fn try_once(db: &Path) -> io::Result<Option<Exclusive>> {
        let f = open_rw_nofollow(db)?;
        if !try_write_lock(&f, PENDING_BYTE, DB_LOCK_LEN)? {
            return Ok(None);
        }
        let shm = match open_rw_nofollow(&sidecar(db, "-shm")) {
            Ok(s) => {
                if !try_write_lock(&s, SHM_LOCK_START, SHM_LOCK_LEN)? {
                    return Ok(None);
                }
                Some(s)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let wal = match open_rw_nofollow(&sidecar(db, "-wal")) {
            Ok(w) => Some(w),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Some(Exclusive { db: f, wal, shm }))
    }

    /// Without POSIX locks there is no safe way to know that no other process has the file
    /// open, so automatic recovery is not attempted (`keepsake-host doctor` explains).
    #[cfg(not(unix))]
    fn acquire(_db: &Path) -> io::Result<Option<Exclusive>> {
        Err(io::Error::other("moving a damaged database aside is only automatic on Linux and macOS"))
    }

    /// Copy the database and its sidecars to `<db>.corrupt-<UTC time>[-n]` (+ `-wal`, `-shm`).
    fn copy_aside(&mut self, db: &Path) -> io::Result<(PathBuf, Vec<PathBuf>)> {
        let stamp = chrono::Utc::now().format(ASIDE_TIME).to_string();
        let base = (1..100)
            .map(|n| {
                let suffix = if n == 1 { String::new() } else { format!("-{n}") };
                sidecar(db, &format!("{ASIDE_INFIX}{stamp}{suffix}"))
            })
            .find(|p| ["", "-wal", "-shm"].iter().all(|s| std::fs::symlink_metadata(sidecar(p, s)).is_err()))
            .ok_or_else(|| io::Error::other("too many damaged copies this second"))?;
        let mut made = Vec::new();
        let res = (|| {
            let mut sidecars = Vec::new();
            for (src, suffix) in
                [(Some(&self.db), ""), (self.wal.as_ref(), "-wal"), (self.shm.as_ref(), "-shm")]
            {
                let Some(src) = src else { continue };
                let dest = sidecar(&base, suffix);
                let mut out = private_new(&dest)?;
                made.push(dest.clone());
                copy_from_start(src, &mut out)?;
                out.sync_all()?;
                if !suffix.is_empty() {
                    sidecars.push(dest);
                }
            }
            sync_dir(db);
            Ok((base.clone(), sidecars))
        })();
        if res.is_err() {
            // only our own partial copies; the damaged original is untouched
            for p in made {
                let _ = std::fs::remove_file(p);
            }
        }
        res
    }

    /// Replace the damaged bytes with the repaired database, in place, under the locks.
    fn install(&mut self, scratch: &Path) -> io::Result<()> {
        let mut src = File::open(scratch)?;
        if let Some(w) = &self.wal {
            w.set_len(0)?;
            w.sync_all()?;
        }
        if let Some(s) = &self.shm {
            s.set_len(0)?;
        }
        self.db.set_len(0)?;
        let mut pos = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = io::Read::read(&mut src, &mut buf)?;
            if n == 0 {
                break;
            }
            write_all_at(&self.db, &buf[..n], pos)?;
            pos += n as u64;
        }
        self.db.sync_all()
    }
}

fn copy_from_start(src: &File, out: &mut File) -> io::Result<()> {
    let mut pos = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = read_at(src, &mut buf, pos)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n])?;
        pos += n as u64;
    }
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(f, buf, pos)
}

#[cfg(unix)]
fn write_all_at(f: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, pos)
}

#[cfg(windows)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(f, buf, pos)
}

#[cfg(windows)]
fn write_all_at(f: &File, mut buf: &[u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(f, buf, pos)?;
        buf = &buf[n..];
        pos += n as u64;
    }
    Ok(())
}

// ---- salvage --------------------------------------------------------------------------------

struct Salvaged {
    tables: Vec<TableReport>,
    header_rebuilt: bool,
    repairs: Vec<String>,
}

fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn columns(conn: &Connection, schema: &str, table: &str) -> Vec<String> {
    let sql = format!("PRAGMA {schema}.table_info({})", q(table));
    conn.prepare(&sql)
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(1))?.collect())
        .unwrap_or_default()
}

fn damaged_schema_readable(conn: &Connection) -> bool {
    conn.query_row("SELECT count(*) FROM damaged.sqlite_schema WHERE type = 'table'", [], |r| {
        r.get::<_, i64>(0)
    })
    .is_ok_and(|n| n > 0)
}

fn attach(conn: &Connection, src: &Path) -> rusqlite::Result<()> {
    conn.execute("ATTACH DATABASE ?1 AS damaged", [src.to_string_lossy()])?;
    Ok(())
}

/// A scratch copy of `src` (and its `-wal`) with the 100-byte header rebuilt from what a
/// Keepsake database always has (UTF-8, schema format 4, no auto-vacuum), keeping a valid page
/// size from the damaged header when there is one.
fn rebuild_header(src: &Path, dest: &Path, page_size: u32) -> io::Result<()> {
    let len = std::fs::metadata(src)?.len();
    if len < page_size as u64 {
        return Err(io::Error::other("shorter than one page"));
    }
    let old = pagescan::read_head(src, 100)
        .filter(|h| h.len() == 100)
        .ok_or_else(|| io::Error::other("unreadable"))?;
    let has_wal = std::fs::metadata(sidecar(src, "-wal")).is_ok_and(|m| m.len() > 32);
    let mut h = [0u8; 100];
    h[..16].copy_from_slice(b"SQLite format 3\0");
    let ps: u16 = if page_size == 65536 { 1 } else { page_size as u16 };
    h[16..18].copy_from_slice(&ps.to_be_bytes());
    h[18] = if has_wal { 2 } else { 1 };
    h[19] = h[18];
    h[21] = 64;
    h[22] = 32;
    h[23] = 32;
    h[24..28].copy_from_slice(&1u32.to_be_bytes());
    let pages = u32::try_from(len / page_size as u64).unwrap_or(u32::MAX);
    h[28..32].copy_from_slice(&pages.to_be_bytes());
    // keep the freelist when the damaged header still names a plausible one: the page scan
    // needs it to tell freed pages (deleted rows) from live ones
    let old32 = |at: usize| u32::from_be_bytes([old[at], old[at + 1], old[at + 2], old[at + 3]]);
    let (trunk, free) = (old32(32), old32(36));
    if trunk <= pages && free < pages && (trunk == 0) == (free == 0) {
        h[32..40].copy_from_slice(&old[32..40]);
    }
    h[40..44].copy_from_slice(&1u32.to_be_bytes());
    h[44..48].copy_from_slice(&4u32.to_be_bytes());
    h[56..60].copy_from_slice(&1u32.to_be_bytes());
    // the user_version: the damaged header's when it names a version this host knows (the rows
    // are copied into tables of that version), else 0 (the version is read off the schema)
    let version = old32(60);
    let version = if (1..=migrate::LATEST).contains(&version) { version } else { 0 };
    h[60..64].copy_from_slice(&version.to_be_bytes());
    h[92..96].copy_from_slice(&1u32.to_be_bytes());
    h[96..100].copy_from_slice(&3_050_002u32.to_be_bytes());
    let mut out = private_new(dest)?;
    io::copy(&mut File::open(src)?, &mut out)?;
    write_all_at(&out, &h, 0)?;
    out.sync_all()?;
    if has_wal {
        let mut w = private_new(&sidecar(dest, "-wal"))?;
        io::copy(&mut File::open(sidecar(src, "-wal"))?, &mut w)?;
        w.sync_all()?;
    }
    Ok(())
}

/// Page sizes worth trying for a rebuilt header: the damaged header's own when valid, then
/// Keepsake's 4 KiB, then the rest.
fn page_size_candidates(src: &Path) -> Vec<u32> {
    let mut v = Vec::new();
    if let Some(ps) = pagescan::read_head(src, 100).as_deref().and_then(pagescan::header_page_size) {
        v.push(ps as u32);
    }
    for ps in [4096, 1024, 2048, 8192, 16384, 32768, 65536, 512] {
        if !v.contains(&ps) {
            v.push(ps);
        }
    }
    v
}

/// Salvage the damaged database at `src` into a new database at `dest`.
fn salvage_into(src: &Path, dest: &Path) -> Result<Salvaged, StoreError> {
    let mut conn = open::open_connection(dest, Mode::ReadWrite)?;
    // Never checkpoint the damaged copy into itself, nor delete its WAL, when closing.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    // writable_schema: a partly unreadable schema still yields the tables it can parse;
    // cell_size_check: damaged cells fail instead of being read as data.
    // synchronous=OFF: a scratch file, synced once it is complete (`Exclusive::install`).
    conn.execute_batch(
        "PRAGMA foreign_keys=OFF; PRAGMA cell_size_check=ON; PRAGMA writable_schema=ON; PRAGMA main.synchronous=OFF;",
    )?;
    let mut header_rebuilt = false;
    let mut readable = attach(&conn, src).is_ok() && damaged_schema_readable(&conn);
    if !readable {
        let _ = conn.execute_batch("DETACH DATABASE damaged");
        let rebuilt = sidecar(dest, "-src");
        for ps in page_size_candidates(src) {
            for s in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(sidecar(&rebuilt, s));
            }
            if rebuild_header(src, &rebuilt, ps).is_err() {
                break;
            }
            if attach(&conn, &rebuilt).is_ok() && damaged_schema_readable(&conn) {
                readable = true;
                header_rebuilt = true;
                break;
            }
            let _ = conn.execute_batch("DETACH DATABASE damaged");
        }
        if !readable {
            // whatever a partly readable schema still yields (writable_schema)
            let _ = attach(&conn, src);
        }
    }
    // the file attached as `damaged` (the copy, or its scratch copy with a rebuilt header)
    let attached: Option<PathBuf> = conn
        .query_row("SELECT file FROM pragma_database_list WHERE name = 'damaged'", [], |r| {
            r.get::<_, String>(0)
        })
        .optional()?
        .map(PathBuf::from);
    let found = conn.query_row("PRAGMA damaged.user_version", [], |r| r.get::<_, u32>(0)).ok();
    if let Some(v) = found.filter(|v| *v > migrate::LATEST) {
        return Err(StoreError::TooNew { found: v, supported: migrate::LATEST });
    }
    // The rows are copied into tables of the damaged file's own version, then migrated the rest
    // of the way like any older database (an older file's tables may have no counterpart in
    // the latest schema: version 4's live history became sessions in version 5).
    let copy_at = copy_version(&conn, found, header_rebuilt);
    migrate_detached(&mut conn, attached.as_deref(), copy_at)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rootpage")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut reports = Vec::new();
    for t in &tables {
        if DERIVED.contains(&t.as_str()) {
            continue;
        }
        let mine = columns(&conn, "main", t);
        let theirs: HashSet<String> = columns(&conn, "damaged", t).into_iter().collect();
        let cols: Vec<String> = mine.into_iter().filter(|c| theirs.contains(c)).collect();
        if cols.is_empty() {
            reports.push(TableReport {
                table: t.clone(),
                note: Some("not readable in the damaged copy (its schema entry is lost)".into()),
                ..Default::default()
            });
            continue;
        }
        reports.push(copy_table(&conn, t, &cols));
    }
    // tables whose b-tree could not be walked completely: read their rows off the pages
    let targets: Vec<String> = reports
        .iter()
        .filter(|r| !r.complete && !["about", "meta"].contains(&r.table.as_str()))
        .map(|r| r.table.clone())
        .collect();
    if !targets.is_empty() {
        if let Err(e) = scan_pages(&conn, src, dest, &targets, &mut reports) {
            tracing::warn!(error = %e, "page scan skipped");
            for r in reports.iter_mut().filter(|r| targets.contains(&r.table)) {
                r.note = Some(format!("{}; pages not scanned: {e}", r.note.clone().unwrap_or_default()));
            }
        }
    }
    // read outside the repair's write transaction (see `Scan`)
    let seq_damaged: Option<i64> = conn
        .query_row("SELECT seq FROM damaged.sqlite_sequence WHERE name = 'changes'", [], |r| r.get(0))
        .optional()
        .ok()
        .flatten();
    let mut repairs = Vec::new();
    if copy_at < migrate::LATEST {
        // an entry the migrations cannot read would fail them (and with them the whole salvage):
        // such rows are left out here, as the repair below leaves them out of a current copy
        let dropped = drop_unreadable_entries(&conn)?;
        if dropped > 0 {
            repairs.push(format!("{dropped} unreadable entry row(s) dropped"));
        }
        // and the counts they check the bodies against follow the rows that came back (the
        // repair below recounts every body again, branches apart, once it has its latest shape)
        conn.execute(
            "UPDATE main.sessions SET entry_count =
                 (SELECT count(*) FROM main.session_entries e WHERE e.session_id = sessions.id)",
            [],
        )?;
        migrate_detached(&mut conn, None, migrate::LATEST)?;
    }
    let tx = conn.transaction()?;
    repairs.extend(
        repair(&tx, seq_damaged)
            .map_err(|e| StoreError::Other(format!("repairing the salvaged data failed: {e}")))?,
    );
    tx.commit()?;
    let problems: Vec<String> = conn
        .prepare("PRAGMA main.integrity_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if problems != ["ok"] {
        return Err(StoreError::Other(format!(
            "the salvaged database fails integrity_check: {}",
            problems.join("; ")
        )));
    }
    let fk: Vec<String> = conn
        .prepare("SELECT \"table\" || ' → ' || parent FROM pragma_foreign_key_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !fk.is_empty() {
        return Err(StoreError::Other(format!(
            "the salvaged database has {} foreign-key violations ({})",
            fk.len(),
            fk.into_iter().take(5).collect::<Vec<_>>().join(", ")
        )));
    }
    let _ = conn.execute_batch("DETACH DATABASE damaged");
    conn.execute_batch("PRAGMA main.wal_checkpoint(TRUNCATE);")?;
    conn.close().map_err(|(_, e)| StoreError::from(e))?;
    Ok(Salvaged { tables: reports, header_rebuilt, repairs })
}

/// The schema version whose tables the damaged file's rows are copied into: its `user_version`,
/// unless that is unknown (a rebuilt header) or contradicts the tables the file has, which the
/// version is then read off (a version-4 file's live history must land in version-4 tables for
/// migration 5 to move it into a session). The latest when neither tells.
fn copy_version(conn: &Connection, found: Option<u32>, header_rebuilt: bool) -> u32 {
    let found = found.filter(|v| (1..=migrate::LATEST).contains(v));
    let tables: HashSet<String> = conn
        .prepare("SELECT name FROM damaged.sqlite_schema WHERE type = 'table'")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
        .unwrap_or_default();
    let has = |t: &str| tables.contains(t);
    let read_off = if has("session_branches") || has("session_forks") {
        Some(5)
    } else if has("history_entries") || has("history_trimmed") {
        Some(if columns(conn, "damaged", "search_pieces").iter().any(|c| c == "key") {
            4
        } else if has("search_docs") {
            3
        } else if has("attachments") || has("attach_tracker") {
            2
        } else {
            1
        })
    } else {
        None
    };
    match (found, read_off) {
        // before version 5 and from it on are different tables: the schema decides
        (Some(f), Some(r)) if (f >= 5) != (r >= 5) => r,
        (Some(f), Some(r)) if header_rebuilt && f != r => r,
        (Some(f), _) => f,
        (None, Some(r)) => r,
        (None, None) => migrate::LATEST,
    }
}

/// Migrate the scratch database to `target` with the damaged copy detached: the runner's
/// write transaction would otherwise begin on every attached database, and its statements would
/// load the damaged schema without `writable_schema` (both fail on a damaged file). `reattach`:
/// the file to attach again afterwards.
fn migrate_detached(conn: &mut Connection, reattach: Option<&Path>, target: u32) -> Result<(), StoreError> {
    let _ = conn.execute_batch("DETACH DATABASE damaged");
    conn.execute_batch("PRAGMA writable_schema=OFF;")?;
    migrate::migrate_to(conn, target)?;
    conn.execute_batch("PRAGMA writable_schema=ON;")?;
    if let Some(p) = reattach {
        attach(conn, p)?;
    }
    Ok(())
}

/// Before an older copy is migrated: delete the entry rows (saved, live and trimmed) whose entry
/// is not a JSON object, which migration 5 could not give an entryId. Returns how many.
fn drop_unreadable_entries(conn: &Connection) -> rusqlite::Result<usize> {
    let mut n = 0;
    for table in ["session_entries", "history_entries", "history_trimmed"] {
        let exists: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = ?1)",
            [table],
            |r| r.get(0),
        )?;
        if !exists {
            continue;
        }
        let bad: Vec<i64> = {
            let mut st = conn.prepare(&format!("SELECT id, entry FROM main.{table}"))?;
            let rows = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)))?;
            let mut bad = Vec::new();
            for row in rows {
                let (id, raw) = row?;
                let readable =
                    raw.and_then(|t| serde_json::from_str::<Value>(&t).ok()).is_some_and(|e| e.is_object());
                if !readable {
                    bad.push(id);
                }
            }
            bad
        };
        for id in bad {
            n += conn.execute(&format!("DELETE FROM main.{table} WHERE id = ?1"), [id])?;
        }
    }
    Ok(n)
}

/// Rows read from the damaged copy per batch (each batch is then written in one transaction).
const BATCH: i64 = 256;

/// A table's columns as the page scan matches records against them.
struct Shape {
    table: String,
    names: Vec<String>,
    /// Declared type: 'i' integer, 't' text, 'b' blob, 'r' real, '?' anything.
    kinds: Vec<char>,
    notnull: Vec<bool>,
    /// The INTEGER PRIMARY KEY column (stored as NULL in the record; the rowid is its value).
    alias: Option<usize>,
}

fn shape(conn: &Connection, table: &str) -> rusqlite::Result<Shape> {
    let mut st = conn.prepare(&format!("PRAGMA main.table_info({})", q(table)))?;
    let rows: Vec<(String, String, bool, i64)> = st
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(5)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let pk_count = rows.iter().filter(|r| r.3 > 0).count();
    let kinds = rows
        .iter()
        .map(|r| match r.1.to_ascii_uppercase().as_str() {
            t if t.contains("INT") => 'i',
            t if t.contains("TEXT") || t.contains("CHAR") => 't',
            t if t.contains("BLOB") => 'b',
            t if t.contains("REAL") => 'r',
            _ => '?',
        })
        .collect::<Vec<_>>();
    let alias = rows.iter().position(|r| r.3 == 1 && pk_count == 1 && r.1.eq_ignore_ascii_case("INTEGER"));
    Ok(Shape {
        table: table.to_owned(),
        names: rows.iter().map(|r| r.0.clone()).collect(),
        notnull: rows.iter().map(|r| r.2 || r.3 > 0).collect(),
        kinds,
        alias,
    })
}

impl Shape {
    /// The record as this table's row, if every value fits its column.
    fn fit(&self, rowid: i64, vals: &[Val]) -> Option<Vec<SqlValue>> {
        if vals.len() > self.names.len() || vals.is_empty() {
            return None;
        }
        // columns missing at the end (rows written before an ADD COLUMN) must allow NULL
        if (vals.len()..self.names.len()).any(|i| self.notnull[i]) {
            return None;
        }
        let mut out = Vec::with_capacity(self.names.len());
        for (i, v) in vals.iter().enumerate() {
            if Some(i) == self.alias {
                if *v != Val::Null {
                    return None;
                }
                out.push(SqlValue::Integer(rowid));
                continue;
            }
            out.push(match (v, self.kinds[i]) {
                (Val::Null, _) if !self.notnull[i] => SqlValue::Null,
                (Val::Int(n), 'i' | '?') => SqlValue::Integer(*n),
                (Val::Real(f), 'r' | '?') => SqlValue::Real(*f),
                (Val::Int(n), 'r') => SqlValue::Real(*n as f64),
                (Val::Text(t), 't' | '?') => SqlValue::Text(clean_text(t)?),
                (Val::Blob(b), 'b' | '?') => SqlValue::Blob(b.clone()),
                _ => return None,
            });
        }
        out.resize(self.names.len(), SqlValue::Null);
        if self.alias.is_some_and(|a| a >= vals.len()) {
            return None;
        }
        Some(out)
    }
}

/// The last phase: a scratch copy of the damaged file with its WAL checkpointed into it (and
/// its header rebuilt when unreadable) is read page by page (`pagescan.rs`); every record on a
/// live table-leaf page that fits exactly one of `targets` is inserted into it (`OR IGNORE`:
/// rows the SQL phase already copied stay as they are). Without a readable freelist nothing is
/// scanned: freed pages still hold deleted rows, which must not come back.
fn scan_pages(
    conn: &Connection,
    src: &Path,
    dest: &Path,
    targets: &[String],
    reports: &mut [TableReport],
) -> Result<(), String> {
    let copy = sidecar(dest, "-pages");
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(sidecar(&copy, s));
    }
    let res = (|| {
        let ps = page_size_candidates(src).first().copied().unwrap_or(4096);
        let header_ok = pagescan::read_head(src, 100).is_some_and(|b| {
            b.len() == 100 && b.starts_with(b"SQLite format 3\0") && pagescan::header_page_size(&b).is_some()
        });
        if header_ok {
            std::fs::copy(src, &copy).map_err(|e| e.to_string())?;
            if std::fs::metadata(sidecar(src, "-wal")).is_ok() {
                std::fs::copy(sidecar(src, "-wal"), sidecar(&copy, "-wal")).map_err(|e| e.to_string())?;
            }
        } else {
            rebuild_header(src, &copy, ps).map_err(|e| e.to_string())?;
        }
        // apply committed WAL frames (the last connection's close checkpoints and removes it)
        if std::fs::metadata(sidecar(&copy, "-wal")).is_ok() {
            if let Ok(c) = Connection::open_with_flags(
                &copy,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ) {
                let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                let _ = c.close();
            }
        }
        let pages = pagescan::Pages::open(&copy).ok_or("no usable page size")?;
        let free = pages
            .freelist()
            .ok_or("the freelist cannot be read, so freed pages (deleted rows) cannot be told apart")?;
        let shapes: Vec<Shape> = targets
            .iter()
            .map(|t| shape(conn, t))
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| e.to_string())?;
        let mut found: Vec<Vec<Vec<SqlValue>>> = vec![Vec::new(); shapes.len()];
        for n in 1..=pages.count() {
            if free.contains(&n) {
                continue;
            }
            for (rowid, vals) in pages.leaf_records(n) {
                let fits: Vec<(usize, Vec<SqlValue>)> = shapes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.fit(rowid, &vals).map(|v| (i, v)))
                    .collect();
                if let [(i, row)] = fits.as_slice() {
                    found[*i].push(row.clone());
                }
            }
        }
        for (s, rows) in shapes.iter().zip(found) {
            let verb = if s.table == "live_state" { "INSERT OR REPLACE" } else { "INSERT OR IGNORE" };
            let list = s.names.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ");
            let marks = vec!["?"; s.names.len()].join(", ");
            let insert = format!("{verb} INTO main.{} ({list}) VALUES ({marks})", q(&s.table));
            let mut scan = Scan { inserted: 0, refused: 0, last: None, broken: false };
            let batch: Vec<Row> = rows.into_iter().map(|r| (0, Some(r))).collect();
            write_batch(conn, &insert, &batch, &mut scan);
            if let Some(r) = reports.iter_mut().find(|r| r.table == s.table) {
                r.recovered += scan.inserted;
                if scan.inserted > 0 {
                    r.note = Some(format!(
                        "{}; {} more rows read directly off its intact pages",
                        r.note.clone().unwrap_or_else(|| "damaged".into()),
                        scan.inserted
                    ));
                }
            }
        }
        Ok(())
    })();
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(sidecar(&copy, s));
    }
    res
}

/// One scan of the damaged table: rows in `ORDER BY rowid [DESC]` order within bounds, read
/// in batches and inserted, until the end or the first unreadable page.
///
/// The damaged copy is only ever read outside a write transaction: a `SQLITE_CORRUPT` met
/// inside one poisons it (every later write in it, and its commit, fail too).
struct Scan {
    inserted: u64,
    refused: u64,
    /// Rowid of the last row read.
    last: Option<i64>,
    /// The scan stopped on an error (a damaged page).
    broken: bool,
}

/// A column value as a parameter; `None` for text that is not UTF-8 (damaged bytes).
fn owned(v: rusqlite::types::ValueRef) -> Option<SqlValue> {
    use rusqlite::types::ValueRef;
    Some(match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Integer(i),
        ValueRef::Real(f) => SqlValue::Real(f),
        ValueRef::Text(t) => SqlValue::Text(clean_text(t)?),
        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
    })
}

/// Text as Keepsake writes it: UTF-8 without NUL bytes (JSON escapes them; names and keys
/// never carry one). A zero-filled or random range inside a row fails this.
fn clean_text(t: &[u8]) -> Option<String> {
    if t.contains(&0) {
        return None;
    }
    String::from_utf8(t.to_vec()).ok()
}

type Row = (i64, Option<Vec<SqlValue>>);

/// Read at most `BATCH` rows; `true` when the read stopped on an error.
fn read_batch(conn: &Connection, select: &str, bounds: (i64, i64), ncols: usize, out: &mut Vec<Row>) -> bool {
    let Ok(mut sel) = conn.prepare(select) else { return true };
    let Ok(mut rows) = sel.query(params![bounds.0, bounds.1, BATCH]) else { return true };
    loop {
        match rows.next() {
            Ok(Some(r)) => {
                let Ok(rowid) = r.get::<_, i64>(0) else { return true };
                let vals: Option<Vec<SqlValue>> =
                    (1..=ncols).map(|i| r.get_ref(i).ok().and_then(owned)).collect();
                out.push((rowid, vals));
            }
            Ok(None) => return false,
            Err(_) => return true,
        }
    }
}

fn write_batch(conn: &Connection, insert: &str, batch: &[Row], out: &mut Scan) {
    let res = (|| {
        conn.execute_batch("BEGIN")?;
        let mut ins = conn.prepare_cached(insert)?;
        for (_, vals) in batch {
            match vals {
                Some(v) => match ins.execute(rusqlite::params_from_iter(v.iter())) {
                    Ok(n) if n > 0 => out.inserted += 1,
                    _ => out.refused += 1,
                },
                None => out.refused += 1,
            }
        }
        drop(ins);
        conn.execute_batch("COMMIT")
    })();
    if res.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

fn scan(
    conn: &Connection,
    select: &str,
    bounds: (i64, i64),
    descending: bool,
    insert: &str,
    ncols: usize,
) -> Scan {
    let mut out = Scan { inserted: 0, refused: 0, last: None, broken: false };
    let (mut lo, mut hi) = bounds;
    loop {
        let mut batch = Vec::new();
        let mut broken = read_batch(conn, select, (lo, hi), ncols, &mut batch);
        // A damaged b-tree can hand rows back out of order (a child pointer aimed at another
        // subtree), and the seek bound is not re-checked per row: keep only rows that move the
        // scan forward, and stop at the first that does not, so the scan always ends.
        if let Some(k) = batch.iter().position(|(r, _)| if descending { *r >= hi } else { *r <= lo }) {
            batch.truncate(k);
            broken = true;
        }
        if let Some(k) =
            batch.windows(2).position(|w| if descending { w[1].0 >= w[0].0 } else { w[1].0 <= w[0].0 })
        {
            batch.truncate(k + 1);
            broken = true;
        }
        if let Some((last, _)) = batch.last() {
            out.last = Some(*last);
            if descending {
                hi = *last;
            } else {
                lo = *last;
            }
        }
        write_batch(conn, insert, &batch, &mut out);
        if broken {
            out.broken = true;
            return out;
        }
        if (batch.len() as i64) < BATCH {
            return out;
        }
    }
}

/// SQL that holds for a row of `t` whose values have the declared types of `cols` (our schema
/// never stores another type) and whose text has no NUL byte.
fn valid_predicate(conn: &Connection, t: &str, cols: &[String]) -> String {
    let Ok(sh) = shape(conn, t) else { return "1".into() };
    let mut parts = Vec::new();
    for ((name, kind), notnull) in sh.names.iter().zip(&sh.kinds).zip(&sh.notnull) {
        if !cols.contains(name) {
            continue;
        }
        let c = q(name);
        let check = match kind {
            'i' => format!("typeof({c}) = 'integer'"),
            't' => format!("(typeof({c}) = 'text' AND instr(CAST({c} AS BLOB), x'00') = 0)"),
            'b' => format!("typeof({c}) = 'blob'"),
            'r' => format!("typeof({c}) IN ('real', 'integer')"),
            _ => continue,
        };
        parts.push(if *notnull { check } else { format!("({c} IS NULL OR {check})") });
    }
    if parts.is_empty() {
        "1".into()
    } else {
        parts.join(" AND ")
    }
}

/// Copy one table: the whole table in one statement, else forward by rowid, backward from the
/// end, then seeks past the damage in growing steps.
fn copy_table(conn: &Connection, t: &str, cols: &[String]) -> TableReport {
    let list = cols.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ");
    let verb = if t == "live_state" { "INSERT OR REPLACE" } else { "INSERT OR IGNORE" };
    let mut report = TableReport { table: t.to_owned(), ..Default::default() };
    // rows whose values do not have their columns' types (a child pointer aimed at another
    // table's page reads that table's rows as this one's) or carry NUL bytes in text are left out
    let valid = valid_predicate(conn, t, cols);
    let clean = format!(" WHERE {valid}");
    let whole = format!("{verb} INTO main.{} ({list}) SELECT {list} FROM damaged.{}{clean}", q(t), q(t));
    let fast = (|| {
        conn.execute_batch("BEGIN")?;
        let n = conn.execute(&whole, [])?;
        conn.execute_batch("COMMIT")?;
        Ok::<_, rusqlite::Error>(n)
    })();
    match fast {
        Ok(n) => {
            report.recovered = n as u64;
            report.complete = true;
            return report;
        }
        Err(_) => {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    let marks = vec!["?"; cols.len()].join(", ");
    let insert = format!("{verb} INTO main.{} ({list}) VALUES ({marks})", q(t));
    let fwd = format!(
        "SELECT rowid, {list} FROM damaged.{} WHERE rowid > ?1 AND rowid < ?2 AND ({valid}) ORDER BY rowid LIMIT ?3",
        q(t)
    );
    let back = format!(
        "SELECT rowid, {list} FROM damaged.{} WHERE rowid > ?1 AND rowid < ?2 AND ({valid}) ORDER BY rowid DESC LIMIT ?3",
        q(t)
    );
    let n = cols.len();
    let add = |s: &Scan, r: &mut TableReport| {
        r.recovered += s.inserted;
        r.refused += s.refused;
    };
    // forward from the start
    let s = scan(conn, &fwd, (i64::MIN, i64::MAX), false, &insert, n);
    add(&s, &mut report);
    if !s.broken {
        report.complete = true;
        report.note = Some("read row by row".into());
        return report;
    }
    let mut low = s.last.unwrap_or(i64::MIN);
    // backward from the end
    let s = scan(conn, &back, (low, i64::MAX), true, &insert, n);
    add(&s, &mut report);
    let high = if s.broken { s.last.unwrap_or(i64::MAX) } else { low.saturating_add(1) };
    // probe the gap between the two: seek to low + step, doubling the step while seeks fail
    let mut step: i64 = 1;
    let mut probes = 0;
    while probes < 256 {
        let start = low.saturating_add(step);
        if start >= high || start == i64::MAX {
            break;
        }
        probes += 1;
        let s = scan(conn, &fwd, (start - 1, high), false, &insert, n);
        add(&s, &mut report);
        match s.last {
            Some(last) => {
                low = last;
                step = 1;
                if !s.broken {
                    break;
                }
            }
            None if !s.broken => break,
            None => step = step.saturating_mul(2),
        }
    }
    report.note = Some("damaged pages skipped: rows on them are lost".into());
    report
}

/// Rebuild derived data and restore the store's invariants on the salvaged rows.
fn repair(conn: &Connection, seq_damaged: Option<i64>) -> Result<Vec<String>, String> {
    let mut at = "start";
    repair_steps(conn, seq_damaged, &mut at).map_err(|e| format!("{at}: {e}"))
}

fn repair_steps(
    conn: &Connection,
    seq_damaged: Option<i64>,
    at: &mut &'static str,
) -> rusqlite::Result<Vec<String>> {
    let mut repairs = Vec::new();
    *at = "image hashes";
    // images are content-addressed: bytes that no longer hash to their key were damaged
    let mut bad = Vec::new();
    {
        let mut st = conn.prepare("SELECT sha256, bytes FROM images")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get(0)?;
            let ok = match r.get_ref(1)? {
                rusqlite::types::ValueRef::Blob(b) => crate::domain::import::sha256_hex(b) == key,
                _ => false,
            };
            if !ok {
                bad.push(key);
            }
        }
    }
    for k in &bad {
        conn.execute("DELETE FROM images WHERE sha256 = ?1", [k])?;
    }
    if !bad.is_empty() {
        repairs
            .push(format!("{} image(s) whose bytes no longer matched their hash were left out", bad.len()));
    }
    *at = "images";
    let now = now_ms();
    let images: HashSet<String> = conn
        .prepare("SELECT sha256 FROM images")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    *at = "entries";
    let mut lost_images = 0;
    let mut dropped = 0;
    let mut recomputed = 0;
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT id, entry FROM session_entries")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, raw) in rows {
        let Ok(mut e) = serde_json::from_str::<Value>(&raw) else {
            conn.execute("DELETE FROM session_entries WHERE id = ?1", [id])?;
            dropped += 1;
            continue;
        };
        if !e.is_object() {
            conn.execute("DELETE FROM session_entries WHERE id = ?1", [id])?;
            dropped += 1;
            continue;
        }
        let missing: Vec<String> = referenced_blobs(&e).into_iter().filter(|h| !images.contains(h)).collect();
        if !missing.is_empty() {
            lost_images += replace_lost_images(&mut e, &missing);
        }
        // the columns derived from the entry are recomputed from it (a damaged integer
        // beside an intact entry would otherwise skew the trim rule and the counts)
        let text = if missing.is_empty() { raw.clone() } else { e.to_string() };
        let aid = crate::domain::entry::attach_id(&e);
        // the entryId column follows the entry's stamp; a stamp another row already has is
        // cleared here (the entry is numbered again below), never a reason to skip the rest
        let eid = match crate::domain::entry::entry_id(&e) {
            Some(x) => conn
                .prepare_cached("SELECT 1 FROM session_entries WHERE entry_id = ?1 AND id <> ?2")?
                .query_row(params![x, id], |_| Ok(()))
                .optional()?
                .is_none()
                .then(|| x.to_owned()),
            None => None,
        };
        recomputed += conn.execute(
            "UPDATE session_entries SET entry = ?2, role = ?3, content_chars = ?4, image_count = ?5,
                 attach_id = ?6, entry_id = ?7
             WHERE id = ?1 AND (entry IS NOT ?2 OR role IS NOT ?3 OR content_chars IS NOT ?4
                                OR image_count IS NOT ?5 OR attach_id IS NOT ?6 OR entry_id IS NOT ?7)",
            params![id, text, role(&e), content_chars(&e) as i64, image_part_count(&e) as i64, aid, eid],
        )?;
        for sha in referenced_blobs(&e) {
            conn.execute(
                "INSERT OR IGNORE INTO image_refs (holder, holder_id, sha256) VALUES ('session', ?1, ?2)",
                params![id, sha],
            )?;
        }
    }
    if lost_images > 0 {
        repairs.push(format!(
            "{lost_images} image part(s) whose image was lost became the text {LOST_IMAGE_TEXT:?}"
        ));
    }
    if dropped > 0 {
        repairs.push(format!("{dropped} unreadable entry row(s) dropped"));
    }
    if recomputed > 0 {
        repairs.push(format!("{recomputed} entry row(s) had their counts recomputed from the entry"));
    }
    *at = "unreferenced images";
    let orphans =
        conn.execute("DELETE FROM images WHERE sha256 NOT IN (SELECT sha256 FROM image_refs)", [])?;
    if orphans > 0 {
        repairs.push(format!("{orphans} image(s) no surviving entry uses were left out"));
    }
    *at = "versions";
    // the entries of a version whose branch row was lost: no fork says where they belong, so
    // they become a session of their own (recreated below, "Recovered: …"), not dropped
    let lost_branches: Vec<i64> = conn
        .prepare(
            "SELECT DISTINCT branch_id FROM session_entries
             WHERE branch_id IS NOT NULL AND branch_id NOT IN (SELECT id FROM session_branches)",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for b in &lost_branches {
        conn.execute(
            "UPDATE session_entries SET session_id = ?2, branch_id = NULL WHERE branch_id = ?1",
            params![b, uuid::Uuid::new_v4().to_string()],
        )?;
    }
    if !lost_branches.is_empty() {
        repairs.push(format!(
            "{} version(s) whose fork was lost were kept as sessions of their own",
            lost_branches.len()
        ));
    }
    *at = "positions";
    // positions 0..n-1 again
    let mut renumbered = 0;
    // every path (a session's chosen path, each other version) numbered on its own
    renumbered += conn.execute(
        "UPDATE session_entries SET position = r.n FROM
           (SELECT id AS rid, row_number() OVER (PARTITION BY session_id, branch_id ORDER BY position, id) - 1 AS n
            FROM session_entries) AS r
         WHERE session_entries.id = r.rid AND session_entries.position <> r.n",
        [],
    )?;
    if renumbered > 0 {
        repairs.push(format!("{renumbered} entry position(s) renumbered to close gaps"));
    }
    *at = "orphan sessions";
    // a session row whose name no longer matches its lower-cased copy was damaged: drop it
    // (its entries get a recreated row below)
    let rows: Vec<(String, String, String)> = conn
        .prepare("SELECT id, name, name_lower FROM sessions")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut bad_sessions = 0;
    for (id, name, name_lower) in rows {
        if lower(&name) != name_lower {
            conn.execute("DELETE FROM sessions WHERE id = ?1", [&id])?;
            bad_sessions += 1;
        }
    }
    if bad_sessions > 0 {
        repairs.push(format!("{bad_sessions} damaged session row(s) dropped"));
    }
    // sessions whose row was lost but whose body survived
    let orphan_ids: Vec<String> = conn
        .prepare("SELECT DISTINCT session_id FROM session_entries WHERE session_id NOT IN (SELECT id FROM sessions)")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for sid in &orphan_ids {
        let body = session_body(conn, sid)?;
        let name =
            auto_name(&body).map_or_else(|| "Recovered session".to_owned(), |n| format!("Recovered: {n}"));
        let seq: i64 =
            conn.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?;
        conn.execute(
            "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, 0, ?4)",
            params![sid, name, lower(&name), now, seq],
        )?;
    }
    if !orphan_ids.is_empty() {
        repairs.push(format!(
            "{} session(s) whose row was lost were recreated from their entries",
            orphan_ids.len()
        ));
    }
    // a fork or a version row of a session that is gone (it had no entry left to recreate it from)
    let stale = conn
        .execute("DELETE FROM session_branches WHERE session_id NOT IN (SELECT id FROM sessions)", [])?
        + conn.execute("DELETE FROM session_forks WHERE session_id NOT IN (SELECT id FROM sessions)", [])?;
    if stale > 0 {
        repairs.push(format!("{stale} fork or version row(s) of a lost session left out"));
    }
    conn.execute(
        "UPDATE sessions SET entry_count =
             (SELECT count(*) FROM session_entries e WHERE e.session_id = sessions.id AND e.branch_id IS NULL)
         WHERE entry_count <>
             (SELECT count(*) FROM session_entries e WHERE e.session_id = sessions.id AND e.branch_id IS NULL)",
        [],
    )?;
    *at = "entry ids";
    // every entry has an entryId, unique, the same in its JSON and its column
    let unnumbered: Vec<(i64, String)> = conn
        .prepare("SELECT id, entry FROM session_entries WHERE entry_id IS NULL OR entry_id IS NOT json_extract(entry, '$.entryId')")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, raw) in &unnumbered {
        if let Ok(mut e) = serde_json::from_str::<Value>(raw) {
            let eid = uuid::Uuid::new_v4().to_string();
            if let Some(o) = e.as_object_mut() {
                o.insert(crate::domain::entry::ENTRY_ID.into(), Value::String(eid.clone()));
            }
            conn.execute(
                "UPDATE session_entries SET entry = ?2, entry_id = ?3 WHERE id = ?1",
                params![id, e.to_string(), eid],
            )?;
        }
    }
    if !unnumbered.is_empty() {
        repairs.push(format!("{} entry row(s) got a new entryId", unnumbered.len()));
    }
    *at = "search";
    // search data from the bodies
    super::search::clear(conn)?;
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM sessions ORDER BY insert_seq")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let shown: Vec<String> = conn
        .prepare("SELECT id FROM sessions WHERE trashed_at IS NULL ORDER BY insert_seq")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for sid in &shown {
        // what content search covers: the chosen path, then the other versions
        let mut text = search_text(&session_body(conn, sid)?);
        for list in version_bodies(conn, sid)? {
            text.push_str(&search_text(&list));
        }
        super::search::index_session(conn, sid, &text)?;
    }
    *at = "binding";
    // the binding must name a session that exists
    conn.execute("INSERT OR IGNORE INTO live_state (id, active_session_id) VALUES (1, '')", [])?;
    let unbound = conn.execute(
        "UPDATE live_state SET active_session_id = '', bound_at = NULL, live_from = 0
         WHERE id = 1 AND active_session_id <> ''
           AND active_session_id NOT IN (SELECT id FROM sessions WHERE trashed_at IS NULL)",
        [],
    )?;
    if unbound > 0 {
        repairs.push("the live history's session was lost; it is no longer bound".into());
    }
    // the live window starts within its session
    conn.execute(
        "UPDATE live_state SET live_from = (SELECT entry_count FROM sessions WHERE id = active_session_id)
         WHERE id = 1 AND live_from > coalesce((SELECT entry_count FROM sessions WHERE id = active_session_id), 0)",
        [],
    )?;
    *at = "change log";
    // The change log may have holes: one change naming every area, and a floor at it, so every
    // client's next changes.since answers reset.
    let seq_main: i64 =
        conn.query_row("SELECT coalesce(max(seq), 0) FROM changes", [], |r| r.get(0)).unwrap_or(0);
    // When the old sequence cannot be read, jump past any sequence number a client may hold
    // (one per write: far below the Unix time in seconds), so none is ever reused.
    let unknown_floor = if seq_damaged.is_none() { now / 1000 } else { 0 };
    let next = seq_damaged.unwrap_or(0).max(seq_main).max(unknown_floor) + 1;
    let keys: Vec<String> = conn
        .prepare("SELECT key FROM settings ORDER BY key")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let areas =
        json!({"settings": keys, "history": true, "binding": true, "sessions": {"ids": ids, "index": true}});
    conn.execute(
        "INSERT INTO changes (seq, changed_at, areas, client_request_id, origin) VALUES (?1, ?2, ?3, NULL, 'salvage')",
        params![next, now, areas.to_string()],
    )?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('changes_floor', ?1)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [next.to_string()],
    )?;
    Ok(repairs)
}

fn session_body(conn: &Connection, sid: &str) -> rusqlite::Result<Vec<Value>> {
    let mut stmt = conn.prepare_cached(
        "SELECT entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL ORDER BY position, id",
    )?;
    let rows = stmt.query_map([sid], |r| r.get::<_, String>(0))?;
    Ok(rows.filter_map(|r| r.ok()).filter_map(|s| serde_json::from_str(&s).ok()).collect())
}

/// The entries of each other version of session `sid`, in the order the host indexes them
/// (by fork, then version).
fn version_bodies(conn: &Connection, sid: &str) -> rusqlite::Result<Vec<Vec<Value>>> {
    let branches: Vec<i64> = conn
        .prepare_cached(
            "SELECT id FROM session_branches WHERE session_id = ?1 ORDER BY fork_entry_id, version",
        )?
        .query_map([sid], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::with_capacity(branches.len());
    for b in branches {
        let mut stmt = conn
            .prepare_cached("SELECT entry FROM session_entries WHERE branch_id = ?1 ORDER BY position, id")?;
        let rows = stmt.query_map([b], |r| r.get::<_, String>(0))?;
        out.push(rows.filter_map(|r| r.ok()).filter_map(|s| serde_json::from_str(&s).ok()).collect());
    }
    Ok(out)
}

fn replace_lost_images(e: &mut Value, missing: &[String]) -> usize {
    let mut n = 0;
    if let Some(Value::Array(parts)) = e.get_mut("content") {
        for p in parts.iter_mut() {
            let lost = is_image_part(p)
                && image_part_url(p)
                    .and_then(parse_image_ref)
                    .is_some_and(|h| missing.iter().any(|m| m == h));
            if lost {
                *p = json!({"type": "text", "text": LOST_IMAGE_TEXT});
                n += 1;
            }
        }
    }
    n
}
