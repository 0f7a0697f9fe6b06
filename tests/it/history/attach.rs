//! Attaching (storage-model §2.4–2.6, §4.3, §6, §7.3, §7.4, §11) through the real binary over
//! pipes on a temp database: history.attach, the byte-budget pass after it, attach.summaryPlan /
//! applySummary, attach.trackChange, request.isContextOverflow, rescue builds and
//! request.commitRescue, and the seen flag in request bodies.
use crate::harness::*;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const PREFIX: &str = "[Page context attached by Keepsake]";
const REF_PREFIX: &str = "keepsake-image:sha256:";
const RESCUE_NOTE: &str = "[Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]";
const OVERFLOW: &str =
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.";
const BUDGET: u64 = 8_388_608;

// ---------------------------------------------------------------------------------------------
// helpers

fn start() -> (tempfile::TempDir, PathBuf, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.meta", json!({}));
    (dir, db, h)
}

fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

fn grouped(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn is_uuid_v4(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && s.chars()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || matches!(c, '0'..='9' | 'a'..='f'))
        && b[14] == b'4'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
}

fn ctx(url: &str, title: &str, mode: &str, body: &str) -> Value {
    json!({"url": url, "title": title, "mode": mode, "body": body})
}

/// The §2.4 text of a ctx without header, format, fallback or changedSince.
fn plain_text(url: &str, title: &str, mode: &str, body: &str) -> String {
    format!("{PREFIX}\nURL: {url}\nTitle: {title}\nMode: {mode}\n---\n\n{body}")
}

fn attach(h: &mut Host, args: Value) -> Value {
    h.ok("history.attach", args)
}

fn attach_id(r: &Value) -> String {
    r["attachId"].as_str().expect("attachId string").to_owned()
}

/// The live entries without the `entryId` stamps the host gives every stored entry.
fn live(h: &mut Host) -> Vec<Value> {
    bare(&h.ok("history.get", json!({"images": "ref"}))["entries"]).as_array().expect("entries").clone()
}

fn by_attach_id(h: &mut Host, id: &str) -> Value {
    live(h).into_iter().find(|e| e["attachId"] == json!(id)).unwrap_or_else(|| panic!("no live entry {id}"))
}

/// A rewritten entry split into the entry requests see and the `original` content it keeps (a
/// stub or a summary replaces what is sent, never what is kept).
fn and_original(e: &Value) -> (Value, Value) {
    let mut e = e.clone();
    let kept = e.as_object_mut().and_then(|o| o.remove("original")).unwrap_or(Value::Null);
    (e, kept["content"].clone())
}

fn image_ref(bytes: &[u8]) -> String {
    format!("{REF_PREFIX}{}", sha256_hex(bytes))
}

fn q_i64(db: &Path, q: &str) -> i64 {
    sql(db).query_row(q, [], |r| r.get(0)).unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn q_strs(db: &Path, q: &str) -> Vec<String> {
    let c = sql(db);
    let mut st = c.prepare(q).unwrap();
    let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// Everything a write could touch, to prove that something wrote nothing.
fn db_state(db: &Path) -> (Vec<String>, Vec<String>, i64, i64, i64, i64) {
    (
        q_strs(db, "SELECT entry FROM history_entries ORDER BY position"),
        q_strs(db, "SELECT entry FROM session_entries ORDER BY session_id, position"),
        q_i64(db, "SELECT count(*) FROM images"),
        q_i64(db, "SELECT count(*) FROM attachments"),
        q_i64(db, "SELECT count(*) FROM changes"),
        q_i64(db, "SELECT count(*) FROM attach_tracker"),
    )
}

fn attachments_row(db: &Path, id: &str) -> Option<(Value, i64, Option<String>)> {
    use rusqlite::OptionalExtension;
    sql(db)
        .query_row("SELECT ctx, paper, summary_source FROM attachments WHERE attach_id = ?1", [id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, Option<String>>(2)?))
        })
        .optional()
        .unwrap()
        .map(|(c, p, s)| (serde_json::from_str(&c).expect("ctx is JSON"), p, s))
}

fn url_chars_for(mime: &str, bytes: u64) -> u64 {
    5 + mime.len() as u64 + 8 + 4 * bytes.div_ceil(3)
}

