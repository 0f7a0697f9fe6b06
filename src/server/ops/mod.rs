//! The typed contract of every wire operation: one serde type per operation's `args`, one handler
//! per operation (grouped in files by family), and one table from op name → args type → handler
//! that also says whether the op is a read or a write and gives its args' JSON Schema
//! (`keepsake-host schema`, `host.hello` → `schemaHash`).
//!
//! Argument errors are `bad_request` and start with the field's path: `x must be a string`,
//! `x is required`, `aging.minChars must not be negative`, `unknown argument "k" (allowed: a, b)`.

pub mod attach;
pub mod backups;
pub mod changes;
pub mod history;
pub mod host;
pub mod images;
pub mod request;
pub mod sessions;
pub mod settings;
pub mod storage;
pub mod sync;
pub mod trash;
mod types;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

pub use types::{present, ClientRequestId, ImagesMode, Index};

use super::bodies::BodyCache;
use super::dispatch::Reply;
use crate::protocol::{HostError, HostResult};
use crate::store::Store;

/// One operation: its name, its args type (which is also its schema) and its handler.
pub trait Op: DeserializeOwned + JsonSchema {
    /// The wire name (`area.op`).
    const NAME: &'static str;
    /// A write accepts `clientRequestId` and may emit `changed`; a read refuses it.
    const WRITE: bool;
    /// Run the operation on the open store (`bodies`: this connection's memory for
    /// `request.build`'s `since`).
    fn run(self, store: &mut Store, bodies: &mut BodyCache) -> HostResult<Reply>;
}

/// What the dispatcher runs for one table row.
#[derive(Clone, Copy)]
pub enum Run {
    /// `host.hello`: answered from the server state, even without a store.
    Hello,
    /// Every other operation: validated args, then the handler on the store.
    Store(fn(&mut Store, &mut BodyCache, Map<String, Value>) -> HostResult<Reply>),
}

/// One row of [`OPS`].
#[derive(Clone, Copy)]
pub struct OpEntry {
    pub name: &'static str,
    pub write: bool,
    pub run: Run,
    /// The JSON Schema of the op's `args`.
    pub schema: fn() -> schemars::Schema,
}

fn run_op<T: Op>(s: &mut Store, b: &mut BodyCache, args: Map<String, Value>) -> HostResult<Reply> {
    parse_args::<T>(args)?.run(s, b)
}

fn schema_of<T: JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(T)
}

const fn entry<T: Op>() -> OpEntry {
    OpEntry { name: T::NAME, write: T::WRITE, run: Run::Store(run_op::<T>), schema: schema_of::<T> }
}

/// Every operation this host serves, `host.hello` first (PROTOCOL.md §7 documents each one; a
/// convention test checks PROTOCOL.md, the extension's `lib/protocol.js` and this table agree).
pub const OPS: &[OpEntry] = &[
    OpEntry {
        name: host::Hello::NAME,
        write: host::Hello::WRITE,
        run: Run::Hello,
        schema: schema_of::<host::Hello>,
    },
    entry::<host::Status>(),
    entry::<settings::Get>(),
    entry::<settings::Set>(),
    entry::<settings::Remove>(),
    entry::<history::Get>(),
    entry::<history::Meta>(),
    entry::<history::SetBinding>(),
    entry::<history::Append>(),
    entry::<history::Replace>(),
    entry::<history::Clear>(),
    entry::<history::RemoveAt>(),
    entry::<history::TruncateFrom>(),
    entry::<history::RemoveByAttachId>(),
    entry::<history::RemoveLastPageContext>(),
    entry::<history::MarkImagesSeen>(),
    entry::<history::Branch>(),
    entry::<history::SwitchVersion>(),
    entry::<history::MarkFailed>(),
    entry::<images::BoundImages>(),
    entry::<attach::Attach>(),
    entry::<attach::TrackChange>(),
    entry::<attach::SummaryPlan>(),
    entry::<attach::ApplySummary>(),
    entry::<images::Get>(),
    entry::<images::Display>(),
    entry::<images::Thumbnail>(),
    entry::<sessions::Save>(),
    entry::<sessions::List>(),
    entry::<sessions::Get>(),
    entry::<sessions::Load>(),
    entry::<sessions::Rename>(),
    entry::<sessions::Pin>(),
    entry::<sessions::Delete>(),
    entry::<sessions::ClearAll>(),
    entry::<sessions::AppendTo>(),
    entry::<sessions::Export>(),
    entry::<sessions::EvictionPlan>(),
    entry::<trash::List>(),
    entry::<trash::Restore>(),
    entry::<trash::Purge>(),
    entry::<storage::Import>(),
    entry::<storage::ImportPreview>(),
    entry::<backups::List>(),
    entry::<backups::Create>(),
    entry::<backups::Restore>(),
    entry::<changes::Since>(),
    entry::<sync::Status>(),
    entry::<sync::Pause>(),
    entry::<sync::Resume>(),
    entry::<request::IsContextOverflow>(),
    entry::<request::Build>(),
    entry::<request::CommitRescue>(),
];

/// The row of `op`, if this host serves it.
pub fn find(op: &str) -> Option<&'static OpEntry> {
    OPS.iter().find(|e| e.name == op)
}

