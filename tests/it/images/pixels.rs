//! "Pixels are never destroyed" (storage-model §12.8, §12.9, §12.19, §12.23) through the real
//! binary over pipes on a temp database:
//! - every image within the decode limits (8,192 px per side, 256 MiB of decoder allocation)
//!   decodes: `images.thumbnail` of a 6000×3000 PNG, and `history.boundImages` over a live
//!   history holding a 6016×3384 PNG screenshot and an 8000×6000 (48-megapixel) JPEG, make
//!   480-px JPEG thumbnails, never `image_rejected` or labels; the host's peak RSS (VmHWM of the
//!   host process, read before it exits) stays ≤ 256 MiB and is printed;
//! - originals are kept: a part pointed at a thumbnail carries `originalUrl` (the original's
//!   image reference), each label of an entry compacted to labels carries the original of the
//!   image it replaced; the original blobs stay referenced (`image_refs`) while the entry exists
//!   and come back byte-for-byte through `images.get(originalUrl)` (the lightbox's read) and the
//!   JSON export (which writes the original into `image_url` and omits `originalUrl`);
//! - reads return `originalUrl` as a reference even with images inline;
//! - request bodies use the thumbnail and never carry `originalUrl`.
//!
//! The pictures are generated (the harness's PNG writers and `photo_jpeg` here: deterministic
//! noise, so they neither compress to nothing nor need committed binaries).
//! `cargo test --test it images::pixels -- --nocapture` prints the figures.
use crate::harness::*;

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{json, Value};

const REF_PREFIX: &str = "keepsake-image:sha256:";
/// The brief's bound on the host's peak RSS while it bounds these pictures.
const MAX_PEAK_KIB: u64 = 256 * 1024;

fn start() -> (tempfile::TempDir, PathBuf, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.meta", json!({}));
    (dir, db, h)
}

fn image_ref(bytes: &[u8]) -> String {
    format!("{REF_PREFIX}{}", sha256_hex(bytes))
}

/// A photo-like baseline JPEG: smooth gradients plus a little noise (a real photo's grain).
fn photo_jpeg(seed: u64, w: u32, h: u32) -> Vec<u8> {
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    let mut rng = Rng::new(seed);
    for y in 0..h {
        let base = (y * w * 3) as usize;
        let mut noise = 0u64;
        for x in 0..w {
            if x % 8 == 0 {
                noise = rng.next_u64();
            }
            let n = ((noise >> ((x % 8) * 8)) & 7) as u32;
            let i = base + (x * 3) as usize;
            rgb[i] = ((x * 255 / w) + n) as u8;
            rgb[i + 1] = ((y * 255 / h) + n) as u8;
            rgb[i + 2] = (((x + y) * 127 / (w + h)) + 64 + n) as u8;
        }
    }
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 85)
        .encode(&rgb, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
        .expect("encode jpeg");
    out
}

fn image_entry(text: &str, urls: &[String]) -> Value {
    let mut parts = vec![text_part(text)];
    parts.extend(urls.iter().map(|u| image_part(u)));
    json!({"role": "user", "content": parts})
}

fn live(h: &mut Host, images: &str) -> Vec<Value> {
    h.ok("history.get", json!({ "images": images }))["entries"].as_array().expect("entries").clone()
}

fn part_url(p: &Value) -> String {
    match &p["image_url"] {
        Value::String(s) => s.clone(),
        o => o["url"].as_str().unwrap_or_default().to_owned(),
    }
}

fn blob_exists(db: &Path, sha: &str) -> bool {
    sql(db).query_row("SELECT count(*) FROM images WHERE sha256 = ?1", [sha], |r| r.get::<_, i64>(0)).unwrap()
        == 1
}

/// Holders (`image_refs.holder`) that reference a blob.
fn ref_holders(db: &Path, sha: &str) -> Vec<String> {
    let c = sql(db);
    let mut st = c.prepare("SELECT holder FROM image_refs WHERE sha256 = ?1 ORDER BY holder").unwrap();
    let rows = st.query_map([sha], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("standard base64")
}

/// `images.get(ref)` bytes: what the side panel's lightbox reads for an `originalUrl`.
fn get_bytes(h: &mut Host, r: &str) -> (String, Vec<u8>) {
    let g = h.ok("images.get", json!({ "ref": r }));
    (g["mime"].as_str().unwrap().to_owned(), b64(g["bytes"].as_str().unwrap()))
}

/// Decode a data URL's or blob's JPEG bytes and return its size.
fn jpeg_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(&[0xff, 0xd8, 0xff]), "not a JPEG");
    let img = image::load_from_memory_with_format(bytes, image::ImageFormat::Jpeg).expect("JPEG decodes");
    (img.width(), img.height())
}

