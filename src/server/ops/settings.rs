//! `settings.*` (PROTOCOL.md §7 "settings").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::types::{crid, ClientRequestId};
use super::Op;
use crate::protocol::HostResult;
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Get {
    pub keys: Vec<String>,
}

impl Op for Get {
    const NAME: &'static str = "settings.get";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.settings_get(&self.keys)?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Set {
    pub map: Map<String, Value>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Set {
    const NAME: &'static str = "settings.set";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.settings_set(&self.map, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Remove {
    pub keys: Vec<String>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Remove {
    const NAME: &'static str = "settings.remove";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(s.settings_remove(&self.keys, crid(&self.client_request_id))?.into())
    }
}
