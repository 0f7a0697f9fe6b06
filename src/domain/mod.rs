//! Pure domain rules: no SQL, no stdio, no clocks except where a value is passed in.
//! Everything here is testable with plain `serde_json::Value`s (see ARCHITECTURE.md).

pub mod attach;
pub mod backups;
pub mod chunks;
pub mod dataurl;
pub mod delta;
pub mod display;
pub mod entry;
pub mod export;
pub mod figures;
pub mod history;
pub mod images;
pub mod import;
pub mod ingest;
pub mod listing;
pub mod new_entry;
pub mod reduce;
pub mod request;
pub mod search;
pub mod secrets;
pub mod sessions;
pub mod settings;
pub mod sync;
pub mod text;
pub mod trash;
