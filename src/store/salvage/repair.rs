//! The salvaged rows made whole again (step 3 of the policy in `mod.rs`): derived data rebuilt
//! (image references, search data, counts, positions), images that were lost become a text
//! note in their entries, sessions whose row was lost are recreated, and the change log is
//! reset so every client reloads.

use std::collections::HashSet;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use crate::domain::entry::{
    content_chars, image_part_count, image_part_url, is_image_part, parse_image_ref, referenced_blobs, role,
};
use crate::domain::sessions::{auto_name, search_text};
use crate::domain::text::lower;
use crate::store::search;
use crate::util::time::now_ms;

/// What an image part lost in the damage becomes.
pub const LOST_IMAGE_TEXT: &str = "[image lost when the damaged database was repaired]";

/// Rebuild derived data and restore the store's invariants on the salvaged rows.
pub(super) fn repair(conn: &Connection, seq_damaged: Option<i64>) -> Result<Vec<String>, String> {
    let mut at = "start";
    repair_steps(conn, seq_damaged, &mut at).map_err(|e| format!("{at}: {e}"))
}

fn repair_steps(
    conn: &Connection,
    seq_damaged: Option<i64>,
    at: &mut &'static str,
) -> rusqlite::Result<Vec<String>> {
    let mut repairs = Vec::new();
    *at = "image hashes";
    // images are content-addressed: bytes that no longer hash to their key were damaged
    let mut bad = Vec::new();
    {
        let mut st = conn.prepare("SELECT sha256, bytes FROM images")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get(0)?;
            let ok = match r.get_ref(1)? {
                rusqlite::types::ValueRef::Blob(b) => crate::domain::import::sha256_hex(b) == key,
                _ => false,
            };
            if !ok {
                bad.push(key);
            }
        }
    }
    for k in &bad {
        conn.execute("DELETE FROM images WHERE sha256 = ?1", [k])?;
    }
    if !bad.is_empty() {
        repairs
            .push(format!("{} image(s) whose bytes no longer matched their hash were left out", bad.len()));
    }
    *at = "images";
    let now = now_ms();
    let images: HashSet<String> = conn
        .prepare("SELECT sha256 FROM images")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    *at = "entries";
    let mut lost_images = 0;
    let mut dropped = 0;
    let mut recomputed = 0;
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT id, entry FROM session_entries")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, raw) in rows {
        let Ok(mut e) = serde_json::from_str::<Value>(&raw) else {
            conn.execute("DELETE FROM session_entries WHERE id = ?1", [id])?;
            dropped += 1;
            continue;
        };
        if !e.is_object() {
            conn.execute("DELETE FROM session_entries WHERE id = ?1", [id])?;
            dropped += 1;
            continue;
        }
        let missing: Vec<String> = referenced_blobs(&e).into_iter().filter(|h| !images.contains(h)).collect();
        if !missing.is_empty() {
            lost_images += replace_lost_images(&mut e, &missing);
        }
        // the columns derived from the entry are recomputed from it (a damaged integer
        // beside an intact entry would otherwise skew the trim rule and the counts)
        let text = if missing.is_empty() { raw.clone() } else { e.to_string() };
        let aid = crate::domain::entry::attach_id(&e);
        // the entryId column follows the entry's stamp; a stamp another row already has is
        // cleared here (the entry is numbered again below), never a reason to skip the rest
        let eid = match crate::domain::entry::entry_id(&e) {
            Some(x) => conn
                .prepare_cached("SELECT 1 FROM session_entries WHERE entry_id = ?1 AND id <> ?2")?
                .query_row(params![x, id], |_| Ok(()))
                .optional()?
                .is_none()
                .then(|| x.to_owned()),
            None => None,
        };
        recomputed += conn.execute(
            "UPDATE session_entries SET entry = ?2, role = ?3, content_chars = ?4, image_count = ?5,
                 attach_id = ?6, entry_id = ?7
             WHERE id = ?1 AND (entry IS NOT ?2 OR role IS NOT ?3 OR content_chars IS NOT ?4
                                OR image_count IS NOT ?5 OR attach_id IS NOT ?6 OR entry_id IS NOT ?7)",
            params![id, text, role(&e), content_chars(&e) as i64, image_part_count(&e) as i64, aid, eid],
        )?;
        for sha in referenced_blobs(&e) {
            conn.execute(
                "INSERT OR IGNORE INTO image_refs (holder, holder_id, sha256) VALUES ('session', ?1, ?2)",
                params![id, sha],
            )?;
        }
    }
    if lost_images > 0 {
        repairs.push(format!(
            "{lost_images} image part(s) whose image was lost became the text {LOST_IMAGE_TEXT:?}"
        ));
    }
    if dropped > 0 {
        repairs.push(format!("{dropped} unreadable entry row(s) dropped"));
    }
    if recomputed > 0 {
        repairs.push(format!("{recomputed} entry row(s) had their counts recomputed from the entry"));
    }
    *at = "unreferenced images";
    // (pictures sync keeps for operations not sealed or not applied yet stay)
    let orphans = conn.execute(
        "DELETE FROM images WHERE sha256 NOT IN (SELECT sha256 FROM image_refs)
             AND sha256 NOT IN (SELECT sha256 FROM sync_blobs)",
        [],
    )?;
    if orphans > 0 {
        repairs.push(format!("{orphans} image(s) no surviving entry uses were left out"));
    }
    *at = "versions";
    // the entries of a version whose branch row was lost: no fork says where they belong, so
    // they become a session of their own (recreated below, "Recovered: …"), not dropped
    let lost_branches: Vec<i64> = conn
        .prepare(
            "SELECT DISTINCT branch_id FROM session_entries
             WHERE branch_id IS NOT NULL AND branch_id NOT IN (SELECT id FROM session_branches)",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for b in &lost_branches {
        conn.execute(
            "UPDATE session_entries SET session_id = ?2, branch_id = NULL WHERE branch_id = ?1",
            params![b, uuid::Uuid::new_v4().to_string()],
        )?;
    }
    if !lost_branches.is_empty() {
        repairs.push(format!(
            "{} version(s) whose fork was lost were kept as sessions of their own",
            lost_branches.len()
        ));
    }
    *at = "positions";
    // positions 0..n-1 again
    let mut renumbered = 0;
    // every path (a session's chosen path, each other version) numbered on its own
    renumbered += conn.execute(
        "UPDATE session_entries SET position = r.n FROM
           (SELECT id AS rid, row_number() OVER (PARTITION BY session_id, branch_id ORDER BY position, id) - 1 AS n
            FROM session_entries) AS r
         WHERE session_entries.id = r.rid AND session_entries.position <> r.n",
        [],
    )?;
    if renumbered > 0 {
        repairs.push(format!("{renumbered} entry position(s) renumbered to close gaps"));
    }
    *at = "orphan sessions";
    // a session row whose name no longer matches its lower-cased copy was damaged: drop it
    // (its entries get a recreated row below)
    let rows: Vec<(String, String, String)> = conn
        .prepare("SELECT id, name, name_lower FROM sessions")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut bad_sessions = 0;
    for (id, name, name_lower) in rows {
        if lower(&name) != name_lower {
            conn.execute("DELETE FROM sessions WHERE id = ?1", [&id])?;
            bad_sessions += 1;
        }
    }
    if bad_sessions > 0 {
        repairs.push(format!("{bad_sessions} damaged session row(s) dropped"));
    }
    // sessions whose row was lost but whose body survived
    let orphan_ids: Vec<String> = conn
        .prepare("SELECT DISTINCT session_id FROM session_entries WHERE session_id NOT IN (SELECT id FROM sessions)")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for sid in &orphan_ids {
        let body = session_body(conn, sid)?;
        let name =
            auto_name(&body).map_or_else(|| "Recovered session".to_owned(), |n| format!("Recovered: {n}"));
        let seq: i64 =
            conn.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?;
        conn.execute(
            "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, 0, ?4)",
            params![sid, name, lower(&name), now, seq],
        )?;
    }
    if !orphan_ids.is_empty() {
        repairs.push(format!(
            "{} session(s) whose row was lost were recreated from their entries",
            orphan_ids.len()
        ));
    }
    // a fork or a version row of a session that is gone (it had no entry left to recreate it from)
    let stale = conn
        .execute("DELETE FROM session_branches WHERE session_id NOT IN (SELECT id FROM sessions)", [])?
        + conn.execute("DELETE FROM session_forks WHERE session_id NOT IN (SELECT id FROM sessions)", [])?;
    if stale > 0 {
        repairs.push(format!("{stale} fork or version row(s) of a lost session left out"));
    }
    conn.execute(
        "UPDATE sessions SET entry_count =
             (SELECT count(*) FROM session_entries e WHERE e.session_id = sessions.id AND e.branch_id IS NULL)
         WHERE entry_count <>
             (SELECT count(*) FROM session_entries e WHERE e.session_id = sessions.id AND e.branch_id IS NULL)",
        [],
    )?;
    *at = "entry ids";
    // every entry has an entryId, unique, the same in its JSON and its column
    let unnumbered: Vec<(i64, String)> = conn
        .prepare("SELECT id, entry FROM session_entries WHERE entry_id IS NULL OR entry_id IS NOT json_extract(entry, '$.entryId')")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, raw) in &unnumbered {
        if let Ok(mut e) = serde_json::from_str::<Value>(raw) {
            let eid = uuid::Uuid::new_v4().to_string();
            if let Some(o) = e.as_object_mut() {
                o.insert(crate::domain::entry::ENTRY_ID.into(), Value::String(eid.clone()));
            }
            conn.execute(
                "UPDATE session_entries SET entry = ?2, entry_id = ?3 WHERE id = ?1",
                params![id, e.to_string(), eid],
            )?;
        }
    }
    if !unnumbered.is_empty() {
        repairs.push(format!("{} entry row(s) got a new entryId", unnumbered.len()));
    }
    *at = "search";
    // search data from the bodies
    search::clear(conn)?;
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM sessions ORDER BY insert_seq")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let shown: Vec<String> = conn
        .prepare("SELECT id FROM sessions WHERE trashed_at IS NULL ORDER BY insert_seq")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for sid in &shown {
        // what content search covers: the chosen path, then the other versions
        let mut text = search_text(&session_body(conn, sid)?);
        for list in version_bodies(conn, sid)? {
            text.push_str(&search_text(&list));
        }
        search::index_session(conn, sid, &text)?;
    }
    *at = "binding";
    // the binding must name a session that exists
    conn.execute("INSERT OR IGNORE INTO live_state (id, active_session_id) VALUES (1, '')", [])?;
    let unbound = conn.execute(
        "UPDATE live_state SET active_session_id = '', bound_at = NULL, live_from = 0
         WHERE id = 1 AND active_session_id <> ''
           AND active_session_id NOT IN (SELECT id FROM sessions WHERE trashed_at IS NULL)",
        [],
    )?;
    if unbound > 0 {
        repairs.push("the live history's session was lost; it is no longer bound".into());
    }
    // the live window starts within its session
    conn.execute(
        "UPDATE live_state SET live_from = (SELECT entry_count FROM sessions WHERE id = active_session_id)
         WHERE id = 1 AND live_from > coalesce((SELECT entry_count FROM sessions WHERE id = active_session_id), 0)",
        [],
    )?;
    *at = "sync";
    // The replicated state may have lost registers the salvaged rows still have, or the other
    // way round: compared with it, chats lost in the damage would read as purged and be purged
    // on every device. It is recorded again from the salvaged chats instead, at the next write
    // (as when sync is set up); tombstones, what was applied and the outbox stay.
    let synced: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM sync_device)", [], |r| r.get(0))?;
    if synced {
        conn.execute_batch(
            "DELETE FROM sync_sessions; DELETE FROM sync_entries; DELETE FROM sync_settings; DELETE FROM sync_dirty;
             INSERT INTO sync_dirty (kind, id) SELECT 'session', id FROM sessions;
             INSERT INTO sync_dirty (kind, id) SELECT 'setting', key FROM settings;",
        )?;
        repairs.push("sync: every chat is recorded again from the salvaged rows at the next write".into());
    }
    *at = "change log";
    // The change log may have holes: one change naming every area, and a floor at it, so every
    // client's next changes.since answers reset.
    let seq_main: i64 =
        conn.query_row("SELECT coalesce(max(seq), 0) FROM changes", [], |r| r.get(0)).unwrap_or(0);
    // When the old sequence cannot be read, jump past any sequence number a client may hold
    // (one per write: far below the Unix time in seconds), so none is ever reused.
    let unknown_floor = if seq_damaged.is_none() { now / 1000 } else { 0 };
    let next = seq_damaged.unwrap_or(0).max(seq_main).max(unknown_floor) + 1;
    let keys: Vec<String> = conn
        .prepare("SELECT key FROM settings ORDER BY key")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let areas =
        json!({"settings": keys, "history": true, "binding": true, "sessions": {"ids": ids, "index": true}});
    conn.execute(
        "INSERT INTO changes (seq, changed_at, areas, client_request_id, origin) VALUES (?1, ?2, ?3, NULL, 'salvage')",
        params![next, now, areas.to_string()],
    )?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('changes_floor', ?1)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [next.to_string()],
    )?;
    Ok(repairs)
}

