//! Image decode limits over the real binary (PROTOCOL.md "attaching and images", storage-model
//! §6.5 and §11.19, reliability.md §8 and T09/T10): a corpus of image bombs, truncated files,
//! polyglots and foreign formats, every one generated here (no binary fixtures), thrown at
//! `images.thumbnail` and, for a few, at `history.boundImages`. Peak memory is read from the host
//! child's `/proc/<pid>/status` (VmHWM), reset per case through `/proc/<pid>/clear_refs`.
use crate::harness::*;

use std::io::Cursor;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

/// Peak RSS bound for the whole corpus in one process (brief, reliability.md §8).
const MAX_PEAK_KIB: u64 = 256 * 1024;
/// Image decoding's memory budget (storage-model §12.23): source bytes plus decoder allocation.
const DECODE_BUDGET_KIB: u64 = 288 * 1024;
/// Peak RSS bound per rejected bomb (reliability.md T09).
const MAX_BOMB_PEAK_KIB: u64 = 128 * 1024;
/// Answer time bound for a rejected bomb (reliability.md T09); for payloads over 64 KiB it bounds
/// the time beyond moving a same-size frame (the debug build parses frames slowly), plus 1 s flat.
const MAX_REJECT_MS: f64 = 250.0;

// ---------------------------------------------------------------------------------------------
// checksums

/// CRC-32 (IEEE, reflected, polynomial 0xEDB88320), bit by bit: no table, no dependency.
fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
        }
    }
    !c
}

fn crc32(data: &[u8]) -> u32 {
    crc32_update(0, data)
}

fn adler32(data: &[u8]) -> u32 {
    const M: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5_552) {
        for &x in chunk {
            a += x as u32;
            b += a;
        }
        a %= M;
        b %= M;
    }
    (b << 16) | a
}

/// Adler-32 of `n` zero bytes: a stays 1, b counts the bytes.
fn adler32_zeros(n: u64) -> u32 {
    (((n % 65_521) as u32) << 16) | 1
}

// ---------------------------------------------------------------------------------------------
// a minimal deflate writer

#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    /// `count` (≤ 32) bits of `v`, least significant first (header fields, extra bits).
    fn put(&mut self, v: u32, count: u32) {
        self.acc |= (v as u64) << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code: most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        let rev = code.reverse_bits() >> (32 - len);
        self.put(rev, len);
    }

    /// `count` zero bits, in bulk.
    fn zeros(&mut self, mut count: u64) {
        while count > 0 && self.n != 0 {
            self.put(0, 1);
            count -= 1;
        }
        self.out.resize(self.out.len() + (count / 8) as usize, 0);
        self.put(0, (count % 8) as u32);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// Raw deflate of `n` zero bytes in one dynamic-Huffman block whose only codes are literal 0,
/// end-of-block and length 258 (1 bit) at distance 1 (1 bit): 2 bits per 258 bytes, the 1032:1
/// ratio zlib reaches on zeros.
fn deflate_zeros(n: u64) -> Vec<u8> {
    let mut b = Bits::default();
    b.put(1, 1); // BFINAL
    b.put(2, 2); // BTYPE = dynamic
    b.put(29, 5); // HLIT: 286 literal/length codes
    b.put(1, 5); // HDIST: 2 distance codes
    b.put(14, 4); // HCLEN: 18 code-length codes
                  // code-length code lengths, in the RFC 1951 order; we use symbols 1, 2 and 18
    const ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
    for &sym in &ORDER[..18] {
        let len = match sym {
            18 => 1,
            1 | 2 => 2,
            _ => 0,
        };
        b.put(len, 3);
    }
    // canonical code-length codes: 18 → 0, 1 → 10, 2 → 11
    let cl = |b: &mut Bits, sym: u32| match sym {
        18 => b.code(0, 1),
        1 => b.code(0b10, 2),
        2 => b.code(0b11, 2),
        _ => unreachable!(),
    };
    cl(&mut b, 2); // literal 0: length 2
    cl(&mut b, 18);
    b.put(138 - 11, 7); // literals 1..=138: unused
    cl(&mut b, 18);
    b.put(117 - 11, 7); // literals 139..=255: unused
    cl(&mut b, 2); // 256 (end of block): length 2
    cl(&mut b, 18);
    b.put(28 - 11, 7); // length codes 257..=284: unused
    cl(&mut b, 1); // 285 (length 258): length 1
    cl(&mut b, 1); // distance code 0 (distance 1): length 1
    cl(&mut b, 1); // distance code 1: length 1 (keeps the tree complete)
                   // canonical literal/length codes: 285 → 0, literal 0 → 10, end of block → 11
    if n > 0 {
        b.code(0b10, 2);
        let rest = n - 1;
        b.zeros(rest / 258 * 2); // each match: length 258 (0) + distance 1 (0)
        for _ in 0..rest % 258 {
            b.code(0b10, 2);
        }
    }
    b.code(0b11, 2);
    b.finish()
}

/// Length code, extra-bit count and base for a match length 3..=258 (RFC 1951 §3.2.5).
fn length_code(len: u32) -> (u32, u32, u32) {
    const BASE: [u32; 29] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163,
        195, 227, 258,
    ];
    const EXTRA: [u32; 29] =
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
    let i = if len == 258 { 28 } else { BASE.iter().rposition(|&b| b <= len).unwrap() };
    (257 + i as u32, EXTRA[i], BASE[i])
}

fn fixed_symbol(b: &mut Bits, sym: u32) {
    match sym {
        0..=143 => b.code(0x30 + sym, 8),
        144..=255 => b.code(0x190 + sym - 144, 9),
        256..=279 => b.code(sym - 256, 7),
        _ => b.code(0xC0 + sym - 280, 8),
    }
}

/// Raw deflate of any bytes in one fixed-Huffman block: literals, runs as distance-1 matches.
fn deflate_rle(data: &[u8]) -> Vec<u8> {
    let mut b = Bits::default();
    b.put(1, 1); // BFINAL
    b.put(1, 2); // BTYPE = fixed
    let mut i = 0;
    while i < data.len() {
        let v = data[i];
        fixed_symbol(&mut b, v as u32);
        let mut run = data[i + 1..].iter().take_while(|&&x| x == v).count() as u32;
        i += 1 + run as usize;
        while run >= 3 {
            let mut l = run.min(258);
            if run > l && run - l < 3 {
                l = run - 3;
            }
            let (sym, extra, base) = length_code(l);
            fixed_symbol(&mut b, sym);
            b.put(l - base, extra);
            b.code(0, 5); // distance code 0 = distance 1
            run -= l;
        }
        for _ in 0..run {
            fixed_symbol(&mut b, v as u32);
        }
    }
    fixed_symbol(&mut b, 256);
    b.finish()
}

fn zlib(deflate: Vec<u8>, adler: u32) -> Vec<u8> {
    let mut out = vec![0x78, 0x9C];
    out.extend_from_slice(&deflate);
    out.extend_from_slice(&adler.to_be_bytes());
    out
}

fn zlib_zeros(n: u64) -> Vec<u8> {
    zlib(deflate_zeros(n), adler32_zeros(n))
}

fn zlib_rle(data: &[u8]) -> Vec<u8> {
    zlib(deflate_rle(data), adler32(data))
}

// ---------------------------------------------------------------------------------------------
// PNG by hand (valid CRCs)

const PNG_SIG: &[u8] = b"\x89PNG\r\n\x1a\n";

fn png_chunk(out: &mut Vec<u8>, ty: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(ty);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32_update(crc32(ty), data).to_be_bytes());
}

fn ihdr(w: u32, h: u32, color_type: u8) -> Vec<u8> {
    ihdr_depth(w, h, color_type, 8)
}

fn ihdr_depth(w: u32, h: u32, color_type: u8, depth: u8) -> Vec<u8> {
    let mut d = Vec::with_capacity(13);
    d.extend_from_slice(&w.to_be_bytes());
    d.extend_from_slice(&h.to_be_bytes());
    d.extend_from_slice(&[depth, color_type, 0, 0, 0]);
    d
}

/// Bytes per pixel of an 8-bit PNG colour type.
fn png_bpp(color_type: u8) -> u64 {
    match color_type {
        0 => 1,
        2 => 3,
        4 => 2,
        6 => 4,
        _ => panic!("colour type {color_type}"),
    }
}

/// A PNG: signature, IHDR, `extra` chunks, one IDAT holding `zdata`, IEND.
fn png_file(w: u32, h: u32, color_type: u8, extra: &[(&[u8; 4], Vec<u8>)], zdata: &[u8]) -> Vec<u8> {
    let mut out = PNG_SIG.to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr(w, h, color_type));
    for (ty, data) in extra {
        png_chunk(&mut out, ty, data);
    }
    png_chunk(&mut out, b"IDAT", zdata);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// An all-zero (black / transparent) PNG whose IDAT is exactly the declared size, compressed
