//! T14 (reliability.md §4, §10): eight host processes starting on the same instant, on no
//! database and on old-schema databases (v1, and v4, whose live history migration 5 moves into
//! its session), all start, and the file ends at the latest schema in WAL mode with every write:
//! the eight entries continue the live chat in one session (on no database, auto-keep makes
//! exactly one session for them, not one per process).
//!
//! The host opens and migrates the database as soon as it starts, before it reads a request, so
//! a barrier on requests would not make the *starts* simultaneous. Each child therefore waits
//! between fork and exec at a [`StartGate`] until all eight are there, and all are released by
//! one `close(2)`; then each gets `host.hello` and one write. A start fails when `host.hello`
//! reports a `dbError` (including a `busy` the host would retry later), a schema version other
//! than the latest, or the write fails.
//!
//! Sizes: CI 8 × 25 trials per case; `KEEPSAKE_LONG=1` 8 × 200; `KEEPSAKE_START_TRIALS`.
//! All cases run in one test: gated groups must not overlap within a test process.
//!
//! T15 (reliability.md §3, §10): write contention at full size, four processes × 1,000
//! `history.append` while a fifth streams `history.get`: no `busy` reaches a client, p50/p99
//! append latency, and the `-wal` file sampled every 10 ms stays under 16 MiB. (The deeper
//! event and commit-order checks of tests/it/concurrency/processes.rs run at 4 × 150, because they
//! read the change log, which keeps only the latest ~1,000 changes.) `KEEPSAKE_LONG=1`: 4 × 10,000;
//! `KEEPSAKE_T15_APPENDS`.
use crate::harness::*;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use keepsake_host::store::migrate::LATEST;
use serde_json::{json, Value};

const PROCS: usize = 8;

struct Case {
    name: &'static str,
    fixture: Option<&'static str>,
    /// Live history entries before the trial.
    live_before: i64,
    /// Entries of the live chat's session before the trial (after any migration): the live ones
    /// and those kept ahead of the window.
    body_before: i64,
    /// Sessions (not in the trash) after the trial.
    sessions_after: i64,
}

/// One trial: returns the failed starts and whether the file ended at LATEST in WAL mode.
fn trial(case: &Case, t: usize) -> (Vec<String>, bool, Duration) {
    let (_d, db) = temp_db();
    if let Some(f) = case.fixture {
        copy_db_fixture(f, &db);
    }
    let gate = Arc::new(StartGate::new());
    let handles: Vec<_> = (0..PROCS)
        .map(|p| {
            let (db, gate) = (db.clone(), gate.clone());
            thread::spawn(move || {
                let mut h = Host::spawn_gated(&db, &gate);
                let hello = h.hello_call();
                let write = h.call(
                    "history.append",
                    json!({"entry": user(&format!("trial {t} process {p}")), "clientRequestId": format!("s-{p}")}),
                );
                (h, hello, write)
            })
        })
        .collect();
    let ready = gate.open_when_ready(PROCS, Duration::from_secs(30));
    let released = Instant::now();
    assert_eq!(ready, PROCS, "{}: only {ready} children reached the start gate", case.name);
    let results: Vec<(Host, Value, Value)> =
        handles.into_iter().map(|h| h.join().expect("starter")).collect();
    let spread = released.elapsed();
    let mut failed = Vec::new();
    for (p, (_, hello, write)) in results.iter().enumerate() {
        let good = hello["ok"] == json!(true)
            && hello["result"]["dbError"].is_null()
            && hello["result"]["schemaVersion"] == json!(LATEST)
            && write["ok"] == json!(true);
        if !good {
            failed.push(format!("{} trial {t} process {p}: hello {hello} write {write}", case.name));
        }
    }
    for (h, _, _) in results {
        let (code, _) = h.close();
        if code != Some(0) {
            failed.push(format!("{} trial {t}: a host exited with {code:?}", case.name));
        }
    }
    (failed, final_state_ok(case, &db, t), spread)
}

