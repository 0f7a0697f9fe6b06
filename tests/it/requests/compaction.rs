//! Reliability test T11 (reliability.md §10): compaction properties of the request-side pipeline
//! — the byte-budget plan (storage-model §6.5), `prepare` and labels (§6.2–§6.3), per-turn image
//! caps (§6.4), aging (§7.1), overflow rescue (§7.3) and the five builders (§8) — over 1,024
//! random histories (CI; `KEEPSAKE_T11_CASES`, 8,192 under `KEEPSAKE_LONG=1`) and 10 snapshot
//! fixtures (`tests/fixtures/compaction/*.json`: realistic live histories with attaches, images
//! and long texts, made by the generators at the end of this file;
//! `KEEPSAKE_BLESS=1 cargo test --test it requests::compaction` rewrites them — review the diff
//! against the spec before committing).
//!
//! Random histories hold 0–60 entries (two in three under 24): plain, image-bearing (references
//! to blobs of 1 KB–4 MB, inline data URLs, http URLs, parts without a URL, seen flags of every
//! truthiness), attaches (string or array content, either prefix, around the 8,000-char
//! thresholds in UTF-16 units, with images and video), assistants, system entries and blanks;
//! requests vary the turn (text, 0–10 images of every shape), system prompt, bodyFields that
//! collide with host-built fields, upTo, pass, rescue, backfill, aging and the budget.
//!
//! Every history is built for all five kinds. Counted, and required to be 0:
//! - **budget overruns**: the §6.5 plan leaves more than the budget in the entries it spares while
//!   more than the newest image-bearing entry remains (sizes walked independently from the spec);
//! - **latest user turn dropped**: the current turn's text and kept images are missing from the
//!   body, or the newest user entry of the history is (every generated user entry carries a
//!   unique marker in a text that survives labels, aging and rescue stubs); kinds and passes that
//!   by design send no history (`agent`, `timestampRewrite`) are checked on the turn only;
//! - **system prompt dropped**: a non-blank `systemPrompt` is not where §8.2–§8.5 put it, or a
//!   `bodyFields` entry displaced it (`agent` has no system prompt, §8.6);
//! - **non-deterministic outputs**: the same input built twice, the history after a compact and a
//!   pretty serialise/parse round trip, or with every object's keys in reverse order, gives a
//!   body that is not byte-identical.
//!
//! `tests/it/requests/reduction.rs` checks each rule against an oracle on small inputs; this file
//! checks the composed pipeline on whole histories. It needs no host process: everything here is
//! pure.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use keepsake_host::domain::dataurl::url_chars_for;
use keepsake_host::domain::entry::is_image_bearing;
use keepsake_host::domain::images::{bound_victims, pick_turn_images, UNSEEN_IMAGE_BYTES_BUDGET};
use keepsake_host::domain::reduce::AgeOptions;
use keepsake_host::domain::request::{build, BuildInput, Built, Kind, Pass};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

const KINDS: [&str; 5] = ["chat", "responses", "anthropic", "runs", "agent"];
const PREFIX: &str = "[Page context attached by Keepsake]";
const LEGACY: &str = "[Page context attached by browsa]";
const REF_PREFIX: &str = "keepsake-image:sha256:";
/// §8.1 current-turn defaults.
const DESCRIBE: &str = "Describe these images.";
const RESPOND: &str = "(no instruction; just respond to the page context)";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compaction")
}

// ---------------------------------------------------------------------------------------------
// the pipeline under test: a scenario is {history, blobs, budget, request}

/// URL chars of an image URL (§2.6): a reference counts its blob's canonical data URL (an
/// unknown blob counts 0, as the store does), a string its UTF-16 length.
fn url_chars(blobs: &Map<String, Value>, u: &str) -> usize {
    if u.starts_with(REF_PREFIX) {
        return blobs
            .get(u)
            .map(|b| {
                url_chars_for(b["mime"].as_str().unwrap_or(""), b["bytes"].as_u64().unwrap_or(0) as usize)
            })
            .unwrap_or(0);
    }
    u.encode_utf16().count()
}

/// The URL of an image part, read from the spec's two shapes (§2.1), independently of the crate.
fn part_url(p: &Value) -> Option<&str> {
    match p.get("image_url") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Object(o)) => o.get("url").and_then(Value::as_str),
        _ => None,
    }
}

fn is_image_part(p: &Value) -> bool {
    p.get("type").and_then(Value::as_str) == Some("image_url")
}

/// §6.5 step 1, from the spec: the image-bearing entries (array content with an image part) and
/// their URL chars summed over image parts.
fn budget_sizes(history: &[Value], blobs: &Map<String, Value>) -> Vec<usize> {
    history
        .iter()
        .filter_map(|e| {
            let parts = e.get("content")?.as_array()?;
            let imgs: Vec<&Value> = parts.iter().filter(|p| is_image_part(p)).collect();
            if imgs.is_empty() {
                return None;
            }
            Some(imgs.iter().map(|p| part_url(p).map_or(0, |u| url_chars(blobs, u))).sum())
        })
        .collect()
}

fn parse_pass(v: Option<&Value>) -> Pass {
    match v {
        Some(Value::Object(o)) => {
            let f = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            match o.get("kind").and_then(Value::as_str) {
                Some("continuation") => {
                    Pass::Continuation { previous_reply: f("previousReply"), instruction: f("instruction") }
                }
                Some("timestampRewrite") => Pass::TimestampRewrite {
                    previous_reply: f("previousReply"),
                    instruction: f("instruction"),
                },
                _ => Pass::First,
            }
        }
        _ => Pass::First,
    }
}

/// `request.build` as the store runs it (history limited by `upTo`, URL chars from the blobs).
fn build_kind(kind: &str, history: &[Value], blobs: &Map<String, Value>, req: &Value) -> Built {
    let mut h = history.to_vec();
    if let Some(up) = req.get("upTo").and_then(Value::as_u64) {
        h.truncate((up as usize).min(h.len()));
    }
    let mut aging = AgeOptions::default();
    if let Some(a) = req.get("aging") {
        if let Some(n) = a.get("minUserTurnsAfter").and_then(Value::as_u64) {
            aging.min_user_turns_after = n as usize;
        }
        if let Some(n) = a.get("minChars").and_then(Value::as_u64) {
            aging.min_chars = n as usize;
        }
    }
    let chars = |u: &str| url_chars(blobs, u);
    build(BuildInput {
        kind: Kind::parse(kind).expect("kind"),
        user_text: req["turn"]["userText"].as_str().unwrap_or("").to_owned(),
        images: req["turn"].get("images").and_then(Value::as_array).cloned(),
        system_prompt: req.get("systemPrompt").and_then(Value::as_str).map(str::to_owned),
        body_fields: req.get("bodyFields").and_then(Value::as_object).cloned().unwrap_or_default(),
        history: h,
        pass: parse_pass(req.get("pass")),
        rescue: req
            .get("rescue")
            .and_then(|r| r.get("errorMessage"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        backfill: req.get("backfill").and_then(Value::as_bool).unwrap_or(false),
        aging,
        url_chars: &chars,
    })
}

fn built_json(b: &Built) -> Value {
    let mut m = Map::new();
    m.insert("body".into(), b.body.clone());
    m.insert("userEntry".into(), b.user_entry.clone());
    m.insert("droppedImages".into(), json!(b.dropped_images));
    if let Some(r) = &b.rescue {
        m.insert("rescue".into(), r.to_json());
    }
    Value::Object(m)
}

/// Everything the pipeline produces for a scenario: the budget plan and the five builds.
fn outcome(input: &Value) -> Value {
    let history = input["history"].as_array().cloned().unwrap_or_default();
    let blobs = input["blobs"].as_object().cloned().unwrap_or_default();
    let budget = input["budget"].as_u64().unwrap_or(UNSEEN_IMAGE_BYTES_BUDGET as u64) as usize;
    let sizes = budget_sizes(&history, &blobs);
    let victims = bound_victims(&sizes, budget);
    let mut builds = Map::new();
    for kind in KINDS {
        builds.insert(kind.into(), built_json(&build_kind(kind, &history, &blobs, &input["request"])));
    }
    json!({"plan": {"sizes": sizes, "victims": victims}, "builds": builds})
}

// ---------------------------------------------------------------------------------------------
// the properties

#[derive(Default)]
struct Counters {
    histories: usize,
    builds: usize,
    budget_overruns: usize,
    latest_user_dropped: usize,
    other_user_dropped: usize,
    system_dropped: usize,
    non_deterministic: usize,
    stamps_leaked: usize,
    victims_total: usize,
    plans_with_victims: usize,
    t_generate: f64,
    t_outcome: f64,
    t_check: f64,
    t_determinism: f64,
    rescues_applied: usize,
    aged_or_stubbed: usize,
    failures: Vec<String>,
}

fn esc(s: &str) -> String {
    let j = serde_json::to_string(s).unwrap();
    j[1..j.len() - 1].to_owned()
}

fn js_blank(s: &str) -> bool {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}').is_empty()
}

/// Every object's keys in reverse order (the same JSON value to any reader).
fn reverse_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m.iter().rev() {
                out.insert(k.clone(), reverse_keys(x));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(reverse_keys).collect()),
        other => other.clone(),
    }
}

