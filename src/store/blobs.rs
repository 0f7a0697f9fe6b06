//! Image blobs and references (storage-model §2.6, §11.23): bytes stored once by SHA-256,
//! references counted in `image_refs`, garbage collected by trigger when the last reference
//! goes, and collected at commit when a write inserted a blob nothing ended up using.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::salvage::marker::content_damage;
use super::tx::WriteTx;
use crate::domain::dataurl::canonical_data_url;
use crate::domain::entry::{for_each_image_url_mut, parse_image_ref, referenced_blobs};
use crate::domain::import::sha256_hex;
use crate::domain::ingest::{ingest, Ingested, NewBlob};
use crate::protocol::{HostError, HostResult};

pub type Blob = NewBlob;
pub type IngestedEntries = Ingested;

/// `image_refs.holder` of every reference: entry rows all live in `session_entries` since schema 5
/// (the older holders `history` and `trimmed` named tables that no longer exist).
const HOLDER: &str = "session";

/// Pre-transaction CPU work for incoming entries, with the image cap as `too_large`.
pub fn prepare_entries(entries: Vec<Value>) -> HostResult<Ingested> {
    ingest(entries).map_err(|e| {
        HostError::too_large(format!(
            "an image of about {} bytes exceeds the {}-byte image cap",
            e.declared_bytes, e.cap
        ))
    })
}

/// Insert the blobs an ingest produced and check the references it made to existing blobs.
pub fn store_ingested(w: &mut WriteTx, ing: &Ingested) -> HostResult<()> {
    for b in ing.blobs.values() {
        insert_blob(w, b, false)?;
    }
    for h in &ing.existing_refs {
        if !blob_exists(&w.tx, h)? {
            return Err(HostError::bad_request(format!("unknown image reference keepsake-image:sha256:{h}")));
        }
    }
    Ok(())
}

/// Insert a blob unless the same bytes are stored already (the first MIME wins).
pub fn insert_blob(w: &mut WriteTx, b: &NewBlob, is_thumbnail: bool) -> HostResult<bool> {
    let n = w.tx.execute(
        "INSERT INTO images (sha256, mime, width, height, byte_length, is_thumbnail, created_at, bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(sha256) DO NOTHING",
        params![
            b.sha256,
            b.mime,
            b.width,
            b.height,
            b.bytes.len() as i64,
            is_thumbnail as i64,
            w.now,
            b.bytes
        ],
    )?;
    if n == 1 {
        w.new_blobs.push(b.sha256.clone());
    }
    Ok(n == 1)
}

pub fn blob_exists(conn: &Connection, sha: &str) -> HostResult<bool> {
    Ok(conn.query_row("SELECT 1 FROM images WHERE sha256 = ?1", [sha], |_| Ok(())).optional()?.is_some())
}

/// Record the references an entry row makes (insert before removing old ones, so a blob the
/// row still uses is never collected in between).
pub fn add_refs(conn: &Connection, holder_id: i64, entry: &Value) -> HostResult<()> {
    for sha in referenced_blobs(entry) {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO image_refs (holder, holder_id, sha256) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![HOLDER, holder_id, sha])?;
    }
    Ok(())
}

/// Make a row's references exactly those of `entry` (after an in-place rewrite).
pub fn replace_refs(conn: &Connection, holder_id: i64, entry: &Value) -> HostResult<()> {
    add_refs(conn, holder_id, entry)?;
    let keep = referenced_blobs(entry);
    let mut stmt =
        conn.prepare_cached("SELECT sha256 FROM image_refs WHERE holder = ?1 AND holder_id = ?2")?;
    let current: Vec<String> =
        stmt.query_map(params![HOLDER, holder_id], |r| r.get(0))?.collect::<Result<_, _>>()?;
    for sha in current.into_iter().filter(|s| !keep.contains(s)) {
        conn.execute(
            "DELETE FROM image_refs WHERE holder = ?1 AND holder_id = ?2 AND sha256 = ?3",
            params![HOLDER, holder_id, sha],
        )?;
    }
    Ok(())
}

/// Delete blobs this write inserted that nothing references (e.g. an appended entry that the
/// trim dropped at once), so no unreferenced blob outlives the transaction.
pub fn collect_new(w: &WriteTx) -> HostResult<()> {
    for sha in &w.new_blobs {
        w.tx.execute(
            "DELETE FROM images WHERE sha256 = ?1 AND NOT EXISTS (SELECT 1 FROM image_refs WHERE sha256 = ?1)",
            [sha],
        )?;
    }
    Ok(())
}

/// `{mime, bytes}` of a blob. The bytes are hashed again: content-addressed bytes that no longer
/// hash to their key were damaged on disk (SQLite has no page checksums, so this is the only
/// check that can see it) and answer `db_corrupt`.
pub fn get_blob(conn: &Connection, sha: &str) -> HostResult<Option<(String, Vec<u8>)>> {
    let found: Option<(String, Vec<u8>)> = conn
        .query_row("SELECT mime, bytes FROM images WHERE sha256 = ?1", [sha], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((_, bytes)) = &found {
        if sha256_hex(bytes) != sha {
            return Err(content_damage(format!("image {sha} no longer matches its hash")));
        }
    }
    Ok(found)
}

/// A blob a stored entry references (`db_corrupt` when it is gone: the reference count
/// promised it).
pub fn referenced_blob(conn: &Connection, sha: &str) -> HostResult<(String, Vec<u8>)> {
    get_blob(conn, sha)?
        .ok_or_else(|| content_damage(format!("a stored entry references a missing image {sha}")))
}

/// Replaces image references with canonical data URLs, caching each blob's URL.
pub struct Inliner<'c> {
    conn: &'c Connection,
    cache: HashMap<String, String>,
}

impl<'c> Inliner<'c> {
    pub fn new(conn: &'c Connection) -> Self {
        Inliner { conn, cache: HashMap::new() }
    }

    pub fn inline(&mut self, entry: &mut Value) -> HostResult<()> {
        let mut wanted = Vec::new();
        for_each_image_url_mut(entry, |u| {
            if let Some(h) = parse_image_ref(u) {
                wanted.push(h.to_owned());
            }
        });
        for h in wanted {
            if self.cache.contains_key(&h) {
                continue;
            }
            let (mime, bytes) = referenced_blob(self.conn, &h)?;
            self.cache.insert(h, canonical_data_url(&mime, &bytes));
        }
        for_each_image_url_mut(entry, |u| {
            if let Some(h) = parse_image_ref(u) {
                if let Some(d) = self.cache.get(h) {
                    *u = d.clone();
                }
            }
        });
        Ok(())
    }
}

/// `images: "inline"` (default) or `"ref"`.
pub fn parse_images_mode(v: Option<&Value>) -> HostResult<bool> {
    match v {
        None | Some(Value::Null) => Ok(true),
        Some(Value::String(s)) if s == "inline" => Ok(true),
        Some(Value::String(s)) if s == "ref" => Ok(false),
        Some(_) => Err(HostError::bad_request("images must be \"inline\" or \"ref\"")),
    }
}
