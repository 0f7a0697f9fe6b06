//! `request.build` with `since` (PROTOCOL.md "Body deltas") through the real binary over pipes:
//! the body comes back as text or as a delta against a body this port already received, with
//! UTF-16 offsets, and rebuilding it as the extension does (JavaScript string slices) gives the
//! full body byte for byte.
//!
//! `cargo test --release --test it requests::delta::measure -- --ignored --nocapture` prints the
//! scenario-4 figures (60-entry ~300K-char history, one user + assistant pair appended).
use crate::harness::*;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use keepsake_host::domain::delta::{apply, apply_u16, diff, text_hash, to_u16};
use keepsake_host::domain::reduce::AgeOptions;
use keepsake_host::domain::request::{Kind, Pass};
use keepsake_host::protocol::envelope::ok_reply;
use keepsake_host::server::bodies::{text_result, BodyCache};
use keepsake_host::store::{BuildArgs, ImageRefsMode, Store};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const MAX_HELD_BODIES: usize = 4;

fn build_args(user_text: &str) -> Value {
    json!({
        "kind": "chat",
        "turn": {"userText": user_text},
        "systemPrompt": "Be brief.",
        "bodyFields": {"model": "gpt-x", "stream": true},
    })
}

fn with(mut args: Value, k: &str, v: Value) -> Value {
    args[k] = v;
    args
}

/// The body text a reply carries, rebuilt from `held` (the text the extension holds for
/// `since`) when it is a delta, exactly as turns.js does: UTF-16 slices and literals, every
/// offset checked. Panics on anything the extension would reject.
fn body_text(reply: &Value, held: Option<&str>) -> String {
    if let Some(t) = reply.get("bodyText") {
        return t.as_str().expect("bodyText is a string").to_owned();
    }
    let delta = reply.get("bodyDelta").unwrap_or_else(|| panic!("neither bodyText nor bodyDelta: {reply}"));
    let base = held.expect("a delta only answers a held body");
    let units: Vec<u16> = base.encode_utf16().collect();
    let mut out: Vec<u16> = Vec::new();
    for op in delta["ops"].as_array().expect("ops array") {
        match op {
            Value::String(t) => out.extend(t.encode_utf16()),
            Value::Array(r) => {
                let (a, b) = (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap() as usize);
                assert!(
                    r.len() == 2 && a < b && b <= units.len(),
                    "copy range {op} in {} units",
                    units.len()
                );
                out.extend_from_slice(&units[a..b]);
            }
            other => panic!("bad op {other}"),
        }
    }
    assert_eq!(out.len() as u64, reply["bodyLength"].as_u64().unwrap(), "bodyLength");
    let text = String::from_utf16(&out).expect("no split surrogate pair");
    assert_eq!(sha256_hex(text.as_bytes()), reply["bodyHash"].as_str().unwrap(), "bodyHash");
    text
}

fn hash(reply: &Value) -> String {
    reply["bodyHash"].as_str().expect("bodyHash").to_owned()
}

/// Bytes of the literal text in a delta (what actually travels besides offsets).
fn literal_bytes(reply: &Value) -> usize {
    reply["bodyDelta"]["ops"].as_array().unwrap().iter().filter_map(Value::as_str).map(str::len).sum()
}

fn json_len(v: &Value) -> usize {
    v.to_string().len()
}

/// The result without the body fields, to compare with a plain build's.
fn rest(v: &Value) -> Map<String, Value> {
    let mut m = v.as_object().unwrap().clone();
    for k in ["body", "bodyText", "bodyDelta", "bodyHash", "bodyLength"] {
        m.remove(k);
    }
    m
}

/// Deterministic mixed text: English, CJK, accents and astral emoji.
fn prose(seed: u64, chars: usize) -> String {
    let words: Vec<&str> =
        "lorem|ipsum|dolor|会话|记录|naïve|café|😀|🚀x|\"quoted\"|line\nbreak|tab\t".split('|').collect();
    let mut r = crate::harness::Rng::new(seed);
    let mut s = String::new();
    while s.encode_utf16().count() < chars {
        s.push_str(words[r.range(0, words.len() as u64 - 1) as usize]);
        s.push(' ');
    }
    s
}

fn history(n: usize, chars_each: usize, seed: u64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let t = prose(seed * 1000 + i as u64, chars_each);
            if i % 2 == 0 {
                user(&t)
            } else {
                assistant(&t)
            }
        })
        .collect()
}