/// 1032:1.
fn png_zero(w: u32, h: u32, color_type: u8) -> Vec<u8> {
    let raw = h as u64 * (1 + w as u64 * png_bpp(color_type));
    png_file(w, h, color_type, &[], &zlib_zeros(raw))
}

/// An all-zero 16-bit PNG.
fn png_zero16(w: u32, h: u32, color_type: u8) -> Vec<u8> {
    let raw = h as u64 * (1 + w as u64 * png_bpp(color_type) * 2);
    let mut out = PNG_SIG.to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr_depth(w, h, color_type, 16));
    png_chunk(&mut out, b"IDAT", &zlib_zeros(raw));
    png_chunk(&mut out, b"IEND", &[]);
    out
}

// ---------------------------------------------------------------------------------------------
// other hand-made formats

/// Deterministic xorshift64* bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 32) as u8).collect()
    }
}

/// GIF LZW data (minimum code size 2) that never grows the code table: a clear code before
/// every pair of pixels keeps the code width at 3 bits.
fn gif_lzw(pixels: &[u8]) -> Vec<u8> {
    let mut b = Bits::default();
    for pair in pixels.chunks(2) {
        b.put(4, 3); // clear
        for &p in pair {
            b.put(p as u32, 3);
        }
    }
    b.put(5, 3); // end of information
    let data = b.finish();
    let mut out = vec![2u8];
    for block in data.chunks(255) {
        out.push(block.len() as u8);
        out.extend_from_slice(block);
    }
    out.push(0);
    out
}

/// Palette of the generated GIFs: red, blue, green, white.
const GIF_PALETTE: [u8; 12] = [255, 0, 0, 0, 0, 255, 0, 255, 0, 255, 255, 255];

fn gif_header(w: u16, h: u16) -> Vec<u8> {
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&w.to_le_bytes());
    out.extend_from_slice(&h.to_le_bytes());
    out.extend_from_slice(&[0x81, 0, 0]); // global colour table of 4 entries
    out.extend_from_slice(&GIF_PALETTE);
    out
}

fn gif_frame(out: &mut Vec<u8>, x: u16, y: u16, w: u16, h: u16, colour: u8) {
    out.extend_from_slice(&[0x21, 0xF9, 4, 0x04, 1, 0, 0, 0]); // keep previous frame, 10 ms
    out.push(0x2C);
    for v in [x, y, w, h] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(0);
    out.extend_from_slice(&gif_lzw(&vec![colour; w as usize * h as usize]));
}

/// A `w`×`h` animated GIF: a full red first frame, then `frames − 1` one-pixel blue frames.
fn gif_animation(w: u16, h: u16, frames: usize) -> Vec<u8> {
    let mut out = gif_header(w, h);
    out.extend_from_slice(&[0x21, 0xFF, 11]);
    out.extend_from_slice(b"NETSCAPE2.0");
    out.extend_from_slice(&[3, 1, 0, 0, 0]);
    gif_frame(&mut out, 0, 0, w, h, 0);
    for i in 1..frames {
        let x = (i % w as usize) as u16;
        let y = ((i / w as usize) % h as usize) as u16;
        gif_frame(&mut out, x, y, 1, 1, 1);
    }
    out.push(0x3B);
    out
}

/// A BMP header (BITMAPINFOHEADER, 24 bpp) declaring `w`×`h`, with `pixels` bytes after it.
fn bmp(w: i32, h: i32, pixels: usize) -> Vec<u8> {
    let mut out = b"BM".to_vec();
    out.extend_from_slice(&(54 + pixels as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&54u32.to_le_bytes());
    out.extend_from_slice(&40u32.to_le_bytes());
    out.extend_from_slice(&w.to_le_bytes());
    out.extend_from_slice(&h.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&24u16.to_le_bytes());
    out.extend_from_slice(&[0; 24]); // no compression, sizes, resolution, palette
    out.resize(out.len() + pixels, 0x7F);
    out
}

/// The RIFF chunks (after "WEBP") of a WebP file.
fn webp_chunks(webp: &[u8]) -> &[u8] {
    assert_eq!(&webp[8..12], b"WEBP");
    &webp[12..]
}

fn riff_webp(chunks: &[u8]) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(4 + chunks.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WEBP");
    out.extend_from_slice(chunks);
    out
}

/// An extended (VP8X) WebP declaring a `w`×`h` canvas, carrying the image chunk of `inner`.
fn webp_vp8x(w: u32, h: u32, inner: &[u8]) -> Vec<u8> {
    let mut c = b"VP8X".to_vec();
    c.extend_from_slice(&10u32.to_le_bytes());
    c.extend_from_slice(&[0, 0, 0, 0]);
    c.extend_from_slice(&(w - 1).to_le_bytes()[..3]);
    c.extend_from_slice(&(h - 1).to_le_bytes()[..3]);
    c.extend_from_slice(webp_chunks(inner));
    riff_webp(&c)
}

/// A lossless WebP whose VP8L header is patched to declare `w`×`h` (1..=16383).
fn webp_vp8l_declaring(inner: &[u8], w: u32, h: u32) -> Vec<u8> {
    let mut out = inner.to_vec();
    assert_eq!(&out[12..16], b"VP8L");
    assert_eq!(out[20], 0x2F, "VP8L signature");
    let old = u32::from_le_bytes(out[21..25].try_into().unwrap());
    let bits = (old & !0x0FFF_FFFF) | (w - 1) | ((h - 1) << 14);
    out[21..25].copy_from_slice(&bits.to_le_bytes());
    out
}

fn tiff_1x1() -> Vec<u8> {
    let mut out = b"II*\0".to_vec();
    out.extend_from_slice(&8u32.to_le_bytes());
    let entries: [(u16, u16, u32); 8] = [
        (256, 3, 1),   // width
        (257, 3, 1),   // height
        (258, 3, 8),   // bits per sample
        (259, 3, 1),   // no compression
        (262, 3, 1),   // black is zero
        (273, 4, 110), // strip offset
        (278, 3, 1),   // rows per strip
        (279, 4, 1),   // strip byte count
    ];
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, ty, v) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(out.len(), 110);
    out.push(0x80);
    out
}

fn ico_with_png(png: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 1, 0, 1, 0];
    out.extend_from_slice(&[16, 16, 0, 0, 1, 0, 32, 0]);
    out.extend_from_slice(&(png.len() as u32).to_le_bytes());
    out.extend_from_slice(&22u32.to_le_bytes());
    out.extend_from_slice(png);
    out
}

/// A minimal stored ZIP archive holding one file.
fn zip_archive(name: &str, body: &[u8]) -> Vec<u8> {
    let crc = crc32(body);
    let mut out = b"PK\x03\x04".to_vec();
    out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(body);
    let cd_start = out.len() as u32;
    out.extend_from_slice(b"PK\x01\x02");
    out.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    let cd_len = out.len() as u32 - cd_start;
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0");
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd_start.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

// ---------------------------------------------------------------------------------------------
// image-crate encodes and JPEG surgery

fn encode(img: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), format).expect("encode fixture");
    out
}

fn noisy(w: u32, h: u32, seed: u64) -> image::DynamicImage {
    let mut rng = Rng(seed | 1);
    let px = rng.bytes(w as usize * h as usize * 3);
    image::DynamicImage::ImageRgb8(image::RgbImage::from_raw(w, h, px).unwrap())
}

fn jpeg_of(img: &image::DynamicImage) -> Vec<u8> {
    encode(&image::DynamicImage::ImageRgb8(img.to_rgb8()), image::ImageFormat::Jpeg)
}

/// Offset of the first `FF <marker>` segment of a JPEG.
fn jpeg_marker(jpeg: &[u8], marker: u8) -> usize {
    let mut i = 2;
    while i + 4 <= jpeg.len() {
        assert_eq!(jpeg[i], 0xFF, "JPEG segment at {i}");
        if jpeg[i + 1] == marker {
            return i;
        }
        i += 2 + u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]) as usize;
    }
    panic!("no FF{marker:02X} segment");
}

