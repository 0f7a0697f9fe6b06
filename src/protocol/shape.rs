//! The memory budget of one request: a frame's structure is measured in one linear pass over
//! its bytes, with no allocation, before any tree of values is built.
//!
//! A parsed JSON value costs far more than its text: `0,` is 2 bytes on the wire and about 90
//! bytes as a `serde_json::Value` in a growing array, so a 64 MiB frame of `[0,0,…]` (33.5 M
//! values) peaked at 2.8 GiB. Counting first bounds the tree: every string (object keys
//! included), number, literal, array and object is one value, and a frame over
//! [`MAX_FRAME_VALUES`] values, [`MAX_FRAME_DEPTH`] levels of nesting or [`MAX_STRING_BYTES`]
//! bytes in one string is refused with `too_large` naming the limit. The pass does not validate
//! JSON (the parser that follows does); it only has to count correctly for valid JSON and stay
//! linear and allocation-free for anything.

use super::limits::{MAX_FRAME_DEPTH, MAX_FRAME_VALUES, MAX_STRING_BYTES};

/// What the pass measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    /// Strings (keys included), numbers, literals, arrays and objects.
    pub values: usize,
    /// Deepest nesting of arrays and objects.
    pub depth: usize,
    /// Bytes of the longest string as written (escapes counted as written).
    pub longest_string: usize,
    /// Byte range of the top-level `"id"` member's value, when there is one.
    pub id_span: Option<(usize, usize)>,
}

/// The limits a frame must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub values: usize,
    pub depth: usize,
    pub string_bytes: usize,
}

impl Limits {
    /// The limits of every inbound frame.
    pub const FRAME: Limits =
        Limits { values: MAX_FRAME_VALUES, depth: MAX_FRAME_DEPTH, string_bytes: MAX_STRING_BYTES };

    /// The first limit `shape` exceeds, as a message for `too_large`.
    pub fn exceeded(&self, s: &Shape, frame_bytes: usize) -> Option<String> {
        if s.depth > self.depth {
            return Some(format!(
                "the request nests arrays and objects {} levels deep, over the limit of {}",
                s.depth, self.depth
            ));
        }
        if s.longest_string > self.string_bytes {
            return Some(format!(
                "the request holds a string of {} bytes, over the limit of {} bytes for one string",
                s.longest_string, self.string_bytes
            ));
        }
        if s.values > self.values {
            return Some(format!(
                "the request holds {} JSON values (strings, numbers, arrays, objects), over the limit of {} per \
                 message ({frame_bytes} bytes); send it in pieces",
                s.values, self.values
            ));
        }
        None
    }
}

/// Measure `b` in one pass. Linear in `b.len()` for any input, valid JSON or not.
pub fn measure(b: &[u8]) -> Shape {
    let mut s = Shape::default();
    let mut depth = 0usize;
    let mut i = 0usize;
    // inside a number or literal (`123`, `true`): it counted once, at its first byte
    let mut in_scalar = false;
    // at depth 1 of a top-level object, the next string is a member name
    let mut expect_key = false;
    let mut top_is_object = false;
    // the top-level member being read is `"id"`: its value starts at the next token
    let mut id_next = false;
    let mut id_start: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                in_scalar = false;
                s.values += 1;
                let start = i + 1;
                let mut j = start;
                // the closing quote: the next `"` not escaped by a backslash
                loop {
                    if j >= b.len() {
                        j = b.len();
                        break;
                    }
                    match memchr::memchr2(b'"', b'\\', &b[j..]) {
                        None => {
                            j = b.len();
                            break;
                        }
                        Some(k) if b[j + k] == b'\\' => j += k + 2,
                        Some(k) => {
                            j += k;
                            break;
                        }
                    }
                }
                let end = j.min(b.len());
                s.longest_string = s.longest_string.max(end - start);
                if depth == 1 && top_is_object {
                    if expect_key {
                        expect_key = false;
                        id_next = &b[start..end] == b"id";
                    } else if id_next {
                        id_start = Some(i);
                        id_next = false;
                    }
                }
                i = end + 1;
                if let Some(st) = id_start.filter(|&st| depth == 1 && b.get(st) == Some(&b'"')) {
                    // the last top-level `"id"` wins, as in the parser's map
                    s.id_span = Some((st, i.min(b.len())));
                    id_start = None;
                }
                continue;
            }
            b'{' | b'[' => {
                in_scalar = false;
                s.values += 1;
                if depth == 0 && c == b'{' && !top_is_object && s.values == 1 {
                    top_is_object = true;
                }
                if depth == 1 && id_next {
                    // an array or object as the id: not a valid id; not recorded
                    id_next = false;
                }
                depth += 1;
                s.depth = s.depth.max(depth);
                expect_key = depth == 1 && c == b'{';
            }
            b'}' | b']' => {
                in_scalar = false;
                if depth == 1 {
                    close_id(&mut s, &mut id_start, i);
                }
                depth = depth.saturating_sub(1);
            }
            b',' => {
                in_scalar = false;
                if depth == 1 {
                    close_id(&mut s, &mut id_start, i);
                    expect_key = top_is_object;
                }
            }
            b':' | b' ' | b'\t' | b'\n' | b'\r' => in_scalar = false,
            _ => {
                if !in_scalar {
                    in_scalar = true;
                    s.values += 1;
                    if depth == 1 && id_next {
                        id_start = Some(i);
                        id_next = false;
                    }
                }
            }
        }
        i += 1;
    }
    s
}

