//! The content-search index (schema 3, storage-model §5.3) through the real binary over pipes:
//! whatever was written — import, appendTo, appends to a loaded session, a new chat (a session
//! from its first entry, docs/keeps.md), trimming its live window, removals to the trash,
//! restores, delete, clearAll — every query's rows and snippets equal a scan of the whole text of
//! each session in the drawer, and the trash is not searched: no session in the trash has
//! postings.
use crate::harness::*;

use serde_json::{json, Value};

use keepsake_host::domain::sessions::{search_text, snippet};
use keepsake_host::domain::text::{js_trim, lower};

/// Words that exercise the lower-casing rules (final sigma, dotted capital I, non-BMP) and CJK.
const WORDS: &[&str] = &[
    "the",
    "Whale",
    "QUILL",
    "amber",
    "ΟΔΟΣ",
    "σοφός",
    "İstanbul",
    "i̇",
    "鲸",
    "琥珀",
    "数据",
    "缓存",
    "会话",
    "😀",
    "Straße",
    "naïve",
    "\n",
    "  ",
    "\n\n",
    "Σ",
    "ς",
    "x",
];

fn text(rng: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for _ in 0..words {
        s.push_str(WORDS[rng.range(0, WORDS.len() as u64 - 1) as usize]);
        if rng.range(0, 2) > 0 {
            s.push(' ');
        }
    }
    s
}

fn session(rng: &mut Rng, i: usize) -> Value {
    let n = rng.range(1, 12) as usize;
    let entries: Vec<Value> = (0..n)
        .map(|k| {
            let words = rng.range(0, 900) as usize;
            json!({"role": if k % 2 == 0 { "user" } else { "assistant" }, "content": text(rng, words)})
        })
        .collect();
    json!({
        "id": format!("s-{i:03}"),
        "name": format!("Session {i} {}", WORDS[i % WORDS.len()].trim()),
        "createdAt": 1_764_700_000_000i64 + i as i64 * 1000,
        "pinned": i % 7 == 0,
        "entries": entries,
    })
}

/// What `sessions.list({query})` must answer, computed by scanning every body (§5.3).
fn expected(sessions: &[Value], query: &str) -> Vec<Value> {
    let q = lower(js_trim(query));
    let mut created: Vec<i64> = sessions.iter().map(|s| s["createdAt"].as_i64().unwrap()).collect();
    created.sort();
    created.dedup();
    assert_eq!(created.len(), sessions.len(), "the model orders sessions by distinct createdAt");
    let mut order: Vec<&Value> = sessions.iter().collect();
    order.sort_by_key(|s| (!s["pinned"].as_bool().unwrap(), -s["createdAt"].as_i64().unwrap()));
    let mut out = Vec::new();
    for s in order {
        if q.is_empty() {
            // a blank query is no query: every session, no contentMatch (§5.3)
            out.push(json!({"id": s["id"], "contentMatch": null}));
        } else if lower(s["name"].as_str().unwrap()).contains(&q) {
            out.push(json!({"id": s["id"], "contentMatch": false}));
        } else if let Some(sn) = snippet(&search_text(s["entries"].as_array().unwrap()), &q) {
            out.push(json!({"id": s["id"], "contentMatch": true, "snippet": sn}));
        }
    }
    out
}

fn listed(h: &mut Host, query: &str) -> Vec<Value> {
    let rows = h.list(json!({ "query": query }));
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut v = json!({"id": r["id"], "contentMatch": r["contentMatch"]});
            if let Some(s) = r.get("snippet") {
                v["snippet"] = s.clone();
            }
            v
        })
        .collect()
}

/// Queries: substrings of the bodies (1–6 characters, some upper-cased) and a few misses.
fn queries(rng: &mut Rng, sessions: &[Value], n: usize) -> Vec<String> {
    let mut out =
        vec!["鲸".to_owned(), "琥珀".to_owned(), "quill".to_owned(), "σ".to_owned(), "ΟΣ Σ".to_owned()];
    out.push("i̇".to_owned());
    out.push("no such words here".to_owned());
    while out.len() < n {
        let s = &sessions[rng.range(0, sessions.len() as u64 - 1) as usize];
        let body = search_text(s["entries"].as_array().unwrap());
        let chars: Vec<char> = body.chars().collect();
        if chars.is_empty() {
            continue;
        }
        let len = rng.range(1, 7) as usize;
        let at = rng.range(0, chars.len() as u64 - 1) as usize;
        let q: String = chars[at..(at + len).min(chars.len())].iter().collect();
        if js_trim(&q).is_empty() {
            continue;
        }
        out.push(if rng.range(0, 1) == 0 { q.to_uppercase() } else { q });
    }
    out
}

