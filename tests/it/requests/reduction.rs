//! Unit and property tests of the pure request-reduction logic (storage-model §2.1–§2.5, §6, §7,
//! §11): figure labels, compaction, `prepare`, aging, rescue stubs, overflow detection,
//! interleaving, markdown chunking, per-turn image caps, the byte-budget plan and the attach
//! text layout / summary rules.
//!
//! Expected values are written from the spec, not from the code. Where a property needs an
//! oracle, the oracle is an independent transcription of the spec rule.

use std::collections::{HashMap, HashSet};

use keepsake_host::domain::attach::{
    apply_summary, split_header, summary_body, summary_decision, summary_is_blank, Ctx, SummaryInputs,
    SUMMARY_CHUNK_CHARS,
};
use keepsake_host::domain::chunks::markdown_chunks;
use keepsake_host::domain::figures::{anchors_in, interleave, parse_figure_labels};
use keepsake_host::domain::images::{
    bound_victims, compact_entry, dropped_note, image_shape_ok, pick_turn_images, prepare, DropReason,
    THUMB_MAX_EDGE, THUMB_PASS_BYTES, THUMB_QUALITY, TURN_IMAGE_BUDGET, TURN_MAX_IMAGES,
    UNSEEN_IMAGE_BYTES_BUDGET,
};
use keepsake_host::domain::reduce::{
    age, aged_stub, attach_text, is_context_overflow, rescue, rescue_stub, AgeOptions, Stubbed,
    AGE_MIN_CHARS, AGE_MIN_USER_TURNS_AFTER, RESCUE_MIN_CHARS,
};
use keepsake_host::domain::text::grouped;
use proptest::prelude::*;
use regex::Regex;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Spec literals and independent helpers
// ---------------------------------------------------------------------------------------------

const PREFIX: &str = "[Page context attached by Keepsake]";
const LEGACY: &str = "[Page context attached by browsa]";
/// §7.1 first stub line, with the U+2014 em dash spelled out.
const AGED_HEAD: &str =
    "[Attached page context trimmed to keep replies fast \u{2014} sent in full in an earlier turn]";
/// §7.3 second stub line.
const RESCUE_NOTE: &str = "[Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]";

/// UTF-16 code units, computed independently of the crate.
fn u16n(s: &str) -> usize {
    s.encode_utf16().count()
}

/// JavaScript-like trim for the ASCII / common whitespace our generators produce.
fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn size_line(n: usize) -> String {
    format!(
        "Original size: ~{n} chars. If you need exact details from this page, ask the user to re-attach it."
    )
}

fn text_of_part(p: &Value) -> Option<&str> {
    match p.get("type").and_then(Value::as_str) {
        Some("text") | Some("input_text") => p.get("text").and_then(Value::as_str),
        _ => None,
    }
}

/// §11.2 measured attach text: string content, or all text/input_text parts joined with `\n`.
fn measured(e: &Value) -> String {
    match e.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(text_of_part).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// §2.3 attach detection: role user and the string content / first text part starts with a prefix.
fn is_attach(e: &Value) -> bool {
    if e.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    let probe = match e.get("content") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Array(parts)) => parts.iter().find_map(text_of_part),
        _ => None,
    };
    probe.is_some_and(|t| t.starts_with(PREFIX) || t.starts_with(LEGACY))
}

fn is_img(p: &Value) -> bool {
    p.get("type").and_then(Value::as_str) == Some("image_url")
}

fn img_url(p: &Value) -> Option<&str> {
    match p.get("image_url") {
        Some(Value::String(s)) => Some(s),
        Some(Value::Object(o)) => o.get("url").and_then(Value::as_str),
        _ => None,
    }
}

/// The §7.1 / §7.3 stub for a measured attach text, built line by line from the spec.
fn spec_stub(head: &[&str], text: &str) -> String {
    let mut lines: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    if let Some(t) = text.split('\n').find(|l| l.starts_with("Title: ")) {
        lines.push(t.to_string());
    }
    if let Some(u) = text.split('\n').find(|l| l.starts_with("URL: ")) {
        lines.push(u.to_string());
    }
    lines.push(size_line(u16n(text)));
    lines.join("\n")
}

fn with_string_content(e: &Value, s: String) -> Value {
    let mut c = e.clone();
    c["content"] = Value::String(s);
    c
}

/// An attach text in the §2.4 layout with a body of `body_len` chars of `fill`.
fn attach_text_of(url: &str, title: &str, body: &str) -> String {
    format!("{PREFIX}\nURL: {url}\nTitle: {title}\nMode: full\n---\n\n{body}")
}

fn attach_entry(id: &str, text: String) -> Value {
    json!({"role": "user", "attachId": id, "content": text})
}

fn user(t: &str) -> Value {
    json!({"role": "user", "content": t})
}

fn assistant(t: &str) -> Value {
    json!({"role": "assistant", "content": t})
}

fn img_part(u: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": u}})
}

fn text_part(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

#[test]
fn constants_match_the_spec() {
    assert_eq!(TURN_MAX_IMAGES, 8);
    assert_eq!(TURN_IMAGE_BUDGET, 3_145_728);
    assert_eq!(UNSEEN_IMAGE_BYTES_BUDGET, 8_388_608);
    assert_eq!(THUMB_MAX_EDGE, 480);
    assert_eq!(THUMB_PASS_BYTES, 65_536);
    assert_eq!(THUMB_QUALITY, 82);
    assert_eq!(AGE_MIN_USER_TURNS_AFTER, 3);
    assert_eq!(AGE_MIN_CHARS, 8_000);
    assert_eq!(RESCUE_MIN_CHARS, 8_000);
    assert_eq!(SUMMARY_CHUNK_CHARS, 12_000);
    assert_eq!(AgeOptions::default(), AgeOptions { min_user_turns_after: 3, min_chars: 8_000 });
}

// ---------------------------------------------------------------------------------------------
// §2.5 parseFigureLabels
// ---------------------------------------------------------------------------------------------

#[test]
fn labels_need_a_figures_heading() {
    assert!(parse_figure_labels("").is_empty());
    assert!(parse_figure_labels("1. Chart\n2. Table").is_empty());
    assert!(parse_figure_labels("## figures\n1. lower-case heading").is_empty());
    assert_eq!(parse_figure_labels("## Figures"), Vec::<String>::new());
}

#[test]
fn labels_run_from_the_first_heading_to_the_end_of_the_text() {
    let t = "1. before heading\n## Figures\nThe figures of this page.\n1. Revenue by year\n2. Costs\n\
             ## Appendix\n3. Still a label\n## Figures\n4. After a second heading";
    assert_eq!(
        parse_figure_labels(t),
        vec!["Revenue by year", "Costs", "Still a label", "After a second heading"]
    );
}

#[test]
fn label_lines_are_digits_dot_whitespace_and_more() {
    let t = "## Figures\nx\n\
             1. plain\n\
             22.\ttab separated\n\
             3.   padded label   \n\
             4.no space\n\
             5.\n\
             6. \n\
             7.    \n\
             8 . spaced dot\n\
             .9 wrong order\n\
             \u{ff11}. full-width digit\n\
             \u{0661}. arabic-indic digit\n\
             -1. negative\n\
             10.\u{3000}ideographic space\n\
             11. inner  spaces  kept\n\
             x1. letter first\n\
             007. leading zeros";
    assert_eq!(
        parse_figure_labels(t),
        vec![
            "plain",
            "tab separated",
            "padded label",
            "ideographic space",
            "inner  spaces  kept",
            "leading zeros"
        ]
    );
}

#[test]
fn heading_may_sit_inside_a_line() {
    // "from the first occurrence of `## Figures`": the rest of that line is just text
    assert_eq!(parse_figure_labels("intro ## Figures here\n1. A\n2. B"), vec!["A", "B"]);
}

fn label_oracle(text: &str) -> Vec<String> {
    let Some(start) = text.find("## Figures") else { return Vec::new() };
    let re = Regex::new(r"^([0-9]+)\.\s+.+$").unwrap();
    let mut out = Vec::new();
    for line in text[start..].split('\n') {
        if re.is_match(line) {
            let dot = line.find('.').unwrap();
            let rest = line[dot + 1..].trim();
            if !rest.is_empty() {
                out.push(rest.to_string());
            }
        }
    }
    out
}

fn label_line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => ("[0-9]{1,3}", "[ \t]{1,3}", "[a-zA-Z中 ]{0,12}").prop_map(|(d, w, r)| format!("{d}.{w}{r}")),
        1 => "[a-z0-9. #]{0,12}",
        1 => Just("## Figures".to_string()),
        1 => Just("## Next".to_string()),
        1 => Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn labels_match_the_spec_rule(lines in proptest::collection::vec(label_line(), 0..14)) {
        let text = lines.join("\n");
        prop_assert_eq!(parse_figure_labels(&text), label_oracle(&text));
    }

    #[test]
    fn written_figures_sections_parse_back(
        labels in proptest::collection::vec("[a-zA-Z0-9中][a-zA-Z0-9中 ]{0,15}[a-zA-Z0-9中]", 0..10),
        noise in "[a-z ]{0,20}",
    ) {
        let mut text = format!("{noise}\n## Figures\nFigures extracted from the PDF.\n");
        for (i, l) in labels.iter().enumerate() {
            text.push_str(&format!("{}. {l}\n", i + 1));
        }
        prop_assert_eq!(parse_figure_labels(&text), labels);
    }
}

// ---------------------------------------------------------------------------------------------
// §2.5 / §11.21 anchors
// ---------------------------------------------------------------------------------------------

#[test]
fn anchors_are_exact() {
    assert_eq!(anchors_in("[图1] then [Figure 2] then [图10] and [Figure 123]"), vec![1, 2, 10, 123]);
    assert!(anchors_in("[Figure 0] [图0] [Figure 01] [图007]").is_empty());
    assert!(anchors_in("[figure 1] [FIGURE 1] [Figure  1] [Figure1] [图 1] [Fig 1]").is_empty());
    assert!(anchors_in("[Figure 1 ] [Figure -1] [Figure 1a] Figure 1] [Figure 1").is_empty());
    assert!(anchors_in("[Figure \u{ff11}] [图\u{0661}]").is_empty(), "ASCII digits only");
    assert_eq!(anchors_in("[[图3]]"), vec![3]);
}

// ---------------------------------------------------------------------------------------------
// §6.2 compactEntry
// ---------------------------------------------------------------------------------------------

#[test]
fn compaction_uses_labels_then_numbers() {
    let e = json!({"role": "user", "attachId": "a", "imagesSeen": true, "content": [
        {"type": "text", "text": "## Figures\nCaptions:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_text", "text": "1. Revenue\n2.   Costs  "},
        {"type": "other", "text": "3. Not a text part"},
        {"type": "image_url", "image_url": "https://x/b.png"},
        {"type": "image_url", "image_url": {"url": "https://x/c.png"}},
    ]});
    let c = compact_entry(&e);
    assert_eq!(
        c,
        json!({"role": "user", "attachId": "a", "imagesSeen": true, "content": [
            {"type": "text", "text": "## Figures\nCaptions:"},
            {"type": "text", "text": "[Revenue]"},
            {"type": "input_text", "text": "1. Revenue\n2.   Costs  "},
            {"type": "other", "text": "3. Not a text part"},
            {"type": "text", "text": "[Costs]"},
            {"type": "text", "text": "[image 3]"},
        ]})
    );
}