/// The JPEG with its (baseline) SOF patched to declare `w`×`h`.
fn jpeg_declaring(jpeg: &[u8], w: u16, h: u16) -> Vec<u8> {
    let mut out = jpeg.to_vec();
    let sof = jpeg_marker(&out, 0xC0);
    out[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    out
}

/// Insert segments right after SOI.
fn jpeg_splice(jpeg: &[u8], segments: &[u8]) -> Vec<u8> {
    assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(segments);
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// An APP1 Exif segment (big-endian TIFF) holding one IFD0 entry: Orientation = `o`.
fn exif_orientation(o: u16) -> Vec<u8> {
    let mut tiff = b"MM\0\x2A".to_vec();
    tiff.extend_from_slice(&8u32.to_be_bytes()); // IFD0 offset
    tiff.extend_from_slice(&1u16.to_be_bytes()); // one entry
    tiff.extend_from_slice(&0x0112u16.to_be_bytes()); // Orientation
    tiff.extend_from_slice(&3u16.to_be_bytes()); // SHORT
    tiff.extend_from_slice(&1u32.to_be_bytes()); // count
    tiff.extend_from_slice(&o.to_be_bytes());
    tiff.extend_from_slice(&[0, 0]); // value padding
    tiff.extend_from_slice(&0u32.to_be_bytes()); // no next IFD
    let mut seg = vec![0xFF, 0xE1];
    seg.extend_from_slice(&((2 + 6 + tiff.len()) as u16).to_be_bytes());
    seg.extend_from_slice(b"Exif\0\0");
    seg.extend_from_slice(&tiff);
    seg
}

/// COM segments totalling at least `n` payload bytes.
fn jpeg_comments(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while n > 0 {
        let k = n.min(65_000);
        out.extend_from_slice(&[0xFF, 0xFE]);
        out.extend_from_slice(&((k + 2) as u16).to_be_bytes());
        out.resize(out.len() + k, b'c');
        n -= k;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// host measurements

fn proc_status_kib(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    let line = s.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{key} missing"));
    line[key.len()..].trim().trim_end_matches("kB").trim().parse().expect("kB figure")
}

/// Peak resident set of the host child so far (since the last reset), KiB.
fn vm_hwm(h: &Host) -> u64 {
    proc_status_kib(h.child.id(), "VmHWM:")
}

fn vm_rss(h: &Host) -> u64 {
    proc_status_kib(h.child.id(), "VmRSS:")
}

/// Reset the host's VmHWM to its current RSS (`echo 5 > /proc/<pid>/clear_refs`).
fn reset_hwm(h: &Host) -> bool {
    std::fs::write(format!("/proc/{}/clear_refs", h.child.id()), "5").is_ok()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn alive(h: &mut Host) -> bool {
    h.child.try_wait().expect("try_wait").is_none()
}

// ---------------------------------------------------------------------------------------------
// cases

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// `image_rejected`.
    Rejected,
    /// Success with these dimensions.
    Ok(u32, u32),
    /// Either `image_rejected` or success with these dimensions.
    Either(u32, u32),
}

struct Case {
    name: String,
    bytes: Vec<u8>,
    mime: &'static str,
    max_edge: Option<u32>,
    expect: Expect,
    /// Peak RSS bound for this case (KiB).
    peak_kib: u64,
    /// Time bound for this case (ms).
    max_ms: f64,
}

impl Case {
    fn new(name: impl Into<String>, mime: &'static str, bytes: Vec<u8>, expect: Expect) -> Case {
        let (peak_kib, max_ms) = match expect {
            Expect::Rejected => (MAX_BOMB_PEAK_KIB, MAX_REJECT_MS),
            _ => (MAX_PEAK_KIB, 10_000.0),
        };
        Case { name: name.into(), bytes, mime, max_edge: None, expect, peak_kib, max_ms }
    }

    fn edge(mut self, e: u32) -> Case {
        self.max_edge = Some(e);
        self
    }

    fn limits(mut self, peak_kib: u64, max_ms: f64) -> Case {
        self.peak_kib = peak_kib;
        self.max_ms = max_ms;
        self
    }

    fn url(&self) -> String {
        data_url(self.mime, &self.bytes)
    }
}

struct Outcome {
    name: String,
    ms: f64,
    peak_kib: u64,
    reply: Value,
}

static LONG_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `Host::call` with a longer wait than its 60 s (long-run cases in a debug build); string ids
/// never collide with the harness's numeric ones.
fn call_within(h: &mut Host, op: &str, args: Value, timeout: Duration) -> Value {
    let id = json!(format!("bombs-{}", LONG_ID.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    h.send(&json!({"id": id, "op": op, "args": args}));
    h.reply_for(&id, timeout)
}

fn thumb_args(url: &str, max_edge: Option<u32>) -> Value {
    match max_edge {
        Some(e) => json!({"dataUrl": url, "maxEdge": e}),
        None => json!({"dataUrl": url}),
    }
}

/// CPU time the host process has used so far, all threads, exited ones included (`utime +
/// stime` of `/proc/<pid>/stat`, in USER_HZ = 100 ticks per second on Linux). The time bounds
/// hold the host's own work to them: on a busy 2-core machine wall time measures the neighbours.
fn host_cpu_ms(h: &Host) -> f64 {
    let stat =
        std::fs::read_to_string(format!("/proc/{}/stat", h.child.id())).expect("read /proc/<pid>/stat");
    // fields after the parenthesised command name: state is field 3, utime 14, stime 15
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks as f64 * 10.0
}

/// Host CPU milliseconds spent on one call (see [`host_cpu_ms`]) and its reply.
fn timed_call(h: &mut Host, op: &str, args: Value, wait: Duration) -> (f64, Value) {
    let before = host_cpu_ms(h);
    let reply = call_within(h, op, args, wait);
    (host_cpu_ms(h) - before, reply)
}

/// Run one case; every breach of its expectation is pushed to `bad`. Times are the host's CPU
/// time for the call (10 ms resolution).
fn run_case(h: &mut Host, c: &Case, bad: &mut Vec<String>) -> Outcome {
    let url = c.url();
    let args = thumb_args(&url, c.max_edge);
    assert!(reset_hwm(h), "cannot reset VmHWM through /proc/<pid>/clear_refs");
    let wait = Duration::from_secs_f64((c.max_ms * 3.0 / 1000.0).max(60.0));
    let (mut ms, reply) = timed_call(h, "images.thumbnail", args.clone(), wait);
    let peak_kib = vm_hwm(h);
    if ms > c.max_ms && c.max_ms <= 5_000.0 {
        // one retry before calling a time bound broken (a first decode pays for page faults)
        let (again_ms, again) = timed_call(h, "images.thumbnail", args, wait);
        ms = ms.min(again_ms);
        let key = |r: &Value| (r["ok"].clone(), r["result"].clone(), r["error"]["code"].clone());
        if key(&again) != key(&reply) {
            bad.push(format!("{}: a second run answered differently: {again} vs {reply}", c.name));
        }
    }
    // For a large rejected payload, the debug build spends most of the time moving and parsing
    // the frame: time a payload of the same length that no format claims, and hold the
    // difference (the decode-limit work) to the spec's bound.
    let transport_ms = if c.expect == Expect::Rejected && c.bytes.len() > 65_536 {
        let mut plain = c.bytes.clone();
        plain[..8].copy_from_slice(b"NOTIMAGE");
        let args = thumb_args(&data_url(c.mime, &plain), c.max_edge);
        let mut best = f64::MAX;
        for _ in 0..2 {
            let (t, r) = timed_call(h, "images.thumbnail", args.clone(), wait);
            best = best.min(t);
            assert_eq!(r["error"]["code"], "image_rejected", "{}: transport baseline", c.name);
        }
        Some(best)
    } else {
        None
    };
    let name = &c.name;
    if !alive(h) {
        bad.push(format!("{name}: host exited"));
    }
    let ok = reply["ok"] == json!(true);
    let code = reply["error"]["code"].as_str().unwrap_or("");
    let dims = (reply["result"]["width"].as_u64(), reply["result"]["height"].as_u64());
    let describe = if ok {
        format!("accepted {}×{}", dims.0.unwrap_or(0), dims.1.unwrap_or(0))
    } else {
        code.to_owned()
    };
    match c.expect {
        Expect::Rejected if ok || code != "image_rejected" => {
            bad.push(format!("{name}: expected image_rejected, got {describe}"))
        }
        Expect::Ok(w, hh) if !ok || dims != (Some(w as u64), Some(hh as u64)) => {
            bad.push(format!("{name}: expected {w}×{hh}, got {describe} {reply}"))
        }
        Expect::Either(w, hh) if ok && dims != (Some(w as u64), Some(hh as u64)) => {
            bad.push(format!("{name}: expected image_rejected or {w}×{hh}, got {describe}"))
        }
        Expect::Either(..) if !ok && code != "image_rejected" => {
            bad.push(format!("{name}: expected image_rejected or success, got {describe}"))
        }
        _ => {}
    }
    if ok {
        let out = reply["result"]["dataUrl"].as_str().unwrap_or("");
        let small = c.bytes.len() <= 65_536
            && image::ImageReader::new(Cursor::new(&c.bytes[..]))
                .with_guessed_format()
                .ok()
                .and_then(|r| r.into_dimensions().ok())
                .is_some_and(|(w, hh)| w.max(hh) <= c.max_edge.unwrap_or(480));
        if !small && !out.starts_with("data:image/jpeg;base64,") {
            bad.push(format!("{name}: a re-encoded thumbnail must be a JPEG data URL, got {:.40}", out));
        }
    }
    if peak_kib > c.peak_kib {
        bad.push(format!(
            "{name}: peak RSS {:.1} MiB over the {:.0} MiB bound ({describe})",
            mib(peak_kib),
            mib(c.peak_kib)
        ));
    }
    match transport_ms {
        Some(tr) if ms - tr > c.max_ms || ms > 1_000.0 => bad.push(format!(
            "{name}: {ms:.0} ms of host CPU ({tr:.0} ms of it moving the frame), bound {:.0} ms + transport, \
             at most 1 s ({describe})",
            c.max_ms
        )),
        None if ms > c.max_ms => {
            bad.push(format!("{name}: {ms:.0} ms of host CPU, bound {:.0} ms ({describe})", c.max_ms))
        }
        _ => {}
    }
    let transport = transport_ms.map(|t| format!("  (transport {t:.0} ms)")).unwrap_or_default();
    eprintln!(
        "  {name:<58} {:>9} B  {describe:<22} {ms:>6.0} ms CPU  peak {:>6.1} MiB{transport}",
        c.bytes.len(),
        mib(peak_kib)
    );
    Outcome { name: name.clone(), ms, peak_kib, reply }
}

/// A tiny valid request after a case: the host is still serving.
fn sentinel(h: &mut Host, bad: &mut Vec<String>, after: &str) {
    let png = png_bytes(4, 3, 9);
    let url = data_url("image/png", &png);
    let r = h.call("images.thumbnail", json!({"dataUrl": url}));
    if r["ok"] != json!(true) || r["result"]["dataUrl"] != json!(url) {
        bad.push(format!("after {after}: the next request was not answered correctly: {r}"));
    }
}

fn run_all(h: &mut Host, cases: &[Case], bad: &mut Vec<String>) -> Vec<Outcome> {
    let mut out = Vec::new();
    for c in cases {
        out.push(run_case(h, c, bad));
        sentinel(h, bad, &c.name);
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(label: &str, outcomes: &[Outcome]) {
    let mut ms: Vec<f64> = outcomes.iter().map(|o| o.ms).collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let worst = outcomes.iter().max_by(|a, b| a.ms.partial_cmp(&b.ms).unwrap());
    let peak = outcomes.iter().max_by_key(|o| o.peak_kib);
    let accepted = outcomes.iter().filter(|o| o.reply["ok"] == json!(true)).count();
    eprintln!(
        "{label}: {} cases, accepted {accepted}, host CPU p50 {:.0} ms, max {:.0} ms ({}), peak RSS max {:.1} MiB ({})",
        outcomes.len(),
        percentile(&ms, 0.5),
        percentile(&ms, 1.0),
        worst.map_or("-", |o| &o.name),
        mib(peak.map_or(0, |o| o.peak_kib)),
        peak.map_or("-", |o| &o.name),
    );
}

fn check(label: &str, bad: &[String]) {
    assert!(bad.is_empty(), "{label}: {} violation(s):\n  {}", bad.len(), bad.join("\n  "));
}

fn start() -> (tempfile::TempDir, Host) {
    let (dir, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.meta", json!({}));
    (dir, h)
}

// ---------------------------------------------------------------------------------------------
// the corpus

fn small_png() -> Vec<u8> {
    png_bytes(40, 30, 3)
}

/// Headers declaring sizes beyond 8,192 px per side.
fn oversized_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let raw = 20_000u64 * (1 + 20_000 * 3);
    let png = png_file(20_000, 20_000, 2, &[], &zlib_zeros(raw));
    v.push(Case::new("PNG IHDR 20000×20000 (1.16 MB of zlib zeros)", "image/png", png, Expect::Rejected));
    let jpeg = jpeg_of(&noisy(16, 16, 1));
    v.push(Case::new(
        "JPEG SOF0 65535×65535",
        "image/jpeg",
        jpeg_declaring(&jpeg, 65_535, 65_535),
        Expect::Rejected,
    ));
    let webp = encode(&noisy(16, 16, 2), image::ImageFormat::WebP);
    v.push(Case::new(
        "WebP VP8X 16383×16383",
        "image/webp",
        webp_vp8x(16_383, 16_383, &webp),
        Expect::Rejected,
    ));
    v.push(Case::new(
        "WebP VP8L header 16383×16383",
        "image/webp",
        webp_vp8l_declaring(&webp, 16_383, 16_383),
        Expect::Rejected,
    ));
    let mut gif = gif_header(65_535, 65_535);
    gif.push(0x2C);
    for x in [0u16, 0, 65_535, 65_535] {
        gif.extend_from_slice(&x.to_le_bytes());
    }
    gif.push(0);
    gif.extend_from_slice(&gif_lzw(&[0; 64]));
    gif.push(0x3B);
    v.push(Case::new("GIF screen and frame 65535×65535", "image/gif", gif, Expect::Rejected));
    v.push(Case::new("BMP 100000×100000", "image/bmp", bmp(100_000, 100_000, 4096), Expect::Rejected));
    v.push(Case::new(
        "BMP 100000×-100000 (top-down)",
        "image/bmp",
        bmp(100_000, -100_000, 4096),
        Expect::Rejected,
    ));
    v.push(Case::new(
        "PNG 8193×1 (one over the side limit)",
        "image/png",
        png_zero(8193, 1, 2),
        Expect::Rejected,
    ));
    v.push(Case::new(
        "PNG 1×8193 (one over the side limit)",
        "image/png",
        png_zero(1, 8193, 2),
        Expect::Rejected,
    ));
    v.push(Case::new("PNG 0×0", "image/png", png_zero(0, 0, 2), Expect::Rejected));
    v.push(Case::new(
        "PNG 8192×1 (at the side limit)",
        "image/png",
        png_zero(8192, 1, 2),
        Expect::Ok(480, 1),
    ));
    v
}

/// A 10×10 PNG whose iCCP chunk inflates to `n` zero bytes: ICC profiles are inflated when the
/// header is read, before any pixel-size check.
fn png_iccp_bomb(n: u64) -> Vec<u8> {
    let mut iccp = b"icc\0\0".to_vec();
    iccp.extend_from_slice(&zlib_zeros(n));
    png_file(10, 10, 2, &[(b"iCCP", iccp)], &zlib_zeros(10 * (1 + 10 * 3)))
}

/// The costly decompression bombs (seconds each in a debug build): run once, in the whole-corpus
/// process.
fn heavy_decompression_cases() -> Vec<Case> {
    let rgb = png_zero(8192, 8192, 2);
    vec![
        // 8192² is the side limit; 8192² × 3 B = 192 MiB decoded, under the 256 MiB cap
        Case::new(
            format!("PNG 8192×8192 RGB all-zero ({} KB)", rgb.len() / 1000),
            "image/png",
            rgb,
            Expect::Either(480, 480),
        )
        .limits(MAX_PEAK_KIB, 55_000.0),
        // 300 MB: over the 256 MiB decode cap, so an allocation-capped inflate stops early
        Case::new(
            "PNG 10×10 with an iCCP inflating to 300 MB",
            "image/png",
            png_iccp_bomb(300_000_000),
            Expect::Either(10, 10),
        )
        .limits(MAX_BOMB_PEAK_KIB, 30_000.0),
    ]
}

/// Files that decompress to far more than they weigh (the cheap ones).
fn decompression_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let idat = zlib_zeros(50_000_000);
    v.push(
        Case::new(
            "PNG declared 100×100, IDAT inflating to 50 MB",
            "image/png",
            png_file(100, 100, 2, &[], &idat),
            Expect::Either(100, 100),
        )
        .limits(MAX_BOMB_PEAK_KIB, 5_000.0),
    );
    let pixels = zlib_zeros(10 * (1 + 10 * 3));
    let mut ztxt = b"Comment\0\0".to_vec();
    ztxt.extend_from_slice(&zlib_zeros(200_000_000));
    v.push(
        Case::new(
            "PNG 10×10 with a zTXt inflating to 200 MB",
            "image/png",
            png_file(10, 10, 2, &[(b"zTXt", ztxt)], &pixels),
            Expect::Either(10, 10),
        )
        .limits(MAX_BOMB_PEAK_KIB, 5_000.0),
    );
    // within the limits, so decoding starts: a 256 MiB canvas for a frame that ends at once
    let mut gif = gif_header(8192, 8192);
    gif.push(0x2C);
    for x in [0u16, 0, 8192, 8192] {
        gif.extend_from_slice(&x.to_le_bytes());
    }
    gif.push(0);
    gif.extend_from_slice(&gif_lzw(&[0; 2]));
    gif.push(0x3B);
    v.push(
        Case::new(
            format!("GIF 8192×8192 frame holding 2 pixels ({} B)", gif.len()),
            "image/gif",
            gif,
            Expect::Rejected,
        )
        .limits(MAX_BOMB_PEAK_KIB, 3_000.0),
    );
    let mut huge_chunk = PNG_SIG.to_vec();
    png_chunk(&mut huge_chunk, b"IHDR", &ihdr(100, 100, 2));
    huge_chunk.extend_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
    huge_chunk.extend_from_slice(b"IDAT");
    huge_chunk.extend_from_slice(&[0; 64]);
    v.push(Case::new(
        "PNG IDAT chunk length 2^31−1, 64 bytes present",
        "image/png",
        huge_chunk,
        Expect::Rejected,
    ));
    let mut many = PNG_SIG.to_vec();
    png_chunk(&mut many, b"IHDR", &ihdr(64, 64, 2));
    let z = zlib_zeros(64 * (1 + 64 * 3));
    for _ in 0..20_000 {
        png_chunk(&mut many, b"tEXt", b"k\0v");
    }
    png_chunk(&mut many, b"IDAT", &z);
    png_chunk(&mut many, b"IEND", &[]);
    v.push(
        Case::new("PNG 64×64 with 20,000 tEXt chunks", "image/png", many, Expect::Either(64, 64))
            .limits(MAX_BOMB_PEAK_KIB, 5_000.0),
    );
    v
}

/// The same small images cut at several offsets.
fn truncated_cases() -> Vec<Case> {
    let img = noisy(40, 30, 7);
    let sources: [(&str, &'static str, Vec<u8>, usize); 4] = [
        ("PNG", "image/png", encode(&img, image::ImageFormat::Png), 33),
        ("JPEG", "image/jpeg", jpeg_of(&img), 0),
        ("GIF", "image/gif", encode(&img, image::ImageFormat::Gif), 13),
        ("WebP", "image/webp", encode(&img, image::ImageFormat::WebP), 30),
    ];
    let mut v = Vec::new();
    for (fmt, mime, bytes, header) in sources {
        let header = if fmt == "JPEG" { jpeg_marker(&bytes, 0xC0) + 19 } else { header };
        let n = bytes.len();
        let mut cuts = vec![1, 3, 6, 11, header / 2, header - 1, header + 8, n / 4, n / 2, 3 * n / 4, n - 2];
        cuts.sort();
        cuts.dedup();
        for cut in cuts {
            let expect = if cut < header { Expect::Rejected } else { Expect::Either(40, 30) };
            let bytes = bytes[..cut].to_vec();
            v.push(
                Case::new(format!("{fmt} cut at {cut}/{n}"), mime, bytes, expect)
                    .limits(MAX_BOMB_PEAK_KIB, if cut < header { MAX_REJECT_MS } else { 2_000.0 }),
            );
        }
    }
    v
}

/// Polyglots, foreign formats and noise.
fn polyglot_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let png = small_png();
    let gif = encode(&noisy(8, 8, 5), image::ImageFormat::Gif);
    let jpeg = jpeg_of(&noisy(24, 16, 6));
    let html = b"<html><body><script>alert(document.domain)</script></body></html>";
    let zip = zip_archive("payload.html", html);

    let mut gif_zip = gif_header(1, 1);
    gif_zip.extend_from_slice(&zip);
    v.push(Case::new("GIF header + ZIP payload (GIFAR)", "image/gif", gif_zip, Expect::Rejected));
    let mut gif_html = b"GIF89a".to_vec();
    gif_html.extend_from_slice(html);
    v.push(Case::new("GIF89a + HTML payload", "image/gif", gif_html, Expect::Rejected));
    let mut valid_gif_zip = gif.clone();
    valid_gif_zip.extend_from_slice(&zip);
    v.push(Case::new("valid 8×8 GIF + appended ZIP", "image/gif", valid_gif_zip, Expect::Either(8, 8)));
    let mut png_garbage = png.clone();
    png_garbage.extend_from_slice(&Rng(11).bytes(4096));
    v.push(Case::new(
        "valid 40×30 PNG + 4 KiB appended garbage",
        "image/png",
        png_garbage,
        Expect::Either(40, 30),
    ));
    let mut png_jpeg = PNG_SIG.to_vec();
    png_jpeg.extend_from_slice(&jpeg);
    v.push(Case::new("PNG magic then JPEG data", "image/png", png_jpeg, Expect::Rejected));
    let mut jpeg_png = vec![0xFF, 0xD8, 0xFF];
    jpeg_png.extend_from_slice(&png);
    v.push(Case::new("JPEG SOI then PNG data", "image/jpeg", jpeg_png, Expect::Rejected));
    let mut riff_png = b"RIFF\0\0\0\0WEBP".to_vec();
    riff_png.extend_from_slice(&png);
    v.push(Case::new("RIFF/WEBP header then PNG data", "image/webp", riff_png, Expect::Rejected));
    v.push(Case::new(
        "PNG bytes declared image/jpeg (sniffed)",
        "image/jpeg",
        png.clone(),
        Expect::Ok(40, 30),
    ));
    v.push(Case::new("HTML declared image/png", "image/png", html.to_vec(), Expect::Rejected));

    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><rect width="100" height="100"/></svg>"#;
    v.push(Case::new("SVG", "image/svg+xml", svg.to_vec(), Expect::Rejected));
    let mut svg_bomb = br#"<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">"#.to_vec();
    for i in 1..10 {
        svg_bomb.extend_from_slice(
            format!(
                "<!ENTITY {} \"{}\">",
                (b'a' + i) as char,
                format!("&{};", (b'a' + i - 1) as char).repeat(10)
            )
            .as_bytes(),
        );
    }
    svg_bomb.extend_from_slice(b"]><svg xmlns=\"http://www.w3.org/2000/svg\"><text>&j;</text></svg>");
    v.push(Case::new("SVG billion laughs", "image/svg+xml", svg_bomb, Expect::Rejected));
    v.push(Case::new("TIFF 1×1", "image/tiff", tiff_1x1(), Expect::Rejected));
    v.push(Case::new(
        "ICO holding a PNG",
        "image/x-icon",
        ico_with_png(&png_bytes(16, 16, 1)),
        Expect::Rejected,
    ));
    let mut avif = vec![0, 0, 0, 0x1C];
    avif.extend_from_slice(b"ftypavif\0\0\0\0avifmif1miaf");
    avif.resize(256, 0);
    v.push(Case::new("AVIF ftyp stub", "image/avif", avif, Expect::Rejected));
    let mut qoi = b"qoif".to_vec();
    qoi.extend_from_slice(&[0, 0, 0, 16, 0, 0, 0, 16, 3, 0]);
    qoi.resize(64, 0);
    v.push(Case::new("QOI header", "image/qoi", qoi, Expect::Rejected));
    let mut psd = b"8BPS\0\x01".to_vec();
    psd.resize(128, 0);
    v.push(Case::new("PSD header", "image/vnd.adobe.photoshop", psd, Expect::Rejected));
    v.push(Case::new(
        "BM with 25 bytes (below a BMP header)",
        "image/bmp",
        bmp(1, 1, 0)[..25].to_vec(),
        Expect::Rejected,
    ));
    let mut rng = Rng(0xDEAD_BEEF);
    for i in 0..4 {
        let mut noise = rng.bytes(1 << (8 + 3 * i));
        noise[0] = 0x00; // no format starts with a NUL
        v.push(Case::new(format!("random {} bytes", noise.len()), "image/png", noise, Expect::Rejected));
    }
    v.push(Case::new("empty payload", "image/png", Vec::new(), Expect::Rejected));
    v.push(Case::new("one byte", "image/png", vec![0x89], Expect::Rejected));
    v.push(Case::new("PNG signature only", "image/png", PNG_SIG.to_vec(), Expect::Rejected));
    v
}

/// Animated files: first frame only.
fn animation_cases() -> Vec<Case> {
    vec![
        Case::new(
            "APNG 64×64, 2 frames (red, then blue)",
            "image/png",
            apng_red_blue(),
            Expect::Either(32, 32),
        )
        .edge(32),
        Case::new("GIF 64×64, 10,000 frames", "image/gif", gif_animation(64, 64, 10_000), Expect::Ok(32, 32))
            .edge(32),
    ]
}

/// An APNG: a red 64×64 default image (frame 0) then a blue frame 1.
fn apng_red_blue() -> Vec<u8> {
    let rows = |rgb: [u8; 3]| {
        let mut row = vec![0u8];
        row.extend(rgb.repeat(64));
        zlib_rle(&row.repeat(64))
    };
    let fctl = |seq: u32| {
        let mut d = Vec::new();
        for v in [seq, 64, 64, 0, 0] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        d.extend_from_slice(&[0, 1, 0, 10, 0, 0]); // 1/10 s, no dispose, source blend
        d
    };
    let mut out = PNG_SIG.to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr(64, 64, 2));
    png_chunk(&mut out, b"acTL", &[0, 0, 0, 2, 0, 0, 0, 0]);
    png_chunk(&mut out, b"fcTL", &fctl(0));
    png_chunk(&mut out, b"IDAT", &rows([255, 0, 0]));
    png_chunk(&mut out, b"fcTL", &fctl(1));
    let mut fdat = 2u32.to_be_bytes().to_vec();
    fdat.extend_from_slice(&rows([0, 0, 255]));
    png_chunk(&mut out, b"fdAT", &fdat);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// The pixel at the centre of a returned thumbnail.
fn centre_pixel(reply: &Value) -> [u8; 3] {
    let url = reply["result"]["dataUrl"].as_str().expect("dataUrl");
    let b64 = url.split_once(',').expect("data URL").1;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).expect("base64");
    let img = image::load_from_memory(&bytes).expect("thumbnail decodes").to_rgb8();
    img.get_pixel(img.width() / 2, img.height() / 2).0
}

fn is_red(p: [u8; 3]) -> bool {
    p[0] > 200 && p[1] < 60 && p[2] < 60
}

// ---------------------------------------------------------------------------------------------
// tests

/// The generators make what they claim: checked with an independent decoder (the image crate).
#[test]
fn fixture_generators_are_valid() {
    use image::GenericImageView;
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    assert_eq!(adler32(&[0; 100_000]), adler32_zeros(100_000));
    // our chunks carry the same CRCs as the image crate's
    let real = png_bytes(5, 4, 1);
    let len = u32::from_be_bytes(real[8..12].try_into().unwrap()) as usize;
    let crc = u32::from_be_bytes(real[16 + len..20 + len].try_into().unwrap());
    assert_eq!(crc32(&real[12..16 + len]), crc, "IHDR CRC");

    // deflate writers, through a real PNG decoder
    for (w, h) in [(1, 1), (300, 200), (257, 3)] {
        let img = image::load_from_memory(&png_zero(w, h, 6)).expect("zero PNG decodes").to_rgba8();
        assert_eq!(img.dimensions(), (w, h));
        assert!(img.pixels().all(|p| p.0 == [0, 0, 0, 0]));
    }
    let src = noisy(37, 21, 3).to_rgb8();
    let mut raw = Vec::new();
    for row in src.rows() {
        raw.push(0);
        row.for_each(|p| raw.extend_from_slice(&p.0));
    }
    // runs of every length, to exercise every length code
    let mut runs = vec![0u8];
    for l in 1..600 {
        runs.extend(std::iter::repeat_n((l % 251) as u8, l));
    }
    let back = image::load_from_memory(&png_file(37, 21, 2, &[], &zlib_rle(&raw))).unwrap().to_rgb8();
    assert_eq!(back, src, "RLE deflate round trip");
    let gray_w = runs.len() as u32 - 1;
    let back = image::load_from_memory(&png_file(gray_w, 1, 0, &[], &zlib_rle(&runs))).unwrap().to_luma8();
    assert_eq!(back.as_raw()[..], runs[1..], "RLE deflate: every match length");

    // the 20000² header is well-formed: a header-only reader sees its size
    let big = png_file(20_000, 20_000, 2, &[], &zlib_zeros(20_000u64 * 60_001));
    let dims = image::ImageReader::with_format(Cursor::new(&big), image::ImageFormat::Png).into_dimensions();
    assert_eq!(dims.unwrap(), (20_000, 20_000));
    assert!((1_000_000..1_400_000).contains(&big.len()), "20000² PNG is {} bytes", big.len());

    // GIF generator: decodes, frames counted, first red then blue
    use image::AnimationDecoder;
    let g = gif_animation(16, 8, 5);
    let frames = image::codecs::gif::GifDecoder::new(Cursor::new(&g)).unwrap().into_frames();
    let frames: Vec<_> = frames.collect::<Result<_, _>>().expect("GIF frames");
    assert_eq!(frames.len(), 5);
    assert_eq!(frames[0].buffer().get_pixel(3, 3).0, [255, 0, 0, 255]);
    assert_eq!(frames[4].buffer().get_pixel(4, 0).0, [0, 0, 255, 255]);

    // APNG: a real APNG reader sees two frames, red then blue
    let a = apng_red_blue();
    let dec = image::codecs::png::PngDecoder::new(Cursor::new(&a)).unwrap();
    assert!(dec.is_apng().unwrap());
    let frames: Vec<_> = dec.apng().unwrap().into_frames().collect::<Result<_, _>>().expect("APNG frames");
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].buffer().get_pixel(1, 1).0, [255, 0, 0, 255]);
    assert_eq!(frames[1].buffer().get_pixel(1, 1).0, [0, 0, 255, 255]);

    // EXIF orientation 6 is seen by an EXIF-aware decoder
    use image::ImageDecoder;
    let j = jpeg_splice(&jpeg_of(&noisy(20, 10, 4)), &exif_orientation(6));
    let mut d = image::codecs::jpeg::JpegDecoder::new(Cursor::new(&j)).unwrap();
    assert_eq!(d.orientation().unwrap(), image::metadata::Orientation::Rotate90);
    assert_eq!(d.dimensions(), (20, 10));

    // patched headers
    let webp = encode(&noisy(16, 16, 2), image::ImageFormat::WebP);
    let vp8x = webp_vp8x(16, 16, &webp);
    assert_eq!(image::load_from_memory(&vp8x).expect("VP8X wrapper of 16×16 decodes").dimensions(), (16, 16));
    let l = webp_vp8l_declaring(&webp, 16_383, 16_383);
    let d = image::codecs::webp::WebPDecoder::new(Cursor::new(&l)).unwrap();
    assert_eq!(d.dimensions(), (16_383, 16_383));
    let jp = jpeg_declaring(&jpeg_of(&noisy(16, 16, 1)), 65_535, 65_535);
    let d = image::codecs::jpeg::JpegDecoder::new(Cursor::new(&jp)).unwrap();
    assert_eq!(d.dimensions(), (65_535, 65_535));
    let bm = bmp(3, 2, 24);
    assert_eq!(image::load_from_memory(&bm).expect("BMP 3×2 decodes").dimensions(), (3, 2));
}

/// T09: headers beyond 8,192 px per side are refused at once, before any pixel buffer.
#[test]
fn oversized_headers_are_rejected_fast() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let out = run_all(&mut h, &oversized_cases(), &mut bad);
    report("oversized headers", &out);
    check("oversized headers", &bad);
}

/// Decompression bombs: accepted within the limits or rejected, never a memory blow-up.
#[test]
fn decompression_bombs_stay_within_memory() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let out = run_all(&mut h, &decompression_cases(), &mut bad);
    report("decompression bombs", &out);
    check("decompression bombs", &bad);
}

/// Truncated PNG/JPEG/GIF/WebP files: rejected (or, past the header, a lenient decode of the
/// right size), never a crash; the next request is answered.
#[test]
fn truncated_files_are_rejected_and_the_host_keeps_serving() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let out = run_all(&mut h, &truncated_cases(), &mut bad);
    report("truncated files", &out);
    check("truncated files", &bad);
}

/// Polyglots, SVG/TIFF/ICO and other formats, noise and empty payloads: `image_rejected`.
#[test]
fn polyglots_and_foreign_formats_are_rejected() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let out = run_all(&mut h, &polyglot_cases(), &mut bad);
    report("polyglots and foreign formats", &out);
    check("polyglots and foreign formats", &bad);
}

