//! `request.build` (storage-model §6.3, §6.4, §7.1–§7.3, §8, §10, §11.16–§11.18; PROTOCOL.md
//! "requests") through the real binary over pipes on a temp database. Histories are written with
//! history.replace / history.append / history.attach / sessions.save.
//!
//! Every body any test builds goes through `build`, which validates it against its provider's
//! documented request shape (bodies carrying image tokens are filled first, as the extension
//! would). Fixture scenarios compare whole results with `tests/fixtures/request_build/*.json`;
//! `KEEPSAKE_BLESS=1 cargo test --test it requests::build` rewrites them (review them against §8
//! before committing: they encode the spec, not whatever the code does).
use crate::harness::*;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use serde_json::{json, Map, Value};

const PREFIX: &str = "[Page context attached by Keepsake]";
const LEGACY: &str = "[Page context attached by browsa]";
const KINDS: [&str; 5] = ["chat", "responses", "anthropic", "runs", "agent"];
const REF_PREFIX: &str = "keepsake-image:sha256:";
const TURN_PREFIX: &str = "keepsake-turn-image:";

// Literals of the spec (storage-model §6.4, §7.1, §7.3, §8.1, §8.4, §8.6).
const NO_INSTRUCTION: &str = "(no instruction)";
const DESCRIBE: &str = "Describe these images.";
const RESPOND: &str = "(no instruction; just respond to the page context)";
const CONTINUING: &str = "(continuing the conversation)";
const BACKFILL_HEADER: &str = "以下是切换到当前会话之前的对话记录，仅供参考：";
const BACKFILL_IMAGE_NOTE: &str = "（附图，未随记录转发）";
const RUN_NOTE: &str = "（以上页面内容已在本地附上，请直接依据这些内容回答，不要再去抓取或打开其中的链接。）";
const AGED_HEAD: &str =
    "[Attached page context trimmed to keep replies fast — sent in full in an earlier turn]";
const RESCUE_NOTE: &str = "[Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]";
const SIZE_TAIL: &str = "chars. If you need exact details from this page, ask the user to re-attach it.";
const OVERFLOW: &str =
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.";

fn dropped_note(n: usize) -> String {
    format!("\n\n（注：另有 {n} 张图片因超出单条消息大小上限未能随附。）")
}

// Fixed 2×2 PNGs (standard padded base64), so fixtures never depend on an encoder version.
const RED: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mP4z8AARAwQCgAf7gP9Y167WwAAAABJRU5ErkJggg==";
const BLUE: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAD0lEQVR42mNgYPgPRmAKABf2A/3HkIu0AAAAAElFTkSuQmCC";
const GREEN: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAD0lEQVR42mNgWMAAQhAKABGOAoGmp5hDAAAAAElFTkSuQmCC";
const YELLOW: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mM4cYIBiBggFAAu7gZBQgrTHwAAAABJRU5ErkJggg==";

fn png_url(b64: &str) -> String {
    format!("data:image/png;base64,{b64}")
}

fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_else(|e| panic!("bad base64 {e}"))
}

fn ref_of(b64_png: &str) -> String {
    format!("{REF_PREFIX}{}", sha256_hex(&unb64(b64_png)))
}

fn u16len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Attach text laid out as §2.4 (no header, no format).
fn att(url: &str, title: &str, mode: &str, body: &str) -> String {
    format!("{PREFIX}\nURL: {url}\nTitle: {title}\nMode: {mode}\n---\n\n{body}")
}

/// Deterministic ASCII filler of exactly `n` chars, one line.
fn filler(n: usize) -> String {
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".chars().cycle().take(n).collect()
}

/// An attach text of exactly `total` UTF-16 units.
fn att_of_len(url: &str, title: &str, total: usize) -> String {
    let head = att(url, title, "full", "");
    let t = att(url, title, "full", &filler(total - u16len(&head)));
    assert_eq!(u16len(&t), total);
    t
}

fn aged_stub(title: Option<&str>, url: Option<&str>, n: usize) -> String {
    let mut lines = vec![AGED_HEAD.to_owned()];
    lines.extend(title.map(|t| format!("Title: {t}")));
    lines.extend(url.map(|u| format!("URL: {u}")));
    lines.push(format!("Original size: ~{n} {SIZE_TAIL}"));
    lines.join("\n")
}

fn rescue_stub(title: Option<&str>, url: Option<&str>, n: usize) -> String {
    let mut lines = vec![PREFIX.to_owned(), RESCUE_NOTE.to_owned()];
    lines.extend(title.map(|t| format!("Title: {t}")));
    lines.extend(url.map(|u| format!("URL: {u}")));
    lines.push(format!("Original size: ~{n} {SIZE_TAIL}"));
    lines.join("\n")
}

fn img(url: &str) -> Value {
    image_part(url)
}

fn uuid(n: u32) -> String {
    format!("4f1c2b9e-0000-4000-8000-{n:012}")
}

// ---------------------------------------------------------------------------------------------
// Provider-shape validators.
//
// Checked against the providers' documented request formats (looked up with the search tool):
// - OpenAI Chat Completions: `messages[]` of {role: system|user|assistant, content}; content a
//   string or content parts; user parts are `{type:"text", text}` or
//   `{type:"image_url", image_url:{url}}` (object form; url an http(s) URL or a base64 data URL);
//   assistant parts may only be text (or refusal): ChatCompletionRequestAssistantMessageContentPart
//   = Text | Refusal in OpenAI's OpenAPI schema; system parts text only.
// - OpenAI Responses: `input` string or items {role, content}; content a string or parts;
//   user parts `{type:"input_text", text}` / `{type:"input_image", image_url:"<url string>"}`;
//   assistant message content is output content (`output_text`; `input_text` there is refused);
//   `instructions` an optional string.
// - Anthropic Messages: optional top-level `system` string; `messages[]` roles user/assistant
//   only, the first one user; content a string or blocks `{type:"text", text}` /
//   `{type:"image", source:{type:"base64", media_type: image/jpeg|image/png|image/gif|image/webp,
//   data: <bare base64>}}`; text must be non-empty and not whitespace only ("text content blocks
//   must contain non-whitespace text"); the data must really be of the declared media type.
// - Hermes-style runs and agents: the shapes in PROTOCOL.md's body-shape table.
// Every message/item the host builds must carry exactly role + content (storage-model §8.1).
// ---------------------------------------------------------------------------------------------

type Check = Result<(), String>;

fn field<'a>(m: &'a Map<String, Value>, k: &str, what: &str) -> Result<&'a Value, String> {
    m.get(k).ok_or_else(|| format!("{what}: missing `{k}`"))
}

fn as_obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{what}: not an object: {}", short(v)))
}

fn as_str<'a>(v: &'a Value, what: &str) -> Result<&'a str, String> {
    v.as_str().ok_or_else(|| format!("{what}: not a string: {}", short(v)))
}

fn as_arr<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, String> {
    v.as_array().ok_or_else(|| format!("{what}: not an array: {}", short(v)))
}

fn exact_keys(m: &Map<String, Value>, keys: &[&str], what: &str) -> Check {
    let got: BTreeSet<&str> = m.keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = keys.iter().copied().collect();
    if got != want {
        return Err(format!("{what}: keys {got:?}, expected exactly {want:?}"));
    }
    Ok(())
}

fn starts_ci(s: &str, p: &str) -> bool {
    s.len() >= p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
}