fn marker_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new("⟦u[0-9]+⟧").unwrap())
}

/// Markers (`⟦u12⟧`) of the user entries of `h`, oldest first.
fn user_markers(h: &[Value]) -> Vec<String> {
    h.iter()
        .filter(|e| e["role"] == "user")
        .filter_map(|e| marker_re().find(&e.to_string()).map(|m| m.as_str().to_owned()))
        .collect()
}

/// Check one scenario's outcome; `label` names it in failures.
fn check(label: &str, input: &Value, out: &Value, c: &mut Counters) {
    let history = input["history"].as_array().cloned().unwrap_or_default();
    let blobs = input["blobs"].as_object().cloned().unwrap_or_default();
    let budget = input["budget"].as_u64().unwrap_or(UNSEEN_IMAGE_BYTES_BUDGET as u64) as usize;
    let req = &input["request"];
    c.histories += 1;

    // budget: what the plan spares fits, unless only the newest image-bearing entry is left
    let sizes: Vec<usize> =
        out["plan"]["sizes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let victims: Vec<usize> =
        out["plan"]["victims"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let bearing = history.iter().filter(|e| is_image_bearing(e)).count();
    if bearing != sizes.len() {
        c.failures
            .push(format!("{label}: crate sees {bearing} image-bearing entries, the spec {}", sizes.len()));
    }
    c.victims_total += victims.len();
    c.plans_with_victims += usize::from(!victims.is_empty());
    let spared: usize = sizes.iter().enumerate().filter(|(i, _)| !victims.contains(i)).map(|(_, s)| s).sum();
    let spared_n = sizes.len() - victims.len();
    if spared > budget && spared_n > 1 {
        c.budget_overruns += 1;
        c.failures
            .push(format!("{label}: plan {victims:?} over {sizes:?} leaves {spared} > budget {budget}"));
    }
    if victims.iter().enumerate().any(|(i, v)| *v != i)
        || (!sizes.is_empty() && victims.contains(&(sizes.len() - 1)))
    {
        c.budget_overruns += 1;
        c.failures
            .push(format!("{label}: victims {victims:?} are not an oldest-first prefix sparing the newest"));
    }

    // the history each build saw
    let mut h = history.clone();
    if let Some(up) = req.get("upTo").and_then(Value::as_u64) {
        h.truncate((up as usize).min(h.len()));
    }
    let markers = user_markers(&h);
    let pass = req.get("pass").and_then(|p| p.get("kind")).and_then(Value::as_str).unwrap_or("first");
    let user_text = req["turn"]["userText"].as_str().unwrap_or("");
    let chars = |u: &str| url_chars(&blobs, u);
    let turn_images = req["turn"].get("images").and_then(Value::as_array).cloned();
    let picked = pick_turn_images(turn_images.as_deref(), &chars);
    let mut text = user_text.to_owned();
    if picked.dropped > 0 {
        text.push_str(&format!("\n\n（注：另有 {} 张图片因超出单条消息大小上限未能随附。）", picked.dropped));
    }
    let sp = req.get("systemPrompt").and_then(Value::as_str).filter(|s| !js_blank(s));

    for kind in KINDS {
        c.builds += 1;
        let b = &out["builds"][kind];
        let body = &b["body"];
        let body_text = body.to_string();
        if b.get("rescue").is_some_and(|r| r["applied"] == json!(true)) {
            c.rescues_applied += 1;
        }
        c.aged_or_stubbed += body_text.matches("Original size: ~").count();

        // the current turn
        let mut missing = Vec::new();
        // agents keep their transcript server-side: a second pass sends the instruction alone (§8.7)
        let sends_turn = !(kind == "agent" && pass != "first");
        if sends_turn {
            let want_text = if !text.is_empty() {
                Some(text.clone())
            } else if matches!(kind, "chat" | "responses" | "anthropic") {
                Some(if picked.images.is_empty() { RESPOND } else { DESCRIBE }.to_owned())
            } else {
                None
            };
            if let Some(t) = want_text.filter(|t| !js_blank(t)) {
                if !body_text.contains(&esc(&t)) {
                    missing.push(format!("turn text {:.60?}", t));
                }
            }
            for u in &picked.images {
                let needle = match kind {
                    "anthropic" if u.starts_with("data:") => u.split_once(',').map(|x| x.1.to_owned()),
                    "anthropic" if u.starts_with(REF_PREFIX) => Some(u.clone()),
                    "anthropic" => None,
                    "runs" if pass != "first" => None,
                    _ => Some(u.clone()),
                };
                if let Some(n) = needle {
                    if !body_text.contains(&esc(&n)) {
                        missing.push(format!("turn image {:.60}", u));
                    }
                }
            }
        }
        // the history's user entries (kinds and passes that send history)
        let sends_history = kind != "agent" && pass != "timestampRewrite";
        if sends_history {
            let present: std::collections::HashSet<&str> =
                marker_re().find_iter(&body_text).map(|m| m.as_str()).collect();
            for (i, m) in markers.iter().enumerate() {
                if !present.contains(m.as_str()) {
                    if i + 1 == markers.len() {
                        missing.push(format!("newest user entry {m}"));
                    } else {
                        c.other_user_dropped += 1;
                        c.failures.push(format!("{label} {kind}: user entry {m} dropped"));
                    }
                }
            }
        }
        if !missing.is_empty() {
            c.latest_user_dropped += 1;
            c.failures.push(format!("{label} {kind}: missing {}", missing.join(", ")));
        }

        // the system prompt
        if let Some(sp) = sp {
            let ok = match kind {
                "chat" => body["messages"][0] == json!({"role": "system", "content": sp}),
                "responses" | "runs" => body["instructions"] == json!(sp),
                "anthropic" => body["system"] == json!(sp),
                _ => true,
            };
            if !ok {
                c.system_dropped += 1;
                c.failures.push(format!("{label} {kind}: system prompt {sp:?} dropped"));
            }
        }
        if kind == "chat" {
            let systems =
                body["messages"].as_array().map_or(0, |m| m.iter().filter(|x| x["role"] == "system").count());
            if systems != usize::from(sp.is_some()) {
                c.system_dropped += 1;
                c.failures.push(format!("{label} chat: {systems} system messages, prompt {sp:?}"));
            }
        }

        // stamps never reach a body (§10 invariant 7)
        for key in ["\"imagesSeen\"", "\"attachId\"", "\"videoSrc\"", "\"providerLabel\"", "\"summarized\""] {
            if body_text.contains(key) {
                c.stamps_leaked += 1;
                c.failures.push(format!("{label} {kind}: {key} in the body"));
            }
        }
    }

    // determinism: the same input again for every kind; the history after a compact and a pretty
    // serialise/parse round trip and with every object's keys reversed for one kind per history,
    // rotating (serde_json's own Display and FromStr: optimised even in a debug test build)
    let t = Instant::now();
    let reference: BTreeMap<&str, String> =
        KINDS.iter().map(|k| (*k, out["builds"][*k].to_string())).collect();
    for kind in KINDS {
        let again: String = built_json(&build_kind(kind, &history, &blobs, req)).to_string();
        if again != reference[kind] {
            c.non_deterministic += 1;
            c.failures.push(format!("{label} {kind}: the same input gives a different result"));
        }
    }
    let round_trip = |text: String| -> Vec<Value> {
        match text.parse::<Value>().expect("history parses back") {
            Value::Array(a) => a,
            other => panic!("history is not an array: {other}"),
        }
    };
    let whole = Value::Array(history.clone());
    let variants = [
        ("compact round trip", round_trip(whole.to_string())),
        ("pretty round trip", round_trip(format!("{whole:#}"))),
        ("keys reversed", history.iter().map(reverse_keys).collect()),
    ];
    for (i, (variant, hist)) in variants.iter().enumerate() {
        let kind = KINDS[(c.histories + i) % KINDS.len()];
        let again: String = built_json(&build_kind(kind, hist, &blobs, req)).to_string();
        if again != reference[kind] {
            c.non_deterministic += 1;
            c.failures.push(format!("{label} {kind}: {variant} gives a different result"));
        }
    }
    c.t_determinism += t.elapsed().as_secs_f64();
}

// ---------------------------------------------------------------------------------------------
// random histories

#[derive(Debug, Clone)]
enum Img {
    Ref(usize),
    Data(usize),
    Http,
    Missing,
}

#[derive(Debug, Clone, Copy)]
enum Seen {
    Absent,
    True,
    False,
    One,
    Null,
}

#[derive(Debug, Clone)]
enum Spec {
    User {
        len: usize,
        cjk: bool,
        seen: Seen,
    },
    UserImages {
        len: usize,
        images: Vec<Img>,
        seen: Seen,
        figures: bool,
        string_form: bool,
    },
    Attach {
        body: usize,
        legacy: bool,
        array: bool,
        images: Vec<Img>,
        id: bool,
        video: bool,
        seen: Seen,
        cjk: bool,
    },
    Assistant {
        len: usize,
        cjk: bool,
    },
    System {
        len: usize,
    },
    Blank,
}

#[derive(Debug, Clone)]
enum TurnImg {
    Img(Img),
    Number,
    Ftp,
}

#[derive(Debug, Clone)]
struct Req {
    user_text: Option<usize>,
    images: Option<Vec<TurnImg>>,
    system_prompt: u8,
    body_fields: bool,
    up_to: Option<usize>,
    pass: u8,
    rescue: Option<usize>,
    backfill: bool,
    aging: Option<(usize, usize)>,
    budget: usize,
}

const ASCII_WORDS: &[&str] = &[
    "the",
    "page",
    "context",
    "reply",
    "model",
    "token",
    "budget",
    "image",
    "figure",
    "table",
    "summary",
    "ownership",
    "borrow",
    "latency",
    "cache",
    "prompt",
    "history",
    "section",
    "result",
    "data",
    "chart",
    "revenue",
    "growth",
];
const CJK_WORDS: &[&str] =
    &["上下文", "图片", "页面", "模型", "摘要", "历史", "😀", "数据", "增长", "表格", "🚀", "结论"];

/// Text of exactly `n` UTF-16 units, deterministic in `seed`.
fn text_units(n: usize, cjk: bool, seed: u64) -> String {
    let words = if cjk { CJK_WORDS } else { ASCII_WORDS };
    let mut s = String::with_capacity(n + 8);
    let mut units = 0;
    let mut i = seed as usize;
    while units < n {
        let w = words[i % words.len()];
        i = i.wrapping_mul(31).wrapping_add(7);
        let sep = if i % 11 == 0 { "\n" } else { " " };
        for piece in [w, sep] {
            for ch in piece.chars() {
                let u = ch.len_utf16();
                if units + u > n {
                    // an emoji would overshoot: pad with ASCII
                    while units < n {
                        s.push('x');
                        units += 1;
                    }
                    return s;
                }
                s.push(ch);
                units += u;
            }
        }
    }
    s
}

fn blob_ref(i: usize) -> String {
    format!("{REF_PREFIX}{:064x}", 0x5EED_0000u64 + i as u64)
}

fn blob_mime(i: usize) -> &'static str {
    ["image/png", "image/jpeg", "image/webp"][i % 3]
}

fn img_url(img: &Img) -> Option<String> {
    match img {
        Img::Ref(i) => Some(blob_ref(*i)),
        Img::Data(n) => Some(format!("data:image/png;base64,{}", "A".repeat(n.div_ceil(4) * 4))),
        Img::Http => Some("https://cdn.example.com/pic.png".into()),
        Img::Missing => None,
    }
}

fn img_part(img: &Img, string_form: bool) -> Value {
    match img_url(img) {
        Some(u) if string_form => json!({"type": "image_url", "image_url": u}),
        Some(u) => json!({"type": "image_url", "image_url": {"url": u}}),
        None => json!({"type": "image_url", "image_url": {}}),
    }
}

fn set_seen(e: &mut Value, seen: Seen) {
    let v = match seen {
        Seen::Absent => return,
        Seen::True => json!(true),
        Seen::False => json!(false),
        Seen::One => json!(1),
        Seen::Null => Value::Null,
    };
    e["imagesSeen"] = v;
}

fn attach_text(i: usize, body: &str, legacy: bool, mode: &str) -> String {
    let prefix = if legacy { LEGACY } else { PREFIX };
    format!("{prefix}\nURL: https://site{i}.example.com/article\nTitle: ⟦u{i}⟧ Article {i}\nMode: {mode}\n---\n\n{body}")
}

fn realise(i: usize, s: &Spec) -> Value {
    match s {
        Spec::User { len, cjk, seen } => {
            let mut e =
                json!({"role": "user", "content": format!("⟦u{i}⟧ {}", text_units(*len, *cjk, i as u64))});
            set_seen(&mut e, *seen);
            e
        }
        Spec::UserImages { len, images, seen, figures, string_form } => {
            let mut t = format!("⟦u{i}⟧ {}", text_units(*len, false, i as u64));
            if *figures {
                t.push_str("\n## Figures\n1. Revenue chart\n2. Cost table");
            }
            let mut parts = vec![json!({"type": "text", "text": t})];
            parts.extend(images.iter().map(|m| img_part(m, *string_form)));
            let mut e = json!({"role": "user", "content": parts});
            set_seen(&mut e, *seen);
            e
        }
        Spec::Attach { body, legacy, array, images, id, video, seen, cjk } => {
            let mode = if *video { "youtube" } else { "full" };
            let body_text = text_units(*body, *cjk, i as u64 * 7);
            let mut e = if *array {
                let mut parts = vec![
                    json!({"type": "text", "text": attach_text(i, &format!("{body_text}\n[Figure 1] see below"), *legacy, mode)}),
                ];
                parts.extend(images.iter().map(|m| img_part(m, false)));
                parts.push(json!({"type": "input_text", "text": "Caption text after the images"}));
                json!({"role": "user", "content": parts})
            } else {
                json!({"role": "user", "content": attach_text(i, &body_text, *legacy, mode)})
            };
            if *id {
                e["attachId"] = json!(format!("00000000-0000-4000-8000-{:012x}", i));
            }
            if *video {
                e["videoSrc"] = json!(format!("https://www.youtube.com/watch?v=vid{i}"));
            }
            set_seen(&mut e, *seen);
            e
        }
        Spec::Assistant { len, cjk } => {
            json!({"role": "assistant", "content": format!("⟦a{i}⟧ {}", text_units(*len, *cjk, i as u64 + 3)), "providerLabel": "Model A"})
        }
        Spec::System { len } => json!({"role": "system", "content": text_units(*len, false, 5)}),
        Spec::Blank => json!({"role": "user", "content": "   "}),
    }
}

const OVERFLOW_MESSAGES: &[&str] = &[
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.",
    "prompt is too long: 215000 tokens > 200000 maximum",
    "Request too large for gpt-4o on tokens per min (TPM): Limit 30000",
    "502 Bad Gateway",
    "上下文长度超过限制",
];

fn scenario(specs: &[Spec], blob_bytes: &[u32], r: &Req) -> Value {
    let history: Vec<Value> = specs.iter().enumerate().map(|(i, s)| realise(i, s)).collect();
    let mut blobs = Map::new();
    for (i, b) in blob_bytes.iter().enumerate() {
        blobs.insert(blob_ref(i), json!({"mime": blob_mime(i), "bytes": b}));
    }
    let mut req = Map::new();
    let mut turn = Map::new();
    if let Some(n) = r.user_text {
        turn.insert("userText".into(), json!(format!("⟦turn⟧ {}", text_units(n, n % 3 == 0, 99))));
    }
    if let Some(list) = &r.images {
        let items: Vec<Value> = list
            .iter()
            .map(|t| match t {
                TurnImg::Img(m) => img_url(m).map_or(Value::Null, Value::String),
                TurnImg::Number => json!(42),
                TurnImg::Ftp => json!("ftp://example.com/a.png"),
            })
            .collect();
        turn.insert("images".into(), Value::Array(items));
    }
    req.insert("turn".into(), Value::Object(turn));
    match r.system_prompt {
        1 => {
            req.insert("systemPrompt".into(), json!(""));
        }
        2 => {
            req.insert("systemPrompt".into(), json!("  \n "));
        }
        3 | 4 => {
            req.insert("systemPrompt".into(), json!("You are Keepsake's careful assistant. Cite the page."));
        }
        _ => {}
    }
    if r.body_fields {
        req.insert(
            "bodyFields".into(),
            json!({"model": "m-1", "stream": true, "temperature": 0.2, "messages": "bodyFields loses",
                   "system": "bodyFields loses", "instructions": "bodyFields loses", "input": "bodyFields loses",
                   "max_tokens": 4096}),
        );
    }
    if let Some(u) = r.up_to {
        req.insert("upTo".into(), json!(u));
    }
    match r.pass {
        1 => {
            req.insert("pass".into(), json!({"kind": "continuation", "previousReply": "The first half of the reply", "instruction": "Continue exactly where you stopped."}));
        }
        2 => {
            req.insert("pass".into(), json!({"kind": "timestampRewrite", "previousReply": "Notes without stamps", "instruction": "Add [mm:ss] stamps."}));
        }
        _ => {}
    }
    if let Some(m) = r.rescue {
        req.insert("rescue".into(), json!({"errorMessage": OVERFLOW_MESSAGES[m % OVERFLOW_MESSAGES.len()]}));
    }
    if r.backfill {
        req.insert("backfill".into(), json!(true));
    }
    if let Some((turns, min_chars)) = r.aging {
        req.insert("aging".into(), json!({"minUserTurnsAfter": turns, "minChars": min_chars}));
    }
    json!({"history": history, "blobs": blobs, "budget": r.budget, "request": req})
}

const BLOBS: usize = 12;

fn img_strategy() -> impl Strategy<Value = Img> {
    prop_oneof![
        6 => (0..BLOBS).prop_map(Img::Ref),
        1 => (8usize..4_000).prop_map(Img::Data),
        1 => Just(Img::Http),
        1 => Just(Img::Missing),
    ]
}

fn seen_strategy() -> impl Strategy<Value = Seen> {
    prop_oneof![3 => Just(Seen::Absent), 3 => Just(Seen::True), 1 => Just(Seen::False), 1 => Just(Seen::One), 1 => Just(Seen::Null)]
}

fn len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0usize..300, 1 => 300usize..4_000]
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    prop_oneof![
        4 => (len_strategy(), any::<bool>(), seen_strategy()).prop_map(|(len, cjk, seen)| Spec::User { len, cjk, seen }),
        2 => (len_strategy(), prop::collection::vec(img_strategy(), 1..4), seen_strategy(), any::<bool>(), any::<bool>())
            .prop_map(|(len, images, seen, figures, string_form)| Spec::UserImages { len, images, seen, figures, string_form }),
        2 => (
            prop_oneof![3 => 0usize..1_500, 3 => 7_860usize..7_960, 1 => 8_000usize..24_000],
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(img_strategy(), 0..3),
            any::<bool>(),
            prop::bool::weighted(0.15),
            seen_strategy(),
            any::<bool>(),
        )
            .prop_map(|(body, legacy, array, images, id, video, seen, cjk)| Spec::Attach {
                body,
                legacy: legacy && body % 5 == 0,
                array,
                images,
                id,
                video,
                seen,
                cjk
            }),
        4 => (len_strategy(), any::<bool>()).prop_map(|(len, cjk)| Spec::Assistant { len, cjk }),
        1 => (0usize..200).prop_map(|len| Spec::System { len }),
        1 => Just(Spec::Blank),
    ]
}

