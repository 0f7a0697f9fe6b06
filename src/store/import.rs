//! `storage.import` (storage-model §5.7, §11.10; docs/keeps.md "Imports"): one transaction,
//! idempotent, never evicts, never replaces or rebinds to a session that existed before.

use rusqlite::params;
use serde_json::{json, Value};

use super::blobs::{self, insert_blob};
use super::bodies::{append_to_path, insert_session, write_body};
use super::connection::{Store, WriteOutcome};
use super::keys::Finish;
use super::rows::{session_body, session_exists, session_known};
use super::tx::setting_value;
use super::window::{live_len, set_window, window_start};
use crate::domain::entry::same_entry;
use crate::domain::import::{
    archived_live_id, continues, holds_run, mask_secrets, plan, ImportError, ImportFork, SettingsMode,
};
use crate::domain::ingest::{blob_from_bytes, Ingested};
use crate::domain::secrets::PROVIDERS;
use crate::domain::sessions::choose_name;
use crate::domain::settings::max_sessions;
use crate::protocol::{HostError, HostResult};
use crate::util::time::local_date;

#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    pub settings: SettingsMode,
}

impl Store {
    /// What `storage.import` of `doc` would do, changing nothing: sessions it would add or skip,
    /// whether it has a live history, and every setting it carries (secrets masked) with how it
    /// compares to the host's value, for the user to confirm before any setting is taken.
    pub fn storage_import_preview(&mut self, doc: &Value) -> HostResult<Value> {
        let plan = plan(doc).map_err(|e| match e {
            ImportError::BadRequest(m) => HostError::bad_request(m),
            ImportError::Unsupported(m) => HostError::unsupported(m),
        })?;
        let secrets = self.secrets.clone();
        self.read(|tx| {
            let mut new = 0u64;
            let mut skipped = plan.malformed_sessions as u64;
            let mut already = 0u64;
            for s in &plan.sessions {
                if session_known(tx, &s.id)? {
                    skipped += 1;
                    already += 1;
                } else {
                    new += 1;
                }
            }
            let mut settings = Vec::new();
            for (k, v) in &plan.settings {
                let mut stored = setting_value(tx, k)?;
                if k == PROVIDERS {
                    // compared with the keys, not the references the file holds
                    if let Some(p) = stored.as_mut() {
                        super::keys::resolve(&*secrets, p);
                    }
                }
                let current = match stored {
                    None => "absent",
                    Some(old) if &old == v => "same",
                    Some(_) => "different",
                };
                settings.push(json!({"key": k, "value": mask_secrets(v), "current": current}));
            }
            Ok(json!({
                "sessionsNew": new,
                "sessionsSkipped": skipped,
                "sessionsAlreadyHere": already,
                "liveEntries": plan.live.as_ref().map_or(0, Vec::len),
                "settings": settings,
                "settingsInvalid": plan.settings_invalid,
                "settingsDeviceLocal": plan.settings_device_local,
                "warnings": plan.warnings,
            }))
        })
    }

