//! Session export formats (storage-model §5.6): Markdown rendering, file names, and the shape of
//! the lossless JSON document.

use serde_json::Value;

use serde_json::json;

use super::entry::{entry_text, image_part_count, image_part_url_mut, is_attach_entry, role, ORIGINAL_URL};
use super::text::cut_u16;

/// `format` of the lossless JSON export.
pub const EXPORT_FORMAT: &str = "keepsake.sessions";
pub const EXPORT_VERSION: u64 = 2;
/// The oldest export version this host still imports (version 1 had no `versions`).
pub const EXPORT_VERSION_MIN: u64 = 1;
const SLUG_MAX_UNITS: usize = 40;

/// An entry as the JSON export writes it (§12.19): the original goes back into `image_url` — an
/// image part pointed at a thumbnail shows its original again, a label part that replaced an
/// image becomes that image part again — and no part carries `originalUrl`.
pub fn export_entry(e: &Value) -> Value {
    let mut out = e.clone();
    if let Some(Value::Array(parts)) = out.get_mut("content") {
        for p in parts.iter_mut() {
            let Some(original) = p.as_object_mut().and_then(|o| o.remove(ORIGINAL_URL)) else { continue };
            let Value::String(original) = original else { continue };
            let is_image = p.get("type").and_then(Value::as_str) == Some("image_url");
            match image_part_url_mut(p) {
                Some(u) if is_image => *u = original,
                _ => *p = json!({"type": "image_url", "image_url": {"url": original}}),
            }
        }
    }
    out
}

/// File-name slug (§5.6): ASCII letters and digits and CJK ideographs U+4E00–U+9FFF kept, every
/// other run becomes `-`, `-` trimmed at both ends, cut to 40 chars, empty → `session`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || ('\u{4e00}'..='\u{9fff}').contains(&c) {
            out.push(c);
            dash = false;
        } else if !dash {
            out.push('-');
            dash = true;
        }
    }
    let trimmed = out.trim_matches('-');
    // A cut can leave a trailing dash; trim it too so names never end in "--<date>".
    let cut = cut_u16(trimmed, SLUG_MAX_UNITS).trim_end_matches('-');
    if cut.is_empty() {
        "session".into()
    } else {
        cut.into()
    }
}

/// `keepsake-<slug>-<date>.<ext>`.
pub fn filename(name: &str, date: &str, ext: &str) -> String {
    format!("keepsake-{}-{date}.{ext}", slug(name))
}

/// The first `URL: ` line of an attach text, if any.
fn attach_url(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("URL: "))
}

fn role_heading(role: &str) -> String {
    match role {
        "user" => "User".into(),
        "assistant" => "Assistant".into(),
        other => {
            let mut c = other.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => "Entry".into(),
            }
        }
    }
}

/// Markdown export of one session (§5.6): its chosen path. `exported_at` is an ISO 8601 time
/// with local offset. `versions` maps a fork (the entryId of the entry before it, `""` = the
/// start) to how many versions it has; the turn after such a fork says how many others exist.
pub fn markdown(
    name: &str,
    exported_at: &str,
    entries: &[Value],
    versions: &std::collections::HashMap<String, u32>,
) -> String {
    let mut out = format!("# {name}\n\nExported {exported_at}\n");
    for (i, e) in entries.iter().enumerate() {
        let fork = if i == 0 { Some("") } else { super::entry::entry_id(&entries[i - 1]) };
        let others = fork.and_then(|f| versions.get(f)).map_or(0, |n| n.saturating_sub(1));
        let r = role(e).unwrap_or("entry");
        let text = entry_text(e);
        let images = image_part_count(e);
        out.push('\n');
        out.push_str(&format!("## {}\n\n", role_heading(r)));
        if is_attach_entry(e) {
            out.push_str("---\n");
            match attach_url(&text) {
                Some(u) => out.push_str(&format!("Attached page: {u}\n")),
                None => out.push_str("Attached page\n"),
            }
        } else if !text.is_empty() {
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        for _ in 0..images {
            out.push_str("[image]\n");
        }
        if r == "assistant" && e.get("interrupted") == Some(&Value::Bool(true)) {
            out.push_str("_(interrupted)_\n");
        }
        if others > 0 {
            out.push_str(&format!("_({others} other version{})_\n", if others == 1 { "" } else { "s" }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn export_restores_originals() {
        let e = json!({"role":"user","imagesSeen":true,"content":[
            {"type":"text","text":"hi"},
            {"type":"image_url","image_url":{"url":"t","detail":"low"},"originalUrl":"o"},
            {"type":"image_url","image_url":"t2","originalUrl":"o2"},
            {"type":"text","text":"[image 3]","originalUrl":"o3"},
            {"type":"image_url","image_url":{"url":"plain"}}]});
        assert_eq!(
            export_entry(&e),
            json!({"role":"user","imagesSeen":true,"content":[
                {"type":"text","text":"hi"},
                {"type":"image_url","image_url":{"url":"o","detail":"low"}},
                {"type":"image_url","image_url":"o2"},
                {"type":"image_url","image_url":{"url":"o3"}},
                {"type":"image_url","image_url":{"url":"plain"}}]})
        );
        assert_eq!(export_entry(&json!({"role":"user","content":"x"})), json!({"role":"user","content":"x"}));
    }

    #[test]
    fn slug_rules() {
        assert_eq!(slug("Hello, World!"), "Hello-World");
        assert_eq!(slug("  --  "), "session");
        assert_eq!(slug("中文 notes"), "中文-notes");
        assert_eq!(slug("é"), "session");
        assert_eq!(slug(&"ab ".repeat(30)).len(), 40);
        assert_eq!(slug(&"abc ".repeat(30)).len(), 39); // a cut ending in "-" loses it
        assert_eq!(filename("x", "2026-01-02", "md"), "keepsake-x-2026-01-02.md");
    }

    #[test]
    fn markdown_renders_roles_images_attaches_and_interruptions() {
        let es = vec![
            json!({"role":"user","content":"hi"}),
            json!({"role":"user","content":"[Page context attached by Keepsake]\nURL: https://a.example/\nTitle: t\n"}),
            json!({"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}),
            json!({"role":"assistant","content":"part","interrupted":true}),
        ];
        let md = markdown("Name", "2026-01-01T00:00:00+00:00", &es, &Default::default());
        assert!(md.starts_with("# Name\n"));
        assert!(md.contains("## User\n\nhi\n"));
        assert!(md.contains("---\nAttached page: https://a.example/\n"));
        assert!(md.contains("## User\n\n[image]\n"));
        assert!(md.contains("## Assistant\n\npart\n_(interrupted)_\n"));
        assert!(!md.contains("other version"));
    }

    #[test]
    fn markdown_says_how_many_other_versions_a_turn_has() {
        let es = vec![
            json!({"role":"user","content":"q","entryId":"e1"}),
            json!({"role":"assistant","content":"third try","entryId":"e2"}),
            json!({"role":"user","content":"next","entryId":"e3"}),
        ];
        let forks = [("e1".to_owned(), 3u32), ("".to_owned(), 2u32)].into_iter().collect();
        let md = markdown("N", "t", &es, &forks);
        assert!(md.contains("## User\n\nq\n_(1 other version)_\n"), "{md}");
        assert!(md.contains("## Assistant\n\nthird try\n_(2 other versions)_\n"), "{md}");
        assert!(md.contains("## User\n\nnext\n") && !md.contains("next\n_("), "{md}");
    }
}
