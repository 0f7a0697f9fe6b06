//! Sessions (storage-model §5; docs/keeps.md): every conversation is one, kept from its first
//! entry. Rows, bodies (chosen paths), naming, snapshots, eviction, listing, export.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::blobs::{self, referenced_blob, Inliner};
use super::drawer::{Drawer, Found, Listing};
use super::entries::{self, parse_entry};
use super::history::{append_entries, with_video_src};
use super::trash;
use super::{search, setting_value, Store, WriteOutcome, WriteTx};
use crate::domain::dataurl::base64_encode;
use crate::domain::entry::{entry_text, referenced_blobs, validate_new_entry};
use crate::domain::export::{export_entry, filename, markdown, EXPORT_FORMAT, EXPORT_VERSION};
use crate::domain::sessions::{auto_name, choose_name, normalize_name, search_text, DrawerRow};
use crate::domain::settings::max_sessions;
use crate::domain::text::lower;
use crate::domain::trash::Reason;
use crate::protocol::{HostError, HostResult};
use crate::util::time::{local_date, local_iso};

/// A session that exists and is not in the trash.
pub(super) fn session_exists(conn: &Connection, id: &str) -> HostResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1 AND trashed_at IS NULL")?
        .query_row([id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// A session row with this id exists, in the trash or not (ids in the trash stay taken).
pub(super) fn session_known(conn: &Connection, id: &str) -> HostResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row([id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether session `id` is in the trash (`None`: no such session).
pub(super) fn is_trashed(conn: &Connection, id: &str) -> HostResult<Option<bool>> {
    Ok(conn
        .prepare_cached("SELECT trashed_at IS NOT NULL FROM sessions WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?)
}

/// How many entries are on session `sid`'s chosen path (0 for an unknown id).
pub(super) fn path_len(conn: &Connection, sid: &str) -> HostResult<usize> {
    Ok(conn
        .prepare_cached("SELECT entry_count FROM sessions WHERE id = ?1")?
        .query_row([sid], |r| r.get::<_, i64>(0))
        .optional()?
        .unwrap_or(0)
        .max(0) as usize)
}

/// The entry of one row.
pub(super) fn row_entry(conn: &Connection, row: i64) -> HostResult<Value> {
    let raw: String = conn
        .prepare_cached("SELECT entry FROM session_entries WHERE id = ?1")?
        .query_row([row], |r| r.get(0))?;
    parse_entry(&raw, "entry")
}

/// The columns [`drawer_row`] reads, from the `sessions` table aliased `s`.
pub(super) const ROW_COLS: &str = "s.id, s.name, s.created_at, s.pinned, s.entry_count";

/// A drawer row from [`ROW_COLS`] at the start of `r`.
pub(super) fn drawer_row(r: &rusqlite::Row) -> rusqlite::Result<DrawerRow> {
    Ok(DrawerRow {
        id: r.get(0)?,
        name: r.get(1)?,
        created_at: r.get(2)?,
        pinned: r.get::<_, i64>(3)? != 0,
        entry_count: r.get(4)?,
        content_match: None,
        snippet: None,
    })
}

/// The drawer's order: pinned first, then newest first (`insert_seq` breaks ties).
pub(super) const ORDER: &str = "ORDER BY s.pinned DESC, s.created_at DESC, s.insert_seq DESC";

/// A session's drawer row (`{id, name, createdAt, pinned, entryCount}`), in the trash or not.
pub(super) fn session_row(conn: &Connection, id: &str) -> HostResult<Option<DrawerRow>> {
    Ok(conn
        .query_row(&format!("SELECT {ROW_COLS} FROM sessions s WHERE s.id = ?1"), [id], drawer_row)
        .optional()?)
}

/// A session's chosen path. The row's `entry_count` is kept in the same transactions as the
/// entries, so a different number of readable entries means a damaged table or index
/// (`db_corrupt`, never a silently shortened session).
pub(super) fn session_body(conn: &Connection, id: &str) -> HostResult<Vec<Value>> {
    let body: Vec<Value> = entries::path_rows(conn, id, 0, None)?.into_iter().map(|(_, e)| e).collect();
    let count: Option<i64> =
        conn.query_row("SELECT entry_count FROM sessions WHERE id = ?1", [id], |r| r.get(0)).optional()?;
    if let Some(n) = count {
        if usize::try_from(n).ok() != Some(body.len()) {
            return Err(super::salvage::content_damage(format!(
                "saved session {id:?} records {n} entries but {} are readable",
                body.len()
            )));
        }
    }
    Ok(body)
}

/// Note that session `sid` changed: its row or body (`sessions.ids`) and the drawer (`index`).
pub(super) fn touched(w: &mut WriteTx, sid: &str) {
    w.changes.sessions.insert(sid.to_owned());
    w.changes.sessions_index = true;
}

/// Append entries (ingested, without entryIds yet) to the end of session `sid`'s chosen path,
/// with their search text; a session whose name follows its first message is renamed when the
/// entries give it one.
pub(super) fn append_to_path(w: &mut WriteTx, sid: &str, entries: &[Value]) -> HostResult<Vec<Value>> {
    let start = path_len(&w.tx, sid)?;
    if start > 0 && entries.first().and_then(|e| e.get("role")).and_then(Value::as_str) == Some("assistant") {
        clear_failed_before(w, sid, start)?;
    }
    let mut stored = Vec::with_capacity(entries.len());
    let mut text = String::new();
    for (i, e) in entries.iter().enumerate() {
        let e = entries::with_entry_id(&w.tx, e)?;
        entries::insert_row(&w.tx, sid, None, start + i, &e, w.now)?;
        text.push_str(&super::history::indexed_text(&e));
        stored.push(e);
    }
    w.tx.execute(
        "UPDATE sessions SET entry_count = entry_count + ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries.len() as i64, w.now],
    )?;
    if is_trashed(&w.tx, sid)? == Some(false) && !w.reindex.contains(sid) {
        search::append_to_index(&w.tx, sid, &text)?;
    }
    if entries.iter().any(|e| auto_name(std::slice::from_ref(e)).is_some()) {
        refresh_auto_name(w, sid, &[])?;
    }
    touched(w, sid);
    Ok(stored)
}

/// A reply answers the user messages right before it: their `failed` stamps are cleared (the
/// run of user entries that ends at chosen-path position `end − 1`; a message typed after a failed
/// one is sent with it, so the reply answers both).
fn clear_failed_before(w: &mut WriteTx, sid: &str, end: usize) -> HostResult<()> {
    let mut p = end;
    while p > 0 {
        p -= 1;
        let Some(row) = entries::path_row_at(&w.tx, sid, p)? else { break };
        let e = row_entry(&w.tx, row)?;
        if e.get("role").and_then(Value::as_str) != Some("user") {
            break;
        }
        if e.get("failed").is_some() {
            let mut cleared = e.clone();
            if let Some(o) = cleared.as_object_mut() {
                o.remove("failed");
            }
            rewrite_entry(w, row, &e, &cleared)?;
            w.changes.history |= super::history::binding(&w.tx)? == sid;
        }
    }
    Ok(())
}

/// Rewrite one entry row in place; a changed text rebuilds its session's search data at commit.
pub(super) fn rewrite_entry(w: &mut WriteTx, row: i64, old: &Value, new: &Value) -> HostResult<()> {
    let sid = entries::update_row(&w.tx, row, new)?;
    if entry_text(old) != entry_text(new) {
        w.reindex.insert(sid.clone());
    }
    touched(w, &sid);
    Ok(())
}

/// A session whose name follows its first message (auto-kept, never renamed) takes the name
/// autoName gives its chosen path now. With none, it keeps the name it has, unless that name
/// came from an entry in `gone` (entries that just left the chat): a removed message does not
/// name the chat any more; it is then named by the host's local date.
pub(super) fn refresh_auto_name(w: &mut WriteTx, sid: &str, gone: &[Value]) -> HostResult<()> {
    let row: Option<(bool, String)> =
        w.tx.query_row("SELECT name_auto, name FROM sessions WHERE id = ?1", [sid], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let Some((true, current)) = row else {
        return Ok(());
    };
    // autoName looks at user entries in order and stops at the first that names the chat
    let name = {
        let mut stmt = w.tx.prepare_cached(
            "SELECT entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL AND role = 'user'
             ORDER BY position, id",
        )?;
        let mut rows = stmt.query([sid])?;
        let mut found = None;
        while let Some(r) = rows.next()? {
            let e = parse_entry(&r.get::<_, String>(0)?, "entry")?;
            if let Some(n) = auto_name(std::slice::from_ref(&e)) {
                found = Some(n);
                break;
            }
        }
        found
    };
    let name = match name {
        Some(n) => n,
        None if gone.iter().any(|e| auto_name(std::slice::from_ref(e)).as_deref() == Some(&current)) => {
            local_date()
        }
        None => return Ok(()),
    };
    let changed = w.tx.execute(
        "UPDATE sessions SET name = ?2, name_lower = ?3 WHERE id = ?1 AND name != ?2",
        params![sid, name, lower(&name)],
    )?;
    if changed > 0 {
        touched(w, sid);
    }
    Ok(())
}

/// Write a new session's body (imports, snapshots): entries get entryIds of their own.
pub(super) fn write_body(w: &mut WriteTx, sid: &str, entries: &[Value]) -> HostResult<()> {
    for (i, e) in entries.iter().enumerate() {
        let e = entries::with_entry_id(&w.tx, e)?;
        entries::insert_row(&w.tx, sid, None, i, &e, w.now)?;
    }
    w.tx.execute(
        "UPDATE sessions SET entry_count = ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries::count_path(&w.tx, sid)? as i64, w.now],
    )?;
    w.reindex.insert(sid.to_owned());
    touched(w, sid);
    Ok(())
}

/// What content search covers for a session: its chosen path, then its other versions.
pub(super) fn searchable_text(conn: &Connection, sid: &str) -> HostResult<String> {
    let mut text = search_text(&session_body(conn, sid)?);
    text.push_str(&super::versions::search_text(conn, sid)?);
    Ok(text)
}

/// Rebuild a session's search data from its chosen path (not for trashed sessions: the trash is
/// not searched).
pub(super) fn rebuild_search(conn: &Connection, sid: &str) -> HostResult<()> {
    match is_trashed(conn, sid)? {
        Some(false) => {
            search::index_session(conn, sid, &searchable_text(conn, sid)?)?;
        }
        Some(true) => search::unindex_session(conn, sid)?,
        None => {}
    }
    Ok(())
}

/// Create a session row (body written separately).
pub(super) fn insert_session(
    w: &mut WriteTx,
    id: &str,
    name: &str,
    created_at: i64,
    pinned: bool,
    extra: Option<&Map<String, Value>>,
) -> HostResult<()> {
    let seq: i64 =
        w.tx.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?;
    w.tx.execute(
        "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at, extra)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8)",
        params![
            id,
            name,
            lower(name),
            created_at,
            pinned as i64,
            seq,
            w.now,
            extra.filter(|m| !m.is_empty()).map(|m| Value::Object(m.clone()).to_string())
        ],
    )?;
    touched(w, id);
    Ok(())
}

/// Auto-keep (docs/keeps.md): the session a chat is kept in from its first entry. Its name
/// follows its first message until the user renames it.
pub(super) fn create_kept(w: &mut WriteTx, entries: &[Value], fallback: Option<&str>) -> HostResult<String> {
    let id = uuid::Uuid::new_v4().to_string();
    let name = choose_name(None, entries, fallback, &local_date());
    insert_session(w, &id, &name, w.now, false, None)?;
    w.tx.execute("UPDATE sessions SET name_auto = 1 WHERE id = ?1", [&id])?;
    search::index_session(&w.tx, &id, "")?;
    Ok(id)
}

/// After an UPDATE of one session row: `not_found` when the id names no session; a change
/// (row and index) when the row really changed; `{}` either way.
fn row_updated(w: &mut WriteTx, id: &str, updated: usize) -> HostResult<Value> {
    if updated == 0 && !session_exists(&w.tx, id)? {
        return Err(HostError::not_found(format!("no saved session {id:?}")));
    }
    if updated > 0 {
        touched(w, id);
    }
    Ok(json!({}))
}

/// A `maxSessions` cap after a session was created: the oldest sessions that are not pinned,
/// not `just_created` and not the bound one go to the trash (`evicted`) until the count is at
/// the cap. Returns their ids.
pub(super) fn evict(w: &mut WriteTx, just_created: &str) -> HostResult<Vec<String>> {
    let cap = max_sessions(setting_value(&w.tx, "maxSessions")?.as_ref());
    let victims = eviction_plan(&w.tx, cap, just_created)?;
    for v in &victims {
        trash::trash_session(w, v, Reason::Evicted)?;
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
    let bound = super::history::binding(conn)?;
    let mut stmt = conn.prepare(
        "SELECT id FROM sessions WHERE trashed_at IS NULL AND pinned = 0 AND id != ?1 AND id != ?2
         ORDER BY created_at ASC, insert_seq ASC LIMIT ?3",
    )?;
    let r = stmt.query_map(params![spare, bound, excess], |r| r.get(0))?;
    Ok(r.collect::<Result<_, _>>()?)
}

/// `sessions.save`. With auto-keep the live chat is always in its session already: saving the
/// bound id changes nothing; another existing id while the live history is non-empty is
/// `conflict` (it would replace that session's body); no id (or an unknown or deleted one) makes
/// a snapshot, a copy of the bound session's chosen path under a new id.
pub(super) fn save(
    w: &mut WriteTx,
    id: Option<&str>,
    name: Option<&str>,
    fallback: Option<&str>,
) -> HostResult<Value> {
    let bound = super::history::binding(&w.tx)?;
    let live_empty = super::history::live_len(&w.tx)? == 0;
    if let Some(id) = id.filter(|i| !i.is_empty()) {
        if !live_empty && session_exists(&w.tx, id)? {
            if id != bound {
                return Err(HostError::conflict(format!(
                    "session {id:?} is not the live chat's; saving would replace its entries"
                )));
            }
            return Ok(json!({"session": session_row(&w.tx, id)?, "created": false}));
        }
    }
    if live_empty || bound.is_empty() {
        return Ok(json!({"session": null, "created": false}));
    }
    let body = session_body(&w.tx, &bound)?;
    let new_id = uuid::Uuid::new_v4().to_string();
    let name = choose_name(name, &body, fallback, &local_date());
    insert_session(w, &new_id, &name, w.now, false, None)?;
    write_body(w, &new_id, &body)?;
    let evicted = evict(w, &new_id)?;
    Ok(json!({"session": session_row(&w.tx, &new_id)?, "created": true, "evicted": evicted}))
}

/// `saveCurrent`: the live chat is kept already; `{id, created: false}` of its session, or
/// `null` when the live history is empty.
pub(super) fn save_current(w: &mut WriteTx) -> HostResult<Value> {
    let b = super::history::binding(&w.tx)?;
    if b.is_empty() || super::history::live_len(&w.tx)? == 0 {
        return Ok(Value::Null);
    }
    Ok(json!({"id": b, "created": false}))
}

/// Flags of `sessions.appendTo`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppendFlags {
    /// Copy the newest `videoSrc` of where the entry lands.
    pub copy_video_src: bool,
    /// When it lands in the live history: stamp its image-bearing entries seen (§6.1).
    pub mark_images_seen: bool,
}

/// Arguments of `sessions.export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Markdown,
    Json,
}

impl Store {
    pub fn sessions_save(
        &mut self,
        id: Option<&str>,
        name: Option<&str>,
        fallback: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("sessions.save", crid, |w| save(w, id, name, fallback))
    }

    /// Index the sessions the search index lacks (rows a host older than schema 3 never
    /// indexed after an interrupted upgrade, or written by other tools), once per process,
    /// before the first content query.
    fn ensure_search_index(&mut self) -> HostResult<()> {
        if self.search_checked {
            return Ok(());
        }
        let missing: Vec<String> = self.read(|tx| {
            let mut stmt =
                tx.prepare(
                    "SELECT id FROM sessions WHERE trashed_at IS NULL AND id NOT IN (SELECT session_id FROM search_docs)",
                )?;
            let ids = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
            Ok(ids)
        })?;
        if !missing.is_empty() && self.mode == super::Mode::ReadWrite && self.damage().is_none() {
            tracing::info!(sessions = missing.len(), "indexing sessions missing from the search index");
            self.write("search.index", None, |w| {
                for sid in &missing {
                    let body = session_body(&w.tx, sid)?;
                    search::index_session(&w.tx, sid, &search_text(&body))?;
                }
                Ok(json!({}))
            })?;
        }
        self.search_checked = true;
        Ok(())
    }

    pub fn sessions_list(&mut self, query: Option<&str>) -> HostResult<Listing> {
        let q = lower(crate::domain::text::js_trim(query.unwrap_or("")));
        if !q.is_empty() {
            self.ensure_search_index()?;
        }
        let held = self.drawer.take();
        let listing = self.read(|tx| {
            let drawer = Drawer::current(tx, held)?;
            if q.is_empty() {
                return Ok(Listing::all(drawer));
            }
            // name hits from the names in memory; content hits from the index (§5.3) for the
            // other sessions; both in the drawer's order
            let mut found: Vec<Option<Found>> =
                drawer.name_hits(&q).into_iter().map(|name| name.then_some(Found::Name)).collect();
            for (i, snippet) in search::content_hits(tx, &q, &drawer, |i| found[i].is_none())? {
                found[i] = Some(Found::Content(snippet));
            }
            let found = found.into_iter().enumerate().filter_map(|(i, f)| Some((i, f?))).collect();
            Ok(Listing::found(drawer, found))
        })?;
        self.drawer = Some(Arc::clone(&listing.drawer));
        Ok(listing)
    }

    /// A session's chosen path (a page of it with `from` / `limit`), in the trash or not (a
    /// trashed one says so: `trashedAt`, `trashReason`).
    pub fn sessions_get(
        &mut self,
        id: &str,
        inline: bool,
        from: u64,
        limit: Option<u64>,
    ) -> HostResult<Value> {
        self.read(|tx| {
            let row = session_row(tx, id)?
                .ok_or_else(|| HostError::not_found(format!("no saved session {id:?}")))?;
            let from = usize::try_from(from).unwrap_or(usize::MAX);
            let mut entries = if from == 0 && limit.is_none() {
                session_body(tx, id)?
            } else {
                let limit = limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
                entries::path_rows(tx, id, from, limit)?.into_iter().map(|(_, e)| e).collect()
            };
            if inline {
                let mut inl = Inliner::new(tx);
                for e in &mut entries {
                    inl.inline(e)?;
                }
            }
            let mut r = json!({
                "id": row.id, "name": row.name, "createdAt": row.created_at,
                "pinned": row.pinned, "entries": entries, "from": from, "length": row.entry_count,
                "forks": super::versions::forks_json(tx, id)?,
            });
            let trash: Option<(i64, String)> = tx
                .query_row(
                    "SELECT trashed_at, coalesce(trash_reason, '') FROM sessions WHERE id = ?1 AND trashed_at IS NOT NULL",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if let Some((at, reason)) = trash {
                r["trashedAt"] = json!(at);
                r["trashReason"] = json!(reason);
            }
            Ok(r)
        })
    }

    /// Make session `id` the live chat: its window is the longest suffix of its chosen path the
    /// trim rule allows; the rest is its kept prefix (`offset`). The chat that was live stays in
    /// its own session.
    pub fn sessions_load(
        &mut self,
        id: &str,
        save_current_first: bool,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("sessions.load", crid, |w| {
            if !session_exists(&w.tx, id)? {
                return Err(HostError::not_found(format!("no saved session {id:?}")));
            }
            let saved = if save_current_first { Some(save_current(w)?) } else { None };
            let from = super::history::window_start(&w.tx, id)?;
            super::history::set_window(w, id, from)?;
            let mut r = json!({"length": path_len(&w.tx, id)? - from, "offset": from});
            if let Some(s) = saved {
                r["saved"] = s;
            }
            Ok(r)
        })
    }

    pub fn sessions_rename(&mut self, id: &str, name: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        let name = normalize_name(name).ok_or_else(|| HostError::bad_request("name must not be blank"))?;
        self.write("sessions.rename", crid, |w| {
            let n = w.tx.execute(
                "UPDATE sessions SET name = ?2, name_lower = ?3, updated_at = ?4, name_auto = 0
                 WHERE id = ?1 AND trashed_at IS NULL AND (name != ?2 OR name_auto != 0)",
                params![id, name, lower(&name), w.now],
            )?;
            row_updated(w, id, n)
        })
    }

    pub fn sessions_pin(&mut self, id: &str, pinned: bool, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("sessions.pin", crid, |w| {
            let n = w.tx.execute(
                "UPDATE sessions SET pinned = ?2, updated_at = ?3 WHERE id = ?1 AND trashed_at IS NULL AND pinned != ?2",
                params![id, pinned as i64, w.now],
            )?;
            row_updated(w, id, n)
        })
    }

    /// Move a session to the trash (`deleted`). Deleting the live chat's session also empties
    /// the live history, so nothing deleted comes back.
    pub fn sessions_delete(&mut self, id: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("sessions.delete", crid, |w| {
            if !session_exists(&w.tx, id)? {
                return Ok(json!({"deleted": false}));
            }
            trash::trash_session(w, id, Reason::Deleted)?;
            Ok(json!({"deleted": true}))
        })
    }

    /// Move every session to the trash (`cleared`), pinned ones included; the live history empties.
    pub fn sessions_clear_all(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("sessions.clearAll", crid, |w| {
            let ids: Vec<String> = {
                let mut stmt = w.tx.prepare("SELECT id FROM sessions WHERE trashed_at IS NULL")?;
                let r = stmt.query_map([], |r| r.get(0))?;
                r.collect::<Result<_, _>>()?
            };
            for id in &ids {
                trash::trash_session(w, id, Reason::Cleared)?;
            }
            super::history::unbind(w)?;
            Ok(json!({"deleted": ids.len()}))
        })
    }

    /// `copy_video_src`: the entry gets the newest `videoSrc` of where it lands (the session's body
    /// or the live history).
    pub fn sessions_append_to(
        &mut self,
        id: &str,
        entry: Value,
        flags: AppendFlags,
        fallback_name: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let copy_video_src = flags.copy_video_src;
        if id.is_empty() {
            return Err(HostError::bad_request("id must not be empty"));
        }
        validate_new_entry(&entry).map_err(HostError::bad_request)?;
        let ing = blobs::prepare_entries(vec![entry])?;
        self.write("sessions.appendTo", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            // the bound session's entries land in the live window; a session in the trash keeps
            // the reply with the rest of it; only an id unknown to both lands live
            let trashed = is_trashed(&w.tx, id)?;
            let to_session = match trashed {
                Some(true) => true,
                Some(false) => super::history::binding(&w.tx)? != id,
                None => false,
            };
            let copied = if copy_video_src {
                with_video_src(&w.tx, &ing.entries[0], to_session.then_some(id))?
            } else {
                None
            };
            let e = copied.as_ref().unwrap_or(&ing.entries[0]);
            if to_session {
                let stored = append_to_path(w, id, std::slice::from_ref(e))?;
                if trashed == Some(true) {
                    w.changes.trash = true;
                }
                let n = path_len(&w.tx, id)?;
                let target = if trashed == Some(true) { "trash" } else { "session" };
                let eid = stored.last().and_then(crate::domain::entry::entry_id);
                return Ok(
                    json!({"target": target, "sessionId": id, "length": n, "index": n - 1, "entryId": eid}),
                );
            }
            let done = append_entries(w, std::slice::from_ref(e), fallback_name)?;
            if flags.mark_images_seen {
                super::history::mark_images_seen(w)?;
            }
            let mut r = json!({"target": "live", "length": done.length, "index": done.index});
            done.add_to(&mut r);
            Ok(r)
        })
    }

    pub fn sessions_export(&mut self, ids: &[String], format: ExportFormat) -> HostResult<Value> {
        self.read(|tx| {
            let mut sessions = Vec::new();
            for id in ids {
                let row = session_row(tx, id)?
                    .ok_or_else(|| HostError::not_found(format!("no saved session {id:?}")))?;
                sessions.push((row, session_body(tx, id)?, super::versions::export_json(tx, id)?));
            }
            let date = local_date();
            match format {
                ExportFormat::Markdown => {
                    let (row, body, _) = &sessions[0];
                    let name = &row.name;
                    let forks: std::collections::HashMap<String, u32> =
                        super::versions::visible_forks(tx, &row.id)?
                            .into_iter()
                            .map(|f| (f.fork_entry_id, f.versions))
                            .collect();
                    let text = markdown(name, &local_iso(), body, &forks);
                    Ok(json!({"filename": filename(name, &date, "md"), "text": text}))
                }
                ExportFormat::Json => {
                    let mut images = BTreeMap::new();
                    let mut out = Vec::new();
                    for (row, body, versions) in &sessions {
                        // originals back in `image_url`, no `originalUrl`, in every version too
                        let body: Vec<Value> = body.iter().map(export_entry).collect();
                        let versions: Vec<Value> = versions
                            .iter()
                            .map(|f| {
                                let mut f = f.clone();
                                if let Some(others) = f["others"].as_array_mut() {
                                    for o in others {
                                        if let Some(list) = o["entries"].as_array_mut() {
                                            for e in list.iter_mut() {
                                                *e = export_entry(e);
                                            }
                                        }
                                    }
                                }
                                f
                            })
                            .collect();
                        let others =
                            versions.iter().flat_map(|f| f["others"].as_array().into_iter().flatten());
                        let in_versions = others.flat_map(|o| o["entries"].as_array().into_iter().flatten());
                        for e in body.iter().chain(in_versions) {
                            for sha in referenced_blobs(e) {
                                if images.contains_key(&sha) {
                                    continue;
                                }
                                let (mime, bytes) = referenced_blob(tx, &sha)?;
                                images.insert(sha, json!({"mime": mime, "data": base64_encode(&bytes)}));
                            }
                        }
                        let extra: Option<String> =
                            tx.query_row("SELECT extra FROM sessions WHERE id = ?1", [&row.id], |r| {
                                r.get(0)
                            })?;
                        let mut s = Map::new();
                        if let Some(Value::Object(x)) = extra.and_then(|x| serde_json::from_str(&x).ok()) {
                            s.extend(x);
                        }
                        s.insert("id".into(), row.id.clone().into());
                        s.insert("name".into(), row.name.clone().into());
                        s.insert("createdAt".into(), row.created_at.into());
                        s.insert("pinned".into(), row.pinned.into());
                        s.insert("entries".into(), Value::Array(body));
                        s.insert("versions".into(), Value::Array(versions));
                        out.push(Value::Object(s));
                    }
                    let fname = if sessions.len() == 1 {
                        filename(&sessions[0].0.name, &date, "json")
                    } else {
                        format!("keepsake-sessions-{date}.json")
                    };
                    let doc = json!({
                        "format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exportedAt": local_iso(),
                        "sessions": out, "images": images,
                    });
                    let text = serde_json::to_string_pretty(&doc)
                        .map_err(|e| HostError::internal(format!("cannot serialise export: {e}")))?;
                    Ok(json!({"filename": fname, "text": text}))
                }
            }
        })
    }
}
