//! kill -9 during apply: a child process applies another device's segments (in a random order,
//! some twice, pictures fetched when a segment waits for them) and is killed at a random moment,
//! again and again. After every kill the database passes `integrity_check` and what it records as
//! applied matches its counts; once a child gets through, every segment is applied exactly once
//! (each is a duplicate now, the operations counted equal the operations sent) and the chats are
//! the ones a device that applied everything once without a kill has.
//!
//! Sizes: `KEEPSAKE_SYNC_KILLS` kills (default 100, 500 with `KEEPSAKE_LONG=1`); `KEEPSAKE_SEED`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keepsake_host::store::Store;
use serde_json::{json, Value};

use super::*;
use crate::harness::{data_url, integrity, png_bytes, size, Rng};

const CHILD_DB: &str = "KEEPSAKE_SYNC_CRASH_DB";
const CHILD_BATCHES: &str = "KEEPSAKE_SYNC_CRASH_BATCHES";
const CHILD_SEED: &str = "KEEPSAKE_SYNC_CRASH_SEED";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The batches a source device sealed and the pictures they need, as a file the child reads.
fn make_batches(dir: &Path) -> (PathBuf, Vec<Segment>, Folder) {
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    let mut src = Dev::new("dev-src", Arc::clone(&clock), 0);
    let mut folder = Folder::default();
    for chat in 0..30 {
        src.s.history_clear(false, None).unwrap();
        for turn in 0..3 {
            clock.fetch_add(1_000, std::sync::atomic::Ordering::SeqCst);
            let q = format!("chat {chat} question {turn} {}", "words ".repeat(300));
            if turn == 1 && chat % 5 == 0 {
                let png = png_bytes(16, 12, chat as u8);
                let content = json!([{"type": "text", "text": q},
                    {"type": "image_url", "image_url": {"url": data_url("image/png", &png)}}]);
                src.s
                    .history_append(
                        entry(json!({"role": "user", "content": content})),
                        false,
                        false,
                        None,
                        None,
                    )
                    .unwrap();
            } else {
                src.append("user", &q);
            }
            src.append("assistant", &format!("answer {turn} of chat {chat} {}", "text ".repeat(500)));
            if turn == 2 && chat % 4 == 0 {
                src.s
                    .history_branch(
                        5,
                        entry(json!({"role": "assistant", "content": "regenerated"})),
                        false,
                        None,
                    )
                    .unwrap();
            }
        }
        if chat % 7 == 3 {
            let id = src.live()["activeSessionId"].as_str().unwrap().to_owned();
            src.s.sessions_delete(&id, None).unwrap();
        }
        while src.seal_some(&mut folder, 2).is_some() {}
    }
    let segs = folder.segments.clone();
    let blobs: BTreeMap<String, Value> =
        folder.blobs.iter().map(|(k, (m, b))| (k.clone(), json!({"mime": m, "hex": hex(b)}))).collect();
    let doc = json!({
        "segments": segs.iter().map(|s| json!({"dev": s.dev, "seq": s.seq, "ops": s.ops})).collect::<Vec<_>>(),
        "blobs": blobs,
    });
    let path = dir.join("batches.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    (path, segs, folder)
}

/// Child side (does nothing unless started by the parent below): apply every batch, in an order
/// of its own, some twice, fetching pictures when a batch waits for them.
#[test]
fn sync_crash_child_role() {
    let (Ok(db), Ok(batches), Ok(seed)) =
        (std::env::var(CHILD_DB), std::env::var(CHILD_BATCHES), std::env::var(CHILD_SEED))
    else {
        return;
    };
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(batches).unwrap()).unwrap();
    let segs = doc["segments"].as_array().unwrap();
    let mut rng = Rng::new(seed.parse().unwrap());
    let mut order: Vec<usize> = (0..segs.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.range(0, i as u64) as usize);
    }
    for _ in 0..segs.len() / 4 {
        order.push(rng.range(0, segs.len() as u64 - 1) as usize);
    }
    let mut s = Store::open(Path::new(&db)).unwrap();
    for i in order {
        let seg = &segs[i];
        let (dev, seq) = (seg["dev"].as_str().unwrap(), seg["seq"].as_u64().unwrap());
        let ops: Vec<String> =
            seg["ops"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().to_owned()).collect();
        let r = s.sync_apply(dev, seq, &ops).unwrap();
        if let ApplyOutcome::Pending { missing_blobs } = r.outcome {
            for sha in missing_blobs {
                let b = &doc["blobs"][&sha];
                s.sync_put_blob(&sha, b["mime"].as_str().unwrap(), unhex(b["hex"].as_str().unwrap()))
                    .unwrap();
            }
            let r = s.sync_apply(dev, seq, &ops).unwrap();
            assert!(!matches!(r.outcome, ApplyOutcome::Pending { .. }));
        }
    }
    s.close();
}

/// A fresh device database set up for sync, to copy for each round.
fn template(dir: &Path) -> PathBuf {
    let p = dir.join("template.db");
    let mut s = Store::open(&p).unwrap();
    s.sync_setup("dev-target", "target").unwrap();
    s.close();
    p
}