/// Save the live history as a session and export it as JSON: (document, the session's id).
/// The JSON export of the live chat's session (it is kept from its first entry).
fn export_live(h: &mut Host) -> Value {
    let id = h.ok("history.meta", json!({}))["activeSessionId"].as_str().expect("session id").to_owned();
    let exp = h.ok("sessions.export", json!({"ids": [id], "format": "json"}));
    serde_json::from_str(exp["text"].as_str().expect("export text")).expect("export parses")
}

fn export_entries(doc: &Value) -> Vec<Value> {
    doc["sessions"][0]["entries"].as_array().expect("exported entries").clone()
}

fn export_image(doc: &Value, sha: &str) -> Vec<u8> {
    b64(doc["images"][sha]["data"].as_str().unwrap_or_else(|| panic!("export images lacks {sha}")))
}

// ---------------------------------------------------------------------------------------------

#[test]
fn a_6000x3000_png_becomes_a_480_px_thumbnail() {
    let (_d, _db, mut h) = start();
    // 18,000,000 px: over the former 16,777,216-pixel cap, within 8,192 per side
    let png = screenshot_png(6000, 3000, 200, 1);
    let r = h.ok("images.thumbnail", json!({ "dataUrl": data_url("image/png", &png) }));
    assert_eq!((r["width"].as_u64(), r["height"].as_u64()), (Some(480), Some(240)), "{}", r["width"]);
    let url = r["dataUrl"].as_str().unwrap();
    let jpeg = b64(url.strip_prefix("data:image/jpeg;base64,").expect("a JPEG data URL"));
    assert_eq!(jpeg_size(&jpeg), (480, 240));
    let peak = h.peak_rss_kib();
    eprintln!(
        "images.thumbnail 6000×3000 PNG ({} bytes): host peak RSS {:.1} MiB",
        png.len(),
        peak as f64 / 1024.0
    );
    assert!(peak <= MAX_PEAK_KIB, "peak RSS {peak} KiB");
}

