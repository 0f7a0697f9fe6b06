//! The seam between the transport (this module) and the replicated state in the database
//! (`store/sync/`): what the writer, the reader and the commands need from the
//! store, and nothing else. `Store` implements it; the transport's tests run it against a small
//! stand-in. No SQL here.

use super::key::KeyRef;
use crate::domain::sync::ranges::Ranges;
use crate::protocol::HostResult;
use crate::store::ChangeEvent;

/// This device, as `sync init`/`join` set it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// A random UUID (lower-case, hyphenated).
    pub id: String,
    /// The device's human name (the host name by default).
    pub name: String,
    pub created_at: i64,
    /// The sync folder (device-local: never synced).
    pub folder: std::path::PathBuf,
    /// Where the sync key is kept.
    pub key: KeyRef,
    /// `sync pause`: no folder IO (operations are still recorded, and sealed after `resume`).
    pub paused: bool,
}

/// One recorded local operation not yet sealed into a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxOp {
    /// This device's operation sequence (from 1, no gaps).
    pub seq: u64,
    pub json: String,
    /// sha256 of every picture the operation references.
    pub blobs: Vec<String>,
}

/// What applying a segment (or a checkpoint) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Applied {
        ops: usize,
        sessions: usize,
    },
    /// Recorded as applied already: nothing was done.
    Duplicate,
    /// Pictures its operations reference are not in the database yet: nothing was applied.
    Pending {
        missing_blobs: Vec<String>,
    },
}

/// Which segments of one device are applied: every one up to `floor` (the newest checkpoint of
/// that device applied here covers them), and those in `segments`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedSet {
    pub floor: u64,
    pub segments: Ranges,
}

impl AppliedSet {
    pub fn contains(&self, seq: u64) -> bool {
        seq <= self.floor || self.segments.contains(seq)
    }
}

/// What the database counts for one other device (`sync status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCounts {
    pub id: String,
    pub ops_applied: u64,
    pub last_applied_at: Option<i64>,
}

/// What the transport needs from the replicated state.
pub trait Replica {
    fn sync_device(&mut self) -> HostResult<Option<Device>>;
    /// Set this device up (`sync init` / `sync join`); the first run records what the database
    /// already holds, so it goes out with the first segments.
    fn sync_setup(&mut self, d: &Device) -> HostResult<()>;
    fn sync_set_paused(&mut self, paused: bool) -> HostResult<()>;
    /// `sync leave`: this database stops syncing (its chats stay).
    fn sync_forget(&mut self) -> HostResult<()>;

    /// Recorded operations not sealed yet, ascending by `seq`, at most `limit`.
    fn sync_outbox(&mut self, limit: usize) -> HostResult<Vec<OutboxOp>>;
    /// Operations up to `upto` are in a segment in the folder.
    fn sync_outbox_sealed(&mut self, upto: u64) -> HostResult<()>;
    /// How many recorded operations are not sealed yet.
    fn sync_outbox_pending(&mut self) -> HostResult<u64>;

    /// A picture's `(mime, bytes)` by sha256, if the database holds it.
    fn sync_blob(&mut self, sha256: &str) -> HostResult<Option<(String, Vec<u8>)>>;
    fn sync_has_blob(&mut self, sha256: &str) -> HostResult<bool>;
    /// Store a picture that arrived (the store checks the hash).
    fn sync_put_blob(&mut self, sha256: &str, mime: &str, bytes: &[u8]) -> HostResult<()>;

    fn sync_applied(&mut self, dev: &str) -> HostResult<AppliedSet>;
    /// Apply one segment of `dev` in one transaction, exactly once; the event names what changed.
    fn sync_apply(
        &mut self,
        dev: &str,
        seg: u64,
        ops: &[String],
    ) -> HostResult<(Applied, Option<ChangeEvent>)>;
    /// The names the other devices gave themselves (their `device` files), for the drawer's
    /// "from <device>" (`sessions.list` rows' `device`); called when one is new or changed.
    fn sync_device_names(&mut self, names: &[(String, String)]) -> HostResult<()> {
        let _ = names;
        Ok(())
    }
    /// Operations applied per other device, and when the last one was (persisted counts).
    fn sync_peer_counts(&mut self) -> HostResult<Vec<PeerCounts>> {
        Ok(Vec::new())
    }
    /// The whole state, for a checkpoint (a JSON document `sync_apply_checkpoint` reads).
    fn sync_checkpoint(&mut self) -> HostResult<String>;
    /// Merge a checkpoint `dev` wrote as of its segment `seq`; every segment it covers counts
    /// as applied afterwards.
    fn sync_apply_checkpoint(
        &mut self,
        dev: &str,
        seq: u64,
        state: &str,
    ) -> HostResult<(Applied, Option<ChangeEvent>)>;
}
