//! `compaction`: a structured case — a history, request-build parameters, an image byte budget
//! and a Markdown text — through the pure compaction functions: `age`, `prepare`, the byte-budget
//! plan (`bound_victims` with the label fallback `compact_entry`), `request::build` and
//! `markdown_chunks`.
//!
//! Input: a JSON case when the bytes start with `{` (see [`Case::from_json`]; the committed seed
//! histories use it), otherwise a case derived byte by byte ([`Case::from_bytes`]).
//!
//! Properties (storage-model §6.5, §7, §8, §10; reliability T11):
//!
//! 1. **Deterministic**: every function gives byte-identical output for the same input, twice.
//! 2. **Budget**: the plan thumbnails a prefix of the image-bearing entries, oldest first, never
//!    the newest; what remains fits the budget unless only the newest entry remains; the prefix
//!    is minimal; after the label fallback the newest image-bearing entry is untouched, victims
//!    keep their other parts, and a second plan is empty.
//! 3. **Aging** changes only cold attach entries (never the newest attach), keeps every stamp,
//!    keeps the length, and is idempotent; `prepare` never lets `imagesSeen` through.
//! 4. **Request build**: the latest user turn is never dropped (its text is in the body, except
//!    an `agent` second pass, which is the instruction alone by §8.7); a non-blank system prompt
//!    is never dropped (`agent` takes none, §8.6); history messages carry only `role` and
//!    `content`; no `imagesSeen` in host-built fields; `bodyFields` never override host fields;
//!    `droppedImages` is pickTurnImages' count.
//! 5. **markdownChunks** loses no non-blank line and invents none: every non-blank input line
//!    appears, in order, as a line of the chunks or as consecutive pieces of a split long line;
//!    the only extra lines are blank or repeated table header rows. A chunk over the size is an
//!    atomic fenced block (or a single character wider than the size).

use keepsake_host::domain::chunks::markdown_chunks;
use keepsake_host::domain::entry::{is_attach_entry, is_image_bearing, is_image_part, role};
use keepsake_host::domain::images::{
    bound_victims, compact_entry, image_part_urls, pick_turn_images, prepare, string_url_chars,
};
use keepsake_host::domain::reduce::{age, attach_text, AgeOptions};
use keepsake_host::domain::request::{build, BuildInput, Built, Kind, Pass};
use keepsake_host::domain::text::{is_js_space, js_trim, u16_len};
use serde_json::{json, Map, Value};

const PREFIX: &str = "[Page context attached by Keepsake]";
const LEGACY: &str = "[Page context attached by browsa]";
const AGED_HEAD: &str = "[Attached page context trimmed to keep replies fast";

/// One compaction case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub history: Vec<Value>,
    pub budget: usize,
    pub aging: AgeOptions,
    pub kind: Kind,
    pub pass: Pass,
    pub user_text: String,
    pub images: Option<Vec<Value>>,
    pub system_prompt: Option<String>,
    pub body_fields: Map<String, Value>,
    pub rescue: Option<String>,
    pub backfill: bool,
    pub markdown: String,
    pub size: usize,
}

// ---------------------------------------------------------------------------------------------
// cases from bytes

/// Reads choices from the fuzz input; zeros once it runs out.
struct Gen<'a> {
    data: &'a [u8],
}

impl Gen<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }

    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    fn pick<'t>(&mut self, table: &[&'t str]) -> &'t str {
        table[self.below(table.len())]
    }
}

const TOKENS: &[&str] = &[
    "a",
    "word ",
    " ",
    "\n",
    "\n",
    "\n\n",
    "  \n",
    "\t",
    "\r",
    "|",
    "| a | b |",
    "|---|---|",
    "```",
    "```rust",
    "~~~",
    "Title: ",
    "URL: ",
    "https://e.x/p",
    "Mode: full",
    "---",
    "## Figures",
    "1. Revenue",
    "2. ",
    "[图1]",
    "[Figure 2]",
    "é",
    "中文",
    "😀",
    "\u{feff}",
    "\u{2028}",
    "context length",
    "rate limit",
    PREFIX,
    LEGACY,
    "x",
    "\n```\n",
    "\n|h|\n|-|\n|1|\n",
    "   ",
];

const URLS: &[&str] = &[
    "https://e.x/a.png",
    "HTTP://E.X/B",
    "data:image/png;base64,",
    "data:image/jpeg;base64,/9j/",
    "keepsake-image:sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    "keepsake-turn-image:0",
    "",
    "ftp://e.x/c",
    "  https://e.x/d  ",
];

