//! T25 (reliability.md §10): the installers.
//!
//! - Lint: `shellcheck --enable=all` on `install.sh`, `tests/e2e/run.sh`, `packaging/deb/build.sh`
//!   and `tests/deb/run.sh`, `shfmt -d` on the same files, and PSScriptAnalyzer on `install.ps1` where `pwsh` and the module exist (a note
//!   otherwise). A missing shellcheck or shfmt is a failure, not a skip: `test.sh` installs both.
//! - `install.sh --no-build` twice into a throwaway machine (`HOME`, `XDG_CONFIG_HOME`,
//!   `KEEPSAKE_SYSTEM_ROOT` and the data folder all in a temp dir, as
//!   `tests/it/install/registration.rs` does), per user (every detected browser, then a
//!   `--user-data-dir` profile) and system-wide (under the temp system root): the second run
//!   changes no byte, mode or file; `keepsake-host doctor --json` (the installed copy) reports no
//!   failure; `install.sh --uninstall` leaves the temp machine exactly as it was (every path, mode
//!   and content compared).
//!
//! Prints `T25: lint findings 0, doctor failures 0, files left after uninstall 0, second install
//! identical` and its wall time.
use crate::harness::*;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

const MANIFEST: &str = "dev.keepsake.host.json";
/// Files larger than this are listed by size, inode and mtime (proves "not rewritten") instead of
/// being hashed: the debug host binary is ~180 MB.
const HASH_LIMIT: u64 = 1 << 20;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn output(c: &mut Command) -> Out {
    let o = c.output().unwrap_or_else(|e| panic!("run {c:?}: {e}"));
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Whether `program` can be started (`program --version`).
fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

// ---------------------------------------------------------------------------------------------
// lint

struct Lint {
    findings: usize,
    /// Linters that are not installed (their findings are unknown).
    missing: Vec<&'static str>,
    lines: Vec<String>,
    problems: Vec<String>,
}

const SHELL_SCRIPTS: [&str; 4] =
    ["install.sh", "tests/e2e/run.sh", "packaging/deb/build.sh", "tests/deb/run.sh"];

fn lint() -> Lint {
    let mut l = Lint { findings: 0, missing: Vec::new(), lines: Vec::new(), problems: Vec::new() };

    // shellcheck --enable=all
    if have("shellcheck") {
        let o = output(
            Command::new("shellcheck")
                .current_dir(repo())
                .args(["--enable=all", "-f", "json1"])
                .args(SHELL_SCRIPTS),
        );
        let doc: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| {
            panic!("shellcheck -f json1 printed no JSON ({e}): {}{}", o.stdout, o.stderr)
        });
        let comments = doc["comments"].as_array().cloned().unwrap_or_default();
        l.findings += comments.len();
        l.lines.push(format!(
            "shellcheck --enable=all {}: {} findings",
            SHELL_SCRIPTS.join(" "),
            comments.len()
        ));
        if !comments.is_empty() {
            let gcc = output(
                Command::new("shellcheck")
                    .current_dir(repo())
                    .args(["--enable=all", "-f", "gcc"])
                    .args(SHELL_SCRIPTS),
            );
            l.problems.push(format!(
                "shellcheck --enable=all found {} issues:\n{}",
                comments.len(),
                gcc.stdout
            ));
        }
    } else {
        l.missing.push("shellcheck");
        l.problems
            .push("shellcheck is not installed: `apt-get install shellcheck` (test.sh installs it)".into());
    }

    // shfmt -d
    if have("shfmt") {
        let o = output(Command::new("shfmt").current_dir(repo()).arg("-d").args(SHELL_SCRIPTS));
        let hunks = o.stdout.lines().filter(|line| line.starts_with("@@")).count();
        let findings = if o.code != 0 && hunks == 0 { 1 } else { hunks };
        l.findings += findings;
        l.lines.push(format!("shfmt -d {}: {findings} findings", SHELL_SCRIPTS.join(" ")));
        if o.code != 0 {
            l.problems.push(format!(
                "shfmt -d {} (exit {}):\n{}{}",
                SHELL_SCRIPTS.join(" "),
                o.code,
                o.stdout,
                o.stderr
            ));
        }
    } else {
        l.missing.push("shfmt");
        l.problems.push(
            "shfmt is not installed: add the Debian package `shfmt` to test.sh's apt-get list \
             (`apt-get install shfmt`); T25 lints install.sh with it"
                .into(),
        );
    }

    // PSScriptAnalyzer on install.ps1, where PowerShell and the module exist
    let ps1 = repo().join("install.ps1");
    if !ps1.is_file() {
        l.lines.push("install.ps1: absent".into());
    } else if !have("pwsh") {
        l.lines.push(
            "NOTE: PSScriptAnalyzer not available (no pwsh on this machine): install.ps1 not linted".into(),
        );
    } else {
        let script = format!(
            "if (Get-Module -ListAvailable -Name PSScriptAnalyzer) {{ \
               $r = Invoke-ScriptAnalyzer -Path '{}' -Severity Warning,Error; \
               $r | ForEach-Object {{ \"$($_.Line): $($_.RuleName): $($_.Message)\" }}; \
               \"count=$(@($r).Count)\" }} else {{ 'no-module' }}",
            ps1.display()
        );
        let o = output(Command::new("pwsh").args(["-NoProfile", "-NonInteractive", "-Command", &script]));
        if o.stdout.trim() == "no-module" {
            l.lines.push("NOTE: PSScriptAnalyzer not available (pwsh has no PSScriptAnalyzer module): install.ps1 not linted".into());
        } else {
            let n: usize = o
                .stdout
                .lines()
                .find_map(|line| line.strip_prefix("count="))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("PSScriptAnalyzer printed no count: {}{}", o.stdout, o.stderr));
            l.findings += n;
            l.lines.push(format!("PSScriptAnalyzer install.ps1: {n} findings"));
            if n > 0 {
                l.problems.push(format!("PSScriptAnalyzer install.ps1:\n{}", o.stdout));
            }
        }
    }
    l
}

