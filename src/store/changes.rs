//! The change log's reads (storage-model §2.8): `changes.since`, the changes other processes
//! committed (for the cross-process poller) and the sequence numbers. Its rows are written in
//! `changelog.rs`.

use serde_json::{json, Value};

use super::changelog::{current_seq, floor, ChangeEvent};
use super::connection::Store;
use super::tx::ChangeSet;
use crate::protocol::HostResult;

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
