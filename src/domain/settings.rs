//! The settings key-value contract (storage-model §3).

use serde_json::Value;

use super::text::u16_len;

/// Keys are 1–200 UTF-16 units (§3).
pub const KEY_MAX_UNITS: usize = 200;
/// Default `summarizeThresholdChars` when 0 / absent / invalid (§3, §7.4).
pub const DEFAULT_SUMMARIZE_THRESHOLD: u64 = 100_000;

/// Conversation data is reachable only through its own operations (§3).
pub fn is_reserved(key: &str) -> bool {
    matches!(key, "history" | "savedSessions" | "activeSessionId") || key.starts_with("session_")
}

/// Check a key's shape and reservation.
pub fn check_key(key: &str) -> Result<(), String> {
    let n = u16_len(key);
    if n == 0 || n > KEY_MAX_UNITS {
        return Err(format!("setting key must be 1–{KEY_MAX_UNITS} chars, got {n}"));
    }
    if is_reserved(key) {
        return Err(format!("{key:?} is a reserved key: conversation data has its own operations"));
    }
    Ok(())
}

fn whole_non_negative(v: &Value) -> Option<u64> {
    if let Some(u) = v.as_u64() {
        return Some(u);
    }
    let f = v.as_f64()?;
    (f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0).then_some(f as u64)
}

/// Type check for the keys the host interprets (§3); other keys are opaque.
pub fn check_value(key: &str, v: &Value) -> Result<(), String> {
    match key {
        "maxSessions" | "summarizeThresholdChars" => {
            whole_non_negative(v).map(|_| ()).ok_or_else(|| format!("{key} must be a whole number ≥ 0"))
        }
        "trashDays" => whole_non_negative(v)
            .filter(|d| *d >= 1)
            .map(|_| ())
            .ok_or_else(|| format!("{key} must be a whole number ≥ 1")),
        "autoSummarizeAttachments" => {
            v.is_boolean().then_some(()).ok_or_else(|| format!("{key} must be a boolean"))
        }
        _ => Ok(()),
    }
}

/// `maxSessions` as the host reads it: invalid or absent → 0 = unlimited.
pub fn max_sessions(stored: Option<&Value>) -> u64 {
    stored.and_then(whole_non_negative).unwrap_or(super::sessions::DEFAULT_MAX_SESSIONS)
}

/// `trashDays` as the host reads it: how many days a trashed item is kept; invalid or absent → 30.
pub fn trash_days(stored: Option<&Value>) -> u64 {
    stored.and_then(whole_non_negative).filter(|d| *d >= 1).unwrap_or(super::trash::DEFAULT_TRASH_DAYS)
}

/// `autoSummarizeAttachments`: invalid or absent → true.
pub fn auto_summarize(stored: Option<&Value>) -> bool {
    stored.and_then(Value::as_bool).unwrap_or(true)
}

/// `summarizeThresholdChars`: 0, absent or invalid → 100,000.
pub fn summarize_threshold(stored: Option<&Value>) -> u64 {
    match stored.and_then(whole_non_negative) {
        Some(n) if n > 0 => n,
        _ => DEFAULT_SUMMARIZE_THRESHOLD,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_keys() {
        for k in ["history", "savedSessions", "activeSessionId", "session_x", "session_"] {
            assert!(check_key(k).is_err(), "{k}");
        }
        assert!(check_key("sessions").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key(&"k".repeat(201)).is_err());
        assert!(check_key(&"k".repeat(200)).is_ok());
    }

    #[test]
    fn interpreted_values() {
        assert!(check_value("maxSessions", &json!(0)).is_ok());
        assert!(check_value("maxSessions", &json!(2.0)).is_ok());
        assert!(check_value("maxSessions", &json!(-1)).is_err());
        assert!(check_value("maxSessions", &json!("5")).is_err());
        assert!(check_value("autoSummarizeAttachments", &json!(1)).is_err());
        assert!(check_value("other", &json!({"any": [1]})).is_ok());
        assert_eq!(max_sessions(Some(&json!("x"))), 0);
        assert_eq!(max_sessions(None), 0);
        assert!(check_value("trashDays", &json!(1)).is_ok());
        assert!(check_value("trashDays", &json!(0)).is_err());
        assert!(check_value("trashDays", &json!(1.5)).is_err());
        assert_eq!(trash_days(None), 30);
        assert_eq!(trash_days(Some(&json!(0))), 30);
        assert_eq!(trash_days(Some(&json!(7))), 7);
        assert_eq!(max_sessions(Some(&json!(0))), 0);
        assert_eq!(summarize_threshold(Some(&json!(0))), 100_000);
        assert!(auto_summarize(Some(&json!("no"))));
    }
}