fn req_strategy() -> impl Strategy<Value = Req> {
    let turn_img = prop_oneof![8 => img_strategy().prop_map(TurnImg::Img), 1 => Just(TurnImg::Number), 1 => Just(TurnImg::Ftp)];
    (
        prop::option::weighted(0.9, 0usize..300),
        prop::option::weighted(0.6, prop::collection::vec(turn_img, 0..11)),
        0u8..5,
        any::<bool>(),
        prop::option::weighted(0.2, 0usize..70),
        prop_oneof![6 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8)],
        prop::option::weighted(0.25, 0usize..OVERFLOW_MESSAGES.len()),
        any::<bool>(),
        prop::option::weighted(
            0.3,
            (0usize..5, prop::sample::select(vec![0usize, 100, 2_000, 8_000, 8_001])),
        ),
        prop_oneof![2 => Just(UNSEEN_IMAGE_BYTES_BUDGET), 2 => 0usize..4_000_000, 1 => 0usize..20_000_000],
    )
        .prop_map(
            |(
                user_text,
                images,
                system_prompt,
                body_fields,
                up_to,
                pass,
                rescue,
                backfill,
                aging,
                budget,
            )| Req {
                user_text,
                images,
                system_prompt,
                body_fields,
                up_to,
                pass,
                rescue,
                backfill,
                aging,
                budget,
            },
        )
}

