//! The live history (docs/keeps.md "The live window"): a window onto the bound session's chosen
//! path, from `live_state.live_from` on (`window.rs`). Writes that add entries to an unbound
//! (empty) live history first create the session that keeps them (auto-keep). Trimming moves
//! `live_from`; removals move entries to the trash (`trash.rs`); nothing here deletes an entry.

use serde_json::{json, Map, Value};

use super::blobs::{self, Inliner};
use super::bodies::{append_to_path, create_kept, rewrite_entry};
use super::changelog::current_seq;
use super::connection::{Store, WriteOutcome};
use super::entries::path_rows;
use super::rows::{path_len, row_entry, session_exists};
use super::tx::WriteTx;
use super::window::{
    binding, live_entries, live_len, live_row_at, live_state, set_window, trim, unbind, window_start,
    with_video_src,
};
use super::{trash, versions};
use crate::domain::entry::{is_image_bearing, is_last_page_context_candidate, same_entries, same_entry};
use crate::domain::new_entry::NewEntry;
use crate::domain::trash::Reason;
use crate::protocol::{HostError, HostResult};

/// Rewrite one live row in place (stamps, bounding, summaries, rescue stubs).
pub(super) fn update_live(w: &mut WriteTx, row: i64, old: &Value, new: &Value) -> HostResult<()> {
    rewrite_entry(w, row, old, new)?;
    w.changes.history = true;
    Ok(())
}

/// What adding entries to the live history did.
pub(super) struct Appended {
    pub length: usize,
    pub index: usize,
    /// The session the entries went to (the live chat's).
    pub session_id: String,
    /// The entryId the host gave the last entry.
    pub entry_id: Option<String>,
    /// `{sessionId, created: true}` when this write created the session that keeps the chat.
    pub kept: Option<Value>,
    /// Sessions a `maxSessions` cap moved to the trash to make room for it.
    pub evicted: Vec<String>,
}

impl Appended {
    /// `{length, index, sessionId}` plus `kept` and `evicted` when the write created a session.
    pub fn to_json(&self) -> Value {
        let mut r = json!({"length": self.length, "index": self.index});
        self.add_to(&mut r);
        r
    }

    pub fn add_to(&self, r: &mut Value) {
        r["sessionId"] = json!(self.session_id);
        if let Some(e) = &self.entry_id {
            r["entryId"] = json!(e);
        }
        if let Some(k) = &self.kept {
            r["kept"] = k.clone();
            r["evicted"] = json!(self.evicted);
        }
    }
}

/// Append already-ingested entries to the live history: auto-keep when it is unbound, then the
/// trim rule. Returns the window's length and the last entry's live index.
pub(super) fn append_entries(
    w: &mut WriteTx,
    entries: &[Value],
    fallback_name: Option<&str>,
) -> HostResult<Appended> {
    let mut sid = binding(&w.tx)?;
    let mut kept = None;
    let mut evicted = Vec::new();
    if sid.is_empty() {
        sid = create_kept(w, entries, fallback_name)?;
        set_window(w, &sid, path_len(&w.tx, &sid)?)?;
        kept = Some(json!({"sessionId": sid, "created": true}));
        evicted = trash::evict(w, &sid)?;
    }
    let stored = append_to_path(w, &sid, entries)?;
    w.changes.history = true;
    trim(w)?;
    let length = live_len(&w.tx)?;
    let entry_id = stored.last().and_then(crate::domain::entry::entry_id).map(str::to_owned);
    Ok(Appended { length, index: length.saturating_sub(1), session_id: sid, entry_id, kept, evicted })
}

/// §6.1: stamp every image-bearing live entry not yet flagged. Returns the count.
pub(super) fn mark_images_seen(w: &mut WriteTx) -> HostResult<usize> {
    let mut stamped = 0;
    for (id, e) in live_entries(&w.tx)? {
        if is_image_bearing(&e) && e.get("imagesSeen") != Some(&Value::Bool(true)) {
            let mut new = e.clone();
            if let Some(o) = new.as_object_mut() {
                o.insert("imagesSeen".into(), Value::Bool(true));
            }
            update_live(w, id, &e, &new)?;
            stamped += 1;
        }
    }
    Ok(stamped)
}

