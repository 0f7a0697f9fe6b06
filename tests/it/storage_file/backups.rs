//! T27–T30 (reliability.md §7 "Copies and backups", §10): the copies Keepsake keeps of the
//! database.
//!
//! - T27: every committed fixture `v1.db … v<LATEST>.db` opened by the host leaves a pre-migration
//!   copy (none for the latest: nothing to migrate) whose bytes open with the `sqlite3` command,
//!   pass `integrity_check`, report the fixture's schema version and hold the fixture's chats and
//!   rows; a migration that cannot make its copy (the page-count cap, `RLIMIT_FSIZE`, a full tmpfs
//!   where one can be mounted) migrates nothing, leaves the file byte-identical and says why.
//! - T28: the host's clock injected, 30 simulated days of use leave exactly `backupDaily +
//!   backupWeekly` daily copies, the right ones; two hosts (two stores on one file, and two real
//!   processes) never make two backups for one day; the free-space floor skips a backup.
//! - T29: kill -9 of a host in the middle of a backup and of a restore, with another host writing
//!   meanwhile (50 each in CI, `KEEPSAKE_T29_KILLS`, 300 under `KEEPSAKE_LONG=1`): the database
//!   always opens and passes `integrity_check`, every acknowledged write is in the live database
//!   or — after a restore that committed — in the pre-restore copy it made, and the temp files a
//!   kill leaves are removed by the next backup.
//! - T30: restore of today's copy, of older-schema copies (every fixture), of a damaged copy and
//!   of a too-new one (both refused, nothing changed); undo; another host announces `restored`
//!   and serves the restored chats; the device's backup settings are never imported, exported or
//!   restored; the command line.
//!
//! Figures: the time and peak RSS of a pre-migration copy and of a backup at 1,000 sessions
//! (`KEEPSAKE_LONG=1`: 10,000; `KEEPSAKE_BACKUP_SESSIONS`).
use crate::harness::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use chrono::{Datelike, Local, TimeZone};
use keepsake_host::store::migrate::LATEST;
use keepsake_host::store::{Daily, Store};
use serde_json::{json, Value};

const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

// ---- helpers --------------------------------------------------------------------------------

/// The `backups` folder beside a database.
fn backups_dir(db: &Path) -> PathBuf {
    db.parent().unwrap().join("backups")
}

/// File names in `dir` (sorted), or none when it does not exist.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Copies (`keepsake-*.db`) in `dir`.
fn copies(dir: &Path) -> Vec<String> {
    names(dir).into_iter().filter(|n| n.starts_with("keepsake-") && n.ends_with(".db")).collect()
}

/// Temp files of copies (`.keepsake-*.tmp`) in `dir`.
fn temps(dir: &Path) -> Vec<String> {
    names(dir).into_iter().filter(|n| n.starts_with(".keepsake-") && n.ends_with(".tmp")).collect()
}

