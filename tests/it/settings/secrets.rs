//! Provider API keys at rest (PROTOCOL.md "API keys"), for real: each test starts a D-Bus session
//! bus and GNOME Keyring of its own (Debian's `dbus-daemon`, `gnome-keyring`, and `secret-tool`
//! from `libsecret-tools` to look at what the keyring holds; test.sh installs them) and drives the
//! real binary over real pipes. Proven: a key set with `settings.set` is in the keyring and in no
//! file under the data folder (database, -wal, log, a backup, an export); `settings.get` and a
//! restarted host return it; a removed provider's key leaves the keyring; keys kept in the file
//! while no store was reachable move at the first start that reaches one; with no D-Bus session
//! the key stays in the file and `doctor`, `inspect` and `host.status` say so.
//!
//! Where those programs are not installed the keyring tests print "SKIPPED" with the reason and
//! check nothing, unless `KEEPSAKE_REQUIRE_KEYRING=1` (set by test.sh, which installs them) makes
//! that a failure. Once installed, a keyring that does not start is always a failure.
use crate::harness::*;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const SERVICE: &str = "dev.keepsake.host";

/// A D-Bus session bus and an unlocked GNOME Keyring, for one test; both end with it.
pub(crate) struct Keyring {
    dir: tempfile::TempDir,
    address: String,
    dbus: Child,
    daemon: Child,
}