#[test]
fn without_since_the_reply_is_as_before() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(6, 200, 1)}));
    let plain = h.ok("request.build", build_args("q"));
    assert!(plain.get("body").is_some());
    for k in ["bodyText", "bodyDelta", "bodyHash", "bodyLength"] {
        assert!(plain.get(k).is_none(), "{k} only with since");
    }
    // `since: null` is an absent argument
    assert_eq!(h.ok("request.build", with(build_args("q"), "since", Value::Null)), plain);
}

#[test]
fn since_empty_gives_the_full_text_and_every_other_field_unchanged() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(6, 200, 2)}));
    let a = with(build_args("q"), "imageRefs", json!(true));
    let plain = h.ok("request.build", a.clone());
    let text = h.ok("request.build", with(a, "since", json!("")));
    assert!(text.get("body").is_none() && text.get("bodyDelta").is_none());
    let t = body_text(&text, None);
    assert_eq!(t, plain["body"].to_string(), "bodyText is the body as the host serialises it");
    assert_eq!(serde_json::from_str::<Value>(&t).unwrap(), plain["body"]);
    assert_eq!(hash(&text), sha256_hex(t.as_bytes()));
    assert_eq!(text["bodyLength"].as_u64().unwrap() as usize, t.encode_utf16().count());
    assert_eq!(rest(&text), rest(&plain), "userEntry, droppedImages, source, imageRefs as today");
}

#[test]
fn same_history_twice_is_one_copy() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(20, 2000, 3)}));
    let first = h.ok("request.build", with(build_args("again"), "since", json!("")));
    let t1 = body_text(&first, None);
    let second = h.ok("request.build", with(build_args("again"), "since", json!(hash(&first))));
    assert_eq!(second["bodyDelta"]["since"], json!(hash(&first)));
    assert_eq!(second["bodyDelta"]["ops"], json!([[0, t1.encode_utf16().count()]]));
    assert_eq!(body_text(&second, Some(&t1)), t1);
    assert!(json_len(&second) < 1000, "{} bytes", json_len(&second));
}

#[test]
fn an_appended_pair_travels_as_little_more_than_itself() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(20, 2000, 4)}));
    let first = h.ok("request.build", with(build_args("question one"), "since", json!("")));
    let t1 = body_text(&first, None);
    h.ok("history.append", json!({"entry": user("question one")}));
    let reply = prose(77, 1500);
    h.ok("history.append", json!({"entry": assistant(&reply)}));
    let next = h.ok("request.build", with(build_args("question two 😀"), "since", json!(hash(&first))));
    let t2 = body_text(&next, Some(&t1));
    let full = h.ok("request.build", build_args("question two 😀"));
    assert_eq!(t2, full["body"].to_string());
    let new_bytes = json_len(&json!(reply)) + "question two 😀".len();
    assert!(literal_bytes(&next) < new_bytes + 200, "literal {} vs new {new_bytes}", literal_bytes(&next));
    assert!(json_len(&next) < new_bytes + 600, "reply {} vs new {new_bytes}", json_len(&next));
}

#[test]
fn a_history_at_its_cap_trims_its_front_and_still_travels_as_a_small_delta() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(60, 4900, 5)}));
    let first = h.ok("request.build", with(build_args("q1"), "since", json!("")));
    let t1 = body_text(&first, None);
    h.ok("history.append", json!({"entry": user("q1")}));
    let r = h.ok("history.append", json!({"entry": assistant(&prose(9, 1000))}));
    assert_eq!(r["length"], json!(60), "the two oldest entries were trimmed");
    let next = h.ok("request.build", with(build_args("q2"), "since", json!(hash(&first))));
    let t2 = body_text(&next, Some(&t1));
    assert_eq!(t2, h.ok("request.build", build_args("q2"))["body"].to_string());
    assert!(json_len(&next) < 4000, "delta reply {} bytes for a {}-byte body", json_len(&next), t2.len());
}

#[test]
fn splices_next_to_astral_and_cjk_characters_use_utf16_offsets() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    // entries made of astral characters only, and changes right beside them
    let emoji = "😀🚀🎉".repeat(400);
    h.ok("history.replace", json!({"entries": [user(&emoji), assistant(&format!("中文{emoji}é"))]}));
    let first = h.ok("request.build", with(build_args("😀"), "since", json!("")));
    let mut held = body_text(&first, None);
    let mut since = hash(&first);
    for (i, turn) in ["😁", "😀😀", "中", "é", "", "🚀🎉😀"].iter().enumerate() {
        if i % 2 == 1 {
            h.ok("history.append", json!({"entry": user(&format!("{turn}{emoji}"))}));
        }
        let r = h.ok("request.build", with(build_args(turn), "since", json!(since)));
        let t = body_text(&r, Some(&held));
        assert!(r.get("bodyDelta").is_some(), "turn {i}: a delta");
        assert_eq!(t, h.ok("request.build", build_args(turn))["body"].to_string(), "turn {i}");
        held = t;
        since = hash(&r);
    }
}

