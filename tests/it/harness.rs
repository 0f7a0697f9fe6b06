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
/// The origin argument Chrome passes for the Keepsake extension (its built-in ID; the host refuses
/// any other caller, PROTOCOL.md "Caller check").
pub const ORIGIN: &str = "chrome-extension://ejaedcjldiggibmnammkkoekohjgefkk/";
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
        // API keys stay in the file unless a test asks for a secret store of its own
        // (tests/it/settings/secrets.rs): a developer's desktop keyring is never touched
        cmd.env("KEEPSAKE_SECRET_STORE", "off");
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

    /// Every row `sessions.list` has for `args` (`{query?}`), page after page (`limit` 7, so a
    /// list of a few rows crosses pages too); checks each page's `total` against the rows.
    pub fn list(&mut self, args: Value) -> Value {
        let mut rows = Vec::new();
        let mut total = None;
        let mut cursor = Value::Null;
        loop {
            let mut a = args.clone();
            a["limit"] = json!(7);
            a["cursor"] = cursor;
            let page = self.ok("sessions.list", a);
            let t = page["total"].as_u64().unwrap_or_else(|| panic!("no total: {page}"));
            assert!(total.is_none_or(|was| was == t), "total changed between pages: {page}");
            total = Some(t);
            let got = page["rows"].as_array().unwrap_or_else(|| panic!("no rows: {page}"));
            assert!(got.len() <= 7, "{page}");
            rows.extend(got.iter().cloned());
            cursor = page["cursor"].clone();
            if cursor.is_null() {
                break;
            }
            assert_eq!(got.len(), 7, "a page before the last is full: {page}");
        }
        assert_eq!(Some(rows.len() as u64), total, "total = rows of every page");
        Value::Array(rows)
    }

    /// `host.hello` and, when hello was answered before the database was opened (`dbOpened:
    /// false`), the `db` event that follows it merged in: what the extension's port knows once
    /// it reports itself open.
    pub fn hello(&mut self) -> Value {
        let r = self.hello_call();
        assert_eq!(r["ok"], json!(true), "host.hello failed: {r}");
        r["result"].clone()
    }

    /// [`Host::hello`]'s whole reply envelope (its `result` with the `db` event merged in).
    pub fn hello_call(&mut self) -> Value {
        let mut r = self.call("host.hello", json!({}));
        if r["ok"] == json!(true) && r["result"]["dbOpened"] == json!(false) {
            let ev = self
                .wait_event(Duration::from_secs(60), |e| e["event"] == "db")
                .unwrap_or_else(|| panic!("no db event after host.hello {r}"));
            for k in ["dbOpened", "schemaVersion", "dbError"] {
                r["result"][k] = ev[k].clone();
            }
        }
        r
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
        .env("KEEPSAKE_SECRET_STORE", "off")
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

// ---- pictures: the PNG writers every test uses ------------------------------------------------

/// A PNG of pseudo-random noise, `w`×`h` RGB, different for each `seed`. It does not compress:
/// the fast encoder falls back to stored blocks, so the file is `3·w·h + h` bytes of rows plus
/// a little framing (the size a test can count on).
pub fn noise_png(w: u32, h: u32, seed: u64) -> Vec<u8> {
    use image::ImageEncoder;
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut px = vec![0u8; (w * h * 3) as usize];
    for b in px.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
    }
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new_with_quality(
        &mut out,
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::NoFilter,
    )
    .write_image(&px, w, h, image::ExtendedColorType::Rgb8)
    .unwrap();
    out
}

/// A small valid PNG, `w`×`h` RGB (red `seed`, green and blue gradients): it compresses well.
pub fn png_bytes(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([seed, (x % 256) as u8, (y % 256) as u8]));
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
    out
}

