//! Framing, envelope hardening, chunked replies, stdout hygiene, lifecycle and event ordering
//! (PROTOCOL.md §1–§4; platform.md §1–§5; reliability.md §8 and T01–T06, T22) against the real
//! binary over pipes.
use crate::harness::*;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// PROTOCOL.md §1: the host exits within 500 ms of a clean EOF.
const EXIT_LIMIT: Duration = Duration::from_millis(500);
/// PROTOCOL.md §4: commits by other processes are announced within 1 s; we allow 1.5 s.
const ANNOUNCE_WAIT: Duration = Duration::from_millis(1500);
const REPLY_WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// helpers

fn count_changes(db: &Path) -> i64 {
    sql(db).query_row("SELECT count(*) FROM changes", [], |r| r.get(0)).unwrap()
}

/// A database holding some state, closed again (no host running).
fn populated_db() -> (tempfile::TempDir, std::path::PathBuf) {
    let (d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"theme": "dark"}}));
    h.ok("history.append", json!({"entry": user("hello")}));
    h.ok("history.append", json!({"entry": assistant("hi there")}));
    h.ok("sessions.save", json!({"name": "seed"}));
    let (code, _) = h.close();
    assert_eq!(code, Some(0));
    (d, db)
}

/// Wait for a child to exit on its own (stdin still open); returns (code, elapsed since `t0`).
fn wait_exit(h: &mut Host, t0: Instant, limit: Duration) -> (Option<i32>, Duration) {
    loop {
        if let Some(st) = h.child.try_wait().unwrap() {
            return (st.code(), t0.elapsed());
        }
        if t0.elapsed() > limit {
            panic!("host did not exit within {limit:?}");
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Next frame that is not an event (events are queued).
fn next_reply(h: &mut Host, timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = h.recv_raw(left).expect("a reply frame");
        if v.get("event").is_some() {
            h.events.push_back(v);
            continue;
        }
        return v;
    }
}

fn assert_error(v: &Value, code: &str, id: &Value, what: &str) {
    assert_eq!(v["ok"], json!(false), "{what}: expected an error reply, got {v}");
    assert_eq!(v["error"]["code"], json!(code), "{what}: wrong error code in {v}");
    assert!(
        v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: error without a message: {v}"
    );
    assert_eq!(&v["id"], id, "{what}: wrong id in {v}");
    assert!(v.get("result").is_none(), "{what}: error reply carries a result: {v}");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

// ---------------------------------------------------------------------------------------------
// chunked replies (PROTOCOL.md §3, T05)

#[test]
fn large_history_get_is_chunked_under_the_frame_cap_and_reassembles_exactly() {
    let t = Instant::now();
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let mut stored = Vec::new();
    for i in 0..3u64 {
        let png = noise_png(720, 720, i + 1);
        assert!(png.len() > 1_400_000, "noise PNG only {} bytes", png.len());
        let url = data_url("image/png", &png);
        let r = h.ok(
            "history.append",
            json!({"entry": {"role": "user", "content": [text_part(&format!("picture {i}")), image_part(&url)]}}),
        );
        assert_eq!(r["index"], json!(i));
        stored.push((url, sha256_hex(&png), png));
    }
    h.settle(Duration::from_millis(300));
    h.events.clear();

    // Reassemble by hand to check the chunk envelope itself.
    let first = h.frame_sizes.len();
    h.send(&json!({"id": "big-1", "op": "history.get", "args": {"images": "inline"}}));
    let mut pieces: Vec<String> = Vec::new();
    let mut count = None;
    loop {
        let v = h.recv_raw(REPLY_WAIT).expect("chunk frame");
        assert!(v.get("event").is_none(), "event between chunks of one reply: {v}");
        assert_eq!(v["id"], json!("big-1"), "frame for another id between chunks: {v}");
        let c = v.get("chunk").unwrap_or_else(|| {
            panic!("a reply of several MB came unchunked ({} bytes)", h.frame_sizes.last().unwrap())
        });
        assert_eq!(c["index"].as_u64(), Some(pieces.len() as u64), "chunk index order");
        let n = c["count"].as_u64().expect("chunk count");
        assert_eq!(*count.get_or_insert(n), n, "chunk count changed between chunks");
        let data = v["data"].as_str().expect("chunk data string");
        let escaped = serde_json::to_string(data).unwrap().len() - 2;
        assert!(escaped <= 700 * 1024, "chunk data {escaped} bytes escaped, over 700 KiB");
        pieces.push(data.to_owned());
        if pieces.len() as u64 == n {
            break;
        }
    }
    let sizes = h.frame_sizes[first..].to_vec();
    let largest = *sizes.iter().max().unwrap();
    let text = pieces.concat();
    eprintln!(
        "chunked reply: {} bytes of JSON in {} frames, largest frame {largest} bytes",
        text.len(),
        sizes.len()
    );
    assert!(sizes.len() >= 2);
    assert!(largest <= MAX_FRAME, "frame of {largest} bytes exceeds 1,048,576");
    let reply: Value = serde_json::from_str(&text).expect("joined chunk data is the reply's JSON");
    assert_eq!(reply["id"], json!("big-1"));
    assert_eq!(reply["ok"], json!(true), "{}", &text[..200.min(text.len())]);
    let entries = reply["result"]["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 3);
    assert_eq!(reply["result"]["length"], json!(3));
    for (i, (e, (url, _, _))) in entries.iter().zip(&stored).enumerate() {
        assert_eq!(e["role"], json!("user"));
        assert_eq!(e["content"][0]["text"], json!(format!("picture {i}")));
        let got = e["content"][1]["image_url"]["url"].as_str().expect("inline url");
        assert!(got == url.as_str(), "entry {i}: data URL differs (len {} vs {})", got.len(), url.len());
    }

    // The harness' reassembly agrees, and the ref form is small enough for a single frame.
    let again = h.ok("history.get", json!({}));
    assert_eq!(again["entries"], reply["result"]["entries"], "images default to inline");
    let before = h.frame_sizes.len();
    let refs = h.ok("history.get", json!({"images": "ref"}));
    assert_eq!(h.frame_sizes.len() - before, 1, "a small reply must not be chunked");
    for (e, (_, hash, _)) in refs["entries"].as_array().unwrap().iter().zip(&stored) {
        assert_eq!(e["content"][1]["image_url"]["url"], json!(format!("keepsake-image:sha256:{hash}")));
    }
    // images.get of one ~1.5 MB image is chunked too and returns the same bytes.
    let img = h.ok("images.get", json!({"ref": format!("keepsake-image:sha256:{}", stored[1].1)}));
    assert_eq!(img["mime"], json!("image/png"));
    assert_eq!(
        format!("data:image/png;base64,{}", img["bytes"].as_str().unwrap()),
        stored[1].0,
        "images.get bytes differ from what was stored"
    );
    let largest_all = *h.frame_sizes.iter().max().unwrap();
    assert!(largest_all <= MAX_FRAME, "frame of {largest_all} bytes");

    // The stream is still in sync: the next request is answered.
    let hello = h.hello();
    assert_eq!(hello["name"], json!("keepsake-host"));
    let (code, took) = h.close();
    assert_eq!(code, Some(0));
    eprintln!("largest frame overall {largest_all} bytes; exit after {took:?}; test {:?}", t.elapsed());
}

// ---------------------------------------------------------------------------------------------
// oversized and truncated frames (T01, T02)

#[test]
fn oversized_length_prefix_gets_one_too_large_error_and_a_clean_exit() {
    let (_d, db) = populated_db();
    let before = db_fingerprint(&db);
    let mut worst = Duration::ZERO;
    for &n in &[67_108_865u32, 1 << 31, u32::MAX] {
        for variant in ["eof-open", "junk", "first-bytes"] {
            let mut h = Host::spawn(&db);
            if variant != "first-bytes" {
                h.hello();
            }
            let t0 = Instant::now();
            h.write_raw(&n.to_ne_bytes());
            if variant == "junk" {
                h.write_raw(&[b'x'; 4096]);
            }
            let v =
                h.recv_raw(Duration::from_secs(5)).unwrap_or_else(|| panic!("no error frame for prefix {n}"));
            assert_error(&v, "too_large", &Value::Null, &format!("prefix {n} ({variant})"));
            // Stdin stays open: the host must leave by itself, writing nothing more.
            let (code, took) = wait_exit(&mut h, t0, Duration::from_secs(5));
            assert!(h.recv_raw(Duration::from_millis(200)).is_none(), "second frame after too_large");
            eprintln!("prefix {n} ({variant}): exit code {code:?} after {took:?}");
            assert!(code.is_some(), "host killed by a signal after prefix {n}");
            if variant != "first-bytes" {
                worst = worst.max(took);
            }
            assert!(took < EXIT_LIMIT, "prefix {n} ({variant}): exit took {took:?}");
        }
    }
    eprintln!("oversized prefix: worst error+exit time {worst:?}");
    assert_eq!(db_fingerprint(&db), before, "an oversized frame changed the database");
}

#[test]
fn truncated_frames_then_eof_exit_zero_with_no_reply_and_no_write() {
    let t = Instant::now();
    let (_d, db) = populated_db();
    let before = db_fingerprint(&db);
    let changes_before = count_changes(&db);
    let body = json!({"id": 1, "op": "history.append",
                      "args": {"entry": user("TRUNCATED WRITE"), "clientRequestId": "trunc-1"}})
    .to_string()
    .into_bytes();
    let l = body.len();
    // (declared length, bytes delivered after the prefix bytes, prefix bytes delivered)
    let mut cases: Vec<(u32, usize, usize)> = Vec::new();
    for declared in [1u32, 100, l as u32, 70_000, 67_108_864] {
        for k in 1..4 {
            cases.push((declared, 0, k)); // EOF inside the prefix
        }
    }
    for k in 0..l {
        cases.push((l as u32, k, 4)); // EOF at every point inside the body
    }
    for extra in 1..=60 {
        cases.push((l as u32 + extra, l, 4)); // a complete JSON text, but the frame is longer
    }
    for declared in [1_000u32, 65_536, 1_000_000, 67_108_864] {
        for k in [0usize, 1, 4, 999, 4096, 65_535, 200_000] {
            if (k as u64) < declared as u64 {
                cases.push((declared, k, 4)); // large declared lengths, partial bodies
            }
        }
    }
    // Pseudo-random declared lengths and cut points.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let declared = 5 + (x % 2_000_000) as u32;
        let k = ((x >> 32) % u64::from(declared).min(200_000)) as usize;
        cases.push((declared, k, 4));
    }
    let mut pad = body.clone();
    pad.resize(1_000_000, b' ');
    let mut served = 0usize;
    let mut worst = Duration::ZERO;
    for (n, (declared, k, prefix)) in cases.iter().enumerate() {
        let mut h = Host::spawn(&db);
        // Every other case starts with a complete request, which must be answered.
        let lead = n % 2 == 0;
        if lead {
            h.send(&json!({"id": "lead", "op": "history.meta"}));
        }
        let mut bytes = declared.to_ne_bytes()[..*prefix].to_vec();
        if *prefix == 4 {
            bytes.extend_from_slice(&pad[..*k]);
        }
        h.write_raw(&bytes);
        h.close_stdin();
        if lead {
            let v = h.recv_raw(Duration::from_secs(10)).expect("reply to the leading request");
            assert_eq!(v["id"], json!("lead"));
            assert_eq!(v["ok"], json!(true));
            served += 1;
        }
        if let Some(v) = h.recv_raw(Duration::from_secs(10)) {
            panic!(
                "case {n} (declared {declared}, {k} body bytes, {prefix} prefix bytes): unexpected frame {v}"
            );
        }
        let (code, took) = h.close();
        assert_eq!(code, Some(0), "case {n} (declared {declared}, {k} body bytes, {prefix} prefix bytes)");
        worst = worst.max(took);
    }
    assert_eq!(count_changes(&db), changes_before);
    assert_eq!(db_fingerprint(&db), before, "a truncated frame changed the database");
    eprintln!(
        "truncated frames: {} cases, exit 0 in all, {served} leading requests answered, worst exit {worst:?}, {:?} total",
        cases.len(),
        t.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// malformed payloads (T03)

#[test]
fn malformed_payloads_get_typed_errors_and_the_stream_stays_usable() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.hello();
    let null = Value::Null;
    // (raw body, expected code, expected id, label)
    let cases: Vec<(Vec<u8>, &str, Value, &str)> = vec![
        (Vec::new(), "bad_request", null.clone(), "zero-length frame"),
        (b"{\"id\":1,\"op\":\"host.hello\",\"args\":{\"x\":\"\xff\xfe\"}}".to_vec(), "bad_request", null.clone(), "invalid UTF-8"),
        (b"\xc3\x28".to_vec(), "bad_request", null.clone(), "invalid UTF-8 only"),
        (b"{\"id\":2,".to_vec(), "bad_request", null.clone(), "invalid JSON (cut)"),
        (b"{id:3}".to_vec(), "bad_request", null.clone(), "invalid JSON (bare key)"),
        (b"{\"id\":4,\"op\":\"host.hello\"} trailing".to_vec(), "bad_request", null.clone(), "trailing garbage"),
        (b"[1,2,3]".to_vec(), "bad_request", null.clone(), "array"),
        (b"\"host.hello\"".to_vec(), "bad_request", null.clone(), "string"),
        (b"42".to_vec(), "bad_request", null.clone(), "number"),
        (b"null".to_vec(), "bad_request", null.clone(), "null"),
        (b"true".to_vec(), "bad_request", null.clone(), "boolean"),
        (b"{\"op\":\"host.hello\",\"args\":{}}".to_vec(), "bad_request", null.clone(), "missing id"),
        (b"{\"id\":true,\"op\":\"host.hello\"}".to_vec(), "bad_request", null.clone(), "boolean id"),
        (b"{\"id\":{\"n\":1},\"op\":\"host.hello\"}".to_vec(), "bad_request", null.clone(), "object id"),
        (b"{\"id\":[5],\"op\":\"host.hello\"}".to_vec(), "bad_request", null.clone(), "array id"),
        (b"{\"id\":null,\"op\":\"host.hello\"}".to_vec(), "bad_request", null.clone(), "null id"),
        (b"{\"id\":7,\"args\":{}}".to_vec(), "bad_request", json!(7), "missing op"),
        (b"{\"id\":8,\"op\":5}".to_vec(), "bad_request", json!(8), "op not a string"),
        (b"{\"id\":9,\"op\":\"host.hello\",\"args\":[1]}".to_vec(), "bad_request", json!(9), "args array"),
        (b"{\"id\":10,\"op\":\"history.get\",\"args\":\"x\"}".to_vec(), "bad_request", json!(10), "args string"),
        (b"{\"id\":11,\"op\":\"host.hello\",\"args\":{},\"extra\":1}".to_vec(), "bad_request", json!(11), "extra envelope field"),
        (b"{\"id\":\"s-12\",\"op\":\"host.hello\",\"ok\":true}".to_vec(), "bad_request", json!("s-12"), "reply field in a request"),
        (b"{\"id\":13,\"op\":\"nope.nothing\",\"args\":{}}".to_vec(), "unknown_op", json!(13), "unknown op"),
        (b"{\"id\":\"abc\",\"op\":\"history.drop\"}".to_vec(), "unknown_op", json!("abc"), "unknown op, string id"),
        (b"{\"id\":15,\"op\":\"history.get\",\"args\":{\"bogus\":1}}".to_vec(), "bad_request", json!(15), "unknown argument"),
        (b"{\"id\":16,\"op\":\"history.get\",\"args\":{\"clientRequestId\":\"r\"}}".to_vec(), "bad_request", json!(16), "clientRequestId on a read"),
        (b"{\"id\":17,\"op\":\"history.append\",\"args\":{\"entry\":{\"role\":\"system\",\"content\":\"x\"}}}".to_vec(), "bad_request", json!(17), "unknown role"),
        (b"{\"id\":18,\"op\":\"history.append\",\"args\":{\"entry\":{\"role\":\"user\",\"content\":5}}}".to_vec(), "bad_request", json!(18), "content of the wrong type"),
        (b"{\"id\":19,\"op\":\"history.get\",\"args\":{\"from\":\"5\"}}".to_vec(), "bad_request", json!(19), "index as a string"),
        (b"{\"id\":20,\"op\":\"history.append\",\"args\":{\"entry\":\"hi\"}}".to_vec(), "bad_request", json!(20), "entry not an object"),
        (b"{\"id\":21,\"op\":\"settings.set\",\"args\":{\"map\":{\"k\":1},\"clientRequestId\":\"\"}}".to_vec(), "bad_request", json!(21), "empty clientRequestId"),
        (format!("{{\"id\":\"{}\",\"op\":\"host.hello\"}}", "i".repeat(300)).into_bytes(), "bad_request", Value::Null, "id over 256 bytes"),
    ];
    let mut answered = 0;
    for (i, (body, code, id, label)) in cases.iter().enumerate() {
        h.send_frame(body);
        let v = next_reply(&mut h, REPLY_WAIT);
        if *label == "id over 256 bytes" {
            // The id is too long to echo or may be echoed; either way the code is bad_request.
            assert_eq!(v["ok"], json!(false), "{label}: {v}");
            assert_eq!(v["error"]["code"], json!("bad_request"), "{label}: {v}");
            assert!(v["id"].is_null() || v["id"].as_str().is_some_and(|s| s.len() == 300), "{label}: {v}");
        } else {
            assert_error(&v, code, id, label);
        }
        // The next valid request is answered.
        let next = json!(format!("next-{i}"));
        h.send(&json!({"id": next, "op": "history.meta", "args": {}}));
        let r = next_reply(&mut h, REPLY_WAIT);
        assert_eq!(r["id"], next, "after {label}: {r}");
        assert_eq!(r["ok"], json!(true), "after {label}: {r}");
        answered += 1;
    }
    // Numbers are valid ids, and args may be absent.
    h.send_frame(b"{\"id\":-3.5,\"op\":\"history.meta\"}");
    let r = next_reply(&mut h, REPLY_WAIT);
    assert_eq!(r["id"], json!(-3.5));
    assert_eq!(r["ok"], json!(true));
    // Nothing was written by any malformed request.
    assert_eq!(h.ok("history.meta", json!({}))["length"], json!(0));
    assert_eq!(h.ok("settings.get", json!({"keys": ["k"]})), json!({}));
    assert!(h.events.is_empty(), "malformed requests emitted events: {:?}", h.events);
    let (code, _) = h.close();
    assert_eq!(code, Some(0));
    eprintln!(
        "malformed payloads: {} cases, typed errors 100%, next request answered {answered}/{}",
        cases.len(),
        cases.len()
    );
}

// ---------------------------------------------------------------------------------------------
// depth bombs (T04)

/// `{"id":id,"op":"settings.set","args":{"map":{"deep":<k nested arrays>}}}`: total depth 3 + k.
fn deep_settings_set(id: u64, k: usize, objects: bool) -> Vec<u8> {
    let mut s = format!("{{\"id\":{id},\"op\":\"settings.set\",\"args\":{{\"map\":{{\"deep\":");
    if objects {
        for _ in 0..k {
            s.push_str("{\"a\":");
        }
        s.push('1');
        s.push_str(&"}".repeat(k));
    } else {
        s.push_str(&"[".repeat(k));
        s.push_str(&"]".repeat(k));
    }
    s.push_str("}}}");
    s.into_bytes()
}

#[test]
fn depth_bombs_are_refused_without_crashing_and_shallow_nesting_is_served() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.hello();
    // Depth 127 (3 envelope levels + 124 arrays): accepted and stored.
    h.send_frame(&deep_settings_set(127, 124, false));
    let v = next_reply(&mut h, REPLY_WAIT);
    assert_eq!(v["id"], json!(127));
    assert_eq!(v["ok"], json!(true), "depth 127 refused: {v}");
    let stored = h.ok("settings.get", json!({"keys": ["deep"]}));
    let mut d = 0;
    let mut cur = &stored["deep"];
    while let Some(a) = cur.as_array() {
        d += 1;
        match a.first() {
            Some(x) => cur = x,
            None => break,
        }
    }
    assert_eq!(d, 124, "stored value lost nesting");
    // Depth 128: the boundary itself (serde_json refuses at 128); report only.
    h.send_frame(&deep_settings_set(128, 125, false));
    let v = next_reply(&mut h, REPLY_WAIT);
    eprintln!("depth 128: ok={} code={}", v["ok"], v["error"]["code"]);
    h.hello();

    let mut times = Vec::new();
    for (label, total, objects) in [
        ("129 arrays", 129usize, false),
        ("129 objects", 129, true),
        ("10,000 arrays", 10_000, false),
        ("10,000 objects", 10_000, true),
        ("1,000,000 arrays", 1_000_000, false),
        ("1,000,000 objects", 1_000_000, true),
    ] {
        let body = deep_settings_set(9, total - 3, objects);
        let t0 = Instant::now();
        h.send_frame(&body);
        let v = next_reply(&mut h, Duration::from_secs(30));
        let took = t0.elapsed();
        times.push(took);
        eprintln!("depth {label}: {} bytes refused in {took:?}", body.len());
        assert_eq!(v["ok"], json!(false), "depth {label} accepted: {v}");
        assert_eq!(v["error"]["code"], json!("too_large"), "depth {label}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("levels deep"), "depth {label}: {v}");
        assert_eq!(v["id"], json!(9), "depth {label}: the refusal names its request: {v}");
        let hello = h.hello();
        assert_eq!(hello["name"], json!("keepsake-host"), "after depth {label}");
    }
    // Deep nesting inside an entry (a stamp) is accepted at depth 127 and refused past 128.
    let entry_deep = |id: u64, k: usize| {
        format!(
            "{{\"id\":{id},\"op\":\"history.append\",\"args\":{{\"entry\":{{\"role\":\"user\",\"content\":\"x\",\"stamp\":{}{}}}}}}}",
            "[".repeat(k),
            "]".repeat(k)
        )
        .into_bytes()
    };
    // 3 levels (envelope, args, entry) + 124 arrays = depth 127.
    h.send_frame(&entry_deep(30, 124));
    let v = next_reply(&mut h, REPLY_WAIT);
    assert_eq!(v["ok"], json!(true), "entry at depth 127 refused: {v}");
    h.send_frame(&entry_deep(31, 10_000));
    let v = next_reply(&mut h, REPLY_WAIT);
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["error"]["code"], json!("too_large"));
    assert_eq!(h.ok("history.meta", json!({}))["length"], json!(1));
    let (code, _) = h.close();
    assert_eq!(code, Some(0), "host crashed on depth bombs");
    times.sort();
    eprintln!("depth bombs: max rejection time {:?}", times.last().unwrap());
}

// ---------------------------------------------------------------------------------------------
// stdout hygiene (T06)

fn suite_requests(png_url: &str) -> Vec<Value> {
    let mut v = vec![
        json!({"id": 1, "op": "host.hello"}),
        json!({"id": 2, "op": "settings.set", "args": {"map": {"theme": "dark", "n": [1, 2, 3]}, "clientRequestId": "h-2"}}),
        json!({"id": 3, "op": "settings.get", "args": {"keys": ["theme", "n", "absent"]}}),
        json!({"id": 4, "op": "history.append", "args": {"entry": user("hello\nworld \u{1F600} 猫")}}),
        json!({"id": 5, "op": "history.append", "args": {"entry": {"role": "user", "content": [text_part("look"), image_part(png_url)]}}}),
        json!({"id": 6, "op": "history.append", "args": {"entry": assistant("a reply")}}),
        json!({"id": 7, "op": "history.get", "args": {"images": "inline"}}),
        json!({"id": 8, "op": "history.meta"}),
        json!({"id": 9, "op": "sessions.save", "args": {"name": "hygiene"}}),
        json!({"id": 10, "op": "sessions.list", "args": {"query": "world"}}),
        json!({"id": 11, "op": "changes.since", "args": {"seq": 0}}),
        json!({"id": 12, "op": "history.markImagesSeen"}),
        json!({"id": 13, "op": "history.removeAt", "args": {"index": 0}}),
        json!({"id": 14, "op": "nope.nope"}),
        json!({"id": 15, "op": "history.get", "args": {"bogus": true}}),
        json!({"id": 16, "op": "sessions.get", "args": {"id": "missing"}}),
        json!({"id": 17, "op": "settings.set", "args": {"map": {"theme": "dark"}, "clientRequestId": "h-2"}}),
        json!({"id": 18, "op": "history.clear", "args": {"saveCurrent": true}}),
        json!({"id": 19, "op": "sessions.clearAll"}),
    ];
    v.push(json!({"id": 20, "op": "history.replace", "args": {"entries": [user("x"), assistant("y")]}}));
    v
}

#[test]
fn stdout_carries_only_frames_at_trace_log_level() {
    let (_d, db) = temp_db();
    let png = png_bytes(64, 48, 7);
    let url = data_url("image/png", &png);
    let reqs = suite_requests(&url);

    // 1. Through the harness (it panics on any non-frame byte).
    let mut h = Host::spawn_with(&db, &[ORIGIN], &[("KEEPSAKE_LOG", "trace")]);
    for r in &reqs {
        h.send(r);
        let v = h.reply_for(&r["id"], REPLY_WAIT);
        assert!(v.get("ok").is_some(), "{v}");
    }
    h.send_frame(b"not json");
    assert_eq!(next_reply(&mut h, REPLY_WAIT)["error"]["code"], json!("bad_request"));
    h.close_stdin();
    while h.recv_raw(Duration::from_secs(5)).is_some() {}
    let (code, _) = h.close();
    assert_eq!(code, Some(0));

    // 2. Every byte of stdout, captured whole, parses as a sequence of frames.
    let log = db.parent().unwrap().join("keepsake-host.log");
    let log_before = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    assert!(log_before > 0, "no log file written beside the database at {}", log.display());
    let mut input = Vec::new();
    for r in &reqs {
        let b = r.to_string().into_bytes();
        input.extend_from_slice(&(b.len() as u32).to_ne_bytes());
        input.extend_from_slice(&b);
    }
    input.extend_from_slice(&0u32.to_ne_bytes());
    let mut child = Command::new(BIN)
        .arg(ORIGIN)
        .env("KEEPSAKE_DB", &db)
        .env("KEEPSAKE_LOG", "trace")
        .env("RUST_LOG", "trace")
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || {
        stdin.write_all(&input).unwrap();
    });
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = thread::spawn(move || {
        let mut s = Vec::new();
        stderr.read_to_end(&mut s).unwrap();
        s
    });
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    writer.join().unwrap();
    let status = child.wait().unwrap();
    let err = err_reader.join().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut off = 0;
    let mut frames = Vec::new();
    while off < out.len() {
        assert!(off + 4 <= out.len(), "stdout ends inside a length prefix at byte {off}");
        let n = u32::from_ne_bytes(out[off..off + 4].try_into().unwrap()) as usize;
        assert!(n <= MAX_FRAME, "frame of {n} bytes at byte {off}");
        assert!(off + 4 + n <= out.len(), "stdout ends inside a frame body at byte {off}");
        let v: Value = serde_json::from_slice(&out[off + 4..off + 4 + n])
            .unwrap_or_else(|e| panic!("non-JSON frame at byte {off}: {e}"));
        assert!(v.is_object());
        frames.push(v);
        off += 4 + n;
    }
    let replies: Vec<&Value> = frames.iter().filter(|f| f.get("event").is_none()).collect();
    let events = frames.len() - replies.len();
    // One reply per request, plus one for the zero-length frame.
    assert_eq!(replies.len(), reqs.len() + 1);
    for r in &reqs {
        assert_eq!(replies.iter().filter(|v| v["id"] == r["id"]).count(), 1, "reply to {}", r["id"]);
    }
    let log_after = std::fs::metadata(&log).unwrap().len();
    assert!(log_after > log_before, "the trace-level run wrote nothing to {}", log.display());
    let text = std::fs::read_to_string(&log).unwrap();
    let levels: Vec<(String, usize)> = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
        .iter()
        .map(|l| (l.to_string(), text.lines().filter(|x| x.contains(&format!(" {l} "))).count()))
        .collect();
    eprintln!(
        "stdout hygiene: {} bytes = {} frames ({} events), non-frame bytes 0; stderr {} bytes; log {} bytes {levels:?}",
        out.len(),
        frames.len(),
        events,
        err.len(),
        log_after
    );
    // Nothing in the frames leaks log text.
    assert!(!String::from_utf8_lossy(&out).contains("keepsake-host serving"));
}

// ---------------------------------------------------------------------------------------------
// lifecycle (T22, platform.md §4–§5)

#[test]
fn stdin_eof_exits_zero_quickly_over_many_cycles() {
    let (_d, db) = temp_db();
    let mut times = Vec::new();
    for i in 0..50 {
        let mut h = Host::spawn(&db);
        match i % 3 {
            0 => {
                h.hello();
            }
            1 => {
                h.ok(
                    "history.append",
                    json!({"entry": user(&format!("cycle {i}")), "clientRequestId": format!("cy-{i}")}),
                );
            }
            _ => {} // EOF before any request
        }
        let (code, took) = h.close();
        assert_eq!(code, Some(0), "cycle {i}");
        assert!(took < EXIT_LIMIT, "cycle {i}: exit took {took:?}");
        times.push(took);
    }
    times.sort();
    eprintln!(
        "EOF → exit over {} cycles: p50 {:?}, p99 {:?}, max {:?}",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().unwrap()
    );
    // The WAL is checkpointed on the last close.
    let wal = db.with_file_name("keepsake.db-wal");
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    eprintln!("-wal after last close: {wal_len} bytes");
    assert_eq!(wal_len, 0, "WAL not checkpointed on last close");
    let mut h = Host::spawn(&db);
    assert_eq!(h.ok("history.meta", json!({}))["length"], json!(17));
}

#[test]
fn a_request_followed_by_eof_is_finished_and_answered() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.send(&json!({"id": 1, "op": "history.append", "args": {"entry": user("last words"), "clientRequestId": "lw"}}));
    h.close_stdin();
    let v = next_reply(&mut h, REPLY_WAIT);
    assert_eq!(v["id"], json!(1));
    assert_eq!(v["ok"], json!(true), "{v}");
    let (code, took) = h.close();
    assert_eq!(code, Some(0));
    assert!(took < EXIT_LIMIT, "{took:?}");
    let n: i64 = sql(&db).query_row("SELECT count(*) FROM history_entries", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);
}

#[test]
fn trailing_parent_window_argument_is_ignored() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn_with(&db, &[ORIGIN, "--parent-window=0"], &[]);
    let r = h.hello();
    assert_eq!(r["dbPath"], json!(db.display().to_string()));
    assert!(r["dbError"].is_null());
    h.ok("history.append", json!({"entry": user("from windows")}));
    assert_eq!(h.ok("history.meta", json!({}))["length"], json!(1));
    let (code, took) = h.close();
    assert_eq!(code, Some(0));
    assert!(took < EXIT_LIMIT);
}

