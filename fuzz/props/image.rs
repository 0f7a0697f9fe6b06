//! `image_decode`: arbitrary bytes through `imaging::{sniff, dimensions, oriented_size, thumbnail}`.
//!
//! The input is the image file itself (corpus files open in any viewer); the thumbnail's long
//! edge comes from the input length (`EDGES[len % 6]`) and the JPEG quality from its first byte.
//! Run under `-rss_limit_mb=512` (the fuzz target's README line): decoding is bounded by the
//! limits checked from the header, so no input may reach that.
//!
//! Properties:
//!
//! 1. **Only accepted formats decode**: bytes no sniffer claims are rejected by `oriented_size`
//!    (a full-size decode) and `thumbnail`, and `dimensions` is `None` for them.
//! 2. **Within the limits**: a decoded image is 1…8,192 px per side (there is no pixel-count
//!    cap), and its size is the header's (`dimensions`), or the header's turned by a quarter when
//!    EXIF orientation rotates it.
//! 3. **Errors are typed**: every refusal is a `Rejected` with a message; `thumbnail` succeeds
//!    whenever the full-size decode does (resizing and encoding never fail), and where the
//!    full-size decode is refused only a JPEG may still make a thumbnail (decoded at a reduced DCT
//!    scale, which needs less memory), of the header's size.
//! 4. **Thumbnails are bounded**: the size is `target_size(w, h, edge)`: long edge ≤ edge (or the
//!    image's own size when already within it), each side ≥ 1 px and within 1 px of the exact
//!    scaled size (aspect kept), and the bytes are a JPEG that decodes to that size.

use keepsake_host::imaging::{dimensions, oriented_size, sniff, target_size, thumbnail, Format, MAX_SIDE};

/// Long edges the thumbnail is asked for (480 is the product's).
pub const EDGES: [u32; 6] = [480, 1, 7, 64, 333, 8192];

pub fn check(data: &[u8]) {
    let edge = EDGES[data.len() % EDGES.len()];
    let quality = data.first().map_or(82, |b| 1 + b % 100);
    let format = sniff(data);
    let header = dimensions(data);
    let decoded = oriented_size(data);
    if format.is_none() {
        assert!(header.is_none(), "dimensions() for bytes no sniffer claims");
        assert!(decoded.is_err(), "oriented_size() accepted bytes no sniffer claims");
    }
    let (w, h) = match &decoded {
        Ok((w, h)) => {
            let (w, h) = (*w, *h);
            assert!(w >= 1 && h >= 1, "decoded {w}×{h}");
            assert!(w <= MAX_SIDE && h <= MAX_SIDE, "decoded {w}×{h}, over {MAX_SIDE} per side");
            let (hw, hh) = header.expect("a decodable image has a readable header");
            assert!((w, h) == (hw, hh) || (w, h) == (hh, hw), "decoded {w}×{h}, header says {hw}×{hh}");
            (w, h)
        }
        Err(e) => {
            assert!(!e.0.is_empty(), "a rejection without a message");
            (0, 0)
        }
    };
    let thumb = thumbnail(data, edge, quality);
    match (&decoded, thumb) {
        (Err(_), Err(e)) => assert!(!e.0.is_empty(), "a rejection without a message"),
        (Err(e), Ok(t)) => {
            // a JPEG over the allocation limit at full size, decoded at a reduced scale
            assert_eq!(
                format,
                Some(Format::Jpeg),
                "thumbnail succeeded ({}×{}) where decode failed: {e}",
                t.width,
                t.height
            );
            let (hw, hh) = header.expect("a decodable image has a readable header");
            let sized = target_size(hw, hh, edge);
            assert!(
                (t.width, t.height) == sized || (t.height, t.width) == sized,
                "scaled JPEG thumbnail size"
            );
        }
        (Ok(_), Err(e)) => panic!("thumbnail of a decodable {w}×{h} image failed: {e}"),
        (Ok(_), Ok(t)) => {
            let (tw, th) = (t.width, t.height);
            assert_eq!((tw, th), target_size(w, h, edge), "thumbnail size of {w}×{h} at edge {edge}");
            assert!(tw >= 1 && th >= 1);
            if w.max(h) > edge {
                assert!(tw.max(th) <= edge, "{tw}×{th} over the {edge} px edge");
                let s = edge as f64 / w.max(h) as f64;
                assert!((tw as f64 - w as f64 * s).abs() <= 1.0, "width {tw} vs {w}×{s}");
                assert!((th as f64 - h as f64 * s).abs() <= 1.0, "height {th} vs {h}×{s}");
            } else {
                assert_eq!((tw, th), (w, h), "an image within the edge keeps its size");
            }
            assert_eq!(sniff(&t.jpeg), Some(Format::Jpeg), "the thumbnail is a JPEG");
            let back = image::load_from_memory_with_format(&t.jpeg, image::ImageFormat::Jpeg)
                .expect("the thumbnail decodes");
            assert_eq!((back.width(), back.height()), (tw, th), "the JPEG's own size");
        }
    }
}
