//! The seed inputs of every fuzz target, generated here (no binary fixtures): valid frames and
//! requests for every operation, real PNG/JPEG/GIF/WebP/BMP files made with the image crate, small
//! versions of the image bombs of `tests/it/images/bombs.rs`, and compaction cases (the
//! `tests/fixtures/request_build` histories as JSON, byte-derived cases, Markdown shapes).
//!
//! `tests/it/fuzz_corpus.rs` replays them in memory and writes them to
//! `fuzz/corpus/<target>/seed-*` (`cargo test --test it fuzz_corpus::write_seeds -- --ignored`).

use std::io::Cursor;

use base64::Engine;
use serde_json::{json, Value};

pub type Seeds = Vec<(String, Vec<u8>)>;

fn seed(out: &mut Seeds, name: &str, bytes: Vec<u8>) {
    out.push((name.to_owned(), bytes));
}

// ---------------------------------------------------------------------------------------------
// frame_decode: [cap selector, reader selector] + stream (see props/frame.rs)

fn framed(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_ne_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

pub fn frame_seeds() -> Seeds {
    let mut out = Seeds::new();
    let hello = br#"{"id":1,"op":"host.hello"}"#;
    let with = |cap: u8, reader: u8, stream: Vec<u8>| {
        let mut v = vec![cap, reader];
        v.extend(stream);
        v
    };
    seed(&mut out, "one-frame", with(0, 0, framed(hello)));
    let mut three = framed(hello);
    three.extend(framed(b""));
    three.extend(framed(br#"{"id":"x","op":"history.get","args":{"from":0}}"#));
    seed(&mut out, "three-frames-dribbled-interrupted", with(0, 0x41, three.clone()));
    seed(&mut out, "three-frames-7-byte-reads", with(2, 7, three));
    seed(&mut out, "zero-length-cap-0", with(3, 0, framed(b"")));
    seed(&mut out, "cut-prefix", with(0, 0, vec![5, 0]));
    let mut cut = 100u32.to_ne_bytes().to_vec();
    cut.extend_from_slice(b"0123456789");
    seed(&mut out, "cut-body", with(0, 3, cut));
    for (name, declared) in [
        ("prefix-cap-plus-1", (64u32 << 20) + 1),
        ("prefix-2pow31", 1u32 << 31),
        ("prefix-2pow32-1", u32::MAX),
    ] {
        let mut v = declared.to_ne_bytes().to_vec();
        v.extend_from_slice(b"junk");
        seed(&mut out, name, with(0, 0, v));
    }
    let mut lying = (60u32 << 20).to_ne_bytes().to_vec();
    lying.extend_from_slice(b"only ten b");
    seed(&mut out, "lying-prefix-60MiB", with(0, 0, lying));
    // small cap (selector 1: cap = (byte0 >> 2) × 8 = 80): a frame at the cap, then one over it
    let mut small = framed(&[b'a'; 80]);
    small.extend(framed(&[b'b'; 81]));
    seed(&mut out, "small-cap-at-then-over", with((10 << 2) | 1, 0, small));
    out
}

// ---------------------------------------------------------------------------------------------
// image helpers (independent of the crate under test; same algorithms as tests/it/images/bombs.rs)

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

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + x as u32) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, v: u32, count: u32) {
        self.acc |= (v as u64) << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// zlib stream of `n` zero bytes, 1032:1 (one dynamic block: literal 0, then length-258
/// distance-1 matches of 2 bits each).
fn zlib_zeros(n: u64) -> Vec<u8> {
    let mut b = Bits::default();
    b.put(1, 1);
    b.put(2, 2);
    b.put(29, 5);
    b.put(1, 5);
    b.put(14, 4);
    const ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
    for &sym in &ORDER[..18] {
        b.put(
            match sym {
                18 => 1,
                1 | 2 => 2,
                _ => 0,
            },
            3,
        );
    }
    let cl = |b: &mut Bits, sym: u32| match sym {
        18 => b.code(0, 1),
        1 => b.code(0b10, 2),
        _ => b.code(0b11, 2),
    };
    cl(&mut b, 2);
    cl(&mut b, 18);
    b.put(127, 7);
    cl(&mut b, 18);
    b.put(106, 7);
    cl(&mut b, 2);
    cl(&mut b, 18);
    b.put(17, 7);
    cl(&mut b, 1);
    cl(&mut b, 1);
    cl(&mut b, 1);
    if n > 0 {
        b.code(0b10, 2);
        let rest = n - 1;
        for _ in 0..rest / 258 {
            b.put(0, 2);
        }
        for _ in 0..rest % 258 {
            b.code(0b10, 2);
        }
    }
    b.code(0b11, 2);
    let mut out = vec![0x78, 0x9C];
    out.extend(b.finish());
    out.extend_from_slice(&((((n % 65_521) as u32) << 16) | 1).to_be_bytes());
    out
}

/// zlib stream of `data` in stored (uncompressed) blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let chunks: Vec<&[u8]> = if data.is_empty() { vec![&[][..]] } else { data.chunks(65_535).collect() };
    for (i, c) in chunks.iter().enumerate() {
        out.push(u8::from(i + 1 == chunks.len()));
        out.extend_from_slice(&(c.len() as u16).to_le_bytes());
        out.extend_from_slice(&(!(c.len() as u16)).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

const PNG_SIG: &[u8] = b"\x89PNG\r\n\x1a\n";

fn png_chunk(out: &mut Vec<u8>, ty: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(ty);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32_update(crc32_update(0, ty), data).to_be_bytes());
}

fn ihdr(w: u32, h: u32, depth: u8, color_type: u8) -> Vec<u8> {
    let mut d = w.to_be_bytes().to_vec();
    d.extend_from_slice(&h.to_be_bytes());
    d.extend_from_slice(&[depth, color_type, 0, 0, 0]);
    d
}

fn png_file(w: u32, h: u32, color_type: u8, extra: &[(&[u8; 4], Vec<u8>)], zdata: &[u8]) -> Vec<u8> {
    let mut out = PNG_SIG.to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr(w, h, 8, color_type));
    for (ty, data) in extra {
        png_chunk(&mut out, ty, data);
    }
    png_chunk(&mut out, b"IDAT", zdata);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

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

fn noisy(w: u32, h: u32, seed: u64) -> image::DynamicImage {
    let px = Rng(seed | 1).bytes(w as usize * h as usize * 3);
    image::DynamicImage::ImageRgb8(image::RgbImage::from_raw(w, h, px).unwrap())
}

fn encode(img: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), format).expect("encode a seed image");
    out
}

fn gif_lzw(pixels: &[u8]) -> Vec<u8> {
    let mut b = Bits::default();
    for pair in pixels.chunks(2) {
        b.put(4, 3);
        for &p in pair {
            b.put(p as u32, 3);
        }
    }
    b.put(5, 3);
    let data = b.finish();
    let mut out = vec![2u8];
    for block in data.chunks(255) {
        out.push(block.len() as u8);
        out.extend_from_slice(block);
    }
    out.push(0);
    out
}

fn gif_header(w: u16, h: u16) -> Vec<u8> {
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&w.to_le_bytes());
    out.extend_from_slice(&h.to_le_bytes());
    out.extend_from_slice(&[0x81, 0, 0, 255, 0, 0, 0, 0, 255, 0, 255, 0, 255, 255, 255]);
    out
}

