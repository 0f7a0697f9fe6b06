//! `sessions.*`: kept chats (PROTOCOL.md §7 "sessions").

use schemars::JsonSchema;
use serde::Deserialize;

use super::types::{crid, present, ClientRequestId, ImagesMode, Index};
use super::Op;
use crate::domain::listing::page_limit;
use crate::domain::new_entry::NewEntry;
use crate::protocol::envelope::Payload;
use crate::protocol::{HostError, HostResult};
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::{ExportFormat, Store};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Save {
    pub id: Option<String>,
    pub name: Option<String>,
    pub fallback_name: Option<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Save {
    const NAME: &'static str = "sessions.save";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.sessions_save(
            self.id.as_deref(),
            self.name.as_deref(),
            self.fallback_name.as_deref(),
            crid(&self.client_request_id),
        )?
        .into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct List {
    pub query: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub limit: Option<Index>,
    pub cursor: Option<String>,
}

impl Op for List {
    const NAME: &'static str = "sessions.list";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let limit = page_limit(self.limit.map(|i| i.0))?;
        Ok(read(Payload::Text(
            s.sessions_list(self.query.as_deref(), Some(limit), self.cursor.as_deref())?.to_json(),
        )))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Get {
    pub id: String,
    pub images: Option<ImagesMode>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub from: Option<Index>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub limit: Option<Index>,
}

impl Op for Get {
    const NAME: &'static str = "sessions.get";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let from = self.from.map_or(0, |i| i.0);
        Ok(read(s.sessions_get(&self.id, ImagesMode::inline(self.images), from, self.limit.map(|i| i.0))?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Load {
    pub id: String,
    pub save_current: Option<bool>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Load {
    const NAME: &'static str = "sessions.load";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.sessions_load(&self.id, self.save_current.unwrap_or(false), crid(&self.client_request_id))?
            .into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rename {
    pub id: String,
    pub name: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Rename {
    const NAME: &'static str = "sessions.rename";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.sessions_rename(&self.id, &self.name, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pin {
    pub id: String,
    pub pinned: bool,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Pin {
    const NAME: &'static str = "sessions.pin";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.sessions_pin(&self.id, self.pinned, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Delete {
    pub id: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Delete {
    const NAME: &'static str = "sessions.delete";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.sessions_delete(&self.id, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClearAll {
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for ClearAll {
    const NAME: &'static str = "sessions.clearAll";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.sessions_clear_all(crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppendTo {
    pub id: String,
    pub entry: NewEntry,
    pub copy_video_src: Option<bool>,
    pub fallback_name: Option<String>,
    pub mark_images_seen: Option<bool>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for AppendTo {
    const NAME: &'static str = "sessions.appendTo";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let flags = crate::store::AppendFlags {
            copy_video_src: self.copy_video_src.unwrap_or(false),
            mark_images_seen: self.mark_images_seen.unwrap_or(false),
        };
        Ok(s.sessions_append_to(
            &self.id,
            self.entry,
            flags,
            self.fallback_name.as_deref(),
            crid(&self.client_request_id),
        )?
        .into())
    }
}

/// The format of `sessions.export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Format {
    Markdown,
    Json,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Export {
    pub ids: Vec<String>,
    pub format: Format,
}

impl Op for Export {
    const NAME: &'static str = "sessions.export";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let format = match self.format {
            Format::Markdown => ExportFormat::Markdown,
            Format::Json => ExportFormat::Json,
        };
        if self.ids.is_empty() {
            return Err(HostError::bad_request("ids must name at least one session"));
        }
        if format == ExportFormat::Markdown && self.ids.len() != 1 {
            return Err(HostError::bad_request("markdown export takes exactly one session id"));
        }
        Ok(read(s.sessions_export(&self.ids, format)?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EvictionPlan {
    pub cap: Index,
}

impl Op for EvictionPlan {
    const NAME: &'static str = "sessions.evictionPlan";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.sessions_eviction_plan(self.cap.0)?))
    }
}