/// An image URL a provider accepts: http(s), or a data:image/…;base64 URL with valid base64.
fn sendable_url(u: &str, what: &str) -> Check {
    if starts_ci(u, "http://") || starts_ci(u, "https://") {
        return Ok(());
    }
    if starts_ci(u, "data:image/") {
        if let Some((head, data)) = u.split_once(',') {
            if head.to_ascii_lowercase().ends_with(";base64")
                && base64::engine::general_purpose::STANDARD.decode(data).is_ok()
            {
                return Ok(());
            }
        }
    }
    Err(format!("{what}: not a sendable image URL: {}", &u[..u.len().min(80)]))
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn validate_chat(body: &Value) -> Check {
    let b = as_obj(body, "chat body")?;
    let msgs = as_arr(field(b, "messages", "chat body")?, "chat messages")?;
    if msgs.is_empty() {
        return Err("chat: messages empty".into());
    }
    for (i, m) in msgs.iter().enumerate() {
        let what = format!("chat messages[{i}]");
        let m = as_obj(m, &what)?;
        exact_keys(m, &["role", "content"], &what)?;
        let role = as_str(&m["role"], &what)?;
        if !matches!(role, "system" | "user" | "assistant") {
            return Err(format!("{what}: role {role:?}"));
        }
        match &m["content"] {
            Value::String(_) => {}
            Value::Array(parts) => {
                if parts.is_empty() {
                    return Err(format!("{what}: empty content parts"));
                }
                for (j, p) in parts.iter().enumerate() {
                    let pw = format!("{what}.content[{j}]");
                    let p = as_obj(p, &pw)?;
                    match as_str(field(p, "type", &pw)?, &pw)? {
                        "text" => {
                            exact_keys(p, &["type", "text"], &pw)?;
                            as_str(&p["text"], &pw)?;
                        }
                        "image_url" if role == "user" => {
                            exact_keys(p, &["type", "image_url"], &pw)?;
                            let iu = as_obj(&p["image_url"], &format!("{pw}.image_url (object form)"))?;
                            sendable_url(as_str(field(iu, "url", &pw)?, &pw)?, &pw)?;
                        }
                        other => return Err(format!("{pw}: part type {other:?} not allowed for {role}")),
                    }
                }
            }
            other => return Err(format!("{what}: content {}", short(other))),
        }
    }
    Ok(())
}

fn validate_responses(body: &Value) -> Check {
    let b = as_obj(body, "responses body")?;
    if let Some(i) = b.get("instructions") {
        as_str(i, "responses instructions")?;
    }
    let items = as_arr(field(b, "input", "responses body")?, "responses input")?;
    if items.is_empty() {
        return Err("responses: input empty".into());
    }
    for (i, m) in items.iter().enumerate() {
        let what = format!("responses input[{i}]");
        let m = as_obj(m, &what)?;
        exact_keys(m, &["role", "content"], &what)?;
        let role = as_str(&m["role"], &what)?;
        if !matches!(role, "user" | "assistant") {
            return Err(format!("{what}: role {role:?}"));
        }
        match &m["content"] {
            Value::String(_) => {}
            Value::Array(parts) => {
                if parts.is_empty() {
                    return Err(format!("{what}: empty content parts"));
                }
                for (j, p) in parts.iter().enumerate() {
                    let pw = format!("{what}.content[{j}]");
                    let p = as_obj(p, &pw)?;
                    match (role, as_str(field(p, "type", &pw)?, &pw)?) {
                        ("user", "input_text") | ("assistant", "output_text") => {
                            exact_keys(p, &["type", "text"], &pw)?;
                            as_str(&p["text"], &pw)?;
                        }
                        ("user", "input_image") => {
                            exact_keys(p, &["type", "image_url"], &pw)?;
                            sendable_url(as_str(&p["image_url"], &format!("{pw}.image_url (string)"))?, &pw)?;
                        }
                        (r, t) => return Err(format!("{pw}: part type {t:?} not allowed in a {r} message")),
                    }
                }
            }
            other => return Err(format!("{what}: content {}", short(other))),
        }
    }
    Ok(())
}

fn sniff_matches(mime: &str, bytes: &[u8]) -> bool {
    match mime {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(&[0xff, 0xd8, 0xff]),
        "image/gif" => bytes.starts_with(b"GIF8"),
        "image/webp" => bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP",
        _ => false,
    }
}

fn validate_anthropic(body: &Value) -> Check {
    let b = as_obj(body, "anthropic body")?;
    if let Some(s) = b.get("system") {
        as_str(s, "anthropic system")?;
    }
    let msgs = as_arr(field(b, "messages", "anthropic body")?, "anthropic messages")?;
    if msgs.is_empty() {
        return Err("anthropic: messages empty".into());
    }
    for (i, m) in msgs.iter().enumerate() {
        let what = format!("anthropic messages[{i}]");
        let m = as_obj(m, &what)?;
        exact_keys(m, &["role", "content"], &what)?;
        let role = as_str(&m["role"], &what)?;
        if !matches!(role, "user" | "assistant") {
            return Err(format!("{what}: role {role:?}"));
        }
        if i == 0 && role != "user" {
            return Err(format!("{what}: the first message must be a user message"));
        }
        match &m["content"] {
            Value::String(s) => {
                if blank(s) {
                    return Err(format!("{what}: blank string content"));
                }
            }
            Value::Array(blocks) => {
                if blocks.is_empty() {
                    return Err(format!("{what}: empty content blocks"));
                }
                for (j, bl) in blocks.iter().enumerate() {
                    let bw = format!("{what}.content[{j}]");
                    let bl = as_obj(bl, &bw)?;
                    match as_str(field(bl, "type", &bw)?, &bw)? {
                        "text" => {
                            exact_keys(bl, &["type", "text"], &bw)?;
                            if blank(as_str(&bl["text"], &bw)?) {
                                return Err(format!("{bw}: text block without non-whitespace text"));
                            }
                        }
                        "image" => {
                            exact_keys(bl, &["type", "source"], &bw)?;
                            let src = as_obj(&bl["source"], &bw)?;
                            exact_keys(src, &["type", "media_type", "data"], &format!("{bw}.source"))?;
                            if src["type"] != "base64" {
                                return Err(format!("{bw}: source.type {}", src["type"]));
                            }
                            let mt = as_str(&src["media_type"], &bw)?;
                            if !matches!(mt, "image/jpeg" | "image/png" | "image/gif" | "image/webp") {
                                return Err(format!("{bw}: media_type {mt:?}"));
                            }
                            let data = as_str(&src["data"], &bw)?;
                            if data.starts_with("data:") {
                                return Err(format!("{bw}: data carries a data: prefix"));
                            }
                            let bytes = base64::engine::general_purpose::STANDARD
                                .decode(data)
                                .map_err(|e| format!("{bw}: data not base64: {e}"))?;
                            if !sniff_matches(mt, &bytes) {
                                return Err(format!("{bw}: data is not {mt}"));
                            }
                        }
                        other => return Err(format!("{bw}: block type {other:?}")),
                    }
                }
            }
            other => return Err(format!("{what}: content {}", short(other))),
        }
    }
    Ok(())
}

fn validate_runs(body: &Value) -> Check {
    let b = as_obj(body, "runs body")?;
    if let Some(i) = b.get("instructions") {
        as_str(i, "runs instructions")?;
    }
    match field(b, "input", "runs body")? {
        Value::String(_) => {}
        Value::Array(items) => {
            if items.is_empty() {
                return Err("runs: input array empty".into());
            }
            for (i, it) in items.iter().enumerate() {
                let what = format!("runs input[{i}]");
                let it = as_obj(it, &what)?;
                exact_keys(it, &["role", "content"], &what)?;
                if it["role"] != "user" {
                    return Err(format!("{what}: role {}", it["role"]));
                }
                for (j, p) in as_arr(&it["content"], &what)?.iter().enumerate() {
                    let pw = format!("{what}.content[{j}]");
                    let p = as_obj(p, &pw)?;
                    match as_str(field(p, "type", &pw)?, &pw)? {
                        "text" => {
                            exact_keys(p, &["type", "text"], &pw)?;
                            as_str(&p["text"], &pw)?;
                        }
                        "image_url" => {
                            exact_keys(p, &["type", "image_url"], &pw)?;
                            let iu = as_obj(&p["image_url"], &pw)?;
                            sendable_url(as_str(field(iu, "url", &pw)?, &pw)?, &pw)?;
                        }
                        other => return Err(format!("{pw}: part type {other:?}")),
                    }
                }
            }
        }
        other => return Err(format!("runs input: {}", short(other))),
    }
    for (i, m) in as_arr(field(b, "conversation_history", "runs body")?, "runs history")?.iter().enumerate() {
        let what = format!("runs conversation_history[{i}]");
        let m = as_obj(m, &what)?;
        exact_keys(m, &["role", "content"], &what)?;
        if !matches!(m["role"].as_str(), Some("user" | "assistant")) {
            return Err(format!("{what}: role {}", m["role"]));
        }
        as_str(&m["content"], &what)?;
    }
    Ok(())
}

fn validate_agent(body: &Value) -> Check {
    let b = as_obj(body, "agent body")?;
    as_str(field(b, "text", "agent body")?, "agent text")?;
    for (i, u) in as_arr(field(b, "images", "agent body")?, "agent images")?.iter().enumerate() {
        sendable_url(as_str(u, "agent image")?, &format!("agent images[{i}]"))?;
    }
    Ok(())
}

fn validate(kind: &str, body: &Value) -> Check {
    match kind {
        "chat" => validate_chat(body),
        "responses" => validate_responses(body),
        "anthropic" => validate_anthropic(body),
        "runs" => validate_runs(body),
        "agent" => validate_agent(body),
        other => Err(format!("unknown kind {other}")),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 1500 {
        let mut cut = 1500;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &s[..cut])
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Image tokens: collection and the extension-side filler (PROTOCOL.md "imageRefs").

fn is_token(s: &str) -> bool {
    s.starts_with(REF_PREFIX) || s.starts_with(TURN_PREFIX)
}

fn collect_tokens(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) if is_token(s) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| collect_tokens(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_tokens(x, out)),
        _ => {}
    }
}

/// What a token stands for: (mime, bare base64).
fn token_image(h: &mut Host, token: &str, turn_images: &[Value]) -> (String, String) {
    if let Some(i) = token.strip_prefix(TURN_PREFIX) {
        let i: usize = i.parse().unwrap_or_else(|_| panic!("bad turn placeholder {token}"));
        let url = turn_images
            .get(i)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{token}: no such turn image"));
        let (head, data) = url.split_once(',').expect("turn data URL");
        let mime = head.trim_start_matches("data:").split(';').next().unwrap().to_ascii_lowercase();
        (mime, data.to_owned())
    } else {
        let r = h.ok("images.get", json!({"ref": token}));
        (r["mime"].as_str().unwrap().to_owned(), r["bytes"].as_str().unwrap().to_owned())
    }
}

/// The extension's filler: a string equal to a token becomes that image's data URL; an Anthropic
/// `source` whose `data` is a token gets the bare base64.
fn fill(h: &mut Host, v: &Value, turn_images: &[Value]) -> Value {
    match v {
        Value::String(s) if is_token(s) => {
            let (mime, data) = token_image(h, s, turn_images);
            json!(format!("data:{mime};base64,{data}"))
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| fill(h, x, turn_images)).collect()),
        Value::Object(o) => {
            if o.get("type") == Some(&json!("base64")) {
                if let Some(tok) = o.get("data").and_then(Value::as_str).filter(|s| is_token(s)) {
                    let (_, data) = token_image(h, tok, turn_images);
                    let mut c = o.clone();
                    c.insert("data".into(), json!(data));
                    return Value::Object(c);
                }
            }
            Value::Object(o.iter().map(|(k, x)| (k.clone(), fill(h, x, turn_images))).collect())
        }
        other => other.clone(),
    }
}

fn turn_images_of(args: &Value) -> Vec<Value> {
    args["turn"]["images"].as_array().cloned().unwrap_or_default()
}

/// request.build through the host. Every body is validated against its provider's shape; a body
/// carrying image tokens is filled first (tokens are not sendable as such). Without `imageRefs`
/// no token may appear.
fn build(h: &mut Host, args: Value) -> Value {
    let kind = args["kind"].as_str().expect("kind").to_owned();
    let r = h.ok("request.build", args.clone());
    let mut tokens = BTreeSet::new();
    collect_tokens(&r["body"], &mut tokens);
    let body = if r.get("imageRefs").is_some() {
        fill(h, &r["body"], &turn_images_of(&args))
    } else {
        assert!(tokens.is_empty(), "{kind}: image tokens without imageRefs: {tokens:?}");
        r["body"].clone()
    };
    if let Err(e) = validate(&kind, &body) {
        panic!("{kind} body violates the provider's request shape: {e}\nbody: {}", short(&body));
    }
    r
}

fn with_kind(kind: &str, args: &Value) -> Value {
    let mut a = args.clone();
    a["kind"] = json!(kind);
    a
}

fn start() -> (tempfile::TempDir, PathBuf, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.meta", json!({}));
    (dir, db, h)
}

fn replace(h: &mut Host, entries: &[Value]) {
    let r = h.ok("history.replace", json!({ "entries": entries }));
    assert_eq!(r["length"], json!(entries.len()), "history.replace trimmed the test history");
}

/// The history part and current turn as a list of role/content messages, per kind (chat without
/// its leading system message; runs: conversation_history).
fn conv(kind: &str, body: &Value) -> Vec<Value> {
    let list = match kind {
        "chat" | "anthropic" => &body["messages"],
        "responses" => &body["input"],
        "runs" => &body["conversation_history"],
        _ => panic!("no conversation in {kind}"),
    };
    let mut v = list.as_array().expect("message list").clone();
    if kind == "chat" && v.first().is_some_and(|m| m["role"] == "system") {
        v.remove(0);
    }
    v
}

/// The spec's message for one prepared history entry given in the stored chat shape (string or
/// text/image_url parts with data URLs), §8.2–§8.5 with §11.17; `None` when it is skipped.
fn expect_msg(kind: &str, role: &str, content: &Value) -> Option<Value> {
    match content {
        Value::String(s) => {
            if blank(s) {
                None
            } else {
                Some(json!({"role": role, "content": s}))
            }
        }
        Value::Array(parts) => {
            let mut out = Vec::new();
            let mut flat = Vec::new();
            for p in parts {
                let t = p["type"].as_str().unwrap_or("");
                if t == "text" || t == "input_text" {
                    let text = p["text"].as_str().unwrap_or("");
                    if blank(text) {
                        continue;
                    }
                    flat.push(text.to_owned());
                    out.push(match kind {
                        "responses" if role == "assistant" => json!({"type": "output_text", "text": text}),
                        "responses" => json!({"type": "input_text", "text": text}),
                        _ => json!({"type": "text", "text": text}),
                    });
                } else if t == "image_url" {
                    let url = p["image_url"]["url"].as_str().or(p["image_url"].as_str()).unwrap();
                    flat.push("[image]".into());
                    match kind {
                        "chat" => out.push(json!({"type": "image_url", "image_url": {"url": url}})),
                        "responses" if role == "user" => {
                            out.push(json!({"type": "input_image", "image_url": url}))
                        }
                        "anthropic" => {
                            let (head, data) = url.split_once(',').unwrap();
                            let mime = head.trim_start_matches("data:").split(';').next().unwrap();
                            out.push(json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}));
                        }
                        _ => {}
                    }
                }
            }
            if kind == "runs" {
                let s = flat.join("\n");
                return (!blank(&s)).then(|| json!({"role": role, "content": s}));
            }
            (!out.is_empty()).then(|| json!({"role": role, "content": out}))
        }
        _ => None,
    }
}

