//! Import planning (storage-model §5.7, §11.10): turn a Keepsake export or a browser dump
//! (shaped like `chrome.storage.local`, every legacy layout) into a plan the store applies in one
//! transaction. Pure: no SQL, no I/O.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::dataurl::forgiving_base64_decode;
use super::export::{EXPORT_FORMAT, EXPORT_VERSION, EXPORT_VERSION_MIN};
use super::settings::{check_key, check_value, is_device_local, is_known, is_reserved};

/// One session to create.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSession {
    pub id: String,
    pub name: String,
    /// `None` → import time.
    pub created_at: Option<i64>,
    pub pinned: bool,
    pub entries: Vec<Value>,
    /// Unknown element fields, kept for re-export.
    pub extra: Map<String, Value>,
    /// The other versions of its turns (export format 2).
    pub versions: Vec<ImportFork>,
}

/// One fork of an exported session: its chosen version, how many there are, and the others.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportFork {
    pub fork_entry_id: String,
    pub chosen: u32,
    pub count: u32,
    pub others: Vec<(u32, Vec<Value>)>,
}

fn small_whole(v: Option<&Value>) -> Option<u32> {
    v?.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 1 && *n <= 100_000)
}

/// Read an export's `versions` (format 2); a malformed fork is skipped with a warning.
fn forks_of(v: Option<&Value>, id: &str, warnings: &mut Vec<String>) -> Vec<ImportFork> {
    let Some(Value::Array(items)) = v else {
        if v.is_some_and(|v| !v.is_null()) {
            warnings.push(format!("session {id:?}: versions is not an array, ignored"));
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, f) in items.iter().enumerate() {
        let key = f.get("forkEntryId").and_then(Value::as_str);
        let (chosen, count) = (small_whole(f.get("chosen")), small_whole(f.get("count")));
        let (Some(key), Some(chosen), Some(count), Some(Value::Array(others))) =
            (key, chosen, count, f.get("others"))
        else {
            warnings.push(format!("session {id:?}: versions[{i}] is malformed, skipped"));
            continue;
        };
        if count < 2 || chosen > count {
            warnings.push(format!("session {id:?}: versions[{i}] numbers do not add up, skipped"));
            continue;
        }
        let mut list = Vec::new();
        for (j, o) in others.iter().enumerate() {
            match (small_whole(o.get("version")), o.get("entries")) {
                (Some(n), Some(e @ Value::Array(_))) if n <= count && n != chosen => {
                    list.push((
                        n,
                        entries_of(e, &format!("session {id:?} versions[{i}].others[{j}]"), warnings),
                    ));
                }
                _ => {
                    warnings.push(format!("session {id:?}: versions[{i}].others[{j}] is malformed, skipped"))
                }
            }
        }
        out.push(ImportFork { fork_entry_id: key.to_owned(), chosen, count, others: list });
    }
    out
}

/// Blob bytes carried by a Keepsake export, already checked against their hash.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportBlob {
    pub mime: String,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportPlan {
    pub sessions: Vec<ImportSession>,
    /// Sessions skipped while planning (malformed or duplicate elements).
    pub malformed_sessions: usize,
    /// The dump's live history (non-object entries dropped); `None` = absent.
    pub live: Option<Vec<Value>>,
    pub active_session_id: Option<String>,
    /// Settings that passed validation, in document order.
    pub settings: Vec<(String, Value)>,
    pub settings_invalid: usize,
    /// Device-local settings the document carries (the backup settings, storage-model §3): never
    /// imported, listed so the preview can say so.
    pub settings_device_local: Vec<String>,
    /// Keys of a dump that are no Keepsake setting (`settings::KNOWN_KEYS`): never imported, each
    /// with a warning.
    pub settings_unknown: usize,
    /// Export image map, sha256 hex → blob.
    pub images: BTreeMap<String, ImportBlob>,
    pub warnings: Vec<String>,
}

/// What an import does with a document's settings. `None` (the default) applies none: a
/// document cannot change how Keepsake behaves (which server it talks to, what it tells the
/// model) unless the user saw its settings and asked for them (docs/keeps.md "Imports").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsMode {
    None,
    /// Apply settings the host does not have yet.
    Keep,
    /// Apply every setting, replacing the host's values.
    Overwrite,
}

