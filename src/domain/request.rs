//! Request builders (storage-model §8, §11.16–§11.18): ready-to-send bodies for OpenAI chat
//! completions, OpenAI Responses, Anthropic Messages, Hermes-style runs and server-side agents.
//! Pure and deterministic: the same inputs give byte-identical bodies, so providers' prompt
//! caches keep hitting. Image references stay references here; the caller resolves them.

use serde_json::{json, Map, Value};

use super::dataurl::split_image_data_url;
use super::entry::{image_part_url, is_image_part, part_text, role, starts_with_prefix};
use super::images::{dropped_note, pick_turn_images, prepare};
use super::reduce::{age, is_context_overflow, rescue, AgeOptions, RescueSkip, Stubbed};
use super::text::{js_trim, u16_len};

/// The five request kinds (§8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Responses,
    Anthropic,
    Runs,
    Agent,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "chat" => Kind::Chat,
            "responses" => Kind::Responses,
            "anthropic" => Kind::Anthropic,
            "runs" => Kind::Runs,
            "agent" => Kind::Agent,
            _ => return None,
        })
    }

    /// Overflow rescue applies to every kind but `agent` (§7.3).
    pub fn rescuable(self) -> bool {
        self != Kind::Agent
    }
}

/// Which pass of a turn is being built (§8.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    First,
    Continuation { previous_reply: String, instruction: String },
    TimestampRewrite { previous_reply: String, instruction: String },
}

/// Everything `request.build` needs once the history has been read.
pub struct BuildInput<'a> {
    pub kind: Kind,
    pub user_text: String,
    pub images: Option<Vec<Value>>,
    pub system_prompt: Option<String>,
    pub body_fields: Map<String, Value>,
    /// `H`: the source history limited by `upTo`.
    pub history: Vec<Value>,
    pub pass: Pass,
    /// `rescue.errorMessage`, when a rescue was asked for.
    pub rescue: Option<String>,
    pub backfill: bool,
    pub aging: AgeOptions,
    /// URL chars of an image URL (references resolve to their blob's canonical length).
    pub url_chars: &'a dyn Fn(&str) -> usize,
}

/// The report of a rescue attempt (§7.3).
#[derive(Debug, Clone, PartialEq)]
pub struct RescueReport {
    pub applied: bool,
    pub reason: Option<RescueSkip>,
    pub changed: Vec<Stubbed>,
}

impl RescueReport {
    pub fn to_json(&self) -> Value {
        let changed: Vec<Value> =
            self.changed.iter().map(|c| json!({"index": c.index, "attachId": c.attach_id})).collect();
        let mut m = Map::new();
        m.insert("applied".into(), json!(self.applied));
        if let Some(r) = self.reason {
            m.insert("reason".into(), json!(r.as_str()));
        }
        m.insert("changed".into(), Value::Array(changed));
        Value::Object(m)
    }
}

/// `request.build`'s result.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub body: Value,
    pub user_entry: Value,
    pub dropped_images: usize,
    pub rescue: Option<RescueReport>,
}

const NO_INSTRUCTION: &str = "(no instruction)";
const DESCRIBE_IMAGES: &str = "Describe these images.";
const RESPOND_TO_CONTEXT: &str = "(no instruction; just respond to the page context)";
const CONTINUING: &str = "(continuing the conversation)";
const BACKFILL_HEADER: &str = "以下是切换到当前会话之前的对话记录，仅供参考：";
const BACKFILL_IMAGE_NOTE: &str = "（附图，未随记录转发）";
const RUN_NOTE: &str = "（以上页面内容已在本地附上，请直接依据这些内容回答，不要再去抓取或打开其中的链接。）";
/// The backfill section keeps at most this many chars, dropping the oldest lines (§8.6).
pub const BACKFILL_MAX_CHARS: usize = 200_000;

fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

fn is_blank(s: &str) -> bool {
    js_trim(s).is_empty()
}

