//! Live history (storage-model §4, §2.6 images, §2.8 client request ids and events, §11) through
//! the real binary over pipes on a temp database.
use crate::harness::*;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

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

fn get(h: &mut Host) -> Value {
    h.ok("history.get", json!({"images": "ref"}))
}

/// The live entries without their entryIds.
fn entries(h: &mut Host) -> Vec<Value> {
    bare(&get(h)["entries"]).as_array().expect("entries array").clone()
}

/// The string contents of the live history (panics on array content).
fn texts(h: &mut Host) -> Vec<String> {
    entries(h).iter().map(|e| e["content"].as_str().expect("string content").to_owned()).collect()
}

fn meta(h: &mut Host) -> Value {
    h.ok("history.meta", json!({}))
}

fn seq(h: &mut Host) -> i64 {
    meta(h)["changeSeq"].as_i64().expect("changeSeq number")
}

/// Replace the live history with `n` user entries `<prefix>0 … <prefix>{n-1}`.
fn seed(h: &mut Host, prefix: &str, n: usize) {
    let list: Vec<Value> = (0..n).map(|i| user(&format!("{prefix}{i}"))).collect();
    let r = h.ok("history.replace", json!({"entries": list}));
    assert_eq!(r["length"], json!(n.min(60)));
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
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

fn live_binding(db: &Path) -> String {
    q_str(db, "SELECT active_session_id FROM live_state WHERE id = 1")
}

fn image_count(db: &Path) -> i64 {
    q_i64(db, "SELECT count(*) FROM images")
}

fn change_rows(db: &Path) -> i64 {
    q_i64(db, "SELECT count(*) FROM changes")
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

/// Archive the given entries as a new saved session (the live history is replaced by them).
fn new_session(h: &mut Host, list: Vec<Value>) -> String {
    h.ok("history.replace", json!({ "entries": list }));
    let r = h.ok("sessions.save", json!({"name": "S"}));
    assert_eq!(r["created"], json!(true), "{r}");
    r["session"]["id"].as_str().expect("session id").to_owned()
}

// ---------------------------------------------------------------------------------------------
// history.get / history.meta

#[test]
fn get_and_meta_on_fresh_database() {
    let (_d, _db, mut h) = start();
    let g = h.ok("history.get", json!({}));
    assert_eq!(g["entries"], json!([]));
    assert_eq!(g["from"], json!(0));
    assert_eq!(g["length"], json!(0));
    assert_eq!(g["activeSessionId"], json!(""));
    assert!(g["changeSeq"].is_i64() || g["changeSeq"].is_u64(), "changeSeq: {g}");
    let m = meta(&mut h);
    assert_eq!(m["length"], json!(0));
    assert_eq!(m["activeSessionId"], json!(""));
    assert_eq!(m["changeSeq"], g["changeSeq"]);
}

#[test]
fn get_pages_with_from_and_limit() {
    let (_d, _db, mut h) = start();
    seed(&mut h, "m", 5);
    let all = h.ok("history.get", json!({}));
    assert_eq!(all["length"], json!(5));
    assert_eq!(all["entries"].as_array().unwrap().len(), 5);
    assert_eq!(bare(&all["entries"][4]), user("m4"));

    let p = h.ok("history.get", json!({"from": 1, "limit": 2}));
    assert_eq!(bare(&p["entries"]), json!([user("m1"), user("m2")]));
    assert_eq!(p["from"], json!(1));
    assert_eq!(p["length"], json!(5));

    let tail = h.ok("history.get", json!({"from": 3}));
    assert_eq!(bare(&tail["entries"]), json!([user("m3"), user("m4")]));
    let past = h.ok("history.get", json!({"from": 3, "limit": 100}));
    assert_eq!(bare(&past["entries"]), json!([user("m3"), user("m4")]));
    let whole = h.ok("history.get", json!({"from": 2.0, "limit": 1}));
    assert_eq!(bare(&whole["entries"]), json!([user("m2")]));

    for from in [5, 6, 1000] {
        let r = h.ok("history.get", json!({ "from": from }));
        assert_eq!(r["entries"], json!([]), "from {from}");
        assert_eq!(r["length"], json!(5));
    }
}

#[test]
fn get_rejects_bad_arguments() {
    let (_d, _db, mut h) = start();
    seed(&mut h, "m", 3);
    for args in [
        json!({"from": "1"}),
        json!({"from": 1.5}),
        json!({"from": -1}),
        json!({"limit": "2"}),
        json!({"limit": 0.5}),
        json!({"limit": -3}),
        json!({"images": "bytes"}),
        json!({"images": true}),
        json!({"bogus": 1}),
        json!({"clientRequestId": "read-1"}),
    ] {
        assert_eq!(h.err("history.get", args.clone()), "bad_request", "{args}");
    }
    assert_eq!(h.err("history.meta", json!({"clientRequestId": "read-2"})), "bad_request");
}

#[test]
fn get_images_inline_returns_canonical_data_url_and_ref_returns_reference() {
    let (_d, _db, mut h) = start();
    let png = png_bytes(3, 2, 9);
    // Upper-case MIME and unpadded base64: the canonical URL lower-cases and pads.
    let unpadded = b64(&png).trim_end_matches('=').to_owned();
    assert_ne!(unpadded.len() % 4, 0, "test needs a payload that has padding");
    let url = format!("data:image/PNG;base64,{unpadded}");
    h.ok("history.append", json!({"entry": image_entry("look", &url)}));

    let canonical = format!("data:image/png;base64,{}", b64(&png));
    let inline = h.ok("history.get", json!({}));
    assert_eq!(inline["entries"][0]["content"][1]["image_url"]["url"], json!(canonical));
    assert_eq!(inline["entries"][0]["content"][0], text_part("look"));
    let inline2 = h.ok("history.get", json!({"images": "inline"}));
    assert_eq!(inline2["entries"], inline["entries"]);

    let r = h.ok("history.get", json!({"images": "ref"}));
    assert_eq!(r["entries"][0]["content"][1]["image_url"]["url"], json!(image_ref(&png)));
}

#[test]
fn get_and_meta_carry_change_seq() {
    let (_d, db, mut h) = start();
    let s0 = seq(&mut h);
    let (_, ev) = changed(&mut h, "history.append", json!({"entry": user("a")}));
    let g = h.ok("history.get", json!({}));
    let s1 = g["changeSeq"].as_i64().unwrap();
    assert!(s1 > s0, "changeSeq did not advance: {s0} -> {s1}");
    assert_eq!(ev["seq"], json!(s1));
    assert_eq!(meta(&mut h)["changeSeq"], json!(s1));
    assert_eq!(q_i64(&db, "SELECT max(seq) FROM changes"), s1);
}

// ---------------------------------------------------------------------------------------------
// history.append

/// A new entry is typed at the boundary (PROTOCOL.md "A new entry"): a wrong part or stamp is
/// refused by its path and nothing is stored; every field the types do not name comes back as it
/// was sent, from the live history, the kept session and `sessions.appendTo` alike.
#[test]
fn a_new_entry_is_typed_and_its_other_fields_kept_verbatim() {
    let (_d, db, mut h) = start();
    let rows = change_rows(&db);
    for (entry, says) in [
        (
            json!({"role": "user", "content": [text_part("a"), {"type": "text", "text": 5}]}),
            "entry.content[1] must have a string `text`",
        ),
        (
            json!({"role": "user", "content": [{"type": "image_url", "image_url": {"href": "x"}}]}),
            "entry.content[0] must have `image_url`",
        ),
        (json!({"role": "user", "content": "x", "imagesSeen": "yes"}), "entry.imagesSeen must be a boolean"),
        (json!({"role": "assistant", "content": "x", "interrupted": null}), "entry.interrupted"),
        (json!({"role": "assistant", "content": "x", "providerKey": {"name": 1}}), "entry.providerKey.name"),
        (json!({"role": "user", "content": "x", "failed": {"code": "c"}}), "entry.failed"),
    ] {
        let r = h.call("history.append", json!({ "entry": entry }));
        assert_eq!(r["error"]["code"], "bad_request", "{entry}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with(says), "{entry}: {msg:?} should start with {says:?}");
    }
    assert_eq!(change_rows(&db), rows, "nothing was stored");

    let sent = json!({
        "role": "user",
        "content": [
            {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
            7
        ],
        "clientNote": {"nested": [1, 2.5, null, "日本"]},
        "providerKey": {"name": "p", "model": "m", "tier": 2},
        "videoSrc": {"platform": "youtube", "url": "https://youtu.be/x", "tabId": 4}
    });
    let sid = h.ok("history.append", json!({ "entry": sent }))["sessionId"].as_str().unwrap().to_owned();
    let reply = json!({"role": "assistant", "content": "ok", "providerLabel": "L", "x-trace": "t1"});
    h.ok("sessions.appendTo", json!({"id": sid, "entry": reply}));
    let without_id = |mut e: Value| {
        e.as_object_mut().unwrap().remove("entryId");
        e
    };
    let live: Vec<Value> = entries(&mut h).into_iter().map(without_id).collect();
    assert_eq!(live, vec![sent.clone(), reply.clone()], "the live history holds what was sent");
    let kept: Vec<Value> = h.ok("sessions.get", json!({"id": sid}))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(without_id)
        .collect();
    assert_eq!(kept, vec![sent, reply], "so does the session that keeps it");
}

#[test]
fn append_validates_entry() {
    let (_d, db, mut h) = start();
    let bad = [
        json!({"role": "system", "content": "x"}),
        json!({"role": "tool", "content": "x"}),
        json!({"role": "User", "content": "x"}),
        json!({"content": "x"}),
        json!({"role": null, "content": "x"}),
        json!({"role": "user"}),
        json!({"role": "user", "content": 5}),
        json!({"role": "user", "content": {"text": "x"}}),
        json!({"role": "user", "content": null}),
        json!({"role": "assistant", "content": true}),
        json!("user: hi"),
        json!([{"role": "user", "content": "x"}]),
        json!(null),
        json!(42),
    ];
    let rows = change_rows(&db);
    for entry in bad {
        assert_eq!(h.err("history.append", json!({ "entry": entry })), "bad_request", "{entry}");
    }
    assert_eq!(h.err("history.append", json!({})), "bad_request", "missing entry");
    assert_eq!(h.err("history.append", json!({"entry": user("x"), "extra": 1})), "bad_request");
    assert_eq!(meta(&mut h)["length"], json!(0));
    assert_eq!(change_rows(&db), rows);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM history_entries"), 0);

    // Both roles and both content shapes are accepted.
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("u")}))),
        json!({"length": 1, "index": 0})
    );
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": assistant("a")}))),
        json!({"length": 2, "index": 1})
    );
    let arr = json!({"role": "user", "content": [text_part("t")]});
    assert_eq!(placed(&h.ok("history.append", json!({ "entry": arr }))), json!({"length": 3, "index": 2}));
    let empty = json!({"role": "assistant", "content": []});
    assert_eq!(placed(&h.ok("history.append", json!({ "entry": empty }))), json!({"length": 4, "index": 3}));
    assert_eq!(entries(&mut h), vec![user("u"), assistant("a"), arr, empty]);
}

