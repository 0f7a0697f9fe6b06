//! Real Syncthing for the sync tests (Debian's `syncthing`; test.sh installs it): instances on
//! loopback, each with its own `--home`, its GUI/REST on 127.0.0.1 at a free port with an API
//! key, listening on 127.0.0.1 only, with global and local discovery, relays, NAT traversal,
//! usage reporting, crash reporting and upgrades off. Paired by device id through the REST
//! config API; one shared folder each. Everything waits on conditions (REST answers, completion,
//! files), never on fixed sleeps.
//!
//! Where `syncthing` is not installed the tests print "SKIPPED" and check nothing, unless
//! `KEEPSAKE_REQUIRE_SYNCTHING=1` (set by test.sh, which installs it) makes that a failure.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The folder id every test shares.
pub const FOLDER: &str = "keepsake-sync-test";

pub struct Syncthing {
    pub name: String,
    /// Its `--home` (config, keys, index, log); removed with it.
    _home: tempfile::TempDir,
    child: Child,
    pub gui: u16,
    pub listen: u16,
    api_key: String,
    pub id: String,
}

fn have(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

/// A free port on 127.0.0.1 (bound and released; Syncthing binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `syncthing --version`'s version word (`v1.19.2-ds1`), for the figures.
pub fn version() -> String {
    Command::new("syncthing")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_default()
}

/// Whether this run can use Syncthing; prints why not.
pub fn available() -> bool {
    if have("syncthing") {
        return true;
    }
    let why = "syncthing not found (apt-get install syncthing; ./test.sh installs it)";
    if std::env::var("KEEPSAKE_REQUIRE_SYNCTHING").as_deref() == Ok("1") {
        panic!("{why}");
    }
    eprintln!("SKIPPED (Syncthing test not run): {why}");
    false
}

fn set_tag(xml: &str, tag: &str, value: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let Some(a) = xml.find(&open) else { panic!("config.xml has no <{tag}>") };
    let b = a + xml[a..].find(&close).expect("closing tag");
    format!("{}{open}{value}{}", &xml[..a], &xml[b..])
}

/// Wait until `f` answers `Some`, up to `limit`; panics with `what` after that.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

impl Syncthing {
    /// Generate a home and start an instance.
    pub fn start(name: &str) -> Syncthing {
        let home = tempfile::tempdir().unwrap();
        let out = Command::new("syncthing")
            .args(["generate", "--no-default-folder", "--skip-port-probing"])
            .arg(format!("--home={}", home.path().display()))
            .env("HOME", home.path())
            .env("STNODEFAULTFOLDER", "1")
            .output()
            .expect("syncthing generate");
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let id = text
            .lines()
            .find_map(|l| l.split("Device ID: ").nth(1))
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|| panic!("no device id in `syncthing generate` output:\n{text}"));
        let (gui, listen) = (free_port(), free_port());
        let api_key = format!("keepsake-test-{}", uuid_ish());
        let cfg = home.path().join("config.xml");
        let mut xml = std::fs::read_to_string(&cfg).unwrap();
        xml =
            xml.replace("<address>127.0.0.1:8384</address>", &format!("<address>127.0.0.1:{gui}</address>"));
        for (tag, v) in [
            ("apikey", api_key.as_str()),
            ("listenAddress", &format!("tcp://127.0.0.1:{listen}")),
            ("globalAnnounceEnabled", "false"),
            ("localAnnounceEnabled", "false"),
            ("relaysEnabled", "false"),
            ("natEnabled", "false"),
            ("startBrowser", "false"),
            ("urAccepted", "-1"),
            ("autoUpgradeIntervalH", "0"),
            ("crashReportingEnabled", "false"),
        ] {
            xml = set_tag(&xml, tag, v);
        }
        std::fs::write(&cfg, xml).unwrap();
        let log = std::fs::File::create(home.path().join("syncthing.out")).unwrap();
        let child = Command::new("syncthing")
            .args(["serve", "--no-browser", "--no-restart", "--no-upgrade"])
            .arg(format!("--home={}", home.path().display()))
            .env("HOME", home.path())
            .env("STNOUPGRADE", "1")
            .env("STNODEFAULTFOLDER", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("syncthing serve");
        let log = home.path().join("syncthing.out");
        let s = Syncthing { name: name.into(), _home: home, child, gui, listen, api_key, id };
        let up = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(&format!("{name}'s REST API"), Duration::from_secs(60), || {
                s.rest("GET", "/rest/system/ping", None).ok().filter(|v| v["ping"] == "pong")
            })
        }));
        if up.is_err() {
            panic!("{name} did not start; its log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        s
    }

    /// A REST call; the JSON answer (or `null` for an empty one).
    pub fn rest(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let mut c = TcpStream::connect(("127.0.0.1", self.gui)).map_err(|e| e.to_string())?;
        c.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        // HTTP/1.0: the answer ends with the connection, never chunked
        let req = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nX-API-Key: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.gui,
            self.api_key,
            body.len()
        );
        c.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut resp = Vec::new();
        c.read_to_end(&mut resp).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&resp);
        let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP header")?;
        let status: u16 = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if !(200..300).contains(&status) {
            return Err(format!("{method} {path}: HTTP {status}: {body}"));
        }
        if body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(body).map_err(|e| format!("{method} {path}: {e}: {body}"))
    }

    fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        self.rest(method, path, body).unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// Know `other` (its id, its loopback address).
    pub fn add_device(&self, other: &Syncthing) {
        self.ok(
            "POST",
            "/rest/config/devices",
            Some(&json!({
                "deviceID": other.id,
                "name": other.name,
                "addresses": [format!("tcp://127.0.0.1:{}", other.listen)],
                "autoAcceptFolders": false,
            })),
        );
    }

    /// Share `path` as [`FOLDER`] with `other`: watched (1 s delay), rescanned every minute.
    pub fn share(&self, path: &Path, other: &Syncthing) {
        std::fs::create_dir_all(path).unwrap();
        // our own temp files are never worth sending (docs/sync.md recommends the same pattern)
        std::fs::write(path.join(".stignore"), "(?d).*.tmp\n").unwrap();
        self.ok(
            "POST",
            "/rest/config/folders",
            Some(&json!({
                "id": FOLDER,
                "label": "Keepsake",
                "path": path.display().to_string(),
                "type": "sendreceive",
                "devices": [{"deviceID": self.id}, {"deviceID": other.id}],
                "fsWatcherEnabled": true,
                "fsWatcherDelayS": 1,
                "rescanIntervalS": 60,
            })),
        );
    }

    /// Whether `other` is connected now.
    pub fn connected(&self, other: &Syncthing) -> bool {
        self.rest("GET", "/rest/system/connections", None)
            .ok()
            .is_some_and(|v| v["connections"][&other.id]["connected"] == json!(true))
    }

    /// How much of our folder `other` still needs (bytes), as we know it.
    pub fn need_bytes(&self, other: &Syncthing) -> Option<u64> {
        let v = self
            .rest("GET", &format!("/rest/db/completion?folder={FOLDER}&device={}", other.id), None)
            .ok()?;
        v["needBytes"].as_u64()
    }

    /// Stop talking to `other` (`/rest/system/pause`), and start again.
    pub fn pause(&self, other: &Syncthing) {
        self.ok("POST", &format!("/rest/system/pause?device={}", other.id), None);
    }
    pub fn resume(&self, other: &Syncthing) {
        self.ok("POST", &format!("/rest/system/resume?device={}", other.id), None);
    }
}

impl Drop for Syncthing {
    fn drop(&mut self) {
        let _ = self.rest("POST", "/rest/system/shutdown", None);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid_ish() -> String {
    format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos())
}

/// Two instances that know each other and share one folder each (`dir_a`, `dir_b`), connected.
pub fn pair(dir_a: &Path, dir_b: &Path) -> (Syncthing, Syncthing) {
    let a = Syncthing::start("device-a");
    let b = Syncthing::start("device-b");
    a.add_device(&b);
    b.add_device(&a);
    a.share(dir_a, &b);
    b.share(dir_b, &a);
    wait_for("the two Syncthing instances to connect", Duration::from_secs(120), || {
        (a.connected(&b) && b.connected(&a)).then_some(())
    });
    (a, b)
}

/// A file under `dir`, once it exists with these bytes.
pub fn arrived(path: &Path, bytes: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|b| b == bytes)
}
