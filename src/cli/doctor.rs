//! `keepsake-host doctor [--json] [--user-data-dir DIR]...`: collect facts into one report, one
//! line per finding. The database side (modes, schema, integrity) and the browser side: every
//! `dev.keepsake.host.json` in a known location is re-read and checked by Chromium's rules (or
//! Firefox's, for the Mozilla folders and registry key), each
//! failure named with the text the extension would see and the command that fixes it.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::browsers::{self, Env, Family, Platform, MANIFEST_FILE, NOT_FOUND};
use super::install;

use crate::store::migrate::LATEST;
use crate::store::salvage;
use crate::store::{Severity, Store};
use crate::util::paths::{log_path_for, sidecar};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

struct Check {
    name: String,
    status: Status,
    detail: String,
    /// For browser checks: the manifest, the text the extension sees, and the fix.
    file: Option<String>,
    browser_error: Option<String>,
    fix: Option<String>,
    /// Structured details merged into the JSON line (e.g. `recovery`).
    extra: Option<Value>,
}

struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn add(&mut self, name: &str, status: Status, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            status,
            detail: detail.into(),
            file: None,
            browser_error: None,
            fix: None,
            extra: None,
        });
    }

    /// A finding with structured details for `--json`.
    fn add_extra(&mut self, name: &str, status: Status, detail: impl Into<String>, extra: Value) {
        self.add(name, status, detail);
        if let Some(c) = self.checks.last_mut() {
            c.extra = Some(extra);
        }
    }

    /// A browser-side finding: one line naming the check, the file, what the extension sees and
    /// the fix.
    fn browser(&mut self, name: &str, status: Status, file: &Path, what: &str, seen: &str, fix: &str) {
        self.checks.push(Check {
            name: name.into(),
            status,
            detail: format!("{}: {what}; the extension sees \"{seen}\". Fix: {fix}", file.display()),
            file: Some(file.display().to_string()),
            browser_error: Some(seen.into()),
            fix: Some(fix.into()),
            extra: None,
        });
    }
}

#[cfg(unix)]
fn mode_of(p: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).ok().map(|m| m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn mode_of(_: &Path) -> Option<u32> {
    None
}

fn check_private(r: &mut Report, name: &str, p: &Path, want: u32) {
    match mode_of(p) {
        Some(m) if m & 0o077 != 0 => r.add(
            name,
            Status::Warn,
            format!(
                "{} had mode {m:o}; other users could read it (expected {want:o}). Every open makes the files \
                 you own private again (this check's own open included); otherwise: chmod {want:o} '{}'",
                p.display(),
                p.display()
            ),
        ),
        Some(m) => r.add(name, Status::Ok, format!("{} mode {m:o}", p.display())),
        None => {}
    }
}

/// Gather every check for the database at `db`.
fn collect(db: &Path) -> Report {
    let mut r = Report { checks: Vec::new() };
    r.add("database path", Status::Ok, db.display().to_string());
    let dir = db.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        r.add(
            "data directory",
            Status::Warn,
            format!("{} does not exist yet; it is created on first use", dir.display()),
        );
        return r;
    }
    check_private(&mut r, "data directory", dir, 0o700);
    match std::fs::symlink_metadata(db) {
        Err(_) => {
            r.add("database file", Status::Warn, "no database yet; the host creates it on first use");
            return r;
        }
        Ok(m) if m.file_type().is_symlink() => {
            r.add("database file", Status::Fail, "the database path is a symbolic link, which the host refuses; point KEEPSAKE_DB at the real file");
            return r;
        }
        Ok(_) => {}
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::symlink_metadata(db) {
            if m.is_file() && m.nlink() > 1 {
                r.add(
                    "database file",
                    Status::Fail,
                    format!(
                        "{} has {} hard links, which the host refuses (a second name is a second way to open it); \
                         remove the other links",
                        db.display(),
                        m.nlink()
                    ),
                );
            }
        }
    }
    check_private(&mut r, "database file", db, 0o600);
    for s in ["-wal", "-shm"] {
        let p = sidecar(db, s);
        if p.exists() {
            check_private(&mut r, &format!("database {s} file"), &p, 0o600);
        }
    }
    match Store::open_read_only(db) {
        Ok(mut store) => {
            match store.schema_version() {
                Ok(v) if v == LATEST => r.add("schema", Status::Ok, format!("version {v}")),
                Ok(v) => r.add("schema", Status::Warn, format!("version {v}, this host writes {LATEST}")),
                Err(e) => r.add("schema", Status::Fail, e.message),
            }
            match store.integrity(true) {
                Ok(lines) if lines == ["ok"] => r.add("integrity", Status::Ok, "integrity_check ok"),
                Ok(lines) => {
                    let what = lines.join("; ");
                    salvage::note_damage(db, &format!("integrity_check: {what}"));
                    r.add(
                        "integrity",
                        Status::Fail,
                        format!(
                            "the database is damaged ({what}); the extension sees db_corrupt. {}",
                            NEXT_STEP
                        ),
                    )
                }
                Err(e) => {
                    if e.code == crate::protocol::ErrorCode::DbCorrupt {
                        salvage::note_damage(db, &e.message);
                    }
                    r.add(
                        "integrity",
                        Status::Fail,
                        format!("{}; the extension sees db_corrupt. {NEXT_STEP}", e.message),
                    )
                }
            }
            match store.conn_journal_mode() {
                Some(m) if m.eq_ignore_ascii_case("wal") => r.add("journal mode", Status::Ok, "wal"),
                Some(m) => r.add(
                    "journal mode",
                    Status::Warn,
                    format!("{m}; the host switches it to wal on next start"),
                ),
                None => {}
            }
            api_keys(&mut r, &mut store);
            backups(&mut r, &mut store);
            super::sync::doctor_checks(&mut store, &mut |name, sev, detail, extra| {
                let status = match sev {
                    "ok" => Status::Ok,
                    "warn" => Status::Warn,
                    _ => Status::Fail,
                };
                if extra.as_object().is_some_and(|o| o.is_empty()) {
                    r.add(name, status, detail)
                } else {
                    r.add_extra(name, status, detail, extra)
                }
            });
        }
        Err(e) => {
            let status = Status::Fail;
            r.add("open", status, format!("{e}"));
        }
    }
    damage_checks(&mut r, db);
    let log = log_path_for(db);
    if log.exists() {
        check_private(&mut r, "log file", &log, 0o600);
    } else {
        r.add("log file", Status::Ok, format!("{} (not written yet)", log.display()));
    }
    r
}