#[test]
fn append_keeps_only_last_60() {
    let (_d, db, mut h) = start();
    seed(&mut h, "m", 60);
    let r = h.ok("history.append", json!({"entry": user("new")}));
    assert_eq!(placed(&r), json!({"length": 60, "index": 59}));
    let mut want = names("m", 1..60);
    want.push("new".into());
    assert_eq!(texts(&mut h), want);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM history_entries"), 60);
    // The window moved; the trimmed entry is still the first of the chat's session.
    assert_eq!(meta(&mut h)["offset"], json!(1));
    let sid = bound(&mut h);
    assert_eq!(body(&mut h, &sid)[0], user("m0"));
    assert_eq!(q_i64(&db, "SELECT count(*) FROM session_entries"), 61);
}

#[test]
fn append_trims_by_utf16_content_chars() {
    let (_d, db, mut h) = start();
    // 100,000 emoji = 200,000 UTF-16 units (100,000 code points, 400,000 UTF-8 bytes).
    let emoji = "😀".repeat(100_000);
    let xs = "x".repeat(100_000);
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user(&emoji)}))),
        json!({"length": 1, "index": 0})
    );
    // Exactly 300,000 units: not over the budget, both kept.
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user(&xs)}))),
        json!({"length": 2, "index": 1})
    );
    assert_eq!(q_i64(&db, "SELECT content_chars FROM history_entries ORDER BY position LIMIT 1"), 200_000);
    // 300,001 units: the oldest goes.
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("y")}))),
        json!({"length": 2, "index": 1})
    );
    assert_eq!(texts(&mut h), vec![xs, "y".to_owned()]);
}

#[test]
fn content_chars_count_text_and_input_text_parts_only() {
    let (_d, db, mut h) = start();
    let e = json!({"role": "user", "content": [
        text_part("abc"),
        {"type": "input_text", "text": "de"},
        {"type": "custom", "text": "zzzz"},
        image_part("https://example.com/a.png"),
    ]});
    h.ok("history.append", json!({ "entry": e }));
    assert_eq!(q_i64(&db, "SELECT content_chars FROM history_entries"), 5);

    // text + input_text parts count toward the budget: 150,000 + 150,000 + 1 > 300,000.
    let both = json!({"role": "user", "content": [
        text_part(&"a".repeat(150_000)),
        {"type": "input_text", "text": "b".repeat(150_000)},
    ]});
    h.ok("history.replace", json!({ "entries": [both] }));
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("y")}))),
        json!({"length": 1, "index": 0})
    );

    // A custom part's text does not count: 299,999 + 0 + 1 = 300,000, both kept.
    let custom = json!({"role": "user", "content": [
        text_part(&"a".repeat(299_999)),
        {"type": "custom", "text": "z".repeat(100_000)},
    ]});
    h.ok("history.replace", json!({ "entries": [custom] }));
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("y")}))),
        json!({"length": 2, "index": 1})
    );
}

#[test]
fn single_oversized_entry_is_kept() {
    let (_d, _db, mut h) = start();
    let big = "a".repeat(300_001);
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user(&big)}))),
        json!({"length": 1, "index": 0})
    );
    assert_eq!(texts(&mut h), vec![big.clone()]);

    // A newer small entry pushes the oversized one out.
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("z")}))),
        json!({"length": 1, "index": 0})
    );
    assert_eq!(texts(&mut h), vec!["z".to_owned()]);

    // An oversized newest entry pushes out everything older and stays alone.
    seed(&mut h, "s", 3);
    let huge = "h".repeat(400_000);
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user(&huge)}))),
        json!({"length": 1, "index": 0})
    );
    assert_eq!(texts(&mut h), vec![huge]);
}

