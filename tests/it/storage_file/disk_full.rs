//! T18 (reliability.md §9, §10): a full disk and failing output, three ways.
//!
//! - **page-count cap**: the host runs with `KEEPSAKE_MAX_PAGE_COUNT` a few pages above the
//!   database's size (SQLite answers `SQLITE_FULL`, as on a full disk);
//! - **`RLIMIT_FSIZE`**: the host runs under a file-size limit a little above the database's
//!   size (`harness::limit_file_size`: set in `pre_exec`, with `SIGXFSZ` ignored so an oversized write fails with `EFBIG`
//!   instead of killing the process): the WAL cannot grow past it;
//! - **stdout on `/dev/full`**: every reply fails to write (`ENOSPC`).
//!
//! Each run writes settings (each acknowledged with its own `clientRequestId`) until the writes
//! fail, then reads. Pass: no panic, the host exits 0, every write error is a typed error frame,
//! every read after the failures is served, `integrity_check` is ok on reopen, and every
//! acknowledged write is there. `/dev/full`: the host exits promptly, and a retry of its write
//! with the same `clientRequestId` elsewhere applies it at most once.
//!
//! Runs per scenario: 100 in CI (`KEEPSAKE_T18_RUNS`, 300 under `KEEPSAKE_LONG=1`).
use crate::harness::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn runs() -> usize {
    size("KEEPSAKE_T18_RUNS", 100, 300)
}

/// A populated database after a clean close: a few sessions and settings.
fn template() -> Vec<u8> {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    for s in 0..4 {
        let entries: Vec<Value> =
            (0..12).map(|e| user(&format!("s{s} e{e} {}", "lorem ipsum ".repeat(20)))).collect();
        h.ok("history.replace", json!({"entries": entries}));
        h.ok("sessions.save", json!({"name": format!("session {s}")}));
    }
    for i in 0..10 {
        h.ok("settings.set", json!({"map": {format!("base.{i}"): i}}));
    }
    assert_eq!(h.close().0, Some(0));
    std::fs::read(&db).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Scenario {
    PageCap,
    FileSize,
    DevFull,
}

#[derive(Default)]
struct Run {
    acked: BTreeMap<String, usize>,
    write_errors: BTreeMap<String, usize>,
    sample_error: Option<String>,
    reads: usize,
    reads_ok: usize,
    failures: Vec<String>,
    panics: usize,
}

fn stderr_file(dir: &Path) -> std::fs::File {
    std::fs::File::create(dir.join("stderr.txt")).unwrap()
}

fn panics_in(db: &Path) -> usize {
    let dir = db.parent().unwrap();
    std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default().matches("panicked").count()
        + panics_logged(db)
}

fn value_of(i: usize) -> String {
    format!("{i}:{}", "v".repeat(1500 + (i * 37) % 3000))
}

/// Write until three writes in a row fail (or 300 writes), then read.
fn fill_and_read(h: &mut Host, run: usize, o: &mut Run) {
    let mut failed_in_a_row = 0;
    let mut j = 0;
    while failed_in_a_row < 3 && j < 300 {
        let key = format!("w{run}.{j}");
        let r = h.call(
            "settings.set",
            json!({"map": {key.clone(): value_of(j)}, "clientRequestId": format!("c{run}.{j}")}),
        );
        if r["ok"] == json!(true) {
            o.acked.insert(key, j);
            failed_in_a_row = 0;
        } else {
            failed_in_a_row += 1;
            let code = r["error"]["code"].as_str().unwrap_or("").to_owned();
            let msg = r["error"]["message"].as_str().unwrap_or("");
            if code.is_empty() || msg.contains("bug") {
                o.failures.push(format!("run {run}: write {j} failed untyped: {r}"));
            }
            *o.write_errors.entry(code).or_default() += 1;
            if o.sample_error.is_none() {
                o.sample_error = Some(msg.to_owned());
            }
        }
        j += 1;
    }
    if o.write_errors.is_empty() {
        o.failures.push(format!("run {run}: {j} writes and none failed: the limit did not bite"));
    }
    // reads keep working
    let keys: Vec<String> = o.acked.keys().cloned().collect();
    let reads = [
        ("history.meta", json!({})),
        ("history.get", json!({})),
        ("sessions.list", json!({})),
        (
            "settings.get",
            json!({"keys": if keys.is_empty() { vec!["base.0".to_owned()] } else { keys.clone() }}),
        ),
        ("changes.since", json!({"seq": 0})),
    ];
    for (op, args) in reads {
        o.reads += 1;
        let r = h.call(op, args.clone());
        if r["ok"] == json!(true) {
            o.reads_ok += 1;
            if op == "settings.get"
                && !keys.is_empty()
                && r["result"].as_object().map(|m| m.len()) != Some(keys.len())
            {
                o.failures.push(format!("run {run}: settings.get lost acknowledged keys: {}", r["result"]));
            }
        } else {
            o.failures.push(format!("run {run}: read {op} failed after the disk filled: {r}"));
        }
    }
}

/// Reopen without limits: integrity ok and every acknowledged write present.
fn verify(db: &Path, run: usize, o: &mut Run) {
    let ok = integrity(db);
    if ok != "ok" {
        o.failures.push(format!("run {run}: integrity_check after reopen: {ok}"));
        return;
    }
    let c = sql(db);
    for (k, j) in &o.acked {
        let v: Option<String> =
            c.query_row("SELECT value FROM settings WHERE key = ?1", [k], |r| r.get(0)).ok();
        if v != Some(json!(value_of(*j)).to_string()) {
            o.failures.push(format!("run {run}: acknowledged {k} lost"));
        }
    }
}

fn fresh_db(tpl: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let (d, db) = temp_db();
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::write(&db, tpl).unwrap();
    (d, db)
}

fn page_cap(tpl: &[u8], run: usize) -> Run {
    let mut o = Run::default();
    let (_d, db) = fresh_db(tpl);
    let pages = tpl.len() / 4096;
    let cap = (pages + 2 + run % 40).to_string();
    let err = stderr_file(db.parent().unwrap());
    let mut h = Host::spawn_configured(&db, |c| {
        c.env("KEEPSAKE_MAX_PAGE_COUNT", &cap).stderr(Stdio::from(err));
    });
    assert!(h.hello()["dbError"].is_null());
    fill_and_read(&mut h, run, &mut o);
    let (code, _) = h.close();
    if code != Some(0) {
        o.failures.push(format!("run {run}: exit {code:?}"));
    }
    o.panics = panics_in(&db);
    verify(&db, run, &mut o);
    // the database keeps working once space is back
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"after": run}}));
    assert_eq!(h.close().0, Some(0));
    o
}

