//! T26, the memory budget of one request: peak host RSS (`VmHWM` from `/proc/<pid>/status`, a
//! fresh host per case) for the largest frames a caller can send — two 64 MiB structure bombs
//! (`[0,0,…]`, 33.5 M elements, and `[{},{},…]`, 16.7 M) and the largest valid imports (one frame
//! of pictures, one frame of text at the element limit) — with what each got back. The bombs are
//! refused with `too_large` naming the limit, before any tree is built, and nothing is stored.
//! Every case stays within 8 × its frame size above the idle host — or one maximal frame, 64 MiB,
//! when that is more (a dense frame of small values costs 20–60 × its bytes as a tree; the value
//! limit keeps that under 64 MiB) — and under 768 MiB in all.
//!
//! Prints `T26: …` lines and a table; RELIABILITY.md has the figures.
use crate::harness::*;

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

const FRAME_CAP: usize = 64 * 1024 * 1024;
const MIB: f64 = 1024.0 * 1024.0;

/// `{"id":"mem","op":"settings.set","args":{"map":{"bomb":<body>}}}` padded to `total` bytes with
/// `repeat` (the array's element) — the shape the review sent.
fn bomb(repeat: &str, total: usize) -> (Vec<u8>, usize) {
    let head = br#"{"id":"mem","op":"settings.set","args":{"map":{"bomb":["#;
    let tail = b"]}}}";
    let room = total - head.len() - tail.len();
    let per = repeat.len() + 1;
    let n = (room + 1) / per;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(head);
    for i in 0..n {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(repeat.as_bytes());
    }
    b.extend_from_slice(tail);
    (b, n)
}

struct Case {
    name: String,
    frame: usize,
    outcome: String,
    idle_kib: u64,
    peak_kib: u64,
    stored: String,
}

/// Send `frame` to a fresh host, wait for the reply, and measure.
fn measure(name: &str, frame: &[u8], stored: impl Fn(&std::path::Path) -> String) -> Case {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.hello();
    let idle_kib = h.rss_kib();
    assert!(h.reset_peak_rss(), "cannot reset VmHWM through /proc/<pid>/clear_refs");
    let started = Instant::now();
    h.send_frame(frame);
    let reply = h.reply_for(&json!("mem"), Duration::from_secs(300));
    let peak_kib = h.peak_rss_kib();
    let outcome = if reply["ok"] == json!(true) {
        "ok".to_owned()
    } else {
        format!(
            "{}: {}",
            reply["error"]["code"].as_str().unwrap_or("?"),
            reply["error"]["message"].as_str().unwrap_or("")
        )
    };
    assert_eq!(h.close().0, Some(0), "{name}: the host did not exit cleanly");
    eprintln!("{name}: {:.1} s", started.elapsed().as_secs_f64());
    Case { name: name.to_owned(), frame: frame.len(), outcome, idle_kib, peak_kib, stored: stored(&db) }
}

fn settings_rows(db: &std::path::Path) -> String {
    let n: i64 =
        sql(db).query_row("SELECT count(*) FROM settings WHERE key = 'bomb'", [], |r| r.get(0)).unwrap();
    format!("settings rows {n}")
}

fn sessions_rows(db: &std::path::Path) -> String {
    let c = sql(db);
    let s: i64 = c.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)).unwrap();
    let i: i64 = c.query_row("SELECT count(*) FROM images", [], |r| r.get(0)).unwrap();
    format!("sessions {s}, images {i}")
}

/// An export document (`keepsake.sessions` v2) of `sessions` sessions × `entries` short text
/// entries, plus `pictures` noise PNGs of `side`² pixels, one per session from the first on.
fn export_doc(sessions: usize, entries: usize, pictures: usize, side: u32) -> Value {
    let mut images = serde_json::Map::new();
    let mut refs = Vec::new();
    for p in 0..pictures {
        let png = noise_png(side, side, p as u64 + 1);
        let sha = sha256_hex(&png);
        refs.push(format!("keepsake-image:sha256:{sha}"));
        images.insert(
            sha,
            json!({"mime": "image/png", "data": base64::engine::general_purpose::STANDARD.encode(&png)}),
        );
    }
    let list: Vec<Value> = (0..sessions)
        .map(|s| {
            let mut body: Vec<Value> = (0..entries)
                .map(|e| {
                    if e % 2 == 0 {
                        json!({"role": "user", "content": format!("q{s}.{e}")})
                    } else {
                        json!({"role": "assistant", "content": format!("a{s}.{e}")})
                    }
                })
                .collect();
            if let Some(r) = refs.get(s) {
                body.push(json!({"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": r}}
                ]}));
            }
            json!({"id": format!("m{s}"), "name": format!("M{s}"), "createdAt": s, "pinned": false, "entries": body})
        })
        .collect();
    json!({"format": "keepsake.sessions", "version": 2, "exportedAt": "2026-12-04T00:00:00Z",
           "sessions": list, "images": images})
}