#[test]
fn unknown_or_garbled_since_gives_the_full_body_and_a_non_string_is_bad_request() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(4, 100, 6)}));
    let full = h.ok("request.build", build_args("q"))["body"].to_string();
    for since in [json!("0".repeat(64)), json!("not a hash"), json!("é😀"), json!("")] {
        let r = h.ok("request.build", with(build_args("q"), "since", since.clone()));
        assert_eq!(r["bodyText"].as_str(), Some(full.as_str()), "since {since}");
    }
    for bad in [json!(1), json!(true), json!([]), json!({"hash": "x"})] {
        assert_eq!(h.err("request.build", with(build_args("q"), "since", bad)), "bad_request");
    }
    // a new host process holds nothing: the hash of another port's body is unknown there
    let known = h.ok("request.build", with(build_args("q"), "since", json!("")));
    drop(h);
    let mut other = Host::spawn(&db);
    let r = other.ok("request.build", with(build_args("q"), "since", json!(hash(&known))));
    assert!(r.get("bodyText").is_some(), "another process never answers with a delta");
}

#[test]
fn the_last_four_bodies_are_held() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": history(10, 500, 7)}));
    let mut held = Vec::new();
    for i in 0..MAX_HELD_BODIES + 2 {
        let r = h.ok("request.build", with(build_args(&format!("turn {i}")), "since", json!("")));
        held.push((hash(&r), body_text(&r, None)));
    }
    // newest first, each probe rebuilding the same body (held again: it moves to the newest
    // end, nothing is evicted until the first miss)
    for (i, (hsh, text)) in held.iter().enumerate().rev() {
        let r = h.ok("request.build", with(build_args(&format!("turn {i}")), "since", json!(hsh)));
        let is_delta = r.get("bodyDelta").is_some();
        assert_eq!(is_delta, i >= 2, "body {i} held: {is_delta}");
        assert_eq!(&body_text(&r, Some(text)), text);
    }
}

#[test]
fn held_bodies_are_bounded_by_bytes() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": [user("hi")]}));
    // bodyFields make bodies of any size: two of 9 MB exceed the 16 MiB cap together
    let big = |c: char| with(build_args("q"), "bodyFields", json!({"pad": c.to_string().repeat(9_000_000)}));
    let a = h.ok("request.build", with(big('a'), "since", json!("")));
    let b = h.ok("request.build", with(big('b'), "since", json!("")));
    let r = h.ok("request.build", with(build_args("q"), "since", json!(hash(&a))));
    assert!(r.get("bodyText").is_some(), "the older big body was evicted");
    let r = h.ok("request.build", with(big('b'), "since", json!(hash(&b))));
    assert!(r.get("bodyDelta").is_some(), "the newer one is still held");
}

#[test]
fn a_delta_larger_than_the_body_is_not_sent() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.replace", json!({"entries": [user(&prose(1, 3000))]}));
    let a = h.ok("request.build", with(build_args("q"), "since", json!("")));
    h.ok("history.replace", json!({"entries": [user(&prose(2, 3000))]}));
    let r = h.ok("request.build", with(build_args("q"), "since", json!(hash(&a))));
    let text = body_text(&r, Some(&body_text(&a, None)));
    assert!(json_len(&r) <= json_len(&json!(text)) + 200, "never much more than the full text");
}

// ---- properties ---------------------------------------------------------------------------

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,300}",
        "\\PC{0,200}",
        proptest::collection::vec(
            prop_oneof![Just("😀"), Just("中"), Just("é"), Just("\""), Just("\n"), Just("ab")],
            0..150
        )
        .prop_map(|v| v.concat()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The pure diff rebuilds any text from any other, by bytes and by UTF-16 slices.
    #[test]
    fn diff_rebuilds_any_text(old in arb_text(), new in arb_text(), shared in arb_text(), k in 0usize..4) {
        // texts that share long runs, in various arrangements
        let (o, n) = match k {
            0 => (old.clone(), new.clone()),
            1 => (format!("{shared}{old}{shared}"), format!("{shared}{new}{shared}")),
            2 => (format!("{old}{shared}{shared}"), format!("{shared}{shared}{new}")),
            _ => (format!("{shared}{old}{shared}{new}"), format!("{new}{shared}{shared}{old}")),
        };
        let pieces = diff(&o, &n);
        prop_assert_eq!(&apply(&o, &pieces), &n);
        prop_assert_eq!(apply_u16(&o, &to_u16(&o, &pieces)), Some(n));
    }
}

