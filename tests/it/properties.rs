//! Property tests of the pure layers: chunking, framing, the trim rule, cuts and snippets.

use keepsake_host::domain::history::{trim_count, MAX_HISTORY, MAX_TOTAL_CHARS};
use keepsake_host::domain::sessions::snippet;
use keepsake_host::domain::text::{cut_u16, lower, u16_len};
use keepsake_host::protocol::chunk::frames_for_reply;
use keepsake_host::protocol::envelope::decode_request;
use keepsake_host::protocol::frame::{read_frame, write_frame};
use keepsake_host::protocol::limits::MAX_OUTBOUND_FRAME;
use proptest::prelude::*;
use serde_json::{json, Value};

proptest! {
    // Large payloads are what chunking is about; 48 of them keep this test to a few seconds.
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn chunks_reassemble_and_fit(text in "\\PC{1,2000}", reps in 1usize..700) {
        let payload = text.repeat(reps);
        let reply = json!({"id": 1, "ok": true, "result": payload}).to_string();
        let frames = frames_for_reply(&json!(1), reply.clone());
        let mut joined = String::new();
        for f in &frames {
            prop_assert!(f.len() <= MAX_OUTBOUND_FRAME);
            if frames.len() == 1 {
                joined.push_str(f);
            } else {
                let v: Value = serde_json::from_str(f).unwrap();
                joined.push_str(v["data"].as_str().unwrap());
            }
        }
        prop_assert_eq!(joined, reply);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn frames_round_trip(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20)) {
        let mut wire = Vec::new();
        for b in &bodies {
            write_frame(&mut wire, b).unwrap();
        }
        let mut r = &wire[..];
        for b in &bodies {
            prop_assert_eq!(&read_frame(&mut r, 1 << 20).unwrap().unwrap(), b);
        }
        prop_assert!(read_frame(&mut r, 1 << 20).unwrap().is_none());
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode_request(&bytes);
    }

    #[test]
    fn trim_rule_holds(chars in proptest::collection::vec(0usize..200_000, 0..120)) {
        let k = trim_count(&chars);
        let kept = &chars[k..];
        prop_assert!(kept.len() <= MAX_HISTORY);
        if !chars.is_empty() {
            prop_assert!(!kept.is_empty(), "never trimmed to zero");
        }
        let total: usize = kept.iter().sum();
        prop_assert!(total <= MAX_TOTAL_CHARS || kept.len() == 1);
        // minimal: keeping one more (if allowed by the count cap) would break the budget
        if k > 0 && chars.len() - k < MAX_HISTORY {
            prop_assert!(total + chars[k - 1] > MAX_TOTAL_CHARS);
        }
        // idempotent
        prop_assert_eq!(trim_count(kept), 0);
    }

    #[test]
    fn cuts_never_exceed_and_never_split_pairs(s in "\\PC{0,80}", n in 0usize..100) {
        let c = cut_u16(&s, n);
        prop_assert!(u16_len(c) <= n);
        prop_assert!(s.starts_with(c));
        // maximal: the next char would not fit
        if c.len() < s.len() {
            let next = s[c.len()..].chars().next().unwrap();
            prop_assert!(u16_len(c) + next.len_utf16() > n);
        }
    }

    #[test]
    fn snippet_contains_the_hit(pre in "\\PC{0,200}", hit in "[a-zA-Z中文]{1,6}", post in "\\PC{0,200}") {
        let text = format!("{pre}{hit}{post}");
        let q = lower(&hit);
        let s = snippet(&text, &q).expect("the hit is in the text");
        prop_assert!(lower(&s).contains(&q.split_whitespace().collect::<Vec<_>>().join(" ")));
        prop_assert!(s.chars().count() <= 40 + hit.chars().count() + 80 + 2 + 8);
    }
}
