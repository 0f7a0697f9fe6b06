//! Sessions (storage-model §5; docs/keeps.md): every conversation is one, kept from its first
//! entry. The `sessions.*` operations: save (snapshots), listing and search, get, load, rename,
//! pin, delete, append, export. Rows are read in `rows.rs`, bodies written in `bodies.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{params, OptionalExtension};
use serde_json::{json, Map, Value};

use super::blobs::{self, referenced_blob, Inliner};
use super::bodies::{append_to_path, insert_session, write_body};
use super::connection::{Store, WriteOutcome};
use super::drawer::{Drawer, Found, Listing};
use super::entries;
use super::history::{self, append_entries};
use super::rows::{is_trashed, path_len, session_body, session_exists, session_row, touched};
use super::tx::WriteTx;
use super::window::{self, with_video_src};
use super::{search, trash, versions};
use crate::domain::dataurl::base64_encode;
use crate::domain::entry::referenced_blobs;
use crate::domain::export::{export_entry, filename, markdown, EXPORT_FORMAT, EXPORT_VERSION};
use crate::domain::listing::parse_cursor;
use crate::domain::new_entry::NewEntry;
use crate::domain::sessions::{choose_name, normalize_name, search_text};
use crate::domain::text::lower;
use crate::domain::trash::Reason;
use crate::protocol::{HostError, HostResult};
use crate::util::time::{local_date, local_iso};

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
    let bound = window::binding(&w.tx)?;
    let live_empty = window::live_len(&w.tx)? == 0;
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
    let evicted = trash::evict(w, &new_id)?;
    Ok(json!({"session": session_row(&w.tx, &new_id)?, "created": true, "evicted": evicted}))
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
        if !missing.is_empty() && self.mode == super::open::Mode::ReadWrite && self.damage().is_none() {
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

    /// A page of the drawer (storage-model §5.3): up to `limit` rows (`None`: every row) after
    /// the row `cursor` names (`None`: from the first), of every session or of a search's hits.
    /// The work grows with the page: names are matched in memory, content hits counted from
    /// the index, and snippets cut only for the rows sent.
    pub fn sessions_list(
        &mut self,
        query: Option<&str>,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> HostResult<Listing> {
        let q = lower(crate::domain::text::js_trim(query.unwrap_or("")));
        let after = cursor.map(|c| parse_cursor(c, &q)).transpose()?;
        let limit = limit.unwrap_or(usize::MAX);
        if !q.is_empty() {
            self.ensure_search_index()?;
        }
        let held = self.drawer.take();
        let listing = self.read(|tx| {
            if q.is_empty() {
                let (drawer, page) = Drawer::page(tx, held, after.as_ref(), limit)?;
                let found = page.rows.map(|i| (i, Found::Listed)).collect();
                return Ok(Listing::page(drawer, &q, found, page.total, page.more));
            }
            let drawer = Drawer::current(tx, held)?;
            let start = after.as_ref().map_or(0, |k| drawer.after(k));
            let n = drawer.len();
            // name hits from the names in memory; content hits from the index (§5.3) for the
            // other sessions; both in the drawer's order
            let names = drawer.name_hits(&q);
            let mut content: Vec<Option<search::Candidate>> = vec![None; n];
            for c in search::content_candidates(tx, &q, |d| drawer.doc(d), |i| !names[i])? {
                content[c.row] = Some(c);
            }
            let hit = |i: usize| names[i] || content[i].is_some();
            let mut total = (0..n).filter(|&i| hit(i)).count();
            let mut found = Vec::new();
            let mut i = start;
            while i < n && found.len() < limit {
                if names[i] {
                    found.push((i, Found::Name));
                } else if let Some(c) = &content[i] {
                    match search::snippet_of(tx, &q, c)? {
                        Some(snippet) => found.push((i, Found::Content(snippet))),
                        // a posting its text does not bear out: not a hit after all
                        None => total -= 1,
                    }
                }
                i += 1;
            }
            let more = (i..n).any(hit);
            Ok(Listing::page(drawer, &q, found, total, more))
        })?;
        // a copy of one page is not the drawer: the next call reads what it needs
        self.drawer = listing.drawer.whole.then(|| Arc::clone(&listing.drawer));
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
                "forks": versions::forks_json(tx, id)?,
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
            let saved = if save_current_first { Some(history::save_current(w)?) } else { None };
            let from = window::window_start(&w.tx, id)?;
            window::set_window(w, id, from)?;
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
            window::unbind(w)?;
            Ok(json!({"deleted": ids.len()}))
        })
    }

    /// `copy_video_src`: the entry gets the newest `videoSrc` of where it lands (the session's body
    /// or the live history).
    pub fn sessions_append_to(
        &mut self,
        id: &str,
        entry: NewEntry,
        flags: AppendFlags,
        fallback_name: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let copy_video_src = flags.copy_video_src;
        if id.is_empty() {
            return Err(HostError::bad_request("id must not be empty"));
        }
        let ing = blobs::prepare_entries(vec![entry.into_value()])?;
        self.write("sessions.appendTo", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            // the bound session's entries land in the live window; a session in the trash keeps
            // the reply with the rest of it; only an id unknown to both lands live
            let trashed = is_trashed(&w.tx, id)?;
            let to_session = match trashed {
                Some(true) => true,
                Some(false) => window::binding(&w.tx)? != id,
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
                history::mark_images_seen(w)?;
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
                sessions.push((row, session_body(tx, id)?, versions::export_json(tx, id)?));
            }
            let date = local_date();
            match format {
                ExportFormat::Markdown => {
                    let (row, body, _) = &sessions[0];
                    let name = &row.name;
                    let forks: std::collections::HashMap<String, u32> = versions::visible_forks(tx, &row.id)?
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
