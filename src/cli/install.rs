//! `keepsake-host install` and `keepsake-host uninstall`: register the host with every detected
//! Chromium-family and Mozilla-family browser (platform.md §9, §12) and remove exactly that again.
//!
//! - Manifests are written by this binary (serde_json, UTF-8 without a BOM, absolute `path`,
//!   trailing slashes), atomically and mode 0644 by `util::files::write_bytes` (a temp file
//!   created new, `sync_all`, renamed over a file this user owns; never through a symbolic link,
//!   never over another user's file).
//! - What was written (manifests, folders we created, registry keys, an installer-placed binary)
//!   is recorded in `install-receipt.json` beside the database, so `uninstall` removes exactly
//!   that, plus any `dev.keepsake.host.json` in the known locations.
//! - Running `install` twice changes nothing and says "unchanged".
#![allow(clippy::print_stdout)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::browsers::{
    self, Env, Family, Platform, EXTENSION_ID, FIREFOX_ADDON_ID, HOST_NAME, MANIFEST_FILE,
};
use super::proof;
use super::CliError;
use crate::util::files::{self, Existing, WriteError};
use crate::util::paths::{absolute, backups_dir_for, log_path_for, sidecar, DEBUG_MARKER, RECEIPT_FILE};

const FIX: &str = "keepsake-host install (or ./install.sh)";

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot {action} {path}: permission denied; {hint}")]
    Permission { action: &'static str, path: String, hint: &'static str },
    #[error("cannot {action} {path}: {source}")]
    Io { action: &'static str, path: String, source: io::Error },
    #[error("{0}")]
    Refused(WriteError),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Usage(String),
}

impl InstallError {
    /// A manifest or the receipt not written: a refused target as it is, an I/O error as
    /// [`InstallError::io`] says it.
    fn write(path: &Path, e: WriteError, system: bool) -> InstallError {
        match e {
            WriteError::Io { source, .. } => InstallError::io("write", path, source, system),
            refused => InstallError::Refused(refused),
        }
    }

    fn io(action: &'static str, path: &Path, source: io::Error, system: bool) -> InstallError {
        let path = path.display().to_string();
        if source.kind() == io::ErrorKind::PermissionDenied {
            let hint = if system {
                "system-wide registration needs root: run with sudo"
            } else {
                "check that you own this folder (do not run the per-user install with sudo)"
            };
            InstallError::Permission { action, path, hint }
        } else {
            InstallError::Io { action, path, source }
        }
    }
}

impl From<InstallError> for CliError {
    fn from(e: InstallError) -> Self {
        let code = if matches!(e, InstallError::Usage(_)) { 2 } else { 1 };
        CliError(e.to_string(), code)
    }
}

/// What `install` wrote, so that `uninstall` can remove exactly that.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Receipt {
    pub host: String,
    /// Manifest files written (or found identical).
    pub manifests: Vec<PathBuf>,
    /// `--user-data-dir` profiles registered.
    pub user_data_dirs: Vec<PathBuf>,
    /// Folders created, in creation order (removed in reverse when empty).
    pub created_dirs: Vec<PathBuf>,
    /// Windows registry keys, with the hive (`HKCU\Software\...`).
    pub registry_keys: Vec<String>,
    /// The host binary, when an installer script placed it (`install --owns-bin`).
    pub binary: Option<PathBuf>,
}

impl Receipt {
    fn is_empty(&self) -> bool {
        self.manifests.is_empty()
            && self.user_data_dirs.is_empty()
            && self.created_dirs.is_empty()
            && self.registry_keys.is_empty()
            && self.binary.is_none()
    }
}

fn push_unique<T: PartialEq + Clone>(v: &mut Vec<T>, x: &T) {
    if !v.contains(x) {
        v.push(x.clone());
    }
}

/// The receipt beside the database `db`.
pub fn receipt_path(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join(RECEIPT_FILE)
}

/// Read the receipt; `Ok(None)` when there is none.
pub fn load_receipt(db: &Path) -> Result<Option<Receipt>, String> {
    let p = receipt_path(db);
    match fs::read(&p) {
        Ok(b) => {
            serde_json::from_slice(&b).map(Some).map_err(|e| format!("{} is not a receipt: {e}", p.display()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", p.display())),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Written,
    Unchanged,
}

#[cfg(unix)]
fn mode_of(p: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).ok().map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode_of(_: &Path) -> Option<u32> {
    None
}

fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p, fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (p, mode);
        Ok(())
    }
}

/// Would writing `bytes` to `path` change anything?
fn is_current(path: &Path, bytes: &[u8], mode: u32) -> bool {
    let same_bytes =
        fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) && fs::read(path).is_ok_and(|old| old == bytes);
    same_bytes && mode_of(path).is_none_or(|m| m == mode)
}

/// Write `bytes` to `path` with `mode` (`util::files::write_bytes`: a temp file created new in the
/// same folder, fsynced, renamed over a file this user owns; a symbolic link or another user's
/// file is refused and left as it was), unless it already holds them.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<Outcome, WriteError> {
    if is_current(path, bytes, mode) {
        return Ok(Outcome::Unchanged);
    }
    files::write_bytes(path, mode, Existing::ReplaceOwn, bytes).map(|()| Outcome::Written)
}