/// Whether a settings field holds a secret the import preview must not show.
fn secret_field(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["key", "token", "secret", "password", "authorization", "cookie"].iter().any(|w| n.contains(w))
}

/// A setting's value as the import preview shows it: every string under a secret-looking field
/// (`apiKey`, `token`, …) masked to its last 4 characters.
pub fn mask_secrets(v: &Value) -> Value {
    fn walk(v: &Value, secret: bool) -> Value {
        match v {
            Value::String(s) if secret && !s.is_empty() => {
                let tail: String = s.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
                Value::String(if s.chars().count() > 8 {
                    format!("••••{tail}")
                } else {
                    "••••".into()
                })
            }
            Value::Object(m) => Value::Object(
                m.iter().map(|(k, x)| (k.clone(), walk(x, secret || secret_field(k)))).collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, secret)).collect()),
            other => other.clone(),
        }
    }
    walk(v, false)
}

/// Errors that reject the whole document (`bad_request` / `unsupported`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportError {
    BadRequest(String),
    Unsupported(String),
}

fn entries_of(v: &Value, what: &str, warnings: &mut Vec<String>) -> Vec<Value> {
    let Value::Array(items) = v else {
        warnings.push(format!("{what}: not an array, read as empty"));
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, e) in items.iter().enumerate() {
        if e.is_object() {
            out.push(e.clone());
        } else {
            warnings.push(format!("{what}[{i}]: not an object, skipped"));
        }
    }
    out
}

fn created_at(v: Option<&Value>) -> Option<i64> {
    let f = v?.as_f64()?;
    f.is_finite().then(|| f.floor() as i64)
}

/// Read one session element (`savedSessions[i]` or an export's `sessions[i]`).
fn session_element(
    el: &Value,
    i: usize,
    what: &str,
    body_lookup: &dyn Fn(&str) -> Option<Value>,
    seen: &mut HashSet<String>,
    plan: &mut ImportPlan,
) {
    let Some(obj) = el.as_object() else {
        plan.warnings.push(format!("{what}[{i}]: not an object, skipped"));
        plan.malformed_sessions += 1;
        return;
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            plan.warnings.push(format!("{what}[{i}]: no id, skipped"));
            plan.malformed_sessions += 1;
            return;
        }
    };
    if !seen.insert(id.clone()) {
        plan.warnings.push(format!("{what}[{i}]: duplicate id {id:?}, skipped"));
        plan.malformed_sessions += 1;
        return;
    }
    let name = obj.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
    let body_key = if what == "sessions" { "entries" } else { "history" };
    let entries = match obj.get(body_key) {
        Some(h @ Value::Array(_)) => entries_of(h, &format!("session {id:?}"), &mut plan.warnings),
        _ => match body_lookup(&id) {
            Some(b) => entries_of(&b, &format!("session_{id}"), &mut plan.warnings),
            None => Vec::new(),
        },
    };
    let mut extra = Map::new();
    for (k, v) in obj {
        if !matches!(
            k.as_str(),
            "id" | "name"
                | "createdAt"
                | "pinned"
                | "history"
                | "entries"
                | "digest"
                | "searchText"
                | "contentDigest"
                | "versions"
        ) {
            extra.insert(k.clone(), v.clone());
        }
    }
    let versions =
        if what == "sessions" { forks_of(obj.get("versions"), &id, &mut plan.warnings) } else { Vec::new() };
    plan.sessions.push(ImportSession {
        id,
        name,
        created_at: created_at(obj.get("createdAt")),
        pinned: obj.get("pinned") == Some(&Value::Bool(true)),
        versions,
        entries,
        extra,
    });
}

