//! The settings key-value contract (storage-model §3).

use serde_json::Value;

use super::backups::{DAILY_RANGE, DEFAULT_DAILY, DEFAULT_WEEKLY, WEEKLY_RANGE};
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
        "autoSummarizeAttachments" | BACKUPS_ENABLED => {
            v.is_boolean().then_some(()).ok_or_else(|| format!("{key} must be a boolean"))
        }
        BACKUP_FOLDER => match v.as_str() {
            Some(s) if folder_ok(s) => Ok(()),
            _ => Err(format!(
                "{key} must be \"\" (the folder beside the database) or an absolute path to a folder"
            )),
        },
        BACKUP_DAILY | BACKUP_WEEKLY => {
            let (lo, hi) = if key == BACKUP_DAILY { DAILY_RANGE } else { WEEKLY_RANGE };
            whole_non_negative(v)
                .filter(|n| (lo..=hi).contains(n))
                .map(|_| ())
                .ok_or_else(|| format!("{key} must be a whole number from {lo} to {hi}"))
        }
        _ => Ok(()),
    }
}

/// Daily backups on or off (`backupsEnabled`, docs/storage-model.md §3).
pub const BACKUPS_ENABLED: &str = "backupsEnabled";
/// Where daily and manual copies go (`backupFolder`: `""` = the `backups` folder beside the
/// database).
pub const BACKUP_FOLDER: &str = "backupFolder";
/// How many of the newest daily copies are kept (`backupDaily`).
pub const BACKUP_DAILY: &str = "backupDaily";
/// How many recent weeks keep their newest daily copy (`backupWeekly`).
pub const BACKUP_WEEKLY: &str = "backupWeekly";

/// Settings that belong to this device, not to the history: an export never carries them and an
/// import never writes them (a crafted file must not redirect backups to a folder of its
/// choosing, or turn them off). A restore keeps the device's current values.
pub const DEVICE_LOCAL: [&str; 4] = [BACKUPS_ENABLED, BACKUP_FOLDER, BACKUP_DAILY, BACKUP_WEEKLY];

pub fn is_device_local(key: &str) -> bool {
    DEVICE_LOCAL.contains(&key)
}

/// Every setting Keepsake keeps (the extension's keys: `OPTION_KEYS` of
/// `extension/options/providers.js`, the composer draft, the agents' sessions, and the device-local
/// backup keys). An import writes no other key: another product's settings never become
/// Keepsake's (docs/keeps.md "Imports").
pub const KNOWN_KEYS: [&str; 14] = [
    "providers",
    "activeProvider",
    "activeModel",
    "systemPrompt",
    "autoSummarizeAttachments",
    "summarizeThresholdChars",
    "maxSessions",
    "trashDays",
    "composerDraft",
    "agentSessions",
    BACKUPS_ENABLED,
    BACKUP_FOLDER,
    BACKUP_DAILY,
    BACKUP_WEEKLY,
];

pub fn is_known(key: &str) -> bool {
    KNOWN_KEYS.contains(&key)
}

/// `backupFolder`'s rule: `""`, or an absolute path of at most 4,096 bytes without NUL.
fn folder_ok(s: &str) -> bool {
    s.is_empty() || (s.len() <= 4096 && !s.contains('\0') && std::path::Path::new(s).is_absolute())
}

/// `backupsEnabled`: invalid or absent → true.
pub fn backups_enabled(stored: Option<&Value>) -> bool {
    stored.and_then(Value::as_bool).unwrap_or(true)
}

/// `backupFolder`: the folder it names, or `None` for the default (absent, `""` or invalid).
pub fn backup_folder(stored: Option<&Value>) -> Option<String> {
    stored.and_then(Value::as_str).filter(|s| !s.is_empty() && folder_ok(s)).map(str::to_owned)
}

/// `backupDaily`: invalid or absent → 7.
pub fn backup_daily(stored: Option<&Value>) -> u32 {
    stored
        .and_then(whole_non_negative)
        .filter(|n| (DAILY_RANGE.0..=DAILY_RANGE.1).contains(n))
        .map_or(DEFAULT_DAILY, |n| n as u32)
}

/// `backupWeekly`: invalid or absent → 4.
pub fn backup_weekly(stored: Option<&Value>) -> u32 {
    stored
        .and_then(whole_non_negative)
        .filter(|n| (WEEKLY_RANGE.0..=WEEKLY_RANGE.1).contains(n))
        .map_or(DEFAULT_WEEKLY, |n| n as u32)
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

    #[test]
    fn backup_settings() {
        for (k, good, bad) in [
            ("backupsEnabled", vec![json!(true), json!(false)], vec![json!(1), json!("true")]),
            (
                "backupFolder",
                vec![json!(""), json!("/home/me/Keepsake backups")],
                vec![
                    json!("relative/dir"),
                    json!(7),
                    json!("/a\u{0}b"),
                    json!(format!("/{}", "x".repeat(4096))),
                ],
            ),
            (
                "backupDaily",
                vec![json!(1), json!(365), json!(7.0)],
                vec![json!(0), json!(366), json!(1.5), json!("7")],
            ),
            ("backupWeekly", vec![json!(0), json!(52)], vec![json!(-1), json!(53), json!(null)]),
        ] {
            for v in good {
                assert!(check_value(k, &v).is_ok(), "{k} {v}");
            }
            for v in bad {
                assert!(check_value(k, &v).is_err(), "{k} {v}");
            }
            assert!(is_device_local(k));
        }
        assert!(!is_device_local("theme"));
        assert!(backups_enabled(None));
        assert!(!backups_enabled(Some(&json!(false))));
        assert_eq!(backup_folder(Some(&json!(""))), None);
        assert_eq!(backup_folder(Some(&json!("rel"))), None);
        assert_eq!(backup_folder(Some(&json!("/b"))).as_deref(), Some("/b"));
        assert_eq!((backup_daily(None), backup_weekly(None)), (7, 4));
        assert_eq!((backup_daily(Some(&json!(0))), backup_weekly(Some(&json!(99)))), (7, 4));
        assert_eq!((backup_daily(Some(&json!(30))), backup_weekly(Some(&json!(0)))), (30, 0));
    }
}
