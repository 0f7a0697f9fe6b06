//! Opening the database file safely (reliability.md §3, §6).
//!
//! 1. Create the directory (0700 when we create it) and the file (0600, exclusively) ourselves,
//!    refuse a symlinked path, open with `SQLITE_OPEN_NOFOLLOW`.
//! 2. A busy wait of up to 10 s ([`set_busy_wait`]), looking at the lock every 0.5–3.25 ms.
//! 3. Switch to WAL in a retry loop on `SQLITE_BUSY` (jittered 10–30 ms sleeps, 5 s deadline).
//! 4. `synchronous=FULL`: chat history is written at human pace, and FULL makes "acknowledged
//!    means durable" hold across power loss too. The measured cost (reliability.md §5): NORMAL
//!    ~2,530 commits/s vs FULL ~1,700 with 64 KiB rows; switching to NORMAL is an explicit,
//!    measured decision for a later issue. `foreign_keys=ON`, `trusted_schema=OFF`,
//!    `journal_size_limit` 4 MiB, 4 KiB pages (measured below).
//! 5. SQLite's value length limit lowered to just over the 64 MiB frame cap.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use super::error::{is_busy, StoreError};
use crate::protocol::limits::SQLITE_MAX_LENGTH;
use crate::util::paths::sidecar;

pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
const WAL_SWITCH_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    ReadWrite,
    ReadOnly,
}

fn refuse_symlink(path: &Path) -> Result<(), StoreError> {
    refuse_links(path)
}

/// Refuse a symlinked database path and a hard-linked database file (reliability.md §7: a
/// second name for the file is a second way to open it, with its own `-wal`/`-shm`).
pub fn refuse_links(path: &Path) -> Result<(), StoreError> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if md.file_type().is_symlink() {
            return Err(StoreError::Path(format!(
                "{} is a symbolic link; Keepsake refuses symlinked database paths",
                path.display()
            )));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if md.is_file() && md.nlink() > 1 {
                return Err(StoreError::Path(format!(
                    "{} has {} hard links; Keepsake refuses a hard-linked database file (remove the other links)",
                    path.display(),
                    md.nlink()
                )));
            }
        }
    }
    Ok(())
}

/// Create the parent directory (mode 0700 for directories we create) and the database file
/// (mode 0600, exclusive create) before SQLite touches it, so -wal and -shm inherit 0600.
fn prepare_file(path: &Path) -> Result<(), StoreError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.exists() {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        b.create(dir).map_err(|e| StoreError::Path(format!("cannot create {}: {e}", dir.display())))?;
    }
    refuse_symlink(path)?;
    tighten_modes(path, dir, true)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Path(format!("cannot create {}: {e}", path.display()))),
    }
}

/// The files beside a database that hold its data or say where it is: the database, its `-wal`
/// and `-shm`, the log and the install receipt.
pub fn private_files(db: &Path) -> Vec<std::path::PathBuf> {
    let dir = db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    vec![
        db.to_path_buf(),
        sidecar(db, "-wal"),
        sidecar(db, "-shm"),
        dir.join(crate::util::paths::LOG_FILE),
        dir.join(crate::util::paths::RECEIPT_FILE),
    ]
}

/// Every open for writing makes the database's files private again: the database, `-wal`,
/// `-shm`, log and receipt 0600, the folder 0700 — a file left 0644 by an older version, a copy or
/// a permissive umask included. A file (or a group- or world-writable folder) that belongs to
/// another user is refused with a clear error: Keepsake cannot make it private, and someone
/// else can read or replace it. (A shared folder such as `/tmp`, sticky and owned by root, is
/// left as it is; the files in it are still made private.) A read-only open (`inspect`, a
/// backup someone handed you, a read-only mount) is `strict == false`: it tightens what it can
/// and refuses nothing, since reading a file cannot expose it further.
#[cfg(unix)]
fn tighten_modes(db: &Path, dir: &Path, strict: bool) -> Result<(), StoreError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let fix = |p: &Path, want: u32, what: &str| -> Result<(), StoreError> {
        let Ok(md) = std::fs::symlink_metadata(p) else { return Ok(()) };
        let mode = md.permissions().mode() & 0o7777;
        if mode & 0o077 == 0 {
            return Ok(());
        }
        if md.uid() != me {
            if !strict {
                return Ok(());
            }
            return Err(StoreError::Path(format!(
                "{what} {} belongs to user {} and has mode {mode:o}: other users can read it, and Keepsake cannot \
                 make it private; move the database to a folder of your own or fix the owner (chown)",
                p.display(),
                md.uid()
            )));
        }
        if let Err(e) = std::fs::set_permissions(p, std::fs::Permissions::from_mode(want)) {
            if !strict {
                tracing::info!(file = %p.display(), error = %e, "could not make private (read-only open)");
                return Ok(());
            }
            return Err(StoreError::Path(format!(
                "cannot make {} private (chmod {want:o}): {e}",
                p.display()
            )));
        }
        tracing::info!(file = %p.display(), from = format!("{mode:o}"), to = format!("{want:o}"), "made private");
        Ok(())
    };
    if let Ok(md) = std::fs::metadata(dir) {
        let mode = md.permissions().mode() & 0o7777;
        if md.uid() == me {
            if folder_is_keepsakes(db, dir) {
                fix(dir, 0o700, "the database folder")?;
            } else if mode & 0o077 != 0 {
                tracing::info!(dir = %dir.display(), mode = format!("{mode:o}"), "the database folder holds other files too; its mode is left as it is (the files are made private)");
            }
        } else if strict && mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(StoreError::Path(format!(
                "the database folder {} belongs to user {} and other users can write to it (mode {mode:o}); \
                 keep the database in a folder of your own",
                dir.display(),
                md.uid()
            )));
        }
    }
    for p in private_files(db) {
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            continue; // the database itself is refused elsewhere; the others are not followed
        }
        fix(&p, 0o600, "the file")?;
    }
    Ok(())
}