fn expect_history(kind: &str, entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| matches!(e["role"].as_str(), Some("user" | "assistant")))
        .filter_map(|e| expect_msg(kind, e["role"].as_str().unwrap(), &e["content"]))
        .collect()
}

fn last(v: &[Value]) -> &Value {
    v.last().expect("non-empty")
}

// ---------------------------------------------------------------------------------------------
// Fixtures

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join("request_build")
}

fn blessing() -> bool {
    std::env::var("KEEPSAKE_BLESS").is_ok_and(|v| v == "1")
}

fn assert_same_json(want: &Value, got: &Value, what: &str) {
    let w = serde_json::to_string_pretty(want).unwrap();
    let g = serde_json::to_string_pretty(got).unwrap();
    if w != g {
        let (wl, gl): (Vec<&str>, Vec<&str>) = (w.lines().collect(), g.lines().collect());
        let i = wl.iter().zip(&gl).position(|(a, b)| a != b).unwrap_or(wl.len().min(gl.len()));
        let ctx = |v: &[&str]| v[i.saturating_sub(3)..(i + 3).min(v.len())].join("\n");
        panic!(
            "{what}: differs from the fixture at line {} (key order counts)\n--- fixture\n{}\n--- host\n{}",
            i + 1,
            ctx(&wl),
            ctx(&gl)
        );
    }
}

/// Build `args` for every kind on `history` and compare each whole result with the fixture.
fn run_fixture(name: &str, history: Vec<Value>, args: Value) {
    let (_d, _db, mut h) = start();
    replace(&mut h, &history);
    let mut results = Map::new();
    for kind in KINDS {
        results.insert(kind.into(), build(&mut h, with_kind(kind, &args)));
    }
    let input = json!({"history": history, "args": args});
    let path = fixture_dir().join(format!("{name}.json"));
    if blessing() {
        std::fs::create_dir_all(fixture_dir()).unwrap();
        let doc = json!({"scenario": name, "input": input, "expected": results});
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (KEEPSAKE_BLESS=1 writes it; review it against §8)", path.display())
    });
    let doc: Value = serde_json::from_str(&text).expect("fixture parses");
    assert_same_json(&doc["input"], &input, &format!("{name}: fixture input (the test's scenario changed)"));
    for kind in KINDS {
        assert_same_json(&doc["expected"][kind], &results[kind], &format!("{name}/{kind}"));
    }
}

fn video_src() -> Value {
    json!({"platform": "youtube", "url": "https://www.youtube.com/watch?v=abc123", "tabId": 7})
}

fn cold_history() -> Vec<Value> {
    vec![
        json!({"role": "user", "attachId": uuid(2),
               "content": att("https://example.com/long", "Long Page", "full", &filler(8200))}),
        assistant("Summary of the long page."),
        user("First follow-up"),
        assistant("Answer one."),
        user("Second follow-up"),
        assistant("Answer two."),
        json!({"role": "user", "attachId": uuid(3),
               "content": att("https://example.com/short", "Short Page", "selection", "A short selection.")}),
        assistant("Noted."),
    ]
}

#[test]
fn fixture_plain_chat() {
    let history = vec![
        user("Hello"),
        json!({"role": "assistant", "content": "Hi there! How can I help?", "providerLabel": "Model A",
               "providerKey": {"name": "prov", "model": "m-a"}}),
        user("What is Rust?"),
        json!({"role": "assistant", "content": "A systems programming language.", "interrupted": true,
               "providerLabel": "Model A"}),
    ];
    let args = json!({"turn": {"userText": "Tell me more about ownership."}, "systemPrompt": "You are concise.",
                      "bodyFields": {"model": "m-1", "stream": true, "temperature": 0.5}});
    run_fixture("plain_chat", history, args);
}

#[test]
fn fixture_attach_images() {
    let history = vec![
        json!({"role": "user", "attachId": uuid(1), "content": [
            text_part(&att("https://example.com/a", "Page A", "full", "Intro paragraph.\nChart below [Figure 1]")),
            img(&png_url(RED)),
            text_part("After the chart."),
        ]}),
        assistant("The chart shows growth."),
    ];
    let args = json!({"turn": {"userText": "What colour is the chart?", "images": [png_url(BLUE)]},
                      "systemPrompt": "Be brief.", "bodyFields": {"model": "m-2"}});
    run_fixture("attach_images", history, args);
}

#[test]
fn fixture_seen_images() {
    let history = vec![
        json!({"role": "user", "imagesSeen": true, "content": [
            text_part("Compare these\n## Figures\nTwo charts follow.\n1. Revenue chart"),
            img(&png_url(RED)),
            {"type": "image_url", "image_url": png_url(BLUE)},
        ]}),
        json!({"role": "assistant", "content": "Revenue grew.", "providerLabel": "Model A"}),
        json!({"role": "user", "imagesSeen": false, "content": [text_part("And this one?"), img(&png_url(GREEN))]}),
        assistant("That one is green."),
    ];
    run_fixture("seen_images", history, json!({"turn": {}}));
}

#[test]
fn fixture_cold_attach_ages() {
    let args = json!({"turn": {"userText": "Compare the two pages."}, "systemPrompt": "You compare pages."});
    run_fixture("cold_attach_ages", cold_history(), args);
}

#[test]
fn fixture_rescue() {
    let history = vec![
        json!({"role": "user", "attachId": uuid(4),
               "content": att("https://example.com/big", "Big Page", "full", &filler(9000))}),
        assistant("Read."),
        json!({"role": "user", "content": [
            text_part(&att("https://example.com/fig", "Figure Page", "full", "Before [Figure 1]")),
            img(&png_url(RED)),
            text_part(&filler(8100)),
        ]}),
        assistant("Seen."),
        json!({"role": "user", "attachId": uuid(5),
               "content": att("https://example.com/small", "Small Page", "full", "tiny")}),
        assistant("ok"),
    ];
    let args = json!({"turn": {"userText": "Please retry."}, "rescue": {"errorMessage": OVERFLOW}});
    run_fixture("rescue", history, args);
}

#[test]
fn fixture_continuation() {
    let args = json!({"turn": {"userText": "Write a long essay about both.", "images": [png_url(YELLOW)]},
                      "bodyFields": {"max_tokens": 1024},
                      "pass": {"kind": "continuation", "previousReply": "The first half of the essay",
                               "instruction": "Continue exactly where you stopped."}});
    run_fixture("continuation", cold_history(), args);
}

#[test]
fn fixture_timestamp_rewrite() {
    let history = vec![
        json!({"role": "user", "attachId": uuid(6), "videoSrc": video_src(), "imagesSeen": true, "content": [
            text_part(&att("https://www.youtube.com/watch?v=abc123", "Talk", "youtube", "[00:01] Welcome\n[00:42] Main point")),
            img(&png_url(RED)),
            text_part("[01:30] Closing"),
        ]}),
        json!({"role": "assistant", "content": "Talk notes.", "videoSrc": video_src(), "providerLabel": "Model A"}),
        json!({"role": "user", "attachId": uuid(7),
               "content": att("https://example.com/other", "Other", "full", "Unrelated page")}),
        assistant("Read the other page."),
        user("ok"),
        json!({"role": "assistant", "content": "Anything else?", "videoSrc": video_src()}),
    ];
    let args = json!({"turn": {"userText": "Make timestamped notes."}, "systemPrompt": "You take notes.",
                      "aging": {"minUserTurnsAfter": 1, "minChars": 10},
                      "pass": {"kind": "timestampRewrite", "previousReply": "Notes without stamps.",
                               "instruction": "Rewrite the notes with [mm:ss] stamps."}});
    run_fixture("timestamp_rewrite", history, args);
}

fn agent_history() -> Vec<Value> {
    vec![
        user("Earlier question"),
        json!({"role": "assistant", "content": "Earlier answer", "providerLabel": "Agent"}),
        json!({"role": "user", "content": [text_part("Look at this photo"), img(&png_url(GREEN))]}),
        assistant("A green square."),
        json!({"role": "user", "attachId": uuid(8), "content": att("https://example.com/old", "Old", "full", "Old page body")}),
        assistant("Read the old page."),
        json!({"role": "user", "attachId": uuid(9), "content": att("https://example.com/p1", "P1", "full", "First page body")}),
        json!({"role": "user", "attachId": uuid(10), "content": [
            text_part(&att("https://example.com/p2", "P2", "full", "Second page [Figure 1]")),
            img(&png_url(BLUE)),
            text_part("Caption text"),
        ]}),
    ]
}

#[test]
fn fixture_agent_run_backfill() {
    let args = json!({"turn": {"userText": "Summarize both pages.", "images": [png_url(YELLOW)]},
                      "backfill": true, "bodyFields": {"model": "agent-1"}});
    run_fixture("agent_run_backfill", agent_history(), args);
}

/// The agent fixture's text, spelled out from §8.6 so the fixture is checked by a second route.
#[test]
fn agent_run_backfill_text_matches_spec_literally() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &agent_history());
    let r = build(
        &mut h,
        json!({"kind": "agent", "backfill": true,
               "turn": {"userText": "Summarize both pages.", "images": [png_url(YELLOW)]}}),
    );
    let backfill = [
        BACKFILL_HEADER.to_owned(),
        "用户：Earlier question".into(),
        "助手：Earlier answer".into(),
        format!("用户：Look at this photo{BACKFILL_IMAGE_NOTE}"),
        "助手：A green square.".into(),
        "助手：Read the old page.".into(),
    ]
    .join("\n");
    let run = [
        att("https://example.com/p1", "P1", "full", "First page body"),
        format!("{}\nCaption text", att("https://example.com/p2", "P2", "full", "Second page [Figure 1]")),
    ]
    .join("\n\n");
    let want = format!("{backfill}\n\n{run}\n\n{RUN_NOTE}\n\nSummarize both pages.");
    assert_eq!(r["body"]["text"].as_str().unwrap(), want);
    assert_eq!(r["body"]["images"], json!([png_url(YELLOW), png_url(BLUE)]), "turn images, then run images");
    // without backfill: run + note + user text
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Summarize both pages."}}));
    assert_eq!(r["body"]["text"].as_str().unwrap(), format!("{run}\n\n{RUN_NOTE}\n\nSummarize both pages."));
    assert_eq!(r["body"]["images"], json!([png_url(BLUE)]));
}

// ---------------------------------------------------------------------------------------------
// §8.1: only user/assistant entries, only role + content

