//! Logging with `tracing` to a file beside the database (mode 0600, never through a symbolic
//! link, never into another user's file), never to stdout.
//! Level: `KEEPSAKE_LOG` (an env-filter such as `debug`), else `debug` when a file named
//! `debug` sits beside the database, else `info`.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

use super::paths::{log_path_for, DEBUG_MARKER};

/// Install the file logger for a host process. Failing to open the log is not fatal: the host
/// then runs without a log rather than writing anywhere near stdout.
pub fn init_file_logging(db: &Path) {
    let path = log_path_for(db);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut opts = OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    // never through a symbolic link (O_NOFOLLOW), never into a FIFO or device
    let Ok(file) = opts.open(&path) else {
        return;
    };
    // A log left by an older version (or created under a permissive umask) is made private
    // too: it names files and errors from the user's history. Someone else's log (a file
    // another user made under this name in a shared folder) is never written: the host runs
    // without a log, and the store refuses to open beside it and says why.
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let Ok(m) = file.metadata() else { return };
        if !m.is_file() || m.uid() != me {
            return;
        }
        if m.permissions().mode() & 0o077 != 0 {
            let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        }
    }
    let default = if path.with_file_name(DEBUG_MARKER).exists() { "debug" } else { "info" };
    let filter = std::env::var("KEEPSAKE_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init();
}