// ---------------------------------------------------------------------------------------------
// a throwaway machine

/// `<tmp>/home` (HOME, `.config` as XDG_CONFIG_HOME), `<tmp>/root` (KEEPSAKE_SYSTEM_ROOT).
struct Machine {
    tmp: tempfile::TempDir,
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
    /// A browser's config folder (relative to XDG_CONFIG_HOME), as if it had run once.
    fn browser(&self, rel: &str) {
        let d = self.config().join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("Local State"), "{}").unwrap();
    }
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.config())
            .env("KEEPSAKE_SYSTEM_ROOT", self.root());
        c
    }
    /// `sh install.sh ARGS` with the built binary (`--no-build` takes KEEPSAKE_HOST_BIN).
    fn install_sh(&self, env: &[(&str, PathBuf)], args: &[&str]) -> Out {
        let mut c = self.command(Path::new("sh"));
        c.env("KEEPSAKE_HOST_BIN", BIN).arg(repo().join("install.sh")).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        output(&mut c)
    }
    /// Every path under the temp dir → kind, mode and content (hash, or size/inode/mtime for big
    /// files).
    fn listing(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(self.path(), self.path(), &mut out);
        out
    }
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let rel = p.strip_prefix(base).unwrap().display().to_string();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mode = m.permissions().mode() & 0o7777;
        if m.is_dir() {
            out.insert(format!("{rel}/"), format!("dir {mode:o}"));
            walk(base, &p, out);
        } else if m.file_type().is_symlink() {
            out.insert(rel, format!("symlink -> {}", std::fs::read_link(&p).unwrap().display()));
        } else if m.len() > HASH_LIMIT {
            out.insert(
                rel,
                format!(
                    "file {mode:o} {} bytes inode {} mtime {}.{}",
                    m.len(),
                    m.ino(),
                    m.mtime(),
                    m.mtime_nsec()
                ),
            );
        } else {
            out.insert(rel, format!("file {mode:o} {}", sha256_hex(&std::fs::read(&p).unwrap())));
        }
    }
}

