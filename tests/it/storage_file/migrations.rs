//! Schema migrations: a version-1 database upgrades in place with every row kept, and a database
//! from a newer host is refused without a single byte changing.
use crate::harness::*;
use serde_json::json;

/// Build a version-1 database exactly as the first release wrote it.
fn v1_fixture(db: &std::path::Path) {
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA journal_mode=WAL;").unwrap();
    c.execute_batch(include_str!("../../../src/store/migrations/0001_init.sql")).unwrap();
    c.execute_batch("PRAGMA user_version=1;").unwrap();
    let attach = json!({"role": "user", "attachId": "a-1",
        "content": "[Page context attached by Keepsake]\nURL: https://e.x/\nTitle: T\nMode: full\n---\n\nold body"});
    c.execute(
        "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at)
         VALUES ('s1', 'Old', 'old', 1000, 1, 1, 2, 1000)",
        [],
    )
    .unwrap();
    for (i, e) in [attach.clone(), json!({"role": "assistant", "content": "reply"})].iter().enumerate() {
        c.execute(
            "INSERT INTO session_entries (session_id, position, role, content_chars, image_count, entry)
             VALUES ('s1', ?1, ?2, 10, 0, ?3)",
            rusqlite::params![i as i64, e["role"].as_str(), e.to_string()],
        )
        .unwrap();
    }
    c.execute(
        "INSERT INTO session_search (session_id, text, text_lower) VALUES ('s1', 'old body\nreply\n', 'old body\nreply\n')",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO history_entries (position, role, content_chars, image_count, attach_id, entry, created_at)
         VALUES (0, 'user', 10, 0, 'a-1', ?1, 1000)",
        [attach.to_string()],
    )
    .unwrap();
    c.execute("INSERT INTO settings (key, value, updated_at) VALUES ('theme', '\"dark\"', 1000)", [])
        .unwrap();
}

#[test]
fn a_version_1_database_upgrades_in_place_keeping_every_row() {
    let (_d, db) = temp_db();
    v1_fixture(&db);
    let mut h = Host::spawn(&db);
    let hello = h.hello();
    assert_eq!(hello["schemaVersion"], keepsake_host::store::migrate::LATEST);
    assert!(hello["dbError"].is_null());
    assert_eq!(h.ok("settings.get", json!({"keys": ["theme"]})), json!({"theme": "dark"}));
    let s = h.ok("sessions.get", json!({"id": "s1"}));
    assert_eq!(s["name"], "Old");
    assert_eq!(s["pinned"], true);
    assert_eq!(s["entries"].as_array().unwrap().len(), 2);
    assert_eq!(h.ok("history.meta", json!({}))["length"], 1);
    // the unbound live history became a session of its own (schema 5: every chat is kept)
    let live = h.ok("history.get", json!({}));
    assert!(live["activeSessionId"].as_str().is_some_and(|s| !s.is_empty() && s != "s1"), "{live}");
    let hits = h.list(json!({"query": "old body"}));
    assert_eq!(hits[0]["id"], "s1");
    // version 2 backfilled the attachId column of saved bodies
    let c = sql(&db);
    let aid: Option<String> =
        c.query_row("SELECT attach_id FROM session_entries WHERE position = 0", [], |r| r.get(0)).unwrap();
    assert_eq!(aid.as_deref(), Some("a-1"));
    // and the upgraded database works for the new operations
    let plan = h.ok("attach.summaryPlan", json!({"attachId": "a-1"}));
    assert_eq!(plan["originalLength"], 8);
    assert_eq!(plan["needed"], false);
    let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, keepsake_host::store::migrate::LATEST as i64);
}

#[test]
fn a_database_from_a_newer_host_is_refused_and_left_untouched() {
    let (_d, db) = temp_db();
    {
        let mut h = Host::spawn(&db);
        h.ok("settings.set", json!({"map": {"k": 1}}));
        h.close();
    }
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("PRAGMA user_version=99; PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let mut h = Host::spawn(&db);
    let hello = h.hello();
    assert_eq!(hello["dbError"]["code"], "db_too_new", "{hello}");
    assert_eq!(h.err("settings.get", json!({"keys": ["k"]})), "db_too_new");
    assert_eq!(h.err("history.append", json!({"entry": user("x")})), "db_too_new");
    h.close();
    assert_eq!(std::fs::read(&db).unwrap(), before, "a too-new database must not change");
    let (code, _, err) = cli(&db, &["inspect"]);
    assert_ne!(code, 0);
    assert!(err.contains("newer"), "{err}");
}

/// An entry as a version-4 host stored it: without the `entryId` schema 5 stamps on it.
fn unstamped(e: &serde_json::Value) -> serde_json::Value {
    let mut e = e.clone();
    e.as_object_mut().unwrap().remove("entryId");
    e
}

fn entries_of(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["entries"].as_array().unwrap().iter().map(unstamped).collect()
}

fn rows(c: &rusqlite::Connection, sql: &str) -> Vec<serde_json::Value> {
    let mut st = c.prepare(sql).unwrap();
    st.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|r| serde_json::from_str(&r.unwrap()).unwrap())
        .collect()
}