/// Move live rows (in order) to the trash.
fn trash_live(w: &mut WriteTx, rows: Vec<(i64, Value)>, reason: Reason) -> HostResult<()> {
    let sid = binding(&w.tx)?;
    if rows.is_empty() || sid.is_empty() {
        return Ok(());
    }
    trash::take_entries(w, &sid, &rows, reason)?;
    w.changes.history = true;
    Ok(())
}

/// `saveCurrent`: the live chat is kept already; `{id, created: false}` of its session, or
/// `null` when the live history is empty.
pub(super) fn save_current(w: &mut WriteTx) -> HostResult<Value> {
    let b = binding(&w.tx)?;
    if b.is_empty() || live_len(&w.tx)? == 0 {
        return Ok(Value::Null);
    }
    Ok(json!({"id": b, "created": false}))
}

/// Which entry `history.markFailed` marks.
#[derive(Debug, Clone)]
pub enum FailedTarget {
    Index(u64),
    EntryId(String),
}

/// Options of `history.get`.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub from: u64,
    pub limit: Option<u64>,
    pub inline: bool,
}

impl Store {
    pub fn history_get(&mut self, page: Page) -> HostResult<Value> {
        self.read(|tx| {
            let (sid, offset) = live_state(tx)?;
            let length = live_len(tx)?;
            let mut entries = Vec::new();
            if !sid.is_empty() {
                let from = usize::try_from(page.from).unwrap_or(usize::MAX);
                if from < length {
                    let limit = page.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
                    let mut inliner = Inliner::new(tx);
                    for (_, mut e) in path_rows(tx, &sid, offset + from, limit)? {
                        if page.inline {
                            inliner.inline(&mut e)?;
                        }
                        entries.push(e);
                    }
                }
            }
            let forks = if sid.is_empty() { json!([]) } else { versions::forks_json(tx, &sid)? };
            Ok(json!({
                "entries": entries,
                "from": page.from,
                "length": length,
                "offset": if sid.is_empty() { 0 } else { offset },
                "forks": forks,
                "activeSessionId": sid,
                "changeSeq": current_seq(tx)?,
            }))
        })
    }

    pub fn history_meta(&mut self) -> HostResult<Value> {
        self.read(|tx| {
            let (sid, offset) = live_state(tx)?;
            Ok(json!({
                "length": live_len(tx)?,
                "offset": if sid.is_empty() { 0 } else { offset },
                "activeSessionId": sid,
                "changeSeq": current_seq(tx)?,
            }))
        })
    }

