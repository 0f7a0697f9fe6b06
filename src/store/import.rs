//! `storage.import` (storage-model §5.7, §11.10): one transaction, idempotent, never evicts.

use rusqlite::params;
use serde_json::{json, Value};

use super::blobs::{self, insert_blob};
use super::history::{live_entries, replace_all, set_binding, unbind_if_empty};
use super::sessions::{insert_session, session_exists, write_body};
use super::{setting_value, Store, WriteOutcome};
use crate::domain::entry::content_chars;
use crate::domain::history::trim_count;
use crate::domain::import::{archived_live_id, plan, ImportError, SettingsMode};
use crate::domain::ingest::{blob_from_bytes, Ingested};
use crate::domain::sessions::choose_name;
use crate::domain::settings::max_sessions;
use crate::protocol::{HostError, HostResult};
use crate::util::time::local_date;

#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    pub settings: SettingsMode,
}

impl Store {
    pub fn storage_import(
        &mut self,
        doc: &Value,
        opts: ImportOptions,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let plan = plan(doc).map_err(|e| match e {
            ImportError::BadRequest(m) => HostError::bad_request(m),
            ImportError::Unsupported(m) => HostError::unsupported(m),
        })?;
        // CPU work before BEGIN: data URLs → blobs for every body and the live history.
        let mut bodies: Vec<Ingested> = Vec::with_capacity(plan.sessions.len());
        for s in &plan.sessions {
            bodies.push(blobs::prepare_entries(s.entries.clone())?);
        }
        let live = match &plan.live {
            Some(l) => Some(blobs::prepare_entries(l.clone())?),
            None => None,
        };
        let export_blobs: Vec<_> =
            plan.images.values().map(|b| blob_from_bytes(b.mime.clone(), b.bytes.clone())).collect();
        let mut warnings = plan.warnings.clone();

        // Every imported session adds postings all over the search index's key space: a cache
        // that holds the index keeps each page from being written to the WAL again and again
        // (1,000 sessions × 100K chars: 61 s with the default cache). Back to normal after.
        let big = plan.sessions.len() > 50;
        if big {
            self.conn.execute_batch("PRAGMA cache_size=-262144;")?;
        }
        let r = self.write("storage.import", crid, |w| {
            for b in &export_blobs {
                insert_blob(w, b, false)?;
            }
            for ing in bodies.iter().chain(live.iter()) {
                blobs::store_ingested(w, ing)?;
            }
            let now = w.now;
            let mut imported = 0u64;
            let mut skipped = plan.malformed_sessions as u64;
            for (s, ing) in plan.sessions.iter().zip(&bodies) {
                if session_exists(&w.tx, &s.id)? {
                    skipped += 1;
                    continue;
                }
                insert_session(w, &s.id, &s.name, s.created_at.unwrap_or(now), s.pinned, Some(&s.extra))?;
                write_body(w, &s.id, &ing.entries)?;
                imported += 1;
            }

            let live_status = match &live {
                None => "absent",
                Some(ing) => {
                    let chars: Vec<usize> = ing.entries.iter().map(content_chars).collect();
                    let trimmed = &ing.entries[trim_count(&chars)..];
                    let host: Vec<Value> = live_entries(&w.tx)?.into_iter().map(|(_, e)| e).collect();
                    if host.is_empty() {
                        replace_all(w, trimmed)?;
                        let want = plan.active_session_id.clone().unwrap_or_default();
                        let bind = if !want.is_empty() && session_exists(&w.tx, &want)? { want } else { String::new() };
                        set_binding(w, &bind)?;
                        unbind_if_empty(w)?;
                        "replaced"
                    } else if host == trimmed {
                        "unchanged"
                    } else {
                        let id = archived_live_id(&ing.entries);
                        if session_exists(&w.tx, &id)? {
                            "unchanged"
                        } else {
                            let name = choose_name(None, &ing.entries, None, &local_date());
                            insert_session(w, &id, &name, now, false, None)?;
                            write_body(w, &id, &ing.entries)?;
                            imported += 1;
                            "archived"
                        }
                    }
                }
            };

            let mut settings_imported = 0u64;
            let mut settings_skipped = plan.settings_invalid as u64;
            for (k, v) in &plan.settings {
                let existing = setting_value(&w.tx, k)?;
                let write = match (&existing, opts.settings) {
                    (None, _) => true,
                    (Some(old), SettingsMode::Overwrite) => old != v,
                    (Some(_), SettingsMode::Keep) => false,
                };
                if write {
                    w.tx.execute(
                        "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
                         ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                        params![k, v.to_string(), now],
                    )?;
                    w.changes.settings.insert(k.clone());
                    settings_imported += 1;
                } else {
                    settings_skipped += 1;
                }
            }

            let mut images_stored = 0u64;
            for sha in &w.new_blobs {
                let used: bool = w.tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM image_refs WHERE sha256 = ?1)",
                    [sha],
                    |r| r.get(0),
                )?;
                images_stored += used as u64;
            }
            let cap = max_sessions(setting_value(&w.tx, "maxSessions")?.as_ref());
            let count: i64 = w.tx.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))?;
            let over_cap = if cap == 0 { 0 } else { (count - cap as i64).max(0) };
            if over_cap > 0 {
                warnings.push(format!(
                    "{count} sessions exceed maxSessions ({cap}); the next archiving save evicts the oldest unpinned ones"
                ));
            }
            Ok(json!({
                "sessionsImported": imported,
                "sessionsSkipped": skipped,
                "settingsImported": settings_imported,
                "settingsSkipped": settings_skipped,
                "live": live_status,
                "imagesStored": images_stored,
                "overCap": over_cap,
                "warnings": warnings,
            }))
        });
        if big {
            self.conn.execute_batch("PRAGMA cache_size=-16384;")?;
        }
        r
    }
}
