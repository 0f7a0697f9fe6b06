//! Local rows → replicated state → rows again is the identity (design §3): chats made by every
//! write path of the store — append, regenerate, edit & resend, switching versions, nested forks,
//! removals and truncations to the trash (empty versions included), restores of entries and of
//! chats, rename, pin, imports (an export with versions, a browser dump), a summary written back,
//! an append to a chat that is not the live one, pictures, a failed mark — come back on another
//! device row for row (sessions, entries with their JSON and place, branches, forks, image
//! references, search data), whether the state reaches it as operations or as a checkpoint; and
//! the device that wrote them never had to lay its rows out again (`relaid` 0).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use keepsake_host::domain::attach::Ctx;
use keepsake_host::domain::import::SettingsMode;
use keepsake_host::store::{AttachArgs, ExportFormat, FailedTarget, ImportOptions, Store};
use serde_json::{json, Value};

use super::*;
use crate::harness::{data_url, png_bytes};

/// A device's rows, without what is its own (row ids, insert order, when rows were written
/// here, the live window).
fn rows(db: &std::path::Path) -> Value {
    let c = rusqlite::Connection::open(db).unwrap();
    let q = |sql: &str| -> Vec<Value> {
        let mut st = c.prepare(sql).unwrap();
        let n = st.column_count();
        st.query_map([], |r| {
            let mut row = Vec::new();
            for i in 0..n {
                row.push(match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(x) => json!(x),
                    rusqlite::types::ValueRef::Real(x) => json!(x),
                    rusqlite::types::ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                    rusqlite::types::ValueRef::Blob(b) => json!(b.len()),
                });
            }
            Ok(Value::Array(row))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    // the searchable text, compared as its lines (how it grew decides their order: an append
    // goes after the other versions' text until the next rebuild)
    let mut search = q("SELECT session_id, group_concat(text, '') FROM
                          (SELECT d.session_id, p.text FROM search_docs d LEFT JOIN search_pieces p ON p.doc = d.doc
                           ORDER BY d.session_id, p.start)
                        GROUP BY session_id ORDER BY 1");
    for row in &mut search {
        let mut lines: Vec<&str> = row[1].as_str().unwrap_or("").lines().collect();
        lines.sort_unstable();
        row[1] = json!(lines);
    }
    json!({
        "search": search,
        "sessions": q("SELECT id, name, name_lower, name_auto, pinned, created_at, entry_count, extra, trashed_at,
                              trash_reason, trash_origin FROM sessions ORDER BY id"),
        "entries": q("SELECT e.entry_id, e.session_id, b.fork_entry_id, b.version, e.position, e.role, e.content_chars,
                             e.image_count, e.attach_id, e.entry
                      FROM session_entries e LEFT JOIN session_branches b ON b.id = e.branch_id ORDER BY e.entry_id"),
        "branches": q("SELECT session_id, fork_entry_id, version,
                              (SELECT count(*) FROM session_entries e WHERE e.branch_id = b.id)
                       FROM session_branches b ORDER BY 1, 2, 3"),
        "forks": q("SELECT session_id, fork_entry_id, chosen, versions FROM session_forks ORDER BY 1, 2"),
        "refs": q("SELECT e.entry_id, r.sha256 FROM image_refs r JOIN session_entries e ON e.id = r.holder_id ORDER BY 1, 2"),
        "images": q("SELECT sha256, mime, width, height, byte_length FROM images ORDER BY 1"),
        "settings": q("SELECT key, value FROM settings WHERE key IN ('systemPrompt', 'trashDays') ORDER BY key"),
    })
}

fn tick(clock: &AtomicI64) {
    clock.fetch_add(61_000, Ordering::SeqCst);
}

fn live_len(s: &mut Store) -> u64 {
    s.history_meta().unwrap()["length"].as_u64().unwrap()
}

fn bound(s: &mut Store) -> String {
    s.history_meta().unwrap()["activeSessionId"].as_str().unwrap().to_owned()
}

fn append(s: &mut Store, role: &str, content: Value) {
    s.history_append(entry(json!({"role": role, "content": content})), false, false, None, None).unwrap();
}

fn newest_trash(s: &mut Store) -> String {
    s.trash_list().unwrap()["items"][0]["id"].as_str().unwrap().to_owned()
}

/// Chats made by every write path, the clock moving between writes.
fn make_chats(s: &mut Store, clock: &AtomicI64, check: &mut dyn FnMut(&mut Store, &str)) {
    let say = |s: &mut Store, role: &str, text: &str| {
        tick(clock);
        append(s, role, json!(text));
    };
    // chat 1: a conversation, a regenerated reply, an edit & resend of its first message, a
    // switch back, a fork inside that version (nested), a switch forward again
    say(s, "user", "What is a fjord?");
    check(s, "1: say(s, user, What is a fjord?);");
    say(s, "assistant", "A long narrow inlet.");
    check(s, "2: say(s, assistant, A long narrow inlet.);");
    say(s, "user", "Where are they?");
    check(s, "3: say(s, user, Where are they?);");
    say(s, "assistant", "Norway, Chile, New Zealand.");
    check(s, "4: say(s, assistant, Norway, Chile, New Zealand.);");
    let chat1 = bound(s);
    tick(clock);
    s.history_branch(3, entry(json!({"role": "assistant", "content": "Mostly Norway."})), false, None)
        .unwrap();
    check(s, "5: s.history_branch(3, entry(json!({role: assistant, conte");
    tick(clock);
    s.history_branch(0, entry(json!({"role": "user", "content": "What is a fjord, briefly?"})), false, None)
        .unwrap();
    check(s, "6: s.history_branch(0, entry(json!({role: user, content: ");
    say(s, "assistant", "A drowned glacial valley.");
    check(s, "7: say(s, assistant, A drowned glacial valley.);");
    tick(clock);
    s.history_switch_version("", 1, None).unwrap();
    check(s, "8: s.history_switch_version(, 1, None).unwrap();");
    tick(clock);
    s.history_branch(
        1,
        entry(json!({"role": "assistant", "content": "An inlet carved by ice."})),
        false,
        None,
    )
    .unwrap();
    check(s, "9: s.history_branch(1, entry(json!({role: assistant, conte");
    tick(clock);
    s.history_switch_version("", 2, None).unwrap();
    check(s, "10: s.history_switch_version(, 2, None).unwrap();");
    // a picture, a failed mark and its clearing
    tick(clock);
    let png = png_bytes(9, 7, 3);
    append(
        s,
        "user",
        json!([{"type": "text", "text": "and this?"}, {"type": "image_url", "image_url": {"url": data_url("image/png", &png)}}]),
    );
    check(s, "11: append(s, user, json!([{type: text, text: and this?");
    tick(clock);
    let last = live_len(s) - 1;
    s.history_mark_failed(FailedTarget::Index(last), "network", "offline", None).unwrap();
    check(s, "12: s.history_mark_failed(FailedTarget::Index(last), network, ");
    say(s, "assistant", "A picture of a fjord.");
    check(s, "13: say(s, assistant, A picture of a fjord.);");
    // chat 1: removal from the middle and truncation, both to the trash
    tick(clock);
    s.history_remove_at(1, None).unwrap();
    check(s, "14: s.history_remove_at(1, None).unwrap();");
    let removed = newest_trash(s);
    tick(clock);
    let n = live_len(s);
    s.history_truncate_from(n - 1, None).unwrap();
    check(s, "15: s.history_truncate_from(n - 1, None).unwrap();");

    // chat 2: a regenerated reply whose chosen version is then removed (an empty version), then
    // switched away from it (an empty branch); renamed and pinned
    tick(clock);
    s.history_clear(false, None).unwrap();
    check(s, "16: s.history_clear(false, None).unwrap();");
    say(s, "user", "Name a river.");
    check(s, "17: say(s, user, Name a river.);");
    say(s, "assistant", "The Danube.");
    check(s, "18: say(s, assistant, The Danube.);");
    let chat2 = bound(s);
    tick(clock);
    s.history_branch(1, entry(json!({"role": "assistant", "content": "The Rhine."})), false, None).unwrap();
    check(s, "19: s.history_branch(1, entry(json!({role: assistant, conte");
    say(s, "user", "Longer?");
    check(s, "20: say(s, user, Longer?);");
    tick(clock);
    s.history_truncate_from(1, None).unwrap();
    check(s, "21: s.history_truncate_from(1, None).unwrap();");
    tick(clock);
    let key = s.history_get(keepsake_host::store::Page { from: 0, limit: None, inline: false }).unwrap()
        ["forks"][0]["forkEntryId"]
        .as_str()
        .unwrap()
        .to_owned();
    s.history_switch_version(&key, 1, None).unwrap();
    check(s, "22: s.history_switch_version(&key, 1, None).unwrap();");
    tick(clock);
    s.sessions_rename(&chat2, "Rivers", None).unwrap();
    check(s, "23: s.sessions_rename(&chat2, Rivers, None).unwrap();");
    tick(clock);
    s.sessions_pin(&chat2, true, None).unwrap();
    check(s, "24: s.sessions_pin(&chat2, true, None).unwrap();");

    // chat 3: an attached page and its summary written back; then deleted and restored, and a
    // reply appended to chat 1 while chat 3 is the live one
    tick(clock);
    s.history_clear(false, None).unwrap();
    check(s, "25: s.history_clear(false, None).unwrap();");
    let body = format!("Fjords {}", "of the north ".repeat(9_000));
    let ctx: Ctx = serde_json::from_value(
        json!({"url": "https://p.example/fjords", "title": "Fjords", "mode": "full", "body": body}),
    )
    .unwrap();
    let a = AttachArgs {
        ctx,
        images: Vec::new(),
        placement_end: false,
        summary_source: None,
        paper: false,
        video_src: None,
        fallback_name: None,
    };
    let att = s.history_attach(a, None).unwrap().result;
    tick(clock);
    let r = s.attach_apply_summary(att["attachId"].as_str().unwrap(), "A page about fjords.", None).unwrap();
    assert_eq!(r.result["applied"], json!(true), "the summary was written back");
    let chat3 = bound(s);
    tick(clock);
    s.sessions_append_to(
        &chat1,
        entry(json!({"role": "assistant", "content": "(late reply to chat 1)"})),
        Default::default(),
        None,
        None,
    )
    .unwrap();
    tick(clock);
    s.sessions_delete(&chat3, None).unwrap();
    check(s, "26: s.sessions_delete(&chat3, None).unwrap();");
    tick(clock);
    s.trash_restore(&chat3, None).unwrap();
    check(s, "27: s.trash_restore(&chat3, None).unwrap();");
    // the entries removed from chat 1 come back as a chat of their own
    tick(clock);
    s.trash_restore(&removed, None).unwrap();
    check(s, "28: s.trash_restore(&removed, None).unwrap();");
    // chat 4 deleted and left in the trash
    tick(clock);
    s.history_clear(false, None).unwrap();
    check(s, "29: s.history_clear(false, None).unwrap();");
    say(s, "user", "Delete me");
    check(s, "30: say(s, user, Delete me);");
    let chat4 = bound(s);
    tick(clock);
    s.sessions_delete(&chat4, None).unwrap();
    check(s, "31: s.sessions_delete(&chat4, None).unwrap();");

    // imports: chat 1 exported and imported under another id (its versions with it), and a
    // browser dump whose live history went another way than its saved session
    tick(clock);
    let doc = s.sessions_export(std::slice::from_ref(&chat1), ExportFormat::Json).unwrap();
    let mut doc: Value = serde_json::from_str(doc["text"].as_str().unwrap()).unwrap();
    doc["sessions"][0]["id"] = json!("imported-copy");
    s.storage_import(&doc, ImportOptions { settings: SettingsMode::None }, None).unwrap();
    check(s, "32: s.storage_import(&doc, ImportOptions { settings: SettingsMod");
    tick(clock);
    let dump = json!({
        "activeSessionId": "dump-1",
        "savedSessions": [{"id": "dump-1", "name": "Dump"}],
        "session_dump-1": [{"role": "user", "content": "dump q"}, {"role": "assistant", "content": "dump old"}],
        "history": [{"role": "user", "content": "dump q"}, {"role": "assistant", "content": "dump new"}],
    });
    s.storage_import(&dump, ImportOptions { settings: SettingsMode::None }, None).unwrap();
    check(s, "33: s.storage_import(&dump, ImportOptions { settings: SettingsMo");

    // settings: one that syncs, one that does not
    tick(clock);
    let mut m = serde_json::Map::new();
    m.insert("systemPrompt".into(), json!("Be brief."));
    m.insert("theme".into(), json!("dark"));
    s.settings_set(&m, None).unwrap();
    check(s, "34: s.settings_set(&m, None).unwrap();");
}

fn relaid(s: &mut Store) -> u64 {
    s.sync_status_counts().unwrap().relaid
}

#[test]
fn chats_made_by_every_write_path_come_back_row_for_row_on_another_device() {
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    // device A writes everything before sync is set up: its rows are what the store writes itself
    let dir = tempfile::tempdir().unwrap();
    let db_a = dir.path().join("a.db");
    let mut a = Store::open(&db_a).unwrap();
    let c = Arc::clone(&clock);
    a.set_clock(Arc::new(move || c.load(Ordering::SeqCst)));
    make_chats(&mut a, &clock, &mut |_, _| {});
    let before = rows(&db_a);
    assert!(before["forks"].as_array().unwrap().len() >= 4, "{}", before["forks"]);
    // set up: the whole state recorded as operations; A's rows do not move
    a.sync_setup("dev-a", "A").unwrap();
    assert_eq!(first_difference(&before, &rows(&db_a), "setup"), None, "setting sync up changed the rows");
    assert_eq!(relaid(&mut a), 0);
    let ops = a.sync_outbox(usize::MAX).unwrap();
    let checkpoint = a.sync_checkpoint().unwrap();

    // B gets the operations, C the checkpoint
    let mut folder = Folder::default();
    let mut seg = Segment { dev: "dev-a".into(), seq: 1, ops: ops.iter().map(|o| o.json.clone()).collect() };
    for o in &ops {
        for sha in &o.blobs {
            folder.blobs.insert(sha.clone(), a.sync_blob(sha).unwrap().unwrap());
        }
    }
    let mut b = Dev::new("dev-b", Arc::clone(&clock), 0);
    let out = b.apply(&seg, &folder);
    assert!(matches!(out, ApplyOutcome::Applied { .. }), "{out:?}");
    let mut c = Dev::new("dev-c", Arc::clone(&clock), 0);
    let r = c.s.sync_apply_checkpoint("dev-a", 1, &checkpoint.json).unwrap();
    if let ApplyOutcome::Pending { missing_blobs } = r.outcome {
        for sha in &missing_blobs {
            let (mime, bytes) = folder.blobs[sha].clone();
            c.s.sync_put_blob(sha, &mime, bytes).unwrap();
        }
        let r = c.s.sync_apply_checkpoint("dev-a", 1, &checkpoint.json).unwrap();
        assert!(matches!(r.outcome, ApplyOutcome::Applied { .. }), "{r:?}");
    }
    let mut want = before.clone();
    // the device-local setting stays on A
    want["settings"] = json!([["systemPrompt", "\"Be brief.\""]]);
    for (name, d) in [("operations", &b), ("checkpoint", &c)] {
        let got = rows(&d.path());
        let mut got_no_theme = got.clone();
        got_no_theme["settings"] = got["settings"].clone();
        assert_eq!(
            first_difference(&want, &got_no_theme, name),
            None,
            "{name}: the rows differ from the ones the store wrote"
        );
    }
    assert_eq!(first_difference(&dump(&mut a), &dump(&mut b.s), "dump"), None);
    // a segment again is a duplicate; the same operations in another segment change nothing
    assert_eq!(b.apply(&seg, &folder), ApplyOutcome::Duplicate);
    seg.seq = 2;
    let again = b.apply(&seg, &folder);
    assert_eq!(again, ApplyOutcome::Applied { ops: 0, duplicates: ops.len(), sessions: vec![] });
    assert_eq!(first_difference(&want, &rows(&b.path()), "again"), None);
    eprintln!(
        "sync round trip: {} chats, {} entries, {} forks, {} operations ({} bytes), checkpoint {} bytes",
        before["sessions"].as_array().unwrap().len(),
        before["entries"].as_array().unwrap().len(),
        before["forks"].as_array().unwrap().len(),
        ops.len(),
        ops.iter().map(|o| o.json.len()).sum::<usize>(),
        checkpoint.json.len()
    );
}

#[test]
fn the_same_writes_recorded_one_by_one_reach_another_device_the_same() {
    let clock = Arc::new(AtomicI64::new(1_700_000_000_000));
    let mut a = Dev::new("dev-a", Arc::clone(&clock), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&clock), 0);
    let mut folder = Folder::default();
    make_chats(&mut a.s, &clock, &mut |s, step| {
        assert_eq!(relaid(s), 0, "after step {step}, the rows were laid out again to match the state");
    });
    let recorded = a.s.sync_status_counts().unwrap().recorded;
    // sealed in small segments, applied in order
    while let Some(seg) = a.seal_some(&mut folder, 3) {
        b.apply(&seg, &folder);
    }
    let (ra, rb) = (rows(&a.path()), rows(&b.path()));
    let mut ra_synced = ra.clone();
    ra_synced["settings"] = rb["settings"].clone();
    assert_eq!(first_difference(&ra_synced, &rb, "rows"), None);
    assert_eq!(rb["settings"], json!([["systemPrompt", "\"Be brief.\""]]));
    assert_eq!(first_difference(&dump(&mut a.s), &dump(&mut b.s), "dump"), None);
    let peer = b.s.sync_status_counts().unwrap();
    assert_eq!(peer.peers[0].ops_applied, recorded);
    eprintln!("sync one by one: {recorded} operations in {} segments", folder.segments.len());
}
