//! The command line: one clap surface, one function per subcommand. Read-only commands open
//! the database read-only.
#![allow(clippy::print_stdout)]

pub mod browsers;
pub mod doctor;
pub mod generate;
pub mod install;
pub mod proof;
pub mod sync;

use std::io::Read;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};

use crate::domain::import::SettingsMode;
use crate::domain::sessions::DrawerRow;
use crate::protocol::{ErrorCode, HostError};
use crate::store::maintenance::backup_file;
use crate::store::{salvage, ExportFormat, ImportOptions, Store};
use crate::util::files::{self, Existing, WriteError, WriteFailed};
use crate::util::paths::resolve_db_path;

#[derive(Parser, Debug)]
#[command(name = "keepsake-host", version, about = "Keepsake's native messaging host and database tool")]
pub struct Cli {
    /// Database file (default: $KEEPSAKE_DB, else the platform data dir)
    #[arg(long, global = true, value_name = "FILE")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve native messaging on stdin/stdout (what the browser runs)
    Serve,
    /// Counts, sizes, schema version and integrity of the database
    Inspect {
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// List saved sessions (pinned first, newest first)
    Sessions {
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Search saved sessions by name and full text
    Search {
        query: String,
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Export sessions (markdown: one session; json: one or more, or every one with --all)
    Export {
        /// Chat ids, whole or their first characters (8 are usually enough)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        ids: Vec<String>,
        /// Export every saved chat (pinned first, newest first) as one JSON document, as the
        /// panel's "Export all" does; implies --format json
        #[arg(long)]
        all: bool,
        /// markdown (one chat, readable) or json (lossless, for `keepsake-host import`)
        #[arg(long, value_enum, default_value_t = Format::Markdown)]
        format: Format,
        /// Write to this file instead of stdout (a new file, mode 0600)
        ///
        /// The export is written under a temp name beside FILE and put in place only when
        /// whole. A regular file you own is replaced (by rename: a new 0600 file); a symbolic
        /// link, a folder or a file that belongs to another user is refused (exit status 73)
        /// and left as it was.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Import a Keepsake JSON export or a browser storage dump (`-` = stdin)
    Import {
        file: String,
        /// What to do with the document's settings: none (default), keep (add missing ones) or
        /// overwrite (replace the host's values); list them first with --preview
        #[arg(long, value_enum, default_value_t = SettingsArg::None)]
        settings: SettingsArg,
        /// Show what the import would do (sessions, settings with secrets masked); change nothing
        #[arg(long)]
        preview: bool,
    },
    /// What was deleted (kept `trashDays`, 30 by default): list it, restore an item, or purge
    Trash {
        #[command(subcommand)]
        action: Option<TrashAction>,
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Back up the database with SQLite's online backup API into a new file (mode 0600)
    ///
    /// The copy is written under a temp name beside FILE and put in place only when whole. FILE
    /// must not exist: an existing file or symbolic link is never replaced (exit status 73).
    Backup { file: PathBuf },
    /// List the copies Keepsake keeps of the database: daily backups, the copies made before
    /// migrations and restores, and "Back up now" copies (kind, time, schema, chats, size), with
    /// the last daily backup's outcome
    ///
    /// The copies are in the backup folder (setting backupFolder; by default the folder `backups`
    /// beside the database); copies made before a migration are always in `backups` beside it.
    Backups {
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Put a copy back as the database (an ID from `keepsake-host backups`); the current
    /// database first becomes a copy itself, so the restore can be undone the same way
    ///
    /// Works with the browser open: the other keepsake-host processes announce the restore and
    /// serve the restored chats. A copy with an older schema is migrated on the way (the copy
    /// itself is left as it is); a damaged copy, or one written by a newer keepsake-host, is
    /// refused and nothing changes. Asks for confirmation on a terminal unless --yes.
    Restore {
        /// The copy's id, as `keepsake-host backups` lists it
        id: String,
        /// Do not ask for confirmation (required when stdin is not a terminal)
        #[arg(long)]
        yes: bool,
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Check the database and, if it is damaged, keep a copy aside and salvage what can be read
    /// into a fresh database (what a host start does at most once per 24 h)
    Salvage {
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Print the typed contract of the wire protocol: every operation's name, whether it is a
    /// read or a write, and the JSON Schema of its arguments (`host.hello` reports its sha256 as
    /// `schemaHash`)
    Schema,
    /// Sync this database with your other devices through a folder a syncer (Syncthing, …)
    /// replicates: init, join, status, pause, resume, leave (docs/sync.md)
    Sync {
        #[command(subcommand)]
        action: sync::SyncAction,
    },
    /// Check the installation and the database; one line per finding
    Doctor {
        /// Print the result as JSON (for scripts) instead of text
        #[arg(long)]
        json: bool,
        /// Also check this browser profile folder (`--user-data-dir` of the browser); repeatable
        #[arg(long = "user-data-dir", value_name = "DIR")]
        user_data_dirs: Vec<PathBuf>,
    },
    /// Register the host with every detected Chromium-family browser (writes dev.keepsake.host.json)
    Install {
        /// Register system-wide (/etc/... on Linux, /Library/... on macOS, HKLM on Windows)
        #[arg(long)]
        system: bool,
        /// Register this browser profile folder (the browser's `--user-data-dir`) instead of the
        /// detected browsers; repeatable
        #[arg(long = "user-data-dir", value_name = "DIR")]
        user_data_dirs: Vec<PathBuf>,
        /// Allow another extension ID besides Keepsake's own; repeatable
        #[arg(long = "extension-id", value_name = "ID")]
        extension_ids: Vec<String>,
        /// The host binary the browser should run (default: this executable)
        #[arg(long, value_name = "PATH")]
        bin: Option<PathBuf>,
        /// Show what would be written, write nothing
        #[arg(long)]
        dry_run: bool,
        /// Print a machine-readable report
        #[arg(long)]
        json: bool,
        /// For installer scripts: --bin was placed by the script, so uninstall deletes it
        #[arg(long, hide = true)]
        owns_bin: bool,
        /// For installer scripts: a folder the script created (uninstall removes it when empty)
        #[arg(long = "created-dir", value_name = "DIR", hide = true)]
        created_dirs: Vec<PathBuf>,
        /// For package builds, with --system: write every system-wide manifest under DIR (the
        /// package's staging folder), for every browser; --bin is the installed path; no receipt
        #[arg(long = "package-root", value_name = "DIR", hide = true, requires = "system")]
        package_root: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh or fish) on stdout
    Completions {
        #[arg(value_enum)]
        shell: generate::Shell,
    },
    /// For packagers: write the man pages (keepsake-host.1 and one per subcommand) into DIR
    ///
    /// Mode 0644, replacing pages you own; a symbolic link or another user's file is refused
    /// (exit status 73).
    #[command(hide = true)]
    Man { dir: PathBuf },
    /// Remove every manifest (and registry key) install wrote; keeps your data unless --purge-data
    Uninstall {
        /// Also remove system-wide manifests
        #[arg(long)]
        system: bool,
        /// Also clean this browser profile folder; repeatable
        #[arg(long = "user-data-dir", value_name = "DIR")]
        user_data_dirs: Vec<PathBuf>,
        /// Also delete the database, its log, the copies Keepsake kept of it in `backups` beside it,
        /// and the data folder (your chat history); copies in another backupFolder are kept
        #[arg(long)]
        purge_data: bool,
        /// Print a machine-readable report
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum TrashAction {
    /// List what is in the trash, newest first (the default)
    List,
    /// Put an item back: a session under its own id, name and pin; entries as a session of their own
    Restore {
        /// The item's id, as `keepsake-host trash` lists it
        id: String,
    },
    /// Destroy an item for good (or every item with --all)
    Purge {
        /// The item's id, as `keepsake-host trash` lists it
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Destroy every item in the trash
        #[arg(long)]
        all: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingsArg {
    None,
    Keep,
    Overwrite,
}

/// A CLI failure: message for stderr and the exit code.
pub struct CliError(pub String, pub i32);

/// The exit status when an output file was refused (it exists and may not be replaced, is a
/// symbolic link, is not a regular file, or belongs to another user): sysexits' `EX_CANTCREAT`.
pub const EXIT_CANT_CREATE: i32 = 73;

impl From<WriteError> for CliError {
    fn from(e: WriteError) -> Self {
        let code = if e.is_refusal() { EXIT_CANT_CREATE } else { 1 };
        CliError(e.to_string(), code)
    }
}

impl From<HostError> for CliError {
    fn from(e: HostError) -> Self {
        CliError(format!("{} ({})", e.message, e.code.as_str()), 1)
    }
}

impl From<crate::store::StoreError> for CliError {
    fn from(e: crate::store::StoreError) -> Self {
        CliError(e.to_string(), 1)
    }
}

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn fmt_time(ms: i64) -> String {
    crate::util::time::local_minute(ms)
}

fn print_rows(rows: &[DrawerRow], empty: &str) {
    if rows.is_empty() {
        println!("{empty}");
        return;
    }
    println!("{:<38} {:<16} {:>3} {:>7}  NAME", "ID", "CREATED", "PIN", "ENTRIES");
    for r in rows {
        println!(
            "{:<38} {:<16} {:>3} {:>7}  {}",
            r.id,
            fmt_time(r.created_at),
            if r.pinned { "*" } else { "" },
            r.entry_count,
            r.name
        );
        if let Some(s) = &r.snippet {
            println!("{:<38} {}", "", s);
        }
    }
}

/// Chat ids as given on the command line: a whole id, or the start of exactly one (as `sessions`
/// prints them; 8 characters are usually enough). No match, or several, is an error that says so,
/// listing the candidates.
fn resolve_ids(rows: &[DrawerRow], given: &[String]) -> Result<Vec<String>, CliError> {
    let mut out = Vec::with_capacity(given.len());
    for g in given {
        if rows.iter().any(|r| &r.id == g) {
            out.push(g.clone());
            continue;
        }
        let hits: Vec<&DrawerRow> =
            rows.iter().filter(|r| !g.is_empty() && r.id.starts_with(g.as_str())).collect();
        match hits.as_slice() {
            [one] => out.push(one.id.clone()),
            [] => {
                return Err(CliError(
                    format!(
                        "no saved chat has an id starting with “{g}” (keepsake-host sessions lists them)"
                    ),
                    2,
                ))
            }
            many => {
                let list: Vec<String> = many.iter().map(|r| format!("  {}  {}", r.id, r.name)).collect();
                return Err(CliError(
                    format!(
                        "“{g}” starts the ids of {} saved chats; give more of the id:\n{}",
                        many.len(),
                        list.join("\n")
                    ),
                    2,
                ));
            }
        }
    }
    Ok(out)
}

/// Run a CLI command; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32, CliError> {
    let db = resolve_db_path(cli.db.as_deref());
    match cli.command {
        Command::Serve => unreachable!("serve is handled by main"),
        Command::Inspect { json } => {
            let mut s = Store::open_read_only(&db)?;
            let v = s.inspect()?;
            if json {
                println!("{}", pretty(&v));
            } else {
                print_inspect(&v);
            }
            Ok(0)
        }
        Command::Sessions { json } => {
            let mut s = Store::open_read_only(&db)?;
            let rows = s.sessions_list(None, None, None)?.rows();
            if json {
                println!("{}", pretty(&rows));
            } else {
                print_rows(&rows, "No saved chats yet.");
            }
            Ok(0)
        }
        Command::Search { query, json } => {
            let mut s = Store::open_read_only(&db)?;
            let rows = s.sessions_list(Some(&query), None, None)?.rows();
            if json {
                println!("{}", pretty(&rows));
            } else {
                print_rows(
                    &rows,
                    &format!("No saved chat matches “{query}” (names and full text were searched)."),
                );
            }
            Ok(0)
        }
        Command::Export { ids, all, format, out } => {
            let mut s = Store::open_read_only(&db)?;
            let f = match format {
                _ if all => ExportFormat::Json,
                Format::Markdown if ids.len() != 1 => {
                    return Err(CliError("markdown export takes exactly one session id".into(), 2))
                }
                Format::Markdown => ExportFormat::Markdown,
                Format::Json => ExportFormat::Json,
            };
            let rows = s.sessions_list(None, None, None)?.rows();
            let ids =
                if all { rows.iter().map(|r| r.id.clone()).collect() } else { resolve_ids(&rows, &ids)? };
            let v = s.sessions_export(&ids, f)?;
            let text = v["text"].as_str().unwrap_or_default();
            match out {
                Some(p) => {
                    files::write_bytes(&p, files::PRIVATE, Existing::ReplaceOwn, text.as_bytes())?;
                    eprintln!(
                        "wrote {} ({} bytes; suggested name {})",
                        p.display(),
                        text.len(),
                        v["filename"].as_str().unwrap_or_default()
                    );
                }
                None => print!("{text}"),
            }
            Ok(0)
        }
        Command::Import { file, settings, preview } => {
            let mut raw = Vec::new();
            if file == "-" {
                std::io::stdin()
                    .read_to_end(&mut raw)
                    .map_err(|e| CliError(format!("cannot read stdin: {e}"), 1))?;
            } else {
                raw = std::fs::read(&file).map_err(|e| CliError(format!("cannot read {file}: {e}"), 1))?;
            }
            let doc: Value =
                serde_json::from_slice(&raw).map_err(|e| CliError(format!("{file} is not JSON: {e}"), 1))?;
            drop(raw);
            let mut s = Store::open(&db)?;
            if preview {
                println!("{}", pretty(&s.storage_import_preview(&doc)?));
                s.close();
                return Ok(0);
            }
            let mode = match settings {
                SettingsArg::None => SettingsMode::None,
                SettingsArg::Keep => SettingsMode::Keep,
                SettingsArg::Overwrite => SettingsMode::Overwrite,
            };
            let r = s.storage_import(&doc, ImportOptions { settings: mode }, None)?;
            println!("{}", pretty(&r.result));
            s.close();
            Ok(0)
        }
        Command::Sync { action } => sync::run(&db, action),
        Command::Trash { action, json } => trash(&db, action.unwrap_or(TrashAction::List), json),
        Command::Backup { file } => {
            let report = backup_file(&db, &file).map_err(|e| match e {
                WriteFailed::File(e) => CliError::from(e),
                WriteFailed::Content(e) if e.code == ErrorCode::DbCorrupt => {
                    CliError(
                        format!(
                            "cannot back up {}: {} ({}). SQLite cannot read it at all; `keepsake-host salvage` keeps \
                             a byte copy of it and recovers what can be read",
                            db.display(),
                            e.message,
                            e.code.as_str()
                        ),
                        1,
                    )
                }
                WriteFailed::Content(e) => CliError::from(e),
            })?;
            let integrity = report.integrity;
            println!(
                "backed up {} to {} (integrity: {})",
                db.display(),
                file.display(),
                integrity.join("; ")
            );
            if report.keys_in_file > 0 {
                eprintln!(
                    "keepsake-host: warning: the backup holds {} API key{} in plain text (they were saved while no \
                     secret store was reachable; see keepsake-host doctor): keep {} private",
                    report.keys_in_file,
                    if report.keys_in_file == 1 { "" } else { "s" },
                    file.display()
                );
            }
            if integrity != ["ok"] {
                eprintln!(
                    "keepsake-host: warning: the database is damaged and the backup is a faithful copy of the damage; \
                     `keepsake-host salvage` recovers what can be read into a fresh database"
                );
            }
            Ok(0)
        }
        Command::Backups { json } => {
            let mut s = Store::open_read_only(&db)?;
            let v = s.backups_list()?;
            if json {
                println!("{}", pretty(&v));
            } else {
                print_backups(&v);
            }
            Ok(0)
        }
        Command::Restore { id, yes, json } => restore(&db, &id, yes, json),
        Command::Salvage { json } => {
            let r = salvage::salvage_command(&db)?;
            match (r, json) {
                (None, true) => println!("{}", pretty(&json!({"damaged": false}))),
                (None, false) => println!("{}: integrity_check ok; nothing to salvage", db.display()),
                (Some(r), true) => println!(
                    "{}",
                    pretty(
                        &json!({"damaged": true, "recovery": serde_json::to_value(&r).unwrap_or_default()})
                    )
                ),
                (Some(r), false) => print_recovery(&db, &r),
            }
            Ok(0)
        }
        Command::Schema => {
            print!("{}", crate::server::ops::schema_text());
            Ok(0)
        }
        Command::Doctor { json, user_data_dirs } => Ok(doctor::run(&db, json, &user_data_dirs)),
        Command::Install {
            system,
            user_data_dirs,
            extension_ids,
            bin,
            dry_run,
            json,
            owns_bin,
            created_dirs,
            package_root,
        } => install::install(
            &db,
            &install::InstallOpts {
                system,
                user_data_dirs,
                extension_ids,
                bin,
                dry_run,
                json,
                owns_bin,
                created_dirs,
                package_root,
            },
        ),
        Command::Completions { shell } => generate::run_completions(shell),
        Command::Man { dir } => generate::run_man(&dir),
        Command::Uninstall { system, user_data_dirs, purge_data, json } => {
            install::uninstall(&db, &install::UninstallOpts { system, user_data_dirs, purge_data, json })
        }
    }
}

fn trash(db: &std::path::Path, action: TrashAction, json: bool) -> Result<i32, CliError> {
    match action {
        TrashAction::List => {
            let mut s = Store::open_read_only(db)?;
            let v = s.trash_list()?;
            if json {
                println!("{}", pretty(&v));
                return Ok(0);
            }
            let items = v["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                println!("(the trash is empty)");
                return Ok(0);
            }
            println!(
                "{:<38} {:<16} {:<11} {:<8} {:>7}  {:<10}  NAME",
                "ID", "DELETED", "REASON", "KIND", "ENTRIES", "EXPIRES"
            );
            for i in &items {
                let expires = chrono::DateTime::from_timestamp_millis(i["expiresAt"].as_i64().unwrap_or(0))
                    .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d").to_string())
                    .unwrap_or_default();
                println!(
                    "{:<38} {:<16} {:<11} {:<8} {:>7}  {:<10}  {}",
                    i["id"].as_str().unwrap_or_default(),
                    fmt_time(i["trashedAt"].as_i64().unwrap_or(0)),
                    i["reason"].as_str().unwrap_or_default(),
                    i["kind"].as_str().unwrap_or_default(),
                    i["entryCount"],
                    expires,
                    i["name"].as_str().unwrap_or_default()
                );
                if let Some(from) = i.get("from") {
                    println!(
                        "{:<38} from {:?} at entry {}",
                        "",
                        from["sessionName"].as_str().unwrap_or_default(),
                        from["position"]
                    );
                }
            }
            println!(
                "{} item(s); kept {} days. Restore: keepsake-host trash restore <ID>",
                items.len(),
                v["trashDays"]
            );
            Ok(0)
        }
        TrashAction::Restore { id } => {
            let mut s = Store::open(db)?;
            let r = s.trash_restore(&id, None)?;
            s.close();
            if json {
                println!("{}", pretty(&r.result));
            } else {
                println!(
                    "restored {} ({})",
                    r.result["sessionId"].as_str().unwrap_or_default(),
                    r.result["kind"].as_str().unwrap_or_default()
                );
            }
            Ok(0)
        }
        TrashAction::Purge { id, all } => {
            let mut s = Store::open(db)?;
            let r = s.trash_purge(if all { None } else { id.as_deref() }, None)?;
            s.close();
            if json {
                println!("{}", pretty(&r.result));
            } else {
                println!("purged {} item(s) for good", r.result["purged"]);
            }
            Ok(0)
        }
    }
}

fn size_text(bytes: u64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KiB", (bytes as f64 / 1024.0).ceil())
    }
}

fn print_backups(v: &Value) {
    let copies = v["copies"].as_array().cloned().unwrap_or_default();
    if copies.is_empty() {
        println!("(no copies yet)");
    } else {
        println!(
            "{:<40} {:<13} {:<16} {:>6} {:>6} {:>10}",
            "ID", "KIND", "CREATED", "SCHEMA", "CHATS", "SIZE"
        );
        for c in &copies {
            let chats = c["sessions"].as_u64().map_or_else(|| "?".to_owned(), |n| n.to_string());
            println!(
                "{:<40} {:<13} {:<16} {:>6} {:>6} {:>10}",
                c["id"].as_str().unwrap_or_default(),
                c["kind"].as_str().unwrap_or_default(),
                fmt_time(c["createdAt"].as_i64().unwrap_or(0)),
                c["schemaVersion"].to_string(),
                chats,
                size_text(c["bytes"].as_u64().unwrap_or(0))
            );
        }
    }
    let on = if v["enabled"] == json!(true) {
        format!("daily backups on, keeping {} daily and {} weekly", v["daily"], v["weekly"])
    } else {
        "daily backups off".to_owned()
    };
    println!("folder: {} ({on})", v["folder"].as_str().unwrap_or_default());
    match v.get("last").filter(|l| !l.is_null()) {
        None => println!("last daily backup: none yet"),
        Some(l) => println!(
            "last daily backup: {} {}{}",
            l["day"].as_str().unwrap_or_default(),
            l["outcome"].as_str().unwrap_or_default(),
            l["id"].as_str().or(l["message"].as_str()).map(|t| format!(" ({t})")).unwrap_or_default()
        ),
    }
    if let Some(id) = v["undo"]["id"].as_str() {
        println!("undo the last restore: keepsake-host restore {id}");
    }
    if !copies.is_empty() {
        println!("restore one: keepsake-host restore <ID> (the current database becomes a copy first)");
    }
}

/// `keepsake-host restore ID`: confirm (on a terminal, unless `--yes`), restore, say how to undo.
fn restore(db: &std::path::Path, id: &str, yes: bool, json: bool) -> Result<i32, CliError> {
    use std::io::IsTerminal;
    let mut s = Store::open(db)?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            s.close();
            return Err(CliError(
                "a restore replaces every chat with the copy's (the current database becomes a copy first); add --yes \
                 to confirm, or run it in a terminal"
                    .into(),
                2,
            ));
        }
        let list = s.backups_list()?;
        let what = list["copies"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["id"] == json!(id)))
            .map(|c| {
                format!(
                    "{} copy of {} ({} chats)",
                    c["kind"].as_str().unwrap_or_default(),
                    fmt_time(c["createdAt"].as_i64().unwrap_or(0)),
                    c["sessions"].as_u64().map_or_else(|| "?".to_owned(), |n| n.to_string())
                )
            })
            .unwrap_or_else(|| id.to_owned());
        eprint!(
            "Restore the {what}? Every chat of {} is replaced by the copy's; the current database becomes a copy first, \
             so this can be undone. [y/N] ",
            db.display()
        );
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            s.close();
            eprintln!("nothing was restored");
            return Ok(1);
        }
    }
    let r = s.backups_restore(id, None);
    s.close();
    let r = r?;
    if json {
        println!("{}", pretty(&r.result));
    } else {
        let undo = r.result["undo"].as_str().unwrap_or_default();
        println!(
            "restored {} (schema {}) into {}",
            r.result["restored"].as_str().unwrap_or_default(),
            r.result["schemaVersion"],
            db.display()
        );
        println!("the database as it was is kept as {undo}; undo with: keepsake-host restore {undo}");
    }
    Ok(0)
}

fn print_recovery(db: &std::path::Path, r: &salvage::Recovery) {
    println!("{} was damaged: {}", db.display(), r.damage);
    println!("damaged copy kept at {}", r.damaged_copy.display());
    for s in &r.sidecars {
        println!("               and {}", s.display());
    }
    if r.header_rebuilt {
        println!("the file header was unreadable and was rebuilt (in a scratch copy) to read the rest");
    }
    println!("recovered {} rows into a fresh database:", r.rows_recovered);
    for t in &r.tables {
        println!(
            "  {:<18} {:>7} rows{}{}",
            t.table,
            t.recovered,
            if t.refused > 0 { format!(", {} unreadable", t.refused) } else { String::new() },
            t.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
        );
    }
    for x in &r.repairs {
        println!("  repaired: {x}");
    }
}

fn print_inspect(v: &Value) {
    println!("database     {}", v["path"].as_str().unwrap_or_default());
    println!("schema       version {} (this host writes {})", v["schemaVersion"], v["latestSchemaVersion"]);
    println!("journal      {} (page size {})", v["journalMode"].as_str().unwrap_or_default(), v["pageSize"]);
    println!("size         {} bytes (+ WAL {} bytes)", v["sizes"]["database"], v["sizes"]["wal"]);
    let c = &v["counts"];
    println!(
        "live history {} entries (bound to {:?})",
        c["historyEntries"],
        v["activeSessionId"].as_str().unwrap_or_default()
    );
    println!("sessions     {} ({} entries in all)", c["sessions"], c["sessionEntries"]);
    println!("trash        {} item(s) (keepsake-host trash)", c["trash"]);
    println!("settings     {}", c["settings"]);
    if let Some(k) = v.get("apiKeys") {
        println!("api keys     {}", k["summary"].as_str().unwrap_or_default());
    }
    println!("images       {} blobs, {} bytes, {} references", c["images"], v["imageBytes"], c["imageRefs"]);
    println!("change log   {} rows; {} remembered client request ids", c["changes"], c["clientRequests"]);
    let integrity: Vec<&str> =
        v["integrity"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    println!("integrity    {}", integrity.join("; "));
}
