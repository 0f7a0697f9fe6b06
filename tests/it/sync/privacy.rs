//! Privacy (docs/sync.md "Privacy: what the folder holds", "The key"), with the real binary:
//! after random chats with marker words, a picture and an API key, on a device without a secret
//! store and on one with a real one (GNOME Keyring on a D-Bus session bus of the test's own), the
//! sync folder's bytes hold no marker, no picture and no key, and the other device has every
//! chat; a wrong key at `sync join` is a clear error that changes nothing; a segment with one
//! flipped byte is refused and reported by `sync status`.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::common::*;
use crate::harness::*;
use crate::settings::secrets::{env_refs, Keyring};

fn privacy_run(env: &[(String, String)], tag: &str) {
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let key = init(&dba, &folder, "laptop", env);
    join(&dbb, &folder, &key, "desk", &no_store());
    let mut rng = Rng::from_env();
    let chats = size("KEEPSAKE_SYNC_PRIVACY_CHATS", 8, 200);
    eprintln!("privacy ({tag}): seed {} chats {chats}", rng.seed());
    let mut a = Host::spawn_with(&dba, &[ORIGIN], &env_refs(env));
    let mut b = Host::spawn(&dbb);
    let api_key = format!("sk-sync-privacy-{tag}-{}", rng.next_u64());
    let r = a.ok(
        "settings.set",
        json!({"map": {"providers": [{"id": "p", "name": "P", "kind": "chat", "baseUrl": "https://p.example", "apiKey": api_key, "model": "m"}], "systemPrompt": "mrkSYSTEMPROMPT"}}),
    );
    let png = noise_png(24, 24, rng.next_u64());
    a.ok("history.append", json!({"entry": {"role": "user", "content": [text_part("mrkPICTUREq"), image_part(&data_url("image/png", &png))]}}));
    let (mut markers, mut ids) = random_chats(&mut a, &mut rng, chats, tag);
    markers.push("mrkPICTUREq".into());
    markers.push("mrkSYSTEMPROMPT".into());
    ids.dedup();
    let took = wait_for_sessions(&mut b, &ids, Duration::from_secs(120));
    eprintln!(
        "privacy ({tag}): {} chats on the other device after {took:?}; settings.set said {r}",
        ids.len()
    );
    for m in &markers {
        let hits = holding(&folder, m.as_bytes());
        assert!(hits.is_empty(), "marker {m} is readable in {hits:?}");
    }
    assert!(holding(&folder, api_key.as_bytes()).is_empty(), "the API key is in the folder");
    assert!(
        holding(&folder, &png[png.len() / 2..png.len() / 2 + 64]).is_empty(),
        "the picture's bytes are in the folder"
    );
    assert!(holding(&folder, key.as_bytes()).is_empty(), "the sync key is in the folder");
    let raw_key: String = key.chars().filter(|c| *c != '-').collect();
    assert!(holding(&folder, raw_key.as_bytes()).is_empty(), "the sync key is in the folder");
    // file names say nothing either
    for (p, _) in files(&folder) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!markers.iter().any(|m| name.contains(m.as_str())), "{name}");
    }
    let n = files(&folder).len();
    let bytes: usize = files(&folder).iter().map(|(_, b)| b.len()).sum();
    eprintln!(
        "privacy ({tag}): {} markers, 1 API key, 1 picture: none in the folder's {n} files ({bytes} bytes)",
        markers.len()
    );
    a.close();
    b.close();
}

#[test]
fn t35_the_folder_holds_no_word_typed_no_picture_and_no_api_key_without_a_secret_store() {
    privacy_run(&no_store(), "nostore");
}

#[test]
fn t35_the_folder_holds_no_word_typed_no_picture_and_no_api_key_with_a_secret_store() {
    let Some(kr) = Keyring::start() else { return };
    privacy_run(&kr.host_env(), "keyring");
    // the sync key went to the keyring, as API keys do
    let items = kr.items();
    assert!(items.iter().any(|(_, label, _)| label.starts_with("Keepsake sync key")), "{items:?}");
}

