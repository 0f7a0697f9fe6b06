//! A session as the local tables hold it, read for sync: its row's synced columns and its
//! entries' layout (chosen path, branches, forks) as entryIds — no entry JSON is read.

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::domain::sync::regs::{Name, Trash};
use crate::domain::sync::tree::Layout;
use crate::domain::trash::Reason;
use crate::protocol::HostResult;

/// The synced columns of a session row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: Name,
    pub pinned: bool,
    pub created_at: i64,
    pub trash: Option<Trash>,
    pub extra: Option<Value>,
}

impl Row {
    /// Moved to the trash by this device's `maxSessions` cap: a local mark, never synced.
    pub fn evicted(&self) -> bool {
        self.trash.as_ref().is_some_and(|t| t.reason == Reason::Evicted.as_str())
    }
}

pub(in crate::store) fn row(conn: &Connection, sid: &str) -> HostResult<Option<Row>> {
    Ok(conn
        .prepare_cached(
            "SELECT name, name_auto, pinned, created_at, trashed_at, trash_reason, trash_origin, extra
             FROM sessions WHERE id = ?1",
        )?
        .query_row([sid], |r| {
            let trashed_at: Option<i64> = r.get(4)?;
            let origin: Option<String> = r.get(6)?;
            let extra: Option<String> = r.get(7)?;
            Ok(Row {
                name: Name { name: r.get(0)?, auto: r.get::<_, i64>(1)? != 0 },
                pinned: r.get::<_, i64>(2)? != 0,
                created_at: r.get(3)?,
                trash: trashed_at.map(|at| Trash {
                    at,
                    reason: String::new(),
                    origin: origin
                        .as_deref()
                        .and_then(|o| serde_json::from_str(o).ok())
                        .unwrap_or(Value::Null),
                }),
                extra: extra.and_then(|x| serde_json::from_str(&x).ok()),
            })
            .and_then(|mut row| {
                if let Some(t) = row.trash.as_mut() {
                    t.reason = r.get::<_, Option<String>>(5)?.unwrap_or_default();
                }
                Ok(row)
            })
        })
        .optional()?)
}

/// Session `sid`'s entries as entryIds: the chosen path, each branch, each fork. Rows without an
/// entryId (none since schema 5) are left out.
pub(in crate::store) fn layout(conn: &Connection, sid: &str) -> HostResult<Layout> {
    let mut out = Layout::default();
    let branches: Vec<(i64, String, u32)> = conn
        .prepare_cached("SELECT id, fork_entry_id, version FROM session_branches WHERE session_id = ?1")?
        .query_map([sid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut by_id = std::collections::HashMap::new();
    for (id, key, version) in branches {
        out.branches.insert((key.clone(), version), Vec::new());
        by_id.insert(id, (key, version));
    }
    let mut st = conn.prepare_cached(
        "SELECT entry_id, branch_id FROM session_entries WHERE session_id = ?1 AND entry_id IS NOT NULL
         ORDER BY branch_id, position, id",
    )?;
    let rows = st.query_map([sid], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?)))?;
    for r in rows {
        let (eid, branch) = r?;
        match branch.and_then(|b| by_id.get(&b)) {
            None if branch.is_none() => out.path.push(eid),
            None => {} // a row of a branch of another session: not this session's
            Some(k) => out.branches.get_mut(k).expect("listed").push(eid),
        }
    }
    let forks: Vec<(String, u32, u32)> = conn
        .prepare_cached("SELECT fork_entry_id, chosen, versions FROM session_forks WHERE session_id = ?1")?
        .query_map([sid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    out.forks = forks.into_iter().map(|(k, c, n)| (k, (c, n))).collect();
    Ok(out)
}

/// The stored JSON of the entry with this entryId, wherever it is.
pub(in crate::store) fn entry_json(conn: &Connection, eid: &str) -> HostResult<Option<Value>> {
    let raw: Option<String> = conn
        .prepare_cached("SELECT entry FROM session_entries WHERE entry_id = ?1")?
        .query_row([eid], |r| r.get(0))
        .optional()?;
    raw.map(|t| super::super::entries::parse_entry(&t, "entry")).transpose()
}

/// Whether a row with this entryId exists anywhere.
pub(in crate::store) fn has_entry(conn: &Connection, eid: &str) -> HostResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM session_entries WHERE entry_id = ?1")?
        .query_row([eid], |_| Ok(()))
        .optional()?
        .is_some())
}
