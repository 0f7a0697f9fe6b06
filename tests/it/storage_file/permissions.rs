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
        let log_before = std::fs::read(&log).unwrap();
        let mut h = Host::spawn(&db);
        let e = h.hello()["dbError"].clone();
        let msg = e["message"].as_str().unwrap_or("").to_owned();
        assert!(msg.contains("keepsake-host.log") && msg.contains("belongs to user 65534"), "{e}");
        assert!(h.err("history.append", json!({"entry": user("must not land")})).len() > 1);
        assert_eq!(h.close().0, Some(0));
        assert_eq!(mode(&log), 0o644, "someone else's file was changed");
        assert_eq!(
            std::fs::read(&log).unwrap(),
            log_before,
            "the host wrote its log into someone else's file"
        );
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

// ---------------------------------------------------------------------------------------------
// T21: the files the command line writes (`export --out`, `backup`, `man DIR`; manifests and the
// receipt go through the same `util::files::write_new`). Created new 0600 (man pages 0644),
// filled in a temp file beside the target and put there only when whole, never through a
// symbolic link, never into someone else's file. Refusals exit 73 (sysexits' EX_CANTCREAT).

const EXIT_CANT_CREATE: i32 = 73;

/// A database with one saved chat; returns its id.
fn one_chat(db: &Path, text: &str) -> String {
    let mut h = Host::spawn(db);
    let r = h.ok("history.replace", json!({"entries": [user(text), assistant("an answer")]}));
    let id = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(h.close().0, Some(0));
    id
}

fn sorted_listing(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn owner(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).unwrap().uid()
}

/// The writers, each aimed at `target` (for `man`, the page `keepsake-host.1` inside `target`'s
/// folder is the target): (label, CLI arguments).
fn writers(id: &str, target: &Path) -> Vec<(&'static str, Vec<String>)> {
    let t = target.to_str().unwrap().to_owned();
    vec![
        ("export --out (markdown)", vec!["export".into(), id.into(), "--out".into(), t.clone()]),
        (
            "export --format json --out",
            vec!["export".into(), id.into(), "--format".into(), "json".into(), "--out".into(), t.clone()],
        ),
        ("backup", vec!["backup".into(), t.clone()]),
        ("man DIR", vec!["man".into(), target.parent().unwrap().to_str().unwrap().into()]),
    ]
}

/// The path each writer writes for `target` (`man` writes `keepsake-host.1` beside it).
fn written_path(label: &str, target: &Path) -> PathBuf {
    if label == "man DIR" {
        target.with_file_name("keepsake-host.1")
    } else {
        target.to_path_buf()
    }
}

fn run_strs(db: &Path, args: &[String]) -> (i32, String, String) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    cli(db, &a)
}

/// The case: in a shared sticky folder (mode 1777, like /tmp) another user made a 0666
/// file under the name this user then asks to write. Nothing is written into it: exit 73, a
/// message naming the owner (or, for `backup`, which never replaces anything, that it exists),
/// its bytes, mode and owner unchanged, and no temp file left. Needs root to chown (else skipped,
/// said in the output).
#[test]
fn t21_output_files_never_write_into_another_users_file_in_a_sticky_folder() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("T21 output files: another user's file: skipped (needs root to chown)");
        return;
    }
    let (d, db) = temp_db();
    let id = one_chat(&db, "a private question");
    let mut refused = 0;
    for (label, _) in writers(&id, Path::new("/x/y")) {
        let shared = d.path().join(format!("shared-{}", label.replace(|c: char| !c.is_alphanumeric(), "")));
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let target = shared.join("chat.out");
        let planted = written_path(label, &target);
        let theirs = b"someone else's file: a reader is waiting for what lands here\n";
        std::fs::write(&planted, theirs).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
        let before = sorted_listing(&shared);
        let args = writers(&id, &target).into_iter().find(|(l, _)| *l == label).unwrap().1;
        let (code, out, err) = run_strs(&db, &args);
        eprintln!("T21 {label} into user 65534's 0666 file: exit {code}: {}", err.trim());
        assert_eq!(code, EXIT_CANT_CREATE, "{label}: {out}{err}");
        if label == "backup" {
            assert!(err.contains("already exists"), "{label}: {err}");
        } else {
            assert!(err.contains("belongs to user 65534"), "{label}: {err}");
        }
        assert!(err.contains(planted.to_str().unwrap()), "{label}: the message names the file: {err}");
        assert_eq!(std::fs::read(&planted).unwrap(), theirs, "{label} wrote into someone else's file");
        assert_eq!(mode(&planted), 0o666, "{label}");
        assert_eq!(owner(&planted), 65534, "{label}");
        assert_eq!(sorted_listing(&shared), before, "{label} left a file behind");
        refused += 1;
    }
    eprintln!("T21 output files: {refused}/4 writers refused another user's 0666 file in a sticky folder, its bytes unchanged");
}

