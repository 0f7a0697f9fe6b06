//! Migration 5's data step: a schema-4 database kept the live conversation in its own tables
//! (`history_entries`, and `history_trimmed` for entries trimmed off a bound one). Here every
//! entry gets its entryId and the live conversation becomes what schema 5 makes it, the window of
//! a session that holds all of it:
//!
//! - bound to a session: that session's body becomes the kept-trimmed entries followed by the live
//!   ones (what a write-back would have written); entries of its old body that this replaces
//!   (a body saved, then edited in the live chat) go to the trash (`edited`), not away;
//! - not bound (or bound to a session that is gone) and not empty: a new session keeps it, named
//!   by autoName (until renamed), as auto-keep would have on its first entry.
//!
//! Runs inside the migration's transaction; on an empty database it does nothing.

use rusqlite::{params, Connection, Transaction};
use serde_json::Value;

use super::entries::{insert_row, new_entry_id, parse_entry, renumber};
use super::search;
use crate::domain::entry::{same_entry, ENTRY_ID};
use crate::domain::sessions::{choose_name, entries_item_name, search_text};
use crate::domain::text::lower;
use crate::domain::trash::{Origin, Reason};
use crate::protocol::HostResult;
use crate::util::time::{local_date, now_ms};

/// `(entry, created_at)` of an old live table, in order.
fn old_rows(conn: &Connection, table: &str, time_col: &str) -> HostResult<Vec<(Value, Option<i64>)>> {
    let mut stmt = conn.prepare(&format!("SELECT entry, {time_col} FROM {table} ORDER BY position, id"))?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?)))?;
    let mut out = Vec::new();
    for r in rows {
        let (raw, at) = r?;
        out.push((parse_entry(&raw, "live entry")?, at));
    }
    Ok(out)
}

fn with_new_id(mut e: Value) -> Value {
    if let Some(o) = e.as_object_mut() {
        o.insert(ENTRY_ID.into(), Value::String(new_entry_id()));
    }
    e
}

fn next_seq(conn: &Connection) -> HostResult<i64> {
    Ok(conn.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?)
}

/// Give every saved entry an entryId (in its JSON and in `entry_id`).
fn number_entries(tx: &Transaction) -> HostResult<()> {
    let rows: Vec<(i64, String)> = {
        let mut stmt = tx.prepare("SELECT id, entry FROM session_entries WHERE entry_id IS NULL")?;
        let r = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        r.collect::<Result<_, _>>()?
    };
    let mut upd = tx.prepare("UPDATE session_entries SET entry = ?2, entry_id = ?3 WHERE id = ?1")?;
    for (id, raw) in rows {
        let e = parse_entry(&raw, "session entry")?;
        let e = with_new_id(e);
        let eid = e.get(ENTRY_ID).and_then(Value::as_str).unwrap_or_default().to_owned();
        upd.execute(params![id, e.to_string(), eid])?;
    }
    Ok(())
}