fn gif_frame(out: &mut Vec<u8>, x: u16, y: u16, w: u16, h: u16, colour: u8) {
    out.extend_from_slice(&[0x21, 0xF9, 4, 0x04, 1, 0, 0, 0]);
    out.push(0x2C);
    for v in [x, y, w, h] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(0);
    out.extend_from_slice(&gif_lzw(&vec![colour; w as usize * h as usize]));
}

fn gif_animation(w: u16, h: u16, frames: usize) -> Vec<u8> {
    let mut out = gif_header(w, h);
    out.extend_from_slice(&[0x21, 0xFF, 11]);
    out.extend_from_slice(b"NETSCAPE2.0");
    out.extend_from_slice(&[3, 1, 0, 0, 0]);
    gif_frame(&mut out, 0, 0, w, h, 0);
    for i in 1..frames {
        gif_frame(&mut out, (i % w as usize) as u16, ((i / w as usize) % h as usize) as u16, 1, 1, 1);
    }
    out.push(0x3B);
    out
}

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
    out.extend_from_slice(&[0; 24]);
    out.resize(out.len() + pixels, 0x7F);
    out
}

fn riff_webp(chunks: &[u8]) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(4 + chunks.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WEBP");
    out.extend_from_slice(chunks);
    out
}

fn webp_vp8x(w: u32, h: u32, inner: &[u8]) -> Vec<u8> {
    let mut c = b"VP8X".to_vec();
    c.extend_from_slice(&10u32.to_le_bytes());
    c.extend_from_slice(&[0, 0, 0, 0]);
    c.extend_from_slice(&(w - 1).to_le_bytes()[..3]);
    c.extend_from_slice(&(h - 1).to_le_bytes()[..3]);
    c.extend_from_slice(&inner[12..]);
    riff_webp(&c)
}