#[test]
fn image_data_never_counts_toward_chars() {
    let (_d, db, mut h) = start();
    let png = noise_png(400, 400, 1);
    let url = data_url("image/png", &png);
    assert!(url.len() > 300_000, "data URL only {} chars", url.len());
    h.ok("history.append", json!({"entry": image_entry("hi", &url)}));
    assert_eq!(q_i64(&db, "SELECT content_chars FROM history_entries"), 2);
    // 2 + 299,998 = 300,000: nothing trimmed.
    let r = h.ok("history.append", json!({"entry": user(&"x".repeat(299_998))}));
    assert_eq!(placed(&r), json!({"length": 2, "index": 1}));
    let g = get(&mut h);
    assert_eq!(g["length"], json!(2));
    assert_eq!(g["entries"][0]["content"][1]["image_url"]["url"], json!(image_ref(&png)));
}

// ---------------------------------------------------------------------------------------------
// history.replace / history.clear

#[test]
fn replace_trims_and_validates() {
    let (_d, db, mut h) = start();
    let list: Vec<Value> = (0..65).map(|i| user(&format!("m{i}"))).collect();
    assert_eq!(h.ok("history.replace", json!({ "entries": list }))["length"], json!(60));
    assert_eq!(texts(&mut h), names("m", 5..65));

    let big = "b".repeat(250_000);
    let r = h.ok("history.replace", json!({"entries": [user("p"), user(&big), user(&"c".repeat(50_000))]}));
    assert_eq!(r["length"], json!(2));
    assert_eq!(texts(&mut h)[0], big);

    let r = h.ok("history.replace", json!({"entries": [user("p"), user(&"q".repeat(300_001))]}));
    assert_eq!(r["length"], json!(1));
    // what each replace took out of the window is in the trash, not gone
    let trashed: i64 =
        q_i64(&db, "SELECT coalesce(sum(entry_count), 0) FROM sessions WHERE trash_reason = 'cleared'");
    assert_eq!(trashed, 60 + 2);

    seed(&mut h, "k", 2);
    let rows = change_rows(&db);
    for bad in [json!([user("a"), "b"]), json!([null]), json!([[user("a")]]), json!("x"), json!(null)] {
        assert_eq!(h.err("history.replace", json!({ "entries": bad })), "bad_request", "{bad}");
    }
    assert_eq!(h.err("history.replace", json!({})), "bad_request");
    assert_eq!(texts(&mut h), names("k", 0..2));
    assert_eq!(change_rows(&db), rows);
}

#[test]
fn clear_empties_and_unbinds() {
    let (_d, db, mut h) = start();
    let id = new_session(&mut h, vec![user("a"), assistant("b")]);
    assert_eq!(h.ok("history.setBinding", json!({"id": id})), json!({ "activeSessionId": id }));
    assert_eq!(live_binding(&db), id);
    let (r, ev) = changed(&mut h, "history.clear", json!({}));
    assert_eq!(r, json!({}));
    assert_eq!(ev["areas"]["history"], json!(true));
    assert_eq!(ev["areas"]["binding"], json!(true));
    let m = meta(&mut h);
    assert_eq!(m["length"], json!(0));
    assert_eq!(m["activeSessionId"], json!(""));
    assert_eq!(live_binding(&db), "");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM history_entries"), 0);
    // The session itself is untouched.
    assert_eq!(q_i64(&db, &format!("SELECT count(*) FROM session_entries WHERE session_id = '{id}'")), 2);
}

// ---------------------------------------------------------------------------------------------
// removeAt / truncateFrom and the index rule

#[test]
fn remove_at_removes_one_entry() {
    let (_d, _db, mut h) = start();
    seed(&mut h, "m", 4);
    assert_eq!(h.ok("history.removeAt", json!({"index": 1})), json!({"removed": true}));
    assert_eq!(texts(&mut h), vec!["m0", "m2", "m3"]);
    assert_eq!(h.ok("history.removeAt", json!({"index": 2})), json!({"removed": true}));
    assert_eq!(texts(&mut h), vec!["m0", "m2"]);
    assert_eq!(h.ok("history.removeAt", json!({"index": 2})), json!({"removed": false}));
    assert_eq!(
        h.ok("history.removeAt", json!({"index": 9_007_199_254_740_992u64})),
        json!({"removed": false})
    );
    assert_eq!(texts(&mut h), vec!["m0", "m2"]);
}

#[test]
fn truncate_from_keeps_prefix() {
    let (_d, _db, mut h) = start();
    seed(&mut h, "m", 5);
    assert_eq!(h.ok("history.truncateFrom", json!({"index": 5})), json!({"length": 5}));
    assert_eq!(h.ok("history.truncateFrom", json!({"index": 50})), json!({"length": 5}));
    assert_eq!(h.ok("history.truncateFrom", json!({"index": 3})), json!({"length": 3}));
    assert_eq!(texts(&mut h), vec!["m0", "m1", "m2"]);
    assert_eq!(h.ok("history.truncateFrom", json!({"index": 0})), json!({"length": 0}));
    assert_eq!(entries(&mut h), Vec::<Value>::new());
}

#[test]
fn index_rule_for_remove_at_and_truncate_from() {
    let (_d, db, mut h) = start();
    seed(&mut h, "m", 4);
    let rows = change_rows(&db);
    for op in ["history.removeAt", "history.truncateFrom"] {
        for bad in [json!("1"), json!(1.5), json!(-1), json!(null), json!(1e300), json!(true), json!([1])] {
            assert_eq!(h.err(op, json!({ "index": bad })), "bad_request", "{op} index {bad}");
        }
        assert_eq!(h.err(op, json!({})), "bad_request", "{op} without index");
    }
    assert_eq!(texts(&mut h), names("m", 0..4), "a bad index changed the history");
    assert_eq!(change_rows(&db), rows);

    assert_eq!(h.ok("history.removeAt", json!({"index": 2.0})), json!({"removed": true}));
    assert_eq!(texts(&mut h), vec!["m0", "m1", "m3"]);
    assert_eq!(h.ok("history.truncateFrom", json!({"index": 2.0})), json!({"length": 2}));
    assert_eq!(texts(&mut h), vec!["m0", "m1"]);
}

// ---------------------------------------------------------------------------------------------
// removeByAttachId / removeLastPageContext

fn with_attach(text: &str, attach_id: &str) -> Value {
    json!({"role": "user", "content": text, "attachId": attach_id})
}

#[test]
fn remove_by_attach_id_removes_first_match() {
    let (_d, _db, mut h) = start();
    let list = vec![
        user("u0"),
        with_attach("x-old", "X"),
        user("u2"),
        with_attach("x-new", "X"),
        with_attach("y", "Y"),
    ];
    h.ok("history.replace", json!({ "entries": list }));
    assert_eq!(h.ok("history.removeByAttachId", json!({"attachId": "X"})), json!({"removedIndex": 1}));
    assert_eq!(texts(&mut h), vec!["u0", "u2", "x-new", "y"]);
    assert_eq!(h.ok("history.removeByAttachId", json!({"attachId": "X"})), json!({"removedIndex": 2}));
    assert_eq!(texts(&mut h), vec!["u0", "u2", "y"]);
    for args in [json!({"attachId": "X"}), json!({"attachId": "x"}), json!({"attachId": ""}), json!({})] {
        assert_eq!(h.ok("history.removeByAttachId", args.clone()), json!({"removedIndex": -1}), "{args}");
    }
    for bad in [json!(5), json!(["Y"]), json!({"id": "Y"}), json!(true)] {
        assert_eq!(h.err("history.removeByAttachId", json!({ "attachId": bad })), "bad_request", "{bad}");
    }
    assert_eq!(texts(&mut h), vec!["u0", "u2", "y"]);
    assert_eq!(h.ok("history.removeByAttachId", json!({"attachId": "Y"})), json!({"removedIndex": 2}));
    assert_eq!(texts(&mut h), vec!["u0", "u2"]);
}

