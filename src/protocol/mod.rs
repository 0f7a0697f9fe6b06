//! The wire protocol: framing, envelopes, chunked replies, error codes and limits.
//! Pure: reads and writes through `std::io` traits only.

pub mod chunk;
pub mod envelope;
pub mod error;
pub mod frame;
pub mod limits;
pub mod origin;
pub mod shape;

pub use error::{ErrorCode, HostError, HostResult};
