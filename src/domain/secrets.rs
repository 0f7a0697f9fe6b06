//! Provider API keys at rest (PROTOCOL.md "API keys"): the shape of the `providers` setting as
//! the database file holds it, and the rules that turn what the extension sends into that shape
//! and back. Pure: the secret store itself (src/secrets) is reached by the store layer.
//!
//! `providers` is an array of cards (objects with an `id`). A card's `apiKey` in the file is
//! either a string (the key itself, kept there only while no secret store is reachable; `""` is
//! no key) or a **reference** `{"keyring": "<account>"}`: the key is the secret of that account
//! under the service [`crate::secrets::SERVICE`] in the operating system's secret store. An
//! account holds one key for its whole life: a new key gets a new account, so a reference never
//! changes meaning.
//!
//! `settings.get` gives the extension cards with `apiKey` strings, as before. A key the store
//! cannot give back (unreachable, locked, deleted by hand) is returned as `apiKey: ""` plus
//! [`UNAVAILABLE`] (why); a card sent back with that field and an empty key keeps the stored
//! key, so saving Options while the store is away loses nothing.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

/// The setting whose cards carry API keys.
pub const PROVIDERS: &str = "providers";
/// The card field that holds a key.
pub const API_KEY: &str = "apiKey";
/// The field of a reference object naming the secret store account.
pub const REF_FIELD: &str = "keyring";
/// Set by `settings.get` on a card whose stored key could not be read: why. Never stored.
pub const UNAVAILABLE: &str = "apiKeyUnavailable";

/// What a card's `apiKey` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key<'a> {
    /// No key (absent, `""`, or not a string/reference).
    None,
    /// The key itself, as text in the file.
    Plain(&'a str),
    /// A reference to a secret store account.
    Ref(&'a str),
}

/// The reference object for `account`.
pub fn reference(account: &str) -> Value {
    json!({ REF_FIELD: account })
}

/// The account a reference object names (exactly `{"keyring": "<non-empty string>"}`).
pub fn ref_account(v: &Value) -> Option<&str> {
    let o = v.as_object()?;
    if o.len() != 1 {
        return None;
    }
    o.get(REF_FIELD).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// What `card.apiKey` holds.
pub fn key_of(card: &Value) -> Key<'_> {
    match card.get(API_KEY) {
        Some(Value::String(s)) if !s.is_empty() => Key::Plain(s),
        Some(v) => ref_account(v).map_or(Key::None, Key::Ref),
        None => Key::None,
    }
}

/// A card's `id`, when it has a non-empty one.
pub fn card_id(card: &Value) -> Option<&str> {
    card.get("id").and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The cards of a `providers` value (empty when it is not an array).
pub fn cards(providers: &Value) -> impl Iterator<Item = &Value> {
    providers.as_array().into_iter().flatten().filter(|c| c.is_object())
}

/// Every account the value references.
pub fn refs(providers: &Value) -> BTreeSet<String> {
    cards(providers)
        .filter_map(|c| match key_of(c) {
            Key::Ref(a) => Some(a.to_owned()),
            _ => None,
        })
        .collect()
}

/// How many keys the value holds as text.
pub fn plaintext_count(providers: &Value) -> usize {
    cards(providers).filter(|c| matches!(key_of(c), Key::Plain(_))).count()
}

/// The stored key of the card with this id: the card's `apiKey` value as stored (a string or a
/// reference), if that card exists and has one.
pub fn stored_key_for<'a>(stored: Option<&'a Value>, id: &str) -> Option<&'a Value> {
    let stored = stored?;
    cards(stored).find(|c| card_id(c) == Some(id)).and_then(|c| match key_of(c) {
        Key::None => None,
        _ => c.get(API_KEY),
    })
}

/// The label a secret store shows for a key (Seahorse, Keychain Access, Credential Manager):
/// the provider's name and the database it belongs to.
pub fn label_for(card: &Value, db: &str) -> String {
    let name = card.get("name").and_then(Value::as_str).filter(|s| !s.trim().is_empty());
    let name = name.or_else(|| card_id(card)).unwrap_or("provider");
    let name: String = name.chars().take(80).collect();
    format!("Keepsake API key: {name} ({db})")
}