#[test]
fn remove_last_page_context_scans_from_end() {
    let (_d, _db, mut h) = start();
    let list = vec![
        user(&format!("{PREFIX}\nURL: a")), // 0
        json!({"role": "user", "content": [text_part(&format!("{LEGACY}\nURL: b"))]}), // 1
        json!({"role": "user", "content": [{"type": "input_text", "text": format!("{PREFIX} c")}]}), // 2
        user("plain"),                      // 3
        assistant(&format!("{PREFIX}\nURL: not me")), // 4
        json!({"role": "user", "content": [text_part("intro"), text_part(&format!("{PREFIX} d"))]}), // 5
        user(&format!(" {PREFIX} leading space")), // 6
        json!({"role": "assistant", "content": [text_part(&format!("{LEGACY} e"))]}), // 7
    ];
    h.ok("history.replace", json!({ "entries": list.clone() }));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": 2}));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": 1}));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": 0}));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": -1}));
    let left = entries(&mut h);
    assert_eq!(
        left,
        vec![list[3].clone(), list[4].clone(), list[5].clone(), list[6].clone(), list[7].clone()]
    );

    h.ok("history.clear", json!({}));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": -1}));
}

/// §2.3 / §11.2: the prefix test looks at the first text/input_text part, so an image part
/// before the text does not hide the prefix.
#[test]
fn remove_last_page_context_uses_first_text_part_after_image() {
    let (_d, _db, mut h) = start();
    let png = png_bytes(2, 2, 1);
    let attach = json!({"role": "user", "content": [
        image_part(&data_url("image/png", &png)),
        text_part(&format!("{PREFIX}\nURL: shot")),
    ]});
    h.ok("history.replace", json!({"entries": [user("a"), attach, user("b")]}));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": 1}));
    assert_eq!(texts(&mut h), vec!["a", "b"]);
}

#[test]
fn remove_last_page_context_legacy_prefix_string_content() {
    let (_d, _db, mut h) = start();
    h.ok("history.replace", json!({"entries": [user(&format!("{LEGACY}\nURL: x")), user("q")]}));
    assert_eq!(h.ok("history.removeLastPageContext", json!({})), json!({"removedIndex": 0}));
    assert_eq!(texts(&mut h), vec!["q"]);
}

// ---------------------------------------------------------------------------------------------
// markImagesSeen

#[test]
fn mark_images_seen_stamps_image_bearing_entries_once() {
    let (_d, _db, mut h) = start();
    let p1 = data_url("image/png", &png_bytes(2, 2, 1));
    let p2 = data_url("image/png", &png_bytes(2, 2, 2));
    let list = vec![
        image_entry("one", &p1),                                                   // 0
        user("text"),                                                              // 1
        json!({"role": "user", "content": [text_part("parts only")]}),             // 2
        json!({"role": "user", "content": [image_part(&p2)], "imagesSeen": true}), // 3
        json!({"role": "user", "content": [{"type": "image_url", "image_url": "https://e.x/i.png"}]}), // 4
        assistant("reply"),                                                        // 5
    ];
    h.ok("history.replace", json!({ "entries": list }));
    let (r, ev) = changed(&mut h, "history.markImagesSeen", json!({}));
    assert_eq!(r, json!({"stamped": 2}));
    assert_eq!(ev["areas"]["history"], json!(true));
    let es = entries(&mut h);
    let seen: Vec<Value> = es.iter().map(|e| e["imagesSeen"].clone()).collect();
    assert_eq!(seen, vec![json!(true), Value::Null, Value::Null, json!(true), json!(true), Value::Null]);
    // Pixels untouched.
    assert_eq!(es[0]["content"][1]["image_url"]["url"], json!(image_ref(&png_bytes(2, 2, 1))));
    assert_eq!(unchanged(&mut h, "history.markImagesSeen", json!({})), json!({"stamped": 0}));
}

#[test]
fn append_with_mark_images_seen_stamps_in_same_write() {
    let (_d, db, mut h) = start();
    let p1 = data_url("image/png", &png_bytes(2, 2, 1));
    h.ok("history.append", json!({"entry": image_entry("look", &p1)}));
    h.ok("history.append", json!({"entry": user("no image")}));
    let rows = change_rows(&db);
    let (r, _) = changed(&mut h, "history.append", json!({"entry": assistant("ok"), "markImagesSeen": true}));
    assert_eq!(placed(&r), json!({"length": 3, "index": 2}));
    assert_eq!(change_rows(&db), rows + 1, "append + stamping must be one write");
    let es = entries(&mut h);
    assert_eq!(es[0]["imagesSeen"], json!(true));
    assert!(es[1].get("imagesSeen").is_none());
    assert!(es[2].get("imagesSeen").is_none());
    assert_eq!(h.ok("history.markImagesSeen", json!({})), json!({"stamped": 0}));

    // markImagesSeen: false stamps nothing.
    h.ok("history.append", json!({"entry": image_entry("again", &p1), "markImagesSeen": false}));
    assert!(entries(&mut h)[3].get("imagesSeen").is_none());
    assert_eq!(h.ok("history.markImagesSeen", json!({})), json!({"stamped": 1}));
    assert_eq!(h.err("history.append", json!({"entry": user("x"), "markImagesSeen": "yes"})), "bad_request");
}

// ---------------------------------------------------------------------------------------------
// binding

#[test]
fn set_binding() {
    let (_d, db, mut h) = start();
    let id = new_session(&mut h, vec![user("a")]);
    let kept = bound(&mut h);
    assert_ne!(kept, id, "the live chat is kept in its own session; the save made a copy");
    assert_eq!(h.err("history.setBinding", json!({"id": "no-such-session"})), "not_found");
    assert_eq!(live_binding(&db), kept);
    // the copy holds the same entries as the live history: binding to it is allowed
    let (r, ev) = changed(&mut h, "history.setBinding", json!({ "id": id }));
    assert_eq!(r, json!({ "activeSessionId": id }));
    assert_eq!(ev["areas"]["binding"], json!(true));
    assert_eq!(meta(&mut h)["activeSessionId"], json!(id));
    assert_eq!(h.ok("history.get", json!({}))["activeSessionId"], json!(id));
    assert_eq!(live_binding(&db), id);
    assert_eq!(h.err("history.setBinding", json!({"id": "still-missing"})), "not_found");
    assert_eq!(live_binding(&db), id, "a failed setBinding changed the binding");
    // a session holding other entries would replace what is live: refused
    h.ok("history.append", json!({"entry": user("more")}));
    assert_eq!(h.err("history.setBinding", json!({ "id": kept })), "conflict");
    assert_eq!(live_binding(&db), id);

    // unbinding empties the live history; the entries stay in their session
    let (r, _) = changed(&mut h, "history.setBinding", json!({"id": ""}));
    assert_eq!(r, json!({"activeSessionId": ""}));
    assert_eq!(meta(&mut h)["activeSessionId"], json!(""));
    assert_eq!(meta(&mut h)["length"], json!(0));
    assert_eq!(live_binding(&db), "");
    assert_eq!(body(&mut h, &id), json!([user("a"), user("more")]));
    // with an empty live history any session can be bound: its window is shown
    h.ok("history.setBinding", json!({ "id": kept }));
    assert_eq!(texts(&mut h), vec!["a"]);
    assert_eq!(h.err("history.setBinding", json!({})), "bad_request");
    assert_eq!(h.err("history.setBinding", json!({"id": 7})), "bad_request");
}

