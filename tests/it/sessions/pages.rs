//! Pages of `sessions.list` (storage-model §5.3; PROTOCOL.md "sessions"): `{query?, limit?,
//! cursor?}` → `{rows, total, cursor}`, through the real binary over pipes on a temp database.
use crate::harness::*;

use serde_json::{json, Value};

fn start() -> (tempfile::TempDir, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.meta", json!({}));
    (dir, h)
}

fn sess(id: &str, name: &str, created_at: i64, pinned: bool, text: &str) -> Value {
    json!({"id": id, "name": name, "createdAt": created_at, "pinned": pinned, "entries": [user(text)]})
}

/// Import sessions through a keepsake.sessions export document (import never evicts).
fn import(h: &mut Host, sessions: Vec<Value>) {
    let n = sessions.len();
    let doc = json!({"format": "keepsake.sessions", "version": 1,
                     "exportedAt": "2026-01-01T00:00:00+00:00", "sessions": sessions, "images": {}});
    assert_eq!(h.ok("storage.import", json!({ "document": doc }))["sessionsImported"], json!(n));
}

fn ids(page: &Value) -> Vec<String> {
    page["rows"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// s00 … s19, oldest first; pairs share a createdAt (insertion order breaks the tie).
fn twenty(h: &mut Host) {
    let all = (0..20)
        .map(|i| sess(&format!("s{i:02}"), &format!("chat {i}"), 1000 + i / 2, false, "text"))
        .collect();
    import(h, all);
}

#[test]
fn pages_cover_the_list_once_with_writes_between_pages() {
    let (_d, mut h) = start();
    twenty(&mut h);
    let p1 = h.ok("sessions.list", json!({"limit": 6}));
    assert_eq!(ids(&p1), names(&["s19", "s18", "s17", "s16", "s15", "s14"]), "{p1}");
    assert_eq!(p1["total"], json!(20));
    assert!(p1["cursor"].is_string(), "{p1}");

    // between pages: the last row sent is deleted, a row not yet sent is deleted, one not yet
    // sent is pinned (it moves above the cursor), one sent is pinned, a newer chat arrives, one
    // not yet sent is renamed (it stays put)
    for id in ["s14", "s12"] {
        assert_eq!(h.ok("sessions.delete", json!({"id": id}))["deleted"], json!(true));
    }
    h.ok("sessions.pin", json!({"id": "s10", "pinned": true}));
    h.ok("sessions.pin", json!({"id": "s17", "pinned": true}));
    h.ok("sessions.rename", json!({"id": "s09", "name": "renamed"}));
    import(&mut h, vec![sess("newest", "newest", 9000, false, "text")]);

    let p2 = h.ok("sessions.list", json!({"limit": 6, "cursor": p1["cursor"]}));
    assert_eq!(ids(&p2), names(&["s13", "s11", "s09", "s08", "s07", "s06"]), "{p2}");
    assert_eq!(p2["total"], json!(19), "20 − 2 deleted + 1 new");
    assert_eq!(p2["rows"][2]["name"], json!("renamed"));

    h.ok("sessions.pin", json!({"id": "s17", "pinned": false}));
    let p3 = h.ok("sessions.list", json!({"limit": 6, "cursor": p2["cursor"]}));
    assert_eq!(ids(&p3), names(&["s05", "s04", "s03", "s02", "s01", "s00"]), "{p3}");
    assert_eq!(p3["cursor"], Value::Null, "the last page: {p3}");

    // the whole list, page by page, is the list in one page
    let whole = h.ok("sessions.list", json!({"limit": 1000}));
    assert_eq!(whole["cursor"], Value::Null);
    assert_eq!(whole["total"], json!(19));
    for limit in [1, 2, 5, 18, 19] {
        let mut got = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let p = h.ok("sessions.list", json!({"limit": limit, "cursor": cursor}));
            assert_eq!(p["total"], json!(19));
            got.extend(ids(&p));
            cursor = p["cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        assert_eq!(got, ids(&whole), "limit {limit}");
    }
    assert_eq!(ids(&whole)[..2], names(&["s10", "newest"]), "pinned first, then newest");
}

#[test]
fn an_empty_drawer_is_one_empty_page_and_the_default_page_is_fifty() {
    let (_d, mut h) = start();
    assert_eq!(h.ok("sessions.list", json!({})), json!({"rows": [], "total": 0, "cursor": null}));
    let many = (0..60).map(|i| sess(&format!("m{i:02}"), "m", 1000 + i, false, "text")).collect();
    import(&mut h, many);
    let p = h.ok("sessions.list", json!({}));
    assert_eq!((ids(&p).len(), p["total"].clone()), (50, json!(60)));
    let rest = h.ok("sessions.list", json!({"cursor": p["cursor"]}));
    assert_eq!((ids(&rest).len(), rest["cursor"].clone()), (10, Value::Null));
    assert_eq!(ids(&rest).last().map(String::as_str), Some("m00"));
}

#[test]
fn search_pages_hold_the_whole_search_once_with_its_snippets() {
    let (_d, mut h) = start();
    // every third chat names the whale, every other one has it in its text, a few are pinned
    let chats = (0..30)
        .map(|i| {
            let name = if i % 3 == 0 { format!("鲸 chat {i}") } else { format!("chat {i}") };
            let text =
                if i % 2 == 0 { format!("line {i} about a 鲸 and a quill") } else { format!("line {i}") };
            sess(&format!("c{i:02}"), &name, 1000 + i, i % 7 == 0, &text)
        })
        .collect();
    import(&mut h, chats);
    for q in ["鲸", "  QUILL ", "a 鲸 and", "line 2"] {
        let whole = h.ok("sessions.list", json!({"query": q, "limit": 1000}));
        let n = whole["rows"].as_array().unwrap().len();
        assert!(n > 4, "{q}: {whole}");
        assert_eq!(whole["total"], json!(n), "{q}");
        let mut rows = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let p = h.ok("sessions.list", json!({"query": q, "limit": 4, "cursor": cursor}));
            assert_eq!(p["total"], json!(n), "{q}: {p}");
            rows.extend(p["rows"].as_array().unwrap().iter().cloned());
            cursor = p["cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        assert_eq!(Value::Array(rows), whole["rows"], "{q}: pages = the one page, snippets and all");
    }
    let whale = h.ok("sessions.list", json!({"query": "鲸", "limit": 3}));
    // name hits (i % 3 == 0) and content hits (even i): 10 + 15 − 5 both = 20
    assert_eq!(whale["total"], json!(20));
    assert_eq!(ids(&whale), names(&["c28", "c21", "c14"]), "pinned first (c28 pinned: 28 % 7 == 0)");
    assert_eq!(
        whale["rows"][0]["snippet"],
        json!("line 28 about a 鲸 and a quill "),
        "the text ends in a line break"
    );
    assert_eq!(whale["rows"][1]["contentMatch"], json!(false), "c21 holds it in its name only");
    let none = h.ok("sessions.list", json!({"query": "zeppelin"}));
    assert_eq!(none, json!({"rows": [], "total": 0, "cursor": null}));
}

#[test]
fn bad_limits_and_cursors_are_bad_requests() {
    let (_d, mut h) = start();
    twenty(&mut h);
    for limit in [json!(0), json!(1001), json!(-1), json!(1.5), json!("5"), json!(null)] {
        assert_eq!(h.err("sessions.list", json!({ "limit": limit })), "bad_request", "limit {limit}");
    }
    let listed = h.ok("sessions.list", json!({"limit": 2}))["cursor"].clone();
    let searched = h.ok("sessions.list", json!({"query": "chat", "limit": 2}))["cursor"].clone();
    for (query, cursor) in [
        (json!(null), json!("")),
        (json!(null), json!("garbage")),
        (json!(null), json!(5)),
        (json!(null), json!(["k1"])),
        (json!("chat"), listed.clone()),
        (json!(null), searched.clone()),
        (json!("CHAT 1"), searched.clone()),
    ] {
        let r = h.call("sessions.list", json!({"query": query, "cursor": cursor}));
        assert_eq!(r["error"]["code"], json!("bad_request"), "{query} {cursor}: {r}");
    }
    // the same query however typed (trimmed, lower-cased) takes the cursor
    let p = h.ok("sessions.list", json!({"query": "  CHAT ", "limit": 2, "cursor": searched}));
    assert_eq!(ids(&p), names(&["s17", "s16"]));
    assert_eq!(h.ok("sessions.list", json!({"cursor": null, "limit": 1}))["rows"][0]["id"], json!("s19"));
}