/// Whether `dir` holds only Keepsake's files — the database and everything named after it (its
/// `-wal`, `-shm`, damaged copies), the log, the receipt, the debug marker, files whose name
/// starts with `keepsake` — so making it 0700 takes nothing from anyone. A database a user put
/// in a shared folder (`--db ~/notes/keepsake.db`) leaves that folder's mode alone.
#[cfg(unix)]
fn folder_is_keepsakes(db: &Path, dir: &Path) -> bool {
    use crate::util::paths::{BACKUPS_DIR, DEBUG_MARKER, LOG_FILE, RECEIPT_FILE};
    let Some(name) = db.file_name().and_then(|n| n.to_str()) else { return false };
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.take(10_000).all(|e| {
        let Ok(e) = e else { return false };
        let n = e.file_name();
        let Some(n) = n.to_str() else { return false };
        n.starts_with(name)
            || n.starts_with("keepsake")
            || [LOG_FILE, RECEIPT_FILE, DEBUG_MARKER, BACKUPS_DIR].contains(&n)
    })
}

#[cfg(not(unix))]
fn tighten_modes(_db: &Path, _dir: &Path, _strict: bool) -> Result<(), StoreError> {
    Ok(())
}

fn jitter_ms() -> u64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    10 + (n as u64 ^ std::process::id() as u64) % 21
}

/// Wait up to [`BUSY_TIMEOUT`] for a lock another connection holds. SQLite's own busy handler
/// (`busy_timeout`) sleeps 100 ms between tries once it has waited 0.3 s, so under steady
/// contention a waiter looks at the lock ten times a second while the other writers take it
/// back to back between its looks: in tests/it/concurrency/processes.rs (4 processes appending,
/// debug build, a loaded machine) one writer waited out the whole 10 s four times while the others'
/// p50 was 1 ms. Here a waiter looks every 0.5–0.9 ms for its first 10 tries, then every 1–3.25 ms
/// (the step depends on the process id), so it finds the lock free in the gaps between the others'
/// transactions.
pub fn set_busy_wait(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_handler(Some(busy_wait))
}

/// [`BUSY_TIMEOUT`], or `KEEPSAKE_BUSY_TIMEOUT_MS` (a test knob, like `KEEPSAKE_MAX_PAGE_COUNT`:
/// tests/it/concurrency/processes.rs holds a lock past it without waiting 10 s).
fn busy_timeout() -> Duration {
    static TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        std::env::var("KEEPSAKE_BUSY_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(BUSY_TIMEOUT, Duration::from_millis)
    })
}

fn busy_wait(tries: i32) -> bool {
    thread_local! {
        static WAITING_SINCE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }
    let now = Instant::now();
    let since = WAITING_SINCE.with(|w| {
        if tries == 0 || w.get().is_none() {
            w.set(Some(now));
        }
        w.get().unwrap_or(now)
    });
    if now.duration_since(since) >= busy_timeout() {
        return false;
    }
    let step = u64::from(std::process::id() % 4) * 250;
    let micros = if tries < 10 { 500 + step / 2 } else { 1_000 + step * 3 };
    std::thread::sleep(Duration::from_micros(micros));
    true
}

