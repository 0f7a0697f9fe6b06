//! `data:image/…;base64,` URLs (storage-model §2.6, §11.11): recognising them, WHATWG
//! forgiving-base64 decoding, and the canonical form the host hands back.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};

/// A decoded image data URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageDataUrl {
    /// Declared MIME type, lower-cased, parameters dropped (`image/png`).
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// Why a data URL was not turned into a blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataUrlError {
    /// Not an image data URL with valid base64: it stays a plain string (§2.6).
    NotImage,
    /// Valid shape, but the payload is over the image cap (checked before decoding).
    TooLarge { declared_bytes: usize, cap: usize },
}

const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes()) {
        Some(&s[prefix.len()..])
    } else {
        None
    }
}

/// Split `data:image/<subtype>[;params];base64,<payload>` into (mime, payload).
pub fn split_image_data_url(url: &str) -> Option<(String, &str)> {
    let rest = strip_prefix_ci(url, "data:")?;
    let comma = rest.find(',')?;
    let (header, payload) = (&rest[..comma], &rest[comma + 1..]);
    let hl = header.len();
    if hl < 7 || !header.as_bytes()[hl - 7..].eq_ignore_ascii_case(b";base64") {
        return None;
    }
    let mime = header.split(';').next()?.to_ascii_lowercase();
    let sub = mime.strip_prefix("image/")?;
    if sub.is_empty() || !sub.bytes().all(|b| b.is_ascii_graphic() && b != b';' && b != b',') {
        return None;
    }
    Some((mime, payload))
}

/// WHATWG forgiving-base64 decode; `None` when the algorithm returns failure.
pub fn forgiving_base64_decode(input: &str) -> Option<Vec<u8>> {
    let mut s: Vec<u8> =
        input.bytes().filter(|b| !matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')).collect();
    if s.len() % 4 == 0 {
        if s.ends_with(b"==") {
            s.truncate(s.len() - 2);
        } else if s.ends_with(b"=") {
            s.truncate(s.len() - 1);
        }
    }
    if s.len() % 4 == 1 {
        return None;
    }
    if !s.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/') {
        return None;
    }
    LENIENT.decode(&s).ok()
}

/// Decode an image data URL, checking the payload size against `cap` before decoding.
pub fn decode_image_data_url(url: &str, cap: usize) -> Result<ImageDataUrl, DataUrlError> {
    let (mime, payload) = split_image_data_url(url).ok_or(DataUrlError::NotImage)?;
    let declared_bytes = payload.len() / 4 * 3;
    if declared_bytes > cap {
        return Err(DataUrlError::TooLarge { declared_bytes, cap });
    }
    let bytes = forgiving_base64_decode(payload).ok_or(DataUrlError::NotImage)?;
    if bytes.len() > cap {
        return Err(DataUrlError::TooLarge { declared_bytes: bytes.len(), cap });
    }
    Ok(ImageDataUrl { mime, bytes })
}

/// Canonical data URL: `data:<mime>;base64,<standard padded base64>` (§2.6).
pub fn canonical_data_url(mime: &str, bytes: &[u8]) -> String {
    let mut out = String::with_capacity(url_chars_for(mime, bytes.len()));
    out.push_str("data:");
    out.push_str(mime);
    out.push_str(";base64,");
    STANDARD.encode_string(bytes, &mut out);
    out
}

/// URL chars of a blob: `5 + len(mime) + 8 + 4·ceil(bytes/3)` (§2.6).
pub fn url_chars_for(mime: &str, byte_len: usize) -> usize {
    5 + mime.len() + 8 + 4 * byte_len.div_ceil(3)
}

pub fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_image_data_urls_case_insensitively() {
        let (m, p) = split_image_data_url("DATA:Image/PNG;charset=x;BASE64,AAAA").unwrap();
        assert_eq!(m, "image/png");
        assert_eq!(p, "AAAA");
        assert!(split_image_data_url("data:text/plain;base64,AAAA").is_none());
        assert!(split_image_data_url("data:image/png,AAAA").is_none());
        assert!(split_image_data_url("https://x/y.png").is_none());
    }

    #[test]
    fn forgiving_base64_follows_whatwg() {
        assert_eq!(forgiving_base64_decode("YQ==").unwrap(), b"a");
        assert_eq!(forgiving_base64_decode("YQ").unwrap(), b"a");
        assert_eq!(forgiving_base64_decode(" Y Q = = ").unwrap(), b"a");
        assert_eq!(forgiving_base64_decode("YR").unwrap(), b"a"); // trailing bits ignored
        assert!(forgiving_base64_decode("Y").is_none());
        assert!(forgiving_base64_decode("YQ=").is_none());
        assert!(forgiving_base64_decode("Y!Q=").is_none());
        assert_eq!(forgiving_base64_decode("").unwrap(), b"");
    }

    #[test]
    fn canonical_url_length_matches_url_chars() {
        for n in 0..10 {
            let bytes = vec![7u8; n];
            let u = canonical_data_url("image/png", &bytes);
            assert_eq!(u.len(), url_chars_for("image/png", n));
            assert_eq!(decode_image_data_url(&u, 100).unwrap().bytes, bytes);
        }
    }

    #[test]
    fn oversize_is_refused_before_decoding() {
        let u = format!("data:image/png;base64,{}", "A".repeat(400));
        assert!(matches!(decode_image_data_url(&u, 100), Err(DataUrlError::TooLarge { .. })));
    }
}