fn blob_strategy() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(
        prop_oneof![2 => 1_000u32..100_000, 3 => 100_000u32..1_500_000, 1 => 1_500_000u32..4_000_000],
        BLOBS,
    )
}

// ---------------------------------------------------------------------------------------------
// the test

fn load_fixtures() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures/compaction exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

fn bless() -> bool {
    std::env::var("KEEPSAKE_BLESS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// T11: 1,024 random histories and the 10 fixtures, every kind; the four counts must be 0.
#[test]
fn t11_compaction_properties() {
    let wall = Instant::now();
    let cases = std::env::var("KEEPSAKE_T11_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(
        if std::env::var("KEEPSAKE_LONG").is_ok_and(|v| !v.is_empty() && v != "0") { 8_192 } else { 1_024 },
    );
    let counters = std::cell::RefCell::new(Counters::default());
    let mut config = Config { cases, source_file: Some(file!()), ..Config::default() };
    config.failure_persistence = Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions")));
    let mut runner = TestRunner::new(config);
    let history_len = prop_oneof![2 => 0usize..24, 1 => 24usize..61];
    let strategy = (
        history_len.prop_flat_map(|n| prop::collection::vec(spec_strategy(), n)),
        blob_strategy(),
        req_strategy(),
    );
    let result = runner.run(&strategy, |(specs, blob_bytes, req)| {
        let t = Instant::now();
        let input = scenario(&specs, &blob_bytes, &req);
        let generated = t.elapsed().as_secs_f64();
        let out = outcome(&input);
        let built = t.elapsed().as_secs_f64();
        let mut c = counters.borrow_mut();
        let before = c.failures.len();
        check("random history", &input, &out, &mut c);
        c.t_generate += generated;
        c.t_outcome += built - generated;
        c.t_check += t.elapsed().as_secs_f64() - built;
        if c.failures.len() > before {
            return Err(TestCaseError::fail(c.failures[before..].join("\n")));
        }
        Ok(())
    });
    let random_s = wall.elapsed().as_secs_f64();
    let mut c = counters.into_inner();
    let random_histories = c.histories;
    let phases = (c.t_generate, c.t_outcome, c.t_check, c.t_determinism);

    // the snapshot fixtures
    if bless() {
        std::fs::create_dir_all(fixtures_dir()).unwrap();
        for (name, description, input) in fixture_scenarios() {
            let out = outcome(&input);
            let doc = json!({"scenario": name, "description": description, "input": input, "expected": out});
            let path = fixtures_dir().join(format!("{name}.json"));
            std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
            eprintln!("blessed {}", path.display());
        }
    }
    let fixtures = load_fixtures();
    let mut snapshot_mismatches = Vec::new();
    for (file, doc) in &fixtures {
        let input = &doc["input"];
        let out = outcome(input);
        if out != doc["expected"] {
            snapshot_mismatches.push(file.clone());
        }
        check(file, input, &out, &mut c);
    }
    let fixture_names: Vec<String> =
        fixture_scenarios().into_iter().map(|(n, _, _)| format!("{n}.json")).collect();
    let files: Vec<&String> = fixtures.iter().map(|(f, _)| f).collect();

    eprintln!(
        "T11: histories {random_histories} + {} fixtures, budget overruns {}, latest user turn dropped {}, \
         system prompt dropped {}, non-deterministic {} ({} builds; also: older user entries dropped {}, stamps \
         leaked {}, snapshot mismatches {}; exercised: {} budget victims, {} rescues applied, {} aged or stubbed \
         attaches; {} of the plans took victims); wall {:.1} s (random {random_s:.1} s: generate {:.1}, \
         build {:.1}, check {:.1} of which determinism {:.1})",
        fixtures.len(),
        c.budget_overruns,
        c.latest_user_dropped,
        c.system_dropped,
        c.non_deterministic,
        c.builds,
        c.other_user_dropped,
        c.stamps_leaked,
        snapshot_mismatches.len(),
        c.victims_total,
        c.rescues_applied,
        c.aged_or_stubbed,
        c.plans_with_victims,
        wall.elapsed().as_secs_f64(),
        phases.0,
        phases.1,
        phases.2,
        phases.3
    );
    if let Err(e) = result {
        panic!(
            "T11 property failed (minimal case first):\n{e}\nall failures:\n  {}",
            c.failures.join("\n  ")
        );
    }
    assert_eq!(files, fixture_names.iter().collect::<Vec<_>>(), "the fixture set is the generators' set");
    assert!(
        snapshot_mismatches.is_empty(),
        "fixtures differ from what the pipeline builds now: {snapshot_mismatches:?} (if the change is \
         intended, KEEPSAKE_BLESS=1 rewrites them; review the diff against the spec)"
    );
    assert!(
        c.failures.is_empty(),
        "T11 fixtures: {} violation(s):\n  {}",
        c.failures.len(),
        c.failures.join("\n  ")
    );
}

/// The fixtures exercise what they are for (so a regenerated set cannot quietly lose coverage).
#[test]
fn t11_fixtures_cover_the_rules() {
    if bless() {
        return; // the property test is rewriting the files
    }
    let fixtures = load_fixtures();
    let get = |name: &str| {
        &fixtures.iter().find(|(f, _)| f.starts_with(name)).unwrap_or_else(|| panic!("{name}")).1
    };
    let victims = |d: &Value| d["expected"]["plan"]["victims"].as_array().unwrap().len();
    let sizes = |d: &Value| d["expected"]["plan"]["sizes"].as_array().unwrap().len();
    let body = |d: &Value, k: &str| d["expected"]["builds"][k]["body"].to_string();
    let d = get("01_");
    assert_eq!(body(d, "chat").matches("[Attached page context trimmed to keep replies fast").count(), 2);
    let d = get("02_");
    assert!(victims(d) >= 3 && victims(d) < sizes(d) - 1, "02: a middle-sized plan");
    let d = get("03_");
    assert_eq!(victims(d), sizes(d) - 1, "03: everything but the newest, which alone is over budget");
    let d = get("04_");
    assert!(body(d, "chat").contains("[Revenue by region]"), "04: a seen image became its figure label");
    let d = get("05_");
    assert_eq!(d["expected"]["builds"]["chat"]["rescue"]["applied"], json!(true));
    assert_eq!(d["expected"]["builds"]["agent"]["rescue"]["reason"], json!("kind"));
    let d = get("06_");
    assert_eq!(
        d["expected"]["builds"]["chat"]["droppedImages"],
        json!(2),
        "06: one over the 3 MiB turn budget, one past 8"
    );
    let d = get("07_");
    assert!(
        body(d, "chat").contains("Mode: bilibili") && !body(d, "chat").contains("Talk: WAL internals"),
        "07: only the newest video attach"
    );
    let d = get("08_");
    assert!(d["expected"]["builds"]["agent"]["body"]["text"]
        .as_str()
        .unwrap()
        .starts_with("以下是切换到当前会话之前的对话记录"));
    let d = get("09_");
    assert!(body(d, "chat").contains("[Attached page context trimmed"), "09: a legacy-prefix attach aged");
    let d = get("10_");
    assert_eq!(d["input"]["history"].as_array().unwrap().len(), 60);
    assert!(victims(d) >= 1, "10: the photos are over the budget");
    assert_eq!(d["expected"]["builds"]["chat"]["body"]["messages"][0]["role"], "system");
}

/// The checks can fail: a broken outcome is counted under the right heading.
#[test]
fn t11_checks_catch_broken_outcomes() {
    if bless() {
        return; // the property test is rewriting the files
    }
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures_dir().join("02_screenshots_over_budget.json")).unwrap(),
    )
    .unwrap();
    let input = &doc["input"];
    let good = outcome(input);
    let mut c = Counters::default();
    check("good", input, &good, &mut c);
    assert!(c.failures.is_empty(), "{:?}", c.failures);

    // a plan that stops one victim early leaves the spared entries over the budget
    let mut bad = good.clone();
    bad["plan"]["victims"].as_array_mut().unwrap().pop();
    let mut c = Counters::default();
    check("short plan", input, &bad, &mut c);
    assert_eq!(c.budget_overruns, 1, "{:?}", c.failures);

    // chat without its system message, and without the newest history user entry
    let mut bad = good.clone();
    let msgs = bad["builds"]["chat"]["body"]["messages"].as_array_mut().unwrap();
    msgs.remove(0);
    let newest = msgs.iter().rposition(|m| m["role"] == "user" && m.to_string().contains("⟦u26⟧")).unwrap();
    msgs.remove(newest);
    let mut c = Counters::default();
    check("broken chat", input, &bad, &mut c);
    assert!(c.system_dropped >= 1, "{:?}", c.failures);
    assert_eq!(c.latest_user_dropped, 1, "{:?}", c.failures);
    assert!(c.non_deterministic >= 1, "a rebuild differs from the broken reference");

    // anthropic without the current turn
    let mut bad = good.clone();
    bad["builds"]["anthropic"]["body"]["messages"].as_array_mut().unwrap().pop();
    let mut c = Counters::default();
    check("no turn", input, &bad, &mut c);
    assert_eq!(c.latest_user_dropped, 1, "{:?}", c.failures);

    // a stamp in a body
    let mut bad = good;
    bad["builds"]["runs"]["body"]["conversation_history"][0]["imagesSeen"] = json!(true);
    let mut c = Counters::default();
    check("stamp", input, &bad, &mut c);
    assert_eq!(c.stamps_leaked, 1, "{:?}", c.failures);
}

