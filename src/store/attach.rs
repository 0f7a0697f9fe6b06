//! Attaching, the change tracker, auto-summary plans and write-back, and rescue commits
//! (storage-model §4.3, §7.3, §7.4, §11.2, §11.16).

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::blobs;
use super::bodies::rewrite_entry;
use super::connection::{Store, WriteOutcome};
use super::history::{append_entries, update_live};
use super::rows::session_known;
use super::tx::setting_value;
use super::window::{binding, live_entries};
use crate::domain::attach::{
    apply_summary, attach_content, summary_decision, summary_is_blank, Ctx, SummaryInputs,
};
use crate::domain::chunks::markdown_chunks;
use crate::domain::entry::{attach_id, is_attach_entry, keeping_original};
use crate::domain::import::sha256_hex;
use crate::domain::new_entry::VideoSrc;
use crate::domain::reduce::{attach_text, rescue_stub, RESCUE_MIN_CHARS};
use crate::domain::settings::{auto_summarize, summarize_threshold};
use crate::domain::text::u16_len;
use crate::protocol::{HostError, HostResult};

/// The change tracker keeps this many records (§4.3).
pub const TRACKER_KEPT: i64 = 50;

/// Arguments of `history.attach` after validation.
pub struct AttachArgs {
    pub ctx: Ctx,
    pub images: Vec<Value>,
    pub placement_end: bool,
    pub summary_source: Option<String>,
    pub paper: bool,
    pub video_src: Option<VideoSrc>,
    /// The session name to use when this attach starts a chat and gives it no autoName.
    pub fallback_name: Option<String>,
}

struct Meta {
    ctx: Value,
    paper: bool,
    summary_source: Option<String>,
}

fn meta(conn: &Connection, id: &str) -> HostResult<Option<Meta>> {
    Ok(conn
        .query_row("SELECT ctx, paper, summary_source FROM attachments WHERE attach_id = ?1", [id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?, r.get::<_, Option<String>>(2)?))
        })
        .optional()?
        .map(|(ctx, paper, summary_source)| Meta {
            ctx: serde_json::from_str(&ctx).unwrap_or(Value::Null),
            paper,
            summary_source,
        }))
}

fn decide(conn: &Connection, entry: &Value) -> HostResult<crate::domain::attach::SummaryDecision> {
    let m = match attach_id(entry) {
        Some(id) => meta(conn, id)?,
        None => None,
    };
    Ok(summary_decision(&SummaryInputs {
        entry,
        meta: m.as_ref().map(|m| &m.ctx),
        paper: m.as_ref().is_some_and(|m| m.paper),
        summary_source: m.as_ref().and_then(|m| m.summary_source.as_deref()),
        auto_summarize: auto_summarize(setting_value(conn, "autoSummarizeAttachments")?.as_ref()),
        threshold: summarize_threshold(setting_value(conn, "summarizeThresholdChars")?.as_ref()),
    }))
}

/// The first live entry with this attachId.
fn live_by_attach_id(conn: &Connection, id: &str) -> HostResult<Option<(i64, Value)>> {
    Ok(live_entries(conn)?.into_iter().find(|(_, e)| attach_id(e) == Some(id)))
}

impl Store {
    pub fn history_attach(&mut self, a: AttachArgs, crid: Option<&str>) -> HostResult<WriteOutcome> {
        let id = uuid::Uuid::new_v4().to_string();
        let text = a.ctx.text();
        let mut entry = json!({"role": "user", "content": attach_content(&text, &a.images, a.placement_end), "attachId": id});
        if let Some(v) = &a.video_src {
            entry["videoSrc"] = serde_json::to_value(v).expect("a videoSrc serializes");
        }
        let ing = blobs::prepare_entries(vec![entry])?;
        self.write("history.attach", crid, |w| {
            blobs::store_ingested(w, &ing)?;
            w.tx.execute(
                "INSERT INTO attachments (attach_id, ctx, paper, summary_source, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, a.ctx.meta_json().to_string(), a.paper, a.summary_source, w.now],
            )?;
            let done = append_entries(w, &ing.entries, a.fallback_name.as_deref())?;
            let d = decide(&w.tx, &ing.entries[0])?;
            let mut r = json!({"attachId": id, "length": done.length, "index": done.index,
                               "summary": {"needed": d.needed, "family": d.family}});
            done.add_to(&mut r);
            Ok(r)
        })
    }

