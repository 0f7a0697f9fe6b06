//! What recording costs a write: an append to a long chat, with sync set up and without, on the
//! same machine in the same run (the recorder compares the chat's rows with the state inside the
//! write's transaction, and lays the rows out again only where the state would lay them out
//! otherwise). Printed as figures; the only assertion is a wide bound that tells a working
//! recorder from one that does work per entry for every entry (quadratic) or reads every
//! entry's JSON several times: half a millisecond per entry of the chat, about 25 times the
//! figure of a debug build.
//!
//! Sizes: a chat of `KEEPSAKE_SYNC_COST_ENTRIES` entries (default 1,000, 3,000 with
//! `KEEPSAKE_LONG=1`), 40 timed appends each.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keepsake_host::store::Store;

use super::*;
use crate::harness::{quantile, serial, size};

fn append(s: &mut Store, role: &str, content: String) {
    s.history_append(entry(json!({"role": role, "content": content})), false, false, None, None).unwrap();
}

/// A chat of `n` entries of about 1 KB each, then 40 timed appends to it (sorted).
fn timed_appends(s: &mut Store, n: usize) -> Vec<Duration> {
    let text = "a line of a long conversation about fjords and glaciers ".repeat(18);
    for i in 0..n {
        append(s, if i % 2 == 0 { "user" } else { "assistant" }, format!("{i} {text}"));
    }
    let mut out: Vec<Duration> = (0..40)
        .map(|i| {
            let t = Instant::now();
            append(s, "user", format!("timed {i}"));
            t.elapsed()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn recording_an_append_to_a_long_chat_costs_little() {
    let _serial = serial();
    let n = size("KEEPSAKE_SYNC_COST_ENTRIES", 1_000, 3_000);
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    let dir = tempfile::tempdir().unwrap();
    let mut plain = Store::open(&dir.path().join("plain.db")).unwrap();
    let c = Arc::clone(&clock);
    plain.set_clock(Arc::new(move || c.fetch_add(1, Ordering::SeqCst)));
    let without = timed_appends(&mut plain, n);
    let mut synced = Dev::new("dev-a", Arc::clone(&clock), 0);
    let with = timed_appends(&mut synced.s, n);
    let counts = synced.s.sync_status_counts().unwrap();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (p50a, p95a, p50b, p95b) =
        (quantile(&without, 0.5), quantile(&without, 0.95), quantile(&with, 0.5), quantile(&with, 0.95));
    eprintln!(
        "sync cost: an append to a chat of {n} entries: without sync p50 {:.2} ms p95 {:.2} ms; with sync p50 {:.2} ms \
         p95 {:.2} ms ({} operations recorded, rows laid out again after {} writes)",
        ms(p50a),
        ms(p95a),
        ms(p50b),
        ms(p95b),
        counts.recorded,
        counts.relaid,
    );
    assert_eq!(counts.relaid, 0, "appends never leave rows the state lays out otherwise");
    let bound = p50a * 50 + Duration::from_micros(500) * n as u32;
    assert!(p50b < bound, "recording made an append {p50b:?} (without sync {p50a:?}, bound {bound:?}): it does work per entry for every entry");
}