/// Where the provider API keys are (PROTOCOL.md "API keys"): in the operating system's secret
/// store, or in the database file when none is reachable; each referenced key is read back, so
/// a key removed from the store by hand is named. Counts only: no key is ever printed.
fn api_keys(r: &mut Report, store: &mut Store) {
    match store.api_keys(true) {
        Ok(k) => {
            let (sev, text) = k.summary();
            let status = match sev {
                Severity::Ok => Status::Ok,
                Severity::Info => Status::Info,
                Severity::Warn => Status::Warn,
                Severity::Fail => Status::Fail,
            };
            r.add_extra("api keys", status, text, json!({"apiKeys": k.to_json()}));
        }
        Err(e) => {
            r.add("api keys", Status::Warn, format!("cannot read the providers setting: {}", e.message))
        }
    }
}

/// The daily backup's last outcome (reliability.md §7 "Copies and backups"): made is ok; off, none
/// yet, running, or a failure or skip of the last two days is information (the host tries again
/// every hour); a failure or skip older than that is a warning.
fn backups(r: &mut Report, store: &mut Store) {
    use crate::domain::backups::{OUTCOME_MADE, OUTCOME_RUNNING};
    let (settings, last) = match store.backup_settings().and_then(|s| Ok((s, store.backups_last()?))) {
        Ok(x) => x,
        Err(e) => {
            return r.add("backups", Status::Warn, format!("cannot read the backup settings: {}", e.message))
        }
    };
    let folder = settings.folder.display().to_string();
    let extra = json!({"backups": {
        "folder": folder,
        "enabled": settings.enabled,
        "last": last.as_ref().map(|l| serde_json::to_value(l).unwrap_or_default()),
    }});
    let today = crate::util::time::local_date();
    let days_ago = |day: &str| -> i64 {
        let parse = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok();
        match (parse(&today), parse(day)) {
            (Some(t), Some(d)) => (t - d).num_days(),
            _ => i64::MAX,
        }
    };
    let (status, detail) = match (&last, settings.enabled) {
        (_, false) => (
            Status::Info,
            format!("daily backups are off (Options → Backups, setting backupsEnabled); copies in {folder}: keepsake-host backups"),
        ),
        (None, true) => (
            Status::Info,
            format!("no daily backup yet: the host makes one in {folder} when it next runs"),
        ),
        (Some(l), true) if l.outcome() == OUTCOME_MADE => (
            Status::Ok,
            format!("last daily backup {} ({}) in {folder}", l.day, l.id.as_deref().unwrap_or("?")),
        ),
        (Some(l), true) if l.outcome() == OUTCOME_RUNNING => (
            Status::Info,
            format!(
                "the daily backup of {} is under way (or its host stopped: another one tries again after an hour)",
                l.day
            ),
        ),
        (Some(l), true) => {
            let old = days_ago(&l.day) > 2;
            (
                if old { Status::Warn } else { Status::Info },
                format!(
                    "the daily backup of {} was {}: {}{}",
                    l.day,
                    l.outcome(),
                    l.message.as_deref().unwrap_or("no reason recorded"),
                    if old { "; no daily backup was made since" } else { "; the host tries again every hour" }
                ),
            )
        }
    };
    r.add_extra("backups", status, detail, extra);
}

