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
    let kills = size("KEEPSAKE_SYNC_KILLS", 40, 400);
    let mut rng = Rng::from_env();
    eprintln!("T31: seed {} kills {kills}", rng.seed());
    let mut b = Host::spawn(&dbb);
    let mut acked: Vec<String> = Vec::new();
    let ddir = Folder::new(&dir).device_dir(&dev);
    let (mut mid_write, mut before_seal) = (0, 0);
    let started = Instant::now();
    let temps = |d: &std::path::Path| -> BTreeSet<String> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".tmp"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let blobs_dir = Folder::new(&dir).blobs();
    let (mut segments_before, mut sealed_rounds) = (0, 0);
    for round in 0..kills {
        let mut a = Host::spawn(&dba);
        let first = Instant::now();
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
        // the sync threads start with the first request and the writer first looks 0.3 s later,
        // then every 0.25 s: a kill anywhere in 0.2–0.9 s lands before, during or after a
        // segment (and its pictures) is written
        let (t_seg, t_blob) = (temps(&ddir), temps(&blobs_dir));
        let at = Duration::from_millis(rng.range(200, 900));
        std::thread::sleep(at.saturating_sub(first.elapsed()));
        drop(a); // SIGKILL
        if temps(&ddir).difference(&t_seg).count() + temps(&blobs_dir).difference(&t_blob).count() > 0 {
            mid_write += 1;
        }
        if status(&dba, &no_store())["outbox"].as_u64().unwrap_or(0) > 0 {
            before_seal += 1;
        }
        let n = list_device(&ddir).map(|f| f.segments.len()).unwrap_or(0);
        if n > segments_before {
            segments_before = n;
            sealed_rounds += 1;
        }
    }
    // one last start seals what the kills left
    let mut a = Host::spawn(&dba);
    // the browser's first request opens the database (and starts the sync threads)
    a.ok("history.meta", json!({}));
    let t0 = Instant::now();
    while status(&dba, &no_store())["outbox"] != json!(0) {
        if t0.elapsed() > Duration::from_secs(60) {
            let log =
                std::fs::read_to_string(dba.parent().unwrap().join("keepsake-host.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "a's outbox did not empty within 60 s; a's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
        "T31: {kills} kills in {:?}: {mid_write} left a new temp file (killed while writing a segment or a picture), \
         {before_seal} left operations not sealed, {sealed_rounds} wrote a segment first; {} segments, {} operations sealed once each, {} acknowledged entries \
         all on the other device, 0 lost",
        started.elapsed(),
        files.segments.len(),
        seqs.len(),
        acked.len()
    );
    b.close();
}
