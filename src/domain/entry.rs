//! Entries and their parts (storage-model §2.1–§2.3): text measures, attach detection,
//! image-part walking. Pure functions over `serde_json::Value`.

use serde_json::{Map, Value};

use super::text::u16_len;

/// All new attach text starts with this (storage-model §2.3).
pub const PAGE_CONTEXT_PREFIX: &str = "[Page context attached by Keepsake]";
/// Imported data may carry the older product's prefix; it counts everywhere a prefix does.
pub const LEGACY_PREFIX: &str = "[Page context attached by browsa]";

/// Prefix of an image reference URL (storage-model §1).
pub const IMAGE_REF_PREFIX: &str = "keepsake-image:sha256:";

/// Part-level key holding the image reference of the original image a part stands in for
/// (storage-model §12.8, §12.19): set on an image part pointed at a thumbnail and on a label text
/// part that replaced an image. Counts as a reference; never used for URL chars, budgets or
/// requests.
pub const ORIGINAL_URL: &str = "originalUrl";

/// Placeholder for the n-th `turn.images` item in a body built with `imageRefs` (PROTOCOL.md).
pub const TURN_IMAGE_PREFIX: &str = "keepsake-turn-image:";

/// An image token the caller fills in: an image reference or a turn-image placeholder.
pub fn is_image_token(url: &str) -> bool {
    parse_image_ref(url).is_some()
        || url
            .strip_prefix(TURN_IMAGE_PREFIX)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// True when `s` starts with either page-context prefix.
pub fn starts_with_prefix(s: &str) -> bool {
    s.starts_with(PAGE_CONTEXT_PREFIX) || s.starts_with(LEGACY_PREFIX)
}

fn is_text_part(p: &Value) -> bool {
    matches!(p.get("type").and_then(Value::as_str), Some("text") | Some("input_text"))
}

/// A part's string `text`, for text/input_text parts only (§11.3).
pub fn part_text(p: &Value) -> Option<&str> {
    if is_text_part(p) {
        p.get("text").and_then(Value::as_str)
    } else {
        None
    }
}

/// `type == "image_url"`.
pub fn is_image_part(p: &Value) -> bool {
    p.get("type").and_then(Value::as_str) == Some("image_url")
}

/// The URL of an image part: object form `image_url: {url}` or bare string `image_url: "<url>"`.
pub fn image_part_url(p: &Value) -> Option<&str> {
    match p.get("image_url") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Object(o)) => o.get("url").and_then(Value::as_str),
        _ => None,
    }
}

/// Mutable access to an image part's URL string, whichever form it has.
pub fn image_part_url_mut(p: &mut Value) -> Option<&mut String> {
    match p.get_mut("image_url") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Object(o)) => match o.get_mut("url") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

pub fn content(e: &Value) -> Option<&Value> {
    e.get("content")
}

pub fn role(e: &Value) -> Option<&str> {
    e.get("role").and_then(Value::as_str)
}

/// entryText (§2.1, §11.3): string content → itself; array → every text part's text joined
/// with `\n`; otherwise `''`.
pub fn entry_text(e: &Value) -> String {
    match content(e) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(part_text).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// contentChars (§2.1, §11.3), in UTF-16 units. Image data never counts.
pub fn content_chars(e: &Value) -> usize {
    match content(e) {
        Some(Value::String(s)) => u16_len(s),
        Some(Value::Array(parts)) => parts.iter().filter_map(part_text).map(u16_len).sum(),
        _ => 0,
    }
}

/// Number of image parts in an entry's array content.
pub fn image_part_count(e: &Value) -> usize {
    match content(e) {
        Some(Value::Array(parts)) => parts.iter().filter(|p| is_image_part(p)).count(),
        _ => 0,
    }
}

/// Image-bearing: array content with at least one image part.
pub fn is_image_bearing(e: &Value) -> bool {
    image_part_count(e) > 0
}

/// Attach text used for the prefix test (§2.3): string content, or the first text part's text.
pub fn attach_probe_text(e: &Value) -> Option<&str> {
    match content(e) {
        Some(Value::String(s)) => Some(s),
        Some(Value::Array(parts)) => parts.iter().find_map(part_text),
        _ => None,
    }
}

/// An attach entry: role user and attach text starting with a prefix (§2.3).
pub fn is_attach_entry(e: &Value) -> bool {
    role(e) == Some("user") && attach_probe_text(e).is_some_and(starts_with_prefix)
}

/// `removeLastPageContext`'s test (§4.2 read with §11.2): the same prefix test as attach
/// detection, i.e. a user entry whose string content or first text part starts with a prefix.
pub fn is_last_page_context_candidate(e: &Value) -> bool {
    is_attach_entry(e)
}

/// The stamp holding an entry's host-assigned id (every stored entry has one).
pub const ENTRY_ID: &str = "entryId";

/// The `entryId` stamp as a string, if present.
pub fn entry_id(e: &Value) -> Option<&str> {
    e.get(ENTRY_ID).and_then(Value::as_str)
}

/// Two entries are the same turn when they are equal apart from their `entryId` stamps (the host
/// gives every stored entry one; entries from a client or a document may not carry it).
pub fn same_entry(a: &Value, b: &Value) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(x), Some(y)) => {
            let n = |m: &Map<String, Value>| m.len() - usize::from(m.contains_key(ENTRY_ID));
            n(x) == n(y) && x.iter().filter(|(k, _)| *k != ENTRY_ID).all(|(k, v)| y.get(k) == Some(v))
        }
        _ => a == b,
    }
}

