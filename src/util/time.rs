//! Clock helpers (host clock, integer ms since the Unix epoch).
//!
//! The host's clock is the system clock plus `KEEPSAKE_CLOCK_OFFSET_MS` (a test knob, like
//! `KEEPSAKE_MAX_PAGE_COUNT`: a signed number of ms, read once at start), so a test can run the
//! real binary "yesterday" (docs/reliability.md §7 "Copies and backups": yesterday's daily
//! backup). Local dates and times are of that clock too.

use chrono::{DateTime, Datelike, Local, SecondsFormat};

/// `KEEPSAKE_CLOCK_OFFSET_MS`, read once (0 when absent or not a number).
fn offset_ms() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var("KEEPSAKE_CLOCK_OFFSET_MS").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    })
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
        .saturating_add(offset_ms())
}

fn local(ms: i64) -> DateTime<Local> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default().with_timezone(&Local)
}

/// Local date `YYYY-MM-DD`.
pub fn local_date() -> String {
    local_day(now_ms())
}

/// ISO 8601 with local offset, seconds precision.
pub fn local_iso() -> String {
    local(now_ms()).to_rfc3339_opts(SecondsFormat::Secs, false)
}

/// The local date (`YYYY-MM-DD`) of the moment `ms`.
pub fn local_day(ms: i64) -> String {
    local(ms).format("%Y-%m-%d").to_string()
}

/// The ISO week (year, week number) of the moment `ms` in local time.
pub fn local_week(ms: i64) -> (i32, u32) {
    let w = local(ms).iso_week();
    (w.year(), w.week())
}

/// The moment `ms` as local `YYYY-MM-DD HH:MM` (what the command line prints).
pub fn local_minute(ms: i64) -> String {
    local(ms).format("%Y-%m-%d %H:%M").to_string()
}