const MESSAGES: &[&str] = &[
    "This model's maximum context length is 8192 tokens",
    "context_length_exceeded",
    "Rate limit reached (TPM)",
    "502 Bad Gateway",
    "输入内容过长",
    "",
];

impl Gen<'_> {
    fn text(&mut self, max_tokens: usize) -> String {
        let n = self.below(max_tokens + 1);
        let mut s = String::new();
        for _ in 0..n {
            if self.byte() < 8 {
                // a long run, to cross the 8,000-char thresholds and split lines
                let k = self.byte() as usize * 64;
                s.push_str(&"x".repeat(k));
            } else {
                s.push_str(self.pick(TOKENS));
            }
        }
        s
    }

    fn url(&mut self) -> String {
        let u = self.pick(URLS).to_owned();
        if u.starts_with("data:") {
            // sizes that matter against small budgets
            format!("{u}{}", "A".repeat(self.byte() as usize * 16))
        } else {
            u
        }
    }

    fn attach_text(&mut self) -> String {
        let prefix = if self.byte() < 32 { LEGACY } else { PREFIX };
        let title = self.text(3);
        let body = self.text(6);
        format!("{prefix}\nURL: https://e.x/{}\nTitle: {title}\nMode: full\n---\n\n{body}", self.byte())
    }

    fn part(&mut self) -> Value {
        match self.below(8) {
            0 | 1 => json!({"type": "text", "text": self.text(6)}),
            2 => json!({"type": "input_text", "text": self.text(4)}),
            3 | 4 => json!({"type": "image_url", "image_url": {"url": self.url()}}),
            5 => json!({"type": "image_url", "image_url": self.url()}),
            6 => json!({"type": "image_url"}),
            _ => match self.below(3) {
                0 => json!({"type": "refusal", "refusal": "no"}),
                1 => json!("loose string"),
                _ => json!({"type": "text", "text": 7}),
            },
        }
    }

    fn entry(&mut self) -> Value {
        let mut e = Map::new();
        match self.below(8) {
            0..=3 => {
                e.insert("role".into(), json!("user"));
            }
            4 | 5 => {
                e.insert("role".into(), json!("assistant"));
            }
            6 => {
                e.insert("role".into(), json!(self.pick(&["system", "tool", ""])));
            }
            _ => {}
        }
        let content = match self.below(6) {
            0 | 1 => json!(self.text(8)),
            2 => json!(self.attach_text()),
            3 | 4 => {
                let mut parts = Vec::new();
                if self.flag() {
                    parts.push(json!({"type": "text", "text": self.attach_text()}));
                }
                for _ in 0..self.below(6) {
                    parts.push(self.part());
                }
                Value::Array(parts)
            }
            _ => match self.below(3) {
                0 => Value::Null,
                1 => json!(0),
                _ => json!({"weird": true}),
            },
        };
        if self.byte() < 240 {
            e.insert("content".into(), content);
        }
        let stamps = self.byte();
        if stamps & 1 != 0 {
            e.insert("attachId".into(), json!(format!("att-{}", self.byte())));
        }
        if stamps & 2 != 0 {
            let seen = [json!(true), json!(false), json!(1), json!(0), json!(""), Value::Null];
            e.insert("imagesSeen".into(), seen[self.below(seen.len())].clone());
        }
        if stamps & 4 != 0 {
            e.insert("videoSrc".into(), json!({"platform": "youtube", "url": "https://y.t/v", "tabId": 3}));
        }
        if stamps & 8 != 0 {
            e.insert("summarized".into(), json!(true));
        }
        if stamps & 16 != 0 {
            e.insert("ts".into(), json!(1_700_000_000_000u64 + self.byte() as u64));
        }
        Value::Object(e)
    }
}

fn kind_of(n: usize) -> Kind {
    [Kind::Chat, Kind::Responses, Kind::Anthropic, Kind::Runs, Kind::Agent][n % 5]
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Chat => "chat",
        Kind::Responses => "responses",
        Kind::Anthropic => "anthropic",
        Kind::Runs => "runs",
        Kind::Agent => "agent",
    }
}

