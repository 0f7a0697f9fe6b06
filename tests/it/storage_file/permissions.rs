//! T21 (reliability.md §6, §7, §10): permissions and paths.
//!
//! Under umask 022 and 002 (set in the spawned process's `pre_exec`), a first run creates the
//! data directory 0700 and every file private (group/other bits 0): the database, `-wal`,
//! `-shm`, the log (also one an older version left 0644), a backup, the damaged copy and the
//! recovery record a salvage leaves, the damage marker, the install receipt. A symlinked
//! database path is refused without being followed, a hard-linked database file is refused, and
//! `doctor` warns when the manifest's or the binary's folder is group- or world-writable.
use crate::harness::*;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode()
        & 0o7777
}

fn with_umask(c: &mut Command, umask: u32) {
    // SAFETY: umask is async-signal-safe.
    unsafe {
        c.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
}

/// Run the CLI under `umask` with a private HOME.
fn cli_umask(db: &Path, home: &Path, umask: u32, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(BIN);
    c.arg("--db")
        .arg(db)
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("KEEPSAKE_SYSTEM_ROOT", home.join("sysroot"));
    with_umask(&mut c, umask);
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn sidecar(db: &Path, s: &str) -> PathBuf {
    PathBuf::from(format!("{}{s}", db.display()))
}

/// (path, mode) of every file and directory under `dir`.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, u32)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        out.push((p.clone(), mode(&p)));
        if p.is_dir() && !p.is_symlink() {
            walk(&p, out);
        }
    }
}

