//! T12 and T13 (reliability.md §9, §10): kill -9 during writes, and idempotent retries.
//!
//! Three real `keepsake-host` processes write 64 KiB rows over real pipes, each write carrying
//! its own `clientRequestId`, with up to four requests in flight per writer. A killer thread
//! sends SIGKILL to a random writer every 10–150 ms; after every kill it reopens the database on
//! a fresh connection and runs `PRAGMA integrity_check`. A killed writer is restarted and first
//! resends every request it had not seen acknowledged, with the **same** client id (T13).
//!
//! The write is `sessions.appendTo` into the writer's own saved session, because those rows are
//! never trimmed (the live history keeps 60) and a second application of one request would be a
//! second row: so "every acknowledged write is present" and "no duplicates" are both exact
//! checks on `session_entries`. The 64 KiB payload sits in an unknown content part, which the
//! host stores as is (it is not search text).
//!
//! The kills are spread over several databases (`KEEPSAKE_KILLS_PER_DB`, default 25) so each
//! integrity check reads tens of MB rather than the whole run's output.
//!
//! Sizes: CI 300 kills; `KEEPSAKE_LONG=1` 5,000; `KEEPSAKE_KILLS=<n>` overrides either.
use crate::harness::*;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const WRITERS: usize = 3;
/// Requests a writer keeps in flight (so a kill can leave several unacknowledged).
const WINDOW: usize = 4;
const PAYLOAD: usize = 64 * 1024;
/// No reply for this long means a hung host, not a slow one.
const STUCK: Duration = Duration::from_secs(60);

/// The 64 KiB payload of one write: its client id, then filler derived from it.
fn payload(crid: &str) -> String {
    let mut s = String::with_capacity(PAYLOAD);
    s.push_str(crid);
    s.push(':');
    let mut x =
        crid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    while s.len() < PAYLOAD {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push((b'a' + (x % 26) as u8) as char);
    }
    s
}

fn request(wire_id: u64, session: &str, crid: &str) -> Value {
    json!({"id": wire_id, "op": "sessions.appendTo", "args": {
        "id": session,
        "clientRequestId": crid,
        "entry": {"role": "user", "content": [{"type": "x-keepsake-test", "crid": crid, "data": payload(crid)}]},
    }})
}

/// The writer process currently running in a slot, so the killer can signal it. The pid is
/// cleared under the lock before the process is reaped, so a reused pid is never signalled.
#[derive(Default)]
struct Slot {
    pid: Mutex<Option<u32>>,
    killed: AtomicBool,
}

#[derive(Default)]
struct WriterOut {
    /// crid → the result the client finally received.
    acks: HashMap<String, Value>,
    /// Every crid this writer created.
    created: Vec<String>,
    busy: usize,
    errors: Vec<String>,
    unexpected_exits: usize,
    starts: usize,
    reopen_failures: Vec<String>,
    /// Sends of a crid that an earlier, killed process had already been sent.
    resent: usize,
    /// Distinct crids found committed after the process that received them died unacknowledged.
    committed_unacked: HashSet<String>,
}

fn committed(db: &Path, crids: &[String]) -> Vec<String> {
    if crids.is_empty() {
        return Vec::new();
    }
    let c = sql(db);
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    let mut st = c.prepare("SELECT 1 FROM client_requests WHERE client_request_id = ?1").unwrap();
    crids.iter().filter(|id| st.exists([id.as_str()]).unwrap()).cloned().collect()
}

