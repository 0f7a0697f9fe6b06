//! Session rows (docs/keeps.md): does a session exist, is it in the trash, its
//! drawer row, its chosen path's length and entries; and noting that a write touched one.

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::drawer::{drawer_row, ROW_COLS};
use super::entries::{self, parse_entry};
use super::salvage::marker::content_damage;
use super::tx::WriteTx;
use crate::domain::sessions::DrawerRow;
use crate::protocol::HostResult;

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
            return Err(content_damage(format!(
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