/// APNG and a 10,000-frame GIF: only the first frame is decoded (it is red; later frames blue).
#[test]
fn animations_decode_their_first_frame_only() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let out = run_all(&mut h, &animation_cases(), &mut bad);
    for o in &out {
        if o.reply["ok"] == json!(true) {
            let p = centre_pixel(&o.reply);
            if !is_red(p) {
                bad.push(format!("{}: thumbnail centre is {p:?}, not the red first frame", o.name));
            }
        }
    }
    report("animations", &out);
    check("animations", &bad);
}

/// A GIF with 10,000 frames costs no more than a one-frame GIF of the same screen.
#[test]
fn gif_with_10000_frames_costs_its_first_frame() {
    let _g = serial();
    let (_d, mut h) = start();
    let one = data_url("image/gif", &gif_animation(64, 64, 1));
    let many_bytes = gif_animation(64, 64, 10_000);
    let many = data_url("image/gif", &many_bytes);
    // warm up: the first decodes pay for page faults and allocator growth
    for url in [&one, &many] {
        h.ok("images.thumbnail", json!({"dataUrl": url, "maxEdge": 32}));
    }
    let mut measure = |url: &str| {
        let mut best = f64::MAX;
        let mut peak = 0;
        let base = vm_rss(&h);
        for _ in 0..3 {
            assert!(reset_hwm(&h));
            let (t, r) = timed_call(
                &mut h,
                "images.thumbnail",
                json!({"dataUrl": url, "maxEdge": 32}),
                Duration::from_secs(60),
            );
            best = best.min(t);
            let r = &r["result"];
            peak = peak.max(vm_hwm(&h).saturating_sub(base));
            assert_eq!((r["width"].as_u64(), r["height"].as_u64()), (Some(32), Some(32)));
        }
        (best, peak)
    };
    let (t1, p1) = measure(&one);
    let (tn, pn) = measure(&many);
    eprintln!(
        "GIF 64×64: 1 frame {t1:.1} ms, +{:.2} MiB peak; 10,000 frames ({} B) {tn:.1} ms, +{:.2} MiB peak",
        mib(p1),
        many_bytes.len(),
        mib(pn)
    );
    assert!(tn < 5.0 * t1 + 50.0, "10,000-frame GIF took {tn:.1} ms vs {t1:.1} ms for one frame");
    assert!(pn <= p1 + 4 * 1024, "10,000-frame GIF peak +{:.2} MiB vs +{:.2} MiB", mib(pn), mib(p1));
}

