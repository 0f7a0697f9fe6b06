//! The surface with the real binary (docs/sync.md "Setting it up", "Status and problems"):
//! `sync init` prints the key once with the next steps and says where the key is kept; `sync
//! status` (text and `--json`), `pause` / `resume` from the command line and as operations,
//! `leave [--remove-my-files]`; `doctor`'s sync checks (folder reachable, key present and right).

use std::time::Duration;

use serde_json::{json, Value};

use super::common::*;
use super::syncthing::wait_for;
use crate::harness::*;
use crate::settings::secrets::cli_env;

fn doctor(db: &std::path::Path) -> Vec<Value> {
    let (_, out, err) = cli_env(db, &["doctor", "--json"], &no_store());
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("doctor --json: {e}: {out}{err}"));
    v["checks"].as_array().cloned().unwrap_or_default()
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks.iter().find(|c| c["check"] == name).unwrap_or_else(|| panic!("no {name} check in {checks:#?}"))
}

#[test]
fn init_status_pause_resume_leave_and_doctor_from_the_command_line() {
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    // not set up: status says how; doctor says it does not sync; pause refuses
    let (code, out, _) = cli_env(&dba, &["sync", "status"], &no_store());
    assert_eq!(code, 0);
    assert!(out.contains("does not sync") && out.contains("sync init"), "{out}");
    Host::spawn(&dba).ok("history.meta", json!({}));
    assert_eq!(check(&doctor(&dba), "sync")["status"], "ok");
    let (code, _, err) = cli_env(&dba, &["sync", "pause"], &no_store());
    assert_ne!(code, 0);
    assert!(err.contains("does not sync"), "{err}");

    let (code, out, err) = cli_env(
        &dba,
        &["sync", "init", "--folder", &folder.display().to_string(), "--name", "laptop"],
        &no_store(),
    );
    assert_eq!(code, 0, "{err}");
    let key = key_in(&out).unwrap();
    assert!(out.contains("shown once") && out.contains("sync join --folder") && out.contains(&key), "{out}");
    assert!(out.contains("stored in the database file: no secret store reachable"), "{out}");
    join(&dbb, &folder, &key, "desk", &no_store());
    // a second init on the same database, or on a folder that has one, is refused
    let (code, _, err) =
        cli_env(&dba, &["sync", "init", "--folder", &folder.display().to_string()], &no_store());
    assert_ne!(code, 0);
    assert!(err.contains("already syncs"), "{err}");

    let mut a = Host::spawn(&dba);
    a.ok("history.append", json!({"entry": user("hello from the laptop")}));
    let mut b = Host::spawn(&dbb);
    b.ok("history.meta", json!({}));
    let st: Value = wait_for("b's engine to see a", Duration::from_secs(60), || {
        let v = b.ok("sync.status", json!({}));
        v["devices"]
            .as_array()?
            .iter()
            .any(|d| {
                d["name"] == "laptop" && d["pending"] == json!(0) && d["applied"].as_u64().unwrap_or(0) > 0
            })
            .then_some(v)
    });
    assert_eq!(st["setUp"], json!(true));
    assert_eq!(st["running"], json!(true));
    assert_eq!(st["device"]["name"], "desk");
    assert_eq!(st["key"]["kept"], "databaseFile");
    assert!(st["problems"].as_array().unwrap().is_empty(), "{st:#}");

    // the text form names both devices
    let (_, text, _) = cli_env(&dbb, &["sync", "status"], &no_store());
    assert!(
        text.contains("This device: desk") && text.contains("laptop:") && text.contains("Problems:    none"),
        "{text}"
    );

    // pause and resume as operations (and from the command line)
    let p = b.ok("sync.pause", json!({}));
    assert_eq!(p["device"]["paused"], json!(true));
    let (_, text, _) = cli_env(&dbb, &["sync", "status"], &no_store());
    assert!(text.contains("paused"), "{text}");
    let r = b.ok("sync.resume", json!({}));
    assert_eq!(r["device"]["paused"], json!(false));
    let (code, out, _) = cli_env(&dbb, &["sync", "pause"], &no_store());
    assert_eq!(code, 0);
    assert!(out.contains("Sync is paused"), "{out}");
    assert_eq!(status(&dbb, &no_store())["device"]["paused"], json!(true));
    cli_env(&dbb, &["sync", "resume"], &no_store());
    assert_eq!(status(&dbb, &no_store())["device"]["paused"], json!(false));

    // doctor: folder reachable, key right, no problems
    let checks = doctor(&dbb);
    assert_eq!(check(&checks, "sync folder")["status"], "ok", "{checks:#?}");
    assert_eq!(check(&checks, "sync key")["status"], "warn", "kept in the database file: a warning");
    assert_eq!(check(&checks, "sync problems")["status"], "ok");
    // the folder gone: doctor fails on it and status lists it
    let moved = t.path().join("Sync-moved");
    std::fs::rename(&folder, &moved).unwrap();
    let checks = doctor(&dbb);
    assert_eq!(check(&checks, "sync folder")["status"], "fail", "{checks:#?}");
    let st = status(&dbb, &no_store());
    assert!(st["problems"].as_array().unwrap().iter().any(|p| p["kind"] == "folder"), "{st:#}");
    std::fs::rename(&moved, &folder).unwrap();

    // leave with --remove-my-files: b's folder goes, a's stays, b's chats stay
    a.close();
    b.close();
    let bid = status(&dbb, &no_store())["device"]["id"].as_str().unwrap().to_owned();
    let (code, out, err) = cli_env(&dbb, &["sync", "leave", "--remove-my-files"], &no_store());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no longer syncs") && out.contains("chats stay"), "{out}");
    assert!(!folder.join("keepsake/devices").join(&bid).exists());
    assert_eq!(status(&dbb, &no_store())["setUp"], json!(false));
    let mut b = Host::spawn(&dbb);
    let texts = all_texts(&mut b);
    assert!(texts.iter().any(|t| t.contains("hello from the laptop")), "the chats stay after leave");
    assert_eq!(b.err("sync.pause", json!({})), "unsupported");
    b.close();
}