/// `mkdir -p` that records every folder it created (outermost first).
fn ensure_dir(dir: &Path, mode: Option<u32>, created: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.as_os_str().is_empty() || d.is_dir() {
            break;
        }
        missing.push(d.to_path_buf());
        cur = d.parent();
    }
    for d in missing.into_iter().rev() {
        match fs::create_dir(&d) {
            Ok(()) => {
                if let Some(m) = mode {
                    set_mode(&d, m)?;
                }
                created.push(d);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Windows registry through `reg.exe` (plain std, so nothing Windows-only is needed to build).

/// The `(Default)` value of a registry key, or `None` when the key does not exist.
pub fn reg_get_default(key: &str) -> Option<String> {
    let out = Command::new("reg").args(["query", key, "/ve"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.split_once("REG_SZ").map(|(_, v)| v.trim().to_owned()))
}

fn reg_run(args: &[&str]) -> Result<(), String> {
    let out = Command::new("reg").args(args).output().map_err(|e| format!("cannot run reg.exe: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

fn hives(system: bool) -> &'static [&'static str] {
    if system {
        &["HKLM"]
    } else {
        &["HKCU"]
    }
}

// ---------------------------------------------------------------------------------------------
// install

/// `keepsake-host install` options.
#[derive(Debug, Clone, Default)]
pub struct InstallOpts {
    pub system: bool,
    pub user_data_dirs: Vec<PathBuf>,
    pub extension_ids: Vec<String>,
    pub bin: Option<PathBuf>,
    pub dry_run: bool,
    pub json: bool,
    /// The binary at `bin` was put there by an installer script: uninstall removes it.
    pub owns_bin: bool,
    /// Folders an installer script created for the binary (removed by uninstall when empty).
    pub created_dirs: Vec<PathBuf>,
    /// For package builds (`packaging/deb/build.sh`), with `system`: write every system-wide
    /// manifest into this staging folder (it stands for `/`), for every browser whether it is
    /// installed here or not; `bin` is the path on the installed system (checked under this
    /// folder, named as given); no receipt (the package manager owns the files).
    pub package_root: Option<PathBuf>,
}

/// The host binary the manifests point at: `--bin` or this executable, absolute, a regular
/// executable file, canonical on Unix.
fn resolve_bin(bin: Option<&Path>, platform: Platform) -> Result<String, InstallError> {
    let p = match bin {
        Some(b) => absolute(b),
        None => std::env::current_exe()
            .map_err(|e| InstallError::Invalid(format!("cannot find this executable: {e}")))?,
    };
    let meta =
        fs::metadata(&p).map_err(|e| InstallError::Invalid(format!("host binary {}: {e}", p.display())))?;
    if !meta.is_file() {
        return Err(InstallError::Invalid(format!("host binary {} is not a regular file", p.display())));
    }
    let p = if platform == Platform::Windows {
        p
    } else {
        fs::canonicalize(&p)
            .map_err(|e| InstallError::Invalid(format!("host binary {}: {e}", p.display())))?
    };
    if platform != Platform::Windows && mode_of(&p).is_some_and(|m| m & 0o111 == 0) {
        return Err(InstallError::Invalid(format!(
            "host binary {} is not executable: chmod 755 '{}'",
            p.display(),
            p.display()
        )));
    }
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| InstallError::Invalid(format!("host binary path {} is not valid UTF-8", p.display())))
}

/// The IDs the manifests allow: Chromium extension IDs (ours first) and Firefox add-on IDs (ours
/// first), each `--extension-id` sorted into one or the other by its form.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ids {
    chromium: Vec<String>,
    firefox: Vec<String>,
}

/// Our IDs first, then each `--extension-id` (validated, no duplicates): 32 letters a-p is a
/// Chromium extension, `name@domain` or `{GUID}` a Firefox add-on.
fn extension_ids(extra: &[String]) -> Result<Ids, InstallError> {
    let mut ids = Ids { chromium: vec![EXTENSION_ID.to_owned()], firefox: vec![FIREFOX_ADDON_ID.to_owned()] };
    for id in extra {
        if browsers::valid_extension_id(id) {
            push_unique(&mut ids.chromium, id);
        } else if browsers::valid_addon_id(id) {
            push_unique(&mut ids.firefox, id);
        } else {
            return Err(InstallError::Usage(format!(
                "--extension-id {id:?} is neither a Chromium extension ID (32 letters a-p) nor a Firefox add-on \
                 ID (name@domain or {{GUID}})"
            )));
        }
    }
    Ok(ids)
}

/// One manifest file to write.
struct Target {
    label: String,
    file: PathBuf,
    system: bool,
    family: Family,
}

/// The manifest files `install` writes, and the profiles among them.
fn install_targets(env: &Env, o: &InstallOpts) -> Result<(Vec<Target>, Vec<PathBuf>), InstallError> {
    let mut out: Vec<Target> = Vec::new();
    let mut add = |label: &str, file: PathBuf, system: bool, family: Family| {
        if let Some(t) = out.iter_mut().find(|t| t.file == file) {
            t.label = format!("{}, {label}", t.label);
        } else {
            out.push(Target { label: label.to_owned(), file, system, family });
        }
    };
    let mut profiles = Vec::new();
    if env.platform == Platform::Windows {
        for (label, family) in [("registry", Family::Chromium), ("registry (Firefox)", Family::Mozilla)] {
            let file = browsers::windows_manifest(env, o.system, family).ok_or_else(|| {
                InstallError::Invalid(
                    if o.system { "%ProgramData% is not set" } else { "%LOCALAPPDATA% is not set" }
                        .to_owned(),
                )
            })?;
            add(label, file, o.system, family);
        }
        return Ok((out, profiles));
    }
    if o.system {
        // a package registers with every browser (it cannot know which ones its machine will
        // have), in the folders of the distribution it is for: Debian's Firefox reads /usr/lib only
        let every = o.package_root.is_some();
        for l in
            browsers::system_locations(env).into_iter().filter(|l| l.wanted || (every && !l.multilib_only()))
        {
            add(l.browser, l.manifest(), true, l.family);
        }
    } else if o.user_data_dirs.is_empty() {
        for l in browsers::user_locations(env).into_iter().filter(|l| l.detected()) {
            add(l.browser, l.manifest(), false, l.family);
        }
    }
    for d in &o.user_data_dirs {
        let d = absolute(d);
        add("profile", d.join("NativeMessagingHosts").join(MANIFEST_FILE), false, Family::Chromium);
        push_unique(&mut profiles, &d);
    }
    Ok((out, profiles))
}

/// `keepsake-host install`, with the real environment.
pub fn install(db: &Path, o: &InstallOpts) -> Result<i32, CliError> {
    let mut env = Env::from_process().map_err(|e| CliError(e, 1))?;
    if let Some(root) = &o.package_root {
        env.system_root = absolute(root);
    }
    install_in(&env, db, o)
}

/// `install --package-root`: the binary `bin` (an absolute path on the installed system) must be
/// an executable file under the staging folder; the manifests name it as given.
fn package_bin(env: &Env, o: &InstallOpts) -> Result<String, InstallError> {
    if !o.system || env.platform == Platform::Windows || !o.user_data_dirs.is_empty() || o.owns_bin {
        return Err(InstallError::Usage(
            "--package-root goes with --system and --bin only (Linux and macOS packages)".into(),
        ));
    }
    let bin = o.bin.as_deref().filter(|b| b.is_absolute()).ok_or_else(|| {
        InstallError::Usage(
            "--package-root needs --bin with the absolute path on the installed system".into(),
        )
    })?;
    let staged = env.sys(&bin.to_string_lossy());
    let meta = fs::metadata(&staged)
        .map_err(|e| InstallError::Invalid(format!("host binary {}: {e}", staged.display())))?;
    if !meta.is_file() || mode_of(&staged).is_some_and(|m| m & 0o111 == 0) {
        return Err(InstallError::Invalid(format!(
            "host binary {} is not an executable file",
            staged.display()
        )));
    }
    bin.to_str().map(str::to_owned).ok_or_else(|| {
        InstallError::Invalid(format!("host binary path {} is not valid UTF-8", bin.display()))
    })
}

/// `keepsake-host install` against `env`; the receipt goes beside `db`.
pub fn install_in(env: &Env, db: &Path, o: &InstallOpts) -> Result<i32, CliError> {
    let package = o.package_root.is_some();
    let bin = if package { package_bin(env, o)? } else { resolve_bin(o.bin.as_deref(), env.platform)? };
    let ids = extension_ids(&o.extension_ids)?;
    let bytes_for = |family: Family| match family {
        Family::Chromium => browsers::manifest_bytes(&bin, &ids.chromium),
        Family::Mozilla => browsers::mozilla_manifest_bytes(&bin, &ids.firefox),
    };
    let (targets, profiles) = install_targets(env, o)?;
    // `--user-data-dir` alone is a targeted registration: no sandbox survey.
    let profiles_only = !o.system && !o.user_data_dirs.is_empty();
    let mut warnings = if profiles_only || package { Vec::new() } else { browsers::sandbox_warnings(env) };
    if env.platform == Platform::Windows && !o.user_data_dirs.is_empty() {
        warnings.push("--user-data-dir is ignored on Windows: Chromium there reads only the registry".into());
    }
    if env.platform == Platform::Windows && bin.contains(['&', '^', '%']) {
        warnings.push(format!("the host path {bin} contains & ^ or %, which older Chrome cannot launch"));
    }

    let dir_mode = |system: bool| if system { Some(0o755) } else { None };
    let mut created: Vec<PathBuf> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    let mut errors: Vec<InstallError> = Vec::new();
    let mut written: Vec<PathBuf> = Vec::new();
    for t in &targets {
        let bytes = bytes_for(t.family);
        let status = if o.dry_run {
            Ok(if is_current(&t.file, &bytes, 0o644) { "unchanged" } else { "would write" })
        } else {
            let parent = t.file.parent().unwrap_or(Path::new("."));
            ensure_dir(parent, dir_mode(t.system), &mut created)
                .map_err(|e| InstallError::io("create", parent, e, t.system))
                .and_then(|()| {
                    write_atomic(&t.file, &bytes, files::PUBLIC)
                        .map_err(|e| InstallError::write(&t.file, e, t.system))
                })
                .map(|r| if r == Outcome::Written { "wrote" } else { "unchanged" })
        };
        match status {
            Ok(s) => {
                written.push(t.file.clone());
                results.push(json!({"browser": t.label, "path": t.file.display().to_string(), "status": s}));
            }
            Err(e) => {
                results.push(
                    json!({"browser": t.label, "path": t.file.display().to_string(), "status": "error", "error": e.to_string()}),
                );
                errors.push(e);
            }
        }
    }

    let mut keys: Vec<Value> = Vec::new();
    let mut key_names: Vec<String> = Vec::new();
    if env.platform == Platform::Windows && !written.is_empty() {
        for hive in hives(o.system) {
            for (browser, k, family) in browsers::registry_keys() {
                let Some(t) = targets.iter().find(|t| t.family == family && written.contains(&t.file)) else {
                    continue;
                };
                let manifest = t.file.display().to_string();
                let key = format!(r"{hive}\{k}");
                let status = if reg_get_default(&key).as_deref() == Some(manifest.as_str()) {
                    Ok("unchanged")
                } else if o.dry_run {
                    Ok("would write")
                } else {
                    reg_run(&["add", &key, "/ve", "/t", "REG_SZ", "/d", &manifest, "/f"]).map(|()| "wrote")
                };
                match status {
                    Ok(s) => {
                        key_names.push(key.clone());
                        keys.push(json!({"browser": browser, "key": key, "status": s}));
                    }
                    Err(e) => {
                        keys.push(json!({"browser": browser, "key": key, "status": "error", "error": e}));
                        errors.push(InstallError::Invalid(format!(
                            "cannot set {key}: {e}{}",
                            if o.system { " (run as administrator)" } else { "" }
                        )));
                    }
                }
            }
        }
    }

    // The receipt: merge with the previous one so repeated installs accumulate, never forget.
    // A package build has none (the package manager owns what it wrote).
    let rpath = receipt_path(db);
    let old = if package {
        None
    } else {
        load_receipt(db).unwrap_or_else(|e| {
            warnings.push(format!("{e}; starting a new receipt"));
            None
        })
    };
    let mut receipt = old.clone().unwrap_or_default();
    receipt.host = HOST_NAME.to_owned();
    for d in o.created_dirs.iter().map(|d| absolute(d)) {
        push_unique(&mut receipt.created_dirs, &d);
    }
    for d in &created {
        push_unique(&mut receipt.created_dirs, d);
    }
    for f in &written {
        push_unique(&mut receipt.manifests, f);
    }
    for p in &profiles {
        push_unique(&mut receipt.user_data_dirs, p);
    }
    for k in &key_names {
        push_unique(&mut receipt.registry_keys, k);
    }
    if o.owns_bin {
        receipt.binary = Some(PathBuf::from(&bin));
    }
    let mut receipt_status = if package { "none" } else { "unchanged" };
    if !o.dry_run && !package && !receipt.is_empty() && (old.as_ref() != Some(&receipt) || !rpath.exists()) {
        let dir = rpath.parent().unwrap_or(Path::new("."));
        let mut data_created = Vec::new();
        let res =
            ensure_dir(dir, None, &mut data_created).map_err(|e| InstallError::io("create", dir, e, false));
        for d in &data_created {
            push_unique(&mut receipt.created_dirs, d);
        }
        let doc = serde_json::to_vec_pretty(&receipt)
            .map(|mut b| {
                b.push(b'\n');
                b
            })
            .map_err(|e| InstallError::Invalid(format!("cannot record the receipt: {e}")));
        match res.and(doc).and_then(|b| {
            write_atomic(&rpath, &b, files::PRIVATE).map_err(|e| InstallError::write(&rpath, e, false))
        }) {
            Ok(_) => receipt_status = "wrote",
            Err(e) => errors.push(e),
        }
    }

    let none_found = targets.is_empty();
    let origins: Vec<String> = ids.chromium.iter().map(|i| browsers::origin(i)).collect();
    if o.json {
        let doc = json!({
            "ok": errors.is_empty(),
            "host": HOST_NAME,
            "binary": bin,
            "allowedOrigins": origins,
            "allowedExtensions": ids.firefox,
            "dryRun": o.dry_run,
            "manifests": results,
            "registryKeys": keys,
            "warnings": warnings,
            "receipt": {"path": rpath.display().to_string(), "status": receipt_status},
            "noBrowserFound": none_found,
            "errors": errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        println!("host      {HOST_NAME} -> {bin}");
        println!("origins   {}", origins.join(" "));
        println!("add-ons   {}", ids.firefox.join(" "));
        for r in &results {
            if r["status"] != "error" {
                println!(
                    "{:<9} {}  ({})",
                    r["status"].as_str().unwrap_or_default(),
                    r["path"].as_str().unwrap_or_default(),
                    r["browser"].as_str().unwrap_or_default()
                );
            }
        }
        for k in &keys {
            if k["status"] != "error" {
                println!(
                    "{:<9} {}",
                    k["status"].as_str().unwrap_or_default(),
                    k["key"].as_str().unwrap_or_default()
                );
            }
        }
        if receipt_status == "wrote" {
            println!("wrote     {}  (install receipt)", rpath.display());
        }
        for w in &warnings {
            println!("warning: {w}");
        }
        if none_found {
            println!("{}", no_browser_message(env, o.system));
        }
    }
    match errors.len() {
        0 => Ok(0),
        1 => Err(errors.remove(0).into()),
        n => {
            let first = errors.remove(0);
            Err(CliError(format!("{first} (and {} more error{})", n - 1, if n > 2 { "s" } else { "" }), 1))
        }
    }
}

fn no_browser_message(env: &Env, system: bool) -> String {
    if system {
        return "no system-wide browser folder to write".to_owned();
    }
    let mut folders: Vec<String> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    for l in browsers::user_locations(env) {
        match l.config_dir.strip_prefix(env.user_base()) {
            Ok(p) => push_unique(&mut folders, &p.display().to_string()),
            Err(_) => push_unique(&mut others, &env.tilde(&l.config_dir)),
        }
    }
    format!(
        "no Chromium-family or Firefox-family browser found (none of {} exists under {}{}); nothing was \
         registered. Start your browser once and run `keepsake-host install` again, or register a profile \
         folder with `keepsake-host install --user-data-dir DIR`",
        folders.join(", "),
        env.tilde(&env.user_base()),
        if others.is_empty() { String::new() } else { format!(", nor {}", others.join(", ")) }
    )
}

// ---------------------------------------------------------------------------------------------
// uninstall

/// `keepsake-host uninstall` options.
#[derive(Debug, Clone, Default)]
pub struct UninstallOpts {
    pub system: bool,
    pub user_data_dirs: Vec<PathBuf>,
    pub purge_data: bool,
    pub json: bool,
}

/// Every manifest path `install` can write: each browser's per-user and system folder, each
/// `--user-data-dir` profile (named now or recorded in the receipt), the Windows manifest.
fn known_manifests(env: &Env, o: &UninstallOpts, receipt: &Receipt) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| push_unique(&mut files, &p);
    for l in browsers::user_locations(env) {
        add(l.manifest());
    }
    for l in browsers::system_locations(env) {
        add(l.manifest());
    }
    for d in o.user_data_dirs.iter().map(|d| absolute(d)).chain(receipt.user_data_dirs.iter().cloned()) {
        add(d.join("NativeMessagingHosts").join(MANIFEST_FILE));
    }
    for system in [false, true] {
        for family in [Family::Chromium, Family::Mozilla] {
            if let Some(p) = browsers::windows_manifest(env, system, family) {
                add(p);
            }
        }
    }
    files
}

/// Every manifest file uninstall looks at: the receipt's, then every known location (system
/// folders only with `--system`).
fn uninstall_candidates(env: &Env, o: &UninstallOpts, receipt: &Receipt) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = receipt.manifests.clone();
    let mut add = |p: PathBuf| push_unique(&mut files, &p);
    for l in browsers::user_locations(env) {
        add(l.manifest());
    }
    if o.system {
        for l in browsers::system_locations(env) {
            add(l.manifest());
        }
    }
    for d in o.user_data_dirs.iter().map(|d| absolute(d)).chain(receipt.user_data_dirs.iter().cloned()) {
        add(d.join("NativeMessagingHosts").join(MANIFEST_FILE));
    }
    if env.platform == Platform::Windows {
        for family in [Family::Chromium, Family::Mozilla] {
            if let Some(p) = browsers::windows_manifest(env, false, family) {
                add(p);
            }
            if o.system {
                if let Some(p) = browsers::windows_manifest(env, true, family) {
                    add(p);
                }
            }
        }
    }
    files
}

/// The folders a receipt may name for removal: a folder on the way to something `install`
/// writes (a manifest folder, the database's folder, the installed binary's folder), never the
/// home folder or one above it. Anything else in `createdDirs` is reported and left.
fn removable_dir(env: &Env, d: &Path, targets: &[PathBuf]) -> bool {
    d.is_absolute()
        && !d.components().any(|c| matches!(c, std::path::Component::ParentDir))
        && !env.home.starts_with(d)
        && !env.config_home.starts_with(d)
        && targets.iter().any(|t| t.starts_with(d))
}

fn is_system_path(env: &Env, p: &Path) -> bool {
    !p.starts_with(&env.home) && !p.starts_with(&env.config_home)
}

/// What uninstall removed, what it left (and why), and what it could not remove.
struct Removal {
    removed: Vec<(String, String)>,
    left: Vec<(String, String)>,
    errors: Vec<InstallError>,
}

impl Removal {
    /// Remove one file (not a folder); a missing file is not an error. Only for paths that do
    /// not come from the receipt (the receipt itself, the data files beside the database).
    fn file(&mut self, env: &Env, p: &Path, kind: &str) {
        match fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => match fs::remove_file(p) {
                Ok(()) => self.removed.push((kind.to_owned(), p.display().to_string())),
                Err(e) => self.errors.push(InstallError::io("remove", p, e, is_system_path(env, p))),
            },
            Err(_) => {}
        }
    }

    /// Remove a file only when it proves to be what `install` wrote (see `proof`).
    /// True when the file was ours (removed, or ours but not removable) or is not there.
    fn proven(&mut self, env: &Env, p: &Path, kind: proof::Kind, label: &str) -> bool {
        match proof::remove_if_ours(p, kind) {
            Ok(()) => self.removed.push((label.to_owned(), p.display().to_string())),
            Err(proof::Left::Missing) => {}
            Err(proof::Left::NotOurs(why)) => {
                self.leave(p, &format!("{why}; not removed"));
                return false;
            }
            Err(proof::Left::Io(e)) => {
                self.errors.push(InstallError::io("remove", p, e, is_system_path(env, p)))
            }
        }
        true
    }

    fn leave(&mut self, p: &Path, why: &str) {
        tracing::warn!(path = %p.display(), why, "uninstall left a path the receipt names");
        self.left.push((p.display().to_string(), why.to_owned()));
    }
}

/// `keepsake-host uninstall`, with the real environment.
pub fn uninstall(db: &Path, o: &UninstallOpts) -> Result<i32, CliError> {
    let env = Env::from_process().map_err(|e| CliError(e, 1))?;
    uninstall_in(&env, db, o)
}

/// `keepsake-host uninstall` against `env`. Nothing read from the receipt is trusted: a manifest
/// goes only from a folder `install` writes and when it names this host, the binary only when
/// it is a keepsake-host binary, a folder only on the way to one of those (and only when empty),
/// a registry key only when it is one `install` sets. Everything else is reported and left.
pub fn uninstall_in(env: &Env, db: &Path, o: &UninstallOpts) -> Result<i32, CliError> {
    let mut notes: Vec<String> = Vec::new();
    let receipt = load_receipt(db).unwrap_or_else(|e| {
        notes.push(format!("{e}; removing manifests from the known locations only"));
        None
    });
    let had_receipt = receipt.is_some();
    let receipt = receipt.unwrap_or_default();
    let mut r = Removal { removed: Vec::new(), left: Vec::new(), errors: Vec::new() };

    let known = known_manifests(env, o, &receipt);
    for f in uninstall_candidates(env, o, &receipt) {
        if !known.contains(&f) {
            r.leave(&f, "not a manifest location install writes; not removed");
            continue;
        }
        r.proven(env, &f, proof::Kind::Manifest, "manifest");
    }

    if env.platform == Platform::Windows {
        let mut allowed: Vec<String> = Vec::new();
        for hive in hives(false).iter().chain(hives(true)) {
            for (_, k, _) in browsers::registry_keys() {
                allowed.push(format!(r"{hive}\{k}"));
            }
        }
        let mut keys: Vec<String> = Vec::new();
        for k in &receipt.registry_keys {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(k)) {
                push_unique(&mut keys, k);
            } else {
                r.left.push((k.clone(), "not a registry key install sets; not removed".into()));
            }
        }
        for hive in hives(false).iter().chain(if o.system { hives(true) } else { &[] }) {
            for (_, k, _) in browsers::registry_keys() {
                push_unique(&mut keys, &format!(r"{hive}\{k}"));
            }
        }
        for key in keys {
            if reg_get_default(&key).is_some() {
                match reg_run(&["delete", &key, "/f"]) {
                    Ok(()) => r.removed.push(("registry key".into(), key)),
                    Err(e) => r.errors.push(InstallError::Invalid(format!("cannot delete {key}: {e}"))),
                }
            }
        }
    }

    // The binary's folder counts as install's only when the binary proved to be ours.
    let mut bin_dir: Option<PathBuf> = None;
    if let Some(b) = &receipt.binary {
        let running = std::env::current_exe().ok().and_then(|c| fs::canonicalize(c).ok());
        if env.platform == Platform::Windows && running.as_deref() == fs::canonicalize(b).ok().as_deref() {
            notes.push(format!(
                "{} is running and cannot delete itself on Windows; delete it afterwards",
                b.display()
            ));
        } else if !b.is_absolute() {
            r.leave(b, "not an absolute path; not removed");
        } else if r.proven(env, b, proof::Kind::Binary, "binary") {
            bin_dir = b.parent().map(Path::to_path_buf);
        }
    }

    if had_receipt {
        r.file(env, &receipt_path(db), "receipt");
    }

    let data_dir = db.parent().unwrap_or(Path::new(".")).to_path_buf();
    let copies_dir = backups_dir_for(db);
    if o.purge_data {
        // copies kept elsewhere (the backupFolder setting) are the user's to remove: said, not touched
        if let Ok(mut s) = crate::store::Store::open_read_only(db) {
            if let Ok(b) = s.backup_settings() {
                if b.folder != copies_dir && !crate::store::copies::list_dir(&b.folder).is_empty() {
                    notes.push(format!(
                        "copies of the database in {} (the backupFolder setting) were kept; remove them yourself",
                        b.folder.display()
                    ));
                }
            }
        }
        // the copies beside the database (reliability.md §7 "Copies and backups"): only names of a
        // copy's shape, and temp files of copies; anything else keeps the folder
        for c in crate::store::copies::list_dir(&copies_dir) {
            r.file(env, &c.path, "data copy");
        }
        for e in fs::read_dir(&copies_dir).into_iter().flatten().flatten() {
            if e.file_name().to_str().is_some_and(crate::domain::backups::is_copy_temp) {
                r.file(env, &e.path(), "data copy");
            }
        }
        for f in [
            db.to_path_buf(),
            sidecar(db, "-wal"),
            sidecar(db, "-shm"),
            sidecar(db, "-journal"),
            crate::util::paths::sync_lock_for(db),
            log_path_for(db),
            data_dir.join(DEBUG_MARKER),
        ] {
            r.file(env, &f, "data");
        }
    }

    let mut targets: Vec<PathBuf> = known.iter().filter_map(|m| m.parent().map(Path::to_path_buf)).collect();
    targets.push(data_dir.clone());
    targets.extend(bin_dir);
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in &receipt.created_dirs {
        if removable_dir(env, d, &targets) {
            push_unique(&mut dirs, d);
        } else {
            r.leave(d, "not a folder install creates; not removed");
        }
    }
    if o.purge_data {
        push_unique(&mut dirs, &copies_dir);
        push_unique(&mut dirs, &data_dir);
    }
    // Innermost first: reverse creation order, and deeper paths before their parents. Only
    // empty folders go.
    dirs.reverse();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        if fs::remove_dir(&d).is_ok() {
            r.removed.push(("folder".into(), d.display().to_string()));
        }
    }
    let Removal { removed, left, mut errors } = r;

    let db_left = db.exists();
    if o.json {
        let doc = json!({
            "ok": errors.is_empty(),
            "removed": removed.iter().map(|(k, w)| json!({"kind": k, "path": w})).collect::<Vec<_>>(),
            "notes": notes,
            "left": left.iter().map(|(p, why)| json!({"path": p, "reason": why})).collect::<Vec<_>>(),
            "dataPurged": o.purge_data,
            "database": db.display().to_string(),
            "databaseKept": db_left,
            "errors": errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        for (k, w) in &removed {
            println!("removed   {w}  ({k})");
        }
        if removed.is_empty() {
            println!("nothing to remove: no {MANIFEST_FILE} found in any known location");
        }
        for (p, why) in &left {
            println!("left      {p}  ({why})");
        }
        for n in &notes {
            println!("note: {n}");
        }
        if o.purge_data {
            println!("purged your Keepsake data in {}", data_dir.display());
        } else if db_left {
            println!(
                "kept your chat data: {} (`keepsake-host uninstall --purge-data` deletes it)",
                db.display()
            );
        }
    }
    match errors.len() {
        0 => Ok(0),
        n => {
            let first = errors.remove(0);
            let more = if n > 1 { format!(" (and {} more)", n - 1) } else { String::new() };
            Err(CliError(format!("{first}{more}"), 1))
        }
    }
}

/// The fix a doctor failure names for a manifest at `file`.
pub fn fix_for(env: &Env, file: &Path) -> String {
    if env.platform == Platform::Windows {
        return FIX.to_owned();
    }
    if browsers::system_locations(env).iter().any(|l| l.manifest() == file) {
        return "sudo keepsake-host install --system".to_owned();
    }
    if browsers::user_locations(env).iter().any(|l| l.manifest() == file) {
        return FIX.to_owned();
    }
    match file.parent().and_then(Path::parent) {
        Some(profile) => format!("keepsake-host install --user-data-dir '{}'", profile.display()),
        None => FIX.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_dir_records_what_it_created() {
        let t = tempfile::tempdir().unwrap();
        let mut created = Vec::new();
        let deep = t.path().join("a/b/c");
        ensure_dir(&deep, None, &mut created).unwrap();
        assert_eq!(created, vec![t.path().join("a"), t.path().join("a/b"), deep.clone()]);
        let mut again = Vec::new();
        ensure_dir(&deep, None, &mut again).unwrap();
        assert!(again.is_empty());
    }

    #[test]
    fn atomic_write_reports_unchanged_and_leaves_no_temp_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("m.json");
        assert_eq!(write_atomic(&p, b"{}\n", 0o644).unwrap(), Outcome::Written);
        assert_eq!(write_atomic(&p, b"{}\n", 0o644).unwrap(), Outcome::Unchanged);
        assert_eq!(write_atomic(&p, b"{ }\n", 0o644).unwrap(), Outcome::Written);
        assert_eq!(fs::read(&p).unwrap(), b"{ }\n");
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 1);
        #[cfg(unix)]
        assert_eq!(mode_of(&p), Some(0o644));
    }

    #[test]
    fn extension_ids_are_validated_and_deduplicated() {
        let ids = extension_ids(&[
            "abcdefghijklmnopabcdefghijklmnop".into(),
            EXTENSION_ID.into(),
            "store@keepsake.dev".into(),
            FIREFOX_ADDON_ID.into(),
            "{12345678-abcd-ef01-2345-6789abcdef01}".into(),
        ])
        .unwrap();
        assert_eq!(
            ids.chromium,
            vec![EXTENSION_ID.to_owned(), "abcdefghijklmnopabcdefghijklmnop".to_owned()]
        );
        assert_eq!(
            ids.firefox,
            vec![
                FIREFOX_ADDON_ID.to_owned(),
                "store@keepsake.dev".to_owned(),
                "{12345678-abcd-ef01-2345-6789abcdef01}".to_owned()
            ]
        );
        for bad in ["nope", "a@b@c", "@", "x@", "{1234}", "sp ace@x.org"] {
            assert!(matches!(extension_ids(&[bad.into()]), Err(InstallError::Usage(_))), "{bad}");
        }
    }
}