fn have(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

impl Keyring {
    /// Start one. `None` (the test says so on stderr and checks nothing) only when a program it
    /// needs is not installed and the run did not ask for the keyring tests with
    /// `KEEPSAKE_REQUIRE_KEYRING=1` (test.sh installs the packages and sets it).
    pub(crate) fn start() -> Option<Keyring> {
        let missing: Vec<&str> =
            ["dbus-daemon", "gnome-keyring-daemon", "secret-tool"].into_iter().filter(|c| !have(c)).collect();
        if !missing.is_empty() {
            let why = format!(
                "cannot start a secret store for this test: {} not found (apt-get install dbus gnome-keyring \
                 libsecret-tools; ./test.sh installs them)",
                missing.join(", ")
            );
            if std::env::var("KEEPSAKE_REQUIRE_KEYRING").as_deref() == Ok("1") {
                panic!("{why}");
            }
            eprintln!("SKIPPED (keyring test not run): {why}");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["home/.local/share", "home/.config", "home/.cache", "run"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path().join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let bus = dir.path().join("run/bus");
        // a session bus with no service directories: nothing is started on demand, so a client
        // that asks for the Secret Service before our daemon owns the name gets an error (and
        // the probe below tries again) instead of a second, locked gnome-keyring-daemon
        let config = dir.path().join("session.conf");
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n<busconfig><type>session</type>\
                 <listen>unix:path={}</listen><auth>EXTERNAL</auth><policy context=\"default\">\
                 <allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/><allow own=\"*\"/>\
                 </policy></busconfig>\n",
                bus.display()
            ),
        )
        .unwrap();
        let mut dbus = Command::new("dbus-daemon")
            .args(["--nofork", "--print-address=1"])
            .arg(format!("--config-file={}", config.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        let mut line = String::new();
        let out = dbus.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut l = String::new();
            let _ = r.read_line(&mut l);
            let _ = tx.send(l);
            // keep the pipe open (and drained) while the daemon lives
            let mut sink = String::new();
            while r.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        if let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) {
            line = l;
        }
        let address = line.trim().to_owned();
        if address.is_empty() {
            let _ = dbus.kill();
            let _ = dbus.wait();
            panic!("dbus-daemon --session printed no address within 10 s");
        }
        let log = std::fs::File::create(dir.path().join("gnome-keyring.log")).unwrap();
        let mut daemon = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .envs(Self::env_in(dir.path(), &address))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start gnome-keyring-daemon");
        // the login keyring's password on stdin: created and unlocked without a prompt
        {
            let mut stdin = daemon.stdin.take().unwrap();
            stdin.write_all(b"keepsake-test-password").unwrap();
        }
        let kr = Keyring { dir, address, dbus, daemon };
        // ready once an item can be stored and read back
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if kr.store_raw("keepsake-probe", "probe", "ready")
                && kr.lookup_service("keepsake-probe", "probe").as_deref() == Some("ready")
            {
                kr.secret_tool(&["clear", "service", "keepsake-probe", "username", "probe"]);
                break;
            }
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(kr.dir.path().join("gnome-keyring.log")).unwrap_or_default();
                panic!("gnome-keyring-daemon did not serve the Secret Service within 20 s; its log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(kr)
    }

    fn env_in(dir: &Path, address: &str) -> Vec<(String, String)> {
        let home = dir.join("home");
        vec![
            ("HOME".into(), home.display().to_string()),
            ("XDG_DATA_HOME".into(), home.join(".local/share").display().to_string()),
            ("XDG_CONFIG_HOME".into(), home.join(".config").display().to_string()),
            ("XDG_CACHE_HOME".into(), home.join(".cache").display().to_string()),
            ("XDG_RUNTIME_DIR".into(), dir.join("run").display().to_string()),
            ("DBUS_SESSION_BUS_ADDRESS".into(), address.to_owned()),
        ]
    }

    /// The environment a host needs to use this keyring.
    pub(crate) fn host_env(&self) -> Vec<(String, String)> {
        let mut e = Self::env_in(self.dir.path(), &self.address);
        e.push(("KEEPSAKE_SECRET_STORE".into(), "os".into()));
        e
    }

    fn secret_tool(&self, args: &[&str]) -> std::process::Output {
        Command::new("secret-tool")
            .args(args)
            .envs(Self::env_in(self.dir.path(), &self.address))
            .stdin(Stdio::null())
            .output()
            .expect("run secret-tool")
    }

    fn store_raw(&self, service: &str, user: &str, secret: &str) -> bool {
        let mut c = Command::new("secret-tool")
            .args(["store", "--label=probe", "service", service, "username", user])
            .envs(Self::env_in(self.dir.path(), &self.address))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run secret-tool store");
        c.stdin.take().unwrap().write_all(secret.as_bytes()).unwrap();
        c.wait().map(|s| s.success()).unwrap_or(false)
    }

    fn lookup_service(&self, service: &str, user: &str) -> Option<String> {
        let o = self.secret_tool(&["lookup", "service", service, "username", user]);
        (o.status.success() && !o.stdout.is_empty()).then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The secret of a Keepsake account, as `secret-tool` finds it.
    fn lookup(&self, account: &str) -> Option<String> {
        self.lookup_service(SERVICE, account)
    }

    /// Every Keepsake item: (account, label, secret). `secret-tool search` prints each item's
    /// label and secret on stdout and its attributes on stderr, both in the same item order.
    pub(crate) fn items(&self) -> Vec<(String, String, String)> {
        let o = self.secret_tool(&["search", "--all", "--unlock", "service", SERVICE]);
        let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        let users: Vec<String> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("attribute.username = "))
            .map(str::to_owned)
            .collect();
        let mut blocks: Vec<(String, String)> = Vec::new();
        for l in stdout.lines() {
            if l.starts_with('[') {
                blocks.push(Default::default());
            } else if let (Some(b), Some(v)) = (blocks.last_mut(), l.strip_prefix("label = ")) {
                b.0 = v.to_owned();
            } else if let (Some(b), Some(v)) = (blocks.last_mut(), l.strip_prefix("secret = ")) {
                b.1 = v.to_owned();
            }
        }
        assert_eq!(users.len(), blocks.len(), "secret-tool search: stdout {stdout:?}, stderr {stderr:?}");
        let mut out: Vec<_> = users.into_iter().zip(blocks).map(|(u, (l, s))| (u, l, s)).collect();
        out.sort();
        out
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        for c in [&mut self.daemon, &mut self.dbus] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn env_refs(e: &[(String, String)]) -> Vec<(&str, &str)> {
    e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The CLI with this environment: (exit code, stdout, stderr).
pub(crate) fn cli_env(db: &Path, args: &[&str], env: &[(String, String)]) -> (i32, String, String) {
    cli_env_bin(Path::new(BIN), db, args, env)
}

/// [`cli_env`] with the binary `bin` (the release host of a figures test).
pub(crate) fn cli_env_bin(
    bin: &Path,
    db: &Path,
    args: &[&str],
    env: &[(String, String)],
) -> (i32, String, String) {
    let home = tempfile::tempdir().unwrap();
    let mut c = Command::new(bin);
    c.arg("--db").arg(db).args(args);
    c.env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("KEEPSAKE_SYSTEM_ROOT", home.path().join("sysroot"));
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run keepsake-host");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `dir` (recursively) whose raw bytes contain `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    hits.push(p);
                }
            }
        }
    }
    hits
}

fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(format!("{} ({} bytes)", p.display(), p.metadata().map(|m| m.len()).unwrap_or(0)));
            }
        }
    }
    out.sort();
    out
}