/// `same_entry` over two lists.
pub fn same_entries(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_entry(x, y))
}

/// `attachId` stamp as a string, if present.
pub fn attach_id(e: &Value) -> Option<&str> {
    e.get("attachId").and_then(Value::as_str)
}

/// Visit every image-part URL of an entry (read-only).
pub fn image_urls(e: &Value) -> Vec<&str> {
    match content(e) {
        Some(Value::Array(parts)) => {
            parts.iter().filter(|p| is_image_part(p)).filter_map(image_part_url).collect()
        }
        _ => Vec::new(),
    }
}

/// Visit every image-part URL of an entry mutably.
pub fn for_each_image_url_mut(e: &mut Value, mut f: impl FnMut(&mut String)) {
    if let Some(Value::Array(parts)) = e.get_mut("content") {
        for p in parts.iter_mut() {
            if is_image_part(p) {
                if let Some(u) = image_part_url_mut(p) {
                    f(u);
                }
            }
        }
    }
}

/// A part's `originalUrl`, when it is a string.
pub fn part_original_url(p: &Value) -> Option<&str> {
    p.get(ORIGINAL_URL).and_then(Value::as_str)
}

/// Every part's `originalUrl` string (image parts and label text parts alike).
pub fn original_urls(e: &Value) -> Vec<&str> {
    match content(e) {
        Some(Value::Array(parts)) => parts.iter().filter_map(part_original_url).collect(),
        _ => Vec::new(),
    }
}

/// Visit every part's `originalUrl` string mutably.
pub fn for_each_original_url_mut(e: &mut Value, mut f: impl FnMut(&mut String)) {
    if let Some(Value::Array(parts)) = e.get_mut("content") {
        for p in parts.iter_mut() {
            if let Some(Value::String(u)) = p.get_mut(ORIGINAL_URL) {
                f(u);
            }
        }
    }
}

/// Remove `originalUrl` from every part (request copies never carry it). True if any was there.
pub fn strip_original_urls(e: &mut Value) -> bool {
    let mut any = false;
    if let Some(Value::Array(parts)) = e.get_mut("content") {
        for p in parts.iter_mut() {
            if let Some(o) = p.as_object_mut() {
                any |= o.remove(ORIGINAL_URL).is_some();
            }
        }
    }
    any
}

/// True when some part of the entry has an `originalUrl` key.
pub fn has_original_urls(e: &Value) -> bool {
    match content(e) {
        Some(Value::Array(parts)) => parts.iter().any(|p| p.get(ORIGINAL_URL).is_some()),
        _ => false,
    }
}

/// The sha256 hex of an image reference URL, if `url` is one (64 lower-case hex digits).
pub fn parse_image_ref(url: &str) -> Option<&str> {
    let hex = url.strip_prefix(IMAGE_REF_PREFIX)?;
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Some(hex)
    } else {
        None
    }
}

pub fn image_ref_url(sha256_hex: &str) -> String {
    format!("{IMAGE_REF_PREFIX}{sha256_hex}")
}

