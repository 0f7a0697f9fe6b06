//! Entry point: a browser launch (argv[1] is `chrome-extension://…/`, or Firefox's manifest path
//! then add-on id) serves native messaging; anything else is the CLI.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use keepsake_host::cli::{self, Cli, Command};
use keepsake_host::server::{serve, Outbox};
use keepsake_host::util::{logging, paths, stdio};

/// Chromium passes the caller's origin; Firefox passes the manifest path (ending in `.json`).
fn is_browser_launch(args: &[OsString]) -> bool {
    args.get(1).and_then(|a| a.to_str()).is_some_and(|a| {
        a.starts_with("chrome-extension://")
            || (a.ends_with(".json") && std::path::Path::new(a).is_absolute())
    })
}

fn run_server(db_arg: Option<&std::path::Path>) -> ExitCode {
    stdio::private_umask();
    let db = paths::resolve_db_path(db_arg);
    logging::init_file_logging(&db);
    tracing::info!(db = %db.display(), pid = std::process::id(), "keepsake-host serving");
    let out = match stdio::take_frame_stdout() {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(error = %e, "cannot take stdout");
            return ExitCode::from(1);
        }
    };
    let mut input = std::io::stdin().lock();
    let code = serve(&db, &mut input, Outbox::new(out));
    tracing::info!(code, "keepsake-host exiting");
    ExitCode::from(code as u8)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if is_browser_launch(&args) {
        return run_server(None);
    }
    let parsed = Cli::parse_from(&args);
    if let Command::Serve = parsed.command {
        return run_server(parsed.db.as_deref());
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
