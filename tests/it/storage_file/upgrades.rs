//! T16 and T17 (reliability.md §4, §10): migrations are atomic and upgrades keep every row.
//!
//! - T16a: a crash (SIGKILL of a child process) after **every statement, Rust step and version
//!   update** of every pending migration, and after the commit. The child runs the host's own
//!   runner, `store::migrate::apply` (one `BEGIN IMMEDIATE` transaction, `user_version` read
//!   under the lock, each file statement by statement with its `-- @step` run where it stands,
//!   `user_version` after each file), on a connection opened by `store::open::open_connection`,
//!   and SIGKILLs itself after the i-th call of `apply`'s hook; from an empty database, from the
//!   v1 fixture and from the v4 fixture (whose live history migration 5 moves into a session).
//! - T16b: kill -9 of the real `keepsake-host` at random moments while it migrates a large v1
//!   database (100 kills in CI, 1,000 under `KEEPSAKE_LONG=1`, `KEEPSAKE_MIGRATION_KILLS`).
//! - T17: every committed fixture `tests/fixtures/db/v1.db … v<LATEST>.db` upgraded by the host
//!   keeps 100% of its rows, and a database one version too new is refused with `db_too_new`,
//!   served no operation and left byte-identical.
//!
//! "Keeps its rows" is checked on the old database's own columns: every table (settings, images,
//! attachments, the change log, …) has the same rows (count and a content hash per table).
//! Migration 5 (schema 5, docs/keeps.md) moves rows, and for those tables it is checked what
//! the move promises: every saved entry is still there, in its session at its position (or, when
//! the live history had replaced it, in a trash item `edited` that remembers where it came from)
//! with the same JSON apart from its new `entryId`; the old live history's trimmed entries then
//! its live ones are the bound session's body in order (or a new auto-named session's, when it
//! was not bound), with `live_state.live_from` = the number of trimmed entries and the
//! `history_entries` view showing the live ones; image references are those of the entries;
//! every session's search text is what it was (the bound session's: its new body's).
//!
//! The fixtures are committed files (see `tests/fixtures/db/README.md`); they were written by
//! `regenerate_db_fixtures` below, which is `#[ignore]`d: a fixture records what an old release
//! wrote and must never change once committed. Only add the next version's file.
use crate::harness::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use keepsake_host::domain::entry::{attach_id, content_chars, image_part_count, referenced_blobs};
use keepsake_host::domain::search::{index_text, Tail};
use keepsake_host::domain::sessions::search_text;
use keepsake_host::domain::text::lower;
use keepsake_host::store::migrate::{self, LATEST, MIGRATIONS};
use rusqlite::{params, Connection, TransactionBehavior};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

// ---- schema and content fingerprints ---------------------------------------------------------

type Schema = Vec<(String, String, String, Option<String>)>;