/// A symbolic link at the target (to a file, or dangling) is never followed: exit 73, the link
/// and what it points to unchanged, nothing created where a dangling link points.
#[test]
fn t21_output_files_never_follow_a_symbolic_link() {
    let (d, db) = temp_db();
    let id = one_chat(&db, "a private question");
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, b"the victim's own bytes\n").unwrap();
    let mut refused = 0;
    for (label, _) in writers(&id, Path::new("/x/y")) {
        for dangling in [false, true] {
            let dir = d
                .path()
                .join(format!("links-{}-{dangling}", label.replace(|c: char| !c.is_alphanumeric(), "")));
            std::fs::create_dir(&dir).unwrap();
            let target = dir.join("chat.out");
            let link = written_path(label, &target);
            let aim = if dangling { d.path().join(format!("nowhere-{refused}")) } else { victim.clone() };
            std::os::unix::fs::symlink(&aim, &link).unwrap();
            let before = sorted_listing(&dir);
            let args = writers(&id, &target).into_iter().find(|(l, _)| *l == label).unwrap().1;
            let (code, out, err) = run_strs(&db, &args);
            assert_eq!(code, EXIT_CANT_CREATE, "{label} (dangling {dangling}): {out}{err}");
            assert!(err.contains("symbolic link"), "{label}: {err}");
            assert_eq!(std::fs::read_link(&link).unwrap(), aim, "{label}: the link was replaced");
            assert_eq!(sorted_listing(&dir), before, "{label} left a file behind");
            if dangling {
                assert!(std::fs::symlink_metadata(&aim).is_err(), "{label} created the link's target");
            }
            refused += 1;
        }
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"the victim's own bytes\n");
    assert_eq!(mode(&victim), 0o644);
    eprintln!("T21 output files: {refused}/8 symbolic links (to a file, dangling) refused, not followed, their targets unchanged");
}

