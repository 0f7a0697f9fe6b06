//! Test harness: spawn the real `keepsake-host` binary on a temp database and talk to it over
//! real pipes with real frames. Used by every black-box test file.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_keepsake-host");
/// The origin argument Chrome passes (any well-formed one; origin checks arrive later).
pub const ORIGIN: &str = "chrome-extension://abcdefghijklmnopabcdefghijklmnop/";
pub const MAX_FRAME: usize = 1_048_576;

/// What the reader thread saw on the host's stdout.
#[derive(Debug)]
pub enum Incoming {
    /// One frame body, parsed.
    Frame(Value, usize),
    /// stdout closed.
    Closed,
    /// Bytes that were not a valid frame (a protocol violation).
    Garbage(String),
}

pub struct Host {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Incoming>,
    /// Events received while waiting for replies.
    pub events: VecDeque<Value>,
    /// Every frame size seen (bytes of JSON), for the 1 MiB assertion.
    pub frame_sizes: Vec<usize>,
    next_id: u64,
    pub db: PathBuf,
}

fn reader(mut out: ChildStdout, tx: mpsc::Sender<Incoming>) {
    loop {
        let mut len = [0u8; 4];
        if out.read_exact(&mut len).is_err() {
            let _ = tx.send(Incoming::Closed);
            return;
        }
        let n = u32::from_ne_bytes(len) as usize;
        if n > MAX_FRAME {
            let _ = tx.send(Incoming::Garbage(format!("frame of {n} bytes")));
            return;
        }
        let mut body = vec![0u8; n];
        if out.read_exact(&mut body).is_err() {
            let _ = tx.send(Incoming::Garbage("truncated frame".into()));
            return;
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) => {
                if tx.send(Incoming::Frame(v, n)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Incoming::Garbage(format!("invalid JSON frame: {e}")));
                return;
            }
        }
    }
}

/// A temp directory holding the database (kept alive by the returned guard).
pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("data").join("keepsake.db");
    (dir, db)
}

impl Host {
    /// Spawn as the browser does: argv[1] = origin, database from `KEEPSAKE_DB`.
    pub fn spawn(db: &Path) -> Host {
        Self::spawn_with(db, &[ORIGIN], &[])
    }

