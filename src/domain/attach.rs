//! Attaching page content (storage-model §2.4, §4.3, §7.4): the attach text layout, its header
//! and body parts, the auto-summary decision and the rebuilt text after a summary.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::entry::{is_image_part, PAGE_CONTEXT_PREFIX};
use super::figures::interleave;
use super::reduce::attach_text;
use super::text::{grouped, js_trim, u16_len};

/// Chunk size of summary plans (§7.4).
pub const SUMMARY_CHUNK_CHARS: usize = 12_000;

/// The page context given to `history.attach` (§2.4): `url`, `title`, `mode`, `body` are strings;
/// `header`, `format`, `changedSince` strings or absent (`null` counts as absent); `fallback` a
/// boolean (absent or `null`: false). Any other key is refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ctx {
    pub url: String,
    pub title: String,
    pub header: Option<String>,
    pub mode: String,
    pub format: Option<String>,
    #[serde(default, deserialize_with = "null_is_false")]
    #[schemars(with = "bool")]
    pub fallback: bool,
    pub changed_since: Option<String>,
    pub body: String,
}

fn null_is_false<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(false))
}

impl Ctx {
    /// The recorded metadata: ctx minus its body (§4.3 step 3).
    pub fn meta_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("url".into(), json!(self.url));
        m.insert("title".into(), json!(self.title));
        if let Some(h) = &self.header {
            m.insert("header".into(), json!(h));
        }
        m.insert("mode".into(), json!(self.mode));
        if let Some(f) = &self.format {
            m.insert("format".into(), json!(f));
        }
        if self.fallback {
            m.insert("fallback".into(), json!(true));
        }
        if let Some(c) = &self.changed_since {
            m.insert("changedSince".into(), json!(c));
        }
        Value::Object(m)
    }

    /// Rebuild from recorded metadata with another body.
    pub fn from_meta(meta: &Value, body: String) -> Option<Ctx> {
        let mut v = meta.clone();
        v.as_object_mut()?.insert("body".into(), json!(body));
        serde_json::from_value(v).ok()
    }

    /// The header part: everything before the body (§2.4 items 1–4 plus `\n---\n\n`).
    pub fn header_part(&self) -> String {
        let mut s = format!("{PAGE_CONTEXT_PREFIX}\nURL: {}\nTitle: {}\n", self.url, self.title);
        if let Some(h) = &self.header {
            s.push_str(h);
        }
        s.push_str("Mode: ");
        s.push_str(&self.mode);
        if let Some(f) = self.format.as_deref().filter(|f| !f.is_empty()) {
            s.push_str(" | ");
            s.push_str(f);
        }
        if self.fallback {
            s.push_str(" (fallback to full)");
        }
        if let Some(c) = &self.changed_since {
            s.push_str(&format!(
                "\nNote: this page's content has changed since it was last attached (previously attached {c})."
            ));
        }
        s.push_str("\n---\n\n");
        s
    }

    /// The full attach text (§2.4).
    pub fn text(&self) -> String {
        format!("{}{}", self.header_part(), self.body)
    }
}

/// Split an attach text into (header part, body part) (§2.4): the header runs through the first
/// `---` line after the first line starting with `Mode: `, plus the blank line after it.
/// `None` when the text has no such structure.
pub fn split_header(text: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    let mut seen_mode = false;
    for line in text.split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        offset += line.len();
        if !seen_mode {
            seen_mode = bare.starts_with("Mode: ");
            continue;
        }
        if bare == "---" {
            let rest = &text[offset..];
            let mut end = offset;
            if let Some(next) = rest.split_inclusive('\n').next() {
                if next.strip_suffix('\n').unwrap_or(next).trim().is_empty() && next.ends_with('\n') {
                    end += next.len();
                }
            }
            return Some((&text[..end], &text[end..]));
        }
    }
    None
}

/// The mode named on the attach text's `Mode: ` line (up to ` | ` or ` (`).
pub fn mode_of(text: &str) -> Option<String> {
    let line = text.split('\n').find_map(|l| l.strip_prefix("Mode: "))?;
    let end = [line.find(" | "), line.find(" (")].into_iter().flatten().min().unwrap_or(line.len());
    Some(line[..end].to_owned())
}

/// What §7.4 needs to know about an attach entry.
pub struct SummaryInputs<'a> {
    pub entry: &'a Value,
    pub meta: Option<&'a Value>,
    pub paper: bool,
    pub summary_source: Option<&'a str>,
    pub auto_summarize: bool,
    pub threshold: u64,
}

/// The §7.4 decision and the source to condense.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryDecision {
    pub needed: bool,
    pub family: &'static str,
    pub source: Option<String>,
}

