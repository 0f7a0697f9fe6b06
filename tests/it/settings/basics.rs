//! settings.get / settings.set / settings.remove over the real binary (storage-model §3, §2.8,
//! §11.4; PROTOCOL.md §2, §4, §7 settings).
use crate::harness::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const EVENT_WAIT: Duration = Duration::from_secs(10);

/// Every stored setting as (key, raw value text), ordered by key.
fn stored(db: &Path) -> Vec<(String, String)> {
    let c = sql(db);
    let mut st = c.prepare("SELECT key, value FROM settings ORDER BY key").unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

fn stored_keys(db: &Path) -> Vec<String> {
    stored(db).into_iter().map(|(k, _)| k).collect()
}

fn max_seq(db: &Path) -> i64 {
    sql(db).query_row("SELECT coalesce(max(seq), 0) FROM changes", [], |r| r.get(0)).unwrap()
}

/// Keys named by a `changed` event's `areas.settings`, sorted.
fn event_keys(ev: &Value) -> Vec<String> {
    let mut keys: Vec<String> = ev["areas"]["settings"]
        .as_array()
        .map(|a| a.iter().map(|k| k.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

fn names_setting(ev: &Value, key: &str) -> bool {
    ev["areas"]["settings"].as_array().is_some_and(|a| a.iter().any(|k| k == key))
}

#[test]
fn get_returns_only_stored_keys_and_omits_absent_ones() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    assert_eq!(h.ok("settings.get", json!({"keys": ["theme", "nothing"]})), json!({}));
    h.ok("settings.set", json!({"map": {"theme": "dark", "fontSize": 14, "unrelated": [1, 2]}}));
    let got = h.ok("settings.get", json!({"keys": ["theme", "missing", "fontSize"]}));
    assert_eq!(got, json!({"theme": "dark", "fontSize": 14}));
    assert_eq!(got.as_object().unwrap().len(), 2, "absent keys are omitted, unrequested keys not served");
    assert_eq!(h.ok("settings.get", json!({"keys": ["missing"]})), json!({}));
    // A key requested twice is served once.
    assert_eq!(h.ok("settings.get", json!({"keys": ["theme", "theme"]})), json!({"theme": "dark"}));
}

#[test]
fn get_with_empty_or_missing_key_list_is_bad_request_and_there_is_no_read_all_call() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"theme": "dark"}}));
    assert_eq!(h.err("settings.get", json!({"keys": []})), "bad_request");
    assert_eq!(h.err("settings.get", json!({})), "bad_request");
    assert_eq!(h.err("settings.get", json!({"keys": "theme"})), "bad_request");
    assert_eq!(h.err("settings.get", json!({"keys": [1]})), "bad_request");
    assert_eq!(h.err("settings.get", json!({"keys": null})), "bad_request");
    for op in ["settings.getAll", "settings.list", "settings.all", "settings.dump"] {
        assert_eq!(h.err(op, json!({})), "unknown_op", "{op}");
    }
    let hello = h.hello();
    let mut settings_ops: Vec<&str> = hello["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|o| o.starts_with("settings."))
        .collect();
    settings_ops.sort();
    assert_eq!(settings_ops, ["settings.get", "settings.remove", "settings.set"]);
}