fn writer(p: usize, db: &Path, session: &str, slot: &Slot, stop: &AtomicBool) -> WriterOut {
    let mut out = WriterOut::default();
    // Unacknowledged crids in creation order; `sent_before` = sent to some earlier process.
    let mut pending: VecDeque<String> = VecDeque::new();
    let mut sent_before: HashSet<String> = HashSet::new();
    let mut next_n = 0usize;
    let mut wire_id = 0u64;
    'restart: loop {
        if stop.load(Ordering::Relaxed) && pending.is_empty() {
            break;
        }
        let mut h = Host::spawn(db);
        *slot.pid.lock().unwrap() = Some(h.child.id());
        out.starts += 1;
        let mut sent_here: HashSet<String> = HashSet::new();
        let mut inflight: VecDeque<(u64, String)> = VecDeque::new();
        wire_id += 1;
        let hello_id = wire_id;
        h.send(&json!({"id": hello_id, "op": "host.hello"}));
        let mut hello_pending = true;
        let mut broken = None;
        let died = loop {
            // Keep the window full: unacknowledged first (resent with the same id), then new.
            while inflight.len() < WINDOW {
                let next = pending.iter().find(|c| !sent_here.contains(*c)).cloned().or_else(|| {
                    if stop.load(Ordering::Relaxed) {
                        None
                    } else {
                        let c = format!("k-{p}-{next_n:06}");
                        next_n += 1;
                        out.created.push(c.clone());
                        pending.push_back(c.clone());
                        Some(c)
                    }
                });
                let Some(crid) = next else { break };
                if !sent_before.insert(crid.clone()) {
                    out.resent += 1;
                }
                sent_here.insert(crid.clone());
                wire_id += 1;
                h.send(&request(wire_id, session, &crid));
                inflight.push_back((wire_id, crid));
            }
            if inflight.is_empty() && !hello_pending {
                break false;
            }
            match h.recv_status(STUCK) {
                // hello is answered before the database opens; the open's outcome follows as `db`
                Recv::Frame(v) if v["event"] == json!("db") => {
                    if !v["dbError"].is_null() {
                        out.reopen_failures.push(format!("writer {p} start {}: {v}", out.starts));
                    }
                }
                Recv::Frame(v) if v.get("event").is_some() => {}
                Recv::Frame(v) if v["id"] == json!(hello_id) => {
                    hello_pending = false;
                    if v["ok"] != json!(true) || !v["result"]["dbError"].is_null() {
                        out.reopen_failures.push(format!("writer {p} start {}: {v}", out.starts));
                    }
                }
                Recv::Frame(v) => {
                    let (id, crid) =
                        inflight.pop_front().unwrap_or_else(|| panic!("writer {p}: stray reply {v}"));
                    assert_eq!(v["id"], json!(id), "writer {p}: replies out of order");
                    if v["ok"] == json!(true) {
                        pending.retain(|c| *c != crid);
                        out.acks.insert(crid, v["result"].clone());
                    } else if v["error"]["code"] == "busy" {
                        out.busy += 1;
                        sent_here.remove(&crid); // retried with the same id
                    } else {
                        out.errors.push(format!("writer {p} {crid}: {v}"));
                        pending.retain(|c| *c != crid);
                    }
                }
                Recv::Closed => break true,
                Recv::Broken(g) => {
                    broken = Some(g);
                    break true;
                }
                Recv::Timeout => panic!("writer {p}: no reply within {STUCK:?}"),
            }
        };
        // Take the process out of the killer's reach before it is closed or reaped.
        let expected = {
            let mut pid = slot.pid.lock().unwrap();
            *pid = None;
            slot.killed.swap(false, Ordering::SeqCst)
        };
        if died {
            if !expected {
                out.unexpected_exits += 1;
                if let Some(g) = broken {
                    out.errors.push(format!("writer {p}: {g} from a process nobody killed"));
                }
            }
            drop(h);
            let lost_replies: Vec<String> = inflight.into_iter().map(|(_, c)| c).collect();
            out.committed_unacked.extend(committed(db, &lost_replies));
            continue 'restart;
        }
        let (code, _) = h.close();
        if code != Some(0) && !expected {
            out.unexpected_exits += 1;
        }
        if pending.is_empty() {
            break;
        }
    }
    out
}

#[derive(Default)]
struct Totals {
    kills: usize,
    databases: usize,
    acks: usize,
    rows: usize,
    lost: usize,
    duplicates: usize,
    unacked_committed: usize,
    resent: usize,
    result_mismatch: usize,
    integrity_ok: usize,
    integrity_checks: usize,
    integrity_failures: Vec<String>,
    starts: usize,
    reopen_failures: Vec<String>,
    busy: usize,
    errors: Vec<String>,
    unexpected_exits: usize,
    never_acked: usize,
    interval_ms_sum: u128,
    max_db_bytes: u64,
}

