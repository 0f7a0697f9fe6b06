//! The byte-budget pass `history.boundImages` (storage-model §6.5): plan from stored state,
//! thumbnail outside the write lock, then re-check inside the transaction and apply only if the
//! live history is still what was planned on (else plan again). Pixels are never destroyed
//! (§12.8): a part pointed at a thumbnail, and each label of an entry compacted to labels, keeps
//! its original image as the part-level `originalUrl`, which holds a reference like any image
//! URL, so the original blob lives as long as the entry.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::blobs::insert_blob;
use super::connection::{Store, WriteOutcome};
use super::history::update_live;
use super::rows::row_entry;
use super::tx::WriteTx;
use super::window::live_entries;
use crate::domain::dataurl::url_chars_for;
use crate::domain::entry::{image_part_url, image_ref_url, is_image_part, parse_image_ref};
use crate::domain::images::{
    bound_victims, compact_entry_keeping_originals, point_at, string_url_chars, THUMB_MAX_EDGE,
    THUMB_PASS_BYTES, THUMB_QUALITY,
};
use crate::domain::ingest::NewBlob;
use crate::domain::text::js_trim;
use crate::protocol::HostResult;

/// Stored facts about a blob.
#[derive(Debug, Clone)]
struct BlobInfo {
    mime: String,
    byte_length: usize,
    is_thumbnail: bool,
    width: Option<u32>,
    height: Option<u32>,
}

fn blob_info(conn: &Connection, sha: &str) -> HostResult<Option<BlobInfo>> {
    Ok(conn
        .query_row(
            "SELECT mime, byte_length, is_thumbnail, width, height FROM images WHERE sha256 = ?1",
            [sha],
            |r| {
                Ok(BlobInfo {
                    mime: r.get(0)?,
                    byte_length: r.get::<_, i64>(1)? as usize,
                    is_thumbnail: r.get(2)?,
                    width: r.get(3)?,
                    height: r.get(4)?,
                })
            },
        )
        .optional()?)
}

/// URL chars of an image URL as stored: a reference counts its blob's canonical data URL.
pub(super) fn stored_url_chars(conn: &Connection, url: &str) -> HostResult<usize> {
    Ok(match parse_image_ref(url) {
        Some(sha) => blob_info(conn, sha)?.map(|b| url_chars_for(&b.mime, b.byte_length)).unwrap_or(0),
        None => string_url_chars(url),
    })
}

fn part_urls(e: &Value) -> Vec<Option<String>> {
    crate::domain::images::image_part_urls(e)
}

/// What one part of a victim becomes.
enum PartFate {
    Keep,
    Point(String),
    Fail,
}

/// A planned rewrite of one live row.
struct Rewrite {
    row: i64,
    entry: Value,
    thumbs: Vec<(NewBlob, String)>,
    rewritten: usize,
}

fn is_http(u: &str) -> bool {
    let t = js_trim(u).as_bytes();
    let starts = |p: &[u8]| t.len() >= p.len() && t[..p.len()].eq_ignore_ascii_case(p);
    starts(b"http://") || starts(b"https://")
}

