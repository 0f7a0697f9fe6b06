//! `keepsake-host install | uninstall | doctor` (browser registration) and `install.sh`, run as
//! the real binary against a temporary home: `HOME`, `XDG_CONFIG_HOME`, `KEEPSAKE_DB` and
//! `KEEPSAKE_SYSTEM_ROOT` (the prefix for `/etc`, `/usr/bin`, `/snap`...) all point into a temp
//! dir, so nothing touches the real machine (platform.md §7–§9, §12).
use crate::harness::*;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

const ID: &str = "ejaedcjldiggibmnammkkoekohjgefkk";
const OTHER_ID: &str = "abcdefghijklmnopabcdefghijklmnop";
const MANIFEST: &str = "dev.keepsake.host.json";
const NOT_FOUND: &str = "Specified native messaging host not found.";
const FORBIDDEN: &str = "Access to the specified native messaging host is forbidden.";
const EXITED: &str = "Native host has exited.";

/// A throwaway machine: `<tmp>/home` (HOME, with `.config` as XDG_CONFIG_HOME), `<tmp>/data`
/// (the database folder), `<tmp>/root` (the system root).
struct Machine {
    tmp: tempfile::TempDir,
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

impl Machine {
    fn new() -> Machine {
        let m = Machine { tmp: tempfile::tempdir().expect("tempdir") };
        std::fs::create_dir_all(m.config()).unwrap();
        std::fs::create_dir_all(m.root()).unwrap();
        m
    }
    fn path(&self) -> &Path {
        self.tmp.path()
    }
    fn home(&self) -> PathBuf {
        self.path().join("home")
    }
    fn config(&self) -> PathBuf {
        self.home().join(".config")
    }
    fn root(&self) -> PathBuf {
        self.path().join("root")
    }
    fn db(&self) -> PathBuf {
        self.path().join("data").join("keepsake.db")
    }
    /// A browser's config folder (relative to XDG_CONFIG_HOME), as if it had run once.
    fn browser(&self, rel: &str) -> PathBuf {
        let d = self.config().join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("Local State"), "{}").unwrap();
        d
    }
    fn manifest_in(&self, rel: &str) -> PathBuf {
        self.config().join(rel).join("NativeMessagingHosts").join(MANIFEST)
    }
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.config())
            .env("KEEPSAKE_DB", self.db())
            .env("KEEPSAKE_SYSTEM_ROOT", self.root());
        c
    }
    fn run(&self, args: &[&str]) -> Out {
        output(self.command(BIN).args(args))
    }
    /// Every path under the temp dir with its kind, mode and content hash, sorted.
    fn listing(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(self.path(), self.path(), &mut out);
        out.sort();
        out
    }
}

fn output(c: &mut Command) -> Out {
    let o = c.output().expect("run command");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(base).unwrap().display().to_string();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mode = m.permissions().mode() & 0o7777;
        if m.is_dir() {
            out.push(format!("{rel}/ {mode:o}"));
            walk(base, &p, out);
        } else {
            out.push(format!("{rel} {mode:o} {}", sha256_hex(&std::fs::read(&p).unwrap())));
        }
    }
}

/// Every `dev.keepsake.host.json` under `dir`.
fn manifests_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == MANIFEST) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o7777
}

fn bin_path() -> PathBuf {
    std::fs::canonicalize(BIN).unwrap()
}

/// The manifest is exactly what Chromium needs.
fn assert_good_manifest(p: &Path, ids: &[&str]) {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(!bytes.starts_with(b"\xEF\xBB\xBF"), "BOM in {}", p.display());
    let v: Value = serde_json::from_slice(&bytes).expect("manifest is UTF-8 JSON");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["name", "description", "path", "type", "allowed_origins"], "{v}");
    assert_eq!(v["name"], json!("dev.keepsake.host"));
    assert_eq!(format!("{}.json", v["name"].as_str().unwrap()), p.file_name().unwrap().to_str().unwrap());
    assert!(!v["description"].as_str().unwrap().is_empty());
    assert_eq!(v["type"], json!("stdio"));
    let path = PathBuf::from(v["path"].as_str().unwrap());
    assert!(path.is_absolute(), "{v}");
    assert!(path.is_file(), "{v}");
    assert!(mode(&path) & 0o111 != 0, "{} not executable", path.display());
    let origins: Vec<String> = ids.iter().map(|i| format!("chrome-extension://{i}/")).collect();
    assert_eq!(v["allowed_origins"], json!(origins));
    assert_eq!(mode(p), 0o644, "manifests must be readable by the browser");
}