/// One database: three writers, `kills` SIGKILLs, then every check.
fn run_database(kills: usize, rng: &mut Rng, t: &mut Totals) {
    let (_d, db) = temp_db();
    let sessions: Vec<String> = {
        let mut h = Host::spawn(&db);
        let ids = (0..WRITERS)
            .map(|p| {
                h.ok("history.append", json!({"entry": user(&format!("seed {p}"))}));
                let s = h.ok("sessions.save", json!({"name": format!("writer {p}")}));
                h.ok("history.clear", json!({}));
                s["session"]["id"].as_str().expect("session id").to_owned()
            })
            .collect();
        assert_eq!(h.close().0, Some(0));
        ids
    };
    let slots: Arc<Vec<Slot>> = Arc::new((0..WRITERS).map(|_| Slot::default()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WRITERS)
        .map(|p| {
            let (db, slots, stop, sid) = (db.clone(), slots.clone(), stop.clone(), sessions[p].clone());
            thread::spawn(move || writer(p, &db, &sid, &slots[p], &stop))
        })
        .collect();
    // The killer: a random writer every 10–150 ms (or as soon as the previous check is done).
    let mut done = 0;
    let mut last = Instant::now();
    while done < kills {
        let wait = Duration::from_millis(rng.range(10, 150));
        thread::sleep(wait.saturating_sub(last.elapsed()));
        let p = rng.range(0, WRITERS as u64 - 1) as usize;
        let hit = {
            let pid = slots[p].pid.lock().unwrap();
            match *pid {
                Some(pid) => {
                    slots[p].killed.store(true, Ordering::SeqCst);
                    // SAFETY: a plain kill(2) on our own child, which is not reaped while we hold
                    // the slot lock.
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                    true
                }
                None => false,
            }
        };
        if !hit {
            continue;
        }
        t.interval_ms_sum += last.elapsed().as_millis();
        last = Instant::now();
        done += 1;
        let ic = integrity(&db);
        t.integrity_checks += 1;
        if ic == "ok" {
            t.integrity_ok += 1;
        } else {
            t.integrity_failures.push(ic);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let outs: Vec<WriterOut> = handles.into_iter().map(|h| h.join().expect("writer thread")).collect();
    t.kills += kills;
    t.databases += 1;

    let ic = integrity(&db);
    t.integrity_checks += 1;
    if ic == "ok" {
        t.integrity_ok += 1;
    } else {
        t.integrity_failures.push(format!("final: {ic}"));
    }
    t.max_db_bytes = t.max_db_bytes.max(std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0));

    let c = sql(&db);
    for (p, o) in outs.iter().enumerate() {
        // position and payload of every stored row of this writer's session
        let mut st = c
            .prepare(
                "SELECT position, json_extract(entry, '$.content[0].crid'), json_extract(entry, '$.content[0].data')
                 FROM session_entries WHERE session_id = ?1 AND position > 0 ORDER BY position",
            )
            .unwrap();
        let rows: Vec<(i64, String, String)> = st
            .query_map([&sessions[p]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut by_crid: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (pos, crid, data) in &rows {
            assert_eq!(data, &payload(crid), "writer {p}: payload of {crid} damaged");
            by_crid.entry(crid.as_str()).or_default().push(*pos);
        }
        let positions: Vec<i64> = rows.iter().map(|r| r.0).collect();
        assert_eq!(
            positions,
            (1..=rows.len() as i64).collect::<Vec<_>>(),
            "writer {p}: positions not contiguous"
        );
        let count: i64 = c
            .query_row("SELECT entry_count FROM sessions WHERE id = ?1", [&sessions[p]], |r| r.get(0))
            .unwrap();
        assert_eq!(count, rows.len() as i64 + 1, "writer {p}: entry_count");
        t.rows += rows.len();
        t.duplicates += by_crid.values().map(|v| v.len() - 1).sum::<usize>();
        let created: HashSet<&str> = o.created.iter().map(String::as_str).collect();
        let phantoms: Vec<&&str> = by_crid.keys().filter(|c| !created.contains(**c)).collect();
        assert!(phantoms.is_empty(), "writer {p}: rows nobody sent: {phantoms:?}");
        for (crid, result) in &o.acks {
            match by_crid.get(crid.as_str()) {
                None => t.lost += 1,
                Some(pos) => {
                    // a replayed reply carries the recorded result of the original commit
                    if result["index"] != json!(pos[0]) || result["target"] != "session" {
                        t.result_mismatch += 1;
                    }
                }
            }
        }
        t.never_acked += o.created.iter().filter(|c| !o.acks.contains_key(*c)).count();
        t.acks += o.acks.len();
        t.unacked_committed += o.committed_unacked.len();
        t.resent += o.resent;
        t.busy += o.busy;
        t.errors.extend(o.errors.iter().cloned());
        t.unexpected_exits += o.unexpected_exits;
        t.starts += o.starts;
        t.reopen_failures.extend(o.reopen_failures.iter().cloned());
    }
    // the client_requests log holds each write once, with this op
    let logged: i64 = c
        .query_row("SELECT count(*) FROM client_requests WHERE op = 'sessions.appendTo'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(logged as usize, outs.iter().map(|o| o.created.len()).sum::<usize>(), "client_requests rows");
}

#[test]
fn t12_t13_kill_9_during_writes_loses_no_acknowledged_write_and_retries_add_no_duplicates() {
    let started = Instant::now();
    let kills = size("KEEPSAKE_KILLS", 300, 5000);
    let per_db = size("KEEPSAKE_KILLS_PER_DB", 25, 25).max(1);
    let mut rng = Rng::from_env();
    let seed = rng.seed();
    let mut t = Totals::default();
    let mut left = kills;
    while left > 0 {
        let k = left.min(per_db);
        run_database(k, &mut rng, &mut t);
        left -= k;
    }
    let secs = started.elapsed().as_secs();
    eprintln!(
        "T12: kills {}, acks {}, rows {}, lost {}, unacked-but-committed {}, integrity ok {}/{}, busy {}, \
         other errors {}, unexpected exits {}, {} s",
        t.kills,
        t.acks,
        t.rows,
        t.lost,
        t.unacked_committed,
        t.integrity_ok,
        t.integrity_checks,
        t.busy,
        t.errors.len(),
        t.unexpected_exits,
        secs
    );
    eprintln!(
        "T13: resent {} (same clientRequestId), duplicates {}, replayed results differing from the original {}, \
         requests never acknowledged {}; {} databases, {} writer starts ({} with dbError), mean kill interval {} ms, \
         largest database {} MB, seed {seed}",
        t.resent,
        t.duplicates,
        t.result_mismatch,
        t.never_acked,
        t.databases,
        t.starts,
        t.reopen_failures.len(),
        t.interval_ms_sum / t.kills.max(1) as u128,
        t.max_db_bytes / 1_000_000
    );
    assert!(t.integrity_failures.is_empty(), "integrity_check failed: {:?}", t.integrity_failures);
    assert_eq!(t.lost, 0, "acknowledged writes lost");
    assert_eq!(t.duplicates, 0, "duplicate rows from retried requests");
    assert_eq!(t.result_mismatch, 0, "a replayed reply differed from the original result");
    assert_eq!(t.busy, 0, "busy reached the client");
    assert!(t.errors.is_empty(), "writes failed: {:?}", &t.errors[..t.errors.len().min(5)]);
    assert!(t.reopen_failures.is_empty(), "restarts failed to open: {:?}", t.reopen_failures);
    assert_eq!(t.unexpected_exits, 0, "a writer died without being killed");
    assert_eq!(t.never_acked, 0, "requests never acknowledged after the killing stopped");
    assert_eq!(t.rows, t.acks, "rows vs acknowledged writes");
}