    pub fn attach_track_change(
        &mut self,
        mode: &str,
        url: &str,
        text: &str,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("attach.trackChange", crid, |w| {
            if url.is_empty() || text.is_empty() {
                return Ok(json!({"changed": false}));
            }
            let key = format!("{mode}::{url}");
            let hash = sha256_hex(text.as_bytes());
            let len = u16_len(text) as i64;
            let prev: Option<(String, i64, i64)> = w
                .tx
                .query_row("SELECT text_sha256, text_length, attached_at FROM attach_tracker WHERE key = ?1", [&key], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()?;
            w.tx.execute(
                "INSERT INTO attach_tracker (key, text_sha256, text_length, attached_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(key) DO UPDATE SET text_sha256 = excluded.text_sha256,
                     text_length = excluded.text_length, attached_at = excluded.attached_at",
                params![key, hash, len, w.now],
            )?;
            w.tx.execute(
                "DELETE FROM attach_tracker WHERE key NOT IN
                 (SELECT key FROM attach_tracker ORDER BY attached_at DESC, rowid DESC LIMIT ?1)",
                [TRACKER_KEPT],
            )?;
            Ok(match prev {
                Some((h, plen, at)) if h != hash => {
                    json!({"changed": true, "previousAttachedAt": at, "previousLength": plen})
                }
                _ => json!({"changed": false}),
            })
        })
    }

    pub fn attach_summary_plan(&mut self, id: &str) -> HostResult<Value> {
        self.read(|tx| {
            let (_, entry) = live_by_attach_id(tx, id)?
                .ok_or_else(|| HostError::not_found(format!("no live entry with attachId {id:?}")))?;
            let d = decide(tx, &entry)?;
            let source = d.source.unwrap_or_default();
            Ok(json!({
                "needed": d.needed,
                "family": d.family,
                "originalLength": u16_len(&source),
                "chunks": markdown_chunks(&source, crate::domain::attach::SUMMARY_CHUNK_CHARS),
            }))
        })
    }

    pub fn attach_apply_summary(
        &mut self,
        id: &str,
        summary: &str,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        if summary_is_blank(summary) {
            return Err(HostError::bad_request("summary must not be blank"));
        }
        self.write("attach.applySummary", crid, |w| {
            let Some((row, entry)) = live_by_attach_id(&w.tx, id)? else {
                return Ok(json!({"applied": false}));
            };
            let d = decide(&w.tx, &entry)?;
            let original_length = d.source.as_deref().map(u16_len).unwrap_or(0);
            let m = meta(&w.tx, id)?;
            let Some(new_entry) = apply_summary(&entry, m.as_ref().map(|m| &m.ctx), original_length, summary)
            else {
                return Ok(json!({"applied": false}));
            };
            // the page as it was attached is kept on the entry (`original`): requests use the summary
            let new_entry = keeping_original(&entry, new_entry);
            update_live(w, row, &entry, &new_entry)?;
            Ok(json!({"applied": true}))
        })
    }

    pub fn request_commit_rescue(
        &mut self,
        ids: &[String],
        session: Option<&str>,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        self.write("request.commitRescue", crid, |w| {
            let target = match session.filter(|s| !s.is_empty()) {
                Some(s) if session_known(&w.tx, s)? && binding(&w.tx)? != s => Some(s.to_owned()),
                _ => None,
            };
            let mut committed = 0;
            match &target {
                None => {
                    for (row, e) in live_entries(&w.tx)? {
                        if let Some(stubbed) = rescue_entry(&e, ids) {
                            update_live(w, row, &e, &stubbed)?;
                            committed += 1;
                        }
                    }
                }
                Some(sid) => {
                    for (row, e) in super::entries::path_rows(&w.tx, sid, 0, None)? {
                        if let Some(stubbed) = rescue_entry(&e, ids) {
                            rewrite_entry(w, row, &e, &stubbed)?;
                            committed += 1;
                        }
                    }
                }
            }
            Ok(json!({"committed": committed}))
        })
    }
}

/// The stubbed entry when `e` is named, still an attach entry and still large (§7.3).
fn rescue_entry(e: &Value, ids: &[String]) -> Option<Value> {
    let id = attach_id(e)?;
    if !ids.iter().any(|i| i == id) || !is_attach_entry(e) {
        return None;
    }
    let text = attach_text(e);
    if u16_len(&text) < RESCUE_MIN_CHARS {
        return None;
    }
    let mut out = e.clone();
    out["content"] = Value::String(rescue_stub(&text));
    // the page (images included) is kept on the entry: requests send the stub
    Some(keeping_original(e, out))
}