/// The `providers` value as the database file holds it.
fn stored_providers(db: &Path) -> Value {
    let raw: String =
        sql(db).query_row("SELECT value FROM settings WHERE key = 'providers'", [], |r| r.get(0)).unwrap();
    serde_json::from_str(&raw).unwrap()
}

fn card(id: &str, name: &str, key: &str) -> Value {
    json!({"id": id, "name": name, "kind": "chat", "baseUrl": format!("https://{id}.example/v1"), "apiKey": key, "model": "m"})
}

fn unique_key(tag: &str) -> String {
    format!("sk-{tag}-{}", uuid_like())
}

fn uuid_like() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{:x}{:x}", t, std::process::id())
}

#[test]
fn keys_set_through_the_host_live_in_the_keyring_and_in_no_file() {
    let Some(kr) = Keyring::start() else { return };
    let env = kr.host_env();
    let (dir, db) = temp_db();
    let data = db.parent().unwrap().to_path_buf();
    let key_a = unique_key("alpha");
    let key_b = unique_key("beta");
    let sent = json!([card("a", "Alpha", &key_a), card("b", "Beta", &key_b), card("c", "Local", "")]);

    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(&env));
    let r = h.ok("settings.set", json!({"map": {"providers": sent, "activeProvider": "a"}}));
    assert_eq!(r, json!({}), "keys in the keyring: the reply says nothing about the file");
    assert_eq!(
        h.ok("settings.get", json!({"keys": ["providers"]}))["providers"],
        sent,
        "settings.get returns the keys"
    );
    // something to back up and export besides the settings
    h.ok("history.append", json!({"entry": {"role": "user", "content": "hello keyring"}}));
    let sid = h.ok("history.meta", json!({}))["activeSessionId"].as_str().unwrap().to_owned();

    // no file under the data folder holds a key: database, -wal, -shm, log, a backup, an export
    // (the regression check: before the secret store, settings.set wrote the keys into the file)
    let backup = data.join("backup.db");
    let (code, out, err) = cli_env(&db, &["backup", backup.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("plain text"), "no warning when the keys are in the keyring: {err}");
    let export = data.join("export.json");
    let (code, _, err) =
        cli_env(&db, &["export", &sid, "--format", "json", "--out", export.to_str().unwrap()], &env);
    assert_eq!(code, 0, "{err}");
    assert!(sql(&backup).query_row("SELECT count(*) FROM settings", [], |r| r.get::<_, i64>(0)).unwrap() > 0);
    let wal = data.join("keepsake.db-wal");
    assert!(wal.exists() && wal.metadata().unwrap().len() > 0, "the host is running: its -wal is there");
    for k in [&key_a, &key_b] {
        let hits = files_holding(&data, k);
        assert!(hits.is_empty(), "{k} found in {hits:?}; files: {:#?}", listing(&data));
    }

    // the file holds references; the keyring holds the keys, under labels a person can read
    let stored = stored_providers(&db);
    let acct_a = stored[0]["apiKey"]["keyring"].as_str().expect("a reference for card a").to_owned();
    let acct_b = stored[1]["apiKey"]["keyring"].as_str().expect("a reference for card b").to_owned();
    assert_eq!(stored[2]["apiKey"], json!(""));
    assert_eq!(kr.lookup(&acct_a).as_deref(), Some(key_a.as_str()));
    assert_eq!(kr.lookup(&acct_b).as_deref(), Some(key_b.as_str()));
    let items = kr.items();
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(
        items.iter().any(|(u, l, _)| u == &acct_a && l.starts_with("Keepsake API key: Alpha (")),
        "{items:?}"
    );

    // inspect, host.status and doctor say where the keys are, and never print one
    let (code, text, _) = cli_env(&db, &["inspect"], &env);
    assert_eq!(code, 0);
    assert!(text.contains("api keys     2 API keys kept in the Secret Service"), "{text}");
    let (_, js, _) = cli_env(&db, &["inspect", "--json"], &env);
    let (_, doctor, _) = cli_env(&db, &["doctor", "--json"], &env);
    let status = h.ok("host.status", json!({}));
    assert_eq!(status["apiKeys"]["inSecretStore"], json!(2), "{status}");
    assert_eq!(status["apiKeys"]["inFile"], json!(0));
    let doctor: Value = serde_json::from_str(&doctor).unwrap();
    let check =
        doctor["checks"].as_array().unwrap().iter().find(|c| c["check"] == "api keys").unwrap().clone();
    assert_eq!(check["status"], json!("ok"), "{check}");
    assert_eq!(check["apiKeys"]["missing"], json!(0));
    for shown in [&text, &js, &doctor.to_string(), &status.to_string()] {
        assert!(!shown.contains(&key_a) && !shown.contains(&key_b), "a key was printed: {shown}");
    }

    // a restarted host (nothing cached) returns them
    h.close();
    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(&env));
    assert_eq!(h.ok("settings.get", json!({"keys": ["providers"]}))["providers"], sent);

    // Options saves the whole list again: the references stay, nothing new in the keyring
    h.ok("settings.set", json!({"map": {"providers": sent}}));
    assert_eq!(stored_providers(&db), stored);
    assert_eq!(kr.items().len(), 2);

    // a new key for card b: a new account, the old one leaves the keyring after the commit
    let key_b2 = unique_key("beta2");
    let next = json!([card("a", "Alpha", &key_a), card("b", "Beta", &key_b2), card("c", "Local", "")]);
    h.ok("settings.set", json!({"map": {"providers": next}}));
    let acct_b2 = stored_providers(&db)[1]["apiKey"]["keyring"].as_str().unwrap().to_owned();
    assert_ne!(acct_b2, acct_b);
    assert_eq!(kr.lookup(&acct_b2).as_deref(), Some(key_b2.as_str()));
    assert_eq!(kr.lookup(&acct_b), None, "the replaced key is gone from the keyring");

    // deleting provider a (Options writes the list without it): its key leaves the keyring
    let without_a = json!([card("b", "Beta", &key_b2), card("c", "Local", "")]);
    h.ok("settings.set", json!({"map": {"providers": without_a, "activeProvider": "b"}}));
    assert_eq!(kr.lookup(&acct_a), None, "a removed provider's key is removed");
    assert_eq!(h.ok("settings.get", json!({"keys": ["providers"]}))["providers"], without_a);
    // settings.remove of the whole setting: nothing of ours is left in the keyring
    h.ok("settings.remove", json!({"keys": ["providers"]}));
    assert_eq!(kr.items(), vec![], "every Keepsake item is gone");
    h.close();
    for k in [&key_a, &key_b, &key_b2] {
        assert!(files_holding(dir.path(), k).is_empty(), "{k} in a file: {:#?}", listing(dir.path()));
    }
}