fn import_frame(doc: &Value) -> Vec<u8> {
    json!({"id": "mem", "op": "storage.import", "args": {"document": doc}}).to_string().into_bytes()
}

#[test]
fn t26_one_request_stays_within_its_memory_budget() {
    let started = Instant::now();
    let mut cases = Vec::new();

    // the two bombs, each just under the 64 MiB frame cap
    let (zeros, n0) = bomb("0", FRAME_CAP - 16);
    cases.push(measure(&format!("[0,0,…] {n0} elements"), &zeros, settings_rows));
    drop(zeros);
    let (objs, n1) = bomb("{}", FRAME_CAP - 16);
    cases.push(measure(&format!("[{{}},{{}},…] {n1} elements"), &objs, settings_rows));
    drop(objs);

    // the largest valid imports: one frame of pictures (fourteen 1000² noise PNGs as fit under
    // the cap), and one frame of text entries just under the element limit
    let pictures = export_doc(14, 2, 14, 1000);
    let frame = import_frame(&pictures);
    assert!(frame.len() < FRAME_CAP, "picture import is {} bytes", frame.len());
    cases.push(measure("import: 14 pictures", &frame, sessions_rows));
    drop(frame);
    let text = export_doc(300, 60, 0, 0);
    let frame = import_frame(&text);
    cases.push(measure("import: 300 sessions × 60 entries", &frame, sessions_rows));
    drop(frame);
    // ten times that in one frame is over the value limit: refused whole, nothing stored (the
    // extension sends such a file in pieces)
    let text = export_doc(3_000, 60, 0, 0);
    let frame = import_frame(&text);
    cases.push(measure("import: 3,000 sessions × 60 entries", &frame, sessions_rows));
    drop(frame);

    eprintln!(
        "\n| case | frame | reply | idle RSS | peak RSS | peak − idle | (peak − idle) / frame | stored |"
    );
    eprintln!("|---|---:|---|---:|---:|---:|---:|---|");
    let mut over = Vec::new();
    for c in &cases {
        let growth = c.peak_kib.saturating_sub(c.idle_kib) as f64 * 1024.0;
        let ratio = growth / c.frame as f64;
        // the reply up to the limit it names ("… over the limit of N")
        let short = match c.outcome.find("over the limit of ") {
            Some(at) => {
                let rest = &c.outcome[at + "over the limit of ".len()..];
                let digits = rest.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(rest.len());
                &c.outcome[..at + "over the limit of ".len() + digits]
            }
            None => c.outcome.as_str(),
        };
        eprintln!(
            "| {} | {:.1} MiB | {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.2} | {} |",
            c.name,
            c.frame as f64 / MIB,
            short,
            c.idle_kib as f64 / 1024.0,
            c.peak_kib as f64 / 1024.0,
            growth / MIB,
            ratio,
            c.stored
        );
        // the budget: 8 × the frame, or one maximal frame (64 MiB) when that is more — a
        // dense frame of small values costs 20–60 × its bytes as a tree, which the value
        // limit keeps under 64 MiB — and 768 MiB for the whole process
        if growth > (8.0 * c.frame as f64).max(FRAME_CAP as f64) || c.peak_kib > 768 * 1024 {
            over.push(format!(
                "{}: peak {:.1} MiB, {ratio:.2} × the frame",
                c.name,
                c.peak_kib as f64 / 1024.0
            ));
        }
    }
    let worst = cases.iter().map(|c| c.peak_kib).max().unwrap_or(0);
    eprintln!(
        "T26: {} cases, worst peak RSS {:.1} MiB (limit 768), over budget (max(8 × frame, 64 MiB) above idle) {}, {:.1} s",
        cases.len(),
        worst as f64 / 1024.0,
        over.len(),
        started.elapsed().as_secs_f64()
    );
    // the bombs are refused by the structural limit, and nothing of them is stored
    for c in &cases[..2] {
        assert!(c.outcome.starts_with("too_large"), "{}: {}", c.name, c.outcome);
        assert!(c.outcome.contains("limit"), "{}: the message names no limit: {}", c.name, c.outcome);
        assert_eq!(c.stored, "settings rows 0", "{}", c.name);
    }
    // the valid imports are stored whole
    assert_eq!(cases[2].outcome, "ok", "{}", cases[2].name);
    assert_eq!(cases[2].stored, "sessions 14, images 14");
    assert_eq!(cases[3].outcome, "ok", "{}", cases[3].name);
    assert_eq!(cases[3].stored, "sessions 300, images 0");
    assert!(
        cases[4].outcome.starts_with("too_large") && cases[4].outcome.contains("pieces"),
        "{}",
        cases[4].outcome
    );
    assert_eq!(cases[4].stored, "sessions 0, images 0");
    assert!(over.is_empty(), "{}", over.join("\n"));
}
