//! Provider API keys at rest (PROTOCOL.md "API keys"; shapes and rules in `domain::secrets`):
//! the `providers` setting keeps references into the operating system's secret store
//! (`crate::secrets`) instead of the keys, wherever a store is reachable.
//!
//! Nothing can be lost on the way: a new key is written to the secret store under a new account
//! **before** the transaction that stores its reference (a failure there leaves the old state and
//! removes what was written); accounts the committed value no longer references are removed from
//! the store **after** the commit. Keys still in the file move to the store at the first host
//! start that reaches one, each only once the store gives it back.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::connection::Store;
use super::tx::setting_value;
use crate::domain::secrets::{
    self, card_id, key_of, label_for, plaintext_count, reference, refs, stored_key_for, Key, API_KEY,
    PROVIDERS, UNAVAILABLE,
};
use crate::protocol::{HostError, HostResult};
use crate::secrets::SecretStore;

/// A `providers` value made ready for storing: new keys already in the secret store, what is
/// left to decide against the value stored at commit time.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    value: Value,
    /// Accounts this call wrote to the store: removed again unless the commit references them.
    pub(crate) written: Vec<String>,
    /// Cards sent back with [`UNAVAILABLE`] and no key: they keep the stored key of their id.
    keep: Vec<usize>,
    /// Cards whose key equals the key behind their stored reference: the reference stays, if the
    /// stored value still has it at commit time (else another write dropped it: start over).
    reused: Vec<(usize, String)>,
    /// References the caller sent itself: kept only when the stored value has them (a document
    /// cannot point at another database's secrets).
    sent: Vec<(usize, String)>,
    /// Why no secret store was reachable, when keys sent as text stay text for that reason.
    pub(crate) unreachable: Option<String>,
}

/// What [`Prepared::finish`] decided.
pub(crate) enum Finish {
    Value(Value),
    /// A reused reference is gone from the stored value: prepare again.
    Retry,
}

impl Prepared {
    /// The value to store, given the value stored now (inside the write transaction).
    pub(crate) fn finish(&self, stored: Option<&Value>) -> Finish {
        let have = stored.map(refs).unwrap_or_default();
        if self.reused.iter().any(|(_, a)| !have.contains(a)) {
            return Finish::Retry;
        }
        let mut value = self.value.clone();
        if let Some(list) = value.as_array_mut() {
            for &i in &self.keep {
                if let Some(Value::Object(card)) = list.get_mut(i) {
                    let id = card.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let k =
                        stored_key_for(stored, &id).cloned().unwrap_or_else(|| Value::String(String::new()));
                    card.insert(API_KEY.into(), k);
                }
            }
            for (i, a) in &self.sent {
                if !have.contains(a) {
                    if let Some(Value::Object(card)) = list.get_mut(*i) {
                        card.insert(API_KEY.into(), Value::String(String::new()));
                    }
                }
            }
        }
        Finish::Value(value)
    }
}

/// Put the keys behind a value's references in place (what `settings.get` returns): a key the
/// store cannot give back becomes `apiKey: ""` with [`UNAVAILABLE`] saying why.
pub(crate) fn resolve(store: &dyn SecretStore, providers: &mut Value) {
    let Some(list) = providers.as_array_mut() else { return };
    for card in list.iter_mut() {
        let Some(obj) = card.as_object() else { continue };
        let account = match key_of(card) {
            Key::Ref(a) => a.to_owned(),
            _ => continue,
        };
        let resolved = match store.get(&account) {
            Ok(Some(k)) => {
                let mut c = obj.clone();
                c.insert(API_KEY.into(), Value::String(k));
                c
            }
            Ok(None) => secrets::unavailable_card(
                obj,
                &format!("the key is no longer in {} (removed there?); enter it again", store.name()),
            ),
            Err(e) => {
                tracing::warn!(error = %e, "an API key could not be read from the secret store");
                secrets::unavailable_card(obj, &format!("{} cannot be read now: {e}", store.name()))
            }
        };
        *card = Value::Object(resolved);
    }
}