/// Every schema object (tables, indexes, triggers, views) with its SQL text.
fn schema(c: &Connection) -> Schema {
    // sqlite_stat* come and go with ANALYZE (`PRAGMA optimize` at close): not part of the schema
    let mut st = c
        .prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%'
             ORDER BY type, name",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The database a fresh run of migrations 1..=k produces (schema and the rows migrations insert).
fn reference(k: u32) -> Connection {
    let c = Connection::open_in_memory().unwrap();
    for (v, sql) in MIGRATIONS.iter().filter(|(v, _)| *v <= k) {
        c.execute_batch(sql).unwrap();
        c.pragma_update(None, "user_version", v).unwrap();
    }
    c
}

fn version(c: &Connection) -> u32 {
    c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

fn columns(c: &Connection, table: &str) -> Vec<String> {
    let mut st = c.prepare(&format!("PRAGMA table_info(\"{table}\")")).unwrap();
    st.query_map([], |r| r.get::<_, String>(1)).unwrap().map(Result::unwrap).collect()
}

/// Row count and SHA-256 of every row (the given columns, rows in a canonical order) of `source`
/// (a table name, or a parenthesised SELECT).
fn digest_from(c: &Connection, source: &str, cols: &[String]) -> (usize, String) {
    use rusqlite::types::ValueRef;
    let list = cols.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
    let order = (1..=cols.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    let mut st = c.prepare(&format!("SELECT {list} FROM {source} ORDER BY {order}")).unwrap();
    let mut rows = st.query([]).unwrap();
    let mut h = Sha256::new();
    let mut n = 0;
    while let Some(r) = rows.next().unwrap() {
        for i in 0..cols.len() {
            match r.get_ref(i).unwrap() {
                ValueRef::Null => h.update([0]),
                ValueRef::Integer(v) => {
                    h.update([1]);
                    h.update(v.to_le_bytes());
                }
                ValueRef::Real(v) => {
                    h.update([2]);
                    h.update(v.to_le_bytes());
                }
                ValueRef::Text(b) | ValueRef::Blob(b) => {
                    h.update([3]);
                    h.update((b.len() as u64).to_le_bytes());
                    h.update(b);
                }
            }
        }
        n += 1;
    }
    (n, h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The meta row a host writes when it runs the trash's expiry (docs/keeps.md "The trash"), at
/// most hourly: bookkeeping of the host that opened the file, not a row the file had.
const EXPIRY_META: &str = "trash_expired_at";

/// What a table's content is compared on: the table itself, or for `meta`, its rows other than
/// the expiry's bookkeeping.
fn source(table: &str) -> String {
    if table == "meta" {
        format!("(SELECT * FROM main.meta WHERE key <> '{EXPIRY_META}')")
    } else {
        format!("\"{table}\"")
    }
}

fn digest(c: &Connection, table: &str, cols: &[String]) -> (usize, String) {
    digest_from(c, &source(table), cols)
}

/// table → (columns, rows, hash) for every table of `c`.
type Content = BTreeMap<String, (Vec<String>, usize, String)>;

fn content(c: &Connection) -> Content {
    let tables: Vec<String> = {
        let mut st = c
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_stat%' ORDER BY name")
            .unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    tables
        .into_iter()
        .map(|t| {
            let cols = columns(c, &t);
            let (n, h) = digest(c, &t, &cols);
            (t, (cols, n, h))
        })
        .collect()
}

/// Derived tables a migration replaced: `session_search` (v1–v2) became the search index (v3),
/// whose `search_text` view must give back the same text per session.
const DROPPED_DERIVED: &[&str] = &["session_search"];

/// Each session's searchable text: from `session_search` before v3, `search_text` from v3.
fn search_texts(c: &Connection) -> Vec<(String, String)> {
    let table = if version(c) < 3 { "session_search" } else { "search_text" };
    let mut st = c.prepare(&format!("SELECT session_id, text FROM {table} ORDER BY session_id")).unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

fn sql_json(v: rusqlite::types::ValueRef) -> Value {
    use rusqlite::types::ValueRef::*;
    match v {
        Null => Value::Null,
        Integer(i) => json!(i),
        Real(f) => json!(f),
        Text(t) => json!(String::from_utf8_lossy(t)),
        Blob(b) => json!(sha256_hex(b)),
    }
}

/// Every row of `table` as column → value, keyed by its first column.
fn rows_by_key(c: &Connection, table: &str) -> BTreeMap<String, BTreeMap<String, Value>> {
    let cols = columns(c, table);
    let mut st = c.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
    let mut rows = st.query([]).unwrap();
    let mut out = BTreeMap::new();
    while let Some(r) = rows.next().unwrap() {
        let row: BTreeMap<String, Value> =
            cols.iter().enumerate().map(|(i, n)| (n.clone(), sql_json(r.get_ref(i).unwrap()))).collect();
        let key = match &row[&cols[0]] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        out.insert(key, row);
    }
    out
}

/// An entry without its `entryId` stamp (what a version-4 host stored).
fn unstamped(e: &Value) -> Value {
    let mut e = e.clone();
    if let Some(o) = e.as_object_mut() {
        o.remove("entryId");
    }
    e
}

fn parse(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or(Value::Null)
}

/// The entries of an old live table (`history_entries` or `history_trimmed`), in order.
fn old_live(c: &Connection, table: &str) -> Vec<Value> {
    let mut st = c.prepare(&format!("SELECT entry FROM {table} ORDER BY position, id")).unwrap();
    st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(|r| parse(&r.unwrap())).collect()
}

/// `sqlite_sequence`: table → its AUTOINCREMENT counter.
fn sequence(c: &Connection) -> BTreeMap<String, i64> {
    let Ok(mut st) = c.prepare("SELECT name, seq FROM sqlite_sequence") else { return BTreeMap::new() };
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

/// A database before an upgrade: every table's content, and what migration 5 moves.
struct Before {
    version: u32,
    content: Content,
    sequence: BTreeMap<String, i64>,
    /// Each session's searchable text.
    texts: Vec<(String, String)>,
    /// `sessions` rows by id.
    sessions: BTreeMap<String, BTreeMap<String, Value>>,
    /// `session_entries` rows by id: (session, position, role, content_chars, image_count, entry).
    entries: BTreeMap<i64, (String, i64, Value, i64, i64, Value)>,
    /// Before version 5: the live history and its trimmed entries, in order, and the binding.
    live: Vec<Value>,
    trimmed: Vec<Value>,
    bound: String,
    bound_at: Value,
}

fn snapshot(c: &Connection) -> Before {
    let v = version(c);
    let entries = {
        let mut st = c
            .prepare("SELECT id, session_id, position, role, content_chars, image_count, entry FROM session_entries")
            .unwrap();
        st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                (
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    sql_json(r.get_ref(3)?),
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    parse(&r.get::<_, String>(6)?),
                ),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let (bound, bound_at) = c
        .query_row("SELECT active_session_id, bound_at FROM live_state WHERE id = 1", [], |r| {
            Ok((r.get::<_, String>(0)?, sql_json(r.get_ref(1)?)))
        })
        .unwrap_or_default();
    Before {
        version: v,
        content: content(c),
        sequence: sequence(c),
        texts: search_texts(c),
        sessions: rows_by_key(c, "sessions"),
        entries,
        live: if v < 5 { old_live(c, "history_entries") } else { Vec::new() },
        trimmed: if v < 5 { old_live(c, "history_trimmed") } else { Vec::new() },
        bound,
        bound_at,
    }
}

/// Tables migration 5 rewrites: checked by [`fold_problems`] instead of by their hash.
const FOLDED: &[&str] = &[
    "session_entries",
    "sessions",
    "history_entries",
    "history_trimmed",
    "live_state",
    "image_refs",
    "search_docs",
    "search_pieces",
    "search_grams",
];

/// Compare `before` (a database at some version) with `after` (the same database, at that
/// version again or upgraded), on `before`'s columns. `about` only documents tables and
/// migrations add to it: it must equal the fresh reference's. Returns (rows compared, problems).
fn compare_rows(before: &Before, after: &Connection) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let mut rows = 0;
    let folded = before.version < 5 && version(after) >= 5;
    for (t, (cols, n, h)) in &before.content {
        rows += n;
        if t == "about" {
            let cols = columns(after, "about");
            let want = digest(&reference(version(after)), "about", &cols);
            let got = digest(after, "about", &cols);
            if got != want {
                problems.push(format!("about: {} rows, not the reference's {}", got.0, want.0));
            }
            continue;
        }
        if DROPPED_DERIVED.contains(&t.as_str()) && columns(after, t).is_empty() {
            continue; // derived data a later version keeps in another form (checked by the caller)
        }
        if folded && FOLDED.contains(&t.as_str()) {
            continue;
        }
        if t == "sqlite_sequence" {
            // AUTOINCREMENT counters: those of tables a later version added are new rows, not
            // changes; those of tables migration 5 rewrote may only have grown
            let now = sequence(after);
            for (name, seq) in &before.sequence {
                let ok = match now.get(name) {
                    Some(s) if folded && FOLDED.contains(&name.as_str()) => s >= seq,
                    Some(s) => s == seq,
                    None => false,
                };
                if !ok {
                    problems.push(format!("sqlite_sequence: {name} was {seq}, now {:?}", now.get(name)));
                }
            }
            continue;
        }
        let (n2, h2) = digest(after, t, cols);
        if (n2, &h2) != (*n, h) {
            problems.push(format!(
                "{t}: {n} rows before, {n2} after{}",
                if n2 == *n { " (content differs)" } else { "" }
            ));
        }
    }
    if folded {
        problems.extend(fold_problems(before, after));
    }
    (rows, problems)
}

/// An upgraded database's `session_entries` rows by id: (session, branch, position, role,
/// content_chars, image_count, entry, entry_id).
type AfterEntry = (String, Option<i64>, i64, Value, i64, i64, Value, Option<String>);

fn after_entries(c: &Connection) -> BTreeMap<i64, AfterEntry> {
    let mut st = c
        .prepare(
            "SELECT id, session_id, branch_id, position, role, content_chars, image_count, entry, entry_id
             FROM session_entries",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            (
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                sql_json(r.get_ref(4)?),
                r.get(5)?,
                r.get(6)?,
                parse(&r.get::<_, String>(7)?),
                r.get(8)?,
            ),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The chosen path of session `sid`: (row id, entry), in order.
fn chosen_path(c: &Connection, sid: &str) -> Vec<(i64, Value)> {
    let mut st = c
        .prepare(
            "SELECT id, entry FROM session_entries WHERE session_id = ?1 AND branch_id IS NULL ORDER BY position, id",
        )
        .unwrap();
    st.query_map([sid], |r| Ok((r.get(0)?, parse(&r.get::<_, String>(1)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// What migration 5 promises about the tables it rewrites (see the module comment).
fn fold_problems(before: &Before, c: &Connection) -> Vec<String> {
    let mut p = Vec::new();
    let entries = after_entries(c);
    let sessions = rows_by_key(c, "sessions");
    let (sid, live_from, bound_at): (String, i64, Value) = c
        .query_row("SELECT active_session_id, live_from, bound_at FROM live_state WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?, sql_json(r.get_ref(2)?)))
        })
        .unwrap_or_else(|e| {
            p.push(format!("live_state: {e}"));
            Default::default()
        });
    let was_bound = !before.bound.is_empty() && before.sessions.contains_key(&before.bound);
    let desired: Vec<Value> = before.trimmed.iter().chain(&before.live).cloned().collect();
    let is_edited_item = |id: &str, from: &str| {
        sessions.get(id).is_some_and(|s| {
            let origin = s["trash_origin"].as_str().map(parse).unwrap_or(Value::Null);
            !s["trashed_at"].is_null()
                && s["trash_reason"] == json!("edited")
                && origin["kind"] == json!("entries")
                && origin["sessionId"] == json!(from)
        })
    };

    // every saved entry: the same JSON but for its new entryId, where it was or in the trash
    let mut moved: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new(); // trash item → (position, old position)
    for (id, (s0, pos0, role0, cc0, ic0, e0)) in &before.entries {
        let Some((s1, branch, pos1, role1, cc1, ic1, e1, eid)) = entries.get(id) else {
            p.push(format!("session_entries row {id} ({s0} #{pos0}) lost"));
            continue;
        };
        let stamp = e1.get("entryId").and_then(Value::as_str);
        if stamp.is_none() || stamp != eid.as_deref() {
            p.push(format!("session_entries row {id}: entryId {stamp:?} vs column {eid:?}"));
        }
        if unstamped(e1) != unstamped(e0) || (role1, cc1, ic1) != (role0, cc0, ic0) || branch.is_some() {
            p.push(format!("session_entries row {id} ({s0} #{pos0}) changed"));
        }
        if (s1, pos1) != (s0, pos0) {
            if *s0 == before.bound && is_edited_item(s1, s0) {
                moved.entry(s1.clone()).or_default().push((*pos1, *pos0));
            } else {
                p.push(format!("session_entries row {id} moved from {s0} #{pos0} to {s1} #{pos1}"));
            }
        }
    }
    // what went to the trash is the old body's tail, in order, and says where it came from
    for (item, mut rows) in moved {
        rows.sort();
        let origin = parse(sessions[&item]["trash_origin"].as_str().unwrap_or("null"));
        let start = origin["position"].as_i64().unwrap_or(-1);
        let in_order =
            rows.iter().enumerate().all(|(k, (p1, p0))| *p1 == k as i64 && *p0 == start + k as i64);
        let total = before.entries.values().filter(|e| e.0 == before.bound).count() as i64;
        if !in_order || start + rows.len() as i64 != total {
            p.push(format!("trash item {item}: {rows:?} is not the old body's tail from {start}"));
        }
    }

    // the live conversation: its session's chosen path is the trimmed entries then the live ones
    let expected_sid_is_new = !was_bound && !before.live.is_empty();
    if was_bound {
        if sid != before.bound {
            p.push(format!("live_state: bound to {sid:?}, not {:?}", before.bound));
        }
        if bound_at != before.bound_at {
            p.push(format!("live_state.bound_at {bound_at} was {}", before.bound_at));
        }
    } else if expected_sid_is_new {
        let fresh = sessions.get(&sid).filter(|_| !before.sessions.contains_key(&sid));
        match fresh {
            Some(s) if s["name_auto"] == json!(1) && s["trashed_at"].is_null() => {}
            _ => p.push(format!("the unbound live history is not in a new auto-named session ({sid:?})")),
        }
    } else if !sid.is_empty() {
        p.push(format!("live_state: bound to {sid:?} with no live history"));
    }
    if !sid.is_empty() {
        let body = chosen_path(c, &sid);
        let got: Vec<Value> = body.iter().map(|(_, e)| unstamped(e)).collect();
        let want: Vec<Value> = if desired.is_empty() {
            before.entries.values().filter(|e| e.0 == sid).map(|e| unstamped(&e.5)).collect()
        } else {
            desired.iter().map(unstamped).collect()
        };
        if got != want {
            p.push(format!(
                "session {sid:?}: body of {} entries is not the trimmed then live entries ({})",
                got.len(),
                want.len()
            ));
        }
        let from = if desired.is_empty() { want.len() } else { before.trimmed.len() };
        if live_from != from as i64 {
            p.push(format!("live_state.live_from {live_from}, not {from}"));
        }
        if sessions.get(&sid).map(|s| s["entry_count"].clone()) != Some(json!(body.len())) {
            p.push(format!("session {sid:?}: entry_count is not its {} entries", body.len()));
        }
        for (row, e) in &body {
            if !before.entries.contains_key(row) && entries[row].7.as_deref() != e["entryId"].as_str() {
                p.push(format!("session {sid:?}: new row {row} without its entryId"));
            }
        }
    }
    let window: Vec<Value> = {
        let mut st = c.prepare("SELECT entry FROM history_entries ORDER BY position").unwrap();
        st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(|r| unstamped(&parse(&r.unwrap()))).collect()
    };
    let live: Vec<Value> = before.live.iter().map(unstamped).collect();
    if window != live {
        p.push(format!(
            "history_entries shows {} entries, the live history had {}",
            window.len(),
            live.len()
        ));
    }

    // sessions: every old row as it was (the bound one's count and time follow its body); new
    // rows only for what migration 5 makes
    for (id, old) in &before.sessions {
        let Some(new) = sessions.get(id) else {
            p.push(format!("sessions row {id} lost"));
            continue;
        };
        for (col, v) in old {
            let may_change = (col == "updated_at" && *id == sid) || col == "entry_count";
            if !may_change && new.get(col) != Some(v) {
                p.push(format!("sessions row {id}: {col} {:?} was {v}", new.get(col)));
            }
        }
        let count = entries.values().filter(|e| e.0 == *id && e.1.is_none()).count();
        if new["entry_count"] != json!(count) || new["name_auto"] != json!(0) || !new["trashed_at"].is_null()
        {
            p.push(format!("sessions row {id}: entry_count/name_auto/trashed_at {new:?}"));
        }
    }
    for id in sessions.keys().filter(|id| !before.sessions.contains_key(*id)) {
        if !(is_edited_item(id, &before.bound) || (expected_sid_is_new && *id == sid)) {
            p.push(format!("sessions row {id} is new: {:?}", sessions[id]));
        }
    }
    // every after row is an old one or the live history's, in the live chat's session
    for (id, e) in &entries {
        if !before.entries.contains_key(id) && e.0 != sid {
            p.push(format!("session_entries row {id} in {:?} is new", e.0));
        }
    }
    let extra = entries.len() as i64 - before.entries.len() as i64;
    let max_new = desired.len() as i64;
    if extra < 0 || extra > max_new {
        p.push(format!("session_entries: {extra} new rows for a live history of {max_new}"));
    }

    // image references: exactly those of the stored entries
    let refs: std::collections::BTreeSet<(String, i64, String)> = {
        let mut st = c.prepare("SELECT holder, holder_id, sha256 FROM image_refs").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
    };
    let want: std::collections::BTreeSet<(String, i64, String)> = entries
        .iter()
        .flat_map(|(id, e)| referenced_blobs(&e.6).into_iter().map(move |h| ("session".to_owned(), *id, h)))
        .collect();
    if refs != want {
        p.push(format!("image_refs: {} rows, the entries reference {}", refs.len(), want.len()));
    }

    // search: every session's text as it was; the live chat's session's is its new body's
    let mut texts: BTreeMap<String, String> = before.texts.iter().cloned().collect();
    if !sid.is_empty() {
        let body: Vec<Value> = chosen_path(c, &sid).into_iter().map(|(_, e)| e).collect();
        texts.insert(sid.clone(), search_text(&body));
    }
    let texts: Vec<(String, String)> = texts.into_iter().collect();
    if search_texts(c) != texts {
        p.push("search_text: a session's searchable text differs".into());
    }
    p
}

fn open_rw(db: &Path) -> Connection {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE).expect("open db");
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c
}

// ---- the fixtures ----------------------------------------------------------------------------

const T0: i64 = 1_764_700_000_000;

fn img_ref(bytes: &[u8]) -> String {
    format!("keepsake-image:sha256:{}", sha256_hex(bytes))
}

fn attach_entry(id: &str, url: &str, body: &str) -> Value {
    json!({"role": "user", "attachId": id, "content": format!(
        "[Page context attached by Keepsake]\nURL: {url}\nTitle: {url}\nMode: full\n---\n\n{body}")})
}

/// Insert an entry row into `table`, with the `attach_id` column when the schema has it.
fn insert_entry(
    c: &Connection,
    version: u32,
    table: &str,
    session: Option<&str>,
    pos: usize,
    e: &Value,
) -> i64 {
    insert_entry_on(c, version, table, session, None, pos, e)
}

/// [`insert_entry`], from version 5 on the chosen path (`branch` None) or on a version's branch.
fn insert_entry_on(
    c: &Connection,
    version: u32,
    table: &str,
    session: Option<&str>,
    branch: Option<i64>,
    pos: usize,
    e: &Value,
) -> i64 {
    let role = e["role"].as_str();
    let aid = attach_id(e);
    if table == "session_entries" && version >= 5 {
        // v5: every entry carries its entryId (JSON and column) and when it was stored
        c.execute(
            "INSERT INTO session_entries (session_id, branch_id, position, role, content_chars, image_count, entry,
                                          attach_id, entry_id, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                session,
                branch,
                pos as i64,
                role,
                content_chars(e) as i64,
                image_part_count(e) as i64,
                e.to_string(),
                aid,
                e["entryId"].as_str().expect("a v5 entry has its entryId"),
                T0 + pos as i64
            ],
        )
        .unwrap();
        let id = c.last_insert_rowid();
        add_image_refs(c, "session", id, e);
        return id;
    }
    match (table, version >= 2) {
        ("history_entries", _) => c.execute(
            "INSERT INTO history_entries (position, role, content_chars, image_count, attach_id, entry, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![pos as i64, role, content_chars(e) as i64, image_part_count(e) as i64, aid, e.to_string(), T0 + pos as i64],
        ),
        ("history_trimmed", false) => c.execute(
            "INSERT INTO history_trimmed (position, entry, trimmed_at) VALUES (?1, ?2, ?3)",
            params![pos as i64, e.to_string(), T0],
        ),
        ("history_trimmed", true) => c.execute(
            "INSERT INTO history_trimmed (position, entry, trimmed_at, attach_id) VALUES (?1, ?2, ?3, ?4)",
            params![pos as i64, e.to_string(), T0, aid],
        ),
        ("session_entries", false) => c.execute(
            "INSERT INTO session_entries (session_id, position, role, content_chars, image_count, entry)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![session, pos as i64, role, content_chars(e) as i64, image_part_count(e) as i64, e.to_string()],
        ),
        ("session_entries", true) => c.execute(
            "INSERT INTO session_entries (session_id, position, role, content_chars, image_count, entry, attach_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![session, pos as i64, role, content_chars(e) as i64, image_part_count(e) as i64, e.to_string(), aid],
        ),
        _ => unreachable!(),
    }
    .unwrap();
    let id = c.last_insert_rowid();
    let holder = match table {
        "history_entries" => "history",
        "history_trimmed" => "trimmed",
        _ => "session",
    };
    add_image_refs(c, holder, id, e);
    id
}

fn add_image_refs(c: &Connection, holder: &str, id: i64, e: &Value) {
    for part in e["content"].as_array().into_iter().flatten() {
        if let Some(sha) =
            part["image_url"]["url"].as_str().and_then(|u| u.strip_prefix("keepsake-image:sha256:"))
        {
            c.execute(
                "INSERT OR IGNORE INTO image_refs (holder, holder_id, sha256) VALUES (?1, ?2, ?3)",
                params![holder, id, sha],
            )
            .unwrap();
        }
    }
}

/// A fixed entryId for a fixture entry (UUID-shaped, the same on every regeneration).
fn fixture_entry_id(session: &str, branch: Option<u32>, pos: usize) -> String {
    let h = sha256_hex(format!("{session}/{branch:?}/{pos}").as_bytes());
    format!("{}-{}-4{}-8{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// `e` with the entryId the fixture gives it (from version 5; older hosts stored none).
fn stamped(version: u32, session: &str, branch: Option<u32>, pos: usize, e: &Value) -> Value {
    let mut e = e.clone();
    if version >= 5 {
        e["entryId"] = json!(fixture_entry_id(session, branch, pos));
    }
    e
}

fn insert_session(
    c: &Connection,
    version: u32,
    id: &str,
    name: &str,
    pinned: bool,
    seq: i64,
    entries: &[Value],
) {
    insert_session_with(c, version, id, name, pinned, seq, entries, Some(""));
}

/// [`insert_session`]; `more_text`: the searchable text of its other versions (from version 5
/// the index covers them), `None` for a session in the trash, which is not searched.
#[allow(clippy::too_many_arguments)]
fn insert_session_with(
    c: &Connection,
    version: u32,
    id: &str,
    name: &str,
    pinned: bool,
    seq: i64,
    entries: &[Value],
    more_text: Option<&str>,
) {
    let entries: Vec<Value> =
        entries.iter().enumerate().map(|(i, e)| stamped(version, id, None, i, e)).collect();
    let entries = &entries[..];
    c.execute(
        "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at, extra)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?4, ?8)",
        params![
            id,
            name,
            lower(name),
            T0 + seq * 60_000,
            pinned as i64,
            seq,
            entries.len() as i64,
            if pinned { Some(r#"{"color":"blue"}"#) } else { None }
        ],
    )
    .unwrap();
    for (i, e) in entries.iter().enumerate() {
        insert_entry(c, version, "session_entries", Some(id), i, e);
    }
    let Some(more_text) = more_text else { return };
    let text = search_text(entries) + more_text;
    if version < 3 {
        c.execute(
            "INSERT INTO session_search (session_id, text, text_lower) VALUES (?1, ?2, ?3)",
            params![id, text, lower(&text)],
        )
        .unwrap();
    } else {
        // v3: the search index, as the host writes it (domain::search)
        let ix = index_text(&text, Tail::default());
        c.execute(
            "INSERT INTO search_docs (session_id, lower_bytes, last_char) VALUES (?1, ?2, ?3)",
            params![id, ix.lower_bytes as i64, ix.last_char.map(String::from).unwrap_or_default()],
        )
        .unwrap();
        let doc = c.last_insert_rowid();
        for p in &ix.pieces {
            if version < 4 {
                c.execute(
                    "INSERT INTO search_pieces (doc, start, text, text_lower) VALUES (?1, ?2, ?3, ?4)",
                    params![doc, p.start as i64, p.text, p.lower],
                )
                .unwrap();
            } else {
                // v4: keyed by doc * 2^32 + start
                c.execute(
                    "INSERT INTO search_pieces (key, doc, start, text, text_lower) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![(doc << 32) + p.start as i64, doc, p.start as i64, p.text, p.lower],
                )
                .unwrap();
            }
        }
        for (g, pos) in &ix.grams {
            c.execute(
                "INSERT INTO search_grams (gram, doc, pos) VALUES (?1, ?2, ?3)",
                params![g, doc, *pos as i64],
            )
            .unwrap();
        }
    }
}

/// Representative rows of every table, as a host at schema `version` stores them.
fn fixture_rows(c: &Connection, version: u32) {
    let imgs: Vec<Vec<u8>> = vec![png_bytes(8, 6, 1), png_bytes(16, 16, 2), png_bytes(4, 4, 3)];
    for (i, b) in imgs.iter().enumerate() {
        c.execute(
            "INSERT INTO images (sha256, mime, width, height, byte_length, is_thumbnail, created_at, bytes)
             VALUES (?1, 'image/png', ?2, ?3, ?4, 0, ?5, ?6)",
            params![sha256_hex(b), [8, 16, 4][i], [6, 16, 4][i], b.len() as i64, T0, b],
        )
        .unwrap();
    }
    let thumb = png_bytes(2, 2, 9);
    if version >= 2 {
        c.execute(
            "INSERT INTO images (sha256, mime, width, height, byte_length, is_thumbnail, created_at, bytes, source_sha256)
             VALUES (?1, 'image/png', 2, 2, ?2, 1, ?3, ?4, ?5)",
            params![sha256_hex(&thumb), thumb.len() as i64, T0, thumb, sha256_hex(&imgs[1])],
        )
        .unwrap();
    }
    let image = |i: usize| json!({"type": "image_url", "image_url": {"url": img_ref(&imgs[i])}});
    let trimmed = [
        attach_entry("a-trim", "https://example.com/old", "An older page, trimmed off the live history."),
        json!({"role": "user", "imagesSeen": true, "content": [text_part("this one had a picture"), image(1)]}),
    ];
    let live = [
        attach_entry("a-live", "https://example.com/a", "Body text of the attached page."),
        json!({"role": "assistant", "content": "Summary of the page."}),
        json!({"role": "user", "imagesSeen": true, "content": [text_part("What is in this picture?"), image(0)]}),
        json!({"role": "assistant", "content": [text_part("A small test pattern.")]}),
        json!({"role": "user", "content": "谢谢！Ünïcödé ✓ 😀", "editedAt": T0}),
    ];
    if version < 5 {
        for (i, e) in live.iter().enumerate() {
            insert_entry(c, version, "history_entries", None, i, e);
        }
        for (i, e) in trimmed.iter().enumerate() {
            insert_entry(c, version, "history_trimmed", None, i, e);
        }
        // saved when the chat had 5 entries (2 of them since trimmed off the live history)
        let bound: Vec<Value> = trimmed.iter().chain(live.iter().take(3)).cloned().collect();
        insert_session(c, version, "s-bound", "Bound session", false, 1, &bound);
    } else {
        // v5: the session holds the whole chat; the live history is its window from live_from
        let bound: Vec<Value> = trimmed.iter().chain(live.iter()).cloned().collect();
        insert_session(c, version, "s-bound", "Bound session", false, 1, &bound);
    }
    let mut pinned = vec![
        json!({"role": "user", "content": [text_part("two pictures"), image(1), image(2)]}),
        json!({"role": "assistant", "content": "ok", "model": "gpt-x"}),
    ];
    if version >= 2 {
        pinned.push(json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": img_ref(&thumb)}}]}));
    }
    insert_session(c, version, "s-pinned", "Pinned 📌", true, 2, &pinned);
    let cjk = vec![
        json!({"role": "user", "content": "你好，世界"}),
        json!({"role": "assistant", "content": "こんにちは"}),
        attach_entry("a-sess", "https://example.org/cjk", "中文页面正文"),
    ];
    if version < 5 {
        insert_session(c, version, "s-cjk", "中文会话", false, 3, &cjk);
    } else {
        // v5: another version of the reply to the first message (Regenerate), on a branch
        let other = [json!({"role": "assistant", "content": "Hello, world (the first reply)"})];
        insert_session_with(c, version, "s-cjk", "中文会话", false, 3, &cjk, Some(&search_text(&other)));
        let fork = fixture_entry_id("s-cjk", None, 0);
        c.execute(
            "INSERT INTO session_branches (session_id, fork_entry_id, version, created_at) VALUES ('s-cjk', ?1, 1, ?2)",
            params![fork, T0 + 5],
        )
        .unwrap();
        let branch = c.last_insert_rowid();
        for (i, e) in other.iter().enumerate() {
            let e = stamped(version, "s-cjk", Some(1), i, e);
            insert_entry_on(c, version, "session_entries", Some("s-cjk"), Some(branch), i, &e);
        }
        c.execute(
            "INSERT INTO session_forks (session_id, fork_entry_id, chosen, versions) VALUES ('s-cjk', ?1, 2, 2)",
            [&fork],
        )
        .unwrap();
        // a chat kept by auto-keep (its name follows its first message), then deleted: in the
        // trash with its picture, not searched
        let gone = vec![
            json!({"role": "user", "content": "Which of these is older?"}),
            json!({"role": "user", "content": [text_part("this one"), image(0)]}),
            json!({"role": "assistant", "content": "The first one."}),
        ];
        insert_session_with(c, version, "s-trashed", "Which of these is older?", false, 4, &gone, None);
        c.execute(
            "UPDATE sessions SET name_auto = 1, trashed_at = ?1, trash_reason = 'deleted', trash_origin = ?2
             WHERE id = 's-trashed'",
            params![T0 + 3_600_000, json!({"kind": "session"}).to_string()],
        )
        .unwrap();
    }
    c.execute("UPDATE live_state SET active_session_id = 's-bound', bound_at = ?1 WHERE id = 1", [T0])
        .unwrap();
    if version >= 5 {
        c.execute("UPDATE live_state SET live_from = ?1 WHERE id = 1", [trimmed.len() as i64]).unwrap();
    }
    let long = "long setting value ".repeat(250);
    for (k, v) in [
        ("theme", json!("dark")),
        ("maxSessions", json!(30)),
        ("autoSummarizeAttachments", json!(true)),
        ("模型", json!({"provider": "openai", "model": "gpt-x", "temperature": 0.2})),
        ("test.long", json!(long)),
    ]
    .into_iter()
    // v5: a user who keeps the trash a hundred years (the fixture's trash item outlives the
    // host's expiry run in any test)
    .chain((version >= 5).then(|| ("trashDays", json!(36500))))
    {
        c.execute(
            "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)",
            params![k, v.to_string(), T0],
        )
        .unwrap();
    }
    for (i, (areas, crid)) in [
        (json!({"settings": ["theme"]}), Some("c-1")),
        (json!({"history": true}), None),
        (json!({"sessions": {"ids": ["s-cjk"], "index": true}}), Some("c-2")),
    ]
    .iter()
    .enumerate()
    {
        c.execute(
            "INSERT INTO changes (changed_at, areas, client_request_id, origin) VALUES (?1, ?2, ?3, 'pid 1 fixture0')",
            params![T0 + i as i64, areas.to_string(), crid],
        )
        .unwrap();
    }
    for (crid, op, result) in [
        ("c-1", "settings.set", "{}"),
        ("c-2", "sessions.appendTo", r#"{"target":"session","sessionId":"s-cjk","length":3,"index":2}"#),
    ] {
        c.execute(
            "INSERT INTO client_requests (client_request_id, op, result, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![crid, op, result, T0],
        )
        .unwrap();
    }
    c.execute("INSERT INTO meta (key, value) VALUES ('changes_floor', '0')", []).unwrap();
    if version >= 2 {
        for (aid, url) in [
            ("a-live", "https://example.com/a"),
            ("a-trim", "https://example.com/old"),
            ("a-sess", "https://example.org/cjk"),
        ] {
            let ctx = json!({"url": url, "title": url, "mode": "full"});
            c.execute(
                "INSERT INTO attachments (attach_id, ctx, paper, summary_source, created_at) VALUES (?1, ?2, 0, NULL, ?3)",
                params![aid, ctx.to_string(), T0],
            )
            .unwrap();
        }
        c.execute(
            "INSERT INTO attach_tracker (key, text_sha256, text_length, attached_at) VALUES ('full::https://example.com/a', ?1, 31, ?2)",
            params![sha256_hex(b"Body text of the attached page."), T0],
        )
        .unwrap();
    }
    if version >= 6 {
        // a display rendition: a small picture is its own (the same bytes, their digest)
        c.execute(
            "INSERT INTO image_renditions (sha256, mime, width, height, digest, created_at, bytes)
             VALUES (?1, 'image/png', 16, 16, ?1, ?2, ?3)",
            params![sha256_hex(&imgs[1]), T0, imgs[1]],
        )
        .unwrap();
    }
}

/// Write a fixture database at schema `version` to `path` the way that release did: 4 KiB pages,
/// WAL, migrations 1..=version in one transaction, then the rows.
fn build_fixture(path: &Path, version: u32) {
    let _ = std::fs::remove_file(path);
    let mut c = Connection::open(path).unwrap();
    c.execute_batch("PRAGMA page_size=4096; PRAGMA journal_mode=WAL;").unwrap();
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    for (v, sql) in MIGRATIONS.iter().filter(|(v, _)| *v <= version) {
        tx.execute_batch(sql).unwrap();
        tx.pragma_update(None, "user_version", v).unwrap();
    }
    tx.commit().unwrap();
    let tx = c.transaction().unwrap();
    fixture_rows(&tx, version);
    tx.commit().unwrap();
    drop(c);
    if version >= 7 {
        sync_rows(path);
    }
    let c = Connection::open(path).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    drop(c);
}

/// v7: sync set up by the host itself (its clock at the fixture's time), which records every chat
/// and synced setting as this device's first operations (the replicated state, the outbox and
/// the pictures it keeps for them), then what a device that has synced a while also holds: a peer
/// with its name and what was applied from it, a segment waiting for a picture, tombstones, and a
/// chat this device's cap evicted and purged.
fn sync_rows(path: &Path) {
    let mut s = keepsake_host::store::Store::open(path).unwrap();
    s.set_clock(std::sync::Arc::new(|| T0 + 10_000));
    s.sync_setup("f1x7ure0-0000-4000-8000-000000000007", "Fixture desktop").unwrap();
    s.close();
    let c = Connection::open(path).unwrap();
    let peer = "f1x7ure0-0000-4000-8000-0000000000b2";
    let stamp = format!("{:015}-{:010}-{peer}", T0 + 20_000, 0);
    c.execute_batch(&format!(
        "INSERT INTO sync_peers (device_id, name, ops_applied, segments_applied, checkpoint_applied, last_applied_at)
             VALUES ('{peer}', 'Laptop', 3, 2, 1, {t});
         INSERT INTO sync_applied_segments (device_id, lo, hi) VALUES ('{peer}', 1, 2);
         INSERT INTO sync_applied_ops (device_id, lo, hi) VALUES ('{peer}', 1, 3);
         INSERT INTO sync_pending (device_id, kind, seq, missing, since)
             VALUES ('{peer}', 'segment', 3, '[\"{miss}\"]', {t});
         INSERT INTO sync_tombstones (kind, id, stamp) VALUES ('session', 's-purged-on-laptop', '{stamp}'),
             ('entry', 'e0000000-0000-4000-8000-00000000dead', '{stamp}');
         INSERT INTO sync_dropped (session_id) VALUES ('s-evicted-then-purged');",
        t = T0 + 20_000,
        miss = sha256_hex(b"a picture still on its way"),
    ))
    .unwrap();
}

/// Regenerate `tests/fixtures/db/v<k>.db` for every version. Never run this for versions that have
/// shipped; only to add the newest. `cargo test --test it storage_file::upgrades -- --ignored`.
#[test]
#[ignore = "writes the committed fixtures; run by hand when adding a schema version"]
fn regenerate_db_fixtures() {
    for k in 1..=LATEST {
        let path = db_fixture(&format!("v{k}.db"));
        if path.exists() && std::env::var("KEEPSAKE_REGENERATE_ALL").is_err() {
            eprintln!("keeping {}", path.display());
            continue;
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        build_fixture(&path, k);
        eprintln!("wrote {} ({} bytes)", path.display(), std::fs::metadata(&path).unwrap().len());
    }
}

fn fixture_paths() -> Vec<(u32, PathBuf)> {
    (1..=LATEST)
        .map(|k| {
            let p = db_fixture(&format!("v{k}.db"));
            assert!(
                p.exists(),
                "missing fixture {}: every schema version needs one (see tests/fixtures/db/README.md)",
                p.display()
            );
            (k, p)
        })
        .collect()
}

// ---- T17 -----------------------------------------------------------------------------------

#[test]
fn t17_committed_fixtures_match_the_migration_files() {
    let _serial = serial();
    // Shipped migrations are append-only: a fixture's schema is what its migrations produce.
    for (k, path) in fixture_paths() {
        let c = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        assert_eq!(version(&c), k, "{}", path.display());
        assert_eq!(
            schema(&c),
            schema(&reference(k)),
            "v{k}.db no longer matches migrations 1..={k}: was a shipped migration edited?"
        );
        let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal", "v{k}.db");
    }
}

#[test]
fn t17_every_fixture_upgrades_to_latest_keeping_every_row() {
    let _serial = serial();
    let started = Instant::now();
    let mut lines = Vec::new();
    for (k, _) in fixture_paths() {
        let (_d, db) = temp_db();
        copy_db_fixture(&format!("v{k}.db"), &db);
        let before = snapshot(&open_rw(&db));
        assert_eq!(before.texts.len(), 3, "v{k}");
        let mut h = Host::spawn(&db);
        let hello = h.hello();
        assert!(hello["dbError"].is_null(), "v{k}: {hello}");
        assert_eq!(hello["schemaVersion"], json!(LATEST), "v{k}");
        // what the extension sees
        assert_eq!(h.ok("settings.get", json!({"keys": ["theme", "模型"]}))["模型"]["model"], "gpt-x");
        let live = h.ok("history.get", json!({"images": "ref"}));
        assert_eq!(live["length"], 5, "v{k}: {live}");
        assert_eq!(live["activeSessionId"], "s-bound");
        // the 2 entries trimmed off the live history are kept ahead of its window
        assert_eq!(live["offset"], 2, "v{k}: {live}");
        let bound = h.ok("sessions.get", json!({"id": "s-bound", "images": "ref"}));
        assert_eq!(bound["entries"].as_array().unwrap().len(), 7, "v{k}: {bound}");
        assert_eq!(bound["entries"][2], live["entries"][0], "v{k}: the window starts at body index 2");
        let list = h.list(json!({}));
        assert_eq!(list.as_array().unwrap().len(), 3, "v{k}: {list}");
        assert_eq!(list[0]["id"], "s-pinned", "pinned first");
        assert_eq!(h.list(json!({"query": "世界"}))[0]["id"], "s-cjk");
        assert_eq!(h.list(json!({"query": "界"}))[0]["id"], "s-cjk");
        let pinned = h.ok("sessions.get", json!({"id": "s-pinned"}));
        let url = pinned["entries"][0]["content"][1]["image_url"]["url"].as_str().unwrap().to_owned();
        assert!(url.starts_with("data:image/png;base64,"), "images inline again: {url}");
        let plan = h.ok("attach.summaryPlan", json!({"attachId": "a-live"}));
        assert_eq!(plan["needed"], false, "v{k}: {plan}");
        // the trash: the v5 fixture's deleted chat (older fixtures' bodies were a prefix of the
        // live history, so the upgrade trashed nothing)
        let trash = h.ok("trash.list", json!({}));
        let items = trash["items"].as_array().unwrap();
        assert_eq!(items.len(), usize::from(k >= 5), "v{k}: {trash}");
        if k >= 5 {
            assert_eq!(items[0]["id"], "s-trashed");
            assert_eq!(items[0]["reason"], "deleted");
            // the other version of s-cjk's reply
            let cjk = h.ok("sessions.get", json!({"id": "s-cjk"}));
            assert_eq!(cjk["forks"][0]["versions"], 2, "{cjk}");
            assert_eq!(h.list(json!({"query": "first reply"}))[0]["id"], "s-cjk");
        }
        assert_eq!(h.close().0, Some(0));

        // every row of every table the fixture had, on the fixture's columns
        let c = open_rw(&db);
        let (rows, problems) = compare_rows(&before, &c);
        assert_eq!(schema(&c), schema(&reference(LATEST)), "v{k}: schema after upgrade");
        assert_eq!(integrity(&db), "ok");
        let misses: i64 = c
            .query_row(
                "SELECT (SELECT count(*) FROM session_entries WHERE json_type(entry, '$.attachId') = 'text'
                            AND attach_id IS NOT json_extract(entry, '$.attachId'))
                      + (SELECT count(*) FROM session_entries WHERE entry_id IS NULL
                            OR entry_id IS NOT json_extract(entry, '$.entryId'))",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(misses, 0, "v{k}: attach_id backfill, entryId in the JSON and the column");
        if k < 5 {
            let (from, auto): (i64, i64) = c
                .query_row(
                    "SELECT live_from, (SELECT count(*) FROM sessions WHERE name_auto = 1) FROM live_state",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!((from, auto), (2, 0), "v{k}: live_from, auto-named sessions");
        }
        lines.push(format!(
            "v{k} → v{LATEST}: {} tables, rows {rows}/{rows} preserved, {} problems",
            before.content.len(),
            problems.len()
        ));
        assert!(problems.is_empty(), "v{k}: {problems:#?}");
        drop(c);
        // and the upgraded database takes writes
        let mut h = Host::spawn(&db);
        let r = h.ok(
            "sessions.appendTo",
            json!({"id": "s-cjk", "entry": user("after upgrade"), "clientRequestId": "u-1"}),
        );
        assert_eq!(r["length"], 4, "{r}");
        h.ok("settings.set", json!({"map": {"theme": "light"}}));
        let r = h.ok("history.append", json!({"entry": user("the chat goes on"), "clientRequestId": "u-2"}));
        assert_eq!(r["length"], 6, "{r}");
        assert_eq!(h.ok("sessions.get", json!({"id": "s-bound"}))["entries"].as_array().unwrap().len(), 8);
        assert_eq!(h.close().0, Some(0));
    }
    eprintln!("T17: {}; {} ms", lines.join("; "), started.elapsed().as_millis());
}

/// Too new: one version past LATEST, in WAL mode (as a newer host leaves it) and in rollback
/// mode (a restored `VACUUM INTO` / backup copy). Every operation is refused with
/// `db_too_new`, nothing is written, the file stays byte-identical.
#[test]
fn t17_a_database_one_version_too_new_is_refused_and_left_byte_identical() {
    let _serial = serial();
    let mut lines = Vec::new();
    for journal in ["wal", "delete"] {
        let (_d, db) = temp_db();
        copy_db_fixture(&format!("v{LATEST}.db"), &db);
        {
            let c = open_rw(&db);
            c.pragma_update(None, "user_version", LATEST + 1).unwrap();
            c.execute_batch(&format!("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode={journal};"))
                .unwrap();
        }
        let wal = db.with_file_name("keepsake.db-wal");
        assert!(!wal.exists(), "no -wal after a clean close");
        let before = std::fs::read(&db).unwrap();
        let mut h = Host::spawn(&db);
        let hello = h.hello();
        assert_eq!(hello["dbError"]["code"], "db_too_new", "{journal}: {hello}");
        let ops: Vec<String> =
            hello["ops"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().to_owned()).collect();
        let mut served = Vec::new();
        for op in ops.iter().filter(|o| *o != "host.hello") {
            let r = h.call(op, json!({}));
            if r["error"]["code"] != "db_too_new" {
                served.push(format!("{op}: {r}"));
            }
        }
        // a write with real arguments, twice (the busy-retry path reopens on every request)
        for _ in 0..2 {
            assert_eq!(
                h.err("history.append", json!({"entry": user("x"), "clientRequestId": "w"})),
                "db_too_new"
            );
        }
        assert_eq!(h.close().0, Some(0));
        let (code, _, err) = cli(&db, &["inspect"]);
        assert_ne!(code, 0, "inspect of a too-new database");
        assert!(err.contains("newer"), "{err}");
        let after = std::fs::read(&db).unwrap();
        let wal_bytes = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        lines.push(format!(
            "{journal}: ops served {}/{}, bytes unchanged {}, -wal bytes {wal_bytes}",
            served.len(),
            ops.len() - 1 + 2,
            after == before
        ));
        assert!(served.is_empty(), "{journal}: operations served on a too-new database: {served:?}");
        assert!(
            after == before,
            "{journal}: the too-new database changed ({} → {} bytes)",
            before.len(),
            after.len()
        );
        assert_eq!(wal_bytes, 0, "{journal}: frames written to the -wal");
    }
    eprintln!("T17 too new (user_version {}): {}", LATEST + 1, lines.join("; "));
}

// ---- T16a: a crash after every statement -----------------------------------------------------

const CHILD_DB: &str = "KEEPSAKE_T16_DB";
const CHILD_FAIL_AT: &str = "KEEPSAKE_T16_FAIL_AT";

/// The host's migration runner on `conn`, as `store::migrate::migrate_to` runs it: one
/// `BEGIN IMMEDIATE` transaction, `user_version` read under the lock, `migrate::apply` (every
/// statement, Rust step, version update and index build, `hit(i)` after the i-th), the commit,
/// then `hit(n)`. Returns n, the number of crash points before the commit.
fn run_migrations(conn: &mut Connection, mut hit: impl FnMut(usize)) -> usize {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    let found = migrate::schema_version(&tx).unwrap();
    let n = migrate::apply(&tx, found, LATEST, &mut hit).expect("migrations");
    tx.commit().unwrap();
    hit(n);
    n
}

/// Child side of T16a (does nothing unless started by the parent below): run the host's runner
/// on the host's own connection setup and SIGKILL itself after step `KEEPSAKE_T16_FAIL_AT`.
#[test]
fn t16_child_process_role() {
    let (Ok(db), Ok(at)) = (std::env::var(CHILD_DB), std::env::var(CHILD_FAIL_AT)) else { return };
    let at: usize = at.parse().unwrap();
    let mut conn =
        keepsake_host::store::open::open_connection(Path::new(&db), keepsake_host::store::Mode::ReadWrite)
            .expect("open like the host");
    run_migrations(&mut conn, |i| {
        if i == at {
            // SAFETY: kill(2) on ourselves: the crash under test.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            thread::sleep(Duration::from_secs(10));
        }
    });
    panic!("step {at} never reached");
}

#[test]
fn t16_a_crash_after_any_migration_statement_leaves_the_old_version_intact() {
    let _serial = serial();
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let exe = std::env::current_exe().unwrap();
    // the child's name in the test binary, for `--exact`: `<this module's path>::t16_child_process_role`
    let child_test = format!("{}::t16_child_process_role", module_path!().split_once("::").unwrap().1);
    let mut lines = Vec::new();
    for from in [0u32, 1, 4] {
        let (_d, dir) = temp_db();
        let setup = |db: &Path| {
            let _ = std::fs::remove_dir_all(db.parent().unwrap());
            if from > 0 {
                copy_db_fixture(&format!("v{from}.db"), db);
            }
        };
        // count the steps on a scratch copy
        let scratch = dir.with_file_name("scratch.db");
        setup(&scratch);
        let before: Option<Before> = (from > 0).then(|| snapshot(&open_rw(&scratch)));
        let steps = {
            let mut c =
                keepsake_host::store::open::open_connection(&scratch, keepsake_host::store::Mode::ReadWrite)
                    .unwrap();
            run_migrations(&mut c, |_| {})
        };
        let (mut partial, mut bad_integrity, mut kept_rows, mut recovered) = (0, 0, 0, 0);
        for at in 0..=steps {
            let db = dir.clone();
            setup(&db);
            let st = Command::new(&exe)
                .args([child_test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD_DB, &db)
                .env(CHILD_FAIL_AT, at.to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert_eq!(st.signal(), Some(libc::SIGKILL), "step {at}: the child was not killed: {st:?}");
            let c = open_rw(&db);
            let want = if at < steps { from } else { LATEST };
            let v = version(&c);
            if v != want || schema(&c) != schema(&reference(want)) {
                partial += 1;
                eprintln!(
                    "from v{from}, crash after step {at}: user_version {v}, schema differs from v{want}"
                );
            }
            if integrity(&db) != "ok" {
                bad_integrity += 1;
            }
            if let Some(b) = &before {
                let (_, problems) = compare_rows(b, &c);
                if problems.is_empty() {
                    kept_rows += 1;
                } else {
                    eprintln!("from v{from}, crash after step {at}: {problems:?}");
                }
            }
            drop(c);
            // the next start finishes the job, and what it finishes keeps every row too
            let s = keepsake_host::store::Store::open(&db).expect("reopen after the crash");
            let reopened = s.schema_version().unwrap() == LATEST;
            s.close();
            let kept = before.as_ref().is_none_or(|b| {
                let (_, problems) = compare_rows(b, &open_rw(&db));
                if !problems.is_empty() {
                    eprintln!("from v{from}, crash after step {at}, reopened: {problems:?}");
                }
                problems.is_empty()
            });
            if reopened && kept && integrity(&db) == "ok" {
                recovered += 1;
            }
        }
        let n = steps + 1;
        lines.push(format!(
            "from v{from}: crash points {n}, partially applied {partial}, integrity ok {}/{n}, rows kept {}, reopened to v{LATEST} with every row {recovered}/{n}",
            n - bad_integrity,
            if from > 0 { format!("{kept_rows}/{n}") } else { "n/a".into() },
        ));
        assert_eq!(partial, 0, "from v{from}: partially applied migrations");
        assert_eq!(bad_integrity, 0, "from v{from}: integrity_check failures");
        assert_eq!(recovered, n, "from v{from}: reopen did not migrate");
        if from > 0 {
            assert_eq!(kept_rows, n, "from v{from}: rows changed");
        }
    }
    eprintln!("T16 failpoints: {}; {} ms", lines.join("; "), started.elapsed().as_millis());
}

// ---- T16b: kill -9 of the real host mid-migration ---------------------------------------------

/// A v1 database large enough that migrating it takes measurable time: the v1 fixture plus
/// `sessions` × `per` saved entries (every third an attach entry that migration 2 backfills)
/// and a long trimmed history.
fn build_big_v1(path: &Path, sessions: usize, per: usize) {
    copy_db_fixture("v1.db", path);
    let mut c = open_rw(path);
    let tx = c.transaction().unwrap();
    let filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(6);
    for s in 0..sessions {
        let id = format!("big-{s:05}");
        let entries: Vec<Value> = (0..per)
            .map(|i| {
                if i % 3 == 0 {
                    attach_entry(&format!("a-{s}-{i}"), &format!("https://example.com/{s}/{i}"), &filler)
                } else {
                    json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("{i}: {filler}")})
                }
            })
            .collect();
        insert_session(&tx, 1, &id, &format!("Big {s}"), false, 10 + s as i64, &entries);
    }
    for i in 0..sessions {
        insert_entry(
            &tx,
            1,
            "history_trimmed",
            None,
            10 + i,
            &attach_entry(&format!("t-{i}"), "https://t.example/", &filler),
        );
    }
    tx.commit().unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
}

#[test]
fn t16_kill_9_while_the_host_migrates_a_large_database_leaves_version_k_or_k_plus_1() {
    let _serial = serial();
    let started = Instant::now();
    let kills = size("KEEPSAKE_MIGRATION_KILLS", 100, 1000);
    let sessions = size("KEEPSAKE_MIGRATION_SESSIONS", 200, 200);
    let (_t, template) = temp_db();
    build_big_v1(&template, sessions, 60);
    let template_bytes = std::fs::metadata(&template).unwrap().len();
    let before = snapshot(&open_rw(&template));
    let ref_v1 = schema(&reference(1));
    let ref_latest = schema(&reference(LATEST));

    let (_w, work) = temp_db();
    let fresh = |db: &Path| {
        let _ = std::fs::remove_dir_all(db.parent().unwrap());
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        std::fs::copy(&template, db).unwrap();
    };
    // How long a start that migrates takes (spawn to the hello reply), median of three.
    let mut took: Vec<Duration> = (0..3)
        .map(|_| {
            fresh(&work);
            let t = Instant::now();
            let mut h = Host::spawn(&work);
            let hello = h.hello();
            assert_eq!(hello["schemaVersion"], json!(LATEST), "{hello}");
            let d = t.elapsed();
            h.close();
            d
        })
        .collect();
    took.sort();
    let window = took[1].as_micros() as u64;

    let mut rng = Rng::from_env();
    let seed = rng.seed();
    let (mut at_k, mut at_k1, mut other, mut bad_integrity, mut rows_changed, mut mid) = (0, 0, 0, 0, 0, 0);
    let mut recovered = 0;
    for i in 0..kills {
        fresh(&work);
        let delay = Duration::from_micros(rng.range(0, window));
        let mut h = Host::spawn(&work);
        thread::sleep(delay);
        let _ = h.child.kill(); // SIGKILL
        let _ = h.child.wait();
        drop(h);
        let wal = std::fs::metadata(work.with_file_name("keepsake.db-wal")).map(|m| m.len()).unwrap_or(0);
        let c = open_rw(&work);
        let v = version(&c);
        let s = schema(&c);
        match v {
            1 if s == ref_v1 => {
                at_k += 1;
                if wal > 0 {
                    mid += 1; // killed with migration frames in the WAL, uncommitted
                }
            }
            v if v == LATEST && s == ref_latest => at_k1 += 1,
            _ => {
                other += 1;
                eprintln!(
                    "kill {i} after {delay:?}: user_version {v} with a schema matching neither version"
                );
            }
        }
        let ic = integrity(&work);
        if ic != "ok" {
            bad_integrity += 1;
            eprintln!("kill {i}: integrity_check: {ic}");
        }
        let (_, problems) = compare_rows(&before, &c);
        if !problems.is_empty() {
            rows_changed += 1;
            eprintln!("kill {i}: {problems:?}");
        }
        drop(c);
        // every tenth: the next start completes the migration
        if i % 10 == 0 {
            let mut h = Host::spawn(&work);
            let hello = h.hello();
            if hello["schemaVersion"] == json!(LATEST) && hello["dbError"].is_null() {
                recovered += 1;
            }
            h.close();
        }
    }
    eprintln!(
        "T16: kill -9 mid-migration {kills} (database {} MB, migration start {} ms, kill delay 0–{} ms): \
         version k {at_k} (of which {mid} with uncommitted frames in the -wal), version k+1 {at_k1}, \
         partially applied {other}, integrity ok {}/{kills}, rows changed {rows_changed}, restarted to v{LATEST} \
         {recovered}/{}, {} s, seed {seed}",
        template_bytes / 1_000_000,
        took[1].as_millis(),
        window / 1000,
        kills - bad_integrity,
        kills.div_ceil(10),
        started.elapsed().as_secs()
    );
    assert_eq!(other, 0, "partially applied migrations");
    assert_eq!(bad_integrity, 0, "integrity_check failures");
    assert_eq!(rows_changed, 0, "rows changed by a killed migration");
    assert_eq!(recovered, kills.div_ceil(10), "restarts that did not finish the migration");
}