/// Only `history.clear`, `setBinding('')` and deleting the bound session unbind. A removal
/// that empties the window of a chat with earlier (kept) entries keeps the binding; one that
/// leaves the chat with no entry at all moves the chat to the trash and unbinds.
#[test]
fn writes_that_empty_the_window_keep_the_binding_unless_the_chat_is_gone() {
    let (_d, db, mut h) = start();
    let one = vec![with_attach(&format!("{PREFIX}\nURL: z"), "A")];
    let cases: Vec<(&str, Value)> = vec![
        ("history.removeAt", json!({"index": 0})),
        ("history.truncateFrom", json!({"index": 0})),
        ("history.removeByAttachId", json!({"attachId": "A"})),
        ("history.removeLastPageContext", json!({})),
        ("history.replace", json!({"entries": []})),
    ];
    for (op, args) in &cases {
        // a chat whose only entry is the live one: removing it trashes the chat
        h.ok("history.clear", json!({}));
        h.ok("history.replace", json!({ "entries": one }));
        let sid = bound(&mut h);
        h.ok(op, args.clone());
        let m = meta(&mut h);
        assert_eq!(m["length"], json!(0), "{op}");
        assert_eq!(m["activeSessionId"], json!(""), "{op} left the binding");
        assert_eq!(live_binding(&db), "", "{op} left live_state bound");
        let items = h.ok("trash.list", json!({}))["items"].clone();
        assert!(items.as_array().unwrap().iter().any(|i| i["id"] == json!(sid)), "{op}: {items}");
    }
    // the clear case: unbinds, deletes nothing
    h.ok("history.clear", json!({}));
    h.ok("history.replace", json!({"entries": [user("a"), user("b")]}));
    let sid = bound(&mut h);
    h.ok("history.clear", json!({}));
    assert_eq!(live_binding(&db), "");
    assert_eq!(body(&mut h, &sid), json!([user("a"), user("b")]));
    // a removal that leaves entries keeps the binding
    h.ok("sessions.load", json!({ "id": sid }));
    h.ok("history.removeAt", json!({"index": 0}));
    assert_eq!(meta(&mut h)["activeSessionId"], json!(sid));
    assert_eq!(live_binding(&db), sid);
}

/// The window of a chat with a kept prefix can become empty while the chat stays bound.
#[test]
fn emptying_the_window_of_a_long_chat_keeps_it_bound() {
    let (_d, db, mut h) = start();
    for i in 0..62 {
        h.ok("history.append", json!({"entry": user(&format!("m{i}"))}));
    }
    let sid = bound(&mut h);
    assert_eq!(meta(&mut h)["offset"], json!(2));
    h.ok("history.truncateFrom", json!({"index": 0}));
    let m = meta(&mut h);
    assert_eq!((m["length"].clone(), m["offset"].clone()), (json!(0), json!(2)));
    assert_eq!(live_binding(&db), sid, "the chat still has its first two entries");
    assert_eq!(body(&mut h, &sid), json!([user("m0"), user("m1")]));
    // the next message continues that chat
    h.ok("history.append", json!({"entry": user("again")}));
    assert_eq!(body(&mut h, &sid), json!([user("m0"), user("m1"), user("again")]));
    assert_eq!(texts(&mut h), vec!["again"]);
}

// ---------------------------------------------------------------------------------------------
// images

#[test]
fn data_url_is_stored_once_as_a_blob() {
    let (_d, db, mut h) = start();
    let png = png_bytes(7, 5, 3);
    let hex = sha256_hex(&png);
    let url = data_url("image/PNG", &png);
    h.ok("history.append", json!({"entry": image_entry("a", &url)}));

    let c = sql(&db);
    let (sha, mime, w, hgt, len, bytes): (String, String, Option<i64>, Option<i64>, i64, Vec<u8>) = c
        .query_row("SELECT sha256, mime, width, height, byte_length, bytes FROM images", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .unwrap();
    assert_eq!(sha, hex);
    assert_eq!(mime, "image/png");
    assert_eq!((w, hgt), (Some(7), Some(5)));
    assert_eq!(len, png.len() as i64);
    assert_eq!(bytes, png);

    let stored = q_str(&db, "SELECT entry FROM history_entries");
    assert!(stored.contains(&format!("keepsake-image:sha256:{hex}")), "{stored}");
    assert!(!stored.contains("data:"), "stored entry holds the data URL: {stored}");
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["content"][1]["image_url"]["url"], json!(image_ref(&png)));

    // Same bytes again (other MIME spelling), and as a reference: still one blob.
    h.ok("history.append", json!({"entry": image_entry("b", &data_url("image/png", &png))}));
    h.ok("history.append", json!({"entry": image_entry("c", &image_ref(&png))}));
    assert_eq!(image_count(&db), 1);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM image_refs"), 3);
    assert_eq!(q_str(&db, "SELECT mime FROM images"), "image/png");
    let g = h.ok("history.get", json!({}));
    for i in 0..3 {
        assert_eq!(
            g["entries"][i]["content"][1]["image_url"]["url"],
            json!(data_url("image/png", &png)),
            "entry {i}"
        );
    }
}

#[test]
fn bare_string_image_url_is_stored_as_blob() {
    let (_d, db, mut h) = start();
    let png = png_bytes(4, 4, 8);
    let url = data_url("image/png", &png);
    let e = json!({"role": "user", "content": [{"type": "image_url", "image_url": url}]});
    h.ok("history.append", json!({ "entry": e }));
    assert_eq!(image_count(&db), 1);
    assert!(!q_str(&db, "SELECT entry FROM history_entries").contains("data:"));
    let r = get(&mut h);
    assert_eq!(r["entries"][0]["content"][0]["image_url"], json!(image_ref(&png)));
    let i = h.ok("history.get", json!({}));
    assert_eq!(bare(&i["entries"][0]), e);
}

#[test]
fn data_url_scheme_is_case_insensitive() {
    let (_d, db, mut h) = start();
    let png = png_bytes(2, 3, 4);
    let url = format!("DATA:image/png;BASE64,{}", b64(&png));
    h.ok("history.append", json!({"entry": image_entry("x", &url)}));
    assert_eq!(image_count(&db), 1);
    assert_eq!(get(&mut h)["entries"][0]["content"][1]["image_url"]["url"], json!(image_ref(&png)));
}

#[test]
fn unknown_image_reference_is_bad_request() {
    let (_d, db, mut h) = start();
    let unknown = format!("keepsake-image:sha256:{}", "0".repeat(64));
    let rows = change_rows(&db);
    assert_eq!(h.err("history.append", json!({"entry": image_entry("x", &unknown)})), "bad_request");
    let bare = json!({"role": "user", "content": [{"type": "image_url", "image_url": unknown}]});
    assert_eq!(h.err("history.append", json!({ "entry": bare })), "bad_request");
    assert_eq!(
        h.err("history.replace", json!({"entries": [user("a"), image_entry("x", &unknown)]})),
        "bad_request"
    );
    assert_eq!(meta(&mut h)["length"], json!(0));
    assert_eq!(change_rows(&db), rows);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM history_entries"), 0);
}

