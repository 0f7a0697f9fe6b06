//! storage.import and `keepsake-host import` over the real binary (storage-model §5.7, §11.10,
//! §2.6, §4.1, §5.1, §5.6, §10; PROTOCOL.md §7 storage).
use crate::harness::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const EVENT_WAIT: Duration = Duration::from_secs(10);
const PREFIX: &str = "[Page context attached by Keepsake]";
const LEGACY_PREFIX: &str = "[Page context attached by browsa]";

// ---------------------------------------------------------------------------------------------
// helpers

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn img_ref(bytes: &[u8]) -> String {
    format!("keepsake-image:sha256:{}", sha256_hex(bytes))
}

fn import(h: &mut Host, doc: &Value) -> Value {
    h.ok("storage.import", json!({"document": doc}))
}

fn import_mode(h: &mut Host, doc: &Value, mode: &str) -> Value {
    h.ok("storage.import", json!({"document": doc, "settings": mode}))
}

fn count(db: &Path, table: &str) -> i64 {
    sql(db).query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
}

const COUNTED: [&str; 8] = [
    "sessions",
    "session_entries",
    "search_docs",
    "images",
    "image_refs",
    "settings",
    "history_entries",
    "live_state",
];

/// Row counts of the tables an import writes.
fn counts(db: &Path) -> BTreeMap<&'static str, i64> {
    COUNTED.iter().map(|t| (*t, count(db, t))).collect()
}