fn final_state_ok(case: &Case, db: &Path, t: usize) -> bool {
    let c = sql(db);
    let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    let version: u32 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    let live: i64 = c.query_row("SELECT count(*) FROM history_entries", [], |r| r.get(0)).unwrap();
    let sessions: i64 =
        c.query_row("SELECT count(*) FROM sessions WHERE trashed_at IS NULL", [], |r| r.get(0)).unwrap();
    let body: i64 = c
        .query_row(
            "SELECT count(*) FROM session_entries e JOIN live_state l ON l.id = 1
             WHERE e.session_id = l.active_session_id AND e.branch_id IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let ok = mode == "wal"
        && version == LATEST
        && live == case.live_before + PROCS as i64
        && body == case.body_before + PROCS as i64
        && sessions == case.sessions_after
        && integrity(db) == "ok";
    if !ok {
        eprintln!(
            "{} trial {t}: journal {mode}, version {version}, live {live}, its session {body}, sessions {sessions}",
            case.name
        );
    }
    ok
}

#[test]
fn t14_eight_processes_starting_on_the_same_instant_all_start_fresh_and_old_schema() {
    let _serial = serial();
    let started = Instant::now();
    let trials = size("KEEPSAKE_START_TRIALS", 25, 200);
    // the fixtures' live history: 5 entries bound to `s-bound`, 2 more trimmed off it, which
    // migration 5 keeps ahead of the window (tests/fixtures/db/README.md)
    let cases = [
        Case { name: "no database", fixture: None, live_before: 0, body_before: 0, sessions_after: 1 },
        Case {
            name: "v1 database",
            fixture: Some("v1.db"),
            live_before: 5,
            body_before: 7,
            sessions_after: 3,
        },
        Case {
            name: "v4 database",
            fixture: Some("v4.db"),
            live_before: 5,
            body_before: 7,
            sessions_after: 3,
        },
    ];
    let mut lines = Vec::new();
    let mut all_failed = Vec::new();
    let mut all_bad = 0;
    for case in &cases {
        let t0 = Instant::now();
        let mut failed = Vec::new();
        let mut good_end = 0;
        let mut spreads = Vec::new();
        for t in 0..trials {
            let (f, ok, spread) = trial(case, t);
            failed.extend(f);
            good_end += ok as usize;
            spreads.push(spread);
        }
        spreads.sort();
        lines.push(format!(
            "{}: failed starts {}/{}, latest schema, WAL and every write in the chat's session {good_end}/{trials}, release to last write p50 {} ms, {} s",
            case.name,
            failed.len(),
            PROCS * trials,
            spreads[trials / 2].as_millis(),
            t0.elapsed().as_secs()
        ));
        all_bad += trials - good_end;
        all_failed.extend(failed);
    }
    eprintln!(
        "T14: {PROCS} processes × {trials} trials; {}; {} s",
        lines.join("; "),
        started.elapsed().as_secs()
    );
    assert!(all_failed.is_empty(), "{} failed starts:\n{}", all_failed.len(), all_failed.join("\n"));
    assert_eq!(all_bad, 0, "trials that did not end at the latest schema in WAL mode with every write");
}

// ---- T15 -----------------------------------------------------------------------------------

const WRITERS: usize = 4;
/// reliability.md T15: the -wal file stays under 16 MiB.
const MAX_WAL: u64 = 16 * 1024 * 1024;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
fn t15_four_writers_and_a_streaming_reader_see_no_busy_and_keep_the_wal_small() {
    let _serial = serial();
    let started = Instant::now();
    let per = size("KEEPSAKE_T15_APPENDS", 1000, 10_000);
    let (_d, db) = temp_db();
    let done = Arc::new(AtomicBool::new(false));
    let max_wal = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, max_wal) = (done.clone(), max_wal.clone());
        let wal = db.with_file_name("keepsake.db-wal");
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok(m) = std::fs::metadata(&wal) {
                    max_wal.fetch_max(m.len(), Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let barrier = Arc::new(Barrier::new(WRITERS + 1));
    let reader = {
        let (done, barrier, db) = (done.clone(), barrier.clone(), db.clone());
        thread::spawn(move || {
            let mut h = Host::spawn(&db);
            assert!(h.hello()["dbError"].is_null());
            barrier.wait();
            let (mut reads, mut failures) = (0usize, Vec::new());
            while !done.load(Ordering::Relaxed) {
                let r = h.call("history.get", json!({"images": "ref"}));
                if r["ok"] != json!(true) {
                    failures.push(r);
                } else {
                    assert!(r["result"]["entries"].as_array().unwrap().len() <= 60);
                }
                reads += 1;
                h.events.clear();
            }
            assert_eq!(h.close().0, Some(0));
            (reads, failures)
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|p| {
            let (barrier, db) = (barrier.clone(), db.clone());
            thread::spawn(move || {
                let mut h = Host::spawn(&db);
                assert!(h.hello()["dbError"].is_null());
                barrier.wait();
                let (mut lat, mut acks, mut failures) = (Vec::with_capacity(per), Vec::new(), Vec::new());
                for n in 0..per {
                    let crid = format!("t15-{p}-{n:06}");
                    let t = Instant::now();
                    let r = h.call(
                        "history.append",
                        json!({"entry": user(&format!("text of {crid}")), "clientRequestId": crid}),
                    );
                    lat.push(t.elapsed());
                    if r["ok"] == json!(true) {
                        acks.push((crid, r["result"].clone()));
                    } else {
                        failures.push(r);
                    }
                    h.events.clear();
                }
                assert_eq!(h.close().0, Some(0));
                (lat, acks, failures)
            })
        })
        .collect();
    let outs: Vec<_> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
    let wall = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let (reads, read_failures) = reader.join().expect("reader");
    sampler.join().unwrap();

    let mut lat: Vec<Duration> = outs.iter().flat_map(|o| o.0.iter().copied()).collect();
    lat.sort();
    let failures: Vec<&Value> = outs.iter().flat_map(|o| &o.2).collect();
    let busy = failures.iter().filter(|f| f["error"]["code"] == "busy").count();
    let max_wal = max_wal.load(Ordering::Relaxed);
    eprintln!(
        "T15: {WRITERS} × {per} history.append + a reader ({reads} history.get, {} failed), busy {busy}, \
         other errors {}, append latency p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms, max -wal {:.1} MiB (limit 16), {} s",
        read_failures.len(),
        failures.len() - busy,
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(*lat.last().unwrap()),
        max_wal as f64 / (1024.0 * 1024.0),
        wall.as_secs()
    );
    assert_eq!(busy, 0, "busy reached a client");
    assert!(failures.is_empty(), "appends failed: {:?}", &failures[..failures.len().min(3)]);
    assert!(read_failures.is_empty(), "reads failed: {:?}", &read_failures[..read_failures.len().min(3)]);
    assert!(max_wal < MAX_WAL, "-wal grew to {max_wal} bytes");

    // every acknowledged append is recorded once; the live history is 60 of them
    let acked: BTreeSet<String> = outs.iter().flat_map(|o| o.1.iter().map(|(c, _)| c.clone())).collect();
    assert_eq!(acked.len(), WRITERS * per);
    for (crid, r) in outs.iter().flat_map(|o| &o.1) {
        let len = r["length"].as_i64().unwrap();
        assert!((1..=60).contains(&len) && r["index"].as_i64() == Some(len - 1), "{crid}: {r}");
    }
    let c = sql(&db);
    let logged: BTreeSet<String> = {
        let mut st =
            c.prepare("SELECT client_request_id FROM client_requests WHERE op = 'history.append'").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(logged, acked, "client_requests rows");
    let live: Vec<String> = {
        let mut st = c
            .prepare("SELECT json_extract(entry, '$.content') FROM history_entries ORDER BY position")
            .unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(live.len(), 60);
    let distinct: BTreeSet<&String> = live.iter().collect();
    assert_eq!(distinct.len(), 60, "duplicate live entries");
    assert!(
        live.iter().all(|t| acked.contains(t.trim_start_matches("text of "))),
        "a live entry nobody appended"
    );
    assert_eq!(integrity(&db), "ok");
}