/// Plan the import of `doc`: a Keepsake export, or a browser dump it recognises (a key of
/// Keepsake's: `history`, `savedSessions`, `activeSessionId`, `session_<id>` or a known setting).
/// Anything else is refused with what it looks like (`Unsupported`).
pub fn plan(doc: &Value) -> Result<ImportPlan, ImportError> {
    let Some(obj) = doc.as_object().filter(|o| is_export(o) || is_dump(o)) else {
        return Err(ImportError::Unsupported(looks_like(doc)));
    };
    if is_export(obj) {
        plan_export(obj)
    } else {
        Ok(plan_dump(obj))
    }
}

fn is_export(obj: &Map<String, Value>) -> bool {
    obj.get("format").and_then(Value::as_str) == Some(EXPORT_FORMAT)
}

/// A browser dump holds at least one key Keepsake (or its older versions) wrote.
fn is_dump(obj: &Map<String, Value>) -> bool {
    obj.keys().any(|k| is_reserved(k) || is_known(k))
}

/// Another product's chat export, recognised from its content (never from a file name: several
/// products call theirs `conversations.json`).
fn other_product(doc: &Value) -> Option<&'static str> {
    let has = |v: &Value, a: &str, b: &str| v.get(a).is_some() && v.get(b).is_some();
    let items: Vec<&Value> = match doc {
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_object) => a.iter().collect(),
        Value::Object(_) => vec![doc],
        _ => return None,
    };
    if items.iter().any(|c| has(c, "mapping", "current_node")) {
        Some("a ChatGPT export (conversations.json)")
    } else if items.iter().any(|c| has(c, "chat_messages", "uuid")) {
        Some("a Claude export (conversations.json)")
    } else {
        None
    }
}

/// What a document Keepsake cannot import looks like, in words the person who chose the file
/// can act on. Keys are quoted as data, cut to 40 characters, at most 8 of them.
pub fn looks_like(doc: &Value) -> String {
    if let Some(product) = other_product(doc) {
        return format!("this looks like {product}; importing it is not supported yet");
    }
    const NOT: &str = "not a Keepsake export or a Keepsake browser dump";
    let n = |k: usize, one: &str, many: &str| if k == 1 { format!("1 {one}") } else { format!("{k} {many}") };
    match doc {
        Value::Object(m) if m.is_empty() => format!("an empty JSON object: {NOT}"),
        Value::Object(m) => {
            let mut keys: Vec<String> = m
                .keys()
                .take(8)
                .map(|k| {
                    let cut: String = k.chars().take(40).collect();
                    if cut.len() < k.len() {
                        format!("{cut}…")
                    } else {
                        cut
                    }
                })
                .collect();
            if m.len() > 8 {
                keys.push(format!("and {} more", m.len() - 8));
            }
            let what = if m.len() == 1 { "key" } else { "keys" };
            format!("a JSON object with {what} {}: {NOT}", keys.join(", "))
        }
        Value::Array(a) => format!("a JSON array of {}: {NOT}", n(a.len(), "item", "items")),
        Value::String(_) => format!("a JSON string: {NOT}"),
        Value::Number(_) => format!("a JSON number: {NOT}"),
        Value::Bool(_) => format!("a JSON boolean: {NOT}"),
        Value::Null => format!("JSON null: {NOT}"),
    }
}

fn plan_export(obj: &Map<String, Value>) -> Result<ImportPlan, ImportError> {
    let version = obj.get("version").and_then(Value::as_u64);
    if !version.is_some_and(|v| (EXPORT_VERSION_MIN..=EXPORT_VERSION).contains(&v)) {
        return Err(ImportError::Unsupported(format!(
            "keepsake.sessions version {} is not supported (this host reads versions {EXPORT_VERSION_MIN}–{EXPORT_VERSION})",
            obj.get("version").map(Value::to_string).unwrap_or_else(|| "(missing)".into())
        )));
    }
    let mut plan = ImportPlan::default();
    match obj.get("images") {
        None | Some(Value::Null) => {}
        Some(Value::Object(images)) => {
            for (hash, img) in images {
                let mime = img.get("mime").and_then(Value::as_str);
                let data = img.get("data").and_then(Value::as_str);
                let (Some(mime), Some(data)) = (mime, data) else {
                    return Err(ImportError::BadRequest(format!("images[{hash:?}] needs mime and data")));
                };
                let bytes = forgiving_base64_decode(data).ok_or_else(|| {
                    ImportError::BadRequest(format!("images[{hash:?}].data is not valid base64"))
                })?;
                let actual = sha256_hex(&bytes);
                if &actual != hash {
                    return Err(ImportError::BadRequest(format!(
                        "images[{hash:?}]: data hashes to {actual}, not to its key"
                    )));
                }
                plan.images.insert(actual, ImportBlob { mime: mime.to_ascii_lowercase(), bytes });
            }
        }
        Some(_) => return Err(ImportError::BadRequest("images must be an object".into())),
    }
    let mut seen = HashSet::new();
    match obj.get("sessions") {
        Some(Value::Array(items)) => {
            for (i, el) in items.iter().enumerate() {
                session_element(el, i, "sessions", &|_| None, &mut seen, &mut plan);
            }
        }
        _ => plan.warnings.push("sessions: not an array, nothing imported".into()),
    }
    Ok(plan)
}

