//! What `sync status [--json]` and the `sync.status` operation say (PROTOCOL.md "sync"): this
//! device, where its key is, whether the folder is reachable, the operations not sealed yet,
//! every device seen with its name and its segments applied / pending, and the problems.
//!
//! A serving host's engine keeps its last look ([`Seen`]); without one (the CLI with no host
//! running, a host whose engine has not looked yet), the same look runs here without applying.

use serde_json::{json, Value};

use super::key::{self, Check, KeyRef};
use super::layout::Folder;
use super::reader::{FolderStatus, Problem, Reader};
use super::replica::{Device, Replica};
use super::SyncError;
use crate::protocol::HostResult;
use crate::secrets::SecretStore;

/// The engine's last look.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub status: FolderStatus,
    /// When it looked (ms).
    pub at: i64,
    /// Why the last look or write failed, if it did.
    pub error: Option<String>,
}

fn key_json(secrets: &dyn SecretStore, d: &Device, check: &Result<Check, String>) -> Value {
    let kept = match &d.key {
        KeyRef::Keyring(_) => "secretStore",
        KeyRef::Text(_) => "databaseFile",
    };
    let reachable = secrets.probe();
    let (ok, detail) = match check {
        Ok(Check::Right) => (true, match &d.key {
            KeyRef::Keyring(_) => format!("the sync key is in {} and opens the folder", secrets.name()),
            KeyRef::Text(_) => match &reachable {
                Err(why) => format!(
                    "the sync key is stored in the database file: no secret store reachable ({why}); it is in plain \
                     text there and in every backup of it (never in the sync folder)"
                ),
                Ok(()) => format!(
                    "the sync key is stored in the database file, not in {}: run `keepsake-host sync leave` and \
                     `sync join` again to move it",
                    secrets.name()
                ),
            },
        }),
        Ok(Check::Wrong) => (false, "the sync key does not open this folder's keycheck: it is not this folder's key".into()),
        Ok(Check::Missing) => (true, "the folder has no keycheck yet (has the syncer copied it?)".into()),
        Ok(Check::Unreadable(why)) => (true, format!("the folder's keycheck cannot be read now: {why}")),
        Err(why) => (false, why.clone()),
    };
    json!({
        "kept": kept,
        "secretStore": secrets.name(),
        "reachable": reachable.is_ok(),
        "reason": reachable.err(),
        "ok": ok,
        "detail": detail,
    })
}

/// Is the folder there? `Err` says what is wrong.
pub fn folder_reachable(d: &Device) -> Result<(), String> {
    let f = Folder::new(&d.folder);
    match std::fs::metadata(&d.folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a folder", d.folder.display())),
        Err(e) => return Err(format!("the sync folder {} cannot be reached: {e}", d.folder.display())),
    }
    if !f.base().is_dir() {
        return Err(format!(
            "{} holds no keepsake folder (was it removed, or is another folder mounted there?)",
            d.folder.display()
        ));
    }
    Ok(())
}

