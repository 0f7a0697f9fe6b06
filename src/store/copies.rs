//! The copies of the database Keepsake keeps (docs/reliability.md §7 "Copies and backups"): how
//! one is made, read back, listed and removed, and the pre-migration copy the open path makes.
//! No `Store` here: `connection.rs` makes the pre-migration copy before a `Store` exists, and
//! `backups.rs` builds the operations on these.
//!
//! How a copy is made ([`make_copy`]): SQLite's backup API from a read connection, inside one
//! read transaction (one snapshot, however many steps), into a temp file
//! `.keepsake-<…>.db.<random>.tmp` created new in the copy's folder (`util::files::write_new`:
//! 0600, `O_EXCL|O_NOFOLLOW`), its journal in memory; the copy is set to the one-file rollback
//! format through its own handle, checked with `PRAGMA integrity_check`, fsynced, and renamed to
//! its name without replacing anything; the folder is fsynced. A copy that fails any step is
//! removed and the error says which step. Only names of a copy's exact shape
//! (`domain::backups::parse_copy_name`) are ever listed or removed.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::error::StoreError;
use super::open::{self, file_uri};
use crate::domain::backups::{self, copy_file_name, copy_id, is_copy_temp, parse_copy_name, Kind};
use crate::protocol::{ErrorCode, HostError, HostResult};
use crate::util::files::{self, Existing, WriteError, WriteFailed};

/// Pages copied per backup step (4 MiB of 4 KiB pages): between steps a copy can be stopped.
const STEP_PAGES: i32 = 1024;

/// A copy that was made.
#[derive(Debug, Clone)]
pub struct Made {
    pub id: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub at_ms: i64,
    pub kind: Kind,
    pub schema: u32,
}

/// A copy found in a folder.
#[derive(Debug, Clone)]
pub struct Listed {
    pub id: String,
    pub kind: Kind,
    pub at_ms: i64,
    pub schema: u32,
    pub path: PathBuf,
    pub bytes: u64,
    /// Modification time (ns since the epoch), for caches keyed by the file's state.
    pub mtime_ns: i128,
}

/// Why filling a copy stopped.
fn stopped() -> HostError {
    HostError::internal("the copy was stopped: the host is shutting down")
}