pub fn summary_decision(i: &SummaryInputs) -> SummaryDecision {
    let text = attach_text(i.entry);
    let source = match i.summary_source {
        Some(s) => Some(s.to_owned()),
        None => split_header(&text).map(|(_, body)| body.to_owned()),
    };
    let mode = i
        .meta
        .and_then(|m| m.get("mode"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| mode_of(&text))
        .unwrap_or_default();
    let has_video = i.entry.get("videoSrc").is_some_and(|v| !v.is_null());
    let family = if mode == "youtube" || mode == "bilibili" || has_video {
        "video"
    } else if i.paper {
        "paper"
    } else {
        "generic"
    };
    let summarized = i.entry.get("summarized") == Some(&Value::Bool(true));
    let needed = i.auto_summarize
        && source.as_deref().is_some_and(|s| !s.is_empty() && u16_len(s) as u64 > i.threshold)
        && mode != "screenshot"
        && !summarized;
    SummaryDecision { needed, family, source }
}

/// The body written by `attach.applySummary` (§7.4).
pub fn summary_body(original_length: usize, summary: &str) -> String {
    format!(
        "[Keepsake: auto-condensed from {} chars — some detail may be lost]\n\n{summary}",
        grouped(original_length as u64)
    )
}

/// The entry after a summary: same header, the summary body, image parts re-interleaved,
/// `summarized: true`, other stamps kept. `None` when no header can be found.
pub fn apply_summary(
    entry: &Value,
    meta: Option<&Value>,
    original_length: usize,
    summary: &str,
) -> Option<Value> {
    let text = attach_text(entry);
    let body = summary_body(original_length, summary);
    let rebuilt = match meta.and_then(|m| Ctx::from_meta(m, body.clone())) {
        Some(ctx) => ctx.text(),
        None => {
            let (header, _) = split_header(&text)?;
            format!("{header}{body}")
        }
    };
    let images: Vec<Value> = match entry.get("content") {
        Some(Value::Array(parts)) => parts.iter().filter(|p| is_image_part(p)).cloned().collect(),
        _ => Vec::new(),
    };
    let mut out = entry.clone();
    out["content"] = if images.is_empty() { Value::String(rebuilt) } else { interleave(&rebuilt, &images) };
    out["summarized"] = json!(true);
    Some(out)
}

/// Content of a new attach entry (§4.3 step 2).
pub fn attach_content(text: &str, images: &[Value], placement_end: bool) -> Value {
    if images.is_empty() {
        return Value::String(text.to_owned());
    }
    if placement_end {
        let mut parts = vec![json!({"type": "text", "text": text})];
        parts.extend(images.iter().filter_map(|i| {
            match i {
                Value::String(u) => Some(json!({"type": "image_url", "image_url": {"url": u}})),
                Value::Object(o) if is_image_part(i) => Some(Value::Object(o.clone())),
                Value::Object(o) => o
                    .get("url")
                    .and_then(Value::as_str)
                    .map(|u| json!({"type": "image_url", "image_url": {"url": u}})),
                _ => None,
            }
        }));
        Value::Array(parts)
    } else {
        interleave(text, images)
    }
}

/// A blank summary is refused (§7.4).
pub fn summary_is_blank(s: &str) -> bool {
    js_trim(s).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            url: "https://e.x/a".into(),
            title: "T".into(),
            header: Some("Site: e.x\n".into()),
            mode: "full".into(),
            format: Some("markdown".into()),
            fallback: true,
            changed_since: Some("2 days ago".into()),
            body: "Body".into(),
        }
    }

    #[test]
    fn layout_is_exact() {
        assert_eq!(
            ctx().text(),
            "[Page context attached by Keepsake]\nURL: https://e.x/a\nTitle: T\nSite: e.x\nMode: full | markdown (fallback to full)\nNote: this page's content has changed since it was last attached (previously attached 2 days ago).\n---\n\nBody"
        );
        let plain = Ctx { header: None, format: None, fallback: false, changed_since: None, ..ctx() };
        assert_eq!(
            plain.text(),
            "[Page context attached by Keepsake]\nURL: https://e.x/a\nTitle: T\nMode: full\n---\n\nBody"
        );
    }

    #[test]
    fn header_split_and_mode() {
        let t = ctx().text();
        let (h, b) = split_header(&t).unwrap();
        assert_eq!(b, "Body");
        assert!(h.ends_with("---\n\n"));
        assert_eq!(mode_of(&t).unwrap(), "full");
        assert!(split_header("no structure\n---\n").is_none());
    }

    #[test]
    fn summary_rebuild_keeps_header_and_images() {
        let e = json!({"role":"user","attachId":"a","content":[
            {"type":"text","text": ctx().text()},
            {"type":"image_url","image_url":{"url":"u1"}}]});
        let out = apply_summary(&e, Some(&ctx().meta_json()), 123_456, "Short").unwrap();
        let parts = out["content"].as_array().unwrap();
        assert!(parts[0]["text"].as_str().unwrap().ends_with(
            "---\n\n[Keepsake: auto-condensed from 123,456 chars — some detail may be lost]\n\nShort"
        ));
        assert_eq!(parts[1]["image_url"]["url"], "u1");
        assert_eq!(out["summarized"], true);
        assert_eq!(out["attachId"], "a");
    }

    #[test]
    fn decision_rules() {
        let big = Ctx { body: "x".repeat(100_001), ..ctx() };
        let e = json!({"role":"user","content": big.text()});
        let mut i = SummaryInputs {
            entry: &e,
            meta: None,
            paper: false,
            summary_source: None,
            auto_summarize: true,
            threshold: 100_000,
        };
        let d = summary_decision(&i);
        assert!(d.needed);
        assert_eq!(d.family, "generic");
        assert_eq!(d.source.unwrap().len(), 100_001);
        i.auto_summarize = false;
        assert!(!summary_decision(&i).needed);
        i.auto_summarize = true;
        i.paper = true;
        assert_eq!(summary_decision(&i).family, "paper");
        let shot = Ctx { mode: "screenshot".into(), ..big.clone() };
        let e2 = json!({"role":"user","content": shot.text()});
        i.entry = &e2;
        assert!(!summary_decision(&i).needed);
    }
}