/// Decide a part's fate; thumbnails computed here are CPU work done outside the transaction.
fn part_fate(
    conn: &Connection,
    url: Option<&str>,
    made: &mut HashMap<String, (NewBlob, String)>,
) -> HostResult<PartFate> {
    let Some(url) = url.filter(|u| !u.is_empty()) else { return Ok(PartFate::Fail) };
    if is_http(url) {
        return Ok(PartFate::Keep);
    }
    let Some(sha) = parse_image_ref(url) else { return Ok(PartFate::Fail) };
    let Some(info) = blob_info(conn, sha)? else { return Ok(PartFate::Fail) };
    if info.is_thumbnail {
        return Ok(PartFate::Keep);
    }
    let small = matches!((info.width, info.height), (Some(w), Some(h)) if w.max(h) <= THUMB_MAX_EDGE);
    if small && info.byte_length <= THUMB_PASS_BYTES {
        return Ok(PartFate::Keep);
    }
    if let Some((b, _)) = made.get(sha) {
        return Ok(PartFate::Point(image_ref_url(&b.sha256)));
    }
    let existing: Option<String> = conn
        .query_row(
            "SELECT sha256 FROM images WHERE source_sha256 = ?1 AND is_thumbnail = 1 LIMIT 1",
            [sha],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(t) = existing {
        return Ok(PartFate::Point(image_ref_url(&t)));
    }
    let bytes: Vec<u8> = conn.query_row("SELECT bytes FROM images WHERE sha256 = ?1", [sha], |r| r.get(0))?;
    match crate::imaging::thumbnail(&bytes, THUMB_MAX_EDGE, THUMB_QUALITY) {
        Ok(t) => {
            let blob = crate::domain::ingest::blob_from_bytes("image/jpeg".into(), t.jpeg);
            let r = image_ref_url(&blob.sha256);
            made.insert(sha.to_owned(), (blob, sha.to_owned()));
            Ok(PartFate::Point(r))
        }
        Err(e) => {
            tracing::info!(sha, reason = %e, "image cannot be thumbnailed; entry falls back to labels");
            Ok(PartFate::Fail)
        }
    }
}

/// Plan the pass over `entries` (§6.5 steps 1–2).
fn plan(conn: &Connection, entries: &[(i64, Value)], budget: usize) -> HostResult<Vec<Rewrite>> {
    let bearing: Vec<&(i64, Value)> =
        entries.iter().filter(|(_, e)| crate::domain::entry::is_image_bearing(e)).collect();
    let mut sizes = Vec::with_capacity(bearing.len());
    for (_, e) in &bearing {
        let mut s = 0;
        for u in part_urls(e).into_iter().flatten() {
            s += stored_url_chars(conn, &u)?;
        }
        sizes.push(s);
    }
    let mut out = Vec::new();
    let mut made = HashMap::new();
    for v in bound_victims(&sizes, budget) {
        let (row, e) = bearing[v];
        let urls = part_urls(e);
        let mut fates = Vec::with_capacity(urls.len());
        for u in &urls {
            fates.push(part_fate(conn, u.as_deref(), &mut made)?);
        }
        if fates.iter().any(|f| matches!(f, PartFate::Fail)) {
            out.push(Rewrite {
                row: *row,
                // §12.8: each label keeps its image's original as `originalUrl`
                entry: compact_entry_keeping_originals(e),
                thumbs: Vec::new(),
                rewritten: urls.len(),
            });
            continue;
        }
        let mut entry = e.clone();
        let mut rewritten = 0;
        let mut thumbs = Vec::new();
        if let Some(Value::Array(parts)) = entry.get_mut("content") {
            for (i, p) in parts.iter_mut().filter(|p| is_image_part(p)).enumerate() {
                if let PartFate::Point(new_url) = &fates[i] {
                    // §12.8: the part keeps its original as `originalUrl` (its first one)
                    let source = image_part_url(p).and_then(parse_image_ref).map(str::to_owned);
                    if point_at(p, new_url) {
                        rewritten += 1;
                        if let Some((b, s)) = source.and_then(|src| made.get(&src)) {
                            thumbs.push((b.clone(), s.clone()));
                        }
                    }
                }
            }
        }
        if rewritten > 0 {
            out.push(Rewrite { row: *row, entry, thumbs, rewritten });
        }
    }
    Ok(out)
}

fn apply(w: &mut WriteTx, plan: &[Rewrite]) -> HostResult<usize> {
    let mut total = 0;
    for r in plan {
        for (blob, source) in &r.thumbs {
            if insert_blob(w, blob, true)? {
                w.tx.execute(
                    "UPDATE images SET source_sha256 = ?2 WHERE sha256 = ?1",
                    params![blob.sha256, source],
                )?;
            }
        }
        let old = row_entry(&w.tx, r.row)?;
        update_live(w, r.row, &old, &r.entry)?;
        total += r.rewritten;
    }
    Ok(total)
}

/// True when every blob the planned entries point at exists or is inserted by the plan.
fn plan_still_valid(conn: &Connection, plan: &[Rewrite]) -> HostResult<bool> {
    for r in plan {
        for sha in crate::domain::entry::referenced_blobs(&r.entry) {
            if !r.thumbs.iter().any(|(b, _)| b.sha256 == sha) && !super::blobs::blob_exists(conn, &sha)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

impl Store {
    /// `history.boundImages({budget})` → `{rewritten}`. Thumbnails are computed from a read
    /// snapshot before the write lock; inside the transaction the plan is used only if the live
    /// history (and every blob it points at) is unchanged, else it is redone there.
    pub fn history_bound_images(&mut self, budget: usize, crid: Option<&str>) -> HostResult<WriteOutcome> {
        let (snapshot, planned) = self.read(|tx| {
            let entries = live_entries(tx)?;
            let p = plan(tx, &entries, budget)?;
            Ok((entries, p))
        })?;
        self.write("history.boundImages", crid, |w| {
            let entries = live_entries(&w.tx)?;
            let p = if entries == snapshot && plan_still_valid(&w.tx, &planned)? {
                planned
            } else {
                plan(&w.tx, &entries, budget)?
            };
            Ok(json!({"rewritten": apply(w, &p)?}))
        })
    }
}