const NEXT_STEP: &str = "The next host start moves it aside (kept, never deleted) and salvages what can be read into a \
     fresh database, once no other keepsake-host has it open; `keepsake-host salvage` does it now (close the browser \
     first), `keepsake-host backup <file>` copies it as it is";

fn fmt_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// The corruption policy's state (reliability.md §7): an unhandled damage report, the last
/// recovery (what came back, where the damaged copy is), other damaged copies kept beside it.
fn damage_checks(r: &mut Report, db: &Path) {
    let now = crate::util::time::now_ms();
    if let Some(m) = salvage::read_marker(db) {
        let when = m.get("detectedAt").and_then(Value::as_i64).map(fmt_ms).unwrap_or_else(|| "?".into());
        let what = m.get("error").and_then(Value::as_str).unwrap_or("unknown damage");
        let next = match salvage::last_move_ms(db).filter(|t| now - t < salvage::MOVE_INTERVAL_MS) {
            Some(t) => format!(
                "A damaged copy was already moved aside at {} and Keepsake moves one at most once per 24 h, so \
                 nothing happens automatically before {}; `keepsake-host salvage` repairs it now (close the browser first)",
                fmt_ms(t),
                fmt_ms(t + salvage::MOVE_INTERVAL_MS)
            ),
            None if cfg!(unix) => NEXT_STEP.to_owned(),
            None => "Automatic recovery needs POSIX locks (Linux, macOS); close the browser and copy the file aside \
                     yourself"
                .to_owned(),
        };
        r.add(
            "damage",
            Status::Fail,
            format!("the database was found damaged at {when} ({what}); the extension sees db_corrupt and writes are stopped. {next}"),
        );
    }
    let rec = salvage::load_record(db);
    if let Some(rec) = &rec {
        if !rec.completed {
            r.add(
                "recovery",
                Status::Fail,
                format!(
                    "a recovery from {} was interrupted; the next host start (or `keepsake-host salvage`) resumes it",
                    rec.damaged_copy.display()
                ),
            );
        } else {
            let counts: Vec<String> = rec
                .tables
                .iter()
                .filter(|t| t.recovered > 0 || !t.complete)
                .map(|t| {
                    format!(
                        "{} {}{}",
                        t.table,
                        t.recovered,
                        if t.complete { "" } else { " (damaged pages skipped)" }
                    )
                })
                .collect();
            let status =
                if now - rec.moved_at < 7 * salvage::MOVE_INTERVAL_MS { Status::Warn } else { Status::Info };
            r.add_extra(
                "recovery",
                status,
                format!(
                    "on {} the damaged database was moved aside to {} and {} rows were salvaged into a fresh one ({}){}{}. \
                     Keepsake never deletes the damaged copy: remove it yourself once nothing is missing",
                    fmt_ms(rec.moved_at),
                    rec.damaged_copy.display(),
                    rec.rows_recovered,
                    counts.join(", "),
                    if rec.header_rebuilt { "; its unreadable header was rebuilt to read the rest" } else { "" },
                    if rec.repairs.is_empty() { String::new() } else { format!("; {}", rec.repairs.join("; ")) }
                ),
                json!({"recovery": rec, "damagedCopy": rec.damaged_copy.display().to_string()}),
            );
        }
    }
    let others: Vec<String> = salvage::aside_copies(db)
        .into_iter()
        .filter(|(p, _)| rec.as_ref().is_none_or(|x| &x.damaged_copy != p))
        .map(|(p, _)| p.display().to_string())
        .collect();
    if !others.is_empty() {
        r.add("damaged copies", Status::Info, format!("older damaged copies kept: {}", others.join(", ")));
    }
}

