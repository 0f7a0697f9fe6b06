//! Turning incoming entries into storable ones (storage-model §2.6): every image data URL in an
//! image part becomes a blob keyed by SHA-256 and the part's URL becomes an image reference.
//! CPU work only (hashing, base64, header sniffing), done before the write transaction begins.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::dataurl::{decode_image_data_url, DataUrlError};
use super::entry::{for_each_image_url_mut, for_each_original_url_mut, image_ref_url, parse_image_ref};
use super::import::sha256_hex;
use crate::protocol::limits::MAX_IMAGE_BYTES;

/// Bytes to store as one blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBlob {
    pub sha256: String,
    pub mime: String,
    pub bytes: Vec<u8>,
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// Entries ready to store, the blobs they need, and the references they make to blobs that
/// must already exist.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ingested {
    pub entries: Vec<Value>,
    pub blobs: BTreeMap<String, NewBlob>,
    pub existing_refs: BTreeSet<String>,
}

/// An image too large to accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLargeImage {
    pub declared_bytes: usize,
    pub cap: usize,
}

pub fn blob_from_bytes(mime: String, bytes: Vec<u8>) -> NewBlob {
    let sha256 = sha256_hex(&bytes);
    let dims = crate::imaging::dimensions(&bytes);
    NewBlob { sha256, mime, width: dims.map(|d| d.0), height: dims.map(|d| d.1), bytes }
}

/// Convert the image parts of `entries`, every part's `originalUrl` (§12.8) and the parts of an
/// entry's kept `original` (data URLs → references; references must name stored blobs).
pub fn ingest(entries: Vec<Value>) -> Result<Ingested, TooLargeImage> {
    let mut out = Ingested::default();
    let mut err = None;
    for mut e in entries {
        let mut visit = |url: &mut String| {
            if err.is_some() {
                return;
            }
            if let Some(h) = parse_image_ref(url) {
                if !out.blobs.contains_key(h) {
                    out.existing_refs.insert(h.to_owned());
                }
                return;
            }
            match decode_image_data_url(url, MAX_IMAGE_BYTES) {
                Ok(img) => {
                    let blob = blob_from_bytes(img.mime, img.bytes);
                    *url = image_ref_url(&blob.sha256);
                    out.existing_refs.remove(&blob.sha256);
                    out.blobs.entry(blob.sha256.clone()).or_insert(blob);
                }
                Err(DataUrlError::NotImage) => {}
                Err(DataUrlError::TooLarge { declared_bytes, cap }) => {
                    err = Some(TooLargeImage { declared_bytes, cap })
                }
            }
        };
        for_each_image_url_mut(&mut e, &mut visit);
        for_each_original_url_mut(&mut e, &mut visit);
        // what a stub or a summary replaced (`original`) holds pictures too
        if let Some(kept) = e.get_mut(crate::domain::entry::ORIGINAL).filter(|o| o.get("content").is_some()) {
            for_each_image_url_mut(kept, &mut visit);
            for_each_original_url_mut(kept, &mut visit);
        }
        out.entries.push(e);
    }
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_urls_become_refs_and_duplicates_share_a_blob() {
        let url = "data:image/PNG;base64,AAEC";
        let e = json!({"role":"user","content":[
            {"type":"image_url","image_url":{"url":url}},
            {"type":"image_url","image_url":url},
            {"type":"image_url","image_url":{"url":"https://x/y.png"}},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,@@"}}
        ]});
        let got = ingest(vec![e]).unwrap();
        assert_eq!(got.blobs.len(), 1);
        let b = got.blobs.values().next().unwrap();
        assert_eq!(b.mime, "image/png");
        assert_eq!(b.bytes, vec![0, 1, 2]);
        let parts = got.entries[0]["content"].as_array().unwrap();
        let r = format!("keepsake-image:sha256:{}", b.sha256);
        assert_eq!(parts[0]["image_url"]["url"], r);
        assert_eq!(parts[1]["image_url"], r);
        assert_eq!(parts[2]["image_url"]["url"], "https://x/y.png");
        assert_eq!(parts[3]["image_url"]["url"], "data:image/png;base64,@@");
        assert!(got.existing_refs.is_empty());
    }

    #[test]
    fn originals_are_ingested_like_image_urls() {
        let known = format!("keepsake-image:sha256:{}", "a".repeat(64));
        let e = json!({"role":"user","content":[
            {"type":"image_url","image_url":{"url":known},"originalUrl":"data:image/png;base64,AAEC"},
            {"type":"text","text":"[image 2]","originalUrl":known}
        ]});
        let got = ingest(vec![e]).unwrap();
        let b = got.blobs.values().next().unwrap();
        let parts = got.entries[0]["content"].as_array().unwrap();
        assert_eq!(parts[0]["originalUrl"], format!("keepsake-image:sha256:{}", b.sha256));
        assert_eq!(parts[1]["originalUrl"], known);
        assert!(got.existing_refs.contains(&"a".repeat(64)));
    }
}