#[test]
fn a_chat_continued_on_another_device_reaches_the_open_panel_as_a_changed_event() {
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let key = init(&dba, &folder, "laptop", &no_store());
    join(&dbb, &folder, &key, "desk", &no_store());
    let mut a = Host::spawn(&dba);
    a.ok("history.append", json!({"entry": user("started on the laptop")}));
    a.ok("history.append", json!({"entry": assistant("an answer")}));
    let sid = a.ok("history.meta", json!({}))["activeSessionId"].as_str().unwrap().to_owned();
    let mut b = Host::spawn(&dbb);
    wait_for_sessions(&mut b, std::slice::from_ref(&sid), Duration::from_secs(60));
    // the desk's panel shows that chat
    b.ok("sessions.load", json!({"id": sid}));
    let seen = b.ok("history.meta", json!({}))["changeSeq"].as_i64().unwrap();
    let t0 = std::time::Instant::now();
    a.ok("history.append", json!({"entry": user("continued on the laptop")}));
    let ev = b
        .wait_event(Duration::from_secs(30), |e| {
            e["event"] == "changed" && e["seq"].as_i64() > Some(seen) && e["areas"]["history"] == json!(true)
        })
        .expect("a changed event naming the live history on the other device");
    let took = t0.elapsed();
    let h = b.ok("history.get", json!({}));
    let last = h["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "continued on the laptop", "{h:#}");
    eprintln!("the open panel on the other device got {} after {took:?}", ev["areas"]);
    a.close();
    // a host that syncs exits as soon as its stdin closes (both threads stopped between steps)
    let (code, exit) = b.close();
    eprintln!("a syncing host exited {exit:?} after its stdin closed");
    assert_eq!(code, Some(0));
    assert!(exit < Duration::from_secs(3), "{exit:?}");
}

/// Replies never wait for sync (docs/sync.md "How it runs"): while a host catches up on another
/// device's backlog, its replies to reads and writes are timed. The figure is printed; the bound
/// only separates "answers" from "frozen behind the apply".
#[test]
fn replies_do_not_wait_for_the_reader_catching_up() {
    let _serial = serial();
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let key = init(&dba, &folder, "laptop", &no_store());
    join(&dbb, &folder, &key, "desk", &no_store());
    let chats = size("KEEPSAKE_SYNC_BACKLOG_CHATS", 150, 1500);
    let mut a = Host::spawn(&dba);
    let mut rng = Rng::from_env();
    let (_, ids) = random_chats(&mut a, &mut rng, chats, "backlog");
    wait_for("a's outbox to empty", Duration::from_secs(120), || {
        (status(&dba, &no_store())["outbox"] == json!(0)).then_some(())
    });
    a.close();
    let mut b = Host::spawn(&dbb);
    let t0 = std::time::Instant::now();
    let mut lat = Vec::new();
    let mut n = 0;
    loop {
        let s = std::time::Instant::now();
        if n % 2 == 0 {
            b.ok("history.meta", json!({}));
        } else {
            b.ok(
                "history.append",
                json!({"entry": user(&format!("typed on the desk while it catches up {n}"))}),
            );
        }
        lat.push(s.elapsed());
        n += 1;
        let have = b.ok("sessions.list", json!({"limit": 1}))["total"].as_u64().unwrap_or(0);
        if have as usize > ids.len() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "the backlog did not arrive");
    }
    let caught_up = t0.elapsed();
    lat.sort();
    let (p50, p99, max) = (lat[lat.len() / 2], lat[lat.len() * 99 / 100], *lat.last().unwrap());
    eprintln!(
        "catching up on {chats} chats took {caught_up:?}; {} replies meanwhile: p50 {p50:?}, p99 {p99:?}, max {max:?}",
        lat.len()
    );
    assert!(max < Duration::from_secs(5), "a reply waited {max:?} for the reader");
    b.close();
}
