//! Writing session bodies (docs/keeps.md): entries appended to a chosen path or rewritten in
//! place, a new session's row and body, the name that follows a chat's first message, and the
//! search text an appended entry adds.

use rusqlite::{params, OptionalExtension};
use serde_json::{Map, Value};

use super::entries::{self, parse_entry};
use super::rows::{is_trashed, path_len, row_entry, touched};
use super::search;
use super::tx::WriteTx;
use super::window::binding;
use crate::domain::entry::entry_text;
use crate::domain::sessions::{auto_name, choose_name};
use crate::domain::text::lower;
use crate::protocol::HostResult;
use crate::util::time::local_date;

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
        text.push_str(&indexed_text(&e));
        stored.push(e);
    }
    w.tx.execute(
        "UPDATE sessions SET entry_count = entry_count + ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries.len() as i64, w.now],
    )?;
    if is_trashed(&w.tx, sid)? == Some(false)
        && !w.reindex.contains(sid)
        && !search::append_to_index(&w.tx, sid, &text)?
    {
        // not indexed (cannot happen through the host's own writes): the whole text is
        // indexed before the commit, as after any rewrite
        w.reindex.insert(sid.to_owned());
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
            w.changes.history |= binding(&w.tx)? == sid;
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

/// Write a new session's body (imports, snapshots): entries get entryIds of their own. Returns
/// the entryIds given, in order (an entry keeps its own when no stored entry has it).
pub(super) fn write_body(w: &mut WriteTx, sid: &str, entries: &[Value]) -> HostResult<Vec<String>> {
    let mut ids = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let e = entries::with_entry_id(&w.tx, e)?;
        entries::insert_row(&w.tx, sid, None, i, &e, w.now)?;
        ids.push(crate::domain::entry::entry_id(&e).unwrap_or_default().to_owned());
    }
    w.tx.execute(
        "UPDATE sessions SET entry_count = ?2, updated_at = ?3 WHERE id = ?1",
        params![sid, entries::count_path(&w.tx, sid)? as i64, w.now],
    )?;
    w.reindex.insert(sid.to_owned());
    touched(w, sid);
    Ok(ids)
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

/// The searchable text an entry adds to its session (`entryText + "\n"`).
pub(super) fn indexed_text(e: &Value) -> String {
    format!("{}\n", entry_text(e))
}
