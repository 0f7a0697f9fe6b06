//! Saved sessions (storage-model §5, §10, §11; PROTOCOL.md §7 sessions) through the real binary
//! over pipes on a temp database.
use crate::harness::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

const EVENT_WAIT: Duration = Duration::from_secs(15);
const PREFIX: &str = "[Page context attached by Keepsake]";
const LEGACY: &str = "[Page context attached by browsa]";

// ---------------------------------------------------------------------------------------------
// helpers

fn start() -> (tempfile::TempDir, PathBuf, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    // The database exists and is migrated once the host has answered a request.
    h.ok("history.meta", json!({}));
    (dir, db, h)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The local date as the host formats it (same machine, same TZ).
fn local_date() -> String {
    chrono::Local::now().format("%Y-%m-%d").to_string()
}

fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    for (i, c) in b.iter().enumerate() {
        let ok = match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        };
        if !ok {
            return false;
        }
    }
    b[14] == b'4' && matches!(b[19], b'8' | b'9' | b'a' | b'b')
}

fn q_i64(db: &Path, q: &str) -> i64 {
    sql(db).query_row(q, [], |r| r.get(0)).unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn q_str(db: &Path, q: &str) -> String {
    sql(db).query_row(q, [], |r| r.get(0)).unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn q_strs(db: &Path, q: &str) -> Vec<String> {
    let c = sql(db);
    let mut st = c.prepare(q).unwrap();
    let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// Sessions in the drawer (not in the trash).
fn session_count(db: &Path) -> i64 {
    q_i64(db, "SELECT count(*) FROM sessions WHERE trashed_at IS NULL")
}

fn change_rows(db: &Path) -> i64 {
    q_i64(db, "SELECT count(*) FROM changes")
}

fn db_binding(db: &Path) -> String {
    q_str(db, "SELECT active_session_id FROM live_state WHERE id = 1")
}

fn blob_stored(db: &Path, bytes: &[u8]) -> bool {
    q_i64(db, &format!("SELECT count(*) FROM images WHERE sha256 = '{}'", sha256_hex(bytes))) == 1
}

/// The stored body (chosen path) of a session, straight from SQLite, in position order, without
/// entryIds.
fn db_body(db: &Path, id: &str) -> Vec<Value> {
    let c = sql(db);
    let mut st = c
        .prepare(
            "SELECT entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL ORDER BY position",
        )
        .unwrap();
    let rows = st.query_map([id], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| bare(&serde_json::from_str(&r.unwrap()).expect("stored entry is JSON"))).collect()
}

fn image_ref(bytes: &[u8]) -> String {
    format!("keepsake-image:sha256:{}", sha256_hex(bytes))
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn image_entry(text: &str, url: &str) -> Value {
    json!({"role": "user", "content": [text_part(text), image_part(url)]})
}

fn meta(h: &mut Host) -> Value {
    h.ok("history.meta", json!({}))
}

fn binding(h: &mut Host) -> String {
    meta(h)["activeSessionId"].as_str().expect("activeSessionId string").to_owned()
}

fn live(h: &mut Host) -> Vec<Value> {
    bare(&h.ok("history.get", json!({"images": "ref"}))["entries"]).as_array().expect("entries").clone()
}

fn live_texts(h: &mut Host) -> Vec<String> {
    live(h).iter().map(|e| e["content"].as_str().expect("string content").to_owned()).collect()
}

fn users(prefix: &str, range: std::ops::Range<usize>) -> Vec<Value> {
    range.map(|i| user(&format!("{prefix}{i}"))).collect()
}

fn replace(h: &mut Host, list: Vec<Value>) {
    let n = list.len();
    let r = h.ok("history.replace", json!({ "entries": list }));
    assert_eq!(r["length"], json!(n.min(60)), "{r}");
}

/// A chat of `list`, named `name`, then "New chat": the session that kept it (auto-keep), and
/// an empty, unbound live history.
fn archive(h: &mut Host, list: Vec<Value>, name: &str) -> String {
    h.ok("history.clear", json!({}));
    let r = h.ok("history.replace", json!({ "entries": list }));
    assert_eq!(r["kept"]["created"], json!(true), "{r}");
    let id = r["kept"]["sessionId"].as_str().expect("session id").to_owned();
    assert!(is_uuid_v4(&id), "not a UUID v4: {id}");
    h.ok("sessions.rename", json!({"id": id, "name": name}));
    h.ok("history.clear", json!({}));
    id
}

fn sess(id: &str, name: &str, created_at: i64, pinned: bool, entries: Vec<Value>) -> Value {
    json!({"id": id, "name": name, "createdAt": created_at, "pinned": pinned, "entries": entries})
}

/// Import sessions through a keepsake.sessions export document (import never evicts).
fn import(h: &mut Host, sessions: Vec<Value>) {
    let n = sessions.len();
    let doc = json!({"format": "keepsake.sessions", "version": 1,
                     "exportedAt": "2026-01-01T00:00:00+00:00", "sessions": sessions, "images": {}});
    let r = h.ok("storage.import", json!({ "document": doc }));
    assert_eq!(r["sessionsImported"], json!(n), "{r}");
}

fn list(h: &mut Host, query: Option<&str>) -> Vec<Value> {
    let args = match query {
        Some(q) => json!({ "query": q }),
        None => json!({}),
    };
    let r = h.list(args);
    let rows = r.as_array().unwrap_or_else(|| panic!("sessions.list is not an array: {r}")).clone();
    for row in &rows {
        assert_row_shape(row);
    }
    rows
}

fn ids_of(rows: &[Value]) -> Vec<String> {
    rows.iter().map(|r| r["id"].as_str().expect("row id").to_owned()).collect()
}

fn list_ids(h: &mut Host) -> Vec<String> {
    ids_of(&list(h, None))
}

fn row_of(h: &mut Host, id: &str) -> Value {
    list(h, None)
        .into_iter()
        .find(|r| r["id"] == json!(id))
        .unwrap_or_else(|| panic!("session {id} not listed"))
}

/// Rows carry only row fields: never a body.
fn assert_row_shape(row: &Value) {
    let obj = row.as_object().unwrap_or_else(|| panic!("row is not an object: {row}"));
    for k in ["id", "name", "createdAt", "pinned"] {
        assert!(obj.contains_key(k), "row lacks {k}: {row}");
    }
    assert!(row["id"].is_string() && row["name"].is_string(), "{row}");
    assert!(row["createdAt"].is_i64() || row["createdAt"].is_u64(), "{row}");
    assert!(row["pinned"].is_boolean(), "{row}");
    let allowed = ["id", "name", "createdAt", "pinned", "entryCount", "contentMatch", "snippet"];
    for k in obj.keys() {
        assert!(allowed.contains(&k.as_str()), "row carries unexpected field {k}: {row}");
    }
}

/// Body of a session as `sessions.get` returns it with image references.
fn body(h: &mut Host, id: &str) -> Vec<Value> {
    let r = h.ok("sessions.get", json!({"id": id, "images": "ref"}));
    bare(&r["entries"]).as_array().expect("entries").clone()
}

fn body_texts(h: &mut Host, id: &str) -> Vec<String> {
    body(h, id).iter().map(|e| e["content"].as_str().expect("string content").to_owned()).collect()
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

fn evicted(r: &Value) -> BTreeSet<String> {
    match r.get("evicted") {
        None => BTreeSet::new(),
        Some(Value::Array(a)) => a.iter().map(|v| v.as_str().expect("evicted id").to_owned()).collect(),
        Some(other) => panic!("evicted is not an array: {other}"),
    }
}

/// `v` without the field `k`.
fn without(v: &Value, k: &str) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove(k);
    }
    v
}

fn set_of<S: AsRef<str>>(ids: &[S]) -> BTreeSet<String> {
    ids.iter().map(|s| s.as_ref().to_owned()).collect()
}

/// A snippet of a short body: the entry's trailing line break may show as a trailing space
/// (the spec does not say whether snippets are trimmed), so compare trimmed.
fn snip(row: &Value) -> String {
    row["snippet"].as_str().unwrap_or_else(|| panic!("no snippet: {row}")).trim().to_owned()
}

fn event_ids(ev: &Value) -> BTreeSet<String> {
    ev["areas"]["sessions"]["ids"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// sessions.save: archive

#[test]
fn save_with_empty_live_history_writes_nothing() {
    let (_d, db, mut h) = start();
    for args in [json!({}), json!({"name": "Named"}), json!({"fallbackName": "Dec 2"}), json!({"id": "nope"})]
    {
        let r = unchanged(&mut h, "sessions.save", args.clone());
        assert_eq!(r["session"], Value::Null, "{args}: {r}");
        assert_eq!(r["created"], json!(false), "{args}: {r}");
    }
    assert_eq!(session_count(&db), 0);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM session_entries"), 0);
    assert!(list(&mut h, None).is_empty());
}

/// The live chat is kept from its first entry; `sessions.save` without an id makes a snapshot:
/// a copy of the whole chat under a new id, its entries with ids of their own.
#[test]
fn save_without_id_makes_a_snapshot_copy() {
    let (_d, db, mut h) = start();
    let png = png_bytes(2, 2, 1);
    let live_list =
        vec![user("hello there"), assistant("hi!"), image_entry("see", &data_url("image/png", &png))];
    replace(&mut h, live_list);
    let kept = binding(&mut h);
    assert!(is_uuid_v4(&kept), "the chat is kept in a session: {kept:?}");
    let before = now_ms();
    let r = h.ok("sessions.save", json!({"name": "  My chat \n"}));
    let after = now_ms();
    assert_eq!(r["created"], json!(true), "{r}");
    let row = &r["session"];
    assert_row_shape(row);
    let id = row["id"].as_str().unwrap().to_owned();
    assert!(is_uuid_v4(&id), "not a lower-case UUID v4: {id}");
    assert_ne!(id, kept);
    assert_eq!(row["name"], json!("My chat"));
    assert_eq!(row["pinned"], json!(false));
    let created = row["createdAt"].as_i64().unwrap();
    assert!(
        created >= before - 1000 && created <= after + 1000,
        "createdAt {created} not in [{before}, {after}]"
    );
    assert_eq!(row["entryCount"], json!(3));
    assert!(evicted(&r).is_empty(), "{r}");

    // Body = the chat, stored one row per entry with image references.
    let want = vec![
        user("hello there"),
        assistant("hi!"),
        json!({"role": "user", "content": [text_part("see"), image_part(&image_ref(&png))]}),
    ];
    assert_eq!(db_body(&db, &id), want);
    assert_eq!(db_body(&db, &kept), want);
    assert_eq!(
        q_strs(&db, &format!("SELECT role FROM session_entries WHERE session_id = '{id}' ORDER BY position")),
        vec!["user", "assistant", "user"]
    );
    assert_eq!(body(&mut h, &id), want);
    assert_eq!(q_i64(&db, &format!("SELECT created_at FROM sessions WHERE id = '{id}'")), created);
    // the copy's entries are entries of their own
    assert_eq!(
        q_i64(
            &db,
            &format!(
                "SELECT count(DISTINCT entry_id) FROM session_entries WHERE session_id IN ('{id}', '{kept}')"
            )
        ),
        6
    );
    // the picture is stored once, used by both
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images"), 1);

    // Save never changes the binding, and the live history is untouched.
    assert_eq!(binding(&mut h), kept);
    assert_eq!(db_binding(&db), kept);
    assert_eq!(live(&mut h), want);

    // A second save makes another copy with another id.
    let r2 = h.ok("sessions.save", json!({}));
    assert_eq!(r2["created"], json!(true));
    let id2 = r2["session"]["id"].as_str().unwrap();
    assert_ne!(id2, id);
    assert!(is_uuid_v4(id2));
    assert_eq!(session_count(&db), 3);
}

#[test]
fn save_never_changes_an_existing_binding() {
    let (_d, db, mut h) = start();
    let s1 = archive(&mut h, vec![user("one")], "One");
    h.ok("sessions.load", json!({"id": s1}));
    assert_eq!(binding(&mut h), s1);
    h.ok("history.append", json!({"entry": user("more")}));
    // Archive (no id) while bound: a new session, binding unchanged.
    let r = h.ok("sessions.save", json!({"name": "Copy"}));
    assert_eq!(r["created"], json!(true));
    assert_ne!(r["session"]["id"], json!(s1));
    assert_eq!(binding(&mut h), s1);
    assert_eq!(db_binding(&db), s1);
    // Write-back while bound: binding unchanged too.
    let r = h.ok("sessions.save", json!({"id": s1}));
    assert_eq!(r["created"], json!(false));
    assert_eq!(binding(&mut h), s1);
}

#[test]
fn save_rejects_malformed_arguments() {
    let (_d, db, mut h) = start();
    replace(&mut h, vec![user("x")]);
    for args in [json!({"name": 5}), json!({"id": 7}), json!({"fallbackName": true}), json!({"bogus": 1})] {
        assert_eq!(h.err("sessions.save", args.clone()), "bad_request", "{args}");
    }
    assert_eq!(session_count(&db), 1, "only the live chat's own session");
}

// ---------------------------------------------------------------------------------------------
// naming (§5.1, §11.14)

#[test]
fn given_name_is_trimmed_and_cut_to_80_utf16_units() {
    let (_d, _db, mut h) = start();
    let cases = [
        ("a".repeat(80), "a".repeat(80)),
        ("a".repeat(85), "a".repeat(80)),
        (format!("  {}  ", "b".repeat(80)), "b".repeat(80)),
        // A cut at 80 that would split the surrogate pair drops the high surrogate: 79 units.
        (format!("{}😀", "a".repeat(79)), "a".repeat(79)),
        (format!("{}😀cc", "c".repeat(78)), format!("{}😀", "c".repeat(78))),
        // 40 emoji = 80 units exactly: kept whole; 41 → 40.
        ("😀".repeat(40), "😀".repeat(40)),
        ("😀".repeat(41), "😀".repeat(40)),
        ("中".repeat(90), "中".repeat(80)),
    ];
    for (given, want) in cases {
        replace(&mut h, vec![user("body")]);
        let r = h.ok("sessions.save", json!({ "name": given }));
        assert_eq!(r["session"]["name"], json!(want), "name {given:?}");
        let id = r["session"]["id"].as_str().unwrap().to_owned();
        assert_eq!(row_of(&mut h, &id)["name"], json!(want));
        assert!(units(&want) <= 80);
    }
}

#[test]
fn auto_name_uses_first_plain_user_string_entry() {
    let (_d, _db, mut h) = start();
    let list = vec![
        assistant("assistant goes first"),
        json!({"role": "user", "content": [text_part("array content is skipped")]}),
        user("   \n\t "),
        user(&format!("{PREFIX}\nURL: https://example.com\nTitle: T\nMode: full\n---\n\nbody")),
        user(&format!("{LEGACY}\nURL: https://old.example\n")),
        user("  \n First real question \n "),
        user("second question"),
    ];
    for args in
        [json!({}), json!({"name": ""}), json!({"name": "  \n "}), json!({"fallbackName": "Fallback"})]
    {
        replace(&mut h, list.clone());
        let r = h.ok("sessions.save", args.clone());
        assert_eq!(r["session"]["name"], json!("First real question"), "{args}");
    }
}

#[test]
fn auto_name_cuts_at_48_code_points_with_ellipsis() {
    let (_d, _db, mut h) = start();
    // 20 emoji + 40 letters = 60 code points (80 UTF-16 units).
    let text = format!("{}{}", "😀".repeat(20), "x".repeat(40));
    replace(&mut h, vec![user(&text)]);
    let r = h.ok("sessions.save", json!({}));
    let want = format!("{}{}…", "😀".repeat(20), "x".repeat(28));
    assert_eq!(r["session"]["name"], json!(want));

    // Exactly 48 code points: no ellipsis.
    let exact = format!("{}{}", "é".repeat(8), "y".repeat(40));
    replace(&mut h, vec![user(&format!("  {exact}  "))]);
    assert_eq!(h.ok("sessions.save", json!({}))["session"]["name"], json!(exact));

    // 49 code points: 48 + ellipsis.
    replace(&mut h, vec![user(&"z".repeat(49))]);
    assert_eq!(h.ok("sessions.save", json!({}))["session"]["name"], json!(format!("{}…", "z".repeat(48))));
}

#[test]
fn auto_name_falls_back_to_fallback_name_then_local_date() {
    let (_d, _db, mut h) = start();
    let no_candidate = vec![
        assistant("only the assistant speaks plainly"),
        json!({"role": "user", "content": [text_part("array")]}),
        user(&format!("{PREFIX}\nURL: https://example.com")),
        user("   "),
    ];
    replace(&mut h, no_candidate.clone());
    let r = h.ok("sessions.save", json!({"fallbackName": "Dec 2, 2026"}));
    assert_eq!(r["session"]["name"], json!("Dec 2, 2026"));

    replace(&mut h, no_candidate);
    let d0 = local_date();
    let r = h.ok("sessions.save", json!({}));
    let d1 = local_date();
    let name = r["session"]["name"].as_str().unwrap();
    assert!(name == d0 || name == d1, "expected local date {d0}, got {name:?}");
    let b = name.as_bytes();
    assert!(b.len() == 10 && b[4] == b'-' && b[7] == b'-', "not YYYY-MM-DD: {name}");
}

// ---------------------------------------------------------------------------------------------
// the live chat is always in its session (no write-back)

#[test]
fn the_live_chats_session_is_always_current_and_save_never_replaces_another() {
    let (_d, db, mut h) = start();
    let s1 = archive(&mut h, vec![user("s1 old"), assistant("s1 answer")], "First");
    let s2 = archive(&mut h, vec![user("s2")], "Second");
    let s3 = archive(&mut h, vec![user("s3")], "Third");
    h.ok("sessions.pin", json!({"id": s2, "pinned": true}));
    let order = list_ids(&mut h);
    assert_eq!(order, vec![s2.clone(), s3.clone(), s1.clone()]);
    let row_before = row_of(&mut h, &s1);

    // Load s1 and extend it: its body has the new entry at once, no save needed.
    h.ok("sessions.load", json!({"id": s1}));
    h.ok("history.append", json!({"entry": user("s1 new question")}));
    assert_eq!(body_texts(&mut h, &s1), vec!["s1 old", "s1 answer", "s1 new question"]);
    assert_eq!(db_body(&db, &s1).len(), 3);
    assert_eq!(row_of(&mut h, &s1)["entryCount"], json!(3));
    assert_eq!(ids_of(&list(&mut h, Some("new question"))), vec![s1.clone()]);
    // Saving the live chat's own id changes nothing (a given name is ignored: rename names).
    let r = unchanged(&mut h, "sessions.save", json!({"id": s1, "name": "Ignored", "fallbackName": "Nope"}));
    assert_eq!(r["created"], json!(false), "{r}");
    assert!(r.get("evicted").is_none(), "{r}");
    assert_eq!(r["session"]["id"], json!(s1));
    assert_eq!(r["session"]["name"], json!("First"));
    assert_eq!(r["session"]["createdAt"], row_before["createdAt"]);
    assert_eq!(session_count(&db), 3);
    assert_eq!(list_ids(&mut h), order, "position unchanged");

    // Saving over another session while the live history holds entries would replace its body:
    // refused, nothing changes.
    assert_eq!(h.err("sessions.save", json!({"id": s2})), "conflict");
    assert_eq!(body_texts(&mut h, &s2), vec!["s2"]);
    assert_eq!(binding(&mut h), s1);
}

#[test]
fn save_with_empty_live_history_and_an_id_archives_nothing_and_keeps_body() {
    let (_d, db, mut h) = start();
    let s = archive(&mut h, vec![user("keep me")], "Keep");
    let r = unchanged(&mut h, "sessions.save", json!({ "id": s }));
    assert_eq!(r["session"], Value::Null);
    assert_eq!(r["created"], json!(false));
    assert_eq!(body_texts(&mut h, &s), vec!["keep me"]);
    assert_eq!(session_count(&db), 1);
}

#[test]
fn save_with_unknown_or_deleted_id_makes_a_snapshot() {
    let (_d, db, mut h) = start();
    let gone = archive(&mut h, vec![user("to delete")], "Gone");
    assert_eq!(h.ok("sessions.delete", json!({ "id": gone })), json!({"deleted": true}));

    replace(&mut h, vec![user("live words")]);
    let kept = binding(&mut h);
    let r = h.ok("sessions.save", json!({ "id": gone }));
    assert_eq!(r["created"], json!(true), "{r}");
    let id = r["session"]["id"].as_str().unwrap().to_owned();
    assert_ne!(id, gone);
    assert_ne!(id, kept);
    assert!(is_uuid_v4(&id));
    assert_eq!(r["session"]["name"], json!("live words"));
    assert_eq!(body_texts(&mut h, &id), vec!["live words"]);

    let r = h.ok("sessions.save", json!({"id": "does-not-exist", "name": "Other"}));
    assert_eq!(r["created"], json!(true));
    let id2 = r["session"]["id"].as_str().unwrap();
    assert_ne!(id2, "does-not-exist");
    assert!(is_uuid_v4(id2));
    assert_eq!(r["session"]["name"], json!("Other"));
    assert_eq!(session_count(&db), 3, "the live chat and two snapshots");
    assert_eq!(h.err("sessions.get", json!({"id": "does-not-exist"})), "not_found");
    // the deleted one is still in the trash, untouched
    assert_eq!(body_texts(&mut h, &gone), vec!["to delete"]);
}

// ---------------------------------------------------------------------------------------------
// eviction: only with a cap the user set, always to the trash

fn trash_ids(h: &mut Host) -> BTreeSet<String> {
    h.ok("trash.list", json!({}))["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn eviction_moves_the_oldest_unpinned_to_the_trash_down_to_cap() {
    let (_d, db, mut h) = start();
    h.ok("settings.set", json!({"map": {"maxSessions": 3}}));
    let png = png_bytes(2, 2, 77);
    let mut ids = Vec::new();
    for i in 0..3 {
        let list = if i == 0 {
            vec![image_entry("first with image", &data_url("image/png", &png))]
        } else {
            vec![user(&format!("session {i}"))]
        };
        ids.push(archive(&mut h, list, &format!("S{i}")));
    }
    assert_eq!(session_count(&db), 3);
    assert!(blob_stored(&db, &png));
    // A new chat is a fourth session: the oldest goes to the trash.
    let r = h.ok("history.append", json!({"entry": user("session 3")}));
    assert_eq!(r["kept"]["created"], json!(true));
    assert_eq!(evicted(&r), set_of(&[&ids[0]]), "{r}");
    ids.push(r["kept"]["sessionId"].as_str().unwrap().to_owned());
    assert_eq!(session_count(&db), 3);
    assert_eq!(trash_ids(&mut h), set_of(&[&ids[0]]));
    assert!(blob_stored(&db, &png), "the evicted session keeps its picture in the trash");
    assert_eq!(body(&mut h, &ids[0]).len(), 1, "its body is whole");
    assert!(!list_ids(&mut h).contains(&ids[0]));

    // a snapshot is a new session too
    let r = h.ok("sessions.save", json!({"name": "S4"}));
    assert_eq!(evicted(&r), set_of(&[&ids[1]]));
    ids.push(r["session"]["id"].as_str().unwrap().to_owned());
    assert_eq!(list_ids(&mut h), vec![ids[4].clone(), ids[3].clone(), ids[2].clone()]);
    // purging the trash is what releases the picture
    h.ok("trash.purge", json!({"all": true}));
    assert!(!blob_stored(&db, &png));
}

#[test]
fn eviction_never_touches_pinned_or_just_created() {
    let (_d, db, mut h) = start();
    h.ok("settings.set", json!({"map": {"maxSessions": 2}}));
    let p1 = archive(&mut h, vec![user("p1")], "P1");
    let p2 = archive(&mut h, vec![user("p2")], "P2");
    h.ok("sessions.pin", json!({"id": p1, "pinned": true}));
    h.ok("sessions.pin", json!({"id": p2, "pinned": true}));
    // Count 3 > cap 2 but no candidate: the pinned ones and the new one stay.
    let n3 = archive(&mut h, vec![user("n3")], "N3");
    assert_eq!(session_count(&db), 3);
    assert!(trash_ids(&mut h).is_empty());
    // Next chat: n3 is the only candidate.
    let r = h.ok("history.append", json!({"entry": user("n4")}));
    assert_eq!(evicted(&r), set_of(&[&n3]));
    let n4 = bound(&mut h);
    h.ok("history.clear", json!({}));
    assert_eq!(list_ids(&mut h), vec![p2, p1, n4]);

    // maxSessions 1 with pinned sessions: the just-created one still survives.
    h.ok("settings.set", json!({"map": {"maxSessions": 1}}));
    let r = h.ok("history.append", json!({"entry": user("n5")}));
    let n5 = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert!(!evicted(&r).contains(&n5));
    assert!(list_ids(&mut h).contains(&n5));
    assert_eq!(session_count(&db), 3);
}

#[test]
fn eviction_spares_the_bound_session() {
    let (_d, db, mut h) = start();
    h.ok("settings.set", json!({"map": {"maxSessions": 2}}));
    let s1 = archive(&mut h, vec![user("oldest")], "S1");
    let s2 = archive(&mut h, vec![user("middle")], "S2");
    h.ok("sessions.load", json!({ "id": s1 }));
    assert_eq!(binding(&mut h), s1);
    // A snapshot: the oldest (s1) is the live chat's, so s2 goes instead.
    let r = h.ok("sessions.save", json!({"name": "S3"}));
    assert_eq!(r["created"], json!(true));
    assert_eq!(evicted(&r), set_of(&[&s2]), "{r}");
    let s3 = r["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(list_ids(&mut h), vec![s3, s1.clone()]);
    assert_eq!(binding(&mut h), s1);
    assert_eq!(session_count(&db), 2);
}

#[test]
fn max_sessions_defaults_to_keep_all_and_lowering_it_evicts_at_once() {
    let (_d, db, mut h) = start();
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(archive(&mut h, vec![user(&format!("u{i}"))], &format!("U{i}")));
    }
    assert_eq!(session_count(&db), 6);
    // the panel asks first: what would a cap of 3 move to the trash?
    let plan = h.ok("sessions.evictionPlan", json!({"cap": 3}));
    let planned: Vec<String> =
        plan["evict"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(planned, ids[..3].to_vec());
    assert_eq!(session_count(&db), 6, "a plan changes nothing");
    assert_eq!(h.ok("sessions.evictionPlan", json!({"cap": 0}))["evict"], json!([]));
    assert_eq!(h.err("sessions.evictionPlan", json!({"cap": -1})), "bad_request");

    let (r, ev) = changed(&mut h, "settings.set", json!({"map": {"maxSessions": 3}}));
    assert_eq!(evicted(&r), set_of(&ids[..3]), "{r}");
    assert_eq!(ev["areas"]["trash"], json!(true));
    assert_eq!(session_count(&db), 3);
    assert_eq!(trash_ids(&mut h), set_of(&ids[..3]));
    // an unrelated settings write evicts nothing and says nothing about it
    assert_eq!(h.ok("settings.set", json!({"map": {"theme": "dark"}})), json!({}));
    // setting the same cap again: nothing more to evict
    assert_eq!(h.ok("settings.set", json!({"map": {"maxSessions": 3}})), json!({"evicted": []}));
}

#[test]
fn invalid_stored_max_sessions_reads_as_keep_all() {
    for stored in ["\"3\"", "3.5", "-1", "true"] {
        let (_d, db, mut h) = start();
        {
            let c = rusqlite::Connection::open(&db).unwrap();
            c.busy_timeout(Duration::from_secs(10)).unwrap();
            c.execute(
                "INSERT OR REPLACE INTO settings (key, value, updated_at) VALUES ('maxSessions', ?1, 0)",
                [stored],
            )
            .unwrap();
        }
        replace(&mut h, vec![user("live")]);
        for i in 0..8 {
            let r = h.ok("sessions.save", json!({}));
            assert!(evicted(&r).is_empty(), "stored {stored}: save {i} evicted {r}");
        }
        assert_eq!(session_count(&db), 9, "stored {stored}");
    }
}

// ---------------------------------------------------------------------------------------------
// the window never loses what it trims

#[test]
fn a_loaded_session_keeps_every_entry_its_window_trims() {
    let (_d, db, mut h) = start();
    import(&mut h, vec![sess("s59", "Fifty-nine", 1_700_000_000_000, false, users("u", 0..59))]);
    assert_eq!(h.ok("sessions.load", json!({"id": "s59"})), json!({"length": 59, "offset": 0}));
    assert_eq!(binding(&mut h), "s59");
    for i in 0..5 {
        let r = h.ok("history.append", json!({"entry": user(&format!("n{i}"))}));
        assert_eq!(r["length"], json!(60), "{r}");
    }
    let mut want_live = names("u", 4..59);
    want_live.extend(names("n", 0..5));
    assert_eq!(live_texts(&mut h), want_live);
    assert_eq!(meta(&mut h)["offset"], json!(4));

    let mut want = names("u", 0..59);
    want.extend(names("n", 0..5));
    assert_eq!(body_texts(&mut h, "s59"), want);
    assert_eq!(db_body(&db, "s59").len(), 64);
    assert_eq!(row_of(&mut h, "s59")["entryCount"], json!(64));
    // "New chat" then load again: the window is the last 60, the rest is the kept prefix
    h.ok("history.clear", json!({}));
    assert_eq!(h.ok("sessions.load", json!({"id": "s59"})), json!({"length": 60, "offset": 4}));
    assert_eq!(live_texts(&mut h), want_live);
    let page = h.ok("sessions.get", json!({"id": "s59", "from": 0, "limit": 4}));
    assert_eq!(
        bare(&page["entries"]),
        json!([user("u0"), user("u1"), user("u2"), user("u3")]),
        "the earlier messages the panel offers"
    );
}

// ---------------------------------------------------------------------------------------------
// sessions.list: order

#[test]
fn list_orders_pinned_first_then_newest_with_insertion_order_ties() {
    let (_d, _db, mut h) = start();
    import(
        &mut h,
        vec![
            sess("a", "A", 1000, false, vec![user("a")]),
            sess("b", "B", 2000, true, vec![user("b")]),
            sess("c", "C", 3000, false, vec![user("c")]),
            sess("d", "D", 500, true, vec![user("d")]),
        ],
    );
    assert_eq!(list_ids(&mut h), vec!["b", "d", "c", "a"]);
    let e = archive(&mut h, vec![user("e")], "E");
    assert_eq!(list_ids(&mut h), vec!["b".into(), "d".into(), e.clone(), "c".into(), "a".into()]);

    // Equal createdAt: the later-inserted one counts as newer (separate imports fix the order).
    import(&mut h, vec![sess("x-first", "X", 5000, false, vec![user("x")])]);
    import(&mut h, vec![sess("y-second", "Y", 5000, false, vec![user("y")])]);
    import(&mut h, vec![sess("p-first", "P", 600, true, vec![user("p")])]);
    import(&mut h, vec![sess("q-second", "Q", 600, true, vec![user("q")])]);
    let want: Vec<String> = ["b", "q-second", "p-first", "d"]
        .iter()
        .map(|s| s.to_string())
        .chain([e.clone()])
        .chain(["y-second", "x-first", "c", "a"].iter().map(|s| s.to_string()))
        .collect();
    assert_eq!(list_ids(&mut h), want);

    // Pinning moves a row among the pinned ones by createdAt; unpinning moves it back.
    h.ok("sessions.pin", json!({"id": "a", "pinned": true}));
    let ids = list_ids(&mut h);
    assert_eq!(&ids[..5], &["b", "a", "q-second", "p-first", "d"]);
    h.ok("sessions.pin", json!({"id": "b", "pinned": false}));
    let ids = list_ids(&mut h);
    assert_eq!(ids, vec!["a", "q-second", "p-first", "d", e.as_str(), "y-second", "x-first", "c", "b"]);
    let rows = list(&mut h, None);
    assert_eq!(rows[0]["pinned"], json!(true));
    assert_eq!(rows[8]["pinned"], json!(false));
    assert_eq!(rows[8]["createdAt"], json!(2000));
    assert_eq!(rows[8]["name"], json!("B"));
}

// ---------------------------------------------------------------------------------------------
// sessions.list: search

#[test]
fn list_query_name_hits_content_hits_and_misses() {
    let (_d, _db, mut h) = start();
    import(
        &mut h,
        vec![
            sess("name-hit", "Quarterly Budget", 1000, false, vec![user("the budget is in the body too")]),
            sess("content-hit", "Other", 2000, false, vec![user("We talked about the BUDGET today.")]),
            sess("pinned-content", "Pinned", 500, true, vec![assistant("budget again")]),
            sess("miss", "Nothing", 3000, false, vec![user("nothing relevant")]),
        ],
    );
    // No query or a blank one: every session, no contentMatch property.
    for q in [None, Some(""), Some("   \n ")] {
        let rows = list(&mut h, q);
        assert_eq!(ids_of(&rows), vec!["pinned-content", "miss", "content-hit", "name-hit"], "{q:?}");
        for r in &rows {
            assert!(r.get("contentMatch").is_none(), "{q:?}: {r}");
            assert!(r.get("snippet").is_none(), "{q:?}: {r}");
        }
    }
    let rows = list(&mut h, Some("  BUDGET \n"));
    assert_eq!(ids_of(&rows), vec!["pinned-content", "content-hit", "name-hit"]);
    assert_eq!(rows[0]["contentMatch"], json!(true));
    assert_eq!(snip(&rows[0]), "budget again");
    assert_eq!(rows[1]["contentMatch"], json!(true));
    assert_eq!(snip(&rows[1]), "We talked about the BUDGET today.");
    assert_eq!(rows[2]["contentMatch"], json!(false), "name hit wins: {}", rows[2]);

    // A name-only hit.
    let rows = list(&mut h, Some("quarterly"));
    assert_eq!(ids_of(&rows), vec!["name-hit"]);
    assert_eq!(rows[0]["contentMatch"], json!(false));
    // No hit at all.
    assert!(list(&mut h, Some("zeppelin")).is_empty());
}

#[test]
fn snippet_collapses_whitespace_and_marks_cuts() {
    let (_d, _db, mut h) = start();
    let z = "z".repeat(100);
    let emoji_text = format!("{}{}NEEDLE{}tail", "b".repeat(60), "😀".repeat(45), "😀".repeat(100));
    let first_hit = format!("aaa Marker first{} Marker second{}", "c".repeat(200), "d".repeat(100));
    import(
        &mut h,
        vec![
            sess("ws", "ws", 1, false, vec![user(&format!("alpha \n\n  beta\tgamma WHITESPACE {z}"))]),
            sess("cp", "cp", 2, false, vec![user(&emoji_text)]),
            sess(
                "across",
                "across",
                3,
                false,
                vec![user("first entry text"), assistant(&format!("second BOUNDARY{z}"))],
            ),
            sess("first", "first", 4, false, vec![user(&first_hit)]),
        ],
    );
    let one = |h: &mut Host, q: &str| -> Value {
        let rows = list(h, Some(q));
        assert_eq!(rows.len(), 1, "{q}: {rows:?}");
        assert_eq!(rows[0]["contentMatch"], json!(true), "{q}");
        rows[0].clone()
    };
    // Nothing cut before (21 code points), the after part cut at 80 code points.
    let r = one(&mut h, "whitespace");
    assert_eq!(r["id"], json!("ws"));
    assert_eq!(r["snippet"], json!(format!("alpha beta gamma WHITESPACE {}…", "z".repeat(79))));
    // Code points, not UTF-16 units: 40 emoji before, 80 after.
    let r = one(&mut h, "needle");
    assert_eq!(r["snippet"], json!(format!("…{}NEEDLE{}…", "😀".repeat(40), "😀".repeat(80))));
    // Entries are joined with a line break, collapsed to a space; assistant text is searched.
    let r = one(&mut h, "boundary");
    assert_eq!(r["snippet"], json!(format!("first entry text second BOUNDARY{}…", "z".repeat(80))));
    // Around the first hit, in the original case.
    let r = one(&mut h, "marker");
    assert_eq!(r["snippet"], json!(format!("aaa Marker first{}…", "c".repeat(74))));
}

#[test]
fn search_covers_attach_text_and_array_parts() {
    let (_d, _db, mut h) = start();
    let attach = format!(
        "{PREFIX}\nURL: https://zoo.example/zebra\nTitle: Zoo\nMode: full\n---\n\nThe okapi lives here."
    );
    import(
        &mut h,
        vec![
            sess("attach", "Attach", 1, false, vec![user(&attach), assistant("ok")]),
            sess(
                "parts",
                "Parts",
                2,
                false,
                vec![json!({"role": "user", "content": [
                    text_part("caption one"),
                    image_part("https://example.com/i.png"),
                    text_part("giraffe stripes"),
                    {"type": "input_text", "text": "platypus note"},
                ]})],
            ),
        ],
    );
    assert_eq!(ids_of(&list(&mut h, Some("okapi"))), vec!["attach"]);
    assert_eq!(ids_of(&list(&mut h, Some("zoo.example/zebra"))), vec!["attach"]);
    let rows = list(&mut h, Some("giraffe"));
    assert_eq!(ids_of(&rows), vec!["parts"]);
    assert!(rows[0]["snippet"].as_str().unwrap().contains("caption one giraffe stripes"), "{}", rows[0]);
    assert_eq!(ids_of(&list(&mut h, Some("platypus"))), vec!["parts"]);
    // Image URLs are not text.
    assert!(list(&mut h, Some("i.png")).is_empty());
}

#[test]
fn search_finds_text_far_beyond_100k_chars() {
    let (_d, _db, mut h) = start();
    // Five entries of 49,999 chars + "\n" each: the needle starts at position 250,000.
    let mut entries: Vec<Value> = (0..5).map(|_| user(&"a".repeat(49_999))).collect();
    entries.push(assistant(&format!("Needle-XYZ{}", "b".repeat(200))));
    import(
        &mut h,
        vec![
            sess("long", "Long", 1, false, entries),
            sess("other", "Other", 2, false, vec![user(&"a".repeat(1000))]),
        ],
    );
    let rows = list(&mut h, Some("needle-xyz"));
    assert_eq!(ids_of(&rows), vec!["long"]);
    assert_eq!(rows[0]["contentMatch"], json!(true));
    assert_eq!(rows[0]["snippet"], json!(format!("…{} Needle-XYZ{}…", "a".repeat(39), "b".repeat(80))));

    // A single 260,000-char string entry with the needle at 250,000, appended through appendTo.
    let long = archive(&mut h, vec![user("short start")], "Appended");
    let text = format!("{}deepword{}", "c".repeat(250_000), "d".repeat(10_000));
    let r = h.ok("sessions.appendTo", json!({"id": long, "entry": user(&text)}));
    assert_eq!(r["target"], json!("session"));
    let rows = list(&mut h, Some("DEEPWORD"));
    assert_eq!(ids_of(&rows), vec![long]);
    assert_eq!(rows[0]["snippet"], json!(format!("…{}deepword{}…", "c".repeat(40), "d".repeat(80))));
}

#[test]
fn search_finds_one_and_two_character_cjk_queries() {
    let (_d, _db, mut h) = start();
    import(
        &mut h,
        vec![
            sess("zh", "Notes", 1, false, vec![user("这是一个中文文档的例子，我们测试搜索。")]),
            sess("ja", "Other", 2, false, vec![assistant("日本語のテキスト")]),
        ],
    );
    for q in ["中", "文档", "例", "搜索", "。"] {
        let rows = list(&mut h, Some(q));
        assert_eq!(ids_of(&rows), vec!["zh"], "query {q}");
        assert_eq!(rows[0]["contentMatch"], json!(true));
        assert!(rows[0]["snippet"].as_str().unwrap().contains(q), "{q}: {}", rows[0]);
    }
    assert_eq!(ids_of(&list(&mut h, Some("語"))), vec!["ja"]);
    assert_eq!(ids_of(&list(&mut h, Some("日本"))), vec!["ja"]);
    assert!(list(&mut h, Some("韩国")).is_empty());
    let rows = list(&mut h, Some("这是一个中文文档的例子，我们测试搜索。"));
    assert_eq!(snip(&rows[0]), "这是一个中文文档的例子，我们测试搜索。");
}

#[test]
fn search_is_case_insensitive_beyond_ascii() {
    let (_d, _db, mut h) = start();
    import(
        &mut h,
        vec![
            sess("upper", "Plain", 1, false, vec![user("ÄBC ÉCOLE start")]),
            sess("lower", "Plain too", 2, false, vec![user("äbc école end")]),
            sess("named", "ÖSTERREICH trip", 3, false, vec![user("nothing")]),
        ],
    );
    for q in ["äbc", "ÄBC", "Äbc"] {
        let rows = list(&mut h, Some(q));
        assert_eq!(ids_of(&rows), vec!["lower", "upper"], "query {q}");
        assert_eq!(snip(&rows[0]), "äbc école end");
        assert_eq!(snip(&rows[1]), "ÄBC ÉCOLE start");
    }
    assert_eq!(ids_of(&list(&mut h, Some("ÉCOLE"))), vec!["lower", "upper"]);
    let rows = list(&mut h, Some("österreich"));
    assert_eq!(ids_of(&rows), vec!["named"]);
    assert_eq!(rows[0]["contentMatch"], json!(false));
}

// ---------------------------------------------------------------------------------------------
// sessions.get

#[test]
fn get_returns_full_session_with_images_inline_or_ref() {
    let (_d, _db, mut h) = start();
    let png = png_bytes(3, 3, 5);
    let e = json!({"role": "user", "content": [text_part("pic"), image_part(&data_url("image/png", &png))],
                   "imagesSeen": true});
    let id = archive(&mut h, vec![e, assistant("nice")], "With image");
    h.ok("sessions.pin", json!({"id": id, "pinned": true}));
    let row = row_of(&mut h, &id);

    let g = h.ok("sessions.get", json!({ "id": id }));
    let obj = g.as_object().unwrap();
    for k in ["id", "name", "createdAt", "pinned", "entries", "from", "length"] {
        assert!(obj.contains_key(k), "sessions.get lacks {k}: {g}");
    }
    assert_eq!(g["id"], json!(id));
    assert_eq!(g["name"], json!("With image"));
    assert_eq!(g["createdAt"], row["createdAt"]);
    assert_eq!(g["pinned"], json!(true));
    assert_eq!((g["from"].clone(), g["length"].clone()), (json!(0), json!(2)));
    assert!(g.get("trashedAt").is_none(), "{g}");
    let canonical = format!("data:image/png;base64,{}", b64(&png));
    assert_eq!(g["entries"][0]["content"][1]["image_url"]["url"], json!(canonical));
    assert_eq!(g["entries"][0]["imagesSeen"], json!(true), "stamps kept");
    assert!(g["entries"][0]["entryId"].is_string(), "every stored entry has its id: {g}");
    assert_eq!(bare(&g["entries"][1]), assistant("nice"));
    let inline = h.ok("sessions.get", json!({"id": id, "images": "inline"}));
    assert_eq!(inline, g);

    let r = h.ok("sessions.get", json!({"id": id, "images": "ref"}));
    assert_eq!(r["entries"][0]["content"][1]["image_url"]["url"], json!(image_ref(&png)));
    assert_eq!(r["entries"][0]["content"][0], text_part("pic"));
    // a page of it
    let p = h.ok("sessions.get", json!({"id": id, "from": 1, "limit": 5}));
    assert_eq!(bare(&p["entries"]), json!([assistant("nice")]));
    assert_eq!((p["from"].clone(), p["length"].clone()), (json!(1), json!(2)));
    assert_eq!(h.ok("sessions.get", json!({"id": id, "from": 9}))["entries"], json!([]));
}

#[test]
fn get_unknown_is_not_found_and_bad_args_are_bad_request() {
    let (_d, _db, mut h) = start();
    let id = archive(&mut h, vec![user("x")], "X");
    assert_eq!(h.err("sessions.get", json!({"id": "nope"})), "not_found");
    assert_eq!(h.err("sessions.get", json!({})), "bad_request");
    assert_eq!(h.err("sessions.get", json!({"id": 5})), "bad_request");
    assert_eq!(h.err("sessions.get", json!({"id": id, "images": "bytes"})), "bad_request");
    assert_eq!(h.err("sessions.get", json!({"id": id, "from": -1})), "bad_request");
    assert_eq!(h.err("sessions.get", json!({"id": id, "limit": "2"})), "bad_request");
    assert_eq!(h.err("sessions.get", json!({"id": id, "clientRequestId": "r1"})), "bad_request");
    // a deleted session can still be read (the trash view shows it), and says where it is
    h.ok("sessions.delete", json!({ "id": id }));
    let g = h.ok("sessions.get", json!({ "id": id }));
    assert_eq!(g["trashReason"], json!("deleted"));
    assert!(g["trashedAt"].is_i64(), "{g}");
    h.ok("trash.purge", json!({ "id": id }));
    assert_eq!(h.err("sessions.get", json!({ "id": id })), "not_found");
}

// ---------------------------------------------------------------------------------------------
// sessions.load

#[test]
fn load_windows_the_body_by_the_trim_rule_and_binds() {
    let (_d, db, mut h) = start();
    let big: Vec<Value> = (0..100)
        .map(|i| {
            if i % 2 == 0 {
                user(&format!("b{i}"))
            } else {
                json!({"role": "assistant", "content": format!("b{i}"), "providerLabel": "X"})
            }
        })
        .collect();
    import(&mut h, vec![sess("big", "Big", 1, false, big.clone())]);
    replace(&mut h, vec![user("old live 1"), user("old live 2"), user("old live 3")]);
    let was = binding(&mut h);
    assert_eq!(h.ok("sessions.load", json!({"id": "big"})), json!({"length": 60, "offset": 40}));
    let g = h.ok("history.get", json!({}));
    assert_eq!(g["length"], json!(60));
    assert_eq!(g["offset"], json!(40));
    assert_eq!(bare(&g["entries"]), json!(big[40..]), "the newest 60, replaced not merged");
    assert_eq!(g["activeSessionId"], json!("big"));
    assert_eq!(db_binding(&db), "big");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM history_entries"), 60);
    // The body itself is untouched, and the chat that was live is still in its session.
    assert_eq!(body(&mut h, "big").len(), 100);
    assert_eq!(body_texts(&mut h, &was), vec!["old live 1", "old live 2", "old live 3"]);
    let r = h.ok("history.append", json!({"entry": user("after")}));
    assert_eq!(placed(&r), json!({"length": 60, "index": 59}));
    assert_eq!(binding(&mut h), "big");
    assert_eq!(body(&mut h, "big").len(), 101);
}

#[test]
fn load_of_empty_body_empties_live_but_binds() {
    let (_d, db, mut h) = start();
    import(&mut h, vec![sess("empty", "Empty", 1, false, vec![])]);
    replace(&mut h, vec![user("something")]);
    assert_eq!(h.ok("sessions.load", json!({"id": "empty"})), json!({"length": 0, "offset": 0}));
    let m = meta(&mut h);
    assert_eq!(m["length"], json!(0));
    assert_eq!(m["activeSessionId"], json!("empty"));
    assert_eq!(db_binding(&db), "empty");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM history_entries"), 0);
    // the next message goes to that session
    h.ok("history.append", json!({"entry": user("first")}));
    assert_eq!(body_texts(&mut h, "empty"), vec!["first"]);
}

#[test]
fn load_unknown_is_not_found_and_changes_nothing() {
    let (_d, db, mut h) = start();
    let s = archive(&mut h, vec![user("bound body")], "Bound");
    h.ok("sessions.load", json!({ "id": s }));
    h.ok("history.append", json!({"entry": user("live b")}));
    let rows = change_rows(&db);
    let sessions = session_count(&db);
    assert_eq!(h.err("sessions.load", json!({"id": "missing"})), "not_found");
    assert_eq!(h.err("sessions.load", json!({"id": "missing", "saveCurrent": true})), "not_found");
    assert_eq!(h.err("sessions.load", json!({})), "bad_request");
    assert_eq!(h.err("sessions.load", json!({"id": s, "saveCurrent": "yes"})), "bad_request");
    assert_eq!(live_texts(&mut h), vec!["bound body", "live b"]);
    assert_eq!(binding(&mut h), s);
    assert_eq!(change_rows(&db), rows);
    assert_eq!(session_count(&db), sessions);
    // a session in the trash cannot be loaded
    let t = archive(&mut h, vec![user("t")], "T");
    h.ok("sessions.delete", json!({ "id": t }));
    assert_eq!(h.err("sessions.load", json!({ "id": t })), "not_found");
}

// ---------------------------------------------------------------------------------------------
// saveCurrent: the live chat is kept already

#[test]
fn load_with_save_current_reports_the_live_chats_session_in_one_write() {
    let (_d, db, mut h) = start();
    let target = archive(&mut h, vec![user("target body")], "Target");
    replace(&mut h, vec![user("unsaved work"), assistant("reply")]);
    let kept = binding(&mut h);
    let rows = change_rows(&db);
    let (r, ev) = changed(&mut h, "sessions.load", json!({"id": target, "saveCurrent": true}));
    assert_eq!(change_rows(&db), rows + 1, "one write, one commit");
    assert_eq!(r["length"], json!(1));
    assert_eq!(r["saved"], json!({"id": kept, "created": false}), "{r}");
    assert_eq!(body_texts(&mut h, &kept), vec!["unsaved work", "reply"]);
    assert_eq!(row_of(&mut h, &kept)["name"], json!("unsaved work"));
    assert_eq!(live_texts(&mut h), vec!["target body"]);
    assert_eq!(binding(&mut h), target);
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["binding"], json!(true), "{ev}");

    // Without saveCurrent there is no `saved` field.
    h.ok("history.append", json!({"entry": assistant("b2")}));
    let r = h.ok("sessions.load", json!({ "id": kept }));
    assert_eq!(r, json!({"length": 2, "offset": 0}));
    assert_eq!(body_texts(&mut h, &target), vec!["target body", "b2"]);
    assert_eq!(session_count(&db), 2);
}

#[test]
fn load_with_save_current_and_empty_live_reports_saved_null() {
    let (_d, db, mut h) = start();
    let a = archive(&mut h, vec![user("a1")], "A");
    h.ok("history.clear", json!({}));
    let r = h.ok("sessions.load", json!({"id": a, "saveCurrent": true}));
    assert_eq!(r["length"], json!(1));
    assert!(r.get("saved").is_some(), "saved must be present: {r}");
    assert_eq!(r["saved"], Value::Null);
    assert_eq!(session_count(&db), 1);
    assert_eq!(binding(&mut h), a);
}

#[test]
fn clear_with_save_current_reports_then_empties() {
    let (_d, db, mut h) = start();
    replace(&mut h, vec![user("draft"), assistant("answer")]);
    let id = binding(&mut h);
    let rows = change_rows(&db);
    let r = h.ok("history.clear", json!({"saveCurrent": true}));
    assert_eq!(change_rows(&db), rows + 1, "one write, one commit");
    assert_eq!(r["saved"], json!({"id": id, "created": false}), "{r}");
    assert_eq!(body_texts(&mut h, &id), vec!["draft", "answer"]);
    assert_eq!(meta(&mut h)["length"], json!(0));
    assert_eq!(binding(&mut h), "");

    h.ok("sessions.load", json!({ "id": id }));
    h.ok("history.append", json!({"entry": user("more")}));
    let r = h.ok("history.clear", json!({"saveCurrent": true}));
    assert_eq!(r["saved"], json!({"id": id, "created": false}));
    assert_eq!(body_texts(&mut h, &id), vec!["draft", "answer", "more"]);
    assert_eq!(binding(&mut h), "");
    assert_eq!(session_count(&db), 1);

    // Empty live history: saved null, nothing created.
    let r = h.ok("history.clear", json!({"saveCurrent": true}));
    assert!(r.get("saved").is_some(), "{r}");
    assert_eq!(r["saved"], Value::Null);
    assert_eq!(session_count(&db), 1);

    // Without saveCurrent: no `saved`.
    replace(&mut h, vec![user("x")]);
    let r = h.ok("history.clear", json!({}));
    assert!(r.get("saved").is_none(), "{r}");
    assert_eq!(session_count(&db), 2);
}

// ---------------------------------------------------------------------------------------------
// sessions.rename / sessions.pin

#[test]
fn rename_trims_cuts_and_validates() {
    let (_d, db, mut h) = start();
    let id = archive(&mut h, vec![user("x")], "Original");
    assert_eq!(h.ok("sessions.rename", json!({"id": id, "name": "  New name \n"})), json!({}));
    assert_eq!(row_of(&mut h, &id)["name"], json!("New name"));
    assert_eq!(q_str(&db, &format!("SELECT name FROM sessions WHERE id = '{id}'")), "New name");
    assert_eq!(ids_of(&list(&mut h, Some("new NAME"))), vec![id.clone()]);
    assert!(list(&mut h, Some("original")).is_empty());

    h.ok("sessions.rename", json!({"id": id, "name": format!("{}😀", "r".repeat(79))}));
    assert_eq!(row_of(&mut h, &id)["name"], json!("r".repeat(79)));
    h.ok("sessions.rename", json!({"id": id, "name": "n".repeat(100)}));
    assert_eq!(row_of(&mut h, &id)["name"], json!("n".repeat(80)));

    for blank in ["", "   ", "\n\t "] {
        assert_eq!(h.err("sessions.rename", json!({"id": id, "name": blank})), "bad_request", "{blank:?}");
    }
    assert_eq!(h.err("sessions.rename", json!({"id": id})), "bad_request");
    assert_eq!(h.err("sessions.rename", json!({"id": id, "name": 3})), "bad_request");
    assert_eq!(row_of(&mut h, &id)["name"], json!("n".repeat(80)));
    assert_eq!(h.err("sessions.rename", json!({"id": "nope", "name": "x"})), "not_found");
    assert_eq!(session_count(&db), 1);
}

#[test]
fn pin_requires_boolean_and_existing_session() {
    let (_d, db, mut h) = start();
    let old = archive(&mut h, vec![user("old")], "Old");
    let new = archive(&mut h, vec![user("new")], "New");
    assert_eq!(list_ids(&mut h), vec![new.clone(), old.clone()]);
    assert_eq!(h.ok("sessions.pin", json!({"id": old, "pinned": true})), json!({}));
    assert_eq!(row_of(&mut h, &old)["pinned"], json!(true));
    assert_eq!(q_i64(&db, &format!("SELECT pinned FROM sessions WHERE id = '{old}'")), 1);
    assert_eq!(list_ids(&mut h), vec![old.clone(), new.clone()]);

    for bad in [json!("true"), json!(1), json!(0), json!(null), json!([true])] {
        assert_eq!(h.err("sessions.pin", json!({"id": old, "pinned": bad})), "bad_request", "{bad}");
    }
    assert_eq!(h.err("sessions.pin", json!({ "id": old })), "bad_request");
    assert_eq!(row_of(&mut h, &old)["pinned"], json!(true));
    assert_eq!(h.err("sessions.pin", json!({"id": "nope", "pinned": true})), "not_found");
    assert_eq!(h.err("sessions.pin", json!({"id": "nope", "pinned": false})), "not_found");

    h.ok("sessions.pin", json!({"id": old, "pinned": false}));
    assert_eq!(row_of(&mut h, &old)["pinned"], json!(false));
    assert_eq!(list_ids(&mut h), vec![new, old]);
}

// ---------------------------------------------------------------------------------------------
// sessions.delete / sessions.clearAll

#[test]
fn delete_moves_the_session_to_the_trash_and_empties_the_live_chat() {
    let (_d, db, mut h) = start();
    let keep = archive(&mut h, vec![user("keep")], "Keep");
    let id = archive(&mut h, vec![user("bye"), assistant("bye!")], "Bye");
    h.ok("sessions.load", json!({ "id": id }));
    assert_eq!(binding(&mut h), id);
    let (r, ev) = changed(&mut h, "sessions.delete", json!({ "id": id }));
    assert_eq!(r, json!({"deleted": true}));
    assert_eq!(binding(&mut h), "");
    assert_eq!(db_binding(&db), "");
    assert_eq!(ev["areas"]["trash"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");
    // its entries are kept, in the trash, out of the index and the drawer
    assert_eq!(q_i64(&db, &format!("SELECT count(*) FROM session_entries WHERE session_id = '{id}'")), 2);
    assert_eq!(q_i64(&db, &format!("SELECT count(*) FROM search_docs WHERE session_id = '{id}'")), 0);
    assert_eq!(list_ids(&mut h), vec![keep.clone()]);
    assert!(list(&mut h, Some("bye")).is_empty());
    // the live chat is gone with it: nothing deleted comes back through a later write
    assert!(live_texts(&mut h).is_empty());

    // Unknown, and already deleted, ids: {deleted: false}, not an error, no write.
    assert_eq!(unchanged(&mut h, "sessions.delete", json!({ "id": id })), json!({"deleted": false}));
    assert_eq!(unchanged(&mut h, "sessions.delete", json!({"id": "never"})), json!({"deleted": false}));

    // Deleting a session that is not the live chat's leaves the live chat alone.
    let other = archive(&mut h, vec![user("other")], "Other");
    h.ok("sessions.load", json!({ "id": keep }));
    assert_eq!(h.ok("sessions.delete", json!({ "id": other })), json!({"deleted": true}));
    assert_eq!(binding(&mut h), keep);
    assert_eq!(live_texts(&mut h), vec!["keep"]);
    // restoring brings the search data back
    h.ok("trash.restore", json!({ "id": id }));
    assert_eq!(ids_of(&list(&mut h, Some("bye"))), vec![id.clone()]);
}

#[test]
fn purging_frees_only_blobs_no_longer_referenced() {
    let (_d, db, mut h) = start();
    let only_body = png_bytes(2, 2, 10);
    let shared = png_bytes(2, 2, 20);
    let id = archive(
        &mut h,
        vec![
            image_entry("only in body", &data_url("image/png", &only_body)),
            image_entry("shared", &data_url("image/png", &shared)),
        ],
        "Images",
    );
    // The live chat references only `shared`.
    replace(&mut h, vec![image_entry("live", &image_ref(&shared))]);
    assert!(blob_stored(&db, &only_body) && blob_stored(&db, &shared));
    h.ok("sessions.delete", json!({ "id": id }));
    assert!(blob_stored(&db, &only_body), "the trash still uses it");
    h.ok("trash.purge", json!({ "id": id }));
    assert!(!blob_stored(&db, &only_body), "a blob only the purged body used is deleted");
    assert!(blob_stored(&db, &shared), "a blob the live history uses is kept");
    assert_eq!(h.err("images.get", json!({"ref": image_ref(&only_body)})), "not_found");
    let g = h.ok("images.get", json!({"ref": image_ref(&shared)}));
    assert_eq!(g["bytes"], json!(b64(&shared)));
}

#[test]
fn snapshots_keep_image_bytes_until_purged() {
    let (_d, db, mut h) = start();
    let png = png_bytes(4, 4, 42);
    replace(&mut h, vec![image_entry("keep my picture", &data_url("image/png", &png))]);
    let kept = binding(&mut h);
    let r = h.ok("sessions.save", json!({"name": "Pic"}));
    let id = r["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images"), 1, "stored once, not copied");
    h.ok("history.clear", json!({}));
    h.ok("sessions.delete", json!({ "id": kept }));
    h.ok("trash.purge", json!({"all": true}));
    assert!(blob_stored(&db, &png), "the snapshot still references the blob");
    let g = h.ok("images.get", json!({"ref": image_ref(&png)}));
    assert_eq!(g["mime"], json!("image/png"));
    assert_eq!(g["bytes"], json!(b64(&png)));
    let s = h.ok("sessions.get", json!({ "id": id }));
    assert_eq!(s["entries"][0]["content"][1]["image_url"]["url"], json!(data_url("image/png", &png)));

    h.ok("sessions.delete", json!({ "id": id }));
    assert!(blob_stored(&db, &png));
    h.ok("trash.purge", json!({ "id": id }));
    assert!(!blob_stored(&db, &png));
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images"), 0);
    assert_eq!(h.err("images.get", json!({"ref": image_ref(&png)})), "not_found");
}

#[test]
fn clear_all_moves_every_session_to_the_trash_including_pinned_and_unbinds() {
    let (_d, db, mut h) = start();
    let png = png_bytes(2, 2, 3);
    let a = archive(&mut h, vec![image_entry("a", &data_url("image/png", &png))], "A");
    let b = archive(&mut h, vec![user("b")], "B");
    archive(&mut h, vec![user("c")], "C");
    h.ok("sessions.pin", json!({"id": b, "pinned": true}));
    h.ok("sessions.load", json!({ "id": a }));
    h.ok("history.append", json!({"entry": user("live text")}));
    assert_eq!(binding(&mut h), a);
    let (r, ev) = changed(&mut h, "sessions.clearAll", json!({}));
    assert_eq!(r, json!({"deleted": 3}));
    assert!(list(&mut h, None).is_empty());
    assert_eq!(session_count(&db), 0);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM session_entries"), 4, "all kept, in the trash");
    assert_eq!(binding(&mut h), "");
    assert!(live_texts(&mut h).is_empty());
    assert!(blob_stored(&db, &png));
    assert_eq!(ev["areas"]["binding"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["index"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["trash"], json!(true), "{ev}");
    let items = h.ok("trash.list", json!({}))["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 3);
    assert!(items.as_array().unwrap().iter().all(|i| i["reason"] == "cleared"));

    let r = unchanged(&mut h, "sessions.clearAll", json!({}));
    assert_eq!(r, json!({"deleted": 0}));
    assert_eq!(h.ok("trash.purge", json!({"all": true})), json!({"purged": 3}));
    assert!(!blob_stored(&db, &png));
    assert_eq!(q_i64(&db, "SELECT count(*) FROM session_entries"), 0);
}

// ---------------------------------------------------------------------------------------------
// sessions.appendTo

#[test]
fn append_to_validates_id_and_entry() {
    let (_d, db, mut h) = start();
    let id = archive(&mut h, vec![user("x")], "X");
    let rows = change_rows(&db);
    assert_eq!(h.err("sessions.appendTo", json!({"id": "", "entry": user("y")})), "bad_request");
    assert_eq!(h.err("sessions.appendTo", json!({"entry": user("y")})), "bad_request");
    assert_eq!(h.err("sessions.appendTo", json!({"id": 5, "entry": user("y")})), "bad_request");
    assert_eq!(h.err("sessions.appendTo", json!({ "id": id })), "bad_request");
    for bad in [json!({"role": "system", "content": "y"}), json!({"role": "user", "content": 1}), json!("y")]
    {
        assert_eq!(h.err("sessions.appendTo", json!({"id": id, "entry": bad})), "bad_request", "{bad}");
        assert_eq!(h.err("sessions.appendTo", json!({"id": "gone", "entry": bad})), "bad_request", "{bad}");
    }
    assert_eq!(change_rows(&db), rows);
    assert_eq!(body_texts(&mut h, &id), vec!["x"]);
    assert!(live_texts(&mut h).is_empty());
}

/// storage-model §9 "Turns": a reply gets `videoSrc` from the newest entry of where it lands.
#[test]
fn copy_video_src_takes_the_newest_of_where_the_entry_lands() {
    let (_d, _db, mut h) = start();
    let yt = |n: u32| json!({"platform": "youtube", "url": format!("https://www.youtube.com/watch?v=v{n}"), "tabId": n});
    let with = |mut e: Value, v: Value| {
        e["videoSrc"] = v;
        e
    };
    // a saved session whose newest videoSrc is v2 (a text mentioning "videoSrc" is not one)
    import(
        &mut h,
        vec![sess(
            "talk",
            "Talk",
            1,
            false,
            vec![with(user("a"), yt(1)), with(assistant("b"), yt(2)), user("what is \"videoSrc\"?")],
        )],
    );
    replace(&mut h, vec![with(user("live"), yt(7)), assistant("r"), with(user("q"), json!("not an object"))]);
    let live = |h: &mut Host| h.ok("history.get", json!({}))["entries"].as_array().unwrap().clone();

    // history.append: from the live history; the flag's absence copies nothing
    h.ok("history.append", json!({"entry": assistant("plain")}));
    assert!(live(&mut h)[3].get("videoSrc").is_none());
    let r = h.ok("history.append", json!({"entry": assistant("copied"), "copyVideoSrc": true}));
    assert_eq!(r["index"], json!(4));
    assert_eq!(live(&mut h)[4]["videoSrc"], yt(7));
    // an entry's own videoSrc is kept
    h.ok("history.append", json!({"entry": with(assistant("own"), yt(9)), "copyVideoSrc": true}));
    assert_eq!(live(&mut h)[5]["videoSrc"], yt(9));
    h.ok("history.append", json!({"entry": assistant("newest"), "copyVideoSrc": true}));
    assert_eq!(live(&mut h)[6]["videoSrc"], yt(9), "the newest carrier wins");

    // sessions.appendTo to the session: from its body, not from the live history
    let r =
        h.ok("sessions.appendTo", json!({"id": "talk", "entry": assistant("late"), "copyVideoSrc": true}));
    assert_eq!(r["target"], json!("session"));
    assert_eq!(body(&mut h, "talk")[3]["videoSrc"], yt(2));
    // landing live (the id is gone): from the live history
    let r =
        h.ok("sessions.appendTo", json!({"id": "gone", "entry": assistant("lost"), "copyVideoSrc": true}));
    assert_eq!(r["target"], json!("live"));
    assert_eq!(live(&mut h).last().unwrap()["videoSrc"], yt(9));
    // none to copy: nothing added
    replace(&mut h, vec![user("fresh")]);
    h.ok("history.append", json!({"entry": assistant("none"), "copyVideoSrc": true}));
    assert!(live(&mut h)[1].get("videoSrc").is_none());
    assert_eq!(
        h.err("history.append", json!({"entry": assistant("x"), "copyVideoSrc": "yes"})),
        "bad_request"
    );
}

#[test]
fn append_to_existing_unbound_session_extends_body_without_trim() {
    let (_d, db, mut h) = start();
    import(&mut h, vec![sess("sixty", "Sixty", 1, false, users("s", 0..60))]);
    replace(&mut h, vec![user("live only")]);
    let (r, ev) =
        changed(&mut h, "sessions.appendTo", json!({"id": "sixty", "entry": assistant("late reply kiwi")}));
    assert_eq!(
        without(&r, "entryId"),
        json!({"target": "session", "sessionId": "sixty", "length": 61, "index": 60})
    );
    let b = body(&mut h, "sixty");
    assert_eq!(b.len(), 61, "bodies are never trimmed");
    assert_eq!(b[60], assistant("late reply kiwi"));
    assert_eq!(b[0], user("s0"));
    assert_eq!(db_body(&db, "sixty").len(), 61);
    assert_eq!(live_texts(&mut h), vec!["live only"]);
    assert_ne!(binding(&mut h), "sixty");
    // Searchable afterwards.
    let rows = list(&mut h, Some("KIWI"));
    assert_eq!(ids_of(&rows), vec!["sixty"]);
    assert_eq!(rows[0]["contentMatch"], json!(true));
    assert_eq!(event_ids(&ev), set_of(&["sixty"]), "{ev}");
    assert!(ev["areas"].get("history").is_none(), "live history untouched: {ev}");

    // Images in the appended entry become blobs referenced by the body.
    let png = png_bytes(2, 2, 66);
    let r = h.ok(
        "sessions.appendTo",
        json!({"id": "sixty", "entry": image_entry("pic", &data_url("image/png", &png))}),
    );
    assert_eq!(r["length"], json!(62));
    assert_eq!(r["index"], json!(61));
    assert!(blob_stored(&db, &png));
    assert_eq!(body(&mut h, "sixty")[61]["content"][1]["image_url"]["url"], json!(image_ref(&png)));
}

#[test]
fn append_to_an_unknown_session_lands_in_the_live_history() {
    let (_d, db, mut h) = start();
    replace(&mut h, users("m", 0..60));
    let (r, ev) =
        changed(&mut h, "sessions.appendTo", json!({"id": "never-was", "entry": assistant("finished turn")}));
    assert_eq!(r["target"], json!("live"), "{r}");
    assert_eq!(r["length"], json!(60), "trimmed like history.append: {r}");
    assert_eq!(r["index"], json!(59));
    let t = live_texts(&mut h);
    assert_eq!(t.last().unwrap(), "finished turn");
    assert_eq!(t[0], "m1");
    assert_eq!(session_count(&db), 1);
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");

    // with an empty live history it starts a kept chat
    h.ok("history.clear", json!({}));
    let r = h.ok("sessions.appendTo", json!({"id": "gone-too", "entry": user("also lands")}));
    assert_eq!(r["target"], json!("live"));
    assert_eq!(r["kept"]["created"], json!(true), "{r}");
    assert_eq!(live_texts(&mut h), vec!["also lands"]);
}

#[test]
fn append_to_a_deleted_session_joins_it_in_the_trash() {
    let (_d, db, mut h) = start();
    let gone = archive(&mut h, vec![user("gone body")], "Gone");
    h.ok("sessions.delete", json!({ "id": gone }));
    replace(&mut h, vec![user("live")]);
    let (r, ev) = changed(&mut h, "sessions.appendTo", json!({"id": gone, "entry": assistant("late")}));
    assert!(r["entryId"].is_string(), "{r}");
    assert_eq!(
        without(&r, "entryId"),
        json!({"target": "trash", "sessionId": gone, "length": 2, "index": 1})
    );
    assert_eq!(body_texts(&mut h, &gone), vec!["gone body", "late"]);
    assert_eq!(live_texts(&mut h), vec!["live"]);
    assert_eq!(ev["areas"]["trash"], json!(true), "{ev}");
    assert!(ev["areas"].get("history").is_none(), "{ev}");
    assert_eq!(session_count(&db), 1);
    assert!(list(&mut h, Some("late")).is_empty(), "the trash is not searched");
}

#[test]
fn append_to_bound_session_goes_to_live_history() {
    let (_d, _db, mut h) = start();
    let id = archive(&mut h, vec![user("q1"), assistant("a1")], "Bound");
    h.ok("sessions.load", json!({ "id": id }));
    h.ok("history.append", json!({"entry": user("q2")}));
    let r = h.ok("sessions.appendTo", json!({"id": id, "entry": assistant("a2")}));
    assert_eq!(r["target"], json!("live"), "{r}");
    assert_eq!(r["length"], json!(4));
    assert_eq!(r["index"], json!(3));
    assert_eq!(live_texts(&mut h), vec!["q1", "a1", "q2", "a2"]);
    assert_eq!(body_texts(&mut h, &id), vec!["q1", "a1", "q2", "a2"], "the live chat is its session");
}

// ---------------------------------------------------------------------------------------------
// sessions.export

fn md_lines(text: &str) -> Vec<String> {
    text.lines().map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()).collect()
}

fn followed_by(lines: &[String], a: &str, b: &str) -> bool {
    lines.windows(2).any(|w| w[0] == a && w[1] == b)
}

#[test]
fn export_markdown_of_one_session() {
    let (_d, _db, mut h) = start();
    let a = png_bytes(2, 2, 1);
    let b = png_bytes(2, 2, 2);
    let name = "Hello, World: 测试 Report!";
    let entries = vec![
        user("What is up?"),
        json!({"role": "assistant", "content": "All good", "interrupted": true}),
        image_entry("look at this", &data_url("image/png", &a)),
        json!({"role": "user", "content": [image_part(&data_url("image/png", &b))]}),
        user(&format!(
            "{PREFIX}\nURL: https://example.com/page\nTitle: Example\nMode: full\n---\n\nPage body"
        )),
        assistant("done reading"),
        user(&format!("{LEGACY}\nTitle: No url here\nMode: full\n---\n\nold body")),
    ];
    let id = archive(&mut h, entries, name);
    let d0 = local_date();
    let r = h.ok("sessions.export", json!({"ids": [id], "format": "markdown"}));
    let d1 = local_date();
    let filename = r["filename"].as_str().unwrap();
    assert!(
        filename == format!("keepsake-Hello-World-测试-Report-{d0}.md")
            || filename == format!("keepsake-Hello-World-测试-Report-{d1}.md"),
        "filename {filename}"
    );
    let text = r["text"].as_str().unwrap();
    let lines = md_lines(text);
    assert_eq!(lines[0], format!("# {name}"), "{text}");
    assert!(
        lines[1..3].iter().any(|l| l.contains(&format!("{d0}T")) || l.contains(&format!("{d1}T"))),
        "export time line (ISO 8601) missing: {text}"
    );
    assert!(followed_by(&lines, "## User", "What is up?"), "{text}");
    assert!(followed_by(&lines, "## Assistant", "All good"), "{text}");
    assert!(followed_by(&lines, "All good", "_(interrupted)_"), "{text}");
    assert_eq!(lines.iter().filter(|l| *l == "_(interrupted)_").count(), 1, "{text}");
    assert!(followed_by(&lines, "look at this", "[image]"), "{text}");
    assert!(followed_by(&lines, "## User", "[image]"), "image-only turn shows just [image]: {text}");
    assert_eq!(lines.iter().filter(|l| *l == "[image]").count(), 2, "{text}");
    assert!(followed_by(&lines, "---", "Attached page: https://example.com/page"), "{text}");
    assert!(followed_by(&lines, "---", "Attached page"), "attach without URL line: {text}");
    assert!(followed_by(&lines, "## Assistant", "done reading"), "{text}");
    let pos =
        |needle: &str| lines.iter().position(|l| l == needle).unwrap_or_else(|| panic!("{needle}: {text}"));
    let order = [
        pos("What is up?"),
        pos("All good"),
        pos("look at this"),
        pos("Attached page: https://example.com/page"),
        pos("done reading"),
        pos("Attached page"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "entries out of order: {text}");
    assert!(!text.contains("base64") && !text.contains("keepsake-image:"), "no image data: {text}");
}

#[test]
fn export_filename_slug_rules() {
    let (_d, _db, mut h) = start();
    let id = archive(&mut h, vec![user("x")], "placeholder");
    let xs = "x".repeat(50);
    let cases = [
        ("Hello, World: 测试 Report!", "Hello-World-测试-Report"),
        ("!!!", "session"),
        ("😀🎉", "session"),
        ("日本語テキスト", "日本語"),
        ("--Émile's   café--", "mile-s-caf"),
        ("😀 smile", "smile"),
        ("a/b\\c", "a-b-c"),
        (xs.as_str(), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        ("Résumé 2026", "R-sum-2026"),
        ("中文名字", "中文名字"),
    ];
    for (name, slug) in cases {
        h.ok("sessions.rename", json!({"id": id, "name": name}));
        let d0 = local_date();
        let r = h.ok("sessions.export", json!({"ids": [id], "format": "markdown"}));
        let j = h.ok("sessions.export", json!({"ids": [id], "format": "json"}));
        let d1 = local_date();
        let f = r["filename"].as_str().unwrap();
        assert!(
            f == format!("keepsake-{slug}-{d0}.md") || f == format!("keepsake-{slug}-{d1}.md"),
            "name {name:?}: filename {f}, want slug {slug}"
        );
        let f = j["filename"].as_str().unwrap();
        assert!(
            f == format!("keepsake-{slug}-{d0}.json") || f == format!("keepsake-{slug}-{d1}.json"),
            "name {name:?}: json filename {f}, want slug {slug}"
        );
    }
}

#[test]
fn export_json_is_lossless_with_each_blob_once() {
    let (_d, db, mut h) = start();
    let a = png_bytes(2, 2, 11);
    let b = png_bytes(3, 1, 12);
    let s1_entries = vec![
        image_entry("first", &data_url("image/png", &a)),
        json!({"role": "assistant", "content": "reply", "providerKey": {"name": "p", "model": "m"}}),
        json!({"role": "user", "content": [image_part(&data_url("image/png", &a)), image_part(&data_url("image/png", &b))]}),
    ];
    let s1 = archive(&mut h, s1_entries, "Sess One");
    let s2 = archive(&mut h, vec![image_entry("again", &data_url("image/png", &a))], "Sess Two");
    h.ok("sessions.pin", json!({"id": s2, "pinned": true}));
    import(&mut h, vec![sess("plain", "Plain", 1234, false, vec![user("no images")])]);
    let body1 = body(&mut h, &s1);
    let body2 = body(&mut h, &s2);
    let rows = list(&mut h, None);

    let d0 = local_date();
    let r = h.ok("sessions.export", json!({"ids": [s1, s2], "format": "json"}));
    let d1 = local_date();
    let f = r["filename"].as_str().unwrap();
    assert!(
        f == format!("keepsake-sessions-{d0}.json") || f == format!("keepsake-sessions-{d1}.json"),
        "{f}"
    );
    let doc: Value = serde_json::from_str(r["text"].as_str().unwrap()).expect("export text is JSON");
    assert_eq!(doc["format"], json!("keepsake.sessions"));
    assert_eq!(doc["version"], json!(2));
    let exported_at = doc["exportedAt"].as_str().expect("exportedAt string");
    assert!(exported_at.starts_with(&d0) || exported_at.starts_with(&d1), "{exported_at}");
    let sessions = doc["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    for (id, want_body) in [(&s1, &body1), (&s2, &body2)] {
        let s = sessions.iter().find(|s| s["id"] == json!(id)).expect("exported session");
        let row = rows.iter().find(|r| r["id"] == json!(id)).unwrap();
        assert_eq!(s["name"], row["name"]);
        assert_eq!(s["createdAt"], row["createdAt"]);
        assert_eq!(s["pinned"], row["pinned"]);
        assert_eq!(bare(&s["entries"]), json!(want_body), "entries exactly as stored (references)");
        assert!(s["entries"].as_array().unwrap().iter().all(|e| e["entryId"].is_string()), "ids kept: {s}");
    }
    let s1_doc = sessions.iter().find(|s| s["id"] == json!(s1)).unwrap();
    assert_eq!(s1_doc["entries"][0]["content"][1]["image_url"]["url"], json!(image_ref(&a)));
    assert_eq!(s1_doc["entries"][1]["providerKey"], json!({"name": "p", "model": "m"}));
    let images = doc["images"].as_object().unwrap();
    let keys: BTreeSet<String> = images.keys().cloned().collect();
    assert_eq!(keys, set_of(&[&sha256_hex(&a), &sha256_hex(&b)]));
    assert_eq!(images[&sha256_hex(&a)], json!({"mime": "image/png", "data": b64(&a)}));
    assert_eq!(images[&sha256_hex(&b)], json!({"mime": "image/png", "data": b64(&b)}));

    // One session: its own slug; a session without images has an empty images map.
    let one = h.ok("sessions.export", json!({"ids": ["plain"], "format": "json"}));
    let f = one["filename"].as_str().unwrap();
    assert!(f == format!("keepsake-Plain-{d0}.json") || f == format!("keepsake-Plain-{d1}.json"), "{f}");
    let one_doc: Value = serde_json::from_str(one["text"].as_str().unwrap()).unwrap();
    assert_eq!(bare(&one_doc["sessions"][0]["entries"]), json!([user("no images")]));
    assert_eq!(one_doc["sessions"][0]["createdAt"], json!(1234));
    assert_eq!(one_doc["images"].as_object().map(|m| m.len()), Some(0));

    // Round trip: while the sessions are in the trash their ids stay taken and an import skips
    // them; once purged, the export brings them back whole, entry ids included.
    let ids_before = h.ok("sessions.get", json!({"id": s1}))["entries"].clone();
    h.ok("history.clear", json!({}));
    h.ok("sessions.clearAll", json!({}));
    let skipped = h.ok("storage.import", json!({ "document": doc }));
    assert_eq!(
        (skipped["sessionsImported"].clone(), skipped["sessionsSkipped"].clone()),
        (json!(0), json!(2))
    );
    h.ok("trash.purge", json!({"all": true}));
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images"), 0);
    let imp = h.ok("storage.import", json!({ "document": doc }));
    assert_eq!(imp["sessionsImported"], json!(2), "{imp}");
    assert_eq!(imp["imagesStored"], json!(2), "{imp}");
    assert_eq!(body(&mut h, &s1), body1);
    assert_eq!(body(&mut h, &s2), body2);
    let ids_after = h.ok("sessions.get", json!({"id": s1}))["entries"].clone();
    let eid = |v: &Value| v.as_array().unwrap().iter().map(|e| e["entryId"].clone()).collect::<Vec<_>>();
    assert_eq!(eid(&ids_after), eid(&ids_before));
    let g = h.ok("sessions.get", json!({"id": s1}));
    assert_eq!(g["entries"][2]["content"][1]["image_url"]["url"], json!(data_url("image/png", &b)));
}

#[test]
fn export_rejects_bad_requests_and_unknown_ids() {
    let (_d, _db, mut h) = start();
    let a = archive(&mut h, vec![user("a")], "A");
    let b = archive(&mut h, vec![user("b")], "B");
    assert_eq!(h.err("sessions.export", json!({"ids": [a, b], "format": "markdown"})), "bad_request");
    assert_eq!(h.err("sessions.export", json!({"ids": [], "format": "json"})), "bad_request");
    assert_eq!(h.err("sessions.export", json!({"ids": [a], "format": "pdf"})), "bad_request");
    assert_eq!(h.err("sessions.export", json!({ "ids": [a] })), "bad_request");
    assert_eq!(h.err("sessions.export", json!({"ids": a, "format": "json"})), "bad_request");
    assert_eq!(h.err("sessions.export", json!({"ids": ["nope"], "format": "markdown"})), "not_found");
    assert_eq!(h.err("sessions.export", json!({"ids": ["nope"], "format": "json"})), "not_found");
    assert_eq!(h.err("sessions.export", json!({"ids": [a, "nope"], "format": "json"})), "not_found");
}

// ---------------------------------------------------------------------------------------------
// change events

#[test]
fn session_writes_emit_changed_events_with_session_areas() {
    let (_d, _db, mut h) = start();
    h.ok("settings.set", json!({"map": {"maxSessions": 2}}));

    // the first entry of a chat creates its session: the event names it
    let (r, ev) = changed(&mut h, "history.append", json!({"entry": user("first")}));
    let one = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(event_ids(&ev), set_of(&[&one]), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["index"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["binding"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");

    let (_, ev) = changed(&mut h, "sessions.rename", json!({"id": one, "name": "Uno"}));
    assert!(event_ids(&ev).contains(&one), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["index"], json!(true), "{ev}");

    let (_, ev) = changed(&mut h, "sessions.pin", json!({"id": one, "pinned": true}));
    assert!(event_ids(&ev).contains(&one), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["index"], json!(true), "{ev}");
    h.ok("sessions.pin", json!({"id": one, "pinned": false}));

    // every later write to the live chat names its session too
    let (_, ev) = changed(&mut h, "history.append", json!({"entry": user("second")}));
    assert_eq!(event_ids(&ev), set_of(&[&one]), "{ev}");
    assert!(ev["areas"].get("binding").is_none(), "{ev}");

    // a snapshot: a new session, the binding unchanged
    let (r, ev) = changed(&mut h, "sessions.save", json!({"name": "Two"}));
    let two = r["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(event_ids(&ev), set_of(&[&two]), "{ev}");
    assert!(ev["areas"].get("binding").is_none(), "save never changes the binding: {ev}");
    assert!(ev["areas"].get("history").is_none(), "{ev}");

    // New chat, then a third chat: `one` is the oldest and no longer live: it is evicted
    let (_, ev) = changed(&mut h, "history.clear", json!({}));
    assert_eq!(ev["areas"]["binding"], json!(true), "{ev}");
    let (r, ev) = changed(&mut h, "history.append", json!({"entry": user("third")}));
    let three = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(evicted(&r), set_of(&[&one]));
    assert!(event_ids(&ev).contains(&three) && event_ids(&ev).contains(&one), "{ev}");
    assert_eq!(ev["areas"]["trash"], json!(true), "{ev}");

    let (_, ev) = changed(&mut h, "sessions.load", json!({ "id": two }));
    assert_eq!(ev["areas"]["binding"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");

    let (_, ev) = changed(&mut h, "sessions.appendTo", json!({"id": three, "entry": assistant("late")}));
    assert_eq!(event_ids(&ev), set_of(&[&three]), "{ev}");
    assert!(ev["areas"].get("history").is_none(), "{ev}");

    let (_, ev) = changed(&mut h, "sessions.appendTo", json!({"id": two, "entry": assistant("bound")}));
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");
    assert_eq!(event_ids(&ev), set_of(&[&two]), "{ev}");

    let (_, ev) = changed(&mut h, "sessions.delete", json!({ "id": two }));
    assert!(event_ids(&ev).contains(&two), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["index"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["binding"], json!(true), "the bound session was deleted: {ev}");

    let (_, ev) = changed(&mut h, "sessions.delete", json!({ "id": three }));
    assert!(ev["areas"].get("binding").is_none(), "unbound delete: {ev}");

    let (_, ev) = changed(&mut h, "trash.restore", json!({ "id": three }));
    assert_eq!(event_ids(&ev), set_of(&[&three]), "{ev}");
    assert_eq!(ev["areas"]["trash"], json!(true), "{ev}");
    let (_, ev) = changed(&mut h, "trash.purge", json!({"all": true}));
    assert_eq!(ev["areas"]["trash"], json!(true), "{ev}");
    assert!(ev["areas"].get("sessions").is_none(), "purging touches only the trash: {ev}");
}

#[test]
fn session_write_events_carry_client_request_id_and_replays_apply_once() {
    let (_d, db, mut h) = start();
    replace(&mut h, vec![user("crid")]);
    let r1 = h.ok("sessions.save", json!({"name": "Once", "clientRequestId": "save-1"}));
    let ev = h.wait_event(EVENT_WAIT, |e| e["clientRequestId"] == json!("save-1"));
    assert!(ev.is_some(), "event with clientRequestId");
    let r2 = unchanged(&mut h, "sessions.save", json!({"name": "Once", "clientRequestId": "save-1"}));
    assert_eq!(r1, r2);
    assert_eq!(session_count(&db), 2, "the live chat and one snapshot");
    let r = h.call("sessions.delete", json!({"id": r1["session"]["id"], "clientRequestId": "save-1"}));
    assert_eq!(r["error"]["code"], json!("conflict"), "{r}");
    assert_eq!(session_count(&db), 2);
}

/// `sessions.list` reuses the drawer it read last while the database is unchanged; every kind
/// of change must show in the next list: this host's writes, another host's commits, and a
/// write by another tool straight to the file.
#[test]
fn lists_and_searches_see_every_change_made_since_the_last_list() {
    let (_dir, db, mut a) = start();
    let first = archive(&mut a, users("alpha text ", 0..2), "First");
    let names = |h: &mut Host, args: Value| -> Vec<String> {
        let rows = h.list(args);
        rows.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(&mut a, json!({})), ["First"]);
    assert_eq!(names(&mut a, json!({"query": "alpha"})), ["First"]);

    // this host's own writes
    a.ok("sessions.rename", json!({"id": first, "name": "Renamed"}));
    assert_eq!(names(&mut a, json!({})), ["Renamed"]);
    assert_eq!(names(&mut a, json!({"query": "renamed"})), ["Renamed"]);
    let second = archive(&mut a, users("beta text ", 0..2), "Second");
    assert_eq!(names(&mut a, json!({"query": "text"})), ["Second", "Renamed"]);

    // another host's commits
    let mut b = Host::spawn(&db);
    b.ok("sessions.pin", json!({"id": first, "pinned": true}));
    let rows = a.list(json!({}));
    assert_eq!(rows[0]["name"], json!("Renamed"), "pinned first: {rows}");
    assert_eq!(rows[0]["pinned"], json!(true), "{rows}");
    b.ok("sessions.appendTo", json!({"id": second, "entry": user("gamma appended")}));
    let hits = a.list(json!({"query": "gamma"}));
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    assert_eq!(hits[0]["entryCount"], json!(3), "{hits}");
    b.ok("sessions.delete", json!({"id": first}));
    assert_eq!(names(&mut a, json!({})), ["Second"]);
    assert_eq!(names(&mut a, json!({"query": "alpha"})), Vec::<String>::new());

    // another tool writing the file
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE sessions SET name = 'From sqlite3', name_lower = 'from sqlite3' WHERE id = ?1",
            [&second],
        )
        .unwrap();
    assert_eq!(names(&mut a, json!({})), ["From sqlite3"]);
    assert_eq!(names(&mut a, json!({"query": "sqlite3"})), ["From sqlite3"]);
    b.close();
    a.close();
}
