//! Several host processes on one database (reliability.md §3, T14, T15; storage-model §2.8):
//! concurrent writers lose nothing and surface no `busy`, simultaneous first starts all succeed,
//! change sequence numbers are unique and announced once per port.
use crate::harness::*;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const WRITERS: usize = 4;
const PER_WRITER: usize = 150;
/// reliability.md T15: the -wal file stays under 16 MiB.
const MAX_WAL: u64 = 16 * 1024 * 1024;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn text_of(crid: &str) -> String {
    format!("text of {crid}")
}

/// (seq, client_request_id) of every change row, in seq order.
fn change_rows(db: &Path) -> Vec<(i64, Option<String>)> {
    let c = sql(db);
    let mut st = c.prepare("SELECT seq, client_request_id FROM changes ORDER BY seq").unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

struct WriterRun {
    host: Host,
    latencies: Vec<Duration>,
    failures: Vec<Value>,
    /// crid → result of each acknowledged write.
    acks: Vec<(String, Value)>,
}

/// Run `WRITERS` hosts at once, each calling `op` `PER_WRITER` times with `args(p, n, crid)`,
/// while a reader host streams `history.get` and a sampler watches the -wal size.
fn run_writers(
    db: &Path,
    op: &'static str,
    args: fn(usize, usize, &str, &str) -> Value,
    target: &str,
) -> (Vec<WriterRun>, Host, u64, usize) {
    let hosts: Vec<Host> = (0..WRITERS).map(|_| Host::spawn(db)).collect();
    let barrier = Arc::new(Barrier::new(WRITERS + 1));
    let done = Arc::new(AtomicBool::new(false));
    let max_wal = Arc::new(AtomicU64::new(0));
    let wal = db.with_file_name("keepsake.db-wal");
    let sampler = {
        let done = done.clone();
        let max_wal = max_wal.clone();
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok(m) = std::fs::metadata(&wal) {
                    max_wal.fetch_max(m.len(), Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let reader = {
        let done = done.clone();
        let barrier = barrier.clone();
        let db = db.to_path_buf();
        thread::spawn(move || {
            let mut h = Host::spawn(&db);
            h.hello();
            barrier.wait();
            let mut reads = 0usize;
            while !done.load(Ordering::Relaxed) {
                let r = h.call("history.get", json!({"images": "ref"}));
                assert_eq!(r["ok"], json!(true), "reader failed during the writes: {r}");
                let len = r["result"]["entries"].as_array().unwrap().len();
                assert!(len <= 60, "live history over 60 entries: {len}");
                assert_eq!(r["result"]["length"], json!(len));
                reads += 1;
            }
            (h, reads)
        })
    };
    let target = target.to_owned();
    let handles: Vec<_> = hosts
        .into_iter()
        .enumerate()
        .map(|(p, mut h)| {
            let barrier = barrier.clone();
            let target = target.clone();
            thread::spawn(move || {
                let hello = h.hello();
                assert!(hello["dbError"].is_null(), "{hello}");
                barrier.wait();
                let mut run =
                    WriterRun { host: h, latencies: Vec::new(), failures: Vec::new(), acks: Vec::new() };
                for n in 0..PER_WRITER {
                    let crid = format!("c-{p}-{n:03}");
                    let t = Instant::now();
                    let r = run.host.call(op, args(p, n, &crid, &target));
                    run.latencies.push(t.elapsed());
                    if r["ok"] == json!(true) {
                        run.acks.push((crid, r["result"].clone()));
                    } else {
                        run.failures.push(r);
                    }
                }
                run
            })
        })
        .collect();
    let t0 = Instant::now();
    let runs: Vec<WriterRun> = handles.into_iter().map(|h| h.join().expect("writer thread")).collect();
    let wall = t0.elapsed();
    done.store(true, Ordering::Relaxed);
    let (reader_host, reads) = reader.join().expect("reader thread");
    sampler.join().unwrap();
    eprintln!(
        "{op}: {} writes by {WRITERS} processes in {wall:?}; reader did {reads} history.get meanwhile",
        WRITERS * PER_WRITER
    );
    (runs, reader_host, max_wal.load(Ordering::Relaxed), reads)
}

fn report_latency(runs: &[WriterRun]) {
    let mut all: Vec<Duration> = runs.iter().flat_map(|r| r.latencies.iter().copied()).collect();
    all.sort();
    eprintln!(
        "latency: p50 {:?}, p99 {:?}, max {:?}",
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.last().unwrap()
    );
}

/// Every port hears every committed write exactly once; each writer's own events come in
/// strictly increasing seq order and match the change log.
fn check_events(hosts: &mut [&mut Host], seq_of: &HashMap<String, i64>) -> Vec<String> {
    let mut problems = Vec::new();
    let expected: BTreeSet<i64> = seq_of.values().copied().collect();
    for (i, h) in hosts.iter_mut().enumerate() {
        // The first wait covers every port's poller (they all ran meanwhile).
        h.settle(Duration::from_millis(if i == 0 { 1500 } else { 100 }));
        let mut count: BTreeMap<i64, usize> = BTreeMap::new();
        let mut out_of_order = 0;
        let mut last = i64::MIN;
        for e in &h.events {
            assert_eq!(e["event"], json!("changed"));
            let s = e["seq"].as_i64().expect("seq");
            *count.entry(s).or_default() += 1;
            if s < last {
                out_of_order += 1;
            }
            last = last.max(s);
            if let Some(c) = e["clientRequestId"].as_str() {
                if let Some(&want) = seq_of.get(c) {
                    assert_eq!(s, want, "event for {c} carries seq {s}, the change log says {want}");
                }
            }
        }
        let dups: Vec<_> = count.iter().filter(|(_, &n)| n > 1).collect();
        if !dups.is_empty() {
            problems.push(format!("port {i}: seqs announced more than once: {dups:?}"));
        }
        let got: BTreeSet<i64> = count.keys().copied().filter(|s| expected.contains(s)).collect();
        let missing: Vec<_> = expected.difference(&got).collect();
        let first: Vec<i64> = count.keys().copied().take(8).collect();
        if !missing.is_empty() {
            problems.push(format!(
                "port {i}: {} of {} writes never announced, e.g. {:?} ({} events; lowest seqs seen {first:?})",
                missing.len(),
                expected.len(),
                &missing[..missing.len().min(8)],
                h.events.len()
            ));
        }
        eprintln!(
            "port {i}: {} events, {} distinct seqs of ours, {out_of_order} arrived below an earlier seq",
            h.events.len(),
            got.len()
        );
    }
    problems
}

fn append_args(_p: usize, _n: usize, crid: &str, _target: &str) -> Value {
    json!({"entry": user(&text_of(crid)), "clientRequestId": crid})
}

fn append_to_args(_p: usize, _n: usize, crid: &str, target: &str) -> Value {
    json!({"id": target, "entry": assistant(&text_of(crid)), "clientRequestId": crid})
}

/// The seq of each of our writes in the change log, checking one row per write and unique,
/// strictly increasing seqs.
fn seqs_from_log(db: &Path, runs: &[WriterRun]) -> (HashMap<String, i64>, Vec<String>) {
    let rows = change_rows(db);
    for w in rows.windows(2) {
        assert!(w[0].0 < w[1].0, "change seqs not strictly increasing: {} then {}", w[0].0, w[1].0);
    }
    let mut seq_of = HashMap::new();
    let mut order = Vec::new();
    for (s, c) in &rows {
        if let Some(c) = c.as_ref().filter(|c| c.starts_with("c-")) {
            assert!(seq_of.insert(c.clone(), *s).is_none(), "two change rows for {c}");
            order.push(c.clone());
        }
    }
    assert_eq!(seq_of.len(), WRITERS * PER_WRITER, "change rows for our writes");
    for r in runs {
        for (crid, _) in &r.acks {
            assert!(seq_of.contains_key(crid), "acknowledged write {crid} has no change row");
        }
    }
    // Each process' writes were committed in its program order.
    for p in 0..WRITERS {
        let mine: Vec<&String> = order.iter().filter(|c| c.starts_with(&format!("c-{p}-"))).collect();
        let mut sorted = mine.clone();
        sorted.sort();
        assert_eq!(mine, sorted, "process {p}'s writes committed out of order");
    }
    let all_seqs: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let distinct: BTreeSet<i64> = all_seqs.iter().copied().collect();
    assert_eq!(distinct.len(), all_seqs.len(), "a seq appears twice in the change log");
    (seq_of, order)
}

fn client_request_ids(db: &Path, op: &str) -> BTreeSet<String> {
    let c = sql(db);
    let mut st = c
        .prepare("SELECT client_request_id, op FROM client_requests WHERE client_request_id LIKE 'c-%'")
        .unwrap();
    st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .map(|(id, o)| {
            assert_eq!(o, op, "client request {id} recorded with op {o}");
            id
        })
        .collect()
}

fn expected_crids() -> BTreeSet<String> {
    (0..WRITERS).flat_map(|p| (0..PER_WRITER).map(move |n| format!("c-{p}-{n:03}"))).collect()
}

#[test]
fn four_processes_appending_to_the_live_history_lose_nothing_and_never_see_busy() {
    let t = Instant::now();
    let (_d, db) = temp_db();
    let (mut runs, mut reader, max_wal, _) = run_writers(&db, "history.append", append_args, "");
    report_latency(&runs);
    for (p, r) in runs.iter().enumerate() {
        assert!(
            r.failures.is_empty(),
            "process {p}: {} writes failed, first: {}",
            r.failures.len(),
            r.failures[0]
        );
        assert_eq!(r.acks.len(), PER_WRITER);
        for (crid, res) in &r.acks {
            let len = res["length"].as_i64().unwrap();
            assert!((1..=60).contains(&len), "{crid}: length {len}");
            assert_eq!(res["index"].as_i64().unwrap(), len - 1, "{crid}: {res}");
        }
    }
    eprintln!("max -wal size during the run: {max_wal} bytes");

    let (seq_of, order) = seqs_from_log(&db, &runs);
    assert_eq!(client_request_ids(&db, "history.append"), expected_crids(), "client_requests rows");
    // The live history holds the last 60 appends in commit order.
    let want: Vec<String> = order[order.len() - 60..].iter().map(|c| text_of(c)).collect();
    let got: Vec<String> = reader.ok("history.get", json!({}))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got, want, "live history is not the last 60 appends in commit order");

    let mut ports: Vec<&mut Host> = runs.iter_mut().map(|r| &mut r.host).collect();
    ports.push(&mut reader);
    let mut problems = check_events(&mut ports, &seq_of);
    for r in runs {
        assert_eq!(r.host.close().0, Some(0));
    }
    assert_eq!(reader.close().0, Some(0));
    // Checked last so every check above runs (reliability.md T15; PROTOCOL.md §4).
    if max_wal >= MAX_WAL {
        problems.push(format!("-wal grew to {max_wal} bytes (T15 limit 16 MiB)"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let ok: String = sql(&db).query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    eprintln!("test took {:?}", t.elapsed());
}

#[test]
fn four_processes_appending_to_a_saved_session_keep_all_600_entries() {
    let t = Instant::now();
    let (_d, db) = temp_db();
    let id = {
        let mut h = Host::spawn(&db);
        h.ok("history.append", json!({"entry": user("seed")}));
        let s = h.ok("sessions.save", json!({"name": "target"}));
        let id = s["session"]["id"].as_str().expect("session id").to_owned();
        h.ok("history.clear", json!({}));
        assert_eq!(h.ok("history.meta", json!({}))["activeSessionId"], json!(""));
        assert_eq!(h.close().0, Some(0));
        id
    };
    let (mut runs, mut reader, max_wal, _) = run_writers(&db, "sessions.appendTo", append_to_args, &id);
    report_latency(&runs);
    for (p, r) in runs.iter().enumerate() {
        assert!(
            r.failures.is_empty(),
            "process {p}: {} writes failed, first: {}",
            r.failures.len(),
            r.failures[0]
        );
        for (crid, res) in &r.acks {
            assert_eq!(res["target"], json!("session"), "{crid}: {res}");
            assert_eq!(res["sessionId"], json!(id), "{crid}: {res}");
            assert_eq!(res["index"].as_i64().unwrap(), res["length"].as_i64().unwrap() - 1, "{crid}: {res}");
        }
    }
    eprintln!("max -wal size during the run: {max_wal} bytes");
    let (seq_of, order) = seqs_from_log(&db, &runs);
    assert_eq!(client_request_ids(&db, "sessions.appendTo"), expected_crids(), "client_requests rows");

    // All 600 entries are in session_entries, after the seed, in commit order.
    let rows: Vec<(i64, String)> = {
        let c = sql(&db);
        let mut st = c
            .prepare("SELECT position, entry FROM session_entries WHERE session_id = ?1 ORDER BY position")
            .unwrap();
        st.query_map([&id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(rows.len(), 1 + WRITERS * PER_WRITER, "session_entries rows");
    let positions: BTreeSet<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(positions.len(), rows.len(), "duplicate positions");
    let texts: Vec<String> = rows
        .iter()
        .map(|(_, e)| serde_json::from_str::<Value>(e).unwrap()["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts[0], "seed");
    let want: Vec<String> = order.iter().map(|c| text_of(c)).collect();
    assert_eq!(&texts[1..], &want[..], "session body is not every append in commit order");
    let body = reader.ok("sessions.get", json!({"id": id}));
    assert_eq!(body["entries"].as_array().unwrap().len(), 601);
    // The live history was never touched.
    assert_eq!(reader.ok("history.meta", json!({}))["length"], json!(0));

    let mut ports: Vec<&mut Host> = runs.iter_mut().map(|r| &mut r.host).collect();
    ports.push(&mut reader);
    let mut problems = check_events(&mut ports, &seq_of);
    for r in runs {
        assert_eq!(r.host.close().0, Some(0));
    }
    assert_eq!(reader.close().0, Some(0));
    // Checked last so every check above runs (reliability.md T15; PROTOCOL.md §4).
    if max_wal >= MAX_WAL {
        problems.push(format!("-wal grew to {max_wal} bytes (T15 limit 16 MiB)"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!("test took {:?}", t.elapsed());
}

#[test]
fn eight_processes_starting_at_once_on_a_fresh_database_all_succeed() {
    const PROCS: usize = 8;
    const TRIALS: usize = 20;
    let t = Instant::now();
    let mut failed = Vec::new();
    for trial in 0..TRIALS {
        let (_d, db) = temp_db();
        let barrier = Arc::new(Barrier::new(PROCS));
        let handles: Vec<_> = (0..PROCS)
            .map(|p| {
                let barrier = barrier.clone();
                let db = db.clone();
                thread::spawn(move || {
                    let mut h = Host::spawn(&db);
                    barrier.wait();
                    let hello = h.hello_call();
                    let append = h.call("history.append", json!({"entry": user(&format!("t{trial} p{p}")), "clientRequestId": format!("s-{p}")}));
                    (h, hello, append)
                })
            })
            .collect();
        let results: Vec<(Host, Value, Value)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for (p, (_, hello, append)) in results.iter().enumerate() {
            let good = hello["ok"] == json!(true)
                && hello["result"]["schemaVersion"] == json!(keepsake_host::store::migrate::LATEST)
                && hello["result"]["dbError"].is_null()
                && append["ok"] == json!(true);
            if !good {
                failed.push(format!("trial {trial} process {p}: hello {hello} append {append}"));
            }
        }
        for (h, _, _) in results {
            assert_eq!(h.close().0, Some(0));
        }
        let c = sql(&db);
        let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        let version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        let n: i64 = c.query_row("SELECT count(*) FROM history_entries", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal", "trial {trial}");
        assert_eq!(version, keepsake_host::store::migrate::LATEST as i64, "trial {trial}");
        if failed.is_empty() {
            assert_eq!(n, PROCS as i64, "trial {trial}: appends landed");
        }
    }
    eprintln!(
        "concurrent start: {PROCS} processes x {TRIALS} trials, failed starts {}/{} in {:?}",
        failed.len(),
        PROCS * TRIALS,
        t.elapsed()
    );
    assert!(failed.is_empty(), "{} failed starts:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn a_port_joining_during_heavy_writes_hears_every_later_commit() {
    let t = Instant::now();
    let (_d, db) = temp_db();
    Host::spawn(&db).hello();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|p| {
            let db = db.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut h = Host::spawn(&db);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    h.ok(
                        "history.append",
                        json!({"entry": user(&format!("w{p} {n}")), "clientRequestId": format!("j-{p}-{n}")}),
                    );
                    n += 1;
                }
                h.close();
                n
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    // Three ports join while the writers run; each notes the change seq it started from.
    let mut joiners = Vec::new();
    for _ in 0..3 {
        let mut h = Host::spawn(&db);
        h.hello();
        let from = h.ok("history.meta", json!({}))["changeSeq"].as_i64().expect("changeSeq");
        joiners.push((h, from));
        thread::sleep(Duration::from_millis(200));
    }
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let writes: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let all: Vec<i64> = change_rows(&db).into_iter().map(|r| r.0).collect();
    let mut problems = Vec::new();
    for (i, (h, from)) in joiners.iter_mut().enumerate() {
        h.settle(Duration::from_millis(if i == 0 { 1500 } else { 100 }));
        let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
        for e in &h.events {
            *seen.entry(e["seq"].as_i64().unwrap()).or_default() += 1;
        }
        let due: Vec<i64> = all.iter().copied().filter(|s| s > from).collect();
        let missing: Vec<i64> = due.iter().copied().filter(|s| !seen.contains_key(s)).collect();
        let dup = seen.values().filter(|&&n| n > 1).count();
        eprintln!(
            "joiner {i}: started at seq {from}; {} later commits, {} announced, {} missing, {dup} duplicated",
            due.len(),
            due.len() - missing.len(),
            missing.len()
        );
        if !missing.is_empty() || dup > 0 {
            problems.push(format!(
                "joiner {i} (hello answered at seq {from}): {} of {} later commits never announced (first {:?}), {dup} duplicated",
                missing.len(),
                due.len(),
                &missing[..missing.len().min(8)]
            ));
        }
    }
    for (h, _) in joiners {
        assert_eq!(h.close().0, Some(0));
    }
    eprintln!("{writes} writes by 3 processes; test took {:?}", t.elapsed());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A write lock held by another connection: the host waits for it (polling, not sleeping
/// 100 ms at a time), answers `busy` with nothing applied once the wait passes the busy timeout
/// (shortened here with the KEEPSAKE_BUSY_TIMEOUT_MS test knob), and a retry with the same
/// clientRequestId after the lock is released applies the write once.
#[test]
fn a_write_waits_for_a_held_lock_and_answers_busy_only_past_the_timeout() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn_with(&db, &[ORIGIN], &[("KEEPSAKE_BUSY_TIMEOUT_MS", "1500")]);
    h.ok("history.append", json!({"entry": user("first"), "clientRequestId": "c-1"}));

    // held past the timeout: busy, nothing applied
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let t = Instant::now();
    let r = h.call("history.append", json!({"entry": user("second"), "clientRequestId": "c-2"}));
    let waited = t.elapsed();
    assert_eq!(r["ok"], json!(false), "{r}");
    assert_eq!(r["error"]["code"], json!("busy"), "{r}");
    assert!(waited >= Duration::from_millis(1500), "answered busy after {waited:?}, before the timeout");
    holder.execute_batch("COMMIT").unwrap();
    assert_eq!(h.ok("history.meta", json!({}))["length"], json!(1), "the busy write left nothing");

    // released while the host waits: the write goes through
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let release = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        holder.execute_batch("COMMIT").unwrap();
    });
    let r = h.ok("history.append", json!({"entry": user("second"), "clientRequestId": "c-2"}));
    release.join().unwrap();
    assert_eq!(r["length"], json!(2), "{r}");
    // the retry is applied once
    let again = h.ok("history.append", json!({"entry": user("second"), "clientRequestId": "c-2"}));
    assert_eq!(again["length"], json!(2), "{again}");
    let texts: Vec<Value> = h.ok("history.get", json!({}))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].clone())
        .collect();
    assert_eq!(texts, vec![json!("first"), json!("second")]);
    assert_eq!(h.close().0, Some(0));
}

/// A write that takes the -wal past the restart bound (8 MiB, `Store::bound_wal`) is answered
/// before the RESTART checkpoint that waits for other connections' reads: a reader holding its
/// snapshot never holds a write's reply. Once the reader lets go, the checkpoint completes and the
/// next write starts the -wal over.
#[test]
fn a_write_is_answered_before_its_wal_checkpoint_waits_for_a_reader() {
    let (_d, db) = temp_db();
    // the checkpoint waits for the reader as long as it must (the busy handler gives up after this)
    let mut h = Host::spawn_with(&db, &[ORIGIN], &[("KEEPSAKE_BUSY_TIMEOUT_MS", "600000")]);
    h.ok("history.meta", json!({}));
    let wal = db.with_file_name("keepsake.db-wal");
    let reader = sql(&db);
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader.query_row("SELECT count(*) FROM history_entries", [], |r| r.get(0)).unwrap();
    let text = "w".repeat(1 << 20);
    let mut writes = 0;
    while std::fs::metadata(&wal).map_or(0, |m| m.len()) <= 8 * 1024 * 1024 {
        assert!(writes < 40, "the -wal never passed 8 MiB");
        let id = json!(format!("w{writes}"));
        h.send(&json!({"id": id, "op": "history.append", "args": {"entry": user(&text)}}));
        // a hang guard, not a timing figure: the reply must not wait for the reader
        let r = h.reply_for(&id, Duration::from_secs(30));
        assert_eq!(r["ok"], json!(true), "{r}");
        writes += 1;
    }
    let grown = std::fs::metadata(&wal).unwrap().len();
    // the host now waits in its checkpoint for this reader; let go
    reader.execute_batch("COMMIT").unwrap();
    h.ok("history.append", json!({"entry": user("after")}));
    let after = std::fs::metadata(&wal).unwrap().len();
    assert!(after < 8 * 1024 * 1024, "-wal {grown} → {after} bytes: not started over after the checkpoint");
    let live = h.ok("history.get", json!({}));
    assert_eq!(live["entries"].as_array().unwrap().last().unwrap()["content"], json!("after"));
}
