//! The merge rules (docs/sync.md "Merge rules") on two and three devices, each a real SQLite file.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use keepsake_host::domain::sync::regs::Kind;
use keepsake_host::store::ExportFormat;
use serde_json::{json, Value};

use super::*;
use crate::harness::{data_url, png_bytes};

fn clock() -> Arc<AtomicI64> {
    Arc::new(AtomicI64::new(1_700_000_000_000))
}

fn later(c: &AtomicI64, ms: i64) {
    c.fetch_add(ms, Ordering::SeqCst);
}

/// Every entry text of a chat: its chosen path and every other version (an export).
fn texts(s: &mut keepsake_host::store::Store, id: &str) -> Vec<String> {
    let doc = s.sessions_export(&[id.to_owned()], ExportFormat::Json).unwrap();
    let doc: Value = serde_json::from_str(doc["text"].as_str().unwrap()).unwrap();
    let chat = &doc["sessions"][0];
    let mut out: Vec<String> = chat["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap_or("").to_owned())
        .collect();
    for f in chat["versions"].as_array().unwrap() {
        for o in f["others"].as_array().unwrap() {
            out.extend(
                o["entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["content"].as_str().unwrap_or("").to_owned()),
            );
        }
    }
    out
}

fn path_texts(d: &mut Dev) -> Vec<String> {
    d.live()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn same(devs: &mut [&mut Dev]) {
    let first = dump(&mut devs[0].s);
    for d in devs[1..].iter_mut() {
        let other = dump(&mut d.s);
        assert_eq!(first_difference(&first, &other, &d.id), None, "devices differ");
    }
}

/// A chat on A, seen by B, B's live chat too.
fn shared_chat(c: &Arc<AtomicI64>) -> (Dev, Dev, Folder, String) {
    let mut a = Dev::new("dev-a", Arc::clone(c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(c), 0);
    let mut folder = Folder::default();
    a.append("user", "Plan a trip to Bergen");
    later(c, 1000);
    let r = a.append("assistant", "Day 1: the fish market.");
    let id = r["sessionId"].as_str().unwrap().to_owned();
    settle(&mut [&mut a, &mut b], &mut folder);
    b.s.sessions_load(&id, false, None).unwrap();
    (a, b, folder, id)
}

#[test]
fn two_devices_continuing_one_chat_while_apart_keep_both_turns_the_later_chosen() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    later(&c, 60_000);
    a.append("user", "And day 2? (asked on A)");
    a.append("assistant", "Day 2 from A: Fløyen.");
    later(&c, 60_000);
    b.append("user", "And day 2? (asked on B)");
    b.append("assistant", "Day 2 from B: the fjord cruise.");
    // A hears from B first: its open chat switches to B's later turn, with an event saying so
    let seg_b = b.seal(&mut folder).unwrap();
    let seg_a = a.seal(&mut folder).unwrap();
    let r = a.s.sync_apply(&seg_b.dev, seg_b.seq, &seg_b.ops).unwrap();
    let ev = r.event.expect("an apply that changed the open chat announces it").to_json();
    assert_eq!(ev["areas"]["history"], json!(true), "{ev}");
    assert_eq!(ev["areas"]["sessions"]["ids"], json!([id]), "{ev}");
    b.apply(&seg_a, &folder);
    for d in [&mut a, &mut b] {
        let live = d.live();
        assert_eq!(
            path_texts(d)[2..],
            ["And day 2? (asked on B)", "Day 2 from B: the fjord cruise."],
            "{}",
            d.id
        );
        let forks = live["forks"].as_array().unwrap();
        assert_eq!(forks.len(), 1, "{live}");
        assert_eq!((forks[0]["chosen"].as_u64(), forks[0]["versions"].as_u64()), (Some(2), Some(2)));
        let all = texts(&mut d.s, &id);
        assert!(all.iter().any(|t| t == "Day 2 from A: Fløyen."), "A's turn kept on {}", d.id);
        assert_eq!(all.len(), 6);
    }
    same(&mut [&mut a, &mut b]);
}

#[test]
fn later_means_the_later_stamp_even_with_clocks_three_hours_apart() {
    // B's clock is 3 h behind: its continuation, typed after A's, carries an earlier stamp
    // unless B has heard from A (then its clock moves past A's stamps)
    let c = clock();
    let mut a = Dev::new("dev-a", Arc::clone(&c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&c), -3 * HOUR);
    let mut folder = Folder::default();
    a.append("user", "q");
    let id = a.append("assistant", "a")["sessionId"].as_str().unwrap().to_owned();
    settle(&mut [&mut a, &mut b], &mut folder);
    b.s.sessions_load(&id, false, None).unwrap();
    // B has applied A's stamps: B's next write is later than all of them, clock or not
    b.append("user", "from B, 3 h behind");
    settle(&mut [&mut a, &mut b], &mut folder);
    a.s.sessions_load(&id, false, None).unwrap();
    assert_eq!(path_texts(&mut a).last().unwrap(), "from B, 3 h behind");
    // apart: A continues first in real time, B after; B's stamp is 3 h earlier, so A's is later
    later(&c, 1000);
    a.append("assistant", "A's answer");
    later(&c, 60_000);
    b.append("assistant", "B's answer (typed later, clock behind)");
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        assert_eq!(path_texts(d).last().unwrap(), "A's answer", "{}", d.id);
        assert!(texts(&mut d.s, &id).contains(&"B's answer (typed later, clock behind)".to_owned()));
    }
    same(&mut [&mut a, &mut b]);
}

#[test]
fn a_purge_wins_over_a_late_append_and_nothing_purged_comes_back() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    later(&c, 1000);
    a.s.sessions_delete(&id, None).unwrap();
    a.s.trash_purge(Some(&id), None).unwrap();
    // B has not heard: it continues the chat, renames and pins it
    later(&c, 60_000);
    b.append("user", "late question on B");
    b.s.sessions_rename(&id, "Bergen (B)", None).unwrap();
    b.s.sessions_pin(&id, true, None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        assert!(!d.drawer().contains(&id), "{}: the purged chat came back", d.id);
        assert!(d.trash().iter().all(|t| t["id"] != json!(id)), "{}", d.id);
        assert!(d.s.sync_purged(Kind::Session, &id).unwrap());
        let all = dump(&mut d.s).to_string();
        assert!(!all.contains("late question on B") && !all.contains("Plan a trip"), "{}: {all}", d.id);
    }
    assert_eq!(b.live()["activeSessionId"], json!(""), "B's live chat was the purged one: it empties");
    // a device that imports the chat back gets it under a new id: purged ids stay purged
    let doc = json!({"format": "keepsake.sessions", "version": 2, "sessions": [
        {"id": id, "name": "again", "createdAt": 1, "entries": [{"role": "user", "content": "back again"}]}]});
    let r =
        a.s.storage_import(
            &doc,
            keepsake_host::store::ImportOptions {
                settings: keepsake_host::domain::import::SettingsMode::None,
            },
            None,
        )
        .unwrap();
    assert_eq!(r.result["sessionsImported"], json!(1), "{}", r.result);
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        assert!(!d.drawer().contains(&id), "{}", d.id);
        assert!(dump(&mut d.s).to_string().contains("back again"), "{}: the import was kept", d.id);
    }
    same(&mut [&mut a, &mut b]);
}