#[test]
fn stamps_and_other_roles_never_reach_bodies() {
    let (_d, _db, mut h) = start();
    let history = vec![
        json!({"role": "system", "content": "stored system entry"}),
        json!({"role": "user", "attachId": uuid(11), "summarized": true, "videoSrc": video_src(), "imagesSeen": false,
               "content": [text_part(&att("https://example.com/s", "S", "full", "stamped body")), img(&png_url(RED))]}),
        json!({"role": "assistant", "content": "reply", "providerLabel": "Model A",
               "providerKey": {"name": "p", "model": "m"}, "interrupted": true, "videoSrc": video_src()}),
        json!({"role": "tool", "content": "tool output"}),
        json!({"role": "user", "content": "plain", "customStamp": {"x": 1}}),
    ];
    replace(&mut h, &history);
    for kind in KINDS {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "go"}, "backfill": true}));
        let text = serde_json::to_string(&r["body"]).unwrap();
        for stamp in [
            "attachId",
            "summarized",
            "videoSrc",
            "imagesSeen",
            "providerLabel",
            "providerKey",
            "interrupted",
            "customStamp",
            "tabId",
            uuid(11).as_str(),
        ] {
            assert!(!text.contains(stamp), "{kind}: `{stamp}` reached the body: {}", short(&r["body"]));
        }
        assert!(
            !text.contains("stored system entry") && !text.contains("tool output"),
            "{kind}: a non user/assistant entry was sent"
        );
        if kind == "agent" {
            continue;
        }
        let msgs = conv(kind, &r["body"]);
        for m in &msgs {
            assert_eq!(m.as_object().unwrap().len(), 2, "{kind}: {m}");
            assert!(m["role"] == "user" || m["role"] == "assistant", "{kind}: {m}");
        }
        let mut want = expect_history(kind, &history);
        if kind != "runs" {
            want.push(json!({"role": "user", "content": "go"}));
        }
        assert_eq!(msgs, want, "{kind}");
    }
}

// §11.17
#[test]
fn blank_blocks_dropped_and_empty_entries_skipped() {
    let (_d, _db, mut h) = start();
    let history = vec![
        user("   "),
        assistant(""),
        json!({"role": "user", "content": [text_part("  "), text_part("kept text")]}),
        json!({"role": "user", "content": [text_part(" \n ")]}),
        json!({"role": "user", "content": [{"type": "input_text", "text": ""}, img(&png_url(RED))]}),
        json!({"role": "user", "content": [{"type": "file", "file": {"name": "a.pdf"}}]}),
        json!({"role": "assistant", "content": [text_part("\t")]}),
        json!({"role": "user", "content": []}),
        json!({"role": "user", "content": [text_part("final q")]}),
        assistant("final a"),
    ];
    replace(&mut h, &history);
    for kind in ["chat", "responses", "anthropic"] {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "next"}}));
        let msgs = conv(kind, &r["body"]);
        let mut want = expect_history(kind, &history);
        want.push(json!({"role": "user", "content": "next"}));
        assert_eq!(msgs, want, "{kind}");
        assert_eq!(msgs.len(), 5, "{kind}: kept text, image-only, final q, final a, turn");
    }
}

// §8.5 + §11.17: blank parts are dropped before flattening; image-only turns survive as `[image]`.
#[test]
fn runs_flattening_drops_blank_parts() {
    let (_d, _db, mut h) = start();
    let history = vec![
        user("   "),
        json!({"role": "user", "content": [text_part("  "), text_part("kept text")]}),
        json!({"role": "user", "content": [{"type": "input_text", "text": ""}, img(&png_url(RED))]}),
        json!({"role": "assistant", "content": [text_part("\t")]}),
        assistant("final a"),
    ];
    replace(&mut h, &history);
    let r = build(&mut h, json!({"kind": "runs", "turn": {"userText": "next"}}));
    assert_eq!(
        r["body"]["conversation_history"],
        json!([{"role": "user", "content": "kept text"}, {"role": "user", "content": "[image]"},
               {"role": "assistant", "content": "final a"}])
    );
}

// §8.6 + §11.17: backfill renders no line for an entry left with no content.
#[test]
fn agent_backfill_skips_empty_entries() {
    let (_d, _db, mut h) = start();
    replace(
        &mut h,
        &[
            user("   "),
            assistant(""),
            json!({"role": "user", "content": [text_part(" ")]}),
            user("real question"),
            assistant("real answer"),
            json!({"role": "user", "content": att("https://example.com/x", "X", "full", "ctx")}),
        ],
    );
    let r = build(&mut h, json!({"kind": "agent", "backfill": true, "turn": {"userText": "go"}}));
    let text = r["body"]["text"].as_str().unwrap();
    let want_backfill = format!("{BACKFILL_HEADER}\n用户：real question\n助手：real answer");
    assert!(
        text.starts_with(&format!("{want_backfill}\n\n{PREFIX}")),
        "blank entries rendered as backfill lines: {text:?}"
    );
}

// §11.17: the current turn gets no blank text block either (Anthropic refuses whitespace-only
// text blocks).
#[test]
fn blank_turn_text_with_images_sends_no_blank_block() {
    let (_d, _db, mut h) = start();
    let mut problems = Vec::new();
    for kind in ["chat", "responses", "anthropic"] {
        let r = h.ok(
            "request.build",
            json!({"kind": kind, "turn": {"userText": "   ", "images": [png_url(RED)]}}),
        );
        if let Err(e) = validate(kind, &r["body"]) {
            problems.push(format!("{kind}: provider shape: {e}"));
        }
        let turn = last(&conv(kind, &r["body"])).clone();
        for p in turn["content"].as_array().expect("parts") {
            if p["text"].as_str().is_some_and(blank) {
                problems.push(format!("{kind}: blank text block in the current turn: {turn}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// OpenAI chat: assistant content parts are text (or refusal) only; Responses: images only in user
// messages (PROTOCOL.md body shapes).
#[test]
fn assistant_image_parts_fit_each_provider() {
    let (_d, _db, mut h) = start();
    replace(
        &mut h,
        &[
            user("draw"),
            json!({"role": "assistant", "content": [text_part("here it is"), img(&png_url(RED))]}),
        ],
    );
    for kind in ["responses", "anthropic", "runs", "chat"] {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "thanks"}}));
        let msgs = conv(kind, &r["body"]);
        assert_eq!(msgs[1]["role"], "assistant", "{kind}");
        if kind == "responses" {
            assert_eq!(msgs[1]["content"], json!([{"type": "output_text", "text": "here it is"}]));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// §8.1 turn text defaults and userEntry

#[test]
fn current_turn_text_defaults() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &[user("q"), assistant("a")]);
    for turn in [json!({}), json!({"userText": ""}), json!({"userText": null, "images": []})] {
        for kind in KINDS {
            let r = build(&mut h, json!({"kind": kind, "turn": turn}));
            assert_eq!(r["userEntry"], json!({"role": "user", "content": NO_INSTRUCTION}), "{kind} {turn}");
            assert_eq!(r["droppedImages"], json!(0));
            match kind {
                "runs" => assert_eq!(r["body"]["input"], json!(""), "runs input is the raw userText"),
                "agent" => assert_eq!(r["body"], json!({"text": "", "images": []})),
                _ => assert_eq!(last(&conv(kind, &r["body"]))["content"], json!(RESPOND), "{kind}"),
            }
        }
    }
    let red = png_url(RED);
    for kind in KINDS {
        let r = build(&mut h, json!({"kind": kind, "turn": {"images": [red]}}));
        assert_eq!(
            r["userEntry"],
            json!({"role": "user", "content": [{"type": "text", "text": NO_INSTRUCTION}, img(&red)]}),
            "{kind}"
        );
        let body = &r["body"];
        let want = match kind {
            "chat" => json!([{"type": "text", "text": DESCRIBE}, img(&red)]),
            "responses" => {
                json!([{"type": "input_text", "text": DESCRIBE}, {"type": "input_image", "image_url": red}])
            }
            "anthropic" => json!([{"type": "text", "text": DESCRIBE},
                                  {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": RED}}]),
            "runs" => {
                assert_eq!(body["input"], json!([{"role": "user", "content": [text_part(""), img(&red)]}]));
                continue;
            }
            _ => {
                assert_eq!(*body, json!({"text": "", "images": [red]}));
                continue;
            }
        };
        assert_eq!(last(&conv(kind, body))["content"], want, "{kind}");
    }
    // given text is used as is
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "hi"}}));
    assert_eq!(last(&conv("chat", &r["body"]))["content"], json!("hi"));
    assert_eq!(r["userEntry"], json!({"role": "user", "content": "hi"}));
}

// §6.4
#[test]
fn nine_turn_images_keep_eight_and_note_the_drop() {
    let (_d, _db, mut h) = start();
    let urls: Vec<String> = (0..9u8).map(|i| data_url("image/png", &png_bytes(2, 2, i * 20))).collect();
    let note = dropped_note(1);
    for kind in KINDS {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "Compare", "images": urls}}));
        assert_eq!(r["droppedImages"], json!(1), "{kind}");
        let text = format!("Compare{note}");
        let mut entry = vec![json!({"type": "text", "text": text})];
        entry.extend(urls[..8].iter().map(|u| img(u)));
        assert_eq!(r["userEntry"], json!({"role": "user", "content": entry}), "{kind}: userEntry");
        let body = &r["body"];
        match kind {
            "chat" => {
                let turn = last(&conv(kind, body)).clone();
                assert_eq!(turn["content"][0], json!({"type": "text", "text": text}));
                let got: Vec<&str> = turn["content"].as_array().unwrap()[1..]
                    .iter()
                    .map(|p| p["image_url"]["url"].as_str().unwrap())
                    .collect();
                assert_eq!(got, urls[..8].iter().map(String::as_str).collect::<Vec<_>>());
            }
            "responses" | "anthropic" => {
                let turn = last(&conv(kind, body)).clone();
                assert_eq!(turn["content"][0]["text"], json!(text), "{kind}");
                assert_eq!(turn["content"].as_array().unwrap().len(), 9, "{kind}: text + 8 images");
            }
            "runs" => {
                assert_eq!(body["input"][0]["content"][0], json!({"type": "text", "text": text}));
                assert_eq!(body["input"][0]["content"].as_array().unwrap().len(), 9);
            }
            _ => {
                assert_eq!(body["text"], json!(text));
                assert_eq!(body["images"], json!(urls[..8]));
            }
        }
    }
    // the note alone is the amended user text: no default replaces it
    let r = build(&mut h, json!({"kind": "chat", "turn": {"images": urls}}));
    assert_eq!(last(&conv("chat", &r["body"]))["content"][0]["text"], json!(note));
    assert_eq!(r["userEntry"]["content"][0]["text"], json!(note));
}

#[test]
fn turn_images_shape_size_and_budget() {
    let (_d, _db, mut h) = start();
    let budget = 3 * 1024 * 1024;
    // a data URL of exactly n chars with valid base64 (a parameter pads the header)
    let url_of_len = |n: usize| {
        let head = [
            "data:image/png;base64,",
            "data:image/png;a;base64,",
            "data:image/png;ab;base64,",
            "data:image/png;abc;base64,",
        ]
        .into_iter()
        .find(|h| (n - h.len()) % 4 == 0)
        .unwrap();
        format!("{head}{}", "A".repeat(n - head.len()))
    };
    let over = url_of_len(budget + 1);
    let mid = url_of_len(2_000_000);
    let big = url_of_len(1_200_000);
    let red = png_url(RED);
    let images = json!(["ftp://example.com/a.png", 42, over, "HTTPS://example.com/b.png", mid, big, red]);
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "t", "images": images}}));
    assert_eq!(r["droppedImages"], json!(4), "shape ×2, size, budget");
    let kept: Vec<Value> = r["userEntry"]["content"].as_array().unwrap()[1..].to_vec();
    assert_eq!(kept, vec![img("HTTPS://example.com/b.png"), img(&mid), img(&red)]);
    assert_eq!(r["userEntry"]["content"][0]["text"], json!(format!("t{}", dropped_note(4))));
    // exactly the budget fits; anything more after it does not
    let exact = url_of_len(budget);
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "t", "images": [exact, red]}}));
    assert_eq!(r["droppedImages"], json!(1));
    assert_eq!(r["userEntry"]["content"].as_array().unwrap().len(), 2);
    assert_eq!(r["userEntry"]["content"][1], img(&exact));
}