fn session_body(conn: &Connection, sid: &str) -> rusqlite::Result<Vec<Value>> {
    let mut stmt = conn.prepare_cached(
        "SELECT entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL ORDER BY position, id",
    )?;
    let rows = stmt.query_map([sid], |r| r.get::<_, String>(0))?;
    Ok(rows.filter_map(|r| r.ok()).filter_map(|s| serde_json::from_str(&s).ok()).collect())
}

/// The entries of each other version of session `sid`, in the order the host indexes them
/// (by fork, then version).
fn version_bodies(conn: &Connection, sid: &str) -> rusqlite::Result<Vec<Vec<Value>>> {
    let branches: Vec<i64> = conn
        .prepare_cached(
            "SELECT id FROM session_branches WHERE session_id = ?1 ORDER BY fork_entry_id, version",
        )?
        .query_map([sid], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::with_capacity(branches.len());
    for b in branches {
        let mut stmt = conn
            .prepare_cached("SELECT entry FROM session_entries WHERE branch_id = ?1 ORDER BY position, id")?;
        let rows = stmt.query_map([b], |r| r.get::<_, String>(0))?;
        out.push(rows.filter_map(|r| r.ok()).filter_map(|s| serde_json::from_str(&s).ok()).collect());
    }
    Ok(out)
}

fn replace_lost_images(e: &mut Value, missing: &[String]) -> usize {
    let mut n = 0;
    if let Some(Value::Array(parts)) = e.get_mut("content") {
        for p in parts.iter_mut() {
            let lost = is_image_part(p)
                && image_part_url(p)
                    .and_then(parse_image_ref)
                    .is_some_and(|h| missing.iter().any(|m| m == h));
            if lost {
                *p = json!({"type": "text", "text": LOST_IMAGE_TEXT});
                n += 1;
            }
        }
    }
    n
}