/// Remove accounts from the store; a failure is only logged (the item is orphaned in the secret
/// store, never in a file).
pub(crate) fn forget(store: &dyn SecretStore, accounts: impl IntoIterator<Item = String>) {
    for a in accounts {
        if let Err(e) = store.delete(&a) {
            tracing::warn!(account = %a, error = %e, "could not remove an API key from the secret store");
        }
    }
}

/// Accounts the old value referenced and the new one does not.
pub(crate) fn dropped(old: Option<&Value>, new: Option<&Value>) -> BTreeSet<String> {
    let old = old.map(refs).unwrap_or_default();
    let new = new.map(refs).unwrap_or_default();
    old.difference(&new).cloned().collect()
}

/// Write `secret` under `account`, then read it back from the store and compare: only a key the
/// store gives back is ever referenced from the file (API keys here, the sync key in `sync/key.rs`).
pub(crate) fn put_verified(
    store: &dyn SecretStore,
    account: &str,
    label: &str,
    secret: &str,
) -> Result<(), String> {
    store.put(account, label, secret)?;
    match store.get(account) {
        Ok(Some(back)) if back == secret => Ok(()),
        Ok(_) => Err(format!("{} did not give the key back after storing it", store.name())),
        Err(e) => Err(e),
    }
}

fn new_account() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// What one move of keys from the file into the secret store did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// Keys now only in the secret store.
    pub moved: usize,
    /// Keys still in the file.
    pub left: usize,
    /// Why keys were left, if any were.
    pub reason: Option<String>,
}

/// Where the API keys are, for `inspect`, `host.status` and `doctor`.
#[derive(Debug, Clone)]
pub struct ApiKeys {
    /// Keys stored as text in the database file.
    pub in_file: usize,
    /// Keys the database references in the secret store.
    pub in_store: usize,
    /// Of those, how many the store does not give back (`doctor` looks; `None` = not looked).
    pub missing: Option<usize>,
    /// The store's name ("the Secret Service (D-Bus)").
    pub store: String,
    /// `Err(why)` when no secret store is reachable.
    pub reachable: Result<(), String>,
}

/// How serious an [`ApiKeys`] finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Ok,
    Info,
    Warn,
    Fail,
}

impl ApiKeys {
    /// One sentence for a person, and how serious it is.
    pub fn summary(&self) -> (Severity, String) {
        let n = |k: usize| if k == 1 { "1 API key".to_owned() } else { format!("{k} API keys") };
        match &self.reachable {
            Err(why) if self.in_file > 0 => (
                Severity::Warn,
                format!(
                    "API keys are stored in the database file: no secret store reachable ({why}). {} in plain text \
                     there, and in every backup and damaged copy of it; the first host start that reaches a secret \
                     store moves them",
                    n(self.in_file)
                ),
            ),
            Err(why) if self.in_store > 0 => (
                Severity::Warn,
                format!(
                    "{} kept in {}, which is not reachable from here ({why}): chats cannot use them until it is \
                     (the browser starts keepsake-host in your desktop session, where it usually is)",
                    n(self.in_store),
                    self.store
                ),
            ),
            Err(why) => (
                Severity::Info,
                format!(
                    "no secret store reachable ({why}): API keys entered now would be stored in the database file"
                ),
            ),
            Ok(()) if self.in_file > 0 => (
                Severity::Warn,
                format!(
                    "{} still stored in the database file; the next host start moves them to {}",
                    n(self.in_file),
                    self.store
                ),
            ),
            Ok(()) if self.missing.unwrap_or(0) > 0 => (
                Severity::Fail,
                format!(
                    "{} of the {} referenced by the database {} missing from {}: enter them again in Options",
                    self.missing.unwrap_or(0),
                    n(self.in_store),
                    if self.missing == Some(1) { "is" } else { "are" },
                    self.store
                ),
            ),
            Ok(()) if self.in_store > 0 => (
                Severity::Ok,
                format!(
                    "{} kept in {}; the database file holds references only",
                    n(self.in_store),
                    self.store
                ),
            ),
            Ok(()) => (Severity::Ok, format!("no API keys stored; new ones go to {}", self.store)),
        }
    }

