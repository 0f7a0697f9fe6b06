//! What a write works with: its transaction ([`WriteTx`]) and what it changed ([`ChangeSet`]),
//! the rule a `clientRequestId` follows, and one setting read inside a transaction. The write
//! itself runs in `connection.rs` ([`Store::write`](super::connection::Store::write)).

use std::collections::BTreeSet;

use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use crate::domain::text::u16_len;
use crate::protocol::limits::CLIENT_REQUEST_ID_MAX;
use crate::protocol::{HostError, HostResult};

/// What a committed write changed; becomes the `changed` event and a change-log row.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChangeSet {
    pub settings: BTreeSet<String>,
    pub history: bool,
    pub binding: bool,
    pub sessions: BTreeSet<String>,
    pub sessions_index: bool,
    /// Something entered or left the trash.
    pub trash: bool,
    /// A restore put a backup in place of the whole database: everything may have changed.
    pub restored: bool,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
            && !self.history
            && !self.binding
            && self.sessions.is_empty()
            && !self.sessions_index
            && !self.trash
            && !self.restored
    }

    pub fn areas_json(&self) -> Value {
        let mut m = Map::new();
        if !self.settings.is_empty() {
            m.insert("settings".into(), json!(self.settings));
        }
        if self.history {
            m.insert("history".into(), json!(true));
        }
        if self.binding {
            m.insert("binding".into(), json!(true));
        }
        if !self.sessions.is_empty() || self.sessions_index {
            let mut s = Map::new();
            s.insert("ids".into(), json!(self.sessions));
            s.insert("index".into(), json!(self.sessions_index));
            m.insert("sessions".into(), Value::Object(s));
        }
        if self.trash {
            m.insert("trash".into(), json!(true));
        }
        if self.restored {
            m.insert("restored".into(), json!(true));
        }
        Value::Object(m)
    }

    /// Merge another change set's areas JSON (used by `changes.since`).
    pub fn merge_areas(&mut self, areas: &Value) {
        if let Some(keys) = areas.get("settings").and_then(Value::as_array) {
            self.settings.extend(keys.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        self.history |= areas.get("history") == Some(&Value::Bool(true));
        self.binding |= areas.get("binding") == Some(&Value::Bool(true));
        if let Some(s) = areas.get("sessions") {
            if let Some(ids) = s.get("ids").and_then(Value::as_array) {
                self.sessions.extend(ids.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            self.sessions_index |= s.get("index") == Some(&Value::Bool(true));
        }
        self.trash |= areas.get("trash") == Some(&Value::Bool(true));
        self.restored |= areas.get("restored") == Some(&Value::Bool(true));
    }
}

/// A write transaction plus what it changed and which blobs it inserted.
pub struct WriteTx<'c> {
    pub(crate) tx: rusqlite::Transaction<'c>,
    pub changes: ChangeSet,
    pub(crate) new_blobs: Vec<String>,
    pub(crate) now: i64,
    /// Sessions whose text changed other than by appending: their search data is rebuilt once,
    /// before the commit.
    pub(crate) reindex: BTreeSet<String>,
    /// This write applies other devices' operations: what it writes is the replicated state
    /// already and is not recorded again (`store/sync/recorder.rs`).
    pub(crate) sync_applying: bool,
    /// This write put back a copy of the database (`backups.restore`): what it lacks is not
    /// purged elsewhere but laid out again from the replicated state.
    pub(crate) sync_union: bool,
}

/// Validate an optional `clientRequestId`.
pub fn check_client_request_id(v: Option<&Value>) -> HostResult<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let n = u16_len(s);
            if n == 0 || n > CLIENT_REQUEST_ID_MAX {
                Err(HostError::bad_request(format!(
                    "clientRequestId must be 1–{CLIENT_REQUEST_ID_MAX} chars"
                )))
            } else {
                Ok(Some(s.clone()))
            }
        }
        Some(_) => Err(HostError::bad_request("clientRequestId must be a string")),
    }
}

/// Read one setting's stored JSON value inside any transaction.
pub(crate) fn setting_value(conn: &Connection, key: &str) -> HostResult<Option<Value>> {
    let raw: Option<String> =
        conn.query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| r.get(0)).optional()?;
    Ok(raw.and_then(|s| serde_json::from_str(&s).ok()))
}