fn image_urls(e: &Value) -> Vec<String> {
    match &e["content"] {
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "image_url")
            .map(|p| match &p["image_url"] {
                Value::String(s) => s.clone(),
                o => o["url"].as_str().unwrap_or_default().to_owned(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// URL chars of every live image (§2.6), from the `images` table.
fn live_image_chars(h: &mut Host, db: &Path) -> u64 {
    let mut total = 0;
    for e in live(h) {
        for u in image_urls(&e) {
            let sha = u.strip_prefix(REF_PREFIX).expect("stored as a reference");
            let (mime, len): (String, i64) = sql(db)
                .query_row("SELECT mime, byte_length FROM images WHERE sha256 = ?1", [sha], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            total += url_chars_for(&mime, len as u64);
        }
    }
    total
}

fn set_settings(h: &mut Host, map: Value) {
    h.ok("settings.set", json!({ "map": map }));
}

// ---------------------------------------------------------------------------------------------
// history.attach: text layout and result

#[test]
fn attach_text_layout_is_exact() {
    let (_d, db, mut h) = start();
    h.ok("history.append", json!({"entry": user("before")}));
    let full = json!({
        "url": "https://example.com/a?b=1",
        "title": "Example — 标题",
        "header": "Site: example.com\nAuthor: Ann\n",
        "mode": "full",
        "format": "markdown",
        "fallback": true,
        "changedSince": "3 days ago",
        "body": "Line one\n\nLine two 😀",
    });
    let r = attach(&mut h, json!({ "ctx": full }));
    let expected =
        "[Page context attached by Keepsake]\nURL: https://example.com/a?b=1\nTitle: Example — 标题\n\
        Site: example.com\nAuthor: Ann\nMode: full | markdown (fallback to full)\n\
        Note: this page's content has changed since it was last attached (previously attached 3 days ago).\n\
        ---\n\nLine one\n\nLine two 😀";
    let id = attach_id(&r);
    assert!(is_uuid_v4(&id), "attachId {id:?} is not a lower-case UUID v4");
    assert_eq!(r["length"], json!(2));
    assert_eq!(r["index"], json!(1));
    assert_eq!(r["summary"], json!({"needed": false, "family": "generic"}));
    let e = &live(&mut h)[1];
    assert_eq!(e, &json!({"role": "user", "content": expected, "attachId": id}));
    let stored = &h.ok("history.get", json!({}))["entries"][1];
    assert!(
        is_uuid_v4(stored["entryId"].as_str().unwrap_or_default()),
        "the stored entry's entryId: {stored}"
    );
    assert_eq!(q_strs(&db, "SELECT attach_id FROM history_entries WHERE position = 1"), vec![id.clone()]);

    // the minimal form: no header, empty format, no fallback, no changedSince; '' allowed
    let r2 = attach(
        &mut h,
        json!({"ctx": {"url": "", "title": "", "mode": "selection", "format": "", "fallback": false, "body": ""}}),
    );
    assert_eq!(by_attach_id(&mut h, &attach_id(&r2))["content"], json!(plain_text("", "", "selection", "")));
    assert_ne!(attach_id(&r2), id);
    assert_eq!(r2["length"], json!(3));
    assert_eq!(r2["index"], json!(2));

    // format without fallback; fallback without format
    let r3 = attach(
        &mut h,
        json!({"ctx": {"url": "u", "title": "t", "mode": "m", "format": "text", "body": "b"}}),
    );
    assert_eq!(
        by_attach_id(&mut h, &attach_id(&r3))["content"],
        json!(format!("{PREFIX}\nURL: u\nTitle: t\nMode: m | text\n---\n\nb"))
    );
    let r4 = attach(
        &mut h,
        json!({"ctx": {"url": "u", "title": "t", "mode": "m", "fallback": true, "body": "b"}}),
    );
    assert_eq!(
        by_attach_id(&mut h, &attach_id(&r4))["content"],
        json!(format!("{PREFIX}\nURL: u\nTitle: t\nMode: m (fallback to full)\n---\n\nb"))
    );
    let r5 = attach(
        &mut h,
        json!({"ctx": {"url": "u", "title": "t", "mode": "m", "changedSince": "yesterday", "body": "b"}}),
    );
    assert_eq!(
        by_attach_id(&mut h, &attach_id(&r5))["content"],
        json!(format!(
            "{PREFIX}\nURL: u\nTitle: t\nMode: m\nNote: this page's content has changed since it was last attached \
             (previously attached yesterday).\n---\n\nb"
        ))
    );
}

#[test]
fn attach_rejects_non_string_ctx_fields_and_stores_nothing() {
    let (_d, db, mut h) = start();
    let png = png_bytes(4, 4, 1);
    let state = db_state(&db);
    for key in ["url", "title", "mode", "body"] {
        for bad in [json!(5), json!(null), json!([]), json!({}), json!(true)] {
            let mut c = ctx("u", "t", "full", "b");
            c[key] = bad.clone();
            let args = json!({"ctx": c, "images": [data_url("image/png", &png)], "clientRequestId": format!("bad-{key}")});
            assert_eq!(h.err("history.attach", args), "bad_request", "ctx.{key} = {bad}");
        }
        let mut c = ctx("u", "t", "full", "b");
        c.as_object_mut().unwrap().remove(key);
        assert_eq!(h.err("history.attach", json!({ "ctx": c })), "bad_request", "ctx.{key} missing");
    }
    for args in [
        json!({"ctx": "text"}),
        json!({}),
        json!({"ctx": ctx("u", "t", "full", "b"), "placement": "middle"}),
        json!({"ctx": ctx("u", "t", "full", "b"), "placement": 1}),
    ] {
        assert_eq!(h.err("history.attach", args.clone()), "bad_request", "{args}");
    }
    assert_eq!(db_state(&db), state, "a refused attach stored something");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM client_requests"), 0);
}

#[test]
fn attach_stamps_video_source() {
    let (_d, _db, mut h) = start();
    let vs = json!({"platform": "youtube", "url": "https://youtu.be/x", "tabId": 7});
    let r = attach(
        &mut h,
        json!({"ctx": ctx("https://youtu.be/x", "V", "youtube", "transcript"), "videoSrc": vs}),
    );
    let e = by_attach_id(&mut h, &attach_id(&r));
    assert_eq!(e["videoSrc"], vs);
    assert_eq!(e["role"], "user");
    assert_eq!(r["summary"], json!({"needed": false, "family": "video"}));
    let r2 = attach(&mut h, json!({"ctx": ctx("u", "t", "full", "b")}));
    let e2 = by_attach_id(&mut h, &attach_id(&r2));
    let mut keys: Vec<&String> = e2.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, vec!["attachId", "content", "role"], "no videoSrc stamp without videoSrc");
}

// ---------------------------------------------------------------------------------------------
// images: anchors and end placement

#[test]
fn attach_interleaves_images_after_their_anchors() {
    let (_d, db, mut h) = start();
    let (a, b, c) = (png_bytes(5, 4, 1), png_bytes(6, 4, 2), png_bytes(7, 4, 3));
    let body = "Intro\n[Figure 1] chart one\nmiddle [图2] text\nmore [Figure 1] again\n[Figure 7] out of range\ntail";
    let r = attach(
        &mut h,
        json!({
            "ctx": ctx("https://p.example", "Paper", "full", body),
            "images": [data_url("image/png", &a), {"url": data_url("image/png", &b)}, image_part(&data_url("image/png", &c))],
        }),
    );
    let header = format!("{PREFIX}\nURL: https://p.example\nTitle: Paper\nMode: full\n---\n\n");
    let e = by_attach_id(&mut h, &attach_id(&r));
    assert_eq!(
        e["content"],
        json!([
            text_part(&format!("{header}Intro\n[Figure 1] chart one")),
            image_part(&image_ref(&a)),
            text_part("middle [图2] text"),
            image_part(&image_ref(&b)),
            text_part("more [Figure 1] again\n[Figure 7] out of range\ntail"),
            image_part(&image_ref(&c)),
        ])
    );
    // image data URLs became blobs
    for p in [&a, &b, &c] {
        let (mime, len, w): (String, i64, i64) = sql(&db)
            .query_row(
                "SELECT mime, byte_length, width FROM images WHERE sha256 = ?1",
                [sha256_hex(p)],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((mime.as_str(), len as usize), ("image/png", p.len()));
        assert!((5..=7).contains(&w));
    }
    assert!(!q_strs(&db, "SELECT entry FROM history_entries").concat().contains("data:image"));
    // read back inline, the parts are canonical data URLs
    let inline = h.ok("history.get", json!({}))["entries"][0].clone();
    assert_eq!(inline["content"][1], image_part(&data_url("image/png", &a)));

    // no anchors at all → [text, …images]
    let r2 = attach(
        &mut h,
        json!({"ctx": ctx("u", "t", "full", "no anchors"), "images": [data_url("image/png", &a)]}),
    );
    assert_eq!(
        by_attach_id(&mut h, &attach_id(&r2))["content"],
        json!([text_part(&plain_text("u", "t", "full", "no anchors")), image_part(&image_ref(&a))])
    );
    // an empty image list keeps the plain string
    let r3 = attach(&mut h, json!({"ctx": ctx("u", "t", "full", "[Figure 1] x"), "images": []}));
    assert_eq!(
        by_attach_id(&mut h, &attach_id(&r3))["content"],
        json!(plain_text("u", "t", "full", "[Figure 1] x"))
    );
}

#[test]
fn attach_placement_end_puts_images_after_the_text() {
    let (_d, _db, mut h) = start();
    let (a, b) = (png_bytes(5, 5, 9), png_bytes(8, 3, 10));
    let body = "[Figure 1] first\n[图2] second";
    let r = attach(
        &mut h,
        json!({"ctx": ctx("u", "t", "pdf", body), "placement": "end",
               "images": [{"url": data_url("image/png", &b)}, data_url("image/png", &a)]}),
    );
    assert_eq!(
        by_attach_id(&mut h, &attach_id(&r))["content"],
        json!([
            text_part(&plain_text("u", "t", "pdf", body)),
            image_part(&image_ref(&b)),
            image_part(&image_ref(&a))
        ])
    );
    let r2 = attach(
        &mut h,
        json!({"ctx": ctx("u", "t", "pdf", body), "placement": "anchors", "images": [data_url("image/png", &a)]}),
    );
    let c = by_attach_id(&mut h, &attach_id(&r2))["content"].clone();
    assert_eq!(c.as_array().unwrap().len(), 3, "anchors placement: {c}");
    assert_eq!(c[1], image_part(&image_ref(&a)));
}

// ---------------------------------------------------------------------------------------------
// metadata and trim

#[test]
fn attach_metadata_lives_as_long_as_the_entry() {
    let (_d, db, mut h) = start();
    let c = json!({"url": "https://m.example", "title": "M", "header": "Site: m\n", "mode": "full",
                   "format": "markdown", "changedSince": "today", "body": "the body text"});
    let r = attach(&mut h, json!({"ctx": c, "paper": true, "summarySource": "SOURCE TEXT"}));
    let id = attach_id(&r);
    let (meta, paper, source) = attachments_row(&db, &id).expect("metadata recorded");
    assert!(meta.get("body").is_none(), "metadata must not hold the body: {meta}");
    for k in ["url", "title", "header", "mode", "format", "changedSince"] {
        assert_eq!(meta[k], c[k], "ctx.{k}");
    }
    assert_eq!(paper, 1);
    assert_eq!(source.as_deref(), Some("SOURCE TEXT"));
    assert_eq!(r["summary"]["family"], "paper");

    let r2 = attach(&mut h, json!({"ctx": ctx("u", "t", "full", "b")}));
    let id2 = attach_id(&r2);
    let (_, paper2, source2) = attachments_row(&db, &id2).expect("metadata recorded");
    assert_eq!((paper2, source2), (0, None));

    // removed from the live history → in the trash with its entry; purged → gone
    assert_eq!(h.ok("history.removeByAttachId", json!({ "attachId": id })), json!({"removedIndex": 0}));
    assert!(attachments_row(&db, &id).is_some(), "the trashed entry keeps its metadata");
    let items = h.ok("trash.list", json!({}))["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1, "{items}");
    assert_eq!(items[0]["reason"], json!("undo-attach"));
    h.ok("trash.purge", json!({"id": items[0]["id"]}));
    assert!(attachments_row(&db, &id).is_none(), "metadata outlived its entry");
    assert!(attachments_row(&db, &id2).is_some());

    // held by the chat's session and a snapshot → kept until the last body holding it is purged
    let kept = h.ok("history.meta", json!({}))["activeSessionId"].as_str().unwrap().to_owned();
    let s = h.ok("sessions.save", json!({"name": "keep"}));
    let sid = s["session"]["id"].as_str().unwrap().to_owned();
    h.ok("history.clear", json!({}));
    assert!(attachments_row(&db, &id2).is_some(), "a saved body still holds the entry");
    for id in [&sid, &kept] {
        h.ok("sessions.delete", json!({ "id": id }));
        assert!(attachments_row(&db, &id2).is_some(), "a body in the trash still holds the entry");
    }
    h.ok("trash.purge", json!({ "id": sid }));
    assert!(attachments_row(&db, &id2).is_some(), "the chat's session still holds the entry");
    h.ok("trash.purge", json!({ "id": kept }));
    assert!(attachments_row(&db, &id2).is_none(), "metadata outlived the last body holding it");
}

#[test]
fn attach_trims_the_live_history() {
    let (_d, db, mut h) = start();
    let list: Vec<Value> = (0..60).map(|i| user(&format!("m{i}"))).collect();
    h.ok("history.replace", json!({ "entries": list }));
    let r = attach(&mut h, json!({"ctx": ctx("u", "t", "full", "b")}));
    assert_eq!((r["length"].clone(), r["index"].clone()), (json!(60), json!(59)));
    let l = live(&mut h);
    assert_eq!(l[0], user("m1"));
    assert_eq!(l[59]["attachId"], r["attachId"]);

    // by chars: 200,000 + the attach > 300,000 → the oldest goes; the attach is kept
    h.ok("history.replace", json!({"entries": [user(&"a".repeat(200_000)), user("b")]}));
    let r = attach(&mut h, json!({"ctx": ctx("u", "t", "full", &"x".repeat(120_000))}));
    assert_eq!((r["length"].clone(), r["index"].clone()), (json!(2), json!(1)));
    assert_eq!(live(&mut h)[0], user("b"));

    // an attach trimmed off the live window stays in the chat's session, with its metadata
    let id = attach_id(&r);
    let sid = h.ok("history.meta", json!({}))["activeSessionId"].as_str().unwrap().to_owned();
    let list: Vec<Value> = (0..60).map(|i| user(&format!("n{i}"))).collect();
    for e in list {
        h.ok("history.append", json!({ "entry": e }));
    }
    assert!(live(&mut h).iter().all(|e| e.get("attachId").is_none()));
    let body = bare(&h.ok("sessions.get", json!({ "id": sid }))["entries"]);
    assert_eq!(body.as_array().unwrap().iter().filter(|e| e["attachId"] == json!(id)).count(), 1, "{body}");
    assert!(attachments_row(&db, &id).is_some(), "the kept attach keeps its metadata");
}

// ---------------------------------------------------------------------------------------------
// the byte-budget pass after an attach (§4.3 step 4, §11.5)

/// Attach with a clientRequestId; return the result, the attach's own event, every event that
/// follows within `quiet`, and how many change rows the attach and what followed it logged.
fn attach_with_events(
    h: &mut Host,
    mut args: Value,
    crid: &str,
    quiet: Duration,
) -> (Value, Value, Vec<Value>, i64) {
    marker(h);
    h.events.clear();
    let rows_before = q_i64(&h.db, "SELECT count(*) FROM changes");
    args["clientRequestId"] = json!(crid);
    let r = h.ok("history.attach", args);
    assert!(h.events.is_empty(), "an event arrived before the attach reply: {:?}", h.events);
    let own = h
        .wait_event(Duration::from_secs(15), |e| e["event"] == "changed")
        .expect("the attach's changed event");
    assert_eq!(own["clientRequestId"], json!(crid), "the first event after the reply is the attach's: {own}");
    let mut rest = Vec::new();
    let deadline = Instant::now() + quiet;
    while let Some(e) = h.wait_event(deadline.saturating_duration_since(Instant::now()), |_| true) {
        rest.push(e);
    }
    (r, own, rest, q_i64(&h.db, "SELECT count(*) FROM changes") - rows_before)
}

#[test]
fn attach_pushing_images_over_budget_runs_a_second_write() {
    let (_d, db, mut h) = start();
    let big1 = noise_png(1000, 1000, 1);
    let big2 = noise_png(1000, 1000, 2);
    let small = noise_png(400, 400, 3);
    h.ok("history.append", json!({"entry": {"role": "user", "content": [text_part("one"), image_part(&data_url("image/png", &big1))]}}));
    h.ok("history.append", json!({"entry": {"role": "user", "content": [text_part("two"), image_part(&data_url("image/png", &big2))]}}));
    let before = live_image_chars(&mut h, &db);
    assert!(before <= BUDGET, "setup: {before} already over the budget");
    let added = url_chars_for("image/png", small.len() as u64);
    assert!(before + added > BUDGET, "setup: the attach must push the total over the budget");
    // §6.5: only the oldest entry needs bounding
    assert!(before + added - url_chars_for("image/png", big1.len() as u64) <= BUDGET);

    let (r, own, rest, logged) = attach_with_events(
        &mut h,
        json!({"ctx": ctx("u", "t", "screenshot", "(screenshot)"), "images": [data_url("image/png", &small)], "placement": "end"}),
        "attach-big",
        Duration::from_secs(15),
    );
    let second: Vec<&Value> = rest.iter().filter(|e| e["event"] == "changed").collect();
    assert_eq!(second.len(), 1, "exactly one host-started write after the attach: {rest:?}");
    let ev = second[0];
    assert!(ev.get("clientRequestId").is_none(), "the budget pass carries no clientRequestId: {ev}");
    assert_eq!(ev["areas"]["history"], json!(true));
    assert!(ev["seq"].as_i64().unwrap() > own["seq"].as_i64().unwrap());
    assert_eq!(logged, 2, "the attach and the budget pass are two commits");

    let l = live(&mut h);
    let thumb = image_urls(&l[0])[0].strip_prefix(REF_PREFIX).unwrap().to_owned();
    assert_ne!(thumb, sha256_hex(&big1), "the oldest image should be a thumbnail now");
    let (mime, is_thumb, src, w, hh): (String, i64, String, i64, i64) = sql(&db)
        .query_row(
            "SELECT mime, is_thumbnail, source_sha256, width, height FROM images WHERE sha256 = ?1",
            [&thumb],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!((mime.as_str(), is_thumb, src, w, hh), ("image/jpeg", 1, sha256_hex(&big1), 480, 480));
    assert_eq!(image_urls(&l[1]), vec![image_ref(&big2)]);
    assert_eq!(image_urls(&by_attach_id(&mut h, r["attachId"].as_str().unwrap())), vec![image_ref(&small)]);
}

#[test]
fn small_attach_gets_no_second_write() {
    let (_d, _db, mut h) = start();
    let img = noise_png(300, 300, 4);
    h.ok("history.append", json!({"entry": {"role": "user", "content": [text_part("one"), image_part(&data_url("image/png", &img))]}}));
    let (_r, _own, rest, logged) = attach_with_events(
        &mut h,
        json!({"ctx": ctx("u", "t", "full", "b"), "images": [data_url("image/png", &png_bytes(9, 9, 9))]}),
        "attach-small",
        Duration::from_millis(1200),
    );
    assert!(rest.is_empty(), "no second write when nothing needs bounding: {rest:?}");
    assert_eq!(logged, 1, "the budget pass must not commit when nothing changes");
}

// ---------------------------------------------------------------------------------------------
// summary decision (§7.4)

#[test]
fn summary_needed_only_over_the_threshold() {
    let (_d, _db, mut h) = start();
    fn sum(h: &mut Host, args: Value) -> Value {
        let r = attach(h, args);
        h.ok("history.clear", json!({}));
        r["summary"].clone()
    }
    let no = |f: &str| json!({"needed": false, "family": f});
    let yes = |f: &str| json!({"needed": true, "family": f});
    let b100k = "x".repeat(100_000);
    let b100k1 = "x".repeat(100_001);
    // default threshold 100,000 on the body part (the header does not count)
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k)})), no("generic"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1)})), yes("generic"));
    // UTF-16 units: 50,001 astral characters are 100,002 units
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &"😀".repeat(50_001))})), yes("generic"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "screenshot", &b100k1)})), no("generic"));
    // families
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "youtube", &b100k1)})), yes("video"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "bilibili", "short")})), no("video"));
    let vs = json!({"platform": "other", "url": "https://v.example", "tabId": 1});
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1), "videoSrc": vs})), yes("video"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1), "paper": true})), yes("paper"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "youtube", "s"), "paper": true})), no("video"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1), "paper": false})), yes("generic"));
    // summarySource replaces the body as the source
    assert_eq!(
        sum(&mut h, json!({"ctx": ctx("u", "t", "full", "short"), "summarySource": b100k1})),
        yes("generic")
    );
    assert_eq!(
        sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1), "summarySource": "short"})),
        no("generic")
    );

    // summarizeThresholdChars > 0 replaces 100,000; 0 means the default
    set_settings(&mut h, json!({"summarizeThresholdChars": 500}));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &"y".repeat(500))})), no("generic"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &"y".repeat(501))})), yes("generic"));
    set_settings(&mut h, json!({"summarizeThresholdChars": 0}));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &"y".repeat(501))})), no("generic"));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1)})), yes("generic"));

    // autoSummarizeAttachments: only false turns it off
    set_settings(&mut h, json!({"autoSummarizeAttachments": false}));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1)})), no("generic"));
    set_settings(&mut h, json!({"autoSummarizeAttachments": true}));
    assert_eq!(sum(&mut h, json!({"ctx": ctx("u", "t", "full", &b100k1)})), yes("generic"));
}

