//! `request.*`: building provider request bodies (PROTOCOL.md §7 "requests").

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{json, Map, Value};

use super::types::{crid, present, ClientRequestId, Index};
use super::Op;
use crate::domain::entry::parse_image_ref;
use crate::domain::reduce::{is_context_overflow, AgeOptions};
use crate::domain::request::{Kind, Pass};
use crate::protocol::{HostError, HostResult};
use crate::server::bodies::{text_result, BodyCache};
use crate::server::dispatch::{read, Reply};
use crate::store::{BuildArgs, ImageRefsMode, Store};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IsContextOverflow {
    pub message: Option<String>,
}

impl Op for IsContextOverflow {
    const NAME: &'static str = "request.isContextOverflow";
    const WRITE: bool = false;
    fn run(self, _: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(json!(is_context_overflow(self.message.as_deref()))))
    }
}

/// The provider API a body is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BuildKind {
    Chat,
    Responses,
    Anthropic,
    Runs,
    Agent,
}

impl From<BuildKind> for Kind {
    fn from(k: BuildKind) -> Kind {
        match k {
            BuildKind::Chat => Kind::Chat,
            BuildKind::Responses => Kind::Responses,
            BuildKind::Anthropic => Kind::Anthropic,
            BuildKind::Runs => Kind::Runs,
            BuildKind::Agent => Kind::Agent,
        }
    }
}

/// The new user turn.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "an object {userText, images}")]
pub struct Turn {
    pub user_text: Option<String>,
    pub images: Option<Vec<Value>>,
}

/// The session whose history the body is built from (default: the live chat).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "an object {sessionId}")]
pub struct Source {
    pub session_id: Option<String>,
}

/// Overflow rescue after a context-length error.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "an object {errorMessage}")]
pub struct Rescue {
    /// The provider's error message (anything but a string counts as "").
    pub error_message: Option<Value>,
}

/// When an attachment is old enough to be reduced to its summary.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", expecting = "an object {minUserTurnsAfter, minChars}")]
pub struct Aging {
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub min_user_turns_after: Option<Index>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub min_chars: Option<Index>,
}

/// `pass`: `"first"` (the default) or `{kind: "first" | "continuation" | "timestampRewrite",
/// previousReply, instruction}` (a second pass needs both strings).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "must be \"first\" or {kind: \"continuation\" | \"timestampRewrite\", previousReply, instruction} (strings)"
)]
pub enum PassArg {
    Name(PassName),
    Pass(PassObject),
}

/// The one pass named by a bare string.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PassName {
    First,
}

/// A pass as an object.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum PassObject {
    First {},
    #[serde(rename_all = "camelCase")]
    Continuation {
        previous_reply: String,
        instruction: String,
    },
    #[serde(rename_all = "camelCase")]
    TimestampRewrite {
        previous_reply: String,
        instruction: String,
    },
}

impl PassArg {
    fn into_pass(self) -> Pass {
        match self {
            PassArg::Name(PassName::First) | PassArg::Pass(PassObject::First {}) => Pass::First,
            PassArg::Pass(PassObject::Continuation { previous_reply, instruction }) => {
                Pass::Continuation { previous_reply, instruction }
            }
            PassArg::Pass(PassObject::TimestampRewrite { previous_reply, instruction }) => {
                Pass::TimestampRewrite { previous_reply, instruction }
            }
        }
    }
}

/// `imageRefs`: `false` (default: images inline), `true` (every stored image stays a reference)
/// or the list of references the caller holds (only those stay references).
#[derive(Debug, JsonSchema)]
#[serde(untagged)]
pub enum ImageRefsArg {
    All(bool),
    Held(Vec<ImageRef>),
}