/// The ids of the cards whose key `new` holds as text in the file and `old` did not hold as that
/// same text for that card: a new or changed key a write kept in the database (no secret store
/// reachable), which `settings.set` reports (`keysInFile`) so Options can say so at Save. A card
/// without an id is named `""`.
pub fn new_plaintext_ids(old: Option<&Value>, new: &Value) -> Vec<String> {
    cards(new)
        .filter_map(|c| {
            let Key::Plain(k) = key_of(c) else { return None };
            let id = card_id(c).unwrap_or_default();
            let before = old.and_then(|o| cards(o).find(|o| card_id(o).unwrap_or_default() == id));
            let same = before.is_some_and(|o| key_of(o) == Key::Plain(k));
            (!same).then(|| id.to_owned())
        })
        .collect()
}

/// What `settings.get` shows for a card whose reference could not be resolved.
pub fn unavailable_card(card: &Map<String, Value>, why: &str) -> Map<String, Value> {
    let mut c = card.clone();
    c.insert(API_KEY.into(), Value::String(String::new()));
    c.insert(UNAVAILABLE.into(), Value::String(why.to_owned()));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_shapes() {
        assert_eq!(key_of(&json!({"apiKey": "sk-1"})), Key::Plain("sk-1"));
        assert_eq!(key_of(&json!({"apiKey": ""})), Key::None);
        assert_eq!(key_of(&json!({})), Key::None);
        assert_eq!(key_of(&json!({"apiKey": {"keyring": "a1"}})), Key::Ref("a1"));
        assert_eq!(key_of(&json!({"apiKey": {"keyring": ""}})), Key::None);
        assert_eq!(key_of(&json!({"apiKey": {"keyring": "a1", "x": 1}})), Key::None);
        assert_eq!(key_of(&json!({"apiKey": 5})), Key::None);
    }

    #[test]
    fn counts_and_refs() {
        let v = json!([
            {"id": "a", "apiKey": "sk-a"},
            {"id": "b", "apiKey": {"keyring": "acct-b"}},
            {"id": "c", "apiKey": ""},
            "not a card",
            {"id": "d", "apiKey": {"keyring": "acct-d"}}
        ]);
        assert_eq!(plaintext_count(&v), 1);
        assert_eq!(refs(&v).into_iter().collect::<Vec<_>>(), vec!["acct-b", "acct-d"]);
        assert_eq!(stored_key_for(Some(&v), "b"), Some(&json!({"keyring": "acct-b"})));
        assert_eq!(stored_key_for(Some(&v), "a"), Some(&json!("sk-a")));
        assert_eq!(stored_key_for(Some(&v), "c"), None);
        assert_eq!(stored_key_for(None, "a"), None);
        assert_eq!(plaintext_count(&json!({"apiKey": "x"})), 0, "only an array of cards counts");
    }

    #[test]
    fn new_or_changed_keys_kept_as_text_are_named() {
        let old = json!([
            {"id": "a", "apiKey": "sk-a"},
            {"id": "b", "apiKey": {"keyring": "acct-b"}},
            {"id": "c", "apiKey": "sk-c"}
        ]);
        let new = json!([
            {"id": "a", "apiKey": "sk-a"},
            {"id": "b", "apiKey": "sk-b-typed-again"},
            {"id": "c", "apiKey": "sk-c-changed"},
            {"id": "d", "apiKey": "sk-d-new"},
            {"id": "e", "apiKey": ""},
            {"id": "f", "apiKey": {"keyring": "acct-f"}},
            {"apiKey": "sk-no-id"}
        ]);
        assert_eq!(new_plaintext_ids(Some(&old), &new), ["b", "c", "d", ""]);
        assert_eq!(new_plaintext_ids(None, &json!([{"id": "a", "apiKey": "sk-a"}])), ["a"]);
        assert!(new_plaintext_ids(Some(&old), &old).is_empty(), "saved again unchanged: nothing new");
        assert!(new_plaintext_ids(Some(&old), &json!({"apiKey": "x"})).is_empty());
    }

    #[test]
    fn labels_name_the_provider() {
        assert_eq!(
            label_for(&json!({"id": "p", "name": "OpenAI"}), "/d/k.db"),
            "Keepsake API key: OpenAI (/d/k.db)"
        );
        assert_eq!(label_for(&json!({"id": "p", "name": " "}), "/d"), "Keepsake API key: p (/d)");
    }
}