// ---------------------------------------------------------------------------------------------
// attach.summaryPlan

#[test]
fn summary_plan_reports_source_length_and_chunks() {
    let (_d, _db, mut h) = start();
    assert_eq!(h.err("attach.summaryPlan", json!({"attachId": "nope"})), "not_found");
    assert_eq!(h.err("attach.summaryPlan", json!({})), "bad_request");

    // 300 lines of 99 chars: chunks of 120, 120 and 60 lines (12,000 at most)
    let lines: Vec<String> = (0..300).map(|i| format!("{i:03}{}", "z".repeat(96))).collect();
    let body = lines.join("\n");
    let r = attach(&mut h, json!({"ctx": ctx("u", "t", "full", &body), "paper": true}));
    let p = h.ok("attach.summaryPlan", json!({"attachId": r["attachId"]}));
    assert_eq!(p["needed"], json!(false));
    assert_eq!(p["family"], json!("paper"));
    assert_eq!(p["originalLength"], json!(units(&body)));
    let chunks: Vec<String> =
        p["chunks"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[0], lines[..120].join("\n"));
    assert_eq!(chunks[1], lines[120..240].join("\n"));
    assert_eq!(chunks[2], lines[240..].join("\n"));
    assert!(chunks.iter().all(|c| units(c) <= 12_000));

    // originalLength counts UTF-16 units; summarySource is the source when given
    let astral = format!("{}中文", "😀".repeat(10));
    let r = attach(&mut h, json!({"ctx": ctx("u", "t", "full", &astral)}));
    let p = h.ok("attach.summaryPlan", json!({"attachId": r["attachId"]}));
    assert_eq!(p["originalLength"], json!(22));
    assert_eq!(p["chunks"], json!([astral]));
    let src = "the source\nin two lines";
    let r = attach(&mut h, json!({"ctx": ctx("u", "t", "youtube", "body ignored"), "summarySource": src}));
    let p = h.ok("attach.summaryPlan", json!({"attachId": r["attachId"]}));
    assert_eq!(p, json!({"needed": false, "family": "video", "originalLength": units(src), "chunks": [src]}));

    // anchored attaches count every text part (§11.2)
    let body = "before\n[Figure 1] fig\nafter";
    let r = attach(
        &mut h,
        json!({"ctx": ctx("u", "t", "full", body), "images": [data_url("image/png", &png_bytes(3, 3, 3))]}),
    );
    let p = h.ok("attach.summaryPlan", json!({"attachId": r["attachId"]}));
    assert_eq!(p["originalLength"], json!(units(body)));
    assert_eq!(p["chunks"], json!([body]));

    // an entry no longer in the live history
    let id = r["attachId"].as_str().unwrap().to_owned();
    h.ok("sessions.save", json!({"name": "held"}));
    h.ok("history.removeByAttachId", json!({"attachId": id}));
    assert_eq!(h.err("attach.summaryPlan", json!({"attachId": id})), "not_found");
}

