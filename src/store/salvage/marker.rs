//! The damage marker, `<db>.damaged` (step 1 of the policy in `mod.rs`): a host that meets
//! `SQLITE_CORRUPT` or `SQLITE_NOTADB`, or damage a content check of its own finds, stops
//! writing and leaves this marker beside the database; every host refuses writes while it
//! exists, and the next start deals with it.
//!
//! A leaf: it depends on nothing else in `store/`, so every module that can meet damage may use it.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::util::files::private_new;
use crate::util::paths::sidecar;
use crate::util::time::now_ms;

/// `<db>.damaged`: written when a host meets the damage.
pub fn marker_path(db: &Path) -> PathBuf {
    sidecar(db, ".damaged")
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
