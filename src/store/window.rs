//! The live window (docs/keeps.md "The live window"): which session the live history is bound
//! to (`live_state.active_session_id`) and where on its chosen path the window starts
//! (`live_from`); moving, trimming and reading it.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::entries::{parse_entry, path_chars, path_row_at, path_rows};
use super::rows::path_len;
use super::salvage::marker::content_damage;
use super::tx::WriteTx;
use crate::domain::history::trim_count;
use crate::protocol::HostResult;

/// The session the live history belongs to (`''` = none; then the live history is empty).
pub(super) fn binding(conn: &Connection) -> HostResult<String> {
    Ok(live_state(conn)?.0)
}

/// `(binding, live_from)`.
pub(super) fn live_state(conn: &Connection) -> HostResult<(String, usize)> {
    conn.prepare_cached("SELECT active_session_id, live_from FROM live_state WHERE id = 1")?
        .query_row([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as usize)))
        .optional()?
        .ok_or_else(|| content_damage("the live_state row (the session binding) is missing"))
}

/// Point the live window at session `id` from body position `from` (`''` unbinds: an empty
/// window). Records a binding change and a history change when they happen.
pub(super) fn set_window(w: &mut WriteTx, id: &str, from: usize) -> HostResult<()> {
    let (old, old_from) = live_state(&w.tx)?;
    if old == id && old_from == from {
        return Ok(());
    }
    let from = if id.is_empty() { 0 } else { from };
    w.tx.execute(
        "UPDATE live_state SET active_session_id = ?1, live_from = ?2,
             bound_at = CASE WHEN ?1 = active_session_id THEN bound_at WHEN ?1 = '' THEN NULL ELSE ?3 END
         WHERE id = 1",
        params![id, from as i64, w.now],
    )?;
    if old != id {
        w.changes.binding = true;
    }
    // the window shows other entries unless it was empty and stays empty
    let shown_before = !old.is_empty() && path_len(&w.tx, &old)? > old_from;
    let shown_after = !id.is_empty() && path_len(&w.tx, id)? > from;
    if shown_before || shown_after {
        w.changes.history = true;
    }
    Ok(())
}

/// Unbind: the live history is empty again ("New chat"); every entry stays in its session.
pub(super) fn unbind(w: &mut WriteTx) -> HostResult<()> {
    set_window(w, "", 0)
}

/// Where the live window of session `sid` starts when it is loaded: the longest suffix of its
/// chosen path that satisfies the trim rule (60 entries, 300,000 chars, one oversized entry kept).
pub(super) fn window_start(conn: &Connection, sid: &str) -> HostResult<usize> {
    let chars: Vec<usize> = path_chars(conn, sid, 0)?.into_iter().map(|(_, c)| c).collect();
    Ok(trim_count(&chars))
}

pub(super) fn live_len(conn: &Connection) -> HostResult<usize> {
    let (sid, from) = live_state(conn)?;
    if sid.is_empty() {
        return Ok(0);
    }
    Ok(path_len(conn, &sid)?.saturating_sub(from))
}

/// `(row id, entry)` of the live window, in order.
pub(super) fn live_entries(conn: &Connection) -> HostResult<Vec<(i64, Value)>> {
    let (sid, from) = live_state(conn)?;
    if sid.is_empty() {
        return Ok(Vec::new());
    }
    path_rows(conn, &sid, from, None)
}

/// The row at live index `index`, if any.
pub(super) fn live_row_at(conn: &Connection, index: u64) -> HostResult<Option<i64>> {
    let (sid, from) = live_state(conn)?;
    if sid.is_empty() {
        return Ok(None);
    }
    let Some(pos) = usize::try_from(index).ok().and_then(|i| i.checked_add(from)) else {
        return Ok(None);
    };
    path_row_at(conn, &sid, pos)
}

/// The `videoSrc` of the newest entry carrying one (an object) on session `sid`'s chosen path, or
/// in the live window when `sid` is None (storage-model §9 "Turns").
pub(super) fn newest_video_src(conn: &Connection, session: Option<&str>) -> HostResult<Option<Value>> {
    let (sid, from) = match session {
        Some(s) => (s.to_owned(), 0),
        None => live_state(conn)?,
    };
    if sid.is_empty() {
        return Ok(None);
    }
    // instr() first: only entries that mention the key are parsed
    let raw: Option<String> = conn
        .prepare_cached(
            "SELECT json_extract(entry, '$.videoSrc') FROM session_entries
             WHERE session_id = ?1 AND branch_id IS NULL AND position >= ?2 AND instr(entry, '\"videoSrc\"') > 0
               AND json_type(entry, '$.videoSrc') = 'object'
             ORDER BY position DESC, id DESC LIMIT 1",
        )?
        .query_row(params![sid, from as i64], |r| r.get(0))
        .optional()?;
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

/// The trim rule (§4.1) applied to the live window: `live_from` moves past the entries it no
/// longer shows. They stay in the session.
pub(super) fn trim(w: &mut WriteTx) -> HostResult<usize> {
    let (sid, from) = live_state(&w.tx)?;
    if sid.is_empty() {
        return Ok(0);
    }
    let chars: Vec<usize> = path_chars(&w.tx, &sid, from)?.into_iter().map(|(_, c)| c).collect();
    let k = trim_count(&chars);
    if k > 0 {
        set_window(w, &sid, from + k)?;
    }
    Ok(k)
}