fn file_size_limit(tpl: &[u8], run: usize) -> Run {
    let mut o = Run::default();
    let (_d, db) = fresh_db(tpl);
    // the WAL may grow to the limit: 24..~200 KiB of frames
    let limit = (tpl.len() + 24 * 1024 + (run % 40) * 4096) as u64;
    let err = stderr_file(db.parent().unwrap());
    let mut h = Host::spawn_configured(&db, |c| {
        c.stderr(Stdio::from(err));
        limit_file_size(c, limit);
    });
    let hello = h.hello();
    if !hello["dbError"].is_null() {
        o.failures.push(format!("run {run}: could not start under the limit: {hello}"));
        return o;
    }
    fill_and_read(&mut h, run, &mut o);
    let (code, _) = h.close();
    if code != Some(0) {
        o.failures.push(format!("run {run}: exit {code:?}"));
    }
    o.panics = panics_in(&db);
    verify(&db, run, &mut o);
    o
}

fn dev_full(tpl: &[u8], run: usize) -> Run {
    let mut o = Run::default();
    let (_d, db) = fresh_db(tpl);
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let err = stderr_file(db.parent().unwrap());
    let mut child = std::process::Command::new(BIN)
        .arg(ORIGIN)
        .env("KEEPSAKE_DB", &db)
        .stdin(Stdio::piped())
        .stdout(Stdio::from(full))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap();
    let crid = format!("full-{run}");
    let mut frames = Vec::new();
    for (i, (op, args)) in [
        ("settings.set", json!({"map": {"full": run}, "clientRequestId": crid})),
        ("history.get", json!({})),
        ("settings.set", json!({"map": {"full2": run}})),
    ]
    .iter()
    .enumerate()
    {
        let b = json!({"id": i, "op": op, "args": args}).to_string().into_bytes();
        frames.extend_from_slice(&(b.len() as u32).to_ne_bytes());
        frames.extend_from_slice(&b);
    }
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(&frames);
    }
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    match status {
        None => o.failures.push(format!("run {run}: the host kept running with stdout on /dev/full")),
        Some(s) if s.code().is_none() => o.failures.push(format!("run {run}: killed by a signal: {s:?}")),
        Some(_) => {}
    }
    o.panics = panics_in(&db);
    let ok = integrity(&db);
    if ok != "ok" {
        o.failures.push(format!("run {run}: integrity_check: {ok}"));
    }
    // the unacknowledged write, retried with the same id, applies at most once
    let mut h = Host::spawn(&db);
    o.reads += 1;
    let r = h.call("settings.set", json!({"map": {"full": run}, "clientRequestId": crid}));
    if r["ok"] == json!(true) {
        o.reads_ok += 1;
    } else {
        o.failures.push(format!("run {run}: retry failed: {r}"));
    }
    assert_eq!(h.close().0, Some(0));
    let n: i64 = sql(&db)
        .query_row("SELECT count(*) FROM client_requests WHERE client_request_id = ?1", [&crid], |r| r.get(0))
        .unwrap();
    if n != 1 {
        o.failures.push(format!("run {run}: clientRequestId recorded {n} times"));
    }
    o
}

