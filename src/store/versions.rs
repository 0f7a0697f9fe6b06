//! Versions of a turn (docs/keeps.md "Versions"): Regenerate and Edit & resend keep what they
//! replace. A fork is keyed by the entryId of the entry before it (`''` = the start of the
//! conversation); at each fork one version is on the session's chosen path and the others are
//! branches (`session_branches`, their entries are rows with that `branch_id`). Switching a
//! version moves rows between the chosen path and a branch: no entry is copied or rewritten.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::bodies::{append_to_path, refresh_auto_name};
use super::entries::{self, renumber};
use super::rows::{path_len, row_entry, touched};
use super::salvage::marker::content_damage;
use super::tx::WriteTx;
use super::window::{live_state, set_window, trim};
use crate::domain::entry::entry_id;
use crate::domain::import::ImportFork;
use crate::protocol::{HostError, HostResult};

/// A fork and where its chosen path goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fork {
    pub fork_entry_id: String,
    pub chosen: u32,
    pub versions: u32,
}

impl Fork {
    pub fn to_json(&self) -> Value {
        json!({"forkEntryId": self.fork_entry_id, "chosen": self.chosen, "versions": self.versions})
    }
}

/// The forks of session `sid` that lie on its chosen path (their entry is on it, or `''`).
pub(super) fn visible_forks(conn: &Connection, sid: &str) -> HostResult<Vec<Fork>> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.fork_entry_id, f.chosen, f.versions FROM session_forks f
         WHERE f.session_id = ?1 AND (f.fork_entry_id = '' OR EXISTS (
             SELECT 1 FROM session_entries e WHERE e.entry_id = f.fork_entry_id AND e.session_id = ?1
               AND e.branch_id IS NULL))
         ORDER BY f.fork_entry_id",
    )?;
    let rows = stmt.query_map([sid], |r| {
        Ok(Fork { fork_entry_id: r.get(0)?, chosen: r.get(1)?, versions: r.get(2)? })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The forks as JSON (`forks` in `history.get` and `sessions.get`).
pub(super) fn forks_json(conn: &Connection, sid: &str) -> HostResult<Value> {
    Ok(Value::Array(visible_forks(conn, sid)?.iter().map(Fork::to_json).collect()))
}

/// The fork key before chosen-path position `p`: the entryId of the entry at `p − 1`, `''` at 0.
fn fork_key_at(conn: &Connection, sid: &str, p: usize) -> HostResult<String> {
    if p == 0 {
        return Ok(String::new());
    }
    let row = entries::path_row_at(conn, sid, p - 1)?
        .ok_or_else(|| HostError::internal(format!("session {sid:?} has no entry at {}", p - 1)))?;
    let e = row_entry(conn, row)?;
    entry_id(&e).map(str::to_owned).ok_or_else(|| content_damage("a stored entry has no entryId"))
}

fn fork(conn: &Connection, sid: &str, key: &str) -> HostResult<Option<(u32, u32)>> {
    Ok(conn
        .prepare_cached(
            "SELECT chosen, versions FROM session_forks WHERE session_id = ?1 AND fork_entry_id = ?2",
        )?
        .query_row(params![sid, key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Move the chosen-path rows from position `p` on into a new branch numbered `version`.
fn park_tail(w: &mut WriteTx, sid: &str, key: &str, p: usize, version: u32) -> HostResult<i64> {
    w.tx.execute(
        "INSERT INTO session_branches (session_id, fork_entry_id, version, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![sid, key, version, w.now],
    )?;
    let bid = w.tx.last_insert_rowid();
    w.tx.execute(
        "UPDATE session_entries SET branch_id = ?2, position = position - ?3
         WHERE session_id = ?1 AND branch_id IS NULL AND position >= ?3",
        params![sid, bid, p as i64],
    )?;
    Ok(bid)
}

fn set_count(w: &mut WriteTx, sid: &str) -> HostResult<()> {
    w.tx.execute(
        "UPDATE sessions SET entry_count = ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries::count_path(&w.tx, sid)? as i64, w.now],
    )?;
    Ok(())
}

/// Keep the chosen path from position `p` on as another version at its fork, and continue the
/// chosen path with `entry` instead. Returns the fork.
pub(super) fn branch(w: &mut WriteTx, sid: &str, p: usize, entry: &Value) -> HostResult<Fork> {
    if p >= path_len(&w.tx, sid)? {
        return Err(HostError::bad_request(
            "index must name an entry: there is nothing to keep as a version",
        ));
    }
    let key = fork_key_at(&w.tx, sid, p)?;
    let (old, new, total) = match fork(&w.tx, sid, &key)? {
        Some((chosen, versions)) => (chosen, versions + 1, versions + 1),
        None => (1, 2, 2),
    };
    park_tail(w, sid, &key, p, old)?;
    w.tx.execute(
        "INSERT INTO session_forks (session_id, fork_entry_id, chosen, versions) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(session_id, fork_entry_id) DO UPDATE SET chosen = excluded.chosen, versions = excluded.versions",
        params![sid, key, new, total],
    )?;
    set_count(w, sid)?;
    w.reindex.insert(sid.to_owned());
    append_to_path(w, sid, std::slice::from_ref(entry))?;
    Ok(Fork { fork_entry_id: key, chosen: new, versions: total })
}

/// Make version `version` of the fork at `key` the chosen path of session `sid`; the path it
/// replaces becomes a version in turn. `None` when it already is.
pub(super) fn switch(w: &mut WriteTx, sid: &str, key: &str, version: u32) -> HostResult<Option<Fork>> {
    let Some((chosen, versions)) = fork(&w.tx, sid, key)? else {
        return Err(HostError::not_found(format!("no versions at fork {key:?} in this chat")));
    };
    if version == 0 || version > versions {
        return Err(HostError::bad_request(format!("version must be 1–{versions}")));
    }
    let p = if key.is_empty() {
        0
    } else {
        let pos: Option<i64> = w
            .tx
            .query_row(
                "SELECT position FROM session_entries WHERE entry_id = ?1 AND session_id = ?2 AND branch_id IS NULL",
                params![key, sid],
                |r| r.get(0),
            )
            .optional()?;
        match pos {
            Some(pos) => pos.max(0) as usize + 1,
            None => {
                return Err(HostError::not_found(format!(
                    "fork {key:?} is not on the chat's chosen path (switch the version that holds it first)"
                )))
            }
        }
    };
    if version == chosen {
        return Ok(None);
    }
    let target: i64 = w.tx.query_row(
        "SELECT id FROM session_branches WHERE session_id = ?1 AND fork_entry_id = ?2 AND version = ?3",
        params![sid, key, version],
        |r| r.get(0),
    )?;
    park_tail(w, sid, key, p, chosen)?;
    w.tx.execute(
        "UPDATE session_entries SET branch_id = NULL, position = position + ?2 WHERE branch_id = ?1",
        params![target, p as i64],
    )?;
    w.tx.execute("DELETE FROM session_branches WHERE id = ?1", [target])?;
    renumber(&w.tx, sid, None, p)?;
    w.tx.execute(
        "UPDATE session_forks SET chosen = ?3 WHERE session_id = ?1 AND fork_entry_id = ?2",
        params![sid, key, version],
    )?;
    set_count(w, sid)?;
    refresh_auto_name(w, sid, &[])?;
    touched(w, sid);
    // the live window shows the version switched to, then trims like an append
    let (bound, from) = live_state(&w.tx)?;
    if bound == sid {
        w.changes.history = true;
        if p < from {
            set_window(w, sid, p)?;
        }
        trim(w)?;
    }
    Ok(Some(Fork { fork_entry_id: key.to_owned(), chosen: version, versions }))
}

/// Forks keyed by entries that moved from session `from` to `to` (into the trash) go with them,
/// and so, in turn, do forks keyed by the entries of the branches they carry.
pub(super) fn carry(w: &mut WriteTx, from: &str, to: &str, moved: Vec<String>) -> HostResult<()> {
    let mut keys = moved;
    while let Some(key) = keys.pop() {
        let n = w.tx.execute(
            "UPDATE session_forks SET session_id = ?3 WHERE session_id = ?1 AND fork_entry_id = ?2",
            params![from, key, to],
        )?;
        if n == 0 {
            continue;
        }
        let branches: Vec<i64> = {
            let mut stmt =
                w.tx.prepare("SELECT id FROM session_branches WHERE session_id = ?1 AND fork_entry_id = ?2")?;
            let r = stmt.query_map(params![from, key], |r| r.get(0))?;
            r.collect::<Result<_, _>>()?
        };
        for b in branches {
            w.tx.execute("UPDATE session_branches SET session_id = ?2 WHERE id = ?1", params![b, to])?;
            w.tx.execute("UPDATE session_entries SET session_id = ?2 WHERE branch_id = ?1", params![b, to])?;
            let mut stmt = w.tx.prepare("SELECT entry_id FROM session_entries WHERE branch_id = ?1")?;
            let inner = stmt.query_map([b], |r| r.get::<_, Option<String>>(0))?;
            for id in inner {
                keys.extend(id?);
            }
        }
    }
    Ok(())
}

/// Every other version of session `sid`: `(fork, version, entries)` in a stable order.
pub(super) fn branches(conn: &Connection, sid: &str) -> HostResult<Vec<(String, u32, Vec<Value>)>> {
    let ids: Vec<(i64, String, u32)> = {
        let mut stmt = conn.prepare_cached(
            "SELECT id, fork_entry_id, version FROM session_branches WHERE session_id = ?1
             ORDER BY fork_entry_id, version",
        )?;
        let r = stmt.query_map([sid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        r.collect::<Result<_, _>>()?
    };
    let mut out = Vec::with_capacity(ids.len());
    for (bid, key, version) in ids {
        let mut stmt = conn
            .prepare_cached("SELECT entry FROM session_entries WHERE branch_id = ?1 ORDER BY position, id")?;
        let rows = stmt.query_map([bid], |r| r.get::<_, String>(0))?;
        let entries = rows.map(|r| entries::parse_entry(&r?, "entry")).collect::<HostResult<Vec<_>>>()?;
        out.push((key, version, entries));
    }
    Ok(out)
}

/// The `versions` of an export (format 2): per fork, its chosen version, how many there are and
/// the entries of the others.
pub(super) fn export_json(conn: &Connection, sid: &str) -> HostResult<Vec<Value>> {
    let all = branches(conn, sid)?;
    let mut stmt = conn.prepare_cached(
        "SELECT fork_entry_id, chosen, versions FROM session_forks WHERE session_id = ?1 ORDER BY fork_entry_id",
    )?;
    let forks: Vec<(String, u32, u32)> =
        stmt.query_map([sid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
    Ok(forks
        .into_iter()
        .map(|(key, chosen, count)| {
            let others: Vec<Value> = all
                .iter()
                .filter(|(k, _, _)| *k == key)
                .map(|(_, v, e)| json!({"version": v, "entries": e}))
                .collect();
            json!({"forkEntryId": key, "chosen": chosen, "count": count, "others": others})
        })
        .collect())
}

/// Store the versions of an imported session (after its chosen path); their entries are ingested
/// already (image references, not data URLs). `ids`: the entryIds the chosen path's entries had
/// in the document → the ones they were stored with (an entryId another stored entry has is
/// replaced): a fork keyed by a replaced entryId follows it, so the versions stay where they were.
pub(super) fn import(
    w: &mut WriteTx,
    sid: &str,
    forks: &[ImportFork],
    mut ids: std::collections::HashMap<String, String>,
) -> HostResult<()> {
    // every version's entries get their ids first: a fork may be keyed by one of them
    let mut lists: Vec<Vec<Vec<Value>>> = Vec::with_capacity(forks.len());
    let mut given = std::collections::HashSet::new();
    for f in forks {
        let mut out = Vec::with_capacity(f.others.len());
        for (_, list) in &f.others {
            let mut stored = Vec::with_capacity(list.len());
            for e in list {
                let mut s = entries::with_entry_id(&w.tx, e)?;
                if !given.insert(entry_id(&s).unwrap_or_default().to_owned()) {
                    // the document names one entryId twice: the second gets one of its own
                    s[crate::domain::entry::ENTRY_ID] = Value::String(entries::new_entry_id());
                    given.insert(entry_id(&s).unwrap_or_default().to_owned());
                }
                if let (Some(old), Some(new)) = (entry_id(e), entry_id(&s)) {
                    ids.insert(old.to_owned(), new.to_owned());
                }
                stored.push(s);
            }
            out.push(stored);
        }
        lists.push(out);
    }
    for (f, stored) in forks.iter().zip(lists) {
        let key = ids.get(&f.fork_entry_id).cloned().unwrap_or_else(|| f.fork_entry_id.clone());
        w.tx.execute(
            "INSERT OR IGNORE INTO session_forks (session_id, fork_entry_id, chosen, versions) VALUES (?1, ?2, ?3, ?4)",
            params![sid, key, f.chosen, f.count],
        )?;
        for ((version, _), list) in f.others.iter().zip(stored) {
            let n = w.tx.execute(
                "INSERT OR IGNORE INTO session_branches (session_id, fork_entry_id, version, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![sid, key, version, w.now],
            )?;
            if n == 0 {
                continue;
            }
            let bid = w.tx.last_insert_rowid();
            for (i, e) in list.iter().enumerate() {
                entries::insert_row(&w.tx, sid, Some(bid), i, e, w.now)?;
            }
        }
    }
    if !forks.is_empty() {
        w.reindex.insert(sid.to_owned());
    }
    Ok(())
}

/// The other versions' searchable text, appended to the chosen path's.
pub(super) fn search_text(conn: &Connection, sid: &str) -> HostResult<String> {
    let mut out = String::new();
    for (_, _, list) in branches(conn, sid)? {
        out.push_str(&crate::domain::sessions::search_text(&list));
    }
    Ok(out)
}