    pub fn to_json(&self) -> Value {
        let (sev, text) = self.summary();
        json!({
            "inFile": self.in_file,
            "inSecretStore": self.in_store,
            "missing": self.missing,
            "secretStore": {
                "name": self.store,
                "reachable": self.reachable.is_ok(),
                "reason": self.reachable.as_ref().err(),
            },
            "status": match sev { Severity::Ok => "ok", Severity::Info => "info", Severity::Warn => "warn", Severity::Fail => "fail" },
            "summary": text,
        })
    }
}

impl Store {
    /// The stored `providers` value, as the file holds it.
    pub(crate) fn stored_providers(&mut self) -> HostResult<Option<Value>> {
        self.read(|tx| setting_value(tx, PROVIDERS))
    }

    /// Make `providers` ready for storing (before the write transaction): every key sent as text
    /// goes to the secret store under a new account, unless it is the key behind the card's stored
    /// reference (`reuse`) or no store is reachable (then it stays text, as before).
    pub(crate) fn prepare_keys(&mut self, providers: &Value, reuse: bool) -> HostResult<Prepared> {
        let mut prep = Prepared { value: providers.clone(), ..Default::default() };
        let Some(list) = prep.value.as_array_mut() else { return Ok(prep) };
        let stored = if reuse { self.stored_providers()? } else { None };
        let db = self.path().display().to_string();
        let store = self.secrets.clone();
        let mut reachable: Option<Result<(), String>> = None;
        for (i, card) in list.iter_mut().enumerate() {
            let Some(obj) = card.as_object_mut() else { continue };
            let marked = obj.remove(UNAVAILABLE).is_some();
            let view = Value::Object(obj.clone());
            match key_of(&view) {
                Key::None => {
                    if marked {
                        prep.keep.push(i);
                    }
                }
                Key::Ref(a) => prep.sent.push((i, a.to_owned())),
                Key::Plain(k) => {
                    let id = card_id(&view).unwrap_or_default();
                    if let Some(a) = stored_key_for(stored.as_ref(), id).and_then(secrets::ref_account) {
                        if store.get(a).ok().flatten().as_deref() == Some(k) {
                            prep.reused.push((i, a.to_owned()));
                            obj.insert(API_KEY.into(), reference(a));
                            continue;
                        }
                    }
                    if let Err(why) = reachable.get_or_insert_with(|| store.probe()) {
                        // no store: the key stays in the file, as before (settings.set says so)
                        prep.unreachable = Some(why.clone());
                        continue;
                    }
                    let account = new_account();
                    if let Err(e) = put_verified(&*store, &account, &label_for(&view, &db), k) {
                        forget(&*store, std::mem::take(&mut prep.written));
                        forget(&*store, [account]);
                        let name = view.get("name").and_then(Value::as_str).unwrap_or(id);
                        return Err(HostError::internal(format!(
                            "could not keep the API key of \u{201c}{name}\u{201d} in {}: {e}. Nothing was saved; \
                             unlock the secret store and try again (or start keepsake-host with {}=off to keep \
                             keys in the database file)",
                            store.name(),
                            crate::secrets::ENV
                        )));
                    }
                    prep.written.push(account.clone());
                    obj.insert(API_KEY.into(), reference(&account));
                }
            }
        }
        Ok(prep)
    }

    /// `settings.get`'s view of a stored `providers` value: keys in place of references.
    pub(crate) fn resolve_keys(&self, providers: &mut Value) {
        resolve(&*self.secrets, providers);
    }

    /// Remove accounts from the secret store (after a commit that no longer references them).
    pub(crate) fn forget_keys(&self, accounts: impl IntoIterator<Item = String>) {
        forget(&*self.secrets, accounts);
    }

    /// Turn SQLite's `secure_delete` on for the writes that replace or remove keys held as text,
    /// so the old text is overwritten in the file instead of left in free space; returns the
    /// previous setting for [`Store::restore_secure_delete`].
    pub(crate) fn secure_delete_on(&self) -> Option<i64> {
        let was: Option<i64> = self.conn().query_row("PRAGMA secure_delete", [], |r| r.get(0)).ok();
        let _ = self.conn().query_row("PRAGMA secure_delete=ON", [], |_| Ok(()));
        was
    }