/// Switch to WAL, retrying on busy (only the very first opener ever switches it).
fn ensure_wal(conn: &Connection) -> Result<(), StoreError> {
    let deadline = Instant::now() + WAL_SWITCH_DEADLINE;
    loop {
        let r: rusqlite::Result<String> =
            conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)).and_then(|mode| {
                if mode.eq_ignore_ascii_case("wal") {
                    Ok(mode)
                } else {
                    conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
                }
            });
        match r {
            Ok(m) if m.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(m) => return Err(StoreError::Other(format!("journal_mode is {m}, expected wal"))),
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(jitter_ms()))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `file:` URI for `path` with SQLite's reserved characters escaped.
pub(super) fn file_uri(path: &Path, query: &str) -> String {
    let mut out = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        match b {
            b'%' | b'?' | b'#' | b' ' => out.push_str(&format!("%{b:02X}")),
            _ => out.push(b as char),
        }
    }
    out.push('?');
    out.push_str(query);
    out
}

/// Open read-only. A WAL database normally needs a `-shm` file; when the directory cannot
/// hold one (a read-only copy, a read-only mount) and no `-wal` exists, no writer can be
/// active there either, so the file is opened as immutable instead.
pub fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    let conn = open_connection(path, Mode::ReadOnly)?;
    match conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)) {
        Ok(_) => Ok(conn),
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::ReadOnly) | Some(rusqlite::ErrorCode::CannotOpen)
            ) && !sidecar(path, "-wal").exists() =>
        {
            drop(conn);
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW;
            let conn = Connection::open_with_flags(file_uri(path, "immutable=1"), flags)?;
            set_busy_wait(&conn)?;
            conn.execute_batch("PRAGMA trusted_schema=OFF;")?;
            Ok(conn)
        }
        Err(e) => Err(e.into()),
    }
}

/// Open a connection with every pragma set. Read-only opens never create anything.
pub fn open_connection(path: &Path, mode: Mode) -> Result<Connection, StoreError> {
    let flags = match mode {
        Mode::ReadWrite => {
            prepare_file(path)?;
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        }
        Mode::ReadOnly => {
            if !path.exists() {
                return Err(StoreError::Path(format!("no database at {}", path.display())));
            }
            refuse_symlink(path)?;
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            tighten_modes(path, dir, false)?;
            OpenFlags::SQLITE_OPEN_READ_ONLY
        }
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags)?;
    set_busy_wait(&conn)?;
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, SQLITE_MAX_LENGTH)?;
    if mode == Mode::ReadWrite {
        // Page size is fixed before the first table exists. Measured here
        // (tests/it/concurrency/processes.rs, 4 writers × 150 small appends plus a streaming
        // reader): 4 KiB pages gave p50 2.6 ms and a WAL peak of 4.3 MB; 16 KiB 3.4 ms / 4.9 MB;
        // 64 KiB 5.0 ms / 11–15 MB (66 MB with the default autocheckpoint, over T15's 16 MiB).
        // performance.md's 64 KiB figure was for 4 MB snapshot rows; here snapshots never copy
        // image bytes (blobs are stored once), so small rows dominate and 4 KiB wins.
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        // A database written by a newer host stays byte-identical, journal mode included
        // (reliability.md §4, T17): refuse it before the WAL switch could rewrite its header.
        let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if found > super::migrate::LATEST {
            return Err(StoreError::TooNew { found, supported: super::migrate::LATEST });
        }
        if pages == 0 {
            conn.execute_batch("PRAGMA page_size=4096")?;
        }
        ensure_wal(&conn)?;
        // Autocheckpoint at SQLite's default 1,000 pages (4 MiB); the WAL file is truncated back
        // to 4 MiB after a checkpoint (journal_size_limit), as Firefox Places does.
        conn.execute_batch(
            "PRAGMA synchronous=FULL; PRAGMA journal_size_limit=4194304; PRAGMA wal_autocheckpoint=1000;",
        )?;
        // Test knob (reliability.md T20): `KEEPSAKE_SYNCHRONOUS=NORMAL` runs the power-cut test's
        // comparison pass, which measures what FULL buys; any other value (or none) keeps FULL.
        if std::env::var("KEEPSAKE_SYNCHRONOUS").is_ok_and(|v| v.eq_ignore_ascii_case("normal")) {
            conn.execute_batch("PRAGMA synchronous=NORMAL;")?;
        }
        // Test knob (reliability.md T18): a page-count cap stands in for a full disk.
        if let Some(n) = std::env::var("KEEPSAKE_MAX_PAGE_COUNT").ok().and_then(|v| v.parse::<u32>().ok()) {
            conn.execute_batch(&format!("PRAGMA max_page_count={n}"))?;
        }
    }
    conn.execute_batch("PRAGMA foreign_keys=ON; PRAGMA trusted_schema=OFF;")?;
    if mode == Mode::ReadWrite {
        // A 16 MiB page cache (SQLite's default is 2 MiB): a search touches the pieces around
        // each hit, and a second query should not read them from the file again. It fills
        // only as pages are used. (Not on read-only opens: in a folder that cannot hold a
        // `-shm` it would fail before the immutable fallback.)
        conn.execute_batch("PRAGMA cache_size=-16384;")?;
    }
    Ok(conn)
}
