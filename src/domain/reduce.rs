//! Request-side reduction (storage-model §7.1–§7.3, §11.2, §11.6): aging, overflow detection and
//! rescue stubs. Deterministic: the same history gives byte-identical output.

use serde_json::Value;

use super::entry::{attach_id, entry_text, is_attach_entry, role, PAGE_CONTEXT_PREFIX};
use super::text::u16_len;

/// Aging defaults (§7.1).
pub const AGE_MIN_USER_TURNS_AFTER: usize = 3;
pub const AGE_MIN_CHARS: usize = 8_000;
/// Rescue stubs attaches with at least this many chars (§7.3).
pub const RESCUE_MIN_CHARS: usize = 8_000;

const AGED_HEAD: &str =
    "[Attached page context trimmed to keep replies fast — sent in full in an earlier turn]";
const RESCUE_NOTE: &str = "[Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]";
const SIZE_LINE_TAIL: &str = "chars. If you need exact details from this page, ask the user to re-attach it.";

/// Options of `age` (§7.1; `request.build`'s `aging` overrides them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgeOptions {
    pub min_user_turns_after: usize,
    pub min_chars: usize,
}

impl Default for AgeOptions {
    fn default() -> Self {
        AgeOptions { min_user_turns_after: AGE_MIN_USER_TURNS_AFTER, min_chars: AGE_MIN_CHARS }
    }
}

/// The measured attach text (§11.2): every text/input_text part joined with `\n`.
pub fn attach_text(e: &Value) -> String {
    entry_text(e)
}

fn line_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split('\n').find_map(|l| l.strip_prefix(key))
}

fn title_url_size_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(t) = line_value(text, "Title: ") {
        lines.push(format!("Title: {t}"));
    }
    if let Some(u) = line_value(text, "URL: ") {
        lines.push(format!("URL: {u}"));
    }
    lines.push(format!("Original size: ~{} {SIZE_LINE_TAIL}", u16_len(text)));
    lines
}

/// The stub an aged (cold) attach gets (§7.1).
pub fn aged_stub(text: &str) -> String {
    let mut lines = vec![AGED_HEAD.to_owned()];
    lines.extend(title_url_size_lines(text));
    lines.join("\n")
}

/// The stub a rescued attach gets (§7.3).
pub fn rescue_stub(text: &str) -> String {
    let mut lines = vec![PAGE_CONTEXT_PREFIX.to_owned(), RESCUE_NOTE.to_owned()];
    lines.extend(title_url_size_lines(text));
    lines.join("\n")
}

fn with_content(e: &Value, content: String) -> Value {
    let mut c = e.clone();
    c["content"] = Value::String(content);
    c
}

/// age(history, options) (§7.1): cold attach entries become the aged stub (stamps kept).
pub fn age(history: &[Value], opts: AgeOptions) -> Vec<Value> {
    let newest_attach = history.iter().rposition(is_attach_entry);
    let mut users_after = vec![0usize; history.len()];
    let mut count = 0;
    for i in (0..history.len()).rev() {
        users_after[i] = count;
        if role(&history[i]) == Some("user") {
            count += 1;
        }
    }
    history
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if !is_attach_entry(e) || Some(i) == newest_attach || users_after[i] < opts.min_user_turns_after {
                return e.clone();
            }
            let text = attach_text(e);
            if u16_len(&text) < opts.min_chars {
                return e.clone();
            }
            with_content(e, aged_stub(&text))
        })
        .collect()
}

/// Why a rescue was not applied (§7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RescueSkip {
    Kind,
    NotOverflow,
    NothingToStub,
}

impl RescueSkip {
    pub fn as_str(self) -> &'static str {
        match self {
            RescueSkip::Kind => "kind",
            RescueSkip::NotOverflow => "not_overflow",
            RescueSkip::NothingToStub => "nothing_to_stub",
        }
    }
}

/// One stubbed entry: its index in the history and its `attachId`, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stubbed {
    pub index: usize,
    pub attach_id: Option<String>,
}

