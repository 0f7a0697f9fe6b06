//! `request.build` (storage-model §8): read the source history in one read transaction, run the
//! pure builder, then resolve image tokens (references and turn-image placeholders) according
//! to `imageRefs` (PROTOCOL.md "Image references in request bodies").

use std::collections::{BTreeSet, HashMap};

use rusqlite::Connection;
use serde_json::{json, Map, Value};

use super::blobs::get_blob;
use super::bound::stored_url_chars;
use super::connection::Store;
use super::rows::{session_body, session_known};
use super::window::live_entries;
use crate::domain::dataurl::{canonical_data_url, split_image_data_url};
use crate::domain::entry::{parse_image_ref, TURN_IMAGE_PREFIX};
use crate::domain::history::trim_count;
use crate::domain::reduce::AgeOptions;
use crate::domain::request::{build, BuildInput, Kind, Pass};
use crate::domain::text::u16_len;
use crate::protocol::{HostError, HostResult};

/// What the extension holds, so bodies need not carry those bytes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRefsMode {
    /// Default: every image is inlined.
    Inline,
    /// Every stored image stays a reference; turn images become placeholders.
    All,
    /// Only these references stay; others are inlined. Turn images become placeholders.
    Held(BTreeSet<String>),
}

/// Validated arguments of `request.build`.
pub struct BuildArgs {
    pub kind: Kind,
    pub user_text: String,
    pub images: Option<Vec<Value>>,
    pub system_prompt: Option<String>,
    pub body_fields: Map<String, Value>,
    pub source_session: Option<String>,
    pub up_to: Option<u64>,
    pub pass: Pass,
    pub rescue: Option<String>,
    pub backfill: bool,
    pub aging: AgeOptions,
    pub image_refs: ImageRefsMode,
    /// Retry: the stored user entry at this index is the turn, the entries before it the history.
    pub retry: Option<u64>,
}

/// Resolves tokens left in a built body.
struct Resolver<'c> {
    conn: &'c Connection,
    mode: &'c ImageRefsMode,
    /// placeholder → original data URL
    turn: &'c HashMap<String, String>,
    blobs: HashMap<String, (String, Vec<u8>)>,
    left: BTreeSet<String>,
}

