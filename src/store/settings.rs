//! Settings (storage-model §3): explicit keys only, reserved keys refused before anything runs.

use rusqlite::{params, OptionalExtension};
use serde_json::{Map, Value};

use super::backups::check_backup_folder;
use super::connection::{Store, WriteOutcome};
use super::keys::{dropped, with_providers, Finish, Prepared};
use super::salvage::marker::content_damage;
use super::tx::setting_value;
use crate::domain::secrets::{new_plaintext_ids, plaintext_count, PROVIDERS};
use crate::domain::settings::{check_key, check_value, BACKUP_FOLDER};
use crate::protocol::{HostError, HostResult};

fn check_keys<'a>(keys: impl IntoIterator<Item = &'a String>) -> HostResult<()> {
    for k in keys {
        check_key(k).map_err(HostError::bad_request)?;
    }
    Ok(())
}

impl Store {
    pub fn settings_get(&mut self, keys: &[String]) -> HostResult<Value> {
        if keys.is_empty() {
            return Err(HostError::bad_request("keys must be a non-empty list"));
        }
        check_keys(keys)?;
        self.read(|tx| {
            let mut out = Map::new();
            let mut stmt = tx.prepare_cached("SELECT value FROM settings WHERE key = ?1")?;
            for k in keys {
                let raw: Option<String> = stmt.query_row([k], |r| r.get(0)).optional()?;
                if let Some(raw) = raw {
                    let v = serde_json::from_str(&raw)
                        .map_err(|e| content_damage(format!("stored setting {k:?} no longer parses: {e}")))?;
                    out.insert(k.clone(), v);
                }
            }
            Ok(out)
        })
        .map(|mut out| {
            // the keys behind the references, from the secret store, outside the transaction
            if let Some(p) = out.get_mut(PROVIDERS) {
                self.resolve_keys(p);
            }
            Value::Object(out)
        })
    }

    /// `settings.set`. A `providers` value's API keys go to the secret store first (`keys.rs`),
    /// then one transaction stores the map with references; keys the new value no longer
    /// references leave the store after the commit.
    pub fn settings_set(&mut self, map: &Map<String, Value>, crid: Option<&str>) -> HostResult<WriteOutcome> {
        check_keys(map.keys())?;
        for (k, v) in map {
            check_value(k, v).map_err(HostError::bad_request)?;
        }
        if let Some(v) = map.get(BACKUP_FOLDER) {
            check_backup_folder(v)?;
        }
        let Some(providers) = map.get(PROVIDERS) else {
            // without `providers` nothing asks to prepare again
            return self
                .settings_write(map, crid, None)?
                .ok_or_else(|| HostError::internal("settings.set asked to prepare keys it does not have"));
        };
        // a reference this call reused can vanish under it (another process's write dropped it):
        // then it prepares again; three times in a row means the setting is being rewritten
        // constantly, and the caller retries
        for _ in 0..3 {
            let prep = self.prepare_keys(providers, true)?;
            match self.settings_write(map, crid, Some(&prep)) {
                Ok(Some(o)) => return Ok(o),
                Ok(None) => self.forget_keys(prep.written.clone()),
                Err(e) => {
                    self.forget_keys(prep.written.clone());
                    return Err(e);
                }
            }
        }
        Err(HostError::new(
            crate::protocol::ErrorCode::Busy,
            "the providers setting kept changing during this write; nothing was applied, retry",
        ))
    }