#[test]
fn keys_kept_in_the_file_move_to_the_keyring_at_the_first_start_that_reaches_it() {
    let Some(kr) = Keyring::start() else { return };
    let (_dir, db) = temp_db();
    let data = db.parent().unwrap().to_path_buf();
    let key = unique_key("moved");
    let sent = json!([card("a", "Alpha", &key)]);

    // a host with no secret store keeps the key in the file, as before; backup warns
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"providers": sent}}));
    h.close();
    assert_eq!(stored_providers(&db), sent);
    let (code, _, err) = cli_env(&db, &["backup", data.join("before.db").to_str().unwrap()], &[]);
    assert_eq!(code, 0);
    assert!(err.contains("warning: the backup holds 1 API key in plain text"), "{err}");
    std::fs::remove_file(data.join("before.db")).unwrap();

    // the next start reaches the keyring: after its first reply the key moves
    let env = kr.host_env();
    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(&env));
    h.hello();
    let deadline = Instant::now() + Duration::from_secs(20);
    let account = loop {
        if let Some(a) = stored_providers(&db)[0]["apiKey"]["keyring"].as_str() {
            break a.to_owned();
        }
        assert!(Instant::now() < deadline, "the key did not move within 20 s: {}", stored_providers(&db));
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(kr.lookup(&account).as_deref(), Some(key.as_str()));
    assert_eq!(h.ok("settings.get", json!({"keys": ["providers"]}))["providers"], sent);
    // secure_delete and the -wal truncation: the text is gone from every file, even while the
    // host still runs
    let hits = files_holding(&data, &key);
    assert!(hits.is_empty(), "{key} still in {hits:?}; files: {:#?}", listing(&data));
    h.close();
    assert!(files_holding(&data, &key).is_empty());
    let (_, doctor, _) = cli_env(&db, &["doctor"], &env);
    assert!(doctor.contains("ok    api keys: 1 API key kept in the Secret Service"), "{doctor}");
}

