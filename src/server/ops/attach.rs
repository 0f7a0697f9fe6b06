//! `history.attach` and `attach.*`: page context in the chat (PROTOCOL.md §7 "attaching and
//! images").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::types::{crid, ClientRequestId};
use super::Op;
use crate::domain::attach::Ctx as PageCtx;
use crate::domain::new_entry::VideoSrc;
use crate::protocol::HostResult;
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Followup, Reply};
use crate::store::{AttachArgs, Store};

/// Where `history.attach` puts images: at their anchors in the text (default) or at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Placement {
    Anchors,
    End,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Attach {
    pub ctx: PageCtx,
    pub images: Option<Vec<Value>>,
    pub placement: Option<Placement>,
    pub summary_source: Option<String>,
    pub paper: Option<bool>,
    /// `{platform, url, tabId}`
    pub video_src: Option<VideoSrc>,
    pub fallback_name: Option<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Attach {
    const NAME: &'static str = "history.attach";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let args = AttachArgs {
            ctx: self.ctx,
            images: self.images.unwrap_or_default(),
            placement_end: self.placement == Some(Placement::End),
            summary_source: self.summary_source,
            paper: self.paper.unwrap_or(false),
            video_src: self.video_src,
            fallback_name: self.fallback_name,
        };
        let mut r: Reply = s.history_attach(args, crid(&self.client_request_id))?.into();
        // a replayed clientRequestId applied nothing, so there is nothing to bound either
        if r.event.is_some() {
            r.followup = Some(Followup::BoundImages);
        }
        Ok(r)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TrackChange {
    pub mode: String,
    pub url: String,
    pub text: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for TrackChange {
    const NAME: &'static str = "attach.trackChange";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.attach_track_change(&self.mode, &self.url, &self.text, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SummaryPlan {
    pub attach_id: String,
}

impl Op for SummaryPlan {
    const NAME: &'static str = "attach.summaryPlan";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.attach_summary_plan(&self.attach_id)?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplySummary {
    pub attach_id: String,
    pub summary: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for ApplySummary {
    const NAME: &'static str = "attach.applySummary";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.attach_apply_summary(&self.attach_id, &self.summary, crid(&self.client_request_id))?.into())
    }
}