fn webp_vp8l_declaring(inner: &[u8], w: u32, h: u32) -> Vec<u8> {
    let mut out = inner.to_vec();
    let old = u32::from_le_bytes(out[21..25].try_into().unwrap());
    let bits = (old & !0x0FFF_FFFF) | (w - 1) | ((h - 1) << 14);
    out[21..25].copy_from_slice(&bits.to_le_bytes());
    out
}

fn jpeg_marker(jpeg: &[u8], marker: u8) -> usize {
    let mut i = 2;
    while i + 4 <= jpeg.len() {
        if jpeg[i + 1] == marker {
            return i;
        }
        i += 2 + u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]) as usize;
    }
    panic!("no FF{marker:02X} segment");
}

fn jpeg_declaring(jpeg: &[u8], w: u16, h: u16) -> Vec<u8> {
    let mut out = jpeg.to_vec();
    let sof = jpeg_marker(&out, 0xC0);
    out[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    out
}

/// The JPEG with an APP1 Exif segment (Orientation = `o`) right after SOI.
fn jpeg_with_orientation(jpeg: &[u8], o: u16) -> Vec<u8> {
    let mut tiff = b"MM\0\x2A".to_vec();
    tiff.extend_from_slice(&8u32.to_be_bytes());
    tiff.extend_from_slice(&1u16.to_be_bytes());
    tiff.extend_from_slice(&0x0112u16.to_be_bytes());
    tiff.extend_from_slice(&3u16.to_be_bytes());
    tiff.extend_from_slice(&1u32.to_be_bytes());
    tiff.extend_from_slice(&o.to_be_bytes());
    tiff.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&((2 + 6 + tiff.len()) as u16).to_be_bytes());
    out.extend_from_slice(b"Exif\0\0");
    out.extend_from_slice(&tiff);
    out.extend_from_slice(&jpeg[2..]);
    out
}

fn tiff_1x1() -> Vec<u8> {
    let mut out = b"II*\0".to_vec();
    out.extend_from_slice(&8u32.to_le_bytes());
    let entries: [(u16, u16, u32); 8] = [
        (256, 3, 1),
        (257, 3, 1),
        (258, 3, 8),
        (259, 3, 1),
        (262, 3, 1),
        (273, 4, 110),
        (278, 3, 1),
        (279, 4, 1),
    ];
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, ty, v) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0x80);
    out
}

pub fn small_png() -> Vec<u8> {
    encode(&noisy(12, 9, 3), image::ImageFormat::Png)
}

// ---------------------------------------------------------------------------------------------
// image_decode: the file itself