#[test]
fn plain_urls_and_invalid_data_urls_stay_strings() {
    let (_d, db, mut h) = start();
    let urls = [
        "https://example.com/a.png",
        "http://example.com/b.jpg",
        "data:image/png;base64,@@@not base64!!",
        "data:image/png;base64,abcde",
        "data:text/plain;base64,aGVsbG8=",
        "data:image/png,rawnotbase64",
    ];
    let e = json!({"role": "user", "content": urls.iter().map(|u| image_part(u)).collect::<Vec<_>>()});
    h.ok("history.append", json!({ "entry": e }));
    assert_eq!(image_count(&db), 0);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM image_refs"), 0);
    let stored: Value = serde_json::from_str(&q_str(&db, "SELECT entry FROM history_entries")).unwrap();
    assert_eq!(bare(&stored), e);
    assert_eq!(bare(&h.ok("history.get", json!({}))["entries"][0]), e);
    assert_eq!(bare(&get(&mut h)["entries"][0]), e);
}

#[test]
fn images_get_returns_bytes_or_not_found() {
    let (_d, _db, mut h) = start();
    let png = png_bytes(5, 5, 5);
    h.ok("history.append", json!({"entry": image_entry("x", &data_url("image/PNG", &png))}));
    let r = h.ok("images.get", json!({"ref": image_ref(&png)}));
    assert_eq!(r, json!({"mime": "image/png", "bytes": b64(&png)}));
    let bare = h.ok("images.get", json!({"ref": sha256_hex(&png)}));
    assert_eq!(bare, r);
    let other = format!("keepsake-image:sha256:{}", sha256_hex(b"nope"));
    assert_eq!(h.err("images.get", json!({ "ref": other })), "not_found");
    assert_eq!(h.err("images.get", json!({"ref": sha256_hex(b"nope")})), "not_found");
    assert_eq!(h.err("images.get", json!({"ref": "keepsake-image:sha256:xyz"})), "bad_request");
    assert_eq!(h.err("images.get", json!({})), "bad_request");
}

/// A blob stays while any entry uses it, the trash included; purging the trash releases it.
#[test]
fn a_blob_goes_with_its_last_reference_which_only_a_purge_removes() {
    let (_d, db, mut h) = start();
    let png = png_bytes(3, 3, 1);
    let url = data_url("image/png", &png);
    h.ok("history.append", json!({"entry": image_entry("a", &url)}));
    h.ok("history.append", json!({"entry": image_entry("b", &url)}));
    h.ok("history.append", json!({"entry": user("c")}));
    assert_eq!(image_count(&db), 1);
    assert_eq!(h.ok("history.removeAt", json!({"index": 0})), json!({"removed": true}));
    assert_eq!(h.ok("history.removeAt", json!({"index": 0})), json!({"removed": true}));
    assert_eq!(texts(&mut h), vec!["c"]);
    assert_eq!(image_count(&db), 1, "the removed entries are in the trash, with their picture");
    h.ok("images.get", json!({"ref": image_ref(&png)}));
    assert_eq!(h.ok("trash.purge", json!({"all": true})), json!({"purged": 2}));
    assert_eq!(image_count(&db), 0);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM image_refs"), 0);
    assert_eq!(h.err("images.get", json!({"ref": image_ref(&png)})), "not_found");
}

/// Every removal keeps the picture (in the trash, or in the session a cleared or trimmed chat
/// stays in); it is released only when nothing holds it any more.
#[test]
fn every_kind_of_removal_keeps_blobs_until_the_trash_is_purged() {
    let (_d, db, mut h) = start();
    let url = data_url("image/png", &png_bytes(3, 3, 2));
    let img = image_entry("i", &url);
    let attach = json!({"role": "user", "content": [text_part(&format!("{PREFIX}\nURL: p")), image_part(&url)],
                        "attachId": "att"});

    let cases: Vec<(Vec<Value>, &str, Value)> = vec![
        (vec![user("t"), img.clone()], "history.truncateFrom", json!({"index": 1})),
        (vec![img.clone(), user("t")], "history.replace", json!({"entries": [user("x")]})),
        (vec![user("t"), attach.clone()], "history.removeByAttachId", json!({"attachId": "att"})),
        (vec![attach.clone(), user("t")], "history.removeLastPageContext", json!({})),
        (vec![img.clone(), user("t")], "history.removeAt", json!({"index": 0})),
    ];
    for (setup, op, args) in cases {
        h.ok("history.clear", json!({}));
        h.ok("sessions.clearAll", json!({}));
        h.ok("trash.purge", json!({"all": true}));
        assert_eq!(image_count(&db), 0, "{op}: clean start");
        h.ok("history.replace", json!({ "entries": setup }));
        assert_eq!(image_count(&db), 1, "{op}: setup");
        h.ok(op, args);
        assert!(!get(&mut h).to_string().contains("keepsake-image"), "{op}: still live");
        assert_eq!(image_count(&db), 1, "{op} lost the picture");
        let items = h.ok("trash.list", json!({}))["items"].clone();
        assert_eq!(items.as_array().unwrap().len(), 1, "{op}: {items}");
        h.ok("trash.purge", json!({"id": items[0]["id"]}));
        assert_eq!(image_count(&db), 0, "{op}: purging left the blob");
        assert_eq!(q_i64(&db, "SELECT count(*) FROM image_refs"), 0, "{op} left a ref");
    }

    // New chat: the picture stays in the chat's session.
    h.ok("history.replace", json!({"entries": [img.clone()]}));
    h.ok("history.clear", json!({}));
    assert_eq!(image_count(&db), 1);

    // Trimmed out of the window: still in the session's kept prefix.
    h.ok("sessions.clearAll", json!({}));
    h.ok("trash.purge", json!({"all": true}));
    h.ok("history.replace", json!({"entries": [img.clone()]}));
    for i in 0..60 {
        h.ok("history.append", json!({"entry": user(&format!("n{i}"))}));
    }
    assert_eq!(meta(&mut h)["length"], json!(60));
    assert_eq!(meta(&mut h)["offset"], json!(1));
    assert_eq!(image_count(&db), 1, "a trimmed entry's picture is kept");
}

// ---------------------------------------------------------------------------------------------
// events and no-op writes

#[test]
fn no_op_writes_emit_nothing() {
    let (_d, _db, mut h) = start();
    seed(&mut h, "m", 2);
    assert_eq!(unchanged(&mut h, "history.removeAt", json!({"index": 2})), json!({"removed": false}));
    assert_eq!(unchanged(&mut h, "history.removeAt", json!({"index": 99})), json!({"removed": false}));
    assert_eq!(
        unchanged(&mut h, "history.removeByAttachId", json!({"attachId": "nope"})),
        json!({"removedIndex": -1})
    );
    assert_eq!(
        unchanged(&mut h, "history.removeByAttachId", json!({"attachId": ""})),
        json!({"removedIndex": -1})
    );
    assert_eq!(unchanged(&mut h, "history.removeByAttachId", json!({})), json!({"removedIndex": -1}));
    assert_eq!(unchanged(&mut h, "history.removeLastPageContext", json!({})), json!({"removedIndex": -1}));
    assert_eq!(unchanged(&mut h, "history.truncateFrom", json!({"index": 2})), json!({"length": 2}));
    assert_eq!(unchanged(&mut h, "history.markImagesSeen", json!({})), json!({"stamped": 0}));
    assert_eq!(texts(&mut h), vec!["m0", "m1"]);
}