#[derive(Debug, Clone)]
enum Step {
    Append(String),
    Pair(String, String),
    TrimFront(usize),
    EditAt(usize, String),
    Prompt(String),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        arb_text().prop_map(Step::Append),
        (arb_text(), arb_text()).prop_map(|(a, b)| Step::Pair(a, b)),
        (1usize..4).prop_map(Step::TrimFront),
        (0usize..20, arb_text()).prop_map(|(i, t)| Step::EditAt(i, t)),
        arb_text().prop_map(Step::Prompt),
    ]
}

proptest! {
    // each case spawns a host and runs several builds over pipes
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Over the real binary: random histories changed step by step; each delta, applied as the
    /// extension does, equals the full body of the same build byte for byte.
    #[test]
    fn deltas_rebuild_the_full_body(
        start in proptest::collection::vec(arb_text(), 0..12),
        steps in proptest::collection::vec(arb_step(), 1..6),
        kind in prop_oneof![Just("chat"), Just("responses"), Just("anthropic"), Just("runs"), Just("agent")],
    ) {
        let (_d, db) = temp_db();
        let mut h = Host::spawn(&db);
        let mut entries: Vec<Value> = start
            .iter()
            .enumerate()
            .map(|(i, t)| if i % 2 == 0 { user(t) } else { assistant(t) })
            .collect();
        let mut prompt = String::from("sys");
        let args = |prompt: &str, turn: &str| json!({
            "kind": kind, "turn": {"userText": turn}, "systemPrompt": prompt, "bodyFields": {"model": "m"},
        });
        h.ok("history.replace", json!({"entries": entries}));
        let first = h.ok("request.build", with(args(&prompt, "go"), "since", json!("")));
        let mut held = body_text(&first, None);
        let mut since = hash(&first);
        for (n, step) in steps.iter().enumerate() {
            match step {
                Step::Append(t) => entries.push(user(t)),
                Step::Pair(a, b) => {
                    entries.push(user(a));
                    entries.push(assistant(b));
                }
                Step::TrimFront(k) => {
                    entries.drain(..(*k).min(entries.len()));
                }
                Step::EditAt(i, t) => {
                    if !entries.is_empty() {
                        let i = i % entries.len();
                        entries[i]["content"] = json!(t);
                    }
                }
                Step::Prompt(p) => prompt = p.clone(),
            }
            h.ok("history.replace", json!({"entries": entries}));
            let turn = format!("turn {n} 😀");
            let r = h.ok("request.build", with(args(&prompt, &turn), "since", json!(since)));
            let text = body_text(&r, Some(&held));
            let full = h.ok("request.build", args(&prompt, &turn));
            prop_assert_eq!(&text, &full["body"].to_string());
            held = text;
            since = hash(&r);
        }
    }
}