/// Stub every attach entry with attach text ≥ 8,000 chars in an (already aged) history (§7.3).
pub fn rescue(history: &[Value]) -> (Vec<Value>, Vec<Stubbed>) {
    let mut changed = Vec::new();
    let out = history
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if !is_attach_entry(e) {
                return e.clone();
            }
            let text = attach_text(e);
            if u16_len(&text) < RESCUE_MIN_CHARS {
                return e.clone();
            }
            changed.push(Stubbed { index: i, attach_id: attach_id(e).map(str::to_owned) });
            with_content(e, rescue_stub(&text))
        })
        .collect();
    (out, changed)
}

/// Build a regex pattern where `.` means any char except a line break (JavaScript's `.`).
fn js_dot(p: &str) -> String {
    p.replace('.', "[^\\n\\r\\u{2028}\\u{2029}]")
}

fn overflow_regex() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        let alts = [
            "context[_ ]?(length|window|limit)",
            "context_length_exceeded",
            "maximum context",
            "context length",
            "prompt is too long",
            "grown too long",
            "too many (input )?tokens",
            "request too large",
            &js_dot("length.{0,12}exceed"),
            &js_dot("输入.{0,8}过长"),
            &js_dot("长度.{0,8}(超|限制)"),
            &js_dot("上下文.{0,12}(超|限|过长|太长)"),
        ];
        regex::Regex::new(&format!("(?i)(?:{})", alts.join("|"))).expect("overflow pattern")
    })
}

fn rate_limit_regex() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(&format!("(?i){}", js_dot("rate.?limit|per min|TPM|RPM|please wait|throttl")))
            .expect("rate-limit pattern")
    })
}

/// request.isContextOverflow (§7.2, §11.6).
pub fn is_context_overflow(message: Option<&str>) -> bool {
    match message {
        None | Some("") => false,
        Some(m) => overflow_regex().is_match(m) && !rate_limit_regex().is_match(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attach(body_len: usize, id: &str) -> Value {
        json!({"role":"user","attachId":id,"content":format!(
            "[Page context attached by Keepsake]\nURL: https://e.x/a\nTitle: T\nMode: full\n---\n\n{}", "x".repeat(body_len))})
    }

    #[test]
    fn aging_stubs_cold_attaches_only() {
        let h = vec![
            attach(9000, "a"),
            json!({"role":"user","content":"1"}),
            json!({"role":"assistant","content":"r"}),
            json!({"role":"user","content":"2"}),
            attach(9000, "b"),
            json!({"role":"user","content":"3"}),
        ];
        let aged = age(&h, AgeOptions::default());
        let stub = aged[0]["content"].as_str().unwrap();
        let n = u16_len(h[0]["content"].as_str().unwrap());
        assert_eq!(stub, format!("[Attached page context trimmed to keep replies fast — sent in full in an earlier turn]\nTitle: T\nURL: https://e.x/a\nOriginal size: ~{n} chars. If you need exact details from this page, ask the user to re-attach it."));
        assert_eq!(aged[0]["attachId"], "a");
        assert_eq!(aged[4], h[4], "the newest attach is never aged");
        assert_eq!(age(&h[1..], AgeOptions::default()), h[1..].to_vec());
    }

    #[test]
    fn rescue_stubs_big_attaches_and_reports_them() {
        let h = vec![attach(9000, "a"), json!({"role":"user","content":"q"}), attach(10, "b")];
        let (out, changed) = rescue(&h);
        assert!(out[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("[Page context attached by Keepsake]\n[Keepsake: this attachment was too large"));
        assert_eq!(out[2], h[2]);
        assert_eq!(changed, vec![Stubbed { index: 0, attach_id: Some("a".into()) }]);
        // a stub is an attach entry but small, so a second rescue changes nothing
        assert!(rescue(&out).1.is_empty());
    }

    #[test]
    fn overflow_detection_excludes_rate_limits() {
        for m in [
            "This model's maximum context length is 8192 tokens",
            "context_length_exceeded",
            "prompt is too long: 300000 tokens",
            "Input length exceeds the limit",
            "输入内容过长",
            "上下文长度超过限制",
            "Request too large for model",
        ] {
            assert!(is_context_overflow(Some(m)), "{m}");
        }
        for m in [
            "Request too large for gpt-4o on tokens per min (TPM): Limit 30000",
            "Too many tokens, please wait",
            "502 Bad Gateway",
            "model not found",
            "connection reset by peer",
            "",
        ] {
            assert!(!is_context_overflow(Some(m)), "{m}");
        }
        assert!(!is_context_overflow(None));
    }
}