/// Run the `sqlite3` command on `db` (read-only) and return its output.
fn sqlite3(db: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3")
        .args(["-readonly", "-batch", "-noheader"])
        .arg(db)
        .arg(sql)
        .output()
        .expect("the sqlite3 command (apt install sqlite3)");
    assert!(out.status.success(), "sqlite3 {} {sql}: {}", db.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The chats of the database at `db`, as the `sqlite3` command reads them (every chat not in the
/// trash with every entry, in order): the version decides whether there is a trash.
fn chats(db: &Path, version: u32) -> String {
    let trash = if version >= 5 { "WHERE s.trashed_at IS NULL" } else { "" };
    sqlite3(
        db,
        &format!(
            "SELECT s.id, s.name, s.pinned, e.position, e.entry FROM sessions s \
             JOIN session_entries e ON e.session_id = s.id {trash} ORDER BY s.id, e.id;"
        ),
    )
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every fixture `v<k>.db` in `tests/fixtures/db/`, by version: a new schema's fixture is covered
/// as soon as it is committed.
fn fixtures() -> Vec<u32> {
    let dir = db_fixture("v1.db").parent().unwrap().to_path_buf();
    let mut v: Vec<u32> =
        names(&dir).iter().filter_map(|n| n.strip_prefix('v')?.strip_suffix(".db")?.parse().ok()).collect();
    v.sort();
    assert_eq!(v, (1..=LATEST).collect::<Vec<_>>(), "one fixture per schema version");
    v
}

/// A host on `db` with `KEEPSAKE_CLOCK_OFFSET_MS`.
fn host_at(db: &Path, offset_ms: i64) -> Host {
    Host::spawn_with(db, &[ORIGIN], &[("KEEPSAKE_CLOCK_OFFSET_MS", &offset_ms.to_string())])
}

/// Wait until `backups.list` says the daily backup of the host's day was made (or another
/// outcome than running), up to 60 s; returns `last`.
fn wait_daily(h: &mut Host, day: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = h.ok("backups.list", json!({}));
        let last = l["last"].clone();
        if last["day"] == json!(day) && last["outcome"] != json!("running") {
            return last;
        }
        assert!(Instant::now() < deadline, "no daily backup for {day}: {l}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A Keepsake JSON export of `n` sessions of `per` entries (~`chars` characters each).
fn export_doc(n: usize, per: usize, chars: usize, tag: &str) -> Value {
    let filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, 文档 検索. ";
    let text = |i: usize| {
        let mut t = format!("{tag} {i} ");
        while t.len() < chars {
            t.push_str(filler);
        }
        t
    };
    let sessions: Vec<Value> = (0..n)
        .map(|s| {
            let entries: Vec<Value> = (0..per)
                .map(|i| if i % 2 == 0 { user(&text(s * per + i)) } else { assistant(&text(s * per + i)) })
                .collect();
            json!({"id": format!("{tag}-{s:05}"), "name": format!("{tag} chat {s}"), "createdAt": 1_700_000_000_000i64 + s as i64,
                   "pinned": false, "entries": entries})
        })
        .collect();
    json!({"format": "keepsake.sessions", "version": 2, "sessions": sessions, "images": {}})
}

/// A database at `db` holding `n` generated sessions, written by the host itself
/// (`keepsake-host import`).
fn populate(db: &Path, n: usize, per: usize, chars: usize, tag: &str) {
    let doc = db.with_file_name(format!("{tag}.json"));
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::write(&doc, export_doc(n, per, chars, tag).to_string()).unwrap();
    let (code, out, err) = cli(db, &["import", doc.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    std::fs::remove_file(&doc).unwrap();
    // checkpoint and leave no -wal: a file that can be copied as a template
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
}

/// Copy a whole folder (a template database with its backups folder).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// The value of setting `key` in the database file at `p` (read-only, nothing created beside it).
fn setting_in(p: &Path, key: &str) -> Option<String> {
    let uri = format!("file:{}?immutable=1", p.display());
    let c = rusqlite::Connection::open_with_flags(
        uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .ok()?;
    c.query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| r.get(0)).ok()
}

/// A tmpfs of `bytes` mounted at a new folder (root only; `None` where mounting is not allowed:
/// the test prints that it skipped). Unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

// ---- T27: a copy before every migration ---------------------------------------------------

#[test]
fn t27_every_fixture_leaves_a_checked_premigration_copy_with_its_chats() {
    let mut lines = Vec::new();
    for k in fixtures() {
        let (_d, db) = temp_db();
        copy_db_fixture(&format!("v{k}.db"), &db);
        // the fixture as it is, read-only, before any host touches it
        let want_chats = chats(&db, k);
        assert!(!want_chats.is_empty(), "v{k}: the fixture has chats");
        let want_rows = db_fingerprint(&db);
        let mut h = Host::spawn(&db);
        let hello = h.hello();
        assert!(hello["dbError"].is_null(), "v{k}: {hello}");
        assert_eq!(hello["schemaVersion"], json!(LATEST), "v{k}");
        let list = h.ok("backups.list", json!({}));
        assert_eq!(h.close().0, Some(0));
        let dir = backups_dir(&db);
        let found: Vec<String> =
            copies(&dir).into_iter().filter(|n| n.starts_with("keepsake-premigration-")).collect();
        if k == LATEST {
            assert!(found.is_empty(), "v{k} is the latest schema: nothing to migrate, no copy: {found:?}");
            lines.push(format!("v{k}: latest, no copy"));
            continue;
        }
        assert_eq!(found.len(), 1, "v{k}: one pre-migration copy: {:?}", names(&dir));
        let name = &found[0];
        assert!(name.ends_with(&format!("Z-v{k}.db")), "named with the old schema: {name}");
        assert_eq!(list["copies"][0]["id"], json!(name.trim_end_matches(".db")), "{list}");
        assert_eq!(list["copies"][0]["kind"], "premigration");
        assert_eq!(list["copies"][0]["schemaVersion"], json!(k));
        let copy = dir.join(name);
        assert_eq!(mode(&copy), 0o600, "v{k}: the copy is private");
        assert_eq!(mode(&dir), 0o700, "v{k}: the backups folder is private");
        // the sqlite3 command reads the copy's bytes
        assert_eq!(sqlite3(&copy, "PRAGMA integrity_check;"), "ok", "v{k}");
        assert_eq!(sqlite3(&copy, "PRAGMA user_version;"), k.to_string(), "v{k}: the old schema");
        assert_eq!(sqlite3(&copy, "PRAGMA journal_mode;"), "delete", "v{k}: one self-contained file");
        assert_eq!(chats(&copy, k), want_chats, "v{k}: the same chats as the fixture");
        assert_eq!(db_fingerprint(&copy), want_rows, "v{k}: every row of every table");
        // nothing else beside it (no -wal, -shm or temp file; a daily copy, if the host lived 2 s)
        let others: Vec<String> =
            names(&dir).into_iter().filter(|n| n != name && !n.contains("-daily-")).collect();
        assert!(others.is_empty(), "v{k}: {others:?}");
        // the next start has nothing to migrate and makes no other copy
        let mut h = Host::spawn(&db);
        assert!(h.hello()["dbError"].is_null());
        assert_eq!(h.close().0, Some(0));
        let n = copies(&dir).iter().filter(|n| n.contains("-premigration-")).count();
        assert_eq!(n, 1, "v{k}: a second start made another copy");
        lines.push(format!(
            "v{k}: {name} ({} bytes) integrity ok, user_version {k}, chats and rows equal",
            std::fs::metadata(&copy).unwrap().len()
        ));
    }
    eprintln!("T27 pre-migration copies: {}", lines.join("; "));
}

/// The open path's copy, as the library makes it: the newest 3 pre-migration copies are kept.
#[test]
fn t27_only_the_newest_three_premigration_copies_are_kept() {
    let (_d, db) = temp_db();
    let dir = backups_dir(&db);
    for i in 0..5 {
        std::fs::remove_file(&db).ok();
        copy_db_fixture("v5.db", &db);
        // a distinct time each: the names differ by their second
        if i > 0 {
            thread::sleep(Duration::from_millis(1100));
        }
        let s = Store::open(&db).expect("open and migrate");
        s.close();
        let n = copies(&dir).iter().filter(|n| n.contains("-premigration-")).count();
        assert_eq!(n, (i + 1).min(3), "after {} migrations: {:?}", i + 1, copies(&dir));
    }
}

fn hello_error(h: &mut Host) -> Value {
    let hello = h.hello();
    hello["dbError"].clone()
}

/// A migration whose copy cannot be made: the page-count cap (SQLite's `SQLITE_FULL`, as on a full
/// disk), `RLIMIT_FSIZE` (the kernel refuses the write) and a full tmpfs (the free-space check).
/// Nothing is migrated, the file stays byte-identical and readable, and the error says why.
#[test]
fn t27_a_migration_with_the_disk_full_leaves_the_database_byte_identical() {
    let mut lines = Vec::new();
    for k in [1u32, LATEST - 1] {
        // 1) the page-count cap
        let (_d, db) = temp_db();
        copy_db_fixture(&format!("v{k}.db"), &db);
        let before = std::fs::read(&db).unwrap();
        let cap = (before.len() / 4096 / 2).to_string();
        let mut h = Host::spawn_configured(&db, |c| {
            c.env("KEEPSAKE_MAX_PAGE_COUNT", &cap);
        });
        let e = hello_error(&mut h);
        assert_eq!(e["code"], "disk_full", "v{k} page cap: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(&backups_dir(&db).display().to_string()), "where the copy was to go: {msg}");
        assert!(msg.contains("Nothing was changed") && msg.contains("Free some space"), "what to do: {msg}");
        assert_eq!(h.err("history.get", json!({})), "disk_full", "every op reports it");
        assert_eq!(h.close().0, Some(0));
        assert!(std::fs::read(&db).unwrap() == before, "v{k} page cap: the database changed");
        assert_eq!(sqlite3(&db, "PRAGMA user_version;"), k.to_string());
        assert_eq!(sqlite3(&db, "PRAGMA integrity_check;"), "ok");
        assert!(copies(&backups_dir(&db)).is_empty() && temps(&backups_dir(&db)).is_empty());
        lines.push(format!("v{k} page cap: {} — {msg}", e["code"]));

        // 2) RLIMIT_FSIZE below the database's size
        let (_d2, db) = temp_db();
        copy_db_fixture(&format!("v{k}.db"), &db);
        let limit = (before.len() / 2) as u64;
        let mut h = Host::spawn_configured(&db, |c| {
            limit_file_size(c, limit);
        });
        let e = hello_error(&mut h);
        assert!(e["code"] == "internal" || e["code"] == "disk_full", "v{k} RLIMIT_FSIZE: {e}");
        let msg = e["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("could not be made") && msg.contains("Nothing was changed"), "{msg}");
        assert_eq!(h.close().0, Some(0));
        assert!(std::fs::read(&db).unwrap() == before, "v{k} RLIMIT_FSIZE: the database changed");
        assert_eq!(sqlite3(&db, "PRAGMA user_version;"), k.to_string());
        assert!(copies(&backups_dir(&db)).is_empty() && temps(&backups_dir(&db)).is_empty());
        lines.push(format!("v{k} RLIMIT_FSIZE: {} — {msg}", e["code"]));
        // with room again, the same file migrates and keeps its copy
        let mut h = Host::spawn(&db);
        assert!(hello_error(&mut h).is_null());
        assert_eq!(h.close().0, Some(0));
        assert_eq!(copies(&backups_dir(&db)).len(), 1);
    }
    // 3) a real full disk: a tmpfs with room for the database but not for its copy plus 64 MiB
    let fixture = std::fs::read(db_fixture("v1.db")).unwrap();
    match Tmpfs::mount(fixture.len() as u64 + 1024 * 1024) {
        None => lines.push("tmpfs: skipped (mount not allowed here)".into()),
        Some(fs) => {
            let db = fs.path().join("keepsake.db");
            std::fs::write(&db, &fixture).unwrap();
            let mut h = Host::spawn(&db);
            let e = hello_error(&mut h);
            assert_eq!(e["code"], "disk_full", "tmpfs: {e}");
            let msg = e["message"].as_str().unwrap().to_owned();
            assert!(msg.contains("MiB free") && msg.contains("needs"), "{msg}");
            assert_eq!(h.close().0, Some(0));
            assert!(std::fs::read(&db).unwrap() == fixture, "tmpfs: the database changed");
            assert_eq!(sqlite3(&db, "PRAGMA user_version;"), "1");
            lines.push(format!("tmpfs: {} — {msg}", e["code"]));
        }
    }
    eprintln!("T27 disk full: {}", lines.join(" | "));
}

// ---- T28: daily backups ---------------------------------------------------------------------

/// A store on `db` whose clock is `clock`.
fn store_at(db: &Path, clock: &Arc<AtomicI64>) -> Store {
    let mut s = Store::open(db).expect("open");
    let c = clock.clone();
    s.set_clock(Arc::new(move || c.load(Ordering::SeqCst)));
    s
}

fn set(s: &mut Store, key: &str, v: Value) {
    let mut m = serde_json::Map::new();
    m.insert(key.into(), v);
    s.settings_set(&m, None).expect("settings.set");
}

/// 10:00 local time on the `d`-th day after 2026-06-01 (no daylight-saving change in June).
fn day_at(d: i64) -> i64 {
    let start = Local.with_ymd_and_hms(2026, 6, 1, 10, 0, 0).single().expect("a local time");
    start.timestamp_millis() + d * DAY_MS
}

/// The daily copies the rotation must leave after days `0..days`: the newest `daily`, then the
/// newest of each of the `weekly` most recent ISO weeks (local time) among the rest. Written
/// here independently of the host's code.
fn expected_daily(days: i64, daily: usize, weekly: usize) -> BTreeSet<i64> {
    let mut newest_first: Vec<i64> = (0..days).rev().collect();
    let mut keep: BTreeSet<i64> = newest_first.drain(..daily.min(days as usize)).collect();
    let mut weeks: Vec<(i32, u32)> = Vec::new();
    for d in newest_first {
        let w = Local.timestamp_millis_opt(day_at(d)).unwrap().iso_week();
        let w = (w.year(), w.week());
        if !weeks.contains(&w) && weeks.len() < weekly {
            weeks.push(w);
            keep.insert(d);
        }
    }
    keep
}

/// The day (index from 2026-06-01) of a daily copy's name.
fn day_of_copy(name: &str) -> i64 {
    let t = name.strip_prefix("keepsake-daily-").unwrap();
    let t = &t[..15];
    let at = chrono::NaiveDateTime::parse_from_str(t, "%Y%m%dT%H%M%S").unwrap().and_utc().timestamp_millis();
    (at - day_at(0)).div_euclid(DAY_MS)
}

#[test]
fn t28_thirty_days_leave_exactly_the_generations_and_two_hosts_never_double_a_day() {
    let started = Instant::now();
    let (_d, db) = temp_db();
    let clock = Arc::new(AtomicI64::new(day_at(0)));
    let mut a = store_at(&db, &clock);
    let mut b = store_at(&db, &clock);
    let dir = backups_dir(&db);
    let mut made_per_day = Vec::new();
    for d in 0..30 {
        clock.store(day_at(d), Ordering::SeqCst);
        // a write or two a day
        set(&mut a, "day", json!(d));
        if d % 3 == 0 {
            set(&mut b, "note", json!(format!("day {d}")));
        }
        // both hosts run their check at the same moment, on threads of their own
        let (ta, tb) = thread::scope(|sc| {
            let ta = sc.spawn(|| a.daily_backup(&|| false).expect("daily a"));
            let tb = sc.spawn(|| b.daily_backup(&|| false).expect("daily b"));
            (ta.join().unwrap(), tb.join().unwrap())
        });
        let made =
            [&ta, &tb].iter().filter(|r| matches!(r, Daily::Ran(row) if row.outcome() == "made")).count();
        made_per_day.push(made);
        assert_eq!(made, 1, "day {d}: {ta:?} / {tb:?}");
        // later the same day: nothing is due
        clock.store(day_at(d) + 5 * HOUR_MS, Ordering::SeqCst);
        assert_eq!(a.daily_backup(&|| false).unwrap(), Daily::NotDue, "day {d}");
        assert_eq!(b.daily_backup(&|| false).unwrap(), Daily::NotDue, "day {d}");
        let daily: Vec<String> =
            copies(&dir).into_iter().filter(|n| n.starts_with("keepsake-daily-")).collect();
        let have: BTreeSet<i64> = daily.iter().map(|n| day_of_copy(n)).collect();
        assert_eq!(have.len(), daily.len(), "day {d}: two copies of one day: {daily:?}");
        assert_eq!(have, expected_daily(d + 1, 7, 4), "day {d}: {daily:?}");
    }
    let daily: Vec<String> = copies(&dir).into_iter().filter(|n| n.starts_with("keepsake-daily-")).collect();
    assert_eq!(daily.len(), 7 + 4, "{daily:?}");
    // backups.list: 7 daily, 4 weekly, the last outcome
    let l = a.backups_list().unwrap();
    let kinds: Vec<&str> =
        l["copies"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "daily").count(), 7, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "weekly").count(), 4, "{kinds:?}");
    assert_eq!(&kinds[..7], ["daily"; 7], "the newest seven are the daily ones");
    assert_eq!(l["last"]["outcome"], "made");
    assert_eq!(l["copies"][0]["sessions"], json!(0));
    // the newest copy holds the last day's write
    let newest = dir.join(format!("{}.db", l["copies"][0]["id"].as_str().unwrap()));
    assert_eq!(setting_in(&newest, "day").as_deref(), Some("29"));
    // fewer generations: the next day's rotation applies them
    set(&mut a, "backupDaily", json!(2));
    set(&mut a, "backupWeekly", json!(1));
    clock.store(day_at(30), Ordering::SeqCst);
    assert!(matches!(a.daily_backup(&|| false).unwrap(), Daily::Ran(_)));
    let have: BTreeSet<i64> =
        copies(&dir).iter().filter(|n| n.starts_with("keepsake-daily-")).map(|n| day_of_copy(n)).collect();
    assert_eq!(have, expected_daily(31, 2, 1));
    // off: nothing
    set(&mut a, "backupsEnabled", json!(false));
    clock.store(day_at(31), Ordering::SeqCst);
    assert_eq!(a.daily_backup(&|| false).unwrap(), Daily::Off);
    eprintln!(
        "T28: 30 simulated days, two stores checking at once each day: backups made per day {:?} (all 1), daily copies left {} = backupDaily 7 + backupWeekly 4, the expected days; {} ms",
        made_per_day.iter().collect::<BTreeSet<_>>(),
        daily.len(),
        started.elapsed().as_millis()
    );
    a.close();
    b.close();
}

/// A claim whose host died is taken over after an hour; a failed day is tried again after an
/// hour; a made day never again.
#[test]
fn t28_a_dead_claim_is_taken_over_after_an_hour() {
    let (_d, db) = temp_db();
    let clock = Arc::new(AtomicI64::new(day_at(3)));
    let mut s = store_at(&db, &clock);
    let today = keepsake_host::util::time::local_day(day_at(3));
    let row = |claimed: i64| json!({"day": today, "claimedAt": claimed, "origin": "pid 1 dead"}).to_string();
    let put = |v: String| {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('daily_backup', ?1)", [v]).unwrap();
    };
    put(row(day_at(3) - 30 * 60_000));
    assert_eq!(s.daily_backup(&|| false).unwrap(), Daily::NotDue, "a claim 30 min old is another host's");
    put(row(day_at(3) - HOUR_MS - 1));
    match s.daily_backup(&|| false).unwrap() {
        Daily::Ran(r) => assert_eq!(r.outcome(), "made"),
        other => panic!("a claim over an hour old was not taken over: {other:?}"),
    }
    assert_eq!(copies(&backups_dir(&db)).len(), 1);
    s.close();
}

/// Two real host processes started together on each of three days (the clock moved with
/// `KEEPSAKE_CLOCK_OFFSET_MS`): one daily copy per day.
#[test]
fn t28_two_host_processes_make_one_backup_a_day() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.append", json!({"entry": user("kept")}));
    h.close();
    let mut days = Vec::new();
    for back in [3i64, 2, 1] {
        let off = -back * DAY_MS;
        let day = keepsake_host::util::time::local_day(keepsake_host::util::time::now_ms() + off);
        let mut a = host_at(&db, off);
        let mut b = host_at(&db, off);
        assert!(a.hello()["dbError"].is_null());
        assert!(b.hello()["dbError"].is_null());
        wait_daily(&mut a, &day);
        wait_daily(&mut b, &day);
        a.close();
        b.close();
        days.push(day);
    }
    let daily: Vec<String> =
        copies(&backups_dir(&db)).into_iter().filter(|n| n.contains("-daily-")).collect();
    let mut per_day: BTreeMap<String, usize> = BTreeMap::new();
    for n in &daily {
        let t = &n["keepsake-daily-".len()..][..15];
        let at =
            chrono::NaiveDateTime::parse_from_str(t, "%Y%m%dT%H%M%S").unwrap().and_utc().timestamp_millis();
        *per_day.entry(keepsake_host::util::time::local_day(at)).or_default() += 1;
    }
    for d in &days {
        assert_eq!(per_day.get(d), Some(&1), "one copy for {d}: {daily:?}");
    }
    eprintln!("T28 processes: 2 hosts × 3 days ({days:?}) → daily copies {daily:?}");
}

/// The free-space floor (a tmpfs where one can be mounted): the backup is skipped and says why.
#[test]
fn t28_a_backup_that_would_pass_the_free_space_floor_is_skipped() {
    let Some(fs) = Tmpfs::mount(64 * 1024 * 1024) else {
        eprintln!("T28 floor: skipped (mount not allowed here)");
        return;
    };
    let db = fs.path().join("keepsake.db");
    populate(&db, 40, 10, 4000, "floor");
    let size = std::fs::metadata(&db).unwrap().len();
    // fill the disk until a copy would leave less than the floor (10 % of 64 MiB) but still fits
    let (avail, _) = keepsake_host::util::files::free_space(fs.path()).unwrap();
    let filler = avail - size - 3 * 1024 * 1024;
    std::fs::write(fs.path().join("filler"), vec![1u8; filler as usize]).unwrap();
    let clock = Arc::new(AtomicI64::new(day_at(0)));
    let mut s = store_at(&db, &clock);
    match s.daily_backup(&|| false).unwrap() {
        Daily::Ran(r) => {
            assert_eq!(r.outcome(), "skipped", "{r:?}");
            let m = r.message.clone().unwrap();
            assert!(m.contains("free") && m.contains("1 GiB or 10 %"), "{m}");
            eprintln!("T28 floor: database {size} bytes on a full 64 MiB tmpfs: {m}");
        }
        other => panic!("{other:?}"),
    }
    assert!(copies(&backups_dir(&db)).is_empty() && temps(&backups_dir(&db)).is_empty());
    let l = s.backups_list().unwrap();
    assert_eq!(l["last"]["outcome"], "skipped");
    // skipped: tried again an hour later, not before
    clock.store(day_at(0) + 30 * 60_000, Ordering::SeqCst);
    assert_eq!(s.daily_backup(&|| false).unwrap(), Daily::NotDue);
    clock.store(day_at(0) + 2 * HOUR_MS, Ordering::SeqCst);
    assert!(matches!(s.daily_backup(&|| false).unwrap(), Daily::Ran(_)));
    s.close();
    // the skipped day is long past (June 2026): doctor warns
    let (code, out, _) = cli(&db, &["doctor"]);
    let line = out.lines().find(|l| l.contains("backups:")).unwrap_or_default().to_owned();
    assert!(line.contains("skipped") && line.starts_with("warn"), "{code}: {out}");
}

// ---- T29: kill -9 during a backup and a restore ---------------------------------------------

fn kills() -> usize {
    size("KEEPSAKE_T29_KILLS", 50, 300)
}

/// A host writing settings `w<i>` with a clientRequestId each until `stop`; returns the keys
/// acknowledged.
fn writer(db: PathBuf, stop: Arc<AtomicBool>) -> thread::JoinHandle<Vec<String>> {
    thread::spawn(move || {
        let mut h = Host::spawn(&db);
        let mut acked = Vec::new();
        let mut i = 0;
        while !stop.load(Ordering::SeqCst) {
            let key = format!("w{i}");
            let r =
                h.call("settings.set", json!({"map": {key.clone(): i}, "clientRequestId": format!("c{i}")}));
            if r["ok"] == json!(true) {
                acked.push(key);
            }
            i += 1;
        }
        h.close();
        acked
    })
}

/// The template of T29: a few MB of chats, a `manual` copy of an earlier state and the v5
/// fixture placed in the backups folder as an older-schema copy.
fn t29_template(dir: &Path) -> (PathBuf, String) {
    let db = dir.join("data").join("keepsake.db");
    populate(&db, 300, 12, 1500, "k");
    let mut h = Host::spawn(&db);
    // the daily backup stays out of the timing (its path is the same copy code)
    h.ok("settings.set", json!({"map": {"state": "copied", "backupsEnabled": false}}));
    let id = h.ok("backups.create", json!({}))["copy"]["id"].as_str().unwrap().to_owned();
    h.ok("settings.set", json!({"map": {"state": "after the copy"}}));
    h.close();
    let old = backups_dir(&db).join(format!("keepsake-manual-20200101T000000Z-v{}.db", LATEST - 1));
    std::fs::copy(db_fixture(&format!("v{}.db", LATEST - 1)), old).unwrap();
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    (db, id)
}

/// How long one call of `op` takes on a fresh copy of the template (median of 3).
fn timed_call(template: &Path, op: &str, args: &Value) -> Duration {
    let mut t: Vec<Duration> = (0..3)
        .map(|_| {
            let w = tempfile::tempdir().unwrap();
            copy_tree(template, w.path());
            let mut h = Host::spawn(&w.path().join("keepsake.db"));
            h.hello();
            let s = Instant::now();
            h.ok(op, args.clone());
            let d = s.elapsed();
            h.close();
            d
        })
        .collect();
    t.sort();
    t[1]
}

#[derive(Default)]
struct Kills {
    runs: usize,
    committed: usize,
    temps_left: usize,
    temps_cleaned: usize,
    acked: usize,
    in_prerestore: usize,
    failures: Vec<String>,
}

/// One kill: a copy of the template, a writer, `op` sent and the host killed after `delay`.
fn kill_once(template: &Path, op: &str, args: &Value, delay: Duration, o: &mut Kills) {
    let w = tempfile::tempdir().unwrap();
    copy_tree(template, w.path());
    let db = w.path().join("keepsake.db");
    let dir = backups_dir(&db);
    let stop = Arc::new(AtomicBool::new(false));
    let wr = writer(db.clone(), stop.clone());
    let mut h = Host::spawn(&db);
    h.hello();
    h.send(&json!({"id": "k", "op": op, "args": args}));
    thread::sleep(delay);
    let _ = h.child.kill();
    let _ = h.child.wait();
    drop(h);
    thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::SeqCst);
    let acked = wr.join().expect("writer");
    o.runs += 1;
    o.acked += acked.len();
    let run = o.runs;
    let ic = integrity(&db);
    if ic != "ok" {
        o.failures.push(format!("run {run}: integrity_check {ic}"));
        return;
    }
    // a restore that committed left its record and its pre-restore copy
    let record: Option<Value> = sql(&db)
        .query_row("SELECT value FROM meta WHERE key = 'last_restore'", [], |r| r.get::<_, String>(0))
        .ok()
        .and_then(|v| serde_json::from_str(&v).ok());
    let undo = record.as_ref().map(|r| dir.join(format!("{}.db", r["undo"].as_str().unwrap_or(""))));
    if record.is_some() {
        o.committed += 1;
    }
    for key in &acked {
        let live = setting_in(&db, key).is_some()
            || sql(&db).query_row("SELECT 1 FROM settings WHERE key = ?1", [key], |_| Ok(())).is_ok();
        if live {
            continue;
        }
        if undo.as_ref().is_some_and(|u| setting_in(u, key).is_some()) {
            o.in_prerestore += 1;
            continue;
        }
        o.failures
            .push(format!("run {run}: acknowledged {key} lost (restore committed: {})", record.is_some()));
    }
    // the database opens, and the next backup (an hour and more later) removes the temp files
    let left = temps(&dir);
    if !left.is_empty() {
        o.temps_left += 1;
    }
    let mut next = host_at(&db, 2 * HOUR_MS);
    let hello = next.hello();
    if !hello["dbError"].is_null() {
        o.failures.push(format!("run {run}: the database does not open: {hello}"));
    }
    let r = next.call("backups.create", json!({}));
    next.close();
    if r["ok"] != json!(true) {
        o.failures.push(format!("run {run}: the next backup failed: {r}"));
    }
    if !left.is_empty() {
        if temps(&dir).is_empty() {
            o.temps_cleaned += 1;
        } else {
            o.failures.push(format!("run {run}: temp files left after the next backup: {:?}", temps(&dir)));
        }
    }
}

#[test]
fn t29_kill_9_during_a_backup_and_a_restore_loses_nothing_acknowledged() {
    let _serial = serial();
    let started = Instant::now();
    let t = tempfile::tempdir().unwrap();
    let (db, copy_id) = t29_template(t.path());
    let template = db.parent().unwrap().to_path_buf();
    let old_id = format!("keepsake-manual-20200101T000000Z-v{}", LATEST - 1);
    let n = kills();
    let mut rng = Rng::from_env();
    let seed = rng.seed();
    let backup_ms = timed_call(&template, "backups.create", &json!({}));
    let restore_ms = timed_call(&template, "backups.restore", &json!({"id": copy_id}));
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for (label, op, window) in
        [("backup", "backups.create", backup_ms), ("restore", "backups.restore", restore_ms)]
    {
        let mut o = Kills::default();
        for i in 0..n {
            let args = match op {
                "backups.restore" if i % 2 == 1 => json!({"id": old_id}),
                "backups.restore" => json!({"id": copy_id}),
                _ => json!({}),
            };
            // from the request's start to a little past its end
            let delay = Duration::from_micros(rng.range(0, window.as_micros() as u64 * 5 / 4));
            kill_once(&template, op, &args, delay, &mut o);
        }
        lines.push(format!(
            "{label}: {} kills within 0–{} ms of the request (it takes {} ms), integrity ok {}/{}, acknowledged writes {} \
             (lost 0 required; {} found in the pre-restore copy), restores committed {}, kills that left a temp file {} \
             (removed by the next backup {})",
            o.runs,
            window.as_millis() * 5 / 4,
            window.as_millis(),
            o.runs - o.failures.iter().filter(|f| f.contains("integrity")).count(),
            o.runs,
            o.acked,
            o.in_prerestore,
            o.committed,
            o.temps_left,
            o.temps_cleaned
        ));
        failures.extend(o.failures);
    }
    eprintln!("T29: {}; {} s, seed {seed}", lines.join("; "), started.elapsed().as_secs());
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}

// ---- T30: restore ---------------------------------------------------------------------------

fn session_names(h: &mut Host) -> Vec<String> {
    let mut v: Vec<String> = h
        .list(json!({}))
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

fn new_chat(h: &mut Host, text: &str) {
    h.ok("history.clear", json!({}));
    h.ok("history.append", json!({"entry": user(text), "fallbackName": text}));
    let id = bound(h);
    h.ok("sessions.rename", json!({"id": id, "name": text}));
}

#[test]
fn t30_restore_of_todays_copy_and_undo_with_another_host_told() {
    let (_d, db) = temp_db();
    let mut a = Host::spawn(&db);
    a.hello();
    a.ok("settings.set", json!({"map": {"backupsEnabled": false}}));
    new_chat(&mut a, "yesterday one");
    new_chat(&mut a, "yesterday two");
    a.ok("settings.set", json!({"map": {"theme": "dark", "backupDaily": 3}}));
    let copy = a.ok("backups.create", json!({}))["copy"].clone();
    assert_eq!(copy["kind"], "manual");
    assert_eq!(copy["sessions"], 2, "{copy}");
    let copy_id = copy["id"].as_str().unwrap().to_owned();
    new_chat(&mut a, "today");
    a.ok("settings.set", json!({"map": {"theme": "light", "backupDaily": 10}}));
    let today = session_names(&mut a);
    assert_eq!(today, ["today", "yesterday one", "yesterday two"]);
    // another host, connected, with its poller running
    let mut b = Host::spawn(&db);
    b.hello();
    assert_eq!(session_names(&mut b), today);
    b.settle(Duration::from_millis(600));
    b.events.clear();
    // restore
    let seq_before = a.ok("history.meta", json!({}))["changeSeq"].as_i64().unwrap();
    let (r, ev) = changed(&mut a, "backups.restore", json!({"id": copy_id, "clientRequestId": "r-1"}));
    let told = Instant::now();
    assert_eq!(r["restored"], json!(copy_id));
    assert_eq!(r["schemaVersion"], json!(LATEST));
    let undo = r["undo"].as_str().unwrap().to_owned();
    assert!(undo.starts_with("keepsake-prerestore-"), "{r}");
    assert_eq!(ev["areas"], json!({"restored": true}), "{ev}");
    assert_eq!(ev["seq"], json!(seq_before + 1), "numbered after every change");
    assert_eq!(session_names(&mut a), ["yesterday one", "yesterday two"]);
    let s = a.ok("settings.get", json!({"keys": ["theme", "backupDaily"]}));
    assert_eq!(
        s,
        json!({"theme": "dark", "backupDaily": 10}),
        "the chats' settings restored, the device's kept"
    );
    // a retry of the same request restores nothing again
    assert_eq!(a.ok("backups.restore", json!({"id": copy_id, "clientRequestId": "r-1"})), r);
    // the other host announces it within its poller period, then serves the restored chats
    let got = b.wait_event(Duration::from_secs(10), |e| e["areas"]["restored"] == json!(true));
    let latency = told.elapsed();
    let got = got.expect("the other host announced the restore");
    assert_eq!(got["seq"], ev["seq"]);
    assert_eq!(session_names(&mut b), ["yesterday one", "yesterday two"]);
    assert_eq!(b.ok("changes.since", json!({"seq": seq_before - 1}))["reset"], true);
    assert_eq!(b.ok("changes.since", json!({"seq": seq_before}))["areas"], json!({"restored": true}));
    // undo
    let l = a.ok("backups.list", json!({}));
    assert_eq!(l["undo"]["id"], json!(undo), "{l}");
    let r2 = a.ok("backups.restore", json!({"id": undo}));
    assert_eq!(session_names(&mut a), today, "undo brings today's chats back");
    assert_eq!(a.ok("settings.get", json!({"keys": ["theme"]}))["theme"], "light");
    assert!(b.wait_event(Duration::from_secs(10), |e| e["seq"] == json!(seq_before + 2)).is_some());
    assert_eq!(session_names(&mut b), today);
    // undo is undoable too, until something is written
    let l = a.ok("backups.list", json!({}));
    assert_eq!(l["undo"]["id"], r2["undo"]);
    new_chat(&mut a, "after");
    assert!(a.ok("backups.list", json!({}))["undo"].is_null(), "a write since the restore: no undo");
    let kinds: Vec<String> = a.ok("backups.list", json!({}))["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["prerestore", "prerestore", "manual"]);
    a.close();
    b.close();
    assert_eq!(integrity(&db), "ok");
    eprintln!(
        "T30: a restore announced by the other host after {} ms (poller period 250 ms)",
        latency.as_millis()
    );
}

#[test]
fn t30_restore_of_older_schema_copies_migrates_them_and_leaves_them_untouched() {
    let mut lines = Vec::new();
    for k in fixtures().into_iter().filter(|k| *k < LATEST) {
        let (_d, db) = temp_db();
        let mut h = Host::spawn(&db);
        new_chat(&mut h, "current");
        let name = format!("keepsake-manual-20200102T030405Z-v{k}.db");
        let placed = backups_dir(&db).join(&name);
        std::fs::create_dir_all(backups_dir(&db)).unwrap();
        std::fs::copy(db_fixture(&format!("v{k}.db")), &placed).unwrap();
        let bytes = std::fs::read(&placed).unwrap();
        let l = h.ok("backups.list", json!({}));
        let row =
            l["copies"].as_array().unwrap().iter().find(|c| c["id"] == json!(name.trim_end_matches(".db")));
        assert_eq!(row.unwrap()["schemaVersion"], json!(k));
        assert_eq!(row.unwrap()["sessions"], json!(3), "a version-aware count: {l}");
        let r = h.ok("backups.restore", json!({"id": name.trim_end_matches(".db")}));
        assert_eq!(r["schemaVersion"], json!(k));
        assert_eq!(session_names(&mut h).len(), 3, "v{k}: the fixture's chats");
        assert_eq!(h.list(json!({"query": "世界"}))[0]["id"], "s-cjk", "v{k}: searchable");
        let live = h.ok("history.get", json!({"images": "ref"}));
        assert_eq!(live["activeSessionId"], "s-bound", "v{k}: {live}");
        assert_eq!(h.ok("history.meta", json!({}))["length"], 5);
        assert!(std::fs::read(&placed).unwrap() == bytes, "v{k}: the copy itself was changed");
        assert!(temps(&backups_dir(&db)).is_empty(), "v{k}: the scratch copy was removed");
        // undo goes back to the current chat
        h.ok("backups.restore", json!({"id": r["undo"]}));
        assert_eq!(session_names(&mut h), ["current"]);
        h.close();
        assert_eq!(integrity(&db), "ok");
        lines.push(format!("v{k} restored, migrated to v{LATEST}, copy unchanged"));
    }
    eprintln!("T30 older copies: {}", lines.join("; "));
}

#[test]
fn t30_a_damaged_or_too_new_copy_is_refused_and_nothing_changes() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"backupsEnabled": false}}));
    new_chat(&mut h, "before");
    let id = h.ok("backups.create", json!({}))["copy"]["id"].as_str().unwrap().to_owned();
    new_chat(&mut h, "now");
    let dir = backups_dir(&db);
    // damaged: a page in the middle overwritten
    let damaged = format!("{}.db", id.replace("manual", "daily"));
    let mut bytes = std::fs::read(dir.join(format!("{id}.db"))).unwrap();
    for b in &mut bytes[4096..] {
        *b = 0x5a;
    }
    std::fs::write(dir.join(&damaged), &bytes).unwrap();
    // too new: the latest fixture one version ahead
    let too_new = format!("keepsake-manual-20200101T000000Z-v{}.db", LATEST + 1);
    copy_db_fixture(&format!("v{LATEST}.db"), &dir.join(&too_new));
    {
        let c = rusqlite::Connection::open(dir.join(&too_new)).unwrap();
        c.pragma_update(None, "user_version", LATEST + 1).unwrap();
        c.execute_batch("PRAGMA journal_mode=DELETE;").unwrap();
    }
    h.close();
    let before = db_fingerprint(&db);
    let files_before = names(&dir);
    let mut h = Host::spawn(&db);
    let cases = [
        (damaged.trim_end_matches(".db").to_owned(), "bad_request", "damaged"),
        (too_new.trim_end_matches(".db").to_owned(), "unsupported", "newer keepsake-host"),
        ("keepsake-daily-20200101T000000Z-v6".to_owned(), "not_found", "no copy"),
        ("../keepsake".to_owned(), "bad_request", "not a copy's id"),
    ];
    for (id, code, says) in &cases {
        let r = h.call("backups.restore", json!({"id": id}));
        assert_eq!(r["error"]["code"], json!(code), "{id}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(says), "{id}: {r}");
    }
    assert_eq!(session_names(&mut h), ["before", "now"]);
    let ignore_expiry = |rows: Vec<String>| -> Vec<String> {
        rows.into_iter().filter(|r| !r.contains("trash_expired_at") && !r.starts_with("meta: ")).collect()
    };
    assert_eq!(ignore_expiry(db_fingerprint(&db)), ignore_expiry(before), "the database changed");
    assert_eq!(names(&dir), files_before, "no pre-restore copy, no temp file");
    // a refused copy is not the live database's damage: writes go on
    h.ok("history.append", json!({"entry": user("still writable")}));
    h.close();
    assert!(!db.with_file_name("keepsake.db.damaged").exists(), "the live database was marked damaged");
}

#[test]
fn t30_backup_settings_belong_to_the_device() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    new_chat(&mut h, "chat");
    let other = tempfile::tempdir().unwrap();
    let folder = other.path().join("my backups");
    h.ok(
        "settings.set",
        json!({"map": {"backupFolder": folder.display().to_string(), "backupDaily": 9, "backupWeekly": 2, "backupsEnabled": true}}),
    );
    // validated
    for (k, v) in [
        ("backupFolder", json!("relative/folder")),
        ("backupDaily", json!(0)),
        ("backupDaily", json!(366)),
        ("backupWeekly", json!(53)),
        ("backupsEnabled", json!("yes")),
    ] {
        assert_eq!(h.err("settings.set", json!({"map": {k: v}})), "bad_request", "{k} {v}");
    }
    let link = other.path().join("link");
    std::os::unix::fs::symlink(other.path(), &link).unwrap();
    assert_eq!(
        h.err("settings.set", json!({"map": {"backupFolder": link.display().to_string()}})),
        "bad_request"
    );
    // copies go to the folder (created 0700)
    let c = h.ok("backups.create", json!({}))["copy"].clone();
    assert!(folder.join(format!("{}.db", c["id"].as_str().unwrap())).is_file());
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(h.ok("backups.list", json!({}))["folder"], json!(folder.display().to_string()));
    // an export never carries them
    let id = bound(&mut h);
    let ex = h.ok("sessions.export", json!({"ids": [id], "format": "json"}));
    for k in ["backupFolder", "backupDaily", "backupWeekly", "backupsEnabled"] {
        assert!(!ex["text"].as_str().unwrap().contains(k), "{k} exported");
    }
    // an import never writes them, and its preview says so
    let dump = json!({"systemPrompt": "imported", "backupFolder": "/tmp/elsewhere", "backupsEnabled": false,
                      "backupDaily": 1, "backupWeekly": 0});
    let p = h.ok("storage.importPreview", json!({"document": dump}));
    assert_eq!(
        p["settingsDeviceLocal"],
        json!(["backupFolder", "backupsEnabled", "backupDaily", "backupWeekly"])
    );
    let keys: Vec<&str> =
        p["settings"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["systemPrompt"], "{p}");
    assert!(p["warnings"].to_string().contains("\\\"backupFolder\\\" is not imported"), "{p}");
    let r = h.ok("storage.import", json!({"document": dump, "settings": "overwrite"}));
    assert_eq!(r["settingsImported"], 1, "{r}");
    assert_eq!(r["settingsSkipped"], 4, "{r}");
    let s = h.ok(
        "settings.get",
        json!({"keys": ["systemPrompt", "backupFolder", "backupsEnabled", "backupDaily", "backupWeekly"]}),
    );
    assert_eq!(
        s,
        json!({"systemPrompt": "imported", "backupFolder": folder.display().to_string(), "backupsEnabled": true, "backupDaily": 9, "backupWeekly": 2})
    );
    h.close();
}

#[test]
fn t30_the_command_line_lists_and_restores() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    new_chat(&mut h, "one");
    let id = h.ok("backups.create", json!({}))["copy"]["id"].as_str().unwrap().to_owned();
    new_chat(&mut h, "two");
    h.close();
    let (code, out, err) = cli(&db, &["backups"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id) && out.contains("manual") && out.contains("folder:"), "{out}");
    let (code, out, _) = cli(&db, &["backups", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["copies"][0]["id"], json!(id));
    // without a terminal and without --yes: refused, nothing changed
    let (code, _, err) = cli(&db, &["restore", &id]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    let mut h = Host::spawn(&db);
    assert_eq!(session_names(&mut h), ["one", "two"]);
    h.close();
    let (code, out, err) = cli(&db, &["restore", &id, "--yes", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["restored"], json!(id));
    let mut h = Host::spawn(&db);
    assert_eq!(session_names(&mut h), ["one"]);
    h.close();
    let (code, out, _) = cli(&db, &["restore", r["undo"].as_str().unwrap(), "--yes"]);
    assert_eq!(code, 0);
    assert!(out.contains("undo with: keepsake-host restore keepsake-prerestore-"), "{out}");
    let mut h = Host::spawn(&db);
    assert_eq!(session_names(&mut h), ["one", "two"]);
    h.close();
    let (code, _, err) = cli(&db, &["restore", "keepsake-daily-20200101T000000Z-v6", "--yes"]);
    assert_eq!(code, 1);
    assert!(err.contains("not_found"), "{err}");
    // doctor: no daily backup yet (none was due while these hosts ran under 2 s)
    let (_, out, _) = cli(&db, &["doctor"]);
    assert!(out.lines().any(|l| l.contains("backups")), "{out}");
}

// ---- figures --------------------------------------------------------------------------------

/// Make the database at `db` look one schema older: drop what the latest migration created and
/// set `user_version`; `false` when the latest migration changed existing tables (no such copy
/// can be faked, the figure is skipped).
fn one_version_back(db: &Path) -> bool {
    use keepsake_host::store::migrate::MIGRATIONS;
    let objects = |k: u32| -> BTreeMap<String, (String, Option<String>)> {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        for (v, sql) in MIGRATIONS.iter().filter(|(v, _)| *v <= k) {
            c.execute_batch(sql).unwrap();
            c.pragma_update(None, "user_version", v).unwrap();
        }
        let mut st = c.prepare("SELECT name, type, sql FROM sqlite_master").unwrap();
        st.query_map([], |r| Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?))))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let (old, new) = (objects(LATEST - 1), objects(LATEST));
    if old.iter().any(|(n, o)| new.get(n) != Some(o)) {
        return false;
    }
    let c = rusqlite::Connection::open(db).unwrap();
    for (name, (kind, _)) in new.iter().filter(|(n, _)| !old.contains_key(*n)) {
        if kind == "table" || kind == "trigger" || kind == "index" || kind == "view" {
            let _ = c.execute_batch(&format!("DROP {} IF EXISTS \"{name}\";", kind.to_uppercase()));
        }
    }
    c.pragma_update(None, "user_version", LATEST - 1).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    true
}

#[test]
fn t27_figures_premigration_copy_and_backup_time_and_peak_rss() {
    let _serial = serial();
    let n = size("KEEPSAKE_BACKUP_SESSIONS", 1_000, 10_000);
    let (bin, release, note) = timing_host_bin();
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("data").join("keepsake.db");
    let built = Instant::now();
    let (per, chars) = (10, 1000);
    populate(&db, n, per, chars, "fig");
    let bytes = std::fs::metadata(&db).unwrap().len();
    let build_s = built.elapsed().as_secs_f64();
    // a backup ("Back up now"): time of the call, the host's peak RSS during it
    let mut h = Host::spawn_bin(&bin, &db);
    h.hello();
    h.ok("sessions.list", json!({"limit": 1}));
    let base = h.rss_kib();
    let reset = h.reset_peak_rss();
    let s = Instant::now();
    let copy = h.ok("backups.create", json!({}))["copy"].clone();
    let backup_ms = s.elapsed().as_millis();
    let backup_peak = h.peak_rss_kib();
    // and a restore of it (a pre-restore copy, then every table rewritten in one transaction)
    h.reset_peak_rss();
    let s = Instant::now();
    h.ok("backups.restore", json!({"id": copy["id"]}));
    let restore_ms = s.elapsed().as_millis();
    let restore_peak = h.peak_rss_kib();
    h.close();
    assert_eq!(copy["sessions"], json!(n), "{copy}");
    // a pre-migration copy: the same database one schema back, opened by the host
    let premigration = if one_version_back(&db) {
        let _ = std::fs::remove_file(db.parent().unwrap().join("keepsake-host.log"));
        let mut cmd = Command::new(&bin);
        cmd.arg(ORIGIN).env("KEEPSAKE_DB", &db).env("KEEPSAKE_SECRET_STORE", "off");
        let mut raw = RawHost::spawn_cmd(cmd);
        let s = Instant::now();
        raw.send(&json!({"id": 1, "op": "host.hello", "args": {}}));
        let mut events = Vec::new();
        let _ = raw.reply_text(&json!(1), Duration::from_secs(600), &mut events);
        let ev = match events.first() {
            Some(e) => e.clone(),
            None => raw.next_frame(Duration::from_secs(600)).expect("db event").0,
        };
        let open_ms = s.elapsed().as_millis();
        assert!(ev["dbError"].is_null(), "{ev}");
        let open_peak = proc_status_kib(raw.pid as u32, "VmHWM");
        raw.close_stdin();
        // (wait4's ru_maxrss is not used: a forked child counts the test process's RSS before exec)
        raw.wait(Duration::from_secs(60));
        let log = std::fs::read_to_string(db.parent().unwrap().join("keepsake-host.log")).unwrap_or_default();
        let copy_ms = log
            .lines()
            .find(|l| l.contains("pre-migration copy made"))
            .and_then(|l| l.split("ms=").nth(1))
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or("?")
            .to_owned();
        let text = format!(
            "pre-migration copy (v{} → v{LATEST}) {copy_ms} ms of an open of {open_ms} ms, host peak RSS (VmHWM) {} MiB",
            LATEST - 1,
            open_peak / 1024,
        );
        let fig = json!({"fromVersion": LATEST - 1, "toVersion": LATEST, "copyMs": copy_ms.parse::<u64>().ok(),
            "openMs": open_ms as u64, "peakKiB": open_peak});
        (text, fig)
    } else {
        ("pre-migration copy: skipped (the latest migration changes existing tables)".into(), Value::Null)
    };
    let (premigration, premigration_fig) = premigration;
    eprintln!(
        "T27 figures: {n} sessions, database {:.1} MiB (built in {build_s:.0} s); backup ({note}) {backup_ms} ms, host RSS {} → peak {} MiB{}; restore of that copy {restore_ms} ms, peak {} MiB; {premigration}",
        bytes as f64 / 1048576.0,
        base / 1024,
        backup_peak / 1024,
        if reset { "" } else { " (peak since start: clear_refs refused)" },
        restore_peak / 1024
    );
    // the same figures for bench/backups.mjs (`BENCH_ONLY=backups ./bench.sh`, BENCHMARKS.md)
    eprintln!(
        "T27 figures json: {}",
        json!({"sessions": n, "entries": per, "chars": chars, "dbBytes": bytes, "host": note, "release": release,
            "backup": {"ms": backup_ms as u64, "peakKiB": backup_peak},
            "restore": {"ms": restore_ms as u64, "peakKiB": restore_peak},
            "premigration": premigration_fig})
    );
}