// ---- measurement --------------------------------------------------------------------------

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Scenario 4 of issue 6: a 60-entry history near 300K chars, one user + assistant pair
/// appended between two turns. Prints the reply sizes and the host's build time (round trip
/// over pipes) without `since`, with `since: ""` and with the previous body's hash.
#[test]
#[ignore = "measurement: run with --ignored --nocapture (release build for meaningful times)"]
fn measure_scenario4_full_vs_delta() {
    let (bin, release, note) = timing_host_bin();
    let (_d, db) = temp_db();
    let mut h = Host::spawn_bin(&bin, &db);
    let entries = history(60, 4900, 42);
    h.ok("history.replace", json!({"entries": entries}));
    let chars: usize = entries.iter().map(|e| e["content"].as_str().unwrap().encode_utf16().count()).sum();
    let mut args = build_args("first question");
    args["imageRefs"] = json!([]);
    let first = h.ok("request.build", with(args.clone(), "since", json!("")));
    let t1 = body_text(&first, None);
    h.ok("history.append", json!({"entry": user("first question")}));
    h.ok("history.append", json!({"entry": assistant(&prose(43, 1200))}));
    let mut next_args = build_args("second question");
    next_args["imageRefs"] = json!([]);

    let rounds = 31;
    let (mut plain_t, mut text_t, mut delta_t) = (Vec::new(), Vec::new(), Vec::new());
    let (mut plain_b, mut text_b, mut delta_b) = (0, 0, 0);
    for _ in 0..rounds {
        let go = |h: &mut Host, a: Value| {
            let before = h.frame_sizes.len();
            let t = Instant::now();
            let r = h.ok("request.build", a);
            (t.elapsed(), h.frame_sizes[before..].iter().sum::<usize>(), r)
        };
        let (d, b, _) = go(&mut h, next_args.clone());
        plain_t.push(d);
        plain_b = b;
        let (d, b, _) = go(&mut h, with(next_args.clone(), "since", json!("")));
        text_t.push(d);
        text_b = b;
        let (d, b, r) = go(&mut h, with(next_args.clone(), "since", json!(hash(&first))));
        delta_t.push(d);
        delta_b = b;
        assert!(r.get("bodyDelta").is_some());
        body_text(&r, Some(&t1));
    }
    drop(h);

    // the host's own work, in process (run the test with --release for these to mean anything):
    // build + reply serialisation, without since / since "" / since <hash>
    let mut store = Store::open(&db).expect("open");
    let mut cache = BodyCache::default();
    let build_args = || BuildArgs {
        kind: Kind::Chat,
        user_text: "second question".into(),
        images: None,
        system_prompt: Some("Be brief.".into()),
        body_fields: json!({"model": "gpt-x", "stream": true}).as_object().unwrap().clone(),
        source_session: None,
        up_to: None,
        pass: Pass::First,
        rescue: None,
        backfill: false,
        aging: AgeOptions::default(),
        image_refs: ImageRefsMode::Held(BTreeSet::new()),
        retry: None,
    };
    let old_hash = sha256_hex(t1.as_bytes());
    cache.remember(old_hash.clone(), t1.clone());
    // one timing row per stage: the build itself, the reply as today, and the pieces `since` adds
    let mut t: [Vec<Duration>; 8] = Default::default();
    let stages = [
        "build (read + reduce)",
        "reply JSON, body as a value (today)",
        "body -> text",
        "sha256 of the text",
        "diff (prefix/suffix + blocks)",
        "UTF-16 offsets",
        "whole since \"\" (build + text reply)",
        "whole since <hash> (build + delta reply)",
    ];
    for _ in 0..rounds {
        let clock = Instant::now();
        let r = store.request_build(build_args()).unwrap();
        t[0].push(clock.elapsed());
        let clock = Instant::now();
        let reply = ok_reply(&json!(1), &r);
        t[1].push(clock.elapsed());
        let clock = Instant::now();
        let text = r["body"].to_string();
        t[2].push(clock.elapsed());
        let clock = Instant::now();
        let digest = text_hash(&text);
        t[3].push(clock.elapsed());
        let clock = Instant::now();
        let pieces = diff(&t1, &text);
        t[4].push(clock.elapsed());
        let clock = Instant::now();
        let ops = to_u16(&t1, &pieces);
        t[5].push(clock.elapsed());
        assert!(!ops.is_empty() && digest.len() == 64 && reply.len() > text.len());
        let clock = Instant::now();
        let r = text_result(store.request_build(build_args()).unwrap(), "", &mut cache);
        let text_reply = ok_reply(&json!(1), &r);
        t[6].push(clock.elapsed());
        let clock = Instant::now();
        let r = text_result(store.request_build(build_args()).unwrap(), &old_hash, &mut cache);
        let delta_reply = ok_reply(&json!(1), &r);
        t[7].push(clock.elapsed());
        assert!(r.get("bodyDelta").is_some() && delta_reply.len() < 4000 && text_reply.len() > text.len());
    }
    println!("host: {note} (release: {release})");
    println!("history: 60 entries, {chars} UTF-16 units; body {} bytes", t1.len());
    println!(
        "reply bytes: body as JSON (no since) {plain_b}, bodyText (since \"\") {text_b}, bodyDelta {delta_b}"
    );
    println!(
        "round trip over pipes (test process: send, reply parsed), median of {rounds}: no since {:?}, since \"\" {:?}, since <hash> {:?}",
        median(plain_t),
        median(text_t),
        median(delta_t)
    );
    println!("in process (min / median of {rounds}):");
    for (name, v) in stages.iter().zip(t) {
        let min = *v.iter().min().unwrap();
        println!("  {name:<42} {min:>10.2?} / {:>10.2?}", median(v));
    }
}
