//! Saved-session rules (storage-model §5.1, §5.3, §11.14): names, autoName, search text and
//! snippets.

use serde_json::Value;

use super::entry::{entry_text, role, starts_with_prefix};
use super::text::{code_points, cut_u16, js_trim, lower};

/// A given name is cut to its first 80 UTF-16 units (§5.1).
pub const NAME_MAX_UNITS: usize = 80;
/// autoName keeps at most 48 code points before adding `…` (§5.1).
pub const AUTO_NAME_MAX_CODE_POINTS: usize = 48;
/// Default `maxSessions`: 0, keep every session (a cap is the user's choice; evicted sessions go
/// to the trash).
pub const DEFAULT_MAX_SESSIONS: u64 = 0;
/// Snippet context: code points before and after the first hit (§5.3).
pub const SNIPPET_BEFORE: usize = 40;
pub const SNIPPET_AFTER: usize = 80;

/// A drawer row (`sessions.list`): `{id, name, createdAt, pinned, entryCount}`; a search's rows
/// add `contentMatch`, and a content hit its `snippet` (§5.3).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrawerRow {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub pinned: bool,
    pub entry_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_match: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// The device the chat began on, when it is another device (docs/sync.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<OriginDevice>,
}

/// Another device a chat began on: its id and the name it gave itself (`None` until its files
/// were read).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OriginDevice {
    pub id: String,
    pub name: Option<String>,
}

/// Trim, then cut to 80 units (§11.14). Returns `None` when the result is blank.
pub fn normalize_name(name: &str) -> Option<String> {
    let t = js_trim(name);
    if t.is_empty() {
        return None;
    }
    Some(cut_u16(t, NAME_MAX_UNITS).to_owned())
}

/// autoName (§5.1): the first user entry with string content not starting with a prefix and
/// not blank once trimmed; over 48 code points → first 48 + `…`.
pub fn auto_name(entries: &[Value]) -> Option<String> {
    for e in entries {
        if role(e) != Some("user") {
            continue;
        }
        let Some(Value::String(s)) = e.get("content") else {
            continue;
        };
        if starts_with_prefix(s) {
            continue;
        }
        let t = js_trim(s);
        if t.is_empty() {
            continue;
        }
        if code_points(t) > AUTO_NAME_MAX_CODE_POINTS {
            let head: String = t.chars().take(AUTO_NAME_MAX_CODE_POINTS).collect();
            return Some(format!("{head}…"));
        }
        return Some(t.to_owned());
    }
    None
}

/// The name a new snapshot gets: the given name (normalised), else autoName, else the
/// extension's fallback name, else the host's local date.
pub fn choose_name(
    given: Option<&str>,
    entries: &[Value],
    fallback: Option<&str>,
    local_date: &str,
) -> String {
    if let Some(n) = given.and_then(normalize_name) {
        return n;
    }
    if let Some(n) = auto_name(entries) {
        return n;
    }
    if let Some(n) = fallback.and_then(normalize_name) {
        return n;
    }
    local_date.to_owned()
}

/// The name of a trash item holding `entries` taken from a conversation: autoName, else the first
/// non-blank text of any entry (an assistant reply), cut like autoName.
pub fn entries_item_name(entries: &[Value]) -> Option<String> {
    auto_name(entries).or_else(|| {
        entries.iter().find_map(|e| {
            let text = entry_text(e);
            let t = js_trim(&text);
            if t.is_empty() {
                return None;
            }
            // the first line is enough to recognise a reply
            let line = js_trim(t.lines().next().unwrap_or(t));
            Some(if code_points(line) > AUTO_NAME_MAX_CODE_POINTS {
                format!("{}…", line.chars().take(AUTO_NAME_MAX_CODE_POINTS).collect::<String>())
            } else {
                line.to_owned()
            })
        })
    })
}

/// Searchable text of a body: `entryText(e) + "\n"` over all entries (§5.3).
pub fn search_text(entries: &[Value]) -> String {
    let mut out = String::new();
    for e in entries {
        out.push_str(&entry_text(e));
        out.push('\n');
    }
    out
}

/// Build the snippet for the first case-insensitive hit of `query_lower` in `text` (§5.3) by
/// scanning the whole text. Returns `None` when there is no hit. (The store answers queries
/// from its index, `super::search`; this is the reference it is tested against.)
pub fn snippet(text: &str, query_lower: &str) -> Option<String> {
    if query_lower.is_empty() {
        return None;
    }
    let hit = memchr::memmem::find(lower(text).as_bytes(), query_lower.as_bytes())?;
    Some(super::search::snippet_in(text, 0, hit, query_lower.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn auto_name_skips_attaches_arrays_and_blank() {
        let es = vec![
            json!({"role":"assistant","content":"hi"}),
            json!({"role":"user","content":"[Page context attached by Keepsake]\nURL: x"}),
            json!({"role":"user","content":[{"type":"text","text":"array"}]}),
            json!({"role":"user","content":"   "}),
            json!({"role":"user","content":"  hello world  "}),
        ];
        assert_eq!(auto_name(&es).unwrap(), "hello world");
        let long = "一".repeat(60);
        let n = auto_name(&[json!({"role":"user","content": long})]).unwrap();
        assert_eq!(n, format!("{}…", "一".repeat(48)));
        assert_eq!(auto_name(&[]), None);
    }

    #[test]
    fn names_are_trimmed_then_cut() {
        assert_eq!(normalize_name("  a  ").unwrap(), "a");
        assert!(normalize_name(" \n ").is_none());
        assert_eq!(normalize_name(&"x".repeat(100)).unwrap().len(), 80);
        assert_eq!(choose_name(None, &[], Some(" fb "), "2026-01-01"), "fb");
        assert_eq!(choose_name(None, &[], None, "2026-01-01"), "2026-01-01");
    }

    #[test]
    fn snippet_cuts_around_first_hit_and_collapses_space() {
        let text = format!("{}\n\nNeedle  here{}", "a".repeat(100), "b".repeat(100));
        let s = snippet(&text, "needle").unwrap();
        assert!(s.starts_with('…'));
        assert!(s.ends_with('…'));
        assert!(s.contains(" Needle here"));
        assert_eq!(s.chars().filter(|c| *c == 'a').count(), 38);
        assert_eq!(snippet("short Hit", "hit").unwrap(), "short Hit");
        assert_eq!(snippet("abc", "zz"), None);
    }

    #[test]
    fn snippet_maps_through_length_changing_lowercase() {
        // 'İ' lower-cases to two code points; the hit after it must still map correctly.
        let s = snippet("İİİ needle", "needle").unwrap();
        assert_eq!(s, "İİİ needle");
        assert_eq!(snippet("中文测试", "文").unwrap(), "中文测试");
    }
}