/// The whole corpus, with the costly decompression bombs (8192² RGBA PNG of 260 KB, 1 GB iCCP),
/// through one host process: every case as expected and the process peak under 256 MiB.
#[test]
fn whole_corpus_in_one_process_stays_under_256_mib() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let mut cases = heavy_decompression_cases();
    cases.extend(oversized_cases());
    cases.extend(decompression_cases());
    cases.extend(truncated_cases());
    cases.extend(polyglot_cases());
    cases.extend(animation_cases());
    let started = vm_hwm(&h);
    let out = run_all(&mut h, &cases, &mut bad);
    // VmHWM was reset before every case: the process peak is the largest per-case peak
    let peak = out.iter().map(|o| o.peak_kib).max().unwrap_or(0).max(started).max(vm_hwm(&h));
    let accepted_bombs: Vec<&str> = out
        .iter()
        .zip(&cases)
        .filter(|(o, c)| c.expect == Expect::Rejected && o.reply["ok"] == json!(true))
        .map(|(o, _)| o.name.as_str())
        .collect();
    report("whole corpus", &out);
    eprintln!(
        "whole corpus: host VmHWM {:.1} MiB (start {:.1} MiB, end RSS {:.1} MiB), bombs accepted {}",
        mib(peak),
        mib(started),
        mib(vm_rss(&h)),
        accepted_bombs.len()
    );
    assert!(alive(&mut h), "host exited");
    if peak >= MAX_PEAK_KIB {
        bad.push(format!("host VmHWM {:.1} MiB ≥ 256 MiB", mib(peak)));
    }
    check("whole corpus", &bad);
}

