//! `images.display`: display renditions of stored images (storage-model §2.6), kept in
//! `image_renditions` keyed by the image's hash. A rendition is derived data: made the first time
//! it is asked for, remade when missing or when its bytes no longer match their digest, removed
//! with its image (trigger `images_drop_rendition`), never read for a request body.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::blobs::get_blob;
use super::connection::Store;
use crate::domain::dataurl::base64_encode;
use crate::domain::display::{display_rendition, Rendition};
use crate::domain::entry::parse_image_ref;
use crate::domain::import::sha256_hex;
use crate::protocol::{ErrorCode, HostError, HostResult};

/// At most this many refs per `images.display` call.
pub const DISPLAY_MAX_REFS: usize = 64;

/// `keepsake-image:sha256:<hex>` or the bare 64-hex hash → the hash.
pub fn image_sha(r: &str) -> HostResult<String> {
    parse_image_ref(r)
        .or_else(|| {
            (r.len() == 64 && parse_image_ref(&format!("keepsake-image:sha256:{r}")).is_some()).then_some(r)
        })
        .map(str::to_owned)
        .ok_or_else(|| HostError::bad_request("ref must be keepsake-image:sha256:<64 lower-case hex>"))
}

/// A stored rendition that still matches its digest; anything else (missing, damaged, unreadable)
/// is `None` and is remade.
fn stored_rendition(conn: &Connection, sha: &str) -> Option<Rendition> {
    let row = conn
        .query_row(
            "SELECT mime, width, height, digest, bytes FROM image_renditions WHERE sha256 = ?1",
            [sha],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<u32>>(1)?,
                    r.get::<_, Option<u32>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Vec<u8>>(4)?,
                ))
            },
        )
        .optional()
        .ok()
        .flatten()?;
    let (mime, width, height, digest, bytes) = row;
    (sha256_hex(&bytes) == digest).then_some(Rendition { mime, bytes, width, height })
}

enum Found {
    Ready(Rendition),
    /// No usable rendition: the original's mime and bytes to make one from.
    Make(String, Vec<u8>),
    Failed(HostError),
}

impl Store {
    /// `images.display({refs})` → `{images: [{ref, mime, bytes, width, height} | {ref, error}]}`,
    /// in the order of `refs`. Per-picture failures (`bad_request` for a malformed ref,
    /// `not_found`, `db_corrupt` for damaged original bytes) are per-item errors.
    pub fn images_display(&mut self, refs: &[String]) -> HostResult<Value> {
        if refs.is_empty() || refs.len() > DISPLAY_MAX_REFS {
            return Err(HostError::bad_request(format!(
                "refs must hold 1–{DISPLAY_MAX_REFS} image references"
            )));
        }
        let shas: Vec<HostResult<String>> = refs.iter().map(|r| image_sha(r)).collect();
        let found = self.read(|tx| {
            Ok(shas
                .iter()
                .map(|sha| {
                    let sha = match sha {
                        Ok(s) => s,
                        Err(e) => return Found::Failed(e.clone()),
                    };
                    if let Some(r) = stored_rendition(tx, sha) {
                        return Found::Ready(r);
                    }
                    match get_blob(tx, sha) {
                        Ok(Some((mime, bytes))) => Found::Make(mime, bytes),
                        Ok(None) => Found::Failed(HostError::not_found(format!("no image {sha}"))),
                        Err(e) => Found::Failed(e),
                    }
                })
                .collect::<Vec<_>>())
        })?;
        let mut made: Vec<(String, Rendition)> = Vec::new();
        let mut out = Vec::with_capacity(refs.len());
        for ((r, sha), f) in refs.iter().zip(&shas).zip(found) {
            let item = match f {
                Found::Ready(rd) => rendition_json(r, &rd),
                Found::Make(mime, bytes) => {
                    let rd = display_rendition(&mime, &bytes);
                    let item = rendition_json(r, &rd);
                    if let Ok(sha) = sha {
                        made.push((sha.clone(), rd));
                    }
                    item
                }
                Found::Failed(e) => {
                    if e.code == ErrorCode::DbCorrupt {
                        self.note_damage(&e.message);
                    }
                    json!({"ref": r, "error": {"code": e.code.as_str(), "message": e.message}})
                }
            };
            out.push(item);
        }
        if !made.is_empty() {
            // derived data: a rendition that cannot be kept now (read-only, busy, damaged file)
            // is made again next time, never an error
            if let Err(e) = self.write("images.display", None, |w| {
                for (sha, rd) in &made {
                    w.tx.execute(
                        "INSERT OR REPLACE INTO image_renditions (sha256, mime, width, height, digest, created_at, bytes)
                         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM images WHERE sha256 = ?1)",
                        params![sha, rd.mime, rd.width, rd.height, sha256_hex(&rd.bytes), w.now, rd.bytes],
                    )?;
                }
                Ok(Value::Null)
            }) {
                tracing::info!(error = %e, "display renditions were not kept");
            }
        }
        Ok(json!({ "images": out }))
    }
}

fn rendition_json(r: &str, rd: &Rendition) -> Value {
    json!({
        "ref": r,
        "mime": rd.mime,
        "bytes": base64_encode(&rd.bytes),
        "width": rd.width,
        "height": rd.height,
    })
}