/// The whole content of every table, rows sorted: equal snapshots = the same stored content.
fn snapshot(db: &Path) -> BTreeMap<String, Vec<String>> {
    let c = sql(db);
    let tables: Vec<String> = {
        let mut st = c.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    let mut out = BTreeMap::new();
    for t in tables {
        let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let mut rows: Vec<String> = st
            .query_map([], |r| {
                let mut cells = Vec::with_capacity(n);
                for i in 0..n {
                    let v: rusqlite::types::Value = r.get(i)?;
                    cells.push(format!("{v:?}"));
                }
                Ok(cells.join(" | "))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(t, rows);
    }
    out
}

/// A session's body (its chosen path) as stored: (position, role, entry JSON) in position order.
fn body_rows(db: &Path, id: &str) -> Vec<(i64, Option<String>, Value)> {
    let c = sql(db);
    let mut st = c
        .prepare("SELECT position, role, entry, json_valid(entry) FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL ORDER BY position")
        .unwrap();
    st.query_map([id], |r| {
        let valid: i64 = r.get(3)?;
        assert_eq!(valid, 1, "entry JSON must be valid");
        let text: String = r.get(2)?;
        Ok((r.get(0)?, r.get(1)?, serde_json::from_str(&text).unwrap()))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Body rows must be exactly `want` (apart from the entryId stamp every stored entry gets),
/// positions 0..n, role column = entry role.
fn assert_body(db: &Path, id: &str, want: &[Value]) {
    let rows = body_rows(db, id);
    assert_eq!(rows.len(), want.len(), "session {id}: {} rows, want {}: {rows:?}", rows.len(), want.len());
    for (i, ((pos, role, entry), w)) in rows.iter().zip(want).enumerate() {
        assert_eq!(*pos, i as i64, "session {id}: positions");
        assert!(entry["entryId"].as_str().is_some_and(|e| !e.is_empty()), "session {id} entry {i}: entryId");
        assert_eq!(&bare(entry), w, "session {id} entry {i}");
        assert_eq!(role.as_deref(), w["role"].as_str(), "session {id} entry {i} role column");
    }
}

/// (name, created_at, pinned, entry_count) of a session row.
fn session_row(db: &Path, id: &str) -> Option<(String, i64, i64, i64)> {
    use rusqlite::OptionalExtension;
    sql(db)
        .query_row("SELECT name, created_at, pinned, entry_count FROM sessions WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
        .unwrap()
}

fn session_ids(db: &Path) -> Vec<String> {
    let c = sql(db);
    let mut st = c.prepare("SELECT id FROM sessions ORDER BY id").unwrap();
    st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

/// The live window's entries (the view `history_entries`), without their entryIds.
fn live_rows(db: &Path) -> Vec<Value> {
    let c = sql(db);
    let mut st = c.prepare("SELECT position, entry FROM history_entries ORDER BY position").unwrap();
    let rows: Vec<(i64, String)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    for (i, (p, _)) in rows.iter().enumerate() {
        assert_eq!(*p, i as i64, "live positions are 0..n");
    }
    rows.into_iter().map(|(_, e)| bare(&serde_json::from_str(&e).unwrap())).collect()
}

/// `sessions.get`, its entries without their entryIds.
fn got(h: &mut Host, args: Value) -> Value {
    let mut r = h.ok("sessions.get", args);
    r["entries"] = bare(&r["entries"]);
    r
}

/// The session that keeps the dump history `hist` when no session of the dump does.
fn archived_id(hist: &Value) -> String {
    format!("imported-{}", &sha256_hex(canonical(hist).as_bytes())[..16])
}

/// The entries on other versions of session `id` (not on its chosen path), in order.
fn other_versions(db: &Path, id: &str) -> Vec<Value> {
    let c = sql(db);
    let mut st = c
        .prepare("SELECT entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NOT NULL ORDER BY branch_id, position")
        .unwrap();
    let rows = st.query_map([id], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|e| bare(&serde_json::from_str(&e.unwrap()).unwrap())).collect()
}

fn binding(db: &Path) -> String {
    sql(db).query_row("SELECT active_session_id FROM live_state WHERE id = 1", [], |r| r.get(0)).unwrap()
}

fn setting(h: &mut Host, key: &str) -> Option<Value> {
    h.ok("settings.get", json!({"keys": [key]})).get(key).cloned()
}

fn warnings(r: &Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .expect("warnings array")
        .iter()
        .map(|w| w.as_str().expect("warning string").to_owned())
        .collect()
}

/// Run the same import again (taking the settings the host lacks): it must report zero new items
/// and change no row counts.
fn assert_rerun_is_noop(h: &mut Host, db: &Path, doc: &Value) -> Value {
    let before = counts(db);
    let snap = snapshot(db);
    let r = import_mode(h, doc, "keep");
    assert_eq!(r["sessionsImported"], 0, "re-run imports no session: {r}");
    assert_eq!(r["settingsImported"], 0, "re-run imports no setting: {r}");
    assert_eq!(r["imagesStored"], 0, "re-run stores no image: {r}");
    assert_eq!(counts(db), before, "re-run changes no row count");
    // Apart from bookkeeping, nothing stored changes either.
    let strip = |mut s: BTreeMap<String, Vec<String>>| {
        for t in ["changes", "client_requests", "sqlite_sequence", "meta"] {
            s.remove(t);
        }
        s
    };
    assert_eq!(strip(snapshot(db)), strip(snap), "re-run changes no stored content");
    r
}

fn user_image(text: &str, url: &str) -> Value {
    json!({"role": "user", "content": [text_part(text), image_part(url)]})
}

fn write_file(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(doc).unwrap()).unwrap();
    p
}

/// A fresh database path whose directory exists (for the CLI).
fn fresh_db() -> (tempfile::TempDir, PathBuf) {
    let (d, db) = temp_db();
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    (d, db)
}

/// Sorted-key, whitespace-free JSON (the canonical form for the archived id).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[k.as_str()])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// legacy browser dumps: each session layout

#[test]
fn legacy_inline_layout_imports_every_body_row_by_row() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let a = png_bytes(3, 2, 10);
    let a_url = data_url("image/png", &a);
    let s1 = vec![
        user("hello one"),
        assistant("reply one"),
        json!({"role": "user", "content": [text_part("look at this"), image_part(&a_url)], "imagesSeen": true}),
        json!({"role": "assistant", "content": "a picture", "providerLabel": "GPT", "interrupted": true,
               "providerKey": {"name": "openai", "model": "gpt-4o"}}),
    ];
    let s2 = vec![
        user("two"),
        json!({"role": "user", "content": [{"type": "input_text", "text": "in"}, {"type": "other", "x": 1}]}),
    ];
    let dump = json!({
        "savedSessions": [
            {"id": "inline-1", "name": "First chat", "createdAt": 1_700_000_000_000i64, "pinned": true, "history": s1},
            {"id": "inline-2", "name": "Second", "createdAt": 1_700_000_005_000i64, "pinned": false,
             "digest": "stale", "searchText": "stale", "history": s2}
        ],
        "systemPrompt": "dark"
    });
    let r = import_mode(&mut h, &dump, "keep");
    assert_eq!(r["sessionsImported"], 2, "{r}");
    assert_eq!(r["sessionsSkipped"], 0, "{r}");
    assert_eq!(r["settingsImported"], 1, "{r}");
    assert_eq!(r["live"], "absent", "{r}");
    assert_eq!(r["imagesStored"], 1, "{r}");
    assert_eq!(r["overCap"], 0, "{r}");

    let mut s1_ref = s1.clone();
    s1_ref[2]["content"][1] = image_part(&img_ref(&a));
    assert_eq!(session_row(&db, "inline-1"), Some(("First chat".into(), 1_700_000_000_000, 1, 4)));
    assert_eq!(session_row(&db, "inline-2"), Some(("Second".into(), 1_700_000_005_000, 0, 2)));
    assert_body(&db, "inline-1", &s1_ref);
    assert_body(&db, "inline-2", &s2);
    assert_eq!(session_ids(&db), ["inline-1", "inline-2"]);

    let g = got(&mut h, json!({"id": "inline-1", "images": "ref"}));
    assert_eq!(
        g,
        json!({"id": "inline-1", "name": "First chat", "createdAt": 1_700_000_000_000i64, "pinned": true,
               "entries": s1_ref, "from": 0, "length": 4, "forks": []})
    );
    let g = got(&mut h, json!({"id": "inline-1"}));
    assert_eq!(g["entries"], json!(s1), "inline images come back as the same data URL");
    let g = got(&mut h, json!({"id": "inline-2"}));
    assert_eq!(g["entries"], json!(s2));
    assert_eq!(g["pinned"], false);

    let (mime, bytes, len): (String, Vec<u8>, i64) = sql(&db)
        .query_row("SELECT mime, bytes, byte_length FROM images WHERE sha256 = ?1", [sha256_hex(&a)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!((mime.as_str(), bytes.as_slice(), len), ("image/png", a.as_slice(), a.len() as i64));
    assert_eq!(setting(&mut h, "systemPrompt"), Some(json!("dark")));
    // Search data is rebuilt, not the stale digest.
    let hits = h.list(json!({"query": "look at"}));
    assert_eq!(hits.as_array().unwrap().len(), 1);
    assert_eq!(hits[0]["id"], "inline-1");
    assert_eq!(h.list(json!({"query": "stale"})), json!([]));

    assert_rerun_is_noop(&mut h, &db, &dump);
}

#[test]
fn legacy_light_index_layout_reads_bodies_from_session_keys() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let b = png_bytes(2, 2, 77);
    let l1 = vec![user("light one"), assistant("answer one"), user_image("img", &data_url("image/png", &b))];
    let l2 = vec![user("light two ü"), assistant("answer two")];
    let odd_id = "light:2/ü 🌸";
    let mut dump = json!({
        "savedSessions": [
            {"id": "light-1", "name": "Light One", "createdAt": 1_690_000_000_000i64, "pinned": false, "digest": "x"},
            {"id": odd_id, "name": "Light Two", "createdAt": 1_690_000_100_000i64, "pinned": true}
        ],
        "session_light-1": l1,
        "activeSessionId": "light-1",
        "maxSessions": 10
    });
    dump[format!("session_{odd_id}")] = json!(l2);
    let r = import_mode(&mut h, &dump, "keep");
    assert_eq!(r["sessionsImported"], 2, "{r}");
    assert_eq!(r["sessionsSkipped"], 0, "{r}");
    assert_eq!(r["settingsImported"], 1, "{r}");
    assert_eq!(r["live"], "absent", "{r}");
    assert_eq!(r["imagesStored"], 1, "{r}");
    assert!(!warnings(&r).iter().any(|w| w.contains("light-1")), "named session keys are not orphans: {r}");

    let mut l1_ref = l1.clone();
    l1_ref[2]["content"][1] = image_part(&img_ref(&b));
    assert_eq!(session_row(&db, "light-1"), Some(("Light One".into(), 1_690_000_000_000, 0, 3)));
    assert_eq!(session_row(&db, odd_id), Some(("Light Two".into(), 1_690_000_100_000, 1, 2)));
    assert_body(&db, "light-1", &l1_ref);
    assert_body(&db, odd_id, &l2);
    let g = got(&mut h, json!({"id": "light-1", "images": "ref"}));
    assert_eq!(g["entries"], json!(l1_ref));
    assert_eq!(got(&mut h, json!({"id": "light-1"}))["entries"], json!(l1));
    let g = got(&mut h, json!({"id": odd_id}));
    assert_eq!(
        g,
        json!({"id": odd_id, "name": "Light Two", "createdAt": 1_690_000_100_000i64, "pinned": true, "entries": l2,
               "from": 0, "length": 2, "forks": []})
    );
    // Conversation keys never become settings.
    let reserved: i64 = sql(&db)
        .query_row(
            "SELECT count(*) FROM settings WHERE key IN ('history','savedSessions','activeSessionId') OR key LIKE 'session\\_%' ESCAPE '\\'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(reserved, 0);
    assert_eq!(count(&db, "settings"), 1);
    // No live history in the dump: the binding is not touched.
    assert_eq!(binding(&db), "");

    assert_rerun_is_noop(&mut h, &db, &dump);
}

#[test]
fn legacy_mixed_layout_uses_inline_history_only_where_present_and_never_blanks() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let a_body = vec![user("inline A"), assistant("A reply")];
    let b_body = vec![user("light B"), assistant("B reply"), user("B again")];
    let d_body = vec![user("light D via key")];
    let e_inline = vec![user("inline E wins")];
    let dump = json!({
        "savedSessions": [
            {"id": "A", "name": "A", "createdAt": 1000, "history": a_body},
            {"id": "B", "name": "B", "createdAt": 2000},
            {"id": "C", "name": "C missing body", "createdAt": 3000},
            {"id": "D", "name": "D", "createdAt": 4000, "history": null},
            {"id": "E", "name": "E", "createdAt": 5000, "history": e_inline},
            {"id": "F", "name": "F", "createdAt": 6000, "history": "not an array"}
        ],
        "session_B": b_body,
        "session_D": d_body,
        "session_E": [user("stale light copy of E")],
        "session_F": [user("F via key")]
    });
    let r = import(&mut h, &dump);
    assert_eq!(r["sessionsImported"], 6, "{r}");
    assert_eq!(r["sessionsSkipped"], 0, "{r}");
    assert_body(&db, "A", &a_body);
    assert_body(&db, "B", &b_body);
    assert_body(&db, "C", &[]);
    assert_body(&db, "D", &d_body);
    assert_body(&db, "E", &e_inline);
    assert_body(&db, "F", &[user("F via key")]);
    assert_eq!(
        session_row(&db, "C"),
        Some(("C missing body".into(), 3000, 0, 0)),
        "missing body → empty session, kept"
    );
    assert_eq!(got(&mut h, json!({"id": "C"}))["entries"], json!([]));
    assert_eq!(got(&mut h, json!({"id": "B"}))["entries"], json!(b_body));
    assert_eq!(got(&mut h, json!({"id": "A"}))["entries"], json!(a_body));
    assert_eq!(count(&db, "session_entries"), 2 + 3 + 1 + 1 + 1);
    let rows = h.list(json!({}));
    let ids: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["F", "E", "D", "C", "B", "A"], "newest first by createdAt");

    assert_rerun_is_noop(&mut h, &db, &dump);
}

#[test]
fn legacy_malformed_elements_are_skipped_or_normalised_with_warnings() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let dump = json!({
        "savedSessions": [
            {"id": "ok-1", "name": 7, "createdAt": "yesterday", "pinned": "true", "history": [user("first ok")]},
            {"name": "no id", "history": [user("x")]},
            {"id": "", "history": [user("x")]},
            {"id": 42, "history": [user("x")]},
            {"id": "ok-1", "name": "dup", "history": [user("dup body")]},
            3,
            "str",
            null,
            [1],
            {"id": "ok-2", "name": "Floored", "createdAt": 1_700_000_000_123.9, "pinned": 1, "history": [user("second ok")]},
            {"id": "ok-3", "name": null, "createdAt": null, "pinned": true, "history": [user("third")]},
            {"id": "ok-4", "name": ["x"], "createdAt": "1700000000000", "pinned": false,
             "history": [user("keep a"), 5, "str", null, assistant("keep b")]},
            {"id": "ok-5", "name": "neg", "createdAt": 12.5, "pinned": {"v": true}}
        ],
        "session_orphan": [user("never imported")],
        "session_ok-5": [user("five")]
    });
    let t0 = now_ms();
    let r = import(&mut h, &dump);
    let t1 = now_ms();
    assert_eq!(r["sessionsImported"], 5, "{r}");
    assert_eq!(r["sessionsSkipped"], 8, "{r}");
    assert_eq!(r["sessionsAlreadyHere"], 0, "malformed, not already here: {r}");
    let w = warnings(&r);
    assert!(w.len() >= 8 + 1 + 3, "every skipped item and dropped entry is explained: {w:?}");
    assert!(w.iter().any(|x| x.contains("session_orphan")), "orphan session key named in a warning: {w:?}");
    assert_eq!(session_ids(&db), ["ok-1", "ok-2", "ok-3", "ok-4", "ok-5"], "no orphan, no duplicate");

    let (name, created, pinned, n) = session_row(&db, "ok-1").unwrap();
    assert_eq!((name.as_str(), pinned, n), ("", 0, 1), "non-string name → '', pinned only for JSON true");
    assert!(
        created >= t0 && created <= t1,
        "non-numeric createdAt → import time ({t0}..{t1}), got {created}"
    );
    assert_body(&db, "ok-1", &[user("first ok")]);
    assert_eq!(session_row(&db, "ok-2"), Some(("Floored".into(), 1_700_000_000_123, 0, 1)));
    let (name, created, pinned, _) = session_row(&db, "ok-3").unwrap();
    assert_eq!((name.as_str(), pinned), ("", 1));
    assert!(created >= t0 && created <= t1, "null createdAt → import time, got {created}");
    let (name, created, pinned, _) = session_row(&db, "ok-4").unwrap();
    assert_eq!((name.as_str(), pinned), ("", 0));
    assert!(created >= t0 && created <= t1, "string createdAt → import time, got {created}");
    assert_body(&db, "ok-4", &[user("keep a"), assistant("keep b")]);
    assert_eq!(session_row(&db, "ok-5"), Some(("neg".into(), 12, 0, 1)));
    assert_body(&db, "ok-5", &[user("five")]);
    let got = h.ok("sessions.get", json!({"id": "ok-1"}));
    assert_eq!(got["name"], "");
    assert_eq!(got["pinned"], false);
    assert_eq!(h.ok("sessions.get", json!({"id": "ok-3"}))["pinned"], true);
    assert_eq!(h.err("sessions.get", json!({"id": "orphan"})), "not_found");

    assert_rerun_is_noop(&mut h, &db, &dump);
}

#[test]
fn legacy_saved_sessions_not_an_array_counts_as_absent() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let dump = json!({
        "savedSessions": {"a": {"id": "a", "name": "A", "history": [user("x")]}},
        "session_a": [user("y")],
        "systemPrompt": "dark"
    });
    let r = import_mode(&mut h, &dump, "keep");
    assert_eq!(r["sessionsImported"], 0, "{r}");
    assert_eq!(r["settingsImported"], 1, "{r}");
    let w = warnings(&r);
    assert!(w.iter().any(|x| x.contains("savedSessions")), "{w:?}");
    assert!(w.iter().any(|x| x.contains("session_a")), "unnamed session key → warning: {w:?}");
    assert_eq!(count(&db, "sessions"), 0);
    assert_eq!(count(&db, "session_entries"), 0);
    assert_eq!(setting(&mut h, "systemPrompt"), Some(json!("dark")));
    for v in [json!("text"), json!(5), json!(null), json!(true)] {
        let r = import(&mut h, &json!({"savedSessions": v, "session_a": [user("y")]}));
        assert_eq!(r["sessionsImported"], 0, "{r}");
        assert!(!warnings(&r).is_empty(), "{r}");
    }
    assert_eq!(count(&db, "sessions"), 0);
    assert_rerun_is_noop(&mut h, &db, &dump);
}

// ---------------------------------------------------------------------------------------------
// live history rules

fn numbered(n: usize) -> Vec<Value> {
    (0..n).map(|i| if i % 2 == 0 { user(&format!("u{i}")) } else { assistant(&format!("a{i}")) }).collect()
}

#[test]
fn live_replaced_when_host_empty_trimmed_to_60_and_bound_to_existing_session() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let hist = numbered(70);
    let dump = json!({
        "history": hist,
        "activeSessionId": "bound-1",
        "savedSessions": [{"id": "bound-1", "name": "B", "createdAt": 5, "history": numbered(70)}]
    });
    let r = import(&mut h, &dump);
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(r["sessionsImported"], 1, "the history continues bound-1, which this import created: {r}");
    let g = h.ok("history.get", json!({}));
    assert_eq!(g["length"], 60);
    assert_eq!(g["offset"], 10, "the window shows the last 60; the first 10 are its kept prefix");
    assert_eq!(bare(&g["entries"]), json!(hist[10..]), "the last 60 entries");
    assert_eq!(g["activeSessionId"], "bound-1");
    assert_eq!(live_rows(&db), hist[10..].to_vec());
    assert_eq!(binding(&db), "bound-1");
    // The bound session's body is never trimmed.
    assert_body(&db, "bound-1", &hist);

    let r2 = assert_rerun_is_noop(&mut h, &db, &dump);
    assert_eq!(r2["live"], "unchanged", "{r2}");
    assert_eq!(binding(&db), "bound-1");
    assert_eq!(live_rows(&db), hist[10..].to_vec());
}

#[test]
fn live_replaced_is_kept_in_its_own_session_unless_it_continues_one_this_import_created() {
    // activeSessionId names nothing → the history is a session of its own, now live.
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let hist = json!([user("q"), assistant("a")]);
    let r = import(&mut h, &json!({"history": hist, "activeSessionId": "ghost"}));
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(r["sessionsImported"], 1, "{r}");
    let aid = archived_id(&hist);
    assert_eq!(binding(&db), aid);
    assert_eq!(h.ok("history.meta", json!({}))["activeSessionId"], json!(aid));
    assert_eq!(live_rows(&db), vec![user("q"), assistant("a")]);
    assert_body(&db, &aid, &[user("q"), assistant("a")]);
    assert!(session_row(&db, "ghost").is_none());

    // activeSessionId names a session skipped as malformed → the same.
    let (_d2, db2) = temp_db();
    let mut h2 = Host::spawn(&db2);
    let r = import(
        &mut h2,
        &json!({"history": [user("q")], "activeSessionId": "x", "savedSessions": [{"name": "no id"}, 5]}),
    );
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(binding(&db2), archived_id(&json!([user("q")])));
    assert_eq!(session_ids(&db2), [archived_id(&json!([user("q")]))]);

    // activeSessionId names a session the host already had: the import never writes into it or
    // binds to it; the history is a session of its own, live because the live history was empty.
    let (_d3, db3) = temp_db();
    let mut h3 = Host::spawn(&db3);
    h3.ok("history.replace", json!({"entries": [user("host saved")]}));
    let sid = h3.ok("sessions.save", json!({"name": "Pre"}))["session"]["id"].as_str().unwrap().to_owned();
    h3.ok("history.clear", json!({}));
    assert_eq!(h3.ok("history.meta", json!({}))["length"], 0);
    let r = import(&mut h3, &json!({"history": [user("from dump")], "activeSessionId": sid}));
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(r["sessionsImported"], 1, "{r}");
    assert_eq!(binding(&db3), archived_id(&json!([user("from dump")])));
    assert_eq!(live_rows(&db3), vec![user("from dump")]);
    assert_body(&db3, &sid, &[user("host saved")]);
}

#[test]
fn live_replaced_is_trimmed_by_utf16_chars() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    // 100,000 + 100,000 (50,000 emoji = 100,000 UTF-16 units) + 100,000 + 50,000 = 350,000 units:
    // the oldest leaves the window, 250,000 remain. Counting code points would keep all four.
    let x = user(&"a".repeat(100_000));
    let y = assistant(&"😀".repeat(50_000));
    let z = user(&"c".repeat(100_000));
    let w = assistant(&"d".repeat(50_000));
    let hist = json!([x, y, z, w]);
    let r = import(&mut h, &json!({ "history": hist }));
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(live_rows(&db), vec![y.clone(), z.clone(), w.clone()]);
    let sum: i64 =
        sql(&db).query_row("SELECT sum(content_chars) FROM history_entries", [], |r| r.get(0)).unwrap();
    assert_eq!(sum, 250_000);
    // the session that keeps it holds all four, the first ahead of the window
    assert_eq!(h.ok("history.meta", json!({}))["offset"], 1);
    assert_body(&db, &archived_id(&hist), &[x, y, z, w]);

    // A single entry over the budget is kept.
    let (_d2, db2) = temp_db();
    let mut h2 = Host::spawn(&db2);
    let big = user(&"e".repeat(400_000));
    let r = import(&mut h2, &json!({"history": [user("small"), big]}));
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(live_rows(&db2), vec![big.clone()]);
    assert_body(&db2, &archived_id(&json!([user("small"), big])), &[user("small"), big.clone()]);
    let r = assert_rerun_is_noop(&mut h2, &db2, &json!({"history": [user("small"), big]}));
    assert_eq!(r["live"], "unchanged", "{r}");
}

#[test]
fn live_history_continues_the_dump_session_and_leaves_the_host_live_chat_alone() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let hist = numbered(65);
    let kept =
        h.ok("history.replace", json!({"entries": hist}))["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(live_rows(&db), hist[5..].to_vec(), "the host's window shows 60");
    let before_live = live_rows(&db);
    let dump = json!({
        "history": hist,
        "activeSessionId": "dump-s",
        "savedSessions": [{"id": "dump-s", "name": "D", "createdAt": 1, "history": [user("d")]}]
    });
    let r = import(&mut h, &dump);
    // the dump's live history is stored whole in dump-s (this import created it); it went another
    // way than dump-s's stored body, which stays as another version of its first turn
    assert_eq!(r["live"], "archived", "{r}");
    assert_eq!(r["sessionsImported"], 1, "only the dump session, no imported-<hash> copy: {r}");
    let mut ids = vec![kept.clone(), "dump-s".to_owned()];
    ids.sort();
    assert_eq!(session_ids(&db), ids);
    assert_body(&db, "dump-s", &hist);
    assert_eq!(other_versions(&db, "dump-s"), vec![user("d")]);
    let forks = h.ok("sessions.get", json!({"id": "dump-s"}))["forks"].clone();
    assert_eq!(forks, json!([{"forkEntryId": "", "chosen": 2, "versions": 2}]), "{forks}");
    // the host's live chat is untouched
    assert_eq!(live_rows(&db), before_live);
    assert_eq!(binding(&db), kept, "binding untouched");
    assert_body(&db, &kept, &hist);
    let r = assert_rerun_is_noop(&mut h, &db, &dump);
    assert_eq!(r["live"], "unchanged", "{r}");
}

#[test]
fn live_archived_as_imported_session_named_by_auto_name_and_skipped_on_rerun() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": [user("host conversation"), assistant("host reply")]}));
    let host_sid =
        h.ok("sessions.save", json!({"name": "Host"}))["session"]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.load", json!({"id": host_sid}));
    let before_live = live_rows(&db);

    let long = format!("{}{}", "🌸".repeat(10), "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN"); // 60 code points
    let dump_hist = vec![
        json!({"role": "user", "content": [text_part("array content is skipped by autoName")]}),
        user(&format!("{LEGACY_PREFIX}\nURL: https://example.com\nTitle: T\nMode: full\n---\n\nbody")),
        user(&format!("{PREFIX}\nURL: https://example.com\nTitle: T\nMode: full\n---\n\nbody")),
        user("   \n  "),
        assistant("assistant entries are skipped"),
        user(&format!("  \n{long}  \n")),
        assistant("ok"),
    ];
    let dump = json!({"history": dump_hist, "savedSessions": [{"id": "other", "name": "O", "createdAt": 3, "history": [user("o")]}]});
    let t0 = now_ms();
    let r = import(&mut h, &dump);
    let t1 = now_ms();
    assert_eq!(r["live"], "archived", "{r}");
    assert_eq!(r["sessionsImported"], 2, "the archived live history counts: {r}");

    let ids = session_ids(&db);
    let archived: Vec<&String> = ids.iter().filter(|i| i.starts_with("imported-")).collect();
    assert_eq!(archived.len(), 1, "{ids:?}");
    let aid = archived[0].clone();
    let hex = &aid["imported-".len()..];
    assert!(hex.len() == 16 && hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)), "{aid}");
    let want_hex = &sha256_hex(canonical(&json!(dump_hist)).as_bytes())[..16];
    assert_eq!(hex, want_hex, "imported-<first 16 hex of SHA-256 of the canonical JSON>");

    let want_name = format!("{}…", long.chars().take(48).collect::<String>());
    let (name, created, pinned, n) = session_row(&db, &aid).unwrap();
    assert_eq!(name, want_name, "autoName");
    assert_eq!(pinned, 0);
    assert_eq!(n, dump_hist.len() as i64);
    assert!(created >= t0 && created <= t1, "createdAt = import time, got {created}");
    assert_body(&db, &aid, &dump_hist);
    assert_eq!(got(&mut h, json!({"id": aid}))["entries"], json!(dump_hist));
    // The host's live conversation and binding are untouched.
    assert_eq!(live_rows(&db), before_live);
    assert_eq!(binding(&db), host_sid);

    assert_rerun_is_noop(&mut h, &db, &dump);
    assert_eq!(session_ids(&db).iter().filter(|i| i.starts_with("imported-")).count(), 1);
    // The archived id depends only on the dump history: a different dump archives anew.
    let r = import(&mut h, &json!({"history": [user("another dump")]}));
    assert_eq!(r["live"], "archived", "{r}");
    assert_eq!(r["sessionsImported"], 1, "{r}");
    let want2 = archived_id(&json!([user("another dump")]));
    assert_eq!(session_row(&db, &want2).map(|r| r.0), Some("another dump".to_string()));
}

