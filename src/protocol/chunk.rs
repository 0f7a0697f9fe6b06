//! Replies larger than one frame go out as chunk frames
//! `{"id", "chunk": {"index": i, "count": n}, "data": "<piece of the reply's JSON text>"}`;
//! the `data` pieces joined in order are the reply's JSON text.

use serde_json::{json, Value};

use super::limits::{CHUNK_DATA_MAX, WHOLE_REPLY_MAX};

/// Bytes a char takes inside a JSON string literal as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Split `text` at char boundaries into pieces whose escaped length is at most `max`.
pub fn split_pieces(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, c) in text.char_indices() {
        let w = escaped_len(c);
        if size + w > max && i > start {
            pieces.push(&text[start..i]);
            start = i;
            size = 0;
        }
        size += w;
    }
    if start < text.len() || pieces.is_empty() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// The frames (as JSON texts) that carry `reply_json` for request `id`: the reply itself when it
/// fits, else chunk frames.
pub fn frames_for_reply(id: &Value, reply_json: String) -> Vec<String> {
    if reply_json.len() <= WHOLE_REPLY_MAX {
        return vec![reply_json];
    }
    let pieces = split_pieces(&reply_json, CHUNK_DATA_MAX);
    let count = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(index, data)| {
            json!({"id": id, "chunk": {"index": index, "count": count}, "data": data}).to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::limits::MAX_OUTBOUND_FRAME;

    #[test]
    fn small_replies_are_sent_whole() {
        let f = frames_for_reply(&json!(1), "{\"id\":1}".into());
        assert_eq!(f, vec!["{\"id\":1}".to_string()]);
    }

    #[test]
    fn large_replies_reassemble_exactly_and_every_frame_fits() {
        // worst case for escaping: quotes and control characters
        let payload: String = "\"\u{1}é😀\\".repeat(400_000);
        let reply = json!({"id": "x", "ok": true, "result": payload}).to_string();
        let frames = frames_for_reply(&json!("x"), reply.clone());
        assert!(frames.len() > 1);
        let mut joined = String::new();
        for (i, f) in frames.iter().enumerate() {
            assert!(f.len() <= MAX_OUTBOUND_FRAME, "frame {i} is {} bytes", f.len());
            let v: Value = serde_json::from_str(f).unwrap();
            assert_eq!(v["chunk"]["index"], i);
            assert_eq!(v["chunk"]["count"], frames.len());
            joined.push_str(v["data"].as_str().unwrap());
        }
        assert_eq!(joined, reply);
    }
}
