//! `history.*`: the live chat (PROTOCOL.md §7 "history").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::types::{crid, present, ClientRequestId, ImagesMode, Index};
use super::Op;
use crate::domain::new_entry::NewEntry;
use crate::protocol::{HostError, HostResult};
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Get {
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub from: Option<Index>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub limit: Option<Index>,
    pub images: Option<ImagesMode>,
}

impl Op for Get {
    const NAME: &'static str = "history.get";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let page = crate::store::Page {
            from: self.from.map_or(0, |i| i.0),
            limit: self.limit.map(|i| i.0),
            inline: ImagesMode::inline(self.images),
        };
        Ok(read(s.history_get(page)?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Meta {}

impl Op for Meta {
    const NAME: &'static str = "history.meta";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.history_meta()?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetBinding {
    pub id: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for SetBinding {
    const NAME: &'static str = "history.setBinding";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_set_binding(&self.id, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Append {
    pub entry: NewEntry,
    pub mark_images_seen: Option<bool>,
    pub copy_video_src: Option<bool>,
    pub fallback_name: Option<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Append {
    const NAME: &'static str = "history.append";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_append(
            self.entry,
            self.mark_images_seen.unwrap_or(false),
            self.copy_video_src.unwrap_or(false),
            self.fallback_name.as_deref(),
            crid(&self.client_request_id),
        )?
        .into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Replace {
    pub entries: Vec<Map<String, Value>>,
    pub fallback_name: Option<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Replace {
    const NAME: &'static str = "history.replace";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_replace(self.entries, self.fallback_name.as_deref(), crid(&self.client_request_id))?
            .into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Clear {
    pub save_current: Option<bool>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Clear {
    const NAME: &'static str = "history.clear";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_clear(self.save_current.unwrap_or(false), crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveAt {
    pub index: Index,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for RemoveAt {
    const NAME: &'static str = "history.removeAt";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_remove_at(self.index.0, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TruncateFrom {
    pub index: Index,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for TruncateFrom {
    const NAME: &'static str = "history.truncateFrom";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_truncate_from(self.index.0, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveByAttachId {
    pub attach_id: Option<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for RemoveByAttachId {
    const NAME: &'static str = "history.removeByAttachId";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_remove_by_attach_id(self.attach_id.as_deref(), crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveLastPageContext {
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for RemoveLastPageContext {
    const NAME: &'static str = "history.removeLastPageContext";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_remove_last_page_context(crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MarkImagesSeen {
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for MarkImagesSeen {
    const NAME: &'static str = "history.markImagesSeen";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_mark_images_seen(crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Branch {
    pub index: Index,
    pub entry: NewEntry,
    pub mark_images_seen: Option<bool>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Branch {
    const NAME: &'static str = "history.branch";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_branch(
            self.index.0,
            self.entry,
            self.mark_images_seen.unwrap_or(false),
            crid(&self.client_request_id),
        )?
        .into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SwitchVersion {
    pub fork_entry_id: String,
    pub version: Index,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for SwitchVersion {
    const NAME: &'static str = "history.switchVersion";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.history_switch_version(&self.fork_entry_id, self.version.0, crid(&self.client_request_id))?
            .into())
    }
}

/// `history.markFailed`: exactly one of `entryId` and `index` names the entry.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MarkFailed {
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub index: Option<Index>,
    pub entry_id: Option<String>,
    pub code: String,
    pub message: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for MarkFailed {
    const NAME: &'static str = "history.markFailed";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let (code, message) = (&self.code, &self.message);
        if code.is_empty() || code.len() > 200 || message.len() > 8_000 {
            return Err(HostError::bad_request("code must be 1–200 bytes and message at most 8,000"));
        }
        let target = match (self.entry_id, self.index) {
            (Some(id), None) => crate::store::FailedTarget::EntryId(id),
            (None, Some(i)) => crate::store::FailedTarget::Index(i.0),
            _ => return Err(HostError::bad_request("history.markFailed takes either entryId or index")),
        };
        Ok(s.history_mark_failed(target, code, message, crid(&self.client_request_id))?.into())
    }
}
