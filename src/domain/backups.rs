//! The copies of the database Keepsake keeps (docs/reliability.md §7 "Copies and backups"): their
//! names, which daily copies the rotation keeps, when a daily backup is due (the lock row), and
//! the free-space floor. Pure: times, days and weeks are passed in.
//!
//! A copy's file name is `keepsake-<kind>-<YYYYMMDD>T<HHMMSS>Z-v<schema>.db` (UTC); its id is the
//! name without `.db`. Only names of exactly that shape are listed, restored or removed: nothing
//! else in a backups folder is ever touched, except the temp files a copy is written under
//! (`.keepsake-….tmp`), which the next backup removes once they are an hour old.

use chrono::{DateTime, NaiveDateTime};
use serde::{Deserialize, Serialize};

/// What made a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The host's daily backup (rotated: [`rotate`]).
    Daily,
    /// The copy made before a migration, named with the schema it had (the newest
    /// [`KEEP_PREMIGRATION`] are kept).
    Premigration,
    /// The database as it was before a restore: what "undo restore" puts back (the newest
    /// [`KEEP_PRERESTORE`] are kept).
    Prerestore,
    /// "Back up now" (`backups.create`): the user's, never removed by Keepsake.
    Manual,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Daily, Kind::Premigration, Kind::Prerestore, Kind::Manual];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Daily => "daily",
            Kind::Premigration => "premigration",
            Kind::Prerestore => "prerestore",
            Kind::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The newest pre-migration copies kept (older ones go only once a newer one was made and
/// checked).
pub const KEEP_PREMIGRATION: usize = 3;
/// The newest pre-restore copies kept.
pub const KEEP_PRERESTORE: usize = 5;
/// `backupDaily` when absent or invalid: the newest daily copies kept.
pub const DEFAULT_DAILY: u32 = 7;
/// `backupWeekly` when absent or invalid: weeks that keep their newest daily copy.
pub const DEFAULT_WEEKLY: u32 = 4;
/// `backupDaily` range.
pub const DAILY_RANGE: (u64, u64) = (1, 365);
/// `backupWeekly` range.
pub const WEEKLY_RANGE: (u64, u64) = (0, 52);
/// A temp file of a copy older than this is left over from a copy that died: the next backup
/// removes it.
pub const STALE_TEMP_MS: i64 = 60 * 60 * 1000;
/// A claim on a day's backup that has not finished after this long was left by a host that died:
/// another host may claim the day again.
pub const CLAIM_STALE_MS: i64 = 60 * 60 * 1000;
/// A day whose backup failed or was skipped is tried again this long after (the hourly check).
pub const RETRY_MS: i64 = 60 * 60 * 1000;
/// How often a running host looks whether the daily backup is due.
pub const CHECK_EVERY_MS: i64 = 60 * 60 * 1000;
/// A pre-migration copy needs the database's size plus this much free space.
pub const PREMIGRATION_MARGIN: u64 = 64 * 1024 * 1024;
/// The free-space floor of a daily backup: at most this…
pub const FLOOR_MAX: u64 = 1024 * 1024 * 1024;
/// …and at most this share (percent) of the file system.
pub const FLOOR_PERCENT: u64 = 10;

const PREFIX: &str = "keepsake-";
const EXT: &str = ".db";
const TIME_FORMAT: &str = "%Y%m%dT%H%M%S";

/// A copy's name, read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyName {
    pub kind: Kind,
    /// When it was made (ms since the Unix epoch, whole seconds).
    pub at_ms: i64,
    /// The schema version of the database it holds.
    pub schema: u32,
}

/// The file name of a copy of `kind` made at `at_ms`, holding schema version `schema`.
pub fn copy_file_name(kind: Kind, at_ms: i64, schema: u32) -> String {
    let t = DateTime::from_timestamp_millis(at_ms).unwrap_or_default().format(TIME_FORMAT);
    format!("{PREFIX}{}-{t}Z-v{schema}{EXT}", kind.as_str())
}

/// A copy's id: its file name without `.db`.
pub fn copy_id(file_name: &str) -> &str {
    file_name.strip_suffix(EXT).unwrap_or(file_name)
}