#[test]
fn firefox_style_launch_serves() {
    let (d, db) = temp_db();
    let manifest = d.path().join("dev.keepsake.host.json");
    std::fs::write(&manifest, "{}").unwrap();
    let m = manifest.to_str().unwrap().to_owned();
    // the Firefox build's add-on ID (other IDs: tests/it/host/lifecycle.rs, the caller check)
    let mut h = Host::spawn_with(&db, &[&m, "keepsake@keepsake.dev"], &[]);
    let r = h.hello();
    assert_eq!(r["name"], json!("keepsake-host"));
    assert_eq!(r["dbPath"], json!(db.display().to_string()));
    assert!(r["dbError"].is_null());
    h.ok("settings.set", json!({"map": {"browser": "firefox"}}));
    let (code, took) = h.close();
    assert_eq!(code, Some(0));
    assert!(took < EXIT_LIMIT);
    let v: String =
        sql(&db).query_row("SELECT value FROM settings WHERE key = 'browser'", [], |r| r.get(0)).unwrap();
    assert_eq!(v, "\"firefox\"");
}

// ---------------------------------------------------------------------------------------------
// events (PROTOCOL.md §4)

#[test]
fn reply_precedes_its_event_and_replays_reads_and_no_ops_emit_nothing() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.hello();
    h.send(&json!({"id": "w1", "op": "history.append", "args": {"entry": user("one"), "clientRequestId": "ev-1"}}));
    let first = h.recv_raw(REPLY_WAIT).expect("a frame");
    assert_eq!(first["id"], json!("w1"), "first frame after a write must be its reply, got {first}");
    assert_eq!(first["ok"], json!(true));
    let second = h.recv_raw(REPLY_WAIT).expect("the changed event");
    assert_eq!(second["event"], json!("changed"), "{second}");
    assert!(second.get("id").is_none());
    assert_eq!(second["clientRequestId"], json!("ev-1"));
    assert_eq!(second["areas"]["history"], json!(true));
    let seq = second["seq"].as_i64().expect("seq");
    let db_seq: i64 = sql(&db).query_row("SELECT max(seq) FROM changes", [], |r| r.get(0)).unwrap();
    assert_eq!(seq, db_seq);

    // Replay: same result, nothing applied, nothing emitted.
    let again = h.ok("history.append", json!({"entry": user("one"), "clientRequestId": "ev-1"}));
    assert_eq!(again, first["result"]);
    // Reads and a no-op write emit nothing either.
    h.ok("history.get", json!({}));
    h.ok("settings.remove", json!({"keys": ["never-set"]}));
    h.settle(Duration::from_millis(700));
    assert!(h.events.is_empty(), "replay/read/no-op emitted {:?}", h.events);
    assert_eq!(h.ok("history.meta", json!({}))["length"], json!(1));

    // The next real write is announced once, after its reply, with a higher seq.
    h.send(&json!({"id": "w2", "op": "settings.set", "args": {"map": {"k": 1}}}));
    let r = h.recv_raw(REPLY_WAIT).unwrap();
    assert_eq!(r["id"], json!("w2"));
    let ev = h.recv_raw(REPLY_WAIT).unwrap();
    assert_eq!(ev["event"], json!("changed"));
    assert!(ev["seq"].as_i64().unwrap() > seq);
    assert!(ev.get("clientRequestId").is_none() || ev["clientRequestId"].is_null());
    assert_eq!(ev["areas"]["settings"], json!(["k"]));
    assert!(ev["areas"].get("history").is_none(), "{ev}");
    h.settle(Duration::from_millis(700));
    assert!(h.events.is_empty(), "duplicate events: {:?}", h.events);
}

