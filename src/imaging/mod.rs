//! Image bytes: format sniffing, decoding under limits checked from the header before a single
//! pixel buffer exists, EXIF orientation, compositing on white, resizing (fast_image_resize) and
//! JPEG encoding (jpeg-encoder). Pure CPU work: no SQL, no stdio.
//!
//! Limits (storage-model §6.5, §12.9): at most 8,192 px per side and at most 256 MiB of decoder
//! allocation (the decoded frame plus the decoder's own working buffers, estimated per format
//! from the header); there is no pixel-count cap. Only PNG, JPEG, GIF (first frame), WebP and BMP
//! decode (§11.19).
//!
//! Memory (§12.23: image decoding has its own budget, [`DECODE_BUDGET`] = 288 MiB): the source
//! bytes (≤ 32 MiB, the image cap) plus the decoder allocation (≤ 256 MiB) are the peak. Nothing
//! else of full size is ever allocated: the frame is converted to 8-bit grey or RGB on white in
//! place, a frame much larger than the thumbnail is box-averaged in place to about twice the
//! thumbnail size and the buffer shrunk before the resizer allocates anything, and EXIF
//! orientation is applied to the thumbnail, not the frame. JPEGs are decoded at a reduced scale
//! (DCT scaling by jpeg-decoder: 1/2, 1/4 or 1/8, the smallest that still gives at least twice
//! the thumbnail size), so a 48-megapixel photo never exists at full size.

use std::io::Cursor;

use fast_image_resize::images::Image as FirImage;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::metadata::Orientation;
use image::{ColorType, DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits, RgbImage};

/// At most this many pixels per side (storage-model §6.5).
pub const MAX_SIDE: u32 = 8_192;
/// At most this many bytes of decoder allocation: the decoded frame plus the decoder's working
/// buffers (storage-model §6.5).
pub const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;
/// Image decoding's memory budget (storage-model §12.23): the source bytes (at most the 32 MiB
/// image cap) plus the decoder allocation.
pub const DECODE_BUDGET: u64 = crate::protocol::limits::MAX_IMAGE_BYTES as u64 + MAX_DECODE_BYTES;
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

fn sniffed(bytes: &[u8]) -> Result<Format, Rejected> {
    sniff(bytes).ok_or_else(|| {
        Rejected("not a PNG, JPEG, GIF, WebP or BMP image (only these formats are accepted)".into())
    })
}

