//! `backups.*` (PROTOCOL.md §7 "backups"): the copies of the database, "Back up now", restore.

use schemars::JsonSchema;
use serde::Deserialize;

use super::types::{crid, ClientRequestId};
use super::Op;
use crate::protocol::HostResult;
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct List {}

impl Op for List {
    const NAME: &'static str = "backups.list";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.backups_list()?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Create {
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Create {
    const NAME: &'static str = "backups.create";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.backups_create(crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Restore {
    /// A copy's id, as `backups.list` gives it.
    pub id: String,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Restore {
    const NAME: &'static str = "backups.restore";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.backups_restore(&self.id, crid(&self.client_request_id))?.into())
    }
}