impl Case {
    /// Derive a case from arbitrary bytes.
    pub fn from_bytes(data: &[u8]) -> Case {
        let mut g = Gen { data };
        let kind = kind_of(g.below(5));
        let pass = match g.below(4) {
            0 | 1 => Pass::First,
            2 => Pass::Continuation { previous_reply: g.text(3), instruction: g.text(3) },
            _ => Pass::TimestampRewrite { previous_reply: g.text(3), instruction: g.text(3) },
        };
        let user_text = g.text(5);
        let images = match g.below(3) {
            0 => None,
            _ => Some(
                (0..g.below(12)).map(|_| if g.byte() < 16 { json!(5) } else { json!(g.url()) }).collect(),
            ),
        };
        let system_prompt = g.flag().then(|| g.text(3));
        let mut body_fields = Map::new();
        if g.flag() {
            body_fields.insert("model".into(), json!("m"));
            body_fields
                .insert(["messages", "input", "text", "system"][g.below(4)].into(), json!("from bodyFields"));
            body_fields.insert("imagesSeen".into(), json!(true));
        }
        let rescue = g.flag().then(|| g.pick(MESSAGES).to_owned());
        let backfill = g.flag();
        let aging =
            AgeOptions { min_user_turns_after: g.below(5), min_chars: [0, 1, 100, 1000, 8000][g.below(5)] };
        let budget = g.byte() as usize * g.byte() as usize;
        let size = 1 + g.byte() as usize;
        let markdown = g.text(24);
        let history = (0..g.below(16)).map(|_| g.entry()).collect();
        Case {
            history,
            budget,
            aging,
            kind,
            pass,
            user_text,
            images,
            system_prompt,
            body_fields,
            rescue,
            backfill,
            markdown,
            size,
        }
    }

    /// A case written as JSON: `{"history": [...], "budget", "aging": {minUserTurnsAfter,
    /// minChars}, "kind", "pass": "first" | {kind, previousReply, instruction}, "userText",
    /// "images", "systemPrompt", "bodyFields", "rescue": "<error message>", "backfill",
    /// "markdown", "size"}`; every field optional. `None` when the bytes are not such a case.
    pub fn from_json(data: &[u8]) -> Option<Case> {
        let v: Value = serde_json::from_slice(data).ok()?;
        let o = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
        let n = |k: &str, d: usize| o.get(k).and_then(Value::as_u64).map_or(d, |x| x.min(1 << 30) as usize);
        let kind = match o.get("kind") {
            None => Kind::Chat,
            Some(k) => Kind::parse(k.as_str()?)?,
        };
        let pass = match o.get("pass") {
            None => Pass::First,
            Some(Value::String(p)) if p == "first" => Pass::First,
            Some(Value::Object(p)) => {
                let f = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                let (previous_reply, instruction) = (f("previousReply"), f("instruction"));
                match p.get("kind").and_then(Value::as_str)? {
                    "first" => Pass::First,
                    "continuation" => Pass::Continuation { previous_reply, instruction },
                    "timestampRewrite" => Pass::TimestampRewrite { previous_reply, instruction },
                    _ => return None,
                }
            }
            Some(_) => return None,
        };
        let aging = o.get("aging").map_or(AgeOptions::default(), |a| AgeOptions {
            min_user_turns_after: a["minUserTurnsAfter"]
                .as_u64()
                .map_or(AgeOptions::default().min_user_turns_after, |x| x as usize),
            min_chars: a["minChars"].as_u64().map_or(AgeOptions::default().min_chars, |x| x as usize),
        });
        Some(Case {
            history: o.get("history").and_then(Value::as_array).cloned().unwrap_or_default(),
            budget: n("budget", 8 * 1024 * 1024),
            aging,
            kind,
            pass,
            user_text: s("userText").unwrap_or_default(),
            images: o.get("images").and_then(Value::as_array).cloned(),
            system_prompt: s("systemPrompt"),
            body_fields: o.get("bodyFields").and_then(Value::as_object).cloned().unwrap_or_default(),
            rescue: s("rescue"),
            backfill: o.get("backfill").and_then(Value::as_bool).unwrap_or(false),
            markdown: s("markdown").unwrap_or_default(),
            size: n("size", 12_000).max(1),
        })
    }