/// Queries of 2–6 characters that span `at` (a char offset in `body`), skipping blank ones.
fn across(body: &str, at: usize) -> Vec<String> {
    let chars: Vec<char> = body.chars().collect();
    (1..=3)
        .flat_map(|before| (1..=3).map(move |after| (before, after)))
        .filter(|&(before, after)| before <= at && at + after <= chars.len())
        .map(|(before, after)| chars[at - before..at + after].iter().collect::<String>())
        .filter(|q| !js_trim(q).is_empty())
        .collect()
}

fn check_all(h: &mut Host, sessions: &[Value], qs: &[String], when: &str) -> usize {
    let mut hits = 0;
    for q in qs {
        let want = expected(sessions, q);
        hits += want.len();
        assert_eq!(listed(h, q), want, "{when}: query {q:?}");
    }
    hits
}

/// The model of a session the host created (auto-keep, a restored trash item): its row as the
/// host reports it, its body as sent.
fn model_row(h: &mut Host, id: &str, entries: &[Value]) -> Value {
    let s = h.ok("sessions.get", json!({ "id": id }));
    assert_eq!(bare(&s["entries"]), json!(entries), "session {id} holds what was sent");
    json!({"id": id, "name": s["name"], "createdAt": s["createdAt"], "pinned": s["pinned"], "entries": entries})
}

