//! The entry table, `session_entries` (schema 5): every entry of every conversation, stored once.
//! A row is on its session's chosen path (`branch_id` NULL, positions 0..n−1), on another version
//! of it (`branch_id`), or in the trash (its session row is trashed). The live history is a window
//! onto the bound session's chosen path (`history.rs`); moving an entry between these places
//! changes its row's columns, never its JSON or its image references.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::blobs::{add_refs, replace_refs};
use super::salvage::marker::content_damage;
use crate::domain::entry::{attach_id, content_chars, entry_id, image_part_count, role, ENTRY_ID};
use crate::protocol::HostResult;

/// Parse a stored entry. Only the host writes these rows, always as JSON, so an unreadable one
/// was damaged on disk: `db_corrupt`, never silently `[]`.
pub(super) fn parse_entry(raw: &str, what: &str) -> HostResult<Value> {
    serde_json::from_str(raw).map_err(|e| content_damage(format!("a stored {what} no longer parses: {e}")))
}

/// A new entryId (a random UUID, like every id the host makes).
pub(super) fn new_entry_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn entry_id_taken(conn: &Connection, id: &str) -> HostResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM session_entries WHERE entry_id = ?1")?
        .query_row([id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// `e` with an entryId no stored entry has: its own when it carries a free one (an imported
/// export), else a new one.
pub(super) fn with_entry_id(conn: &Connection, e: &Value) -> HostResult<Value> {
    let mut out = e.clone();
    let keep = match entry_id(e) {
        Some(id) if !id.is_empty() && id.len() <= 128 => !entry_id_taken(conn, id)?,
        _ => false,
    };
    if !keep {
        if let Some(o) = out.as_object_mut() {
            o.insert(ENTRY_ID.into(), Value::String(new_entry_id()));
        }
    }
    Ok(out)
}

/// Insert a row for `e` (which already has its entryId) at `position` of session `sid`'s chosen
/// path (`branch` None) or of one of its versions, with its image references.
pub(super) fn insert_row(
    conn: &Connection,
    sid: &str,
    branch: Option<i64>,
    position: usize,
    e: &Value,
    now: i64,
) -> HostResult<i64> {
    conn.prepare_cached(
        "INSERT INTO session_entries (session_id, branch_id, position, role, content_chars, image_count, entry,
                                      attach_id, entry_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        sid,
        branch,
        position as i64,
        role(e),
        content_chars(e) as i64,
        image_part_count(e) as i64,
        e.to_string(),
        attach_id(e),
        entry_id(e),
        now
    ])?;
    let id = conn.last_insert_rowid();
    add_refs(conn, id, e)?;
    Ok(id)
}

/// Rewrite one row's entry in place (stamps, bounding, summaries, rescue stubs), with its
/// derived columns and references. Returns the session it belongs to.
pub(super) fn update_row(conn: &Connection, row: i64, e: &Value) -> HostResult<String> {
    let sid: String = conn
        .prepare_cached(
            "UPDATE session_entries SET role = ?2, content_chars = ?3, image_count = ?4, entry = ?5, attach_id = ?6,
                                        entry_id = ?7
             WHERE id = ?1 RETURNING session_id",
        )?
        .query_row(
            params![
                row,
                role(e),
                content_chars(e) as i64,
                image_part_count(e) as i64,
                e.to_string(),
                attach_id(e),
                entry_id(e)
            ],
            |r| r.get(0),
        )?;
    replace_refs(conn, row, e)?;
    Ok(sid)
}

/// `(row id, entry)` of session `sid`'s chosen path from position `from`, at most `limit`.
pub(super) fn path_rows(
    conn: &Connection,
    sid: &str,
    from: usize,
    limit: Option<usize>,
) -> HostResult<Vec<(i64, Value)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL AND position >= ?2
         ORDER BY position, id LIMIT ?3",
    )?;
    let lim = limit.map_or(-1, |l| l.min(i64::MAX as usize) as i64);
    let rows = stmt.query_map(params![sid, from.min(i64::MAX as usize) as i64, lim], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for r in rows {
        let (id, raw) = r?;
        out.push((id, parse_entry(&raw, "entry")?));
    }
    Ok(out)
}

/// `(row id, contentChars)` of the chosen path from `from`, in order (for the trim rule).
pub(super) fn path_chars(conn: &Connection, sid: &str, from: usize) -> HostResult<Vec<(i64, usize)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, content_chars FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL AND position >= ?2
         ORDER BY position, id",
    )?;
    let rows = stmt.query_map(params![sid, from as i64], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?.max(0) as usize))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// `(row id, position)` of the chosen-path row at `position`.
pub(super) fn path_row_at(conn: &Connection, sid: &str, position: usize) -> HostResult<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT id FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL AND position = ?2
             ORDER BY id LIMIT 1",
        )?
        .query_row(params![sid, position as i64], |r| r.get(0))
        .optional()?)
}

/// Number the rows of a path 0..n−1 again from `from` on, after rows left it.
pub(super) fn renumber(conn: &Connection, sid: &str, branch: Option<i64>, from: usize) -> HostResult<()> {
    conn.execute(
        "UPDATE session_entries SET position = r.n FROM
           (SELECT id AS rid, ?3 + row_number() OVER (ORDER BY position, id) - 1 AS n FROM session_entries
            WHERE session_id = ?1 AND branch_id IS ?2 AND position >= ?3) AS r
         WHERE session_entries.id = r.rid AND session_entries.position <> r.n",
        params![sid, branch, from as i64],
    )?;
    Ok(())
}

/// How many entries are on session `sid`'s chosen path (counted, not the cached column).
pub(super) fn count_path(conn: &Connection, sid: &str) -> HostResult<usize> {
    Ok(conn
        .prepare_cached("SELECT count(*) FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL")?
        .query_row([sid], |r| r.get::<_, i64>(0))? as usize)
}