#[test]
fn summary_plan_works_for_raw_attach_entries() {
    let (_d, _db, mut h) = start();
    let header =
        format!("{PREFIX}\nURL: https://raw.example\nTitle: Raw\nSite: raw\nMode: full | markdown\n---\n\n");
    let body = "raw body\nsecond line";
    h.ok(
        "history.append",
        json!({"entry": {"role": "user", "content": format!("{header}{body}"), "attachId": "raw-1"}}),
    );
    let p = h.ok("attach.summaryPlan", json!({"attachId": "raw-1"}));
    assert_eq!(
        p,
        json!({"needed": false, "family": "generic", "originalLength": units(body), "chunks": [body]})
    );

    let big = "w".repeat(100_001);
    let vs = json!({"platform": "youtube", "url": "https://y", "tabId": 2});
    h.ok("history.append", json!({"entry": {"role": "user", "content": format!("{header}{big}"), "attachId": "raw-2", "videoSrc": vs}}));
    let p = h.ok("attach.summaryPlan", json!({"attachId": "raw-2"}));
    assert_eq!(
        (p["needed"].clone(), p["family"].clone(), p["originalLength"].clone()),
        (json!(true), json!("video"), json!(100_001))
    );
    // one line longer than a chunk is split at the chunk size (§11.22)
    let chunks = p["chunks"].as_array().unwrap();
    assert!(chunks.iter().all(|c| units(c.as_str().unwrap()) <= 12_000));
    assert_eq!(chunks.iter().map(|c| c.as_str().unwrap()).collect::<String>(), big);

    // no `---` structure → not summarizable, however long
    h.ok("history.clear", json!({}));
    h.ok(
        "history.append",
        json!({"entry": {"role": "user", "content": format!("{PREFIX}\n{big}"), "attachId": "raw-3"}}),
    );
    let p = h.ok("attach.summaryPlan", json!({"attachId": "raw-3"}));
    assert_eq!(p["needed"], json!(false));
    assert_eq!(p["originalLength"], json!(0));
    assert_eq!(p["chunks"], json!([]));
}