/// The file name of the copy `id` names (`id` as [`copy_id`] gives it; a trailing `.db` is
/// accepted too), if it has a copy's shape.
pub fn file_name_of_id(id: &str) -> Option<String> {
    let name = if id.ends_with(EXT) { id.to_owned() } else { format!("{id}{EXT}") };
    parse_copy_name(&name).map(|_| name)
}

/// Read a copy's file name; `None` for any other name.
pub fn parse_copy_name(name: &str) -> Option<CopyName> {
    let rest = name.strip_prefix(PREFIX)?.strip_suffix(EXT)?;
    let (kind, rest) = rest.split_once('-')?;
    let kind = Kind::parse(kind)?;
    let (time, schema) = rest.split_once("Z-v")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (date, clock) = time.split_once('T')?;
    if date.len() != 8 || clock.len() != 6 || !digits(date) || !digits(clock) {
        return None;
    }
    if !digits(schema) || schema.len() > 9 || (schema.len() > 1 && schema.starts_with('0')) {
        return None;
    }
    let schema: u32 = schema.parse().ok().filter(|v| *v >= 1)?;
    let at = NaiveDateTime::parse_from_str(time, TIME_FORMAT).ok()?.and_utc().timestamp_millis();
    Some(CopyName { kind, at_ms: at, schema })
}

/// Whether `name` is a temp file a copy is (or was) written under: `util::files::write_new`
/// writes `.keepsake-<…>.db.<random>.tmp`, a restore prepares `.keepsake-restore-<random>.tmp`.
pub fn is_copy_temp(name: &str) -> bool {
    name.starts_with(".keepsake-") && name.ends_with(".tmp") && !name.contains('/')
}

/// One daily copy, for [`rotate`]: its id, when it was made, and the ISO week (year, week) of
/// that moment in local time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyCopy {
    pub id: String,
    pub at_ms: i64,
    pub week: (i32, u32),
}

/// What the rotation does with the daily copies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rotation {
    /// The newest `backupDaily` copies.
    pub daily: Vec<String>,
    /// The newest copy of each of the `backupWeekly` most recent weeks among the rest.
    pub weekly: Vec<String>,
    /// Everything else: removed.
    pub remove: Vec<String>,
}

/// Among daily copies, keep the newest `keep_daily`; from the rest, keep the newest copy of each
/// ISO week for the `keep_weekly` most recent weeks that have one; remove the others. Applied
/// after every daily backup, it leaves at most `keep_daily + keep_weekly` daily copies, and the
/// same ones as applying it once to all of them.
pub fn rotate(copies: &[DailyCopy], keep_daily: u32, keep_weekly: u32) -> Rotation {
    let mut sorted: Vec<&DailyCopy> = copies.iter().collect();
    sorted.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then_with(|| b.id.cmp(&a.id)));
    let mut r = Rotation::default();
    let mut weeks: Vec<(i32, u32)> = Vec::new();
    for (i, c) in sorted.into_iter().enumerate() {
        if i < keep_daily as usize {
            r.daily.push(c.id.clone());
        } else if !weeks.contains(&c.week) && weeks.len() < keep_weekly as usize {
            weeks.push(c.week);
            r.weekly.push(c.id.clone());
        } else {
            r.remove.push(c.id.clone());
        }
    }
    r
}

/// The copies of one kind beyond the newest `keep` (by time, then id), to remove.
pub fn beyond_newest(copies: &[(String, i64)], keep: usize) -> Vec<String> {
    let mut sorted: Vec<&(String, i64)> = copies.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    sorted.into_iter().skip(keep).map(|(id, _)| id.clone()).collect()
}

/// The lock row of the daily backup: `meta` key `daily_backup`, one JSON object. A host claims a
/// day ([`may_claim`]) in an IMMEDIATE transaction, so two hosts never make two backups for one
/// day, and finishes it with the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyRow {
    /// The local date (`YYYY-MM-DD`) the claim is for.
    pub day: String,
    pub claimed_at: i64,
    /// The claiming host process (its change-log origin).
    pub origin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// The copy made (outcome `made`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `made`, `skipped` (below the free-space floor) or `failed`; absent while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

pub const OUTCOME_MADE: &str = "made";
pub const OUTCOME_SKIPPED: &str = "skipped";
pub const OUTCOME_FAILED: &str = "failed";
pub const OUTCOME_RUNNING: &str = "running";