/// Images at and just past the limits whose decoding or colour conversion needs the most memory
/// (about 20 s in a debug build), and a 1 GB ICC profile: the process stays under 256 MiB, except
/// for the one frame that is itself just under 256 MiB, which stays within the 288 MiB budget.
#[test]
fn decodes_at_the_limits_stay_under_256_mib() {
    let _g = serial();
    let (_d, mut h) = start();
    let mut bad = Vec::new();
    let mut gif = gif_header(8192, 8192);
    gif_frame(&mut gif, 0, 0, 1, 1, 0);
    gif.push(0x3B);
    let png = |name: &str, bytes: Vec<u8>| {
        Case::new(format!("{name} ({} KB)", bytes.len() / 1000), "image/png", bytes, Expect::Either(480, 480))
            .limits(MAX_PEAK_KIB, 60_000.0)
    };
    let cases = [
        png("PNG 8192×8192 RGBA all-zero", png_zero(8192, 8192, 6)),
        png("PNG 8192×8192 gray all-zero", png_zero(8192, 8192, 0)),
        png("PNG 8192×8192 gray-alpha 16-bit all-zero", png_zero16(8192, 8192, 4)),
        png("PNG 4096×4096 RGBA all-zero (the former pixel cap)", png_zero(4096, 4096, 6)),
        png("PNG 4096×4096 gray all-zero (the former pixel cap)", png_zero(4096, 4096, 0)),
        png("PNG 4096×4096 gray-alpha 16-bit all-zero (the former pixel cap)", png_zero16(4096, 4096, 4)),
        png("PNG 4096×4096 RGBA 16-bit all-zero (the former pixel cap)", png_zero16(4096, 4096, 6)),
        Case::new(
            format!("GIF 8192×8192 screen, one 1×1 frame ({} B)", gif.len()),
            "image/gif",
            gif,
            Expect::Either(480, 480),
        )
        .limits(MAX_PEAK_KIB, 60_000.0),
        // the largest 8192-wide RGBA frame whose decoder allocation (frame plus rows) fits 256 MiB:
        // decoded, within image decoding's 288 MiB budget (storage-model §12.23) for the whole process
        Case::new(
            "PNG 8192×8184 RGBA all-zero (the largest RGBA frame within 256 MiB)",
            "image/png",
            png_zero(8192, 8184, 6),
            Expect::Ok(480, 480),
        )
        .limits(DECODE_BUDGET_KIB, 60_000.0),
        Case::new(
            "PNG 10×10 with an iCCP inflating to 1 GB",
            "image/png",
            png_iccp_bomb(1_000_000_000),
            Expect::Either(10, 10),
        )
        .limits(MAX_BOMB_PEAK_KIB, 60_000.0),
    ];
    let out = run_all(&mut h, &cases, &mut bad);
    report("at the limits", &out);
    check("at the limits", &bad);
}