    /// The JSON form [`Case::from_json`] reads.
    pub fn to_json(&self) -> Value {
        let pass = match &self.pass {
            Pass::First => json!("first"),
            Pass::Continuation { previous_reply, instruction } => {
                json!({"kind": "continuation", "previousReply": previous_reply, "instruction": instruction})
            }
            Pass::TimestampRewrite { previous_reply, instruction } => {
                json!({"kind": "timestampRewrite", "previousReply": previous_reply, "instruction": instruction})
            }
        };
        json!({
            "history": self.history,
            "budget": self.budget,
            "aging": {"minUserTurnsAfter": self.aging.min_user_turns_after, "minChars": self.aging.min_chars},
            "kind": kind_name(self.kind),
            "pass": pass,
            "userText": self.user_text,
            "images": self.images,
            "systemPrompt": self.system_prompt,
            "bodyFields": self.body_fields,
            "rescue": self.rescue,
            "backfill": self.backfill,
            "markdown": self.markdown,
            "size": self.size,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// properties

fn is_blank(s: &str) -> bool {
    js_trim(s).is_empty()
}

fn url_chars(u: &str) -> usize {
    string_url_chars(u)
}

fn run_build(c: &Case) -> Built {
    build(BuildInput {
        kind: c.kind,
        user_text: c.user_text.clone(),
        images: c.images.clone(),
        system_prompt: c.system_prompt.clone(),
        body_fields: c.body_fields.clone(),
        history: c.history.clone(),
        pass: c.pass.clone(),
        rescue: c.rescue.clone(),
        backfill: c.backfill,
        aging: c.aging,
        url_chars: &url_chars,
    })
}

fn built_text(b: &Built) -> String {
    let rescue = b.rescue.as_ref().map(|r| r.to_json());
    json!([b.body, b.user_entry, b.dropped_images, rescue]).to_string()
}

fn image_sizes(h: &[Value]) -> (Vec<usize>, Vec<usize>) {
    let bearing: Vec<usize> = (0..h.len()).filter(|&i| is_image_bearing(&h[i])).collect();
    let sizes = bearing
        .iter()
        .map(|&i| image_part_urls(&h[i]).iter().flatten().map(|u| url_chars(u)).sum())
        .collect();
    (bearing, sizes)
}

fn check_budget(h: &[Value], budget: usize) {
    let (bearing, sizes) = image_sizes(h);
    let victims = bound_victims(&sizes, budget);
    assert_eq!(victims, bound_victims(&sizes, budget), "budget plan not deterministic");
    let total: usize = sizes.iter().sum();
    if total <= budget || sizes.len() < 2 {
        assert!(victims.is_empty(), "plan {victims:?} for sizes {sizes:?} within budget {budget}");
        return;
    }
    let k = victims.len();
    assert!(k >= 1, "over budget ({total} > {budget}) with {} entries, nothing planned", sizes.len());
    assert_eq!(victims, (0..k).collect::<Vec<_>>(), "victims are the oldest, in order");
    assert!(k < sizes.len(), "the newest image-bearing entry was planned");
    let remaining: usize = sizes[k..].iter().sum();
    assert!(
        remaining <= budget || k == sizes.len() - 1,
        "{remaining} over budget {budget} with {} entries left",
        sizes.len() - k
    );
    assert!(sizes[k - 1..].iter().sum::<usize>() > budget, "plan {victims:?} is not minimal for {sizes:?}");
    // the label fallback (every part failed to thumbnail): the worst case the store can apply
    let mut after = h.to_vec();
    for &v in &victims {
        let i = bearing[v];
        after[i] = compact_entry(&h[i]);
        assert!(!is_image_bearing(&after[i]), "a compacted entry still bears images");
        let (old, new) = (&h[i]["content"], &after[i]["content"]);
        let (old, new) = (old.as_array().unwrap(), new.as_array().unwrap());
        assert_eq!(old.len(), new.len(), "compaction changed the number of parts");
        for (o, n) in old.iter().zip(new) {
            if !is_image_part(o) {
                assert_eq!(o, n, "compaction changed a non-image part");
            }
        }
    }
    let newest = *bearing.last().unwrap();
    assert_eq!(after[newest], h[newest], "the newest image-bearing entry was touched");
    let (_, sizes2) = image_sizes(&after);
    assert!(bound_victims(&sizes2, budget).is_empty(), "a second pass would rewrite again: {sizes2:?}");
}

fn users_after(h: &[Value]) -> Vec<usize> {
    let mut out = vec![0; h.len()];
    let mut n = 0;
    for i in (0..h.len()).rev() {
        out[i] = n;
        if role(&h[i]) == Some("user") {
            n += 1;
        }
    }
    out
}

fn check_aging(h: &[Value], opts: AgeOptions) {
    let aged = age(h, opts);
    assert_eq!(aged, age(h, opts), "age is not deterministic");
    assert_eq!(aged.len(), h.len(), "aging changed the length");
    let newest_attach = h.iter().rposition(is_attach_entry);
    let after = users_after(h);
    for (i, (a, e)) in aged.iter().zip(h).enumerate() {
        if a == e {
            continue;
        }
        assert!(is_attach_entry(e), "aging changed a non-attach entry {i}");
        assert_ne!(Some(i), newest_attach, "aging changed the newest attach");
        assert!(after[i] >= opts.min_user_turns_after, "entry {i} aged with {} user turns after", after[i]);
        assert!(u16_len(&attach_text(e)) >= opts.min_chars, "entry {i} aged below min chars");
        let stub = a["content"].as_str().expect("an aged entry's content is a string");
        assert!(stub.starts_with(AGED_HEAD), "aged content {stub:?}");
        let (ao, eo) = (a.as_object().unwrap(), e.as_object().unwrap());
        assert_eq!(ao.len(), eo.len(), "aging changed the stamps");
        for (k, v) in eo {
            if k != "content" {
                assert_eq!(ao.get(k), Some(v), "aging changed stamp {k}");
            }
        }
    }
    assert_eq!(age(&aged, opts), aged, "aging is not idempotent");
    for e in prepare(&aged) {
        assert!(e.get("imagesSeen").is_none(), "prepare let imagesSeen through");
    }
}

fn strings_in<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings_in(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_in(x, out)),
        _ => {}
    }
}

fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        Value::Object(o) => o.contains_key(key) || o.values().any(|x| has_key(x, key)),
        _ => false,
    }
}