#[test]
fn live_absent_for_missing_empty_or_non_array_history() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    // the chat is kept from its first entry; the save makes a snapshot, which is loaded
    h.ok("history.replace", json!({"entries": [user("keep me")]}));
    let sid = h.ok("sessions.save", json!({"name": "K"}))["session"]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.load", json!({"id": sid}));
    let live = live_rows(&db);
    for doc in [
        json!({"systemPrompt": "x"}),
        json!({"history": []}),
        json!({"history": "text"}),
        json!({"history": {"role": "user", "content": "obj"}}),
        json!({"history": null}),
        json!({"history": 5}),
    ] {
        let r = import(&mut h, &doc);
        assert_eq!(r["live"], "absent", "{doc}: {r}");
        assert_eq!(r["sessionsImported"], 0, "{doc}: {r}");
        assert_eq!(live_rows(&db), live, "{doc}");
        assert_eq!(binding(&db), sid, "{doc}");
    }
    assert_eq!(count(&db, "sessions"), 2, "the chat's session and its snapshot, nothing imported");
    // A dump naming an activeSessionId but carrying no live history leaves the binding alone.
    let r = import(
        &mut h,
        &json!({"activeSessionId": "abs-1", "savedSessions": [{"id": "abs-1", "name": "A", "history": [user("a")]}]}),
    );
    assert_eq!((&r["live"], &r["sessionsImported"]), (&json!("absent"), &json!(1)), "{r}");
    assert_eq!(binding(&db), sid);
    assert_eq!(live_rows(&db), live);
    // Host empty too: the live history stays empty.
    let (_d2, db2) = temp_db();
    let mut h2 = Host::spawn(&db2);
    let r = import(&mut h2, &json!({"history": [], "activeSessionId": "x"}));
    assert_eq!(r["live"], "absent", "{r}");
    assert_eq!(count(&db2, "history_entries"), 0);
    assert_eq!(binding(&db2), "");
}