/// A Mozilla manifest as Firefox reads it: the same keys with `allowed_extensions` (add-on IDs).
fn assert_good_mozilla_manifest(p: &Path, ids: &[&str]) {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(!bytes.starts_with(b"\xEF\xBB\xBF"), "BOM in {}", p.display());
    let v: Value = serde_json::from_slice(&bytes).expect("manifest is UTF-8 JSON");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["name", "description", "path", "type", "allowed_extensions"], "{v}");
    assert_eq!(p.file_name().unwrap(), MANIFEST, "Firefox looks the manifest up by <name>.json");
    assert_eq!(v["name"], json!("dev.keepsake.host"));
    assert_eq!(v["type"], json!("stdio"));
    let path = PathBuf::from(v["path"].as_str().unwrap());
    assert!(path.is_absolute() && path.is_file(), "{v}");
    assert_eq!(v["allowed_extensions"], json!(ids));
    assert_eq!(mode(p), 0o644, "manifests must be readable by the browser");
}

/// The one Firefox add-on ID Keepsake trusts built in (platform.md §13): what every Mozilla
/// manifest `install` and the package write must list.
const FIREFOX_ID: &str = keepsake_host::cli::browsers::FIREFOX_ADDON_ID;

#[test]
fn firefox_librewolf_and_waterfox_get_mozilla_manifests_doctor_checks_them_uninstall_removes_them() {
    let m = Machine::new();
    // Firefox has run (a profile), LibreWolf is installed, Waterfox is not.
    std::fs::create_dir_all(m.home().join(".mozilla/firefox")).unwrap();
    std::fs::write(m.home().join(".mozilla/firefox/profiles.ini"), "[General]\n").unwrap();
    std::fs::create_dir_all(m.home().join(".librewolf")).unwrap();
    let before = m.listing();
    let o = m.run(&["install", "--extension-id", "store@keepsake.dev", "--json"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let doc = o.json();
    assert_eq!(doc["allowedExtensions"], json!([FIREFOX_ID, "store@keepsake.dev"]));
    let ff = m.home().join(".mozilla/native-messaging-hosts").join(MANIFEST);
    let lw = m.home().join(".librewolf/native-messaging-hosts").join(MANIFEST);
    assert_eq!(manifests_under(m.path()), {
        let mut v = vec![ff.clone(), lw.clone()];
        v.sort();
        v
    });
    for f in [&ff, &lw] {
        assert_good_mozilla_manifest(f, &[FIREFOX_ID, "store@keepsake.dev"]);
    }
    // A second install changes nothing.
    let again = m.listing();
    assert_eq!(m.run(&["install", "--extension-id", "store@keepsake.dev"]).code, 0);
    assert_eq!(m.listing(), again);
    // doctor reads them with Firefox's rules: passes; a Chromium-shaped manifest there fails with
    // what the add-on sees.
    let d = m.run(&["doctor", "--json"]).json();
    assert_eq!(d["ok"], json!(true), "{d}");
    let ok_lines: Vec<&Value> =
        d["checks"].as_array().unwrap().iter().filter(|c| c["check"] == "manifest").collect();
    assert!(ok_lines.iter().any(|c| c["detail"].as_str().unwrap().contains(".mozilla")), "{d}");
    let good = std::fs::read(&ff).unwrap();
    let mut chromium_shaped: Value = serde_json::from_slice(&good).unwrap();
    chromium_shaped.as_object_mut().unwrap().remove("allowed_extensions");
    chromium_shaped["allowed_origins"] = json!([format!("chrome-extension://{ID}/")]);
    std::fs::write(&ff, serde_json::to_vec(&chromium_shaped).unwrap()).unwrap();
    let d = m.run(&["doctor", "--json"]).json();
    assert_eq!(d["ok"], json!(false));
    let fail = d["checks"].as_array().unwrap().iter().find(|c| c["status"] == "fail").unwrap();
    assert_eq!(fail["check"], json!("manifest allowed_extensions"), "{fail}");
    assert_eq!(fail["browserError"], json!("No such native application dev.keepsake.host"));
    assert_eq!(fail["fix"], json!("keepsake-host install (or ./install.sh)"));
    std::fs::write(&ff, &good).unwrap();
    // A Firefox profile in use but not registered: a warning naming it.
    std::fs::remove_file(&lw).unwrap();
    std::fs::write(m.home().join(".librewolf/profiles.ini"), "").unwrap();
    let d = m.run(&["doctor", "--json"]).json();
    let warn = d["checks"].as_array().unwrap().iter().find(|c| c["check"] == "browser registration").unwrap();
    assert!(warn["detail"].as_str().unwrap().contains("LibreWolf"), "{warn}");
    std::fs::remove_file(m.home().join(".librewolf/profiles.ini")).unwrap();
    // uninstall removes what install wrote and nothing else.
    let o = m.run(&["uninstall"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(m.listing(), before);
}

// ---------------------------------------------------------------------------------------------
// install

#[test]
fn install_writes_exactly_the_detected_browsers_and_twice_changes_nothing() {
    let m = Machine::new();
    m.browser("chromium");
    m.browser("BraveSoftware/Brave-Browser");
    std::fs::create_dir_all(m.config().join("unrelated-app")).unwrap();

    let o = m.run(&["install"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let chromium = m.manifest_in("chromium");
    let brave = m.manifest_in("BraveSoftware/Brave-Browser");
    assert_eq!(manifests_under(m.path()), {
        let mut v = vec![chromium.clone(), brave.clone()];
        v.sort();
        v
    });
    for p in [&chromium, &brave] {
        assert_good_manifest(p, &[ID]);
        let line = o.stdout.lines().find(|l| l.contains(&p.display().to_string())).expect("path printed");
        assert!(line.starts_with("wrote"), "{line}");
        let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        assert_eq!(PathBuf::from(v["path"].as_str().unwrap()), bin_path());
    }
    assert!(m.db().with_file_name("install-receipt.json").is_file());

    // Twice: every file reported unchanged, identical bytes, nothing new.
    let before = m.listing();
    let o = m.run(&["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for p in [&chromium, &brave] {
        let line = o.stdout.lines().find(|l| l.contains(&p.display().to_string())).expect("path printed");
        assert!(line.starts_with("unchanged"), "{line}");
    }
    assert!(!o.stdout.contains("wrote"), "{}", o.stdout);
    assert_eq!(m.listing(), before, "a second install changed files");
    let doc = m.run(&["install", "--json"]).json();
    assert_eq!(doc["ok"], json!(true));
    let statuses: Vec<&str> =
        doc["manifests"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["unchanged", "unchanged"], "{doc}");
    assert_eq!(m.listing(), before);

    // A dry run of a change writes nothing.
    let doc = m.run(&["install", "--dry-run", "--json", "--extension-id", OTHER_ID]).json();
    assert_eq!(doc["manifests"][0]["status"], json!("would write"), "{doc}");
    assert_eq!(m.listing(), before);

    // Extra IDs all go into allowed_origins.
    let o = m.run(&["install", "--extension-id", OTHER_ID, "--extension-id", OTHER_ID]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_good_manifest(&chromium, &[ID, OTHER_ID]);
    assert_eq!(manifests_under(m.path()).len(), 2);

    // Bad input: one clear line, nothing written.
    let plain = m.path().join("plain-file");
    std::fs::write(&plain, "not a program").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = m.listing();
    for (args, needle) in [
        (vec!["install", "--extension-id", "not-an-id"], "extension ID"),
        (vec!["install", "--bin", "/nonexistent/keepsake-host"], "/nonexistent/keepsake-host"),
        (vec!["install", "--bin", plain.to_str().unwrap()], "not executable"),
        (vec!["install", "--bin", "/"], "not a regular file"),
    ] {
        let o = m.run(&args);
        assert_ne!(o.code, 0, "{args:?}");
        assert_eq!(o.stderr.trim().lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(needle), "{args:?}: {}", o.stderr);
    }
    assert_eq!(m.listing(), before);
}

#[test]
fn no_browser_found_exits_zero_writes_nothing_and_explains() {
    let m = Machine::new();
    let before = m.listing();
    let o = m.run(&["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("no Chromium-family or Firefox-family browser found"), "{}", o.stdout);
    assert!(o.stdout.contains("~/.mozilla/firefox"), "{}", o.stdout);
    assert!(o.stdout.contains("--user-data-dir"), "{}", o.stdout);
    assert_eq!(m.listing(), before, "nothing may be written when no browser is found");
    let doc = m.run(&["install", "--json"]).json();
    assert_eq!(doc["noBrowserFound"], json!(true));
    // doctor: not a failure (nothing is in use), but it says so.
    let o = m.run(&["doctor"]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(o.stdout.contains("no manifest found for any browser"), "{}", o.stdout);
}

#[test]
fn user_data_dir_registers_just_that_profile() {
    let m = Machine::new();
    m.browser("chromium");
    std::fs::create_dir(m.path().join("profiles")).unwrap();
    let profile = m.path().join("profiles/fresh");
    let o = m.run(&["install", "--user-data-dir", profile.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let file = profile.join("NativeMessagingHosts").join(MANIFEST);
    assert_good_manifest(&file, &[ID]);
    assert!(o.stdout.contains(&file.display().to_string()), "{}", o.stdout);
    assert_eq!(manifests_under(m.path()), vec![file.clone()], "--user-data-dir registers only that profile");

    let o = m.run(&["doctor", "--user-data-dir", profile.to_str().unwrap()]);
    assert!(
        o.stdout.lines().any(|l| l.starts_with("ok") && l.contains(&file.display().to_string())),
        "{}",
        o.stdout
    );
    // named twice (the argument and the receipt): one label, not "(profile, profile)"
    assert!(!o.stdout.contains("profile, profile"), "{}", o.stdout);
    // The receipt remembers the profile: plain doctor checks it too.
    let doc = m.run(&["doctor", "--json"]).json();
    let ok_files: Vec<&str> = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["check"] == "manifest" && c["status"] == "ok")
        .filter_map(|c| c["detail"].as_str())
        .collect();
    assert!(ok_files.iter().any(|d| d.contains(&file.display().to_string())), "{doc}");
    // A profile without a manifest is a failure when asked for.
    let other = m.path().join("profiles/other");
    let o = m.run(&["doctor", "--user-data-dir", other.to_str().unwrap()]);
    assert_ne!(o.code, 0, "{}", o.stdout);
    let line = o.stdout.lines().find(|l| l.starts_with("fail")).expect("a fail line");
    assert!(line.contains(&other.display().to_string()) && line.contains(NOT_FOUND), "{line}");
    assert!(line.contains("keepsake-host install --user-data-dir"), "{line}");

    // Uninstall removes the profile folder it created (it is empty again).
    let o = m.run(&["uninstall"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!profile.exists(), "{}", o.stdout);
    assert!(m.path().join("profiles").exists(), "only folders install created are removed");
}

#[test]
fn sandboxed_browsers_are_warned_about_and_never_written() {
    let m = Machine::new();
    m.browser("chromium");
    let snap = m.home().join("snap/chromium/common");
    let flatpak = m.home().join(".var/app/org.chromium.Chromium/config/chromium");
    let brave_flatpak = m.home().join(".var/app/com.brave.Browser");
    for d in [&snap, &flatpak, &brave_flatpak] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(m.root().join("snap/bin")).unwrap();
    std::fs::write(m.root().join("snap/bin/chromium"), "").unwrap();

    let o = m.run(&["install"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let warnings: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 3, "{}", o.stdout);
    assert!(warnings.iter().any(|w| w.contains("Snap Chromium") && w.contains("outside")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("Flatpak Chromium") && w.contains("sandbox")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("Flatpak Brave")), "{warnings:?}");
    assert_eq!(manifests_under(m.path()), vec![m.manifest_in("chromium")]);
    assert!(
        manifests_under(&m.home().join(".var")).is_empty()
            && manifests_under(&m.home().join("snap")).is_empty()
    );

    let doc = m.run(&["doctor", "--json"]).json();
    let sandboxed =
        doc["checks"].as_array().unwrap().iter().filter(|c| c["check"] == "sandboxed browser").count();
    assert_eq!(sandboxed, 3, "{doc}");
}

// ---------------------------------------------------------------------------------------------
// doctor

#[test]
fn doctor_passes_then_names_each_broken_manifest_and_the_extension_error() {
    let m = Machine::new();
    m.browser("chromium");
    assert_eq!(m.run(&["install"]).code, 0);
    let file = m.manifest_in("chromium");
    let good = std::fs::read(&file).unwrap();

    let o = m.run(&["doctor"]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert_eq!(o.stdout.lines().last(), Some("OK"), "{}", o.stdout);
    assert!(
        o.stdout.lines().any(|l| l.starts_with("ok") && l.contains(&file.display().to_string())),
        "{}",
        o.stdout
    );
    let doc = m.run(&["doctor", "--json"]).json();
    assert_eq!(doc["ok"], json!(true), "{doc}");

    let not_exec = m.path().join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o644)).unwrap();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_slice(&good).unwrap();
        f(&mut v);
        serde_json::to_vec_pretty(&v).unwrap()
    };
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(&good);
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("wrong name", edit(&|v| v["name"] = json!("dev.keepsake.other")), "manifest file name", NOT_FOUND),
        ("bad name", edit(&|v| v["name"] = json!("Dev.Keepsake.Host")), "manifest name", NOT_FOUND),
        ("BOM", bom, "manifest encoding", NOT_FOUND),
        ("invalid JSON", b"{\"name\": ".to_vec(), "manifest json", NOT_FOUND),
        ("empty description", edit(&|v| v["description"] = json!("")), "manifest description", NOT_FOUND),
        ("type", edit(&|v| v["type"] = json!("pipe")), "manifest type", NOT_FOUND),
        ("relative path", edit(&|v| v["path"] = json!("keepsake-host")), "manifest path", NOT_FOUND),
        (
            "missing binary",
            edit(&|v| v["path"] = json!("/nonexistent/keepsake-host")),
            "manifest path",
            NOT_FOUND,
        ),
        (
            "non-executable path",
            edit(&|v| v["path"] = json!(not_exec.to_str().unwrap())),
            "manifest path",
            EXITED,
        ),
        (
            "missing trailing slash",
            edit(&|v| v["allowed_origins"] = json!([format!("chrome-extension://{ID}")])),
            "manifest allowed_origins",
            NOT_FOUND,
        ),
        (
            "missing origin",
            edit(&|v| v["allowed_origins"] = json!([format!("chrome-extension://{OTHER_ID}/")])),
            "manifest allowed_origins",
            FORBIDDEN,
        ),
    ];
    for (what, bytes, check, seen) in cases {
        std::fs::write(&file, &bytes).unwrap();
        let o = m.run(&["doctor"]);
        assert_ne!(o.code, 0, "{what}: doctor passed:\n{}", o.stdout);
        let fails: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("fail")).collect();
        assert_eq!(fails.len(), 1, "{what}: one line per failure:\n{}", o.stdout);
        let line = fails[0];
        assert!(line.contains(check), "{what}: check not named: {line}");
        assert!(line.contains(&file.display().to_string()), "{what}: file not named: {line}");
        assert!(line.contains(seen), "{what}: extension error not named: {line}");
        assert!(line.contains("keepsake-host install"), "{what}: no fix: {line}");
        let doc = m.run(&["doctor", "--json"]).json();
        assert_eq!(doc["ok"], json!(false), "{what}");
        let fail = doc["checks"].as_array().unwrap().iter().find(|c| c["status"] == "fail").unwrap();
        assert_eq!(fail["check"], json!(check), "{what}: {doc}");
        assert_eq!(fail["file"], json!(file.display().to_string()), "{what}");
        assert!(fail["browserError"].as_str().unwrap().contains(seen), "{what}: {fail}");
        assert!(fail["fix"].as_str().unwrap().contains("keepsake-host install"), "{what}: {fail}");
    }

    // Reinstalling repairs it.
    let o = m.run(&["install"]);
    assert!(o.stdout.lines().any(|l| l.starts_with("wrote") && l.contains(&file.display().to_string())));
    assert_eq!(std::fs::read(&file).unwrap(), good);
    assert_eq!(m.run(&["doctor"]).code, 0);

    // A browser in use with no manifest anywhere is a failure; with another one registered, a warning.
    std::fs::remove_file(&file).unwrap();
    let o = m.run(&["doctor"]);
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert!(
        o.stdout.lines().any(|l| l.starts_with("fail") && l.contains("no manifest found for any browser")),
        "{}",
        o.stdout
    );
    m.browser("vivaldi");
    assert_eq!(m.run(&["install"]).code, 0);
    std::fs::remove_file(m.manifest_in("vivaldi")).unwrap();
    let o = m.run(&["doctor"]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(o
        .stdout
        .lines()
        .any(|l| l.starts_with("warn") && l.contains("Vivaldi") && l.contains(NOT_FOUND)));
}

// ---------------------------------------------------------------------------------------------
// uninstall

#[test]
fn uninstall_restores_the_home_exactly_and_keeps_the_database_unless_purged() {
    let m = Machine::new();
    m.browser("chromium");
    let brave = m.browser("BraveSoftware/Brave-Browser");
    // Another host's manifest in a folder that already existed stays.
    std::fs::create_dir_all(brave.join("NativeMessagingHosts")).unwrap();
    std::fs::write(brave.join("NativeMessagingHosts/com.example.other.json"), "{}").unwrap();
    // The user has chat data already.
    let mut h = Host::spawn(&m.db());
    h.ok("settings.set", json!({"map": {"theme": "dark"}}));
    assert_eq!(h.close().0, Some(0));
    let before = m.listing();

    let profile = m.path().join("profile");
    assert_eq!(m.run(&["install"]).code, 0);
    assert_eq!(m.run(&["install", "--user-data-dir", profile.to_str().unwrap()]).code, 0);
    assert_eq!(manifests_under(m.path()).len(), 3);

    let o = m.run(&["uninstall"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let removed: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("removed")).collect();
    for f in [m.manifest_in("chromium"), m.manifest_in("BraveSoftware/Brave-Browser")] {
        assert!(
            removed.iter().any(|l| l.contains(&f.display().to_string())),
            "{f:?} not listed: {removed:?}"
        );
    }
    assert!(o.stdout.contains("kept your chat data"), "{}", o.stdout);
    assert_eq!(m.listing(), before, "uninstall left something behind or removed too much");

    // Again: nothing to remove, still harmless.
    let o = m.run(&["uninstall"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("nothing to remove"), "{}", o.stdout);
    assert_eq!(m.listing(), before);
    assert_eq!(
        sql(&m.db()).query_row("SELECT count(*) FROM settings", [], |r| r.get::<_, i64>(0)).unwrap(),
        1
    );

    // --purge-data deletes the database too, with the copies beside it, and says so.
    assert_eq!(m.run(&["install"]).code, 0);
    let copies = m.db().parent().unwrap().join("backups");
    std::fs::create_dir_all(&copies).unwrap();
    std::fs::write(copies.join("keepsake-daily-20260101T000000Z-v6.db"), b"a copy").unwrap();
    std::fs::write(copies.join(".keepsake-daily-20260101T000000Z-v6.db.0123456789abcdef.tmp"), b"half")
        .unwrap();
    let o = m.run(&["uninstall", "--purge-data", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let doc = o.json();
    assert_eq!(doc["dataPurged"], json!(true));
    assert_eq!(doc["databaseKept"], json!(false));
    assert!(!m.db().exists());
    assert!(!m.db().parent().unwrap().exists(), "the data folder is removed once empty");
    let expected: Vec<String> = before.into_iter().filter(|l| !l.starts_with("data")).collect();
    assert_eq!(m.listing(), expected);
}

/// The receipt sits in a folder the user can write and `uninstall --system` runs as root: a
/// receipt that names someone else's files (the binary, a manifest, a folder, by path, by
/// symbolic link) must leave them all where they are, say so, and still remove what is ours.
/// Before, `uninstall` deleted whatever file `binary` named.
#[test]
fn uninstall_removes_only_what_it_can_prove_install_wrote() {
    let m = Machine::new();
    m.browser("chromium");
    // A real install by install.sh's route: a copy of the host binary it owns.
    let bin_dir = m.home().join(".local/bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("keepsake-host");
    std::fs::copy(BIN, &bin).unwrap();
    let o = m.run(&["install", "--bin", bin.to_str().unwrap(), "--owns-bin"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let chromium = m.manifest_in("chromium");
    assert!(chromium.is_file());

    // Files that are not ours, the kind root owns on a real machine.
    let victims = m.path().join("etc");
    std::fs::create_dir_all(victims.join("empty-system-folder")).unwrap();
    let shadow = victims.join("shadow");
    std::fs::write(&shadow, "root:$y$j9T$secret:19000:0:99999:7:::\n").unwrap();
    let other_bin = victims.join("keepsake-host");
    std::fs::write(&other_bin, "#!/bin/sh\necho dev.keepsake.host keepsake-host\n").unwrap();
    let stray_manifest = victims.join(MANIFEST);
    std::fs::write(&stray_manifest, r#"{"name":"dev.keepsake.host"}"#).unwrap();
    let other_host = m.config().join("google-chrome/NativeMessagingHosts").join(MANIFEST);
    std::fs::create_dir_all(other_host.parent().unwrap()).unwrap();
    std::fs::write(&other_host, r#"{"name":"com.example.other","path":"/usr/bin/other"}"#).unwrap();
    let link_dir = m.path().join("links");
    std::fs::create_dir_all(&link_dir).unwrap();
    let link = link_dir.join("keepsake-host");
    std::os::unix::fs::symlink(&bin, &link).unwrap();

    // The receipt, rewritten by whoever can write the data folder.
    let rpath = m.db().parent().unwrap().join("install-receipt.json");
    let receipt: Value = serde_json::from_slice(&std::fs::read(&rpath).unwrap()).unwrap();
    let hostile = |receipt: &mut Value, binary: &Path| {
        receipt["binary"] = json!(binary);
        let manifests = receipt["manifests"].as_array_mut().unwrap();
        manifests.push(json!(stray_manifest));
        manifests.push(json!(other_host));
        manifests.push(json!(shadow));
        receipt["createdDirs"].as_array_mut().unwrap().push(json!(victims.join("empty-system-folder")));
        receipt["createdDirs"].as_array_mut().unwrap().push(json!(victims));
    };
    for (target, why) in
        [(&shadow, "its name is shadow"), (&other_bin, "it is not an executable"), (&link, "symbolic link")]
    {
        let mut r = receipt.clone();
        hostile(&mut r, target);
        std::fs::create_dir_all(rpath.parent().unwrap()).unwrap();
        std::fs::write(&rpath, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
        let before = m.listing();
        let o = m.run(&["uninstall", "--json"]);
        assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
        let doc = o.json();
        for p in [&shadow, &other_bin, &stray_manifest, &other_host] {
            assert!(p.is_file(), "{} was removed: {doc}", p.display());
        }
        let left: Vec<String> = doc["left"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| format!("{} {}", l["path"], l["reason"]))
            .collect();
        assert!(left.iter().any(|l| l.contains(target.to_str().unwrap()) && l.contains(why)), "{left:?}");
        for p in [&shadow, &stray_manifest, &other_host, &victims.join("empty-system-folder"), &victims] {
            assert!(
                left.iter().any(|l| l.contains(&format!("{:?}", p.to_str().unwrap()))),
                "{} not reported: {left:?}",
                p.display()
            );
        }
        assert!(
            victims.join("empty-system-folder").is_dir(),
            "an empty folder outside install's was removed"
        );
        assert!(std::fs::symlink_metadata(&link).is_ok(), "the link was removed");
        // ours went: the chromium manifest (and, when the receipt named it, the binary)
        assert!(!chromium.exists(), "{doc}");
        let after = m.listing();
        let gone: Vec<&String> = before.iter().filter(|l| !after.contains(l)).collect();
        assert!(
            gone.iter().all(|l| l.contains("chromium/NativeMessagingHosts") || l.starts_with("data/")),
            "uninstall removed more than the manifest, its folder, the receipt and its folder: {gone:?}"
        );
        assert!(bin.is_file(), "the binary was not named by this receipt");
        // the text output says what it left, one line each
        std::fs::create_dir_all(rpath.parent().unwrap()).unwrap();
        std::fs::write(&rpath, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
        let o = m.run(&["uninstall"]);
        assert!(
            o.stdout.lines().any(|l| l.starts_with("left") && l.contains(target.to_str().unwrap())),
            "{}",
            o.stdout
        );
        assert_eq!(m.run(&["install"]).code, 0);
        // (install writes its own manifest name in every browser folder it finds: put the
        // stranger back)
        std::fs::write(&other_host, r#"{"name":"com.example.other","path":"/usr/bin/other"}"#).unwrap();
    }

    // The genuine receipt still removes the genuine binary and the folders install.sh made.
    let mut r = receipt.clone();
    r["createdDirs"].as_array_mut().unwrap().push(json!(bin_dir));
    std::fs::create_dir_all(rpath.parent().unwrap()).unwrap();
    std::fs::write(&rpath, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    std::fs::remove_file(&link).unwrap();
    let o = m.run(&["uninstall", "--json"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let doc = o.json();
    let left = doc["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "only the stranger in Chrome's folder is left: {doc}");
    assert_eq!(left[0]["path"], json!(other_host));
    assert!(!bin.exists(), "{doc}");
    assert!(!bin_dir.exists(), "{doc}");
    assert!(!chromium.exists());
    assert!(shadow.is_file() && other_host.is_file());
    eprintln!(
        "T25: 3 hostile receipts (binary = a file named shadow, a script named keepsake-host, a symbolic link; \
         manifests outside install's folders and another host's; foreign folders): foreign paths removed 0, \
         reported 100%; the genuine receipt removed the binary, its folder and the manifest"
    );
}

#[test]
fn system_install_writes_system_folders_and_asks_for_sudo_without_permission() {
    let m = Machine::new();
    // Edge appears installed; Vivaldi does not.
    std::fs::create_dir_all(m.root().join("opt/microsoft/msedge")).unwrap();
    let before = m.listing();
    let o = m.run(&["install", "--system"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let sys = |p: &str| m.root().join(p).join(MANIFEST);
    let mut expected = vec![
        sys("etc/opt/chrome/native-messaging-hosts"),
        sys("etc/chromium/native-messaging-hosts"),
        sys("etc/opt/edge/native-messaging-hosts"),
        sys("usr/lib/mozilla/native-messaging-hosts"),
    ];
    expected.sort();
    assert_eq!(manifests_under(m.path()), expected);
    for f in &expected {
        if f.starts_with(m.root().join("usr/lib/mozilla")) {
            assert_good_mozilla_manifest(f, &[FIREFOX_ID]);
        } else {
            assert_good_manifest(f, &[ID]);
        }
        assert_eq!(mode(f.parent().unwrap()), 0o755, "system folders must be readable by every user");
    }
    assert_eq!(m.run(&["doctor"]).code, 0);
    let o = m.run(&["uninstall", "--system"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(m.listing(), before);

    // Without write permission: one line that says to use sudo, and nothing written.
    let etc = m.root().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut cmd = m.command(BIN);
    cmd.args(["install", "--system"]);
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        // root ignores file modes: run as `nobody`, who may enter the temp dir but not write.
        std::fs::set_permissions(m.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        cmd.uid(65534).gid(65534);
    }
    let before = m.listing();
    let o = output(&mut cmd);
    let after = m.listing();
    std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("permission denied") && o.stderr.contains("sudo"), "{}", o.stderr);
    assert_eq!(after, before);
}

/// `install --system --package-root` (what packaging/deb/build.sh runs): every system-wide folder
/// under the staging root whether its browser is installed or not, each manifest naming the
/// installed path given by `--bin` (which exists only under the staging root), no receipt and
/// nothing outside the staging root; the same bytes a later `install --system` on the installed
/// machine would write, so it finds them unchanged.
#[test]
fn package_root_writes_every_system_folder_for_the_installed_path() {
    let m = Machine::new();
    let stage = m.path().join("stage");
    std::fs::create_dir_all(stage.join("usr/bin")).unwrap();
    std::fs::copy(BIN, stage.join("usr/bin/keepsake-host")).unwrap();
    let before = m.listing();
    let o = m.run(&[
        "install",
        "--system",
        "--package-root",
        stage.to_str().unwrap(),
        "--bin",
        "/usr/bin/keepsake-host",
        "--json",
    ]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let r = o.json();
    assert_eq!(r["binary"], json!("/usr/bin/keepsake-host"));
    assert_eq!(r["receipt"]["status"], json!("none"));
    let sys = |p: &str| stage.join(p).join(MANIFEST);
    let mut expected = vec![
        sys("etc/opt/chrome/native-messaging-hosts"),
        sys("etc/chromium/native-messaging-hosts"),
        sys("etc/opt/edge/native-messaging-hosts"),
        sys("etc/opt/vivaldi/native-messaging-hosts"),
        // Firefox's, and not /usr/lib64/mozilla: a Debian package ships what Debian's Firefox reads
        sys("usr/lib/mozilla/native-messaging-hosts"),
    ];
    expected.sort();
    assert_eq!(manifests_under(m.path()), expected, "every folder, though no browser is installed");
    for f in &expected {
        let v: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        assert_eq!(v["path"], json!("/usr/bin/keepsake-host"));
        if f.starts_with(stage.join("usr/lib/mozilla")) {
            assert_eq!(v["allowed_extensions"], json!([FIREFOX_ID]));
        } else {
            assert_eq!(v["allowed_origins"], json!([format!("chrome-extension://{ID}/")]));
        }
        assert_eq!(mode(f), 0o644);
        assert_eq!(mode(f.parent().unwrap()), 0o755);
    }
    // only the staging root changed: no receipt, no data folder, nothing under the system root
    let changed: Vec<String> = m.listing().into_iter().filter(|l| !before.contains(l)).collect();
    assert!(changed.iter().all(|l| l.starts_with("stage/")), "{changed:#?}");
    assert!(!m.db().parent().unwrap().exists());

    // the installed machine (the staging root as its system root, the binary where --bin said):
    // `install --system` writes the same bytes, so it finds the packaged files unchanged
    for f in &expected {
        let manifest = std::fs::read_to_string(f).unwrap();
        let installed =
            manifest.replace("/usr/bin/keepsake-host", stage.join("usr/bin/keepsake-host").to_str().unwrap());
        std::fs::write(f, installed).unwrap();
    }
    let mut c = m.command(BIN);
    c.env("KEEPSAKE_SYSTEM_ROOT", &stage)
        .args(["install", "--system", "--dry-run", "--json", "--bin"])
        .arg(stage.join("usr/bin/keepsake-host"));
    let o = output(&mut c);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let statuses: Vec<Value> =
        o.json()["manifests"].as_array().unwrap().iter().map(|x| x["status"].clone()).collect();
    assert_eq!(
        statuses,
        [json!("unchanged"), json!("unchanged"), json!("unchanged")],
        "Chrome's, Chromium's and Firefox's folders"
    );

    // misuse: without --system, without --bin, or a --bin missing under the staging root
    let root = stage.to_str().unwrap();
    assert_eq!(m.run(&["install", "--package-root", root, "--bin", "/usr/bin/keepsake-host"]).code, 2);
    assert_eq!(m.run(&["install", "--system", "--package-root", root]).code, 2);
    let o = m.run(&["install", "--system", "--package-root", root, "--bin", "/usr/bin/nothing"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("usr/bin/nothing"), "{}", o.stderr);
}

// ---------------------------------------------------------------------------------------------
// install.sh

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn install_sh_is_shellcheck_clean() {
    let Ok(o) = Command::new("shellcheck").arg("--version").output() else {
        eprintln!("NOTE: shellcheck is not installed; skipping (test.sh installs it)");
        return;
    };
    assert!(o.status.success());
    for args in [vec![], vec!["--enable=all"]] {
        let o = output(Command::new("shellcheck").args(&args).arg(repo().join("install.sh")));
        assert_eq!(o.code, 0, "shellcheck {args:?} install.sh:\n{}{}", o.stdout, o.stderr);
    }
}

#[test]
fn install_sh_installs_registers_and_uninstalls_without_leftovers() {
    let m = Machine::new();
    m.browser("chromium");
    let before = m.listing();
    let script = repo().join("install.sh");
    // The default data folder (~/.local/share/keepsake) this time, so its creation is undone too.
    let sh = |args: &[&str]| {
        let mut c = m.command("sh");
        c.env_remove("KEEPSAKE_DB").env("KEEPSAKE_HOST_BIN", BIN).arg(&script).args(args);
        output(&mut c)
    };

    let o = sh(&["--no-build"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let installed = m.home().join(".local/bin/keepsake-host");
    assert_eq!(mode(&installed), 0o755);
    let file = m.manifest_in("chromium");
    assert_good_manifest(&file, &[ID]);
    let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["path"], json!(installed.to_str().unwrap()), "the manifest points at the installed copy");
    for needle in ["chrome://extensions", "Developer mode", "Load unpacked", ID, "/extension"] {
        assert!(o.stdout.contains(needle), "{needle} missing from:\n{}", o.stdout);
    }
    assert!(m.home().join(".local/share/keepsake/install-receipt.json").is_file());

    // Twice: harmless, nothing changes.
    let after_first = m.listing();
    let o = sh(&["--no-build"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("unchanged"), "{}", o.stdout);
    assert_eq!(m.listing(), after_first);

    let o = sh(&["--uninstall"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains(&file.display().to_string()), "{}", o.stdout);
    assert_eq!(m.listing(), before, "install.sh --uninstall left files behind");
}