#[test]
fn values_are_any_json_stored_verbatim_as_valid_json_text() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let map = json!({
        "str": "dark \"mode\" — 日本語 🌸\n",
        "int": 42,
        "neg": -7,
        "float": 3.25,
        "big": 9007199254740993u64,
        "t": true,
        "f": false,
        "nul": null,
        "arr": [1, "two", [3], {"four": 4}],
        "obj": {"z": 1, "a": {"nested": [null, false, "x"]}, "m": ""},
        "emptyObj": {},
        "emptyArr": [],
        "emptyStr": ""
    });
    assert_eq!(h.ok("settings.set", json!({"map": map.clone()})), json!({}));
    let keys: Vec<&String> = map.as_object().unwrap().keys().collect();
    let got = h.ok("settings.get", json!({"keys": keys}));
    assert_eq!(got, map, "every value comes back as stored");
    assert_eq!(got["float"].as_f64(), Some(3.25));
    assert_eq!(got["big"].as_u64(), Some(9007199254740993));

    let c = sql(&db);
    let rows = stored(&db);
    assert_eq!(rows.len(), map.as_object().unwrap().len());
    for (k, raw) in &rows {
        let valid: i64 =
            c.query_row("SELECT json_valid(value) FROM settings WHERE key = ?1", [k], |r| r.get(0)).unwrap();
        assert_eq!(valid, 1, "settings.value of {k} is not valid JSON: {raw}");
        let parsed: Value = serde_json::from_str(raw).unwrap();
        assert_eq!(&parsed, &map[k.as_str()], "stored value of {k}");
    }
    // Stored as JSON text (not SQL scalars): a string keeps its quotes, null is the text null.
    let (ty, raw): (String, String) = c
        .query_row("SELECT typeof(value), value FROM settings WHERE key = 'str'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(ty, "text");
    assert!(raw.starts_with('"'), "{raw}");
    let raw_null: String =
        c.query_row("SELECT value FROM settings WHERE key = 'nul'", [], |r| r.get(0)).unwrap();
    assert_eq!(raw_null, "null");
    let deep: String = c
        .query_row("SELECT json_extract(value, '$.a.nested[2]') FROM settings WHERE key = 'obj'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(deep, "x");

    // Overwriting a value replaces it.
    h.ok("settings.set", json!({"map": {"int": {"now": "an object"}}}));
    assert_eq!(h.ok("settings.get", json!({"keys": ["int"]})), json!({"int": {"now": "an object"}}));
}

#[test]
fn set_is_one_transaction_and_one_invalid_pair_writes_nothing() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"keepme": 1}}));
    h.wait_event(EVENT_WAIT, |e| names_setting(e, "keepme")).expect("event of the first set");
    let before = stored(&db);
    let seq = max_seq(&db);
    let bad_maps = [
        json!({"activeProvider": "openai", "activeModel": "gpt", "maxSessions": -1}),
        json!({"activeProvider": "openai", "keepme": 2, "autoSummarizeAttachments": "yes"}),
        json!({"activeProvider": "openai", "history": []}),
        json!({"activeProvider": "openai", "": 1}),
        json!({"keepme": 3, "session_abc": [], "activeModel": "x"}),
        json!({"activeProvider": "openai", "summarizeThresholdChars": 1.5}),
    ];
    for m in bad_maps {
        assert_eq!(h.err("settings.set", json!({"map": m.clone()})), "bad_request", "{m}");
        assert_eq!(stored(&db), before, "nothing written after {m}");
    }
    assert_eq!(h.err("settings.set", json!({"map": [["a", 1]]})), "bad_request");
    assert_eq!(h.err("settings.set", json!({})), "bad_request");
    assert_eq!(stored(&db), before);
    assert_eq!(max_seq(&db), seq, "failed sets commit no change");
    // A valid multi-pair set lands entirely, announced as one change naming every key.
    assert!(h.events.is_empty(), "failed sets emit nothing: {:?}", h.events);
    h.ok("settings.set", json!({"map": {"activeProvider": "openai", "activeModel": "gpt-4o", "keepme": 2}}));
    assert_eq!(max_seq(&db), seq + 1, "one transaction, one change");
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("changed event");
    assert_eq!(event_keys(&ev), ["activeModel", "activeProvider", "keepme"]);
    assert_eq!(
        h.ok("settings.get", json!({"keys": ["activeProvider", "activeModel", "keepme"]})),
        json!({"activeProvider": "openai", "activeModel": "gpt-4o", "keepme": 2})
    );
}

