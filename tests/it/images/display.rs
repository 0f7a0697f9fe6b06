//! Display renditions (`images.display`, storage-model §2.6) through the real binary over pipes
//! on a temp database: a picture wider than 1280 px comes back as a JPEG at most 1280 px wide, a
//! small one as its own bytes; a rendition is made once and kept in `image_renditions`, remade
//! when damaged or missing, removed with its image; request bodies and `images.get` keep the
//! stored pixels; per-picture failures are per-item errors; a reply over one frame is chunked.
use crate::harness::*;

use base64::Engine;
use serde_json::{json, Value};

const REF_PREFIX: &str = "keepsake-image:sha256:";

fn image_ref(bytes: &[u8]) -> String {
    format!("{REF_PREFIX}{}", sha256_hex(bytes))
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("standard base64")
}

fn append_picture(h: &mut Host, text: &str, bytes: &[u8]) {
    let entry =
        json!({"role": "user", "content": [text_part(text), image_part(&data_url("image/png", bytes))]});
    h.ok("history.append", json!({ "entry": entry }));
}

fn display(h: &mut Host, refs: &[String]) -> Vec<Value> {
    h.ok("images.display", json!({ "refs": refs }))["images"].as_array().expect("images").clone()
}

/// A read-write connection beside the host (to damage what a test needs damaged).
fn writable(db: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).expect("open db read-write")
}

fn renditions(db: &std::path::Path) -> i64 {
    sql(db).query_row("SELECT count(*) FROM image_renditions", [], |r| r.get(0)).unwrap()
}

#[test]
fn a_wide_screenshot_is_shown_as_a_bounded_jpeg_made_once_and_kept() {
    let (_dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    let shot = screenshot_png(2560, 1600, 200, 7);
    append_picture(&mut h, "look", &shot);
    let r = image_ref(&shot);

    let items = display(&mut h, std::slice::from_ref(&r));
    assert_eq!(items.len(), 1);
    let it = &items[0];
    assert_eq!(it["ref"], json!(r));
    assert_eq!(it["mime"], json!("image/jpeg"));
    assert_eq!((it["width"].as_u64(), it["height"].as_u64()), (Some(1280), Some(800)));
    let bytes = b64(it["bytes"].as_str().unwrap());
    let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg).expect("a JPEG");
    assert_eq!((img.width(), img.height()), (1280, 800));
    assert!(bytes.len() < shot.len(), "{} ≥ {}", bytes.len(), shot.len());
    assert_eq!(renditions(&db), 1);

    // made once: a second ask reads the kept row (its created_at marks it), byte for byte
    writable(&db).execute("UPDATE image_renditions SET created_at = 42", []).unwrap();
    let again = display(&mut h, std::slice::from_ref(&r));
    assert_eq!(again[0]["bytes"], it["bytes"]);
    let at: i64 = sql(&db).query_row("SELECT created_at FROM image_renditions", [], |x| x.get(0)).unwrap();
    assert_eq!(at, 42, "the rendition was made again");

    // the stored picture is untouched: images.get and request bodies carry the original
    let g = h.ok("images.get", json!({ "ref": r }));
    assert_eq!((g["mime"].as_str(), b64(g["bytes"].as_str().unwrap())), (Some("image/png"), shot.clone()));
    for refs in [false, true] {
        let body = h
            .ok("request.build", json!({"kind": "chat", "turn": {"userText": "next"}, "imageRefs": refs}))
            ["body"]
            .to_string();
        let rendition_b64 = it["bytes"].as_str().unwrap();
        assert!(!body.contains(&rendition_b64[1000..1200]), "a request body carries the rendition");
        assert!(!body.contains(&sha256_hex(&bytes)), "a request body names the rendition");
        if refs {
            assert!(body.contains(&sha256_hex(&shot)), "imageRefs body should name the original");
        } else {
            let orig = data_url("image/png", &shot);
            assert!(body.contains(&orig[5000..5200]), "the body should carry the original's pixels");
        }
    }
    h.close();
}

