//! Sync's figures (issue 31; BENCHMARKS.md "Sync", `BENCH_ONLY=sync ./bench.sh`): a device with
//! a realistic corpus (chats of English and CJK text, one in 20 with a screenshot) runs `sync
//! init`, its host seals everything into the folder; then what the folder holds per byte of the
//! database and per byte of content, and a new device that joins that folder: seconds until it
//! has caught up (from segments: a device writes a checkpoint only after 1,000 segments of its
//! own), its host's peak RSS, and its apply throughput (operations/s, MB/s of segment bytes);
//! then, from a checkpoint (the first device's writer repairs a segment damaged on purpose with
//! one), a third device the same way — a checkpoint whose chats hold pictures used to wait for
//! them forever (the reader fetched pictures only for segments).
//! The release host when there is one (`timing_host_bin`); prints the figures and one
//! `Sync figures json:` line for bench/sync.mjs. Small in CI; `KEEPSAKE_SYNC_SESSIONS=N` (or
//! `KEEPSAKE_LONG=1`: 10,000) for the bench.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::common::*;
use crate::harness::*;
use crate::settings::secrets::cli_env_bin;

const PER: usize = 10;
const CHARS: usize = 1000;
/// One session in this many has a screenshot.
const PICTURE_EVERY: usize = 20;

/// Bytes of the files under `dir` whose name `keep` accepts (recursively).
fn bytes_of(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> (u64, u64) {
    let (mut n, mut b) = (0, 0);
    for (p, bytes) in files(dir) {
        if keep(&p) {
            n += 1;
            b += bytes.len() as u64;
        }
    }
    (n, b)
}

/// The database file's size after its WAL is folded in (nothing beside it).
fn db_bytes(db: &Path) -> u64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    drop(c);
    std::fs::metadata(db).unwrap().len()
}

/// `n` sessions imported into `db` by `bin` in chunks of 1,000; the bytes of their content: text
/// (UTF-8) and pictures.
fn corpus(bin: &Path, db: &Path, n: usize) -> (u64, u64, usize) {
    let filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, 文档 検索 同步. ";
    let (mut text_bytes, mut picture_bytes, mut pictures) = (0u64, 0u64, 0usize);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    for start in (0..n).step_by(1000) {
        let mut images = serde_json::Map::new();
        let sessions: Vec<Value> = (start..n.min(start + 1000))
            .map(|s| {
                let entries: Vec<Value> = (0..PER)
                    .map(|i| {
                        let mut t = format!("fig {s} {i} ");
                        while t.len() < CHARS {
                            t.push_str(filler);
                        }
                        text_bytes += t.len() as u64;
                        if i == 0 && s % PICTURE_EVERY == 0 {
                            // a screenshot: a page of flat colour with 30 rows of photo/text noise
                            let png = screenshot_png(1280, 720, 30, s as u64 + 1);
                            let sha = sha256_hex(&png);
                            picture_bytes += png.len() as u64;
                            pictures += 1;
                            images
                                .insert(sha.clone(), json!({"mime": "image/png", "data": base64_std(&png)}));
                            let url = format!("keepsake-image:sha256:{sha}");
                            json!({"role": "user", "content": [text_part(&t), image_part(&url)]})
                        } else if i % 2 == 0 {
                            user(&t)
                        } else {
                            assistant(&t)
                        }
                    })
                    .collect();
                json!({"id": format!("fig-{s:05}"), "name": format!("fig chat {s}"),
                       "createdAt": 1_700_000_000_000i64 + s as i64, "pinned": false, "entries": entries})
            })
            .collect();
        let doc =
            json!({"format": "keepsake.sessions", "version": 2, "sessions": sessions, "images": images});
        let p = db.with_file_name("corpus.json");
        std::fs::write(&p, doc.to_string()).unwrap();
        let (code, out, err) = cli_env_bin(bin, db, &["import", p.to_str().unwrap()], &no_store());
        assert_eq!(code, 0, "{out}{err}");
        std::fs::remove_file(&p).unwrap();
    }
    (text_bytes, picture_bytes, pictures)
}

