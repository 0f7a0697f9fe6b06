//! The trash (docs/keeps.md "The trash"). A trash item is a session row with `trashed_at` set:
//! a whole session (deleted, cleared, evicted, emptied), or entries taken out of a conversation
//! (removed, truncated, undone), re-parented to a session row of their own. Their rows, image
//! references and attach metadata stay as they were, so restoring is one UPDATE and purging is
//! one DELETE (the cascade and the triggers release the images).

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::bodies::refresh_auto_name;
use super::connection::{Store, WriteOutcome};
use super::entries::{self, renumber};
use super::rows::{path_len, touched};
use super::tx::{setting_value, WriteTx};
use super::window::{binding, live_state, set_window, unbind};
use super::{search, versions};
use crate::domain::sessions::entries_item_name;
use crate::domain::settings::{max_sessions, trash_days};
use crate::domain::text::lower;
use crate::domain::trash::{expires_at, expiry_cutoff, expiry_due, Origin, Reason};
use crate::protocol::{HostError, HostResult};

/// Move a whole session to the trash. The live history empties when it was the live chat.
pub(super) fn trash_session(w: &mut WriteTx, sid: &str, reason: Reason) -> HostResult<()> {
    let n = w.tx.execute(
        "UPDATE sessions SET trashed_at = ?2, trash_reason = ?3, trash_origin = ?4, updated_at = ?2
         WHERE id = ?1 AND trashed_at IS NULL",
        params![sid, w.now, reason.as_str(), Origin::Session.to_json().to_string()],
    )?;
    if n == 0 {
        return Ok(());
    }
    search::unindex_session(&w.tx, sid)?;
    w.reindex.remove(sid);
    if binding(&w.tx)? == sid {
        unbind(w)?;
    }
    touched(w, sid);
    w.changes.trash = true;
    Ok(())
}

/// Move entries of session `sid`'s chosen path (`(row, entry)` in path order) to the trash.
/// They become a trash item of their own, remembering where they came from; a removal that
/// would leave the session with no entry at all trashes the whole session instead. Returns the
/// trash item's id.
pub(super) fn take_entries(
    w: &mut WriteTx,
    sid: &str,
    rows: &[(i64, Value)],
    reason: Reason,
) -> HostResult<String> {
    let total = path_len(&w.tx, sid)?;
    let has_versions: bool =
        w.tx.query_row("SELECT EXISTS (SELECT 1 FROM session_branches WHERE session_id = ?1)", [sid], |r| {
            r.get(0)
        })?;
    if rows.len() >= total && !has_versions {
        trash_session(w, sid, reason)?;
        return Ok(sid.to_owned());
    }
    let mut positions = Vec::with_capacity(rows.len());
    for (row, _) in rows {
        let p: i64 =
            w.tx.query_row("SELECT position FROM session_entries WHERE id = ?1", [row], |r| r.get(0))?;
        positions.push(p.max(0) as usize);
    }
    let first = positions.iter().copied().min().unwrap_or(0);
    let session_name: String =
        w.tx.query_row("SELECT name FROM sessions WHERE id = ?1", [sid], |r| r.get(0))?;
    let entries: Vec<Value> = rows.iter().map(|(_, e)| e.clone()).collect();
    let name = entries_item_name(&entries).unwrap_or_else(|| session_name.clone());
    let item = uuid::Uuid::new_v4().to_string();
    let origin = Origin::Entries { session_id: sid.to_owned(), session_name, position: first };
    let seq: i64 =
        w.tx.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?;
    w.tx.execute(
        "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at,
                               trashed_at, trash_reason, trash_origin, name_auto)
         VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?4, ?4, ?7, ?8, 1)",
        params![
            item,
            name,
            lower(&name),
            w.now,
            seq,
            rows.len() as i64,
            reason.as_str(),
            origin.to_json().to_string()
        ],
    )?;
    for (k, (row, _)) in rows.iter().enumerate() {
        w.tx.execute(
            "UPDATE session_entries SET session_id = ?2, position = ?3 WHERE id = ?1",
            params![row, item, k as i64],
        )?;
    }
    let moved: Vec<String> =
        entries.iter().filter_map(|e| crate::domain::entry::entry_id(e).map(str::to_owned)).collect();
    versions::carry(w, sid, &item, moved)?;
    renumber(&w.tx, sid, None, first)?;
    w.tx.execute(
        "UPDATE sessions SET entry_count = ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries::count_path(&w.tx, sid)? as i64, w.now],
    )?;
    // the live window keeps showing what it showed, minus what left it
    let (bound, from) = live_state(&w.tx)?;
    if bound == sid {
        let before_window = positions.iter().filter(|p| **p < from).count();
        if before_window > 0 {
            set_window(w, sid, from - before_window)?;
        }
    }
    w.reindex.insert(sid.to_owned());
    refresh_auto_name(w, sid, &entries)?;
    touched(w, sid);
    w.changes.trash = true;
    Ok(item)
}