// ---------------------------------------------------------------------------------------------
// settings from a dump

#[test]
fn dump_settings_none_by_default_keep_or_overwrite_on_request_invalid_skipped() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"systemPrompt": "light", "activeProvider": "p1"}}));
    let long_key = "k".repeat(201);
    // Keepsake's settings (opaque to the host but these), invalid values of typed ones, and keys
    // that are no Keepsake setting (never imported, issue 32)
    let mut dump = json!({
        "systemPrompt": "dark",
        "activeProvider": "p1",
        "agentSessions": {"nested": [1, {"b": null}], "s": "ü"},
        "composerDraft": {"text": "draft", "at": 1},
        "activeModel": "m",
        "flag": false,
        "num": 3.5,
        "nul": null,
        "maxSessions": "x",
        "summarizeThresholdChars": -1,
        "autoSummarizeAttachments": "yes",
        "": 2,
        "history": [],
        "savedSessions": [],
        "activeSessionId": "",
        "session_q": []
    });
    dump[long_key.as_str()] = json!(1);
    h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("event of the settings.set");
    // by default an import takes no setting: the valid ones are skipped and a warning says so
    let settings_before = snapshot(&db)["settings"].clone();
    let r = import(&mut h, &dump);
    assert_eq!(r["settingsImported"], 0, "{r}");
    assert_eq!(r["settingsSkipped"], 13, "5 valid, not asked for, 3 invalid and 5 no setting of ours: {r}");
    assert!(warnings(&r).iter().any(|w| w.contains("not applied")), "{r}");
    assert_eq!(snapshot(&db)["settings"], settings_before);
    // keep: the ones the host lacks
    let r = import_mode(&mut h, &dump, "keep");
    assert_eq!(r["settingsImported"], 3, "agentSessions, composerDraft, activeModel: {r}");
    assert!(r["settingsSkipped"].as_u64().unwrap() >= 8, "3 invalid settings, 5 unknown keys: {r}");
    let w = warnings(&r);
    for k in ["maxSessions", "summarizeThresholdChars", "autoSummarizeAttachments"] {
        assert!(w.iter().any(|x| x.contains(k)), "warning for {k}: {w:?}");
    }
    for k in ["flag", "num", "nul"] {
        assert!(w.iter().any(|x| x.contains(&format!("{k:?} is not a Keepsake setting"))), "{k}: {w:?}");
    }
    assert_eq!(setting(&mut h, "systemPrompt"), Some(json!("light")), "keep leaves existing values");
    assert_eq!(setting(&mut h, "agentSessions"), Some(dump["agentSessions"].clone()));
    assert_eq!(setting(&mut h, "composerDraft"), Some(dump["composerDraft"].clone()));
    assert_eq!(setting(&mut h, "activeModel"), Some(json!("m")));
    for k in ["maxSessions", "summarizeThresholdChars", "autoSummarizeAttachments"] {
        assert_eq!(setting(&mut h, k), None, "{k} invalid → not stored");
    }
    let keys: Vec<String> = {
        let c = sql(&db);
        let mut st = c.prepare("SELECT key FROM settings WHERE json_valid(value) ORDER BY key").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(keys, ["activeModel", "activeProvider", "agentSessions", "composerDraft", "systemPrompt"]);
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("changed event");
    let mut ev_keys: Vec<&str> =
        ev["areas"]["settings"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    ev_keys.sort();
    assert_eq!(ev_keys, ["activeModel", "agentSessions", "composerDraft"], "only the written keys: {ev}");

    assert_rerun_is_noop(&mut h, &db, &dump);
    let r = import_mode(&mut h, &dump, "keep");
    assert_eq!(r["settingsImported"], 0, "{r}");
    assert_eq!(setting(&mut h, "systemPrompt"), Some(json!("light")));

    let r = import_mode(&mut h, &dump, "overwrite");
    assert_eq!(r["settingsImported"], 1, "only systemPrompt differs: {r}");
    assert_eq!(setting(&mut h, "systemPrompt"), Some(json!("dark")));
    assert_eq!(setting(&mut h, "activeProvider"), Some(json!("p1")));
    assert_eq!(setting(&mut h, "flag"), None, "no setting of Keepsake's: never written");
    assert_eq!(setting(&mut h, "maxSessions"), None);
    let r = import_mode(&mut h, &dump, "overwrite");
    assert_eq!(r["settingsImported"], 0, "overwrite re-run imports nothing: {r}");

    assert_eq!(h.err("storage.import", json!({"document": dump, "settings": "merge"})), "bad_request");
    assert_eq!(h.err("storage.import", json!({"document": {}, "settings": true})), "bad_request");
    assert_eq!(h.err("storage.import", json!({"document": {}, "unknownArg": 1})), "bad_request");
    assert_eq!(h.err("storage.import", json!({})), "bad_request");
}

#[test]
fn dump_interpreted_settings_valid_values_are_imported() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let dump = json!({"maxSessions": 2.0, "summarizeThresholdChars": 0, "autoSummarizeAttachments": false});
    let r = import_mode(&mut h, &dump, "keep");
    assert_eq!(r["settingsImported"], 3, "{r}");
    assert_eq!(setting(&mut h, "maxSessions").and_then(|v| v.as_f64()), Some(2.0));
    assert_eq!(setting(&mut h, "summarizeThresholdChars"), Some(json!(0)));
    assert_eq!(setting(&mut h, "autoSummarizeAttachments"), Some(json!(false)));
    // overwrite with an invalid value: skipped, the valid stored value stays.
    let r = import_mode(&mut h, &json!({"maxSessions": -3, "autoSummarizeAttachments": 0}), "overwrite");
    assert_eq!(r["settingsImported"], 0, "{r}");
    assert_eq!(r["settingsSkipped"], 2, "{r}");
    assert_eq!(setting(&mut h, "autoSummarizeAttachments"), Some(json!(false)));
    assert_eq!(setting(&mut h, "maxSessions").and_then(|v| v.as_f64()), Some(2.0));
    let valid: i64 =
        sql(&db).query_row("SELECT min(json_valid(value)) FROM settings", [], |r| r.get(0)).unwrap();
    assert_eq!(valid, 1);
}

// ---------------------------------------------------------------------------------------------
// images