    pub fn storage_import(
        &mut self,
        doc: &Value,
        opts: ImportOptions,
        crid: Option<&str>,
    ) -> HostResult<WriteOutcome> {
        let mut plan = plan(doc).map_err(|e| match e {
            ImportError::BadRequest(m) => HostError::bad_request(m),
            ImportError::Unsupported(m) => HostError::unsupported(m),
        })?;
        // CPU work before BEGIN: data URLs → blobs for every body and the live history. The
        // plan's entries move into what is stored (not copied: a copy of a 128 MiB export's
        // bodies doubled the import's memory).
        let mut bodies: Vec<Ingested> = Vec::with_capacity(plan.sessions.len());
        // each session's other versions, their entries ingested the same way
        let mut versions: Vec<Vec<(ImportFork, Vec<Ingested>)>> = Vec::with_capacity(plan.sessions.len());
        for s in &mut plan.sessions {
            bodies.push(blobs::prepare_entries(std::mem::take(&mut s.entries))?);
            let mut forks = Vec::new();
            for f in &mut s.versions {
                let ing = f
                    .others
                    .iter_mut()
                    .map(|(_, list)| blobs::prepare_entries(std::mem::take(list)))
                    .collect::<HostResult<Vec<_>>>()?;
                forks.push((f.clone(), ing));
            }
            versions.push(forks);
        }
        let live = match plan.live.take() {
            Some(l) => Some(blobs::prepare_entries(l)?),
            None => None,
        };
        let export_blobs: Vec<_> = std::mem::take(&mut plan.images)
            .into_values()
            .map(|b| blob_from_bytes(b.mime, b.bytes))
            .collect();
        let mut warnings = plan.warnings.clone();
        // API keys of an imported `providers` go to the secret store before the transaction, as
        // `settings.set` does; a key equal to the stored one keeps its reference (a re-run
        // imports nothing)
        let doc_providers = plan.settings.iter().find(|(k, _)| k == PROVIDERS).map(|(_, v)| v);
        let prep = match (doc_providers, opts.settings) {
            (Some(p), SettingsMode::Keep | SettingsMode::Overwrite) => Some(self.prepare_keys(p, true)?),
            _ => None,
        };
        let mut providers_written = false;
        let mut dropped_refs = std::collections::BTreeSet::new();
        let was = prep.as_ref().map(|_| self.secure_delete_on());

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
            for ing in bodies.iter().chain(live.iter()).chain(versions.iter().flatten().flat_map(|(_, i)| i)) {
                blobs::store_ingested(w, ing)?;
            }
            let now = w.now;
            let mut imported = 0u64;
            let mut skipped = plan.malformed_sessions as u64;
            let mut already = 0u64;
            let mut created = std::collections::HashSet::new();
            for ((s, ing), forks) in plan.sessions.iter().zip(&bodies).zip(&versions) {
                // an id the host has (in the trash too) is skipped: the host's copy wins
                if session_known(&w.tx, &s.id)? {
                    skipped += 1;
                    already += 1;
                    continue;
                }
                insert_session(w, &s.id, &s.name, s.created_at.unwrap_or(now), s.pinned, Some(&s.extra))?;
                let stored = write_body(w, &s.id, &ing.entries)?;
                let ids = ing
                    .entries
                    .iter()
                    .zip(stored)
                    .filter_map(|(e, new)| Some((crate::domain::entry::entry_id(e)?.to_owned(), new)))
                    .collect();
                let forks: Vec<ImportFork> = forks
                    .iter()
                    .map(|(f, ing)| ImportFork {
                        others: f.others.iter().zip(ing).map(|((v, _), i)| (*v, i.entries.clone())).collect(),
                        ..f.clone()
                    })
                    .collect();
                super::versions::import(w, &s.id, &forks, ids)?;
                created.insert(s.id.clone());
                imported += 1;
            }

            // The dump's live history is kept whole (untrimmed) and never replaces anything:
            // it continues the dump's active session when this import created it, else it is
            // a session of its own (`imported-<hash>`); the live chat switches to it only when
            // the live history was empty.
            let live_status = match &live {
                None => "absent",
                Some(ing) => {
                    let h = &ing.entries;
                    let host_empty = live_len(&w.tx)? == 0;
                    let want = plan.active_session_id.clone().unwrap_or_default();
                    let mut target: Option<(String, bool)> = None; // (session, newly stored)
                    if !want.is_empty() && session_known(&w.tx, &want)? {
                        let body = session_body(&w.tx, &want)?;
                        if created.contains(&want) {
                            if let Some(j) = continues(&body, h) {
                                append_to_path(w, &want, &h[body.len() - j..])?;
                            } else if !holds_run(&body, h) {
                                // the dump history went another way than the stored body: it
                                // becomes the chosen path, the stored body another version
                                let k = body.iter().zip(h).take_while(|(a, b)| same_entry(a, b)).count();
                                super::versions::branch(w, &want, k, &h[k])?;
                                append_to_path(w, &want, &h[k + 1..])?;
                            }
                            target = Some((want.clone(), true));
                        } else if holds_run(&body, h) {
                            target = Some((want.clone(), false));
                        }
                    }
                    if target.is_none() {
                        let id = archived_live_id(h);
                        if session_known(&w.tx, &id)? {
                            target = Some((id, false));
                        } else {
                            let name = choose_name(None, h, None, &local_date());
                            insert_session(w, &id, &name, now, false, None)?;
                            write_body(w, &id, h)?;
                            imported += 1;
                            target = Some((id, true));
                        }
                    }
                    let (sid, stored) = target.unwrap_or_default();
                    if host_empty && stored && session_exists(&w.tx, &sid)? {
                        let from = window_start(&w.tx, &sid)?;
                        set_window(w, &sid, from)?;
                        "replaced"
                    } else if stored {
                        "archived"
                    } else {
                        "unchanged"
                    }
                }
            };

            let mut settings_imported = 0u64;
            let mut settings_skipped =
                (plan.settings_invalid + plan.settings_device_local.len() + plan.settings_unknown) as u64;
            for (k, v) in &plan.settings {
                let existing = setting_value(&w.tx, k)?;
                let prepared;
                let v = match (k.as_str(), &prep) {
                    (PROVIDERS, Some(p)) => match p.finish(existing.as_ref()) {
                        Finish::Value(x) => {
                            prepared = x;
                            &prepared
                        }
                        Finish::Retry => {
                            return Err(HostError::new(
                                crate::protocol::ErrorCode::Busy,
                                "the providers setting changed during the import; nothing was applied, retry",
                            ));
                        }
                    },
                    _ => v,
                };
                let write = match (&existing, opts.settings) {
                    (_, SettingsMode::None) => false,
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
                    if k == PROVIDERS {
                        providers_written = true;
                        dropped_refs = super::keys::dropped(existing.as_ref(), Some(v));
                    }
                    w.changes.settings.insert(k.clone());
                    settings_imported += 1;
                } else {
                    settings_skipped += 1;
                }
            }

            if opts.settings == SettingsMode::None && !plan.settings.is_empty() {
                warnings.push(format!(
                    "{} setting(s) in the document were not applied: an import takes settings only when asked \
                     (settings: \"keep\" or \"overwrite\")",
                    plan.settings.len()
                ));
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
            let count: i64 =
                w.tx.query_row("SELECT count(*) FROM sessions WHERE trashed_at IS NULL", [], |r| r.get(0))?;
            let over_cap = if cap == 0 { 0 } else { (count - cap as i64).max(0) };
            if over_cap > 0 {
                warnings.push(format!(
                    "{count} sessions exceed maxSessions ({cap}); the next new chat moves the oldest unpinned ones to the trash"
                ));
            }
            Ok(json!({
                "sessionsImported": imported,
                "sessionsSkipped": skipped,
                "sessionsAlreadyHere": already,
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
        if let Some(was) = was {
            self.restore_secure_delete(was);
        }
        if let Some(p) = &prep {
            // keys written for a value that was not stored (kept the host's, rolled back, replayed)
            // leave the store again; keys of cards the import replaced leave after the commit
            if r.is_err() || !providers_written {
                self.forget_keys(p.written.clone());
            }
        }
        if r.is_ok() {
            self.forget_keys(dropped_refs);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::ImportOptions;
    use crate::secrets::memory::MemoryStore;
    use crate::store::keys::tests::{cards, file_has, open, raw};

    #[test]
    fn imports_keep_keys_in_the_store_and_rerun_as_no_op() {
        use crate::domain::import::SettingsMode;
        let mem = Arc::new(MemoryStore::new());
        let (dir, mut s) = open(&mem);
        let doc = json!({"providers": cards("sk-imported-a", ""), "systemPrompt": "dark"});
        let r = s.storage_import(&doc, ImportOptions { settings: SettingsMode::Overwrite }, None).unwrap();
        assert_eq!(r.result["settingsImported"], json!(2));
        assert!(raw(&mut s)[0]["apiKey"]["keyring"].is_string());
        assert_eq!(mem.secrets(), vec!["sk-imported-a".to_string()]);
        assert!(file_has(&dir, "sk-imported-a").is_empty());
        let r = s.storage_import(&doc, ImportOptions { settings: SettingsMode::Overwrite }, None).unwrap();
        assert_eq!(r.result["settingsImported"], json!(0), "{}", r.result);
        assert_eq!(mem.accounts().len(), 1);
        let p = s.storage_import_preview(&doc).unwrap();
        let row = p["settings"].as_array().unwrap().iter().find(|x| x["key"] == "providers").unwrap().clone();
        assert_eq!(row["current"], json!("same"), "compared with the key, not the reference");
        assert!(!p.to_string().contains("sk-imported-a"), "the preview masks keys");
        // keep: the host's providers stay, the document's key is not kept anywhere
        let other = json!({"providers": cards("sk-other", "")});
        s.storage_import(&other, ImportOptions { settings: SettingsMode::Keep }, None).unwrap();
        assert_eq!(mem.secrets(), vec!["sk-imported-a".to_string()]);
    }
}