#[test]
fn keys_must_be_1_to_200_utf16_units() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let ok_keys = [
        "k".to_string(),
        "k".repeat(200),
        "é".repeat(200),  // 200 units, 400 UTF-8 bytes
        "😀".repeat(100), // 200 units, 100 code points
        "日".repeat(200),
    ];
    for k in &ok_keys {
        h.ok("settings.set", json!({"map": {k.clone(): k.len()}}));
        assert_eq!(h.ok("settings.get", json!({"keys": [k]})), json!({k.clone(): k.len()}), "{k}");
        h.ok("settings.remove", json!({"keys": [k]}));
    }
    assert!(stored(&db).is_empty());
    let bad_keys = [
        String::new(),
        "k".repeat(201),
        "😀".repeat(101), // 101 code points but 202 units
        "😀".repeat(150), // 150 code points, 300 units
        format!("{}😀", "k".repeat(199)),
    ];
    for k in &bad_keys {
        assert_eq!(h.err("settings.set", json!({"map": {k.clone(): 1}})), "bad_request", "set {k}");
        assert_eq!(h.err("settings.get", json!({"keys": [k]})), "bad_request", "get {k}");
        assert_eq!(h.err("settings.remove", json!({"keys": [k]})), "bad_request", "remove {k}");
    }
    assert!(stored(&db).is_empty(), "no bad key was written");
}

#[test]
fn reserved_keys_fail_the_whole_call_anywhere_in_get_set_remove() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"theme": "light", "sessions": 1, "Session": 2, "my_session_x": 3}}));
    // Conversation data exists, so a leak through settings would be visible.
    h.ok("history.replace", json!({"entries": [user("hello"), assistant("hi")]}));
    let saved = h.ok("sessions.save", json!({"name": "S"}));
    let sid = saved["session"]["id"].as_str().unwrap().to_owned();
    h.ok("sessions.load", json!({"id": sid}));
    let before = stored(&db);
    let seq = max_seq(&db);
    let own = format!("session_{sid}");
    let reserved = ["history", "savedSessions", "activeSessionId", "session_", "session_x", own.as_str()];
    for r in reserved {
        assert_eq!(h.err("settings.get", json!({"keys": [r]})), "bad_request", "get {r}");
        assert_eq!(h.err("settings.get", json!({"keys": ["theme", r]})), "bad_request", "get theme,{r}");
        assert_eq!(h.err("settings.get", json!({"keys": [r, "theme"]})), "bad_request", "get {r},theme");
        assert_eq!(
            h.err("settings.set", json!({"map": {"theme": "dark", r: "x"}})),
            "bad_request",
            "set {r}"
        );
        assert_eq!(
            h.err("settings.set", json!({"map": {r: "x", "newKey": 1}})),
            "bad_request",
            "set {r} first"
        );
        assert_eq!(h.err("settings.remove", json!({"keys": ["theme", r]})), "bad_request", "remove {r}");
        assert_eq!(
            h.err("settings.remove", json!({"keys": [r, "sessions"]})),
            "bad_request",
            "remove {r} first"
        );
        assert_eq!(stored(&db), before, "nothing written or removed around {r}");
    }
    assert_eq!(max_seq(&db), seq);
    // Non-reserved look-alikes are ordinary keys.
    assert_eq!(
        h.ok("settings.get", json!({"keys": ["theme", "sessions", "Session", "my_session_x"]})),
        json!({"theme": "light", "sessions": 1, "Session": 2, "my_session_x": 3})
    );
    // The conversation is untouched and the binding kept.
    let meta = h.ok("history.meta", json!({}));
    assert_eq!(meta["length"], 2);
    assert_eq!(meta["activeSessionId"], sid.as_str());
    let c = sql(&db);
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM settings WHERE key IN ('history','savedSessions','activeSessionId') OR key LIKE 'session\\_%' ESCAPE '\\'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn interpreted_keys_are_type_checked() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    for key in ["maxSessions", "summarizeThresholdChars"] {
        for good in [json!(0), json!(7), json!(2.0), json!(1e3), json!(100000)] {
            h.ok("settings.set", json!({"map": {key: good.clone()}}));
            let got = h.ok("settings.get", json!({"keys": [key]}));
            assert_eq!(got[key].as_f64(), good.as_f64(), "{key} = {good}");
        }
        h.ok("settings.set", json!({"map": {key: 5}}));
        for bad in [
            json!(-1),
            json!(1.5),
            json!("5"),
            json!(null),
            json!(true),
            json!([5]),
            json!({"n": 5}),
            json!(-0.5),
        ] {
            assert_eq!(
                h.err("settings.set", json!({"map": {key: bad.clone()}})),
                "bad_request",
                "{key} = {bad}"
            );
            assert_eq!(
                h.ok("settings.get", json!({"keys": [key]})),
                json!({key: 5}),
                "{key} kept after {bad}"
            );
        }
    }
    let key = "autoSummarizeAttachments";
    for good in [json!(false), json!(true)] {
        h.ok("settings.set", json!({"map": {key: good.clone()}}));
        assert_eq!(h.ok("settings.get", json!({"keys": [key]})), json!({key: good}));
    }
    for bad in [json!("true"), json!(1), json!(0), json!(null), json!([true]), json!("false")] {
        assert_eq!(h.err("settings.set", json!({"map": {key: bad.clone()}})), "bad_request", "{key} = {bad}");
        assert_eq!(h.ok("settings.get", json!({"keys": [key]})), json!({key: true}));
    }
    // Other keys are opaque: anything goes.
    h.ok("settings.set", json!({"map": {"maxsessions": "x", "maxSessionsExtra": -1, "autoSummarize": "no"}}));
    assert_eq!(stored_keys(&db).len(), 6);
}

