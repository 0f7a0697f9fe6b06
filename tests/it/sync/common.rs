//! What the sync tests share: setting devices up through the real CLI, reading `sync status`,
//! making random chats with marker words through a real host, and looking at the folder's bytes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;
use crate::settings::secrets::cli_env;

/// The environment of a device without a secret store (keys in the database file).
pub fn no_store() -> Vec<(String, String)> {
    vec![("KEEPSAKE_SECRET_STORE".into(), "off".into())]
}

/// `sync init`: the key it printed.
pub fn init(db: &Path, folder: &Path, name: &str, env: &[(String, String)]) -> String {
    let (code, out, err) =
        cli_env(db, &["sync", "init", "--folder", &folder.display().to_string(), "--name", name], env);
    assert_eq!(code, 0, "sync init: {out}{err}");
    key_in(&out).unwrap_or_else(|| panic!("no key in sync init's output:\n{out}"))
}

/// The key `sync init` printed: the line of 13 groups of 4 letters and digits.
pub fn key_in(out: &str) -> Option<String> {
    out.lines().map(str::trim).find(|l| l.len() == 64 && l.split('-').count() == 13).map(str::to_owned)
}

pub fn join(db: &Path, folder: &Path, key: &str, name: &str, env: &[(String, String)]) {
    let (code, out, err) = cli_env(
        db,
        &["sync", "join", "--folder", &folder.display().to_string(), "--key", key, "--name", name],
        env,
    );
    assert_eq!(code, 0, "sync join: {out}{err}");
}

pub fn status(db: &Path, env: &[(String, String)]) -> Value {
    let (code, out, err) = cli_env(db, &["sync", "status", "--json"], env);
    assert_eq!(code, 0, "sync status: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("sync status --json: {e}: {out}"))
}

/// Every file under `dir`, recursively, with its bytes.
pub fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(files(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
    out.sort();
    out
}

/// The files under `dir` whose bytes contain `needle`.
pub fn holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    files(dir)
        .into_iter()
        .filter(|(_, b)| b.windows(needle.len()).any(|w| w == needle))
        .map(|(p, _)| p)
        .collect()
}

/// Random chats on `h`, each with marker words in every entry and in its name; returns the
/// markers and the session ids.
pub fn random_chats(h: &mut Host, rng: &mut Rng, chats: usize, tag: &str) -> (Vec<String>, Vec<String>) {
    let mut markers = Vec::new();
    let mut ids = Vec::new();
    for c in 0..chats {
        let turns = rng.range(1, 3);
        for t in 0..turns {
            let m = format!("mrk{tag}{}q{c}t{t}", rng.next_u64() % 1_000_000_007);
            h.ok("history.append", json!({"entry": user(&format!("tell me about {m} please"))}));
            h.ok("history.append", json!({"entry": assistant(&format!("{m} is a word made for this test"))}));
            markers.push(m);
        }
        let row = h.ok("history.meta", json!({}));
        if let Some(id) = row["sessionId"].as_str().or(row["activeSessionId"].as_str()) {
            let name = format!("mrk{tag}name{c}x{}", rng.next_u64() % 1_000_000_007);
            h.ok("sessions.rename", json!({"id": id, "name": name}));
            markers.push(name);
            ids.push(id.to_owned());
        }
        h.ok("history.clear", json!({}));
    }
    (markers, ids)
}

/// The drawer's rows on `h` (every page).
pub fn drawer(h: &mut Host) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let page = h.ok("sessions.list", json!({"limit": 200, "cursor": cursor}));
        rows.extend(page["rows"].as_array().cloned().unwrap_or_default());
        cursor = page["cursor"].clone();
        if cursor.is_null() {
            return rows;
        }
    }
}

/// Wait until `h`'s drawer holds every id of `ids`; the time it took.
pub fn wait_for_sessions(h: &mut Host, ids: &[String], limit: Duration) -> Duration {
    let t0 = std::time::Instant::now();
    loop {
        let have: Vec<String> =
            drawer(h).iter().filter_map(|r| r["id"].as_str().map(str::to_owned)).collect();
        if ids.iter().all(|i| have.contains(i)) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < limit,
            "timed out: {} of {} chats arrived",
            ids.iter().filter(|i| have.contains(i)).count(),
            ids.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every entry on `h` as JSON text, over every chat of the drawer (chosen paths).
pub fn all_texts(h: &mut Host) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    for row in drawer(h) {
        let id = row["id"].as_str().unwrap_or_default().to_owned();
        let s = h.ok("sessions.get", json!({"id": id}));
        for e in s["entries"].as_array().into_iter().flatten() {
            out.insert(e["content"].to_string());
        }
    }
    out
}