/// Fill the new file `tmp` (open as `file`) with a copy of `src` through SQLite's backup API, in
/// one read transaction of `src` (one snapshot, however many steps), `stop` looked at between
/// steps; then set the one-file rollback format through `file` and run `integrity_check` on the
/// copy. Returns its lines (`["ok"]` when healthy).
///
/// SQLite opens `tmp` by its name, so nothing it makes beside it may be created by name either:
/// the copy is written with its journal in memory, and the rollback format (header bytes 18–19 =
/// 1, what `PRAGMA journal_mode=DELETE` writes) is set through the temp file's own handle instead
/// of by reopening a WAL-format copy (which would create `-wal` and `-shm` beside it).
pub fn fill_copy(
    src: &Connection,
    tmp: &Path,
    file: &mut File,
    stop: &dyn Fn() -> bool,
) -> HostResult<Vec<String>> {
    let nofollow = OpenFlags::SQLITE_OPEN_NOFOLLOW | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    {
        let mut copy = Connection::open_with_flags(tmp, OpenFlags::SQLITE_OPEN_READ_WRITE | nofollow)?;
        copy.query_row("PRAGMA journal_mode=MEMORY", [], |_| Ok(()))?;
        // Test knob (reliability.md T18): the page-count cap that stands in for a full disk
        // bounds the copies too.
        if let Some(n) = std::env::var("KEEPSAKE_MAX_PAGE_COUNT").ok().and_then(|v| v.parse::<u32>().ok()) {
            copy.execute_batch(&format!("PRAGMA max_page_count={n}"))?;
        }
        // one read transaction across every step: the copy is one snapshot of `src`
        let pinned = !src.is_autocommit();
        if !pinned {
            src.execute_batch("BEGIN DEFERRED; SELECT count(*) FROM sqlite_schema;")?;
        }
        let r = (|| -> HostResult<()> {
            let backup = rusqlite::backup::Backup::new(src, &mut copy)?;
            let deadline = std::time::Instant::now() + open::BUSY_TIMEOUT;
            loop {
                use rusqlite::backup::StepResult;
                match backup.step(STEP_PAGES).map_err(|e| {
                    let e = HostError::from(e);
                    HostError::new(e.code, format!("the copy could not be written: {}", e.message))
                })? {
                    StepResult::Done => return Ok(()),
                    StepResult::More if stop() => return Err(stopped()),
                    StepResult::More => {}
                    other if std::time::Instant::now() < deadline => {
                        tracing::debug!(step = ?other, "backup step waits");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    other => {
                        return Err(HostError::new(
                            ErrorCode::Busy,
                            format!(
                            "the copy could not be made: the database stayed locked ({other:?}); try again"
                        ),
                        ))
                    }
                }
            }
        })();
        if !pinned {
            let _ = src.execute_batch("COMMIT");
        }
        r?;
    }
    if file.metadata().map_err(|e| HostError::internal(format!("cannot read the copy: {e}")))?.len() >= 100 {
        file.seek(SeekFrom::Start(18))
            .and_then(|_| file.write_all(&[1, 1]))
            .map_err(|e| write_error("cannot write the copy", &e))?;
        file.sync_all().map_err(|e| write_error("cannot write the copy", &e))?;
    }
    let copy = Connection::open_with_flags(tmp, OpenFlags::SQLITE_OPEN_READ_ONLY | nofollow)?;
    Ok(integrity_lines(&copy))
}

/// `PRAGMA integrity_check`'s lines on `conn` (`["ok"]` when healthy; an error is one line).
pub fn integrity_lines(conn: &Connection) -> Vec<String> {
    match conn.prepare("PRAGMA integrity_check").and_then(|mut st| {
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    }) {
        Ok(l) => l,
        Err(e) => vec![e.to_string()],
    }
}

/// An I/O error while writing a copy: `disk_full` when the disk is full, else `internal`.
fn write_error(what: &str, e: &std::io::Error) -> HostError {
    let code = if files::is_no_space(e) { ErrorCode::DiskFull } else { ErrorCode::Internal };
    HostError::new(code, format!("{what}: {e}"))
}

/// A failed [`files::write_new`] of a copy, as the error a reply carries.
fn copy_failed(target: &Path, e: WriteFailed<HostError>) -> HostError {
    match e {
        WriteFailed::Content(e) => e,
        WriteFailed::File(WriteError::Io { source, .. }) => {
            write_error(&format!("cannot write the copy {}", target.display()), &source)
        }
        WriteFailed::File(e) => HostError::internal(e.to_string()),
    }
}

/// Make a copy of `src` (a connection to the database, not inside a write transaction) of `kind`
/// in `dir` (created 0700 when missing), named with `at_ms` and `schema`: the module comment says
/// how. A name already taken (two copies in one second) moves on by a second. Stale temp files in
/// `dir` (an hour older than `at_ms`) are removed first. A copy that fails its check because the
/// database itself fails it is `db_corrupt` (the caller reports the damage: the salvage policy,
/// reliability.md §7), any other failed check `internal`.
pub fn make_copy(
    src: &Connection,
    dir: &Path,
    kind: Kind,
    at_ms: i64,
    schema: u32,
    stop: &dyn Fn() -> bool,
) -> HostResult<Made> {
    files::private_dir(dir).map_err(|e| {
        HostError::new(
            if files::is_no_space(&e) { ErrorCode::DiskFull } else { ErrorCode::Internal },
            format!("cannot use the backups folder {}: {e}", dir.display()),
        )
    })?;
    remove_stale_temps(dir, at_ms);
    let mut at = at_ms - at_ms.rem_euclid(1000);
    for _ in 0..60 {
        let name = copy_file_name(kind, at, schema);
        let path = dir.join(&name);
        let made = files::write_new(&path, files::PRIVATE, Existing::Refuse, |tmp, file| {
            let lines = fill_copy(src, tmp, file, stop)?;
            if lines == ["ok"] {
                return Ok(());
            }
            // a page-for-page copy that fails its check: is the database itself damaged?
            let source = integrity_lines(src);
            if source != ["ok"] {
                return Err(HostError::new(
                    ErrorCode::DbCorrupt,
                    format!("the database is damaged (integrity_check: {})", source.join("; ")),
                ));
            }
            Err(HostError::internal(format!(
                "the copy failed its check (integrity_check: {}); it was removed",
                lines.join("; ")
            )))
        });
        match made {
            Ok(()) => {
                let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                return Ok(Made { id: copy_id(&name).to_owned(), path, bytes, at_ms: at, kind, schema });
            }
            Err(WriteFailed::File(WriteError::Exists { .. })) => at += 1000,
            Err(e) => return Err(copy_failed(&path, e)),
        }
    }
    Err(HostError::internal(format!("no free name for a {} copy in {}", kind.as_str(), dir.display())))
}

/// Open a copy to read it: read-only and `immutable` (a copy is never written: no lock, no
/// `-wal`/`-shm` made beside it), never through a symbolic link.
pub fn open_copy(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(file_uri(path, "immutable=1"), flags)?;
    conn.execute_batch("PRAGMA trusted_schema=OFF; PRAGMA cell_size_check=ON;")?;
    Ok(conn)
}

/// The schema version of an open copy.
pub fn copy_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Chats in a copy (not in the trash), read the way its schema version keeps them; `None` when
/// the copy cannot be read.
pub fn copy_sessions(path: &Path) -> Option<u64> {
    let c = open_copy(path).ok()?;
    let trash_column: bool = c
        .query_row("SELECT count(*) FROM pragma_table_info('sessions') WHERE name = 'trashed_at'", [], |r| {
            r.get::<_, i64>(0)
        })
        .ok()?
        > 0;
    let sql = if trash_column {
        "SELECT count(*) FROM sessions WHERE trashed_at IS NULL"
    } else {
        "SELECT count(*) FROM sessions"
    };
    c.query_row(sql, [], |r| r.get::<_, i64>(0)).ok().map(|n| n.max(0) as u64)
}

/// Every copy in `dir` (names of a copy's exact shape, regular files only), newest first.
pub fn list_dir(dir: &Path) -> Vec<Listed> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten().take(100_000) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(n) = parse_copy_name(name) else { continue };
        let Ok(md) = std::fs::symlink_metadata(e.path()) else { continue };
        if !md.is_file() {
            continue;
        }
        let mtime_ns = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        out.push(Listed {
            id: copy_id(name).to_owned(),
            kind: n.kind,
            at_ms: n.at_ms,
            schema: n.schema,
            path: e.path(),
            bytes: md.len(),
            mtime_ns,
        });
    }
    out.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then_with(|| b.id.cmp(&a.id)));
    out
}

