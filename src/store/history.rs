//! Live history and binding (storage-model §4, §11.1, §11.15).

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::blobs::{self, add_refs, replace_refs, Holder, Inliner};
use super::changes::current_seq;
use super::{Store, WriteOutcome, WriteTx};
use crate::domain::entry::{
    attach_id, content_chars, image_part_count, is_image_bearing, is_last_page_context_candidate, role,
    validate_new_entry,
};
use crate::domain::history::trim_count;
use crate::protocol::{HostError, HostResult};

/// Parse a stored entry. Only the host writes these rows, always as JSON, so an unreadable one
/// was damaged on disk: `db_corrupt`, never silently `[]` (§11.15).
pub(super) fn parse_entry(raw: &str, what: &str) -> HostResult<Value> {
    serde_json::from_str(raw)
        .map_err(|e| super::salvage::content_damage(format!("a stored {what} no longer parses: {e}")))
}

pub(super) fn binding(conn: &Connection) -> HostResult<String> {
    conn.query_row("SELECT active_session_id FROM live_state WHERE id = 1", [], |r| r.get(0))
        .optional()?
        .ok_or_else(|| super::salvage::content_damage("the live_state row (the session binding) is missing"))
}

/// Set the binding; a change of binding forgets entries kept from the previous load.
pub(super) fn set_binding(w: &mut WriteTx, id: &str) -> HostResult<()> {
    if binding(&w.tx)? == id {
        return Ok(());
    }
    w.tx.execute(
        "UPDATE live_state SET active_session_id = ?1, bound_at = ?2 WHERE id = 1",
        params![id, if id.is_empty() { None } else { Some(w.now) }],
    )?;
    w.tx.execute("DELETE FROM history_trimmed", [])?;
    w.changes.binding = true;
    Ok(())
}

pub(super) fn live_len(conn: &Connection) -> HostResult<usize> {
    Ok(conn.query_row("SELECT count(*) FROM history_entries", [], |r| r.get::<_, i64>(0))? as usize)
}

/// The `videoSrc` of the newest entry carrying one (an object), in the live history or, with
/// `session`, in that saved session's body (storage-model §9 "Turns").
pub(super) fn newest_video_src(conn: &Connection, session: Option<&str>) -> HostResult<Option<Value>> {
    // instr() first: only entries that mention the key are parsed
    let raw: Option<String> = match session {
        None => conn
            .prepare_cached(
                "SELECT json_extract(entry, '$.videoSrc') FROM history_entries
                 WHERE instr(entry, '\"videoSrc\"') > 0 AND json_type(entry, '$.videoSrc') = 'object'
                 ORDER BY position DESC, id DESC LIMIT 1",
            )?
            .query_row([], |r| r.get(0))
            .optional()?,
        Some(sid) => conn
            .prepare_cached(
                "SELECT json_extract(entry, '$.videoSrc') FROM session_entries
                 WHERE session_id = ?1 AND instr(entry, '\"videoSrc\"') > 0
                   AND json_type(entry, '$.videoSrc') = 'object'
                 ORDER BY position DESC, id DESC LIMIT 1",
            )?
            .query_row([sid], |r| r.get(0))
            .optional()?,
    };
    raw.map(|t| parse_entry(&t, "videoSrc")).transpose()
}

/// The `copyVideoSrc` append argument: `entry` with `videoSrc` copied from the newest entry of its
/// destination carrying one, or `None` when it has its own or there is none to copy.
pub(super) fn with_video_src(
    conn: &Connection,
    entry: &Value,
    session: Option<&str>,
) -> HostResult<Option<Value>> {
    if entry.get("videoSrc").is_some() {
        return Ok(None);
    }
    Ok(newest_video_src(conn, session)?.and_then(|v| {
        let mut e = entry.clone();
        e.as_object_mut()?.insert("videoSrc".into(), v);
        Some(e)
    }))
}

/// `(row id, entry)` in order.
pub(super) fn live_entries(conn: &Connection) -> HostResult<Vec<(i64, Value)>> {
    let mut stmt = conn.prepare_cached("SELECT id, entry FROM history_entries ORDER BY position, id")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for r in rows {
        let (id, raw) = r?;
        out.push((id, parse_entry(&raw, "history entry")?));
    }
    Ok(out)
}