impl DailyRow {
    /// `made`, `skipped`, `failed`, or `running` while claimed and not finished.
    pub fn outcome(&self) -> &str {
        match (&self.finished_at, &self.outcome) {
            (Some(_), Some(o)) => o,
            (Some(_), None) => OUTCOME_FAILED,
            (None, _) => OUTCOME_RUNNING,
        }
    }
}

/// Whether a host may claim `today`'s daily backup at `now`, given the lock row: when the row is
/// for another day; for today, when the claim was never finished and is over an hour old (its
/// host died), or when the day's backup failed or was skipped over an hour ago (the hourly
/// retry). A day whose backup was made is never claimed again.
pub fn may_claim(row: Option<&DailyRow>, today: &str, now: i64) -> bool {
    let Some(r) = row else { return true };
    if r.day != today {
        return true;
    }
    match r.finished_at {
        None => now - r.claimed_at > CLAIM_STALE_MS,
        Some(at) => r.outcome() != OUTCOME_MADE && now - at >= RETRY_MS,
    }
}

/// The free space a daily backup must leave: 1 GiB or 10 % of the file system, whichever is
/// smaller.
pub fn floor_bytes(fs_total: u64) -> u64 {
    FLOOR_MAX.min(fs_total.saturating_mul(FLOOR_PERCENT) / 100)
}

/// Whether a copy of `copy_bytes` leaves the free-space floor: `avail` free of `fs_total`.
pub fn leaves_floor(avail: u64, fs_total: u64, copy_bytes: u64) -> bool {
    avail >= copy_bytes && avail - copy_bytes >= floor_bytes(fs_total)
}

