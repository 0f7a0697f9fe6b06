//! The byte-budget pass `history.boundImages` (storage-model §6.5, §2.6 garbage collection,
//! §10 invariants 5–6, §11.19) through the real binary over pipes on a temp database. Pixels are
//! never destroyed (§12.8): a part pointed at a thumbnail and each label keep their original as
//! `originalUrl`, and the original blob lives as long as the entry (`tests/it/images/pixels.rs` has
//! the large pictures, the lightbox's read, the export and request bodies).
use crate::harness::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BUDGET: u64 = 8_388_608;
const REF_PREFIX: &str = "keepsake-image:sha256:";

// ---------------------------------------------------------------------------------------------
// helpers

fn start() -> (tempfile::TempDir, PathBuf, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.meta", json!({}));
    (dir, db, h)
}

fn image_ref(bytes: &[u8]) -> String {
    format!("{REF_PREFIX}{}", sha256_hex(bytes))
}

fn sha_of(url: &str) -> Option<&str> {
    url.strip_prefix(REF_PREFIX)
}

fn png_url(bytes: &[u8]) -> String {
    data_url("image/png", bytes)
}

fn image_entry(text: &str, urls: &[String]) -> Value {
    let mut parts = vec![text_part(text)];
    parts.extend(urls.iter().map(|u| image_part(u)));
    json!({"role": "user", "content": parts})
}

fn append(h: &mut Host, entry: Value) {
    h.ok("history.append", json!({ "entry": entry }));
}

fn live(h: &mut Host) -> Vec<Value> {
    h.ok("history.get", json!({"images": "ref"}))["entries"].as_array().expect("entries").clone()
}

fn is_image_part(p: &Value) -> bool {
    p["type"] == "image_url"
}

/// The URL of an image part in either form.
fn part_url(p: &Value) -> String {
    match &p["image_url"] {
        Value::String(s) => s.clone(),
        o => o["url"].as_str().unwrap_or_default().to_owned(),
    }
}

/// The image URLs of an entry, in order.
fn image_urls(e: &Value) -> Vec<String> {
    match &e["content"] {
        Value::Array(parts) => parts.iter().filter(|p| is_image_part(p)).map(part_url).collect(),
        _ => Vec::new(),
    }
}

#[derive(Debug, Clone)]
struct Blob {
    mime: String,
    width: Option<i64>,
    height: Option<i64>,
    byte_length: i64,
    is_thumbnail: i64,
    source: Option<String>,
    bytes: Vec<u8>,
}

fn blob(db: &Path, sha: &str) -> Option<Blob> {
    use rusqlite::OptionalExtension;
    sql(db)
        .query_row(
            "SELECT mime, width, height, byte_length, is_thumbnail, source_sha256, bytes FROM images WHERE sha256 = ?1",
            [sha],
            |r| {
                Ok(Blob {
                    mime: r.get(0)?,
                    width: r.get(1)?,
                    height: r.get(2)?,
                    byte_length: r.get(3)?,
                    is_thumbnail: r.get(4)?,
                    source: r.get(5)?,
                    bytes: r.get(6)?,
                })
            },
        )
        .optional()
        .expect("query images")
}

fn blob_exists(db: &Path, sha: &str) -> bool {
    q_i64(db, &format!("SELECT count(*) FROM images WHERE sha256 = '{sha}'")) == 1
}

