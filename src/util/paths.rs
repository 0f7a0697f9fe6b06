//! Where the database and log live.
//!
//! Default: the platform data dir (`~/.local/share/keepsake/keepsake.db` on Linux,
//! `~/Library/Application Support/Keepsake/` on macOS, `%LOCALAPPDATA%\Keepsake\` on Windows),
//! overridden by `KEEPSAKE_DB=<file>` and then by `--db <file>`.

use std::path::{Path, PathBuf};

pub const DB_FILE: &str = "keepsake.db";
pub const LOG_FILE: &str = "keepsake-host.log";
/// The install receipt's file name, beside the database: what `install` wrote, so `uninstall`
/// can remove exactly that.
pub const RECEIPT_FILE: &str = "install-receipt.json";
/// The folder beside the database that holds its copies (docs/reliability.md §7 "Copies and
/// backups"): every pre-migration copy, and the daily, manual and pre-restore copies unless the
/// `backupFolder` setting names another folder.
pub const BACKUPS_DIR: &str = "backups";
/// A file of this name beside the database turns on debug logging (the browser controls argv
/// and the environment, so a marker file is the switch a user can flip).
pub const DEBUG_MARKER: &str = "debug";

fn app_dir_name() -> &'static str {
    if cfg!(target_os = "linux") {
        "keepsake"
    } else {
        "Keepsake"
    }
}

/// The platform data directory for Keepsake.
pub fn default_data_dir() -> PathBuf {
    let base = if cfg!(target_os = "macos") { dirs::data_dir() } else { dirs::data_local_dir() };
    base.unwrap_or_else(std::env::temp_dir).join(app_dir_name())
}

/// Resolve the database path: `--db`, then `KEEPSAKE_DB`, then the default.
pub fn resolve_db_path(cli: Option<&Path>) -> PathBuf {
    if let Some(p) = cli {
        return absolute(p);
    }
    if let Some(p) = std::env::var_os("KEEPSAKE_DB").filter(|p| !p.is_empty()) {
        return absolute(Path::new(&p));
    }
    default_data_dir().join(DB_FILE)
}

/// Absolute form of `p` (the browser starts us in the manifest's folder, so never rely on the
/// working directory for anything but a user's explicit relative argument).
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
    }
}

/// A file beside the database: its path with `suffix` appended (`-wal`, `-shm`, `.damaged`, …).
pub fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

/// The folder of the copies beside a database (`<folder of the database>/backups`).
pub fn backups_dir_for(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join(BACKUPS_DIR)
}

/// The lock beside a database that makes one host process the one that syncs it
/// (`sync::engine`).
pub fn sync_lock_for(db: &Path) -> PathBuf {
    sidecar(db, ".sync-lock")
}

/// The log file beside a database.
pub fn log_path_for(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join(LOG_FILE)
}