impl Resolver<'_> {
    fn keep_ref(&self, r: &str) -> bool {
        match self.mode {
            ImageRefsMode::Inline => false,
            ImageRefsMode::All => true,
            ImageRefsMode::Held(h) => h.contains(r),
        }
    }

    fn blob(&mut self, sha: &str) -> HostResult<(String, Vec<u8>)> {
        if let Some(b) = self.blobs.get(sha) {
            return Ok(b.clone());
        }
        let b = get_blob(self.conn, sha)?.ok_or_else(|| {
            HostError::bad_request(format!("unknown image reference keepsake-image:sha256:{sha}"))
        })?;
        self.blobs.insert(sha.to_owned(), b.clone());
        Ok(b)
    }

    /// (mime, data URL or None when the token stays) for a token.
    fn resolve_token(&mut self, token: &str) -> HostResult<Option<(String, Option<String>)>> {
        if let Some(sha) = parse_image_ref(token) {
            let (mime, bytes) = self.blob(sha)?;
            if self.keep_ref(token) {
                self.left.insert(token.to_owned());
                return Ok(Some((mime, None)));
            }
            return Ok(Some((mime.clone(), Some(canonical_data_url(&mime, &bytes)))));
        }
        if let Some(orig) = self.turn.get(token) {
            let mime = split_image_data_url(orig).map(|(m, _)| m).unwrap_or_default();
            self.left.insert(token.to_owned());
            return Ok(Some((mime, None)));
        }
        Ok(None)
    }

    fn walk(&mut self, v: &mut Value) -> HostResult<()> {
        match v {
            Value::String(s) => {
                if let Some((_, Some(url))) = self.resolve_token(s)? {
                    *s = url;
                }
            }
            Value::Array(a) => {
                for x in a {
                    self.walk(x)?;
                }
            }
            Value::Object(o) => {
                // Anthropic image source: {type: "base64", media_type, data}
                let is_b64_source =
                    o.get("type").and_then(Value::as_str) == Some("base64") && o.contains_key("data");
                if is_b64_source {
                    if let Some(token) = o.get("data").and_then(Value::as_str).map(str::to_owned) {
                        if let Some((mime, url)) = self.resolve_token(&token)? {
                            o.insert("media_type".into(), json!(mime));
                            if let Some(url) = url {
                                let data =
                                    split_image_data_url(&url).map(|(_, p)| p.to_owned()).unwrap_or_default();
                                o.insert("data".into(), json!(data));
                            }
                        }
                    }
                    return Ok(());
                }
                for (_, x) in o.iter_mut() {
                    self.walk(x)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The turn a stored user entry was: its text (string content, or its first text part) and the
/// URLs of its image parts, in order.
fn turn_of(e: &Value) -> (String, Vec<Value>) {
    match e.get("content") {
        Some(Value::String(s)) => (s.clone(), Vec::new()),
        Some(Value::Array(parts)) => {
            let text = parts.iter().find_map(crate::domain::entry::part_text).unwrap_or_default().to_owned();
            let urls = parts
                .iter()
                .filter(|p| crate::domain::entry::is_image_part(p))
                .filter_map(crate::domain::entry::image_part_url)
                .map(|u| json!(u))
                .collect();
            (text, urls)
        }
        _ => (String::new(), Vec::new()),
    }
}

impl Store {
    pub fn request_build(&mut self, a: BuildArgs) -> HostResult<Value> {
        self.read(|tx| {
            let (mut history, source) = match a.source_session.as_deref().filter(|s| !s.is_empty()) {
                Some(sid) if session_known(tx, sid)? => (session_body(tx, sid)?, "session"),
                _ => (live_entries(tx)?.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), "live"),
            };
            // Retry (docs/keeps.md "Failed turns"): the stored user entry is the turn again
            let mut user_text = a.user_text;
            let mut images = a.images;
            let mut retried = None;
            if let Some(i) = a.retry {
                let i = usize::try_from(i).unwrap_or(usize::MAX);
                let Some(e) = history.get(i) else {
                    return Err(HostError::bad_request(format!(
                        "retry {i} is not an entry of the {source} history (length {})",
                        history.len()
                    )));
                };
                if e.get("role").and_then(Value::as_str) != Some("user") {
                    return Err(HostError::bad_request("retry must name a user entry"));
                }
                let (text, urls) = turn_of(e);
                user_text = text;
                images = (!urls.is_empty()).then_some(urls);
                retried =
                    Some(json!({"index": i, "entryId": e.get("entryId").cloned().unwrap_or(Value::Null)}));
                history.truncate(i);
            }
            if let Some(up) = a.up_to {
                history.truncate(up.min(history.len() as u64) as usize);
            }
            if source == "session" {
                // a handed-off turn's session may be long: send what the live window would hold
                let chars: Vec<usize> = history.iter().map(crate::domain::entry::content_chars).collect();
                history.drain(..trim_count(&chars));
            }

            // Turn images the extension just sent never come back: with imageRefs they become
            // placeholders it fills from what it sent.
            let mut turn_map: HashMap<String, String> = HashMap::new();
            let images = images.map(|list| {
                list.into_iter()
                    .enumerate()
                    .map(|(i, v)| match v.as_str() {
                        Some(u)
                            if a.image_refs != ImageRefsMode::Inline && split_image_data_url(u).is_some() =>
                        {
                            let token = format!("{TURN_IMAGE_PREFIX}{i}");
                            turn_map.insert(token.clone(), u.to_owned());
                            json!(token)
                        }
                        _ => v,
                    })
                    .collect::<Vec<_>>()
            });
            let url_chars = |u: &str| -> usize {
                if let Some(orig) = turn_map.get(u) {
                    return u16_len(orig);
                }
                stored_url_chars(tx, u).unwrap_or(usize::MAX)
            };
            let built = build(BuildInput {
                kind: a.kind,
                user_text,
                images,
                system_prompt: a.system_prompt,
                body_fields: a.body_fields,
                history,
                pass: a.pass,
                rescue: a.rescue,
                backfill: a.backfill,
                aging: a.aging,
                url_chars: &url_chars,
            });
            let mut r = Resolver {
                conn: tx,
                mode: &a.image_refs,
                turn: &turn_map,
                blobs: HashMap::new(),
                left: BTreeSet::new(),
            };
            let mut body = built.body;
            let mut user_entry = built.user_entry;
            r.walk(&mut body)?;
            r.walk(&mut user_entry)?;
            let mut out = Map::new();
            out.insert("body".into(), body);
            out.insert("userEntry".into(), user_entry);
            out.insert("droppedImages".into(), json!(built.dropped_images));
            if let Some(r) = retried {
                out.insert("retry".into(), r);
            }
            if let Some(rep) = built.rescue {
                out.insert("rescue".into(), rep.to_json());
            }
            out.insert("source".into(), json!(source));
            if a.image_refs != ImageRefsMode::Inline {
                out.insert("imageRefs".into(), json!(r.left));
            }
            Ok(Value::Object(out))
        })
    }
}
