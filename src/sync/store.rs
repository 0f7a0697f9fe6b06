//! The seam implemented by the database (`Store`): each call goes to the store's replicated
//! state (`store/sync/`). Until that lands, a database does not sync: `sync_device` is `None`
//! and setting up is refused with a message that says so.

use serde_json::Value;

use super::replica::{Applied, AppliedSet, Device, OutboxOp, Replica};
use crate::protocol::{HostError, HostResult};
use crate::store::{ChangeEvent, Store};

fn not_yet() -> HostError {
    HostError::unsupported("this keepsake-host is built without the store's sync tables")
}

impl Replica for Store {
    fn sync_device(&mut self) -> HostResult<Option<Device>> {
        Ok(None)
    }
    fn sync_setup(&mut self, _: &Device) -> HostResult<()> {
        Err(not_yet())
    }
    fn sync_set_paused(&mut self, _: bool) -> HostResult<()> {
        Err(not_yet())
    }
    fn sync_forget(&mut self) -> HostResult<()> {
        Err(not_yet())
    }
    fn sync_outbox(&mut self, _: usize) -> HostResult<Vec<OutboxOp>> {
        Ok(Vec::new())
    }
    fn sync_outbox_sealed(&mut self, _: u64) -> HostResult<()> {
        Ok(())
    }
    fn sync_outbox_pending(&mut self) -> HostResult<u64> {
        Ok(0)
    }
    fn sync_blob(&mut self, _: &str) -> HostResult<Option<(String, Vec<u8>)>> {
        Ok(None)
    }
    fn sync_has_blob(&mut self, _: &str) -> HostResult<bool> {
        Ok(false)
    }
    fn sync_put_blob(&mut self, _: &str, _: &str, _: &[u8]) -> HostResult<()> {
        Err(not_yet())
    }
    fn sync_applied(&mut self, _: &str) -> HostResult<AppliedSet> {
        Ok(AppliedSet::default())
    }
    fn sync_apply(&mut self, _: &str, _: u64, _: &[String]) -> HostResult<(Applied, Option<ChangeEvent>)> {
        Err(not_yet())
    }
    fn sync_checkpoint(&mut self) -> HostResult<Value> {
        Err(not_yet())
    }
    fn sync_apply_checkpoint(
        &mut self,
        _: &str,
        _: u64,
        _: &Value,
    ) -> HostResult<(Applied, Option<ChangeEvent>)> {
        Err(not_yet())
    }
}