/// A new target is 0600 under umask 022 and holds exactly the export (man pages 0644: others
/// read them); a file this user owns is replaced by a new inode (`export`, `man`; a hard link to
/// the old file keeps the old bytes, so nothing was written into it) or refused (`backup`).
#[test]
fn t21_output_files_are_new_private_files_and_replace_only_the_users_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    let db = tmp.path().join("data").join("keepsake.db");
    let id = one_chat(&db, "a private question");
    let (code, md, err) = cli_umask(&db, &home, 0o022, &["export", &id]);
    assert_eq!(code, 0, "{err}");
    // the export but its "Exported <time>" line
    let body = |t: &str| t.lines().filter(|l| !l.starts_with("Exported ")).collect::<Vec<_>>().join("\n");
    let md = body(&md);
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();

    // fresh targets
    let fresh = out.join("fresh.txt");
    let (code, _, err) = cli_umask(&db, &home, 0o022, &["export", &id, "--out", fresh.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(body(&std::fs::read_to_string(&fresh).unwrap()), md);
    assert_eq!(mode(&fresh), 0o600);
    let backup = out.join("fresh.db");
    let (code, _, err) = cli_umask(&db, &home, 0o022, &["backup", backup.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode(&backup), 0o600);
    assert_eq!(integrity(&backup), "ok");
    let man = out.join("man");
    let (code, _, err) = cli_umask(&db, &home, 0o022, &["man", man.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let pages = sorted_listing(&man);
    assert!(pages.iter().all(|p| p.ends_with(".1")) && pages.len() > 5, "{pages:?}");
    assert!(pages.iter().all(|p| mode(&man.join(p)) == 0o644), "man pages are public documents");
    assert_eq!(sorted_listing(&out), ["fresh.db", "fresh.txt", "man"], "temp files left");

    // the user's own existing files
    let own = out.join("own.txt");
    std::fs::write(&own, b"an older export\n").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
    let old_name = out.join("old-name.txt");
    std::fs::hard_link(&own, &old_name).unwrap();
    let (code, _, err) = cli_umask(&db, &home, 0o022, &["export", &id, "--out", own.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(body(&std::fs::read_to_string(&own).unwrap()), md);
    assert_eq!(mode(&own), 0o600, "the replacement is a new private file");
    assert_eq!(std::fs::read(&old_name).unwrap(), b"an older export\n", "the old inode was written");
    let before = std::fs::read(&backup).unwrap();
    let (code, _, err) = cli_umask(&db, &home, 0o022, &["backup", backup.to_str().unwrap()]);
    assert_eq!(code, EXIT_CANT_CREATE, "backup replaced a file: {err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&backup).unwrap(), before);
    let page = man.join("keepsake-host.1");
    std::fs::write(&page, b"stale page\n").unwrap();
    let (code, _, err) = cli_umask(&db, &home, 0o022, &["man", man.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&page).unwrap().contains(".SH NAME"));
    assert_eq!(sorted_listing(&man), pages);
    assert_eq!(
        sorted_listing(&out),
        ["fresh.db", "fresh.txt", "man", "old-name.txt", "own.txt"],
        "temp files left"
    );
    eprintln!("T21 output files: new export 0600 (umask 022), backup 0600, man pages 0644; own export replaced by a new inode (old inode unchanged), own backup refused (exit 73), own man page replaced");
}

/// An export or backup killed (SIGKILL) while it writes never leaves a half file at the target:
/// the target is absent or whole; what remains is at most the private temp file beside it.
#[test]
fn t21_an_interrupted_export_or_backup_never_leaves_a_half_file() {
    let (d, db) = temp_db();
    // one chat holding a large image: a JSON export of about 9 MB, a database of about 7 MB
    let png = noise_png(1400, 1200, 7);
    let mut h = Host::spawn(&db);
    let r = h.ok(
        "history.replace",
        json!({"entries": [
            {"role": "user", "content": [text_part("a picture"), image_part(&data_url("image/png", &png))]},
            assistant("seen")
        ]}),
    );
    let id = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(h.close().0, Some(0));
    let (code, whole, err) = cli(&db, &["export", &id, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(whole.len() > 5_000_000, "export only {} bytes", whole.len());
    let whole: Value = serde_json::from_str(&whole).unwrap();

    let dir = d.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    let runs = 6;
    let (mut killed_mid, mut killed_after, mut finished, mut half) = (0, 0, 0, Vec::new());
    for (label, name) in [("export", "chat.json"), ("backup", "copy.db")] {
        for run in 0..runs {
            let target = dir.join(name);
            let mut cmd = Command::new(BIN);
            cmd.arg("--db")
                .arg(&db)
                .env("KEEPSAKE_SECRET_STORE", "off")
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if label == "export" {
                cmd.args(["export", &id, "--format", "json", "--out", target.to_str().unwrap()]);
            } else {
                cmd.args(["backup", target.to_str().unwrap()]);
            }
            let mut child = cmd.spawn().unwrap();
            // kill as soon as anything appears in the folder (the temp file, or the target)
            let deadline = Instant::now() + std::time::Duration::from_secs(120);
            while sorted_listing(&dir).is_empty() {
                if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                    break;
                }
            }
            // a moment later for half the runs, so the kill lands further inside the write
            if run % 2 == 1 {
                let until = Instant::now() + std::time::Duration::from_millis(3 * run as u64);
                while Instant::now() < until {}
            }
            let _ = child.kill();
            let completed = child.wait().unwrap().code() == Some(0);
            let temps: Vec<String> = sorted_listing(&dir).into_iter().filter(|n| n != name).collect();
            for t in &temps {
                assert!(
                    t.starts_with(&format!(".{name}.")) && t.ends_with(".tmp"),
                    "{label}: stray file {t}"
                );
                assert_eq!(mode(&dir.join(t)), 0o600, "{label}: a temp file {t} is not private");
                std::fs::remove_file(dir.join(t)).unwrap();
            }
            let present = target.exists();
            if present {
                let ok = if label == "export" {
                    // whole: the same document (only `exportedAt` differs between runs)
                    serde_json::from_slice::<Value>(&std::fs::read(&target).unwrap()).is_ok_and(|doc| {
                        doc["sessions"] == whole["sessions"] && doc["images"] == whole["images"]
                    })
                } else {
                    integrity(&target) == "ok"
                };
                if !ok {
                    half.push(format!(
                        "{label} run {run}: {} bytes at the target",
                        std::fs::metadata(&target).unwrap().len()
                    ));
                }
                assert_eq!(mode(&target), 0o600, "{label}");
                std::fs::remove_file(&target).unwrap();
            }
            match (completed, present) {
                (true, _) => finished += 1,
                (false, false) => killed_mid += 1,
                (false, true) => killed_after += 1,
            }
        }
    }
    eprintln!(
        "T21 output files: {} export/backup runs killed with SIGKILL: {killed_mid} while writing (no target), \
         {killed_after} after the target was in place (whole), {finished} finished first; half-written targets: {}",
        2 * runs,
        half.len()
    );
    assert!(half.is_empty(), "{}", half.join("\n"));
    assert!(killed_mid > 0, "no run was killed while it wrote (machine too fast for this file size?)");
}
