//! Image bytes: format sniffing, decoding under strict limits checked from the header before a
//! single pixel is allocated, EXIF orientation, compositing on white, resizing
//! (fast_image_resize) and JPEG encoding (jpeg-encoder). Pure CPU work: no SQL, no stdio.
//!
//! Limits (storage-model §6.5, reliability.md §8): at most 8,192 px per side and at most 256 MiB
//! of decoded pixels; only PNG, JPEG, GIF (first frame), WebP and BMP decode (§11.19).

use std::io::Cursor;

use fast_image_resize::images::Image as FirImage;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

/// At most this many pixels per side (storage-model §6.5).
pub const MAX_SIDE: u32 = 8_192;
/// At most this many bytes of decoded pixels / decoder allocation (storage-model §6.5).
pub const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;
/// At most this many pixels (4096², reliability.md §8's tighter option): the worst case — 16-bit
/// RGBA decoded (128 MiB) plus its 8-bit copy — stays well under the host's 256 MiB budget.
pub const MAX_PIXELS: u64 = 4096 * 4096;
/// Allocation allowed while only reading a header (ancillary chunks such as a huge compressed
/// ICC profile are refused rather than inflated).
const HEADER_ALLOC: u64 = 8 * 1024 * 1024;

/// The formats we decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
    Gif,
    WebP,
    Bmp,
}

impl Format {
    fn image_format(self) -> ImageFormat {
        match self {
            Format::Png => ImageFormat::Png,
            Format::Jpeg => ImageFormat::Jpeg,
            Format::Gif => ImageFormat::Gif,
            Format::WebP => ImageFormat::WebP,
            Format::Bmp => ImageFormat::Bmp,
        }
    }
}

/// Why an image was refused (`image_rejected` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

/// Recognise a format by its magic bytes (never by the declared MIME type).
pub fn sniff(b: &[u8]) -> Option<Format> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else if b.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(Format::Jpeg)
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some(Format::Gif)
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some(Format::WebP)
    } else if b.starts_with(b"BM") && b.len() >= 26 {
        Some(Format::Bmp)
    } else {
        None
    }
}

fn limits(max_alloc: u64) -> Limits {
    let mut l = Limits::default();
    l.max_image_width = Some(MAX_SIDE);
    l.max_image_height = Some(MAX_SIDE);
    l.max_alloc = Some(max_alloc);
    l
}

type Reader<'a> = ImageReader<Cursor<&'a [u8]>>;

fn reader(bytes: &[u8], max_alloc: u64) -> Result<(Format, Reader<'_>), Rejected> {
    let format = sniff(bytes).ok_or_else(|| {
        Rejected("not a PNG, JPEG, GIF, WebP or BMP image (only these formats are accepted)".into())
    })?;
    let mut r = ImageReader::new(Cursor::new(bytes));
    r.set_format(format.image_format());
    r.limits(limits(max_alloc));
    Ok((format, r))
}

/// Width and height from the image header, without decoding pixels. `None` when the format is
/// not one we read or the header is damaged.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let (_, r) = reader(bytes, HEADER_ALLOC).ok()?;
    r.into_dimensions().ok()
}

/// Decode the first frame, with the header checked against the limits before any pixel buffer
/// exists, and EXIF orientation applied.
pub fn decode(bytes: &[u8]) -> Result<DynamicImage, Rejected> {
    // Header first, with a small allocation allowance, so nothing large is inflated before
    // the dimensions are known.
    let (w, h) = {
        let (_, r) = reader(bytes, HEADER_ALLOC)?;
        r.into_dimensions().map_err(|e| Rejected(format!("cannot read the image header: {e}")))?
    };
    if w as u64 * h as u64 > MAX_PIXELS {
        return Err(Rejected(format!(
            "image declares {w}×{h} pixels; at most {MAX_PIXELS} pixels are decoded"
        )));
    }
    let (format, r) = reader(bytes, (w as u64 * h as u64 * 8 + HEADER_ALLOC).min(MAX_DECODE_BYTES))?;
    let mut decoder =
        r.into_decoder().map_err(|e| Rejected(format!("cannot read the {format:?} header: {e}")))?;
    let (w, h) = decoder.dimensions();
    if w == 0 || h == 0 {
        return Err(Rejected(format!("{format:?} image declares {w}×{h} pixels")));
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(Rejected(format!(
            "{format:?} image declares {w}×{h} pixels; at most {MAX_SIDE} per side"
        )));
    }
    if decoder.total_bytes() > MAX_DECODE_BYTES {
        return Err(Rejected(format!(
            "{format:?} image would need {} bytes to decode; at most {MAX_DECODE_BYTES}",
            decoder.total_bytes()
        )));
    }
    let orientation = decoder.orientation().unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut img = DynamicImage::from_decoder(decoder)
        .map_err(|e| Rejected(format!("cannot decode the {format:?} image: {e}")))?;
    img.apply_orientation(orientation);
    Ok(img)
}

