//! The request bodies this connection returned as text (`request.build` with `since`,
//! PROTOCOL.md "Body deltas"), so the next build can send only what changed. Memory only and
//! per process (Chrome starts one host per port): a new port, or an evicted body, just means one
//! full `bodyText`. Bounded by count and bytes.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use crate::domain::delta::{diff, text_hash, to_u16, u16_units, wire_cost, U16Piece};

/// How many bodies are held (a turn, its rescue or continuation rebuild, a background stream's).
pub const MAX_HELD_BODIES: usize = 4;
/// Total bytes of held body text; a body over it on its own is not held.
pub const MAX_HELD_BYTES: usize = 16 * 1024 * 1024;

/// Bodies by `bodyHash`, oldest first.
#[derive(Default)]
pub struct BodyCache {
    held: VecDeque<(String, String)>,
    bytes: usize,
}

impl BodyCache {
    pub fn get(&self, hash: &str) -> Option<&str> {
        self.held.iter().find(|(h, _)| h == hash).map(|(_, t)| t.as_str())
    }

    /// Hold `text` as the newest body, evicting the oldest past either bound.
    pub fn remember(&mut self, hash: String, text: String) {
        if let Some(i) = self.held.iter().position(|(h, _)| *h == hash) {
            if let Some(e) = self.held.remove(i) {
                self.bytes -= e.1.len();
            }
        }
        if text.len() > MAX_HELD_BYTES {
            return;
        }
        self.bytes += text.len();
        self.held.push_back((hash, text));
        while self.held.len() > MAX_HELD_BODIES || self.bytes > MAX_HELD_BYTES {
            match self.held.pop_front() {
                Some((_, t)) => self.bytes -= t.len(),
                None => break,
            }
        }
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A `request.build` result with `body` replaced by `bodyHash`, `bodyLength` and either
/// `bodyDelta` (when `since` names a held body and the delta is smaller) or `bodyText`. Every
/// other field is kept as is. The new body is held for the next `since`.
pub fn text_result(result: Value, since: &str, cache: &mut BodyCache) -> Value {
    let Value::Object(mut fields) = result else { return result };
    let text = fields.shift_remove("body").unwrap_or(Value::Null).to_string();
    let hash = text_hash(&text);
    let mut out = Map::new();
    out.insert("bodyHash".into(), json!(hash));
    out.insert("bodyLength".into(), json!(u16_units(text.as_bytes())));
    let delta = cache.get(since).and_then(|old| {
        let pieces = diff(old, &text);
        (wire_cost(&pieces) < text.len()).then(|| ops_json(&to_u16(old, &pieces)))
    });
    match delta {
        Some(ops) => {
            out.insert("bodyDelta".into(), json!({"since": since, "ops": ops}));
        }
        None => {
            out.insert("bodyText".into(), json!(text));
        }
    }
    out.extend(fields);
    cache.remember(hash, text);
    Value::Object(out)
}

/// `[[start, end] | "literal", …]`.
fn ops_json(pieces: &[U16Piece]) -> Value {
    Value::Array(
        pieces
            .iter()
            .map(|p| match p {
                U16Piece::Copy(a, b) => json!([a, b]),
                U16Piece::Insert(t) => json!(t),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_count_and_bytes() {
        let mut c = BodyCache::default();
        for i in 0..6 {
            c.remember(format!("h{i}"), "x".repeat(10));
        }
        assert_eq!(c.len(), MAX_HELD_BODIES);
        assert!(c.get("h0").is_none() && c.get("h1").is_none() && c.get("h5").is_some());
        c.remember("big".into(), "y".repeat(MAX_HELD_BYTES - 5));
        assert!(c.bytes() <= MAX_HELD_BYTES);
        assert!(c.get("big").is_some());
        c.remember("huge".into(), "z".repeat(MAX_HELD_BYTES + 1));
        assert!(c.get("huge").is_none());
        // holding the same hash again moves it to the newest end without double counting
        let mut c = BodyCache::default();
        c.remember("a".into(), "1".repeat(5));
        c.remember("b".into(), "2".repeat(5));
        c.remember("a".into(), "1".repeat(5));
        assert_eq!((c.len(), c.bytes()), (2, 10));
    }

    #[test]
    fn text_result_replaces_body_and_keeps_the_rest() {
        let mut c = BodyCache::default();
        let r =
            json!({"body": {"messages": ["a".repeat(500)]}, "userEntry": {"role": "user"}, "source": "live"});
        let full = text_result(r.clone(), "", &mut c);
        assert!(full.get("body").is_none());
        let text = full["bodyText"].as_str().unwrap().to_owned();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), r["body"]);
        assert_eq!(full["userEntry"], r["userEntry"]);
        assert_eq!(full["bodyHash"], json!(text_hash(&text)));
        let again = text_result(r, full["bodyHash"].as_str().unwrap(), &mut c);
        assert_eq!(again["bodyDelta"]["ops"], json!([[0, text.len()]]));
        assert_eq!(again["bodyHash"], full["bodyHash"]);
    }
}