/// Schema 4 kept the live history apart from the session it was loaded from, and wrote it back
/// over the session's body on "New chat". Migration 5 does that write-back: a session whose body
/// the live history had edited ends up with the edited body, and the entries it replaced are in
/// the trash (`edited`, remembering where they were), not gone.
#[test]
fn a_version_4_live_history_that_edited_its_session_becomes_its_body_and_the_replaced_entries_go_to_the_trash(
) {
    let (_d, db) = temp_db();
    copy_db_fixture("v4.db", &db);
    let c = rusqlite::Connection::open(&db).unwrap();
    let body = rows(&c, "SELECT entry FROM session_entries WHERE session_id = 's-bound' ORDER BY position");
    assert_eq!(body.len(), 5, "the fixture's saved body");
    // "Load" showed the body whole (nothing trimmed); then the user cut it after its third entry
    // and asked something else
    let edited = json!({"role": "user", "content": "A different question"});
    c.execute_batch(
        "DELETE FROM history_trimmed;
         DELETE FROM history_entries;
         INSERT INTO history_entries (position, role, content_chars, image_count, attach_id, entry, created_at)
             SELECT position, role, content_chars, image_count, attach_id, entry, 1000 FROM session_entries
             WHERE session_id = 's-bound' AND position < 3;
         INSERT INTO image_refs (holder, holder_id, sha256)
             SELECT 'history', h.id, r.sha256 FROM history_entries h
             JOIN session_entries s ON s.session_id = 's-bound' AND s.position = h.position
             JOIN image_refs r ON r.holder = 'session' AND r.holder_id = s.id;",
    )
    .unwrap();
    c.execute(
        "INSERT INTO history_entries (position, role, content_chars, image_count, entry, created_at)
         VALUES (3, 'user', 20, 0, ?1, 1001)",
        [edited.to_string()],
    )
    .unwrap();
    let old_tail: Vec<serde_json::Value> = body[3..].to_vec();
    let tail_images: i64 = c
        .query_row(
            "SELECT count(DISTINCT r.sha256) FROM image_refs r JOIN session_entries s ON r.holder = 'session'
             AND r.holder_id = s.id WHERE s.session_id = 's-bound' AND s.position >= 3",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(tail_images > 0, "the replaced entries hold a picture");
    let images_before: i64 = c.query_row("SELECT count(*) FROM images", [], |r| r.get(0)).unwrap();
    drop(c);

    let mut h = Host::spawn(&db);
    let live = h.ok("history.get", json!({"images": "ref"}));
    assert_eq!(live["activeSessionId"], "s-bound", "{live}");
    assert_eq!(live["offset"], 0);
    let want: Vec<serde_json::Value> = body[..3].iter().cloned().chain([edited.clone()]).collect();
    assert_eq!(entries_of(&live), want, "the live history is what it was");
    let session = h.ok("sessions.get", json!({"id": "s-bound", "images": "ref"}));
    assert_eq!(entries_of(&session), want, "the session's body is the edited chat");
    let trash = h.ok("trash.list", json!({}));
    let items = trash["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{trash}");
    assert_eq!(items[0]["reason"], "edited");
    assert_eq!(items[0]["kind"], "entries");
    assert_eq!(items[0]["from"]["sessionId"], "s-bound");
    assert_eq!(items[0]["from"]["sessionName"], "Bound session");
    assert_eq!(items[0]["from"]["position"], 3);
    assert_eq!(items[0]["entryCount"], 2);
    let item = items[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(h.close().0, Some(0));

    let c = sql(&db);
    let (trashed, reason, count): (Option<i64>, String, i64) = c
        .query_row("SELECT trashed_at, trash_reason, entry_count FROM sessions WHERE id = ?1", [&item], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert!(trashed.is_some());
    assert_eq!((reason.as_str(), count), ("edited", 2));
    let in_trash: Vec<serde_json::Value> =
        rows(&c, &format!("SELECT entry FROM session_entries WHERE session_id = '{item}' ORDER BY position"))
            .iter()
            .map(unstamped)
            .collect();
    assert_eq!(in_trash, old_tail, "the replaced entries, whole and in order");
    let images_after: i64 = c.query_row("SELECT count(*) FROM images", [], |r| r.get(0)).unwrap();
    assert_eq!(images_after, images_before, "the trash keeps the pictures it holds");
    let live_from: i64 = c.query_row("SELECT live_from FROM live_state", [], |r| r.get(0)).unwrap();
    assert_eq!(live_from, 0);
    drop(c);
    assert_eq!(integrity(&db), "ok");
    // and they come back
    let mut h = Host::spawn(&db);
    h.ok("trash.restore", json!({"id": item}));
    let back = h.ok("sessions.get", json!({"id": item, "images": "ref"}));
    assert_eq!(entries_of(&back), old_tail);
    assert_eq!(h.close().0, Some(0));
}

/// A version-4 live history that was not bound to a session (or bound to one that is gone)
/// becomes a session of its own, as auto-keep would have made it: named after its first
/// message until renamed (`name_auto`), and the live chat's session.
#[test]
fn an_unbound_version_4_live_history_becomes_an_auto_named_session_and_is_bound() {
    for (case, setup, trimmed) in [
        (
            "unbound",
            "UPDATE live_state SET active_session_id = '', bound_at = NULL; DELETE FROM history_trimmed;",
            0,
        ),
        ("bound to a session that is gone", "UPDATE live_state SET active_session_id = 's-gone';", 2),
    ] {
        let (_d, db) = temp_db();
        copy_db_fixture("v4.db", &db);
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(setup).unwrap();
        let live = rows(&c, "SELECT entry FROM history_entries ORDER BY position");
        let kept = rows(&c, "SELECT entry FROM history_trimmed ORDER BY position");
        assert_eq!((live.len(), kept.len()), (5, trimmed), "{case}");
        let saved =
            rows(&c, "SELECT entry FROM session_entries WHERE session_id = 's-bound' ORDER BY position");
        drop(c);

        let mut h = Host::spawn(&db);
        let got = h.ok("history.get", json!({"images": "ref"}));
        let sid = got["activeSessionId"].as_str().unwrap().to_owned();
        assert!(!sid.is_empty() && sid != "s-bound" && sid != "s-gone", "{case}: bound to {sid:?}");
        assert_eq!(entries_of(&got), live, "{case}: the live history is what it was");
        assert_eq!(got["offset"], json!(trimmed), "{case}");
        let session = h.ok("sessions.get", json!({"id": sid, "images": "ref"}));
        let whole: Vec<serde_json::Value> = kept.iter().chain(&live).cloned().collect();
        assert_eq!(entries_of(&session), whole, "{case}: the session holds the whole chat");
        // named by its first user message with text (the attach entries are pages)
        assert_eq!(session["name"], "谢谢！Ünïcödé ✓ 😀", "{case}");
        assert_eq!(h.list(json!({})).as_array().unwrap().len(), 4, "{case}");
        let other = h.ok("sessions.get", json!({"id": "s-bound", "images": "ref"}));
        assert_eq!(entries_of(&other), saved, "{case}: the saved session is untouched");
        assert_eq!(h.ok("trash.list", json!({}))["items"], json!([]), "{case}");
        assert_eq!(h.close().0, Some(0));
        let c = sql(&db);
        let (auto, from): (i64, i64) = c
            .query_row(
                "SELECT s.name_auto, l.live_from FROM sessions s JOIN live_state l ON l.active_session_id = s.id",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((auto, from), (1, trimmed as i64), "{case}: name_auto, live_from");
        drop(c);
        assert_eq!(integrity(&db), "ok", "{case}");
        // the name follows the first message until renamed: the next write keeps the chat going
        let mut h = Host::spawn(&db);
        let r = h.ok("history.append", json!({"entry": user("one more")}));
        assert_eq!(r["length"], 6, "{case}: {r}");
        assert_eq!(
            h.ok("sessions.get", json!({"id": sid}))["entries"].as_array().unwrap().len(),
            8 - 2 + trimmed
        );
        assert_eq!(h.close().0, Some(0));
    }
}
