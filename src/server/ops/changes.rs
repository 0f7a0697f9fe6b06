//! `changes.since` (PROTOCOL.md §7 "changes").

use schemars::JsonSchema;
use serde::Deserialize;

use super::types::Index;
use super::Op;
use crate::protocol::HostResult;
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Since {
    pub seq: Index,
}

impl Op for Since {
    const NAME: &'static str = "changes.since";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.changes_since(self.seq.0.min(i64::MAX as u64) as i64)?))
    }
}