/// Entries kept from the front of a bound live history since its load (§11.1).
pub(super) fn trimmed_entries(conn: &Connection) -> HostResult<Vec<Value>> {
    let mut stmt = conn.prepare_cached("SELECT entry FROM history_trimmed ORDER BY position, id")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.map(|r| parse_entry(&r?, "trimmed entry")).collect()
}

/// Insert one live row at `position`, with its references.
pub(super) fn insert_live(w: &mut WriteTx, position: usize, e: &Value) -> HostResult<i64> {
    w.tx.execute(
        "INSERT INTO history_entries (position, role, content_chars, image_count, attach_id, entry, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            position as i64,
            role(e),
            content_chars(e) as i64,
            image_part_count(e) as i64,
            attach_id(e),
            e.to_string(),
            w.now
        ],
    )?;
    let id = w.tx.last_insert_rowid();
    add_refs(&w.tx, Holder::History, id, e)?;
    w.changes.history = true;
    Ok(id)
}

/// Rewrite one live row in place (stamps, bounding, summaries).
pub(super) fn update_live(w: &mut WriteTx, id: i64, e: &Value) -> HostResult<()> {
    w.tx.execute(
        "UPDATE history_entries SET role = ?2, content_chars = ?3, image_count = ?4, attach_id = ?5, entry = ?6
         WHERE id = ?1",
        params![id, role(e), content_chars(e) as i64, image_part_count(e) as i64, attach_id(e), e.to_string()],
    )?;
    replace_refs(&w.tx, Holder::History, id, e)?;
    w.changes.history = true;
    Ok(())
}

/// Apply the trim rule (§4.1) to the stored live history. Dropped entries of a bound history
/// are kept for the next write-back (§11.1).
pub(super) fn trim(w: &mut WriteTx) -> HostResult<usize> {
    let rows: Vec<(i64, usize)> = {
        let mut stmt =
            w.tx.prepare_cached("SELECT id, content_chars FROM history_entries ORDER BY position, id")?;
        let r = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as usize)))?;
        r.collect::<Result<_, _>>()?
    };
    let chars: Vec<usize> = rows.iter().map(|r| r.1).collect();
    let k = trim_count(&chars);
    if k == 0 {
        return Ok(0);
    }
    let bound = !binding(&w.tx)?.is_empty();
    let mut next_pos: i64 =
        w.tx.query_row("SELECT coalesce(max(position) + 1, 0) FROM history_trimmed", [], |r| r.get(0))?;
    for (id, _) in &rows[..k] {
        if bound {
            w.tx.execute(
                "INSERT INTO history_trimmed (position, entry, trimmed_at, attach_id) SELECT ?1, entry, ?2, attach_id FROM history_entries WHERE id = ?3",
                params![next_pos, w.now, id],
            )?;
            let tid = w.tx.last_insert_rowid();
            let raw: String =
                w.tx.query_row("SELECT entry FROM history_trimmed WHERE id = ?1", [tid], |r| r.get(0))?;
            add_refs(&w.tx, Holder::Trimmed, tid, &parse_entry(&raw, "trimmed entry")?)?;
            next_pos += 1;
        }
        w.tx.execute("DELETE FROM history_entries WHERE id = ?1", [id])?;
    }
    w.tx.execute("UPDATE history_entries SET position = position - ?1", [k as i64])?;
    w.changes.history = true;
    Ok(k)
}

/// Binding rule (§4.1): a write that leaves the live history empty unbinds.
pub(super) fn unbind_if_empty(w: &mut WriteTx) -> HostResult<()> {
    if live_len(&w.tx)? == 0 {
        set_binding(w, "")?;
    }
    Ok(())
}

/// Append already-ingested entries, trim, and return `(length, index of the last)`.
pub(super) fn append_entries(w: &mut WriteTx, entries: &[Value]) -> HostResult<(usize, usize)> {
    let start = live_len(&w.tx)?;
    for (i, e) in entries.iter().enumerate() {
        insert_live(w, start + i, e)?;
    }
    trim(w)?;
    let len = live_len(&w.tx)?;
    Ok((len, len.saturating_sub(1)))
}

