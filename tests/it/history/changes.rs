//! changes.since (storage-model §2.8): the union of what changed after a sequence number, and
//! `reset` when the number predates the retained log or is ahead of the database.
use crate::harness::*;
use serde_json::json;

#[test]
fn since_returns_the_union_of_later_changes_without_values() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let r0 = h.ok("changes.since", json!({"seq": 0}));
    assert_eq!(r0, json!({"reset": false, "seq": 0, "areas": {}}));

    h.ok("settings.set", json!({"map": {"theme": "dark"}}));
    let s1 = h.ok("history.meta", json!({}))["changeSeq"].as_i64().unwrap();
    // the first entry is kept in a session of its own (auto-keep); saving makes a snapshot
    let kept = h.ok("history.append", json!({"entry": user("hi")}))["kept"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let saved = h.ok("sessions.save", json!({"name": "S"}));
    let sid = saved["session"]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.load", json!({"id": sid}));
    h.ok("settings.set", json!({"map": {"fontSize": 14}}));

    let all = h.ok("changes.since", json!({"seq": 0}));
    assert_eq!(all["reset"], false);
    assert_eq!(all["seq"], 5);
    assert_eq!(all["areas"]["settings"], json!(["fontSize", "theme"]));
    assert_eq!(all["areas"]["history"], true);
    assert_eq!(all["areas"]["binding"], true);
    let mut ids = vec![kept, sid.clone()];
    ids.sort();
    assert_eq!(all["areas"]["sessions"]["ids"], json!(ids), "the kept chat and its snapshot");
    assert_eq!(all["areas"]["sessions"]["index"], true);

    let later = h.ok("changes.since", json!({"seq": s1}));
    assert_eq!(later["areas"]["settings"], json!(["fontSize"]), "theme changed at or before seq {s1}");

    let none = h.ok("changes.since", json!({"seq": 5}));
    assert_eq!(none, json!({"reset": false, "seq": 5, "areas": {}}));

    // a number from the future (another database) asks the client to re-read everything
    assert_eq!(h.ok("changes.since", json!({"seq": 99})), json!({"reset": true, "seq": 5}));
    assert_eq!(h.err("changes.since", json!({"seq": -1})), "bad_request");
    assert_eq!(h.err("changes.since", json!({})), "bad_request");
    assert_eq!(h.err("changes.since", json!({"seq": 1, "clientRequestId": "x"})), "bad_request");
}

#[test]
fn since_resets_once_the_log_has_been_pruned_past_it_and_keeps_the_latest_thousand() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    for i in 0..1_250 {
        h.ok("settings.set", json!({"map": {"counter": i}}));
    }
    let kept: i64 = sql(&db).query_row("SELECT count(*) FROM changes", [], |r| r.get(0)).unwrap();
    assert!(kept >= 1_000, "at least the latest 1,000 changes are kept, found {kept}");
    assert!(kept < 1_250, "the log is pruned, found {kept}");
    assert_eq!(h.ok("changes.since", json!({"seq": 1})), json!({"reset": true, "seq": 1250}));
    let recent = h.ok("changes.since", json!({"seq": 1250 - 1000}));
    assert_eq!(recent["reset"], false);
    assert_eq!(recent["areas"]["settings"], json!(["counter"]));
}