/// Long run: a payload over the 32 MiB image cap is `too_large`, decided from the base64 length
/// (a 45 MB frame: seconds in a debug build).
#[test]
#[ignore = "long run: a 45 MB frame"]
fn long_run_image_cap_is_checked_before_decoding() {
    let _g = serial();
    let (_d, mut h) = start();
    let url = data_url("image/png", &small_png());
    let huge = format!("data:image/png;base64,{}", "A".repeat(44_800_000));
    assert!(reset_hwm(&h));
    let t = Instant::now();
    assert_eq!(h.err("images.thumbnail", json!({"dataUrl": huge})), "too_large");
    eprintln!(
        "44.8 M base64 chars → too_large in {:.0} ms, peak {:.1} MiB",
        t.elapsed().as_secs_f64() * 1000.0,
        mib(vm_hwm(&h))
    );
    h.ok("images.thumbnail", json!({"dataUrl": url}));
}

/// T10: a real large image within the limits is scaled to 480 px on its long edge, aspect kept.
#[test]
fn large_image_within_limits_thumbnails_to_480x360() {
    let _g = serial();
    let (_d, mut h) = start();
    // 4000×3000: a noisy first row, every later row "Up"-filtered to repeat it (vertical noise
    // stripes), so the PNG stays small while decoding is full-size work
    let (w, hh) = (4000u32, 3000u32);
    let mut raw = Vec::with_capacity((hh * (1 + w * 3)) as usize);
    raw.push(0);
    raw.extend_from_slice(&Rng(99).bytes((w * 3) as usize));
    for _ in 1..hh {
        raw.push(2);
        raw.resize(raw.len() + (w * 3) as usize, 0);
    }
    let png = png_file(w, hh, 2, &[], &zlib_rle(&raw));
    drop(raw);
    assert!(reset_hwm(&h));
    let t = Instant::now();
    let r = h.ok("images.thumbnail", json!({"dataUrl": data_url("image/png", &png)}));
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let (tw, th) = (r["width"].as_u64().unwrap(), r["height"].as_u64().unwrap());
    eprintln!("PNG 4000×3000 ({} B) → {tw}×{th} in {ms:.0} ms, peak {:.1} MiB", png.len(), mib(vm_hwm(&h)));
    assert!(tw.abs_diff(480) <= 1 && th.abs_diff(360) <= 1, "4000×3000 → {tw}×{th}, want 480×360");
    let url = r["dataUrl"].as_str().unwrap();
    assert!(url.starts_with("data:image/jpeg;base64,"), "not a JPEG: {:.40}", url);
    let bytes = base64::engine::general_purpose::STANDARD.decode(url.split_once(',').unwrap().1).unwrap();
    let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg).unwrap();
    assert_eq!((img.width() as u64, img.height() as u64), (tw, th), "declared size = JPEG size");
    // the stripes survive: columns differ, rows repeat
    let img = img.to_rgb8();
    let col = |x: u32| img.get_pixel(x, 100).0;
    assert!((1..40).any(|x| col(x) != col(0)), "noise columns were flattened");
    // a portrait one: 3000×4000 → 360×480
    let portrait = noise_png(300, 400, 8);
    let r = h.ok("images.thumbnail", json!({"dataUrl": data_url("image/png", &portrait), "maxEdge": 48}));
    assert_eq!((r["width"].as_u64(), r["height"].as_u64()), (Some(36), Some(48)));
}

