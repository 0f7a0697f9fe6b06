//! `images.*` and `history.boundImages` (PROTOCOL.md §7 "attaching and images").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::types::{crid, present, ClientRequestId, Index};
use super::Op;
use crate::domain::dataurl::{canonical_data_url, decode_image_data_url, DataUrlError};
use crate::domain::images::{THUMB_MAX_EDGE, THUMB_PASS_BYTES, THUMB_QUALITY, UNSEEN_IMAGE_BYTES_BUDGET};
use crate::protocol::limits::MAX_IMAGE_BYTES;
use crate::protocol::{ErrorCode, HostError, HostResult};
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BoundImages {
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub budget: Option<Index>,
    pub client_request_id: Option<ClientRequestId>,
}

impl Op for BoundImages {
    const NAME: &'static str = "history.boundImages";
    const WRITE: bool = true;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let budget = self.budget.map_or(UNSEEN_IMAGE_BYTES_BUDGET, |b| b.0.min(usize::MAX as u64) as usize);
        Ok(s.history_bound_images(budget, crid(&self.client_request_id))?.into())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Get {
    /// `keepsake-image:sha256:<hex>` (the bare 64-hex hash is accepted too)
    pub r#ref: String,
}

impl Op for Get {
    const NAME: &'static str = "images.get";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.images_get(&self.r#ref)?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Display {
    /// 1–64 image references (`keepsake-image:sha256:<hex>` or the bare hash), answered in order
    pub refs: Vec<String>,
}

impl Op for Display {
    const NAME: &'static str = "images.display";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        Ok(read(s.images_display(&self.refs)?))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Thumbnail {
    pub data_url: String,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub max_edge: Option<Index>,
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Index")]
    pub quality: Option<Index>,
}

impl Op for Thumbnail {
    const NAME: &'static str = "images.thumbnail";
    const WRITE: bool = false;
    fn run(self, _: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let url = &self.data_url;
        let max_edge = self.max_edge.map_or(THUMB_MAX_EDGE as u64, |i| i.0);
        if !(1..=crate::imaging::MAX_SIDE as u64).contains(&max_edge) {
            return Err(HostError::bad_request(format!("maxEdge must be 1–{}", crate::imaging::MAX_SIDE)));
        }
        let quality = self.quality.map_or(THUMB_QUALITY as u64, |i| i.0);
        if !(1..=100).contains(&quality) {
            return Err(HostError::bad_request("quality must be 1–100"));
        }
        let img = match decode_image_data_url(url, MAX_IMAGE_BYTES) {
            Ok(i) => i,
            Err(DataUrlError::NotImage) => {
                return Err(HostError::bad_request(
                    "dataUrl must be a data:image/…;base64, URL with valid base64",
                ))
            }
            Err(DataUrlError::TooLarge { declared_bytes, cap }) => {
                return Err(HostError::too_large(format!(
                    "image of about {declared_bytes} bytes exceeds the {cap}-byte cap"
                )))
            }
        };
        let rejected = |e: crate::imaging::Rejected| HostError::new(ErrorCode::ImageRejected, e.0);
        // already small enough: returned unchanged (after the same checks as any other image)
        if let Some((w, h)) = crate::imaging::dimensions(&img.bytes) {
            if w.max(h) as u64 <= max_edge && img.bytes.len() <= THUMB_PASS_BYTES {
                // decoding applies EXIF orientation, so the reported size is the one a browser shows
                let (w, h) = crate::imaging::oriented_size(&img.bytes).map_err(rejected)?;
                return Ok(read(json!({"dataUrl": url, "width": w, "height": h})));
            }
        }
        let t = crate::imaging::thumbnail(&img.bytes, max_edge as u32, quality as u8).map_err(rejected)?;
        Ok(read(
            json!({"dataUrl": canonical_data_url("image/jpeg", &t.jpeg), "width": t.width, "height": t.height}),
        ))
    }
}