/// `(postings without a document, drawer sessions missing from the index, trashed sessions
/// still in it)`.
fn orphans(db: &std::path::Path) -> (i64, i64, i64) {
    let c = sql(db);
    let grams: i64 = c
        .query_row(
            "SELECT count(*) FROM search_grams g WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.doc = g.doc)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let unindexed: i64 = c
        .query_row(
            "SELECT count(*) FROM sessions WHERE trashed_at IS NULL AND id NOT IN (SELECT session_id FROM search_docs)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let trashed: i64 = c
        .query_row(
            "SELECT count(*) FROM sessions WHERE trashed_at IS NOT NULL AND id IN (SELECT session_id FROM search_docs)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (grams, unindexed, trashed)
}

#[test]
fn the_index_answers_like_a_whole_text_scan_through_every_write() {
    let mut rng = Rng::from_env();
    eprintln!("KEEPSAKE_SEED={} replays this run", rng.seed());
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"maxSessions": 0}}));
    let mut sessions: Vec<Value> = (0..40).map(|i| session(&mut rng, i)).collect();
    let doc = json!({"format": "keepsake.sessions", "version": 1, "exportedAt": "2026-12-03T00:00:00+00:00",
        "sessions": sessions, "images": {}});
    h.ok("storage.import", json!({ "document": doc }));
    let pieces: i64 = sql(&db).query_row("SELECT count(*) FROM search_pieces", [], |r| r.get(0)).unwrap();
    assert!(pieces > 100, "bodies span many pieces: {pieces}");
    let qs = queries(&mut rng, &sessions, 60);
    let mut hits = check_all(&mut h, &sessions, &qs, "after import");

    // appendTo: text added to a body is found, across the old end
    let mut qs2 = queries(&mut rng, &sessions, 40);
    qs2.push("   ".to_owned());
    for i in [1usize, 5, 9] {
        let old_end = search_text(sessions[i]["entries"].as_array().unwrap()).chars().count();
        let add = text(&mut rng, 300);
        let id = sessions[i]["id"].clone();
        h.ok("sessions.appendTo", json!({"id": id, "entry": user(&add)}));
        sessions[i]["entries"].as_array_mut().unwrap().push(user(&add));
        qs2.extend(across(&search_text(sessions[i]["entries"].as_array().unwrap()), old_end));
    }
    assert!(qs2.len() > 41 + 3, "queries across the old ends: {:?}", &qs2[41..]);
    hits += check_all(&mut h, &sessions, &qs2, "after appendTo");

    // an append to a loaded session lands in it and is indexed at once (saving it changes nothing)
    let id = sessions[3]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.load", json!({ "id": id }));
    let add = text(&mut rng, 50);
    h.ok("history.append", json!({"entry": assistant(&add)}));
    sessions[3]["entries"].as_array_mut().unwrap().push(assistant(&add));
    hits += check_all(&mut h, &sessions, &qs, "after an append to a loaded session");
    assert_eq!(h.ok("sessions.save", json!({ "id": id }))["created"], json!(false));
    hits += check_all(&mut h, &sessions, &qs, "after saving the loaded session");

    // "New chat": the next append is kept in a session of its own, found by search as it grows;
    // the entries the trim rule takes out of the live window stay in it and stay searchable
    h.ok("history.clear", json!({}));
    let first = text(&mut rng, 40);
    let r = h.ok("history.append", json!({"entry": user(&first)}));
    assert_eq!(r["kept"]["created"], json!(true));
    let live_id = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    let mut chat = vec![user(&first)];
    sessions.push(model_row(&mut h, &live_id, &chat));
    let live_at = sessions.len() - 1;
    hits += check_all(&mut h, &sessions, &qs, "after the first entry of a new chat");
    for k in 0..64 {
        let words = text(&mut rng, 20);
        let e = if k % 2 == 0 { assistant(&words) } else { user(&words) };
        h.ok("history.append", json!({ "entry": e }));
        chat.push(e);
    }
    let offset = h.ok("history.meta", json!({}))["offset"].as_u64().unwrap() as usize;
    assert!(offset > 0, "the live window was trimmed");
    sessions[live_at] = model_row(&mut h, &live_id, &chat);
    let mut qs3 = queries(&mut rng, &sessions, 30);
    let kept_prefix = search_text(&chat[..offset]).chars().count();
    qs3.extend(across(&search_text(&chat), kept_prefix / 2));
    hits += check_all(&mut h, &sessions, &qs3, "after trimming the live window");

    // a removal moves the entry to the trash: its text leaves the chat's postings and the trash
    // is not searched; restored, it is a session of its own, searched again
    let removed = chat.remove(offset);
    assert_eq!(h.ok("history.removeAt", json!({"index": 0})), json!({"removed": true}));
    sessions[live_at] = model_row(&mut h, &live_id, &chat);
    let removed_text = search_text(std::slice::from_ref(&removed));
    qs3.extend(across(&removed_text, removed_text.chars().count() / 2));
    hits += check_all(&mut h, &sessions, &qs3, "after a removal to the trash");
    assert_eq!(orphans(&db), (0, 0, 0), "the removed entry's trash item has no postings");
    let items = h.ok("trash.list", json!({}))["items"].clone();
    let item = items.as_array().unwrap().iter().find(|i| i["from"]["sessionId"] == json!(live_id)).unwrap();
    let item_id = item["id"].as_str().unwrap().to_owned();
    assert_eq!(h.ok("trash.restore", json!({ "id": item_id }))["kind"], json!("entries"));
    sessions.push(model_row(&mut h, &item_id, std::slice::from_ref(&removed)));
    hits += check_all(&mut h, &sessions, &qs3, "after restoring the removed entry");
    assert_eq!(orphans(&db), (0, 0, 0), "the restored item is indexed");

    // delete: a session in the trash is not searched and keeps no postings; restored, it is
    for i in [0usize, 2, 7] {
        h.ok("sessions.delete", json!({"id": sessions[i]["id"]}));
    }
    let mut deleted = Vec::new();
    for i in [7usize, 2, 0] {
        deleted.push(sessions.remove(i));
    }
    hits += check_all(&mut h, &sessions, &qs, "after delete");
    assert_eq!(orphans(&db), (0, 0, 0), "sessions missing from the index, or trashed ones in it");
    let back = deleted.remove(1);
    h.ok("trash.restore", json!({"id": back["id"]}));
    sessions.push(back);
    hits += check_all(&mut h, &sessions, &qs, "after restoring a deleted session");
    assert_eq!(orphans(&db), (0, 0, 0));

    h.ok("sessions.clearAll", json!({}));
    let c = sql(&db);
    for t in ["search_docs", "search_pieces", "search_grams"] {
        let n: i64 = c.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "{t} after clearAll");
    }
    let trashed = h.ok("trash.list", json!({}))["items"].as_array().unwrap().len();
    assert_eq!(trashed, sessions.len() + deleted.len(), "clearAll moved every session to the trash");
    assert_eq!(h.list(json!({"query": "x"})), json!([]), "the trash is not searched");
    assert_eq!(h.close().0, Some(0));
    eprintln!(
        "search index: {} queries, {hits} rows compared with a whole-text scan, seed {}",
        qs.len() * 6 + qs2.len() + qs3.len() * 3,
        rng.seed()
    );
}

#[test]
fn sessions_missing_from_the_index_are_indexed_before_the_first_query() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    // the chat is kept in a session from its first entry (auto-keep)
    let r = h.ok("history.replace", json!({"entries": [user("the quill and the 鲸"), assistant("ok")]}));
    let id = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    // and one more session that goes to the trash: the trash is never indexed
    h.ok("history.clear", json!({}));
    let r = h.ok("history.append", json!({"entry": user("ok, a chat in the trash")}));
    let gone = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    h.ok("sessions.delete", json!({ "id": gone }));
    assert_eq!(h.close().0, Some(0));
    // another tool (or an interrupted upgrade) left the session out of the index
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("DELETE FROM search_grams; DELETE FROM search_docs;").unwrap();
    drop(c);
    assert_eq!(orphans(&db), (0, 1, 0));
    let mut h = Host::spawn(&db);
    let rows = h.list(json!({"query": "OK"}));
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], json!(id), "{rows}");
    assert_eq!(rows[0]["snippet"], "the quill and the 鲸 ok ");
    assert_eq!(orphans(&db), (0, 0, 0), "the drawer's session indexed, the trashed one not");
    assert_eq!(h.close().0, Some(0));
}