#[test]
fn an_append_to_a_chat_trashed_elsewhere_goes_into_that_trash_item() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    later(&c, 1000);
    a.s.sessions_delete(&id, None).unwrap();
    later(&c, 1000);
    b.append("user", "still planning on B");
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        assert!(!d.drawer().contains(&id), "{}", d.id);
        let item = d.trash().into_iter().find(|t| t["id"] == json!(id)).expect("in the trash");
        assert_eq!(item["entryCount"], json!(3), "{}: {item}", d.id);
        assert!(texts(&mut d.s, &id).contains(&"still planning on B".to_owned()));
    }
    same(&mut [&mut a, &mut b]);
    // a restore later than the trash brings it back everywhere
    later(&c, 1000);
    b.s.trash_restore(&id, None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    assert!(a.drawer().contains(&id));
    same(&mut [&mut a, &mut b]);
}

#[test]
fn an_entry_added_after_one_moved_to_the_trash_elsewhere_follows_the_chat_and_is_kept() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    later(&c, 1000);
    // A removes the last reply; B, not knowing, continues after it
    a.s.history_remove_at(1, None).unwrap();
    b.append("user", "after the reply A removed");
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        let t = texts(&mut d.s, &id);
        assert_eq!(t, ["Plan a trip to Bergen", "after the reply A removed"], "{}", d.id);
        assert!(
            dump(&mut d.s)["trash"].to_string().contains("Day 1"),
            "{}: the removed reply is in the trash",
            d.id
        );
    }
    same(&mut [&mut a, &mut b]);
    // the next write on A records the entry's new place; nothing moves again
    later(&c, 1000);
    a.s.sessions_load(&id, false, None).unwrap();
    a.append("assistant", "answer on A");
    settle(&mut [&mut a, &mut b], &mut folder);
    assert_eq!(texts(&mut b.s, &id).last().unwrap(), "answer on A");
    same(&mut [&mut a, &mut b]);
}