/// By hand rather than `untagged`, so a bad reference keeps its path (`imageRefs[2]`).
impl<'de> Deserialize<'de> for ImageRefsArg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ImageRefsArg;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a boolean or a list of held references")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<ImageRefsArg, E> {
                Ok(ImageRefsArg::All(b))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ImageRefsArg, A::Error> {
                let mut refs = Vec::new();
                while let Some(r) = seq.next_element::<ImageRef>()? {
                    refs.push(r);
                }
                Ok(ImageRefsArg::Held(refs))
            }
        }
        d.deserialize_any(V)
    }
}

impl ImageRefsArg {
    fn into_mode(self) -> ImageRefsMode {
        match self {
            ImageRefsArg::All(false) => ImageRefsMode::Inline,
            ImageRefsArg::All(true) => ImageRefsMode::All,
            ImageRefsArg::Held(refs) => ImageRefsMode::Held(refs.into_iter().map(|r| r.0).collect()),
        }
    }
}

/// An image reference `keepsake-image:sha256:<64 lower-case hex>`, valid by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef(String);

impl<'de> Deserialize<'de> for ImageRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if parse_image_ref(&s).is_some() {
            Ok(ImageRef(s))
        } else {
            Err(D::Error::custom("must be a keepsake-image:sha256:<hex> reference"))
        }
    }
}

impl JsonSchema for ImageRef {
    fn schema_name() -> Cow<'static, str> {
        "ImageRef".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": "^keepsake-image:sha256:[0-9a-f]{64}$"})
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Build {
    pub kind: BuildKind,
    pub turn: Option<Turn>,
    pub system_prompt: Option<String>,
    pub body_fields: Option<Map<String, Value>>,
    pub source: Option<Source>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub up_to: Option<Index>,
    pub pass: Option<PassArg>,
    pub rescue: Option<Rescue>,
    pub backfill: Option<bool>,
    pub aging: Option<Aging>,
    pub image_refs: Option<ImageRefsArg>,
    /// the bodyHash of a body this port received, or `""` (PROTOCOL.md "Body deltas")
    pub since: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub retry: Option<Index>,
}

impl Op for Build {
    const NAME: &'static str = "request.build";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, bodies: &mut BodyCache) -> HostResult<Reply> {
        let turn = self.turn.unwrap_or_default();
        let mut aging = AgeOptions::default();
        if let Some(a) = self.aging {
            if let Some(v) = a.min_user_turns_after {
                aging.min_user_turns_after = v.0 as usize;
            }
            if let Some(v) = a.min_chars {
                aging.min_chars = v.0 as usize;
            }
        }
        let args = BuildArgs {
            kind: self.kind.into(),
            user_text: turn.user_text.unwrap_or_default(),
            images: turn.images,
            system_prompt: self.system_prompt,
            body_fields: self.body_fields.unwrap_or_default(),
            source_session: self.source.and_then(|s| s.session_id),
            up_to: self.up_to.map(|i| i.0),
            pass: self.pass.map_or(Pass::First, PassArg::into_pass),
            rescue: self
                .rescue
                .map(|r| r.error_message.as_ref().and_then(Value::as_str).unwrap_or("").to_owned()),
            backfill: self.backfill.unwrap_or(false),
            aging,
            image_refs: self.image_refs.map_or(ImageRefsMode::Inline, ImageRefsArg::into_mode),
            retry: self.retry.map(|i| i.0),
        };
        if args.retry.is_some() && (!args.user_text.is_empty() || args.images.is_some()) {
            return Err(HostError::bad_request(
                "retry resends a stored user entry: turn must be empty (its text and images are the entry's)",
            ));
        }
        let result = s.request_build(args)?;
        // PROTOCOL.md "Body deltas": with `since` the body comes back as text or as a delta
        Ok(read(match self.since {
            Some(since) => text_result(result, &since, bodies),
            None => result,
        }))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommitRescue {
    pub attach_ids: Vec<String>,
    pub session_id: Option<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for CommitRescue {
    const NAME: &'static str = "request.commitRescue";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.request_commit_rescue(
            &self.attach_ids,
            self.session_id.as_deref(),
            crid(&self.client_request_id),
        )?
        .into())
    }
}
