//! Documentation generated from the clap CLI itself, so it cannot drift from the binary: man
//! pages (`clap_mangen`: `keepsake-host.1` and one page per visible subcommand) and shell
//! completions (`clap_complete`: bash, zsh, fish). The Debian package (`packaging/deb/build.sh`)
//! runs the built binary's hidden `man` subcommand and its `completions` subcommand at package
//! build time.
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::{Cli, CliError};
use crate::util::files::{self, Existing, WriteError};

/// The shells `keepsake-host completions` writes for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The main page's extra sections (roff): exit statuses, where things live and the variables the
/// host reads.
const EXTRA: &str = r#".SH "EXIT STATUS"
0 on success, 1 when a command failed, 2 for a usage error (an unknown or ambiguous chat id), 73 when an output file was refused: it is a symbolic link, not a regular file, or another user's file, or it exists and the command never replaces one (\fBbackup\fR). Files are written under a temp name beside the target and put in place only when whole; the refused file is left as it was.
.SH ENVIRONMENT
.TP
\fBKEEPSAKE_DB\fR
The database file (\fB\-\-db\fR overrides it). The browser passes its own environment to the host.
.TP
\fBKEEPSAKE_LOG\fR
The log level of \fIkeepsake\-host.log\fR (for example \fBdebug\fR); a file named \fIdebug\fR beside the database does the same.
.TP
\fBKEEPSAKE_SECRET_STORE\fR
\fBoff\fR keeps provider API keys in the database file instead of the desktop's Secret Service.
.SH FILES
.TP
\fI~/.local/share/keepsake/keepsake.db\fR
The database: chat history, saved sessions, settings and images in one SQLite file (with \fI\-wal\fR and \fI\-shm\fR beside it while a host runs), and \fIkeepsake\-host.log\fR. Removing or purging the package never deletes it; \fBkeepsake\-host uninstall \-\-purge\-data\fR does.
.TP
\fI/etc/chromium/native\-messaging\-hosts/dev.keepsake.host.json\fR, \fI/etc/opt/chrome/native\-messaging\-hosts/dev.keepsake.host.json\fR
System\-wide registrations (\fBkeepsake\-host install \-\-system\fR, or the Debian package); \fI/etc/opt/edge\fR and \fI/etc/opt/vivaldi\fR hold the same file for Edge and Vivaldi, and \fI/usr/lib/mozilla/native\-messaging\-hosts\fR for Firefox.
.TP
\fI~/.config/<browser>/NativeMessagingHosts/dev.keepsake.host.json\fR
Per\-user registrations (\fBkeepsake\-host install\fR).
.TP
\fI/usr/share/keepsake/extension/\fR
The browser extension in the Debian package: load it with chrome://extensions, Developer mode, Load unpacked.
.SH SEE ALSO
\fBsqlite3\fR(1), \fBchromium\fR(1)
"#;

/// Write `keepsake-host.1` and `keepsake-host-<subcommand>.1` (visible subcommands, nested) into
/// `dir`, each mode 0644 by `util::files::write_bytes` (a temp file renamed into place; a page
/// this user wrote before is replaced, a symbolic link or another user's file is refused); returns
/// the files written, sorted.
pub fn man_pages(dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::Io { path: dir.to_path_buf(), source })?;
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    // The main page first (so a refused target stops the run before any other page is written):
    // clap_mangen's sections, then ours before VERSION.
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut out = Vec::new();
    let rendered = (|| {
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        man.render_subcommands_section(&mut out)?;
        out.extend_from_slice(EXTRA.as_bytes());
        man.render_version_section(&mut out)
    })();
    rendered.map_err(|source| WriteError::Io { path: path.clone(), source })?;
    write_page(&path, &out)?;
    let mut files = vec![path];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        pages(sub, dir, &mut files)?;
    }
    files.sort();
    Ok(files)
}

fn write_page(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    files::write_bytes(path, files::PUBLIC, Existing::ReplaceOwn, bytes)
}

fn pages(cmd: clap::Command, dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), WriteError> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        pages(sub, dir, files)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let path = dir.join(man.get_filename());
    let mut out = Vec::new();
    man.render(&mut out).map_err(|source| WriteError::Io { path: path.clone(), source })?;
    write_page(&path, &out)?;
    files.push(path);
    Ok(())
}

/// The completion script for `shell`.
pub fn completions(shell: Shell, out: &mut dyn Write) {
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_owned();
    match shell {
        Shell::Bash => clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, name, out),
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, out),
        Shell::Fish => clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, out),
    }
}

/// `keepsake-host man <DIR>`: one line per page written.
pub fn run_man(dir: &Path) -> Result<i32, CliError> {
    let files = man_pages(dir).map_err(|e| {
        let CliError(msg, code) = CliError::from(e);
        CliError(format!("cannot write man pages into {}: {msg}", dir.display()), code)
    })?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(0)
}

/// `keepsake-host completions <SHELL>`: the script on stdout.
pub fn run_completions(shell: Shell) -> Result<i32, CliError> {
    let mut out = Vec::new();
    completions(shell, &mut out);
    std::io::stdout().write_all(&out).map_err(|e| CliError(format!("cannot write to stdout: {e}"), 1))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_cover_every_visible_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let files = man_pages(dir.path()).unwrap();
        let names: Vec<String> =
            files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        for want in [
            "keepsake-host.1",
            "keepsake-host-doctor.1",
            "keepsake-host-install.1",
            "keepsake-host-trash-restore.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
        // hidden subcommands (serve is visible; man is hidden) get no page
        assert!(!names.iter().any(|n| n == "keepsake-host-man.1"), "{names:?}");
        let main = std::fs::read_to_string(dir.path().join("keepsake-host.1")).unwrap();
        assert!(main.starts_with(".ie"), "roff title first: {}", &main[..40.min(main.len())]);
        for section in
            [".SH NAME", ".SH SYNOPSIS", ".SH SUBCOMMANDS", ".SH ENVIRONMENT", ".SH FILES", ".SH VERSION"]
        {
            assert!(main.contains(section), "{section} missing");
        }
        assert!(main.contains(env!("CARGO_PKG_VERSION")));
        let install = std::fs::read_to_string(dir.path().join("keepsake-host-install.1")).unwrap();
        assert!(install.contains("\\-\\-system"), "the install page lists --system");
        assert!(!install.contains("package\\-root"), "hidden options stay out of the page");
    }

    #[test]
    fn completions_name_the_subcommands() {
        for (shell, marker) in [
            (Shell::Bash, "complete -F"),
            (Shell::Zsh, "#compdef keepsake-host"),
            (Shell::Fish, "complete -c keepsake-host"),
        ] {
            let mut out = Vec::new();
            completions(shell, &mut out);
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains(marker), "{shell:?}: {marker} missing");
            assert!(text.contains("doctor") && text.contains("uninstall"), "{shell:?}");
        }
    }
}
