//! Inspection, integrity, backup and images.get.

use std::path::Path;

use rusqlite::{Connection, MAIN_DB};
use serde_json::{json, Value};

use super::blobs::get_blob;
use super::connection::Store;
use super::migrate::{self, LATEST};
use super::renditions::image_sha;
use super::window::{binding, live_len};
use crate::domain::dataurl::base64_encode;
use crate::protocol::{HostError, HostResult};
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

/// `keepsake-host backup`: SQLite's backup API from a read-only connection into a new 0600 file.
/// The backup API copies pages without interpreting them, so a database that is damaged but
/// still opens is copied as it is; reports the copy's `integrity_check` lines and how many API
/// keys it holds as text. A file SQLite cannot open at all is `db_corrupt`, and nothing is
/// created.
pub fn backup_file(db: &Path, dest: &Path) -> HostResult<BackupReport> {
    if let Some(s) = super::salvage::check::too_short(db) {
        super::salvage::marker::note_damage(db, &s);
        return Err(HostError::new(
            crate::protocol::ErrorCode::DbCorrupt,
            format!("the database is damaged: {s}"),
        ));
    }
    let conn = super::open::open_read_only(db).map_err(|e| {
        if let super::error::StoreError::Corrupt(m) = &e {
            super::salvage::marker::note_damage(db, m);
        }
        HostError::from(e)
    })?;
    if dest.exists() {
        return Err(HostError::conflict(format!("{} already exists; choose a new file", dest.display())));
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(dest).map_err(|e| HostError::internal(format!("cannot create {}: {e}", dest.display())))?;
    if let Err(e) = conn.backup(MAIN_DB, dest, None) {
        // our own partial output; the source is untouched
        let _ = std::fs::remove_file(dest);
        let e = HostError::from(e);
        return Err(HostError::new(e.code, format!("backup failed: {}", e.message)));
    }
    // A backup is one self-contained file: rollback journal mode, so opening it never needs
    // (or leaves) a -wal/-shm beside it.
    let copy = Connection::open_with_flags(
        dest,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    let _ = copy.query_row("PRAGMA journal_mode=DELETE", [], |_| Ok(()));
    let lines: Vec<String> = match copy.prepare("PRAGMA integrity_check").and_then(|mut st| {
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    }) {
        Ok(l) => l,
        Err(e) => vec![e.to_string()],
    };
    if lines != ["ok"] {
        super::salvage::marker::note_damage(db, &format!("integrity_check: {}", lines.join("; ")));
    }
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
