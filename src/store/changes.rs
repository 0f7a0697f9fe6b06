//! The change log (storage-model §2.8): one row per committed write, behind `changed` events,
//! cross-process announcements and `changes.since`.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::{ChangeSet, Store};
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

fn floor(conn: &Connection) -> HostResult<i64> {
    let v: Option<String> =
        conn.query_row("SELECT value FROM meta WHERE key = 'changes_floor'", [], |r| r.get(0)).optional()?;
    Ok(v.and_then(|s| s.parse().ok()).unwrap_or(0))
}

impl Store {
    /// `changes.since(seq)`: the union of what changed after `seq`, or `{reset: true}` when
    /// `seq` predates the retained log (or comes from the future: another database).
    pub fn changes_since(&mut self, since: i64) -> HostResult<Value> {
        self.read(|tx| {
            let current = current_seq(tx)?;
            if since < floor(tx)? || since > current {
                return Ok(json!({"reset": true, "seq": current}));
            }
            let mut set = ChangeSet::default();
            let mut stmt = tx.prepare("SELECT areas FROM changes WHERE seq > ?1 ORDER BY seq")?;
            let rows = stmt.query_map([since], |r| r.get::<_, String>(0))?;
            for r in rows {
                if let Ok(v) = serde_json::from_str::<Value>(&r?) {
                    set.merge_areas(&v);
                }
            }
            Ok(json!({"reset": false, "seq": current, "areas": set.areas_json()}))
        })
    }

    /// Changes committed by *other* processes after `after` (for the cross-process poller).
    pub fn foreign_changes_after(&mut self, after: i64) -> HostResult<Vec<ChangeEvent>> {
        let origin = self.origin.clone();
        self.read(|tx| {
            let mut stmt = tx.prepare(
                "SELECT seq, areas, client_request_id, origin FROM changes WHERE seq > ?1 ORDER BY seq",
            )?;
            let rows = stmt.query_map([after], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            let mut out = Vec::new();
            for r in rows {
                let (seq, areas, crid, o) = r?;
                out.push(ChangeEvent {
                    seq,
                    areas: if o == origin {
                        Value::Null
                    } else {
                        serde_json::from_str(&areas).unwrap_or(Value::Null)
                    },
                    client_request_id: crid,
                });
            }
            Ok(out)
        })
    }

    /// `PRAGMA data_version`: changes whenever another connection commits.
    pub fn data_version(&self) -> HostResult<i64> {
        Ok(self.conn().query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    pub fn current_seq(&mut self) -> HostResult<i64> {
        self.read(|tx| current_seq(tx))
    }
}