fn host_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Chat => &["messages"],
        Kind::Responses => &["input", "instructions"],
        Kind::Anthropic => &["system", "messages"],
        Kind::Runs => &["input", "conversation_history", "instructions"],
        Kind::Agent => &["text", "images"],
    }
}

fn check_build(c: &Case) {
    let built = run_build(c);
    assert_eq!(built_text(&built), built_text(&run_build(c)), "request.build is not deterministic");
    let picked = pick_turn_images(c.images.as_deref(), &url_chars);
    assert_eq!(built.dropped_images, picked.dropped, "droppedImages");
    let mut ut = c.user_text.clone();
    if picked.dropped > 0 {
        ut.push_str(&format!("\n\n（注：另有 {} 张图片因超出单条消息大小上限未能随附。）", picked.dropped));
    }
    // the user entry the extension appends
    let entry_text = if ut.is_empty() { "(no instruction)" } else { ut.as_str() };
    match &built.user_entry["content"] {
        Value::String(s) => assert_eq!(s, entry_text, "userEntry text"),
        Value::Array(parts) => assert_eq!(parts[0]["text"], entry_text, "userEntry text part"),
        other => panic!("userEntry content {other}"),
    }
    let body = built.body.as_object().expect("the body is an object");
    let second = !matches!(c.pass, Pass::First);
    // the latest user turn is never dropped
    let agent_second_pass = c.kind == Kind::Agent && second;
    if !is_blank(&ut) && !agent_second_pass {
        let mut all = Vec::new();
        for k in host_fields(c.kind) {
            if let Some(v) = body.get(*k) {
                strings_in(v, &mut all);
            }
        }
        assert!(all.iter().any(|s| s.contains(ut.as_str())), "the user turn {ut:?} is not in the body");
    }
    // the system prompt is never dropped
    if let Some(sp) = c.system_prompt.as_deref().filter(|s| !is_blank(s)) {
        let at = match c.kind {
            Kind::Chat => Some(&body["messages"][0]),
            Kind::Responses | Kind::Runs => Some(&body["instructions"]),
            Kind::Anthropic => Some(&body["system"]),
            Kind::Agent => None,
        };
        match (c.kind, at) {
            (Kind::Chat, Some(m)) => {
                assert_eq!(m, &json!({"role": "system", "content": sp}), "system message")
            }
            (_, Some(v)) => assert_eq!(v, &json!(sp), "system prompt"),
            _ => {}
        }
    }
    // history messages carry only role and content; no stamps anywhere in host-built fields
    let lists: &[&str] = match c.kind {
        Kind::Chat | Kind::Anthropic => &["messages"],
        Kind::Responses => &["input"],
        Kind::Runs => &["conversation_history"],
        Kind::Agent => &[],
    };
    for k in lists {
        for m in body[*k].as_array().expect("a message list") {
            let o = m.as_object().expect("a message object");
            assert!(o.keys().all(|k| k == "role" || k == "content"), "message with extra keys: {m}");
            assert!(matches!(o["role"].as_str(), Some("user" | "assistant" | "system")), "role in {m}");
        }
    }
    if c.kind == Kind::Anthropic {
        assert_eq!(body["messages"][0]["role"], "user", "anthropic messages start with a user message");
    }
    for k in host_fields(c.kind) {
        if let Some(v) = body.get(*k) {
            for stamp in ["imagesSeen", "attachId", "videoSrc", "summarized"] {
                assert!(!has_key(v, stamp), "{stamp} reached the body's {k}");
            }
        }
    }
    // bodyFields are copied, host-built fields win (`system` and `instructions` are built only
    // for a non-blank system prompt, so a copied one may stand)
    for (k, v) in &c.body_fields {
        let built_always = match c.kind {
            Kind::Chat | Kind::Anthropic => k == "messages",
            Kind::Responses => k == "input",
            Kind::Runs => k == "input" || k == "conversation_history",
            Kind::Agent => k == "text" || k == "images",
        };
        if built_always {
            assert!(body.get(k).is_some_and(|got| got != v), "bodyFields overrode {k}");
        } else if !host_fields(c.kind).contains(&k.as_str()) {
            assert_eq!(body.get(k), Some(v), "bodyFields {k} not copied");
        }
    }
}