#[test]
fn t21_first_runs_under_permissive_umasks_create_only_private_files() {
    let started = Instant::now();
    let mut checked = 0;
    let mut open_bits = Vec::new();
    for umask in [0o022, 0o002] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".config")).unwrap();
        let db = tmp.path().join("data").join("keepsake.db");
        let dir = db.parent().unwrap().to_path_buf();

        // first run: directory, database, -wal, -shm, log
        let mut h = Host::spawn_configured(&db, |c| with_umask(c, umask));
        assert!(h.hello()["dbError"].is_null());
        h.ok("history.append", json!({"entry": user("private")}));
        let mut live = Vec::new();
        for f in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm"), dir.join("keepsake-host.log")] {
            assert!(f.exists(), "{} missing while the host runs", f.display());
            live.push((f.clone(), mode(&f)));
        }
        assert_eq!(h.close().0, Some(0));
        live.push((dir.clone(), mode(&dir)));

        // a log left 0644 by an older version is made private at the next start
        let log = dir.join("keepsake-host.log");
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut h = Host::spawn_configured(&db, |c| with_umask(c, umask));
        h.hello();
        assert_eq!(h.close().0, Some(0));

        // a backup
        let backup = dir.join("backup.db");
        let (code, _, err) = cli_umask(&db, &home, umask, &["backup", backup.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");

        // the install receipt (beside the database) for a profile folder
        let profile = tmp.path().join("profile");
        std::fs::create_dir_all(&profile).unwrap();
        let (code, out, err) =
            cli_umask(&db, &home, umask, &["install", "--user-data-dir", profile.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(dir.join("install-receipt.json").exists(), "no receipt: {out}");

        // damage: a marker, then a salvage leaves the damaged copy and the recovery record
        let mut h = Host::spawn_configured(&db, |c| with_umask(c, umask));
        h.hello();
        assert_eq!(h.close().0, Some(0));
        let mut bytes = std::fs::read(&db).unwrap();
        bytes[0..16].copy_from_slice(b"not SQLite, sir!");
        std::fs::write(&db, &bytes).unwrap();
        let mut h = Host::spawn_configured(&db, |c| with_umask(c, umask));
        assert_eq!(h.hello()["dbError"]["code"], json!("db_corrupt"));
        assert_eq!(h.close().0, Some(0));
        assert!(sidecar(&db, ".damaged").exists(), "no damage marker");
        live.push((sidecar(&db, ".damaged"), mode(&sidecar(&db, ".damaged"))));
        let mut h = Host::spawn_configured(&db, |c| with_umask(c, umask));
        assert!(h.hello()["dbError"].is_null(), "recovered at the next start");
        h.ok("history.append", json!({"entry": user("after recovery")}));
        assert_eq!(h.close().0, Some(0));
        assert!(sidecar(&db, ".recovery.json").exists());

        // every file and folder under the data directory and the profile's manifest folder
        let mut all = Vec::new();
        walk(&dir, &mut all);
        all.extend(live);
        let nmh = profile.join("NativeMessagingHosts");
        for (p, m) in &all {
            checked += 1;
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let dir_ok = p.is_dir() && *m & 0o077 == 0;
            let file_ok = !p.is_dir() && *m & 0o077 == 0;
            eprintln!("umask {umask:03o}: {name} {m:o}");
            if !(dir_ok || file_ok) {
                open_bits.push(format!("umask {umask:03o}: {} has mode {m:o}", p.display()));
            }
        }
        let expect_dir = mode(&dir);
        assert_eq!(expect_dir, 0o700, "data directory mode {expect_dir:o}");
        let m = mode(&nmh);
        checked += 1;
        if m & 0o022 != 0 {
            open_bits.push(format!("umask {umask:03o}: manifest folder {} is {m:o}", nmh.display()));
        }
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        for want in [
            "keepsake.db",
            "keepsake-host.log",
            "backup.db",
            "install-receipt.json",
            "keepsake.db.recovery.json",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
        assert!(names.iter().any(|n| n.starts_with("keepsake.db.corrupt-")), "no damaged copy in {names:?}");
    }
    eprintln!(
        "T21: umask 022 and 002, {checked} files and folders checked (db, -wal, -shm, log, backup, damage marker, \
         damaged copy, recovery record, install receipt, data dir 0700, manifest folder): group/other bits {}, {:.1} s",
        open_bits.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(open_bits.is_empty(), "{}", open_bits.join("\n"));
}

#[test]
fn t21_symlinked_and_hard_linked_databases_are_refused() {
    let (d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.append", json!({"entry": user("real")}));
    assert_eq!(h.close().0, Some(0));
    let before = sha256_hex(&std::fs::read(&db).unwrap());

    // symlink: refused, never followed, nothing created beside either name
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let link = elsewhere.join("keepsake.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let mut h = Host::spawn(&link);
    let e = h.hello()["dbError"].clone();
    assert!(e["message"].as_str().unwrap_or("").contains("symbolic link"), "{e}");
    assert_eq!(h.err("history.append", json!({"entry": user("must not land")})), e["code"].as_str().unwrap());
    assert_eq!(h.close().0, Some(0));
    let beside: Vec<String> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("keepsake.db"))
        .collect();
    assert_eq!(beside, vec!["keepsake.db".to_owned()]);
    assert_eq!(sha256_hex(&std::fs::read(&db).unwrap()), before);
    let (code, _, err) = cli(&link, &["inspect"]);
    assert_ne!(code, 0);
    assert!(err.contains("symbolic link"), "{err}");
    // `salvage` refuses it as well
    let (code, _, err) = cli(&link, &["salvage"]);
    assert_ne!(code, 0, "salvage followed a symlink");
    assert!(err.contains("symbolic link"), "{err}");

    // hard link: a second name is a second way in (own -wal/-shm): refused under both names
    let hard = elsewhere.join("hard.db");
    std::fs::hard_link(&db, &hard).unwrap();
    for p in [&db, &hard] {
        let mut h = Host::spawn(p);
        let e = h.hello()["dbError"].clone();
        assert!(e["message"].as_str().unwrap_or("").contains("hard link"), "{}: {e}", p.display());
        assert_eq!(h.close().0, Some(0));
    }
    let (code, out, _) = cli(&db, &["doctor", "--json"]);
    assert_ne!(code, 0);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert!(
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["status"] == "fail" && c["detail"].as_str().unwrap_or("").contains("hard link")),
        "{doc}"
    );
    assert_eq!(sha256_hex(&std::fs::read(&db).unwrap()), before);
    std::fs::remove_file(&hard).unwrap();
    let mut h = Host::spawn(&db);
    assert!(h.hello()["dbError"].is_null());
    assert_eq!(h.close().0, Some(0));
    eprintln!(
        "T21: symlinked database refused (not followed), hard-linked database refused under both names"
    );
}

#[test]
fn t21_doctor_warns_about_group_or_world_writable_manifest_and_binary_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    let db = tmp.path().join("data").join("keepsake.db");
    let profile = tmp.path().join("profile");
    std::fs::create_dir_all(&profile).unwrap();
    let bindir = tmp.path().join("bin");
    std::fs::create_dir_all(&bindir).unwrap();
    let bin = bindir.join("keepsake-host");
    std::fs::copy(BIN, &bin).unwrap();
    let (code, out, err) = cli_umask(
        &db,
        &home,
        0o022,
        &["install", "--user-data-dir", profile.to_str().unwrap(), "--bin", bin.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}{err}");
    let doctor = |label: &str| -> Vec<String> {
        let (_, out, _) =
            cli_umask(&db, &home, 0o022, &["doctor", "--json", "--user-data-dir", profile.to_str().unwrap()]);
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{label}: {e}: {out}"));
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["check"] == "folder permissions")
            .map(|c| c["detail"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(doctor("as installed").is_empty(), "{:?}", doctor("as installed"));
    let nmh = profile.join("NativeMessagingHosts");
    let mut warned = 0;
    for (dir, m, what) in [
        (&nmh, 0o775, "manifest"),
        (&nmh, 0o757, "manifest"),
        (&bindir, 0o777, "host binary"),
        (&bindir, 0o1777, "host binary"),
    ] {
        let old = mode(dir);
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(m)).unwrap();
        let w = doctor(what);
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(old)).unwrap();
        assert!(
            w.iter().any(|d| d.contains(what) && d.contains(&format!("{m:o}"))),
            "{} at {m:o}: no warning naming it: {w:?}",
            dir.display()
        );
        warned += 1;
    }
    assert!(doctor("restored").is_empty());
    eprintln!("T21: doctor warned about {warned}/4 group- or world-writable manifest and binary folders, 0 on a clean install");
    let _ = Stdio::null();
}

/// A database left with loose modes by an older version (or a copy, or a permissive umask) is
/// made private at the next open: the database, `-wal`, `-shm`, log and receipt 0600, the
/// folder 0700 — and the `-wal`/`-shm` SQLite creates afterwards inherit 0600. A loose file that
/// belongs to another user is refused with an error naming it; a folder that holds other files
/// too keeps its mode.
#[test]
fn t21_an_existing_database_with_loose_modes_is_made_private_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let db = dir.join("keepsake.db");
    let mut h = Host::spawn(&db);
    h.ok("history.append", json!({"entry": user("kept private")}));
    assert_eq!(h.close().0, Some(0));
    std::fs::write(dir.join("install-receipt.json"), b"{}").unwrap();

    // what an older version (or `cp` under umask 022) left: everything 0644, the folder 0755,
    // and a -wal/-shm pair from a host that did not check point
    std::fs::write(sidecar(&db, "-wal"), b"").unwrap();
    std::fs::write(sidecar(&db, "-shm"), b"").unwrap();
    let files = [
        db.clone(),
        sidecar(&db, "-wal"),
        sidecar(&db, "-shm"),
        dir.join("keepsake-host.log"),
        dir.join("install-receipt.json"),
    ];
    for f in &files {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut h = Host::spawn(&db);
    assert!(h.hello()["dbError"].is_null());
    h.ok("history.append", json!({"entry": user("after the open")}));
    for f in &files {
        assert!(f.exists(), "{} missing while the host runs", f.display());
        assert_eq!(mode(f), 0o600, "{} is {:o} after the open", f.display(), mode(f));
    }
    assert_eq!(mode(&dir), 0o700, "data folder is {:o}", mode(&dir));
    assert_eq!(h.close().0, Some(0));
    // the CLI opens tighten too
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o664)).unwrap();
    let (code, _, err) = cli(&db, &["inspect"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&db, &["trash"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode(&db), 0o600, "after the CLI: {:o}", mode(&db));

    // a folder that holds other files too: the files are made private, the folder is left
    let shared = tmp.path().join("notes");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("shopping.txt"), b"milk").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db2 = shared.join("keepsake.db");
    std::fs::copy(&db, &db2).unwrap();
    std::fs::set_permissions(&db2, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut h = Host::spawn(&db2);
    assert!(h.hello()["dbError"].is_null());
    h.ok("history.append", json!({"entry": user("in a shared folder")}));
    assert_eq!(mode(&db2), 0o600);
    assert_eq!(mode(&sidecar(&db2, "-wal")), 0o600);
    assert_eq!(h.close().0, Some(0));
    assert_eq!(mode(&shared), 0o755, "a folder with other files in it was changed");

    // a loose file that belongs to someone else: refused, named, left as it was
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut foreign_checked = false;
    if root {
        let log = dir.join("keepsake-host.log");
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::chown(&log, Some(65534), Some(65534)).unwrap();
        let mut h = Host::spawn(&db);
        let e = h.hello()["dbError"].clone();
        let msg = e["message"].as_str().unwrap_or("").to_owned();
        assert!(msg.contains("keepsake-host.log") && msg.contains("belongs to user 65534"), "{e}");
        assert!(h.err("history.append", json!({"entry": user("must not land")})).len() > 1);
        assert_eq!(h.close().0, Some(0));
        assert_eq!(mode(&log), 0o644, "someone else's file was changed");
        // reading exposes nothing further: `inspect` still reads, and leaves the file alone
        let (code, _, err) = cli(&db, &["inspect"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(mode(&log), 0o644, "a read-only open changed someone else's file");
        // its owner makes it private (or gives it back): the database opens again, nothing lost
        std::os::unix::fs::chown(&log, Some(0), Some(0)).unwrap();
        let mut h = Host::spawn(&db);
        assert!(h.hello()["dbError"].is_null());
        let texts = h.ok("history.get", json!({}))["entries"].to_string();
        assert!(texts.contains("kept private") && texts.contains("after the open"), "{texts}");
        assert_eq!(h.close().0, Some(0));
        foreign_checked = true;
    }
    eprintln!(
        "T21: 5 files left 0644 and a 0755 folder made 0600/0700 at the next host open and CLI open; a shared \
         folder kept its mode; someone else's loose file refused: {}",
        if foreign_checked { "checked" } else { "skipped (needs root to chown)" }
    );
}
