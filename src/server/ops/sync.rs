//! `sync.*` (PROTOCOL.md §7 "sync"): what `keepsake-host sync status --json` says, and pause /
//! resume. Setting sync up is the command line's (`sync init`, `sync join`: docs/sync.md).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::types::ClientRequestId;
use super::Op;
use crate::protocol::{HostError, HostResult};
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;
use crate::sync::replica::Replica;
use crate::sync::{engine, status};
use crate::util::time::now_ms;

/// The status object: the engine's last look in this process, never a look on the reply's path.
fn report(s: &mut Store) -> HostResult<Value> {
    let secrets = s.secret_store();
    let seen = engine::shared_for(s.path()).and_then(|e| e.snapshot());
    status::report(s, &*secrets, seen.as_ref(), false, now_ms())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Status {}

impl Op for Status {
    const NAME: &'static str = "sync.status";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(report(s)?))
    }
}

fn set_paused(s: &mut Store, paused: bool) -> HostResult<Reply> {
    if Replica::sync_device(s)?.is_none() {
        return Err(HostError::unsupported(
            "this database does not sync: set it up with `keepsake-host sync init` or `sync join`",
        ));
    }
    Replica::sync_set_paused(s, paused)?;
    Ok(read(report(s)?))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pause {
    /// Pausing twice is pausing once: accepted for the write convention, nothing is recorded.
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Pause {
    const NAME: &'static str = "sync.pause";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        set_paused(s, true)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Resume {
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for Resume {
    const NAME: &'static str = "sync.resume";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        set_paused(s, false)
    }
}
