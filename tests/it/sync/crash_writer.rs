//! kill -9 of a host while it writes segments, hundreds of times (docs/sync.md "How it runs";
//! reliability.md T31): nothing acknowledged is lost, no operation is sealed twice, and the other
//! device applies every segment exactly once. CI runs a smaller count; `KEEPSAKE_LONG=1` more
//! (`KEEPSAKE_SYNC_KILLS=N` any).
//!
//! Each round starts the host on device A, appends a few entries (some with a picture, so a
//! segment's pictures are being written too), and kills it with SIGKILL at a random moment within
//! the writer's first tick after the last acknowledged write. Device B's host runs all along and
//! applies what arrives. At the end A's segments are opened with the key (the library's own
//! reader): their operation numbers run 1..N with no gap and no repeat, A has nothing left to
//! seal, B applied every segment, and B holds every acknowledged entry.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;

use super::common::*;
use super::syncthing::wait_for;
use crate::harness::*;
use keepsake_host::sync::layout::{context, list_device, Folder};
use keepsake_host::sync::payload::{self, Segment};
use keepsake_host::sync::seal::Kind;
use keepsake_host::sync::{folder, key};

#[test]
fn t31_kill_9_while_writing_segments_loses_nothing_and_applies_nothing_twice() {
    let _serial = serial();
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let key_text = init(&dba, &dir, "a", &no_store());
    join(&dbb, &dir, &key_text, "b", &no_store());
    let dev = status(&dba, &no_store())["device"]["id"].as_str().unwrap().to_owned();
    let kills = size("KEEPSAKE_SYNC_KILLS", 60, 400);
    let mut rng = Rng::from_env();
    eprintln!("T31: seed {} kills {kills}", rng.seed());
    let mut b = Host::spawn(&dbb);
    let mut acked: Vec<String> = Vec::new();
    let ddir = Folder::new(&dir).device_dir(&dev);
    let (mut mid_write, mut before_seal) = (0, 0);
    let started = Instant::now();
    for round in 0..kills {
        let mut a = Host::spawn(&dba);
        for i in 0..rng.range(1, 4) {
            let text = format!("ack-{round}-{i}-{}", rng.next_u64() % 1_000_000);
            let entry = if rng.range(0, 3) == 0 {
                let png = noise_png(16, 16, rng.next_u64());
                json!({"role": "user", "content": [text_part(&text), image_part(&data_url("image/png", &png))]})
            } else {
                user(&text)
            };
            a.ok("history.append", json!({"entry": entry}));
            acked.push(text);
        }
        if rng.range(0, 4) == 0 {
            a.ok("history.clear", json!({}));
        }
        // the writer looks every 250 ms: a kill within that window lands before, during or after
        // a segment (and its pictures) is written
        std::thread::sleep(Duration::from_millis(rng.range(0, 320)));
        drop(a); // SIGKILL
        let temps = std::fs::read_dir(&ddir)
            .map(|rd| rd.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".tmp")).count())
            .unwrap_or(0);
        if temps > 0 {
            mid_write += 1;
        }
        if status(&dba, &no_store())["outbox"].as_u64().unwrap_or(0) > 0 {
            before_seal += 1;
        }
    }
    // one last start seals what the kills left
    let a = Host::spawn(&dba);
    wait_for("a's outbox to empty", Duration::from_secs(60), || {
        (status(&dba, &no_store())["outbox"] == json!(0)).then_some(())
    });
    drop(a);
    // A's segments, opened with the key: op numbers 1..N, no gap, no repeat
    let k = key::from_text(&key_text).unwrap();
    let files = list_device(&ddir).unwrap();
    let mut seqs: Vec<u64> = Vec::new();
    for &n in &files.segments {
        let bytes = folder::read_sealed(
            &Folder::new(&dir).segment(&dev, n),
            Kind::Segment,
            &context(Kind::Segment, &dev, n),
            &k,
        )
        .unwrap_or_else(|e| panic!("segment {n}: {e}"));
        let s: Segment = payload::from_bytes(&bytes).unwrap();
        s.check(&dev, n).unwrap();
        seqs.extend(s.first_op..=s.last_op);
    }
    let unique: BTreeSet<u64> = seqs.iter().copied().collect();
    assert_eq!(unique.len(), seqs.len(), "an operation was sealed twice");
    assert_eq!(
        unique.iter().copied().collect::<Vec<_>>(),
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "a gap"
    );
    // B applied every segment, and holds every acknowledged entry
    let report = wait_for("b to apply every segment", Duration::from_secs(120), || {
        let v = b.ok("sync.status", json!({}));
        let d = v["devices"].as_array()?.iter().find(|d| d["id"] == json!(dev))?.clone();
        (d["pending"] == json!(0) && d["applied"].as_u64() == Some(files.segments.len() as u64)).then_some(v)
    });
    let texts = all_texts(&mut b);
    let lost: Vec<&String> = acked.iter().filter(|t| !texts.iter().any(|x| x.contains(t.as_str()))).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged entries lost on the other device: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    assert!(report["problems"].as_array().unwrap().is_empty(), "{}", report["problems"]);
    eprintln!(
        "T31: {kills} kills in {:?}: {mid_write} left a temp file (killed mid-write), {before_seal} before the seal; \
         {} segments, {} operations sealed once each, {} acknowledged entries all on the other device, 0 lost",
        started.elapsed(),
        files.segments.len(),
        seqs.len(),
        acked.len()
    );
    b.close();
}
