//! The recovery record, `<db>.recovery.json` (step 4 of the policy in `mod.rs`): what came
//! back, per table, and where the damaged copy is; and the damaged copies themselves
//! (`<db>.corrupt-<UTC time>`), found by their names.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::util::files::{write_bytes, Existing, WriteError, PRIVATE};
use crate::util::paths::sidecar;

/// What a damaged copy's name has between the database's name and its time.
pub(super) const ASIDE_INFIX: &str = ".corrupt-";
/// The time in a damaged copy's name (UTC).
pub(super) const ASIDE_TIME: &str = "%Y%m%dT%H%M%SZ";

/// `<db>.recovery.json`: the last recovery (what came back, where the damaged copy is).
pub fn record_path(db: &Path) -> PathBuf {
    sidecar(db, ".recovery.json")
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

/// The last recovery record, if any.
pub fn load_record(db: &Path) -> Option<Recovery> {
    serde_json::from_slice(&std::fs::read(record_path(db)).ok()?).ok()
}

pub(super) fn save_record(db: &Path, r: &Recovery) -> io::Result<()> {
    let mut doc = serde_json::to_vec_pretty(r).map_err(io::Error::other)?;
    doc.push(b'\n');
    write_bytes(&record_path(db), PRIVATE, Existing::ReplaceOwn, &doc).map_err(|e| match e {
        WriteError::Io { source, .. } => source,
        refused => io::Error::other(refused.to_string()),
    })
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