fn plan_dump(obj: &Map<String, Value>) -> ImportPlan {
    let mut plan = ImportPlan::default();
    let mut seen = HashSet::new();
    let lookup = |id: &str| obj.get(&format!("session_{id}")).cloned();
    match obj.get("savedSessions") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, el) in items.iter().enumerate() {
                session_element(el, i, "savedSessions", &lookup, &mut seen, &mut plan);
            }
        }
        Some(_) => plan.warnings.push("savedSessions: not an array, read as absent".into()),
    }
    for key in obj.keys() {
        if let Some(id) = key.strip_prefix("session_") {
            if !seen.contains(id) {
                plan.warnings.push(format!("{key}: no savedSessions element names it, ignored"));
            }
        }
    }
    if let Some(Value::Array(_)) = obj.get("history") {
        let entries = entries_of(&obj["history"], "history", &mut plan.warnings);
        if !entries.is_empty() {
            plan.live = Some(entries);
        }
    }
    plan.active_session_id = obj.get("activeSessionId").and_then(Value::as_str).map(str::to_owned);
    for (k, v) in obj {
        if is_reserved(k) {
            continue;
        }
        if is_device_local(k) {
            plan.warnings.push(format!(
                "setting {k:?} is not imported: backup settings belong to the device that made the file"
            ));
            plan.settings_device_local.push(k.clone());
            continue;
        }
        if !is_known(k) {
            plan.warnings.push(format!("key {k:?} is not a Keepsake setting: not imported"));
            plan.settings_unknown += 1;
            continue;
        }
        match check_key(k).and_then(|_| check_value(k, v)) {
            Ok(()) => plan.settings.push((k.clone(), v.clone())),
            Err(e) => {
                plan.warnings.push(format!("setting {k:?} skipped: {e}"));
                plan.settings_invalid += 1;
            }
        }
    }
    plan
}