#[test]
fn a_key_removed_from_the_keyring_by_hand_is_reported_not_lost_silently() {
    let Some(kr) = Keyring::start() else { return };
    let env = kr.host_env();
    let (_dir, db) = temp_db();
    let key = unique_key("gone");
    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(&env));
    h.ok("settings.set", json!({"map": {"providers": [card("a", "Alpha", &key), card("b", "Beta", "")]}}));
    h.close();
    let account = stored_providers(&db)[0]["apiKey"]["keyring"].as_str().unwrap().to_owned();
    let o = kr.secret_tool(&["clear", "service", SERVICE, "username", &account]);
    assert!(o.status.success());
    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(&env));
    let got = h.ok("settings.get", json!({"keys": ["providers"]}))["providers"].clone();
    assert_eq!(got[0]["apiKey"], json!(""));
    assert!(
        got[0]["apiKeyUnavailable"].as_str().unwrap().contains("no longer in the Secret Service"),
        "{got}"
    );
    // Options saving card b keeps card a's reference (it may come back, e.g. from a keyring backup)
    let mut back = got.clone();
    back[1]["model"] = json!("m2");
    h.ok("settings.set", json!({"map": {"providers": back}}));
    assert_eq!(stored_providers(&db)[0]["apiKey"]["keyring"], json!(account));
    h.close();
    let (code, doctor, _) = cli_env(&db, &["doctor"], &env);
    assert_ne!(code, 0, "{doctor}");
    assert!(
        doctor.contains("fail  api keys: 1 of the 1 API key referenced by the database is missing"),
        "{doctor}"
    );
}

#[test]
fn with_no_dbus_session_keys_stay_in_the_file_and_every_report_says_so() {
    // no keyring needed: a host asked to use the OS store, in an environment without a bus
    let runtime = tempfile::tempdir().unwrap();
    let env: Vec<(String, String)> = vec![
        ("KEEPSAKE_SECRET_STORE".into(), "os".into()),
        ("DBUS_SESSION_BUS_ADDRESS".into(), String::new()),
        ("XDG_RUNTIME_DIR".into(), runtime.path().display().to_string()),
    ];
    kept_in_the_file(&env, "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set");
}