/// Scaled size for a long-edge bound: `min(1, max_edge / long edge)`, rounded half up, ≥ 1 px.
/// Exact integer arithmetic: round(v · e / l) = ⌊(2·v·e + l) / (2·l)⌋. (In floating point,
/// 143 · (480 / 704) is 97.4999…, which would round the exact half 97.5 down.)
pub fn target_size(w: u32, h: u32, max_edge: u32) -> (u32, u32) {
    let long = w.max(h).max(1);
    if long <= max_edge {
        return (w.max(1), h.max(1));
    }
    let (e, l) = (max_edge as u64, long as u64);
    let scale = |v: u32| ((2 * v as u64 * e + l) / (2 * l)).max(1) as u32;
    (scale(w), scale(h))
}

/// RGB8 pixels composited on opaque white. Converts in place where it can, so peak memory stays
/// near one RGBA copy of the image.
fn rgb_on_white(img: DynamicImage) -> (Vec<u8>, u32, u32) {
    let (w, h) = (img.width(), img.height());
    if let DynamicImage::ImageRgb8(buf) = img {
        return (buf.into_raw(), w, h);
    }
    let mut px = img.into_rgba8().into_raw();
    let n = px.len() / 4;
    for i in 0..n {
        let a = px[4 * i + 3] as u32;
        for c in 0..3 {
            let v = px[4 * i + c] as u32;
            px[3 * i + c] = ((v * a + 255 * (255 - a) + 127) / 255) as u8;
        }
    }
    px.truncate(3 * n);
    px.shrink_to_fit();
    (px, w, h)
}

/// A JPEG thumbnail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thumbnail {
    pub jpeg: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// Decode (limits, first frame, orientation), scale to `max_edge` on the long edge, composite on
/// white and encode as JPEG at `quality`.
pub fn thumbnail(bytes: &[u8], max_edge: u32, quality: u8) -> Result<Thumbnail, Rejected> {
    let img = decode(bytes)?;
    let (rgb, w, h) = rgb_on_white(img);
    let (tw, th) = target_size(w, h, max_edge.max(1));
    let pixels = if (tw, th) == (w, h) {
        rgb
    } else {
        let src = FirImage::from_vec_u8(w, h, rgb, PixelType::U8x3)
            .map_err(|e| Rejected(format!("resize: {e}")))?;
        let mut dst = FirImage::new(tw, th, PixelType::U8x3);
        let opts = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::CatmullRom));
        Resizer::new().resize(&src, &mut dst, &opts).map_err(|e| Rejected(format!("resize: {e}")))?;
        dst.into_vec()
    };
    let mut jpeg = Vec::with_capacity(64 * 1024);
    jpeg_encoder::Encoder::new(&mut jpeg, quality.clamp(1, 100))
        .encode(&pixels, tw as u16, th as u16, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| Rejected(format!("JPEG encoding failed: {e}")))?;
    Ok(Thumbnail { jpeg, width: tw, height: th })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32, alpha: u8) -> Vec<u8> {
        let img = image::RgbaImage::from_pixel(w, h, image::Rgba([0, 0, 0, alpha]));
        let mut out = Vec::new();
        img.write_to(&mut Cursor::new(&mut out), ImageFormat::Png).unwrap();
        out
    }

    #[test]
    fn sizes_round_half_up_and_never_vanish() {
        assert_eq!(target_size(960, 640, 480), (480, 320));
        assert_eq!(target_size(100, 50, 480), (100, 50));
        assert_eq!(target_size(10_000, 1, 480), (480, 1));
        assert_eq!(target_size(1000, 999, 480), (480, 480)); // 479.52 → 480
        assert_eq!(target_size(2000, 3, 480), (480, 1)); // 0.72 → 1
    }

    #[test]
    fn exact_halves_round_up() {
        // 143 · 480 / 704 = 97.5 exactly; in floating point 143 · (480 / 704) is 97.4999…
        assert_eq!(target_size(704, 143, 480), (480, 98));
        assert_eq!(target_size(143, 704, 480), (98, 480));
        assert_eq!(target_size(196, 147, 2), (2, 2)); // 1.5
        assert_eq!(target_size(704, 11, 480), (480, 8)); // 7.5
        assert_eq!(target_size(4, 3, 2), (2, 2)); // 1.5, exact in floating point too
        assert_eq!(target_size(8192, 8191, 8191), (8191, 8190)); // 8190.000122… → 8190
    }

    #[test]
    fn thumbnails_are_bounded_jpegs_on_white() {
        let t = thumbnail(&png(1000, 500, 0), 480, 82).unwrap();
        assert_eq!((t.width, t.height), (480, 240));
        assert_eq!(sniff(&t.jpeg), Some(Format::Jpeg));
        let back = image::load_from_memory(&t.jpeg).unwrap().to_rgb8();
        let p = back.get_pixel(10, 10);
        assert!(p[0] > 245 && p[1] > 245 && p[2] > 245, "transparent became white, got {p:?}");
    }

    #[test]
    fn header_limits_reject_before_decoding() {
        let mut big = png(1, 1, 255);
        // patch the IHDR width/height to 20000×20000 (the CRC no longer matches, which the
        // header check never gets to)
        big[16..20].copy_from_slice(&20_000u32.to_be_bytes());
        big[20..24].copy_from_slice(&20_000u32.to_be_bytes());
        assert!(decode(&big).is_err());
        assert!(decode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").is_err());
        assert!(decode(&png(4, 4, 255)[..30]).is_err());
    }
}