/// §6.1: stamp every image-bearing live entry not yet flagged. Returns the count.
pub(super) fn mark_images_seen(w: &mut WriteTx) -> HostResult<usize> {
    let mut stamped = 0;
    for (id, mut e) in live_entries(&w.tx)? {
        if is_image_bearing(&e) && e.get("imagesSeen") != Some(&Value::Bool(true)) {
            if let Some(o) = e.as_object_mut() {
                o.insert("imagesSeen".into(), Value::Bool(true));
            }
            update_live(w, id, &e)?;
            stamped += 1;
        }
    }
    Ok(stamped)
}

/// Remove the live row with this id and close the gap in positions.
fn remove_row(w: &mut WriteTx, id: i64) -> HostResult<()> {
    let pos: i64 =
        w.tx.query_row("SELECT position FROM history_entries WHERE id = ?1", [id], |r| r.get(0))?;
    w.tx.execute("DELETE FROM history_entries WHERE id = ?1", [id])?;
    w.tx.execute("UPDATE history_entries SET position = position - 1 WHERE position > ?1", [pos])?;
    w.changes.history = true;
    unbind_if_empty(w)
}

/// Replace the whole live list (no trim; callers trim where the rule says so).
pub(super) fn replace_all(w: &mut WriteTx, entries: &[Value]) -> HostResult<()> {
    let old_ids: Vec<i64> = {
        let mut stmt = w.tx.prepare("SELECT id FROM history_entries")?;
        let r = stmt.query_map([], |r| r.get(0))?;
        r.collect::<Result<_, _>>()?
    };
    // Insert the new rows before deleting the old ones, so a blob both lists use keeps a
    // reference throughout and is never collected in between.
    for (i, e) in entries.iter().enumerate() {
        insert_live(w, i, e)?;
    }
    for id in &old_ids {
        w.tx.execute("DELETE FROM history_entries WHERE id = ?1", [id])?;
    }
    if !old_ids.is_empty() {
        w.changes.history = true;
    }
    Ok(())
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
            let length = live_len(tx)?;
            let limit = page.limit.map(|l| l.min(i64::MAX as u64) as i64).unwrap_or(-1);
            let from = page.from.min(i64::MAX as u64) as i64;
            let mut stmt =
                tx.prepare("SELECT entry FROM history_entries ORDER BY position, id LIMIT ?1 OFFSET ?2")?;
            let rows = stmt.query_map(params![limit, from], |r| r.get::<_, String>(0))?;
            let mut inliner = Inliner::new(tx);
            let mut entries = Vec::new();
            for r in rows {
                let mut e = parse_entry(&r?, "history entry")?;
                if page.inline {
                    inliner.inline(&mut e)?;
                }
                entries.push(e);
            }
            Ok(json!({
                "entries": entries,
                "from": page.from,
                "length": length,
                "activeSessionId": binding(tx)?,
                "changeSeq": current_seq(tx)?,
            }))
        })
    }

    pub fn history_meta(&mut self) -> HostResult<Value> {
        self.read(|tx| {
            Ok(json!({"length": live_len(tx)?, "activeSessionId": binding(tx)?, "changeSeq": current_seq(tx)?}))
        })
    }

    pub fn history_set_binding(&mut self, id: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.setBinding", crid, |w| {
            if !id.is_empty() && !super::sessions::session_exists(&w.tx, id)? {
                return Err(HostError::not_found(format!("no saved session {id:?}")));
            }
            set_binding(w, id)?;
            Ok(json!({"activeSessionId": id}))
        })
    }

    /// `copy_video_src`: the entry gets the newest live entry's `videoSrc` (see [`with_video_src`]).
    pub fn history_append(
        &mut self,
        entry: Value,
        mark_seen: bool,
        copy_video_src: bool,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        validate_new_entry(&entry).map_err(HostError::bad_request)?;
        let ing = blobs::prepare_entries(vec![entry])?;
        self.write("history.append", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            let copied = if copy_video_src { with_video_src(&w.tx, &ing.entries[0], None)? } else { None };
            let (length, index) = match &copied {
                Some(e) => append_entries(w, std::slice::from_ref(e))?,
                None => append_entries(w, &ing.entries)?,
            };
            if mark_seen {
                mark_images_seen(w)?;
            }
            Ok(json!({"length": length, "index": index}))
        })
    }

    pub fn history_replace(&mut self, entries: Vec<Value>, crid: Option<&str>) -> HostResult<WriteOutcome> {
        for (i, e) in entries.iter().enumerate() {
            if !e.is_object() {
                return Err(HostError::bad_request(format!("entries[{i}] must be an object")));
            }
        }
        let ing = blobs::prepare_entries(entries)?;
        self.write("history.replace", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            let before = live_entries(&w.tx)?;
            let same = before.len() == ing.entries.len()
                && before.iter().zip(&ing.entries).all(|((_, a), b)| a == b);
            if !same {
                // the whole list is replaced: entries kept from a previous trim no longer apply
                w.tx.execute("DELETE FROM history_trimmed", [])?;
                replace_all(w, &ing.entries)?;
                trim(w)?;
                unbind_if_empty(w)?;
            }
            Ok(json!({"length": live_len(&w.tx)?}))
        })
    }

    pub fn history_clear(&mut self, save_current: bool, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.clear", crid, |w| {
            let saved = if save_current { Some(super::sessions::save_current(w)?) } else { None };
            replace_all(w, &[])?;
            set_binding(w, "")?;
            let mut r = json!({});
            if let Some(s) = saved {
                r["saved"] = s;
            }
            Ok(r)
        })
    }

    pub fn history_remove_at(&mut self, index: u64, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.removeAt", crid, |w| {
            let id: Option<i64> = row_at(&w.tx, index)?;
            match id {
                Some(id) => {
                    remove_row(w, id)?;
                    Ok(json!({"removed": true}))
                }
                None => Ok(json!({"removed": false})),
            }
        })
    }

    pub fn history_truncate_from(&mut self, index: u64, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.truncateFrom", crid, |w| {
            let n = w.tx.execute(
                "DELETE FROM history_entries WHERE position >= ?1",
                [index.min(i64::MAX as u64) as i64],
            )?;
            if n > 0 {
                w.changes.history = true;
                unbind_if_empty(w)?;
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
            let hit: Option<(i64, i64)> = {
                let mut stmt = w.tx.prepare(
                    "SELECT id, position FROM history_entries WHERE json_extract(entry, '$.attachId') = ?1
                     AND json_type(entry, '$.attachId') = 'text' ORDER BY position, id LIMIT 1",
                )?;
                let mut rows = stmt.query_map([a], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.next().transpose()?
            };
            match hit {
                Some((id, pos)) => {
                    remove_row(w, id)?;
                    Ok(json!({"removedIndex": pos}))
                }
                None => Ok(json!({"removedIndex": -1})),
            }
        })
    }

    pub fn history_remove_last_page_context(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.removeLastPageContext", crid, |w| {
            let entries = live_entries(&w.tx)?;
            let hit = entries.iter().enumerate().rev().find(|(_, (_, e))| is_last_page_context_candidate(e));
            match hit {
                Some((index, (id, _))) => {
                    remove_row(w, *id)?;
                    Ok(json!({"removedIndex": index}))
                }
                None => Ok(json!({"removedIndex": -1})),
            }
        })
    }

    pub fn history_mark_images_seen(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        self.write("history.markImagesSeen", crid, |w| Ok(json!({"stamped": mark_images_seen(w)?})))
    }
}

fn row_at(conn: &Connection, index: u64) -> HostResult<Option<i64>> {
    let mut stmt =
        conn.prepare_cached("SELECT id FROM history_entries ORDER BY position, id LIMIT 1 OFFSET ?1")?;
    let mut rows = stmt.query_map([index.min(i64::MAX as u64) as i64], |r| r.get(0))?;
    Ok(rows.next().transpose()?)
}
