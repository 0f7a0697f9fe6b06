//! Is the file damaged? `PRAGMA integrity_check` on a read-only connection, and a length no
//! SQLite database can have.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::store::error::{is_corrupt, StoreError};
use crate::store::open;

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
