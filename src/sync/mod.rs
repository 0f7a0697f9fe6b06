//! Sync over a folder (docs/sync.md): the transport. Each device writes sealed, append-only
//! segments of its operations into its own folder under `<folder>/keepsake/`, pictures once into
//! `blobs/`, and applies the other devices' segments; a folder syncer (Syncthing, or any other)
//! keeps the folder equal across the person's machines. No network code, and no SQL here: the
//! replicated state, the recorder and the apply are the store's (`store/sync/`), reached through
//! the [`replica::Replica`] seam.
//!
//! `layout` the folder's names; `seal` sealed files (XChaCha20-Poly1305, blob names by
//! HMAC-SHA256); `key` the sync key (the secret store or the database file) and the keycheck;
//! `folder` durable writes and untrusting reads; `payload` what each file holds; `writer` the
//! outbox into segments; `reader` segments into the database; `setup` `sync init`/`join`/`leave`;
//! `status` what `sync status` and `sync.status` say; `engine` the threads of a serving host.

pub mod engine;
pub mod folder;
pub mod key;
pub mod layout;
pub mod payload;
pub mod reader;
pub mod replica;
pub mod seal;
pub mod setup;
pub mod status;
pub mod store;
pub mod writer;

#[cfg(test)]
mod tests;

use crate::protocol::{ErrorCode, HostError};

/// Why a sync step failed. None of these is fatal to the host: the engine reports it in
/// `sync status` and tries again at its next look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncError {
    /// The database.
    Store(HostError),
    /// The sync folder: missing, unreadable, not writable.
    Folder(String),
    /// The sync key: not set up, unreadable, wrong.
    Key(String),
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncError::Store(e) => write!(f, "{}", e.message),
            SyncError::Folder(m) | SyncError::Key(m) => f.write_str(m),
        }
    }
}

impl From<HostError> for SyncError {
    fn from(e: HostError) -> Self {
        SyncError::Store(e)
    }
}

impl From<SyncError> for HostError {
    fn from(e: SyncError) -> Self {
        match e {
            SyncError::Store(e) => e,
            SyncError::Folder(m) | SyncError::Key(m) => HostError::new(ErrorCode::BadRequest, m),
        }
    }
}