fn base64_std(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Poll `h`'s `sync.status` until `f` accepts it; the status and when it did.
fn until(h: &mut Host, limit: Duration, what: &str, f: &mut dyn FnMut(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let v = h.ok("sync.status", json!({}));
        if f(&v) {
            return v;
        }
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}: {v:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a new device's catching up measured.
struct Joined {
    ms: u64,
    peak_kib: u64,
    ops: u64,
}

/// `sync join` on a new database `db`, then its host until it has applied every one of the
/// `segments` of the device "laptop" (and holds `n` chats); the time from the host's start, its
/// peak RSS and the operations it counted.
#[allow(clippy::too_many_arguments)]
fn join_and_catch_up(
    bin: &Path,
    db: &Path,
    folder: &Path,
    key: &str,
    name: &str,
    segments: u64,
    n: usize,
    limit: Duration,
) -> Joined {
    let (code, out, err) = cli_env_bin(
        bin,
        db,
        &["sync", "join", "--folder", &folder.display().to_string(), "--key", key, "--name", name],
        &no_store(),
    );
    assert_eq!(code, 0, "sync join: {out}{err}");
    let s = Instant::now();
    let mut h = Host::spawn_bin(bin, db);
    let laptop =
        |v: &Value| v["devices"].as_array().and_then(|d| d.iter().find(|d| d["name"] == "laptop")).cloned();
    let st = until(&mut h, limit, &format!("{name} catches up"), &mut |v| {
        laptop(v).is_some_and(|d| {
            d["segments"].as_u64() == Some(segments)
                && d["applied"] == d["segments"]
                && d["pending"] == json!(0)
        })
    });
    let ms = s.elapsed().as_millis() as u64;
    let peak_kib = h.peak_rss_kib();
    assert!(st["problems"].as_array().unwrap().is_empty(), "{name}: {st:#}");
    let ops = laptop(&st).unwrap()["opsApplied"].as_u64().unwrap();
    assert_eq!(drawer(&mut h).len(), n, "every chat reached {name}");
    h.close();
    Joined { ms, peak_kib, ops }
}

#[test]
fn t36_sync_figures_folder_bytes_apply_throughput_and_a_new_device_catching_up() {
    let _serial = serial();
    let n = size("KEEPSAKE_SYNC_SESSIONS", 200, 10_000);
    let (bin, release, note) = timing_host_bin();
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync/Keepsake");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let built = Instant::now();
    let (text_bytes, picture_bytes, pictures) = corpus(&bin, &dba, n);
    let db_before = db_bytes(&dba);
    let build_s = built.elapsed().as_secs_f64();

    // device A: `sync init` records every chat as its first operations; its host seals them
    let s = Instant::now();
    let (code, out, err) = cli_env_bin(
        &bin,
        &dba,
        &["sync", "init", "--folder", &folder.display().to_string(), "--name", "laptop"],
        &no_store(),
    );
    assert_eq!(code, 0, "sync init: {out}{err}");
    let init_ms = s.elapsed().as_millis() as u64;
    let key = key_in(&out).expect("the key");
    let mut a = Host::spawn_bin(&bin, &dba);
    let s = Instant::now();
    let limit = Duration::from_secs(60 + n as u64 / 5);
    let st = until(&mut a, limit, "A seals its outbox", &mut |v| v["outbox"] == json!(0));
    let seal_ms = s.elapsed().as_millis() as u64;
    let seal_peak = a.peak_rss_kib();
    assert!(st["problems"].as_array().unwrap().is_empty(), "{st:#}");
    a.close();
    let db_after = db_bytes(&dba);
    let keepsake = folder.join("keepsake");
    let ext = |p: &Path, e: &str| p.extension().is_some_and(|x| x == e);
    let (segments, segment_bytes) = bytes_of(&keepsake, &|p| ext(p, "seg"));
    let (checkpoints, checkpoint_bytes) = bytes_of(&keepsake, &|p| ext(p, "ckp"));
    let (blobs, blob_bytes) = bytes_of(&keepsake.join("blobs"), &|_| true);
    let (_, all_bytes) = bytes_of(&keepsake, &|_| true);
    assert_eq!(blobs as usize, pictures, "one blob per picture");

    // device B joins the folder; its host catches up from A's segments
    let joined = join_and_catch_up(&bin, &dbb, &folder, &key, "desk", segments, n, limit);
    let (caught_ms, peak, ops) = (joined.ms, joined.peak_kib, joined.ops);
    let db_b = db_bytes(&dbb);

    // from a checkpoint: A's newest segment damaged in the folder, A's writer makes it good at its
    // next start with a checkpoint of the whole state (the one a device writes every 1,000
    // segments); device C joins and applies it
    let newest = files(&keepsake).into_iter().map(|(p, _)| p).filter(|p| ext(p, "seg")).max().unwrap();
    let mut bytes = std::fs::read(&newest).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&newest, &bytes).unwrap();
    let mut a = Host::spawn_bin(&bin, &dba);
    a.ok("sync.status", json!({})); // the host opens the database (and starts sync) at its first request
    let s = Instant::now();
    let ckp = loop {
        let (k, b) = bytes_of(&keepsake, &|p| ext(p, "ckp"));
        if k > 0 {
            break b;
        }
        assert!(s.elapsed() < limit, "no checkpoint after a damaged segment");
        std::thread::sleep(Duration::from_millis(50));
    };
    let ckp_ms = s.elapsed().as_millis() as u64;
    a.close();
    let dbc = t.path().join("c/keepsake.db");
    let from_ckp = join_and_catch_up(&bin, &dbc, &folder, &key, "tablet", segments, n, limit);

    let content = text_bytes + picture_bytes;
    let secs = caught_ms as f64 / 1000.0;
    eprintln!(
        "Sync figures: {n} sessions × {PER} entries of ~{CHARS} chars, {pictures} screenshots ({:.1} MiB); database {:.1} MiB \
         ({:.1} MiB with sync's tables; built in {build_s:.0} s); {note}. sync init {init_ms} ms; A sealed everything in \
         {seal_ms} ms (peak RSS {} MiB). Folder {:.1} MiB = {segments} segments {:.1} MiB + {blobs} pictures {:.1} MiB + \
         {checkpoints} checkpoints {:.1} MiB: {:.2} bytes per database byte, {:.2} per content byte. New device: caught up \
         from segments in {secs:.1} s, peak RSS {} MiB, {ops} operations: {:.0} ops/s, \
         {:.1} MB/s of segments over the whole catch-up; its database {:.1} MiB",
        picture_bytes as f64 / 1048576.0,
        db_before as f64 / 1048576.0,
        db_after as f64 / 1048576.0,
        seal_peak / 1024,
        all_bytes as f64 / 1048576.0,
        segment_bytes as f64 / 1048576.0,
        blob_bytes as f64 / 1048576.0,
        checkpoint_bytes as f64 / 1048576.0,
        all_bytes as f64 / db_before as f64,
        all_bytes as f64 / content as f64,
        peak / 1024,
        ops as f64 / secs,
        segment_bytes as f64 / 1e6 / secs,
        db_b as f64 / 1048576.0,
    );
    eprintln!(
        "Sync figures: from a checkpoint ({:.1} MiB, written {ckp_ms} ms after A's restart): a third device caught up in \
         {:.1} s, peak RSS {} MiB, {} operations",
        ckp as f64 / 1048576.0,
        from_ckp.ms as f64 / 1000.0,
        from_ckp.peak_kib / 1024,
        from_ckp.ops
    );
    // the same figures for bench/sync.mjs (`BENCH_ONLY=sync ./bench.sh`, BENCHMARKS.md)
    eprintln!(
        "Sync figures json: {}",
        json!({"sessions": n, "entries": PER, "chars": CHARS, "pictures": pictures, "pictureEvery": PICTURE_EVERY, "host": note, "release": release,
            "content": {"textBytes": text_bytes, "pictureBytes": picture_bytes},
            "db": {"bytes": db_before, "withSyncBytes": db_after, "newDeviceBytes": db_b},
            "folder": {"bytes": all_bytes, "segments": segments, "segmentBytes": segment_bytes, "blobs": blobs,
                "blobBytes": blob_bytes, "checkpoints": checkpoints, "checkpointBytes": checkpoint_bytes},
            "seal": {"initMs": init_ms, "ms": seal_ms, "peakKiB": seal_peak},
            "join": {"from": if checkpoints > 0 { "a checkpoint and the segments after it" } else { "segments" }, "ms": caught_ms, "ops": ops, "peakKiB": peak},
            "joinFromCheckpoint": {"checkpointBytes": ckp, "writtenMs": ckp_ms, "ms": from_ckp.ms, "ops": from_ckp.ops, "peakKiB": from_ckp.peak_kib}})
    );
}