/// Canonical JSON: object keys sorted, no whitespace (used for deterministic ids).
pub fn canonical_json(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    walk(&m[*k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    walk(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    walk(v, &mut s);
    s
}

/// `imported-<first 16 hex of SHA-256 of the canonical JSON>` (§5.7).
pub fn archived_live_id(entries: &[Value]) -> String {
    let doc = Value::Array(entries.to_vec());
    let digest = Sha256::digest(canonical_json(&doc).as_bytes());
    format!("imported-{}", &hex(&digest)[..16])
}

/// Where a dump's live history continues a stored body: the smallest `j` such that `body[j..]`
/// is a non-empty prefix of `history` (the live history went on from the last write-back, its
/// front maybe trimmed), `Some(0)` for an empty body, `None` when it does not continue it.
pub fn continues(body: &[Value], history: &[Value]) -> Option<usize> {
    if body.is_empty() {
        return Some(0);
    }
    (0..body.len()).find(|&j| {
        let tail = &body[j..];
        tail.len() <= history.len() && crate::domain::entry::same_entries(tail, &history[..tail.len()])
    })
}

/// Whether `history` is already stored in `body`, whole and in order (a second import of the
/// same dump, after the chat went on).
pub fn holds_run(body: &[Value], history: &[Value]) -> bool {
    history.is_empty()
        || (history.len() <= body.len()
            && (0..=body.len() - history.len())
                .any(|j| crate::domain::entry::same_entries(&body[j..j + history.len()], history)))
}

/// Lower-case hex SHA-256 of `bytes` (the key of a content-addressed image).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub fn hex(bytes: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(H[(b >> 4) as usize] as char);
        s.push(H[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod mask_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_wherever_they_nest() {
        let v = json!({"providers": [{"name": "OpenAI", "apiKey": "sk-abcdefghijklmnop", "baseUrl": "https://x"}],
                       "token": "short", "n": 5, "headers": {"Authorization": ["Bearer 123456789"]}});
        let m = mask_secrets(&v);
        assert_eq!(m["providers"][0]["apiKey"], json!("••••mnop"));
        assert_eq!(m["providers"][0]["baseUrl"], json!("https://x"));
        assert_eq!(m["token"], json!("••••"));
        assert_eq!(m["headers"]["Authorization"][0], json!("••••6789"));
        assert_eq!(m["n"], json!(5));
        assert_eq!(mask_secrets(&json!("sk-plain-string")), json!("sk-plain-string"));
    }
}

#[cfg(test)]
mod continuation_tests {
    use super::*;
    use serde_json::json;

    fn e(t: &str) -> Value {
        json!({"role": "user", "content": t})
    }

    #[test]
    fn a_history_continues_a_body_it_overlaps() {
        let body = [e("a"), e("b"), e("c")];
        assert_eq!(continues(&body, &[e("b"), e("c"), e("d")]), Some(1));
        assert_eq!(continues(&body, &[e("a"), e("b"), e("c")]), Some(0));
        assert_eq!(continues(&body, &[e("c")]), Some(2));
        assert_eq!(continues(&body, &[e("x"), e("y")]), None);
        assert_eq!(continues(&[], &[e("x")]), Some(0));
        // stored entries carry entryIds the dump lacks
        let stored = [json!({"role": "user", "content": "a", "entryId": "1"})];
        assert_eq!(continues(&stored, &[e("a"), e("b")]), Some(0));
        assert!(holds_run(&body, &[e("b"), e("c")]));
        assert!(holds_run(&body, &[e("a"), e("b")]));
        assert!(!holds_run(&body, &[e("a"), e("c")]));
        assert!(!holds_run(&body, &[e("c"), e("d")]));
        assert!(holds_run(&body, &[]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mixed_layout_never_blanks_a_body() {
        let doc = json!({
            "savedSessions": [
                {"id": "a", "name": "A", "createdAt": 5.7, "history": [{"role":"user","content":"inline"}]},
                {"id": "b", "name": 7, "pinned": "yes"},
                {"id": "c", "createdAt": "x"},
                {"name": "no id"},
                {"id": "a"},
                3
            ],
            "session_b": [{"role":"user","content":"light"}, 5],
            "session_zzz": [],
            "history": [{"role":"user","content":"live"}],
            "activeSessionId": "b",
            "theme": "dark",
            "systemPrompt": "Be brief",
            "maxSessions": "bad",
            "backupFolder": "/tmp/elsewhere",
            "backupsEnabled": false
        });
        let p = plan(&doc).unwrap();
        assert_eq!(p.sessions.len(), 3);
        assert_eq!(p.sessions[0].entries[0]["content"], "inline");
        assert_eq!(p.sessions[0].created_at, Some(5));
        assert_eq!(p.sessions[1].name, "");
        assert!(!p.sessions[1].pinned);
        assert_eq!(p.sessions[1].entries.len(), 1);
        assert_eq!(p.sessions[2].created_at, None);
        assert!(p.sessions[2].entries.is_empty());
        assert_eq!(p.malformed_sessions, 3);
        assert_eq!(p.live.as_ref().unwrap().len(), 1);
        assert_eq!(p.settings, vec![("systemPrompt".to_string(), json!("Be brief"))]);
        assert_eq!(p.settings_unknown, 1, "theme is no Keepsake setting");
        assert!(p.warnings.iter().any(|w| w.contains("\"theme\" is not a Keepsake setting")));
        assert_eq!(p.settings_invalid, 1);
        assert_eq!(p.settings_device_local, ["backupFolder", "backupsEnabled"], "never imported");
        assert!(p.warnings.iter().any(|w| w.contains("session_zzz")));
        assert!(p.warnings.iter().any(|w| w.contains("\"backupFolder\" is not imported")));
    }

    #[test]
    fn export_images_must_match_their_hash() {
        let bytes = b"png-bytes";
        let h = sha256_hex(bytes);
        let good = json!({"format":"keepsake.sessions","version":1,"sessions":[],
            "images":{h.clone(): {"mime":"image/png","data": crate::domain::dataurl::base64_encode(bytes)}}});
        assert_eq!(plan(&good).unwrap().images.len(), 1);
        let bad = json!({"format":"keepsake.sessions","version":1,"sessions":[],
            "images":{h: {"mime":"image/png","data": "AAAA"}}});
        assert!(matches!(plan(&bad), Err(ImportError::BadRequest(_))));
        assert!(matches!(plan(&json!([1])), Err(ImportError::Unsupported(_))));
        let v3 = json!({"format":"keepsake.sessions","version":3});
        assert!(matches!(plan(&v3), Err(ImportError::Unsupported(_))));
        let v2 = json!({"format":"keepsake.sessions","version":2,"sessions":[{"id":"s","entries":[],
            "versions":[{"forkEntryId":"","chosen":2,"count":2,"others":[{"version":1,"entries":[{"role":"user","content":"a"}]}]},
                        {"forkEntryId":"x","chosen":3,"count":2,"others":[]}]}]});
        let p = plan(&v2).unwrap();
        assert_eq!(p.sessions[0].versions.len(), 1, "the fork whose numbers do not add up is skipped");
        assert_eq!(p.sessions[0].versions[0].others[0].0, 1);
        assert_eq!(p.warnings.len(), 1);
    }

    #[test]
    fn what_is_neither_an_export_nor_a_dump_is_refused_with_what_it_looks_like() {
        let refused = |doc: Value| match plan(&doc) {
            Err(ImportError::Unsupported(m)) => m,
            other => panic!("{doc}: {other:?}"),
        };
        assert_eq!(
            refused(json!({"hello": "world", "theme": "dark"})),
            "a JSON object with keys hello, theme: not a Keepsake export or a Keepsake browser dump"
        );
        let gpt = json!([{"title": "t", "mapping": {}, "current_node": "n", "create_time": 1.0}]);
        assert_eq!(
            refused(gpt),
            "this looks like a ChatGPT export (conversations.json); importing it is not supported yet"
        );
        let claude = json!([{"uuid": "u", "name": "n", "chat_messages": []}]);
        assert!(refused(claude).starts_with("this looks like a Claude export"));
        assert!(refused(json!([1, 2])).starts_with("a JSON array of 2 items: not a Keepsake export"));
        assert!(refused(json!({})).starts_with("an empty JSON object"));
        assert!(refused(json!("x")).starts_with("a JSON string"));
        let many: Map<String, Value> =
            (0..10).map(|i| (format!("k{i}{}", "x".repeat(50)), json!(1))).collect();
        let m = refused(Value::Object(many));
        assert!(m.contains("and 2 more") && m.contains('…') && !m.contains(&"x".repeat(41)), "{m}");
        // one key of Keepsake's makes a dump; its unknown keys never become settings
        let p = plan(&json!({"maxSessions": 3, "hello": "world"})).unwrap();
        assert_eq!(p.settings, vec![("maxSessions".to_string(), json!(3))]);
        assert_eq!(p.settings_unknown, 1);
    }

    #[test]
    fn archived_id_is_deterministic_and_key_order_free() {
        let a = vec![json!({"role":"user","content":"x"})];
        let b = vec![json!({"content":"x","role":"user"})];
        assert_eq!(archived_live_id(&a), archived_live_id(&b));
        assert!(archived_live_id(&a).starts_with("imported-"));
        assert_eq!(archived_live_id(&a).len(), "imported-".len() + 16);
    }
}
