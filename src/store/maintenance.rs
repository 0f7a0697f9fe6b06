//! Inspection, integrity, backup and images.get.

use std::path::Path;

use rusqlite::{Connection, MAIN_DB};
use serde_json::{json, Value};

use super::blobs::get_blob;
use super::history::{binding, live_len};
use super::migrate::{self, LATEST};
use super::Store;
use crate::domain::dataurl::base64_encode;
use crate::domain::entry::parse_image_ref;
use crate::protocol::{HostError, HostResult};

fn count(conn: &Connection, table: &str) -> HostResult<i64> {
    Ok(conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
}

fn file_size(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

/// Sidecar path (`-wal`, `-shm`).
pub fn sidecar(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

impl Store {
    /// `images.get(ref)` → `{mime, bytes}` with bytes as standard base64.
    pub fn images_get(&mut self, r: &str) -> HostResult<Value> {
        let sha = parse_image_ref(r)
            .or_else(|| {
                (r.len() == 64 && parse_image_ref(&format!("keepsake-image:sha256:{r}")).is_some())
                    .then_some(r)
            })
            .ok_or_else(|| HostError::bad_request("ref must be keepsake-image:sha256:<64 lower-case hex>"))?
            .to_owned();
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
        let integrity = self.integrity(true)?;
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
                    "sessions": count(tx, "sessions")?,
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
    }

    /// Online backup through SQLite's backup API (never a file copy) to a new 0600 file.
    pub fn backup_to(&self, dest: &Path) -> HostResult<()> {
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
        self.conn()
            .backup(MAIN_DB, dest, None)
            .map_err(|e| HostError::internal(format!("backup failed: {e}")))?;
        Ok(())
    }
}

impl Store {
    /// The journal mode, if readable.
    pub fn conn_journal_mode(&self) -> Option<String> {
        self.conn().query_row("PRAGMA journal_mode", [], |r| r.get(0)).ok()
    }
}