/// A `maxSessions` cap after a session was created: the oldest sessions that are not pinned,
/// not `just_created` and not the bound one go to the trash (`evicted`) until the count is at
/// the cap. Returns their ids.
pub(super) fn evict(w: &mut WriteTx, just_created: &str) -> HostResult<Vec<String>> {
    let cap = max_sessions(setting_value(&w.tx, "maxSessions")?.as_ref());
    let victims = eviction_plan(&w.tx, cap, just_created)?;
    for v in &victims {
        trash_session(w, v, Reason::Evicted)?;
    }
    Ok(victims)
}

/// Which sessions a cap of `cap` would move to the trash now (oldest first).
pub(super) fn eviction_plan(conn: &Connection, cap: u64, spare: &str) -> HostResult<Vec<String>> {
    if cap == 0 {
        return Ok(Vec::new());
    }
    let count: i64 =
        conn.query_row("SELECT count(*) FROM sessions WHERE trashed_at IS NULL", [], |r| r.get(0))?;
    let excess = count - cap.min(i64::MAX as u64) as i64;
    if excess <= 0 {
        return Ok(Vec::new());
    }
    let bound = binding(conn)?;
    let mut stmt = conn.prepare(
        "SELECT id FROM sessions WHERE trashed_at IS NULL AND pinned = 0 AND id != ?1 AND id != ?2
         ORDER BY created_at ASC, insert_seq ASC LIMIT ?3",
    )?;
    let r = stmt.query_map(params![spare, bound, excess], |r| r.get(0))?;
    Ok(r.collect::<Result<_, _>>()?)
}

/// One trash item as `trash.list` shows it.
fn item_json(r: &rusqlite::Row, days: u64) -> rusqlite::Result<Value> {
    let trashed_at: i64 = r.get(2)?;
    let origin_raw: Option<String> = r.get(4)?;
    let origin = Origin::from_json(origin_raw.and_then(|o| serde_json::from_str(&o).ok()).as_ref());
    let mut item = json!({
        "id": r.get::<_, String>(0)?,
        "kind": origin.kind(),
        "name": r.get::<_, String>(1)?,
        "reason": r.get::<_, Option<String>>(3)?.unwrap_or_default(),
        "trashedAt": trashed_at,
        "expiresAt": expires_at(trashed_at, days),
        "entryCount": r.get::<_, i64>(5)?,
        "createdAt": r.get::<_, i64>(6)?,
        "pinned": r.get::<_, i64>(7)? != 0,
    });
    if let Origin::Entries { session_id, session_name, position } = origin {
        item["from"] = json!({"sessionId": session_id, "sessionName": session_name, "position": position});
    }
    Ok(item)
}

/// Items trashed before `cutoff`.
fn expired_ids(conn: &Connection, cutoff: i64) -> HostResult<Vec<String>> {
    let mut stmt =
        conn.prepare("SELECT id FROM sessions WHERE trashed_at IS NOT NULL AND trashed_at < ?1")?;
    let r = stmt.query_map([cutoff], |r| r.get(0))?;
    Ok(r.collect::<Result<_, _>>()?)
}

/// Destroy trash items for good (their entries, versions and, when nothing else uses them, images).
fn purge(w: &mut WriteTx, ids: &[String]) -> HostResult<usize> {
    let mut n = 0;
    for id in ids {
        search::unindex_session(&w.tx, id)?;
        n += w.tx.execute("DELETE FROM sessions WHERE id = ?1 AND trashed_at IS NOT NULL", [id])?;
    }
    if n > 0 {
        w.changes.trash = true;
    }
    Ok(n)
}