    pub(crate) fn restore_secure_delete(&self, was: Option<i64>) {
        if let Some(v) = was {
            let _ = self.conn().query_row(&format!("PRAGMA secure_delete={v}"), [], |_| Ok(()));
        }
    }

    /// After keys held as text left the file: start the -wal over so its frames (which may still
    /// hold the old text) go. Best effort: a reader elsewhere keeps the frames until its next
    /// checkpoint.
    pub(crate) fn scrub_wal(&self) {
        if let Err(e) = self.conn().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            tracing::debug!(error = %e, "wal checkpoint (truncate) after moving keys failed");
        }
    }

    /// Move the API keys still held as text in the file to the secret store (the first host start
    /// that reaches one; `server::serve` runs it after the first reply). Each key is written under
    /// a new account and read back; only keys the store gave back are replaced by references, in
    /// one transaction that checks each card still holds the same key. A failure midway leaves the
    /// remaining keys in the file, to be moved by a later start. No `changed` event: what
    /// `settings.get` returns is the same.
    pub fn move_keys_to_secret_store(&mut self) -> HostResult<MoveReport> {
        let Some(stored) = self.stored_providers()? else { return Ok(MoveReport::default()) };
        let plain = plaintext_count(&stored);
        if plain == 0 {
            return Ok(MoveReport::default());
        }
        let store = self.secrets.clone();
        if let Err(why) = store.probe() {
            return Ok(MoveReport { moved: 0, left: plain, reason: Some(why) });
        }
        if self.damage().is_some() {
            return Ok(MoveReport { moved: 0, left: plain, reason: Some("the database is damaged".into()) });
        }
        let db = self.path().display().to_string();
        // (card id, key, account) for every key the store confirmed
        let mut confirmed: Vec<(String, String, String)> = Vec::new();
        let mut reason = None;
        for card in secrets::cards(&stored) {
            let (Key::Plain(k), Some(id)) = (key_of(card), card_id(card)) else { continue };
            let account = new_account();
            let r = put_verified(&*store, &account, &label_for(card, &db), k);
            match r {
                Ok(()) => confirmed.push((id.to_owned(), k.to_owned(), account)),
                Err(e) => {
                    forget(&*store, [account]);
                    reason = Some(e);
                    break;
                }
            }
        }
        if confirmed.is_empty() {
            return Ok(MoveReport { moved: 0, left: plain, reason });
        }
        let was = self.secure_delete_on();
        let mut used: BTreeSet<String> = BTreeSet::new();
        let mut left = plain;
        let r = self.write("secrets.move", None, |w| {
            let Some(mut now) = setting_value(&w.tx, PROVIDERS)? else { return Ok(Value::Null) };
            if let Some(list) = now.as_array_mut() {
                for card in list.iter_mut() {
                    let hit = confirmed.iter().find(|(id, k, _)| {
                        card_id(card) == Some(id.as_str()) && key_of(card) == Key::Plain(k.as_str())
                    });
                    if let (Some((_, _, account)), Some(obj)) = (hit, card.as_object_mut()) {
                        obj.insert(API_KEY.into(), reference(account));
                        used.insert(account.clone());
                    }
                }
            }
            left = plaintext_count(&now);
            if !used.is_empty() {
                w.tx.execute(
                    "UPDATE settings SET value = ?1, updated_at = ?2 WHERE key = ?3",
                    rusqlite::params![now.to_string(), w.now, PROVIDERS],
                )?;
            }
            Ok(Value::Null)
        });
        self.restore_secure_delete(was);
        let unused: Vec<String> =
            confirmed.iter().map(|c| c.2.clone()).filter(|a| r.is_err() || !used.contains(a)).collect();
        forget(&*store, unused);
        r?;
        if !used.is_empty() {
            self.scrub_wal();
        }
        Ok(MoveReport { moved: used.len(), left, reason })
    }

    /// Where the API keys are. `verify`: also read each referenced key back (`doctor`).
    pub fn api_keys(&mut self, verify: bool) -> HostResult<ApiKeys> {
        let stored = self.stored_providers()?;
        let in_file = stored.as_ref().map_or(0, plaintext_count);
        let accounts = stored.as_ref().map(refs).unwrap_or_default();
        let reachable = self.secrets.probe();
        let missing = (verify && reachable.is_ok())
            .then(|| accounts.iter().filter(|a| !matches!(self.secrets.get(a), Ok(Some(_)))).count());
        Ok(ApiKeys { in_file, in_store: accounts.len(), missing, store: self.secrets.name(), reachable })
    }
}