    /// `''` unbinds (the live history empties; its entries stay in their session). Another id
    /// binds when the live history is empty, or when that session's body equals it.
    pub fn history_set_binding(&mut self, id: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.setBinding", crid, |w| {
            if id.is_empty() {
                unbind(w)?;
                return Ok(json!({"activeSessionId": ""}));
            }
            if !session_exists(&w.tx, id)? {
                return Err(HostError::not_found(format!("no saved session {id:?}")));
            }
            if binding(&w.tx)? == id {
                return Ok(json!({"activeSessionId": id}));
            }
            let live: Vec<Value> = live_entries(&w.tx)?.into_iter().map(|(_, e)| e).collect();
            if live.is_empty() {
                let from = window_start(&w.tx, id)?;
                set_window(w, id, from)?;
            } else {
                let body: Vec<Value> = path_rows(&w.tx, id, 0, None)?.into_iter().map(|(_, e)| e).collect();
                if !same_entries(&body, &live) {
                    return Err(HostError::conflict(format!(
                        "session {id:?} holds other entries than the live history; load it instead"
                    )));
                }
                set_window(w, id, 0)?;
            }
            Ok(json!({"activeSessionId": id}))
        })
    }

    /// `copy_video_src`: the entry gets the newest live entry's `videoSrc` (see [`with_video_src`]).
    pub fn history_append(
        &mut self,
        entry: NewEntry,
        mark_seen: bool,
        copy_video_src: bool,
        fallback_name: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let ing = blobs::prepare_entries(vec![entry.into_value()])?;
        self.write("history.append", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            let copied = if copy_video_src { with_video_src(&w.tx, &ing.entries[0], None)? } else { None };
            let done = match &copied {
                Some(e) => append_entries(w, std::slice::from_ref(e), fallback_name)?,
                None => append_entries(w, &ing.entries, fallback_name)?,
            };
            if mark_seen {
                mark_images_seen(w)?;
            }
            Ok(done.to_json())
        })
    }

    /// Replace the live window's entries: the ones that differ go to the trash (`cleared`); an
    /// unbound live history is kept in a new session as any first write is.
    pub fn history_replace(
        &mut self,
        entries: Vec<Map<String, Value>>,
        fallback_name: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let ing = blobs::prepare_entries(entries.into_iter().map(Value::Object).collect())?;
        self.write("history.replace", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            let before = live_entries(&w.tx)?;
            // entries equal to the window's first ones stay as they are
            let same = before.iter().zip(&ing.entries).take_while(|((_, a), b)| same_entry(a, b)).count();
            let mut r = json!({});
            if same < before.len() {
                trash_live(w, before[same..].to_vec(), Reason::Cleared)?;
            }
            if same < ing.entries.len() {
                let done = append_entries(w, &ing.entries[same..], fallback_name)?;
                done.add_to(&mut r);
            }
            r["length"] = json!(live_len(&w.tx)?);
            Ok(r)
        })
    }

    /// "New chat": the live history empties and unbinds; the chat stays in its session.
    pub fn history_clear(&mut self, save_current: bool, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.clear", crid, |w| {
            let saved = if save_current { Some(self::save_current(w)?) } else { None };
            unbind(w)?;
            let mut r = json!({});
            if let Some(s) = saved {
                r["saved"] = s;
            }
            Ok(r)
        })
    }

    pub fn history_remove_at(&mut self, index: u64, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.removeAt", crid, |w| match live_row_at(&w.tx, index)? {
            Some(row) => {
                let e = row_entry(&w.tx, row)?;
                trash_live(w, vec![(row, e)], Reason::Deleted)?;
                Ok(json!({"removed": true}))
            }
            None => Ok(json!({"removed": false})),
        })
    }

    pub fn history_truncate_from(&mut self, index: u64, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.truncateFrom", crid, |w| {
            let live = live_entries(&w.tx)?;
            let from = usize::try_from(index).unwrap_or(usize::MAX);
            if from < live.len() {
                trash_live(w, live[from..].to_vec(), Reason::Edited)?;
            }
            Ok(json!({"length": live_len(&w.tx)?}))
        })
    }

    pub fn history_remove_by_attach_id(
        &mut self,
        attach: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("history.removeByAttachId", crid, |w| {
            let Some(a) = attach.filter(|a| !a.is_empty()) else {
                return Ok(json!({"removedIndex": -1}));
            };
            // the first entry with this attachId, even if newer ones exist (§4.2)
            let live = live_entries(&w.tx)?;
            let hit = live.iter().position(|(_, e)| crate::domain::entry::attach_id(e) == Some(a));
            match hit {
                Some(i) => {
                    trash_live(w, vec![live[i].clone()], Reason::UndoAttach)?;
                    Ok(json!({"removedIndex": i}))
                }
                None => Ok(json!({"removedIndex": -1})),
            }
        })
    }

    pub fn history_remove_last_page_context(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.removeLastPageContext", crid, |w| {
            let live = live_entries(&w.tx)?;
            match live.iter().rposition(|(_, e)| is_last_page_context_candidate(e)) {
                Some(i) => {
                    trash_live(w, vec![live[i].clone()], Reason::UndoAttach)?;
                    Ok(json!({"removedIndex": i}))
                }
                None => Ok(json!({"removedIndex": -1})),
            }
        })
    }

    pub fn history_mark_images_seen(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.markImagesSeen", crid, |w| Ok(json!({"stamped": mark_images_seen(w)?})))
    }

    /// Regenerate / Edit & resend (docs/keeps.md "Versions"): the live entries from `index` on
    /// become another version of that turn and `entry` continues the chat instead, in one write.
    pub fn history_branch(
        &mut self,
        index: u64,
        entry: NewEntry,
        mark_seen: bool,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let ing = blobs::prepare_entries(vec![entry.into_value()])?;
        self.write("history.branch", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            let (sid, from) = live_state(&w.tx)?;
            let len = live_len(&w.tx)?;
            let i = usize::try_from(index).unwrap_or(usize::MAX);
            if sid.is_empty() || i >= len {
                return Err(HostError::bad_request(format!(
                    "index {index} is not in the live history (length {len})"
                )));
            }
            let fork = versions::branch(w, &sid, from + i, &ing.entries[0])?;
            w.changes.history = true;
            trim(w)?;
            if mark_seen {
                mark_images_seen(w)?;
            }
            let length = live_len(&w.tx)?;
            let mut r = json!({"length": length, "index": length.saturating_sub(1), "sessionId": sid});
            if let Value::Object(f) = fork.to_json() {
                r.as_object_mut().expect("object").extend(f);
            }
            Ok(r)
        })
    }

    /// Make another version of a turn of the live chat its chosen path (the replaced one is kept
    /// as a version in turn).
    pub fn history_switch_version(
        &mut self,
        fork_entry_id: &str,
        version: u64,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("history.switchVersion", crid, |w| {
            let sid = binding(&w.tx)?;
            if sid.is_empty() {
                return Err(HostError::not_found("the live history is empty: there is no version to switch"));
            }
            let v = u32::try_from(version).map_err(|_| HostError::bad_request("version is too large"))?;
            let switched = versions::switch(w, &sid, fork_entry_id, v)?;
            let (_, offset) = live_state(&w.tx)?;
            let mut r = json!({"length": live_len(&w.tx)?, "offset": offset, "switched": switched.is_some()});
            let fork =
                versions::visible_forks(&w.tx, &sid)?.into_iter().find(|f| f.fork_entry_id == fork_entry_id);
            if let Some(Value::Object(f)) = fork.map(|f| f.to_json()) {
                r.as_object_mut().expect("object").extend(f);
            }
            Ok(r)
        })
    }

    /// A user entry whose request failed carries `failed: {code, message, at}` until a reply to
    /// it is appended (docs/keeps.md "Failed turns"). The entry is named by its entryId (found in
    /// the live window) or by its live index.
    pub fn history_mark_failed(
        &mut self,
        target: FailedTarget,
        code: &str,
        message: &str,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("history.markFailed", crid, |w| {
            let found = match &target {
                FailedTarget::Index(i) => live_row_at(&w.tx, *i)?.map(|row| (row, *i as usize)),
                FailedTarget::EntryId(id) => live_entries(&w.tx)?
                    .iter()
                    .enumerate()
                    .find(|(_, (_, e))| crate::domain::entry::entry_id(e) == Some(id.as_str()))
                    .map(|(i, (row, _))| (*row, i)),
            };
            let Some((row, index)) = found else {
                return Err(HostError::not_found("that entry is not in the live history"));
            };
            let e = row_entry(&w.tx, row)?;
            if e.get("role").and_then(Value::as_str) != Some("user") {
                return Err(HostError::bad_request("only a user entry can be marked failed"));
            }
            let mut marked = e.clone();
            if let Some(o) = marked.as_object_mut() {
                o.insert("failed".into(), json!({"code": code, "message": message, "at": w.now}));
            }
            update_live(w, row, &e, &marked)?;
            Ok(json!({"marked": true, "index": index, "at": w.now}))
        })
    }
}
