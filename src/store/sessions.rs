//! Saved sessions (storage-model §5, §11.7–§11.9, §11.13–§11.14).

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::blobs::{self, add_refs, referenced_blob, Holder, Inliner};
use super::drawer::{Drawer, Found, Listing};
use super::history::{
    self, append_entries, binding, live_entries, parse_entry, set_binding, trimmed_entries, with_video_src,
};
use super::{search, setting_value, Store, WriteOutcome, WriteTx};
use crate::domain::dataurl::base64_encode;
use crate::domain::entry::{
    content_chars, entry_text, image_part_count, referenced_blobs, role, validate_new_entry,
};
use crate::domain::export::{export_entry, filename, markdown, EXPORT_FORMAT, EXPORT_VERSION};
use crate::domain::sessions::{choose_name, normalize_name, search_text, DrawerRow};
use crate::domain::settings::max_sessions;
use crate::domain::text::lower;
use crate::protocol::{HostError, HostResult};
use crate::util::time::{local_date, local_iso};

pub(super) fn session_exists(conn: &Connection, id: &str) -> HostResult<bool> {
    Ok(conn.query_row("SELECT 1 FROM sessions WHERE id = ?1", [id], |_| Ok(())).optional()?.is_some())
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

/// A saved session's drawer row (`{id, name, createdAt, pinned, entryCount}`).
pub(super) fn session_row(conn: &Connection, id: &str) -> HostResult<Option<DrawerRow>> {
    Ok(conn
        .query_row(&format!("SELECT {ROW_COLS} FROM sessions s WHERE s.id = ?1"), [id], drawer_row)
        .optional()?)
}

/// A saved session's entries. The row's `entry_count` is kept in the same transactions as the
/// entries, so a different number of readable entries means a damaged table or index
/// (`db_corrupt`, never a silently shortened session).
pub(super) fn session_body(conn: &Connection, id: &str) -> HostResult<Vec<Value>> {
    let mut stmt =
        conn.prepare_cached("SELECT entry FROM session_entries WHERE session_id = ?1 ORDER BY position, id")?;
    let rows = stmt.query_map([id], |r| r.get::<_, String>(0))?;
    let body = rows.map(|r| parse_entry(&r?, "session entry")).collect::<HostResult<Vec<_>>>()?;
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

fn insert_body_entry(w: &mut WriteTx, sid: &str, position: usize, e: &Value) -> HostResult<()> {
    w.tx.execute(
        "INSERT INTO session_entries (session_id, position, role, content_chars, image_count, entry, attach_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            sid,
            position as i64,
            role(e),
            content_chars(e) as i64,
            image_part_count(e) as i64,
            e.to_string(),
            crate::domain::entry::attach_id(e)
        ],
    )?;
    let id = w.tx.last_insert_rowid();
    add_refs(&w.tx, Holder::Session, id, e)
}

/// Replace a session's body and its search data.
pub(super) fn write_body(w: &mut WriteTx, sid: &str, entries: &[Value]) -> HostResult<()> {
    // insert the new rows first so blobs shared with the old body are never collected
    let old_ids: Vec<i64> = {
        let mut stmt = w.tx.prepare("SELECT id FROM session_entries WHERE session_id = ?1")?;
        let r = stmt.query_map([sid], |r| r.get(0))?;
        r.collect::<Result<_, _>>()?
    };
    for (i, e) in entries.iter().enumerate() {
        insert_body_entry(w, sid, i, e)?;
    }
    for id in old_ids {
        w.tx.execute("DELETE FROM session_entries WHERE id = ?1", [id])?;
    }
    search::index_session(&w.tx, sid, &search_text(entries))?;
    w.tx.execute(
        "UPDATE sessions SET entry_count = ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries.len() as i64, w.now],
    )?;
    w.changes.sessions.insert(sid.to_owned());
    w.changes.sessions_index = true;
    Ok(())
}

/// Rewrite one body row in place (rescue commits), with its references.
pub(super) fn update_body_entry(w: &mut WriteTx, row: i64, e: &Value) -> HostResult<()> {
    w.tx.execute(
        "UPDATE session_entries SET role = ?2, content_chars = ?3, image_count = ?4, entry = ?5, attach_id = ?6
         WHERE id = ?1",
        params![
            row,
            role(e),
            content_chars(e) as i64,
            image_part_count(e) as i64,
            e.to_string(),
            crate::domain::entry::attach_id(e)
        ],
    )?;
    blobs::replace_refs(&w.tx, Holder::Session, row, e)
}

/// Rebuild a session's search data from its body.
pub(super) fn rebuild_search(w: &mut WriteTx, sid: &str) -> HostResult<()> {
    let body = session_body(&w.tx, sid)?;
    search::index_session(&w.tx, sid, &search_text(&body))?;
    w.tx.execute("UPDATE sessions SET updated_at = ?2 WHERE id = ?1", params![sid, w.now])?;
    w.changes.sessions.insert(sid.to_owned());
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
    w.changes.sessions.insert(id.to_owned());
    w.changes.sessions_index = true;
    Ok(())
}

fn delete_session(w: &mut WriteTx, id: &str) -> HostResult<bool> {
    search::unindex_session(&w.tx, id)?;
    let n = w.tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
    if n > 0 {
        w.changes.sessions.insert(id.to_owned());
        w.changes.sessions_index = true;
        if binding(&w.tx)? == id {
            set_binding(w, "")?;
        }
    }
    Ok(n > 0)
}

/// After an UPDATE of one session row: `not_found` when the id names no session; a change
/// (row and index) when the row really changed; `{}` either way.
fn row_updated(w: &mut WriteTx, id: &str, updated: usize) -> HostResult<Value> {
    if updated == 0 && !session_exists(&w.tx, id)? {
        return Err(HostError::not_found(format!("no saved session {id:?}")));
    }
    if updated > 0 {
        w.changes.sessions.insert(id.to_owned());
        w.changes.sessions_index = true;
    }
    Ok(json!({}))
}

/// §5.2 eviction after an archive: oldest first, never pinned, the one just saved or the
/// bound one (§11.9).
fn evict(w: &mut WriteTx, just_saved: &str) -> HostResult<Vec<String>> {
    let cap = max_sessions(setting_value(&w.tx, "maxSessions")?.as_ref());
    if cap == 0 {
        return Ok(Vec::new());
    }
    let count: i64 = w.tx.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))?;
    let excess = count - cap as i64;
    if excess <= 0 {
        return Ok(Vec::new());
    }
    let bound = binding(&w.tx)?;
    let victims: Vec<String> = {
        let mut stmt = w.tx.prepare(
            "SELECT id FROM sessions WHERE pinned = 0 AND id != ?1 AND id != ?2
             ORDER BY created_at ASC, insert_seq ASC LIMIT ?3",
        )?;
        let r = stmt.query_map(params![just_saved, bound, excess], |r| r.get(0))?;
        r.collect::<Result<_, _>>()?
    };
    for v in &victims {
        delete_session(w, v)?;
    }
    Ok(victims)
}