/// A folder the browser runs something from must not be writable by other users: anyone who
/// can write there can replace the manifest or the binary (reliability.md §6).
#[cfg(unix)]
fn check_folder(r: &mut Report, what: &str, dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(dir) else { return };
    let mode = m.mode() & 0o7777;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if mode & 0o022 != 0 {
        r.add(
            "folder permissions",
            Status::Warn,
            format!(
                "the {what} folder {} has mode {mode:o}: other users can replace what the browser runs; chmod go-w '{}'",
                dir.display(),
                dir.display()
            ),
        );
    } else if m.uid() != me && m.uid() != 0 {
        r.add(
            "folder permissions",
            Status::Warn,
            format!("the {what} folder {} belongs to another user (uid {})", dir.display(), m.uid()),
        );
    }
}

#[cfg(not(unix))]
fn check_folder(_: &mut Report, _: &str, _: &Path) {}

/// One place a manifest may be.
struct Place {
    label: String,
    file: PathBuf,
    family: Family,
    /// Asked for with `doctor --user-data-dir` (a missing manifest is a failure).
    explicit: bool,
}

/// Check one manifest file; returns whether it passed.
fn check_file(r: &mut Report, env: &Env, label: &str, file: &Path, family: Family) -> bool {
    let fix = install::fix_for(env, file);
    let absent = if family == Family::Mozilla { browsers::FF_NOT_FOUND } else { NOT_FOUND };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            r.browser("manifest read", Status::Fail, file, &format!("cannot be read ({e})"), absent, &fix);
            return false;
        }
    };
    let (target, problems) = browsers::check_manifest(file, &bytes, env.platform, family);
    for p in &problems {
        r.browser(&format!("manifest {}", p.check), Status::Fail, file, &p.detail, p.browser_error, &fix);
    }
    if !problems.is_empty() {
        return false;
    }
    let target = target.unwrap_or_default();
    r.add_extra(
        "manifest",
        Status::Ok,
        format!("{} ({label}) runs {}", file.display(), target.display()),
        json!({"file": file.display().to_string(), "browser": label, "runs": target.display().to_string()}),
    );
    if let Some(d) = file.parent() {
        check_folder(r, "manifest", d);
    }
    if let Some(d) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        check_folder(r, "host binary", d);
    }
    let this = std::env::current_exe().ok().and_then(|p| std::fs::canonicalize(p).ok());
    let there = std::fs::canonicalize(&target).ok();
    if this.is_some() && there.is_some() && this != there {
        r.add(
            "manifest",
            Status::Info,
            format!(
                "{} runs {}, not this binary ({}); re-run install from the binary you want the browser to use",
                file.display(),
                target.display(),
                this.unwrap_or_default().display()
            ),
        );
    }
    true
}