#[test]
fn labels_come_from_text_parts_joined_with_newlines() {
    // "## Figures" in one part, numbered lines in the next: joined with `\n` they parse
    let e = json!({"role": "user", "content": [
        {"type": "text", "text": "intro ## Figures"},
        {"type": "text", "text": "1. Joined label"},
        {"type": "image_url", "image_url": {"url": "u"}},
    ]});
    assert_eq!(compact_entry(&e)["content"][2], text_part("[Joined label]"));
}

#[test]
fn image_only_entry_becomes_placeholders_only() {
    let e = json!({"role": "user", "content": [img_part("a"), img_part("b")]});
    assert_eq!(
        compact_entry(&e),
        json!({"role": "user", "content": [text_part("[image 1]"), text_part("[image 2]")]})
    );
    // an image part without a URL is still an image part
    let e = json!({"role": "user", "content": [{"type": "image_url"}]});
    assert_eq!(compact_entry(&e)["content"], json!([text_part("[image 1]")]));
}

#[test]
fn compaction_leaves_other_shapes_alone() {
    for e in [
        json!("a string entry"),
        json!(42),
        json!(null),
        json!([img_part("a")]),
        json!({"role": "user", "content": "## Figures\n1. x"}),
        json!({"role": "user", "content": [text_part("no images"), {"type": "other"}]}),
        json!({"role": "user", "content": {"type": "image_url"}}),
        json!({"role": "user"}),
    ] {
        assert_eq!(compact_entry(&e), e);
    }
}

fn part_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop_oneof![
            "[a-z ]{0,10}",
            Just("## Figures\nlist:".to_string()),
            ("[0-9]{1,2}", "[a-zA-Z ]{0,8}").prop_map(|(d, l)| format!("{d}. {l}")),
        ]
        .prop_flat_map(|t| prop_oneof![
            Just(json!({"type": "text", "text": t.clone()})),
            Just(json!({"type": "input_text", "text": t})),
        ]),
        2 => "[a-z]{1,5}".prop_map(|u| img_part(&u)),
        1 => "[a-z]{1,5}".prop_map(|u| json!({"type": "image_url", "image_url": u})),
        1 => Just(json!({"type": "other", "x": 1})),
        1 => Just(json!({"type": "image", "source": "s"})),
    ]
}