/// The text block of a turn that also carries images: none when the text is blank (§11.17).
fn text_block(text: &str, block: Value) -> Vec<Value> {
    if is_blank(text) {
        Vec::new()
    } else {
        vec![block]
    }
}

fn or_default<'s>(s: &'s str, d: &'s str) -> &'s str {
    if s.is_empty() {
        d
    } else {
        s
    }
}

/// Only user/assistant entries, reduced to `{role, content}` in the chat shape (§8.2); images
/// only ever go in user messages.
fn chat_history(h: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for e in h {
        let Some(r @ ("user" | "assistant")) = role(e) else { continue };
        match e.get("content") {
            Some(Value::String(s)) if !is_blank(s) => out.push(json!({"role": r, "content": s})),
            Some(Value::Array(parts)) => {
                let mut ps = Vec::new();
                for p in parts {
                    if let Some(t) = part_text(p) {
                        if !is_blank(t) {
                            ps.push(json!({"type": "text", "text": t}));
                        }
                    } else if is_image_part(p) && r == "user" {
                        // OpenAI chat takes text (or refusal) parts only in assistant messages
                        if let Some(u) = image_part_url(p) {
                            ps.push(image_part(u));
                        }
                    }
                }
                if !ps.is_empty() {
                    out.push(json!({"role": r, "content": ps}));
                }
            }
            _ => {}
        }
    }
    out
}

/// The current user message in the chat shape.
fn chat_turn(text: &str, images: &[String]) -> Value {
    if images.is_empty() {
        json!({"role": "user", "content": text})
    } else {
        let mut parts = text_block(text, json!({"type": "text", "text": text}));
        parts.extend(images.iter().map(|u| image_part(u)));
        json!({"role": "user", "content": parts})
    }
}

/// OpenAI Responses input items (§8.3). Assistant text goes out as `output_text` (the API
/// refuses `input_text` in assistant messages); images only ever go in user messages.
fn responses_history(h: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for e in h {
        let Some(r @ ("user" | "assistant")) = role(e) else { continue };
        match e.get("content") {
            Some(Value::String(s)) if !is_blank(s) => out.push(json!({"role": r, "content": s})),
            Some(Value::Array(parts)) => {
                let mut ps = Vec::new();
                for p in parts {
                    if let Some(t) = part_text(p) {
                        if !is_blank(t) {
                            let ty = if r == "assistant" { "output_text" } else { "input_text" };
                            ps.push(json!({"type": ty, "text": t}));
                        }
                    } else if is_image_part(p) && r == "user" {
                        if let Some(u) = image_part_url(p) {
                            ps.push(json!({"type": "input_image", "image_url": u}));
                        }
                    }
                }
                if !ps.is_empty() {
                    out.push(json!({"role": r, "content": ps}));
                }
            }
            _ => {}
        }
    }
    out
}

fn responses_turn(text: &str, images: &[String]) -> Value {
    if images.is_empty() {
        json!({"role": "user", "content": text})
    } else {
        let mut parts = text_block(text, json!({"type": "input_text", "text": text}));
        parts.extend(images.iter().map(|u| json!({"type": "input_image", "image_url": u})));
        json!({"role": "user", "content": parts})
    }
}