/// Remove the temp files of copies in `dir` last changed over an hour before `now_ms` (left by
/// a copy that died: a kill, a power cut). Returns how many.
pub fn remove_stale_temps(dir: &Path, now_ms: i64) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in rd.flatten().take(100_000) {
        let name = e.file_name();
        if !name.to_str().is_some_and(is_copy_temp) {
            continue;
        }
        let Ok(md) = std::fs::symlink_metadata(e.path()) else { continue };
        let Some(changed) = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
        else {
            continue;
        };
        if md.is_file()
            && now_ms - changed > backups::STALE_TEMP_MS
            && files::remove_file_no_follow(&e.path()).is_ok()
        {
            tracing::info!(file = %e.path().display(), "removed a stale temp file of a copy");
            n += 1;
        }
    }
    n
}

/// Remove the copies `ids` from `dir` (each a copy's id, checked again here). Returns the ids
/// removed.
pub fn remove_copies(dir: &Path, ids: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for id in ids {
        let Some(name) = backups::file_name_of_id(id) else { continue };
        match files::remove_file_no_follow(&dir.join(&name)) {
            Ok(()) => {
                tracing::info!(copy = %id, "removed a copy (rotation)");
                out.push(id.clone());
            }
            Err(e) => tracing::warn!(copy = %id, error = %e, "could not remove a copy"),
        }
    }
    if !out.is_empty() {
        files::sync_dir(&dir.join("x"));
    }
    out
}

/// Keep the newest `keep` copies of `kind` in `dir`, remove the others.
pub fn keep_newest(dir: &Path, kind: Kind, keep: usize) -> Vec<String> {
    let of_kind: Vec<(String, i64)> =
        list_dir(dir).into_iter().filter(|c| c.kind == kind).map(|c| (c.id, c.at_ms)).collect();
    remove_copies(dir, &backups::beyond_newest(&of_kind, keep))
}

/// The pre-migration copy (called by the open path under the migration's write lock, before the
/// first migration statement): a copy of the database at `db`, at schema `found`, in the
/// `backups` folder beside it. The file system must have the database's size plus 64 MiB free;
/// otherwise, or when any step fails, nothing is migrated and the open fails with an error that
/// says what to free and where the copy was to go (`disk_full` when there is no space).
pub fn premigration_copy(db: &Path, found: u32, now_ms: i64) -> Result<Made, StoreError> {
    let dir = crate::util::paths::backups_dir_for(db);
    let size = std::fs::metadata(db).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(crate::util::paths::sidecar(db, "-wal")).map(|m| m.len()).unwrap_or(0);
    let needs = backups::premigration_needs(size);
    let latest = super::migrate::LATEST;
    let refuse = |why: String, space: bool| {
        format!(
            "the database was not upgraded from schema {found} to {latest}: Keepsake makes a copy of it first, in \
             {}, and {why}. Nothing was changed; the database is as it was and the previous keepsake-host can \
             still read it. {}",
            dir.display(),
            if space {
                "Free some space there (or move older copies out of that folder) and start again"
            } else {
                "Check that the folder can be written (keepsake-host doctor; the log beside the database says more) \
                 and start again"
            }
        )
    };
    if let Some((avail, _)) = files::free_space(&dir) {
        if avail < needs {
            return Err(StoreError::DiskFull(refuse(
                format!(
                    "the disk has {} MiB free where the copy needs {} MiB (the database's size plus 64 MiB)",
                    avail / (1024 * 1024),
                    needs.div_ceil(1024 * 1024)
                ),
                true,
            )));
        }
    }
    let src = open::open_read_only(db)?;
    let started = std::time::Instant::now();
    let made = make_copy(&src, &dir, Kind::Premigration, now_ms, found, &|| false).map_err(|e| {
        let space = e.code == ErrorCode::DiskFull || e.message.contains("file-size limit");
        let msg = refuse(format!("the copy could not be made ({})", e.message), space);
        match e.code {
            ErrorCode::DiskFull => StoreError::DiskFull(msg),
            ErrorCode::DbCorrupt => StoreError::Corrupt(e.message),
            ErrorCode::Busy => StoreError::Busy(msg),
            _ => StoreError::Other(msg),
        }
    })?;
    tracing::info!(
        copy = %made.path.display(),
        bytes = made.bytes,
        ms = started.elapsed().as_millis() as u64,
        from = found,
        to = latest,
        "pre-migration copy made"
    );
    Ok(made)
}