    pub fn spawn_with(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Host {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("KEEPSAKE_DB", db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn keepsake-host");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || reader(stdout, tx));
        Host {
            stdin: child.stdin.take(),
            child,
            rx,
            events: VecDeque::new(),
            frame_sizes: Vec::new(),
            next_id: 1,
            db: db.to_path_buf(),
        }
    }

    pub fn write_raw(&mut self, bytes: &[u8]) {
        let s = self.stdin.as_mut().expect("stdin open");
        let _ = s.write_all(bytes);
        let _ = s.flush();
    }

    pub fn send_frame(&mut self, body: &[u8]) {
        let mut buf = (body.len() as u32).to_ne_bytes().to_vec();
        buf.extend_from_slice(body);
        self.write_raw(&buf);
    }

    pub fn send(&mut self, v: &Value) {
        self.send_frame(v.to_string().as_bytes());
    }

    /// Next incoming frame (any kind) within `timeout`.
    pub fn recv_raw(&mut self, timeout: Duration) -> Option<Value> {
        match self.rx.recv_timeout(timeout) {
            Ok(Incoming::Frame(v, n)) => {
                self.frame_sizes.push(n);
                Some(v)
            }
            Ok(Incoming::Closed) | Err(RecvTimeoutError::Disconnected) => None,
            Ok(Incoming::Garbage(g)) => panic!("host wrote a non-frame to stdout: {g}"),
            Err(RecvTimeoutError::Timeout) => None,
        }
    }

    /// Wait for the reply to `id`, reassembling chunks; events seen meanwhile are queued.
    pub fn reply_for(&mut self, id: &Value, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        let mut chunks: Vec<String> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.recv_raw(left).unwrap_or_else(|| panic!("no reply to {id} within {timeout:?}"));
            if v.get("event").is_some() {
                self.events.push_back(v);
                continue;
            }
            if &v["id"] != id {
                panic!("reply for unexpected id {} while waiting for {id}: {v}", v["id"]);
            }
            if let Some(c) = v.get("chunk") {
                assert_eq!(c["index"].as_u64().unwrap() as usize, chunks.len(), "chunk order");
                chunks.push(v["data"].as_str().expect("chunk data").to_owned());
                if chunks.len() == c["count"].as_u64().unwrap() as usize {
                    return serde_json::from_str(&chunks.concat()).expect("reassembled reply parses");
                }
                continue;
            }
            return v;
        }
    }

    /// Send `{id, op, args}` and return the whole reply envelope.
    pub fn call(&mut self, op: &str, args: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"id": id, "op": op, "args": args}));
        self.reply_for(&id, Duration::from_secs(60))
    }

    /// Call and expect success; returns `result`.
    pub fn ok(&mut self, op: &str, args: Value) -> Value {
        let r = self.call(op, args.clone());
        assert_eq!(r["ok"], json!(true), "{op} {args} failed: {r}");
        r["result"].clone()
    }

    /// Call and expect failure; returns the error code.
    pub fn err(&mut self, op: &str, args: Value) -> String {
        let r = self.call(op, args.clone());
        assert_eq!(r["ok"], json!(false), "{op} {args} unexpectedly succeeded: {r}");
        r["error"]["code"].as_str().expect("error code").to_owned()
    }

    /// Wait up to `timeout` for an event matching `pred` (checking queued ones first).
    pub fn wait_event(&mut self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        if let Some(pos) = self.events.iter().position(&pred) {
            return self.events.remove(pos);
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv_raw(left) {
                Some(v) if v.get("event").is_some() => {
                    if pred(&v) {
                        return Some(v);
                    }
                    self.events.push_back(v);
                }
                Some(v) => panic!("unexpected reply while waiting for an event: {v}"),
                None => return None,
            }
        }
        None
    }

    /// Drain frames for `d` (events go to the queue).
    pub fn settle(&mut self, d: Duration) {
        let deadline = Instant::now() + d;
        while let Some(v) = self.recv_raw(deadline.saturating_duration_since(Instant::now())) {
            if v.get("event").is_some() {
                self.events.push_back(v);
            } else {
                panic!("unexpected reply: {v}");
            }
        }
    }

    /// Close stdin and wait for exit; returns (exit code, time to exit).
    pub fn close(mut self) -> (Option<i32>, Duration) {
        drop(self.stdin.take());
        let t = Instant::now();
        let deadline = t + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return (st.code(), t.elapsed());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("host did not exit within 10 s of stdin closing");
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// The stdin handle closed without waiting.
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run the CLI with `--db` and return (exit code, stdout, stderr).
pub fn cli(db: &Path, args: &[&str]) -> (i32, String, String) {
    // browser checks (doctor) look at HOME and the system folders: keep them inside the test's dir
    let home_dir = tempfile::tempdir().expect("temp home");
    let home = home_dir.path();
    let out = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("KEEPSAKE_SYSTEM_ROOT", home.join("sysroot"))
        .output()
        .expect("run keepsake-host CLI");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Open the database directly (read-only) to prove what is stored.
pub fn sql(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open db")
}

pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// A small valid PNG (w×h, one colour) as bytes, generated by the image crate.
pub fn png_bytes(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([seed, (x % 256) as u8, (y % 256) as u8]));
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
    out
}

pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    use base64::Engine;
    format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

pub fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

pub fn text_part(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Generous wait for an event that must arrive.
const EVENT_WAIT_COMMON: Duration = Duration::from_secs(15);

fn change_seq(h: &mut Host) -> i64 {
    h.ok("history.meta", json!({}))["changeSeq"].as_i64().expect("changeSeq number")
}

fn change_log_rows(db: &Path) -> i64 {
    sql(db).query_row("SELECT count(*) FROM changes", [], |r| r.get(0)).expect("count changes")
}

/// A real write: its reply arrives first, then a `changed` event carrying the new changeSeq.
pub fn changed(h: &mut Host, op: &str, args: Value) -> (Value, Value) {
    let before = change_seq(h);
    let r = h.ok(op, args.clone());
    let early: Vec<Value> = h.events.iter().map(|e| e["seq"].clone()).collect();
    let now = change_seq(h);
    assert!(now > before, "{op} {args}: changeSeq did not advance ({before} -> {now})");
    assert!(!early.contains(&json!(now)), "{op}: changed event arrived before its reply");
    let ev = h
        .wait_event(EVENT_WAIT_COMMON, |e| e["event"] == "changed" && e["seq"] == json!(now))
        .unwrap_or_else(|| panic!("{op}: no changed event with seq {now}"));
    (r, ev)
}

static MARKER: AtomicU64 = AtomicU64::new(0);

/// A settings write whose event is awaited; every event before it is discarded.
pub fn marker(h: &mut Host) {
    let n = MARKER.fetch_add(1, Ordering::SeqCst);
    let crid = format!("marker-{n}");
    h.ok("settings.set", json!({"map": {"test.marker": n}, "clientRequestId": crid}));
    let ev = h.wait_event(EVENT_WAIT_COMMON, |e| e["clientRequestId"] == json!(crid.as_str()));
    assert!(ev.is_some(), "marker event missing");
}

/// A write that must change nothing: no change row, no changeSeq bump, and no event between two
/// marker writes around it.
pub fn unchanged(h: &mut Host, op: &str, args: Value) -> Value {
    marker(h);
    h.events.clear();
    let seq_before = change_seq(h);
    let rows_before = change_log_rows(&h.db);
    let r = h.ok(op, args.clone());
    assert_eq!(change_seq(h), seq_before, "{op} {args}: changeSeq moved");
    assert_eq!(change_log_rows(&h.db), rows_before, "{op} {args}: a change was logged");
    marker(h);
    assert!(h.events.is_empty(), "{op} {args}: emitted an event: {:?}", h.events);
    r
}