#[test]
fn dump_data_urls_become_blobs_once_and_entries_store_references() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let a = png_bytes(4, 4, 1);
    let b = png_bytes(5, 3, 2);
    let c = png_bytes(2, 6, 3);
    let d = png_bytes(3, 3, 4);
    let a_url = data_url("image/png", &a);
    use base64::Engine;
    let d_upper = format!("DATA:image/PNG;BASE64,{}", base64::engine::general_purpose::STANDARD.encode(&d));
    let http = "https://example.com/pic.png";
    let invalid = "data:image/png;base64,@@not base64@@";
    let dump = json!({
        "savedSessions": [
            {"id": "i1", "name": "one", "createdAt": 1, "history": [user_image("a", &a_url), assistant("x"), user_image("a again", &a_url)]},
            {"id": "i2", "name": "two", "createdAt": 2},
            {"id": "i3", "name": "three", "createdAt": 3, "history": [
                json!({"role": "user", "content": [image_part(http), {"type": "image_url", "image_url": invalid}, image_part(&d_upper)]})
            ]}
        ],
        "session_i2": [json!({"role": "user", "content": [image_part(&a_url), {"type": "image_url", "image_url": data_url("image/png", &b)}]})],
        "history": [user_image("live", &a_url), user_image("live c", &data_url("image/png", &c))]
    });
    let r = import(&mut h, &dump);
    assert_eq!(r["sessionsImported"], 4, "three sessions and the session keeping the live history: {r}");
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(r["imagesStored"], 4, "a, b, c, d once each: {r}");
    assert_eq!(count(&db, "images"), 4);
    let shas: Vec<String> = {
        let cn = sql(&db);
        let mut st = cn.prepare("SELECT sha256 FROM images ORDER BY sha256").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    let mut want: Vec<String> = [&a, &b, &c, &d].iter().map(|x| sha256_hex(x)).collect();
    want.sort();
    assert_eq!(shas, want);
    let d_mime: String = sql(&db)
        .query_row("SELECT mime FROM images WHERE sha256 = ?1", [sha256_hex(&d)], |r| r.get(0))
        .unwrap();
    assert_eq!(d_mime, "image/png", "declared MIME lower-cased");

    // No entry row holds image data.
    let data_rows: i64 = sql(&db)
        .query_row(
            "SELECT (SELECT count(*) FROM session_entries WHERE lower(entry) LIKE '%data:image%')
                  + (SELECT count(*) FROM history_entries WHERE lower(entry) LIKE '%data:image%')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(data_rows, 1, "only the invalid data URL stays a string");
    assert_body(
        &db,
        "i1",
        &[user_image("a", &img_ref(&a)), assistant("x"), user_image("a again", &img_ref(&a))],
    );
    assert_body(
        &db,
        "i2",
        &[
            json!({"role": "user", "content": [image_part(&img_ref(&a)), {"type": "image_url", "image_url": img_ref(&b)}]}),
        ],
    );
    assert_body(
        &db,
        "i3",
        &[
            json!({"role": "user", "content": [image_part(http), {"type": "image_url", "image_url": invalid}, image_part(&img_ref(&d))]}),
        ],
    );
    assert_eq!(live_rows(&db), vec![user_image("live", &img_ref(&a)), user_image("live c", &img_ref(&c))]);
    // References are counted: a is used by 3 session rows + 1 live row (a row of the session that
    // keeps the live history).
    let a_refs: i64 = sql(&db)
        .query_row("SELECT count(*) FROM image_refs WHERE sha256 = ?1", [sha256_hex(&a)], |r| r.get(0))
        .unwrap();
    assert_eq!(a_refs, 4);
    // Bytes are served back.
    let got = h.ok("images.get", json!({"ref": img_ref(&b)}));
    assert_eq!(got["mime"], "image/png");
    assert_eq!(got["bytes"], base64::engine::general_purpose::STANDARD.encode(&b));
    let g = h.ok("sessions.get", json!({"id": "i3"}));
    assert_eq!(g["entries"][0]["content"][2]["image_url"]["url"], data_url("image/png", &d));

    assert_rerun_is_noop(&mut h, &db, &dump);
    assert_eq!(count(&db, "images"), 4);
}

#[test]
fn import_stores_no_unreferenced_blob_and_accepts_known_references() {
    use base64::Engine;
    let b64 = |x: &[u8]| base64::engine::general_purpose::STANDARD.encode(x);
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let a = png_bytes(4, 4, 31);
    let b = png_bytes(4, 4, 32);
    let c = png_bytes(4, 4, 33);
    let d = png_bytes(4, 4, 34);
    // the chat's own session and its snapshot each reference a
    h.ok("history.replace", json!({"entries": [user_image("host", &data_url("image/png", &a))]}));
    let sid = h.ok("sessions.save", json!({"name": "Host"}))["session"]["id"].as_str().unwrap().to_owned();
    let a_refs = |db: &Path| -> i64 {
        sql(db)
            .query_row("SELECT count(*) FROM image_refs WHERE sha256 = ?1", [sha256_hex(&a)], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(a_refs(&db), 2);

    // A session skipped because the host has it brings a new image: nothing keeps that blob.
    // A reference to a blob the host already stores is accepted.
    let dump = json!({"savedSessions": [
        {"id": sid, "name": "dump copy", "history": [user_image("new", &data_url("image/png", &b))]},
        {"id": "k1", "name": "K1", "createdAt": 1, "history": [user_image("known", &img_ref(&a))]}
    ]});
    let r = import(&mut h, &dump);
    assert_eq!(
        (&r["sessionsImported"], &r["sessionsSkipped"], &r["imagesStored"]),
        (&json!(1), &json!(1), &json!(0)),
        "{r}"
    );
    assert_eq!(count(&db, "images"), 1, "no blob for the skipped session's image");
    assert_body(&db, "k1", &[user_image("known", &img_ref(&a))]);
    assert_eq!(a_refs(&db), 3);
    assert_eq!(h.ok("sessions.get", json!({"id": sid}))["name"], "Host");

    // An export image nothing references is not kept either.
    let export = json!({
        "format": "keepsake.sessions", "version": 1, "exportedAt": "2026-01-01T00:00:00Z",
        "sessions": [{"id": "e-new", "name": "E", "createdAt": 2, "pinned": false, "entries": [user_image("x", &img_ref(&a))]}],
        "images": {sha256_hex(&a): {"mime": "image/png", "data": b64(&a)}, sha256_hex(&c): {"mime": "image/png", "data": b64(&c)}}
    });
    let r = import(&mut h, &export);
    assert_eq!((&r["sessionsImported"], &r["imagesStored"]), (&json!(1), &json!(0)), "{r}");
    assert_eq!(count(&db, "images"), 1, "unreferenced export image not stored");

    // A live-history image outside the window at once (host live empty → replaced) is kept with
    // its entry, in the session that keeps the whole history.
    let (_d2, db2) = temp_db();
    let mut h2 = Host::spawn(&db2);
    let mut hist = vec![user_image("old", &data_url("image/png", &d))];
    hist.extend(numbered(60));
    let r = import(&mut h2, &json!({"history": hist}));
    assert_eq!((&r["live"], &r["imagesStored"]), (&json!("replaced"), &json!(1)), "{r}");
    assert_eq!(live_rows(&db2), numbered(60));
    let mut stored = vec![user_image("old", &img_ref(&d))];
    stored.extend(numbered(60));
    // (the id hashes the history as stored: its pictures as references)
    assert_body(&db2, &archived_id(&json!(stored)), &stored);
    assert_eq!(count(&db2, "images"), 1, "the entry ahead of the window keeps its picture");
}

// ---------------------------------------------------------------------------------------------
// all-or-nothing

/// A database with some of everything in it.
fn populated(h: &mut Host) -> String {
    let p = png_bytes(6, 6, 99);
    h.ok("settings.set", json!({"map": {"systemPrompt": "light", "maxSessions": 20}}));
    h.ok(
        "history.replace",
        json!({"entries": [user_image("pre", &data_url("image/png", &p)), assistant("pre reply")]}),
    );
    let sid = h.ok("sessions.save", json!({"name": "Pre"}))["session"]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.load", json!({"id": sid}));
    sid
}

#[test]
fn failed_import_leaves_the_database_unchanged() {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    populated(&mut h);
    let before = snapshot(&db);
    let fresh = png_bytes(7, 7, 5);
    let unknown = format!("keepsake-image:sha256:{}", "ab".repeat(32));

    // A later session refers to a blob nobody stored.
    let mut sessions: Vec<Value> = (0..6)
        .map(|i| json!({"id": format!("f{i}"), "name": format!("F{i}"), "createdAt": i, "history": [user(&format!("body {i}")), user_image("img", &data_url("image/png", &fresh))]}))
        .collect();
    sessions.push(
        json!({"id": "f-bad", "name": "bad", "createdAt": 9, "history": [user_image("dangling", &unknown)]}),
    );
    let dump = json!({"savedSessions": sessions, "newSetting": 1, "systemPrompt": "dark", "history": [user("new live")]});
    assert_eq!(h.err("storage.import", json!({"document": dump})), "bad_request");
    assert_eq!(snapshot(&db), before, "unknown reference in a later session");
    assert_eq!(
        h.err(
            "storage.import",
            json!({"document": dump, "settings": "overwrite", "clientRequestId": "imp-1"})
        ),
        "bad_request"
    );
    assert_eq!(snapshot(&db), before, "overwrite mode, with a clientRequestId: nothing recorded");

    // The same in the dump's live history only.
    let dump2 = json!({"savedSessions": [{"id": "g1", "history": [user("fine")]}], "history": [user("x"), user_image("y", &unknown)], "k": 1});
    assert_eq!(h.err("storage.import", json!({"document": dump2})), "bad_request");
    assert_eq!(snapshot(&db), before, "unknown reference in the live history");

    // An export whose image data does not match its hash.
    let a = png_bytes(3, 3, 11);
    let b = png_bytes(3, 3, 12);
    use base64::Engine;
    let export_bad = json!({
        "format": "keepsake.sessions", "version": 1, "exportedAt": "2026-01-01T00:00:00+00:00",
        "sessions": [
            {"id": "e1", "name": "E1", "createdAt": 1, "pinned": false, "entries": [user("fine")]},
            {"id": "e2", "name": "E2", "createdAt": 2, "pinned": false, "entries": [user_image("x", &img_ref(&a))]}
        ],
        "images": {sha256_hex(&a): {"mime": "image/png", "data": base64::engine::general_purpose::STANDARD.encode(&b)}}
    });
    assert_eq!(h.err("storage.import", json!({"document": export_bad})), "bad_request");
    assert_eq!(snapshot(&db), before, "export image data not matching its hash");

    // An export referring to an image it does not carry and the host does not have.
    let export_missing = json!({
        "format": "keepsake.sessions", "version": 1, "exportedAt": "2026-01-01T00:00:00+00:00",
        "sessions": [
            {"id": "e1", "name": "E1", "createdAt": 1, "pinned": false, "entries": [user("fine")]},
            {"id": "e3", "name": "E3", "createdAt": 3, "pinned": false, "entries": [user_image("x", &unknown)]}
        ],
        "images": {}
    });
    assert_eq!(h.err("storage.import", json!({"document": export_missing})), "bad_request");
    assert_eq!(snapshot(&db), before, "export with an unknown reference");

    // The CLI fails the same way and writes nothing.
    let f = write_file(dir.path(), "bad.json", &dump);
    let (code, out, _err) = cli(&db, &["import", f.to_str().unwrap()]);
    assert_ne!(code, 0, "CLI import of a bad dump must fail: {out}");
    let f = write_file(dir.path(), "bad-export.json", &export_bad);
    let (code, _, _) = cli(&db, &["import", f.to_str().unwrap()]);
    assert_ne!(code, 0);
    let f = dir.path().join("not-json.json");
    std::fs::write(&f, b"{\"savedSessions\": [").unwrap();
    let (code, _, _) = cli(&db, &["import", f.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert_eq!(snapshot(&db), before, "failed CLI imports");

    // The failed request recorded nothing: the same clientRequestId now applies a good document.
    let good = json!({"savedSessions": [{"id": "g1", "history": [user("fine")]}]});
    let r = h.ok("storage.import", json!({"document": good, "clientRequestId": "imp-1"}));
    assert_eq!(r["sessionsImported"], 1, "{r}");
    assert!(session_row(&db, "g1").is_some());
}

fn big_dump(n: usize, per: usize) -> Value {
    let filler = "lorem ipsum dolor sit amet ".repeat(100);
    let sessions: Vec<Value> = (0..n)
        .map(|i| {
            let hist: Vec<Value> = (0..per)
                .map(|j| {
                    let text = format!("session {i} entry {j} {filler}");
                    if j % 2 == 0 {
                        user(&text)
                    } else {
                        assistant(&text)
                    }
                })
                .collect();
            json!({"id": format!("big-{i:04}"), "name": format!("Big {i}"), "createdAt": 1_700_000_000_000i64 + i as i64, "history": hist})
        })
        .collect();
    json!({"savedSessions": sessions, "history": [user("big live"), assistant("big reply")], "agentSessions": {"n": n}})
}

/// Outcome of a killed import: true fully imported, false untouched. A full import has the `n`
/// sessions and the session that keeps the dump's two-entry live history.
fn check_all_or_nothing(db: &Path, n: i64, per: i64) -> bool {
    // Open read-write so a hot WAL is recovered, as the next host start would.
    let c = rusqlite::Connection::open(db).unwrap();
    let ic: Vec<String> = {
        let mut st = c.prepare("PRAGMA integrity_check").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(ic, ["ok"], "integrity_check after kill -9");
    let one = |q: &str| -> i64 { c.query_row(q, [], |r| r.get(0)).unwrap() };
    let sessions = one("SELECT count(*) FROM sessions");
    assert!(sessions == 0 || sessions == n + 1, "partial import visible: {sessions} of {} sessions", n + 1);
    let full = sessions == n + 1;
    let (entries, live, big_setting, marker) = (
        one("SELECT count(*) FROM session_entries"),
        one("SELECT count(*) FROM history_entries"),
        one("SELECT count(*) FROM settings WHERE key = 'agentSessions'"),
        one("SELECT count(*) FROM settings WHERE key = 'systemPrompt'"),
    );
    assert_eq!(marker, 1, "pre-existing data survives");
    if full {
        assert_eq!((entries, live, big_setting), (n * per + 2, 2, 1), "fully imported");
        assert_eq!(one("SELECT count(*) FROM search_docs"), n + 1);
    } else {
        assert_eq!((entries, live, big_setting), (0, 0, 0), "untouched");
        assert_eq!(one("SELECT count(*) FROM search_docs"), 0);
    }
    full
}

#[test]
fn killed_cli_import_is_all_or_nothing() {
    let (n, per) = (300usize, 30usize);
    let work = tempfile::tempdir().unwrap();
    let doc_path = write_file(work.path(), "big.json", &big_dump(n, per));
    let marker = write_file(work.path(), "marker.json", &json!({"systemPrompt": "marker"}));
    let init = |db: &Path| {
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        let (code, out, err) = cli(db, &["import", "--settings", "keep", marker.to_str().unwrap()]);
        assert_eq!(code, 0, "{out} {err}");
    };

    // One complete run to learn how long an import takes here.
    let ref_db = work.path().join("ref").join("keepsake.db");
    init(&ref_db);
    let t = Instant::now();
    let (code, out, err) = cli(&ref_db, &["import", "--settings", "keep", doc_path.to_str().unwrap()]);
    let full_time = t.elapsed();
    assert_eq!(code, 0, "{out} {err}");
    let r: Value = serde_json::from_str(&out).expect("CLI prints the result JSON");
    assert_eq!(r["sessionsImported"], n as u64 + 1);
    assert!(check_all_or_nothing(&ref_db, n as i64, per as i64));

    let fractions = [0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.97, 1.1];
    let mut outcomes = Vec::new();
    for (i, f) in fractions.iter().enumerate() {
        let db = work.path().join(format!("run{i}")).join("keepsake.db");
        init(&db);
        let mut child = Command::new(BIN)
            .arg("--db")
            .arg(&db)
            .args(["import", "--settings", "keep"])
            .arg(&doc_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(full_time.mul_f64(*f));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        let wal = std::fs::metadata(db.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
        let full = check_all_or_nothing(&db, n as i64, per as i64);
        outcomes.push((f, status.code(), wal, full));
        // The database stays usable.
        let mut h = Host::spawn(&db);
        assert_eq!(h.ok("history.meta", json!({}))["length"], if full { 2 } else { 0 });
        drop(h);
    }
    eprintln!(
        "full import took {full_time:?}; (fraction, exit code, WAL bytes left, fully imported): {outcomes:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Keepsake JSON export round trip

#[test]
fn json_export_round_trips_into_a_fresh_database() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let a = png_bytes(8, 5, 21);
    let b = png_bytes(5, 8, 22);
    h.ok(
        "history.replace",
        json!({"entries": [
            user("round trip one"),
            {"role": "user", "content": [text_part("see"), image_part(&data_url("image/png", &a))], "imagesSeen": true},
            {"role": "assistant", "content": "nice", "providerKey": {"name": "openai", "model": "gpt-4o"}, "providerLabel": "GPT-4o"}
        ]}),
    );
    let s1 = h.ok("sessions.save", json!({"name": "Trip one"}))["session"]["id"].as_str().unwrap().to_owned();
    h.ok(
        "history.replace",
        json!({"entries": [
            {"role": "user", "content": [image_part(&data_url("image/png", &b)), {"type": "image_url", "image_url": data_url("image/png", &a)}]},
            {"role": "assistant", "content": "two", "interrupted": true}
        ]}),
    );
    let s2 = h.ok("sessions.save", json!({"name": "Två 🌸"}))["session"]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.pin", json!({"id": s2, "pinned": true}));
    h.ok("history.replace", json!({"entries": [user("third, text only"), assistant("ok")]}));
    let s3 = h.ok("sessions.save", json!({}))["session"]["id"].as_str().unwrap().to_owned();
    let ids = [s1.clone(), s2.clone(), s3.clone()];

    let exp = h.ok("sessions.export", json!({"ids": ids, "format": "json"}));
    let text = exp["text"].as_str().unwrap().to_owned();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["format"], "keepsake.sessions");
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["images"].as_object().unwrap().len(), 2);

    let (_d2, db2) = temp_db();
    let mut h2 = Host::spawn(&db2);
    let r = import(&mut h2, &doc);
    assert_eq!(r["sessionsImported"], 3, "{r}");
    assert_eq!(r["sessionsSkipped"], 0, "{r}");
    assert_eq!(r["imagesStored"], 2, "{r}");
    assert_eq!(r["settingsImported"], 0, "{r}");
    assert_eq!(r["live"], "absent", "{r}");
    assert_eq!(h2.ok("history.meta", json!({}))["length"], 0, "an export carries no live history");
    for id in &ids {
        let orig = h.ok("sessions.get", json!({"id": id, "images": "ref"}));
        let copy = h2.ok("sessions.get", json!({"id": id, "images": "ref"}));
        assert_eq!(copy, orig, "session {id}");
        let orig = h.ok("sessions.get", json!({"id": id}));
        let copy = h2.ok("sessions.get", json!({"id": id}));
        assert_eq!(copy, orig, "session {id} with inline images");
        assert_eq!(body_rows(&db2, id), body_rows(&db, id), "stored rows of {id}");
    }
    assert_eq!(h2.ok("sessions.get", json!({"id": s2}))["pinned"], true);
    // (the source also lists the live chat's own session, which was not exported)
    let rows = |h: &mut Host| -> Vec<Value> {
        let all = h.list(json!({}));
        all.as_array().unwrap().iter().filter(|r| ids.iter().any(|i| r["id"] == json!(i))).cloned().collect()
    };
    let copied = rows(&mut h2);
    assert_eq!(copied.len(), 3);
    assert_eq!(copied, rows(&mut h), "same rows, same order");
    let images = |db: &Path| -> Vec<(String, String, Vec<u8>)> {
        let c = sql(db);
        let mut st = c.prepare("SELECT sha256, mime, bytes FROM images ORDER BY sha256").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
    };
    let imgs2 = images(&db2);
    assert_eq!(imgs2, images(&db), "identical image bytes");
    assert_eq!(imgs2.len(), 2);
    for x in [&a, &b] {
        assert_eq!(
            h2.ok("images.get", json!({"ref": img_ref(x)})),
            h.ok("images.get", json!({"ref": img_ref(x)}))
        );
    }
    // Re-exporting the copy gives the same sessions and images.
    let exp2: Value = serde_json::from_str(
        h2.ok("sessions.export", json!({"ids": ids, "format": "json"}))["text"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(exp2["sessions"], doc["sessions"]);
    assert_eq!(exp2["images"], doc["images"]);

    assert_rerun_is_noop(&mut h2, &db2, &doc);

    // Host copy wins: change s1 in the copy, import the export again with one new session.
    h2.ok("sessions.rename", json!({"id": s1, "name": "Host copy"}));
    h2.ok("sessions.appendTo", json!({"id": s1, "entry": user("host only")}));
    let host_s1 = h2.ok("sessions.get", json!({"id": s1, "images": "ref"}));
    let mut doc2 = doc.clone();
    doc2["sessions"].as_array_mut().unwrap().push(
        json!({"id": "new-from-export", "name": "New", "createdAt": 42, "pinned": false, "entries": [user_image("n", &img_ref(&b))]}),
    );
    let r = import(&mut h2, &doc2);
    assert_eq!(r["sessionsImported"], 1, "{r}");
    assert_eq!(r["sessionsSkipped"], 3, "{r}");
    assert_eq!(r["sessionsAlreadyHere"], 3, "the three the host has: {r}");
    assert_eq!(r["imagesStored"], 0, "{r}");
    assert_eq!(h2.ok("sessions.get", json!({"id": s1, "images": "ref"})), host_s1, "host copy wins");
    assert_eq!(session_row(&db2, "new-from-export"), Some(("New".into(), 42, 0, 1)));
    assert_body(&db2, "new-from-export", &[user_image("n", &img_ref(&b))]);

    // Through the wire the text itself (a string) is not an object document.
    assert_eq!(h2.err("storage.import", json!({"document": text})), "unsupported");
}

#[test]
fn export_versions_and_non_object_documents_are_refused() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"systemPrompt": "light"}}));
    let before = snapshot(&db);
    for v in [json!(3), json!(0), json!(1.5), json!("1")] {
        let doc = json!({"format": "keepsake.sessions", "version": v, "exportedAt": "x",
                         "sessions": [{"id": "v", "name": "V", "createdAt": 1, "pinned": false, "entries": [user("v")]}],
                         "images": {}});
        assert_eq!(h.err("storage.import", json!({"document": doc})), "unsupported", "version {v}");
    }
    // neither an export nor a dump: refused with what it looks like (issue 32)
    for d in
        [json!([]), json!([{"history": []}]), json!("text"), json!(5), json!(null), json!(true), json!({})]
    {
        assert_eq!(h.err("storage.import", json!({"document": d})), "unsupported", "{d}");
    }
    assert_eq!(snapshot(&db), before);
    // A dump with nothing in it imports nothing.
    let r = import(&mut h, &json!({"savedSessions": []}));
    assert_eq!(
        (&r["sessionsImported"], &r["settingsImported"], &r["live"], &r["imagesStored"], &r["overCap"]),
        (&json!(0), &json!(0), &json!("absent"), &json!(0), &json!(0))
    );
}

#[test]
fn export_document_validates_elements_like_a_dump() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let doc = json!({
        "format": "keepsake.sessions", "version": 1, "exportedAt": "2026-01-01T00:00:00Z",
        "sessions": [
            {"id": "x1", "name": "X1", "createdAt": 10.9, "pinned": true, "entries": [user("x1"), 7, assistant("y")]},
            {"id": "x1", "name": "dup", "createdAt": 11, "pinned": false, "entries": [user("dup")]},
            {"name": "no id", "entries": []},
            "junk"
        ],
        "images": {}
    });
    let r = import(&mut h, &doc);
    assert_eq!(r["sessionsImported"], 1, "{r}");
    assert_eq!(r["sessionsSkipped"], 3, "{r}");
    assert!(warnings(&r).len() >= 4, "{r}");
    assert_eq!(session_row(&db, "x1"), Some(("X1".into(), 10, 1, 2)));
    assert_body(&db, "x1", &[user("x1"), assistant("y")]);
    assert_rerun_is_noop(&mut h, &db, &doc);
}

// ---------------------------------------------------------------------------------------------
// never evicts

fn five_sessions() -> Vec<Value> {
    (0..5).map(|i| json!({"id": format!("n{i}"), "name": format!("N{i}"), "createdAt": 100 + i, "history": [user(&format!("n{i}"))]})).collect()
}

#[test]
fn import_never_evicts_and_reports_over_cap() {
    // maxSessions in the host.
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"maxSessions": 2}}));
    let r = import(&mut h, &json!({"savedSessions": five_sessions()}));
    assert_eq!(r["sessionsImported"], 5, "{r}");
    assert_eq!(r["overCap"], 3, "{r}");
    assert_eq!(session_ids(&db), ["n0", "n1", "n2", "n3", "n4"]);
    let r = assert_rerun_is_noop(&mut h, &db, &json!({"savedSessions": five_sessions()}));
    assert_eq!(r["overCap"], 3, "{r}");
    // The next session created (a new chat, kept from its first entry) moves the oldest to the
    // trash, down to the cap, and says which; a snapshot does the same.
    let r = h.ok("history.replace", json!({"entries": [user("fresh")]}));
    assert_eq!(r["kept"]["created"], json!(true), "{r}");
    assert_eq!(r["evicted"], json!(["n0", "n1", "n2", "n3"]), "{r}");
    let saved = h.ok("sessions.save", json!({}));
    assert_eq!(saved["evicted"], json!(["n4"]), "{saved}");
    let drawer = h.list(json!({}));
    assert_eq!(drawer.as_array().unwrap().len(), 2, "{drawer}");
    let trash = h.ok("trash.list", json!({}))["items"].clone();
    let mut trashed: Vec<&str> =
        trash.as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    trashed.sort();
    assert_eq!(trashed, ["n0", "n1", "n2", "n3", "n4"], "evicted to the trash, not deleted");
    assert_eq!(count(&db, "sessions"), 7);

    // maxSessions in the dump itself (taken when asked), plus an archived live history.
    let (_d2, db2) = temp_db();
    let mut h2 = Host::spawn(&db2);
    h2.ok("history.replace", json!({"entries": [user("host live")]}));
    let doc = json!({"savedSessions": five_sessions(), "maxSessions": 2, "history": [user("dump live")]});
    let r = import_mode(&mut h2, &doc, "keep");
    assert_eq!(r["sessionsImported"], 6, "{r}");
    assert_eq!(r["live"], "archived", "{r}");
    assert_eq!(r["overCap"], 5, "the host's live chat, five sessions and the archived history: {r}");
    assert_eq!(count(&db2, "sessions"), 7);
    assert_eq!(h2.ok("trash.list", json!({}))["items"], json!([]), "nothing evicted");

    // Unlimited (0): never over cap.
    let (_d3, db3) = temp_db();
    let mut h3 = Host::spawn(&db3);
    h3.ok("settings.set", json!({"map": {"maxSessions": 0}}));
    let r = import(&mut h3, &json!({"savedSessions": five_sessions()}));
    assert_eq!(r["overCap"], 0, "{r}");
    // The default (0) keeps every session.
    let (_d4, db4) = temp_db();
    let mut h4 = Host::spawn(&db4);
    let r = import(&mut h4, &json!({"savedSessions": five_sessions()}));
    assert_eq!(r["overCap"], 0, "{r}");
    assert_eq!(count(&db4, "sessions"), 5);
}