#[test]
fn remove_deletes_only_named_keys_and_announces_them() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("settings.set", json!({"map": {"a": 1, "b": 2, "c": 3}}));
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("event of the set");
    assert_eq!(event_keys(&ev), ["a", "b", "c"]);
    assert_eq!(h.ok("settings.remove", json!({"keys": ["a", "c", "never"]})), json!({}));
    assert_eq!(stored_keys(&db), ["b"]);
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("changed event");
    assert_eq!(event_keys(&ev), ["a", "c"], "only keys that changed");
    assert!(ev.get("clientRequestId").is_none());
    assert_eq!(h.ok("settings.get", json!({"keys": ["a", "b", "c"]})), json!({"b": 2}));
    assert_eq!(h.err("settings.remove", json!({"keys": []})), "bad_request");
    assert_eq!(h.err("settings.remove", json!({})), "bad_request");
    assert_eq!(h.err("settings.remove", json!({"keys": [7]})), "bad_request");
    assert_eq!(stored_keys(&db), ["b"]);
    // Removing an absent key is a no-op: no change sequence.
    let seq = max_seq(&db);
    h.ok("settings.remove", json!({"keys": ["a"]}));
    assert_eq!(max_seq(&db), seq);
}

#[test]
fn change_events_name_the_keys_and_no_op_sets_emit_nothing() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.events.clear();
    h.ok("settings.set", json!({"map": {"theme": "dark", "font": {"size": 14}}}));
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("changed event");
    assert_eq!(event_keys(&ev), ["font", "theme"]);
    assert!(ev["areas"].get("history").is_none() && ev["areas"].get("sessions").is_none(), "{ev}");
    assert!(ev["areas"].get("binding").is_none(), "{ev}");
    assert!(!ev.to_string().contains("dark"), "events never carry values: {ev}");
    let seq1 = ev["seq"].as_i64().unwrap();
    assert_eq!(max_seq(&db), seq1);

    // Same values again: a no-op, no change sequence, no event.
    h.ok("settings.set", json!({"map": {"theme": "dark", "font": {"size": 14}}}));
    assert_eq!(max_seq(&db), seq1, "a no-op set commits no change");
    // Partly new: only the changed key is announced.
    h.ok("settings.set", json!({"map": {"theme": "dark", "font": {"size": 16}}}));
    // Sentinel write: every event of earlier writes precedes its event on this port.
    h.ok("settings.set", json!({"map": {"sentinel": 1}}));
    let _ = h.wait_event(EVENT_WAIT, |e| names_setting(e, "sentinel")).expect("sentinel event");
    let earlier: Vec<Value> = h.events.drain(..).collect();
    assert_eq!(earlier.len(), 1, "exactly one event between: {earlier:?}");
    assert_eq!(event_keys(&earlier[0]), ["font"], "the unchanged theme is not announced");
    assert!(earlier[0]["seq"].as_i64().unwrap() > seq1);
    assert_eq!(max_seq(&db), seq1 + 2);
}