pub(super) fn fold_live_history(tx: &Transaction) -> HostResult<()> {
    number_entries(tx)?;
    let now = now_ms();
    let live = old_rows(tx, "history_entries", "created_at")?;
    let kept = old_rows(tx, "history_trimmed", "trimmed_at")?;
    let bound: String = tx.query_row(
        "SELECT coalesce((SELECT active_session_id FROM live_state WHERE id = 1), '')",
        [],
        |r| r.get(0),
    )?;
    let bound_exists: bool =
        tx.query_row("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1)", [&bound], |r| r.get(0))?;
    let desired: Vec<(Value, Option<i64>)> = kept.iter().chain(live.iter()).cloned().collect();

    let (sid, live_from) = if !bound.is_empty() && bound_exists {
        // the body a write-back would have written: keep the common prefix, trash what differs
        let old: Vec<(i64, Value)> = {
            let mut stmt = tx.prepare(
                "SELECT id, entry FROM session_entries WHERE session_id = ?1 ORDER BY position, id",
            )?;
            let r = stmt.query_map([&bound], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
            let mut out = Vec::new();
            for row in r {
                let (id, raw) = row?;
                out.push((id, parse_entry(&raw, "session entry")?));
            }
            out
        };
        if desired.is_empty() {
            // a loaded empty body (the only way a bound live history was empty)
            (bound.clone(), old.len())
        } else {
            let k = old.iter().zip(&desired).take_while(|((_, a), (b, _))| same_entry(a, b)).count();
            if k < old.len() {
                let entries: Vec<Value> = old[k..].iter().map(|(_, e)| e.clone()).collect();
                let name: String =
                    tx.query_row("SELECT name FROM sessions WHERE id = ?1", [&bound], |r| r.get(0))?;
                let item = uuid::Uuid::new_v4().to_string();
                let item_name = entries_item_name(&entries).unwrap_or_else(|| name.clone());
                let origin = Origin::Entries { session_id: bound.clone(), session_name: name, position: k };
                tx.execute(
                    "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at,
                                           trashed_at, trash_reason, trash_origin)
                     VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?4, ?4, ?7, ?8)",
                    params![
                        item,
                        item_name,
                        lower(&item_name),
                        now,
                        next_seq(tx)?,
                        entries.len() as i64,
                        Reason::Edited.as_str(),
                        origin.to_json().to_string()
                    ],
                )?;
                for (n, (row, _)) in old[k..].iter().enumerate() {
                    tx.execute(
                        "UPDATE session_entries SET session_id = ?2, position = ?3 WHERE id = ?1",
                        params![row, item, n as i64],
                    )?;
                }
            }
            for (i, (e, at)) in desired.iter().enumerate().skip(k) {
                insert_row(tx, &bound, None, i, &with_new_id(e.clone()), at.unwrap_or(now))?;
            }
            renumber(tx, &bound, None, 0)?;
            // a body the live history left as it was (loaded, not edited) keeps its time and index
            let changed = k < old.len() || k < desired.len();
            tx.execute(
                "UPDATE sessions SET entry_count = ?2, updated_at = CASE WHEN ?4 THEN ?3 ELSE updated_at END
                 WHERE id = ?1",
                params![bound, desired.len() as i64, now, changed],
            )?;
            if changed {
                reindex(tx, &bound)?;
            }
            (bound.clone(), kept.len())
        }
    } else if !desired.is_empty() {
        let entries: Vec<Value> = desired.iter().map(|(e, _)| e.clone()).collect();
        let id = uuid::Uuid::new_v4().to_string();
        let name = choose_name(None, &entries, None, &local_date());
        let created = live.iter().filter_map(|(_, at)| *at).min().unwrap_or(now);
        tx.execute(
            "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at, name_auto)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, 1)",
            params![id, name, lower(&name), created, next_seq(tx)?, entries.len() as i64, now],
        )?;
        for (i, (e, at)) in desired.iter().enumerate() {
            insert_row(tx, &id, None, i, &with_new_id(e.clone()), at.unwrap_or(now))?;
        }
        reindex(tx, &id)?;
        if live.is_empty() {
            // only trimmed entries of a chat whose session is gone, nothing live: kept in a
            // session of their own, which the empty live history does not continue
            (String::new(), 0)
        } else {
            (id, kept.len())
        }
    } else {
        (String::new(), 0)
    };
    // the window shows what the live history showed (a v4 load showed a body whole: the next
    // write that adds entries applies the trim rule, as it did)
    let from = live_from;
    // (the row every version-1 database was created with; a salvaged copy may have lost it)
    tx.execute("INSERT OR IGNORE INTO live_state (id, active_session_id) VALUES (1, '')", [])?;
    tx.execute(
        "UPDATE live_state SET active_session_id = ?1, live_from = ?2,
             bound_at = CASE WHEN ?1 = '' THEN NULL ELSE coalesce(bound_at, ?3) END
         WHERE id = 1",
        params![sid, from as i64, now],
    )?;
    Ok(())
}

fn reindex(conn: &Connection, sid: &str) -> HostResult<()> {
    let body: Vec<Value> = {
        let mut stmt =
            conn.prepare("SELECT entry FROM session_entries WHERE session_id = ?1 ORDER BY position, id")?;
        let r = stmt.query_map([sid], |r| r.get::<_, String>(0))?;
        let mut out = Vec::new();
        for raw in r {
            out.push(parse_entry(&raw?, "session entry")?);
        }
        out
    };
    search::index_session(conn, sid, &search_text(&body))?;
    Ok(())
}
