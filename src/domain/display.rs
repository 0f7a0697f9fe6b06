//! Display renditions (storage-model §2.6): a stored picture at the size the side panel shows it.
//! The panel's widest bubble is the transcript's 46rem column (736 CSS px, less its padding):
//! a rendition is at most [`DISPLAY_MAX_WIDTH`] px wide (twice that, for 2× screens) and, for a
//! tall picture (the panel crops those to the top), at most [`DISPLAY_MAX_HEIGHT`] px high, JPEG at
//! [`DISPLAY_QUALITY`]. The original bytes serve as their own rendition when they are already
//! within those bounds and at most [`DISPLAY_PASS_BYTES`], when re-encoding would not make them
//! smaller, when they are a GIF (which may move), or when they cannot be decoded (the browser may
//! still show them). Pure CPU work: no SQL.

use crate::imaging::{self, Format};

/// At most this many pixels wide: twice the panel's widest bubble.
pub const DISPLAY_MAX_WIDTH: u32 = 1280;
/// At most this many pixels high (a tall picture keeps its full width up to this height).
pub const DISPLAY_MAX_HEIGHT: u32 = 4 * DISPLAY_MAX_WIDTH;
/// A picture within the bounds and at most this many bytes is its own rendition.
pub const DISPLAY_PASS_BYTES: usize = 256 * 1024;
/// JPEG quality of renditions.
pub const DISPLAY_QUALITY: u8 = 82;

/// What the panel shows for one picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendition {
    pub mime: String,
    pub bytes: Vec<u8>,
    /// `None` when the header cannot be read (an original the host cannot decode).
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// The long-edge bound that makes a `w`×`h` picture at most [`DISPLAY_MAX_WIDTH`] wide and
/// [`DISPLAY_MAX_HEIGHT`] high (for [`imaging::thumbnail`], which bounds the long edge).
pub fn display_edge(w: u32, h: u32) -> u32 {
    let (w, h) = (w.max(1) as u64, h.max(1) as u64);
    let max_w = DISPLAY_MAX_WIDTH as u64;
    let edge = if w >= h { max_w } else { (h * max_w).div_ceil(w).min(DISPLAY_MAX_HEIGHT as u64) };
    edge.min(w.max(h)) as u32
}

/// The display rendition of stored image bytes (`mime` as stored). Never fails: what cannot be
/// made smaller is shown as it is.
pub fn display_rendition(mime: &str, bytes: &[u8]) -> Rendition {
    let original = |dims: Option<(u32, u32)>| Rendition {
        mime: mime.to_owned(),
        bytes: bytes.to_vec(),
        width: dims.map(|d| d.0),
        height: dims.map(|d| d.1),
    };
    let dims = imaging::dimensions(bytes);
    let Some((w, h)) = dims else { return original(None) };
    if imaging::sniff(bytes) == Some(Format::Gif) {
        return original(dims);
    }
    if w <= DISPLAY_MAX_WIDTH && h <= DISPLAY_MAX_HEIGHT && bytes.len() <= DISPLAY_PASS_BYTES {
        return original(dims);
    }
    match imaging::thumbnail(bytes, display_edge(w, h), DISPLAY_QUALITY) {
        Ok(t) if t.jpeg.len() < bytes.len() => Rendition {
            mime: "image/jpeg".into(),
            bytes: t.jpeg,
            width: Some(t.width),
            height: Some(t.height),
        },
        _ => original(dims),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_bounds_width_then_height() {
        assert_eq!(display_edge(1920, 1080), 1280);
        assert_eq!(display_edge(800, 600), 800); // never enlarged
        assert_eq!(display_edge(2000, 6000), 3840); // 1280 wide
        assert_eq!(display_edge(1000, 3000), 3000); // already narrow enough
        assert_eq!(display_edge(1000, 8000), DISPLAY_MAX_HEIGHT);
        assert_eq!(display_edge(0, 0), 1);
    }

    #[test]
    fn undecodable_bytes_are_their_own_rendition() {
        let r = display_rendition("image/png", b"not an image");
        assert_eq!((r.mime.as_str(), r.bytes.as_slice(), r.width), ("image/png", &b"not an image"[..], None));
    }
}