#[test]
fn writes_from_another_process_are_announced_within_a_second_exactly_once() {
    let (d, db) = temp_db();
    let mut a = Host::spawn(&db);
    let mut b = Host::spawn(&db);
    a.hello();
    b.hello();
    b.settle(Duration::from_millis(400));
    a.settle(Duration::from_millis(10));
    let mut lat = Vec::new();
    for i in 0..5 {
        let crid = format!("x-{i}");
        a.send(&json!({"id": i, "op": "history.append", "args": {"entry": user(&format!("a{i}")), "clientRequestId": crid}}));
        let r = a.reply_for(&json!(i), REPLY_WAIT);
        let t0 = Instant::now();
        assert_eq!(r["ok"], json!(true));
        let own =
            a.wait_event(Duration::from_secs(5), |e| e["clientRequestId"] == json!(crid)).expect("own event");
        let s = own["seq"].clone();
        let seen = b.wait_event(ANNOUNCE_WAIT, |e| e["seq"] == s);
        let took = t0.elapsed();
        let seen = seen.unwrap_or_else(|| {
            panic!("write {i} (seq {s}) from host A not announced on host B within 1.5 s")
        });
        lat.push(took);
        assert_eq!(seen["event"], json!("changed"));
        assert_eq!(seen["clientRequestId"], json!(crid), "{seen}");
        assert_eq!(seen["areas"]["history"], json!(true), "{seen}");
        // Settle: neither side hears about this seq again (A's poller must not re-announce).
        a.settle(Duration::from_millis(700));
        b.settle(Duration::from_millis(10));
        let dup_a = a.events.iter().filter(|e| e["seq"] == s).count();
        let dup_b = b.events.iter().filter(|e| e["seq"] == s).count();
        assert_eq!(dup_a, 0, "host A got its own write (seq {s}) announced twice: {:?}", a.events);
        assert_eq!(dup_b, 0, "host B got seq {s} twice: {:?}", b.events);
        assert!(a.events.is_empty() && b.events.is_empty(), "stray events A {:?} B {:?}", a.events, b.events);
    }
    // A CLI commit is announced to both ports.
    let doc = d.path().join("import.json");
    std::fs::write(&doc, json!({"activeModel": "m"}).to_string()).unwrap();
    let t0 = Instant::now();
    let (code, _, err) = cli(&db, &["import", doc.to_str().unwrap(), "--settings", "keep"]);
    assert_eq!(code, 0, "{err}");
    let ta = a.wait_event(ANNOUNCE_WAIT, |e| e["areas"]["settings"].is_array());
    let tb = b.wait_event(ANNOUNCE_WAIT, |e| e["areas"]["settings"].is_array());
    eprintln!("CLI import announced after {:?}", t0.elapsed());
    assert!(ta.is_some() && tb.is_some(), "CLI import not announced to both hosts within 1.5 s");
    lat.sort();
    eprintln!("cross-process announce latency: min {:?}, max {:?}", lat[0], lat.last().unwrap());
    assert_eq!(a.close().0, Some(0));
    assert_eq!(b.close().0, Some(0));
}