/// §4.2: "A write that changes nothing commits nothing and emits no event" also covers
/// clearing an already empty, unbound history and unbinding an unbound one.
#[test]
fn clearing_empty_and_unbinding_unbound_are_no_ops() {
    let (_d, _db, mut h) = start();
    assert_eq!(unchanged(&mut h, "history.clear", json!({})), json!({}));
    assert_eq!(unchanged(&mut h, "history.setBinding", json!({"id": ""})), json!({"activeSessionId": ""}));
    assert_eq!(unchanged(&mut h, "history.truncateFrom", json!({"index": 0})), json!({"length": 0}));
}

#[test]
fn real_writes_emit_changed_after_reply() {
    let (_d, _db, mut h) = start();
    let png = data_url("image/png", &png_bytes(2, 2, 7));
    let steps: Vec<(&str, Value, Value)> = vec![
        (
            "history.append",
            json!({"entry": {"role": "user", "content": [text_part("i"), image_part(&png)], "attachId": "A1"}}),
            json!({"length": 1, "index": 0}),
        ),
        (
            "history.append",
            json!({"entry": user(&format!("{PREFIX}\nURL: u"))}),
            json!({"length": 2, "index": 1}),
        ),
        ("history.markImagesSeen", json!({}), json!({"stamped": 1})),
        ("history.removeByAttachId", json!({"attachId": "A1"}), json!({"removedIndex": 0})),
        ("history.removeLastPageContext", json!({}), json!({"removedIndex": 0})),
        (
            "history.replace",
            json!({"entries": [user("a"), user("b"), user("c"), user("d")]}),
            json!({"length": 4}),
        ),
        ("history.removeAt", json!({"index": 3}), json!({"removed": true})),
        ("history.truncateFrom", json!({"index": 2}), json!({"length": 2})),
        ("history.clear", json!({}), json!({})),
    ];
    for (i, (op, mut args, want)) in steps.into_iter().enumerate() {
        let with_crid = i % 2 == 0;
        let crid = format!("w-{i}");
        if with_crid {
            args["clientRequestId"] = json!(crid);
        }
        let (mut r, ev) = changed(&mut h, op, args);
        if let Some(o) = r.as_object_mut() {
            // a write that starts a chat also says which session keeps it
            o.remove("kept");
            o.remove("evicted");
            o.remove("sessionId");
            o.remove("entryId");
        }
        assert_eq!(r, want, "{op}");
        assert_eq!(ev["event"], json!("changed"));
        assert_eq!(ev["areas"]["history"], json!(true), "{op}: {ev}");
        if op != "history.clear" {
            // the live chat is a session: its writes name it
            assert_eq!(ev["areas"]["sessions"]["ids"].as_array().map(Vec::len), Some(1), "{op}: {ev}");
        }
        assert_eq!(ev["seq"], meta(&mut h)["changeSeq"], "{op}: {ev}");
        if with_crid {
            assert_eq!(ev["clientRequestId"], json!(crid), "{op}: {ev}");
        } else {
            assert!(ev.get("clientRequestId").is_none(), "{op}: {ev}");
        }
    }
    assert_eq!(meta(&mut h)["length"], json!(0));
}

// ---------------------------------------------------------------------------------------------
// clientRequestId

