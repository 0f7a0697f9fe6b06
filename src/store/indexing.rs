//! What content search covers: a session's chosen path, then its other
//! versions; a session's search data rebuilt from it, and the whole index rebuilt. The index's
//! own SQL is in `search.rs`.

use rusqlite::Connection;

use super::rows::{is_trashed, session_body};
use super::{search, versions};
use crate::domain::sessions::search_text;
use crate::protocol::HostResult;

/// What content search covers for a session: its chosen path, then its other versions.
pub(super) fn searchable_text(conn: &Connection, sid: &str) -> HostResult<String> {
    let mut text = search_text(&session_body(conn, sid)?);
    text.push_str(&versions::search_text(conn, sid)?);
    Ok(text)
}

/// Rebuild a session's search data from its chosen path (not for trashed sessions: the trash is
/// not searched).
/// Its postings go to `postings`, which the caller flushes.
pub(super) fn rebuild_search(
    conn: &Connection,
    sid: &str,
    postings: &mut search::Postings,
) -> HostResult<()> {
    match is_trashed(conn, sid)? {
        Some(false) => {
            search::index_session_into(conn, sid, &searchable_text(conn, sid)?, postings)?;
        }
        Some(true) => search::unindex_session(conn, sid)?,
        None => {}
    }
    Ok(())
}

/// Rebuild the whole index from the saved bodies (migration 3, salvage).
pub(super) fn reindex_all(conn: &Connection) -> HostResult<()> {
    search::clear(conn)?;
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM sessions WHERE trashed_at IS NULL ORDER BY insert_seq")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut postings = search::Postings::default();
    for sid in &ids {
        search::index_session_into(conn, sid, &searchable_text(conn, sid)?, &mut postings)?;
    }
    postings.flush(conn)?;
    Ok(())
}