fn reader(bytes: &[u8], max_alloc: u64) -> Result<(Format, Reader<'_>), Rejected> {
    let format = sniffed(bytes)?;
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

fn check_sides(format: Format, w: u32, h: u32) -> Result<(), Rejected> {
    if w == 0 || h == 0 {
        return Err(Rejected(format!("{format:?} image declares {w}×{h} pixels")));
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(Rejected(format!(
            "{format:?} image declares {w}×{h} pixels; at most {MAX_SIDE} per side"
        )));
    }
    Ok(())
}

fn check_alloc(format: Format, w: u32, h: u32, need: u64) -> Result<(), Rejected> {
    if need > MAX_DECODE_BYTES {
        return Err(Rejected(format!(
            "{format:?} image of {w}×{h} pixels would need {need} bytes to decode; at most {MAX_DECODE_BYTES}"
        )));
    }
    Ok(())
}

/// 8-bit pixels composited on opaque white, row-major: 1 channel (grey) or 3 (RGB).
struct Pixels {
    buf: Vec<u8>,
    w: u32,
    h: u32,
    channels: usize,
}

/// A decoded first frame, possibly at a reduced scale, with the facts the thumbnail needs.
struct Decoded {
    px: Pixels,
    /// The image's own size (before any decode-time scaling, before orientation).
    full: (u32, u32),
    orientation: Orientation,
}

/// Working memory a decoder needs besides its output frame (estimated from the header, upper
/// bounds of what image 0.25's decoders allocate): PNG and BMP decode straight into the output
/// (a couple of rows); a GIF whose first frame does not span the screen needs a frame buffer
/// (bounded through the decoder's allocation limit); WebP decodes lossy frames through YUV planes
/// (1.5 bytes per pixel of 16-px macroblocks) plus an alpha plane that may itself be a lossless
/// frame (4 bytes per pixel), and a lossless frame without alpha through an RGBA copy.
fn working_bytes(format: Format, w: u32, h: u32, color: ColorType) -> u64 {
    let (w, h) = (w as u64, h as u64);
    match format {
        Format::Png => 2 * (w * color.bytes_per_pixel() as u64 + 1) + 64 * 1024,
        Format::Bmp | Format::Gif => 64 * 1024,
        Format::WebP => {
            let mb = w.div_ceil(16) * 16 * h.div_ceil(16) * 16;
            let lossy = mb * 3 / 2 + if color.has_alpha() { 4 * w * h } else { 0 };
            let lossless = if color.has_alpha() { 0 } else { 4 * w * h };
            lossy.max(lossless)
        }
        Format::Jpeg => 0,
    }
}

/// Decode the first frame of a PNG, GIF, WebP or BMP into 8-bit grey or RGB on white.
fn decode_generic(bytes: &[u8], format: Format) -> Result<Decoded, Rejected> {
    let header = |e: image::ImageError| Rejected(format!("cannot read the {format:?} header: {e}"));
    // Header first, with a small allocation allowance, so nothing large is inflated before the
    // dimensions and sample layout are known.
    let (out, w, h, color) = {
        let (_, r) = reader(bytes, HEADER_ALLOC)?;
        let d = r.into_decoder().map_err(header)?;
        let (w, h) = d.dimensions();
        (d.total_bytes(), w, h, d.color_type())
    };
    check_sides(format, w, h)?;
    check_alloc(format, w, h, out.saturating_add(working_bytes(format, w, h, color)))?;
    // The decoder's own allocations (rows, ancillary chunks such as a compressed ICC profile, a
    // GIF frame buffer) are held to what the frame leaves of the budget, and, except for a GIF's
    // frame buffer, to the estimate plus the header allowance: a 10×10 PNG never inflates a
    // 300 MB iCCP chunk.
    let remaining = MAX_DECODE_BYTES - out;
    let internal = match format {
        Format::Gif => remaining,
        _ => remaining.min(working_bytes(format, w, h, color) + HEADER_ALLOC),
    };
    let (_, r) = reader(bytes, internal)?;
    let mut decoder = r.into_decoder().map_err(header)?;
    if decoder.dimensions() != (w, h) || decoder.total_bytes() != out || decoder.color_type() != color {
        return Err(Rejected(format!("{format:?} header reads differently the second time")));
    }
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let mut buf = vec![0u8; out as usize];
    decoder.read_image(&mut buf).map_err(|e| Rejected(format!("cannot decode the {format:?} image: {e}")))?;
    let px = to_working(buf, w, h, color)?;
    Ok(Decoded { px, full: (w, h), orientation })
}

/// One sample (1, 2 or 4 bytes, native endian as image's decoders write them) as 8 bits.
fn sample8(b: &[u8]) -> u8 {
    match b.len() {
        1 => b[0],
        2 => ((u16::from_ne_bytes([b[0], b[1]]) as u32 * 255 + 32_767) / 65_535) as u8,
        _ => {
            let f = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            (f.clamp(0.0, 1.0) * 255.0).round() as u8
        }
    }
}

fn on_white(v: u8, a: u32) -> u8 {
    ((v as u32 * a + 255 * (255 - a) + 127) / 255) as u8
}

/// Convert a decoded frame to 8-bit grey (grey sources) or RGB, composited on white, in place:
/// every output pixel is no wider than its source pixel, so writing pixel i never overtakes the
/// reading of pixel i + 1.
fn to_working(mut buf: Vec<u8>, w: u32, h: u32, color: ColorType) -> Result<Pixels, Rejected> {
    let n = w as usize * h as usize;
    let ch_in = color.channel_count() as usize;
    let bpp = color.bytes_per_pixel() as usize;
    if ch_in == 0 || bpp % ch_in != 0 || buf.len() < n * bpp {
        return Err(Rejected(format!("unsupported sample layout {color:?}")));
    }
    let bps = bpp / ch_in;
    let alpha = color.has_alpha();
    let channels = if ch_in <= 2 { 1 } else { 3 };
    match (color, channels) {
        (ColorType::L8, _) | (ColorType::Rgb8, _) => {}
        (ColorType::Rgba8, _) => {
            for i in 0..n {
                let s = 4 * i;
                let a = buf[s + 3] as u32;
                let (r, g, b) = (buf[s], buf[s + 1], buf[s + 2]);
                buf[3 * i] = on_white(r, a);
                buf[3 * i + 1] = on_white(g, a);
                buf[3 * i + 2] = on_white(b, a);
            }
        }
        _ => {
            let mut v = [0u8; 4];
            for i in 0..n {
                let s = i * bpp;
                for (c, slot) in v.iter_mut().enumerate().take(ch_in) {
                    *slot = sample8(&buf[s + c * bps..s + (c + 1) * bps]);
                }
                let a = if alpha { v[ch_in - 1] as u32 } else { 255 };
                for c in 0..channels {
                    buf[i * channels + c] = on_white(v[c], a);
                }
            }
        }
    }
    buf.truncate(n * channels);
    Ok(Pixels { buf, w, h, channels })
}

/// The frame header of a JPEG: precision and each component's sampling factors.
fn jpeg_sampling(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    let mut i = 2;
    while i + 4 <= b.len() {
        if b[i] != 0xFF {
            return None;
        }
        let m = b[i + 1];
        if m == 0xFF {
            i += 1;
            continue;
        }
        if m == 0x01 || (0xD0..=0xD8).contains(&m) {
            i += 2;
            continue;
        }
        let len = u16::from_be_bytes([b[i + 2], b[i + 3]]) as usize;
        if (0xC0..=0xCF).contains(&m) && !matches!(m, 0xC4 | 0xC8 | 0xCC) {
            let seg = b.get(i + 4..i + 2 + len)?;
            let n = *seg.get(5)? as usize;
            return (0..n)
                .map(|c| {
                    seg.get(6 + 3 * c + 1).map(|hv| (((hv >> 4) as u64).max(1), ((hv & 15) as u64).max(1)))
                })
                .collect();
        }
        if m == 0xDA {
            return None;
        }
        i += 2 + len;
    }
    None
}

/// Decode a JPEG at the smallest DCT scale (1/8, 1/4, 1/2, 1) that still gives at least twice
/// the `max_edge` thumbnail's size, with jpeg-decoder's allocation estimated from the frame
/// header first.
fn decode_jpeg(bytes: &[u8], max_edge: u32) -> Result<Decoded, Rejected> {
    use jpeg_decoder::{CodingProcess, PixelFormat};
    let fmt = Format::Jpeg;
    let mut d = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    d.read_info().map_err(|e| Rejected(format!("cannot read the Jpeg header: {e}")))?;
    let info = d.info().ok_or_else(|| Rejected("cannot read the Jpeg header".into()))?;
    let (w, h) = (info.width as u32, info.height as u32);
    check_sides(fmt, w, h)?;
    let lossless = info.coding_process == CodingProcess::Lossless;
    let (sw, sh) = {
        let want = target_size(w, h, max_edge.saturating_mul(2));
        if lossless || want == (w, h) {
            (w, h)
        } else {
            let (a, b) = d
                .scale(want.0 as u16, want.1 as u16)
                .map_err(|e| Rejected(format!("cannot scale the Jpeg: {e}")))?;
            (a as u32, b as u32)
        }
    };
    let (comps, out_bps) = match info.pixel_format {
        PixelFormat::L8 => (1u64, 1u64),
        PixelFormat::L16 => (1, 2),
        PixelFormat::RGB24 => (3, 1),
        PixelFormat::CMYK32 => (4, 1),
    };
    // jpeg-decoder's buffers: a plane per component at the decode scale (blocks rounded up to
    // whole MCUs), all coefficients of a progressive frame (2 bytes each, unscaled) or one MCU
    // row's for a sequential one, and the interleaved output.
    let sampling = jpeg_sampling(bytes).unwrap_or_else(|| vec![(1, 1); comps as usize]);
    let (hmax, vmax) = sampling.iter().fold((1, 1), |(a, b), &(x, y)| (a.max(x), b.max(y)));
    let (w64, h64) = (w as u64, h as u64);
    let (mcux, mcuy) = (w64.div_ceil(8 * hmax), h64.div_ceil(8 * vmax));
    let idct = [1u64, 2, 4, 8].into_iter().find(|s| (w64 * s).div_ceil(8) == sw as u64).unwrap_or(8);
    let mut need = sw as u64 * sh as u64 * comps * out_bps;
    for &(hs, vs) in &sampling {
        let blocks = mcux * hs * mcuy * vs;
        need += if lossless { w64 * h64 * 2 } else { blocks * idct * idct };
        need += match info.coding_process {
            CodingProcess::DctProgressive => blocks * 128,
            CodingProcess::DctSequential => mcux * hs * vs * 128,
            CodingProcess::Lossless => 0,
        };
    }
    check_alloc(fmt, w, h, need)?;
    let buf = d.decode().map_err(|e| Rejected(format!("cannot decode the Jpeg image: {e}")))?;
    let orientation =
        d.exif_data().and_then(Orientation::from_exif_chunk).unwrap_or(Orientation::NoTransforms);
    let px = match info.pixel_format {
        PixelFormat::L8 => to_working(buf, sw, sh, ColorType::L8)?,
        PixelFormat::L16 => to_working(buf, sw, sh, ColorType::L16)?,
        PixelFormat::RGB24 => to_working(buf, sw, sh, ColorType::Rgb8)?,
        PixelFormat::CMYK32 => {
            // jpeg-decoder hands out Adobe's inverted CMYK; as image 0.24 converted it
            let mut buf = buf;
            let n = sw as usize * sh as usize;
            for i in 0..n {
                let s = 4 * i;
                let k = 255 - buf[s + 3] as u32;
                for c in 0..3 {
                    buf[3 * i + c] = ((255 - buf[s + c] as u32) * k / 255) as u8;
                }
            }
            buf.truncate(3 * n);
            Pixels { buf, w: sw, h: sh, channels: 3 }
        }
    };
    if (px.w, px.h) != (sw, sh) || px.buf.len() != sw as usize * sh as usize * px.channels {
        return Err(Rejected("Jpeg decoded to an unexpected size".into()));
    }
    Ok(Decoded { px, full: (w, h), orientation })
}

/// Decode the first frame for a result at most `max_edge` px on its long edge (JPEGs at a reduced
/// scale), checking the limits from the header first.
fn decode_for(bytes: &[u8], max_edge: u32) -> Result<Decoded, Rejected> {
    match sniffed(bytes)? {
        Format::Jpeg => decode_jpeg(bytes, max_edge),
        f => decode_generic(bytes, f),
    }
}

/// Average `k`×`k` blocks in place (edge blocks over the pixels they have), then give the rest
/// of the buffer back. Output row r is written below input row r·k, and within row 0 pixel x is
/// written after every input pixel it covers was read, so nothing unread is overwritten.
fn box_reduce(px: &mut Pixels, k: u32) {
    let (w, h, c) = (px.w as usize, px.h as usize, px.channels);
    let k = k as usize;
    let (ow, oh) = (w.div_ceil(k), h.div_ceil(k));
    let buf = &mut px.buf;
    let mut sum = [0u32; 3];
    for oy in 0..oh {
        let y0 = oy * k;
        let y1 = (y0 + k).min(h);
        for ox in 0..ow {
            let x0 = ox * k;
            let x1 = (x0 + k).min(w);
            sum[..c].iter_mut().for_each(|s| *s = 0);
            for y in y0..y1 {
                let row = &buf[(y * w + x0) * c..(y * w + x1) * c];
                for p in row.chunks_exact(c) {
                    for (s, v) in sum.iter_mut().zip(p) {
                        *s += *v as u32;
                    }
                }
            }
            let count = ((y1 - y0) * (x1 - x0)) as u32;
            let o = (oy * ow + ox) * c;
            for ch in 0..c {
                buf[o + ch] = ((sum[ch] + count / 2) / count) as u8;
            }
        }
    }
    buf.truncate(ow * oh * c);
    buf.shrink_to_fit();
    px.w = ow as u32;
    px.h = oh as u32;
}

fn swaps_sides(o: Orientation) -> bool {
    matches!(
        o,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    )
}

/// The size a browser shows (EXIF orientation applied) after checking that the image decodes
/// within the limits. The pixels are not kept.
pub fn oriented_size(bytes: &[u8]) -> Result<(u32, u32), Rejected> {
    let d = decode_for(bytes, MAX_SIDE)?;
    let (w, h) = d.full;
    Ok(if swaps_sides(d.orientation) { (h, w) } else { (w, h) })
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

/// A JPEG thumbnail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thumbnail {
    pub jpeg: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// Decode (limits, first frame, JPEG at a reduced scale), scale to `max_edge` on the long edge of
/// the image, composite on white, apply the EXIF orientation and encode as JPEG at `quality`.
pub fn thumbnail(bytes: &[u8], max_edge: u32, quality: u8) -> Result<Thumbnail, Rejected> {
    let max_edge = max_edge.max(1);
    let Decoded { mut px, full, orientation } = decode_for(bytes, max_edge)?;
    // the size follows from the image's own size, whatever scale it was decoded at; orientation
    // only swaps the sides (the rule is symmetric)
    let (tw, th) = target_size(full.0, full.1, max_edge);
    let k = (px.w / (2 * tw)).min(px.h / (2 * th));
    if k >= 2 {
        box_reduce(&mut px, k);
    }
    let fir_type = if px.channels == 1 { PixelType::U8 } else { PixelType::U8x3 };
    let pixels = if (tw, th) == (px.w, px.h) {
        px.buf
    } else {
        let src = FirImage::from_vec_u8(px.w, px.h, px.buf, fir_type)
            .map_err(|e| Rejected(format!("resize: {e}")))?;
        let mut dst = FirImage::new(tw, th, fir_type);
        let opts = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::CatmullRom));
        Resizer::new().resize(&src, &mut dst, &opts).map_err(|e| Rejected(format!("resize: {e}")))?;
        dst.into_vec()
    };
    let rgb = if px.channels == 1 { pixels.iter().flat_map(|&v| [v, v, v]).collect() } else { pixels };
    let (rgb, width, height) = if orientation == Orientation::NoTransforms {
        (rgb, tw, th)
    } else {
        let img = RgbImage::from_raw(tw, th, rgb).ok_or_else(|| Rejected("thumbnail buffer size".into()))?;
        let mut img = DynamicImage::ImageRgb8(img);
        img.apply_orientation(orientation);
        let (w, h) = (img.width(), img.height());
        (img.into_rgb8().into_raw(), w, h)
    };
    let mut jpeg = Vec::with_capacity(64 * 1024);
    jpeg_encoder::Encoder::new(&mut jpeg, quality.clamp(1, 100))
        .encode(&rgb, width as u16, height as u16, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| Rejected(format!("JPEG encoding failed: {e}")))?;
    Ok(Thumbnail { jpeg, width, height })
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
        assert!(oriented_size(&big).is_err());
        assert!(oriented_size(b"<svg xmlns='http://www.w3.org/2000/svg'/>").is_err());
        assert!(oriented_size(&png(4, 4, 255)[..30]).is_err());
        // 8192×8192 RGBA: the frame alone is 256 MiB, so the decoder's rows take it over
        let mut rgba = png(1, 1, 255);
        rgba[16..20].copy_from_slice(&8192u32.to_be_bytes());
        rgba[20..24].copy_from_slice(&8192u32.to_be_bytes());
        let crc = crc32(&rgba[12..29]);
        rgba[29..33].copy_from_slice(&crc.to_be_bytes());
        let e = oriented_size(&rgba).unwrap_err();
        assert!(e.0.contains("would need"), "{e}");
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            }
        }
        !c
    }

    fn noisy_rgb(w: u32, h: u32) -> image::RgbImage {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        image::RgbImage::from_fn(w, h, |px, py| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x & 31) as u8;
            image::Rgb([(px % 200) as u8 + n, (py % 200) as u8 + n, 128 + n])
        })
    }

    #[test]
    fn images_over_the_old_pixel_cap_become_thumbnails() {
        // 6000×3000 = 18,000,000 px, over the former 16,777,216-pixel cap
        let mut out = Vec::new();
        noisy_rgb(6000, 3000).write_to(&mut Cursor::new(&mut out), ImageFormat::Png).unwrap();
        let t = thumbnail(&out, 480, 82).unwrap();
        assert_eq!((t.width, t.height), (480, 240));
        assert_eq!(oriented_size(&out).unwrap(), (6000, 3000));
    }

    #[test]
    fn large_jpegs_decode_at_a_reduced_scale() {
        let img = noisy_rgb(4000, 2000);
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 80)
            .encode(img.as_raw(), 4000, 2000, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        let d = decode_for(&jpeg, 480).unwrap();
        // 1/4 scale: 1000×500 is the smallest DCT scale at least twice 480×240
        assert_eq!((d.px.w, d.px.h), (1000, 500));
        assert_eq!(d.full, (4000, 2000));
        let t = thumbnail(&jpeg, 480, 82).unwrap();
        assert_eq!((t.width, t.height), (480, 240));
        let back = image::load_from_memory(&t.jpeg).unwrap().to_rgb8();
        // the picture survives: left is darker in red than right (the ramp of px % 200)
        let (l, r) = (back.get_pixel(5, 120)[0], back.get_pixel(20, 120)[0]);
        assert!(l < r, "{l} {r}");
    }

    #[test]
    fn box_reduce_averages_in_place_including_edge_blocks() {
        let buf: Vec<u8> = (0..5 * 3).map(|i| i as u8).collect(); // 5×3 grey
        let mut px = Pixels { buf, w: 5, h: 3, channels: 1 };
        box_reduce(&mut px, 2);
        assert_eq!((px.w, px.h), (3, 2));
        // blocks: [0,1,5,6]→3, [2,3,7,8]→5, [4,9]→6.5→7, [10,11]→10.5→11, [12,13]→13, [14]
        assert_eq!(px.buf, vec![3, 5, 7, 11, 13, 14]);
    }
}