    /// One `settings.set` transaction; `None` when `prep` must be prepared again.
    fn settings_write(
        &mut self,
        map: &Map<String, Value>,
        crid: Option<&str>,
        prep: Option<&Prepared>,
    ) -> HostResult<Option<WriteOutcome>> {
        let mut retry = false;
        let mut ran = false;
        let store_name = self.secrets.name();
        let mut dropped_refs = Default::default();
        let mut had_text = false;
        let was = prep.map(|_| self.secure_delete_on());
        let r = self.write("settings.set", crid, |w| {
            ran = true;
            let mut providers = None;
            let mut in_file = Vec::new();
            if let Some(prep) = prep {
                let stored = setting_value(&w.tx, PROVIDERS)?;
                match prep.finish(stored.as_ref()) {
                    Finish::Retry => {
                        retry = true;
                        return Err(HostError::internal("a reused API key reference was dropped meanwhile"));
                    }
                    Finish::Value(v) => {
                        dropped_refs = dropped(stored.as_ref(), Some(&v));
                        in_file = new_plaintext_ids(stored.as_ref(), &v);
                        had_text = stored.as_ref().is_some_and(|s| plaintext_count(s) > 0);
                        providers = Some(v);
                    }
                }
            }
            for (k, v) in with_providers(map, providers.as_ref()) {
                let text = v.to_string();
                let n = w.tx.execute(
                    "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
                     WHERE settings.value IS NOT excluded.value",
                    params![k, text, w.now],
                )?;
                if n > 0 {
                    w.changes.settings.insert(k.clone());
                }
            }
            if let Some(p) = &providers {
                had_text &= plaintext_count(p) == 0;
            }
            let mut r = Map::new();
            // a new or changed key kept as text because no secret store is reachable: said in
            // the reply of the write itself, so Options can say so at Save (PROTOCOL.md "API keys")
            if !in_file.is_empty() {
                let reason = prep.and_then(|p| p.unreachable.clone());
                r.insert(
                    "keysInFile".into(),
                    serde_json::json!({"ids": in_file, "secretStore": store_name, "reason": reason}),
                );
            }
            // a lower cap moves the oldest unpinned sessions to the trash at once (the panel
            // asks first: sessions.evictionPlan); the reply lists them so they can be restored
            if map.contains_key("maxSessions") {
                let evicted = super::trash::evict(w, "")?;
                r.insert("evicted".into(), Value::from(evicted));
            }
            Ok(Value::Object(r))
        });
        if let Some(was) = was {
            self.restore_secure_delete(was);
        }
        match r {
            Err(_) if retry => Ok(None),
            Err(e) => Err(e),
            Ok(o) => {
                if let Some(prep) = prep {
                    if !ran {
                        // a replayed clientRequestId: the recorded write stands, this call's keys go
                        self.forget_keys(prep.written.clone());
                    }
                }
                self.forget_keys(dropped_refs);
                if had_text {
                    self.scrub_wal();
                }
                Ok(Some(o))
            }
        }
    }

    /// Which sessions a `maxSessions` cap of `cap` would move to the trash now, oldest first
    /// (pinned sessions and the live chat's are never evicted).
    pub fn sessions_eviction_plan(&mut self, cap: u64) -> HostResult<Value> {
        self.read(|tx| {
            let ids = super::trash::eviction_plan(tx, cap, "")?;
            let mut rows = Vec::new();
            for id in &ids {
                if let Some(r) = super::rows::session_row(tx, id)? {
                    rows.push(serde_json::to_value(r).map_err(|e| HostError::internal(e.to_string()))?);
                }
            }
            Ok(serde_json::json!({"evict": rows}))
        })
    }

    pub fn settings_remove(&mut self, keys: &[String], crid: Option<&str>) -> HostResult<WriteOutcome> {
        if keys.is_empty() {
            return Err(HostError::bad_request("keys must be a non-empty list"));
        }
        check_keys(keys)?;
        let providers = keys.iter().any(|k| k == PROVIDERS);
        let was = providers.then(|| self.secure_delete_on());
        let mut dropped_refs = Default::default();
        let r = self.write("settings.remove", crid, |w| {
            if providers {
                dropped_refs = dropped(setting_value(&w.tx, PROVIDERS)?.as_ref(), None);
            }
            for k in keys {
                if w.tx.execute("DELETE FROM settings WHERE key = ?1", [k])? > 0 {
                    w.changes.settings.insert(k.clone());
                }
            }
            Ok(Value::Object(Map::new()))
        });
        if let Some(was) = was {
            self.restore_secure_delete(was);
        }
        if r.is_ok() {
            // after the commit: the keys of the removed cards leave the secret store
            self.forget_keys(dropped_refs);
        }
        r
    }
}