/// The free space a pre-migration copy of a `db_bytes` database needs.
pub fn premigration_needs(db_bytes: u64) -> u64 {
    db_bytes.saturating_add(PREMIGRATION_MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn names_round_trip_and_nothing_else_is_a_copy() {
        let at = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        for k in Kind::ALL {
            let n = copy_file_name(k, at + 3_723_000, 6);
            assert_eq!(n, format!("keepsake-{}-20260101T010203Z-v6.db", k.as_str()));
            assert_eq!(parse_copy_name(&n), Some(CopyName { kind: k, at_ms: at + 3_723_000, schema: 6 }));
            assert_eq!(file_name_of_id(copy_id(&n)).as_deref(), Some(n.as_str()));
        }
        for bad in [
            "keepsake.db",
            "keepsake-daily-20260101T010203Z-v6.db.tmp",
            "keepsake-weekly-20260101T010203Z-v6.db",
            "keepsake-daily-20260101T010203-v6.db",
            "keepsake-daily-2026011T010203Z-v6.db",
            "keepsake-daily-20261301T010203Z-v6.db",
            "keepsake-daily-20260101T250203Z-v6.db",
            "keepsake-daily-20260101T010203Z-v0.db",
            "keepsake-daily-20260101T010203Z-v06.db",
            "keepsake-daily-20260101T010203Z-v.db",
            "keepsake-daily-20260101T010203Z-v6",
            "xkeepsake-daily-20260101T010203Z-v6.db",
            "keepsake-daily-20260101T010203Z-v6x.db",
            "keepsake-daily-２0260101T010203Z-v6.db",
        ] {
            assert_eq!(parse_copy_name(bad), None, "{bad}");
        }
        assert_eq!(file_name_of_id("../keepsake-daily-20260101T010203Z-v6"), None);
        assert!(is_copy_temp(".keepsake-daily-20260101T010203Z-v6.db.0123456789abcdef.tmp"));
        assert!(is_copy_temp(".keepsake-restore-0123456789abcdef.tmp"));
        assert!(!is_copy_temp("keepsake-daily-20260101T010203Z-v6.db"));
        assert!(!is_copy_temp(".other.tmp"));
    }

    fn week_of(day: i64) -> (i32, u32) {
        // day 0 is a Monday: weeks of seven days
        (2026, (day / 7) as u32 + 1)
    }

    fn days(range: std::ops::Range<i64>) -> Vec<DailyCopy> {
        range.map(|d| DailyCopy { id: format!("d{d:02}"), at_ms: d * DAY, week: week_of(d) }).collect()
    }

    #[test]
    fn rotation_keeps_the_newest_days_then_one_per_recent_week() {
        let r = rotate(&days(0..30), 7, 4);
        assert_eq!(r.daily, ["d29", "d28", "d27", "d26", "d25", "d24", "d23"]);
        // the rest are days 0..=22: weeks 4 (21, 22), 3 (14–20), 2 (7–13), 1 (0–6)
        assert_eq!(r.weekly, ["d22", "d20", "d13", "d06"]);
        assert_eq!(r.remove.len(), 30 - 11);
        // applied day after day, it ends where applying it once does
        let mut kept: Vec<DailyCopy> = Vec::new();
        for d in 0..30 {
            kept.extend(days(d..d + 1));
            let r = rotate(&kept, 7, 4);
            kept.retain(|c| !r.remove.contains(&c.id));
            assert!(kept.len() <= 11);
        }
        let mut ids: Vec<String> = kept.iter().map(|c| c.id.clone()).collect();
        ids.sort();
        let mut want: Vec<String> = rotate(&days(0..30), 7, 4).daily;
        want.extend(rotate(&days(0..30), 7, 4).weekly);
        want.sort();
        assert_eq!(ids, want);
    }

    #[test]
    fn rotation_edges() {
        assert_eq!(rotate(&days(0..3), 7, 4).remove, Vec::<String>::new());
        let r = rotate(&days(0..10), 1, 0);
        assert_eq!((r.daily.len(), r.weekly.len(), r.remove.len()), (1, 0, 9));
        // two copies of one day (a clock set back): both count, newest first
        let mut c = days(0..2);
        c.push(DailyCopy { id: "d01b".into(), at_ms: DAY + 5, week: week_of(1) });
        let r = rotate(&c, 1, 1);
        assert_eq!(r.daily, ["d01b"]);
        assert_eq!(r.weekly, ["d01"], "the newest of the rest of that week");
        assert_eq!(r.remove, ["d00"]);
        assert_eq!(beyond_newest(&[("a".into(), 1), ("b".into(), 3), ("c".into(), 2)], 2), ["a"]);
        assert!(beyond_newest(&[("a".into(), 1)], 3).is_empty());
    }

    fn row(day: &str, claimed: i64, finished: Option<i64>, outcome: Option<&str>) -> DailyRow {
        DailyRow {
            day: day.into(),
            claimed_at: claimed,
            origin: "o".into(),
            finished_at: finished,
            id: None,
            outcome: outcome.map(str::to_owned),
            message: None,
        }
    }

    #[test]
    fn claims() {
        let h = 3_600_000;
        assert!(may_claim(None, "2026-01-02", 0));
        assert!(may_claim(Some(&row("2026-01-01", 0, Some(1), Some("made"))), "2026-01-02", 2));
        assert!(!may_claim(Some(&row("2026-01-02", 0, Some(1), Some("made"))), "2026-01-02", 10 * h));
        // running: only a stale claim may be taken over
        assert!(!may_claim(Some(&row("2026-01-02", 0, None, None)), "2026-01-02", h));
        assert!(may_claim(Some(&row("2026-01-02", 0, None, None)), "2026-01-02", h + 1));
        // failed or skipped: retried hourly
        for o in ["failed", "skipped"] {
            assert!(!may_claim(Some(&row("2026-01-02", 0, Some(10), Some(o))), "2026-01-02", h));
            assert!(may_claim(Some(&row("2026-01-02", 0, Some(10), Some(o))), "2026-01-02", h + 10));
        }
        assert_eq!(row("d", 0, None, None).outcome(), "running");
        assert_eq!(row("d", 0, Some(1), None).outcome(), "failed");
        let json = serde_json::to_value(row("2026-01-02", 5, None, None)).unwrap();
        assert_eq!(json, serde_json::json!({"day": "2026-01-02", "claimedAt": 5, "origin": "o"}));
    }

    #[test]
    fn floors() {
        let g = 1024 * 1024 * 1024;
        assert_eq!(floor_bytes(100 * g), g);
        assert_eq!(floor_bytes(5 * g), g / 2);
        assert!(leaves_floor(3 * g, 100 * g, g));
        assert!(!leaves_floor(3 * g, 100 * g, 2 * g + 1));
        assert!(!leaves_floor(g, 100 * g, 2 * g), "never below zero");
        assert!(leaves_floor(g, 5 * g, g / 2));
        assert_eq!(premigration_needs(10), 10 + 64 * 1024 * 1024);
    }
}
