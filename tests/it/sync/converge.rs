//! Two machines through real Syncthing (docs/sync.md "Pair two machines with Syncthing";
//! reliability.md T32): two Syncthing instances on loopback (tests/it/sync/syncthing.rs), two
//! hosts with their own databases, random edits on both sides, including a stretch with one
//! instance paused; they converge with 0 acknowledged entries lost, and the time from a write to
//! its appearance on the other side is printed (p50, max), also as one `T32 figures json:` line
//! that bench/sync.mjs reads (BENCHMARKS.md "Sync"). Short in CI; `KEEPSAKE_LONG=1` (or
//! `KEEPSAKE_SYNC_EDITS=N`) runs more.

use std::time::{Duration, Instant};

use serde_json::json;

use super::common::*;
use super::syncthing::{available, pair, wait_for};
use crate::harness::*;

/// Wait until `h`'s search finds `word`; how long it took.
fn appears(h: &mut Host, word: &str, limit: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let r = h.ok("sessions.list", json!({"query": word, "limit": 5}));
        if r["total"].as_u64().unwrap_or(0) > 0 {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < limit, "{word} did not arrive within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[test]
fn t32_two_hosts_through_real_syncthing_converge_with_nothing_lost() {
    if !available() {
        return;
    }
    let _serial = serial();
    let t = tempfile::tempdir().unwrap();
    let (fa, fb) = (t.path().join("st-a/Keepsake"), t.path().join("st-b/Keepsake"));
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let (sa, sb) = pair(&fa, &fb);
    let key = init(&dba, &fa, "laptop", &no_store());
    // the folder reaches b through Syncthing before b can join
    wait_for("the keycheck on b", Duration::from_secs(120), || {
        fb.join("keepsake/keycheck").is_file().then_some(())
    });
    join(&dbb, &fb, &key, "desk", &no_store());
    // the release host when it is current (bench/sync.mjs gives it), else the debug one
    let (bin, release, note) = timing_host_bin();
    let mut a = Host::spawn_bin(&bin, &dba);
    let mut b = Host::spawn_bin(&bin, &dbb);
    let mut rng = Rng::from_env();
    let edits = size("KEEPSAKE_SYNC_EDITS", 12, 200);
    eprintln!("T32: seed {} edits {edits} per side", rng.seed());
    let mut acked: Vec<String> = Vec::new();
    let mut latencies: Vec<Duration> = Vec::new();
    let word = |rng: &mut Rng, side: &str, i: usize| format!("w{side}{i}x{}", rng.next_u64() % 1_000_000_007);
    // measured: one write at a time, timed until the other side's search finds it
    for i in 0..edits {
        let (from, to, side) = if i % 2 == 0 { (&mut a, &mut b, "a") } else { (&mut b, &mut a, "b") };
        let w = word(&mut rng, side, i);
        from.ok("history.append", json!({"entry": user(&format!("probe {w}"))}));
        acked.push(w.clone());
        latencies.push(appears(to, &w, Duration::from_secs(120)));
        if rng.range(0, 3) == 0 {
            from.ok("history.clear", json!({}));
        }
    }
    // a stretch with a's Syncthing paused: both sides keep writing
    sa.pause(&sb);
    wait_for("the pause", Duration::from_secs(30), || (!sa.connected(&sb)).then_some(()));
    for i in 0..edits {
        for (h, side) in [(&mut a, "pa"), (&mut b, "pb")] {
            let w = word(&mut rng, side, i);
            h.ok("history.append", json!({"entry": assistant(&format!("while paused {w}"))}));
            acked.push(w);
            if rng.range(0, 4) == 0 {
                h.ok("history.clear", json!({}));
            }
        }
    }
    let resumed = Instant::now();
    sa.resume(&sb);
    // converged: every acknowledged word on both sides
    for w in &acked {
        appears(&mut a, w, Duration::from_secs(300));
        appears(&mut b, w, Duration::from_secs(300));
    }
    let catch_up = resumed.elapsed();
    wait_for("syncthing: nothing needed either way", Duration::from_secs(120), || {
        (sa.need_bytes(&sb) == Some(0) && sb.need_bytes(&sa) == Some(0)).then_some(())
    });
    let (ta, tb) = (all_texts(&mut a), all_texts(&mut b));
    let lost: Vec<&String> = acked
        .iter()
        .filter(|w| !ta.iter().any(|x| x.contains(w.as_str())) || !tb.iter().any(|x| x.contains(w.as_str())))
        .collect();
    assert!(lost.is_empty(), "lost: {lost:?}");
    for (h, db) in [(&mut a, &dba), (&mut b, &dbb)] {
        let v = h.ok("sync.status", json!({}));
        assert!(v["problems"].as_array().unwrap().is_empty(), "{}: {}", db.display(), v["problems"]);
    }
    let (p50, max) = (pct(&mut latencies, 0.5), pct(&mut latencies, 1.0));
    eprintln!(
        "T32: {} acknowledged entries on both sides, 0 lost; write → other side over Syncthing: p50 {p50:?}, max {max:?} \
         ({} probes); after the paused stretch ({} writes) both sides had everything {catch_up:?} after resume",
        acked.len(),
        latencies.len(),
        2 * edits
    );
    // the same figures for bench/sync.mjs (`BENCH_ONLY=sync ./bench.sh`, BENCHMARKS.md "Sync")
    let ms = |d: Duration| d.as_millis() as u64;
    eprintln!(
        "T32 figures json: {}",
        json!({"edits": edits, "probes": latencies.len(), "p50Ms": ms(p50), "maxMs": ms(max),
            "pausedWrites": 2 * edits, "catchUpMs": ms(catch_up), "acked": acked.len(), "lost": lost.len(),
            "syncthing": super::syncthing::version(), "host": note, "release": release})
    );
    a.close();
    b.close();
}