#[test]
fn two_regenerations_at_one_fork_on_two_devices_keep_every_version() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    a.s.sessions_load(&id, false, None).unwrap();
    later(&c, 1000);
    a.s.history_branch(1, entry(json!({"role": "assistant", "content": "Regenerated on A"})), false, None)
        .unwrap();
    later(&c, 1000);
    b.s.history_branch(1, entry(json!({"role": "assistant", "content": "Regenerated on B"})), false, None)
        .unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        let f = d.live()["forks"][0].clone();
        assert_eq!(f["versions"], json!(3), "{}: {f}", d.id);
        assert_eq!(path_texts(d)[1], "Regenerated on B", "{}: the later one is chosen", d.id);
    }
    same(&mut [&mut a, &mut b]);
    // a switch made later than both wins
    later(&c, 1000);
    let key = a.live()["forks"][0]["forkEntryId"].as_str().unwrap().to_owned();
    a.s.history_switch_version(&key, 1, None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    assert_eq!(path_texts(&mut b)[1], "Day 1: the fish market.");
    same(&mut [&mut a, &mut b]);
}

#[test]
fn names_pins_and_the_trash_go_to_the_later_writer() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    later(&c, 1000);
    a.s.sessions_rename(&id, "Bergen (A)", None).unwrap();
    b.s.sessions_pin(&id, true, None).unwrap();
    later(&c, 1000);
    b.s.sessions_rename(&id, "Bergen (B, later)", None).unwrap();
    a.s.sessions_delete(&id, None).unwrap();
    later(&c, 1000);
    b.s.sessions_pin(&id, false, None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    let item = a
        .trash()
        .into_iter()
        .find(|t| t["id"] == json!(id))
        .expect("the delete (later than B's writes but the unpin) stands");
    assert_eq!(item["name"], json!("Bergen (B, later)"));
    assert_eq!(item["pinned"], json!(false));
    same(&mut [&mut a, &mut b]);
}

