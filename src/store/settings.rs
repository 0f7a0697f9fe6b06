//! Settings (storage-model §3): explicit keys only, reserved keys refused before anything runs.

use rusqlite::{params, OptionalExtension};
use serde_json::{Map, Value};

use super::{Store, WriteOutcome};
use crate::domain::settings::{check_key, check_value};
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
                    let v = serde_json::from_str(&raw).map_err(|e| {
                        super::salvage::content_damage(format!("stored setting {k:?} no longer parses: {e}"))
                    })?;
                    out.insert(k.clone(), v);
                }
            }
            Ok(Value::Object(out))
        })
    }

    pub fn settings_set(&mut self, map: &Map<String, Value>, crid: Option<&str>) -> HostResult<WriteOutcome> {
        check_keys(map.keys())?;
        for (k, v) in map {
            check_value(k, v).map_err(HostError::bad_request)?;
        }
        self.write("settings.set", crid, |w| {
            for (k, v) in map {
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
            let mut r = Map::new();
            // a lower cap moves the oldest unpinned sessions to the trash at once (the panel
            // asks first: sessions.evictionPlan); the reply lists them so they can be restored
            if map.contains_key("maxSessions") {
                let evicted = super::sessions::evict(w, "")?;
                r.insert("evicted".into(), Value::from(evicted));
            }
            Ok(Value::Object(r))
        })
    }

    /// Which sessions a `maxSessions` cap of `cap` would move to the trash now, oldest first
    /// (pinned sessions and the live chat's are never evicted).
    pub fn sessions_eviction_plan(&mut self, cap: u64) -> HostResult<Value> {
        self.read(|tx| {
            let ids = super::sessions::eviction_plan(tx, cap, "")?;
            let mut rows = Vec::new();
            for id in &ids {
                if let Some(r) = super::sessions::session_row(tx, id)? {
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
        self.write("settings.remove", crid, |w| {
            for k in keys {
                if w.tx.execute("DELETE FROM settings WHERE key = ?1", [k])? > 0 {
                    w.changes.settings.insert(k.clone());
                }
            }
            Ok(Value::Object(Map::new()))
        })
    }
}