// ---------------------------------------------------------------------------------------------
// §8.2–§8.6 systemPrompt, bodyFields, upTo, source

#[test]
fn system_prompt_placement_per_kind() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &[user("q"), assistant("a")]);
    for kind in KINDS {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "x"}, "systemPrompt": "Sys"}));
        let b = r["body"].as_object().unwrap().clone();
        match kind {
            "chat" => {
                assert_eq!(b["messages"][0], json!({"role": "system", "content": "Sys"}));
                assert_eq!(
                    b["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "system").count(),
                    1
                );
                assert!(!b.contains_key("system") && !b.contains_key("instructions"));
            }
            "responses" | "runs" => {
                assert_eq!(b["instructions"], json!("Sys"), "{kind}");
                assert!(!serde_json::to_string(
                    &b[if kind == "runs" { "conversation_history" } else { "input" }]
                )
                .unwrap()
                .contains("Sys"));
            }
            "anthropic" => {
                assert_eq!(b["system"], json!("Sys"));
                assert!(b["messages"].as_array().unwrap().iter().all(|m| m["role"] != "system"));
            }
            _ => assert_eq!(r["body"], json!({"text": "x", "images": []}), "agent: no system prompt"),
        }
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "x"}, "systemPrompt": ""}));
        let b = r["body"].as_object().unwrap();
        assert!(!b.contains_key("system") && !b.contains_key("instructions"), "{kind}: {b:?}");
        if kind == "chat" {
            assert_eq!(b["messages"][0], json!({"role": "user", "content": "q"}));
        }
    }
}

#[test]
fn body_fields_copied_and_host_fields_win() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &[user("q"), assistant("a")]);
    let host_keys: [(&str, &[&str]); 5] = [
        ("chat", &["messages"]),
        ("responses", &["input", "instructions"]),
        ("anthropic", &["messages", "system"]),
        ("runs", &["input", "conversation_history", "instructions"]),
        ("agent", &["text", "images"]),
    ];
    for (kind, keys) in host_keys {
        let mut fields = Map::new();
        for k in keys {
            fields.insert((*k).into(), json!("x"));
        }
        fields.insert("model".into(), json!("m"));
        fields.insert("stream".into(), json!(true));
        fields.insert("max_tokens".into(), json!(77));
        let plain = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}, "systemPrompt": "S"}));
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "t"}, "systemPrompt": "S", "bodyFields": fields}),
        );
        let b = r["body"].as_object().unwrap();
        assert_eq!(b["model"], json!("m"), "{kind}");
        assert_eq!(b["stream"], json!(true), "{kind}");
        assert_eq!(b["max_tokens"], json!(77), "{kind}");
        for k in keys {
            assert_eq!(b[*k], plain["body"][*k], "{kind}: host-built `{k}` must win over bodyFields");
        }
        assert_eq!(b.len(), plain["body"].as_object().unwrap().len() + 3, "{kind}: {b:?}");
    }
}

#[test]
fn up_to_limits_the_history() {
    let (_d, _db, mut h) = start();
    let history = vec![user("u0"), assistant("a0"), user("u1"), assistant("a1"), user("u2"), assistant("a2")];
    replace(&mut h, &history);
    for kind in ["chat", "responses", "anthropic", "runs"] {
        for (up_to, n) in [(json!(3), 3), (json!(3.0), 3), (json!(0), 0), (json!(6), 6), (json!(100), 6)] {
            let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}, "upTo": up_to}));
            let mut want = expect_history(kind, &history[..n]);
            if kind != "runs" {
                want.push(json!({"role": "user", "content": "t"}));
            }
            assert_eq!(conv(kind, &r["body"]), want, "{kind} upTo {up_to}");
        }
    }
    for bad in [json!("3"), json!(-1), json!(1.5)] {
        assert_eq!(
            h.err("request.build", json!({"kind": "chat", "turn": {}, "upTo": bad})),
            "bad_request",
            "upTo {bad}"
        );
    }
    // agent: the trailing run is read from the limited history
    let p1 = att("https://example.com/1", "One", "full", "one");
    let p2 = att("https://example.com/2", "Two", "full", "two");
    replace(&mut h, &[user("u0"), user(&p1), user(&p2)]);
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "t"}, "upTo": 2}));
    assert_eq!(r["body"]["text"], json!(format!("{p1}\n\n{RUN_NOTE}\n\nt")));
}

#[test]
fn source_session_builds_from_its_body_and_falls_back_to_live() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &[user("session question"), assistant("session answer")]);
    let saved = h.ok("sessions.save", json!({"name": "S1"}));
    let sid = saved["session"]["id"].as_str().expect("session id").to_owned();
    replace(&mut h, &[user("live question"), assistant("live answer")]);
    let live_want = vec![user("live question"), assistant("live answer"), user("t")];
    let sess_want = vec![user("session question"), assistant("session answer"), user("t")];
    for kind in ["chat", "responses", "anthropic"] {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}, "source": {"sessionId": sid}}));
        assert_eq!(r["source"], json!("session"));
        assert_eq!(conv(kind, &r["body"]), sess_want, "{kind}");
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "t"}, "source": {"sessionId": sid}, "upTo": 1}),
        );
        assert_eq!(
            conv(kind, &r["body"]),
            vec![user("session question"), user("t")],
            "{kind}: upTo on the session"
        );
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}}));
        assert_eq!(r["source"], json!("live"));
        assert_eq!(conv(kind, &r["body"]), live_want, "{kind}");
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "t"}, "source": {"sessionId": "no-such-session"}}),
        );
        assert_eq!(r["source"], json!("live"));
        assert_eq!(conv(kind, &r["body"]), live_want, "{kind}");
    }
    // a session deleted while its turn streams is still the turn's conversation (in the trash its
    // reply joins it); only one purged for good falls back to the live history
    assert_eq!(h.ok("sessions.delete", json!({"id": sid})), json!({"deleted": true}));
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "t"}, "source": {"sessionId": sid}}));
    assert_eq!(r["source"], json!("session"), "a deleted session is read from the trash");
    h.ok("trash.purge", json!({"id": sid}));
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "t"}, "source": {"sessionId": sid}}));
    assert_eq!(r["source"], json!("live"), "a purged session falls back to the live history");
    assert_eq!(conv("chat", &r["body"]), live_want);
}

// ---------------------------------------------------------------------------------------------
// §7.1 aging

fn first_content(h: &mut Host, kind: &str, args: Value) -> Value {
    let mut a = args;
    a["kind"] = json!(kind);
    a["turn"] = json!({"userText": "t"});
    let r = build(h, a);
    conv(kind, &r["body"])[0]["content"].clone()
}

#[test]
fn aging_default_thresholds_and_exact_stub() {
    let (_d, _db, mut h) = start();
    let small = json!({"role": "user", "content": att("https://example.com/new", "New", "full", "new")});
    let cold = |text: &str| json!({"role": "user", "attachId": uuid(20), "content": text});
    let t8000 = att_of_len("https://example.com/cold?q=a&b=c", "Cold — page", 8000);
    let stub = aged_stub(Some("Cold — page"), Some("https://example.com/cold?q=a&b=c"), 8000);
    assert!(stub.contains('—') && !stub.starts_with(PREFIX));
    // 8,000 chars and three user entries after it (the newer attach counts) → aged
    replace(&mut h, &[cold(&t8000), user("u1"), user("u2"), small.clone(), assistant("a")]);
    for kind in ["chat", "responses", "anthropic", "runs"] {
        assert_eq!(first_content(&mut h, kind, json!({})), json!(stub), "{kind}");
    }
    // 7,999 chars → kept
    let t7999 = att_of_len("https://example.com/cold?q=a&b=c", "Cold — page", 7999);
    replace(&mut h, &[cold(&t7999), user("u1"), user("u2"), small.clone(), assistant("a")]);
    assert_eq!(first_content(&mut h, "chat", json!({})), json!(t7999));
    // only two user entries after → kept
    replace(&mut h, &[cold(&t8000), user("u1"), assistant("a"), small.clone(), assistant("b")]);
    assert_eq!(first_content(&mut h, "chat", json!({})), json!(t8000));
    // the newest attach is never aged
    replace(&mut h, &[cold(&t8000), user("u1"), user("u2"), user("u3")]);
    assert_eq!(first_content(&mut h, "chat", json!({})), json!(t8000));
    // array content: every text part counts (§11.2); the stub is a plain string, images dropped
    let head = att("https://example.com/arr", "Arr", "full", "Look [Figure 1]");
    let tail = filler(7990);
    let arr = json!({"role": "user", "content": [text_part(&head), img(&png_url(RED)), text_part(&tail)]});
    replace(&mut h, &[arr, user("u1"), user("u2"), small.clone()]);
    let n = u16len(&head) + 1 + u16len(&tail);
    for kind in ["chat", "responses", "anthropic", "runs"] {
        assert_eq!(
            first_content(&mut h, kind, json!({})),
            json!(aged_stub(Some("Arr"), Some("https://example.com/arr"), n)),
            "{kind}"
        );
    }
    // lines without Title:/URL: are omitted; Title comes before URL whatever the text's order
    let no_title = format!("{PREFIX}\nMode: full\n---\n\n{}", filler(8000));
    replace(&mut h, &[cold(&no_title), user("u1"), user("u2"), small.clone()]);
    assert_eq!(first_content(&mut h, "chat", json!({})), json!(aged_stub(None, None, u16len(&no_title))));
    let swapped =
        format!("{PREFIX}\nTitle: T2\nURL: https://example.com/u2\nMode: full\n---\n\n{}", filler(8000));
    replace(&mut h, &[cold(&swapped), user("u1"), user("u2"), small]);
    assert_eq!(
        first_content(&mut h, "chat", json!({})),
        json!(aged_stub(Some("T2"), Some("https://example.com/u2"), u16len(&swapped)))
    );
}

#[test]
fn aging_overrides() {
    let (_d, _db, mut h) = start();
    let old = att("https://example.com/o", "O", "full", &filler(100));
    let n = u16len(&old);
    let newer = json!({"role": "user", "content": att("https://example.com/n", "N", "full", "n")});
    replace(&mut h, &[user(&old), assistant("a"), newer.clone(), assistant("b")]);
    let stub = json!(aged_stub(Some("O"), Some("https://example.com/o"), n));
    assert_eq!(
        first_content(&mut h, "chat", json!({"aging": {"minUserTurnsAfter": 1, "minChars": 100}})),
        stub
    );
    assert_eq!(
        first_content(&mut h, "chat", json!({"aging": {"minUserTurnsAfter": 1, "minChars": n}})),
        stub
    );
    assert_eq!(
        first_content(&mut h, "chat", json!({"aging": {"minUserTurnsAfter": 1, "minChars": n + 1}})),
        json!(old)
    );
    assert_eq!(
        first_content(&mut h, "chat", json!({"aging": {"minUserTurnsAfter": 2, "minChars": 10}})),
        json!(old)
    );
    // one override keeps the other default (3 user turns / 8,000 chars)
    assert_eq!(first_content(&mut h, "chat", json!({"aging": {"minChars": 10}})), json!(old));
    assert_eq!(first_content(&mut h, "chat", json!({"aging": {"minUserTurnsAfter": 1}})), json!(old));
    let big = att_of_len("https://example.com/o", "O", 8000);
    replace(&mut h, &[user(&big), newer, assistant("b")]);
    assert_eq!(
        first_content(&mut h, "chat", json!({"aging": {"minUserTurnsAfter": 1}})),
        json!(aged_stub(Some("O"), Some("https://example.com/o"), 8000))
    );
    // aging never writes
    let stored = h.ok("history.get", json!({}))["entries"][0]["content"].clone();
    assert_eq!(stored, json!(big));
}

