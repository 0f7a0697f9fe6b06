//! Figures sections, labels, anchors (storage-model §2.5, §11.21) and interleaving (§6.6).

use serde_json::{json, Value};

use super::entry::is_image_part;
use super::text::{is_js_space, js_trim};

/// parseFigureLabels (§2.5): from the first `## Figures` to the end of the text, every line that
/// is ASCII digits, `.`, whitespace and at least one more character contributes its trimmed
/// remainder; a blank remainder is ignored.
pub fn parse_figure_labels(text: &str) -> Vec<String> {
    let Some(start) = text.find("## Figures") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text[start..].split('\n') {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        let Some(rest) = line[digits..].strip_prefix('.') else {
            continue;
        };
        let mut chars = rest.chars();
        match chars.next() {
            Some(c) if is_js_space(c) => {}
            _ => continue,
        }
        // `\s+` then `.+`: at least one more character after the first whitespace
        if chars.as_str().is_empty() {
            continue;
        }
        let label = js_trim(rest);
        if !label.is_empty() {
            out.push(label.to_owned());
        }
    }
    out
}

/// Anchors `[图N]` / `[Figure N]` in a line, in order of appearance (N = `[1-9][0-9]*`).
pub fn anchors_in(line: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = line[i..].find('[') {
        let at = i + off;
        let rest = &line[at + 1..];
        let body = rest.strip_prefix('图').or_else(|| rest.strip_prefix("Figure "));
        if let Some(body) = body {
            let digits = body.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && !body.starts_with('0') && body[digits..].starts_with(']') {
                if let Ok(n) = body[..digits].parse::<usize>() {
                    out.push(n);
                }
            }
        }
        i = at + 1;
    }
    out
}

/// Normalise an image given as a URL string, a `{url}` object or an image part.
fn as_image_part(img: &Value) -> Option<Value> {
    match img {
        Value::String(u) => Some(json!({"type": "image_url", "image_url": {"url": u}})),
        Value::Object(o) if is_image_part(img) => Some(Value::Object(o.clone())),
        Value::Object(o) => o
            .get("url")
            .and_then(Value::as_str)
            .map(|u| json!({"type": "image_url", "image_url": {"url": u}})),
        _ => None,
    }
}

fn text_part(t: String) -> Value {
    json!({"type": "text", "text": t})
}

/// interleave(text, images) (§6.6).
pub fn interleave(text: &str, images: &[Value]) -> Value {
    let parts: Vec<Value> = images.iter().filter_map(as_image_part).collect();
    if parts.is_empty() {
        return Value::String(text.to_owned());
    }
    let n = parts.len();
    let mut placed = vec![false; n];
    let mut out = Vec::new();
    let mut segment: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        segment.push(line);
        let mut here = Vec::new();
        for a in anchors_in(line) {
            if (1..=n).contains(&a) && !placed[a - 1] && !here.contains(&a) {
                here.push(a);
            }
        }
        if !here.is_empty() {
            out.push(text_part(segment.join("\n")));
            segment.clear();
            for a in here {
                placed[a - 1] = true;
                out.push(parts[a - 1].clone());
            }
        }
    }
    let rest = segment.join("\n");
    if !js_trim(&rest).is_empty() || out.is_empty() {
        out.push(text_part(rest));
    }
    for (i, p) in parts.into_iter().enumerate() {
        if !placed[i] {
            out.push(p);
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_to_the_end_of_text() {
        let t = "intro\n## Figures\nThese are figures.\n1. Chart A\n2.   \n3.\tTable B \n## Next\n4. Still counted\n5.x";
        assert_eq!(parse_figure_labels(t), vec!["Chart A", "Table B", "Still counted"]);
        assert!(parse_figure_labels("1. no heading").is_empty());
        assert!(parse_figure_labels("").is_empty());
    }

    #[test]
    fn anchors_follow_the_rules() {
        assert_eq!(anchors_in("see [图2] and [Figure 1] [Figure 0] [Figure  3] [图10]"), vec![2, 1, 10]);
        assert!(anchors_in("[figure 1] [Figure 01]").is_empty());
    }

    #[test]
    fn interleave_places_images_after_anchor_lines() {
        let v = interleave(
            "a\nsee [Figure 2]\nb [图1] [图1]\nc",
            &[json!("u1"), json!({"url": "u2"}), json!("u3")],
        );
        let parts = v.as_array().unwrap();
        assert_eq!(parts[0]["text"], "a\nsee [Figure 2]");
        assert_eq!(parts[1]["image_url"]["url"], "u2");
        assert_eq!(parts[2]["text"], "b [图1] [图1]");
        assert_eq!(parts[3]["image_url"]["url"], "u1");
        assert_eq!(parts[4]["text"], "c");
        assert_eq!(parts[5]["image_url"]["url"], "u3");
        assert_eq!(parts.len(), 6);
    }

    #[test]
    fn interleave_without_images_keeps_the_string_and_without_anchors_appends() {
        assert_eq!(interleave("x", &[]), json!("x"));
        let v = interleave("x [Figure 9]", &[json!("u")]);
        assert_eq!(
            v,
            json!([{"type":"text","text":"x [Figure 9]"},{"type":"image_url","image_url":{"url":"u"}}])
        );
        let v = interleave("", &[json!("u")]);
        assert_eq!(v.as_array().unwrap().len(), 2);
    }
}