// ---------------------------------------------------------------------------------------------
// attach.applySummary

#[test]
fn apply_summary_rebuilds_body_keeps_header_images_and_stamps() {
    let (_d, db, mut h) = start();
    let (a, b, c) = (png_bytes(5, 4, 1), png_bytes(6, 4, 2), png_bytes(7, 4, 3));
    let body =
        format!("Intro {}\n[Figure 1] one\nmid [Figure 2] two\n[Figure 3] three\nend", "q".repeat(1_200));
    let full = json!({"url": "https://s.example", "title": "S", "header": "Site: s\n", "mode": "full",
                      "format": "markdown", "body": body});
    let vs = json!({"platform": "youtube", "url": "https://s.example", "tabId": 3});
    let r = attach(
        &mut h,
        json!({"ctx": full, "videoSrc": vs, "images": [data_url("image/png", &a), data_url("image/png", &b), data_url("image/png", &c)]}),
    );
    let id = attach_id(&r);
    h.ok("history.append", json!({"entry": assistant("answer")}));
    h.ok("history.markImagesSeen", json!({}));

    // blank summary → bad_request, nothing changes
    let state = db_state(&db);
    for blank in ["", "   ", " \n\t "] {
        assert_eq!(h.err("attach.applySummary", json!({"attachId": id, "summary": blank})), "bad_request");
    }
    assert_eq!(h.err("attach.applySummary", json!({"attachId": id})), "bad_request");
    assert_eq!(h.err("attach.applySummary", json!({"attachId": id, "summary": 5})), "bad_request");
    // unknown attachId → {applied: false}, no write
    assert_eq!(
        unchanged(&mut h, "attach.applySummary", json!({"attachId": "unknown", "summary": "s"})),
        json!({"applied": false})
    );
    assert_eq!(db_state(&db).0, state.0);

    let summary = "Summary start\n[Figure 2] is the key chart\nend of summary";
    let (res, _) = changed(&mut h, "attach.applySummary", json!({"attachId": id, "summary": summary}));
    assert_eq!(res, json!({"applied": true}));
    let header =
        format!("{PREFIX}\nURL: https://s.example\nTitle: S\nSite: s\nMode: full | markdown\n---\n\n");
    let note =
        format!("[Keepsake: auto-condensed from {} chars — some detail may be lost]", grouped(units(&body)));
    assert!(units(&body) >= 1_000, "the grouped number needs a comma");
    let e = by_attach_id(&mut h, &id);
    assert_eq!(
        e["content"],
        json!([
            text_part(&format!("{header}{note}\n\nSummary start\n[Figure 2] is the key chart")),
            image_part(&image_ref(&b)),
            text_part("end of summary"),
            image_part(&image_ref(&a)),
            image_part(&image_ref(&c)),
        ])
    );
    assert_eq!(e["summarized"], json!(true));
    assert_eq!(e["attachId"], json!(id));
    assert_eq!(e["videoSrc"], vs);
    assert_eq!(e["imagesSeen"], json!(true), "other stamps are kept");
    assert_eq!(e["role"], "user");
    let p = h.ok("attach.summaryPlan", json!({ "attachId": id }));
    assert_eq!(p["needed"], json!(false));
    assert_eq!(p["family"], json!("video"));

    // a plain attach with a summarySource: n is the source's length; string content stays a string
    let src = "s".repeat(100_001);
    let r = attach(&mut h, json!({"ctx": ctx("u", "t", "full", "short body"), "summarySource": src}));
    let id2 = attach_id(&r);
    assert_eq!(r["summary"], json!({"needed": true, "family": "generic"}));
    h.ok("attach.applySummary", json!({"attachId": id2, "summary": "condensed"}));
    let (e, kept) = and_original(&by_attach_id(&mut h, &id2));
    assert_eq!(kept, json!(plain_text("u", "t", "full", "short body")), "the page as attached is kept");
    assert_eq!(
        e,
        json!({"role": "user", "attachId": id2, "summarized": true, "content": plain_text(
            "u", "t", "full", "[Keepsake: auto-condensed from 100,001 chars — some detail may be lost]\n\ncondensed")})
    );
    assert_eq!(h.ok("attach.summaryPlan", json!({ "attachId": id2 }))["needed"], json!(false));

    // gone from the live history → {applied: false}
    h.ok("history.removeByAttachId", json!({ "attachId": id2 }));
    assert_eq!(
        unchanged(&mut h, "attach.applySummary", json!({"attachId": id2, "summary": "again"})),
        json!({"applied": false})
    );
}

#[test]
fn apply_summary_on_a_raw_entry_keeps_the_stored_header() {
    let (_d, _db, mut h) = start();
    let header =
        format!("{PREFIX}\nURL: https://raw.example\nTitle: Raw\nSite: raw\nMode: full | markdown\n---\n\n");
    let body = "b".repeat(2_345);
    let vs = json!({"platform": "bilibili", "url": "https://b", "tabId": 4});
    h.ok(
        "history.append",
        json!({"entry": {"role": "user", "content": format!("{header}{body}"), "attachId": "raw-9", "videoSrc": vs, "x": 1}}),
    );
    assert_eq!(
        h.ok("attach.applySummary", json!({"attachId": "raw-9", "summary": "short"})),
        json!({"applied": true})
    );
    let (e, kept) = and_original(&by_attach_id(&mut h, "raw-9"));
    assert_eq!(kept, json!(format!("{header}{body}")), "the page as attached is kept");
    assert_eq!(
        e,
        json!({"role": "user", "attachId": "raw-9", "videoSrc": vs, "x": 1, "summarized": true,
               "content": format!("{header}[Keepsake: auto-condensed from 2,345 chars — some detail may be lost]\n\nshort")})
    );
    assert_eq!(h.ok("attach.summaryPlan", json!({"attachId": "raw-9"}))["needed"], json!(false));
}

// ---------------------------------------------------------------------------------------------
// attach.trackChange