fn is_table_line(l: &str) -> bool {
    l.trim_start_matches(is_js_space).starts_with('|')
}

fn is_fence_open(l: &str) -> bool {
    let t = l.trim_start_matches(is_js_space);
    t.starts_with("```") || t.starts_with("~~~")
}

/// Consecutive lines `out[j..j+m]`, m ≥ 2, that concatenate to `line`: the pieces of a split
/// long line. Returns m.
fn pieces_of(out: &[&str], j: usize, line: &str) -> Option<usize> {
    let mut acc = String::new();
    for (m, piece) in out[j..].iter().enumerate() {
        if piece.is_empty() {
            return None;
        }
        acc.push_str(piece);
        if acc == line {
            return (m >= 1).then_some(m + 1);
        }
        if !line.starts_with(acc.as_str()) {
            return None;
        }
    }
    None
}

pub fn check_chunks(text: &str, size: usize) {
    let chunks = markdown_chunks(text, size);
    assert_eq!(chunks, markdown_chunks(text, size), "markdownChunks is not deterministic");
    if text.is_empty() {
        assert!(chunks.is_empty());
        return;
    }
    for c in &chunks {
        assert!(!c.is_empty(), "an empty chunk");
        if u16_len(c) > size.max(1) {
            let single = c.chars().count() == 1;
            assert!(single || is_fence_open(c), "chunk of {} units over size {size}: {c:?}", u16_len(c));
        }
    }
    let out: Vec<&str> = chunks.iter().flat_map(|c| c.split('\n')).collect();
    let mut seen_table: Vec<&str> = Vec::new();
    let mut j = 0;
    for line in text.split('\n').filter(|l| !is_blank(l)) {
        loop {
            assert!(j < out.len(), "line {line:?} lost (size {size}) in {chunks:?}");
            if out[j] == line {
                j += 1;
                break;
            }
            if let Some(m) = pieces_of(&out, j, line) {
                j += m;
                break;
            }
            assert!(
                is_blank(out[j]) || seen_table.contains(&out[j]),
                "unexpected line {:?} while looking for {line:?} (size {size}) in {chunks:?}",
                out[j]
            );
            j += 1;
        }
        if is_table_line(line) {
            seen_table.push(line);
        }
    }
    for l in &out[j..] {
        assert!(is_blank(l) || seen_table.contains(l), "unexpected trailing line {l:?}");
    }
}

/// `KEEPSAKE_FUZZ_SKIP=markdown` leaves out the markdownChunks properties, so a long fuzz run
/// can look past its known findings (fuzz/README.md, "Findings"). The replay never sets it.
fn skip_markdown() -> bool {
    std::env::var("KEEPSAKE_FUZZ_SKIP").is_ok_and(|v| v.split(',').any(|s| s == "markdown"))
}

pub fn check_case(c: &Case) {
    check_budget(&c.history, c.budget);
    check_aging(&c.history, c.aging);
    check_build(c);
    if !skip_markdown() {
        check_chunks(&c.markdown, c.size);
    }
}

pub fn check(data: &[u8]) {
    let case = if data.first() == Some(&b'{') {
        match Case::from_json(data) {
            Some(c) => c,
            None => return,
        }
    } else {
        Case::from_bytes(data)
    };
    check_case(&case);
}