#[test]
fn t35_a_wrong_key_at_join_is_a_clear_error_that_changes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    init(&dba, &folder, "a", &no_store());
    // b has a chat of its own already
    let mut h = Host::spawn(&dbb);
    h.ok("history.append", json!({"entry": user("mine")}));
    h.close();
    let (folder_before, db_before) = (files(&folder), db_fingerprint(&dbb));
    let wrong = "abcd-efgh-ijkl-mnop-qrst-uvwx-yz23-4567-abcd-efgh-ijkl-mnop-qrsq";
    let (code, out, err) = crate::settings::secrets::cli_env(
        &dbb,
        &["sync", "join", "--folder", &folder.display().to_string(), "--key", wrong],
        &no_store(),
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("this is not the key of the sync folder") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(files(&folder), folder_before, "the folder changed");
    assert_eq!(db_fingerprint(&dbb), db_before, "the database changed");
    assert_eq!(status(&dbb, &no_store())["setUp"], json!(false));
    eprintln!("wrong key at join: exit {code}: {}", err.trim());
}

fn age(p: &Path) {
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(3600)).unwrap();
}

#[test]
fn t35_a_segment_with_one_flipped_byte_is_refused_and_reported() {
    let t = tempfile::tempdir().unwrap();
    let folder = t.path().join("Sync");
    let (dba, dbb) = (t.path().join("a/keepsake.db"), t.path().join("b/keepsake.db"));
    let key = init(&dba, &folder, "a", &no_store());
    join(&dbb, &folder, &key, "b", &no_store());
    let mut a = Host::spawn(&dba);
    let mut rng = Rng::from_env();
    let (_, first) = random_chats(&mut a, &mut rng, 1, "one");
    // wait for a's first segments, then flip one byte of the newest
    let dev = status(&dba, &no_store())["device"]["id"].as_str().unwrap().to_owned();
    let dir = folder.join("keepsake/devices").join(&dev);
    let segs = |d: &Path| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = files(d)
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| p.extension().is_some_and(|e| e == "seg"))
            .collect();
        v.sort();
        v
    };
    super::syncthing::wait_for("a's first segment", Duration::from_secs(30), || {
        (status(&dba, &no_store())["outbox"] == json!(0) && !segs(&dir).is_empty()).then_some(())
    });
    let (_, second) = random_chats(&mut a, &mut rng, 1, "two");
    let before = segs(&dir).len();
    super::syncthing::wait_for("a's second segment", Duration::from_secs(30), || {
        (status(&dba, &no_store())["outbox"] == json!(0) && segs(&dir).len() > before).then_some(())
    });
    a.close();
    let victim = segs(&dir).last().cloned().unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&victim, &bytes).unwrap();
    age(&victim);
    let st = status(&dbb, &no_store());
    let problems = st["problems"].as_array().cloned().unwrap_or_default();
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        problems
            .iter()
            .any(|p| p["kind"] == "foreign" && p["file"].as_str().is_some_and(|f| f.ends_with(&name))),
        "{st:#}"
    );
    // the host applies the intact segments and not the flipped one, and reports it too
    let mut b = Host::spawn(&dbb);
    wait_for_sessions(&mut b, &first, Duration::from_secs(60));
    let report: Value = super::syncthing::wait_for("the host's report", Duration::from_secs(30), || {
        let v = b.ok("sync.status", json!({}));
        v["problems"].as_array().is_some_and(|p| p.iter().any(|p| p["kind"] == "foreign")).then_some(v)
    });
    let theirs =
        report["devices"].as_array().unwrap().iter().find(|d| d["id"] == json!(dev)).cloned().unwrap();
    assert!(theirs["pending"].as_u64().unwrap() >= 1, "the flipped segment was applied: {theirs}");
    let _ = second;
    eprintln!("flipped byte {at} of {name}: refused; problems: {}", report["problems"]);
    b.close();
}
