//! The store: the one place that owns SQL. Every operation is one SQLite transaction; writes use
//! `BEGIN IMMEDIATE`, record their `clientRequestId` and change-log row in the same transaction,
//! and collect unreferenced image blobs before committing.
//!
//! This file only declares the modules and re-exports what the rest of the crate uses; every
//! module imports from the one that defines an item, never through here, so the modules stay
//! layered (the test `store_modules_have_no_import_cycle`). The base: `error.rs` (errors),
//! `tx.rs` (a write transaction and what it changed), `changelog.rs` (the change log's rows),
//! `connection.rs` (the [`Store`] and how reads and writes run); the operations sit above it.

mod attach;
mod backups;
mod blobs;
mod bodies;
mod bound;
mod changelog;
mod changes;
mod connection;
pub mod copies;
mod drawer;
mod entries;
mod error;
mod fold;
mod history;
mod import;
mod indexing;
mod keys;
pub mod maintenance;
pub mod migrate;
pub mod open;
mod pagescan;
mod renditions;
mod requests;
mod rows;
pub mod salvage;
mod search;
mod sessions;
mod settings;
mod sync;
mod sync_folder;
mod trash;
mod tx;
mod versions;
mod window;

pub use attach::AttachArgs;
pub use backups::{BackupSettings, Daily};
pub use blobs::{parse_images_mode, Blob, IngestedEntries};
pub use changelog::ChangeEvent;
pub use connection::{Clock, Store, WriteOutcome};
pub use drawer::Listing;
pub use error::StoreError;
pub use history::{FailedTarget, Page};
pub use import::ImportOptions;
pub(crate) use keys::put_verified;
pub use keys::{ApiKeys, MoveReport, Severity};
pub use open::Mode;
pub use requests::{BuildArgs, ImageRefsMode};
pub use sessions::{AppendFlags, ExportFormat};
pub use sync::{
    ApplyOutcome, Checkpoint, OutboxOp, PeerApplied, PeerStatus, SyncApplied, SyncCounts, SyncDevice,
};
pub use tx::{check_client_request_id, ChangeSet, WriteTx};
