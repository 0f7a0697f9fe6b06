//! Image bytes: header sniffing now; decoding, bounding and thumbnails arrive with the image
//! lifecycle issue. Pure CPU work: no SQL, no stdio.

use std::io::Cursor;

/// Width and height from the image header, without decoding pixels. `None` when the format is
/// not one we read (PNG, JPEG, GIF, WebP, BMP) or the header is damaged.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    image::ImageReader::new(Cursor::new(bytes)).with_guessed_format().ok()?.into_dimensions().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_png_dimensions_from_the_header() {
        // 1×1 PNG
        let png = crate::domain::dataurl::forgiving_base64_decode(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
        )
        .unwrap();
        assert_eq!(dimensions(&png), Some((1, 1)));
        assert_eq!(dimensions(b"not an image"), None);
    }
}