// ---------------------------------------------------------------------------------------------
// events and clientRequestId

#[test]
fn import_emits_one_change_event_and_replays_by_client_request_id() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let doc = json!({"savedSessions": five_sessions(), "systemPrompt": "dark", "history": [user("live")]});
    h.events.clear();
    let r1 = h.ok("storage.import", json!({"document": doc, "settings": "keep", "clientRequestId": "imp-A"}));
    assert_eq!(r1["sessionsImported"], 6, "five and the session keeping the live history: {r1}");
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("changed event");
    assert_eq!(ev["clientRequestId"], "imp-A");
    assert_eq!(ev["areas"]["settings"], json!(["systemPrompt"]), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["index"], true, "{ev}");
    assert_eq!(ev["areas"]["history"], true, "{ev}");
    let seq = ev["seq"].as_i64().unwrap();
    let snap = snapshot(&db);

    // Same id: the recorded result, nothing applied, no event.
    let other = json!({"savedSessions": [{"id": "zzz", "history": [user("z")]}], "other": 1});
    let r2 = h.ok("storage.import", json!({"document": other, "clientRequestId": "imp-A"}));
    assert_eq!(r2, r1, "replay returns the recorded result");
    assert_eq!(snapshot(&db), snap);
    assert_eq!(h.err("settings.set", json!({"map": {"a": 1}, "clientRequestId": "imp-A"})), "conflict");
    // A plain re-run is a no-op: no event either.
    let r3 = import_mode(&mut h, &doc, "keep");
    assert_eq!(r3["sessionsImported"], 0);
    h.ok("settings.set", json!({"map": {"sentinel": true}}));
    let sentinel = h
        .wait_event(EVENT_WAIT, |e| {
            e["areas"]["settings"].as_array().is_some_and(|a| a.contains(&json!("sentinel")))
        })
        .expect("sentinel event");
    assert_eq!(sentinel["seq"].as_i64().unwrap(), seq + 1, "replay and no-op committed no change");
    assert!(h.events.is_empty(), "no other events: {:?}", h.events);
}