// ---------------------------------------------------------------------------------------------
// §7.3, §11.16 rescue

fn rescue_history() -> (Vec<Value>, String, String) {
    let big = att("https://example.com/big", "Big", "full", &filler(9000));
    let arr_head = att("https://example.com/fig", "Fig", "full", "Before [Figure 1]");
    let arr_tail = filler(8100);
    let hist = vec![
        json!({"role": "user", "attachId": "A", "content": big}),
        assistant("r0"),
        json!({"role": "user", "content": [text_part(&arr_head), img(&png_url(RED)), text_part(&arr_tail)]}),
        assistant("r1"),
        json!({"role": "user", "attachId": "S", "content": att("https://example.com/s", "Small", "full", "tiny")}),
        assistant("r2"),
    ];
    let arr_text = format!("{arr_head}\n{arr_tail}");
    (hist, big, arr_text)
}

#[test]
fn rescue_applied_reports_and_stubs() {
    let (_d, _db, mut h) = start();
    let (hist, big, arr_text) = rescue_history();
    replace(&mut h, &hist);
    let stub0 = rescue_stub(Some("Big"), Some("https://example.com/big"), u16len(&big));
    let stub2 = rescue_stub(Some("Fig"), Some("https://example.com/fig"), u16len(&arr_text));
    for kind in ["chat", "responses", "anthropic", "runs"] {
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "t"}, "rescue": {"errorMessage": OVERFLOW}}),
        );
        assert_eq!(
            r["rescue"],
            json!({"applied": true, "changed": [{"index": 0, "attachId": "A"}, {"index": 2, "attachId": null}]}),
            "{kind}"
        );
        let msgs = conv(kind, &r["body"]);
        assert_eq!(msgs[0], json!({"role": "user", "content": stub0}), "{kind}");
        assert_eq!(
            msgs[2],
            json!({"role": "user", "content": stub2}),
            "{kind}: images dropped, all parts measured"
        );
        assert_eq!(
            msgs[4]["content"],
            json!(att("https://example.com/s", "Small", "full", "tiny")),
            "{kind}: small attach untouched"
        );
        assert_eq!(msgs[1], json!({"role": "assistant", "content": "r0"}));
    }
    // the newest attach is stubbed too; already-aged entries carry no prefix and are not stubbed
    let newest_big = att("https://example.com/nb", "NB", "full", &filler(8000));
    let mut hist2 = hist.clone();
    hist2.push(user("u"));
    hist2.push(json!({"role": "user", "attachId": "N", "content": newest_big}));
    replace(&mut h, &hist2);
    let r = build(
        &mut h,
        json!({"kind": "chat", "turn": {"userText": "t"}, "rescue": {"errorMessage": OVERFLOW}}),
    );
    // entries 0 and 2 now have ≥ 3 user entries after them → aged, not stubbed
    assert_eq!(r["rescue"], json!({"applied": true, "changed": [{"index": 7, "attachId": "N"}]}));
    let msgs = conv("chat", &r["body"]);
    assert_eq!(
        msgs[0]["content"],
        json!(aged_stub(Some("Big"), Some("https://example.com/big"), u16len(&big)))
    );
    assert_eq!(
        msgs[2]["content"],
        json!(aged_stub(Some("Fig"), Some("https://example.com/fig"), u16len(&arr_text)))
    );
    assert_eq!(
        msgs[7]["content"],
        json!(rescue_stub(Some("NB"), Some("https://example.com/nb"), u16len(&newest_big)))
    );
}

#[test]
fn rescue_not_applied_reasons_build_normally() {
    let (_d, _db, mut h) = start();
    let (hist, _, _) = rescue_history();
    replace(&mut h, &hist);
    let cases = [
        ("agent", OVERFLOW, "kind"),
        ("chat", "502 Bad Gateway", "not_overflow"),
        ("responses", "Request too large for gpt-4o on tokens per min (TPM): Limit 30000", "not_overflow"),
        ("anthropic", "", "not_overflow"),
        ("runs", "rate limit exceeded, please wait", "not_overflow"),
    ];
    for (kind, msg, reason) in cases {
        let plain = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}}));
        let r =
            build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}, "rescue": {"errorMessage": msg}}));
        assert_eq!(r["rescue"], json!({"applied": false, "reason": reason, "changed": []}), "{kind} {msg:?}");
        assert_eq!(
            serde_json::to_string(&r["body"]).unwrap(),
            serde_json::to_string(&plain["body"]).unwrap(),
            "{kind}"
        );
        assert!(plain.get("rescue").is_none(), "no rescue report without a rescue request");
    }
    replace(
        &mut h,
        &[
            user("q"),
            json!({"role": "user", "attachId": "S", "content": att("https://example.com/s", "S", "full", "tiny")}),
        ],
    );
    for kind in ["chat", "responses", "anthropic", "runs"] {
        let plain = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}}));
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "t"}, "rescue": {"errorMessage": OVERFLOW}}),
        );
        assert_eq!(
            r["rescue"],
            json!({"applied": false, "reason": "nothing_to_stub", "changed": []}),
            "{kind}"
        );
        assert_eq!(r["body"], plain["body"]);
    }
}

#[test]
fn rescue_commit_writes_the_stub_that_was_sent() {
    let (_d, _db, mut h) = start();
    let (hist, _, _) = rescue_history();
    replace(&mut h, &hist);
    let r = build(
        &mut h,
        json!({"kind": "chat", "turn": {"userText": "t"}, "rescue": {"errorMessage": OVERFLOW}}),
    );
    let sent = conv("chat", &r["body"])[0]["content"].clone();
    // the build wrote nothing
    assert_eq!(h.ok("history.get", json!({}))["entries"][0]["content"], hist[0]["content"]);
    assert_eq!(h.ok("request.commitRescue", json!({"attachIds": ["A"]})), json!({"committed": 1}));
    let stored = h.ok("history.get", json!({}))["entries"][0].clone();
    assert_eq!(stored["content"], sent, "commitRescue stores byte-for-byte the stub that was sent");
    assert_eq!(stored["attachId"], json!("A"));
    let again = build(&mut h, json!({"kind": "chat", "turn": {"userText": "t"}}));
    assert_eq!(conv("chat", &again["body"])[0]["content"], sent);
}

// ---------------------------------------------------------------------------------------------
// §8.4 anthropic

#[test]
fn anthropic_head_rule() {
    let (_d, _db, mut h) = start();
    let t = json!({"role": "user", "content": "t"});
    let cases: Vec<(Vec<Value>, Vec<Value>)> = vec![
        (
            vec![assistant("a0"), assistant("a1"), user("u1"), assistant("a2")],
            vec![user("u1"), assistant("a2"), t.clone()],
        ),
        (vec![assistant("only a")], vec![user(CONTINUING), assistant("only a"), t.clone()]),
        (
            vec![assistant("a"), assistant("b")],
            vec![user(CONTINUING), assistant("a"), assistant("b"), t.clone()],
        ),
        (vec![], vec![t.clone()]),
        (vec![assistant(" "), assistant("a"), user("u")], vec![user("u"), t.clone()]),
        (
            vec![json!({"role": "system", "content": "sys entry"}), assistant("a"), user("u")],
            vec![user("u"), t.clone()],
        ),
    ];
    for (hist, want) in cases {
        if hist.is_empty() {
            h.ok("history.clear", json!({}));
        } else {
            replace(&mut h, &hist);
        }
        let r = build(&mut h, json!({"kind": "anthropic", "turn": {"userText": "t"}}));
        assert_eq!(r["body"]["messages"], json!(want), "history {hist:?}");
    }
    // chat has no head rule: leading assistants are sent
    replace(&mut h, &[assistant("a0"), user("u1")]);
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "t"}}));
    assert_eq!(r["body"]["messages"], json!([assistant("a0"), user("u1"), t]));
}

#[test]
fn anthropic_turn_and_image_blocks() {
    let (_d, _db, mut h) = start();
    // stored data URL with an upper-case subtype and unpadded base64: media_type from the blob
    let unpadded = RED.trim_end_matches('=');
    replace(
        &mut h,
        &[
            json!({"role": "user", "content": [text_part("a"), img(&format!("data:image/PNG;base64,{unpadded}")),
                                               img("https://example.com/remote.png"), text_part("b")]}),
        ],
    );
    let r = build(&mut h, json!({"kind": "anthropic", "turn": {"userText": "plain"}}));
    assert_eq!(
        r["body"]["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": RED}},
                {"type": "text", "text": "b"}]},
            {"role": "user", "content": "plain"}
        ]),
        "blocks in stored order, non-data images dropped; a turn without images is a plain string"
    );
    let r = build(
        &mut h,
        json!({"kind": "anthropic", "turn": {"userText": "look", "images": ["https://example.com/x.png", png_url(BLUE)]}}),
    );
    assert_eq!(
        last(r["body"]["messages"].as_array().unwrap())["content"],
        json!([{"type": "text", "text": "look"},
               {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": BLUE}}])
    );
    // chat keeps the canonical data URL and the http image, always in object form
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "x"}}));
    assert_eq!(
        r["body"]["messages"][0]["content"],
        json!([text_part("a"), img(&png_url(RED)), img("https://example.com/remote.png"), text_part("b")])
    );
}

// ---------------------------------------------------------------------------------------------
// §8.5 runs

#[test]
fn runs_flattening_and_raw_input() {
    let (_d, _db, mut h) = start();
    replace(
        &mut h,
        &[
            json!({"role": "user", "content": [text_part("look"), img(&png_url(RED)),
                                               {"type": "image_url", "image_url": png_url(BLUE)}, text_part("end")]}),
            assistant("sure"),
            json!({"role": "user", "content": [img(&png_url(GREEN))]}),
            json!({"role": "user", "content": [{"type": "input_text", "text": "input text part"}]}),
            assistant("   "),
        ],
    );
    let want_hist = json!([
        {"role": "user", "content": "look\n[image]\n[image]\nend"},
        {"role": "assistant", "content": "sure"},
        {"role": "user", "content": "[image]"},
        {"role": "user", "content": "input text part"},
    ]);
    let r = build(&mut h, json!({"kind": "runs", "turn": {"userText": "hi"}, "systemPrompt": "S"}));
    assert_eq!(r["body"], json!({"input": "hi", "conversation_history": want_hist, "instructions": "S"}));
    let r = build(&mut h, json!({"kind": "runs", "turn": {}}));
    assert_eq!(r["body"]["input"], json!(""), "no default for runs input");
    let r = build(&mut h, json!({"kind": "runs", "turn": {"userText": "  "}}));
    assert_eq!(r["body"]["input"], json!("  "), "raw userText");
    let r = build(&mut h, json!({"kind": "runs", "turn": {"userText": "see", "images": [png_url(YELLOW)]}}));
    assert_eq!(
        r["body"]["input"],
        json!([{"role": "user", "content": [text_part("see"), img(&png_url(YELLOW))]}])
    );
    assert_eq!(r["body"]["conversation_history"], want_hist);
    assert!(!serde_json::to_string(&r["body"]["conversation_history"]).unwrap().contains("base64"));
}

// ---------------------------------------------------------------------------------------------
// §8.6 agent