/// A number id ends at the `,` or `}` after it (a string id was recorded at its closing quote).
fn close_id(s: &mut Shape, id_start: &mut Option<usize>, at: usize) {
    if let Some(st) = id_start.take() {
        s.id_span = Some((st, at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> usize {
        measure(text.as_bytes()).values
    }

    /// The exact count for valid JSON: every node of the parsed tree plus every object key.
    fn nodes(v: &serde_json::Value) -> usize {
        1 + match v {
            serde_json::Value::Array(a) => a.iter().map(nodes).sum(),
            serde_json::Value::Object(m) => m.values().map(|x| 1 + nodes(x)).sum(),
            _ => 0,
        }
    }

    #[test]
    fn counts_every_value_keys_included() {
        for text in [
            r#"{"id":1,"op":"x","args":{"a":[1,2.5e3,-4,true,false,null,"s"],"b":{}}}"#,
            r#"[0,0,0]"#,
            r#"[{},{},[]]"#,
            r#" { "k" : "a\"b\\" , "n" : [ 1 , "]" , "}" , "," ] } "#,
            r#""just a string""#,
            "12345",
        ] {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(values(text), nodes(&v), "{text}");
        }
    }

    #[test]
    fn depth_and_longest_string() {
        let s = measure(br#"{"a":[[["xyz"]]],"b":"\u00e9\"\\"}"#);
        assert_eq!(s.depth, 4);
        assert_eq!(s.longest_string, r#"\u00e9\"\\"#.len());
    }

    #[test]
    fn finds_the_top_level_id_wherever_it_is() {
        for (text, id) in [
            (r#"{"id":"r-1","op":"x"}"#, r#""r-1""#),
            (r#"{"op":"x","args":{"id":"inner"},"id":42}"#, "42"),
            (r#"{ "id" : 7 , "op":"x"}"#, "7 "),
            (r#"{"op":"x","id":"a\"b"}"#, r#""a\"b""#),
            (r#"{"args":{"x":[{"id":1}]},"id":"top"}"#, r#""top""#),
        ] {
            let s = measure(text.as_bytes());
            let (a, b) = s.id_span.unwrap_or_else(|| panic!("no id in {text}"));
            assert_eq!(&text[a..b], id, "{text}");
        }
        assert_eq!(measure(br#"{"op":"x"}"#).id_span, None);
        let dup = br#"{"id":1,"op":"x","id":"last"}"#;
        let (a, b) = measure(dup).id_span.unwrap();
        assert_eq!(&dup[a..b], br#""last""#, "the last id wins, as in the parsed map");
        assert_eq!(measure(br#"{"id":[1],"op":"x"}"#).id_span, None);
        assert_eq!(measure(br#"[{"id":1}]"#).id_span, None);
    }

    #[test]
    fn garbage_is_measured_without_panicking() {
        for text in [&b"\"unterminated"[..], b"\"\\", b"}}}]]]", b"{\"id\":", b"\xff\xfe{[\"", b""] {
            let _ = measure(text);
        }
    }

    #[test]
    fn the_limits_name_what_was_exceeded() {
        let l = Limits { values: 5, depth: 2, string_bytes: 4 };
        let m = l.exceeded(&measure(b"[0,0,0,0,0,0]"), 13).unwrap();
        assert!(m.contains("7 JSON values") && m.contains("limit of 5"), "{m}");
        let m = l.exceeded(&measure(b"[[[0]]]"), 7).unwrap();
        assert!(m.contains("3 levels") && m.contains("limit of 2"), "{m}");
        let m = l.exceeded(&measure(br#"["12345"]"#), 9).unwrap();
        assert!(m.contains("string of 5 bytes"), "{m}");
        assert_eq!(l.exceeded(&measure(b"[[1]]"), 5), None);
    }
}