#[test]
fn t18_disk_full_and_failing_output() {
    let started = Instant::now();
    let tpl = Arc::new(template());
    let n = runs();
    let jobs: Vec<(Scenario, usize)> = [Scenario::PageCap, Scenario::FileSize, Scenario::DevFull]
        .iter()
        .flat_map(|s| (0..n).map(move |i| (*s, i)))
        .collect();
    let jobs = Arc::new(jobs);
    let next = Arc::new(AtomicUsize::new(0));
    let results: Arc<Mutex<Vec<(Scenario, Run)>>> = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (tpl, jobs, next, results) = (tpl.clone(), jobs.clone(), next.clone(), results.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(s, run)) = jobs.get(i) else { return };
                let o = match s {
                    Scenario::PageCap => page_cap(&tpl, run),
                    Scenario::FileSize => file_size_limit(&tpl, run),
                    Scenario::DevFull => dev_full(&tpl, run),
                };
                results.lock().unwrap().push((s, o));
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let results = std::mem::take(&mut *results.lock().unwrap());
    let mut failures = Vec::new();
    let mut line = Vec::new();
    let (mut panics, mut acked, mut reads, mut reads_ok) = (0, 0, 0, 0);
    for s in [Scenario::PageCap, Scenario::FileSize, Scenario::DevFull] {
        let rs: Vec<&Run> = results.iter().filter(|(x, _)| *x == s).map(|(_, r)| r).collect();
        let mut codes: BTreeMap<String, usize> = BTreeMap::new();
        if let Some(m) = rs.iter().find_map(|r| r.sample_error.clone()) {
            eprintln!("T18 {s:?}: a write error reads: {m}");
        }
        for r in &rs {
            for (c, k) in &r.write_errors {
                *codes.entry(c.clone()).or_default() += k;
            }
            failures.extend(r.failures.iter().cloned());
            panics += r.panics;
            acked += r.acked.len();
            reads += r.reads;
            reads_ok += r.reads_ok;
        }
        let name = match s {
            Scenario::PageCap => "page-count cap",
            Scenario::FileSize => "RLIMIT_FSIZE",
            Scenario::DevFull => "stdout on /dev/full",
        };
        line.push(format!(
            "{name} {} runs (write errors {})",
            rs.len(),
            if codes.is_empty() { "none: replies cannot be written".into() } else { format!("{codes:?}") }
        ));
    }
    let lost = failures.iter().filter(|f| f.contains("lost")).count();
    let corrupt = failures.iter().filter(|f| f.contains("integrity")).count();
    eprintln!(
        "T18: {}; corruptions {corrupt}, panics {panics}, acked rows lost {lost} of {acked}, reads still served \
         {reads_ok}/{reads} ({:.0}%), {:.1} s",
        line.join(", "),
        100.0 * reads_ok as f64 / reads.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    assert_eq!(panics, 0);
}