#[test]
fn client_request_id_applies_once() {
    let (_d, db, mut h) = start();
    let (r1, ev) = changed(&mut h, "history.append", json!({"entry": user("a"), "clientRequestId": "c1"}));
    assert_eq!(placed(&r1), json!({"length": 1, "index": 0}));
    assert_eq!(r1["kept"]["created"], json!(true), "the first entry starts a kept chat");
    assert_eq!(ev["clientRequestId"], json!("c1"));
    h.ok("history.append", json!({"entry": user("b")}));

    let r2 = unchanged(&mut h, "history.append", json!({"entry": user("a"), "clientRequestId": "c1"}));
    assert_eq!(r2, r1, "replay must return the recorded result");
    assert_eq!(texts(&mut h), vec!["a", "b"]);
    let (op, result) = sql(&db)
        .query_row("SELECT op, result FROM client_requests WHERE client_request_id = 'c1'", [], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .unwrap();
    assert_eq!(op, "history.append");
    assert_eq!(serde_json::from_str::<Value>(&result).unwrap(), r1);

    // Same id, other operation: conflict, nothing applied.
    assert_eq!(h.err("history.clear", json!({"clientRequestId": "c1"})), "conflict");
    assert_eq!(h.err("history.removeAt", json!({"index": 0, "clientRequestId": "c1"})), "conflict");
    assert_eq!(texts(&mut h), vec!["a", "b"]);
}

#[test]
fn client_request_id_validation() {
    let (_d, _db, mut h) = start();
    for bad in [json!(""), json!("x".repeat(129)), json!(5), json!(["a"])] {
        assert_eq!(
            h.err("history.append", json!({"entry": user("x"), "clientRequestId": bad})),
            "bad_request",
            "{bad}"
        );
    }
    assert_eq!(meta(&mut h)["length"], json!(0));
    let r = h.ok("history.append", json!({"entry": user("a"), "clientRequestId": "x".repeat(128)}));
    assert_eq!(placed(&r), json!({"length": 1, "index": 0}));
    let r = h.ok("history.append", json!({"entry": user("b"), "clientRequestId": "é".repeat(128)}));
    assert_eq!(placed(&r), json!({"length": 2, "index": 1}));
    assert_eq!(h.err("history.clear", json!({"clientRequestId": ""})), "bad_request");
    assert_eq!(meta(&mut h)["length"], json!(2));
}

#[test]
fn failed_write_records_no_client_request_id() {
    let (_d, db, mut h) = start();
    let bad = json!({"entry": {"role": "system", "content": "x"}, "clientRequestId": "r1"});
    assert_eq!(h.err("history.append", bad), "bad_request");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM client_requests WHERE client_request_id = 'r1'"), 0);
    let r = h.ok("history.append", json!({"entry": user("ok"), "clientRequestId": "r1"}));
    assert_eq!(placed(&r), json!({"length": 1, "index": 0}));
    assert_eq!(texts(&mut h), vec!["ok"]);
}

#[test]
fn no_op_write_still_records_client_request_id() {
    let (_d, db, mut h) = start();
    seed(&mut h, "m", 1);
    let r = unchanged(&mut h, "history.removeAt", json!({"index": 5, "clientRequestId": "nop"}));
    assert_eq!(r, json!({"removed": false}));
    assert_eq!(
        q_str(&db, "SELECT op FROM client_requests WHERE client_request_id = 'nop'"),
        "history.removeAt"
    );

    // A retry returns the recorded answer even though index 0 now exists.
    let again = unchanged(&mut h, "history.removeAt", json!({"index": 0, "clientRequestId": "nop"}));
    assert_eq!(again, json!({"removed": false}));
    assert_eq!(texts(&mut h), vec!["m0"]);
    assert_eq!(h.err("history.append", json!({"entry": user("x"), "clientRequestId": "nop"})), "conflict");

    let r =
        unchanged(&mut h, "history.removeByAttachId", json!({"attachId": "zz", "clientRequestId": "nop2"}));
    assert_eq!(r, json!({"removedIndex": -1}));
    assert_eq!(
        q_str(&db, "SELECT result FROM client_requests WHERE client_request_id = 'nop2'")
            .parse::<Value>()
            .unwrap(),
        json!({"removedIndex": -1})
    );
}

// ---------------------------------------------------------------------------------------------
// stamps

#[test]
fn stamps_and_unknown_fields_are_stored_verbatim() {
    let (_d, db, mut h) = start();
    let png = png_bytes(2, 2, 3);
    let stamped = json!({
        "role": "user",
        "content": [
            text_part(&format!("{PREFIX}\nURL: https://v.example/watch")),
            {"type": "input_text", "text": "more"},
            {"type": "custom_part", "data": {"a": [1, 2, {"b": null}]}},
            image_part(&image_ref(&png)),
        ],
        "attachId": "0b6d4c1e-8f7a-4b1c-9d2e-3f4a5b6c7d8e",
        "videoSrc": {"platform": "youtube", "url": "https://v.example/watch", "tabId": 42},
        "summarized": true,
        "futureField": {"nested": [1, "two", null, {"deep": true}], "n": 1.25},
        "emptyObj": {},
    });
    let reply = json!({
        "role": "assistant",
        "content": "partial…",
        "providerLabel": "GPT-4o",
        "providerKey": {"name": "openai", "model": "gpt-4o"},
        "interrupted": true,
        "videoSrc": {"platform": "youtube", "url": "https://v.example/watch", "tabId": 42},
    });
    h.ok("history.append", json!({"entry": image_entry("seed", &data_url("image/png", &png))}));
    h.ok("history.append", json!({ "entry": stamped }));
    h.ok("history.append", json!({ "entry": reply }));
    let es = entries(&mut h);
    assert_eq!(es[1], stamped);
    assert_eq!(es[2], reply);
    assert_eq!(
        q_str(&db, "SELECT attach_id FROM history_entries WHERE attach_id IS NOT NULL"),
        "0b6d4c1e-8f7a-4b1c-9d2e-3f4a5b6c7d8e"
    );
    let roles = q_strs(&db, "SELECT role FROM history_entries ORDER BY position");
    assert_eq!(roles, vec!["user", "user", "assistant"]);

    // Rewrites (stamping, removals) preserve everything else.
    h.ok("history.markImagesSeen", json!({}));
    h.ok("history.removeAt", json!({"index": 0}));
    let es = entries(&mut h);
    let mut want = stamped.clone();
    want["imagesSeen"] = json!(true);
    assert_eq!(es[0], want);
    assert_eq!(es[1], reply);

    // replace stores stamps verbatim too.
    let mut no_image = stamped.clone();
    no_image["content"].as_array_mut().unwrap().pop();
    h.ok("history.replace", json!({"entries": [reply.clone(), no_image.clone()]}));
    assert_eq!(entries(&mut h), vec![reply, no_image]);
}

/// §2.6: a replace whose new list still uses a blob of the old list keeps the blob (it is never
/// unreferenced at commit time); a tool writing back what `history.get` returned must work.
#[test]
fn replace_with_entries_reusing_current_images_keeps_blob() {
    let (_d, db, mut h) = start();
    let png = png_bytes(3, 3, 6);
    h.ok("history.append", json!({"entry": image_entry("a", &data_url("image/png", &png))}));

    // Round trip with references.
    let refs = get(&mut h)["entries"].clone();
    assert_eq!(h.ok("history.replace", json!({"entries": refs.clone()})), json!({"length": 1}));
    assert_eq!(get(&mut h)["entries"], refs);
    assert_eq!(image_count(&db), 1);

    // Round trip with inline data URLs.
    let inline = h.ok("history.get", json!({}))["entries"].clone();
    let mut list = inline.as_array().unwrap().clone();
    list.push(user("b"));
    assert_eq!(h.ok("history.replace", json!({ "entries": list }))["length"], json!(2));
    assert_eq!(image_count(&db), 1);
    assert_eq!(h.ok("images.get", json!({"ref": image_ref(&png)}))["bytes"], json!(b64(&png)));
}

// ---------------------------------------------------------------------------------------------
// bound histories: trimming keeps the dropped entries aside; removals never trim

#[test]
fn trimming_a_bound_history_keeps_dropped_entries() {
    let (_d, db, mut h) = start();
    let first: Vec<Value> = (0..59).map(|i| user(&format!("s{i}"))).collect();
    let id = new_session(&mut h, first);
    h.ok("history.clear", json!({}));
    assert_eq!(h.ok("sessions.load", json!({ "id": id })), json!({"length": 59, "offset": 0}));
    assert_eq!(meta(&mut h)["activeSessionId"], json!(id));
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("n0")}))),
        json!({"length": 60, "index": 59})
    );
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("n1")}))),
        json!({"length": 60, "index": 59})
    );
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("n2")}))),
        json!({"length": 60, "index": 59})
    );
    let g = get(&mut h);
    assert_eq!(g["length"], json!(60));
    assert_eq!(g["activeSessionId"], json!(id));
    let mut want = names("s", 2..59);
    want.extend(names("n", 0..3));
    assert_eq!(texts(&mut h), want);

    // the trimmed entries are the session's kept prefix, its body the whole conversation
    assert_eq!(g["offset"], json!(2));
    let stored: Vec<Value> = q_strs(
        &db,
        &format!("SELECT entry FROM session_entries WHERE session_id = '{id}' AND branch_id IS NULL ORDER BY position"),
    )
    .iter()
    .map(|s| bare(&serde_json::from_str(s).unwrap()))
    .collect();
    assert_eq!(stored.len(), 62);
    assert_eq!(&stored[..2], &[user("s0"), user("s1")]);
    let mut all = names("s", 0..59);
    all.extend(names("n", 0..3));
    let b: Vec<String> = body(&mut h, &id)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(b, all);
}

/// A loaded session longer than the window shows the trim-rule suffix of its body; removals
/// never move the window (only writes that add entries trim).
#[test]
fn loading_a_long_session_windows_it_and_removals_never_trim() {
    let (_d, _db, mut h) = start();
    let id = new_session(&mut h, vec![user("b0")]);
    for i in 1..70 {
        let r = h.ok("sessions.appendTo", json!({"id": id, "entry": user(&format!("b{i}"))}));
        assert_eq!(r["target"], json!("session"));
    }
    h.ok("history.clear", json!({}));
    assert_eq!(h.ok("sessions.load", json!({ "id": id })), json!({"length": 60, "offset": 10}));
    assert_eq!(texts(&mut h), names("b", 10..70));
    assert_eq!(h.ok("history.removeAt", json!({"index": 0})), json!({"removed": true}));
    assert_eq!(meta(&mut h)["length"], json!(59));
    assert_eq!(h.ok("history.truncateFrom", json!({"index": 58})), json!({"length": 58}));
    assert_eq!(h.ok("history.markImagesSeen", json!({})), json!({"stamped": 0}));
    assert_eq!(texts(&mut h), names("b", 11..69));
    assert_eq!(meta(&mut h)["offset"], json!(10));
    // The next adding write trims.
    assert_eq!(
        placed(&h.ok("history.append", json!({"entry": user("new")}))),
        json!({"length": 59, "index": 58})
    );
    assert_eq!(body(&mut h, &id).as_array().unwrap().len(), 69);
}
