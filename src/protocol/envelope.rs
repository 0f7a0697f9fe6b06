//! Request and reply envelopes.
//!
//! Request: `{"id": <string|number>, "op": "<area.op>", "args": {…}}` (`args` optional).
//! Reply: `{"id", "ok": true, "result": …}` or `{"id", "ok": false, "error": {"code", "message"}}`.
//! Event: `{"event": "changed", …}` (no id).

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::error::HostError;
use super::limits::REQUEST_ID_MAX;
use super::shape::{measure, Limits};

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Value,
    pub op: String,
    pub args: Map<String, Value>,
}

/// A request that could not be validated: the error plus whatever id could be recovered
/// (`null` when none), so the reply still reaches the right caller where possible.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Value,
    pub error: HostError,
}

fn valid_id(v: &Value) -> bool {
    match v {
        Value::String(s) => s.len() <= REQUEST_ID_MAX,
        Value::Number(_) => true,
        _ => false,
    }
}

/// Decode a frame body into a request.
pub fn decode_request(body: &[u8]) -> Result<Request, Rejected> {
    let reject = |id: Value, m: String| Rejected { id, error: HostError::bad_request(m) };
    if body.is_empty() {
        return Err(reject(Value::Null, "empty frame".into()));
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| reject(Value::Null, format!("frame is not valid UTF-8: {e}")))?;
    // The memory budget: measure the structure before building any tree (see `shape`).
    let shape = measure(body);
    if let Some(m) = Limits::FRAME.exceeded(&shape, body.len()) {
        let id = shape
            .id_span
            .and_then(|(a, b)| text.get(a..b))
            .and_then(|t| t.trim().parse::<Value>().ok())
            .filter(valid_id)
            .unwrap_or(Value::Null);
        return Err(Rejected { id, error: HostError::too_large(m) });
    }
    // `str::parse` runs serde_json's own (non-generic, optimised) `Value` parser rather than a
    // copy instantiated in this crate: its recursion limit (128) then bounds the stack to about
    // 160 KiB even in a debug build, so a depth bomb cannot overflow a 256 KiB stack (T04).
    let v: Value = text.parse().map_err(|e| reject(Value::Null, format!("frame is not valid JSON: {e}")))?;
    let Value::Object(mut obj) = v else {
        return Err(reject(Value::Null, "request must be a JSON object".into()));
    };
    let id = match obj.remove("id") {
        Some(id) if valid_id(&id) => id,
        Some(_) => {
            return Err(reject(
                Value::Null,
                format!("id must be a string (≤ {REQUEST_ID_MAX} bytes) or a number"),
            ))
        }
        None => return Err(reject(Value::Null, "id is required".into())),
    };
    let op = match obj.remove("op") {
        Some(Value::String(op)) => op,
        Some(_) => return Err(reject(id, "op must be a string".into())),
        None => return Err(reject(id, "op is required".into())),
    };
    let args = match obj.remove("args") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(reject(id, "args must be an object".into())),
    };
    if let Some(extra) = obj.keys().next() {
        return Err(reject(id, format!("unknown envelope field {extra:?} (allowed: id, op, args)")));
    }
    Ok(Request { id, op, args })
}

/// An operation's result: a JSON value, or JSON text the host wrote itself (a long list is
/// then never built as a tree of `Value`s only to be written out again).
#[derive(Debug)]
pub enum Payload {
    Value(Value),
    Text(String),
}

/// [`ok_reply`] for a [`Payload`]: JSON text goes into the reply as it is.
pub fn payload_reply(id: &Value, result: &Payload) -> String {
    match result {
        Payload::Value(v) => ok_reply(id, v),
        Payload::Text(json) => {
            let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
            let mut out = String::with_capacity(json.len() + id.len() + 30);
            out.push_str(r#"{"id":"#);
            out.push_str(&id);
            out.push_str(r#","ok":true,"result":"#);
            out.push_str(json);
            out.push('}');
            out
        }
    }
}

impl From<Value> for Payload {
    fn from(v: Value) -> Payload {
        Payload::Value(v)
    }
}

/// `{"id", "ok": true, "result"}` as JSON text, serialised straight from the borrowed result
/// (never a copy of it: results can be megabytes).
///
/// A result that cannot be written as JSON (a `Value` or a [`Payload`] always can) becomes an
/// `internal` error reply.
pub fn ok_reply<R: Serialize>(id: &Value, result: &R) -> String {
    #[derive(Serialize)]
    struct Ok<'a, R> {
        id: &'a Value,
        ok: bool,
        result: &'a R,
    }
    serde_json::to_string(&Ok { id, ok: true, result })
        .unwrap_or_else(|e| error_reply(id, &HostError::internal(format!("result not serialisable: {e}"))))
}

/// `{"id", "ok": false, "error": {"code", "message"}}` as JSON text.
pub fn error_reply(id: &Value, e: &HostError) -> String {
    json!({"id": id, "ok": false, "error": {"code": e.code.as_str(), "message": e.message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::error::ErrorCode;

    #[test]
    fn decodes_a_valid_request() {
        let r = decode_request(br#"{"id":7,"op":"host.hello"}"#).unwrap();
        assert_eq!(r.id, json!(7));
        assert_eq!(r.op, "host.hello");
        assert!(r.args.is_empty());
    }

    #[test]
    fn rejects_malformed_envelopes_with_typed_errors() {
        for (body, id) in [
            (&b""[..], Value::Null),
            (b"\xff\xfe", Value::Null),
            (b"[1]", Value::Null),
            (br#"{"op":"x"}"#, Value::Null),
            (br#"{"id":{},"op":"x"}"#, Value::Null),
            (br#"{"id":"a"}"#, json!("a")),
            (br#"{"id":"a","op":1}"#, json!("a")),
            (br#"{"id":"a","op":"x","args":[]}"#, json!("a")),
            (br#"{"id":"a","op":"x","extra":1}"#, json!("a")),
        ] {
            let e = decode_request(body).unwrap_err();
            assert_eq!(e.error.code, ErrorCode::BadRequest, "{body:?}");
            assert_eq!(e.id, id, "{body:?}");
        }
    }

    #[test]
    fn a_result_given_as_json_text_is_written_as_the_same_reply() {
        #[derive(Serialize)]
        struct Row<'a> {
            id: &'a str,
            n: i64,
        }
        let rows = [Row { id: "a\"b", n: 1 }, Row { id: "鲸", n: -2 }];
        let as_text = payload_reply(&json!("x"), &Payload::Text(serde_json::to_string(&rows).unwrap()));
        let as_value = payload_reply(&json!("x"), &Payload::Value(serde_json::to_value(&rows).unwrap()));
        assert_eq!(as_text, as_value);
        let back: Value = serde_json::from_str(&as_text).unwrap();
        assert_eq!(back["result"], json!([{"id": "a\"b", "n": 1}, {"id": "鲸", "n": -2}]));
    }

    #[test]
    fn a_result_json_cannot_hold_becomes_an_internal_error_reply() {
        // serde_json refuses map keys that are not strings
        let unwritable = std::collections::BTreeMap::from([(vec![1u8], 1)]);
        let reply: Value = serde_json::from_str(&ok_reply(&json!(7), &unwritable)).unwrap();
        assert_eq!(reply["id"], json!(7));
        assert_eq!(reply["ok"], json!(false));
        assert_eq!(reply["error"]["code"], json!("internal"));
    }

    #[test]
    fn depth_bombs_are_rejected_not_overflowed() {
        let deep = format!(
            "{{\"id\":1,\"op\":\"x\",\"args\":{{\"a\":{}{}}}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(decode_request(deep.as_bytes()).is_err());
    }
}