/// The browser side: sandboxed browsers, every manifest in a known location, unregistered
/// browsers.
fn registration(r: &mut Report, env: &Env, db: &Path, user_data_dirs: &[PathBuf]) {
    for w in browsers::sandbox_warnings(env) {
        r.add("sandboxed browser", Status::Warn, w);
    }
    let receipt = install::load_receipt(db).unwrap_or_else(|e| {
        r.add("install receipt", Status::Warn, e);
        None
    });
    let mut places: Vec<Place> = Vec::new();
    let mut add = |label: &str, file: PathBuf, explicit: bool, family: Family| {
        if let Some(p) = places.iter_mut().find(|p| p.file == file) {
            // one file named twice (a --user-data-dir that the install receipt lists too): one label
            if !p.label.split(", ").any(|l| l == label) {
                p.label = format!("{}, {label}", p.label);
            }
            p.explicit |= explicit;
        } else {
            places.push(Place { label: label.into(), file, explicit, family });
        }
    };
    let users = browsers::user_locations(env);
    for l in &users {
        add(l.browser, l.manifest(), false, l.family);
    }
    for l in browsers::system_locations(env) {
        add(&format!("system-wide: {}", l.browser), l.manifest(), false, l.family);
    }
    for d in user_data_dirs {
        add(
            "profile",
            crate::util::paths::absolute(d).join("NativeMessagingHosts").join(MANIFEST_FILE),
            true,
            Family::Chromium,
        );
    }
    if let Some(rc) = &receipt {
        for d in &rc.user_data_dirs {
            add("profile", d.join("NativeMessagingHosts").join(MANIFEST_FILE), false, Family::Chromium);
        }
    }
    if env.platform == Platform::Windows {
        for hive in ["HKCU", "HKLM"] {
            for (browser, key, family) in browsers::registry_keys() {
                if let Some(v) = install::reg_get_default(&format!(r"{hive}\{key}")) {
                    add(&format!(r"{browser} ({hive}\{key})"), PathBuf::from(v), false, family);
                }
            }
        }
    }

    let mut found = 0;
    for p in &places {
        if std::fs::symlink_metadata(&p.file).is_ok() {
            found += 1;
            check_file(r, env, &p.label, &p.file, p.family);
        } else if p.explicit {
            let profile = p.file.parent().and_then(Path::parent).unwrap_or(Path::new("/"));
            r.browser(
                "manifest",
                Status::Fail,
                &p.file,
                "missing",
                NOT_FOUND,
                &format!("keepsake-host install --user-data-dir '{}'", profile.display()),
            );
        }
    }
    let detected: Vec<_> = users.iter().filter(|l| l.in_use()).collect();
    if found == 0 && (!detected.is_empty() || receipt.is_some()) {
        r.add(
            "browser registration",
            Status::Fail,
            format!(
                "no manifest found for any browser{}; the extension sees \"{NOT_FOUND}\". Fix: keepsake-host \
                 install (or ./install.sh)",
                if detected.is_empty() {
                    String::new()
                } else {
                    format!(" (in use: {})", detected.iter().map(|l| l.browser).collect::<Vec<_>>().join(", "))
                }
            ),
        );
    } else if found == 0 && user_data_dirs.is_empty() {
        r.add(
            "browser registration",
            Status::Info,
            format!(
                "no manifest found for any browser, and no Chromium-family browser profile in use under {} \
                 (nor a Firefox profile); \
                 start your browser once, then run keepsake-host install (or keepsake-host install \
                 --user-data-dir DIR for a custom profile)",
                env.tilde(&env.user_base())
            ),
        );
    } else if found > 0 {
        for l in detected {
            let covered = std::iter::once(l.manifest())
                .chain(l.system_dirs.iter().map(|d| d.join(MANIFEST_FILE)))
                .any(|f| f.exists());
            if !covered {
                r.browser(
                    "browser registration",
                    Status::Warn,
                    &l.manifest(),
                    &format!("{} is installed ({}) but not registered", l.browser, env.tilde(&l.config_dir)),
                    if l.family == Family::Mozilla { browsers::FF_NOT_FOUND } else { NOT_FOUND },
                    "keepsake-host install (or ./install.sh)",
                );
            }
        }
    }
}

/// Print the report; exit code 0 when nothing failed, 1 otherwise.
pub fn run(db: &Path, as_json: bool, user_data_dirs: &[PathBuf]) -> i32 {
    let mut r = collect(db);
    match Env::from_process() {
        Ok(env) => registration(&mut r, &env, db, user_data_dirs),
        Err(e) => r.add("browser registration", Status::Warn, e),
    }
    let failed = r.checks.iter().filter(|c| c.status == Status::Fail).count();
    if as_json {
        let checks: Vec<Value> = r
            .checks
            .iter()
            .map(|c| {
                let mut v = json!({"check": c.name, "status": c.status.as_str(), "detail": c.detail});
                if let Some(f) = &c.file {
                    v["file"] = json!(f);
                }
                if let Some(b) = &c.browser_error {
                    v["browserError"] = json!(b);
                }
                if let Some(f) = &c.fix {
                    v["fix"] = json!(f);
                }
                if let Some(Value::Object(extra)) = &c.extra {
                    for (k, x) in extra {
                        v[k.as_str()] = x.clone();
                    }
                }
                v
            })
            .collect();
        let doc = json!({"ok": failed == 0, "version": env!("CARGO_PKG_VERSION"), "checks": checks});
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        for c in &r.checks {
            println!("{:<5} {}: {}", c.status.as_str(), c.name, c.detail);
        }
        if failed == 0 {
            println!("OK");
        } else {
            println!("{failed} problem{} found", if failed == 1 { "" } else { "s" });
        }
    }
    i32::from(failed > 0)
}
