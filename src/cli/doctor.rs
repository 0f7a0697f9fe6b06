//! `keepsake-host doctor [--json]`: collect facts into one report, one line per finding.
//! This issue checks the database side; browser registration checks arrive with the installer.
#![allow(clippy::print_stdout)]

use std::path::Path;

use serde_json::{json, Value};

use crate::store::maintenance::sidecar;
use crate::store::migrate::LATEST;
use crate::store::Store;
use crate::util::paths::log_path_for;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

struct Report {
    checks: Vec<(String, Status, String)>,
}

impl Report {
    fn add(&mut self, name: &str, status: Status, detail: impl Into<String>) {
        self.checks.push((name.into(), status, detail.into()));
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
                "{} has mode {m:o}; other users can read it (expected {want:o}): chmod {want:o} '{}'",
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
    check_private(&mut r, "database file", db, 0o600);
    for s in ["-wal", "-shm"] {
        let p = sidecar(db, s);
        if p.exists() {
            check_private(&mut r, &format!("database {s} file"), &p, 0o600);
        }
    }
    match Store::open_read_only(db) {
        Ok(store) => {
            match store.schema_version() {
                Ok(v) if v == LATEST => r.add("schema", Status::Ok, format!("version {v}")),
                Ok(v) => r.add("schema", Status::Warn, format!("version {v}, this host writes {LATEST}")),
                Err(e) => r.add("schema", Status::Fail, e.message),
            }
            match store.integrity(false) {
                Ok(lines) if lines == ["ok"] => r.add("integrity", Status::Ok, "quick_check ok"),
                Ok(lines) => r.add(
                    "integrity",
                    Status::Fail,
                    format!("the database is damaged ({}); the extension sees db_corrupt. Run `keepsake-host backup <file>` to save what can be read", lines.join("; ")),
                ),
                Err(e) => r.add("integrity", Status::Fail, e.message),
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
        }
        Err(e) => {
            let status = Status::Fail;
            r.add("open", status, format!("{e}"));
        }
    }
    let log = log_path_for(db);
    if log.exists() {
        check_private(&mut r, "log file", &log, 0o600);
    } else {
        r.add("log file", Status::Ok, format!("{} (not written yet)", log.display()));
    }
    r
}

/// Print the report; exit code 0 when nothing failed, 1 otherwise.
pub fn run(db: &Path, as_json: bool) -> i32 {
    let r = collect(db);
    let failed = r.checks.iter().any(|c| c.1 == Status::Fail);
    if as_json {
        let checks: Vec<Value> =
            r.checks.iter().map(|(n, s, d)| json!({"check": n, "status": s.as_str(), "detail": d})).collect();
        let doc = json!({"ok": !failed, "version": env!("CARGO_PKG_VERSION"), "checks": checks});
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        for (n, s, d) in &r.checks {
            println!("{:<5} {n}: {d}", s.as_str());
        }
    }
    i32::from(failed)
}