/// `sessions.save` semantics (§5.2, §11.1). Returns the result object.
pub(super) fn save(
    w: &mut WriteTx,
    id: Option<&str>,
    name: Option<&str>,
    fallback: Option<&str>,
) -> HostResult<Value> {
    let live: Vec<Value> = live_entries(&w.tx)?.into_iter().map(|(_, e)| e).collect();
    if let Some(id) = id.filter(|i| !i.is_empty()) {
        if !live.is_empty() && session_exists(&w.tx, id)? {
            let mut body = if binding(&w.tx)? == id { trimmed_entries(&w.tx)? } else { Vec::new() };
            body.extend(live);
            let unchanged = session_body(&w.tx, id)? == body;
            if !unchanged {
                write_body(w, id, &body)?;
            }
            return Ok(json!({"session": session_row(&w.tx, id)?, "created": false}));
        }
    }
    if live.is_empty() {
        return Ok(json!({"session": null, "created": false}));
    }
    let new_id = uuid::Uuid::new_v4().to_string();
    let name = choose_name(name, &live, fallback, &local_date());
    insert_session(w, &new_id, &name, w.now, false, None)?;
    write_body(w, &new_id, &live)?;
    let evicted = evict(w, &new_id)?;
    Ok(json!({"session": session_row(&w.tx, &new_id)?, "created": true, "evicted": evicted}))
}