// ---------------------------------------------------------------------------------------------
// fixture generators (deterministic; see the module docs for KEEPSAKE_BLESS)

struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

const NOUNS: &[&str] = &[
    "the borrow checker",
    "a lifetime",
    "the allocator",
    "the request body",
    "a prompt cache",
    "the context window",
    "the image budget",
    "a thumbnail",
    "the write-ahead log",
    "the service worker",
    "a native host",
    "the side panel",
    "quarterly revenue",
    "the regional breakdown",
    "a benchmark",
    "the migration",
    "the summary",
    "a table row",
];
const VERBS: &[&str] = &[
    "explains",
    "bounds",
    "reduces",
    "keeps",
    "drops",
    "measures",
    "rewrites",
    "caches",
    "summarises",
    "compares",
];
const ZH: &[&str] = &[
    "上下文窗口",
    "图片预算",
    "缩略图",
    "请求体",
    "提示缓存",
    "页面内容",
    "季度收入",
    "区域细分",
    "基准测试",
    "迁移",
];

/// Markdown-ish prose of about `n` chars: paragraphs, a list, a table, a fenced block.
fn prose(g: &mut Gen, n: usize) -> String {
    let mut s = String::new();
    let mut para = 0;
    while s.len() < n {
        para += 1;
        match para % 7 {
            3 => {
                s.push_str("\n- ");
                s.push_str(g.pick(NOUNS));
                s.push_str("\n- ");
                s.push_str(g.pick(NOUNS));
                s.push('\n');
            }
            5 => s.push_str("\n| metric | value |\n|---|---|\n| p50 | 12 ms |\n| p99 | 48 ms |\n"),
            6 => s.push_str("\n```rust\nfn main() { println!(\"hi\"); }\n```\n"),
            _ => {
                s.push('\n');
                for _ in 0..4 {
                    let noun = g.pick(NOUNS);
                    let mut chars = noun.chars();
                    let first = chars.next().unwrap().to_uppercase().collect::<String>() + chars.as_str();
                    s.push_str(&format!("{first} {} {}. ", g.pick(VERBS), g.pick(NOUNS)));
                }
                s.push('\n');
            }
        }
    }
    let cut = s.char_indices().map(|(i, _)| i).take_while(|i| *i <= n).last().unwrap_or(0);
    s.truncate(cut);
    s.trim().to_owned()
}

