//! Entry point: a browser launch (argv[1] is `chrome-extension://…/`, or Firefox's manifest path
//! then add-on id) serves native messaging; anything else is the CLI.
//!
//! A browser launch is checked first (reliability.md §8 "wrong caller", PROTOCOL.md "Caller
//! check"): a Chromium caller must be `chrome-extension://<id>/` with `<id>` our built-in ID or an
//! ID listed in a manifest `keepsake-host install` registered (the receipt's manifests, and the
//! system-wide folders); a Firefox caller's add-on ID (argv[2]) must be `keepsake@keepsake.dev`
//! (`browsers::FIREFOX_ADDON_ID`, the ID Keepsake's signed addons.mozilla.org listing holds:
//! platform.md §13) or an ID in the `allowed_extensions` of such a manifest. Any other caller is
//! answered `forbidden_origin` on every request and the database is never opened.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use keepsake_host::cli::browsers::{self, Env, Family};
use keepsake_host::cli::{self, install, Cli, Command};
use keepsake_host::protocol::origin::{self, Launch};
use keepsake_host::server::{refuse, serve, Outbox};
use keepsake_host::util::{logging, paths, stdio};

/// The manifests whose `allowed_origins` / `allowed_extensions` extend the allowed caller IDs:
/// those `install` recorded in the receipt beside the database, and the system-wide
/// registrations (root-owned).
fn registered_manifests(db: &Path) -> Vec<PathBuf> {
    let mut files = match install::load_receipt(db) {
        Ok(Some(r)) => r.manifests,
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the install receipt");
            Vec::new()
        }
    };
    if let Ok(env) = Env::from_process() {
        files.extend(browsers::system_locations(&env).iter().map(|l| l.manifest()));
        for family in [Family::Chromium, Family::Mozilla] {
            files.extend(browsers::windows_manifest(&env, false, family));
            files.extend(browsers::windows_manifest(&env, true, family));
        }
    }
    files
}

fn run_server(db_arg: Option<&Path>, launch: &Launch) -> ExitCode {
    stdio::private_umask();
    let db = paths::resolve_db_path(db_arg);
    logging::init_file_logging(&db);
    let refusal = match launch {
        Launch::Chrome { .. } => {
            let allowed = browsers::allowed_caller_ids(&registered_manifests(&db));
            origin::refusal(launch, &allowed, &[])
        }
        Launch::Firefox { .. } => {
            let allowed = browsers::allowed_addon_ids(&registered_manifests(&db));
            origin::refusal(launch, &[], &allowed)
        }
        Launch::Cli => None,
    };
    let out = match stdio::take_frame_stdout() {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(error = %e, "cannot take stdout");
            return ExitCode::from(1);
        }
    };
    let mut input = std::io::stdin().lock();
    if let Some(reason) = refusal {
        tracing::warn!(?launch, pid = std::process::id(), "refusing the caller: {reason}");
        let code = refuse(&mut input, Outbox::new(out), &reason);
        tracing::info!(code, "keepsake-host exiting (caller refused)");
        return ExitCode::from(code as u8);
    }
    tracing::info!(db = %db.display(), pid = std::process::id(), ?launch, "keepsake-host serving");
    let code = serve(&db, &mut input, Outbox::new(out));
    tracing::info!(code, "keepsake-host exiting");
    ExitCode::from(code as u8)
}

/// The stack every request runs on. The host chooses it instead of living on the main thread's,
/// which the platform sizes (1 MiB on Windows) and the user can shrink (`ulimit -s`): input nested
/// up to the frame's depth limit (127 levels) is deserialised into typed arguments, which costs a
/// few KiB of stack per level in a debug build. 16 MiB is address space, not memory: pages are
/// only committed as they are touched.
const WORK_STACK: usize = 16 * 1024 * 1024;

fn main() -> ExitCode {
    let work = std::thread::Builder::new().name("keepsake-host".into()).stack_size(WORK_STACK).spawn(run);
    match work.map(|t| t.join()) {
        Ok(Ok(code)) => code,
        // a panic outside the dispatcher's boundary (which answers `internal` for its own)
        Ok(Err(_)) => ExitCode::from(101),
        Err(e) => {
            eprintln!("keepsake-host: cannot start its work thread: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let utf8: Vec<Option<&str>> = args.iter().map(|a| a.to_str()).collect();
    let launch = origin::classify(&utf8);
    if launch != Launch::Cli {
        return run_server(None, &launch);
    }
    let parsed = Cli::parse_from(&args);
    if let Command::Serve = parsed.command {
        // The CLI's own server (tests, tools): no caller check.
        return run_server(parsed.db.as_deref(), &Launch::Cli);
    }
    stdio::private_umask();
    match cli::run(parsed) {
        Ok(code) => ExitCode::from(code as u8),
        Err(cli::CliError(msg, code)) => {
            eprintln!("keepsake-host: {msg}");
            ExitCode::from(code as u8)
        }
    }
}