fn track(h: &mut Host, mode: &str, url: &str, text: &str) -> Value {
    h.ok("attach.trackChange", json!({"mode": mode, "url": url, "text": text}))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn track_change_reports_changed_text() {
    let (_d, db, mut h) = start();
    let t0 = now_ms();
    assert_eq!(track(&mut h, "full", "https://a", "😀ab"), json!({"changed": false}));
    let t1 = now_ms();
    assert_eq!(track(&mut h, "full", "https://a", "😀ab"), json!({"changed": false}), "same text");
    let t2 = now_ms();
    let r = track(&mut h, "full", "https://a", "new text");
    assert_eq!(r["changed"], json!(true));
    assert_eq!(r["previousLength"], json!(4), "UTF-16 units of the previous text");
    let at = r["previousAttachedAt"].as_i64().expect("previousAttachedAt");
    assert!(at >= t0 && at <= t2, "previousAttachedAt {at} not within [{t0}, {t2}]");
    // every call overwrites the record: the same-text call between t1 and t2 is the previous one
    assert!(at >= t1, "previousAttachedAt {at} should be the same-text call's time (≥ {t1})");
    let r = track(&mut h, "full", "https://a", "third");
    assert_eq!((r["changed"].clone(), r["previousLength"].clone()), (json!(true), json!(8)));

    // modes of one URL are independent
    assert_eq!(track(&mut h, "selection", "https://a", "other"), json!({"changed": false}));
    assert_eq!(track(&mut h, "full", "https://a", "third"), json!({"changed": false}));
    let r = track(&mut h, "selection", "https://a", "third");
    assert_eq!((r["changed"].clone(), r["previousLength"].clone()), (json!(true), json!(5)));

    // empty url or text: exactly {changed: false} and nothing recorded
    let rows = q_i64(&db, "SELECT count(*) FROM attach_tracker");
    assert_eq!(
        unchanged(&mut h, "attach.trackChange", json!({"mode": "full", "url": "", "text": "x"})),
        json!({"changed": false})
    );
    assert_eq!(
        unchanged(&mut h, "attach.trackChange", json!({"mode": "full", "url": "https://a", "text": ""})),
        json!({"changed": false})
    );
    assert_eq!(
        unchanged(&mut h, "attach.trackChange", json!({"mode": "full", "url": "https://e", "text": ""})),
        json!({"changed": false})
    );
    assert_eq!(q_i64(&db, "SELECT count(*) FROM attach_tracker"), rows);
    // the empty-text call did not overwrite https://a's record; https://e has none
    assert_eq!(track(&mut h, "full", "https://a", "third"), json!({"changed": false}));
    assert_eq!(track(&mut h, "full", "https://e", "x"), json!({"changed": false}));

    for args in [
        json!({"mode": "full", "url": 1, "text": "x"}),
        json!({"mode": "full", "text": "x"}),
        json!({"url": "u", "text": "x"}),
    ] {
        assert_eq!(h.err("attach.trackChange", args.clone()), "bad_request", "{args}");
    }
}

#[test]
fn track_change_keeps_the_50_most_recent_keys() {
    let (_d, db, mut h) = start();
    for i in 0..55 {
        assert_eq!(track(&mut h, "full", &format!("https://k{i}"), "v1"), json!({"changed": false}));
    }
    assert_eq!(q_i64(&db, "SELECT count(*) FROM attach_tracker"), 50);
    // the 50 newest are remembered …
    for i in 5..55 {
        let r = track(&mut h, "full", &format!("https://k{i}"), "v2");
        assert_eq!(r["changed"], json!(true), "key k{i} should be remembered");
        assert_eq!(r["previousLength"], json!(2));
    }
    // … the 5 oldest were forgotten
    for i in 0..5 {
        assert_eq!(
            track(&mut h, "full", &format!("https://k{i}"), "v2"),
            json!({"changed": false}),
            "key k{i}"
        );
    }
    assert_eq!(q_i64(&db, "SELECT count(*) FROM attach_tracker"), 50);
}

// ---------------------------------------------------------------------------------------------
// request.isContextOverflow

#[test]
fn context_overflow_detection_over_the_wire() {
    let (_d, _db, mut h) = start();
    let yes = [
        OVERFLOW,
        "Error code: 400 - {'error': {'code': 'context_length_exceeded'}}",
        "prompt is too long: 215000 tokens > 200000 maximum",
        "Input length exceeds the context window",
        "The conversation has grown too long",
        "too many input tokens",
        "Request too large",
        "输入内容过长",
        "上下文长度超过模型限制",
    ];
    let no = [
        "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45000.",
        "Too many tokens, please wait before trying again.",
        "Rate limit reached: context length budget per min exceeded",
        "500 Internal Server Error",
        "model not found",
        "ECONNRESET: connection reset by peer",
        "",
    ];
    for m in yes {
        let r = h.call("request.isContextOverflow", json!({ "message": m }));
        assert_eq!(r["result"], json!(true), "{m:?}: {r}");
    }
    for m in no {
        let r = h.call("request.isContextOverflow", json!({ "message": m }));
        assert_eq!(r["result"], json!(false), "{m:?}: {r}");
    }
    assert_eq!(h.ok("request.isContextOverflow", json!({})), json!(false));
}

// ---------------------------------------------------------------------------------------------
// rescue builds and request.commitRescue

fn rescue_stub(title: &str, url: &str, text_len: usize) -> String {
    format!(
        "{PREFIX}\n{RESCUE_NOTE}\nTitle: {title}\nURL: {url}\nOriginal size: ~{text_len} chars. If you need exact \
         details from this page, ask the user to re-attach it."
    )
}

fn build_rescue(h: &mut Host, extra: Value) -> Value {
    let mut args = json!({"kind": "chat", "turn": {"userText": "q"}, "rescue": {"errorMessage": "maximum context length exceeded"}});
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    h.ok("request.build", args)
}

#[test]
fn rescue_build_writes_nothing_and_commit_stores_the_sent_stub() {
    let (_d, db, mut h) = start();
    let img = png_bytes(9, 9, 42);
    let body_a = format!("BODY-A {}", "a".repeat(9_000));
    let body_b = format!("BODY-B {}", "b".repeat(8_500));
    let vs = json!({"platform": "youtube", "url": "https://a.example", "tabId": 5});
    h.ok("history.append", json!({"entry": user("hello")}));
    let ra = attach(
        &mut h,
        json!({"ctx": ctx("https://a.example", "Big A", "full", &body_a), "images": [data_url("image/png", &img)], "placement": "end", "videoSrc": vs}),
    );
    h.ok("history.append", json!({"entry": assistant("ok")}));
    let rb = attach(&mut h, json!({"ctx": ctx("https://b.example", "Big B", "full", &body_b)}));
    let rc = attach(&mut h, json!({"ctx": ctx("https://c.example", "Small C", "full", "tiny")}));
    let (ida, idb, idc) = (attach_id(&ra), attach_id(&rb), attach_id(&rc));
    let text_a = plain_text("https://a.example", "Big A", "full", &body_a);
    let text_b = plain_text("https://b.example", "Big B", "full", &body_b);

    let state = db_state(&db);
    let built = build_rescue(&mut h, json!({}));
    assert_eq!(db_state(&db), state, "request.build wrote something");
    let rescue = &built["rescue"];
    assert_eq!(rescue["applied"], json!(true), "{rescue}");
    assert!(rescue.get("reason").is_none() || rescue["reason"].is_null(), "{rescue}");
    assert_eq!(rescue["changed"], json!([{"index": 1, "attachId": ida}, {"index": 3, "attachId": idb}]));
    let msgs = built["body"]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 6, "{msgs:?}");
    let stub_a = msgs[1]["content"].as_str().expect("stub is a plain string").to_owned();
    assert_eq!(stub_a, rescue_stub("Big A", "https://a.example", units(&text_a)));
    assert_eq!(msgs[3]["content"], json!(rescue_stub("Big B", "https://b.example", units(&text_b))));
    assert_eq!(msgs[4]["content"], json!(plain_text("https://c.example", "Small C", "full", "tiny")));
    assert_eq!(msgs[0], json!({"role": "user", "content": "hello"}));
    assert_eq!(msgs[5], json!({"role": "user", "content": "q"}));
    // byte-identical on a rebuild
    assert_eq!(build_rescue(&mut h, json!({}))["body"], built["body"]);

    // commit A only
    let (r, _) = changed(&mut h, "request.commitRescue", json!({"attachIds": [ida]}));
    assert_eq!(r, json!({"committed": 1}));
    let l = live(&mut h);
    let (a_now, a_kept) = and_original(&l[1]);
    assert_eq!(a_now, json!({"role": "user", "content": stub_a, "attachId": ida, "videoSrc": vs}));
    assert!(a_kept.to_string().contains("BODY-A"), "the page text is kept on the entry");
    let raw: String = sql(&db)
        .query_row(
            "SELECT json_extract(entry, '$.content') FROM history_entries WHERE attach_id = ?1",
            [&ida],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(raw.as_bytes(), stub_a.as_bytes(), "stored stub differs from the sent one");
    assert_eq!(l[3]["content"], json!(text_b), "B was not named");
    assert_eq!(l[4]["content"], json!(plain_text("https://c.example", "Small C", "full", "tiny")));
    // the stub replaces what requests send, not what is kept: the page and its picture stay on the
    // entry (`original`), nothing goes to the trash
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images"), 1, "the stubbed entry's picture is kept");
    assert!(a_kept.to_string().contains("keepsake-image:sha256:"), "{a_kept}");
    assert_eq!(h.ok("trash.list", json!({}))["items"], json!([]));

    // small, already stubbed or unknown entries are not committed
    for ids in [json!([idc]), json!([ida]), json!(["unknown"]), json!([])] {
        assert_eq!(
            unchanged(&mut h, "request.commitRescue", json!({ "attachIds": ids })),
            json!({"committed": 0}),
            "{ids}"
        );
    }
    assert_eq!(h.err("request.commitRescue", json!({})), "bad_request");
    assert_eq!(h.err("request.commitRescue", json!({"attachIds": "x"})), "bad_request");
    assert_eq!(h.err("request.commitRescue", json!({"attachIds": [1]})), "bad_request");
}

#[test]
fn rescue_stubs_entries_without_attach_id_but_never_commits_them() {
    let (_d, db, mut h) = start();
    let text = format!("{PREFIX}\nURL: https://raw\nTitle: Raw\nMode: full\n---\n\n{}", "r".repeat(8_000));
    h.ok("history.append", json!({"entry": {"role": "user", "content": text}}));
    let built = build_rescue(&mut h, json!({}));
    assert_eq!(built["rescue"]["applied"], json!(true));
    assert_eq!(built["rescue"]["changed"], json!([{"index": 0, "attachId": null}]));
    assert_eq!(
        built["body"]["messages"][0]["content"],
        json!(rescue_stub("Raw", "https://raw", units(&text)))
    );
    let rows = q_strs(&db, "SELECT entry FROM history_entries");
    assert_eq!(unchanged(&mut h, "request.commitRescue", json!({"attachIds": []})), json!({"committed": 0}));
    assert_eq!(q_strs(&db, "SELECT entry FROM history_entries"), rows);

    // 7,999 chars of attach text: too small to stub
    let small = format!("{PREFIX}\nURL: u\nTitle: t\nMode: full\n---\n\n");
    let small = format!("{small}{}", "s".repeat(7_999 - units(&small)));
    assert_eq!(units(&small), 7_999);
    h.ok("history.replace", json!({"entries": [{"role": "user", "content": small, "attachId": "s1"}]}));
    let built = build_rescue(&mut h, json!({}));
    assert_eq!(built["rescue"]["applied"], json!(false));
    assert_eq!(built["rescue"]["reason"], json!("nothing_to_stub"));
    assert_eq!(
        unchanged(&mut h, "request.commitRescue", json!({"attachIds": ["s1"]})),
        json!({"committed": 0})
    );
}

#[test]
fn commit_rescue_into_a_session_or_falling_back_to_live() {
    let (_d, db, mut h) = start();
    let body = format!("SESSION-BODY-MARK {}", "s".repeat(9_000));
    h.ok("history.append", json!({"entry": user("hello")}));
    let r = attach(&mut h, json!({"ctx": ctx("https://s.example", "Sess", "full", &body)}));
    let id = attach_id(&r);
    let kept = h.ok("history.meta", json!({}))["activeSessionId"].clone();
    let saved = h.ok("sessions.save", json!({"name": "routed"}));
    let sid = saved["session"]["id"].as_str().unwrap().to_owned();
    assert_ne!(json!(sid), kept, "saving makes a snapshot");
    assert_eq!(h.ok("history.meta", json!({}))["activeSessionId"], kept, "saving does not bind");

    let built = build_rescue(&mut h, json!({"source": {"sessionId": sid}}));
    assert_eq!(built["source"], json!("session"));
    assert_eq!(built["rescue"]["changed"], json!([{"index": 1, "attachId": id}]));
    let stub = built["body"]["messages"][1]["content"].as_str().unwrap().to_owned();
    assert_eq!(
        stub,
        rescue_stub(
            "Sess",
            "https://s.example",
            units(&plain_text("https://s.example", "Sess", "full", &body))
        )
    );

    let (c, ev) = changed(&mut h, "request.commitRescue", json!({"attachIds": [id], "sessionId": sid}));
    assert_eq!(c, json!({"committed": 1}));
    assert_eq!(ev["areas"]["sessions"]["ids"], json!([sid]), "{ev}");
    let sbody = bare(&h.ok("sessions.get", json!({ "id": sid }))["entries"]);
    let (s1, s1_kept) = and_original(&sbody[1]);
    assert_eq!(s1, json!({"role": "user", "content": stub, "attachId": id}));
    assert!(s1_kept.to_string().contains("SESSION-BODY-MARK"), "the page is kept on the entry");
    assert_eq!(sbody[0], user("hello"));
    // the live copy is untouched
    assert_eq!(
        by_attach_id(&mut h, &id)["content"],
        json!(plain_text("https://s.example", "Sess", "full", &body))
    );
    // search data follows the body
    let search: String = sql(&db)
        .query_row("SELECT text FROM search_text WHERE session_id = ?1", [&sid], |r| r.get(0))
        .unwrap();
    assert!(search.contains("too large for the model's context window"), "search text not updated");
    assert!(!search.contains("SESSION-BODY-MARK"), "search text still holds the old body");
    // (only the live chat's own session, whose copy was not stubbed, still holds it)
    let hits = h.list(json!({"query": "SESSION-BODY-MARK"}));
    let hit_ids: Vec<&Value> = hits.as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(hit_ids, vec![&kept], "{hits}");

    // a session that no longer exists → the live history
    let (c, _) = changed(
        &mut h,
        "request.commitRescue",
        json!({"attachIds": [id], "sessionId": "5f0c1d2e-0000-4000-8000-000000000000"}),
    );
    assert_eq!(c, json!({"committed": 1}));
    assert_eq!(by_attach_id(&mut h, &id)["content"], json!(stub));

    // the bound session → the live history, which is the window onto that session's body: the
    // stub is written once, and nothing else in the body changes
    h.ok("sessions.load", json!({ "id": sid }));
    let r2 = attach(&mut h, json!({"ctx": ctx("https://t.example", "T", "full", &"t".repeat(9_000))}));
    let id2 = attach_id(&r2);
    let body_rows = |db: &Path| {
        q_strs(db, &format!("SELECT entry FROM session_entries WHERE session_id = '{sid}' ORDER BY position"))
    };
    let before = body_rows(&db);
    let (c, _) = changed(&mut h, "request.commitRescue", json!({"attachIds": [id2], "sessionId": sid}));
    assert_eq!(c, json!({"committed": 1}));
    let content = by_attach_id(&mut h, &id2)["content"].as_str().unwrap().to_owned();
    assert!(content.starts_with(&format!("{PREFIX}\n{RESCUE_NOTE}\nTitle: T\n")), "{content}");
    let after = body_rows(&db);
    assert_eq!(after.len(), before.len());
    let differ: Vec<usize> = (0..after.len()).filter(|&i| after[i] != before[i]).collect();
    assert_eq!(differ, vec![before.len() - 1], "only the named attach entry changed");
    let sbody = bare(&h.ok("sessions.get", json!({ "id": sid }))["entries"]);
    assert_eq!(sbody.as_array().unwrap().last().unwrap()["content"], json!(content));
}

#[test]
fn rescue_not_applied_reasons() {
    let (_d, _db, mut h) = start();
    let body = format!("FULL-BODY {}", "k".repeat(9_000));
    attach(&mut h, json!({"ctx": ctx("https://k", "K", "full", &body)}));
    let full = plain_text("https://k", "K", "full", &body);

    // agent is not rescuable; the body is still built
    let b = h.ok(
        "request.build",
        json!({"kind": "agent", "turn": {"userText": "q"}, "rescue": {"errorMessage": OVERFLOW}}),
    );
    assert_eq!(b["rescue"]["applied"], json!(false));
    assert_eq!(b["rescue"]["reason"], json!("kind"));
    assert_eq!(b["rescue"]["changed"], json!([]));
    assert!(b["body"]["text"].as_str().unwrap().contains("FULL-BODY"), "agent body: {}", b["body"]);

    // a 429 rate-limit text is not an overflow
    let msg = "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45000.";
    let b = build_rescue(&mut h, json!({"rescue": {"errorMessage": msg}}));
    assert_eq!(b["rescue"]["applied"], json!(false));
    assert_eq!(b["rescue"]["reason"], json!("not_overflow"));
    assert_eq!(b["rescue"]["changed"], json!([]));
    assert_eq!(b["body"]["messages"][0]["content"], json!(full), "the body is built normally");

    // nothing large enough to stub
    h.ok("history.replace", json!({"entries": [user("hi"), assistant("hello")]}));
    let b = build_rescue(&mut h, json!({}));
    assert_eq!(b["rescue"]["applied"], json!(false));
    assert_eq!(b["rescue"]["reason"], json!("nothing_to_stub"));
    assert_eq!(b["rescue"]["changed"], json!([]));
    assert_eq!(b["body"]["messages"], json!([user("hi"), assistant("hello"), user("q")]));
}

// ---------------------------------------------------------------------------------------------
// the seen flag in request bodies (§6.1–6.3)

#[test]
fn seen_images_become_labels_in_request_bodies() {
    let (_d, db, mut h) = start();
    let (p1, f1, f2) = (png_bytes(6, 6, 1), png_bytes(7, 7, 2), png_bytes(8, 8, 3));
    h.ok("history.append", json!({"entry": {"role": "user", "content": [text_part("look at this"), image_part(&data_url("image/png", &p1))]}}));
    h.ok("history.append", json!({"entry": assistant("nice")}));
    let body =
        "Paper text\n## Figures\nCaptions extracted from the PDF.\n1. Revenue by year\n2. Figure on page 3";
    let r = attach(
        &mut h,
        json!({"ctx": ctx("https://pdf", "PDF", "pdf", body), "placement": "end",
               "images": [data_url("image/png", &f1), data_url("image/png", &f2)]}),
    );
    let text = plain_text("https://pdf", "PDF", "pdf", body);
    let chat = |h: &mut Host| {
        h.ok("request.build", json!({"kind": "chat", "turn": {"userText": "q"}}))["body"].clone()
    };

    // unseen: pixels are sent
    let b = chat(&mut h);
    assert_eq!(
        b["messages"][0]["content"],
        json!([text_part("look at this"), image_part(&data_url("image/png", &p1))])
    );
    assert_eq!(b["messages"][2]["content"][2], image_part(&data_url("image/png", &f2)));

    let (m, _) = changed(&mut h, "history.markImagesSeen", json!({}));
    assert_eq!(m, json!({"stamped": 2}));
    assert_eq!(unchanged(&mut h, "history.markImagesSeen", json!({})), json!({"stamped": 0}));
    let l = live(&mut h);
    assert_eq!((l[0]["imagesSeen"].clone(), l[2]["imagesSeen"].clone()), (json!(true), json!(true)));
    assert!(l[1].get("imagesSeen").is_none());
    // pixels are untouched in storage
    assert_eq!(image_urls(&l[0]), vec![image_ref(&p1)]);

    let b = chat(&mut h);
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [text_part("look at this"), text_part("[image 1]")]},
            {"role": "assistant", "content": "nice"},
            {"role": "user", "content": [text_part(&text), text_part("[Revenue by year]"), text_part("[Figure on page 3]")]},
            {"role": "user", "content": "q"},
        ])
    );
    let s = b.to_string();
    for bad in ["imagesSeen", "data:image", "keepsake-image", "attachId", r["attachId"].as_str().unwrap()] {
        assert!(!s.contains(bad), "{bad:?} leaked into the body: {s}");
    }

    // the markImagesSeen option of history.append stamps earlier image-bearing entries
    let p2 = png_bytes(9, 9, 4);
    h.ok("history.append", json!({"entry": {"role": "user", "content": [text_part("second"), image_part(&data_url("image/png", &p2))]}}));
    let b = chat(&mut h);
    assert_eq!(
        b["messages"][3]["content"][1],
        image_part(&data_url("image/png", &p2)),
        "unseen until stamped"
    );
    let (_, _) =
        changed(&mut h, "history.append", json!({"entry": assistant("done"), "markImagesSeen": true}));
    let l = live(&mut h);
    assert_eq!(l[3]["imagesSeen"], json!(true));
    assert!(l[4].get("imagesSeen").is_none(), "a text-only entry is not image-bearing");
    let stored: String =
        sql(&db).query_row("SELECT entry FROM history_entries WHERE position = 3", [], |r| r.get(0)).unwrap();
    assert!(stored.contains("\"imagesSeen\":true"));
    let b = chat(&mut h);
    assert_eq!(b["messages"][3]["content"], json!([text_part("second"), text_part("[image 1]")]));
    assert!(!b.to_string().contains("imagesSeen"));
    // other kinds never carry the flag either
    for kind in ["responses", "anthropic", "runs", "agent"] {
        let b = h.ok("request.build", json!({"kind": kind, "turn": {"userText": "q"}}))["body"].to_string();
        assert!(!b.contains("imagesSeen"), "{kind}: {b}");
        assert!(!b.contains("data:image") && !b.contains("iVBOR"), "{kind} carries seen pixels: {b}");
    }
}
