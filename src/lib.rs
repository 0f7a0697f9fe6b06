//! keepsake-host: Keepsake's native messaging host. See ARCHITECTURE.md for the module map.
//!
//! Dependency direction: `protocol`, `domain` and `imaging` are pure (no SQL, no stdio);
//! `store` owns all SQL; `server` and `cli` wire things together.
#![deny(clippy::print_stdout)]

pub mod cli;
pub mod domain;
pub mod imaging;
pub mod protocol;
pub mod secrets;
pub mod server;
pub mod store;
pub mod sync;
pub mod util;
