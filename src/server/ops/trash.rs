//! `trash.*` (PROTOCOL.md §7 "trash").

use schemars::JsonSchema;
use serde::Deserialize;

use super::types::{crid, ClientRequestId};
use super::Op;
use crate::protocol::{HostError, HostResult};
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct List {}

impl Op for List {
    const NAME: &'static str = "trash.list";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.trash_list()?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Restore {
    pub id: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Restore {
    const NAME: &'static str = "trash.restore";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.trash_restore(&self.id, crid(&self.client_request_id))?.into())
    }
}

/// `trash.purge`: either `id` or `all: true`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Purge {
    pub id: Option<String>,
    pub all: Option<bool>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Purge {
    const NAME: &'static str = "trash.purge";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        if self.id.is_some() == self.all.unwrap_or(false) {
            return Err(HostError::bad_request("trash.purge takes either id or all: true"));
        }
        Ok(s.trash_purge(self.id.as_deref(), crid(&self.client_request_id))?.into())
    }
}