#[test]
fn agent_trailing_run_detection() {
    let (_d, _db, mut h) = start();
    let legacy = format!("{LEGACY}\nURL: https://legacy.example\nTitle: L\nMode: full\n---\n\nlegacy body");
    let looks = format!("{PREFIX}\nassistant text that looks like context");
    replace(
        &mut h,
        &[
            user("hi"),
            assistant(&looks),
            json!({"role": "user", "content": [text_part("Note first"), text_part(&legacy), img(&png_url(RED))]}),
            user(&legacy),
        ],
    );
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go"}}));
    let run = format!("Note first\n{legacy}\n\n{legacy}");
    assert_eq!(r["body"], json!({"text": format!("{run}\n\n{RUN_NOTE}\n\nGo"), "images": [png_url(RED)]}));
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go"}, "backfill": true}));
    assert_eq!(
        r["body"]["text"],
        json!(format!("{BACKFILL_HEADER}\n用户：hi\n助手：{looks}\n\n{run}\n\n{RUN_NOTE}\n\nGo")),
        "an assistant entry ends the run and is a backfill turn"
    );
    // no run and no backfill → just the user text and the turn's images
    replace(&mut h, &[user("hi"), assistant("hello")]);
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go", "images": [png_url(BLUE)]}}));
    assert_eq!(r["body"], json!({"text": "Go", "images": [png_url(BLUE)]}));
    // backfill with only attach entries before the run yields no section
    let a = att("https://example.com/a", "A", "full", "a");
    replace(&mut h, &[user(&a), assistant(" x"), user(&a)]);
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go"}, "backfill": true}));
    assert_eq!(r["body"]["text"], json!(format!("{BACKFILL_HEADER}\n助手： x\n\n{a}\n\n{RUN_NOTE}\n\nGo")));
    replace(&mut h, &[user(&a), user(&a)]);
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go"}, "backfill": true}));
    assert_eq!(r["body"]["text"], json!(format!("{a}\n\n{a}\n\n{RUN_NOTE}\n\nGo")));
}

#[test]
fn agent_backfill_cap_drops_oldest_lines() {
    let (_d, _db, mut h) = start();
    let texts: Vec<String> = (0..4).map(|i| format!("L{i} {}", filler(70_000 - 3))).collect();
    let ctx = att("https://example.com/c", "C", "full", "ctx");
    let mut hist: Vec<Value> = texts.iter().map(|t| user(t)).collect();
    hist.push(user(&ctx));
    replace(&mut h, &hist);
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go"}, "backfill": true}));
    let text = r["body"]["text"].as_str().unwrap();
    let section = format!("{BACKFILL_HEADER}\n用户：{}\n用户：{}", texts[2], texts[3]);
    assert!(u16len(&section) <= 200_000);
    assert_eq!(text, format!("{section}\n\n{ctx}\n\n{RUN_NOTE}\n\nGo"), "the two oldest lines are dropped");
}

#[test]
fn agent_images_combined_cap() {
    let (_d, _db, mut h) = start();
    let run_a = png_url(RED);
    let run_b = png_url(BLUE);
    replace(
        &mut h,
        &[
            json!({"role": "user", "content": [text_part(&att("https://example.com/r", "R", "full", "run")), img(&run_a), img(&run_b)]}),
        ],
    );
    let turn: Vec<String> = (0..7u8).map(|i| data_url("image/png", &png_bytes(2, 2, 100 + i))).collect();
    let r = build(&mut h, json!({"kind": "agent", "turn": {"userText": "Go", "images": turn}}));
    let mut want = turn.clone();
    want.push(run_a);
    assert_eq!(r["body"]["images"], json!(want), "turn images first, then run images, 8 at most");
    assert!(r["body"]["text"].as_str().unwrap().ends_with(&format!("Go{}", dropped_note(1))));
}

// ---------------------------------------------------------------------------------------------
// §8.7, §11.18 second passes

#[test]
fn continuation_pass_per_kind() {
    let (_d, _db, mut h) = start();
    let big = att("https://example.com/big", "Big", "full", &filler(9000));
    replace(&mut h, &[user("q"), assistant("a"), json!({"role": "user", "attachId": "B", "content": big})]);
    let pass = json!({"kind": "continuation", "previousReply": "first part", "instruction": "go on"});
    let red = png_url(RED);
    for kind in KINDS {
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "essay", "images": [red]}, "pass": pass}),
        );
        let b = &r["body"];
        match kind {
            "agent" => assert_eq!(*b, json!({"text": "go on", "images": []})),
            "runs" => {
                assert_eq!(b["input"], json!("go on"));
                assert_eq!(
                    b["conversation_history"],
                    json!([
                        user("q"),
                        assistant("a"),
                        user(&big),
                        user("essay\n[image]"),
                        assistant("first part")
                    ])
                );
            }
            _ => {
                let msgs = conv(kind, b);
                assert_eq!(msgs.len(), 6, "{kind}");
                assert_eq!(msgs[2], json!({"role": "user", "content": big}));
                assert_eq!(
                    msgs[3]["content"].as_array().map(Vec::len),
                    Some(2),
                    "{kind}: the turn keeps its image"
                );
                assert_eq!(msgs[4], json!({"role": "assistant", "content": "first part"}));
                assert_eq!(msgs[5], json!({"role": "user", "content": "go on"}));
            }
        }
        assert_eq!(r["userEntry"], json!({"role": "user", "content": [text_part("essay"), img(&red)]}));
        // after a rescue attempt the continuation uses the stubbed history
        if kind != "agent" {
            let r = build(
                &mut h,
                json!({"kind": kind, "turn": {"userText": "essay"}, "pass": pass, "rescue": {"errorMessage": OVERFLOW}}),
            );
            assert_eq!(r["rescue"]["applied"], json!(true));
            let stub = rescue_stub(Some("Big"), Some("https://example.com/big"), u16len(&big));
            assert_eq!(conv(kind, &r["body"])[2], json!({"role": "user", "content": stub}), "{kind}");
        }
    }
}

#[test]
fn timestamp_rewrite_pass_rules() {
    let (_d, _db, mut h) = start();
    let pass = json!({"kind": "timestampRewrite", "previousReply": "notes", "instruction": "add stamps"});
    // no attach carries videoSrc (only an assistant does) → the history part is empty (§11.18)
    replace(
        &mut h,
        &[
            user("q"),
            json!({"role": "assistant", "content": "a", "videoSrc": video_src()}),
            user(&att("https://e.x/p", "P", "full", "p")),
        ],
    );
    for kind in KINDS {
        let r = build(
            &mut h,
            json!({"kind": kind, "turn": {"userText": "make notes"}, "pass": pass, "systemPrompt": "S"}),
        );
        let b = &r["body"];
        match kind {
            "agent" => assert_eq!(*b, json!({"text": "add stamps", "images": []})),
            "runs" => {
                assert_eq!(b["input"], json!("add stamps"));
                assert_eq!(b["conversation_history"], json!([user("make notes"), assistant("notes")]));
            }
            _ => assert_eq!(
                conv(kind, b),
                vec![user("make notes"), assistant("notes"), user("add stamps")],
                "{kind}"
            ),
        }
    }
    // the newest attach with videoSrc, raw (not aged although the first pass ages it)
    let v1 = att("https://www.youtube.com/watch?v=1", "V1", "youtube", &filler(8500));
    let v2 = att("https://www.youtube.com/watch?v=2", "V2", "youtube", &filler(8600));
    replace(
        &mut h,
        &[
            json!({"role": "user", "videoSrc": video_src(), "content": v1}),
            json!({"role": "user", "videoSrc": video_src(), "attachId": "V2", "content": v2}),
            user("u1"),
            user("u2"),
            user("u3"),
            json!({"role": "user", "content": att("https://e.x/p", "P", "full", "p")}),
        ],
    );
    let first = build(&mut h, json!({"kind": "chat", "turn": {"userText": "make notes"}}));
    assert_eq!(
        conv("chat", &first["body"])[1]["content"],
        json!(aged_stub(Some("V2"), Some("https://www.youtube.com/watch?v=2"), u16len(&v2))),
        "the first pass ages it"
    );
    for kind in ["chat", "responses", "anthropic", "runs"] {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "make notes"}, "pass": pass}));
        let msgs = conv(kind, &r["body"]);
        assert_eq!(msgs[0], json!({"role": "user", "content": v2}), "{kind}: raw newest video attach");
        assert_eq!(msgs.len(), if kind == "runs" { 3 } else { 4 }, "{kind}");
    }
}

// ---------------------------------------------------------------------------------------------
// Determinism (PROTOCOL.md: byte-identical `body`)

/// One request over a fresh host process; returns the reply's JSON text exactly as sent
/// (chunks joined).
fn raw_request(db: &Path, req: &Value) -> String {
    let mut child = Command::new(BIN)
        .arg(ORIGIN)
        .env("KEEPSAKE_DB", db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn host");
    let body = req.to_string();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&(body.len() as u32).to_ne_bytes()).unwrap();
    stdin.write_all(body.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut chunks = String::new();
    let text = loop {
        let mut len = [0u8; 4];
        out.read_exact(&mut len).expect("reply frame");
        let n = u32::from_ne_bytes(len) as usize;
        assert!(n <= MAX_FRAME);
        let mut buf = vec![0u8; n];
        out.read_exact(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        if v.get("event").is_some() {
            continue;
        }
        if let Some(c) = v.get("chunk") {
            chunks.push_str(v["data"].as_str().unwrap());
            if c["index"].as_u64().unwrap() + 1 == c["count"].as_u64().unwrap() {
                break chunks;
            }
            continue;
        }
        break text;
    };
    drop(stdin);
    let _ = child.wait();
    text
}

#[test]
fn builds_are_byte_identical() {
    let (_d, db, mut h) = start();
    let mut hist = agent_history();
    hist.extend(cold_history());
    hist.push(
        json!({"role": "user", "imagesSeen": true, "content": [text_part("seen"), img(&png_url(GREEN))]}),
    );
    hist.push(assistant("ok"));
    replace(&mut h, &hist);
    let args = |kind: &str| {
        json!({"kind": kind, "turn": {"userText": "Go", "images": [png_url(YELLOW)]}, "systemPrompt": "S",
               "bodyFields": {"z": 1, "model": "m", "a": [1, 2], "stream": false},
               "aging": {"minUserTurnsAfter": 2, "minChars": 50}, "backfill": true})
    };
    let mut first = Vec::new();
    for kind in KINDS {
        let a = build(&mut h, args(kind));
        let b = build(&mut h, args(kind));
        let (sa, sb) =
            (serde_json::to_string(&a["body"]).unwrap(), serde_json::to_string(&b["body"]).unwrap());
        assert_eq!(sa, sb, "{kind}: two builds differ");
        assert_eq!(a["userEntry"], b["userEntry"]);
        first.push(sa);
    }
    h.ok("settings.set", json!({"map": {"theme": "dark", "activeModel": "other"}}));
    for (i, kind) in KINDS.iter().enumerate() {
        let c = build(&mut h, args(kind));
        assert_eq!(
            serde_json::to_string(&c["body"]).unwrap(),
            first[i],
            "{kind}: differs after a settings write"
        );
    }
    let mut h2 = Host::spawn(&db);
    for (i, kind) in KINDS.iter().enumerate() {
        let c = build(&mut h2, args(kind));
        assert_eq!(
            serde_json::to_string(&c["body"]).unwrap(),
            first[i],
            "{kind}: differs from a second process"
        );
    }
    // raw reply bytes from two more processes are identical and carry the body text as parsed
    for (i, kind) in KINDS.iter().enumerate() {
        let req = json!({"id": 7, "op": "request.build", "args": args(kind)});
        let r1 = raw_request(&db, &req);
        let r2 = raw_request(&db, &req);
        assert_eq!(r1, r2, "{kind}: raw replies differ between processes");
        assert!(r1.contains(&format!("\"body\":{}", first[i])), "{kind}: raw body text or key order differs");
    }
}

// ---------------------------------------------------------------------------------------------
// imageRefs (PROTOCOL.md "Image references in request bodies")

fn refs_history() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": [text_part("two images"), img(&png_url(RED)), img(&png_url(BLUE))]}),
        assistant("ok"),
        json!({"role": "user", "imagesSeen": true, "content": [text_part("seen"), img(&png_url(GREEN))]}),
        json!({"role": "user", "content": [text_part("again"), img(&png_url(RED))]}),
    ]
}

