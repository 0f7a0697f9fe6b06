//! Self-validating argument types shared by many operations.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::domain::history::parse_index;
use crate::protocol::limits::CLIENT_REQUEST_ID_MAX;
use crate::store::check_client_request_id;

/// A write's `clientRequestId` (PROTOCOL.md §2 "Client request ids"), valid by construction: the
/// store's own rule (`check_client_request_id`) runs in its `Deserialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRequestId(String);

impl ClientRequestId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ClientRequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match check_client_request_id(Some(&v)) {
            Ok(Some(s)) => Ok(ClientRequestId(s)),
            // `null` never gets here (an absent id is `Option::None`); refuse it as the rule does
            Ok(None) => Err(D::Error::custom("must be a string")),
            // the rule's message names the field; the path in front of it does that here
            Err(e) => Err(D::Error::custom(e.message.strip_prefix("clientRequestId ").unwrap_or(&e.message))),
        }
    }
}

impl JsonSchema for ClientRequestId {
    fn schema_name() -> Cow<'static, str> {
        "ClientRequestId".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": CLIENT_REQUEST_ID_MAX,
            "description": "at-most-once key of a write (UTF-16 code units)"
        })
    }
}

/// The optional id of a write's args, as the store takes it.
pub fn crid(c: &Option<ClientRequestId>) -> Option<&str> {
    c.as_ref().map(ClientRequestId::as_str)
}

/// An index or count: a JSON number, whole, ≥ 0, ≤ 2^53 (`parse_index`'s rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Index(pub u64);

impl<'de> Deserialize<'de> for Index {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        parse_index(Some(&v)).map(Index).map_err(D::Error::custom)
    }
}

impl JsonSchema for Index {
    fn schema_name() -> Cow<'static, str> {
        "Index".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "minimum": 0, "maximum": 9_007_199_254_740_992_u64})
    }
}

/// An optional argument that, when present, must hold a `T` (an optional index given as `null` is
/// refused, as it always was).
pub use crate::domain::new_entry::present;

/// `images` of `history.get` and `sessions.get`: image data inline (default) or as references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ImagesMode {
    Inline,
    Ref,
}

impl ImagesMode {
    /// Whether image data is inlined (`None`: the default, inline).
    pub fn inline(m: Option<ImagesMode>) -> bool {
        m != Some(ImagesMode::Ref)
    }
}
