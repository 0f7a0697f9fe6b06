//! Wire error codes (append-only; PROTOCOL.md keeps the table) and the error every handler
//! returns.

use std::fmt;

/// Stable wire codes. Never rename or reuse one; add new ones at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Malformed or out-of-domain parameter, reserved key, unknown image reference, bad frame.
    BadRequest,
    /// The named session (or image, or attach) does not exist.
    NotFound,
    /// A `clientRequestId` reused with a different operation.
    Conflict,
    /// The write lock was not obtained within the busy timeout; nothing applied; retry.
    Busy,
    /// A frame, document or value over its cap.
    TooLarge,
    /// A well-formed request the host does not support (e.g. a newer export version).
    Unsupported,
    /// A bug or an unexpected storage failure; details in the log.
    Internal,
    /// `op` names no operation.
    UnknownOp,
    /// The database file is damaged; see `keepsake-host doctor`.
    DbCorrupt,
    /// The database was written by a newer keepsake-host; update the host.
    DbTooNew,
    /// An image failed the decode limits or could not be decoded.
    ImageRejected,
    /// The caller (argv[1]'s extension origin) is not allowed to use this host; nothing is served.
    ForbiddenOrigin,
    /// The disk is full (or the database hit its size cap); nothing was applied; reads still work.
    DiskFull,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::BadRequest,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Busy,
        ErrorCode::TooLarge,
        ErrorCode::Unsupported,
        ErrorCode::Internal,
        ErrorCode::UnknownOp,
        ErrorCode::DbCorrupt,
        ErrorCode::DbTooNew,
        ErrorCode::ImageRejected,
        ErrorCode::ForbiddenOrigin,
        ErrorCode::DiskFull,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Busy => "busy",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Internal => "internal",
            ErrorCode::UnknownOp => "unknown_op",
            ErrorCode::DbCorrupt => "db_corrupt",
            ErrorCode::DbTooNew => "db_too_new",
            ErrorCode::ImageRejected => "image_rejected",
            ErrorCode::ForbiddenOrigin => "forbidden_origin",
            ErrorCode::DiskFull => "disk_full",
        }
    }
}

/// An operation's failure: a wire code plus a human sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct HostError {
    pub code: ErrorCode,
    pub message: String,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl HostError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        HostError { code, message: message.into() }
    }
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, m)
    }
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, m)
    }
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, m)
    }
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, m)
    }
    pub fn too_large(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, m)
    }
    pub fn unsupported(m: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unsupported, m)
    }
}

pub type HostResult<T> = Result<T, HostError>;