// ---------------------------------------------------------------------------------------------
// CLI

#[test]
fn cli_import_file_prints_the_result_and_is_idempotent() {
    let (dir, db) = fresh_db();
    let l1 = vec![user("cli light"), assistant("cli reply")];
    let dump = json!({
        "savedSessions": [
            {"id": "c1", "name": "CLI one", "createdAt": 1_650_000_000_000i64, "pinned": true},
            {"id": "c2", "name": "CLI two", "createdAt": 1_650_000_000_001i64, "history": [user("inline two")]}
        ],
        "session_c1": l1,
        "history": [user("cli live")],
        "activeSessionId": "c2",
        "systemPrompt": "dark"
    });
    let f = write_file(dir.path(), "dump.json", &dump);
    let (code, out, err) = cli(&db, &["import", "--settings", "keep", f.to_str().unwrap()]);
    assert_eq!(code, 0, "stdout: {out} stderr: {err}");
    let r: Value = serde_json::from_str(&out).expect("stdout is the result JSON");
    assert_eq!(r["sessionsImported"], 2, "{r}");
    assert_eq!(r["settingsImported"], 1, "{r}");
    assert_eq!(r["live"], "replaced", "{r}");
    assert_eq!(r["imagesStored"], 0, "{r}");
    assert!(
        r["warnings"].is_array() && r.get("sessionsSkipped").is_some() && r.get("overCap").is_some(),
        "{r}"
    );
    assert_body(&db, "c1", &l1);
    // the dump's live history continues c2 (this import created it) but went another way than
    // c2's stored body: it is the chosen path, the stored body another version
    assert_body(&db, "c2", &[user("cli live")]);
    assert_eq!(other_versions(&db, "c2"), vec![user("inline two")]);
    assert_eq!(session_row(&db, "c1"), Some(("CLI one".into(), 1_650_000_000_000, 1, 2)));
    assert_eq!(live_rows(&db), vec![user("cli live")]);
    assert_eq!(binding(&db), "c2");

    let before = counts(&db);
    let (code, out, _) = cli(&db, &["import", f.to_str().unwrap()]);
    assert_eq!(code, 0);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&r["sessionsImported"], &r["settingsImported"], &r["imagesStored"]),
        (&json!(0), &json!(0), &json!(0))
    );
    assert_eq!(r["live"], "unchanged", "{r}");
    assert_eq!(counts(&db), before);

    // --settings overwrite
    let f2 = write_file(dir.path(), "s.json", &json!({"systemPrompt": "light"}));
    let (code, out, _) = cli(&db, &["import", f2.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["settingsImported"], 0);
    let (code, out, _) = cli(&db, &["import", "--settings", "overwrite", f2.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["settingsImported"], 1);
    let v: String = sql(&db)
        .query_row("SELECT value FROM settings WHERE key = 'systemPrompt'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, "\"light\"");

    // A missing file fails without touching anything.
    let snap = snapshot(&db);
    let (code, _, _) = cli(&db, &["import", dir.path().join("nope.json").to_str().unwrap()]);
    assert_ne!(code, 0);
    assert_eq!(snapshot(&db), snap);
}

#[test]
fn cli_import_dash_reads_stdin() {
    let (_dir, db) = fresh_db();
    let p = png_bytes(4, 2, 50);
    let dump = json!({
        "savedSessions": [{"id": "stdin-1", "name": "From stdin", "createdAt": 77, "history": [user_image("pic", &data_url("image/png", &p))]}],
        "activeModel": "fr"
    });
    let run = |doc: &Value| -> (i32, String) {
        let mut child = Command::new(BIN)
            .arg("--db")
            .arg(&db)
            .args(["import", "--settings", "keep", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let bytes = serde_json::to_vec(doc).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            stdin.write_all(&bytes).unwrap();
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run(&dump);
    assert_eq!(code, 0, "{out}");
    let r: Value = serde_json::from_str(&out).expect("result JSON");
    assert_eq!(r["sessionsImported"], 1, "{r}");
    assert_eq!(r["imagesStored"], 1, "{r}");
    assert_eq!(r["settingsImported"], 1, "{r}");
    assert_body(&db, "stdin-1", &[user_image("pic", &img_ref(&p))]);
    assert_eq!(session_row(&db, "stdin-1"), Some(("From stdin".into(), 77, 0, 1)));
    let before = counts(&db);
    let (code, out) = run(&dump);
    assert_eq!(code, 0);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&r["sessionsImported"], &r["settingsImported"], &r["imagesStored"]),
        (&json!(0), &json!(0), &json!(0))
    );
    assert_eq!(counts(&db), before);
    // Non-object JSON on stdin fails.
    let (code, _) = run(&json!([1, 2]));
    assert_ne!(code, 0);
    assert_eq!(counts(&db), before);
}

#[test]
fn cli_imports_an_export_and_connected_ports_are_told() {
    let (dir, src) = temp_db();
    let mut h = Host::spawn(&src);
    let p = png_bytes(3, 7, 60);
    h.ok(
        "history.replace",
        json!({"entries": [user_image("exported", &data_url("image/png", &p)), assistant("yes")]}),
    );
    let sid =
        h.ok("sessions.save", json!({"name": "Exported"}))["session"]["id"].as_str().unwrap().to_owned();
    let text =
        h.ok("sessions.export", json!({"ids": [sid], "format": "json"}))["text"].as_str().unwrap().to_owned();
    let f = dir.path().join("export.json");
    std::fs::write(&f, &text).unwrap();

    let (_d2, dst) = fresh_db();
    let mut watcher = Host::spawn(&dst);
    watcher.hello();
    watcher.events.clear();
    let (code, out, err) = cli(&dst, &["import", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out} {err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["sessionsImported"], 1, "{r}");
    assert_eq!(r["imagesStored"], 1, "{r}");
    let ev = watcher
        .wait_event(EVENT_WAIT, |e| e["event"] == "changed" && e["areas"]["sessions"]["index"] == true)
        .expect("the CLI's commit is announced to a connected port");
    assert!(ev["seq"].as_i64().unwrap() > 0);
    assert_eq!(
        watcher.ok("sessions.get", json!({"id": sid, "images": "ref"})),
        h.ok("sessions.get", json!({"id": sid, "images": "ref"}))
    );
    assert_eq!(watcher.ok("images.get", json!({"ref": img_ref(&p)}))["mime"], "image/png");
}

/// A chat exported and imported under another id (its entryIds are taken, so its entries get new
/// ones): its other versions stay at their forks. They were kept at fork keys naming entries of
/// the first chat, so the copy showed none of them.
#[test]
fn an_imported_copy_whose_entries_get_new_ids_keeps_its_versions() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.append", json!({"entry": user("q1")}));
    h.ok("history.append", json!({"entry": assistant("a1")}));
    h.ok("history.append", json!({"entry": user("q2")}));
    h.ok("history.append", json!({"entry": assistant("a2")}));
    h.ok("history.branch", json!({"index": 3, "entry": assistant("a2, take two")}));
    let r = h.ok("history.branch", json!({"index": 2, "entry": user("q2, edited")}));
    let id = r["sessionId"].as_str().unwrap().to_owned();
    let doc = h.ok("sessions.export", json!({"ids": [id], "format": "json"}));
    let mut doc: Value = serde_json::from_str(doc["text"].as_str().unwrap()).unwrap();
    doc["sessions"][0]["id"] = json!("the-copy");
    import(&mut h, &doc);
    let original = h.ok("sessions.get", json!({"id": id}));
    let copy = h.ok("sessions.get", json!({"id": "the-copy"}));
    assert_eq!(
        copy["forks"].as_array().unwrap().len(),
        original["forks"].as_array().unwrap().len(),
        "{copy}"
    );
    assert_eq!(copy["forks"][0]["versions"], json!(2), "{copy}");
    // every fork of the copy is keyed by one of its own entries (or is at its start)
    let c = sql(&db);
    let dangling: i64 = c
        .query_row(
            "SELECT count(*) FROM session_forks f WHERE f.session_id = 'the-copy' AND f.fork_entry_id <> ''
             AND NOT EXISTS (SELECT 1 FROM session_entries e WHERE e.entry_id = f.fork_entry_id AND e.session_id = 'the-copy')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(dangling, 0);
    h.close();
}

/// Issue 32 (6): a JSON object that is neither a Keepsake export nor a browser dump was taken as
/// a dump (`{"hello":"world","theme":"dark"}` offered "2 settings" and wrote `hello`); another
/// product's export was refused as "not a JSON object". Each is now refused, preview and import,
/// over the wire and on the command line, with what the file looks like (from its content, the
/// file name says nothing), and the database is left as it was.
#[test]
fn what_is_no_keepsake_document_is_refused_with_what_it_looks_like() {
    let (dir, db) = fresh_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"systemPrompt": "mine"}}));
    let not_ours = "not a Keepsake export or a Keepsake browser dump";
    // ChatGPT's conversations.json: conversations with a `mapping` tree and a `current_node`
    let chatgpt = json!([{"title": "Tides", "create_time": 1.7e9, "update_time": 1.7e9, "current_node": "b",
        "mapping": {"a": {"id": "a", "message": null, "parent": null, "children": ["b"]},
                    "b": {"id": "b", "parent": "a", "children": [], "message": {"id": "b",
                          "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}}}}}]);
    // Claude's export: conversations with a `uuid` and their `chat_messages`
    let claude = json!([{"uuid": "5b0e", "name": "Lamps", "created_at": "2025-01-01T00:00:00Z",
        "chat_messages": [{"uuid": "m1", "sender": "human", "text": "hello"}]}]);
    let cases = [
        (
            json!({"hello": "world", "theme": "dark"}),
            format!("a JSON object with keys hello, theme: {not_ours}"),
        ),
        (
            chatgpt,
            "this looks like a ChatGPT export (conversations.json); importing it is not supported yet".into(),
        ),
        (
            claude,
            "this looks like a Claude export (conversations.json); importing it is not supported yet".into(),
        ),
        (json!([1, 2, 3]), format!("a JSON array of 3 items: {not_ours}")),
        (json!({}), format!("an empty JSON object: {not_ours}")),
    ];
    let before = snapshot(&db);
    for (i, (doc, said)) in cases.iter().enumerate() {
        for (op, args) in [
            ("storage.importPreview", json!({"document": doc})),
            ("storage.import", json!({"document": doc, "settings": "overwrite"})),
        ] {
            let r = h.call(op, args);
            assert_eq!(r["ok"], json!(false), "{op} took {doc}: {r}");
            assert_eq!(r["error"]["code"], json!("unsupported"), "{op} {doc}: {r}");
            assert_eq!(r["error"]["message"], json!(said), "{op} {doc}");
        }
        // the name says nothing: ChatGPT's file name on a dump is still a dump, and the other way round
        let f = write_file(dir.path(), &format!("conversations-{i}.json"), doc);
        let (code, out, err) = cli(&db, &["import", "--settings", "overwrite", f.to_str().unwrap()]);
        assert_ne!(code, 0, "{doc}: {out}");
        assert!(err.contains(said.as_str()), "{doc}: stderr {err}");
        let (code, _, err) = cli(&db, &["import", "--preview", f.to_str().unwrap()]);
        assert_ne!(code, 0);
        assert!(err.contains(said.as_str()), "{doc}: stderr {err}");
    }
    assert_eq!(snapshot(&db), before, "a refused document changed the database");

    // A recognised dump still imports, under any name; its unknown keys never become settings.
    let dump = json!({"savedSessions": [{"id": "d1", "name": "Kept", "history": [user("kept")]}],
        "systemPrompt": "theirs", "maxSessions": 0, "hello": "world", "theme": "dark"});
    let p = h.ok("storage.importPreview", json!({"document": dump}));
    let keys: Vec<&str> =
        p["settings"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["systemPrompt", "maxSessions"], "{p}");
    assert_eq!(p["sessionsNew"], json!(1));
    assert!(p["warnings"].to_string().contains("\\\"hello\\\" is not a Keepsake setting"), "{p}");
    let f = write_file(dir.path(), "conversations.json", &dump);
    let r = json_of(&cli(&db, &["import", "--settings", "overwrite", f.to_str().unwrap()]));
    assert_eq!(
        (&r["sessionsImported"], &r["settingsImported"], &r["settingsSkipped"]),
        (&json!(1), &json!(2), &json!(2)),
        "{r}"
    );
    let stored: Vec<String> = {
        let c = sql(&db);
        let mut st = c.prepare("SELECT key FROM settings ORDER BY key").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(stored, ["maxSessions", "systemPrompt"], "only Keepsake's settings are written");
}

fn json_of((code, out, err): &(i32, String, String)) -> Value {
    assert_eq!(*code, 0, "stdout: {out} stderr: {err}");
    serde_json::from_str(out).unwrap_or_else(|e| panic!("non-JSON ({e}): {out}"))
}
