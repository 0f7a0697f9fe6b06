//! Clock helpers (host clock, integer ms since the Unix epoch).

use chrono::{Local, SecondsFormat};

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Local date `YYYY-MM-DD`.
pub fn local_date() -> String {
    Local::now().format("%Y-%m-%d").to_string()
}

/// ISO 8601 with local offset, seconds precision.
pub fn local_iso() -> String {
    Local::now().to_rfc3339_opts(SecondsFormat::Secs, false)
}