/// A screenshot-like PNG, `w`×`h` RGBA: flat bands of colour (a page, which compresses to almost
/// nothing) with `noise_rows` rows of noise in the middle (photos and text that do not compress;
/// the fast deflate level stores noise at about 1.37× its size). Fast deflate, so debug builds
/// stay quick.
pub fn screenshot_png(w: u32, h: u32, noise_rows: u32, seed: u64) -> Vec<u8> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    use image::ImageEncoder;
    let row = (w * 4) as usize;
    let mut rgba = vec![0u8; row * h as usize];
    let mut rng = Rng::new(seed);
    let noise_rows = noise_rows.min(h);
    let top = (h - noise_rows) / 2;
    for y in 0..h {
        let line = &mut rgba[y as usize * row..(y as usize + 1) * row];
        if y >= top && y < top + noise_rows {
            for c in line.chunks_mut(8) {
                let v = rng.next_u64().to_le_bytes();
                c.copy_from_slice(&v[..c.len()]);
            }
            for px in line.chunks_mut(4) {
                px[3] = 255;
            }
        } else {
            let px = [((y / 64) as u8).wrapping_mul(20), 240 - (y / 128) as u8, 200, 255];
            for c in line.chunks_mut(4) {
                c.copy_from_slice(&px);
            }
        }
    }
    let mut out = Vec::new();
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Sub)
        .write_image(&rgba, w, h, image::ExtendedColorType::Rgba8)
        .expect("encode png");
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

// ---- reliability harness helpers (concurrency::crash, concurrency::simultaneous,
// storage_file::upgrades) -----------------------------------------------------------------------

/// What [`Host::recv_status`] saw.
#[derive(Debug)]
pub enum Recv {
    Frame(Value),
    /// stdout closed: the process exited or was killed.
    Closed,
    /// stdout ended inside a frame or carried a non-frame (e.g. the process was killed while
    /// writing a reply).
    Broken(String),
    Timeout,
}

impl Host {
    /// Next frame, telling a closed stdout (a dead host) apart from a timeout.
    pub fn recv_status(&mut self, timeout: Duration) -> Recv {
        match self.rx.recv_timeout(timeout) {
            Ok(Incoming::Frame(v, n)) => {
                self.frame_sizes.push(n);
                Recv::Frame(v)
            }
            Ok(Incoming::Closed) | Err(RecvTimeoutError::Disconnected) => Recv::Closed,
            Ok(Incoming::Garbage(g)) => Recv::Broken(g),
            Err(RecvTimeoutError::Timeout) => Recv::Timeout,
        }
    }

    /// Spawn as [`Host::spawn`] does, but the child waits at `gate` between fork and exec, so
    /// several hosts can be released to start on the same instant. Blocks until the gate
    /// opens (call from one thread per host; see [`StartGate`]).
    #[cfg(unix)]
    pub fn spawn_gated(db: &Path, gate: &StartGate) -> Host {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(BIN);
        cmd.arg(ORIGIN)
            .env("KEEPSAKE_DB", db)
            .env("KEEPSAKE_SECRET_STORE", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let (gate_r, gate_w, ready_w) = (gate.gate_r, gate.gate_w, gate.ready_w);
        // SAFETY: only async-signal-safe calls (close, write, read) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::close(gate_w);
                let one = [1u8];
                if libc::write(ready_w, one.as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                let mut b = [0u8; 1];
                // returns 0 (EOF) once the parent closed its write end: the gate is open
                while libc::read(gate_r, b.as_mut_ptr().cast(), 1) < 0 {
                    if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                        break;
                    }
                }
                Ok(())
            });
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
}

/// A start barrier for child processes: each child, between fork and exec, reports ready and
/// then blocks reading a pipe; [`StartGate::open_when_ready`] waits for every child and closes
/// the pipe's write end, which releases all of them at once. Gated groups run one at a time in
/// the test process (a child blocked at one gate holds inherited copies of another group's
/// pipe): [`StartGate::new`] waits while another gate exists.
#[cfg(unix)]
pub struct StartGate {
    gate_r: i32,
    gate_w: i32,
    ready_r: i32,
    ready_w: i32,
    released: std::sync::atomic::AtomicBool,
}

