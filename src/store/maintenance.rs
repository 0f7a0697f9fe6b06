//! Inspection, integrity, backup and images.get.

use std::fs::File;
use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::blobs::get_blob;
use super::connection::Store;
use super::copies::fill_copy;
use super::migrate::{self, LATEST};
use super::renditions::image_sha;
use super::window::{binding, live_len};
use crate::domain::dataurl::base64_encode;
use crate::protocol::{HostError, HostResult};
use crate::util::files::{self, Existing, WriteFailed};
use crate::util::paths::sidecar;

fn count(conn: &Connection, table: &str) -> HostResult<i64> {
    Ok(conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
}

fn file_size(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

impl Store {
    /// `images.get(ref)` → `{mime, bytes}` with bytes as standard base64.
    pub fn images_get(&mut self, r: &str) -> HostResult<Value> {
        let sha = image_sha(r)?;
        self.read(|tx| match get_blob(tx, &sha)? {
            Some((mime, bytes)) => Ok(json!({"mime": mime, "bytes": base64_encode(&bytes)})),
            None => Err(HostError::not_found(format!("no image {sha}"))),
        })
    }

    /// `PRAGMA quick_check` or `integrity_check` result lines (`["ok"]` when healthy).
    pub fn integrity(&self, full: bool) -> HostResult<Vec<String>> {
        let pragma = if full { "PRAGMA integrity_check" } else { "PRAGMA quick_check" };
        let mut stmt = self.conn().prepare(pragma)?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Counts, sizes, schema version and integrity (`keepsake-host inspect`).
    pub fn inspect(&mut self) -> HostResult<Value> {
        let path = self.path().to_path_buf();
        let integrity = self.integrity(true);
        let integrity = self.observe(integrity)?;
        if integrity != ["ok"] {
            self.note_damage(&format!("integrity_check: {}", integrity.join("; ")));
        }
        self.read(|tx| {
            let image_bytes: i64 =
                tx.query_row("SELECT coalesce(sum(byte_length), 0) FROM images", [], |r| r.get(0))?;
            let page_size: i64 = tx.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            let journal: String = tx.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
            Ok(json!({
                "path": path.display().to_string(),
                "schemaVersion": migrate::schema_version(tx)?,
                "latestSchemaVersion": LATEST,
                "journalMode": journal,
                "pageSize": page_size,
                "sizes": {
                    "database": file_size(&path),
                    "wal": file_size(&sidecar(&path, "-wal")),
                },
                "counts": {
                    "historyEntries": live_len(tx)?,
                    "sessions": tx.query_row("SELECT count(*) FROM sessions WHERE trashed_at IS NULL", [], |r| r.get::<_, i64>(0))?,
                    "trash": tx.query_row("SELECT count(*) FROM sessions WHERE trashed_at IS NOT NULL", [], |r| r.get::<_, i64>(0))?,
                    "sessionEntries": count(tx, "session_entries")?,
                    "settings": count(tx, "settings")?,
                    "images": count(tx, "images")?,
                    "imageRefs": count(tx, "image_refs")?,
                    "changes": count(tx, "changes")?,
                    "clientRequests": count(tx, "client_requests")?,
                },
                "imageBytes": image_bytes,
                "activeSessionId": binding(tx)?,
                "integrity": integrity,
            }))
        })
        .and_then(|mut v| {
            // where the API keys are (counts only: no key is ever printed)
            v["apiKeys"] = self.api_keys(false)?.to_json();
            Ok(v)
        })
    }
}

/// What `keepsake-host backup` made.
#[derive(Debug, Clone)]
pub struct BackupReport {
    /// The copy's `integrity_check` lines (`["ok"]` when healthy).
    pub integrity: Vec<String>,
    /// API keys the copy holds as text (stored while no secret store was reachable).
    pub keys_in_file: usize,
}

/// `keepsake-host backup`: SQLite's backup API from a read-only connection into `dest`, a new
/// 0600 file (`util::files::write_new`, [`Existing::Refuse`]: a temp file beside `dest`, put there
/// only when complete; an existing file or link at `dest` is refused and left alone). The backup
/// API copies pages without interpreting them, so a database that is damaged but still opens is
/// copied as it is; reports the copy's `integrity_check` lines and how many API keys it holds as
/// text. A file SQLite cannot open at all is `db_corrupt`, and nothing is created.
///
/// The copy is made as every copy Keepsake keeps is (`copies::fill_copy`: one read snapshot, the
/// journal in memory, the one-file rollback format set through the temp file's own handle).
pub fn backup_file(db: &Path, dest: &Path) -> Result<BackupReport, WriteFailed<HostError>> {
    if let Some(s) = super::salvage::check::too_short(db) {
        super::salvage::marker::note_damage(db, &s);
        return Err(WriteFailed::Content(HostError::new(
            crate::protocol::ErrorCode::DbCorrupt,
            format!("the database is damaged: {s}"),
        )));
    }
    let conn = super::open::open_read_only(db).map_err(|e| {
        if let super::error::StoreError::Corrupt(m) = &e {
            super::salvage::marker::note_damage(db, m);
        }
        WriteFailed::Content(HostError::from(e))
    })?;
    files::write_new(dest, files::PRIVATE, Existing::Refuse, |tmp, file| backup_into(db, &conn, tmp, file))
}

/// Fill the new file `tmp` (open as `file`) with a backup of `conn` (`copies::fill_copy`), then
/// check it: a copy that fails `integrity_check` is a faithful copy of a damaged database.
fn backup_into(db: &Path, conn: &Connection, tmp: &Path, file: &mut File) -> HostResult<BackupReport> {
    let lines = fill_copy(conn, tmp, file, &|| false)?;
    if lines != ["ok"] {
        super::salvage::marker::note_damage(db, &format!("integrity_check: {}", lines.join("; ")));
    }
    let nofollow = rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let copy = Connection::open_with_flags(tmp, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | nofollow)?;
    let keys_in_file = super::tx::setting_value(&copy, crate::domain::secrets::PROVIDERS)
        .ok()
        .flatten()
        .map_or(0, |p| crate::domain::secrets::plaintext_count(&p));
    Ok(BackupReport { integrity: lines, keys_in_file })
}

impl Store {
    /// The journal mode, if readable.
    pub fn conn_journal_mode(&self) -> Option<String> {
        self.conn().query_row("PRAGMA journal_mode", [], |r| r.get(0)).ok()
    }
}