/// Every `dev.keepsake.host.json` under `dir` with its bytes.
fn manifests(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == MANIFEST) {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(p, bytes);
            }
        }
    }
    out
}

/// What differs between two listings: `+ path` added, `- path` removed, `~ path` changed.
fn diff(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in after {
        match before.get(k) {
            None => d.push(format!("+ {k} ({v})")),
            Some(b) if b != v => d.push(format!("~ {k} ({b} → {v})")),
            _ => {}
        }
    }
    for k in before.keys() {
        if !after.contains_key(k) {
            d.push(format!("- {k}"));
        }
    }
    d
}

#[derive(Default)]
struct Figures {
    manifests: usize,
    doctor_checks: usize,
    doctor_failures: usize,
    files_left: usize,
    second_install_changes: usize,
    problems: Vec<String>,
}

/// One scenario: install.sh twice, doctor, uninstall.
fn scenario(
    name: &str,
    m: &Machine,
    env: &[(&str, PathBuf)],
    install_runs: &[&[&str]],
    uninstall: &[&str],
    host: &Path,
    f: &mut Figures,
) {
    let before = m.listing();

    // first install (every run of it: e.g. all browsers, then a profile)
    for args in install_runs {
        let o = m.install_sh(env, args);
        if o.code != 0 {
            f.problems
                .push(format!("{name}: install.sh {args:?} exited {}:\n{}{}", o.code, o.stdout, o.stderr));
            return;
        }
        // the throwaway machine's bin folder is not on PATH: install.sh says how to reach the
        // binary and names it by its full path in the commands it prints
        let doctor_line =
            o.stdout.lines().find(|l| l.contains("Check the setup any time with:")).unwrap_or("");
        if !o.stdout.contains("is not on your PATH yet")
            || !o.stdout.contains("export PATH=")
            || !doctor_line.trim_end().ends_with("/keepsake-host doctor")
        {
            f.problems.push(format!(
                "{name}: install.sh does not say how to reach keepsake-host off PATH:\n{}",
                o.stdout
            ));
        }
    }
    let first = m.listing();
    let first_manifests = manifests(m.path());
    if first_manifests.is_empty() {
        f.problems.push(format!("{name}: the install wrote no manifest"));
    }
    f.manifests += first_manifests.len();

    // second install: nothing may change
    for args in install_runs {
        let o = m.install_sh(env, args);
        if o.code != 0 {
            f.problems.push(format!(
                "{name}: second install.sh {args:?} exited {}:\n{}{}",
                o.code, o.stdout, o.stderr
            ));
            return;
        }
        if o.stdout.lines().any(|l| l.starts_with("wrote") || l.starts_with("installed")) {
            f.problems.push(format!("{name}: the second install.sh {args:?} wrote something:\n{}", o.stdout));
        }
    }
    let second = m.listing();
    let changes = diff(&first, &second);
    if manifests(m.path()) != first_manifests {
        f.second_install_changes += 1;
        f.problems.push(format!("{name}: a second install changed the manifests' bytes"));
    }
    if !changes.is_empty() {
        f.second_install_changes += changes.len();
        f.problems.push(format!("{name}: the second install changed files:\n  {}", changes.join("\n  ")));
    }

    // doctor --json, run by the installed copy
    let o = output(m.command(host).args(["doctor", "--json"]).envs(env.iter().map(|(k, v)| (*k, v))));
    match serde_json::from_str::<Value>(&o.stdout) {
        Ok(doc) => {
            let checks = doc["checks"].as_array().cloned().unwrap_or_default();
            let fails: Vec<&Value> = checks.iter().filter(|c| c["status"] == "fail").collect();
            f.doctor_checks += checks.len();
            f.doctor_failures += fails.len();
            if !fails.is_empty() || doc["ok"] != Value::Bool(true) || o.code != 0 {
                f.problems.push(format!("{name}: doctor --json (exit {}) failed: {doc:#}", o.code));
            }
            let ok_manifests =
                checks.iter().filter(|c| c["check"] == "manifest" && c["status"] == "ok").count();
            if ok_manifests != first_manifests.len() {
                f.problems.push(format!(
                    "{name}: doctor saw {ok_manifests} good manifests, the install wrote {}: {doc:#}",
                    first_manifests.len()
                ));
            }
        }
        Err(e) => {
            f.doctor_failures += 1;
            f.problems
                .push(format!("{name}: doctor --json printed no JSON ({e}):\n{}{}", o.stdout, o.stderr));
        }
    }
    if !diff(&second, &m.listing()).is_empty() {
        f.problems.push(format!("{name}: doctor changed files: {:?}", diff(&second, &m.listing())));
    }

    // uninstall: the machine is as it was
    let o = m.install_sh(env, uninstall);
    if o.code != 0 {
        f.problems
            .push(format!("{name}: install.sh {uninstall:?} exited {}:\n{}{}", o.code, o.stdout, o.stderr));
    }
    let left = diff(&before, &m.listing());
    f.files_left += left.len();
    if !left.is_empty() {
        f.problems.push(format!(
            "{name}: uninstall left {} differences:\n  {}",
            left.len(),
            left.join("\n  ")
        ));
    }
}

