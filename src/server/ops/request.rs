//! `request.*`: building provider request bodies (PROTOCOL.md §7 "requests").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::types::{crid, present, ClientRequestId, Index};
use super::Op;
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
#[serde(rename_all = "camelCase", expecting = "an object {userText, images}")]
pub struct Turn {
    pub user_text: Option<String>,
    pub images: Option<Vec<Value>>,
}

/// The session whose history the body is built from (default: the live chat).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", expecting = "an object {sessionId}")]
pub struct Source {
    pub session_id: Option<String>,
}

/// Overflow rescue after a context-length error.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", expecting = "an object {errorMessage}")]
pub struct Rescue {
    /// The provider's error message (anything but a string counts as "").
    pub error_message: Option<Value>,
}

/// When an attachment is old enough to be reduced to its summary.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", expecting = "an object {minUserTurnsAfter, minChars}")]
pub struct Aging {
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub min_user_turns_after: Option<Index>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub min_chars: Option<Index>,
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
    /// `"first"` (default) or `{kind: "continuation" | "timestampRewrite", previousReply, instruction}`
    pub pass: Option<Value>,
    pub rescue: Option<Rescue>,
    pub backfill: Option<bool>,
    pub aging: Option<Aging>,
    /// `true`, `false` or a list of held `keepsake-image:sha256:<hex>` references
    pub image_refs: Option<Value>,
    /// the bodyHash of a body this port received, or `""` (PROTOCOL.md "Body deltas")
    pub since: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub retry: Option<Index>,
}

fn pass_arg(v: Option<&Value>) -> HostResult<Pass> {
    let Some(v) = v else { return Ok(Pass::First) };
    let (kind, o) = match v {
        Value::String(k) => (k.as_str(), None),
        Value::Object(o) => (o.get("kind").and_then(Value::as_str).unwrap_or(""), Some(o)),
        _ => {
            return Err(HostError::bad_request("pass must be a string or {kind, previousReply, instruction}"))
        }
    };
    let field = |k: &str| -> HostResult<String> {
        match o.and_then(|o| o.get(k)) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(HostError::bad_request(format!("pass.{k} must be a string for a second pass"))),
        }
    };
    match kind {
        "first" => Ok(Pass::First),
        "continuation" => Ok(Pass::Continuation {
            previous_reply: field("previousReply")?,
            instruction: field("instruction")?,
        }),
        "timestampRewrite" => Ok(Pass::TimestampRewrite {
            previous_reply: field("previousReply")?,
            instruction: field("instruction")?,
        }),
        other => Err(HostError::bad_request(format!(
            "pass.kind must be first, continuation or timestampRewrite, got {other:?}"
        ))),
    }
}

fn image_refs_arg(v: Option<&Value>) -> HostResult<ImageRefsMode> {
    match v {
        None | Some(Value::Bool(false)) => Ok(ImageRefsMode::Inline),
        Some(Value::Bool(true)) => Ok(ImageRefsMode::All),
        Some(Value::Array(list)) => list
            .iter()
            .map(|x| {
                x.as_str()
                    .filter(|s| crate::domain::entry::parse_image_ref(s).is_some())
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        HostError::bad_request(
                            "imageRefs entries must be keepsake-image:sha256:<hex> references",
                        )
                    })
            })
            .collect::<HostResult<_>>()
            .map(ImageRefsMode::Held),
        Some(_) => Err(HostError::bad_request("imageRefs must be a boolean or a list of held references")),
    }
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
            pass: pass_arg(self.pass.as_ref())?,
            rescue: self
                .rescue
                .map(|r| r.error_message.as_ref().and_then(Value::as_str).unwrap_or("").to_owned()),
            backfill: self.backfill.unwrap_or(false),
            aging,
            image_refs: image_refs_arg(self.image_refs.as_ref())?,
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