/// Set while a [`StartGate`] exists (one per test process at a time).
#[cfg(unix)]
static GATE_IN_USE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(unix)]
impl StartGate {
    pub fn new() -> StartGate {
        while GATE_IN_USE.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            thread::sleep(Duration::from_millis(10));
        }
        let mut g = [0i32; 2];
        let mut r = [0i32; 2];
        // SAFETY: plain pipe2 calls with valid out-arrays.
        unsafe {
            assert_eq!(libc::pipe2(g.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2");
            assert_eq!(libc::pipe2(r.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2");
        }
        StartGate {
            gate_r: g[0],
            gate_w: g[1],
            ready_r: r[0],
            ready_w: r[1],
            released: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Wait until `n` children stand at the gate (or `timeout` passes), then release them all.
    /// Returns how many were ready.
    pub fn open_when_ready(&self, n: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let mut ready = 0;
        while ready < n && Instant::now() < deadline {
            let mut pfd = libc::pollfd { fd: self.ready_r, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd; a read of at most 64 bytes into a 64-byte buffer.
            unsafe {
                if libc::poll(&mut pfd, 1, 50) > 0 {
                    let mut buf = [0u8; 64];
                    let k = libc::read(self.ready_r, buf.as_mut_ptr().cast(), (n - ready).min(64));
                    if k > 0 {
                        ready += k as usize;
                    }
                }
            }
        }
        self.release();
        ready
    }

    fn release(&self) {
        if !self.released.swap(true, Ordering::SeqCst) {
            // SAFETY: closing a descriptor this gate owns, once.
            unsafe { libc::close(self.gate_w) };
        }
    }
}

#[cfg(unix)]
impl Default for StartGate {
    fn default() -> Self {
        StartGate::new()
    }
}

#[cfg(unix)]
impl Drop for StartGate {
    fn drop(&mut self) {
        self.release();
        // SAFETY: closing descriptors this gate owns.
        unsafe {
            libc::close(self.gate_r);
            libc::close(self.ready_r);
            libc::close(self.ready_w);
        }
        GATE_IN_USE.store(false, Ordering::SeqCst);
    }
}

/// Tests that measure time or memory, or calibrate against measured timings, hold this lock so
/// they run one at a time, whichever test file they are in.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Take the lock of the measuring tests (see [`SERIAL`]); a test that panicked holding it does not
/// poison it for the others.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// `KEEPSAKE_LONG=1` selects a test's long size (reliability.md §10).
pub fn long_run() -> bool {
    std::env::var("KEEPSAKE_LONG").map(|v| !v.is_empty() && v != "0").unwrap_or(false)
}

/// A count from the environment (`name`), else `long` under `KEEPSAKE_LONG=1`, else `ci`.
pub fn size(name: &str, ci: usize, long: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(if long_run() { long } else { ci })
}

/// A small seeded xorshift generator (no `rand` dependency); the seed is printed by each test
/// and can be replayed with `KEEPSAKE_SEED`.
pub struct Rng(u64);

impl Rng {
    pub fn from_env() -> Rng {
        let seed = std::env::var("KEEPSAKE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
        Rng::new(seed)
    }

    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn seed(&self) -> u64 {
        self.0
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// `PRAGMA integrity_check` on a fresh read-write connection (a reopen: it recovers a WAL a
/// killed process left behind). Returns the rows joined, `"ok"` when healthy.
pub fn integrity(db: &Path) -> String {
    let c = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open db for integrity_check");
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    let mut st = c.prepare("PRAGMA integrity_check").unwrap();
    let rows: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    rows.join("; ")
}

/// A committed database fixture under `tests/fixtures/db/`.
pub fn db_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db").join(name)
}

/// Copy a database fixture to `dest` (creating its directory), mode 0600 like the host's files.
pub fn copy_db_fixture(name: &str, dest: &Path) {
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(db_fixture(name), dest).expect("copy fixture");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Raw processes (reliability tests T01–T06, T22): every stdout byte kept, exit and peak RSS from
// wait4, stderr captured.

/// What a [`RawHost`]'s stdout reader saw.
#[derive(Debug)]
pub enum RawOut {
    /// One frame: its body bytes (JSON), and when it arrived.
    Frame(Vec<u8>, Instant),
    /// stdout closed.
    Eof(Instant),
    /// Bytes that cannot be a frame (over 1 MiB, or not JSON); parsing stops, bytes are still kept.
    Garbage(String),
}

/// Parse JSON through `str::parse`, which runs serde_json's own optimised parser instead of a
/// copy instantiated (unoptimised) in the test crate: 10× faster on the 140 MB replies of T05.
pub fn parse_json(bytes: &[u8]) -> Option<Value> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// How a [`RawHost`] ended.
#[derive(Debug, Clone)]
pub struct RawExit {
    /// Exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Peak resident set size over the whole life of the process (wait4's `ru_maxrss`, the
    /// same figure as `VmHWM`), KiB.
    pub max_rss_kib: i64,
    /// When the process was reaped.
    pub at: Instant,
    pub stderr: Vec<u8>,
}

/// The host binary spawned with pipes, without the [`Host`] harness' parsing: every byte of
/// stdout is recorded in `stdout_bytes`; the process is reaped with wait4 to read its peak RSS.
pub struct RawHost {
    pub pid: i32,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    pub rx: Receiver<RawOut>,
    pub stdout_bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    stderr: Option<thread::JoinHandle<Vec<u8>>>,
    reaped: bool,
}

fn raw_reader(
    mut out: ChildStdout,
    tx: mpsc::Sender<RawOut>,
    all: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut parsing = true;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match out.read(&mut buf) {
            Ok(0) | Err(_) => {
                if parsing && !pending.is_empty() {
                    let _ = tx.send(RawOut::Garbage(format!("{} bytes after the last frame", pending.len())));
                }
                let _ = tx.send(RawOut::Eof(Instant::now()));
                return;
            }
            Ok(n) => n,
        };
        all.lock().unwrap().extend_from_slice(&buf[..n]);
        if !parsing {
            continue;
        }
        pending.extend_from_slice(&buf[..n]);
        let mut off = 0;
        while pending.len() - off >= 4 {
            let len = u32::from_ne_bytes(pending[off..off + 4].try_into().unwrap()) as usize;
            if len > MAX_FRAME {
                let _ = tx.send(RawOut::Garbage(format!("frame of {len} bytes")));
                parsing = false;
                break;
            }
            if pending.len() - off - 4 < len {
                break;
            }
            let body = pending[off + 4..off + 4 + len].to_vec();
            if parse_json(&body).is_none() {
                let _ = tx.send(RawOut::Garbage(format!("non-JSON frame of {len} bytes")));
                parsing = false;
                break;
            }
            let _ = tx.send(RawOut::Frame(body, Instant::now()));
            off += 4 + len;
        }
        pending.drain(..off.min(pending.len()));
    }
}

impl RawHost {
    /// Spawn `BIN args…` with `KEEPSAKE_DB=db` plus `env`.
    pub fn spawn(db: &Path, args: &[&str], env: &[(&str, &str)]) -> RawHost {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("KEEPSAKE_DB", db)
            .env("KEEPSAKE_SECRET_STORE", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn_cmd(cmd)
    }

    /// Spawn a prepared command (stdin, stdout and stderr are set to pipes here).
    pub fn spawn_cmd(mut cmd: Command) -> RawHost {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn keepsake-host");
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let all = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let all2 = all.clone();
        thread::spawn(move || raw_reader(out, tx, all2));
        let stderr = thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        RawHost {
            pid: child.id() as i32,
            stdin: child.stdin.take(),
            child: Some(child),
            rx,
            stdout_bytes: all,
            stderr: Some(stderr),
            reaped: false,
        }
    }

    /// Write bytes to stdin, ignoring a closed pipe (the host may already have left).
    pub fn write(&mut self, bytes: &[u8]) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = s.write_all(bytes);
            let _ = s.flush();
        }
    }

    /// Write one frame.
    pub fn send_frame(&mut self, body: &[u8]) {
        let mut b = (body.len() as u32).to_ne_bytes().to_vec();
        b.extend_from_slice(body);
        self.write(&b);
    }

    pub fn send(&mut self, v: &Value) {
        self.send_frame(v.to_string().as_bytes());
    }

    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Next item from stdout within `timeout`.
    pub fn next(&self, timeout: Duration) -> Option<RawOut> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Next frame parsed as JSON; `None` on EOF or timeout; panics on garbage.
    pub fn next_frame(&self, timeout: Duration) -> Option<(Value, usize)> {
        match self.next(timeout)? {
            RawOut::Frame(b, _) => Some((parse_json(&b).unwrap(), b.len())),
            RawOut::Eof(_) => None,
            RawOut::Garbage(g) => panic!("host wrote a non-frame to stdout: {g}"),
        }
    }

    /// Wait for the reply to `id` (events are returned in `events`), joining chunk frames; returns
    /// (the reply's exact JSON text, sizes of the frames that carried it).
    pub fn reply_text(&self, id: &Value, timeout: Duration, events: &mut Vec<Value>) -> (String, Vec<usize>) {
        let deadline = Instant::now() + timeout;
        let mut pieces: Vec<String> = Vec::new();
        let mut sizes = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (v, n) =
                self.next_frame(left).unwrap_or_else(|| panic!("no reply to {id} within {timeout:?}"));
            if v.get("event").is_some() {
                assert!(pieces.is_empty(), "an event between the chunks of one reply: {v}");
                events.push(v);
                continue;
            }
            assert_eq!(&v["id"], id, "a frame for another id while waiting for {id}: {v}");
            sizes.push(n);
            let Some(c) = v.get("chunk") else {
                assert!(pieces.is_empty(), "a whole reply between chunks: {v}");
                return (v.to_string(), sizes);
            };
            assert_eq!(c["index"].as_u64(), Some(pieces.len() as u64), "chunk order");
            pieces.push(v["data"].as_str().expect("chunk data").to_owned());
            if pieces.len() as u64 == c["count"].as_u64().expect("chunk count") {
                return (pieces.concat(), sizes);
            }
        }
    }

    /// Reap the process (waiting up to `timeout`, then SIGKILL and panic).
    pub fn wait(&mut self, timeout: Duration) -> RawExit {
        assert!(!self.reaped, "already reaped");
        let deadline = Instant::now() + timeout;
        loop {
            let mut status = 0;
            // SAFETY: a zeroed rusage is a valid out-parameter; pid is our own child.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut ru) };
            if r == self.pid {
                self.reaped = true;
                let at = Instant::now();
                drop(self.stdin.take());
                let stderr = self.stderr.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
                let (code, signal) = if libc::WIFEXITED(status) {
                    (Some(libc::WEXITSTATUS(status)), None)
                } else {
                    (None, libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)))
                };
                return RawExit { code, signal, max_rss_kib: ru.ru_maxrss, at, stderr };
            }
            assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
            if Instant::now() > deadline {
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
                panic!("host {} did not exit within {timeout:?}", self.pid);
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether the process has exited (without reaping it).
    pub fn alive(&self) -> bool {
        !self.reaped && Path::new(&format!("/proc/{}", self.pid)).exists() && !is_zombie(self.pid)
    }
}

impl Drop for RawHost {
    fn drop(&mut self) {
        if !self.reaped {
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(self.pid, &mut status, 0);
            }
        }
        // The Child was reaped by wait4 above; std must not wait on it again.
        if let Some(c) = self.child.take() {
            std::mem::forget(c);
        }
    }
}

/// `/proc/<pid>/stat` says the process is a zombie (exited, not yet reaped).
pub fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// Live (non-zombie) processes whose parent is `ppid`, whose command name is `keepsake-host`
/// and whose environment sets `KEEPSAKE_DB` to `db`: the hosts of the test that uses `db` (other
/// tests running in the same test process have host children of their own).
pub fn live_host_children(ppid: u32, db: &Path) -> Vec<i32> {
    use std::os::unix::ffi::OsStrExt;
    let mut want = b"KEEPSAKE_DB=".to_vec();
    want.extend_from_slice(db.as_os_str().as_bytes());
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let parent: u32 = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if parent != ppid || !comm.starts_with("keepsake-host") || state == "Z" {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        if environ.split(|b| *b == 0).any(|kv| kv == want.as_slice()) {
            out.push(pid);
        }
    }
    out
}

/// Every row of every table, rendered and sorted: equal fingerprints mean nothing was written.
pub fn db_fingerprint(db: &Path) -> Vec<String> {
    let c = sql(db);
    let tables: Vec<String> = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Vec::new();
    for t in tables {
        let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let mut rows: Vec<String> = st
            .query_map([], |r| {
                let mut s = format!("{t}:");
                for i in 0..n {
                    s.push_str(&format!("{:?}|", r.get_ref(i)?));
                }
                Ok(s)
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.push(format!("{t}: {} rows", rows.len()));
        out.extend(rows);
    }
    out
}

/// The `p` quantile (0..=1) of sorted durations.
pub fn quantile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Split a captured stdout into frames strictly; returns (frames, non-frame bytes).
pub fn split_frames(out: &[u8]) -> (Vec<Value>, usize) {
    let mut off = 0;
    let mut frames = Vec::new();
    while off < out.len() {
        if off + 4 > out.len() {
            return (frames, out.len() - off);
        }
        let n = u32::from_ne_bytes(out[off..off + 4].try_into().unwrap()) as usize;
        if n > MAX_FRAME || off + 4 + n > out.len() {
            return (frames, out.len() - off);
        }
        match parse_json(&out[off + 4..off + 4 + n]) {
            Some(v) if v.is_object() => frames.push(v),
            _ => return (frames, out.len() - off),
        }
        off += 4 + n;
    }
    (frames, 0)
}

// ---- corruption, disk-full and permission helpers (storage_file::corruption, disk_full,
// permissions) ---------------------------------------------------------------------------------

/// Limit the files `c`'s process may write to `limit` bytes (RLIMIT_FSIZE, set before exec),
/// with `SIGXFSZ` ignored so a write past it fails with `EFBIG` instead of killing the process:
/// the kernel refusing a write, as a full disk does.
pub fn limit_file_size(c: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
    let limit = limit as libc::rlim_t;
    // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
}

impl Host {
    /// Spawn as [`Host::spawn`] does, after `configure` adjusted the command (environment, a
    /// `pre_exec` umask or rlimit, another stderr).
    pub fn spawn_configured(db: &Path, configure: impl FnOnce(&mut Command)) -> Host {
        let mut cmd = Command::new(BIN);
        cmd.arg(ORIGIN)
            .env("KEEPSAKE_DB", db)
            .env("KEEPSAKE_SECRET_STORE", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        configure(&mut cmd);
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
}

/// Lines of the host log beside `db` that report a panic (the dispatcher logs "handler
/// panicked"; the default hook prints "panicked at" to stderr, which tests point at the log).
pub fn panics_logged(db: &Path) -> usize {
    let log = db.parent().unwrap().join("keepsake-host.log");
    std::fs::read_to_string(log).map(|s| s.lines().filter(|l| l.contains("panicked")).count()).unwrap_or(0)
}

// ---- image and compaction reliability helpers (images::thumbnails, requests::compaction) ------

/// The newest modification time of the files a `cargo build` of the host depends on (everything
/// under `src/`, `Cargo.toml`, `Cargo.lock`).
fn newest_source_mtime() -> Option<std::time::SystemTime> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut newest = None;
    let mut stack = vec![root.join("src")];
    let mut consider = |p: &Path| {
        if let Ok(t) = std::fs::metadata(p).and_then(|m| m.modified()) {
            if newest.is_none_or(|n| t > n) {
                newest = Some(t);
            }
        }
    };
    consider(&root.join("Cargo.toml"));
    consider(&root.join("Cargo.lock"));
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                consider(&p);
            }
        }
    }
    newest
}

/// The host binary to take timings from. `KEEPSAKE_HOST_BIN` wins (`debug` selects the debug
/// build, any other value is a path to an optimised one); else the release build
/// (`target/release/keepsake-host`, beside the debug `BIN`) when it exists and is newer than every
/// source file, so it runs the code under test; else the debug `BIN`. Returns (path, release?,
/// a note saying which and why).
pub fn timing_host_bin() -> (PathBuf, bool, String) {
    let debug = PathBuf::from(BIN);
    match std::env::var("KEEPSAKE_HOST_BIN").as_deref() {
        Ok("debug") => {
            return (debug, false, "debug build (KEEPSAKE_HOST_BIN=debug): timings not asserted".into())
        }
        Ok(p) if !p.is_empty() => return (PathBuf::from(p), true, format!("KEEPSAKE_HOST_BIN={p}")),
        _ => {}
    }
    let release = debug.parent().and_then(Path::parent).map(|t| t.join("release").join("keepsake-host"));
    let Some(release) = release.filter(|r| r.is_file()) else {
        return (debug, false, "debug build (no target/release/keepsake-host): timings not asserted".into());
    };
    let built = std::fs::metadata(&release).and_then(|m| m.modified()).ok();
    match (built, newest_source_mtime()) {
        (Some(b), Some(s)) if b >= s => (release, true, "release build".into()),
        _ => (
            debug,
            false,
            "debug build (target/release/keepsake-host is older than src/): timings not asserted".into(),
        ),
    }
}

impl Host {
    /// Spawn another build of the host (e.g. the release binary from [`timing_host_bin`]) as the
    /// browser does.
    pub fn spawn_bin(bin: &Path, db: &Path) -> Host {
        let mut cmd = Command::new(bin);
        cmd.arg(ORIGIN)
            .env("KEEPSAKE_DB", db)
            // as `spawn`: a developer's desktop keyring is never touched
            .env("KEEPSAKE_SECRET_STORE", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
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

    /// Peak resident set of the host since the last [`Host::reset_peak_rss`] (`VmHWM`), KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.child.id(), "VmHWM")
    }

    /// Current resident set of the host (`VmRSS`), KiB.
    pub fn rss_kib(&self) -> u64 {
        proc_status_kib(self.child.id(), "VmRSS")
    }

    /// Reset the host's `VmHWM` to its current RSS (`echo 5 > /proc/<pid>/clear_refs`); false
    /// where the kernel does not allow it.
    pub fn reset_peak_rss(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").is_ok()
    }
}

/// A `kB` field of `/proc/<pid>/status` (0 when absent).
pub fn proc_status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(&format!("{key}:")))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Entries (one, or a list) without the `entryId` stamps the host gives every stored entry, to
/// compare what was stored with what was sent.
pub fn bare(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(bare).collect()),
        Value::Object(o) => {
            let mut o = o.clone();
            o.remove("entryId");
            Value::Object(o)
        }
        other => other.clone(),
    }
}

/// `history.get`'s entries without their entryIds.
pub fn live(h: &mut Host) -> Value {
    bare(&h.ok("history.get", json!({}))["entries"])
}

/// A session's whole chosen path without entryIds.
pub fn body(h: &mut Host, id: &str) -> Value {
    bare(&h.ok("sessions.get", json!({"id": id}))["entries"])
}

/// The session the live history is kept in.
pub fn bound(h: &mut Host) -> String {
    h.ok("history.meta", json!({}))["activeSessionId"].as_str().expect("binding").to_owned()
}

/// An append's `{length, index}` without the auto-keep fields (`kept`, `evicted`).
pub fn placed(r: &Value) -> Value {
    json!({"length": r["length"], "index": r["index"]})
}