#[test]
fn with_a_bus_address_that_leads_nowhere_keys_stay_in_the_file_and_every_report_says_so() {
    // the address is set (a desktop session that has gone away): connecting fails at once
    let runtime = tempfile::tempdir().unwrap();
    let nowhere = format!("unix:path={}", runtime.path().join("no-bus-here").display());
    let env: Vec<(String, String)> = vec![
        ("KEEPSAKE_SECRET_STORE".into(), "os".into()),
        ("DBUS_SESSION_BUS_ADDRESS".into(), nowhere),
        ("XDG_RUNTIME_DIR".into(), runtime.path().display().to_string()),
    ];
    kept_in_the_file(&env, "no secret service provider or dbus session found");
}

/// With no secret store reachable under `env`: a key set with `settings.set` stays in the file
/// (nothing lost: `settings.get` and a new host give it back), and `host.status`, `doctor`,
/// `inspect` and `backup` say so, with `reason` in the text, without printing the key.
fn kept_in_the_file(env: &[(String, String)], reason: &str) {
    let (_dir, db) = temp_db();
    let data = db.parent().unwrap().to_path_buf();
    let key = unique_key("headless");
    let sent = json!([card("a", "Alpha", &key)]);
    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(env));
    let r = h.ok("settings.set", json!({"map": {"providers": sent}}));
    // the write's own reply says the key went to the file, and why (Options says so at Save)
    assert_eq!(r["keysInFile"]["ids"], json!(["a"]), "{r}");
    assert!(r["keysInFile"]["secretStore"].as_str().is_some_and(|n| !n.is_empty()), "the store's name: {r}");
    assert!(r["keysInFile"]["reason"].as_str().is_some_and(|w| w.contains(reason)), "{r}");
    assert!(!r.to_string().contains(&key), "the reply never holds a key: {r}");
    assert_eq!(
        h.ok("settings.set", json!({"map": {"providers": sent}})),
        json!({}),
        "saved again: nothing new"
    );
    assert_eq!(h.ok("settings.get", json!({"keys": ["providers"]}))["providers"], sent);
    assert_eq!(stored_providers(&db), sent, "the key stays in the file, as before");
    let status = h.ok("host.status", json!({}));
    let summary = status["apiKeys"]["summary"].as_str().unwrap().to_owned();
    assert!(
        summary.starts_with("API keys are stored in the database file: no secret store reachable (")
            && summary.contains(reason),
        "{summary}"
    );
    assert_eq!(status["apiKeys"]["inFile"], json!(1));
    assert_eq!(status["apiKeys"]["secretStore"]["reachable"], json!(false));
    assert_eq!(status["apiKeys"]["status"], json!("warn"));
    assert!(!status.to_string().contains(&key));
    h.close();
    // nothing lost: a new host gives the key back
    let mut h = Host::spawn_with(&db, &[ORIGIN], &env_refs(env));
    assert_eq!(h.ok("settings.get", json!({"keys": ["providers"]}))["providers"], sent);
    h.close();

    let (code, doctor, _) = cli_env(&db, &["doctor"], env);
    assert_eq!(code, 0, "a warning, not a failure: {doctor}");
    assert!(
        doctor.contains(
            "warn  api keys: API keys are stored in the database file: no secret store reachable ("
        ) && doctor.contains(reason),
        "{doctor}"
    );
    let (_, inspect, _) = cli_env(&db, &["inspect"], env);
    assert!(inspect.contains("api keys     API keys are stored in the database file"), "{inspect}");
    let (_, inspect_json, _) = cli_env(&db, &["inspect", "--json"], env);
    for shown in [&doctor, &inspect, &inspect_json] {
        assert!(!shown.contains(&key), "a key was printed: {shown}");
    }
    let (code, out, err) = cli_env(&db, &["backup", data.join("b.db").to_str().unwrap()], env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("warning: the backup holds 1 API key in plain text"), "{err}");
    // the import preview masks it
    let (_, preview, _) = {
        let doc = data.join("doc.json");
        std::fs::write(&doc, json!({"providers": sent}).to_string()).unwrap();
        cli_env(&db, &["import", "--preview", doc.to_str().unwrap()], env)
    };
    assert!(preview.contains("••••") && !preview.contains(&key), "{preview}");
}