#[test]
fn a_large_screenshot_and_a_48_megapixel_photo_become_thumbnails_and_keep_their_originals() {
    let (_d, db, mut h) = start();
    let shot = screenshot_png(6016, 3384, 400, 2); // a 27-inch 5K-class screenshot
    let photo = photo_jpeg(3, 8000, 6000); // 48 megapixels
    let newer: Vec<Vec<u8>> = (0..2).map(|i| noise_png(700, 700, 10 + i)).collect();
    eprintln!(
        "pictures: screenshot 6016×3384 PNG {} bytes, photo 8000×6000 JPEG {} bytes, newer PNGs {} and {} bytes",
        shot.len(),
        photo.len(),
        newer[0].len(),
        newer[1].len()
    );
    h.ok("history.append", json!({"entry": image_entry("screenshot", &[data_url("image/png", &shot)])}));
    h.ok("history.append", json!({"entry": image_entry("photo", &[data_url("image/jpeg", &photo)])}));
    for (i, p) in newer.iter().enumerate() {
        h.ok(
            "history.append",
            json!({"entry": image_entry(&format!("newer {i}"), &[data_url("image/png", p)])}),
        );
    }
    // the screenshot and the photo are the two oldest: with the photo alone over 8 MiB of URL
    // chars after the screenshot is subtracted, both are victims; the newest is spared
    let url_chars = |n: usize| 5 + 9 + 8 + 4 * n.div_ceil(3);
    assert!(url_chars(photo.len()) + url_chars(newer[0].len()) + url_chars(newer[1].len()) > 8_388_608);

    let before = h.peak_rss_kib();
    let reset = h.reset_peak_rss();
    let r = h.ok("history.boundImages", json!({}));
    let bounding_peak = h.peak_rss_kib();
    assert_eq!(r["rewritten"], json!(2), "both pictures point at thumbnails: {r}");

    let stored = live(&mut h, "ref");
    for (i, (orig, w, hh)) in [(&shot, 6016u32, 3384u32), (&photo, 8000, 6000)].into_iter().enumerate() {
        let part = &stored[i]["content"][1];
        assert_eq!(part["type"], "image_url", "entry {i} is still a picture, not a label: {}", stored[i]);
        let thumb = part_url(part);
        assert_ne!(thumb, image_ref(orig), "entry {i} points at a thumbnail");
        assert_eq!(part["originalUrl"], json!(image_ref(orig)), "entry {i} keeps its original");
        let (mime, bytes) = get_bytes(&mut h, &thumb);
        assert_eq!(mime, "image/jpeg");
        let expect = if w > hh { (480, (hh * 480 + w / 2) / w) } else { ((w * 480 + hh / 2) / hh, 480) };
        assert_eq!(jpeg_size(&bytes), expect, "thumbnail of the {w}×{hh} picture");
        // the lightbox's read: the original, byte for byte
        let (mime, bytes) = get_bytes(&mut h, part["originalUrl"].as_str().unwrap());
        assert_eq!(mime, if i == 0 { "image/png" } else { "image/jpeg" });
        assert_eq!(sha256_hex(&bytes), sha256_hex(orig), "images.get(originalUrl) of entry {i}");
        // the original stays referenced by the live entry (a row of the chat's session)
        assert_eq!(ref_holders(&db, &sha256_hex(orig)), vec!["session".to_owned()]);
    }
    // a second pass finds nothing to do and never overwrites an original
    assert_eq!(h.ok("history.boundImages", json!({}))["rewritten"], json!(0));
    assert_eq!(live(&mut h, "ref"), stored);

    // the JSON export writes the originals back into image_url and carries their bytes
    let doc = export_live(&mut h);
    let entries = export_entries(&doc);
    for (i, orig) in [&shot, &photo].into_iter().enumerate() {
        assert_eq!(entries[i]["content"][1], image_part(&image_ref(orig)), "exported entry {i}");
        assert_eq!(sha256_hex(&export_image(&doc, &sha256_hex(orig))), sha256_hex(orig));
    }
    assert!(!doc.to_string().contains("originalUrl"), "the export omits originalUrl");

    let peak = h.peak_rss_kib();
    eprintln!(
        "boundImages over a 6016×3384 PNG and an 8000×6000 JPEG: host peak RSS while bounding {:.1} MiB{}, \
         whole process {:.1} MiB (before bounding {:.1} MiB)",
        bounding_peak as f64 / 1024.0,
        if reset { "" } else { " (VmHWM could not be reset: whole process)" },
        peak as f64 / 1024.0,
        before as f64 / 1024.0
    );
    assert!(bounding_peak <= MAX_PEAK_KIB, "peak RSS while bounding {bounding_peak} KiB > 256 MiB");
    assert!(peak <= MAX_PEAK_KIB, "peak RSS of the host {peak} KiB > 256 MiB");

    // an original is destroyed only with the last entry that keeps it: "New chat" and deleting
    // keep it (the session, the trash); purging the trash destroys it
    assert!(blob_exists(&db, &sha256_hex(&shot)));
    h.ok("history.clear", json!({}));
    assert_eq!(ref_holders(&db, &sha256_hex(&shot)), vec!["session".to_owned()]);
    h.ok("sessions.clearAll", json!({}));
    assert!(blob_exists(&db, &sha256_hex(&shot)), "the trash keeps the original");
    h.ok("trash.purge", json!({"all": true}));
    assert!(!blob_exists(&db, &sha256_hex(&shot)), "the original outlived every entry that kept it");
}

