//! The trash (docs/keeps.md): what a removal keeps, why, and for how long. Every operation that
//! takes something away from a conversation moves it here in its own transaction; only an
//! explicit purge or the expiry after `trashDays` destroys it.

use serde_json::{json, Value};

/// Days a trashed item is kept when `trashDays` is not set.
pub const DEFAULT_TRASH_DAYS: u64 = 30;
/// One day in ms.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Expiry runs at most this often across every host process (the last run is stored).
pub const EXPIRY_INTERVAL_MS: i64 = 60 * 60 * 1000;

/// Why something went to the trash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `sessions.delete`, `history.removeAt`.
    Deleted,
    /// `sessions.clearAll`, `history.replace` of different entries.
    Cleared,
    /// A `maxSessions` cap.
    Evicted,
    /// `history.truncateFrom`; a session whose whole body was removed.
    Edited,
    /// Kept for symmetry with Edit & resend; regenerate keeps versions instead.
    Regenerated,
    /// `history.removeByAttachId`, `history.removeLastPageContext`.
    UndoAttach,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Deleted => "deleted",
            Reason::Cleared => "cleared",
            Reason::Evicted => "evicted",
            Reason::Edited => "edited",
            Reason::Regenerated => "regenerated",
            Reason::UndoAttach => "undo-attach",
        }
    }
}

/// What a trash item holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A whole session, restored under its own id, name, pin and `createdAt`.
    Session,
    /// Entries taken from session `session_id` (named `session_name` then) at body position
    /// `position`; restored as a session of their own.
    Entries { session_id: String, session_name: String, position: usize },
}

impl Origin {
    /// The `sessions.trash_origin` JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Origin::Session => json!({"kind": "session"}),
            Origin::Entries { session_id, session_name, position } => json!({
                "kind": "entries", "sessionId": session_id, "sessionName": session_name, "position": position,
            }),
        }
    }

    /// Read a stored `trash_origin` (anything unreadable counts as a whole session).
    pub fn from_json(v: Option<&Value>) -> Origin {
        let Some(v) = v else { return Origin::Session };
        if v.get("kind").and_then(Value::as_str) != Some("entries") {
            return Origin::Session;
        }
        Origin::Entries {
            session_id: v.get("sessionId").and_then(Value::as_str).unwrap_or_default().to_owned(),
            session_name: v.get("sessionName").and_then(Value::as_str).unwrap_or_default().to_owned(),
            position: v.get("position").and_then(Value::as_u64).unwrap_or(0) as usize,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Session => "session",
            Origin::Entries { .. } => "entries",
        }
    }
}

/// When an item trashed at `trashed_at` expires with `days` of keeping.
pub fn expires_at(trashed_at: i64, days: u64) -> i64 {
    trashed_at.saturating_add((days.min(1 << 40) as i64).saturating_mul(DAY_MS))
}

/// Items trashed before this instant have expired at `now`.
pub fn expiry_cutoff(now: i64, days: u64) -> i64 {
    now.saturating_sub((days.min(1 << 40) as i64).saturating_mul(DAY_MS))
}

/// Whether an expiry run is due: none recorded, or the last one `EXPIRY_INTERVAL_MS` ago (a
/// clock that went back also counts as due).
pub fn expiry_due(last_run: Option<i64>, now: i64) -> bool {
    match last_run {
        None => true,
        Some(t) => now >= t.saturating_add(EXPIRY_INTERVAL_MS) || now < t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_round_trips_and_unknown_is_a_session() {
        let o = Origin::Entries { session_id: "s".into(), session_name: "n".into(), position: 3 };
        assert_eq!(Origin::from_json(Some(&o.to_json())), o);
        assert_eq!(Origin::from_json(Some(&Origin::Session.to_json())), Origin::Session);
        assert_eq!(Origin::from_json(None), Origin::Session);
        assert_eq!(Origin::from_json(Some(&json!("x"))), Origin::Session);
    }

    #[test]
    fn expiry_counts_whole_days_and_runs_hourly() {
        assert_eq!(expires_at(1_000, 30), 1_000 + 30 * DAY_MS);
        assert_eq!(expiry_cutoff(31 * DAY_MS, 30), DAY_MS);
        assert!(expiry_due(None, 5));
        assert!(!expiry_due(Some(0), EXPIRY_INTERVAL_MS - 1));
        assert!(expiry_due(Some(0), EXPIRY_INTERVAL_MS));
        assert!(expiry_due(Some(10), 5));
        assert_eq!(expires_at(i64::MAX - 1, 30), i64::MAX);
    }
}
