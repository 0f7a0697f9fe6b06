//! The change log's rows (storage-model §2.8): one written in each committing write's own
//! transaction ([`record`]), the log and the recorded `clientRequestId`s pruned, and the latest
//! sequence number read. The rows are behind `changed` events, cross-process announcements and
//! `changes.since`; the operations' reads of the log are in `changes.rs`.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::tx::ChangeSet;
use crate::protocol::HostResult;

/// At least this many changes are kept for `changes.since` (storage-model §2.8).
pub const CHANGES_KEPT: i64 = 1_000;
/// Prune only once this many extra rows piled up, so most writes skip the DELETE.
const CHANGES_SLACK: i64 = 200;
/// Client request ids are kept at least 24 h and at least the latest 1,000 (§2.8).
pub const CLIENT_IDS_KEPT: i64 = 1_000;
pub const CLIENT_IDS_MIN_AGE_MS: i64 = 24 * 60 * 60 * 1000;

/// A committed change, as announced on every port.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeEvent {
    pub seq: i64,
    pub areas: Value,
    pub client_request_id: Option<String>,
}

impl ChangeEvent {
    /// `{"event": "changed", "seq", "areas", "clientRequestId"?}`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("event".into(), json!("changed"));
        m.insert("seq".into(), json!(self.seq));
        m.insert("areas".into(), self.areas.clone());
        if let Some(c) = &self.client_request_id {
            m.insert("clientRequestId".into(), json!(c));
        }
        Value::Object(m)
    }
}

pub(super) fn record(
    conn: &Connection,
    changes: &ChangeSet,
    client_request_id: Option<&str>,
    origin: &str,
    now: i64,
) -> HostResult<ChangeEvent> {
    let areas = changes.areas_json();
    conn.execute(
        "INSERT INTO changes (changed_at, areas, client_request_id, origin) VALUES (?1, ?2, ?3, ?4)",
        params![now, areas.to_string(), client_request_id, origin],
    )?;
    let seq = conn.last_insert_rowid();
    if seq % CHANGES_SLACK == 0 {
        let floor = seq - CHANGES_KEPT;
        if floor > 0 {
            conn.execute("DELETE FROM changes WHERE seq <= ?1", [floor])?;
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('changes_floor', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value
                 WHERE CAST(meta.value AS INTEGER) < CAST(excluded.value AS INTEGER)",
                [floor.to_string()],
            )?;
        }
    }
    Ok(ChangeEvent { seq, areas, client_request_id: client_request_id.map(str::to_owned) })
}

pub(super) fn prune_client_requests(conn: &Connection, now: i64) -> HostResult<()> {
    let count: i64 = conn.query_row("SELECT count(*) FROM client_requests", [], |r| r.get(0))?;
    if count > CLIENT_IDS_KEPT + CHANGES_SLACK {
        conn.execute(
            "DELETE FROM client_requests WHERE created_at < ?1 AND rowid NOT IN
             (SELECT rowid FROM client_requests ORDER BY created_at DESC, rowid DESC LIMIT ?2)",
            params![now - CLIENT_IDS_MIN_AGE_MS, CLIENT_IDS_KEPT],
        )?;
    }
    Ok(())
}

/// The latest committed change sequence number (0 when none).
pub fn current_seq(conn: &Connection) -> HostResult<i64> {
    let seq: Option<i64> = conn
        .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'changes'", [], |r| r.get(0))
        .optional()?;
    Ok(seq.unwrap_or(0))
}

pub(super) fn floor(conn: &Connection) -> HostResult<i64> {
    let v: Option<String> =
        conn.query_row("SELECT value FROM meta WHERE key = 'changes_floor'", [], |r| r.get(0)).optional()?;
    Ok(v.and_then(|s| s.parse().ok()).unwrap_or(0))
}
