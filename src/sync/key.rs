//! The sync key (docs/sync.md "The key"): 256 random bits made by `sync init`, shown once as a
//! string for `sync join`, and kept like a provider API key (PROTOCOL.md "API keys"): in the
//! operating system's secret store wherever one is reachable (the database keeps a reference
//! `{"keyring": "<account>"}`), else in the database file as text (`{"text": "<key>"}`), which
//! `sync init`/`join`, `sync status` and `doctor` then say, with why no store is reachable. The
//! database never enters the sync folder, so neither form ever reaches it.
//!
//! The folder's `keepsake/keycheck` holds a known text sealed with the key: `join` opens it before
//! anything is written, so a wrong key is a clear error that changes nothing.

use serde::{Deserialize, Serialize};

use super::layout::{context, Folder};
use super::seal::{Kind, Refusal, SyncKey};
use crate::secrets::SecretStore;

/// What `keepsake/keycheck` holds once opened.
const CHECK_TEXT: &[u8] = b"keepsake sync key check v1"; // i18n-ok: a file format constant

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The key as a person copies it: 52 base32 letters in groups of four (`abcd-efgh-…`).
pub fn to_text(k: &SyncKey) -> String {
    let mut bits: u32 = 0;
    let mut n = 0;
    let mut out = String::with_capacity(64);
    let mut letters = 0;
    let mut push = |c: u8, out: &mut String| {
        if letters > 0 && letters % 4 == 0 {
            out.push('-');
        }
        out.push(c as char);
        letters += 1;
    };
    for &b in &k.0 {
        bits = (bits << 8) | b as u32;
        n += 8;
        while n >= 5 {
            n -= 5;
            push(ALPHABET[((bits >> n) & 31) as usize], &mut out);
        }
    }
    if n > 0 {
        push(ALPHABET[((bits << (5 - n)) & 31) as usize], &mut out);
    }
    out
}

/// Read a key a person typed or pasted: case, spaces and dashes do not matter.
pub fn from_text(s: &str) -> Result<SyncKey, String> {
    let letters: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'-')
        .map(|b| b.to_ascii_lowercase())
        .collect();
    if letters.len() != 52 {
        return Err(format!(
            "a sync key is 52 letters and digits (13 groups of 4, as `keepsake-host sync init` printed it); this one has {}",
            letters.len()
        ));
    }
    let mut out = [0u8; 32];
    let (mut bits, mut n, mut i) = (0u32, 0, 0);
    for c in letters {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .ok_or_else(|| format!("{:?} is not a letter of a sync key (a–z, 2–7)", c as char))?;
        bits = (bits << 5) | v as u32;
        n += 5;
        if n >= 8 {
            n -= 8;
            if i < 32 {
                out[i] = (bits >> n) as u8;
            }
            i += 1;
        }
    }
    if bits & ((1 << n) - 1) != 0 {
        return Err("this is not a sync key: its last letter is not one a key ends with".into());
    }
    Ok(SyncKey(out))
}

/// Where a device's sync key is kept, as the database holds it (a JSON object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyRef {
    /// In the operating system's secret store, under this account of service `dev.keepsake.host`.
    Keyring(String),
    /// In the database file as text: no secret store was reachable when it was stored.
    Text(String),
}

impl KeyRef {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn parse(s: &str) -> Option<KeyRef> {
        serde_json::from_str(s).ok()
    }
}

/// What storing a new key did: where it went, and why the file when it went there.
#[derive(Debug, Clone)]
pub struct Kept {
    pub key_ref: KeyRef,
    /// `Some((store name, why))` when the key is in the database file.
    pub in_file: Option<(String, String)>,
}

/// Keep `key` by the API keys' rules: written to the secret store under a new account and read
/// back before it is referenced; kept as text when no store is reachable. A store that is
/// reachable but refuses is an error, and nothing is kept.
pub fn keep(store: &dyn SecretStore, key: &SyncKey, label: &str) -> Result<Kept, String> {
    let text = to_text(key);
    if let Err(why) = store.probe() {
        return Ok(Kept { key_ref: KeyRef::Text(text), in_file: Some((store.name(), why)) });
    }
    let account = format!("sync-{}", uuid::Uuid::new_v4());
    if let Err(e) = crate::store::put_verified(store, &account, label, &text) {
        let _ = store.delete(&account);
        return Err(format!(
            "could not keep the sync key in {}: {e}. Nothing was set up; unlock the secret store and try again (or \
             run keepsake-host with {}=off to keep the key in the database file)",
            store.name(),
            crate::secrets::ENV
        ));
    }
    Ok(Kept { key_ref: KeyRef::Keyring(account), in_file: None })
}

/// The key behind a reference; `Err` says why it cannot be had (for `sync status` and `doctor`).
pub fn load(store: &dyn SecretStore, r: &KeyRef) -> Result<SyncKey, String> {
    match r {
        KeyRef::Text(t) => from_text(t).map_err(|e| format!("the sync key in the database file is damaged: {e}")),
        KeyRef::Keyring(account) => match store.get(account) {
            Ok(Some(t)) => from_text(&t).map_err(|e| format!("the sync key in {} is damaged: {e}", store.name())),
            Ok(None) => Err(format!(
                "the sync key is no longer in {} (removed there?): run `keepsake-host sync join --folder DIR --key \
                 KEY` again with the key of another of your devices",
                store.name()
            )),
            Err(e) => Err(format!("{} cannot be read now: {e}", store.name())),
        },
    }
}