/// §11.7: save-or-write-back using the current binding; `{id, created}` or `null`.
pub(super) fn save_current(w: &mut WriteTx) -> HostResult<Value> {
    let b = binding(&w.tx)?;
    let r = save(w, Some(&b), None, None)?;
    Ok(match r.get("session").and_then(|s| s.get("id")) {
        Some(id) => json!({"id": id, "created": r["created"]}),
        None => Value::Null,
    })
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
                tx.prepare("SELECT id FROM sessions WHERE id NOT IN (SELECT session_id FROM search_docs)")?;
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

    pub fn sessions_get(&mut self, id: &str, inline: bool) -> HostResult<Value> {
        self.read(|tx| {
            let row = session_row(tx, id)?
                .ok_or_else(|| HostError::not_found(format!("no saved session {id:?}")))?;
            let mut entries = session_body(tx, id)?;
            if inline {
                let mut inl = Inliner::new(tx);
                for e in &mut entries {
                    inl.inline(e)?;
                }
            }
            Ok(json!({
                "id": row.id, "name": row.name, "createdAt": row.created_at,
                "pinned": row.pinned, "entries": entries,
            }))
        })
    }

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
            let body = session_body(&w.tx, id)?;
            let live: Vec<Value> = live_entries(&w.tx)?.into_iter().map(|(_, e)| e).collect();
            if live != body {
                history::replace_all(w, &body)?;
            }
            // a (re)load starts a fresh write-back prefix even when re-binding the same id
            if binding(&w.tx)? == id {
                let n = w.tx.execute("DELETE FROM history_trimmed", [])?;
                if n > 0 {
                    w.changes.binding = true;
                }
            } else {
                set_binding(w, id)?;
            }
            let mut r = json!({"length": body.len()});
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
                "UPDATE sessions SET name = ?2, name_lower = ?3, updated_at = ?4 WHERE id = ?1 AND name != ?2",
                params![id, name, lower(&name), w.now],
            )?;
            row_updated(w, id, n)
        })
    }

    pub fn sessions_pin(&mut self, id: &str, pinned: bool, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("sessions.pin", crid, |w| {
            let n = w.tx.execute(
                "UPDATE sessions SET pinned = ?2, updated_at = ?3 WHERE id = ?1 AND pinned != ?2",
                params![id, pinned as i64, w.now],
            )?;
            row_updated(w, id, n)
        })
    }

    pub fn sessions_delete(&mut self, id: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("sessions.delete", crid, |w| Ok(json!({"deleted": delete_session(w, id)?})))
    }

    pub fn sessions_clear_all(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("sessions.clearAll", crid, |w| {
            let ids: Vec<String> = {
                let mut stmt = w.tx.prepare("SELECT id FROM sessions")?;
                let r = stmt.query_map([], |r| r.get(0))?;
                r.collect::<Result<_, _>>()?
            };
            search::clear(&w.tx)?;
            for id in &ids {
                delete_session(w, id)?;
            }
            set_binding(w, "")?;
            Ok(json!({"deleted": ids.len()}))
        })
    }

    /// `copy_video_src`: the entry gets the newest `videoSrc` of where it lands (the session's body
    /// or the live history).
    pub fn sessions_append_to(
        &mut self,
        id: &str,
        entry: Value,
        copy_video_src: bool,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        if id.is_empty() {
            return Err(HostError::bad_request("id must not be empty"));
        }
        validate_new_entry(&entry).map_err(HostError::bad_request)?;
        let ing = blobs::prepare_entries(vec![entry])?;
        self.write("sessions.appendTo", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            // §11.8: the bound session's live copy is the live history
            let to_session = session_exists(&w.tx, id)? && binding(&w.tx)? != id;
            let copied = if copy_video_src {
                with_video_src(&w.tx, &ing.entries[0], to_session.then_some(id))?
            } else {
                None
            };
            let e = copied.as_ref().unwrap_or(&ing.entries[0]);
            if to_session {
                let n: i64 =
                    w.tx.query_row("SELECT entry_count FROM sessions WHERE id = ?1", [id], |r| r.get(0))?;
                insert_body_entry(w, id, n as usize, e)?;
                let add = format!("{}\n", entry_text(e));
                search::append_to_index(&w.tx, id, &add)?;
                w.tx.execute(
                    "UPDATE sessions SET entry_count = entry_count + 1, updated_at = ?2 WHERE id = ?1",
                    params![id, w.now],
                )?;
                w.changes.sessions.insert(id.to_owned());
                w.changes.sessions_index = true;
                return Ok(json!({"target": "session", "sessionId": id, "length": n + 1, "index": n}));
            }
            let (length, index) = append_entries(w, std::slice::from_ref(e))?;
            Ok(json!({"target": "live", "length": length, "index": index}))
        })
    }

    pub fn sessions_export(&mut self, ids: &[String], format: ExportFormat) -> HostResult<Value> {
        self.read(|tx| {
            let mut sessions = Vec::new();
            for id in ids {
                let row = session_row(tx, id)?.ok_or_else(|| HostError::not_found(format!("no saved session {id:?}")))?;
                sessions.push((row, session_body(tx, id)?));
            }
            let date = local_date();
            match format {
                ExportFormat::Markdown => {
                    let (row, body) = &sessions[0];
                    let name = &row.name;
                    Ok(json!({"filename": filename(name, &date, "md"), "text": markdown(name, &local_iso(), body)}))
                }
                ExportFormat::Json => {
                    let mut images = BTreeMap::new();
                    let mut out = Vec::new();
                    for (row, body) in &sessions {
                        // §12.19: originals back in `image_url`, no `originalUrl`
                        let body: Vec<Value> = body.iter().map(export_entry).collect();
                        for e in &body {
                            for sha in referenced_blobs(e) {
                                if images.contains_key(&sha) {
                                    continue;
                                }
                                let (mime, bytes) = referenced_blob(tx, &sha)?;
                                images.insert(sha, json!({"mime": mime, "data": base64_encode(&bytes)}));
                            }
                        }
                        let extra: Option<String> = tx.query_row(
                            "SELECT extra FROM sessions WHERE id = ?1",
                            [&row.id],
                            |r| r.get(0),
                        )?;
                        let mut s = Map::new();
                        if let Some(Value::Object(x)) = extra.and_then(|x| serde_json::from_str(&x).ok()) {
                            s.extend(x);
                        }
                        s.insert("id".into(), row.id.clone().into());
                        s.insert("name".into(), row.name.clone().into());
                        s.insert("createdAt".into(), row.created_at.into());
                        s.insert("pinned".into(), row.pinned.into());
                        s.insert("entries".into(), Value::Array(body));
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