#[test]
fn eviction_by_a_cap_stays_on_the_device_that_evicted() {
    let c = clock();
    let mut a = Dev::new("dev-a", Arc::clone(&c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&c), 0);
    let mut folder = Folder::default();
    let mut m = serde_json::Map::new();
    m.insert("maxSessions".into(), json!(2));
    a.s.settings_set(&m, None).unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        later(&c, 1000);
        a.s.history_clear(false, None).unwrap();
        ids.push(a.append("user", &format!("chat {i}"))["sessionId"].as_str().unwrap().to_owned());
    }
    assert!(!a.drawer().contains(&ids[0]), "A's cap evicted the oldest chat");
    settle(&mut [&mut a, &mut b], &mut folder);
    assert_eq!(b.drawer().len(), 3, "B keeps every chat: eviction is A's own policy");
    assert_eq!(
        b.s.settings_get(&["maxSessions".to_owned()]).unwrap(),
        json!({}),
        "maxSessions does not sync"
    );
    // B writes to the evicted chat: on A it stays evicted (in the trash), with B's entry
    later(&c, 1000);
    b.s.sessions_load(&ids[0], false, None).unwrap();
    b.append("assistant", "B answers chat 0");
    settle(&mut [&mut a, &mut b], &mut folder);
    let item = a.trash().into_iter().find(|t| t["id"] == json!(ids[0])).expect("still evicted on A");
    assert_eq!(item["reason"], json!("evicted"));
    assert_eq!(item["entryCount"], json!(2));
    // A empties its trash: the chat stays gone on A, untouched on B
    a.s.trash_purge(None, None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    assert!(b.drawer().contains(&ids[0]), "B still has the chat A's cap evicted");
    assert!(!b.s.sync_purged(Kind::Session, &ids[0]).unwrap());
    later(&c, 1000);
    b.s.sessions_rename(&ids[0], "renamed on B", None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    assert!(!a.drawer().contains(&ids[0]) && a.trash().iter().all(|t| t["id"] != json!(ids[0])));
}

#[test]
fn synced_settings_travel_and_keys_and_device_settings_never_do() {
    let c = clock();
    let mut a = Dev::new("dev-a", Arc::clone(&c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&c), 0);
    let mut folder = Folder::default();
    let mut m = serde_json::Map::new();
    m.insert("systemPrompt".into(), json!("Answer in Norwegian."));
    m.insert("trashDays".into(), json!(90));
    m.insert("maxSessions".into(), json!(50));
    m.insert("activeModel".into(), json!("model-x"));
    m.insert("backupFolder".into(), json!("/tmp/backups-of-a"));
    m.insert(
        "providers".into(),
        json!([{"id": "p1", "kind": "openai", "name": "P", "baseUrl": "https://api.example/v1", "apiKey": "sk-SECRET-A-123"}]),
    );
    a.s.settings_set(&m, None).unwrap();
    let seg = a.seal(&mut folder).unwrap();
    let wire = seg.ops.join("\n");
    for never in
        ["sk-SECRET-A-123", "providers", "maxSessions", "backupFolder", "/tmp/backups-of-a", "activeModel"]
    {
        assert!(!wire.contains(never), "{never} left the device: {wire}");
    }
    b.catch_up(&folder);
    let keys: Vec<String> =
        ["systemPrompt", "trashDays", "maxSessions", "providers", "backupFolder", "activeModel"]
            .map(String::from)
            .to_vec();
    assert_eq!(
        b.s.settings_get(&keys).unwrap(),
        json!({"systemPrompt": "Answer in Norwegian.", "trashDays": 90})
    );
    // a removal travels too
    later(&c, 1000);
    a.s.settings_remove(&["systemPrompt".to_owned()], None).unwrap();
    a.seal(&mut folder);
    b.catch_up(&folder);
    assert_eq!(b.s.settings_get(&keys).unwrap(), json!({"trashDays": 90}));
}

#[test]
fn a_picture_travels_once_and_an_apply_waits_until_it_has_arrived() {
    let c = clock();
    let mut a = Dev::new("dev-a", Arc::clone(&c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&c), 0);
    let mut folder = Folder::default();
    let png = png_bytes(12, 8, 5);
    let sha = crate::harness::sha256_hex(&png);
    let part = json!({"type": "image_url", "image_url": {"url": data_url("image/png", &png)}});
    a.s.history_append(
        entry(json!({"role": "user", "content": [{"type": "text", "text": "look"}, part]})),
        false,
        false,
        None,
        None,
    )
    .unwrap();
    let seg = a.seal(&mut folder).unwrap();
    assert!(
        !seg.ops.join("").contains("base64"),
        "the operation refers to the picture; its bytes go once, apart"
    );
    let before = dump(&mut b.s);
    let r = b.s.sync_apply(&seg.dev, seg.seq, &seg.ops).unwrap();
    assert_eq!(r.outcome, ApplyOutcome::Pending { missing_blobs: vec![sha.clone()] });
    assert!(r.event.is_none());
    assert_eq!(dump(&mut b.s), before, "a pending segment changes nothing");
    let status = b.s.sync_status_counts().unwrap();
    assert_eq!(status.peers[0].pending, vec![("segment".to_owned(), 1, 1)], "{status:?}");
    // a picture whose bytes do not match its name is refused
    assert!(b.s.sync_put_blob(&sha, "image/png", png_bytes(12, 8, 6)).is_err());
    let (mime, bytes) = folder.blobs[&sha].clone();
    assert!(b.s.sync_put_blob(&sha, &mime, bytes).unwrap());
    let r = b.s.sync_apply(&seg.dev, seg.seq, &seg.ops).unwrap();
    assert!(matches!(r.outcome, ApplyOutcome::Applied { ops: 1, .. }), "{r:?}");
    assert!(b.s.sync_status_counts().unwrap().peers[0].pending.is_empty());
    assert_eq!(b.s.sync_blob(&sha).unwrap().unwrap().1, png);
    same(&mut [&mut a, &mut b]);
}

#[test]
fn segments_apply_once_in_any_order_and_a_malformed_one_changes_nothing() {
    let c = clock();
    let mut a = Dev::new("dev-a", Arc::clone(&c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&c), 0);
    let mut folder = Folder::default();
    let mut segs = Vec::new();
    for i in 0..6 {
        later(&c, 1000);
        if i == 3 {
            a.s.history_clear(false, None).unwrap();
        }
        a.append("user", &format!("message {i}"));
        segs.push(a.seal(&mut folder).unwrap());
    }
    let bad = Segment { dev: "dev-a".into(), seq: 99, ops: vec!["{\"v\":1,\"dev\":\"dev-a\"".into()] };
    let before = dump(&mut b.s);
    assert!(b.s.sync_apply(&bad.dev, bad.seq, &bad.ops).is_err());
    let foreign = Segment { dev: "dev-z".into(), seq: 1, ops: segs[0].ops.clone() };
    assert!(b.s.sync_apply(&foreign.dev, foreign.seq, &foreign.ops).is_err(), "operations of another device");
    assert_eq!(dump(&mut b.s), before);
    for s in segs.iter().rev().chain(segs.iter()) {
        b.apply(s, &folder);
    }
    // its own segments are never applied to a device
    assert_eq!(a.apply(&segs[0], &folder), ApplyOutcome::Duplicate);
    let st = b.s.sync_status_counts().unwrap();
    assert_eq!(
        (st.peers[0].ops_applied, st.peers[0].segments_applied),
        (a.s.sync_status_counts().unwrap().recorded, 6)
    );
    let applied = b.s.sync_applied().unwrap();
    assert_eq!(applied[0].segments.pairs(), &[(1, 6)]);
    same(&mut [&mut a, &mut b]);
}

#[test]
fn a_new_device_catches_up_from_a_checkpoint_then_only_newer_segments() {
    let c = clock();
    let mut a = Dev::new("dev-a", Arc::clone(&c), 0);
    let mut b = Dev::new("dev-b", Arc::clone(&c), 0);
    let mut folder = Folder::default();
    a.append("user", "from A");
    b.append("user", "from B");
    settle(&mut [&mut a, &mut b], &mut folder);
    let cp = a.s.sync_checkpoint().unwrap();
    assert_eq!(cp.vector.keys().cloned().collect::<Vec<_>>(), ["dev-a", "dev-b"]);
    later(&c, 1000);
    b.append("user", "from B after the checkpoint");
    b.seal(&mut folder);
    let mut n = Dev::new("dev-new", Arc::clone(&c), 0);
    let r = n.s.sync_apply_checkpoint("dev-a", 1, &cp.json).unwrap();
    assert!(matches!(r.outcome, ApplyOutcome::Applied { .. }), "{r:?}");
    assert_eq!(n.s.sync_apply_checkpoint("dev-a", 1, &cp.json).unwrap().outcome, ApplyOutcome::Duplicate);
    // the segments the checkpoint holds change nothing; the newer one applies
    let mut new_ops = 0;
    for s in folder.segments.clone() {
        if let ApplyOutcome::Applied { ops, .. } = n.apply(&s, &folder) {
            new_ops += ops;
        }
    }
    assert_eq!(new_ops, 1, "only B's newer operation was new");
    a.catch_up(&folder);
    same(&mut [&mut a, &mut b, &mut n]);
}

#[test]
fn a_restore_puts_back_what_the_copy_holds_and_purges_nothing_elsewhere() {
    let c = clock();
    let (mut a, mut b, mut folder, id) = shared_chat(&c);
    later(&c, 1000);
    a.s.history_clear(false, None).unwrap();
    let doomed = a.append("user", "a chat A will purge")["sessionId"].as_str().unwrap().to_owned();
    settle(&mut [&mut a, &mut b], &mut folder);
    let copy = a.s.backups_create(None).unwrap().result["copy"]["id"].as_str().unwrap().to_owned();
    // after the copy: A renames the chat and purges one; B adds a chat and a turn
    later(&c, 60_000);
    a.s.sessions_rename(&id, "renamed after the copy", None).unwrap();
    a.s.sessions_delete(&doomed, None).unwrap();
    a.s.trash_purge(Some(&doomed), None).unwrap();
    b.s.history_clear(false, None).unwrap();
    let added = b.append("user", "a chat B made after the copy")["sessionId"].as_str().unwrap().to_owned();
    b.s.sessions_load(&id, false, None).unwrap();
    b.append("user", "a turn B added after the copy");
    settle(&mut [&mut a, &mut b], &mut folder);
    later(&c, 60_000);
    a.s.backups_restore(&copy, None).unwrap();
    settle(&mut [&mut a, &mut b], &mut folder);
    for d in [&mut a, &mut b] {
        let drawer = d.drawer();
        assert!(drawer.contains(&added), "{}: what B added since the copy is kept", d.id);
        let t = texts(&mut d.s, &id);
        assert!(t.contains(&"a turn B added after the copy".to_owned()), "{}: {t:?}", d.id);
        let all = dump(&mut d.s);
        let names: Vec<&str> =
            all["drawer"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(!names.contains(&"renamed after the copy"), "{}: the copy's name is back: {names:?}", d.id);
        assert!(
            all.to_string().contains("a chat A will purge"),
            "{}: the purged chat is back (a new id)",
            d.id
        );
        assert!(!drawer.contains(&doomed), "{}: its purged id stays purged", d.id);
    }
    same(&mut [&mut a, &mut b]);
}

#[test]
fn the_drawer_says_which_device_a_chat_came_from() {
    let c = clock();
    let (mut a, mut b, _folder, id) = shared_chat(&c);
    let row = |d: &mut Dev| -> Value {
        let l = d.s.sessions_list(None, None, None).unwrap();
        let v: Value = serde_json::from_str(&l.to_json()).unwrap();
        v["rows"].as_array().unwrap().iter().find(|r| r["id"] == json!(id)).unwrap().clone()
    };
    assert!(row(&mut a).get("device").is_none(), "a chat begun here names no device: {}", row(&mut a));
    assert_eq!(row(&mut b)["device"], json!({"id": "dev-a", "name": null}));
    b.s.sync_set_peer_name("dev-a", "Desktop").unwrap();
    assert_eq!(row(&mut b)["device"], json!({"id": "dev-a", "name": "Desktop"}));
    let origins = b.s.sync_origins().unwrap();
    assert_eq!(origins.get(&id), Some(&("dev-a".to_owned(), Some("Desktop".to_owned()))));
}