fn q_i64(db: &Path, q: &str) -> i64 {
    sql(db).query_row(q, [], |r| r.get(0)).unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn q_strs(db: &Path, q: &str) -> Vec<String> {
    let c = sql(db);
    let mut st = c.prepare(q).unwrap();
    let rows = st.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// `5 + len(mime) + 8 + 4·ceil(bytes/3)` (§2.6).
fn url_chars_for(mime: &str, bytes: u64) -> u64 {
    5 + mime.len() as u64 + 8 + 4 * bytes.div_ceil(3)
}

/// URL chars of one stored image URL: a reference counts its blob, a string its own length.
fn url_chars(db: &Path, url: &str) -> u64 {
    match sha_of(url) {
        Some(sha) => {
            let b = blob(db, sha).unwrap_or_else(|| panic!("blob {sha} missing"));
            url_chars_for(&b.mime, b.byte_length as u64)
        }
        None => url.encode_utf16().count() as u64,
    }
}

fn entry_chars(db: &Path, e: &Value) -> u64 {
    image_urls(e).iter().map(|u| url_chars(db, u)).sum()
}

/// Which entries the §6.5 pass must thumbnail, stated as the rule rather than as the host's walk:
/// the shortest run of the oldest image-bearing entries, never the newest, after which what is
/// left fits the budget; when no run short of the newest suffices, every entry but the newest.
/// (An oracle written as a search over prefixes, so it shares no code or shape with
/// `domain::images::bound_victims`.)
fn expected_victims(sizes: &[u64], budget: u64) -> Vec<usize> {
    let n = sizes.len();
    if n < 2 {
        return Vec::new();
    }
    let fits = |k: usize| sizes[k..].iter().sum::<u64>() <= budget;
    let k = (0..n).find(|&k| fits(k)).unwrap_or(n - 1).min(n - 1);
    (0..k).collect()
}

/// `round(v·480/long)` halves up, ≥ 1 (§6.5).
fn thumb_dims(w: u32, h: u32) -> (u32, u32) {
    let long = w.max(h);
    if long <= 480 {
        return (w, h);
    }
    let s = 480.0 / long as f64;
    let r = |v: u32| ((v as f64 * s + 0.5).floor() as u32).max(1);
    (r(w), r(h))
}

/// A blob that is a JPEG thumbnail of `source` (`w×h` before), checked from stored facts and by
/// decoding its bytes.
fn assert_thumbnail_of(db: &Path, thumb_sha: &str, source_sha: &str, w: u32, h: u32) {
    let b = blob(db, thumb_sha).unwrap_or_else(|| panic!("thumbnail blob {thumb_sha} missing"));
    assert_eq!(b.mime, "image/jpeg", "thumbnail mime");
    assert_eq!(b.is_thumbnail, 1, "is_thumbnail of {thumb_sha}");
    assert_eq!(b.source.as_deref(), Some(source_sha), "source_sha256 of {thumb_sha}");
    assert_eq!(b.byte_length as usize, b.bytes.len());
    assert!(b.bytes.starts_with(&[0xff, 0xd8, 0xff]), "thumbnail bytes are not a JPEG");
    let img = image::load_from_memory_with_format(&b.bytes, image::ImageFormat::Jpeg)
        .expect("thumbnail decodes as JPEG");
    let (tw, th) = thumb_dims(w, h);
    assert_eq!((img.width(), img.height()), (tw, th), "thumbnail size of a {w}×{h} image");
    assert_eq!((b.width, b.height), (Some(tw as i64), Some(th as i64)), "stored thumbnail size");
}

fn bound(h: &mut Host, budget: Option<u64>) -> u64 {
    let args = match budget {
        Some(b) => json!({ "budget": b }),
        None => json!({}),
    };
    let (r, ev) = changed(h, "history.boundImages", args);
    assert_eq!(ev["areas"]["history"], json!(true), "boundImages event areas: {ev}");
    r["rewritten"].as_u64().expect("rewritten number")
}

fn bound_noop(h: &mut Host, budget: Option<u64>) {
    let args = match budget {
        Some(b) => json!({ "budget": b }),
        None => json!({}),
    };
    let r = unchanged(h, "history.boundImages", args);
    assert_eq!(r, json!({"rewritten": 0}));
}

fn live_rows(db: &Path) -> Vec<String> {
    q_strs(db, "SELECT entry FROM history_entries ORDER BY position")
}

// ---------------------------------------------------------------------------------------------
// twenty real screenshots

#[test]
fn twenty_screenshots_are_bounded_to_the_budget() {
    // real screen sizes, most of them laptop-sized (debug-build decoding cost grows with pixels)
    const DIMS: [(u32, u32); 8] = [
        (1600, 1000),
        (1680, 1050),
        (1920, 1080),
        (1600, 1200),
        (1920, 1200),
        (1728, 1080),
        (2560, 1600),
        (2048, 1280),
    ];
    // Generate in a thread while the host stores the previous screenshot (2 cores overlap).
    let (_d, db, mut h) = start();
    let t0 = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel::<(u32, u32, Vec<u8>)>(2);
    let producer = std::thread::spawn(move || {
        let mut gen = Duration::ZERO;
        for i in 0..20u64 {
            let t = Instant::now();
            let (w, h) = DIMS[(i as usize * 3) % DIMS.len()];
            let noise = 760_000 + (i as usize * 617_000) % 1_250_000;
            // rows of RGBA noise stored like `noise` bytes of RGB noise: 3 random bytes a pixel,
            // and its opaque alpha costs about a quarter of a byte more
            let rows = noise / (13 * w as usize / 4);
            let png = screenshot_png(w, h, rows as u32, 0x5eed_0000 + i);
            gen += t.elapsed();
            tx.send((w, h, png)).expect("send screenshot");
        }
        gen
    });
    let mut shots: Vec<(u32, u32, Vec<u8>)> = Vec::new();
    for (i, (w, hh, png)) in rx.iter().enumerate() {
        assert!(
            (1_000_000..=3_000_000).contains(&png.len()),
            "screenshot {i} ({w}×{hh}) is {} bytes",
            png.len()
        );
        append(&mut h, image_entry(&format!("screenshot {i} ({w}×{hh})"), &[png_url(&png)]));
        shots.push((w, hh, png));
    }
    let gen_time = producer.join().expect("generator thread");
    let append_time = t0.elapsed();
    assert_eq!(shots.len(), 20);
    let distinct: BTreeSet<String> = shots.iter().map(|s| sha256_hex(&s.2)).collect();
    assert_eq!(distinct.len(), 20, "screenshots must differ");

    let before = live(&mut h);
    assert_eq!(before.len(), 20);
    let sizes: Vec<u64> = before.iter().map(|e| entry_chars(&db, e)).collect();
    let total_before: u64 = sizes.iter().sum();
    for (i, e) in before.iter().enumerate() {
        assert_eq!(image_urls(e), vec![image_ref(&shots[i].2)], "entry {i} stored as a blob reference");
        assert_eq!(sizes[i], url_chars_for("image/png", shots[i].2.len() as u64));
    }
    assert!(total_before > BUDGET);
    let victims = expected_victims(&sizes, BUDGET);
    assert!(!victims.is_empty() && !victims.contains(&19));

    let t2 = Instant::now();
    let rewritten = bound(&mut h, None);
    let bound_time = t2.elapsed();
    assert_eq!(rewritten as usize, victims.len(), "one rewritten part per bounded screenshot");

    let after = live(&mut h);
    assert_eq!(after.len(), 20);
    let mut untouched_total = 0;
    for (i, e) in after.iter().enumerate() {
        let orig_sha = sha256_hex(&shots[i].2);
        let urls = image_urls(e);
        assert_eq!(urls.len(), 1, "entry {i} still holds exactly one image part: {}", e["content"]);
        assert_eq!(e["content"][0], text_part(&format!("screenshot {i} ({}×{})", shots[i].0, shots[i].1)));
        assert!(is_image_part(&e["content"][1]), "entry {i} still shows a picture");
        let sha = sha_of(&urls[0]).expect("image reference").to_owned();
        if victims.contains(&i) {
            assert_ne!(sha, orig_sha, "entry {i} should now point at a thumbnail");
            assert_thumbnail_of(&db, &sha, &orig_sha, shots[i].0, shots[i].1);
            // no snapshot holds the original, the entry does (§12.8)
            assert_eq!(
                e["content"][1]["originalUrl"],
                json!(image_ref(&shots[i].2)),
                "entry {i} keeps its original"
            );
            assert_eq!(blob(&db, &orig_sha).expect("original kept").bytes, shots[i].2);
        } else {
            assert_eq!(sha, orig_sha, "entry {i} is not a victim and must be untouched");
            let b = blob(&db, &sha).expect("original kept");
            assert_eq!(b.bytes, shots[i].2);
            assert_eq!(b.is_thumbnail, 0);
            untouched_total += sizes[i];
        }
    }
    // the newest image-bearing entry is never touched
    assert_eq!(image_urls(&after[19]), vec![image_ref(&shots[19].2)]);
    let sizes_after: Vec<u64> = after.iter().map(|e| entry_chars(&db, e)).collect();
    let total_after: u64 = sizes_after.iter().sum();
    let total_after_but_newest: u64 = sizes_after[..19].iter().sum();
    let thumbs_total: u64 = victims.iter().map(|&i| sizes_after[i]).sum();
    assert!(untouched_total <= BUDGET, "untouched originals {untouched_total} > budget");
    assert_eq!(total_after, untouched_total + thumbs_total);
    assert!(
        total_after_but_newest <= BUDGET,
        "live images except the newest: {total_after_but_newest} URL chars > {BUDGET}"
    );
    // (with the newest counted the total may exceed the budget by the thumbnails' size: §6.5 subtracts
    // each victim's full size and the newest entry is spared)
    eprintln!(
        "20 screenshots: PNG sizes {}..{} bytes; generating took {:.2?}, generated and appended in {:.2?}",
        shots.iter().map(|s| s.2.len()).min().unwrap(),
        shots.iter().map(|s| s.2.len()).max().unwrap(),
        gen_time,
        append_time
    );
    eprintln!(
        "boundImages: total URL chars before {total_before}, after {total_after} (all but the newest {total_after_but_newest}; untouched {untouched_total}, \
         {} thumbnails {thumbs_total}), rewritten {rewritten}, took {bound_time:.2?}",
        victims.len()
    );

    // a second run finds nothing to do and writes nothing
    let rows = live_rows(&db);
    let t3 = Instant::now();
    bound_noop(&mut h, None);
    eprintln!("second boundImages: 0 rewritten in {:.2?}", t3.elapsed());
    assert_eq!(live_rows(&db), rows);
}

// ---------------------------------------------------------------------------------------------
// snapshots

#[test]
fn snapshots_are_never_touched_and_keep_their_originals() {
    let (_d, db, mut h) = start();
    let pngs: Vec<Vec<u8>> = (0..3).map(|i| noise_png(600, 400, 100 + i)).collect();
    for (i, p) in pngs.iter().enumerate() {
        append(&mut h, image_entry(&format!("shot {i}"), &[png_url(p)]));
    }
    let s = h.ok("sessions.save", json!({"name": "snap"}));
    let sid = s["session"]["id"].as_str().expect("session id").to_owned();
    let body_rows = |db: &Path| {
        q_strs(db, &format!("SELECT entry FROM session_entries WHERE session_id = '{sid}' ORDER BY position"))
    };
    let body_before = body_rows(&db);
    assert_eq!(body_before.len(), 3);

    let sizes: Vec<u64> = live(&mut h).iter().map(|e| entry_chars(&db, e)).collect();
    let budget = 1_000_000;
    assert_eq!(expected_victims(&sizes, budget), vec![0, 1]);
    assert_eq!(bound(&mut h, Some(budget)), 2);

    // the live history points at thumbnails, keeping the originals …
    let after = live(&mut h);
    for (i, p) in pngs.iter().enumerate().take(2) {
        let sha = sha_of(&image_urls(&after[i])[0]).unwrap().to_owned();
        assert_thumbnail_of(&db, &sha, &sha256_hex(p), 600, 400);
        assert_eq!(after[i]["content"][1]["originalUrl"], json!(image_ref(p)));
    }
    assert_eq!(image_urls(&after[2]), vec![image_ref(&pngs[2])]);
    // … the snapshot still references the originals, which are kept
    assert_eq!(body_rows(&db), body_before, "boundImages rewrote a snapshot body");
    let body = h.ok("sessions.get", json!({"id": sid, "images": "ref"}))["entries"].clone();
    for (i, p) in pngs.iter().enumerate() {
        assert_eq!(image_urls(&body[i]), vec![image_ref(p)], "snapshot entry {i}");
        let b = blob(&db, &sha256_hex(p)).expect("original kept while the snapshot exists");
        assert_eq!(&b.bytes, p);
    }
    let inline = h.ok("sessions.get", json!({ "id": sid }))["entries"].clone();
    assert_eq!(image_urls(&inline[0]), vec![png_url(&pngs[0])]);

    // deleting the snapshot moves it to the trash; purging it keeps the originals too: the live
    // entries still hold them (§12.8)
    assert_eq!(h.ok("sessions.delete", json!({ "id": sid })), json!({"deleted": true}));
    assert_eq!(h.ok("trash.purge", json!({ "id": sid })), json!({"purged": 1}));
    for p in &pngs {
        assert!(blob_exists(&db, &sha256_hex(p)));
    }
    for e in &after[..2] {
        assert!(blob_exists(&db, sha_of(&image_urls(e)[0]).unwrap()), "thumbnails stay referenced");
    }
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images"), 5);
    // removing an entry moves it to the trash with its pictures; purging that item is what
    // drops them
    h.ok("history.removeAt", json!({"index": 0}));
    assert!(blob_exists(&db, &sha256_hex(&pngs[0])), "the trash item holds the original");
    assert!(blob_exists(&db, sha_of(&image_urls(&after[0])[0]).unwrap()), "and its thumbnail");
    let items = h.ok("trash.list", json!({}))["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1, "{items}");
    assert_eq!(h.ok("trash.purge", json!({"id": items[0]["id"]})), json!({"purged": 1}));
    assert!(!blob_exists(&db, &sha256_hex(&pngs[0])), "the original left with its entry");
    assert!(!blob_exists(&db, sha_of(&image_urls(&after[0])[0]).unwrap()), "so did its thumbnail");
    assert!(blob_exists(&db, &sha256_hex(&pngs[1])));
}

// ---------------------------------------------------------------------------------------------
// nothing to do

#[test]
fn fewer_than_two_image_entries_or_within_budget_writes_nothing() {
    let (_d, db, mut h) = start();
    bound_noop(&mut h, None);
    bound_noop(&mut h, Some(0));

    // one image-bearing entry, however large against the budget
    let big = noise_png(500, 400, 1);
    append(&mut h, json!({"role": "user", "content": "text only"}));
    append(&mut h, image_entry("only one", &[png_url(&big)]));
    append(&mut h, json!({"role": "assistant", "content": "ok"}));
    let rows = live_rows(&db);
    bound_noop(&mut h, Some(0));
    bound_noop(&mut h, Some(10));
    assert_eq!(live_rows(&db), rows);

    // two image-bearing entries within the default budget
    let second = noise_png(300, 300, 2);
    append(&mut h, image_entry("second", &[png_url(&second)]));
    let rows = live_rows(&db);
    bound_noop(&mut h, None);
    // a total exactly at the budget fits
    let total: u64 = live(&mut h).iter().map(|e| entry_chars(&db, e)).sum();
    assert_eq!(
        total,
        url_chars_for("image/png", big.len() as u64) + url_chars_for("image/png", second.len() as u64)
    );
    bound_noop(&mut h, Some(total));
    assert_eq!(live_rows(&db), rows);
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images WHERE is_thumbnail = 1"), 0);

    // one char over: the older entry is bounded
    assert_eq!(bound(&mut h, Some(total - 1)), 1);
    let after = live(&mut h);
    assert_eq!(image_urls(&after[3]), vec![image_ref(&second)]);
    let t = sha_of(&image_urls(&after[1])[0]).unwrap().to_owned();
    assert_thumbnail_of(&db, &t, &sha256_hex(&big), 500, 400);
}

// ---------------------------------------------------------------------------------------------
// custom budget: which entries are victims

fn four_entries() -> (Vec<Vec<u8>>, Vec<Value>) {
    let pngs: Vec<Vec<u8>> = [(200, 200), (300, 300), (250, 250), (220, 220)]
        .iter()
        .enumerate()
        .map(|(i, &(w, h))| noise_png(w, h, 40 + i as u64))
        .collect();
    let entries =
        pngs.iter().enumerate().map(|(i, p)| image_entry(&format!("e{i}"), &[png_url(p)])).collect();
    (pngs, entries)
}

#[test]
fn custom_budget_bounds_oldest_first_until_it_fits() {
    let (pngs, entries) = four_entries();
    let dims = [(200, 200), (300, 300), (250, 250), (220, 220)];
    let sizes: Vec<u64> = pngs.iter().map(|p| url_chars_for("image/png", p.len() as u64)).collect();
    let total: u64 = sizes.iter().sum();
    let cases: [(u64, Vec<usize>); 4] = [
        (total - sizes[0], vec![0]),
        (total - sizes[0] - 1, vec![0, 1]),
        (sizes[3], vec![0, 1, 2]),
        (0, vec![0, 1, 2]),
    ];
    for (budget, victims) in cases {
        let (_d, db, mut h) = start();
        h.ok("history.replace", json!({ "entries": entries.clone() }));
        // a text entry between the image entries does not count
        h.ok("history.append", json!({"entry": {"role": "assistant", "content": "plain"}}));
        assert_eq!(expected_victims(&sizes, budget), victims, "budget {budget}");
        assert_eq!(bound(&mut h, Some(budget)) as usize, victims.len(), "budget {budget}");
        let after = live(&mut h);
        for (i, p) in pngs.iter().enumerate() {
            let sha = sha_of(&image_urls(&after[i])[0]).unwrap().to_owned();
            if victims.contains(&i) {
                assert_thumbnail_of(&db, &sha, &sha256_hex(p), dims[i].0, dims[i].1);
            } else {
                assert_eq!(sha, sha256_hex(p), "budget {budget}: entry {i} must be untouched");
            }
        }
        assert_eq!(bare(&after[4]), json!({"role": "assistant", "content": "plain"}));
    }
}

// ---------------------------------------------------------------------------------------------
// small images, undecodable images, http URLs

#[test]
fn small_image_is_returned_unchanged_and_small_but_heavy_one_is_reencoded() {
    let (_d, db, mut h) = start();
    // ≤ 480 px and ≤ 64 KiB: kept as is, so bounding changes nothing
    let small = png_bytes(120, 90, 7);
    assert!(small.len() <= 65_536);
    let newest = noise_png(300, 300, 3);
    append(&mut h, image_entry("small", &[png_url(&small)]));
    append(&mut h, image_entry("newest", &[png_url(&newest)]));
    let rows = live_rows(&db);
    bound_noop(&mut h, Some(10));
    assert_eq!(live_rows(&db), rows);
    assert_eq!(image_urls(&live(&mut h)[0]), vec![image_ref(&small)]);

    // ≤ 480 px but over 64 KiB: re-encoded at its own size
    let heavy = noise_png(400, 300, 4);
    assert!(heavy.len() > 65_536);
    h.ok(
        "history.replace",
        json!({"entries": [image_entry("heavy", &[png_url(&heavy)]), image_entry("newest", &[png_url(&newest)])]}),
    );
    assert_eq!(bound(&mut h, Some(10)), 1);
    let t = sha_of(&image_urls(&live(&mut h)[0])[0]).unwrap().to_owned();
    assert_thumbnail_of(&db, &t, &sha256_hex(&heavy), 400, 300);
}

/// A PNG whose header declares 20000×20000 pixels (a decompression bomb shape).
fn bomb_png() -> Vec<u8> {
    let mut b = png_bytes(1, 1, 0);
    b[16..20].copy_from_slice(&20_000u32.to_be_bytes());
    b[20..24].copy_from_slice(&20_000u32.to_be_bytes());
    b
}

#[test]
fn undecodable_images_turn_the_whole_entry_into_labels() {
    let (_d, db, mut h) = start();
    let good = noise_png(300, 300, 5);
    let junk = b"this is not an image at all, just text".to_vec();
    let bomb = bomb_png();
    let newest = noise_png(200, 200, 6);
    let figures = "Report\n## Figures\nCaptions from the document.\n1. Chart A\n2. Chart B";
    let e0 = json!({"role": "user", "attachId": "keep-me", "content": [
        text_part(figures), image_part(&png_url(&good)), image_part(&data_url("image/png", &junk))]});
    let e1 = image_entry("bomb", &[png_url(&bomb)]);
    let bad_b64 = "data:image/png;base64,@@@not*base64@@@";
    let e2 = image_entry("bad base64", &[bad_b64.to_owned()]);
    let e3 = image_entry("newest", &[png_url(&newest)]);
    for e in [&e0, &e1, &e2, &e3] {
        append(&mut h, e.clone());
    }
    let stored = live(&mut h);
    assert_eq!(image_urls(&stored[0])[1], image_ref(&junk), "a base64 data:image URL is stored as a blob");
    assert_eq!(image_urls(&stored[2]), vec![bad_b64.to_owned()], "invalid base64 stays a string");

    assert_eq!(bound(&mut h, Some(0)), 4, "2 + 1 + 1 image parts fall back to labels");
    let after = live(&mut h);
    // each label keeps the original of the image it replaced (§12.8); a URL that was never a
    // blob is kept as the string it was
    let label = |t: &str, o: &str| json!({"type": "text", "text": t, "originalUrl": o});
    assert_eq!(
        bare(&after[0]),
        json!({"role": "user", "attachId": "keep-me", "content": [
            text_part(figures), label("[Chart A]", &image_ref(&good)), label("[Chart B]", &image_ref(&junk))]})
    );
    assert_eq!(after[1]["content"], json!([text_part("bomb"), label("[image 1]", &image_ref(&bomb))]));
    assert_eq!(after[2]["content"], json!([text_part("bad base64"), label("[image 1]", bad_b64)]));
    assert_eq!(image_urls(&after[3]), vec![image_ref(&newest)]);
    // the decodable picture of the failed entry was not thumbnailed, and the originals are kept
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images WHERE is_thumbnail = 1"), 0);
    for b in [&good, &junk, &bomb] {
        assert_eq!(blob(&db, &sha256_hex(b)).expect("original kept").bytes, *b);
    }
    bound_noop(&mut h, Some(0));
}

#[test]
fn http_images_are_never_fetched_and_count_as_unchanged() {
    let (_d, db, mut h) = start();
    let https = "https://example.invalid/pic.png";
    let http = "http://example.invalid/x.png";
    let newest = noise_png(200, 200, 7);
    append(&mut h, image_entry("remote", &[https.to_owned()]));
    append(
        &mut h,
        json!({"role": "user", "content": [text_part("bare"), {"type": "image_url", "image_url": http}]}),
    );
    append(&mut h, image_entry("newest", &[png_url(&newest)]));
    let rows = live_rows(&db);
    bound_noop(&mut h, Some(0));
    assert_eq!(live_rows(&db), rows);

    // mixed entry: the blob is bounded, the http part kept; the bare-string form is kept
    let big = noise_png(640, 480, 8);
    h.ok(
        "history.replace",
        json!({"entries": [
            {"role": "user", "content": [text_part("mixed"), image_part(https), {"type": "image_url", "image_url": png_url(&big)}]},
            image_entry("newest", &[png_url(&newest)])]}),
    );
    assert_eq!(bound(&mut h, Some(0)), 1);
    let after = live(&mut h);
    let parts = after[0]["content"].as_array().unwrap().clone();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[1], image_part(https));
    let t = parts[2]["image_url"].as_str().expect("bare-string form kept").to_owned();
    assert_eq!(parts[2]["type"], "image_url");
    assert_thumbnail_of(&db, sha_of(&t).unwrap(), &sha256_hex(&big), 640, 480);
}

// ---------------------------------------------------------------------------------------------
// thumbnail reuse

#[test]
fn one_picture_in_two_entries_gets_one_thumbnail() {
    let (_d, db, mut h) = start();
    let p = noise_png(640, 400, 9);
    let q = noise_png(300, 200, 10);
    append(&mut h, image_entry("a", &[png_url(&p)]));
    append(&mut h, image_entry("b", &[png_url(&p)]));
    append(&mut h, image_entry("c", &[png_url(&q)]));
    assert_eq!(bound(&mut h, Some(0)), 2);
    let after = live(&mut h);
    let t0 = image_urls(&after[0]);
    assert_eq!(t0, image_urls(&after[1]));
    assert_thumbnail_of(&db, sha_of(&t0[0]).unwrap(), &sha256_hex(&p), 640, 400);
    let src = sha256_hex(&p);
    assert_eq!(q_i64(&db, &format!("SELECT count(*) FROM images WHERE source_sha256 = '{src}'")), 1);

    // the same picture arriving again later reuses the existing thumbnail
    append(&mut h, image_entry("d", &[png_url(&p)]));
    append(&mut h, image_entry("e", &[png_url(&q)]));
    let created: i64 = q_i64(&db, &format!("SELECT created_at FROM images WHERE source_sha256 = '{src}'"));
    let n = bound(&mut h, Some(0));
    let after = live(&mut h);
    assert_eq!(image_urls(&after[3]), t0, "entry d points at the thumbnail made earlier");
    assert_eq!(image_urls(&after[0]), t0, "a thumbnail is returned unchanged");
    assert_eq!(n, 2, "q in entry c and p in entry d");
    assert_eq!(q_i64(&db, &format!("SELECT count(*) FROM images WHERE source_sha256 = '{src}'")), 1);
    assert_eq!(q_i64(&db, &format!("SELECT created_at FROM images WHERE source_sha256 = '{src}'")), created);
}

#[test]
fn a_recorded_thumbnail_is_reused_not_reencoded() {
    let (_d, db, mut h) = start();
    let p = noise_png(800, 600, 11);
    // a picture the host will be told is the thumbnail of p (a real re-encode would differ)
    let planted = png_bytes(40, 30, 77);
    let newest = noise_png(200, 200, 12);
    append(&mut h, image_entry("holder", &[png_url(&planted)]));
    {
        let c = rusqlite::Connection::open(&db).expect("open db read-write");
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        let n = c
            .execute(
                "UPDATE images SET is_thumbnail = 1, source_sha256 = ?1 WHERE sha256 = ?2",
                [sha256_hex(&p), sha256_hex(&planted)],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    append(&mut h, image_entry("p", &[png_url(&p)]));
    append(&mut h, image_entry("newest", &[png_url(&newest)]));
    // victims: "holder" (already a thumbnail → unchanged) and "p" (→ the recorded thumbnail)
    assert_eq!(bound(&mut h, Some(0)), 1);
    let after = live(&mut h);
    assert_eq!(image_urls(&after[0]), vec![image_ref(&planted)]);
    assert_eq!(image_urls(&after[1]), vec![image_ref(&planted)], "p must point at its recorded thumbnail");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images WHERE is_thumbnail = 1"), 1, "nothing re-encoded");
    assert_eq!(q_i64(&db, "SELECT count(*) FROM images WHERE mime = 'image/jpeg'"), 0);
}
