//! The store's errors: [`StoreError`] (opening or migrating the database failed), how a
//! SQLite error is classified (damaged, busy, text that is not UTF-8), and how either becomes
//! the [`HostError`] a request answers with.

use super::salvage::marker::content_damage;
use crate::protocol::{ErrorCode, HostError};

/// Failure to open or migrate the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Path(String),
    #[error("the database is damaged: {0}")]
    Corrupt(String),
    #[error("the database is at schema version {found}, newer than this keepsake-host supports ({supported}); update the host")]
    TooNew { found: u32, supported: u32 },
    #[error("the database is busy: {0}")]
    Busy(String),
    /// No space for something the open must write first (the pre-migration copy).
    #[error("{0}")]
    DiskFull(String),
    #[error("{0}")]
    Other(String),
}

pub(super) fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt) | Some(rusqlite::ErrorCode::NotADatabase)
    )
}

pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        if is_corrupt(&e) {
            StoreError::Corrupt(e.to_string())
        } else if is_busy(&e) {
            StoreError::Busy(e.to_string())
        } else {
            StoreError::Other(e.to_string())
        }
    }
}

impl From<StoreError> for HostError {
    fn from(e: StoreError) -> Self {
        let code = match &e {
            StoreError::Corrupt(_) => ErrorCode::DbCorrupt,
            StoreError::TooNew { .. } => ErrorCode::DbTooNew,
            StoreError::Busy(_) => ErrorCode::Busy,
            StoreError::DiskFull(_) => ErrorCode::DiskFull,
            StoreError::Path(_) | StoreError::Other(_) => ErrorCode::Internal,
        };
        HostError::new(code, e.to_string())
    }
}

/// Text that is not UTF-8: Keepsake only ever stores Rust strings, so on disk this is damage.
fn is_bad_utf8(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::Utf8Error(..) => true,
        rusqlite::Error::FromSqlConversionFailure(_, _, inner) => {
            inner.is::<std::str::Utf8Error>() || inner.is::<std::string::FromUtf8Error>()
        }
        _ => false,
    }
}

impl From<rusqlite::Error> for HostError {
    fn from(e: rusqlite::Error) -> Self {
        if is_corrupt(&e) {
            HostError::new(ErrorCode::DbCorrupt, format!("the database is damaged: {e}"))
        } else if is_bad_utf8(&e) {
            content_damage(format!("stored text is not UTF-8: {e}"))
        } else if is_busy(&e) {
            HostError::new(
                ErrorCode::Busy,
                "the database stayed locked past the busy timeout; nothing was applied, retry",
            )
        } else if let rusqlite::Error::SqliteFailure(f, _) = &e {
            match f.code {
                rusqlite::ErrorCode::TooBig => HostError::too_large(format!("value too large for the database: {e}")),
                // T18: a full disk (or the page-count cap, or RLIMIT_FSIZE as EFBIG) rolls the
                // transaction back; the database stays consistent and reads keep working.
                rusqlite::ErrorCode::DiskFull => HostError::new(
                    ErrorCode::DiskFull,
                    format!("the disk is full; nothing was applied (free some space and retry): {e}"),
                ),
                rusqlite::ErrorCode::SystemIoFailure => HostError::internal(format!(
                    "the disk refused a write (full, over a file-size limit, or failing); nothing was applied: {e}"
                )),
                _ => HostError::internal(format!("storage error: {e}")),
            }
        } else {
            HostError::internal(format!("storage error: {e}"))
        }
    }
}