const EXPIRY_META: &str = "trash_expired_at";

impl Store {
    /// `trash.list`: every item, newest first, with when it expires.
    pub fn trash_list(&mut self) -> HostResult<Value> {
        self.read(|tx| {
            let days = trash_days(setting_value(tx, "trashDays")?.as_ref());
            let mut stmt = tx.prepare(
                "SELECT id, name, trashed_at, trash_reason, trash_origin, entry_count, created_at, pinned
                 FROM sessions WHERE trashed_at IS NOT NULL ORDER BY trashed_at DESC, insert_seq DESC",
            )?;
            let items = stmt.query_map([], |r| item_json(r, days))?.collect::<Result<Vec<_>, _>>()?;
            Ok(json!({"items": items, "trashDays": days}))
        })
    }

    /// `trash.restore`: a session comes back with its id, name, pin and `createdAt`; entries come
    /// back as a session of their own (newest in the drawer). Never rebinds, never evicts.
    pub fn trash_restore(&mut self, id: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("trash.restore", crid, |w| {
            let origin: Option<Option<String>> = w
                .tx
                .query_row("SELECT trash_origin FROM sessions WHERE id = ?1 AND trashed_at IS NOT NULL", [id], |r| {
                    r.get(0)
                })
                .optional()?;
            let Some(origin) = origin else {
                return Err(HostError::not_found(format!("nothing in the trash has id {id:?}")));
            };
            let origin = Origin::from_json(origin.and_then(|o| serde_json::from_str(&o).ok()).as_ref());
            if let Origin::Entries { .. } = origin {
                let seq: i64 =
                    w.tx.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?;
                w.tx.execute(
                    "UPDATE sessions SET created_at = ?2, insert_seq = ?3 WHERE id = ?1",
                    params![id, w.now, seq],
                )?;
            }
            w.tx.execute(
                "UPDATE sessions SET trashed_at = NULL, trash_reason = NULL, trash_origin = NULL, updated_at = ?2
                 WHERE id = ?1",
                params![id, w.now],
            )?;
            w.reindex.insert(id.to_owned());
            touched(w, id);
            w.changes.trash = true;
            Ok(json!({"sessionId": id, "kind": origin.kind()}))
        })
    }

    /// `trash.purge`: one item (`id`) or every item (`None`) destroyed for good.
    pub fn trash_purge(&mut self, id: Option<&str>, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("trash.purge", crid, |w| {
            let ids: Vec<String> = match id {
                Some(i) => vec![i.to_owned()],
                None => expired_ids(&w.tx, i64::MAX)?,
            };
            let purged = purge(w, &ids)?;
            if id.is_some() && purged == 0 {
                return Err(HostError::not_found(format!(
                    "nothing in the trash has id {:?}",
                    id.unwrap_or("")
                )));
            }
            Ok(json!({"purged": purged}))
        })
    }

    /// Expiry: items older than `trashDays` are purged, at most once an hour across every host
    /// process (the last run is stored in `meta`). A host-started write; `None` when not due.
    pub fn trash_expire(&mut self, force: bool) -> HostResult<Option<WriteOutcome>> {
        let now = self.now();
        let last: Option<i64> = self.read(|tx| {
            Ok(tx
                .query_row("SELECT value FROM meta WHERE key = ?1", [EXPIRY_META], |r| r.get::<_, String>(0))
                .optional()?
                .and_then(|v| v.parse().ok()))
        })?;
        if !force && !expiry_due(last, now) {
            return Ok(None);
        }
        let out = self.write("trash.expire", None, |w| {
            let days = trash_days(setting_value(&w.tx, "trashDays")?.as_ref());
            let ids = expired_ids(&w.tx, expiry_cutoff(w.now, days))?;
            let purged = purge(w, &ids)?;
            w.tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![EXPIRY_META, w.now.to_string()],
            )?;
            Ok(json!({"purged": purged}))
        })?;
        Ok(Some(out))
    }
}