fn entry_strategy() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec(part_strategy(), 0..7),
        prop_oneof![
            Just(None),
            Just(Some(json!(true))),
            Just(Some(json!(false))),
            Just(Some(json!(1))),
            Just(Some(json!(0))),
            Just(Some(json!(""))),
            Just(Some(json!("yes"))),
            Just(Some(json!(null)))
        ],
        any::<bool>(),
    )
        .prop_map(|(parts, seen, as_string)| {
            let mut e = if as_string {
                json!({"role": "user", "content": "plain [图1]"})
            } else {
                json!({"role": "user", "attachId": "id", "content": parts})
            };
            if let Some(s) = seen {
                e["imagesSeen"] = s;
            }
            e
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn compaction_matches_the_rule_and_is_idempotent(e in entry_strategy()) {
        let c = compact_entry(&e);
        prop_assert_eq!(&compact_entry(&c), &c, "idempotent");
        let parts = match e.get("content") { Some(Value::Array(p)) => p.clone(), _ => Vec::new() };
        if !parts.iter().any(is_img) {
            prop_assert_eq!(&c, &e);
            return Ok(());
        }
        // other fields untouched
        let mut e_rest = e.clone();
        let mut c_rest = c.clone();
        e_rest.as_object_mut().unwrap().remove("content");
        c_rest.as_object_mut().unwrap().remove("content");
        prop_assert_eq!(e_rest, c_rest);
        let joined = parts.iter().filter_map(text_of_part).collect::<Vec<_>>().join("\n");
        let labels = label_oracle(&joined);
        let out = c["content"].as_array().unwrap();
        prop_assert_eq!(out.len(), parts.len());
        let mut n = 0;
        for (p, o) in parts.iter().zip(out) {
            if is_img(p) {
                n += 1;
                let label = labels.get(n - 1).cloned().unwrap_or_else(|| format!("image {n}"));
                prop_assert_eq!(o, &text_part(&format!("[{label}]")));
            } else {
                prop_assert_eq!(o, p);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// §6.3 prepare
// ---------------------------------------------------------------------------------------------

#[test]
fn prepare_compacts_only_seen_image_bearing_entries_and_drops_the_key() {
    let img = json!([text_part("look"), img_part("data:image/png;base64,AAAA")]);
    let h = vec![
        json!({"role": "user", "imagesSeen": true, "attachId": "a", "content": img.clone()}),
        json!({"role": "user", "imagesSeen": 1, "content": img.clone()}),
        json!({"role": "user", "imagesSeen": "x", "content": img.clone()}),
        json!({"role": "user", "imagesSeen": {}, "content": img.clone()}),
        json!({"role": "user", "imagesSeen": false, "content": img.clone()}),
        json!({"role": "user", "imagesSeen": 0, "content": img.clone()}),
        json!({"role": "user", "imagesSeen": "", "content": img.clone()}),
        json!({"role": "user", "imagesSeen": null, "content": img.clone()}),
        json!({"role": "user", "imagesSeen": true, "content": "text only"}),
        json!({"role": "assistant", "content": "reply", "providerLabel": "P"}),
        json!({"role": "user", "content": img.clone()}),
    ];
    let before = h.clone();
    let p = prepare(&h);
    assert_eq!(h, before, "input never modified");
    let compacted = json!([text_part("look"), text_part("[image 1]")]);
    assert_eq!(p[0], json!({"role": "user", "attachId": "a", "content": compacted.clone()}));
    for e in &p[1..4] {
        assert_eq!(e, &json!({"role": "user", "content": compacted.clone()}));
    }
    for e in &p[4..8] {
        assert_eq!(e, &json!({"role": "user", "content": img.clone()}));
    }
    assert_eq!(p[8], json!({"role": "user", "content": "text only"}));
    assert_eq!(p[9], h[9]);
    assert_eq!(p[10], h[10]);
    assert_eq!(p.len(), h.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn prepare_follows_the_rule(h in proptest::collection::vec(entry_strategy(), 0..8)) {
        let before = h.clone();
        let p = prepare(&h);
        prop_assert_eq!(&h, &before);
        prop_assert_eq!(p.len(), h.len());
        for (e, o) in h.iter().zip(&p) {
            prop_assert!(o.get("imagesSeen").is_none());
            let truthy = match e.get("imagesSeen") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(Value::Number(n)) => n.as_f64() != Some(0.0),
                Some(Value::String(s)) => !s.is_empty(),
                Some(_) => true,
            };
            let bearing = matches!(e.get("content"), Some(Value::Array(p)) if p.iter().any(is_img));
            let mut expected = if truthy && bearing { compact_entry(e) } else { e.clone() };
            expected.as_object_mut().unwrap().remove("imagesSeen");
            prop_assert_eq!(o, &expected);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// §7.1 aging
// ---------------------------------------------------------------------------------------------

fn big_attach(id: &str, body_len: usize) -> Value {
    attach_entry(id, attach_text_of("https://e.x/a?q=1", "Title with \u{2014} dash", &"x".repeat(body_len)))
}

#[test]
fn aged_stub_is_byte_exact() {
    let text = "[Page context attached by Keepsake]\nURL: https://e.x/p\nTitle: Page \"T\" <b>\nMode: full\n---\n\nbody";
    let expected = "[Attached page context trimmed to keep replies fast \u{2014} sent in full in an earlier turn]\n\
                    Title: Page \"T\" <b>\n\
                    URL: https://e.x/p\n\
                    Original size: ~95 chars. If you need exact details from this page, ask the user to re-attach it.";
    assert_eq!(u16n(text), 95);
    assert_eq!(aged_stub(text), expected);
    assert!(aged_stub(text).contains("fast \u{2014} sent"), "U+2014 em dash");
}

#[test]
fn aged_stub_omits_missing_lines_and_does_not_group() {
    let text = format!("{PREFIX}\nMode: full\n---\n\n{}", "y".repeat(12_345));
    let n = u16n(&text);
    assert!(n > 12_345);
    assert_eq!(aged_stub(&text), format!("{AGED_HEAD}\n{}", size_line(n)));
    assert!(aged_stub(&text).contains(&format!("~{n} chars.")), "not grouped");
    // only URL
    let t = format!("{PREFIX}\nURL: u\nMode: x");
    assert_eq!(aged_stub(&t), format!("{AGED_HEAD}\nURL: u\n{}", size_line(u16n(&t))));
    // the first line starting with `Title: ` / `URL: ` wins; an empty rest still makes a line
    let t = format!("{PREFIX}\nTitle: \nURL: first\nTitle: second\nURL: second\nTitle:nospace");
    assert_eq!(aged_stub(&t), format!("{AGED_HEAD}\nTitle: \nURL: first\n{}", size_line(u16n(&t))));
    // `Title:` must start the line
    let t = format!("{PREFIX}\n Title: indented\nxURL: no");
    assert_eq!(aged_stub(&t), format!("{AGED_HEAD}\n{}", size_line(u16n(&t))));
}

#[test]
fn aged_stub_counts_utf16_units() {
    let t = format!("{PREFIX}\nTitle: 😀中");
    // prefix 35 + "\n" 1 + "Title: " 7 + 😀 2 + 中 1
    assert_eq!(u16n(&t), 46);
    assert!(aged_stub(&t).ends_with(&size_line(46)));
}

#[test]
fn cold_attach_entries_become_plain_stubs_with_stamps_kept() {
    let mut a = big_attach("a", 9_000);
    a["videoSrc"] = json!({"platform": "youtube", "url": "https://y/v", "tabId": 3});
    a["summarized"] = json!(true);
    a["imagesSeen"] = json!(true);
    let h = vec![a.clone(), user("q1"), assistant("r1"), user("q2"), big_attach("b", 9_000), user("q3")];
    let aged = age(&h, AgeOptions::default());
    let text = h[0]["content"].as_str().unwrap();
    let expected = json!({
        "role": "user",
        "attachId": "a",
        "content": format!("{AGED_HEAD}\nTitle: Title with \u{2014} dash\nURL: https://e.x/a?q=1\n{}", size_line(u16n(text))),
        "videoSrc": {"platform": "youtube", "url": "https://y/v", "tabId": 3},
        "summarized": true,
        "imagesSeen": true,
    });
    assert_eq!(aged[0], expected);
    assert_eq!(aged[1..], h[1..], "the newest attach and plain entries are untouched");
    assert!(!aged[0]["content"].as_str().unwrap().starts_with(PREFIX));
}

#[test]
fn user_turn_count_includes_attaches_and_excludes_assistants() {
    // exactly 3 user entries follow (one of them an attach) → cold
    let h = vec![big_attach("a", 9_000), user("1"), assistant("r"), big_attach("b", 10), user("2")];
    assert!(age(&h, AgeOptions::default())[0]["content"].as_str().unwrap().starts_with(AGED_HEAD));
    // only 2 user entries follow, however many assistant entries → warm
    let h = vec![
        big_attach("a", 9_000),
        user("1"),
        assistant("r"),
        assistant("r"),
        assistant("r"),
        big_attach("b", 10),
    ];
    assert_eq!(age(&h, AgeOptions::default()), h);
}

#[test]
fn the_newest_attach_is_never_aged() {
    let h = vec![big_attach("a", 9_000), user("1"), user("2"), user("3"), user("4")];
    assert_eq!(age(&h, AgeOptions::default()), h);
    // an assistant entry carrying the prefix is no attach, so `a` stays the newest attach
    let h = vec![big_attach("a", 9_000), user("1"), user("2"), user("3"), assistant(&format!("{PREFIX}\nx"))];
    assert_eq!(age(&h, AgeOptions::default()), h);
    // a user entry whose prefix is not at the start is no attach either
    let h = vec![big_attach("a", 9_000), user("1"), user("2"), user(&format!(" {PREFIX}"))];
    assert_eq!(age(&h, AgeOptions::default()), h);
}

#[test]
fn min_chars_is_inclusive_and_counts_utf16() {
    let head = attach_text_of("u", "t", "");
    let opts = AgeOptions { min_user_turns_after: 1, min_chars: 8_000 };
    let pad = 8_000 - u16n(&head);
    let exact = attach_entry("a", format!("{head}{}", "x".repeat(pad)));
    let short = attach_entry("a", format!("{head}{}", "x".repeat(pad - 1)));
    let tail = [user("q"), big_attach("n", 1)];
    let h: Vec<Value> = std::iter::once(exact).chain(tail.iter().cloned()).collect();
    assert!(age(&h, opts)[0]["content"].as_str().unwrap().starts_with(AGED_HEAD), "exactly minChars is cold");
    let h: Vec<Value> = std::iter::once(short).chain(tail.iter().cloned()).collect();
    assert_eq!(age(&h, opts), h, "one unit short stays warm");
    // emoji count 2 units each: 4,000 code points, 8,000+ units → cold
    let emoji = attach_entry("a", format!("{head}{}", "😀".repeat(pad / 2 + 1)));
    let h: Vec<Value> = std::iter::once(emoji).chain(tail.iter().cloned()).collect();
    assert!(age(&h, opts)[0]["content"].as_str().unwrap().starts_with(AGED_HEAD));
    // CJK: 3 bytes but 1 unit each → byte length over 8,000 but units under → warm
    let cjk = attach_entry("a", format!("{head}{}", "中".repeat(pad - 1)));
    let h: Vec<Value> = std::iter::once(cjk).chain(tail.iter().cloned()).collect();
    assert_eq!(age(&h, opts), h);
}

#[test]
fn array_attaches_measure_all_text_parts_and_drop_images() {
    // §11.2: the length counts every text/input_text part joined with `\n`
    let head = format!("{PREFIX}\nURL: https://e.x/doc\nMode: pdf\n---\n\nsee [图1]");
    let tail_len = 8_000 - u16n(&head) - 1; // + the joining `\n` reaches exactly 8,000
    let tail = format!("Title: in a later part\n{}", "z".repeat(tail_len - 23));
    let e = json!({"role": "user", "attachId": "arr", "imagesSeen": true, "content": [
        {"type": "text", "text": head},
        img_part("data:image/png;base64,AAAA"),
        {"type": "input_text", "text": tail},
        {"type": "other", "text": "ignored"},
    ]});
    let joined = format!("{head}\n{tail}");
    assert_eq!(u16n(&joined), 8_000);
    let h = vec![e.clone(), user("1"), user("2"), big_attach("n", 5)];
    let aged = age(&h, AgeOptions::default());
    let expected_text =
        format!("{AGED_HEAD}\nTitle: in a later part\nURL: https://e.x/doc\n{}", size_line(8_000));
    assert_eq!(
        aged[0],
        json!({"role": "user", "attachId": "arr", "imagesSeen": true, "content": expected_text})
    );
    assert_eq!(attach_text(&e), joined);
}

#[test]
fn legacy_prefix_and_options_are_honoured() {
    let legacy = attach_entry("l", format!("{LEGACY}\nURL: old\n{}", "x".repeat(100)));
    let h = vec![legacy.clone(), big_attach("n", 1)];
    let opts = AgeOptions { min_user_turns_after: 0, min_chars: 0 };
    let aged = age(&h, opts);
    assert_eq!(aged[0]["content"], json!(spec_stub(&[AGED_HEAD], legacy["content"].as_str().unwrap())));
    assert_eq!(aged[1], h[1]);
    let opts = AgeOptions { min_user_turns_after: 2, min_chars: 0 };
    assert_eq!(age(&h, opts), h, "one user entry follows, two required");
    // nothing to age: identical output
    let h = vec![user("a"), assistant("b"), user(&format!("{PREFIX} small"))];
    assert_eq!(age(&h, AgeOptions::default()), h);
    assert!(age(&[], AgeOptions::default()).is_empty());
}

/// An arbitrary history for aging / rescue: attaches (string or array, either prefix, optional
/// Title/URL lines, various sizes), plain user entries and assistants (some carrying the prefix).
fn history_entry(big: usize) -> impl Strategy<Value = Value> {
    let attach = (
        prop_oneof![Just(PREFIX), Just(LEGACY)],
        proptest::option::of("[a-zA-Z0-9 :/.😀中\u{2014}]{0,30}"),
        proptest::option::of("https://[a-z]{1,8}\\.x/[a-z0-9?=&]{0,10}"),
        prop_oneof![0usize..40, (big - 40)..(big + 40), (big * 2)..(big * 3)],
        prop_oneof![Just('x'), Just('中'), Just('😀')],
        any::<bool>(),
        proptest::option::of("[a-f0-9]{8}"),
        any::<bool>(),
    )
        .prop_map(|(prefix, title, url, n, fill, as_array, id, seen)| {
            let mut head = prefix.to_string();
            if let Some(u) = url {
                head.push_str(&format!("\nURL: {u}"));
            }
            if let Some(t) = title {
                head.push_str(&format!("\nTitle: {t}"));
            }
            head.push_str("\nMode: full\n---\n");
            let body: String = std::iter::repeat_n(fill, n).collect();
            let content = if as_array {
                json!([{"type": "text", "text": head}, img_part("https://i.x/1.png"),
                       {"type": "input_text", "text": body}])
            } else {
                json!(format!("{head}\n{body}"))
            };
            let mut e = json!({"role": "user", "content": content});
            if let Some(id) = id {
                e["attachId"] = json!(id);
            }
            if seen {
                e["imagesSeen"] = json!(true);
            }
            e
        });
    prop_oneof![
        3 => attach,
        2 => "[a-z ]{0,12}".prop_map(|t| user(&t)),
        2 => "[a-z ]{0,12}".prop_map(|t| assistant(&t)),
        1 => Just(assistant(&format!("{PREFIX}\nTitle: not an attach\n{}", "x".repeat(9_000)))),
        1 => Just(json!({"role": "user", "content": [text_part("hi"), text_part(&format!("{PREFIX} second part"))]})),
    ]
}

fn age_oracle(h: &[Value], turns: usize, min_chars: usize) -> Vec<Value> {
    let newest = h.iter().rposition(is_attach);
    h.iter()
        .enumerate()
        .map(|(i, e)| {
            let after = h[i + 1..].iter().filter(|x| x["role"] == "user").count();
            let text = measured(e);
            if is_attach(e) && Some(i) != newest && after >= turns && u16n(&text) >= min_chars {
                with_string_content(e, spec_stub(&[AGED_HEAD], &text))
            } else {
                e.clone()
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn aging_matches_the_rule_and_is_stable(
        h in proptest::collection::vec(history_entry(200), 0..10),
        turns in 0usize..5,
        min_chars in 0usize..400,
    ) {
        let opts = AgeOptions { min_user_turns_after: turns, min_chars };
        let once = age(&h, opts);
        prop_assert_eq!(&once, &age_oracle(&h, turns, min_chars));
        prop_assert_eq!(&once, &age(&h, opts), "deterministic");
        prop_assert_eq!(&age(&once, opts), &once, "aging an aged history changes nothing");
        for (a, b) in h.iter().zip(&once) {
            if a != b {
                let s = b["content"].as_str().unwrap();
                prop_assert!(!s.starts_with(PREFIX) && !s.starts_with(LEGACY));
            }
        }
    }

    #[test]
    fn default_aging_matches_the_rule(h in proptest::collection::vec(history_entry(8_000), 0..8)) {
        let once = age(&h, AgeOptions::default());
        prop_assert_eq!(&once, &age_oracle(&h, 3, 8_000));
        prop_assert_eq!(&age(&once, AgeOptions::default()), &once);
    }
}

// ---------------------------------------------------------------------------------------------
// §7.3 rescue
// ---------------------------------------------------------------------------------------------

#[test]
fn rescue_stub_is_byte_exact() {
    let text = "[Page context attached by browsa]\nURL: https://e.x/p\nTitle: T\nMode: full\n---\n\nb";
    let expected = "[Page context attached by Keepsake]\n\
                    [Keepsake: this attachment was too large for the model's context window and was omitted so the conversation could continue]\n\
                    Title: T\n\
                    URL: https://e.x/p\n\
                    Original size: ~79 chars. If you need exact details from this page, ask the user to re-attach it.";
    assert_eq!(u16n(text), 79);
    assert_eq!(rescue_stub(text), expected);
    let bare = format!("{PREFIX}\n{}", "x".repeat(20_000));
    assert_eq!(rescue_stub(&bare), format!("{PREFIX}\n{RESCUE_NOTE}\n{}", size_line(20_036)));
}

#[test]
fn rescue_stubs_every_big_attach_including_the_newest() {
    let mut a = big_attach("a", 9_000);
    a["videoSrc"] = json!({"platform": "bilibili"});
    let no_id = json!({"role": "user", "content": [
        text_part(&attach_text_of("https://n.x", "N", "")),
        img_part("https://i.x/1.png"),
        text_part(&"w".repeat(8_000)),
    ]});
    let h = vec![
        a.clone(),
        user(&"q".repeat(9_000)),
        big_attach("small", 10),
        assistant(&format!("{PREFIX}\n{}", "x".repeat(9_000))),
        no_id.clone(),
        big_attach("last", 8_000),
    ];
    let (out, changed) = rescue(&h);
    assert_eq!(
        changed,
        vec![
            Stubbed { index: 0, attach_id: Some("a".into()) },
            Stubbed { index: 4, attach_id: None },
            Stubbed { index: 5, attach_id: Some("last".into()) },
        ]
    );
    let mut expected0 = a.clone();
    expected0["content"] = json!(format!(
        "{PREFIX}\n{RESCUE_NOTE}\nTitle: Title with \u{2014} dash\nURL: https://e.x/a?q=1\n{}",
        size_line(u16n(a["content"].as_str().unwrap()))
    ));
    assert_eq!(out[0], expected0);
    assert_eq!(out[1..4], h[1..4]);
    let joined = measured(&no_id);
    assert_eq!(
        out[4],
        json!({"role": "user", "content": format!("{PREFIX}\n{RESCUE_NOTE}\nTitle: N\nURL: https://n.x\n{}", size_line(u16n(&joined)))})
    );
    assert!(u16n(&joined) >= 8_000);
    // stubs are small attach entries: a second rescue changes nothing
    let (again, changed2) = rescue(&out);
    assert!(changed2.is_empty());
    assert_eq!(again, out);
}

#[test]
fn rescue_threshold_is_8000_units_inclusive() {
    let head = attach_text_of("u", "t", "");
    let pad = 8_000 - u16n(&head);
    let below = attach_entry("below", format!("{head}{}", "x".repeat(pad - 1)));
    let (_, changed) = rescue(&[below]);
    assert!(changed.is_empty());
    // emoji: 2 units each; (pad + 1) / 2 of them reach 8,000 units with fewer code points
    let emoji = attach_entry("emoji", format!("{head}{}", "😀".repeat(pad.div_ceil(2))));
    let (_, changed) = rescue(&[emoji]);
    assert_eq!(changed.len(), 1);
    let exact = attach_entry("exact", format!("{head}{}", "x".repeat(pad)));
    let (_, changed) = rescue(&[exact]);
    assert_eq!(changed, vec![Stubbed { index: 0, attach_id: Some("exact".into()) }]);
}

#[test]
fn aged_entries_are_not_rescued() {
    let h = vec![big_attach("old", 9_000), user("1"), user("2"), big_attach("new", 9_000), user("3")];
    let aged = age(&h, AgeOptions::default());
    assert!(aged[0]["content"].as_str().unwrap().starts_with(AGED_HEAD));
    let (out, changed) = rescue(&aged);
    assert_eq!(changed, vec![Stubbed { index: 3, attach_id: Some("new".into()) }]);
    assert_eq!(out[0], aged[0]);
}

proptest! {
    // Histories hold attaches of up to 24,000 units; 256 cases still run in well under a second.
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn rescue_matches_the_rule_and_is_a_fixed_point(
        h in proptest::collection::vec(history_entry(8_000), 0..8),
        pre_age in any::<bool>(),
    ) {
        // Title/URL lines here are short (as real ones are), so every stub is far below 8,000.
        let h = if pre_age { age(&h, AgeOptions::default()) } else { h };
        let (out, changed) = rescue(&h);
        let mut expected_changed = Vec::new();
        let expected: Vec<Value> = h
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let text = measured(e);
                if is_attach(e) && u16n(&text) >= 8_000 {
                    expected_changed.push(Stubbed {
                        index: i,
                        attach_id: e.get("attachId").and_then(Value::as_str).map(str::to_owned),
                    });
                    with_string_content(e, spec_stub(&[PREFIX, RESCUE_NOTE], &text))
                } else {
                    e.clone()
                }
            })
            .collect();
        prop_assert_eq!(&out, &expected);
        prop_assert_eq!(&changed, &expected_changed);
        for c in &changed {
            prop_assert!(u16n(out[c.index]["content"].as_str().unwrap()) < 8_000);
        }
        let (again, changed2) = rescue(&out);
        prop_assert!(changed2.is_empty());
        prop_assert_eq!(again, out);
    }
}

// ---------------------------------------------------------------------------------------------
// §7.2 / §11.6 overflow detection
// ---------------------------------------------------------------------------------------------

const OVERFLOW_SAMPLES: &[&str] = &[
    // context[_ ]?(length|window|limit)
    "context_length",
    "context length",
    "contextlength",
    "Context Window full",
    "context_window",
    "exceeds the CONTEXT LIMIT",
    "contextlimit",
    // context_length_exceeded
    "error code: context_length_exceeded",
    // maximum context
    "This model's Maximum Context is 8192",
    // prompt is too long
    "prompt is too long: 250000 tokens > 200000 maximum",
    // grown too long
    "The conversation has GROWN TOO LONG",
    // too many (input )?tokens
    "too many tokens in request",
    "Too many input tokens",
    // request too large
    "Request too large for model",
    // length.{0,12}exceed
    "lengthexceed",
    "input length exceeds the limit",
    "Length would exceed",
    "length123456789012exceed",
    // 输入.{0,8}过长
    "输入过长",
    "输入内容过长",
    "输入12345678过长",
    // 长度.{0,8}(超|限制)
    "长度超过",
    "文本长度已达到限制",
    "长度12345678超",
    // 上下文.{0,12}(超|限|过长|太长)
    "上下文超出",
    "上下文窗口受限",
    "上下文内容过长",
    "上下文太长了",
    "上下文123456789012超",
];

#[test]
fn every_overflow_pattern_matches() {
    for m in OVERFLOW_SAMPLES {
        assert!(is_context_overflow(Some(m)), "{m:?} should be an overflow");
        let upper = m.to_uppercase();
        assert!(is_context_overflow(Some(&upper)), "{upper:?} (case-insensitive)");
        let wrapped = format!("Error 400: {{\"message\": \"{m}\"}}\nmore details");
        assert!(is_context_overflow(Some(&wrapped)), "{wrapped:?}");
    }
}

#[test]
fn dot_does_not_cross_line_breaks_and_gaps_are_bounded() {
    for m in [
        "length\nexceed",
        "length\r\nexceed",
        "length\rexceed",
        "length1234567890123exceed",
        "输入\n过长",
        "输入123456789过长",
        "长度\n超",
        "长度123456789超",
        "上下文\n超",
        "上下文1234567890123超",
    ] {
        assert!(!is_context_overflow(Some(m)), "{m:?} must not match");
    }
}

#[test]
fn rate_limits_are_not_overflows() {
    for m in [
        "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 50000",
        "Too many tokens, please wait before trying again",
        "context length exceeded: rate limit reached",
        "context window: rate-limit",
        "context window: RateLimit",
        "too many tokens per min",
        "too many tokens (tpm)",
        "too many tokens: RPM exceeded",
        "request too large: throttled",
        "prompt is too long; Throttling applied",
        "上下文超限 rate_limit",
    ] {
        assert!(!is_context_overflow(Some(m)), "{m:?} is a rate limit");
    }
}

#[test]
fn ordinary_errors_are_not_overflows() {
    for m in [
        "",
        "500 Internal Server Error",
        "502 Bad Gateway",
        "503 Service Unavailable",
        "504 Gateway Timeout",
        "model not found",
        "The model `gpt-9` does not exist or you do not have access to it",
        "connection reset by peer",
        "read ECONNRESET",
        "429 Too Many Requests",
        "Rate limit reached for requests",
        "invalid api key",
        "context",
        "maximum",
        "length",
        "too many requests",
    ] {
        assert!(!is_context_overflow(Some(m)), "{m:?}");
    }
    assert!(!is_context_overflow(None));
}

const RATE_TOKENS: &[&str] =
    &["rate limit", "rate-limit", "ratelimit", "per min", "TPM", "rpm", "Please Wait", "throttl"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn overflow_phrases_match_in_any_surrounding(
        i in 0..OVERFLOW_SAMPLES.len(),
        pre in "[0-9 :,.{}\"\n-]{0,30}",
        post in "[0-9 :,.{}\"\n-]{0,30}",
        upper in any::<bool>(),
        rate in proptest::option::of((0..RATE_TOKENS.len(), any::<bool>())),
    ) {
        let phrase = if upper { OVERFLOW_SAMPLES[i].to_uppercase() } else { OVERFLOW_SAMPLES[i].to_string() };
        let mut m = format!("{pre}{phrase}{post}");
        match rate {
            None => prop_assert!(is_context_overflow(Some(&m)), "{:?}", m),
            Some((r, front)) => {
                if front { m = format!("{} {m}", RATE_TOKENS[r]) } else { m.push_str(RATE_TOKENS[r]) }
                prop_assert!(!is_context_overflow(Some(&m)), "{:?}", m);
            }
        }
    }

    #[test]
    fn messages_without_keywords_never_match(m in "[0-9 :,.{}\"\n!?()a-dfhj-z-]{0,80}") {
        // the alphabet lacks `e`, `g` and `i`, so no English pattern can form, and no CJK at all
        prop_assert!(!is_context_overflow(Some(&m)));
    }
}

// ---------------------------------------------------------------------------------------------
// §6.6 / §11.21 interleave
// ---------------------------------------------------------------------------------------------

/// (kind, payload) per part: ("T", text) or ("I", url).
fn norm(v: &Value) -> Vec<(&'static str, String)> {
    v.as_array()
        .expect("array content")
        .iter()
        .map(|p| {
            if is_img(p) {
                ("I", img_url(p).expect("image url").to_string())
            } else {
                assert_eq!(p["type"], "text");
                ("T", p["text"].as_str().unwrap().to_string())
            }
        })
        .collect()
}

fn t(s: &str) -> (&'static str, String) {
    ("T", s.to_string())
}

fn i(s: &str) -> (&'static str, String) {
    ("I", s.to_string())
}

#[test]
fn no_images_keeps_the_plain_string() {
    assert_eq!(interleave("a [图1]\nb", &[]), json!("a [图1]\nb"));
    assert_eq!(interleave("", &[]), json!(""));
}

#[test]
fn no_anchors_puts_text_first_then_images() {
    let v = interleave("just text\nsecond line", &[json!("u1"), json!({"url": "u2"}), img_part("u3")]);
    assert_eq!(
        v,
        json!([
            {"type": "text", "text": "just text\nsecond line"},
            {"type": "image_url", "image_url": {"url": "u1"}},
            {"type": "image_url", "image_url": {"url": "u2"}},
            {"type": "image_url", "image_url": {"url": "u3"}},
        ])
    );
    // even a blank text makes the first part when nothing else exists
    assert_eq!(norm(&interleave("", &[json!("u")])), vec![t(""), i("u")]);
    assert_eq!(norm(&interleave("  ", &[json!("u")])), vec![t("  "), i("u")]);
}

#[test]
fn images_follow_their_anchor_lines() {
    let text = "intro\nsee [Figure 2] here\nmiddle\nboth [图3] and [图1] on one line\ntail";
    let imgs = [json!("u1"), json!("u2"), json!("u3"), json!("u4")];
    assert_eq!(
        norm(&interleave(text, &imgs)),
        vec![
            t("intro\nsee [Figure 2] here"),
            i("u2"),
            t("middle\nboth [图3] and [图1] on one line"),
            i("u3"),
            i("u1"),
            t("tail"),
            i("u4"),
        ]
    );
}

#[test]
fn out_of_range_repeated_and_malformed_anchors_are_plain_text() {
    let text = "a [图1]\nb [图1] again\nc [Figure 3] [Figure 0] [Figure 01] [figure 2]\nd";
    assert_eq!(
        norm(&interleave(text, &[json!("u1"), json!("u2")])),
        vec![
            t("a [图1]"),
            i("u1"),
            t("b [图1] again\nc [Figure 3] [Figure 0] [Figure 01] [figure 2]\nd"),
            i("u2")
        ]
    );
    // a repeated anchor on the same line places the image once
    assert_eq!(norm(&interleave("x [图1][图1]", &[json!("u1")])), vec![t("x [图1][图1]"), i("u1")]);
    // a two-digit anchor is a number, not `[图1]` followed by `0]`
    let imgs: Vec<Value> = (1..=10).map(|n| json!(format!("u{n}"))).collect();
    let v = norm(&interleave("x [图10]", &imgs));
    assert_eq!(v[0], t("x [图10]"));
    assert_eq!(v[1], i("u10"));
    assert_eq!(v.len(), 11);
}

#[test]
fn blank_remainder_after_the_last_anchor_is_dropped() {
    assert_eq!(norm(&interleave("a [图1]\n\n  ", &[json!("u1")])), vec![t("a [图1]"), i("u1")]);
    assert_eq!(norm(&interleave("a [图1]\nz", &[json!("u1")])), vec![t("a [图1]"), i("u1"), t("z")]);
}

#[test]
fn image_forms_all_become_image_parts() {
    let v = interleave(
        "[图1] [图2] [图3]",
        &[json!("a"), json!({"url": "b"}), json!({"type": "image_url", "image_url": "c"})],
    );
    let parts = v.as_array().unwrap();
    assert_eq!(parts.len(), 4);
    for (p, u) in parts[1..].iter().zip(["a", "b", "c"]) {
        assert!(is_img(p));
        assert_eq!(img_url(p), Some(u));
    }
}

fn interleave_oracle(text: &str, urls: &[String]) -> Option<Vec<(&'static str, String)>> {
    if urls.is_empty() {
        return None;
    }
    let re = Regex::new(r"\[(?:图|Figure )([1-9][0-9]*)\]").unwrap();
    let n = urls.len();
    let mut placed = vec![false; n];
    let mut out = Vec::new();
    let mut seg: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        seg.push(line);
        let mut here: Vec<usize> = Vec::new();
        for c in re.captures_iter(line) {
            if let Ok(k) = c[1].parse::<usize>() {
                if (1..=n).contains(&k) && !placed[k - 1] && !here.contains(&k) {
                    here.push(k);
                }
            }
        }
        if !here.is_empty() {
            out.push(("T", seg.join("\n")));
            seg.clear();
            for k in here {
                placed[k - 1] = true;
                out.push(("I", urls[k - 1].clone()));
            }
        }
    }
    let rest = seg.join("\n");
    if !is_blank(&rest) || out.is_empty() {
        out.push(("T", rest));
    }
    for (k, u) in urls.iter().enumerate() {
        if !placed[k] {
            out.push(("I", u.clone()));
        }
    }
    Some(out)
}

fn anchor_line() -> impl Strategy<Value = String> {
    let word = "[a-z ]{0,6}";
    prop_oneof![
        3 => word.prop_map(|w| w.to_string()),
        1 => Just(String::new()),
        1 => Just("   ".to_string()),
        4 => (word, 0usize..8, prop_oneof![
                Just("[图{}]"), Just("[Figure {}]"), Just("[Figure  {}]"), Just("[figure {}]"),
                Just("[Figure 0{}]"), Just("[图{}] [图{}]"), Just("[Figure {}][图1]"),
             ], word)
            .prop_map(|(a, n, tpl, b)| format!("{a}{}{b}", tpl.replace("{}", &n.to_string()))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn interleave_places_every_image_once_and_keeps_the_text(
        lines in proptest::collection::vec(anchor_line(), 0..8),
        forms in proptest::collection::vec(0u8..4, 0..6),
    ) {
        let text = lines.join("\n");
        let urls: Vec<String> = (0..forms.len()).map(|k| format!("https://img.x/{k}")).collect();
        let imgs: Vec<Value> = forms
            .iter()
            .zip(&urls)
            .map(|(f, u)| match f {
                0 => json!(u),
                1 => json!({"url": u}),
                2 => img_part(u),
                _ => json!({"type": "image_url", "image_url": u}),
            })
            .collect();
        let v = interleave(&text, &imgs);
        let Some(expected) = interleave_oracle(&text, &urls) else {
            prop_assert_eq!(v, json!(text));
            return Ok(());
        };
        let got = norm(&v);
        prop_assert_eq!(&got, &expected);
        // every image exactly once
        let mut seen: Vec<String> = got.iter().filter(|(k, _)| *k == "I").map(|(_, u)| u.clone()).collect();
        seen.sort();
        let mut all = urls.clone();
        all.sort();
        prop_assert_eq!(seen, all);
        // the text parts, joined with `\n`, give back the text (a dropped remainder is blank)
        let joined = got.iter().filter(|(k, _)| *k == "T").map(|(_, s)| s.as_str()).collect::<Vec<_>>().join("\n");
        prop_assert!(text.starts_with(&joined), "{:?} vs {:?}", joined, text);
        let rem = &text[joined.len()..];
        prop_assert!(rem.is_empty() || (rem.starts_with('\n') && is_blank(&rem[1..])), "lost {:?}", rem);
        // no text part is empty unless it is the only text part
        prop_assert!(matches!(got.first(), Some(("T", _))));
    }
}

// ---------------------------------------------------------------------------------------------
// §7.4 / §11.22 markdownChunks
// ---------------------------------------------------------------------------------------------

#[test]
fn chunks_join_lines_up_to_the_size() {
    assert_eq!(markdown_chunks("aaa\nbbb\nccc", 7), vec!["aaa\nbbb", "ccc"]);
    assert_eq!(markdown_chunks("aaa\nbbb\nccc", 6), vec!["aaa", "bbb", "ccc"]);
    assert_eq!(markdown_chunks("aaa\nbbb\nccc", 11), vec!["aaa\nbbb\nccc"]);
    assert_eq!(markdown_chunks("a\n\nb", 10), vec!["a\n\nb"]);
    assert!(markdown_chunks("", 10).is_empty());
    assert!(markdown_chunks("\n\n  \n", 10).is_empty());
}

#[test]
fn trailing_blank_lines_are_trimmed_and_empty_chunks_dropped() {
    assert_eq!(markdown_chunks("a\n\n\n", 10), vec!["a"]);
    assert_eq!(markdown_chunks("a\n  \nb", 3), vec!["a", "b"]);
    assert_eq!(markdown_chunks("\n\na", 10), vec!["\n\na"]);
}

#[test]
fn fenced_blocks_are_atomic() {
    let t = "intro\n```\nline1\nline2\n```\nafter";
    assert_eq!(markdown_chunks(t, 8), vec!["intro", "```\nline1\nline2\n```", "after"]);
    assert_eq!(markdown_chunks(t, 100), vec![t]);
    // unclosed: to the end of the text
    assert_eq!(markdown_chunks("x\n~~~\ncode\nmore code here", 6), vec!["x", "~~~\ncode\nmore code here"]);
    // a tilde fence is not closed by backticks; a closing line may carry whitespace and more chars
    let t = "~~~\na\n```\nb\n  ~~~~  \nafter";
    assert_eq!(markdown_chunks(t, 5), vec!["~~~\na\n```\nb\n  ~~~~  ", "after"]);
    // a closing line with an info string does not close; an indented opener opens
    let t = "  ```py\nx = 1\n```py\ny\n```\nz";
    assert_eq!(markdown_chunks(t, 4), vec!["  ```py\nx = 1\n```py\ny\n```", "z"]);
    // lines inside a fence longer than the size are never split
    let long = "q".repeat(50);
    let t = format!("```\n{long}\n```");
    assert_eq!(markdown_chunks(&t, 10), vec![t.clone()]);
}

#[test]
fn oversized_unclosed_fence_chunk_has_trailing_blank_lines_trimmed() {
    // §7.4: trailing blank lines are trimmed per chunk; the fence is otherwise untruncated
    let t = "```\nsome code that is long\n\n\n";
    assert_eq!(markdown_chunks(t, 8), vec!["```\nsome code that is long"]);
}

#[test]
fn tables_split_between_rows_repeating_the_header() {
    let t = "|h|\n|-|\n|1|\n|2|\n|3|";
    assert_eq!(markdown_chunks(t, 11), vec!["|h|\n|-|\n|1|", "|h|\n|-|\n|2|", "|h|\n|-|\n|3|"]);
    assert_eq!(markdown_chunks(t, 15), vec!["|h|\n|-|\n|1|\n|2|", "|h|\n|-|\n|3|"]);
    assert_eq!(markdown_chunks(t, 19), vec![t]);
    // a table that fits joins the chunk like any unit
    assert_eq!(markdown_chunks("intro\n|a|\n|-|", 40), vec!["intro\n|a|\n|-|"]);
    // indented rows belong to the table
    let t = "|h|\n  |-|\n |1|\n|2|";
    assert_eq!(markdown_chunks(t, 14), vec!["|h|\n  |-|\n |1|", "|h|\n  |-|\n|2|"]);
}

#[test]
fn a_table_row_longer_than_the_size_does_not_make_an_oversized_chunk() {
    // §11.22: no chunk exceeds the size except atomic fenced blocks
    let t = format!("|{}|", "r".repeat(30));
    let c = markdown_chunks(&t, 10);
    assert!(c.iter().all(|p| u16n(p) <= 10), "{c:?}");
    assert_eq!(c.concat(), t);
}

#[test]
fn long_lines_split_at_the_size_on_code_points() {
    assert_eq!(markdown_chunks(&"😀".repeat(5), 4), vec!["😀😀", "😀😀", "😀"]);
    assert_eq!(markdown_chunks("a😀😀", 2), vec!["a", "😀", "😀"]);
    assert_eq!(markdown_chunks(&"abcdefghij".repeat(3), 10), vec!["abcdefghij"; 3]);
    assert_eq!(markdown_chunks("short\nabcdefghijklm", 10), vec!["short", "abcdefghij", "klm"]);
}

#[test]
fn a_long_line_keeps_its_trailing_spaces() {
    // §7.4 "no line is lost or altered": pieces of a split line are not blank lines to trim
    let line = format!("a{}", " ".repeat(15));
    let c = markdown_chunks(&line, 10);
    assert_eq!(c.concat(), line, "{c:?}");
}

#[test]
fn summary_sized_chunks() {
    let para = "word ".repeat(1_000); // 5,000 units per line
    let text = [para.as_str(); 5].join("\n");
    let c = markdown_chunks(&text, SUMMARY_CHUNK_CHARS);
    assert_eq!(c.len(), 3);
    assert_eq!(c[0], [para.as_str(); 2].join("\n"));
    assert!(c.iter().all(|p| u16n(p) <= SUMMARY_CHUNK_CHARS));
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum UnitKind {
    Fence,
    Table,
    Line,
}

fn oracle_units(text: &str) -> Vec<(UnitKind, Vec<&str>)> {
    let lines: Vec<&str> = text.split('\n').collect();
    let lead = |l: &str| l.trim_start().to_string();
    let mut out = Vec::new();
    let mut k = 0;
    while k < lines.len() {
        let l = lead(lines[k]);
        let fence = if l.starts_with("```") {
            Some('`')
        } else if l.starts_with("~~~") {
            Some('~')
        } else {
            None
        };
        if let Some(c) = fence {
            let mut j = k + 1;
            while j < lines.len() {
                let tt = lines[j].trim();
                if tt.chars().count() >= 3 && tt.chars().all(|x| x == c) {
                    break;
                }
                j += 1;
            }
            let end = (j + 1).min(lines.len());
            out.push((UnitKind::Fence, lines[k..end].to_vec()));
            k = end;
        } else if l.starts_with('|') {
            let mut j = k;
            while j < lines.len() && lead(lines[j]).starts_with('|') {
                j += 1;
            }
            out.push((UnitKind::Table, lines[k..j].to_vec()));
            k = j;
        } else {
            out.push((UnitKind::Line, vec![lines[k]]));
            k += 1;
        }
    }
    out
}

/// Greedy pieces of at most `size` units, never splitting a code point.
fn pieces(line: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in line.chars() {
        if u16n(&cur) + ch.len_utf16() > size {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(ch);
    }
    out.push(cur);
    out
}

fn trim_trailing_blank(lines: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    while v.last().is_some_and(|l| is_blank(l)) {
        v.pop();
    }
    v
}

fn contains_lines(chunk: &str, unit: &[String]) -> bool {
    let lines: Vec<&str> = chunk.split('\n').collect();
    lines.windows(unit.len()).any(|w| w.iter().zip(unit).all(|(a, b)| a == b))
}

fn words_line() -> impl Strategy<Value = String> {
    // no leading/trailing whitespace, single spaces: split pieces are never blank
    proptest::collection::vec("[a-z0-9中😀#*]{1,12}", 1..14).prop_map(|w| w.join(" "))
}

fn md_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => words_line(),
        2 => prop_oneof![Just(String::new()), Just("  ".to_string())],
        2 => (proptest::collection::vec("[a-z0-9 |-]{0,6}", 1..8), any::<bool>())
            .prop_map(|(rows, indent)| rows
                .iter()
                .enumerate()
                .map(|(k, r)| format!("{}|{r}", if indent && k == 1 { " " } else { "" }))
                .collect::<Vec<_>>()
                .join("\n")),
        2 => (
            prop_oneof![Just(("```", "```")), Just(("```rust", "  ````  ")), Just(("~~~", "~~~")), Just(("  ```", "```"))],
            proptest::collection::vec(prop_oneof![words_line(), Just(String::new())], 0..6),
            prop_oneof![3 => Just(true), 1 => Just(false)],
        )
            .prop_map(|((open, close), body, closed)| {
                let mut v = vec![open.to_string()];
                v.extend(body);
                if closed {
                    v.push(close.to_string());
                }
                v.join("\n")
            }),
    ]
}

fn md_text() -> impl Strategy<Value = (String, usize)> {
    (
        proptest::collection::vec(md_segment(), 0..12),
        prop_oneof![Just(""), Just("\n"), Just("\n\n  \n")],
        30usize..90,
    )
        .prop_map(|(segs, trailing, size)| (format!("{}{trailing}", segs.join("\n")), size))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn chunks_are_non_empty_without_trailing_blank_lines((text, size) in md_text()) {
        let chunks = markdown_chunks(&text, size);
        if text.is_empty() {
            prop_assert!(chunks.is_empty());
        }
        for c in &chunks {
            prop_assert!(!c.is_empty());
            prop_assert!(!is_blank(c.split('\n').next_back().unwrap()), "trailing blank line in {:?}", c);
        }
    }

    #[test]
    fn chunks_respect_the_size_except_atomic_fences((text, size) in md_text()) {
        // trailing blank lines are checked by the property above; compare trimmed chunks here
        let chunks: Vec<String> = markdown_chunks(&text, size)
            .iter()
            .map(|c| trim_trailing_blank(&c.split('\n').collect::<Vec<_>>()).join("\n"))
            .collect();
        let fences: Vec<Vec<String>> = oracle_units(&text)
            .iter()
            .filter(|(k, _)| *k == UnitKind::Fence)
            .map(|(_, l)| trim_trailing_blank(l))
            .collect();
        // oversized fenced units are their own chunk, untruncated; smaller ones stay whole
        for f in &fences {
            let joined = f.join("\n");
            if u16n(&joined) > size {
                prop_assert!(chunks.contains(&joined), "oversized fence {:?} not a chunk of {:?}", joined, chunks);
            } else {
                prop_assert!(chunks.iter().any(|c| contains_lines(c, f)), "fence {:?} split", joined);
            }
        }
        // only an oversized fenced unit may exceed the size
        for c in &chunks {
            if u16n(c) > size {
                prop_assert!(fences.iter().any(|f| &f.join("\n") == c), "oversized chunk {:?}", c);
            }
        }
    }

    #[test]
    fn chunks_lose_no_line((text, size) in md_text()) {
        let chunks = markdown_chunks(&text, size);
        // expected non-blank lines, long plain lines as their pieces at the size
        let mut expected: Vec<String> = Vec::new();
        let mut headers: HashSet<String> = HashSet::new();
        for (k, lines) in &oracle_units(&text) {
            match k {
                UnitKind::Line if u16n(lines[0]) > size => expected.extend(pieces(lines[0], size)),
                UnitKind::Table => {
                    headers.extend(lines.iter().take(2).map(|s| s.to_string()));
                    expected.extend(lines.iter().map(|s| s.to_string()));
                }
                _ => expected.extend(lines.iter().map(|s| s.to_string())),
            }
        }
        expected.retain(|l| !is_blank(l));
        // the chunks' non-blank lines are exactly these, plus repeated table header rows
        let got: Vec<&str> = chunks.iter().flat_map(|c| c.split('\n')).filter(|l| !is_blank(l)).collect();
        let mut e = 0;
        for g in &got {
            if e < expected.len() && *g == expected[e] {
                e += 1;
            } else {
                prop_assert!(headers.contains(*g), "unexpected line {:?}; expected {:?}", g, expected.get(e));
            }
        }
        prop_assert_eq!(e, expected.len(), "lost {:?}", expected.get(e));
    }

    #[test]
    fn table_pieces_repeat_the_header(
        rows in proptest::collection::vec("\\|[a-z0-9 ]{1,6}\\|", 3..30),
        extra in 0usize..40,
    ) {
        let max_row = rows.iter().map(|r| u16n(r)).max().unwrap();
        let size = u16n(&rows[0]) + u16n(&rows[1]) + max_row + 2 + extra;
        let text = rows.join("\n");
        let chunks = markdown_chunks(&text, size);
        if u16n(&text) <= size {
            prop_assert_eq!(chunks, vec![text]);
            return Ok(());
        }
        prop_assert!(chunks.len() >= 2);
        let mut body: Vec<String> = Vec::new();
        for c in &chunks {
            prop_assert!(u16n(c) <= size, "{:?} over {}", c, size);
            let lines: Vec<&str> = c.split('\n').collect();
            prop_assert!(lines.len() >= 3, "a piece carries at least one data row: {:?}", c);
            prop_assert_eq!(lines[0], rows[0].as_str());
            prop_assert_eq!(lines[1], rows[1].as_str());
            body.extend(lines[2..].iter().map(|s| s.to_string()));
        }
        prop_assert_eq!(body, rows[2..].to_vec());
    }
}

// ---------------------------------------------------------------------------------------------
// §6.4 per-turn caps
// ---------------------------------------------------------------------------------------------

#[test]
fn shape_gate() {
    let r = format!("keepsake-image:sha256:{}", "0123456789abcdef".repeat(4));
    for ok in [
        "http://x",
        "https://x/a.png",
        "HTTPS://X",
        "  https://x  ",
        "\n\thttp://x",
        "data:image/png;base64,AAAA",
        "DATA:IMAGE/PNG;base64,AAAA",
        r.as_str(),
    ] {
        assert!(image_shape_ok(ok), "{ok:?}");
    }
    let upper_ref = format!("keepsake-image:sha256:{}", "0123456789ABCDEF".repeat(4));
    let short_ref = format!("keepsake-image:sha256:{}", "a".repeat(63));
    for bad in [
        "",
        "   ",
        "ftp://x",
        "data:text/plain;base64,AAAA",
        "data:,x",
        "httpx://",
        "x https://a",
        "/relative.png",
        "blob:https://x/123",
        upper_ref.as_str(),
        short_ref.as_str(),
    ] {
        assert!(!image_shape_ok(bad), "{bad:?}");
    }
}

/// URL sizes encoded in a lookup table so budgets can be tested without megabyte strings.
fn sized(list: &[(&str, usize)]) -> (Vec<Value>, HashMap<String, usize>) {
    let v = list.iter().map(|(u, _)| json!(u)).collect();
    let m = list.iter().map(|(u, s)| (u.to_string(), *s)).collect();
    (v, m)
}

#[test]
fn pick_is_first_fit_in_order() {
    let (list, sizes) = sized(&[
        ("https://a", 2_000_000),
        ("https://b", 2_000_000),
        ("https://c", 3_145_729),
        ("https://d", 1_145_728),
        ("https://e", 1),
    ]);
    let f = |u: &str| sizes[u];
    let p = pick_turn_images(Some(&list), &f);
    assert_eq!(p.images, vec!["https://a", "https://d"]);
    assert_eq!(p.dropped, 3);
    assert_eq!(
        p.reasons,
        vec![None, Some(DropReason::Budget), Some(DropReason::Size), None, Some(DropReason::Budget)]
    );
}

#[test]
fn pick_budget_edges_are_inclusive() {
    let (list, sizes) = sized(&[("https://whole", 3_145_728)]);
    let f = |u: &str| sizes[u];
    assert_eq!(pick_turn_images(Some(&list), &f).images, vec!["https://whole"]);
    let (list, sizes) = sized(&[("https://a", 3_145_727), ("https://b", 1), ("https://c", 1)]);
    let f = |u: &str| sizes[u];
    let p = pick_turn_images(Some(&list), &f);
    assert_eq!(p.images, vec!["https://a", "https://b"]);
    assert_eq!(p.reasons, vec![None, None, Some(DropReason::Budget)]);
}

#[test]
fn pick_keeps_at_most_eight_and_checks_shape_first() {
    let mut list: Vec<Value> = (0..12).map(|k| json!(format!("https://x/{k}"))).collect();
    list.insert(9, json!(7));
    list.insert(10, json!("ftp://late"));
    let f = |_: &str| 10usize;
    let p = pick_turn_images(Some(&list), &f);
    assert_eq!(p.images, (0..8).map(|k| format!("https://x/{k}")).collect::<Vec<_>>());
    assert_eq!(p.dropped, 6);
    let mut reasons = vec![None; 8];
    reasons.extend([
        Some(DropReason::Count),
        Some(DropReason::Shape),
        Some(DropReason::Shape),
        Some(DropReason::Count),
        Some(DropReason::Count),
        Some(DropReason::Count),
    ]);
    assert_eq!(p.reasons, reasons);
    // an oversized image after eight kept is a count drop (count comes before size)
    let mut list: Vec<Value> = (0..8).map(|k| json!(format!("https://x/{k}"))).collect();
    list.push(json!("https://huge"));
    let g = |u: &str| if u == "https://huge" { 9_999_999 } else { 1 };
    assert_eq!(pick_turn_images(Some(&list), &g).reasons[8], Some(DropReason::Count));
}

#[test]
fn pick_drops_non_strings_and_bad_shapes() {
    let list = vec![
        json!(null),
        json!(1),
        json!({"url": "https://x"}),
        json!(["https://x"]),
        json!(""),
        json!("nope"),
        json!("https://ok"),
    ];
    let p = pick_turn_images(Some(&list), &|u: &str| u.len());
    assert_eq!(p.images, vec!["https://ok"]);
    assert_eq!(p.dropped, 6);
    assert!(p.reasons[..6].iter().all(|r| *r == Some(DropReason::Shape)));
    let none = pick_turn_images(None, &|u: &str| u.len());
    assert!(none.images.is_empty());
    assert_eq!(none.dropped, 0);
    let empty = pick_turn_images(Some(&[]), &|u: &str| u.len());
    assert!(empty.images.is_empty());
    assert_eq!(empty.dropped, 0);
}

#[test]
fn reason_names() {
    assert_eq!(DropReason::Shape.as_str(), "shape");
    assert_eq!(DropReason::Count.as_str(), "count");
    assert_eq!(DropReason::Size.as_str(), "size");
    assert_eq!(DropReason::Budget.as_str(), "budget");
}

#[test]
fn dropped_note_is_exact() {
    assert_eq!(
        dropped_note(3),
        "\n\n\u{ff08}\u{6ce8}\u{ff1a}\u{53e6}\u{6709} 3 \u{5f20}\u{56fe}\u{7247}\u{56e0}\u{8d85}\u{51fa}\u{5355}\u{6761}\u{6d88}\u{606f}\u{5927}\u{5c0f}\u{4e0a}\u{9650}\u{672a}\u{80fd}\u{968f}\u{9644}\u{3002}\u{ff09}"
    );
    assert_eq!(dropped_note(1234), "\n\n（注：另有 1234 张图片因超出单条消息大小上限未能随附。）");
}

/// The attach-time gate of §6.4, one image at a time.
struct Gate {
    kept: Vec<String>,
    total: usize,
}

impl Gate {
    fn offer(&mut self, v: &Value, size: &dyn Fn(&str) -> usize) -> Option<&'static str> {
        let Some(u) = v.as_str() else { return Some("shape") };
        let tu = u.trim();
        let lower = tu.to_ascii_lowercase();
        let is_ref = tu.strip_prefix("keepsake-image:sha256:").is_some_and(|h| {
            h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if !(lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("data:image/")
            || is_ref)
        {
            return Some("shape");
        }
        if self.kept.len() >= 8 {
            return Some("count");
        }
        let s = size(u);
        if s > 3_145_728 {
            return Some("size");
        }
        if self.total + s > 3_145_728 {
            return Some("budget");
        }
        self.total += s;
        self.kept.push(u.to_string());
        None
    }
}

fn turn_item() -> impl Strategy<Value = (Value, usize)> {
    let size = prop_oneof![
        4 => 0usize..400_000,
        3 => 400_000usize..1_600_000,
        2 => 1_600_000usize..3_145_729,
        1 => 3_145_729usize..5_000_000,
        1 => Just(3_145_728usize),
    ];
    prop_oneof![
        8 => (prop_oneof![Just("https://i.x/"), Just("HTTP://i.x/"), Just(" data:image/png;base64,"),
                          Just("Data:Image/jpeg;base64,")], size)
            .prop_map(|(p, s)| (json!(p), s)),
        1 => Just((json!("keepsake-image:sha256:"), 100usize)),
        1 => prop_oneof![Just(json!(null)), Just(json!(3)), Just(json!({"url": "https://x"})),
                         Just(json!("ftp://x")), Just(json!(""))].prop_map(|v| (v, 0usize)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn running_gate_keeps_exactly_what_pick_keeps(items in proptest::collection::vec(turn_item(), 0..16)) {
        // make every string unique and remember its URL chars
        let mut sizes: HashMap<String, usize> = HashMap::new();
        let list: Vec<Value> = items
            .iter()
            .enumerate()
            .map(|(k, (v, s))| match v.as_str() {
                Some(p) if p.starts_with("keepsake-image") => {
                    let u = format!("{p}{:064x}", k);
                    sizes.insert(u.clone(), *s);
                    json!(u)
                }
                Some(p) if !p.is_empty() && !p.starts_with("ftp") => {
                    let u = format!("{p}{k}");
                    sizes.insert(u.clone(), *s);
                    json!(u)
                }
                _ => v.clone(),
            })
            .collect();
        let f = |u: &str| sizes.get(u).copied().unwrap_or_else(|| u.encode_utf16().count());
        let p = pick_turn_images(Some(&list), &f);
        let mut gate = Gate { kept: Vec::new(), total: 0 };
        let reasons: Vec<Option<&str>> = list.iter().map(|v| gate.offer(v, &f)).collect();
        prop_assert_eq!(&p.images, &gate.kept);
        prop_assert_eq!(p.reasons.iter().map(|r| r.map(DropReason::as_str)).collect::<Vec<_>>(), reasons);
        prop_assert_eq!(p.dropped, list.len() - p.images.len());
        prop_assert!(p.images.len() <= 8);
        prop_assert!(p.images.iter().map(|u| f(u)).sum::<usize>() <= 3_145_728);
        // first fit: every item dropped for budget would not have fit at its turn (checked by
        // the gate), and kept images are a subsequence of the input in order
        let strs: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        let mut pos = 0;
        for k in &p.images {
            let found = strs[pos..].iter().position(|s| s == k);
            prop_assert!(found.is_some());
            pos += found.unwrap() + 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// §6.5 byte-budget plan
// ---------------------------------------------------------------------------------------------

#[test]
fn budget_plan_examples() {
    assert!(bound_victims(&[], 10).is_empty());
    assert!(bound_victims(&[100], 10).is_empty(), "a single entry is spared");
    assert!(bound_victims(&[5, 5], 10).is_empty(), "total equal to the budget fits");
    assert_eq!(bound_victims(&[6, 6, 6], 10), vec![0, 1]);
    assert_eq!(bound_victims(&[6, 6, 6], 12), vec![0]);
    assert_eq!(bound_victims(&[1, 100], 10), vec![0], "the newest is spared even alone over budget");
    assert_eq!(bound_victims(&[0, 11], 10), vec![0]);
    assert_eq!(bound_victims(&[1, 1, 1, 9], 10), vec![0, 1]);
    assert_eq!(bound_victims(&[5_000_000, 4_000_000, 1_000], UNSEEN_IMAGE_BYTES_BUDGET), vec![0]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn budget_plan_is_a_minimal_prefix_sparing_the_newest(
        sizes in proptest::collection::vec(0usize..1_000, 0..12),
        budget in 0usize..4_000,
        shrink in proptest::collection::vec(0.0f64..=1.0, 12),
    ) {
        let v = bound_victims(&sizes, budget);
        let total: usize = sizes.iter().sum();
        if sizes.len() < 2 || total <= budget {
            prop_assert!(v.is_empty());
            return Ok(());
        }
        let k = v.len();
        prop_assert_eq!(&v, &(0..k).collect::<Vec<_>>(), "victims are the oldest, in order");
        prop_assert!(k >= 1);
        prop_assert!(!v.contains(&(sizes.len() - 1)), "the newest is never a victim");
        let remaining: usize = sizes[k..].iter().sum();
        prop_assert!(remaining <= budget || k == sizes.len() - 1);
        // minimal: before taking the last victim the total was still over the budget
        prop_assert!(sizes[k - 1..].iter().sum::<usize>() > budget);
        // second pass over the thumbnailed sizes: only already-thumbnailed entries are walked
        let after: Vec<usize> = sizes
            .iter()
            .enumerate()
            .map(|(j, s)| if j < k { (*s as f64 * shrink[j]) as usize } else { *s })
            .collect();
        let v2 = bound_victims(&after, budget);
        prop_assert!(v2.len() <= k, "second plan {:?} walks beyond the first {:?}", v2, v);
        if after.iter().sum::<usize>() <= budget {
            prop_assert!(v2.is_empty());
        }
        // and a plan on a list that already fits is empty
        prop_assert!(bound_victims(&sizes[k..], budget).is_empty() || k == sizes.len() - 1);
    }
}

// ---------------------------------------------------------------------------------------------
// §2.4 attach text layout, header split; §7.4 summary decision and write-back
// ---------------------------------------------------------------------------------------------

fn full_ctx() -> Ctx {
    Ctx {
        url: "https://e.x/a?b=1".into(),
        title: "T — 标题".into(),
        header: Some("Site: e.x\nAuthor: A\n".into()),
        mode: "full".into(),
        format: Some("markdown".into()),
        fallback: true,
        changed_since: Some("2 days ago".into()),
        body: "Body line 1\n---\nBody line 2".into(),
    }
}

#[test]
fn attach_text_layout_is_exact() {
    assert_eq!(
        full_ctx().text(),
        "[Page context attached by Keepsake]\nURL: https://e.x/a?b=1\nTitle: T — 标题\nSite: e.x\nAuthor: A\n\
         Mode: full | markdown (fallback to full)\n\
         Note: this page's content has changed since it was last attached (previously attached 2 days ago).\n\
         ---\n\nBody line 1\n---\nBody line 2"
    );
    let plain = Ctx { header: None, format: None, fallback: false, changed_since: None, ..full_ctx() };
    assert_eq!(
        plain.text(),
        "[Page context attached by Keepsake]\nURL: https://e.x/a?b=1\nTitle: T — 标题\nMode: full\n---\n\nBody line 1\n---\nBody line 2"
    );
    let empty_format = Ctx { format: Some(String::new()), ..plain.clone() };
    assert_eq!(empty_format.text(), plain.text(), "an empty format adds nothing");
    let fmt_only = Ctx { format: Some("text".into()), ..plain.clone() };
    assert!(fmt_only.text().contains("\nMode: full | text\n---\n\n"));
    let fb_only = Ctx { fallback: true, ..plain.clone() };
    assert!(fb_only.text().contains("\nMode: full (fallback to full)\n---\n\n"));
    let shot = Ctx { mode: "screenshot".into(), body: "(screenshot)".into(), ..plain };
    assert!(shot.text().ends_with("\nMode: screenshot\n---\n\n(screenshot)"));
}

#[test]
fn ctx_round_trips_through_its_metadata() {
    let c = full_ctx();
    let meta = c.meta_json();
    assert!(meta.get("body").is_none());
    assert_eq!(Ctx::from_meta(&meta, c.body.clone()), Some(c.clone()));
    assert_eq!(
        serde_json::from_value::<Ctx>(json!({"url": "u", "title": "t", "mode": "m", "body": "b"}))
            .unwrap()
            .text(),
        format!("{PREFIX}\nURL: u\nTitle: t\nMode: m\n---\n\nb")
    );
    assert!(serde_json::from_value::<Ctx>(json!({"url": "u", "title": "t", "mode": "m"})).is_err());
    assert!(serde_json::from_value::<Ctx>(json!({"url": 1, "title": "t", "mode": "m", "body": "b"})).is_err());
}

#[test]
fn header_split_follows_the_first_mode_line() {
    let t = full_ctx().text();
    let (h, b) = split_header(&t).unwrap();
    assert_eq!(b, "Body line 1\n---\nBody line 2");
    assert_eq!(format!("{h}{b}"), t);
    assert!(h.ends_with("(previously attached 2 days ago).\n---\n\n"));
    // a `---` before the Mode line does not count
    let t = format!("{PREFIX}\nURL: u\n---\nMode: m\nx\n---\n\nbody");
    assert_eq!(split_header(&t), Some((&t[..t.len() - 4], "body")));
    // no blank line after `---`: the header ends with the `---` line
    let t = format!("{PREFIX}\nMode: m\n---\nbody");
    assert_eq!(split_header(&t), Some((&t[..t.len() - 4], "body")));
    // only the one blank line after `---` belongs to the header
    let t = format!("{PREFIX}\nMode: m\n---\n\n\nbody");
    assert_eq!(split_header(&t).unwrap().1, "\nbody");
    // `----` and ` ---` are not the `---` line
    let t = format!("{PREFIX}\nMode: m\n----\n ---\n---\n\nbody");
    assert_eq!(split_header(&t).unwrap().1, "body");
    // text ending at the `---` line
    let t = format!("{PREFIX}\nMode: m\n---");
    assert_eq!(split_header(&t), Some((t.as_str(), "")));
    // no structure
    assert_eq!(split_header("no mode line\n---\n\nbody"), None);
    assert_eq!(split_header(&format!("{PREFIX}\nMode: m\nno rule")), None);
    assert_eq!(split_header(&format!("{PREFIX}\n Mode: m\n---\n\nb")), None, "Mode must start a line");
    assert_eq!(split_header(""), None);
}

fn inputs(entry: &Value) -> SummaryInputs<'_> {
    SummaryInputs {
        entry,
        meta: None,
        paper: false,
        summary_source: None,
        auto_summarize: true,
        threshold: 100,
    }
}

fn ctx_with(mode: &str, body: &str) -> Ctx {
    Ctx {
        url: "u".into(),
        title: "t".into(),
        header: None,
        mode: mode.into(),
        format: None,
        fallback: false,
        changed_since: None,
        body: body.into(),
    }
}

#[test]
fn summary_needed_only_above_the_threshold() {
    let at = json!({"role": "user", "content": ctx_with("full", &"x".repeat(100)).text()});
    let over = json!({"role": "user", "content": ctx_with("full", &"x".repeat(101)).text()});
    let d = summary_decision(&inputs(&at));
    assert!(!d.needed, "equal to the threshold is not longer than it");
    assert_eq!(d.source.as_deref(), Some("x".repeat(100).as_str()));
    let d = summary_decision(&inputs(&over));
    assert!(d.needed);
    assert_eq!(d.family, "generic");
    // UTF-16 units: 51 emoji = 102 units > 100
    let emoji = json!({"role": "user", "content": ctx_with("full", &"😀".repeat(51)).text()});
    assert!(summary_decision(&inputs(&emoji)).needed);
    // 101 CJK chars (303 bytes) vs threshold 101 → not needed
    let cjk = json!({"role": "user", "content": ctx_with("full", &"中".repeat(101)).text()});
    assert!(!summary_decision(&SummaryInputs { threshold: 101, ..inputs(&cjk) }).needed);
    // the threshold passed is the one applied (the caller maps 0 to 100,000)
    assert!(summary_decision(&SummaryInputs { threshold: 0, ..inputs(&at) }).needed);
    assert!(!summary_decision(&SummaryInputs { threshold: 100_000, ..inputs(&over) }).needed);
}

#[test]
fn summary_refusals() {
    let big = ctx_with("full", &"x".repeat(500)).text();
    let e = json!({"role": "user", "content": big});
    assert!(!summary_decision(&SummaryInputs { auto_summarize: false, ..inputs(&e) }).needed);
    let done = json!({"role": "user", "summarized": true, "content": big});
    assert!(!summary_decision(&inputs(&done)).needed);
    let shot = json!({"role": "user", "content": ctx_with("screenshot", &"x".repeat(500)).text()});
    assert!(!summary_decision(&inputs(&shot)).needed);
    let shot_meta = ctx_with("screenshot", "").meta_json();
    assert!(!summary_decision(&SummaryInputs { meta: Some(&shot_meta), ..inputs(&e) }).needed);
    let empty = json!({"role": "user", "content": ctx_with("full", "").text()});
    assert!(!summary_decision(&SummaryInputs { threshold: 0, ..inputs(&empty) }).needed, "empty source");
    let raw = json!({"role": "user", "content": format!("{PREFIX}\n{}", "x".repeat(500))});
    let d = summary_decision(&SummaryInputs { threshold: 0, ..inputs(&raw) });
    assert!(!d.needed, "no `---` structure → not summarizable");
    assert_eq!(d.source, None);
}

#[test]
fn summary_source_prefers_the_recorded_one_and_measures_all_parts() {
    let e = json!({"role": "user", "content": ctx_with("full", "short").text()});
    let recorded = "r".repeat(150);
    let d = summary_decision(&SummaryInputs { summary_source: Some(&recorded), ..inputs(&e) });
    assert!(d.needed);
    assert_eq!(d.source.as_deref(), Some(recorded.as_str()));
    // §11.2: the body part spans every text part joined with `\n`
    let arr = json!({"role": "user", "content": [
        text_part(&ctx_with("pdf", "part one [图1]").text()),
        img_part("https://i.x/1"),
        {"type": "input_text", "text": "x".repeat(90)},
    ]});
    let d = summary_decision(&inputs(&arr));
    assert_eq!(d.source, Some(format!("part one [图1]\n{}", "x".repeat(90))));
    assert!(d.needed, "104 units > 100");
}

#[test]
fn summary_family() {
    let body = "x".repeat(200);
    for (mode, fam) in [("youtube", "video"), ("bilibili", "video"), ("full", "generic"), ("pdf", "generic")]
    {
        let e = json!({"role": "user", "content": ctx_with(mode, &body).text()});
        assert_eq!(summary_decision(&inputs(&e)).family, fam, "{mode}");
        let meta = ctx_with(mode, "").meta_json();
        let plain = json!({"role": "user", "content": ctx_with("full", &body).text()});
        assert_eq!(summary_decision(&SummaryInputs { meta: Some(&meta), ..inputs(&plain) }).family, fam);
    }
    let formatted = json!({"role": "user", "content": Ctx { format: Some("md".into()), fallback: true, ..ctx_with("youtube", &body) }.text()});
    assert_eq!(summary_decision(&inputs(&formatted)).family, "video");
    let e = json!({"role": "user", "content": ctx_with("full", &body).text()});
    assert_eq!(summary_decision(&SummaryInputs { paper: true, ..inputs(&e) }).family, "paper");
    let v = json!({"role": "user", "videoSrc": {"platform": "x", "url": "u", "tabId": 1}, "content": ctx_with("full", &body).text()});
    assert_eq!(summary_decision(&inputs(&v)).family, "video");
    assert_eq!(
        summary_decision(&SummaryInputs { paper: true, ..inputs(&v) }).family,
        "video",
        "video wins over paper"
    );
    let yt = json!({"role": "user", "content": ctx_with("youtube", &body).text()});
    assert!(summary_decision(&inputs(&yt)).needed, "video attaches are summarized too");
}

#[test]
fn summary_body_groups_the_number() {
    assert_eq!(
        summary_body(123_456, "Short summary"),
        "[Keepsake: auto-condensed from 123,456 chars \u{2014} some detail may be lost]\n\nShort summary"
    );
    assert_eq!(
        summary_body(999, "s"),
        "[Keepsake: auto-condensed from 999 chars \u{2014} some detail may be lost]\n\ns"
    );
    assert!(summary_body(1_234_567, "s").contains("from 1,234,567 chars"));
    assert!(summary_body(100_001, "s").contains("from 100,001 chars"));
    assert_eq!(grouped(1_000), "1,000");
    assert!(summary_is_blank(" \n\t\u{3000}"));
    assert!(!summary_is_blank(" x "));
}

#[test]
fn apply_summary_rebuilds_with_the_recorded_header() {
    let c = full_ctx();
    let e = json!({"role": "user", "attachId": "a", "videoSrc": {"platform": "p"}, "content": c.text()});
    let out = apply_summary(&e, Some(&c.meta_json()), 123_456, "The gist.").unwrap();
    let expected_text = format!(
        "{}[Keepsake: auto-condensed from 123,456 chars \u{2014} some detail may be lost]\n\nThe gist.",
        c.header_part()
    );
    assert_eq!(
        out,
        json!({"role": "user", "attachId": "a", "videoSrc": {"platform": "p"}, "content": expected_text, "summarized": true})
    );
    // recorded metadata wins over the stored header
    let other = Ctx { title: "Recorded".into(), ..c.clone() };
    let out = apply_summary(&e, Some(&other.meta_json()), 1, "s").unwrap();
    assert!(out["content"].as_str().unwrap().contains("\nTitle: Recorded\n"));
}

#[test]
fn apply_summary_without_metadata_keeps_the_stored_header() {
    let text = format!("{PREFIX}\nURL: u\nTitle: t\nExtra: kept\nMode: raw\n---\n\nold body\n---\nmore");
    let e = json!({"role": "user", "content": text, "imagesSeen": true});
    let out = apply_summary(&e, None, 1_000_000, "new").unwrap();
    assert_eq!(
        out["content"],
        json!(format!("{PREFIX}\nURL: u\nTitle: t\nExtra: kept\nMode: raw\n---\n\n[Keepsake: auto-condensed from 1,000,000 chars \u{2014} some detail may be lost]\n\nnew"))
    );
    assert_eq!(out["summarized"], true);
    assert_eq!(out["imagesSeen"], true);
    let raw = json!({"role": "user", "content": format!("{PREFIX}\nno structure")});
    assert_eq!(apply_summary(&raw, None, 1, "s"), None);
}

#[test]
fn apply_summary_reinterleaves_images() {
    let c = ctx_with("pdf", "see [图1]\nand [图2]");
    let e = json!({"role": "user", "attachId": "p", "content": [
        text_part(&format!("{PREFIX}\nURL: u\nTitle: t\nMode: pdf\n---\n\nsee [图1]")),
        img_part("https://i.x/1"),
        {"type": "text", "text": "and [图2]"},
        {"type": "image_url", "image_url": "https://i.x/2"},
    ]});
    let out = apply_summary(&e, Some(&c.meta_json()), 2_048, "Summary keeps [图2] here.\nEnd.").unwrap();
    let head = format!(
        "{PREFIX}\nURL: u\nTitle: t\nMode: pdf\n---\n\n[Keepsake: auto-condensed from 2,048 chars \u{2014} some detail may be lost]\n\nSummary keeps [图2] here."
    );
    assert_eq!(norm(&out["content"]), vec![t(&head), i("https://i.x/2"), t("End."), i("https://i.x/1")]);
    assert_eq!(out["summarized"], true);
    assert_eq!(out["attachId"], "p");
}