fn fresh(template: &Path, db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::copy(template, db).unwrap();
}

/// What a round's database records as applied must agree with itself after any kill.
fn consistent(db: &Path) -> Result<(), String> {
    let ok = integrity(db);
    if ok != "ok" {
        return Err(format!("integrity_check: {ok}"));
    }
    let mut s = Store::open(db).map_err(|e| e.to_string())?;
    let st = s.sync_status_counts().unwrap();
    let applied = s.sync_applied().unwrap();
    s.close();
    let segs: u64 = applied.iter().map(|a| a.segments.count()).sum();
    let ops: u64 = applied.iter().map(|a| a.ops.count()).sum();
    let counted: (u64, u64) =
        st.peers.iter().fold((0, 0), |acc, p| (acc.0 + p.segments_applied, acc.1 + p.ops_applied));
    if (segs, ops) != counted {
        return Err(format!("recorded as applied {segs} segments / {ops} operations, counted {counted:?}"));
    }
    Ok(())
}

#[test]
fn t34_kill_9_during_apply_leaves_every_batch_applied_exactly_once() {
    let _serial = crate::harness::serial();
    let kills = size("KEEPSAKE_SYNC_KILLS", 100, 500);
    let mut rng = Rng::from_env();
    let seed = rng.seed();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (batches, segs, folder) = make_batches(dir.path());
    let total_ops: usize = segs.iter().map(|s| s.ops.len()).sum();
    // the reference: every batch applied once, no kill
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    let mut reference = Dev::new("dev-ref", clock, 0);
    for s in &segs {
        reference.apply(s, &folder);
    }
    let want = dump(&mut reference.s);
    let tpl = template(dir.path());
    let db = dir.path().join("target.db");
    let exe = std::env::current_exe().unwrap();
    let child_test = format!("{}::sync_crash_child_role", module_path!().split_once("::").unwrap().1);
    let spawn = |db: &Path, seed: u64| {
        Command::new(&exe)
            .args([child_test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DB, db)
            .env(CHILD_BATCHES, &batches)
            .env(CHILD_SEED, seed.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // calibrate: how long one child takes to apply everything
    fresh(&tpl, &db);
    let t0 = Instant::now();
    let st = spawn(&db, 1).wait().unwrap();
    assert!(st.success(), "a child that is not killed applies everything: {st:?}");
    let full = t0.elapsed();
    let (mut killed, mut rounds, mut completed_children) = (0, 0, 0);
    let mut rounds_detail: Vec<usize> = Vec::new();
    fresh(&tpl, &db);
    let mut kills_this_round = 0;
    while killed < kills {
        let mut child = spawn(&db, rng.next_u64());
        // killed within the first quarter of what a whole run takes: several kills a round
        let wait = Duration::from_micros(rng.range(0, full.as_micros() as u64 / 4));
        let deadline = Instant::now() + wait;
        let mut done = None;
        while Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                done = Some(st);
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let finished = match done {
            Some(st) => {
                assert!(st.success(), "KEEPSAKE_SEED={seed}: the child failed: {st:?}");
                true
            }
            None => {
                child.kill().unwrap();
                let st = child.wait().unwrap();
                if st.success() {
                    true
                } else {
                    killed += 1;
                    kills_this_round += 1;
                    false
                }
            }
        };
        if let Err(e) = consistent(&db) {
            panic!("KEEPSAKE_SEED={seed}: after kill {killed}: {e}");
        }
        if finished {
            completed_children += 1;
            // everything applied: exactly once, the same chats as the reference
            let mut s = Store::open(&db).unwrap();
            for seg in &segs {
                let r = s.sync_apply(&seg.dev, seg.seq, &seg.ops).unwrap();
                assert_eq!(
                    r.outcome,
                    ApplyOutcome::Duplicate,
                    "KEEPSAKE_SEED={seed}: segment {} not recorded",
                    seg.seq
                );
            }
            let st = s.sync_status_counts().unwrap();
            let peer = st.peers.iter().find(|p| p.id == "dev-src").unwrap();
            assert_eq!(
                (peer.ops_applied, peer.segments_applied),
                (total_ops as u64, segs.len() as u64),
                "KEEPSAKE_SEED={seed}: operations or segments applied more than once or not at all"
            );
            let got = dump(&mut s);
            s.close();
            assert_eq!(first_difference(&want, &got, "after kills"), None, "KEEPSAKE_SEED={seed}");
            rounds += 1;
            rounds_detail.push(kills_this_round);
            kills_this_round = 0;
            fresh(&tpl, &db);
        }
    }
    eprintln!(
        "sync kill -9 during apply: {killed} kills in {rounds} rounds completed (kills per round {rounds_detail:?}), \
         {} segments / {total_ops} operations per round, one uninterrupted apply {} ms; integrity ok and counts \
         consistent after every kill, every completed round: each segment a duplicate, operations applied once, \
         chats equal to the reference; seed {seed}; {:.1} s",
        segs.len(),
        full.as_millis(),
        started.elapsed().as_secs_f64()
    );
    let _ = completed_children;
}