pub fn image_seeds() -> Seeds {
    use image::ImageFormat as F;
    let mut out = Seeds::new();
    let img = noisy(40, 30, 7);
    let rgba = image::DynamicImage::ImageRgba8(image::RgbaImage::from_fn(20, 14, |x, y| {
        image::Rgba([(x * 12) as u8, (y * 18) as u8, 90, (x * y) as u8])
    }));
    let gray16 = image::DynamicImage::ImageLuma16(image::ImageBuffer::from_fn(9, 5, |x, y| {
        image::Luma([(x * 7000 + y * 900) as u16])
    }));
    let png = encode(&img, F::Png);
    let jpeg = encode(&img, F::Jpeg);
    let gif = encode(&img, F::Gif);
    let webp = encode(&img, F::WebP);
    seed(&mut out, "png-rgb-40x30", png.clone());
    seed(&mut out, "png-rgba-20x14", encode(&rgba, F::Png));
    seed(&mut out, "png-gray16-9x5", encode(&gray16, F::Png));
    seed(&mut out, "jpeg-40x30", jpeg.clone());
    seed(
        &mut out,
        "jpeg-gray-16x8",
        encode(&image::DynamicImage::ImageLuma8(noisy(16, 8, 9).to_luma8()), F::Jpeg),
    );
    seed(&mut out, "jpeg-exif-rotate90-40x30", jpeg_with_orientation(&jpeg, 6));
    seed(&mut out, "jpeg-exif-mirror-40x30", jpeg_with_orientation(&jpeg, 2));
    seed(&mut out, "gif-40x30", gif.clone());
    seed(&mut out, "gif-animated-16x16-300-frames", gif_animation(16, 16, 300));
    seed(&mut out, "webp-lossless-40x30", webp.clone());
    seed(&mut out, "webp-rgba-20x14", encode(&rgba, F::WebP));
    seed(&mut out, "bmp-40x30", encode(&img, F::Bmp));
    seed(&mut out, "bmp-rgba-20x14", encode(&rgba, F::Bmp));
    seed(&mut out, "png-1x1-wide-8192x1", png_file(8192, 1, 0, &[], &zlib_zeros(8193)));
    // bombs, small: headers beyond the limits, decompression bombs, zero sizes
    seed(&mut out, "bomb-png-ihdr-20000x20000", png_file(20_000, 20_000, 2, &[], &zlib_zeros(60_000)));
    seed(&mut out, "bomb-png-8193x1", png_file(8193, 1, 2, &[], &zlib_zeros(1 + 8193 * 3)));
    seed(&mut out, "bomb-png-1x8193", png_file(1, 8193, 0, &[], &zlib_zeros(8193 * 2)));
    seed(&mut out, "bomb-png-4097x4097", png_file(4097, 4097, 0, &[], &zlib_zeros(4097 * 4098)));
    seed(&mut out, "bomb-png-0x0", png_file(0, 0, 2, &[], &zlib_zeros(0)));
    let mut iccp = b"icc\0\0".to_vec();
    iccp.extend(zlib_zeros(16 << 20));
    seed(&mut out, "bomb-png-iccp-16MiB", png_file(10, 10, 2, &[(b"iCCP", iccp)], &zlib_zeros(310)));
    let mut ztxt = b"Comment\0\0".to_vec();
    ztxt.extend(zlib_zeros(8 << 20));
    seed(&mut out, "bomb-png-ztxt-8MiB", png_file(10, 10, 2, &[(b"zTXt", ztxt)], &zlib_zeros(310)));
    seed(&mut out, "bomb-png-idat-4MiB-for-10x10", png_file(10, 10, 2, &[], &zlib_zeros(4 << 20)));
    let mut huge_chunk = PNG_SIG.to_vec();
    png_chunk(&mut huge_chunk, b"IHDR", &ihdr(100, 100, 8, 2));
    huge_chunk.extend_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
    huge_chunk.extend_from_slice(b"IDAT");
    huge_chunk.extend_from_slice(&[0; 64]);
    seed(&mut out, "bomb-png-idat-length-2pow31", huge_chunk);
    seed(&mut out, "png-stored-zlib-3x2", png_file(3, 2, 2, &[], &zlib_stored(&[0u8; 2 * 10])));
    seed(&mut out, "bomb-jpeg-sof-65535x65535", jpeg_declaring(&jpeg, 65_535, 65_535));
    seed(&mut out, "bomb-jpeg-sof-8193x1", jpeg_declaring(&jpeg, 8193, 1));
    seed(&mut out, "bomb-webp-vp8x-16383x16383", webp_vp8x(16_383, 16_383, &webp));
    seed(&mut out, "bomb-webp-vp8l-16383x16383", webp_vp8l_declaring(&webp, 16_383, 16_383));
    let mut gif_big = gif_header(65_535, 65_535);
    gif_big.push(0x2C);
    for x in [0u16, 0, 65_535, 65_535] {
        gif_big.extend_from_slice(&x.to_le_bytes());
    }
    gif_big.push(0);
    gif_big.extend_from_slice(&gif_lzw(&[0; 64]));
    gif_big.push(0x3B);
    seed(&mut out, "bomb-gif-65535x65535", gif_big);
    let mut gif_canvas = gif_header(4096, 4096);
    gif_canvas.push(0x2C);
    for x in [0u16, 0, 4096, 4096] {
        gif_canvas.extend_from_slice(&x.to_le_bytes());
    }
    gif_canvas.push(0);
    gif_canvas.extend_from_slice(&gif_lzw(&[0; 2]));
    gif_canvas.push(0x3B);
    seed(&mut out, "bomb-gif-4096x4096-two-pixels", gif_canvas);
    seed(&mut out, "bomb-bmp-100000x100000", bmp(100_000, 100_000, 256));
    seed(&mut out, "bomb-bmp-top-down-100000", bmp(100_000, -100_000, 256));
    seed(&mut out, "bmp-cut-25-bytes", bmp(1, 1, 0)[..25].to_vec());
    // truncated files
    for (name, bytes) in [("png", &png), ("jpeg", &jpeg), ("gif", &gif), ("webp", &webp)] {
        for cut in [7, 30, bytes.len() / 2, bytes.len() - 2] {
            seed(&mut out, &format!("cut-{name}-at-{cut}"), bytes[..cut].to_vec());
        }
    }
    // polyglots and foreign formats
    let mut gif_html = b"GIF89a".to_vec();
    gif_html.extend_from_slice(b"<html><script>alert(1)</script></html>");
    seed(&mut out, "polyglot-gif-html", gif_html);
    let mut png_jpeg = PNG_SIG.to_vec();
    png_jpeg.extend_from_slice(&jpeg[..200]);
    seed(&mut out, "polyglot-png-magic-jpeg-data", png_jpeg);
    let mut riff_png = b"RIFF\0\0\0\0WEBP".to_vec();
    riff_png.extend_from_slice(&small_png());
    seed(&mut out, "polyglot-riff-png", riff_png);
    let mut png_tail = small_png();
    png_tail.extend(Rng(11).bytes(256));
    seed(&mut out, "png-with-trailing-garbage", png_tail);
    seed(&mut out, "svg", br#"<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>"#.to_vec());
    seed(&mut out, "tiff-1x1", tiff_1x1());
    seed(&mut out, "empty", Vec::new());
    seed(&mut out, "png-signature-only", PNG_SIG.to_vec());
    out
}

// ---------------------------------------------------------------------------------------------
// request_decode: one frame body

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

pub fn request_seeds() -> Seeds {
    let png = data_url("image/png", &small_png());
    let img_entry = json!({"role": "user", "content": [
        {"type": "text", "text": "look [图1]"},
        {"type": "image_url", "image_url": {"url": png}}]});
    let attach_ctx = json!({"url": "https://e.x/a", "title": "A page", "mode": "full", "text": "Body text.\n## Figures\n1. Chart"});
    let sha = "keepsake-image:sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let requests: Vec<(&str, Value)> = vec![
        ("host.hello", json!({})),
        ("host.status", json!({})),
        ("settings.get", json!({"keys": ["theme", "apiKey"]})),
        ("settings.set", json!({"map": {"theme": "dark", "n": 3}, "clientRequestId": "c-1"})),
        ("settings.remove", json!({"keys": ["theme"]})),
        ("history.get", json!({"from": 0, "limit": 10, "images": "refs"})),
        ("history.meta", json!({})),
        ("history.setBinding", json!({"id": "s-1"})),
        ("history.append", json!({"entry": {"role": "user", "content": "hi"}, "clientRequestId": "c-2"})),
        ("history.append", json!({"entry": img_entry, "markImagesSeen": true})),
        (
            "history.replace",
            json!({"entries": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}),
        ),
        ("history.clear", json!({"saveCurrent": true})),
        ("history.removeAt", json!({"index": 0})),
        ("history.truncateFrom", json!({"index": 1})),
        ("history.removeByAttachId", json!({"attachId": "att-1"})),
        ("history.removeLastPageContext", json!({})),
        ("history.markImagesSeen", json!({})),
        ("history.boundImages", json!({"budget": 10})),
        ("history.attach", json!({"ctx": attach_ctx, "images": [png], "placement": "anchors"})),
        ("attach.trackChange", json!({"mode": "full", "url": "https://e.x/a", "text": "t"})),
        ("attach.summaryPlan", json!({"attachId": "att-1"})),
        ("attach.applySummary", json!({"attachId": "att-1", "summary": "short"})),
        ("images.get", json!({"ref": sha})),
        ("images.thumbnail", json!({"dataUrl": png, "maxEdge": 4, "quality": 50})),
        ("sessions.save", json!({"name": "first", "fallbackName": "fb"})),
        ("sessions.list", json!({"query": "fir"})),
        ("sessions.get", json!({"id": "s-1", "images": "inline"})),
        ("sessions.load", json!({"id": "s-1", "saveCurrent": false})),
        ("sessions.rename", json!({"id": "s-1", "name": "renamed"})),
        ("sessions.pin", json!({"id": "s-1", "pinned": true})),
        ("sessions.delete", json!({"id": "s-1"})),
        ("sessions.clearAll", json!({})),
        ("sessions.appendTo", json!({"id": "s-1", "entry": {"role": "assistant", "content": "late"}})),
        ("sessions.export", json!({"ids": ["s-1"], "format": "markdown"})),
        ("storage.import", json!({"document": {"version": 1, "sessions": []}, "settings": "keep"})),
        ("changes.since", json!({"seq": 0})),
        ("request.isContextOverflow", json!({"message": "maximum context length exceeded"})),
        (
            "request.build",
            json!({"kind": "anthropic", "turn": {"userText": "q", "images": [png]},
            "systemPrompt": "s", "bodyFields": {"model": "m"}, "pass": {"kind": "continuation",
            "previousReply": "p", "instruction": "go on"}, "rescue": {"errorMessage": "prompt is too long"},
            "aging": {"minUserTurnsAfter": 0, "minChars": 1}, "imageRefs": true}),
        ),
        ("request.commitRescue", json!({"attachIds": ["att-1"], "sessionId": "s-1"})),
        ("no.such.op", json!({})),
    ];
    let mut out = Seeds::new();
    for (i, (op, args)) in requests.into_iter().enumerate() {
        let body = json!({"id": i, "op": op, "args": args}).to_string();
        seed(&mut out, &format!("op-{i:02}-{op}"), body.into_bytes());
    }
    let deep = |n: usize| {
        format!(
            "{{\"id\":1,\"op\":\"history.append\",\"args\":{{\"entry\":{}{}}}}}",
            "[".repeat(n),
            "]".repeat(n)
        )
    };
    for (name, body) in [
        ("empty", Vec::new()),
        ("bad-utf8", b"\xff\xfe{\"id\":1}".to_vec()),
        ("not-an-object", b"[1,2]".to_vec()),
        ("missing-id", br#"{"op":"host.hello"}"#.to_vec()),
        ("object-id", br#"{"id":{},"op":"host.hello"}"#.to_vec()),
        ("long-id", format!("{{\"id\":\"{}\",\"op\":\"host.hello\"}}", "i".repeat(257)).into_bytes()),
        ("op-not-string", br#"{"id":"a","op":7}"#.to_vec()),
        ("args-array", br#"{"id":"a","op":"history.get","args":[]}"#.to_vec()),
        ("extra-field", br#"{"id":"a","op":"history.get","x":1}"#.to_vec()),
        ("unknown-arg", br#"{"id":2.5,"op":"history.get","args":{"nope":1}}"#.to_vec()),
        ("depth-127", deep(126).into_bytes()),
        ("depth-129", deep(130).into_bytes()),
    ] {
        seed(&mut out, &format!("bad-{name}"), body);
    }
    out
}

/// Every key and operation name of the protocol, as a libFuzzer dictionary.
pub fn request_dictionary() -> String {
    let mut words: Vec<String> =
        keepsake_host::server::dispatch::op_names().iter().map(|s| s.to_string()).collect();
    for w in [
        "id",
        "op",
        "args",
        "clientRequestId",
        "keys",
        "map",
        "from",
        "limit",
        "images",
        "entry",
        "entries",
        "markImagesSeen",
        "saveCurrent",
        "index",
        "attachId",
        "budget",
        "ctx",
        "placement",
        "summarySource",
        "paper",
        "videoSrc",
        "mode",
        "url",
        "text",
        "summary",
        "ref",
        "dataUrl",
        "maxEdge",
        "quality",
        "name",
        "fallbackName",
        "query",
        "pinned",
        "ids",
        "format",
        "document",
        "settings",
        "seq",
        "message",
        "kind",
        "turn",
        "userText",
        "systemPrompt",
        "bodyFields",
        "source",
        "sessionId",
        "upTo",
        "pass",
        "rescue",
        "errorMessage",
        "backfill",
        "aging",
        "minUserTurnsAfter",
        "minChars",
        "imageRefs",
        "attachIds",
        "role",
        "content",
        "type",
        "image_url",
        "input_text",
        "imagesSeen",
        "markdown",
        "json",
        "anchors",
        "end",
        "keep",
        "overwrite",
        "chat",
        "responses",
        "anthropic",
        "runs",
        "agent",
        "continuation",
        "timestampRewrite",
        "previousReply",
        "instruction",
        "user",
        "assistant",
        "data:image/png;base64,",
        "keepsake-image:sha256:",
        "[Page context attached by Keepsake]",
        "doctor",
    ] {
        words.push(w.to_owned());
    }
    words.iter().map(|w| format!("{}\n", serde_json::to_string(w).unwrap())).collect()
}

// ---------------------------------------------------------------------------------------------
// compaction: JSON cases and byte-derived ones

/// The request-build fixtures as compaction cases (`fixtures` are (name, JSON text) pairs).
pub fn compaction_seeds(fixtures: &[(String, String)]) -> Seeds {
    let kinds = ["chat", "responses", "anthropic", "runs", "agent"];
    let mut out = Seeds::new();
    for (i, (name, text)) in fixtures.iter().enumerate() {
        let f: Value = serde_json::from_str(text).expect("fixture JSON");
        let input = &f["input"];
        let args = &input["args"];
        let kind = kinds[i % kinds.len()];
        let budget = [8 << 20, 0, 200, 5000][i % 4];
        let mut case = json!({
            "history": input["history"],
            "kind": kind,
            "budget": budget,
            "userText": args["turn"]["userText"],
            "images": args["turn"]["images"],
            "systemPrompt": args["systemPrompt"],
            "bodyFields": args["bodyFields"],
            "backfill": args["backfill"],
            "markdown": "intro\n```\ncode line\n```\n|h|h|\n|-|-|\n|1|2|\n|3|4|\n|5|6|\nlast",
            "size": 24,
        });
        let o = case.as_object_mut().unwrap();
        if let Some(p) = args.get("pass") {
            o.insert("pass".into(), p.clone());
        }
        if let Some(a) = args.get("aging") {
            o.insert("aging".into(), a.clone());
        }
        if let Some(r) = args["rescue"]["errorMessage"].as_str() {
            o.insert("rescue".into(), json!(r));
        }
        o.retain(|_, v| !v.is_null());
        seed(&mut out, &format!("fixture-{}", name.trim_end_matches(".json")), case.to_string().into_bytes());
    }
    let md = [
        ("table-split", "|a|b|\n|-|-|\n|1|2|\n|3|4|\n|5|6|\n|7|8|", 17),
        ("fence-over-size", "x\n```\nline one\nline two\n```\ny\n\n  \n", 8),
        ("unclosed-fence", "a\n~~~\ncode\n\n", 3),
        ("long-line-surrogates", "😀😀😀😀😀 tail", 3),
        ("long-table-row", "|h|\n|-|\n|0123456789abcdef|\n|x|", 6),
        ("blank-fragments", "a          b\n   \n\tc", 4),
    ];
    for (name, text, size) in md {
        seed(
            &mut out,
            &format!("markdown-{name}"),
            json!({"markdown": text, "size": size}).to_string().into_bytes(),
        );
    }
    let mut rng = Rng(0x5EED);
    for i in 0..6 {
        let mut b = rng.bytes(64 + 96 * i);
        // not `{`: a byte-derived case
        if b[0] == b'{' {
            b[0] = 0;
        }
        seed(&mut out, &format!("bytes-{i}"), b);
    }
    out
}