/// An Anthropic image block for a `data:` URL or an image reference (resolved by the caller);
/// other URLs are dropped (§8.4).
fn anthropic_image(url: &str) -> Option<Value> {
    if super::entry::is_image_token(url) {
        // media_type and data are filled in when the token is resolved
        return Some(json!({"type": "image", "source": {"type": "base64", "media_type": "", "data": url}}));
    }
    let (mime, payload) = split_image_data_url(url)?;
    Some(json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": payload}}))
}

fn anthropic_history(h: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for e in h {
        let Some(r @ ("user" | "assistant")) = role(e) else { continue };
        match e.get("content") {
            Some(Value::String(s)) if !is_blank(s) => out.push(json!({"role": r, "content": s})),
            Some(Value::Array(parts)) => {
                let mut bs = Vec::new();
                for p in parts {
                    if let Some(t) = part_text(p) {
                        if !is_blank(t) {
                            bs.push(json!({"type": "text", "text": t}));
                        }
                    } else if is_image_part(p) {
                        if let Some(b) = image_part_url(p).and_then(anthropic_image) {
                            bs.push(b);
                        }
                    }
                }
                if !bs.is_empty() {
                    out.push(json!({"role": r, "content": bs}));
                }
            }
            _ => {}
        }
    }
    // Head rule (§8.4)
    let first_user = out.iter().position(|m| m["role"] == "user");
    match first_user {
        Some(i) if i > 0 => {
            out.drain(..i);
        }
        None if !out.is_empty() => out.insert(0, json!({"role": "user", "content": CONTINUING})),
        _ => {}
    }
    out
}

fn anthropic_turn(text: &str, images: &[String]) -> Value {
    let blocks: Vec<Value> = images.iter().filter_map(|u| anthropic_image(u)).collect();
    if blocks.is_empty() {
        json!({"role": "user", "content": text})
    } else {
        let mut content = text_block(text, json!({"type": "text", "text": text}));
        content.extend(blocks);
        json!({"role": "user", "content": content})
    }
}

/// Flatten content for `runs` (§8.5).
fn flatten(content: Option<&Value>) -> String {
    match content {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| {
                if let Some(t) = part_text(p) {
                    (!is_blank(t)).then(|| t.to_owned())
                } else if is_image_part(p) {
                    Some("[image]".to_owned())
                } else {
                    None
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(Value::Bool(false)) => String::new(),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => String::new(),
        Some(other) => js_string(other),
    }
}

/// JavaScript `String(v)` for the values JSON can hold.
fn js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) => a
            .iter()
            .map(|x| if x.is_null() { String::new() } else { js_string(x) })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

fn runs_history(h: &[Value]) -> Vec<Value> {
    h.iter()
        .filter_map(|e| {
            let r @ ("user" | "assistant") = role(e)? else { return None };
            let text = flatten(e.get("content"));
            (!is_blank(&text)).then(|| json!({"role": r, "content": text}))
        })
        .collect()
}

/// A user page-context entry for the agent walk (§8.6): string content starting with a prefix,
/// or array content in which any text part starts with one.
fn is_agent_context(e: &Value) -> bool {
    if role(e) != Some("user") {
        return false;
    }
    match e.get("content") {
        Some(Value::String(s)) => starts_with_prefix(s),
        Some(Value::Array(parts)) => parts.iter().filter_map(part_text).any(starts_with_prefix),
        _ => false,
    }
}

fn text_of(e: &Value) -> String {
    match e.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(part_text).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn image_urls_of(e: &Value) -> Vec<String> {
    match e.get("content") {
        Some(Value::Array(parts)) => {
            parts.iter().filter(|p| is_image_part(p)).filter_map(image_part_url).map(str::to_owned).collect()
        }
        _ => Vec::new(),
    }
}

fn agent_body(
    h: &[Value],
    user_text: &str,
    kept: &[String],
    backfill: bool,
    url_chars: &dyn Fn(&str) -> usize,
) -> Value {
    let mut start = h.len();
    while start > 0 && is_agent_context(&h[start - 1]) {
        start -= 1;
    }
    let run = &h[start..];
    let run_texts: Vec<String> = run.iter().map(text_of).collect();
    let run_images: Vec<String> = run.iter().flat_map(image_urls_of).collect();

    let mut sections: Vec<String> = Vec::new();
    if backfill {
        let mut lines: Vec<String> = Vec::new();
        for e in &h[..start] {
            let who = match role(e) {
                Some("user") => "用户：",
                Some("assistant") => "助手：",
                _ => continue,
            };
            if super::entry::is_attach_entry(e) {
                continue;
            }
            let text = text_of(e);
            let has_images = e.get("content").is_some_and(Value::is_array) && !image_urls_of(e).is_empty();
            if is_blank(&text) && !has_images {
                // an entry left with no content renders no line (§11.17)
                continue;
            }
            let mut line = format!("{who}{text}");
            if has_images {
                line.push_str(BACKFILL_IMAGE_NOTE);
            }
            lines.push(line);
        }
        let section_len = |ls: &[String]| -> usize {
            u16_len(BACKFILL_HEADER) + ls.iter().map(|l| 1 + u16_len(l)).sum::<usize>()
        };
        let mut from = 0;
        while from < lines.len() && section_len(&lines[from..]) > BACKFILL_MAX_CHARS {
            from += 1;
        }
        let kept_lines = &lines[from..];
        if !kept_lines.is_empty() {
            let mut s = BACKFILL_HEADER.to_owned();
            for l in kept_lines {
                s.push('\n');
                s.push_str(l);
            }
            sections.push(s);
        }
    }
    if !run_texts.is_empty() {
        sections.push(format!("{}\n\n{RUN_NOTE}", run_texts.join("\n\n")));
    }
    let mut combined: Vec<Value> = kept.iter().map(|u| json!(u)).collect();
    combined.extend(run_images.iter().map(|u| json!(u)));
    let picked = pick_turn_images(Some(&combined), url_chars);
    let mut text_user = user_text.to_owned();
    if picked.dropped > 0 {
        text_user.push_str(&dropped_note(picked.dropped));
    }
    let text = if sections.is_empty() {
        text_user
    } else {
        sections.push(text_user);
        sections.join("\n\n")
    };
    json!({"text": text, "images": picked.images})
}

/// Newest **attach** entry carrying `videoSrc` (§11.18).
fn newest_video_attach(h: &[Value]) -> Vec<Value> {
    h.iter()
        .rev()
        .find(|e| super::entry::is_attach_entry(e) && e.get("videoSrc").is_some_and(|v| !v.is_null()))
        .map(|e| vec![e.clone()])
        .unwrap_or_default()
}

/// request.build (§8.1).
pub fn build(input: BuildInput) -> Built {
    let BuildInput {
        kind,
        user_text,
        images,
        system_prompt,
        body_fields,
        history,
        pass,
        rescue: rescue_req,
        backfill,
        aging,
        url_chars,
    } = input;
    // 2. per-turn caps
    let picked = pick_turn_images(images.as_deref(), url_chars);
    let mut user_text = user_text;
    if picked.dropped > 0 {
        user_text.push_str(&dropped_note(picked.dropped));
    }
    let kept = picked.images;
    // 3. the user entry the extension appends
    let entry_text = or_default(&user_text, NO_INSTRUCTION).to_owned();
    let user_entry = if kept.is_empty() {
        json!({"role": "user", "content": entry_text})
    } else {
        let mut parts = vec![json!({"type": "text", "text": entry_text})];
        parts.extend(kept.iter().map(|u| image_part(u)));
        json!({"role": "user", "content": parts})
    };
    // 4. aging, rescue, prepare
    let mut report = None;
    let send_history: Vec<Value> = match &pass {
        Pass::TimestampRewrite { .. } => prepare(&newest_video_attach(&history)),
        _ => {
            let aged = age(&history, aging);
            let sent = match &rescue_req {
                None => aged,
                Some(msg) => {
                    let (stubbed, changed) = rescue(&aged);
                    let skip = if !kind.rescuable() {
                        Some(RescueSkip::Kind)
                    } else if !is_context_overflow(Some(msg)) {
                        Some(RescueSkip::NotOverflow)
                    } else if changed.is_empty() {
                        Some(RescueSkip::NothingToStub)
                    } else {
                        None
                    };
                    let applied = skip.is_none();
                    report = Some(RescueReport {
                        applied,
                        reason: skip,
                        changed: if applied { changed } else { Vec::new() },
                    });
                    if applied {
                        stubbed
                    } else {
                        aged
                    }
                }
            };
            prepare(&sent)
        }
    };

    let turn_text = if kept.is_empty() {
        or_default(&user_text, RESPOND_TO_CONTEXT)
    } else {
        or_default(&user_text, DESCRIBE_IMAGES)
    }
    .to_owned();
    let second = match &pass {
        Pass::First => None,
        Pass::Continuation { previous_reply, instruction }
        | Pass::TimestampRewrite { previous_reply, instruction } => {
            Some((previous_reply.clone(), instruction.clone()))
        }
    };

    let mut body = Map::new();
    match kind {
        Kind::Chat => {
            let mut messages = Vec::new();
            if let Some(sp) = system_prompt.as_deref().filter(|s| !is_blank(s)) {
                messages.push(json!({"role": "system", "content": sp}));
            }
            messages.extend(chat_history(&send_history));
            messages.push(chat_turn(&turn_text, &kept));
            if let Some((prev, instr)) = &second {
                messages.push(json!({"role": "assistant", "content": prev}));
                messages.push(json!({"role": "user", "content": instr}));
            }
            body.insert("messages".into(), Value::Array(messages));
        }
        Kind::Responses => {
            let mut input = responses_history(&send_history);
            input.push(responses_turn(&turn_text, &kept));
            if let Some((prev, instr)) = &second {
                input.push(json!({"role": "assistant", "content": prev}));
                input.push(json!({"role": "user", "content": instr}));
            }
            body.insert("input".into(), Value::Array(input));
            if let Some(sp) = system_prompt.as_deref().filter(|s| !is_blank(s)) {
                body.insert("instructions".into(), json!(sp));
            }
        }
        Kind::Anthropic => {
            if let Some(sp) = system_prompt.as_deref().filter(|s| !is_blank(s)) {
                body.insert("system".into(), json!(sp));
            }
            let mut messages = anthropic_history(&send_history);
            messages.push(anthropic_turn(&turn_text, &kept));
            if let Some((prev, instr)) = &second {
                messages.push(json!({"role": "assistant", "content": prev}));
                messages.push(json!({"role": "user", "content": instr}));
            }
            body.insert("messages".into(), Value::Array(messages));
        }
        Kind::Runs => {
            let mut conv = runs_history(&send_history);
            let input = match &second {
                None => {
                    if kept.is_empty() {
                        json!(user_text)
                    } else {
                        let mut parts = vec![json!({"type": "text", "text": user_text})];
                        parts.extend(kept.iter().map(|u| image_part(u)));
                        json!([{"role": "user", "content": parts}])
                    }
                }
                Some((prev, instr)) => {
                    let mut turn_parts: Vec<Value> = vec![json!({"type": "text", "text": user_text})];
                    turn_parts.extend(kept.iter().map(|u| image_part(u)));
                    let flat = flatten(Some(&Value::Array(turn_parts)));
                    if !is_blank(&flat) {
                        conv.push(json!({"role": "user", "content": flat}));
                    }
                    if !is_blank(prev) {
                        conv.push(json!({"role": "assistant", "content": prev}));
                    }
                    json!(instr)
                }
            };
            body.insert("input".into(), input);
            body.insert("conversation_history".into(), Value::Array(conv));
            if let Some(sp) = system_prompt.as_deref().filter(|s| !is_blank(s)) {
                body.insert("instructions".into(), json!(sp));
            }
        }
        Kind::Agent => {
            let v = match &second {
                None => agent_body(&send_history, &user_text, &kept, backfill, url_chars),
                Some((_, instr)) => json!({"text": instr, "images": []}),
            };
            if let Value::Object(m) = v {
                body.extend(m);
            }
        }
    }
    // bodyFields are copied in; host-built fields win
    let mut full = Map::new();
    for (k, v) in body_fields {
        if !body.contains_key(&k) {
            full.insert(k, v);
        }
    }
    full.extend(body);
    Built { body: Value::Object(full), user_entry, dropped_images: picked.dropped, rescue: report }
}