#[test]
fn client_request_id_replays_the_recorded_result_without_applying() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.events.clear();
    h.ok("settings.set", json!({"map": {"a": 1}, "clientRequestId": "c-set-1"}));
    let ev = h.wait_event(EVENT_WAIT, |e| e["event"] == "changed").expect("event");
    assert_eq!(ev["clientRequestId"], "c-set-1");
    assert_eq!(event_keys(&ev), ["a"]);
    let seq = max_seq(&db);

    // Same id, same op, different map: not applied again, recorded result returned, no event.
    assert_eq!(
        h.ok("settings.set", json!({"map": {"a": 2, "b": 3}, "clientRequestId": "c-set-1"})),
        json!({})
    );
    assert_eq!(h.ok("settings.get", json!({"keys": ["a", "b"]})), json!({"a": 1}));
    assert_eq!(max_seq(&db), seq);
    // Same id with another op: conflict, nothing removed.
    assert_eq!(h.err("settings.remove", json!({"keys": ["a"], "clientRequestId": "c-set-1"})), "conflict");
    assert_eq!(stored_keys(&db), ["a"]);

    // A no-op write still records its id (§11.4).
    h.ok("settings.set", json!({"map": {"a": 1}, "clientRequestId": "c-noop"}));
    assert_eq!(max_seq(&db), seq);
    h.ok("settings.set", json!({"map": {"a": 5}, "clientRequestId": "c-noop"}));
    assert_eq!(
        h.ok("settings.get", json!({"keys": ["a"]})),
        json!({"a": 1}),
        "replayed no-op is not applied"
    );

    // remove with an id: applied once.
    h.ok("settings.set", json!({"map": {"r": true}}));
    h.ok("settings.remove", json!({"keys": ["r"], "clientRequestId": "c-rm"}));
    h.ok("settings.set", json!({"map": {"r": false}}));
    h.ok("settings.remove", json!({"keys": ["r"], "clientRequestId": "c-rm"}));
    assert_eq!(
        h.ok("settings.get", json!({"keys": ["r"]})),
        json!({"r": false}),
        "replayed remove not applied"
    );

    // A rolled-back (failed) write records nothing: the same id can be used afterwards.
    assert_eq!(
        h.err("settings.set", json!({"map": {"maxSessions": -1}, "clientRequestId": "c-fail"})),
        "bad_request"
    );
    h.ok("settings.set", json!({"map": {"after": 1}, "clientRequestId": "c-fail"}));
    assert_eq!(h.ok("settings.get", json!({"keys": ["after"]})), json!({"after": 1}));

    let c = sql(&db);
    let recorded: Vec<(String, String)> = {
        let mut st = c
            .prepare("SELECT client_request_id, op FROM client_requests ORDER BY client_request_id")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    let want: Vec<(String, String)> = [
        ("c-fail", "settings.set"),
        ("c-noop", "settings.set"),
        ("c-rm", "settings.remove"),
        ("c-set-1", "settings.set"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(recorded, want);
    // Reads refuse clientRequestId as an unknown argument.
    assert_eq!(h.err("settings.get", json!({"keys": ["a"], "clientRequestId": "c-read"})), "bad_request");
}

#[test]
fn settings_survive_a_restart() {
    let (_d, db) = temp_db();
    {
        let mut h = Host::spawn(&db);
        h.ok("settings.set", json!({"map": {"theme": "dark", "maxSessions": 3}}));
        let (code, _) = h.close();
        assert_eq!(code, Some(0));
    }
    let mut h = Host::spawn(&db);
    assert_eq!(
        h.ok("settings.get", json!({"keys": ["maxSessions", "theme"]})),
        json!({"theme": "dark", "maxSessions": 3})
    );
}
