//! Image lifecycle rules (storage-model §6): labels, `prepare`, per-turn caps and the byte-budget
//! plan. Pure: URL sizes are passed in by the caller.

use serde_json::{json, Value};

use super::entry::{
    has_original_urls, image_part_url, image_part_url_mut, is_image_bearing, is_image_part, is_image_token,
    part_original_url, part_text, strip_original_urls, ORIGINAL_URL,
};
use super::figures::parse_figure_labels;
use super::text::{js_trim, u16_len};

/// At most this many images per turn (§6.4).
pub const TURN_MAX_IMAGES: usize = 8;
/// At most this many URL chars of images per turn (§6.4).
pub const TURN_IMAGE_BUDGET: usize = 3 * 1024 * 1024;
/// Byte budget of the live history's images, in URL chars (§6.5).
pub const UNSEEN_IMAGE_BYTES_BUDGET: usize = 8 * 1024 * 1024;
/// Thumbnails are at most this many pixels on the long edge (§6.5).
pub const THUMB_MAX_EDGE: u32 = 480;
/// An image within 480 px and at most this many bytes is returned unchanged (§6.5).
pub const THUMB_PASS_BYTES: usize = 65_536;
/// JPEG quality of thumbnails (§6.5).
pub const THUMB_QUALITY: u8 = 82;

/// JavaScript truthiness of a JSON value.
pub fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// compactEntry (§6.2): image parts become `[label]` text parts; idempotent. This is the request
/// copy: no part keeps an `originalUrl` (§12.19).
pub fn compact_entry(e: &Value) -> Value {
    let mut out = labels(e, false);
    strip_original_urls(&mut out);
    out
}

/// compactEntry for storage (§12.8): each label part keeps `originalUrl`, the original of the
/// image it replaced (the part's own `originalUrl` if it had one, else its URL); parts that
/// already carry `originalUrl` keep their first one.
pub fn compact_entry_keeping_originals(e: &Value) -> Value {
    labels(e, true)
}

fn labels(e: &Value, keep_originals: bool) -> Value {
    let Some(Value::Array(parts)) = e.get("content") else {
        return e.clone();
    };
    if !e.is_object() || !parts.iter().any(is_image_part) {
        return e.clone();
    }
    let text: Vec<&str> = parts.iter().filter_map(part_text).collect();
    let labels = parse_figure_labels(&text.join("\n"));
    let mut n = 0;
    let new_parts: Vec<Value> = parts
        .iter()
        .map(|p| {
            if is_image_part(p) {
                n += 1;
                let label = labels.get(n - 1).cloned().unwrap_or_else(|| format!("image {n}"));
                let mut l = json!({"type": "text", "text": format!("[{label}]")});
                let original = part_original_url(p).or_else(|| image_part_url(p)).filter(|u| !u.is_empty());
                if let (true, Some(o)) = (keep_originals, original) {
                    l[ORIGINAL_URL] = Value::String(o.to_owned());
                }
                l
            } else {
                p.clone()
            }
        })
        .collect();
    let mut out = e.clone();
    out["content"] = Value::Array(new_parts);
    out
}

/// Point an image part at `url` (a thumbnail), recording the URL it had as `originalUrl` unless
/// the part already has one (§12.8: the first original is kept). Returns false, changing
/// nothing, when the part has no URL or already points at `url`.
pub fn point_at(part: &mut Value, url: &str) -> bool {
    let Some(u) = image_part_url_mut(part) else { return false };
    if u == url {
        return false;
    }
    let was = std::mem::replace(u, url.to_owned());
    if part.get(ORIGINAL_URL).is_none() {
        part[ORIGINAL_URL] = Value::String(was);
    }
    true
}

/// prepare (§6.3): seen image-bearing entries become labels; the `imagesSeen` key and parts'
/// `originalUrl` (§12.19) never leave.
pub fn prepare(history: &[Value]) -> Vec<Value> {
    history
        .iter()
        .map(|e| {
            let seen = e.get("imagesSeen").is_some_and(js_truthy);
            let has_key = e.get("imagesSeen").is_some();
            if !seen && !has_key && !has_original_urls(e) {
                return e.clone();
            }
            let mut c = if seen && is_image_bearing(e) { compact_entry(e) } else { e.clone() };
            strip_original_urls(&mut c);
            if let Some(o) = c.as_object_mut() {
                o.remove("imagesSeen");
            }
            c
        })
        .collect()
}