/// Distinct blob hashes referenced by an entry: its image parts' URLs and every part's
/// `originalUrl` (§12.8: an original lives as long as the entry that keeps it).
pub fn referenced_blobs(e: &Value) -> Vec<String> {
    let kept = kept_content(e);
    let mut out: Vec<String> = image_urls(e)
        .into_iter()
        .chain(original_urls(e))
        .chain(kept.iter().flat_map(|k| image_urls(k).into_iter().chain(original_urls(k))))
        .filter_map(parse_image_ref)
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The stamp holding what a rescue stub or an auto-summary replaced: `{content}` as it was.
pub const ORIGINAL: &str = "original";

/// What an entry kept of its content before a stub or summary replaced it, as an entry-shaped
/// value (`{content}`), when it has one.
pub fn kept_content(e: &Value) -> Option<&Value> {
    e.get(ORIGINAL).filter(|o| o.get("content").is_some())
}

/// `new` (a rewrite of `old`'s content: a rescue stub, an auto-summary) keeping what `old`
/// held: the first `original` an entry gets is never overwritten, so a summary of a stubbed entry
/// still keeps the page as it was attached.
pub fn keeping_original(old: &Value, mut new: Value) -> Value {
    if old.get("content") == new.get("content") {
        return new;
    }
    let kept = match kept_content(old) {
        Some(k) => k.clone(),
        None => serde_json::json!({"content": old.get("content").cloned().unwrap_or(Value::Null)}),
    };
    if let Some(o) = new.as_object_mut() {
        o.insert(ORIGINAL.into(), kept);
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rewrite_keeps_the_first_original_with_its_images() {
        let r = "keepsake-image:sha256:".to_owned() + &"a".repeat(64);
        let page = json!({"role": "user", "content": [{"type": "text", "text": "page"}, {"type": "image_url", "image_url": {"url": r}}]});
        let stub = keeping_original(&page, json!({"role": "user", "content": "stub"}));
        assert_eq!(stub["original"]["content"], page["content"]);
        assert_eq!(referenced_blobs(&stub), vec!["a".repeat(64)], "the kept picture is still referenced");
        let summary = keeping_original(
            &stub,
            json!({"role": "user", "content": "summary", "original": stub["original"]}),
        );
        assert_eq!(summary["original"]["content"], page["content"], "the first original stays");
        assert_eq!(keeping_original(&page, page.clone()), page, "no rewrite, nothing added");
    }

    #[test]
    fn same_entry_ignores_only_the_entry_id() {
        let a = json!({"role": "user", "content": "hi", "entryId": "x"});
        assert!(same_entry(&a, &json!({"role": "user", "content": "hi"})));
        assert!(same_entry(&json!({"role": "user", "content": "hi"}), &a));
        assert!(same_entry(&a, &json!({"role": "user", "content": "hi", "entryId": "y"})));
        assert!(!same_entry(&a, &json!({"role": "user", "content": "hi", "imagesSeen": true})));
        assert!(!same_entry(&a, &json!({"role": "assistant", "content": "hi"})));
        assert!(same_entries(std::slice::from_ref(&a), &[json!({"content": "hi", "role": "user"})]));
        assert!(!same_entries(std::slice::from_ref(&a), &[]));
    }

    #[test]
    fn entry_text_and_chars_count_only_text_parts() {
        let e = json!({"role":"user","content":[
            {"type":"text","text":"ab"},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
            {"type":"input_text","text":"😀"},
            {"type":"other","text":"zzz"}
        ]});
        assert_eq!(entry_text(&e), "ab\n😀");
        assert_eq!(content_chars(&e), 4);
        assert!(is_image_bearing(&e));
        assert_eq!(content_chars(&json!(null)), 0);
        assert_eq!(content_chars(&json!({"content": 5})), 0);
    }

    #[test]
    fn attach_detection_uses_first_text_part_and_either_prefix() {
        let a = json!({"role":"user","content":[{"type":"image_url","image_url":"x"},{"type":"text","text":"[Page context attached by browsa]\nURL: u"}]});
        assert!(is_attach_entry(&a));
        // removeLastPageContext uses the same test (§11.2)
        assert!(is_last_page_context_candidate(&a));
        let b = json!({"role":"assistant","content":"[Page context attached by Keepsake]"});
        assert!(!is_attach_entry(&b));
    }

    #[test]
    fn originals_count_as_references() {
        let (a, b, c) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
        let mut e = json!({"role":"user","content":[
            {"type":"image_url","image_url":{"url":image_ref_url(&a)},"originalUrl":image_ref_url(&b)},
            {"type":"text","text":"[image 2]","originalUrl":image_ref_url(&c)},
            {"type":"text","text":"[image 3]","originalUrl":"https://x/y.png"}
        ]});
        assert_eq!(referenced_blobs(&e), vec![a.clone(), b, c]);
        assert!(has_original_urls(&e));
        assert!(strip_original_urls(&mut e));
        assert!(!has_original_urls(&e));
        assert_eq!(referenced_blobs(&e), vec![a]);
    }

    #[test]
    fn image_refs_parse_strictly() {
        let h = "a".repeat(64);
        assert_eq!(parse_image_ref(&image_ref_url(&h)), Some(h.as_str()));
        assert_eq!(parse_image_ref(&format!("{IMAGE_REF_PREFIX}{}", "A".repeat(64))), None);
        assert_eq!(parse_image_ref(&format!("{IMAGE_REF_PREFIX}abc")), None);
    }
}