#[test]
fn t25_installers_lint_install_twice_doctor_uninstall() {
    let started = Instant::now();
    let l = lint();
    for line in &l.lines {
        eprintln!("T25 lint: {line}");
    }

    let mut f = Figures::default();

    // Per user: every detected browser, then one browser profile (`--user-data-dir`); the default
    // data folder (~/.local/share/keepsake), so its creation must be undone too.
    let m = Machine::new();
    for b in ["chromium", "google-chrome", "BraveSoftware/Brave-Browser", "microsoft-edge", "vivaldi"] {
        m.browser(b);
    }
    std::fs::create_dir_all(m.path().join("profiles")).unwrap();
    let profile = m.path().join("profiles/e2e");
    let profile_arg = profile.to_str().unwrap().to_owned();
    let host = m.home().join(".local/bin/keepsake-host");
    scenario(
        "per-user",
        &m,
        &[],
        &[&["--no-build"], &["--no-build", "--user-data-dir", &profile_arg]],
        &["--uninstall"],
        &host,
        &mut f,
    );

    // System-wide under the temp system root (Chrome and Edge appear installed).
    let m = Machine::new();
    std::fs::create_dir_all(m.root().join("opt/google/chrome")).unwrap();
    std::fs::create_dir_all(m.root().join("opt/microsoft/msedge")).unwrap();
    let bin_dir = m.root().join("usr/local/bin");
    let env = [("KEEPSAKE_BIN_DIR", bin_dir.clone()), ("KEEPSAKE_DB", m.path().join("data/keepsake.db"))];
    scenario(
        "system",
        &m,
        &env,
        &[&["--no-build", "--system"]],
        &["--uninstall", "--system"],
        &bin_dir.join("keepsake-host"),
        &mut f,
    );

    let lint_figure = if l.missing.is_empty() {
        l.findings.to_string()
    } else {
        format!("{} + unknown ({} not installed)", l.findings, l.missing.join(", "))
    };
    let identical = if f.second_install_changes == 0 { "identical" } else { "CHANGED" };
    eprintln!(
        "T25 installs: {} manifests written by the first installs (6 per user, 4 system), {} doctor checks",
        f.manifests, f.doctor_checks
    );
    eprintln!(
        "T25: lint findings {lint_figure}, doctor failures {}, files left after uninstall {}, second install {identical}; {:.1} s",
        f.doctor_failures,
        f.files_left,
        started.elapsed().as_secs_f64()
    );
    let mut problems = l.problems;
    problems.extend(f.problems);
    assert!(problems.is_empty(), "T25 failed:\n\n{}", problems.join("\n\n"));
    assert_eq!(
        f.manifests, 10,
        "manifests for 5 browsers, a profile and 4 system folders (Chrome, Chromium, Edge, Firefox)"
    );
}
