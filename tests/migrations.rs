//! Schema migrations: a version-1 database upgrades in place with every row kept, and a database
//! from a newer host is refused without a single byte changing.
mod common;
use common::*;
use serde_json::json;

/// Build a version-1 database exactly as the first release wrote it.
fn v1_fixture(db: &std::path::Path) {
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA journal_mode=WAL;").unwrap();
    c.execute_batch(include_str!("../src/store/migrations/0001_init.sql")).unwrap();
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
    let hello = h.ok("host.hello", json!({}));
    assert_eq!(hello["schemaVersion"], keepsake_host::store::migrate::LATEST);
    assert!(hello["dbError"].is_null());
    assert_eq!(h.ok("settings.get", json!({"keys": ["theme"]})), json!({"theme": "dark"}));
    let s = h.ok("sessions.get", json!({"id": "s1"}));
    assert_eq!(s["name"], "Old");
    assert_eq!(s["pinned"], true);
    assert_eq!(s["entries"].as_array().unwrap().len(), 2);
    assert_eq!(h.ok("history.meta", json!({}))["length"], 1);
    let hits = h.ok("sessions.list", json!({"query": "old body"}));
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
    let hello = h.ok("host.hello", json!({}));
    assert_eq!(hello["dbError"]["code"], "db_too_new", "{hello}");
    assert_eq!(h.err("settings.get", json!({"keys": ["k"]})), "db_too_new");
    assert_eq!(h.err("history.append", json!({"entry": user("x")})), "db_too_new");
    h.close();
    assert_eq!(std::fs::read(&db).unwrap(), before, "a too-new database must not change");
    let (code, _, err) = cli(&db, &["inspect"]);
    assert_ne!(code, 0);
    assert!(err.contains("newer"), "{err}");
}
