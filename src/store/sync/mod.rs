//! Sync's SQL (docs/sync.md): the replicated state's tables (`state`), a session as the local
//! tables hold it (`local`), the state laid out as rows (`materialize`), local writes recorded as
//! operations (`recorder`, run by `Store::write`), other devices' operations applied (`apply`),
//! and the seam the transport uses (`device`). This file only declares and re-exports.

mod apply;
mod device;
mod local;
mod materialize;
pub(in crate::store) mod recorder;
mod state;

pub use apply::{ApplyOutcome, SyncApplied};
pub use device::{Checkpoint, OutboxOp, PeerApplied, PeerStatus, SyncCounts, SyncDevice};