#[test]
fn an_undecodable_part_turns_the_entry_into_labels_that_keep_the_originals() {
    let (_d, db, mut h) = start();
    let good = noise_png(400, 300, 20);
    let junk = b"not an image, just bytes declared as one".to_vec();
    let newest = noise_png(200, 200, 21);
    let figures = "Report\n## Figures\n1. Chart A\n2. Chart B";
    let e0 = json!({"role": "user", "content": [
        text_part(figures), image_part(&data_url("image/png", &good)), image_part(&data_url("image/png", &junk))]});
    h.ok("history.append", json!({ "entry": e0 }));
    h.ok("history.append", json!({"entry": image_entry("newest", &[data_url("image/png", &newest)])}));
    assert_eq!(h.ok("history.boundImages", json!({"budget": 0}))["rewritten"], json!(2));

    let stored = live(&mut h, "ref");
    assert_eq!(
        stored[0]["content"],
        json!([text_part(figures),
            {"type": "text", "text": "[Chart A]", "originalUrl": image_ref(&good)},
            {"type": "text", "text": "[Chart B]", "originalUrl": image_ref(&junk)}])
    );
    // both originals survive, referenced by the live entry
    for b in [&good, &junk] {
        assert!(blob_exists(&db, &sha256_hex(b)));
        assert_eq!(ref_holders(&db, &sha256_hex(b)), vec!["session".to_owned()]);
        let (_, bytes) = get_bytes(&mut h, &image_ref(b));
        assert_eq!(bytes, *b);
    }
    // reads inline image_url but return originalUrl as a reference
    let inline = live(&mut h, "inline");
    assert_eq!(inline[0]["content"][1]["originalUrl"], json!(image_ref(&good)));
    assert!(part_url(&inline[1]["content"][1]).starts_with("data:image/png;base64,"));
    // a second pass changes nothing
    assert_eq!(h.ok("history.boundImages", json!({"budget": 0}))["rewritten"], json!(0));

    // the export restores the image parts, with the originals' bytes
    let doc = export_live(&mut h);
    let e = &export_entries(&doc)[0];
    assert_eq!(
        e["content"],
        json!([text_part(figures), image_part(&image_ref(&good)), image_part(&image_ref(&junk))])
    );
    assert_eq!(export_image(&doc, &sha256_hex(&good)), good);
    assert_eq!(export_image(&doc, &sha256_hex(&junk)), junk);
    assert!(!doc.to_string().contains("originalUrl"));
    // the session keeps them too
    let sid = doc["sessions"][0]["id"].as_str().unwrap().to_owned();
    let s = h.ok("sessions.get", json!({"id": sid, "images": "inline"}));
    assert_eq!(s["entries"][0]["content"][2]["originalUrl"], json!(image_ref(&junk)));
}

#[test]
fn request_bodies_use_the_thumbnail_and_never_carry_original_url() {
    let (_d, _db, mut h) = start();
    let big = noise_png(1200, 900, 30); // ~3.2 MB: thumbnailed
    let junk = b"still not an image".to_vec();
    let newest = noise_png(300, 300, 31);
    h.ok("history.append", json!({"entry": image_entry("big", &[data_url("image/png", &big)])}));
    h.ok("history.append", json!({"entry": image_entry("junk", &[data_url("image/png", &junk)])}));
    h.ok("history.append", json!({"entry": assistant("seen it")}));
    h.ok("history.append", json!({"entry": image_entry("newest", &[data_url("image/png", &newest)])}));
    assert_eq!(h.ok("history.boundImages", json!({"budget": 0}))["rewritten"], json!(2));
    let stored = live(&mut h, "ref");
    let thumb = part_url(&stored[0]["content"][1]);
    assert_eq!(stored[0]["content"][1]["originalUrl"], json!(image_ref(&big)));
    assert_eq!(stored[1]["content"][1]["originalUrl"], json!(image_ref(&junk)));
    let (_, thumb_bytes) = get_bytes(&mut h, &thumb);
    let thumb_url = data_url("image/jpeg", &thumb_bytes);
    let original_url = data_url("image/png", &big);

    for kind in ["chat", "responses", "anthropic", "runs", "agent"] {
        for refs in [false, true] {
            let r =
                h.ok("request.build", json!({"kind": kind, "turn": {"userText": "next"}, "imageRefs": refs}));
            let body = r["body"].to_string();
            assert!(
                !body.contains("originalUrl"),
                "{kind} (imageRefs {refs}) body carries originalUrl: {body:.300}"
            );
            assert!(!body.contains(&sha256_hex(&big)), "{kind} (imageRefs {refs}) body names the original");
            assert!(
                !body.contains(&sha256_hex(&junk)),
                "{kind} (imageRefs {refs}) body names the label's original"
            );
            assert!(!body.contains(&original_url[2000..2200]), "{kind} body carries the original's pixels");
            let thumb_b64 = thumb_url.strip_prefix("data:image/jpeg;base64,").unwrap();
            let uses_thumb =
                if refs { body.contains(&sha256_hex(&thumb_bytes)) } else { body.contains(thumb_b64) };
            // runs flattens history images to `[image]`; agent sends only the trailing run
            if matches!(kind, "chat" | "responses" | "anthropic") {
                assert!(uses_thumb, "{kind} (imageRefs {refs}) body should carry the thumbnail");
                assert!(body.contains("[image 1]"), "{kind}: the label part is sent as text");
            }
        }
    }
}