#[test]
fn a_small_picture_is_its_own_rendition_and_a_damaged_rendition_is_remade() {
    let (_dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    let small = png_bytes(400, 300, 9);
    let wide = screenshot_png(1600, 900, 100, 3);
    append_picture(&mut h, "small", &small);
    append_picture(&mut h, "wide", &wide);
    let (rs, rw) = (image_ref(&small), image_ref(&wide));

    let items = display(&mut h, &[rw.clone(), rs.clone()]);
    assert_eq!(items[0]["ref"], json!(rw), "answers come in the order asked");
    assert_eq!(items[1]["mime"], json!("image/png"));
    assert_eq!(b64(items[1]["bytes"].as_str().unwrap()), small, "a small picture is shown as stored");
    assert_eq!((items[1]["width"].as_u64(), items[1]["height"].as_u64()), (Some(400), Some(300)));
    let good = items[0]["bytes"].clone();

    // damaged bytes, a lost row: both remade, never an error
    writable(&db)
        .execute("UPDATE image_renditions SET bytes = x'00ff00' WHERE mime = 'image/jpeg'", [])
        .unwrap();
    writable(&db).execute("DELETE FROM image_renditions WHERE mime = 'image/png'", []).unwrap();
    let items = display(&mut h, &[rw.clone(), rs.clone()]);
    assert_eq!(items[0]["bytes"], good);
    assert_eq!(b64(items[1]["bytes"].as_str().unwrap()), small);
    assert_eq!(renditions(&db), 2);
    let digest_ok: i64 = sql(&db)
        .query_row(
            "SELECT count(*) FROM image_renditions WHERE mime = 'image/jpeg' AND length(bytes) > 3",
            [],
            |x| x.get(0),
        )
        .unwrap();
    assert_eq!(digest_ok, 1, "the damaged row was replaced");
    h.close();
}

#[test]
fn a_rendition_leaves_with_its_image() {
    let (_dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    let shot = screenshot_png(2000, 1200, 100, 5);
    append_picture(&mut h, "gone soon", &shot);
    h.ok("history.append", json!({"entry": user("after")}));
    display(&mut h, &[image_ref(&shot)]);
    assert_eq!(renditions(&db), 1);
    assert_eq!(h.ok("history.removeAt", json!({"index": 0})), json!({"removed": true}));
    assert_eq!(renditions(&db), 1, "the picture is in the trash with its entry: its rendition stays");
    h.ok("trash.purge", json!({"all": true}));
    let images: i64 = sql(&db).query_row("SELECT count(*) FROM images", [], |r| r.get(0)).unwrap();
    assert_eq!(images, 0);
    assert_eq!(renditions(&db), 0, "the rendition outlived its image");
    let items = display(&mut h, &[image_ref(&shot)]);
    assert_eq!(items[0]["error"]["code"], json!("not_found"));
    assert_eq!(renditions(&db), 0);
    h.close();
}

#[test]
fn per_picture_errors_stand_alone_and_large_replies_are_chunked() {
    let (_dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    // noise does not compress: three renditions take more than one frame
    let shots: Vec<Vec<u8>> = (0..3).map(|i| noise_png(1400, 900, 20 + i)).collect();
    for (i, s) in shots.iter().enumerate() {
        append_picture(&mut h, &format!("noise {i}"), s);
    }
    let unknown = format!("{REF_PREFIX}{}", "0".repeat(64));
    let mut refs: Vec<String> = shots.iter().map(|s| image_ref(s)).collect();
    refs.insert(1, unknown.clone());
    refs.push("keepsake-image:sha256:nothex".into());
    let before = h.frame_sizes.len();
    let items = display(&mut h, &refs);
    assert!(h.frame_sizes.len() - before > 1, "a reply over one frame goes out in chunk frames");
    assert_eq!(items.len(), 5);
    assert_eq!(
        items[1],
        json!({"ref": unknown, "error": {"code": "not_found", "message": format!("no image {}", "0".repeat(64))}})
    );
    assert_eq!(items[4]["error"]["code"], json!("bad_request"));
    for i in [0, 2, 3] {
        assert_eq!(items[i]["mime"], json!("image/jpeg"), "{i}");
        assert!(items[i]["width"].as_u64().unwrap() <= 1280);
    }
    assert_eq!(h.err("images.display", json!({"refs": []})), "bad_request");
    let many: Vec<String> = (0..65).map(|_| refs[0].clone()).collect();
    assert_eq!(h.err("images.display", json!({ "refs": many })), "bad_request");
    assert_eq!(h.err("images.display", json!({"refs": [refs[0]], "clientRequestId": "x"})), "bad_request");
    h.close();
}