fn refs_turn() -> Value {
    json!({"userText": "and these", "images": [png_url(YELLOW), "https://example.com/pic.png", png_url(RED)]})
}

fn tokens_of(r: &Value) -> BTreeSet<String> {
    let mut t = BTreeSet::new();
    collect_tokens(&r["body"], &mut t);
    collect_tokens(&r["userEntry"], &mut t);
    t
}

#[test]
fn image_refs_default_is_inline() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &refs_history());
    for kind in KINDS {
        for extra in [json!({}), json!({"imageRefs": false})] {
            let mut a = json!({"kind": kind, "turn": refs_turn()});
            a.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            let r = build(&mut h, a);
            assert!(r.get("imageRefs").is_none(), "{kind}: imageRefs reported without the option");
            assert!(tokens_of(&r).is_empty(), "{kind}");
            let text = serde_json::to_string(&r["body"]).unwrap();
            if kind == "anthropic" {
                assert!(!text.contains("data:image"), "anthropic sends bare base64");
                assert!(text.contains(&format!(
                    "{{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"{BLUE}\"}}"
                )));
            } else if kind == "chat" || kind == "responses" {
                assert!(text.contains(&png_url(BLUE)), "{kind}: canonical data URL inline");
            }
            assert!(text.contains(YELLOW), "{kind}: turn image inline");
        }
    }
}

#[test]
fn image_refs_true_uses_tokens_and_fills_back_to_inline() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &refs_history());
    let (red, blue) = (ref_of(RED), ref_of(BLUE));
    let t0 = format!("{TURN_PREFIX}0");
    let t2 = format!("{TURN_PREFIX}2");
    for kind in KINDS {
        let inline = build(&mut h, json!({"kind": kind, "turn": refs_turn()}));
        let r = build(&mut h, json!({"kind": kind, "turn": refs_turn(), "imageRefs": true}));
        let present = tokens_of(&r);
        let listed: Vec<String> = r["imageRefs"]
            .as_array()
            .expect("imageRefs list")
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(listed.len(), present.len(), "{kind}: duplicates in {listed:?}");
        assert_eq!(
            listed.iter().cloned().collect::<BTreeSet<_>>(),
            present,
            "{kind}: imageRefs lists exactly the tokens present"
        );
        let want: BTreeSet<String> = match kind {
            "agent" | "runs" => [t0.clone(), t2.clone()].into(),
            _ => [red.clone(), blue.clone(), t0.clone(), t2.clone()].into(),
        };
        assert_eq!(present, want, "{kind}");
        let body_text = serde_json::to_string(&r["body"]).unwrap();
        let entry_text = serde_json::to_string(&r["userEntry"]).unwrap();
        for b in [RED, BLUE, YELLOW] {
            assert!(!body_text.contains(b) && !entry_text.contains(b), "{kind}: image bytes came back");
        }
        assert_eq!(
            r["userEntry"]["content"],
            json!([text_part("and these"), img(&t0), img("https://example.com/pic.png"), img(&t2)]),
            "{kind}: turn placeholders in userEntry"
        );
        if kind == "anthropic" {
            assert!(body_text.contains(&format!(
                "{{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"{red}\"}}"
            )));
            assert!(body_text.contains(&format!(
                "{{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"{t0}\"}}"
            )));
        }
        let turn = turn_images_of(&json!({"turn": refs_turn()}));
        let filled = fill(&mut h, &r["body"], &turn);
        assert_eq!(
            serde_json::to_string(&filled).unwrap(),
            serde_json::to_string(&inline["body"]).unwrap(),
            "{kind}: filled body differs from the inline body"
        );
        assert_eq!(fill(&mut h, &r["userEntry"], &turn), inline["userEntry"], "{kind}: filled userEntry");
        assert_eq!(r["droppedImages"], inline["droppedImages"]);
    }
}

#[test]
fn image_refs_list_keeps_only_held_refs() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &refs_history());
    let (red, blue, green) = (ref_of(RED), ref_of(BLUE), ref_of(GREEN));
    for kind in ["chat", "responses", "anthropic", "runs"] {
        let inline = build(&mut h, json!({"kind": kind, "turn": refs_turn()}));
        let r = build(&mut h, json!({"kind": kind, "turn": refs_turn(), "imageRefs": [red, green]}));
        let present = tokens_of(&r);
        let want: BTreeSet<String> = match kind {
            "runs" => [format!("{TURN_PREFIX}0"), format!("{TURN_PREFIX}2")].into(),
            _ => [red.clone(), format!("{TURN_PREFIX}0"), format!("{TURN_PREFIX}2")].into(),
        };
        assert_eq!(present, want, "{kind}: only the held ref (present in the body) stays");
        let listed: BTreeSet<String> =
            r["imageRefs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
        assert_eq!(listed, present, "{kind}");
        let text = serde_json::to_string(&r["body"]).unwrap();
        assert!(!text.contains(&blue), "{kind}: the unheld ref is inlined");
        if kind != "runs" {
            assert!(text.contains(BLUE), "{kind}: the unheld ref is inlined");
        }
        let filled = fill(&mut h, &r["body"], &turn_images_of(&json!({"turn": refs_turn()})));
        assert_eq!(
            serde_json::to_string(&filled).unwrap(),
            serde_json::to_string(&inline["body"]).unwrap(),
            "{kind}"
        );
    }
    for bad in [json!(["nope"]), json!(3), json!("keepsake-image:sha256:00")] {
        assert_eq!(
            h.err("request.build", json!({"kind": "chat", "turn": {}, "imageRefs": bad})),
            "bad_request"
        );
    }
}

#[test]
fn image_refs_keep_turn_bytes_out_of_the_reply() {
    let (_d, _db, mut h) = start();
    replace(&mut h, &refs_history());
    let big = noise_png(800, 800, 3);
    assert!(big.len() > 1_800_000);
    let big_url = data_url("image/png", &big);
    assert!(big_url.len() < 3 * 1024 * 1024);
    for kind in KINDS {
        let args = json!({"kind": kind, "turn": {"userText": "big", "images": [big_url]}, "imageRefs": true});
        let before = h.frame_sizes.len();
        let r = build(&mut h, args.clone());
        let reply_bytes: usize = h.frame_sizes[before..].iter().sum();
        assert!(
            reply_bytes < 64 * 1024,
            "{kind}: reply of {reply_bytes} bytes for a {} byte turn image",
            big.len()
        );
        assert_eq!(r["droppedImages"], json!(0));
        assert!(tokens_of(&r).contains(&format!("{TURN_PREFIX}0")), "{kind}");
        let inline = build(&mut h, json!({"kind": kind, "turn": {"userText": "big", "images": [big_url]}}));
        let filled = fill(&mut h, &r["body"], &turn_images_of(&args));
        assert_eq!(
            serde_json::to_string(&filled).unwrap(),
            serde_json::to_string(&inline["body"]).unwrap(),
            "{kind}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Large bodies come back chunked (PROTOCOL.md §3)

#[test]
fn large_body_is_chunked_under_the_frame_cap() {
    let (_d, _db, mut h) = start();
    let urls: Vec<String> = (0..3).map(|i| data_url("image/png", &noise_png(700, 700, 10 + i))).collect();
    let total: usize = urls.iter().map(String::len).sum();
    assert!(total > 5_000_000, "several MB of images ({total})");
    replace(
        &mut h,
        &[
            json!({"role": "user", "content": [text_part("first"), img(&urls[0])]}),
            assistant("one"),
            json!({"role": "user", "content": [text_part("second"), img(&urls[1]), img(&urls[2])]}),
            assistant("two"),
        ],
    );
    for kind in ["chat", "anthropic", "responses"] {
        let before = h.frame_sizes.len();
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "t"}}));
        let frames = &h.frame_sizes[before..];
        assert!(
            frames.len() > 5,
            "{kind}: a {total}-byte body must come back in chunks, got {} frame(s)",
            frames.len()
        );
        assert!(frames.iter().all(|&n| n <= MAX_FRAME), "{kind}: frame over 1 MiB: {frames:?}");
        let text = serde_json::to_string(&r["body"]).unwrap();
        for u in &urls {
            let payload = u.split_once(',').unwrap().1;
            assert!(text.contains(payload), "{kind}: an image is missing from the body");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Histories written by history.attach / history.append with markImagesSeen

#[test]
fn attach_then_seen_images_become_labels() {
    let (_d, _db, mut h) = start();
    let a = h.ok(
        "history.attach",
        json!({"ctx": {"url": "https://example.com/f", "title": "F", "mode": "full", "body": "Intro\nSee [Figure 1] here\nMore"},
               "images": [png_url(RED)]}),
    );
    let attach_id = a["attachId"].as_str().unwrap().to_owned();
    let r = build(&mut h, json!({"kind": "chat", "turn": {"userText": "what is it?"}}));
    let msgs = conv("chat", &r["body"]);
    let parts = msgs[0]["content"].as_array().expect("anchored attach parts");
    assert!(parts[0]["text"].as_str().unwrap().starts_with(PREFIX));
    assert!(parts.contains(&img(&png_url(RED))), "unseen image sent with its pixels");
    assert!(!serde_json::to_string(&r["body"]).unwrap().contains(&attach_id));
    h.ok("history.append", json!({"entry": user("what is it?")}));
    h.ok("history.append", json!({"entry": assistant("a red square"), "markImagesSeen": true}));
    for kind in ["chat", "responses", "anthropic", "runs"] {
        let r = build(&mut h, json!({"kind": kind, "turn": {"userText": "and now?"}}));
        let text = serde_json::to_string(&r["body"]).unwrap();
        assert!(
            !text.contains(RED) && !text.contains("image_url") && !text.contains("\"image\""),
            "{kind}: seen pixels resent"
        );
        assert!(text.contains("[image 1]"), "{kind}: the label replaces the seen image");
    }
}

#[test]
fn bad_arguments_are_bad_request() {
    let (_d, _db, mut h) = start();
    for args in [
        json!({"turn": {}}),
        json!({"kind": "gemini", "turn": {}}),
        json!({"kind": "chat", "turn": "hi"}),
        json!({"kind": "chat", "turn": {"userText": 3}}),
        json!({"kind": "chat", "turn": {}, "bodyFields": []}),
        json!({"kind": "chat", "turn": {}, "pass": {"kind": "continuation"}}),
        json!({"kind": "chat", "turn": {}, "aging": {"minChars": -1}}),
        json!({"kind": "chat", "turn": {}, "unknownArg": 1}),
    ] {
        assert_eq!(h.err("request.build", args.clone()), "bad_request", "{args}");
    }
}