fn zh_prose(g: &mut Gen, n_units: usize) -> String {
    let mut s = String::new();
    let mut units = 0;
    while units < n_units {
        let w = g.pick(ZH);
        let add = if g.next() % 9 == 0 { "🚀，" } else { "，" };
        for piece in [w, add] {
            units += piece.encode_utf16().count();
            s.push_str(piece);
        }
    }
    s
}

fn page(url: &str, title: &str, mode: &str, body: &str) -> String {
    format!("{PREFIX}\nURL: {url}\nTitle: {title}\nMode: {mode}\n---\n\n{body}")
}

fn uid(i: u64) -> String {
    format!("7b0c{i:04x}-5d2e-4f3a-9c1b-{:012x}", i * 7919)
}

fn u(marker: usize, t: &str) -> Value {
    json!({"role": "user", "content": format!("⟦u{marker}⟧ {t}")})
}

fn a(t: &str) -> Value {
    json!({"role": "assistant", "content": t, "providerLabel": "Claude", "providerKey": {"name": "anthropic", "model": "m"}})
}

fn att(marker: usize, url: &str, title: &str, mode: &str, body: &str) -> Value {
    json!({"role": "user", "attachId": uid(marker as u64), "content": page(url, &format!("⟦u{marker}⟧ {title}"), mode, body)})
}