/// Validate `args` into `T`: every mistake is a `bad_request` that names the field's path.
pub fn parse_args<T: DeserializeOwned>(args: Map<String, Value>) -> HostResult<T> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        HostError::bad_request(describe(&path, &e.into_inner().to_string()))
    })
}

/// The names between backticks in a serde message, in order.
fn ticked(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

/// Turn serde's message for the value at `path` into the host's wording (field first).
fn describe(path: &str, msg: &str) -> String {
    let field = |name: &str| if path == "." { name.to_owned() } else { format!("{path}.{name}") };
    let here = if path == "." { "args" } else { path };
    if msg.starts_with("missing field `") {
        let name = ticked(msg).first().copied().unwrap_or("?");
        return format!("{} is required", field(name));
    }
    if msg.starts_with("unknown field `") {
        let names = ticked(msg);
        let (k, allowed) = names.split_first().map(|(k, a)| (*k, a.to_vec())).unwrap_or(("?", Vec::new()));
        let allowed = if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") };
        // the path already ends with the unknown key
        let k = if path == "." { k } else { path };
        return format!("unknown argument {k:?} (allowed: {allowed})");
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let got = rest.split('`').next().unwrap_or("");
        let expected = ticked(rest.split_once(", expected ").map_or("", |(_, e)| e))
            .iter()
            .map(|v| format!("{v:?}"))
            .collect::<Vec<_>>();
        let list = match expected.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, init)) => format!("{} or {last}", init.join(", ")),
            None => String::new(),
        };
        return format!("{here} must be {list}, got {got:?}");
    }
    if msg.starts_with("invalid type: ")
        || msg.starts_with("invalid value: ")
        || msg.starts_with("invalid length ")
    {
        let expected = msg.rsplit_once(", expected ").map_or("valid", |(_, e)| e);
        let expected = match expected {
            "a sequence" => "an array",
            "a map" => "an object",
            // serde_json's wording for an enum given neither a string nor an object
            "string or map" => "a string",
            e => e,
        };
        return format!("{here} must be {expected}");
    }
    // the types of this module word their own messages as a predicate ("must be …", "is …")
    format!("{here} {msg}")
}

/// The document `keepsake-host schema` prints: every operation with its name, whether it is a
/// write, and its args' JSON Schema.
pub fn schema_document() -> Value {
    let ops: Vec<Value> = OPS
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "kind": if e.write { "write" } else { "read" },
                "args": (e.schema)(),
            })
        })
        .collect();
    json!({
        "protocolVersion": crate::protocol::limits::PROTOCOL_VERSION,
        "ops": ops,
    })
}

/// [`schema_text`] as this build was committed with (`schema.json` beside this file), so
/// `host.hello` hashes a constant instead of building the whole schema at every start (that took
/// about 2.5 ms of a host's start). A unit test fails when the two differ; regenerate it with
/// `keepsake-host schema > src/server/ops/schema.json`.
pub const SCHEMA_TEXT: &str = include_str!("schema.json");

/// sha256 (lowercase hex) of the schema document as `keepsake-host schema` prints it.
pub fn schema_hash() -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(SCHEMA_TEXT.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// [`schema_document`] as printed (pretty JSON, one trailing newline).
pub fn schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&schema_document()).expect("a schema serializes");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_schema_is_the_one_the_types_describe() {
        assert!(
            schema_text() == SCHEMA_TEXT,
            "src/server/ops/schema.json is stale: run `keepsake-host schema > src/server/ops/schema.json`"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct T {
        name: String,
        flag: Option<bool>,
        #[serde(default, deserialize_with = "present")]
        from: Option<Index>,
        client_request_id: Option<ClientRequestId>,
    }

    fn err(v: Value) -> String {
        let Value::Object(m) = v else { unreachable!() };
        parse_args::<T>(m).unwrap_err().message
    }

    #[test]
    fn messages_name_the_field() {
        assert_eq!(err(json!({})), "name is required");
        assert_eq!(err(json!({"name": 5})), "name must be a string");
        assert_eq!(err(json!({"name": null})), "name must be a string");
        assert_eq!(err(json!({"name": "a", "flag": "x"})), "flag must be a boolean");
        assert_eq!(err(json!({"name": "a", "from": -1})), "from must not be negative");
        assert_eq!(err(json!({"name": "a", "from": null})), "from is required (a whole number ≥ 0)");
        assert_eq!(err(json!({"name": "a", "from": "1"})), "from must be a JSON number (whole, ≥ 0)");
        assert_eq!(
            err(json!({"name": "a", "bogus": 1})),
            r#"unknown argument "bogus" (allowed: name, flag, from, clientRequestId)"#
        );
        assert_eq!(err(json!({"name": "a", "clientRequestId": ""})), "clientRequestId must be 1–128 chars");
        assert_eq!(err(json!({"name": "a", "clientRequestId": 1})), "clientRequestId must be a string");
    }

    #[test]
    fn writes_are_the_ops_that_take_a_client_request_id() {
        for e in OPS {
            let schema = serde_json::to_value((e.schema)()).unwrap();
            let takes = schema["properties"].get("clientRequestId").is_some();
            assert_eq!(takes, e.write, "{}", e.name);
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = OPS.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), OPS.len());
    }
}
