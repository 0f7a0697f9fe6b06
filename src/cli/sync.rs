//! `keepsake-host sync …` (docs/sync.md "Setting it up"): init, join, status, pause, resume,
//! leave. The work is in `crate::sync`; this file parses, opens the database and prints.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::json;

use super::{pretty, CliError};
use crate::store::Store;
use crate::sync::key::KeyRef;
use crate::sync::replica::Replica;
use crate::sync::{engine, setup, status, SyncError};
use crate::util::time::now_ms;

#[derive(Subcommand, Debug)]
pub enum SyncAction {
    /// Start syncing through a new sync folder DIR (created when missing): makes the sync key and
    /// prints it once, with the next steps
    Init {
        #[arg(long, value_name = "DIR")]
        folder: PathBuf,
        /// This device's name (default: the host name)
        #[arg(long)]
        name: Option<String>,
    },
    /// Join the sync folder DIR that another of your devices set up, with the key it printed
    Join {
        #[arg(long, value_name = "DIR")]
        folder: PathBuf,
        /// The sync key (`-`: read it from stdin, which keeps it out of the shell's history)
        #[arg(long)]
        key: String,
        /// This device's name (default: the host name)
        #[arg(long)]
        name: Option<String>,
    },
    /// This device, the devices seen, operations applied and pending, and problems
    Status {
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Stop reading and writing the sync folder (what you do meanwhile is kept and written after resume)
    Pause,
    /// Start reading and writing the sync folder again
    Resume,
    /// Stop syncing on this device; its chats stay. The key is removed from the secret store
    Leave {
        /// Also remove this device's own files from the sync folder (other devices keep what
        /// they already applied)
        #[arg(long)]
        remove_my_files: bool,
    },
}

fn err(e: SyncError) -> CliError {
    CliError(e.to_string(), 1)
}

/// The key from `--key`, or one line of stdin for `--key -`.
fn read_key(given: &str) -> Result<String, CliError> {
    if given != "-" {
        return Ok(given.to_owned());
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError(format!("cannot read the key from stdin: {e}"), 1))?;
    Ok(line.trim().to_owned())
}

fn where_kept(j: &setup::Joined) -> String {
    match (&j.kept.key_ref, &j.kept.in_file) {
        (KeyRef::Keyring(_), _) => "The key is kept in this machine's secret store.".into(),
        (KeyRef::Text(_), Some((_, why))) => format!(
            "Warning: the sync key is stored in the database file: no secret store reachable ({why}). It is in plain \
             text there and in every backup of it (never in the sync folder). To keep it in the operating system's secret store instead, run \
             `keepsake-host sync leave` and `sync join` again where it is reachable (a desktop session)."
        ),
        (KeyRef::Text(_), None) => "The sync key is stored in the database file.".into(),
    }
}

pub fn run(db: &Path, action: SyncAction) -> Result<i32, CliError> {
    match action {
        SyncAction::Init { folder, name } => {
            let mut s = Store::open(db)?;
            let secrets = s.secret_store();
            let j = setup::init(&mut s, &*secrets, &folder, name.as_deref(), now_ms()).map_err(err)?;
            s.close();
            let dir = j.device.folder.display().to_string();
            println!(
                "Sync is set up: this device is \u{201c}{}\u{201d}, writing into {dir}.\n\n\
                 Your sync key (shown once; keep it like a password):\n\n    {}\n\n{}\n\n\
                 Next:\n  1. Share {dir} with your other machines in Syncthing (or another folder syncer).\n  \
                 2. On each of them, once the folder has arrived:\n       keepsake-host sync join --folder <its path \
                 there> --key {}\n  3. `keepsake-host sync status` shows the devices seen and anything wrong.",
                j.device.name,
                j.key_text,
                where_kept(&j),
                j.key_text
            );
            Ok(0)
        }
        SyncAction::Join { folder, key, name } => {
            let key = read_key(&key)?;
            let mut s = Store::open(db)?;
            let secrets = s.secret_store();
            let j = setup::join(&mut s, &*secrets, &folder, &key, name.as_deref(), now_ms()).map_err(err)?;
            s.close();
            println!(
                "This device (\u{201c}{}\u{201d}) now syncs through {}. {}\nThe browser's keepsake-host applies the \
                 other devices' chats within seconds; `keepsake-host sync status` shows them.",
                j.device.name,
                j.device.folder.display(),
                where_kept(&j)
            );
            Ok(0)
        }
        SyncAction::Status { json } => {
            let v = if db.exists() {
                let mut s = Store::open_read_only(db)?;
                let secrets = s.secret_store();
                status::report(&mut s, &*secrets, None, true, now_ms())?
            } else {
                // no database yet: nothing syncs
                json!({"setUp": false, "problems": []})
            };
            if json {
                println!("{}", pretty(&v));
            } else {
                print!("{}", status::text(&v));
            }
            Ok(0)
        }
        SyncAction::Pause | SyncAction::Resume => {
            let pause = matches!(action, SyncAction::Pause);
            let mut s = Store::open(db)?;
            if Replica::sync_device(&mut s)?.is_none() {
                return Err(CliError(
                    "this database does not sync (set it up with `keepsake-host sync init`)".into(),
                    1,
                ));
            }
            Replica::sync_set_paused(&mut s, pause)?;
            s.close();
            println!(
                "{}",
                if pause {
                    "Sync is paused: nothing is read from or written to the sync folder until `keepsake-host sync \
                     resume`; what you do meanwhile is kept and written then."
                } else {
                    "Sync resumed."
                }
            );
            Ok(0)
        }
        SyncAction::Leave { remove_my_files } => {
            let mut s = Store::open(db)?;
            let secrets = s.secret_store();
            let left = setup::leave(&mut s, &*secrets, remove_my_files).map_err(err)?;
            s.close();
            println!(
                "This device no longer syncs with {}; its chats stay here.{}",
                left.device.folder.display(),
                if remove_my_files {
                    format!(" {} of its files were removed from the folder.", left.removed)
                } else {
                    " Its files stay in the folder (`--remove-my-files` removes them).".into()
                }
            );
            Ok(0)
        }
    }
}

/// `doctor`'s sync checks: not set up (ok), else the folder, the key, and the problems.
pub fn doctor_checks(store: &mut Store, add: &mut dyn FnMut(&str, &str, String, serde_json::Value)) {
    let secrets = store.secret_store();
    let live = engine::shared_for(store.path()).and_then(|s| s.snapshot());
    match status::report(store, &*secrets, live.as_ref(), true, now_ms()) {
        Ok(v) if v["setUp"] != json!(true) => {
            add("sync", "ok", "this database does not sync".into(), json!({}))
        }
        Ok(v) => {
            let folder = &v["folder"];
            if folder["reachable"] == json!(true) {
                add(
                    "sync folder",
                    "ok",
                    format!("{} is reachable", folder["path"].as_str().unwrap_or_default()),
                    json!({}),
                );
            } else {
                add(
                    "sync folder",
                    "fail",
                    folder["detail"].as_str().unwrap_or_default().to_owned(),
                    json!({}),
                );
            }
            let key = &v["key"];
            let sev = match (key["ok"] == json!(true), key["kept"].as_str()) {
                (false, _) => "fail",
                (true, Some("databaseFile")) => "warn",
                _ => "ok",
            };
            add("sync key", sev, key["detail"].as_str().unwrap_or_default().to_owned(), json!({}));
            let problems: Vec<String> = v["problems"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| !matches!(p["kind"].as_str(), Some("folder" | "key")))
                .map(|p| match p["file"].as_str() {
                    Some(f) => format!(
                        "{}: {f}: {}",
                        p["kind"].as_str().unwrap_or_default(),
                        p["detail"].as_str().unwrap_or_default()
                    ),
                    None => format!(
                        "{}: {}",
                        p["kind"].as_str().unwrap_or_default(),
                        p["detail"].as_str().unwrap_or_default()
                    ),
                })
                .collect();
            if problems.is_empty() {
                add("sync problems", "ok", "none".into(), json!({}));
            } else {
                add("sync problems", "warn", problems.join("; "), json!({"syncProblems": v["problems"]}));
            }
        }
        Err(e) => add("sync", "warn", format!("cannot read the sync state: {}", e.message), json!({})),
    }
}