/// Remove a key from the secret store (`sync leave`); a failure is only logged.
pub fn forget(store: &dyn SecretStore, r: &KeyRef) {
    if let KeyRef::Keyring(a) = r {
        if let Err(e) = store.delete(a) {
            tracing::warn!(error = %e, "could not remove the sync key from the secret store");
        }
    }
}

/// The sealed bytes of a folder's `keycheck` for `key`.
pub fn keycheck_bytes(key: &SyncKey) -> Vec<u8> {
    key.seal(Kind::KeyCheck, &context(Kind::KeyCheck, "", 0), CHECK_TEXT)
}

/// What `keepsake/keycheck` says about `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Right,
    /// No keycheck file: not a Keepsake sync folder (or not synced here yet).
    Missing,
    /// The file opens with another key only.
    Wrong,
    /// The file is there but cannot be judged (damaged, incomplete, unreadable).
    Unreadable(String),
}

pub fn check(folder: &Folder, key: &SyncKey) -> Check {
    let p = folder.keycheck();
    match super::folder::read_sealed(&p, Kind::KeyCheck, &context(Kind::KeyCheck, "", 0), key) {
        Ok(text) if text == CHECK_TEXT => Check::Right,
        Ok(_) => Check::Unreadable("it holds something else".into()),
        Err(Refusal::Tag) => Check::Wrong,
        Err(Refusal::Io(e)) if !p.exists() => {
            let _ = e;
            Check::Missing
        }
        Err(r) => Check::Unreadable(r.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::memory::MemoryStore;

    #[test]
    fn the_text_form_round_trips_and_forgives_case_spaces_and_dashes() {
        for _ in 0..50 {
            let k = SyncKey::random();
            let t = to_text(&k);
            assert_eq!(t.len(), 52 + 12, "{t}");
            assert_eq!(from_text(&t).unwrap(), k);
            assert_eq!(from_text(&t.to_uppercase().replace('-', " ")).unwrap(), k);
        }
        assert!(from_text("abcd").unwrap_err().contains("52 letters"));
        assert!(from_text(&"1".repeat(52)).unwrap_err().contains("not a letter"));
        // the last letter carries 1 bit of the key and 4 zero bits: "b" sets one of those
        let mut bad = to_text(&SyncKey([0; 32]));
        bad.pop();
        bad.push('b');
        assert!(from_text(&bad).is_err());
    }

    #[test]
    fn kept_in_the_secret_store_or_as_text_when_none_is_reachable() {
        let mem = MemoryStore::new();
        let k = SyncKey::random();
        let kept = keep(&mem, &k, "Keepsake sync key").unwrap();
        let KeyRef::Keyring(account) = &kept.key_ref else { panic!("{kept:?}") };
        assert!(kept.in_file.is_none());
        assert_eq!(mem.secrets(), vec![to_text(&k)]);
        assert_eq!(load(&mem, &kept.key_ref).unwrap(), k);
        assert_eq!(KeyRef::parse(&kept.key_ref.to_json()), Some(kept.key_ref.clone()));
        assert!(kept.key_ref.to_json().contains(account));
        forget(&mem, &kept.key_ref);
        assert!(load(&mem, &kept.key_ref).unwrap_err().contains("no longer in"));

        *mem.down.lock().unwrap() = Some("no D-Bus session bus (test)".into());
        let kept = keep(&mem, &k, "Keepsake sync key").unwrap();
        assert_eq!(kept.key_ref, KeyRef::Text(to_text(&k)));
        assert_eq!(kept.in_file.unwrap().1, "no D-Bus session bus (test)");
        assert_eq!(load(&mem, &kept.key_ref).unwrap(), k);
    }

    #[test]
    fn a_store_that_refuses_keeps_nothing() {
        let mem = MemoryStore::new();
        mem.puts_left.store(0, std::sync::atomic::Ordering::SeqCst);
        let e = keep(&mem, &SyncKey::random(), "l").unwrap_err();
        assert!(e.contains("Nothing was set up"), "{e}");
        assert!(mem.accounts().is_empty());
        mem.puts_left.store(-1, std::sync::atomic::Ordering::SeqCst);
        mem.lose_writes.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(keep(&mem, &SyncKey::random(), "l").unwrap_err().contains("did not give the key back"));
    }

    #[test]
    fn the_keycheck_tells_the_right_key_from_a_wrong_one() {
        let d = tempfile::tempdir().unwrap();
        let f = Folder::new(d.path());
        let k = SyncKey::random();
        assert_eq!(check(&f, &k), Check::Missing);
        std::fs::create_dir_all(f.base()).unwrap();
        std::fs::write(f.keycheck(), keycheck_bytes(&k)).unwrap();
        assert_eq!(check(&f, &k), Check::Right);
        assert_eq!(check(&f, &SyncKey::random()), Check::Wrong);
        std::fs::write(f.keycheck(), b"KSYNC1").unwrap();
        assert!(matches!(check(&f, &k), Check::Unreadable(_)));
    }
}