/// The settings a write stores, with `providers` (if any) replaced by `providers`.
pub(crate) fn with_providers(map: &Map<String, Value>, providers: Option<&Value>) -> Vec<(String, Value)> {
    map.iter()
        .map(|(k, v)| match (k.as_str(), providers) {
            (PROVIDERS, Some(p)) => (k.clone(), p.clone()),
            _ => (k.clone(), v.clone()),
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use serde_json::{json, Map, Value};

    use crate::secrets::memory::MemoryStore;
    use crate::store::connection::Store;

    pub(in crate::store) fn open(mem: &Arc<MemoryStore>) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("keepsake.db")).unwrap();
        s.set_secret_store(mem.clone());
        (dir, s)
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    pub(in crate::store) fn raw(s: &mut Store) -> Value {
        s.stored_providers().unwrap().unwrap_or(Value::Null)
    }

    fn get(s: &mut Store) -> Value {
        s.settings_get(&["providers".to_string()]).unwrap()["providers"].clone()
    }

    pub(in crate::store) fn file_has(dir: &tempfile::TempDir, needle: &str) -> Vec<String> {
        let mut hits = Vec::new();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap_or_default();
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                hits.push(p.display().to_string());
            }
        }
        hits
    }

    pub(in crate::store) fn cards(a: &str, b: &str) -> Value {
        json!([
            {"id": "a", "name": "A", "kind": "chat", "baseUrl": "https://a.example", "apiKey": a, "model": "m"},
            {"id": "b", "name": "B", "kind": "chat", "baseUrl": "https://b.example", "apiKey": b, "model": "m"}
        ])
    }

    #[test]
    fn keys_go_to_the_store_and_come_back_as_they_were_sent() {
        let mem = Arc::new(MemoryStore::new());
        let (dir, mut s) = open(&mem);
        let sent = cards("sk-unit-aaaa-1111", "");
        let r = s.settings_set(&map(json!({"providers": sent})), None).unwrap();
        assert_eq!(r.result.get("keysInFile"), None, "a key in the secret store: nothing to say at Save");
        assert_eq!(get(&mut s), sent, "settings.get returns what was sent");
        let stored = raw(&mut s);
        assert!(stored[0]["apiKey"]["keyring"].is_string(), "{stored}");
        assert_eq!(stored[1]["apiKey"], json!(""), "no key, no reference");
        assert_eq!(mem.secrets(), vec!["sk-unit-aaaa-1111".to_string()]);
        assert!(file_has(&dir, "sk-unit-aaaa-1111").is_empty());
        // the same list again keeps the same reference and writes nothing new
        let before = mem.accounts();
        s.settings_set(&map(json!({"providers": sent})), None).unwrap();
        assert_eq!(raw(&mut s), stored);
        assert_eq!(mem.accounts(), before);
        // a new key gets a new account; the old one leaves the store after the commit
        s.settings_set(&map(json!({"providers": cards("sk-unit-aaaa-2222", "sk-unit-bbbb")})), None).unwrap();
        assert_eq!(mem.secrets().len(), 2);
        assert!(!mem.accounts().contains(&before[0]));
        assert_eq!(get(&mut s), cards("sk-unit-aaaa-2222", "sk-unit-bbbb"));
        // removing a card removes its key; removing the setting removes every key
        let only_b = json!([cards("", "sk-unit-bbbb")[1].clone()]);
        s.settings_set(&map(json!({"providers": only_b})), None).unwrap();
        assert_eq!(mem.secrets(), vec!["sk-unit-bbbb".to_string()]);
        s.settings_remove(&["providers".to_string()], None).unwrap();
        assert!(mem.accounts().is_empty());
    }

    #[test]
    fn a_store_that_refuses_a_write_leaves_the_old_state() {
        let mem = Arc::new(MemoryStore::new());
        let (dir, mut s) = open(&mem);
        s.settings_set(&map(json!({"providers": cards("sk-old-a", "")})), None).unwrap();
        let before = raw(&mut s);
        let accounts = mem.accounts();
        // the first new key is written, the second refused: nothing is committed, and the
        // first is removed again
        mem.puts_left.store(1, Ordering::SeqCst);
        let e = s.settings_set(&map(json!({"providers": cards("sk-new-a", "sk-new-b")})), None).unwrap_err();
        assert!(e.message.contains("Nothing was saved"), "{}", e.message);
        assert_eq!(raw(&mut s), before);
        assert_eq!(mem.accounts(), accounts, "what the failed call wrote was taken back");
        assert_eq!(get(&mut s), cards("sk-old-a", ""));
        assert!(file_has(&dir, "sk-new").is_empty());
    }

    #[test]
    fn a_store_that_does_not_give_a_new_key_back_saves_nothing() {
        let mem = Arc::new(MemoryStore::new());
        let (dir, mut s) = open(&mem);
        s.settings_set(&map(json!({"providers": cards("sk-kept-a", "")})), None).unwrap();
        let before = raw(&mut s);
        // the store says yes to the write but keeps nothing: no reference to nothing is stored
        mem.lose_writes.store(true, Ordering::SeqCst);
        let e =
            s.settings_set(&map(json!({"providers": cards("sk-kept-a", "sk-lost-b")})), None).unwrap_err();
        assert!(
            e.message.contains("did not give the key back") && e.message.contains("Nothing was saved"),
            "{}",
            e.message
        );
        assert_eq!(raw(&mut s), before);
        assert_eq!(get(&mut s), cards("sk-kept-a", ""));
        assert!(file_has(&dir, "sk-lost-b").is_empty());
    }

    #[test]
    fn a_write_that_does_not_commit_takes_its_keys_back() {
        let mem = Arc::new(MemoryStore::new());
        let (_dir, mut s) = open(&mem);
        s.settings_set(&map(json!({"theme": "dark"})), Some("crid-1")).unwrap();
        // the same clientRequestId for settings.set again: the recorded write stands
        s.settings_set(&map(json!({"providers": cards("sk-replayed", "")})), Some("crid-1")).unwrap();
        assert!(mem.accounts().is_empty(), "a replayed write keeps no key");
        assert_eq!(raw(&mut s), Value::Null);
        // an id used by another operation: conflict, nothing written anywhere
        s.settings_remove(&["theme".to_string()], Some("crid-2")).unwrap();
        let e =
            s.settings_set(&map(json!({"providers": cards("sk-conflict", "")})), Some("crid-2")).unwrap_err();
        assert_eq!(e.code, crate::protocol::ErrorCode::Conflict);
        assert!(mem.accounts().is_empty());
    }

    #[test]
    fn without_a_store_keys_stay_in_the_file_and_move_at_the_first_start_that_has_one() {
        let mem = Arc::new(MemoryStore::new());
        *mem.down.lock().unwrap() = Some("no D-Bus session bus (test)".into());
        let (dir, mut s) = open(&mem);
        let r =
            s.settings_set(&map(json!({"providers": cards("sk-file-aaaa", "sk-file-bbbb")})), None).unwrap();
        assert_eq!(raw(&mut s), cards("sk-file-aaaa", "sk-file-bbbb"), "kept as text, as before");
        // the reply of the write says which keys went to the file, and why
        assert_eq!(
            r.result["keysInFile"],
            json!({"ids": ["a", "b"], "secretStore": "the test store", "reason": "no D-Bus session bus (test)"})
        );
        // saved again unchanged: nothing new went to the file; a changed key is named again
        let r =
            s.settings_set(&map(json!({"providers": cards("sk-file-aaaa", "sk-file-bbbb")})), None).unwrap();
        assert_eq!(r.result.get("keysInFile"), None, "{}", r.result);
        let r =
            s.settings_set(&map(json!({"providers": cards("sk-file-aaaa", "sk-file-b2")})), None).unwrap();
        assert_eq!(r.result["keysInFile"]["ids"], json!(["b"]));
        s.settings_set(&map(json!({"providers": cards("sk-file-aaaa", "sk-file-bbbb")})), None).unwrap();
        let k = s.api_keys(true).unwrap();
        let (_, text) = k.summary();
        assert!(
            text.starts_with("API keys are stored in the database file: no secret store reachable (no D-Bus"),
            "{text}"
        );
        assert_eq!(s.move_keys_to_secret_store().unwrap().left, 2);

        // the store comes back but fails midway: the first key moves, the second stays in the
        // file (nothing lost), and a later start moves it
        *mem.down.lock().unwrap() = None;
        mem.puts_left.store(1, Ordering::SeqCst);
        let r = s.move_keys_to_secret_store().unwrap();
        assert_eq!((r.moved, r.left), (1, 1), "{r:?}");
        assert!(r.reason.unwrap().contains("refuses"));
        let stored = raw(&mut s);
        assert!(stored[0]["apiKey"]["keyring"].is_string());
        assert_eq!(stored[1]["apiKey"], json!("sk-file-bbbb"));
        assert_eq!(get(&mut s), cards("sk-file-aaaa", "sk-file-bbbb"));

        // a store that takes the key but does not give it back: the key stays in the file
        mem.puts_left.store(-1, Ordering::SeqCst);
        mem.lose_writes.store(true, Ordering::SeqCst);
        let r = s.move_keys_to_secret_store().unwrap();
        assert_eq!((r.moved, r.left), (0, 1), "{r:?}");
        assert_eq!(raw(&mut s)[1]["apiKey"], json!("sk-file-bbbb"));

        mem.lose_writes.store(false, Ordering::SeqCst);
        let r = s.move_keys_to_secret_store().unwrap();
        assert_eq!((r.moved, r.left), (1, 0), "{r:?}");
        assert_eq!(get(&mut s), cards("sk-file-aaaa", "sk-file-bbbb"));
        assert_eq!(mem.secrets().len(), 2);
        // secure_delete and the -wal truncation: the text is gone from every file
        assert!(file_has(&dir, "sk-file-aaaa").is_empty(), "{:?}", file_has(&dir, "sk-file-aaaa"));
        assert!(file_has(&dir, "sk-file-bbbb").is_empty(), "{:?}", file_has(&dir, "sk-file-bbbb"));
        assert_eq!(s.api_keys(true).unwrap().summary().0, super::Severity::Ok);
    }

    #[test]
    fn an_unreadable_key_is_kept_by_a_save_that_does_not_touch_it() {
        let mem = Arc::new(MemoryStore::new());
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keepsake.db");
        let mut s = Store::open(&db).unwrap();
        s.set_secret_store(mem.clone());
        s.settings_set(&map(json!({"providers": cards("sk-locked-a", "")})), None).unwrap();
        let stored = raw(&mut s);
        s.close();
        // a new process (no cache) while the store is locked
        *mem.down.lock().unwrap() = Some("locked (test)".into());
        let mut s = Store::open(&db).unwrap();
        s.set_secret_store(mem.clone());
        let seen = get(&mut s);
        assert_eq!(seen[0]["apiKey"], json!(""));
        assert!(seen[0]["apiKeyUnavailable"].as_str().unwrap().contains("locked (test)"));
        // Options saves the list as it read it, with card b changed: card a keeps its reference
        let mut back = seen.clone();
        back[1]["model"] = json!("m2");
        s.settings_set(&map(json!({"providers": back})), None).unwrap();
        let now = raw(&mut s);
        assert_eq!(now[0]["apiKey"], stored[0]["apiKey"]);
        assert!(now[0].get("apiKeyUnavailable").is_none(), "the marker is never stored");
        assert_eq!(mem.secrets(), vec!["sk-locked-a".to_string()]);
        *mem.down.lock().unwrap() = None;
        assert_eq!(get(&mut s)[0]["apiKey"], json!("sk-locked-a"));
        // a reference a caller sends that the database does not hold is dropped (a document
        // cannot point at another database's secrets)
        let mut forged = cards("", "");
        forged[1]["apiKey"] = json!({"keyring": "someone-elses"});
        s.settings_set(&map(json!({"providers": forged})), None).unwrap();
        assert_eq!(raw(&mut s)[1]["apiKey"], json!(""));
    }
}