/// The shape gate of §6.4.
pub fn image_shape_ok(url: &str) -> bool {
    let t = js_trim(url);
    let lower_prefix =
        |p: &str| t.len() >= p.len() && t.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes());
    lower_prefix("http://") || lower_prefix("https://") || lower_prefix("data:image/") || is_image_token(t)
}

/// Why the attach-time gate refused an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    Shape,
    Count,
    Size,
    Budget,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Shape => "shape",
            DropReason::Count => "count",
            DropReason::Size => "size",
            DropReason::Budget => "budget",
        }
    }
}

/// The outcome of pickTurnImages.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    pub images: Vec<String>,
    pub dropped: usize,
    /// One entry per input item: `None` kept, `Some(reason)` dropped.
    pub reasons: Vec<Option<DropReason>>,
}

/// pickTurnImages (§6.4), first fit in order. `url_chars` gives an image's URL chars (a
/// reference's canonical length; a string's own length otherwise).
pub fn pick_turn_images(list: Option<&[Value]>, url_chars: &dyn Fn(&str) -> usize) -> Picked {
    let mut out = Picked { images: Vec::new(), dropped: 0, reasons: Vec::new() };
    let Some(list) = list else { return out };
    let mut total = 0usize;
    for v in list {
        let reason = match v.as_str() {
            None => Some(DropReason::Shape),
            Some(u) if !image_shape_ok(u) => Some(DropReason::Shape),
            Some(_) if out.images.len() >= TURN_MAX_IMAGES => Some(DropReason::Count),
            Some(u) => {
                let c = url_chars(u);
                if c > TURN_IMAGE_BUDGET {
                    Some(DropReason::Size)
                } else if total + c > TURN_IMAGE_BUDGET {
                    Some(DropReason::Budget)
                } else {
                    total += c;
                    out.images.push(u.to_owned());
                    None
                }
            }
        };
        if reason.is_some() {
            out.dropped += 1;
        }
        out.reasons.push(reason);
    }
    out
}

/// The note appended to the user text when images were dropped (§6.4).
pub fn dropped_note(n: usize) -> String {
    format!("\n\n（注：另有 {n} 张图片因超出单条消息大小上限未能随附。）")
}

/// URL chars of a plain string URL (UTF-16 length).
pub fn string_url_chars(u: &str) -> usize {
    u16_len(u)
}

/// The byte-budget plan (§6.5 steps 1–2): given the URL chars of each image-bearing entry in
/// order, the indexes (into that list) of the entries to thumbnail, oldest first, never the
/// newest. Empty when the total fits or fewer than 2 entries bear images.
pub fn bound_victims(sizes: &[usize], budget: usize) -> Vec<usize> {
    let total: usize = sizes.iter().sum();
    if total <= budget || sizes.len() < 2 {
        return Vec::new();
    }
    let mut remaining = total;
    let mut out = Vec::new();
    for (i, s) in sizes[..sizes.len() - 1].iter().enumerate() {
        if remaining <= budget {
            break;
        }
        remaining -= s;
        out.push(i);
    }
    out
}