fn imgp(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

fn txt(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

/// Tiny real 2×2 PNGs (fixed base64, so fixtures never depend on an encoder).
const RED: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mP4z8AARAwQCgAf7gP9Y167WwAAAABJRU5ErkJggg==";
const BLUE: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAD0lEQVR42mNgYPgPRmAKABf2A/3HkIu0AAAAAElFTkSuQmCC";

struct Blobs(Map<String, Value>);

impl Blobs {
    fn new() -> Blobs {
        Blobs(Map::new())
    }
    /// A stored blob of `bytes` bytes; returns its reference.
    fn add(&mut self, seed: u64, mime: &str, bytes: u64) -> String {
        let r = format!(
            "{REF_PREFIX}{:016x}{:016x}{:016x}{:016x}",
            seed,
            seed ^ 0xA5A5,
            bytes,
            seed.wrapping_mul(31)
        );
        self.0.insert(r.clone(), json!({"mime": mime, "bytes": bytes}));
        r
    }
}

fn scenario_doc(history: Vec<Value>, blobs: Blobs, budget: usize, request: Value) -> Value {
    json!({"history": history, "blobs": Value::Object(blobs.0), "budget": budget, "request": request})
}

fn fixture_scenarios() -> Vec<(&'static str, &'static str, Value)> {
    let mut out = Vec::new();
    let mut g = Gen(11);

    // 01: three long articles read over a research session; the two older ones age
    {
        let mut h = vec![
            att(
                0,
                "https://blog.example.com/rust-ownership",
                "Ownership in depth",
                "full",
                &prose(&mut g, 16_000),
            ),
            a(&prose(&mut g, 2_400)),
            u(2, "What does the borrow checker reject here?"),
            a(&prose(&mut g, 1_800)),
            att(
                4,
                "https://docs.example.org/lifetimes",
                "Lifetimes reference",
                "full | markdown",
                &prose(&mut g, 11_000),
            ),
            a(&prose(&mut g, 1_500)),
            u(6, "Compare that with the first article."),
            a(&prose(&mut g, 2_000)),
            u(8, "And in async code?"),
            a(&prose(&mut g, 2_200)),
            u(10, "Give me a checklist."),
            a(&prose(&mut g, 900)),
        ];
        h.push(att(
            12,
            "https://news.example.net/async-rust",
            "Async Rust in 2025",
            "full",
            &prose(&mut g, 9_000),
        ));
        h.push(a(&prose(&mut g, 1_200)));
        out.push((
            "01_research_three_articles",
            "Three long attaches across a research session: the two older ones are cold (≥ 3 user turns \
             after, ≥ 8,000 chars) and go out as aged stubs; the newest attach goes out in full.",
            scenario_doc(
                h,
                Blobs::new(),
                UNSEEN_IMAGE_BYTES_BUDGET,
                json!({
                    "turn": {"userText": "⟦turn⟧ Summarise what changed between the three articles."},
                    "systemPrompt": "You are a careful research assistant. Quote the pages.",
                    "bodyFields": {"model": "gpt-4.1", "stream": true}
                }),
            ),
        ));
    }

    // 02: a screenshot-heavy debugging session over the 8 MiB budget
    {
        let mut blobs = Blobs::new();
        let mut h = Vec::new();
        for i in 0..14 {
            let n = if i % 4 == 0 { 2 } else { 1 };
            let mut parts =
                vec![txt(&format!("⟦u{}⟧ Screenshot {i}: the layout breaks after the resize.", 2 * i))];
            for k in 0..n {
                let bytes = 700_000 + (g.next() % 900_000);
                parts.push(imgp(&blobs.add(200 + i * 2 + k, "image/png", bytes)));
            }
            let mut e = json!({"role": "user", "content": parts});
            if i < 10 {
                e["imagesSeen"] = json!(true);
            }
            h.push(e);
            h.push(a(&prose(&mut g, 600)));
        }
        out.push((
            "02_screenshots_over_budget",
            "Fourteen screenshot turns (0.7–1.6 MB PNGs) total well over 8 MiB: the plan thumbnails the \
             oldest entries until the rest fits; seen screenshots go out as labels.",
            scenario_doc(
                h,
                blobs,
                UNSEEN_IMAGE_BYTES_BUDGET,
                json!({
                    "turn": {"userText": "⟦turn⟧ Is it fixed now?", "images": [RED]},
                    "systemPrompt": "Be brief."
                }),
            ),
        ));
    }

    // 03: the newest image-bearing entry alone is over the budget
    {
        let mut blobs = Blobs::new();
        let older = blobs.add(301, "image/jpeg", 900_000);
        let huge: Vec<Value> = (0..3).map(|k| imgp(&blobs.add(310 + k, "image/png", 3_000_000))).collect();
        let mut newest = vec![txt("⟦u2⟧ Three full-resolution photos of the whiteboard")];
        newest.extend(huge);
        let h = vec![
            json!({"role": "user", "content": [txt("⟦u0⟧ The diagram from Monday"), imgp(&older)], "imagesSeen": true}),
            a("A sequence diagram with three services."),
            json!({"role": "user", "content": newest}),
            a(&prose(&mut g, 700)),
        ];
        out.push((
            "03_newest_alone_over_budget",
            "The newest image-bearing entry alone exceeds 8 MiB: the plan takes every older entry and \
             spares the newest (§6.5), the one case where the budget stays exceeded.",
            scenario_doc(
                h,
                blobs,
                UNSEEN_IMAGE_BYTES_BUDGET,
                json!({
                    "turn": {"userText": "⟦turn⟧ Transcribe the middle photo."},
                    "systemPrompt": "You read handwriting."
                }),
            ),
        ));
    }

    // 04: an attach with anchored figures, seen, then an unseen one
    {
        let mut blobs = Blobs::new();
        let c1 = blobs.add(401, "image/png", 240_000);
        let c2 = blobs.add(402, "image/png", 310_000);
        let c3 = blobs.add(403, "image/webp", 120_000);
        let body = format!(
            "{}\nRevenue grew in every region [Figure 1].\n{}\nCosts were flat [图2].\n\n## Figures\n1. Revenue by region\n2. Cost breakdown",
            prose(&mut g, 3_000),
            prose(&mut g, 2_000)
        );
        let h = vec![
            json!({"role": "user", "attachId": uid(40), "imagesSeen": true, "content": [
                txt(&page("https://ir.example.com/q3", "⟦u0⟧ Q3 report", "full", &body)),
                imgp(&c1), imgp(&c2), txt("Source: investor relations")]}),
            a(&prose(&mut g, 1_600)),
            json!({"role": "user", "imagesSeen": false, "content": [txt("⟦u2⟧ And this chart from the call?"), imgp(&c3)]}),
            a(&prose(&mut g, 800)),
        ];
        out.push((
            "04_seen_figures_become_labels",
            "A seen attach whose images are labelled in its Figures section goes out with [Revenue by \
             region] / [Cost breakdown] in place of the pixels; the unseen chart keeps its pixels.",
            scenario_doc(
                h,
                blobs,
                UNSEEN_IMAGE_BYTES_BUDGET,
                json!({
                    "turn": {"userText": "⟦turn⟧ Which region grew fastest?"},
                    "systemPrompt": "Answer from the report only."
                }),
            ),
        ));
    }

    // 05: overflow rescue
    {
        let h = vec![
            att(0, "https://example.com/spec", "Protocol spec", "full", &prose(&mut g, 14_000)),
            a(&prose(&mut g, 1_000)),
            u(2, "Where is the chunking rule?"),
            a(&prose(&mut g, 700)),
            att(4, "https://example.com/changelog", "Changelog", "selection", &prose(&mut g, 3_000)),
            u(5, "And the migration notes?"),
            att(6, "https://example.com/migrations", "Migration guide", "full", &prose(&mut g, 10_000)),
            a(&prose(&mut g, 900)),
        ];
        out.push((
            "05_overflow_rescue",
            "After a context-overflow error every attach of ≥ 8,000 chars, the newest included, becomes \
             the rescue stub; the small changelog attach stays; agent reports reason kind.",
            scenario_doc(h, Blobs::new(), UNSEEN_IMAGE_BYTES_BUDGET, json!({
                "turn": {"userText": "⟦turn⟧ List the breaking changes."},
                "systemPrompt": "You are precise.",
                "rescue": {"errorMessage": "This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens."},
                "bodyFields": {"model": "claude-sonnet", "max_tokens": 8192}
            })),
        ));
    }

    // 06: continuation of a long reply, with a turn over the image caps
    {
        let mut blobs = Blobs::new();
        let mut images: Vec<Value> =
            (0..9).map(|k| json!(blobs.add(600 + k, "image/jpeg", 90_000 + k * 1_000))).collect();
        images.insert(2, json!(blobs.add(690, "image/png", 2_600_000))); // alone over the 3 MiB turn budget
        let h = vec![u(0, "Write a long design review of the attached mockups."), a(&prose(&mut g, 4_000))];
        out.push((
            "06_continuation_with_capped_images",
            "A continuation pass (the reply hit the output cap): history, the current turn with the images \
             the per-turn caps keep (one over 3 MiB, the rest past 8 dropped, with the note), the partial \
             reply, then the instruction.",
            scenario_doc(h, blobs, UNSEEN_IMAGE_BYTES_BUDGET, json!({
                "turn": {"userText": "⟦turn⟧ Review these ten mockups.", "images": images},
                "systemPrompt": "You are a design reviewer.",
                "pass": {"kind": "continuation", "previousReply": prose(&mut g, 6_000), "instruction": "Continue exactly where you stopped."}
            })),
        ));
    }

    // 07: timestamp rewrite over video attaches
    {
        let mut v1 = att(
            0,
            "https://www.youtube.com/watch?v=abc",
            "Talk: WAL internals",
            "youtube",
            &prose(&mut g, 9_000),
        );
        v1["videoSrc"] = json!("https://www.youtube.com/watch?v=abc");
        let mut v2 = att(
            3,
            "https://www.bilibili.com/video/BV1xx",
            "讲座：SQLite 事务",
            "bilibili",
            &zh_prose(&mut g, 8_500),
        );
        v2["videoSrc"] = json!("https://www.bilibili.com/video/BV1xx");
        let h = vec![v1, a(&prose(&mut g, 1_500)), u(2, "Make notes."), v2, a(&prose(&mut g, 1_100))];
        out.push((
            "07_timestamp_rewrite_video",
            "A timestampRewrite pass: the raw (unaged) newest attach carrying videoSrc, then the turn, the \
             previous reply and the instruction.",
            scenario_doc(h, Blobs::new(), UNSEEN_IMAGE_BYTES_BUDGET, json!({
                "turn": {"userText": "⟦turn⟧ 做一份带时间戳的笔记。"},
                "systemPrompt": "You take notes with [mm:ss] stamps.",
                "pass": {"kind": "timestampRewrite", "previousReply": prose(&mut g, 1_200), "instruction": "Rewrite with [mm:ss] stamps."}
            })),
        ));
    }

    // 08: agent hand-off with backfill and a trailing run of attaches with images
    {
        let mut blobs = Blobs::new();
        let shot = blobs.add(801, "image/png", 400_000);
        let h = vec![
            u(0, &zh_prose(&mut g, 300)),
            a(&zh_prose(&mut g, 900)),
            json!({"role": "user", "content": [txt("⟦u2⟧ 这张图是什么？"), imgp(RED)]}),
            a("红色的方块。"),
            att(4, "https://example.cn/old", "旧页面", "full", &zh_prose(&mut g, 2_000)),
            a(&zh_prose(&mut g, 400)),
            att(6, "https://example.cn/p1", "第一页", "full", &zh_prose(&mut g, 4_000)),
            json!({"role": "user", "attachId": uid(7), "content": [
                txt(&page("https://example.cn/p2", "⟦u7⟧ 第二页", "screenshot", "(screenshot)\n[图1]")), imgp(&shot), txt("截图说明")]}),
        ];
        out.push((
            "08_agent_backfill_and_run",
            "An agent turn after switching sessions: backfill lines for earlier turns (images noted, \
             attaches skipped), the trailing run of page contexts with its screenshot, then the user text.",
            scenario_doc(
                h,
                blobs,
                UNSEEN_IMAGE_BYTES_BUDGET,
                json!({
                    "turn": {"userText": "⟦turn⟧ 总结这两页。", "images": [BLUE]},
                    "backfill": true,
                    "systemPrompt": "忽略此项（agent 不带系统提示）"
                }),
            ),
        ));
    }

    // 09: CJK and emoji around the UTF-16 thresholds, legacy prefix, system entries, upTo
    {
        let legacy_body = zh_prose(&mut g, 9_000);
        let h = vec![
            json!({"role": "system", "content": "An old system note stored in the history."}),
            json!({"role": "user", "attachId": uid(1), "content": format!(
                "{LEGACY}\nURL: https://legacy.example.com/\nTitle: ⟦u1⟧ 旧版本页面\nMode: full\n---\n\n{legacy_body}")}),
            a(&zh_prose(&mut g, 500)),
            u(3, &zh_prose(&mut g, 200)),
            a(&zh_prose(&mut g, 300)),
            u(5, "😀😀😀 emoji question"),
            a(&zh_prose(&mut g, 250)),
            u(7, &zh_prose(&mut g, 100)),
            att(8, "https://example.com/边界", "边界页面", "full", &zh_prose(&mut g, 7_880)),
            a("好的。"),
            u(10, "Not sent: beyond upTo"),
            a("Not sent either."),
        ];
        out.push((
            "09_cjk_legacy_and_up_to",
            "Chinese and emoji text measured in UTF-16 units, a legacy-prefix attach that ages, a history \
             system entry that never reaches a body, and upTo cutting the last two entries.",
            scenario_doc(
                h,
                Blobs::new(),
                UNSEEN_IMAGE_BYTES_BUDGET,
                json!({
                    "turn": {"userText": "⟦turn⟧ 继续。"},
                    "systemPrompt": "用中文回答。",
                    "upTo": 10
                }),
            ),
        ));
    }

    // 10: a full live history: 60 entries, every kind of content, aging overrides, bodyFields clash
    {
        let mut blobs = Blobs::new();
        let mut h = Vec::new();
        let mut i = 0usize;
        while h.len() < 60 {
            let n = h.len();
            let e = match i % 6 {
                0 => att(
                    n,
                    &format!("https://site{i}.example.com/"),
                    &format!("Page {i}"),
                    "full",
                    &prose(&mut g, 2_500 + (i * 331) % 2_000),
                ),
                1 => a(&prose(&mut g, 500 + (i * 97) % 1_500)),
                2 => {
                    let r = blobs.add(1000 + i as u64, "image/jpeg", 500_000 + (g.next() % 900_000));
                    let mut e =
                        json!({"role": "user", "content": [txt(&format!("⟦u{n}⟧ Photo {i}")), imgp(&r)]});
                    if i < 40 {
                        e["imagesSeen"] = json!(true);
                    }
                    e
                }
                3 => a(&prose(&mut g, 300)),
                4 => u(n, &prose(&mut g, 200)),
                _ => a(&prose(&mut g, 400)),
            };
            h.push(e);
            i += 1;
        }
        out.push((
            "10_full_live_history",
            "A full live history (60 entries, ~64,000 chars): attaches aged under overridden options \
             (1 user turn after, 2,000 chars), seen photos as labels, the budget plan over many photos, and \
             bodyFields that try to replace host-built fields.",
            scenario_doc(h, blobs, UNSEEN_IMAGE_BYTES_BUDGET, json!({
                "turn": {"userText": "⟦turn⟧ Wrap up the whole session in five bullets."},
                "systemPrompt": "You are Keepsake's assistant.",
                "aging": {"minUserTurnsAfter": 1, "minChars": 2000},
                "bodyFields": {"model": "m-10", "messages": "x", "system": "x", "instructions": "x", "input": "x", "temperature": 0}
            })),
        ));
    }
    out
}