/// EXIF orientation 6 (rotate 90°): a 200×100 JPEG comes back 100×200, left half on top.
#[test]
fn exif_orientation_6_swaps_the_dimensions() {
    let _g = serial();
    let (_d, mut h) = start();
    // left half red, right half blue: after rotating 90° clockwise, red is on top
    let img = image::RgbImage::from_fn(200, 100, |x, _| {
        if x < 100 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    });
    let jpeg = jpeg_of(&image::DynamicImage::ImageRgb8(img));
    let oriented = jpeg_splice(&jpeg, &exif_orientation(6));
    let padded = jpeg_splice(&oriented, &jpeg_comments(70_000));
    assert!(oriented.len() < 65_536 && padded.len() > 65_536);
    let mut bad = Vec::new();
    let top_bottom = |r: &Value| {
        let url = r["dataUrl"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(url.split_once(',').unwrap().1).unwrap();
        let i = image::load_from_memory(&bytes).unwrap().to_rgb8();
        (i.get_pixel(i.width() / 2, i.height() / 8).0, i.get_pixel(i.width() / 2, i.height() * 7 / 8).0)
    };
    for (label, bytes, max_edge, want) in [
        ("EXIF 6, 200×100 JPEG, default maxEdge", &oriented, None, (100, 200)),
        ("EXIF 6, 200×100 JPEG over 64 KiB, default maxEdge", &padded, None, (100, 200)),
        ("EXIF 6, 200×100 JPEG, maxEdge 100", &oriented, Some(100), (50, 100)),
    ] {
        let url = data_url("image/jpeg", bytes);
        let r = h.call("images.thumbnail", thumb_args(&url, max_edge));
        if r["ok"] != json!(true) {
            bad.push(format!("{label}: failed: {r}"));
            continue;
        }
        let r = &r["result"];
        let got = (r["width"].as_u64().unwrap(), r["height"].as_u64().unwrap());
        eprintln!("{label}: {}×{} (unchanged URL: {})", got.0, got.1, r["dataUrl"] == json!(url));
        if got != want {
            bad.push(format!("{label}: expected {}×{}, got {}×{}", want.0, want.1, got.0, got.1));
        }
        if r["dataUrl"] != json!(url) {
            let (top, bottom) = top_bottom(r);
            if !is_red(top) || is_red(bottom) {
                bad.push(format!("{label}: not rotated 90° clockwise (top {top:?}, bottom {bottom:?})"));
            }
        }
    }
    check("EXIF orientation", &bad);
}

/// `images.thumbnail` arguments: bad ones are `bad_request`, a small PNG comes back unchanged.
#[test]
fn thumbnail_argument_errors_and_the_unchanged_path() {
    let _g = serial();
    let (_d, mut h) = start();
    let png = small_png();
    let url = data_url("image/png", &png);
    for (label, args) in [
        ("https URL", json!({"dataUrl": "https://example.com/a.png"})),
        ("non-image data URL", json!({"dataUrl": data_url("text/plain", &png)})),
        ("data URL without base64", json!({"dataUrl": "data:image/png,abc"})),
        ("invalid base64", json!({"dataUrl": "data:image/png;base64,@@@@"})),
        ("base64 of length 4k+1", json!({"dataUrl": "data:image/png;base64,AAAAA"})),
        ("missing dataUrl", json!({})),
        ("dataUrl not a string", json!({"dataUrl": 5})),
        ("maxEdge 0", json!({"dataUrl": url, "maxEdge": 0})),
        ("maxEdge 9000", json!({"dataUrl": url, "maxEdge": 9000})),
        ("maxEdge 8193", json!({"dataUrl": url, "maxEdge": 8193})),
        ("maxEdge −1", json!({"dataUrl": url, "maxEdge": -1})),
        ("maxEdge 1.5", json!({"dataUrl": url, "maxEdge": 1.5})),
        ("quality 0", json!({"dataUrl": url, "quality": 0})),
        ("quality 101", json!({"dataUrl": url, "quality": 101})),
        ("unknown argument", json!({"dataUrl": url, "width": 10})),
    ] {
        let code = h.err("images.thumbnail", args);
        assert_eq!(code, "bad_request", "{label}");
    }
    // in range: accepted
    for args in [
        json!({"dataUrl": url, "maxEdge": 8192, "quality": 1}),
        json!({"dataUrl": url, "maxEdge": 1, "quality": 100}),
    ] {
        h.ok("images.thumbnail", args);
    }
    // small (≤ 480 px, ≤ 64 KiB): the same data URL, its own size
    let r = h.ok("images.thumbnail", json!({"dataUrl": url}));
    assert_eq!(r, json!({"dataUrl": url, "width": 40, "height": 30}));
    // ... but not when maxEdge is smaller: a JPEG of the scaled size
    let r = h.ok("images.thumbnail", json!({"dataUrl": url, "maxEdge": 20, "quality": 50}));
    assert_eq!((r["width"].as_u64(), r["height"].as_u64()), (Some(20), Some(15)));
    assert!(r["dataUrl"].as_str().unwrap().starts_with("data:image/jpeg;base64,"));
    h.ok("images.thumbnail", json!({"dataUrl": url}));
}

/// `history.boundImages`: entries whose images are bombs or undecodable fall back to labels, a
/// decodable large image is thumbnailed, the newest entry is spared, and the host keeps serving.
#[test]
fn bound_images_turn_bombs_into_labels_and_keep_serving() {
    let _g = serial();
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let bomb_png = png_file(20_000, 20_000, 2, &[], &zlib_zeros(20_000u64 * 60_001));
    let bomb_gif = {
        let mut g = gif_header(65_535, 65_535);
        g.push(0x3B);
        g
    };
    let svg = b"<svg xmlns='http://www.w3.org/2000/svg'/>".to_vec();
    let big_ok = noise_png(600, 400, 12);
    let entries = [
        json!({"role": "user", "content": [text_part("bomb\n\n## Figures\n1. Sales chart"), image_part(&data_url("image/png", &bomb_png))]}),
        json!({"role": "user", "content": [text_part("valid large"), image_part(&data_url("image/png", &big_ok))]}),
        json!({"role": "user", "content": [
            image_part(&data_url("image/gif", &bomb_gif)),
            image_part(&data_url("image/png", &small_png())),
        ]}),
        json!({"role": "user", "content": [text_part("svg"), image_part(&data_url("image/svg+xml", &svg))]}),
        json!({"role": "user", "content": [text_part("newest"), image_part(&data_url("image/png", &bomb_png))]}),
    ];
    for e in &entries {
        h.ok("history.append", json!({"entry": e}));
    }
    assert!(reset_hwm(&h));
    let t = Instant::now();
    let r = h.ok("history.boundImages", json!({"budget": 1}));
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    eprintln!("boundImages over 3 bombs + 1 large image: {r} in {ms:.0} ms, peak {:.1} MiB", mib(vm_hwm(&h)));
    assert!(alive(&mut h), "host exited during boundImages");
    assert_eq!(r["rewritten"], json!(1 + 1 + 2 + 1), "labels 1 + thumbnail 1 + labels 2 + labels 1");
    let got = h.ok("history.get", json!({"images": "ref"}))["entries"].clone();
    // each label keeps the original it replaced (storage-model §12.8)
    let label = |t: &str, b: &[u8]| json!({"type": "text", "text": t, "originalUrl": format!("keepsake-image:sha256:{}", sha256_hex(b))});
    assert_eq!(
        got[0]["content"],
        json!([text_part("bomb\n\n## Figures\n1. Sales chart"), label("[Sales chart]", &bomb_png)])
    );
    let thumb = got[1]["content"][1]["image_url"]["url"].as_str().unwrap().to_owned();
    assert!(thumb.starts_with("keepsake-image:sha256:"), "large image thumbnailed, got {}", got[1]);
    let mime: String = sql(&db)
        .query_row(
            "SELECT mime || ' ' || width || '×' || height FROM images WHERE sha256 = ?1",
            [thumb.trim_start_matches("keepsake-image:sha256:")],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(mime, "image/jpeg 480×320");
    assert_eq!(got[2]["content"], json!([label("[image 1]", &bomb_gif), label("[image 2]", &small_png())]));
    assert_eq!(got[3]["content"], json!([text_part("svg"), label("[image 1]", &svg)]));
    assert!(
        got[4]["content"][1]["image_url"]["url"].as_str().unwrap().starts_with("keepsake-image:sha256:"),
        "newest entry spared"
    );
    assert_eq!(h.ok("history.boundImages", json!({"budget": 1}))["rewritten"], json!(0), "second run");
    // still serving: a thumbnail and a bomb after the pass
    let small = data_url("image/png", &small_png());
    assert_eq!(h.ok("images.thumbnail", json!({"dataUrl": small}))["dataUrl"], json!(small));
    assert_eq!(
        h.err("images.thumbnail", json!({"dataUrl": data_url("image/png", &bomb_png)})),
        "image_rejected"
    );
}