/// URL of every image part of an entry, in order (`None` for a part without a URL).
pub fn image_part_urls(e: &Value) -> Vec<Option<String>> {
    match e.get("content") {
        Some(Value::Array(parts)) => {
            parts.iter().filter(|p| is_image_part(p)).map(|p| image_part_url(p).map(str::to_owned)).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_uses_figure_labels_then_numbers_and_is_idempotent() {
        let e = json!({"role":"user","imagesSeen":true,"content":[
            {"type":"text","text":"## Figures\nx\n1. Revenue"},
            {"type":"image_url","image_url":{"url":"a"}},
            {"type":"image_url","image_url":"b"}]});
        let c = compact_entry(&e);
        assert_eq!(c["content"][1]["text"], "[Revenue]");
        assert_eq!(c["content"][2]["text"], "[image 2]");
        assert_eq!(compact_entry(&c), c);
        assert_eq!(compact_entry(&json!("x")), json!("x"));
    }

    #[test]
    fn stored_labels_keep_originals_and_request_copies_drop_them() {
        let e = json!({"role":"user","content":[
            {"type":"text","text":"hi"},
            {"type":"image_url","image_url":{"url":"keepsake-image:sha256:t"},"originalUrl":"keepsake-image:sha256:o"},
            {"type":"image_url","image_url":"keepsake-image:sha256:p"},
            {"type":"image_url","image_url":{"url":""}}]});
        let kept = compact_entry_keeping_originals(&e);
        assert_eq!(
            kept["content"],
            json!([{"type":"text","text":"hi"},
                {"type":"text","text":"[image 1]","originalUrl":"keepsake-image:sha256:o"},
                {"type":"text","text":"[image 2]","originalUrl":"keepsake-image:sha256:p"},
                {"type":"text","text":"[image 3]"}])
        );
        // idempotent, and a second pass never overwrites a first original
        assert_eq!(compact_entry_keeping_originals(&kept), kept);
        let copy = compact_entry(&kept);
        assert!(!copy.to_string().contains("originalUrl"));
        assert_eq!(copy, compact_entry(&e));
        let prepared = prepare(&[kept.clone(), e.clone()]);
        assert!(!Value::Array(prepared.clone()).to_string().contains("originalUrl"));
        assert_eq!(
            prepared[1]["content"][1],
            json!({"type":"image_url","image_url":{"url":"keepsake-image:sha256:t"}})
        );
    }

    #[test]
    fn pointing_at_a_thumbnail_keeps_the_first_original() {
        let mut p = json!({"type":"image_url","image_url":{"url":"o"}});
        assert!(point_at(&mut p, "t"));
        assert_eq!(p, json!({"type":"image_url","image_url":{"url":"t"},"originalUrl":"o"}));
        assert!(!point_at(&mut p, "t"));
        assert!(point_at(&mut p, "u"));
        assert_eq!(p["originalUrl"], "o");
        let mut bare = json!({"type":"image_url","image_url":"o"});
        assert!(point_at(&mut bare, "t"));
        assert_eq!(bare, json!({"type":"image_url","image_url":"t","originalUrl":"o"}));
    }

    #[test]
    fn prepare_strips_the_flag_and_compacts_only_seen_images() {
        let h = vec![
            json!({"role":"user","imagesSeen":true,"content":[{"type":"image_url","image_url":{"url":"a"}}]}),
            json!({"role":"user","imagesSeen":false,"content":[{"type":"image_url","image_url":{"url":"a"}}]}),
            json!({"role":"user","content":"plain"}),
        ];
        let p = prepare(&h);
        assert_eq!(p[0], json!({"role":"user","content":[{"type":"text","text":"[image 1]"}]}));
        assert_eq!(p[1], json!({"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]}));
        assert_eq!(p[2], h[2]);
    }

    #[test]
    fn pick_is_first_fit_in_order() {
        let len = |u: &str| u.len();
        let big = format!("data:image/png;base64,{}", "A".repeat(TURN_IMAGE_BUDGET));
        let half = format!("https://x/{}", "a".repeat(TURN_IMAGE_BUDGET / 2));
        let list = vec![
            json!(1),
            json!("ftp://x"),
            json!(big),
            json!(half.clone()),
            json!(half.clone()),
            json!("https://small"),
        ];
        let p = pick_turn_images(Some(&list), &len);
        assert_eq!(p.images, vec![half.clone(), "https://small".to_string()]);
        assert_eq!(p.dropped, 4);
        assert_eq!(
            p.reasons,
            vec![
                Some(DropReason::Shape),
                Some(DropReason::Shape),
                Some(DropReason::Size),
                None,
                Some(DropReason::Budget),
                None
            ]
        );
        let many: Vec<Value> = (0..10).map(|i| json!(format!("https://x/{i}"))).collect();
        let p = pick_turn_images(Some(&many), &len);
        assert_eq!(p.images.len(), 8);
        assert_eq!(p.dropped, 2);
        assert_eq!(pick_turn_images(None, &len).dropped, 0);
    }

    #[test]
    fn budget_plan_spares_the_newest() {
        assert!(bound_victims(&[5, 5], 10).is_empty());
        assert!(bound_victims(&[100], 10).is_empty());
        assert_eq!(bound_victims(&[6, 6, 6], 10), vec![0, 1]);
        assert_eq!(bound_victims(&[6, 6, 6], 12), vec![0]);
        assert_eq!(bound_victims(&[1, 100], 10), vec![0]);
    }
}