/// The whole report. Without the engine's last look (`seen`), `look` runs one here (the CLI);
/// a serving host passes false, so a reply never waits on the folder.
pub fn report(
    r: &mut dyn Replica,
    secrets: &dyn SecretStore,
    seen: Option<&Seen>,
    look: bool,
    now: i64,
) -> HostResult<Value> {
    let running = seen.is_some();
    let Some(d) = r.sync_device()? else {
        return Ok(json!({"setUp": false, "problems": []}));
    };
    let loaded = key::load(secrets, &d.key);
    let check = loaded.as_ref().map(|k| key::check(&Folder::new(&d.folder), k)).map_err(Clone::clone);
    let reach = folder_reachable(&d);
    let mut problems: Vec<Problem> = Vec::new();
    if let Err(why) = &reach {
        problems.push(Problem { kind: "folder".into(), device: None, file: None, detail: why.clone() });
    }
    let key_v = key_json(secrets, &d, &check);
    if key_v["ok"] == json!(false) {
        problems.push(Problem {
            kind: "key".into(),
            device: None,
            file: None,
            detail: key_v["detail"].as_str().unwrap_or_default().to_owned(),
        });
    }
    let mut looked_at = seen.map(|s| s.at);
    let folder_status: FolderStatus = match (seen, &loaded, &reach) {
        (Some(s), _, _) => {
            if let Some(e) = &s.error {
                problems.push(Problem { kind: "folder".into(), device: None, file: None, detail: e.clone() });
            }
            s.status.clone()
        }
        (None, Ok(k), Ok(())) if look => {
            let mut reader = Reader::new(Folder::new(&d.folder), &d.id, k.clone());
            looked_at = Some(now);
            match reader.look(r, false, now, &mut |_| {}) {
                Ok(st) => st,
                Err(SyncError::Store(e)) => return Err(e),
                Err(e) => {
                    problems.push(Problem {
                        kind: "folder".into(),
                        device: None,
                        file: None,
                        detail: e.to_string(),
                    });
                    FolderStatus::default()
                }
            }
        }
        _ => FolderStatus::default(),
    };
    problems.extend(folder_status.problems.iter().cloned());
    let outbox = r.sync_outbox_pending()?;
    // what the database counted (kept across processes and restarts), over this process's look
    let mut folder_status = folder_status;
    for p in r.sync_peer_counts()? {
        if let Some(d) = folder_status.devices.iter_mut().find(|d| d.id == p.id) {
            d.ops_applied = p.ops_applied;
            d.last_applied_at = p.last_applied_at.or(d.last_applied_at);
        }
    }
    Ok(json!({
        "setUp": true,
        "device": {
            "id": d.id,
            "name": d.name,
            "folder": d.folder.display().to_string(),
            "createdAt": d.created_at,
            "paused": d.paused,
        },
        "running": running,
        "key": key_v,
        "folder": {"path": d.folder.display().to_string(), "reachable": reach.is_ok(), "detail": reach.err()},
        "outbox": outbox,
        "devices": folder_status.devices,
        "problems": problems,
        "lastLookAt": looked_at,
    }))
}

/// The report for a person, one line per fact (`sync status` without `--json`).
pub fn text(v: &Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if v["setUp"] != json!(true) {
        return "This database does not sync. Set it up with `keepsake-host sync init --folder DIR` (first device) \
                or `keepsake-host sync join --folder DIR --key KEY` (the others)."
            .into();
    }
    let d = &v["device"];
    let _ = writeln!(
        s,
        "This device: {} ({}){}",
        d["name"].as_str().unwrap_or_default(),
        d["id"].as_str().unwrap_or_default(),
        if d["paused"] == json!(true) { " — paused (`keepsake-host sync resume` resumes)" } else { "" }
    );
    let _ = writeln!(s, "Folder:      {}", d["folder"].as_str().unwrap_or_default());
    let _ = writeln!(s, "Key:         {}", v["key"]["detail"].as_str().unwrap_or_default());
    let _ = writeln!(s, "Not sealed:  {} operation(s) waiting for the folder", v["outbox"]);
    let devices = v["devices"].as_array().cloned().unwrap_or_default();
    if devices.is_empty() {
        let _ = writeln!(s, "Devices:     none seen in the folder yet");
    } else {
        let _ = writeln!(s, "Devices:");
        for dv in devices {
            let name = dv["name"].as_str().filter(|n| !n.is_empty()).unwrap_or("(name not read yet)");
            if dv["self"] == json!(true) {
                let _ = writeln!(s, "  {name} (this device): {} segment(s) written", dv["segments"]);
            } else {
                let last = dv["lastAppliedAt"].as_i64().map(crate::util::time::local_minute);
                let _ = writeln!(
                    s,
                    "  {name}: {} segment(s) applied, {} pending{}{}",
                    dv["applied"],
                    dv["pending"],
                    match dv["waitingPictures"].as_u64() {
                        Some(n) if n > 0 => format!(" (waiting for {n} picture(s))"),
                        _ => String::new(),
                    },
                    last.map(|l| format!(", last applied {l}")).unwrap_or_default()
                );
            }
        }
    }
    let problems = v["problems"].as_array().cloned().unwrap_or_default();
    if problems.is_empty() {
        let _ = writeln!(s, "Problems:    none");
    } else {
        let _ = writeln!(s, "Problems:");
        for p in problems {
            let _ = match p["file"].as_str() {
                Some(f) => writeln!(
                    s,
                    "  {}: {f}: {}",
                    p["kind"].as_str().unwrap_or_default(),
                    p["detail"].as_str().unwrap_or_default()
                ),
                None => writeln!(
                    s,
                    "  {}: {}",
                    p["kind"].as_str().unwrap_or_default(),
                    p["detail"].as_str().unwrap_or_default()
                ),
            };
        }
    }
    s
}
