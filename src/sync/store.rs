//! The seam implemented by the database: `impl Replica for Store`, each call to the store's
//! replicated state (`store/sync/`, `store/sync_folder.rs`). Inherent methods of `Store` of the
//! same names are the store's own; this adapter only converts.

use super::key::KeyRef;
use super::replica::{Applied, AppliedSet, Device, OutboxOp, PeerCounts, Replica};
use crate::protocol::{HostError, HostResult};
use crate::store::{ApplyOutcome, ChangeEvent, Store, SyncApplied};

fn applied(a: SyncApplied) -> (Applied, Option<ChangeEvent>) {
    let out = match a.outcome {
        ApplyOutcome::Applied { ops, sessions, .. } => Applied::Applied { ops, sessions: sessions.len() },
        ApplyOutcome::Duplicate => Applied::Duplicate,
        ApplyOutcome::Pending { missing_blobs } => Applied::Pending { missing_blobs },
    };
    (out, a.event)
}

impl Replica for Store {
    fn sync_device(&mut self) -> HostResult<Option<Device>> {
        let Some(d) = Store::sync_device(self)? else { return Ok(None) };
        let Some((folder, key)) = self.sync_folder()? else {
            tracing::warn!(
                "sync is set up without a folder: run `keepsake-host sync leave` and `sync join` again"
            );
            return Ok(None);
        };
        let Some(key) = KeyRef::parse(&key) else {
            return Err(HostError::internal("the sync key's reference in the database cannot be read"));
        };
        Ok(Some(Device {
            id: d.id,
            name: d.name,
            created_at: d.created_at,
            folder: folder.into(),
            key,
            paused: d.paused,
        }))
    }
    fn sync_setup(&mut self, d: &Device) -> HostResult<()> {
        self.sync_set_folder(&d.folder.display().to_string(), &d.key.to_json())?;
        if let Err(e) = Store::sync_setup(self, &d.id, &d.name) {
            let _ = self.sync_clear_folder();
            return Err(e);
        }
        Ok(())
    }
    fn sync_set_paused(&mut self, paused: bool) -> HostResult<()> {
        Store::sync_set_paused(self, paused).map(|_| ())
    }
    fn sync_forget(&mut self) -> HostResult<()> {
        Store::sync_forget(self)?;
        self.sync_clear_folder()
    }
    fn sync_outbox(&mut self, limit: usize) -> HostResult<Vec<OutboxOp>> {
        Ok(Store::sync_outbox(self, limit)?
            .into_iter()
            .map(|o| OutboxOp { seq: o.seq, json: o.json, blobs: o.blobs })
            .collect())
    }
    fn sync_outbox_sealed(&mut self, upto: u64) -> HostResult<()> {
        Store::sync_outbox_sealed(self, upto)
    }
    fn sync_outbox_pending(&mut self) -> HostResult<u64> {
        Ok(self.sync_status_counts()?.outbox)
    }
    fn sync_blob(&mut self, sha256: &str) -> HostResult<Option<(String, Vec<u8>)>> {
        Store::sync_blob(self, sha256)
    }
    fn sync_has_blob(&mut self, sha256: &str) -> HostResult<bool> {
        Ok(Store::sync_blob(self, sha256)?.is_some())
    }
    fn sync_put_blob(&mut self, sha256: &str, mime: &str, bytes: &[u8]) -> HostResult<()> {
        Store::sync_put_blob(self, sha256, mime, bytes.to_vec()).map(|_| ())
    }
    fn sync_applied(&mut self, dev: &str) -> HostResult<AppliedSet> {
        Ok(Store::sync_applied(self)?
            .into_iter()
            .find(|p| p.dev == dev)
            .map(|p| AppliedSet { floor: p.checkpoint.unwrap_or(0), segments: p.segments })
            .unwrap_or_default())
    }
    fn sync_apply(
        &mut self,
        dev: &str,
        seg: u64,
        ops: &[String],
    ) -> HostResult<(Applied, Option<ChangeEvent>)> {
        Store::sync_apply(self, dev, seg, ops).map(applied)
    }
    fn sync_device_names(&mut self, names: &[(String, String)]) -> HostResult<()> {
        for (dev, name) in names {
            self.sync_set_peer_name(dev, name)?;
        }
        Ok(())
    }
    fn sync_peer_counts(&mut self) -> HostResult<Vec<PeerCounts>> {
        Ok(self
            .sync_status_counts()?
            .peers
            .into_iter()
            .map(|p| PeerCounts { id: p.id, ops_applied: p.ops_applied, last_applied_at: p.last_applied_at })
            .collect())
    }
    fn sync_checkpoint(&mut self) -> HostResult<String> {
        Ok(Store::sync_checkpoint(self)?.json)
    }
    fn sync_apply_checkpoint(
        &mut self,
        dev: &str,
        seq: u64,
        state: &str,
    ) -> HostResult<(Applied, Option<ChangeEvent>)> {
        Store::sync_apply_checkpoint(self, dev, seq, state).map(applied)
    }
}
