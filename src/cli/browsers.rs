//! Where Chromium-family and Mozilla-family (Firefox, LibreWolf, Waterfox) browsers look for
//! native messaging host manifests, and the rules a manifest must follow (platform.md §8–§9). Everything here is computed from an [`Env`], so tests
//! can point it at a temporary home; only [`Env::from_process`] reads the real environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The native messaging host name (the extension calls `connectNative` with it).
pub const HOST_NAME: &str = "dev.keepsake.host";
/// The manifest file name: Chromium requires `<name>.json`.
pub const MANIFEST_FILE: &str = "dev.keepsake.host.json";
/// The manifest's `description`.
pub const DESCRIPTION: &str = "Keepsake storage host";
/// The extension ID given by the fixed development key in `extension/manifest.json`
/// (platform.md §10). Extra IDs (a store build) come from `install --extension-id`.
pub const EXTENSION_ID: &str = "ejaedcjldiggibmnammkkoekohjgefkk";
/// The Firefox add-on ID (`browser_specific_settings.gecko.id` of the Firefox build; fixed, so a
/// Mozilla manifest can name it in `allowed_extensions`). Extra IDs come from `install --extension-id`.
///
/// The one place it is chosen (platform.md §13): the host admits it built in, `install` and the
/// Debian package's manifest (`install --system --package-root`) list it in `allowed_extensions`,
/// and the Firefox build (`scripts/firefox.mjs` `GECKO_ID`, checked equal by
/// `tests/it/conventions.rs`) carries it. Firefox release runs only add-ons Mozilla signed, and
/// addons.mozilla.org signs an ID for the first developer who submits it, so the ID is Keepsake's
/// because Keepsake's signed listing holds it: a release step (README "Store archives").
pub const FIREFOX_ADDON_ID: &str = "keepsake@keepsake.dev";
/// A test hook: prefix for every system-wide path (`/etc/...`, `/usr/bin/...`, `/snap/...`),
/// so tests can exercise `--system` and the Snap checks without touching the real system.
pub const SYSTEM_ROOT_VAR: &str = "KEEPSAKE_SYSTEM_ROOT";

/// Which manifest shape a folder takes: Chromium's (`allowed_origins`) or Mozilla's
/// (`allowed_extensions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Chromium,
    Mozilla,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Linux,
    Macos,
    Windows,
}

impl Platform {
    pub fn current() -> Platform {
        if cfg!(windows) {
            Platform::Windows
        } else if cfg!(target_os = "macos") {
            Platform::Macos
        } else {
            Platform::Linux
        }
    }
}

/// The facts location logic depends on.
#[derive(Debug, Clone)]
pub struct Env {
    pub platform: Platform,
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` (absolute) or `~/.config` on Linux.
    pub config_home: PathBuf,
    /// `/` except in tests (see [`SYSTEM_ROOT_VAR`]).
    pub system_root: PathBuf,
    /// `%LOCALAPPDATA%` on Windows.
    pub local_app_data: Option<PathBuf>,
    /// `%ProgramData%` on Windows.
    pub program_data: Option<PathBuf>,
}

impl Env {
    /// Build from variable lookups; `None` when no home directory can be found.
    pub fn from_vars(
        platform: Platform,
        var: impl Fn(&str) -> Option<OsString>,
        fallback_home: Option<PathBuf>,
    ) -> Option<Env> {
        let abs =
            |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute());
        let home = match platform {
            Platform::Windows => abs("USERPROFILE").or(fallback_home),
            _ => abs("HOME").or(fallback_home),
        }?;
        let config_home = abs("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"));
        let system_root = abs(SYSTEM_ROOT_VAR).unwrap_or_else(|| PathBuf::from("/"));
        Some(Env {
            platform,
            config_home,
            system_root,
            local_app_data: abs("LOCALAPPDATA"),
            program_data: abs("ProgramData"),
            home,
        })
    }

    /// The real process environment (the only place that reads it).
    pub fn from_process() -> Result<Env, String> {
        Env::from_vars(Platform::current(), |k| std::env::var_os(k), dirs::home_dir())
            .ok_or_else(|| "cannot find your home directory (set HOME)".to_owned())
    }

    /// A system-wide path, under [`Env::system_root`].
    pub fn sys(&self, p: &str) -> PathBuf {
        self.system_root.join(p.trim_start_matches('/'))
    }

    /// Where per-user browser folders live: `~/.config` (XDG) on Linux,
    /// `~/Library/Application Support` on macOS.
    pub fn user_base(&self) -> PathBuf {
        match self.platform {
            Platform::Macos => self.home.join("Library/Application Support"),
            _ => self.config_home.clone(),
        }
    }

    /// Show a path with `~` for the home directory (for messages only).
    pub fn tilde(&self, p: &Path) -> String {
        match p.strip_prefix(&self.home) {
            Ok(rest) if !self.home.as_os_str().is_empty() => format!("~/{}", rest.display()),
            _ => p.display().to_string(),
        }
    }
}

/// One per-user registration folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserLocation {
    pub browser: &'static str,
    pub family: Family,
    /// The browser's config folder; the browser counts as installed when it exists.
    pub config_dir: PathBuf,
    /// `<user-data-dir>/NativeMessagingHosts`.
    pub hosts_dir: PathBuf,
    /// System folders that also serve this browser (a system manifest covers it too).
    pub system_dirs: Vec<PathBuf>,
}

impl UserLocation {
    /// The browser counts as installed: its config folder exists (what `install` registers).
    pub fn detected(&self) -> bool {
        self.config_dir.is_dir()
    }
    /// The browser has really run with this profile folder (`Local State` is written on first
    /// start; Firefox writes `profiles.ini`). `doctor` complains about a missing manifest only
    /// then: Chromium's crash reporter creates `~/.config/chromium/Crash Reports` even for runs
    /// with another `--user-data-dir`.
    pub fn in_use(&self) -> bool {
        match self.family {
            Family::Chromium => self.config_dir.join("Local State").is_file(),
            Family::Mozilla => self.config_dir.join("profiles.ini").is_file(),
        }
    }
    pub fn manifest(&self) -> PathBuf {
        self.hosts_dir.join(MANIFEST_FILE)
    }
}

/// One system-wide registration folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemLocation {
    pub browser: &'static str,
    pub family: Family,
    pub hosts_dir: PathBuf,
    /// `install --system` writes it: always for Chrome's and Chromium's folders, for the others
    /// only when the browser appears installed.
    pub wanted: bool,
}

impl SystemLocation {
    pub fn manifest(&self) -> PathBuf {
        self.hosts_dir.join(MANIFEST_FILE)
    }

    /// `/usr/lib64/mozilla/…`: read by Firefox builds of distributions with a `/usr/lib64`
    /// (Fedora, openSUSE), never by Debian's, so a Debian package does not ship it.
    pub fn multilib_only(&self) -> bool {
        self.hosts_dir.ends_with(LINUX_MOZILLA64_SYS.trim_start_matches('/'))
    }
}

const LINUX_CHROME_SYS: &str = "/etc/opt/chrome/native-messaging-hosts";
const LINUX_CHROMIUM_SYS: &str = "/etc/chromium/native-messaging-hosts";
const LINUX_EDGE_SYS: &str = "/etc/opt/edge/native-messaging-hosts";
const LINUX_VIVALDI_SYS: &str = "/etc/opt/vivaldi/native-messaging-hosts";
const MAC_CHROME_SYS: &str = "/Library/Google/Chrome/NativeMessagingHosts";
const MAC_CHROMIUM_SYS: &str = "/Library/Application Support/Chromium/NativeMessagingHosts";
const MAC_EDGE_SYS: &str = "/Library/Microsoft/Edge/NativeMessagingHosts";
const MAC_VIVALDI_SYS: &str = "/Library/Application Support/Vivaldi/NativeMessagingHosts";
/// Firefox's system folders (Mozilla's "Native manifests" page): which of the two a Linux build
/// reads is fixed when it is built (`/usr/lib64` on Fedora and openSUSE), so both are written.
const LINUX_MOZILLA_SYS: &str = "/usr/lib/mozilla/native-messaging-hosts";
const LINUX_MOZILLA64_SYS: &str = "/usr/lib64/mozilla/native-messaging-hosts";
const MAC_MOZILLA_SYS: &str = "/Library/Application Support/Mozilla/NativeMessagingHosts";

/// Every per-user folder we know (detected or not), platform.md §9. Opera has no folder of its
/// own: it reads Google Chrome's, so an installed Opera (`~/.config/opera`) registers there.
pub fn user_locations(env: &Env) -> Vec<UserLocation> {
    let base = env.user_base();
    // (browser, config folder that proves it is installed, user-data-dir holding NativeMessagingHosts, system folders)
    let table: Vec<(&'static str, &str, &str, Vec<&str>)> = match env.platform {
        Platform::Linux => vec![
            ("Google Chrome", "google-chrome", "google-chrome", vec![LINUX_CHROME_SYS]),
            ("Google Chrome Beta", "google-chrome-beta", "google-chrome-beta", vec![LINUX_CHROME_SYS]),
            ("Google Chrome Dev", "google-chrome-unstable", "google-chrome-unstable", vec![LINUX_CHROME_SYS]),
            ("Chromium", "chromium", "chromium", vec![LINUX_CHROMIUM_SYS]),
            ("Microsoft Edge", "microsoft-edge", "microsoft-edge", vec![LINUX_EDGE_SYS]),
            ("Microsoft Edge Beta", "microsoft-edge-beta", "microsoft-edge-beta", vec![LINUX_EDGE_SYS]),
            ("Microsoft Edge Dev", "microsoft-edge-dev", "microsoft-edge-dev", vec![LINUX_EDGE_SYS]),
            ("Brave", "BraveSoftware/Brave-Browser", "BraveSoftware/Brave-Browser", vec![LINUX_CHROME_SYS]),
            ("Vivaldi", "vivaldi", "vivaldi", vec![LINUX_VIVALDI_SYS, LINUX_CHROME_SYS]),
            (
                "Vivaldi Snapshot",
                "vivaldi-snapshot",
                "vivaldi-snapshot",
                vec![LINUX_VIVALDI_SYS, LINUX_CHROME_SYS],
            ),
            ("Opera", "opera", "google-chrome", vec![LINUX_CHROME_SYS]),
        ],
        Platform::Macos => vec![
            ("Google Chrome", "Google/Chrome", "Google/Chrome", vec![MAC_CHROME_SYS]),
            ("Google Chrome Beta", "Google/Chrome Beta", "Google/Chrome Beta", vec![MAC_CHROME_SYS]),
            ("Google Chrome Dev", "Google/Chrome Dev", "Google/Chrome Dev", vec![MAC_CHROME_SYS]),
            ("Google Chrome Canary", "Google/Chrome Canary", "Google/Chrome Canary", vec![MAC_CHROME_SYS]),
            ("Chromium", "Chromium", "Chromium", vec![MAC_CHROMIUM_SYS]),
            ("Microsoft Edge", "Microsoft Edge", "Microsoft Edge", vec![MAC_EDGE_SYS]),
            ("Microsoft Edge Beta", "Microsoft Edge Beta", "Microsoft Edge Beta", vec![MAC_EDGE_SYS]),
            ("Microsoft Edge Dev", "Microsoft Edge Dev", "Microsoft Edge Dev", vec![MAC_EDGE_SYS]),
            ("Microsoft Edge Canary", "Microsoft Edge Canary", "Microsoft Edge Canary", vec![MAC_EDGE_SYS]),
            ("Brave", "BraveSoftware/Brave-Browser", "BraveSoftware/Brave-Browser", vec![]),
            ("Vivaldi", "Vivaldi", "Vivaldi", vec![MAC_VIVALDI_SYS]),
            ("Arc", "Arc/User Data", "Arc/User Data", vec![]),
        ],
        // Windows registers through the registry (see `registry_keys`).
        Platform::Windows => vec![],
    };
    let mut out: Vec<UserLocation> = table
        .into_iter()
        .map(|(browser, config, data, sys)| UserLocation {
            browser,
            family: Family::Chromium,
            config_dir: base.join(config),
            hosts_dir: base.join(data).join("NativeMessagingHosts"),
            system_dirs: sys.into_iter().map(|s| env.sys(s)).collect(),
        })
        .collect();
    out.extend(mozilla_user_locations(env));
    out
}

/// The Mozilla-family per-user folders (Mozilla's "Native manifests" page): Firefox and Firefox
/// ESR share `~/.mozilla` (installed when `~/.mozilla/firefox` exists), LibreWolf and Waterfox
/// keep their own folder beside it; on macOS `~/Library/Application Support/Mozilla`.
fn mozilla_user_locations(env: &Env) -> Vec<UserLocation> {
    let h = &env.home;
    let loc = |browser, config_dir: PathBuf, hosts_dir: PathBuf, sys: &[&str]| UserLocation {
        browser,
        family: Family::Mozilla,
        config_dir,
        hosts_dir,
        system_dirs: sys.iter().map(|s| env.sys(s)).collect(),
    };
    match env.platform {
        Platform::Linux => vec![
            loc(
                "Firefox, Firefox ESR",
                h.join(".mozilla/firefox"),
                h.join(".mozilla/native-messaging-hosts"),
                &[LINUX_MOZILLA_SYS, LINUX_MOZILLA64_SYS],
            ),
            loc("LibreWolf", h.join(".librewolf"), h.join(".librewolf/native-messaging-hosts"), &[]),
            loc("Waterfox", h.join(".waterfox"), h.join(".waterfox/native-messaging-hosts"), &[]),
        ],
        Platform::Macos => {
            let base = env.user_base();
            vec![loc(
                "Firefox",
                base.join("Firefox"),
                base.join("Mozilla/NativeMessagingHosts"),
                &[MAC_MOZILLA_SYS],
            )]
        }
        // Windows registers through the registry (see `registry_keys`).
        Platform::Windows => vec![],
    }
}

/// Every system-wide folder we know. Chrome's folder (which Chrome, Brave, Opera and Vivaldi all
/// read), Chromium's and Firefox's `/usr/lib/mozilla` are always wanted by `install --system`;
/// `/usr/lib64/mozilla` when `/usr/lib64` exists; Edge's and Vivaldi's own folders only when the
/// browser appears installed (a binary in `/usr/bin` or a folder in `/opt`, or the app bundle on
/// macOS).
pub fn system_locations(env: &Env) -> Vec<SystemLocation> {
    let any = |ps: &[&str]| ps.iter().any(|p| env.sys(p).exists());
    let table: Vec<(&'static str, &str, bool)> = match env.platform {
        Platform::Linux => vec![
            ("Google Chrome, Brave, Opera, Vivaldi", LINUX_CHROME_SYS, true),
            ("Chromium", LINUX_CHROMIUM_SYS, true),
            ("Firefox", LINUX_MOZILLA_SYS, true),
            ("Firefox (lib64)", LINUX_MOZILLA64_SYS, any(&["/usr/lib64"])),
            (
                "Microsoft Edge",
                LINUX_EDGE_SYS,
                any(&[
                    "/usr/bin/microsoft-edge",
                    "/usr/bin/microsoft-edge-stable",
                    "/usr/bin/microsoft-edge-beta",
                    "/usr/bin/microsoft-edge-dev",
                    "/opt/microsoft/msedge",
                    "/opt/microsoft/msedge-beta",
                    "/opt/microsoft/msedge-dev",
                ]),
            ),
            (
                "Vivaldi",
                LINUX_VIVALDI_SYS,
                any(&[
                    "/usr/bin/vivaldi",
                    "/usr/bin/vivaldi-stable",
                    "/usr/bin/vivaldi-snapshot",
                    "/opt/vivaldi",
                    "/opt/vivaldi-snapshot",
                ]),
            ),
        ],
        Platform::Macos => vec![
            ("Google Chrome", MAC_CHROME_SYS, true),
            ("Chromium", MAC_CHROMIUM_SYS, true),
            ("Microsoft Edge", MAC_EDGE_SYS, any(&["/Applications/Microsoft Edge.app"])),
            ("Vivaldi", MAC_VIVALDI_SYS, any(&["/Applications/Vivaldi.app"])),
            ("Firefox", MAC_MOZILLA_SYS, true),
        ],
        Platform::Windows => vec![],
    };
    table
        .into_iter()
        .map(|(browser, dir, wanted)| SystemLocation {
            browser,
            family: if [LINUX_MOZILLA_SYS, LINUX_MOZILLA64_SYS, MAC_MOZILLA_SYS].contains(&dir) {
                Family::Mozilla
            } else {
                Family::Chromium
            },
            hosts_dir: env.sys(dir),
            wanted,
        })
        .collect()
}

/// Windows registry keys (without the hive) that point at our manifest, platform.md §9, with the
/// manifest shape each reads (Firefox, LibreWolf and Waterfox all read Mozilla's key).
pub fn registry_keys() -> Vec<(&'static str, String, Family)> {
    [
        ("Google Chrome, Opera", r"Software\Google\Chrome", Family::Chromium),
        ("Chromium", r"Software\Chromium", Family::Chromium),
        ("Microsoft Edge", r"Software\Microsoft\Edge", Family::Chromium),
        ("Brave", r"Software\BraveSoftware\Brave-Browser", Family::Chromium),
        ("Vivaldi", r"Software\Vivaldi", Family::Chromium),
        ("Firefox", r"Software\Mozilla", Family::Mozilla),
    ]
    .into_iter()
    .map(|(b, k, f)| (b, format!(r"{k}\NativeMessagingHosts\{HOST_NAME}"), f))
    .collect()
}

/// The manifest file on Windows (the registry points at it): `Keepsake\dev.keepsake.host.json`
/// for Chromium, `Keepsake\mozilla\dev.keepsake.host.json` for Firefox.
pub fn windows_manifest(env: &Env, system: bool, family: Family) -> Option<PathBuf> {
    let base = if system { env.program_data.as_ref() } else { env.local_app_data.as_ref() };
    base.map(|b| match family {
        Family::Chromium => b.join("Keepsake").join(MANIFEST_FILE),
        Family::Mozilla => b.join("Keepsake").join("mozilla").join(MANIFEST_FILE),
    })
}

/// Sandboxed browsers we cannot serve, with the reason (platform.md §9). Nothing is written
/// into them.
pub fn sandbox_warnings(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    if env.platform != Platform::Linux {
        return out;
    }
    let snap_bin = env.sys("/snap/bin/chromium");
    let snap_home = env.home.join("snap/chromium");
    if let Some(found) = [&snap_bin, &snap_home].into_iter().find(|p| p.exists()) {
        out.push(format!(
            "Snap Chromium found ({}): Snap confinement does not let Chromium start native hosts outside \
             the snap at all, so Keepsake cannot work there; use Chromium from a .deb/distribution package, \
             Google Chrome, Brave or Edge instead",
            env.tilde(found)
        ));
    }
    for (id, name) in [
        ("com.google.Chrome", "Google Chrome"),
        ("org.chromium.Chromium", "Chromium"),
        ("com.brave.Browser", "Brave"),
        ("com.microsoft.Edge", "Microsoft Edge"),
        ("com.vivaldi.Vivaldi", "Vivaldi"),
    ] {
        let dir = env.home.join(".var/app").join(id);
        if dir.is_dir() {
            out.push(format!(
                "Flatpak {name} found ({}): a Flatpak browser reads manifests only inside its sandbox and \
                 runs the host there with another home, so the host would not use the database this \
                 command sees; not registered (use a non-Flatpak {name})",
                env.tilde(&dir)
            ));
        }
    }
    out
}

/// `chrome-extension://<id>/`.
pub fn origin(id: &str) -> String {
    format!("chrome-extension://{id}/")
}

/// A Chromium extension ID: exactly 32 letters `a`–`p`.
pub fn valid_extension_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

/// The origin an `allowed_origins` entry must be, or `None`.
fn origin_id(o: &str) -> Option<&str> {
    o.strip_prefix("chrome-extension://")
        .and_then(|r| r.strip_suffix('/'))
        .filter(|id| valid_extension_id(id))
}

/// A Firefox add-on ID as Firefox and addons.mozilla.org accept it: email-like
/// (`name@domain`, letters, digits, `.`, `_`, `-`; the name may be empty) or a GUID in braces, at
/// most 80 bytes (the pattern Firefox's manifest schema checks `gecko.id` against).
pub fn valid_addon_id(id: &str) -> bool {
    let plain = |s: &str, extra: &[u8]| s.bytes().all(|b| b.is_ascii_alphanumeric() || extra.contains(&b));
    if id.is_empty() || id.len() > 80 {
        return false;
    }
    if let Some(guid) = id.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        let parts: Vec<&str> = guid.split('-').collect();
        return parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
            && parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    match id.split_once('@') {
        Some((local, domain)) => {
            plain(local, b"._-") && !domain.is_empty() && plain(domain, b".-_") && !domain.contains('@')
        }
        None => false,
    }
}

/// The `dev.keepsake.host` manifests among `files` that can be read (missing, oversized or
/// malformed files, and other hosts' manifests, give nothing).
fn our_manifests(files: &[PathBuf]) -> impl Iterator<Item = Value> + '_ {
    files.iter().filter_map(|f| {
        if !std::fs::metadata(f).is_ok_and(|m| m.is_file() && m.len() <= 1 << 20) {
            return None;
        }
        let bytes = std::fs::read(f).ok()?;
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
        let doc = serde_json::from_slice::<Value>(bytes).ok()?;
        (doc.get("name").and_then(Value::as_str) == Some(HOST_NAME)).then_some(doc)
    })
}

/// The extension IDs allowed to call the host (reliability.md §8): ours, then every ID in the
/// `allowed_origins` of those `files` that are readable `dev.keepsake.host` manifests (missing,
/// oversized or malformed files add nothing).
pub fn allowed_caller_ids(files: &[PathBuf]) -> Vec<String> {
    let mut ids = vec![EXTENSION_ID.to_owned()];
    for doc in our_manifests(files) {
        for o in doc.get("allowed_origins").and_then(Value::as_array).into_iter().flatten() {
            if let Some(id) = o.as_str().and_then(origin_id) {
                if !ids.iter().any(|x| x == id) {
                    ids.push(id.to_owned());
                }
            }
        }
    }
    ids
}

/// The Firefox add-on IDs allowed to call the host: ours ([`FIREFOX_ADDON_ID`]), then every valid
/// ID in the `allowed_extensions` of those `files` that are readable `dev.keepsake.host` manifests.
pub fn allowed_addon_ids(files: &[PathBuf]) -> Vec<String> {
    let mut ids = vec![FIREFOX_ADDON_ID.to_owned()];
    for doc in our_manifests(files) {
        for o in doc.get("allowed_extensions").and_then(Value::as_array).into_iter().flatten() {
            if let Some(id) = o.as_str().filter(|id| valid_addon_id(id)) {
                if !ids.iter().any(|x| x == id) {
                    ids.push(id.to_owned());
                }
            }
        }
    }
    ids
}

/// Chromium's host-name rule: `[a-z0-9._]`, no leading/trailing dot, no `..`.
pub fn valid_host_name(n: &str) -> bool {
    !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_')
        && !n.starts_with('.')
        && !n.ends_with('.')
        && !n.contains("..")
}

/// The manifest we write (key order as in `host-manifest/dev.keepsake.host.json.in`).
pub fn manifest_value(bin: &str, ids: &[String]) -> Value {
    let origins: Vec<String> = ids.iter().map(|id| origin(id)).collect();
    json!({
        "name": HOST_NAME,
        "description": DESCRIPTION,
        "path": bin,
        "type": "stdio",
        "allowed_origins": origins,
    })
}

/// The manifest's bytes: pretty UTF-8 JSON without a BOM, newline-terminated.
pub fn manifest_bytes(bin: &str, ids: &[String]) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(&manifest_value(bin, ids)).unwrap_or_default();
    v.push(b'\n');
    v
}

/// The Mozilla manifest we write: the same keys, with `allowed_extensions` (add-on IDs).
pub fn mozilla_manifest_value(bin: &str, addon_ids: &[String]) -> Value {
    json!({
        "name": HOST_NAME,
        "description": DESCRIPTION,
        "path": bin,
        "type": "stdio",
        "allowed_extensions": addon_ids,
    })
}

/// The Mozilla manifest's bytes, written like [`manifest_bytes`].
pub fn mozilla_manifest_bytes(bin: &str, addon_ids: &[String]) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(&mozilla_manifest_value(bin, addon_ids)).unwrap_or_default();
    v.push(b'\n');
    v
}

/// What the extension sees for each kind of failure (platform.md §7).
pub const NOT_FOUND: &str = "Specified native messaging host not found.";
pub const FORBIDDEN: &str = "Access to the specified native messaging host is forbidden.";
pub const EXITED: &str = "Native host has exited.";
pub const FAILED_TO_START: &str = "Failed to start native messaging host.";
/// What a Firefox add-on sees for every manifest problem (Firefox logs the reason in the Browser
/// Console and treats the host as absent).
pub const FF_NOT_FOUND: &str = "No such native application dev.keepsake.host";

/// One failed manifest check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Which check failed (`encoding`, `json`, `name`, `file name`, `description`, `type`,
    /// `path`, `allowed_origins`).
    pub check: &'static str,
    pub detail: String,
    /// The text the extension would see (or a note when the browser would accept it).
    pub browser_error: &'static str,
}

fn problem(check: &'static str, detail: impl Into<String>, browser_error: &'static str) -> Problem {
    Problem { check, detail: detail.into(), browser_error }
}

/// Check a manifest the way Chromium (or, for [`Family::Mozilla`], Firefox) does. `file` is where
/// it was found (its name must be `<name>.json`, and on Windows a relative `path` is relative to
/// its folder). Returns the manifest's `path` target when it could be read, and every problem
/// found.
pub fn check_manifest(
    file: &Path,
    bytes: &[u8],
    platform: Platform,
    family: Family,
) -> (Option<PathBuf>, Vec<Problem>) {
    let (target, mut out) = check_manifest_inner(file, bytes, platform, family);
    if family == Family::Mozilla {
        // Firefox reports every failure the same way (the host is absent to the add-on).
        for p in &mut out {
            p.browser_error = FF_NOT_FOUND;
        }
    }
    (target, out)
}

fn check_manifest_inner(
    file: &Path,
    bytes: &[u8],
    platform: Platform,
    family: Family,
) -> (Option<PathBuf>, Vec<Problem>) {
    let mut out = Vec::new();
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        out.push(problem("encoding", "the file is UTF-16; Chromium reads only UTF-8", NOT_FOUND));
        return (None, out);
    }
    let body = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => {
            out.push(problem(
                "encoding",
                "starts with a UTF-8 byte-order mark (keepsake-host never writes one); Chromium skips it, \
                 but in a browser that does not, such as Firefox",
                NOT_FOUND,
            ));
            rest
        }
        None => bytes,
    };
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(e) => {
            out.push(problem("json", format!("not valid UTF-8 ({e})"), NOT_FOUND));
            return (None, out);
        }
    };
    let doc: Value = match serde_json::from_str(text) {
        Ok(Value::Object(m)) => Value::Object(m),
        Ok(_) => {
            out.push(problem("json", "the file is JSON but not an object", NOT_FOUND));
            return (None, out);
        }
        Err(e) => {
            out.push(problem("json", format!("not valid JSON ({e})"), NOT_FOUND));
            return (None, out);
        }
    };
    match doc.get("name").and_then(Value::as_str) {
        None => out.push(problem("name", "\"name\" is missing or not a string", NOT_FOUND)),
        Some(n) if !valid_host_name(n) => out.push(problem(
            "name",
            format!("\"name\" is {n:?}: only a-z 0-9 . _ are allowed, no leading/trailing dot, no \"..\""),
            NOT_FOUND,
        )),
        Some(n) => {
            let fname = file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            if fname != format!("{n}.json") {
                out.push(problem(
                    "file name",
                    format!("\"name\" is {n:?} but the file is {fname:?}; Chromium requires <name>.json"),
                    NOT_FOUND,
                ));
            } else if n != HOST_NAME {
                out.push(problem("name", format!("\"name\" is {n:?}, expected {HOST_NAME:?}"), NOT_FOUND));
            }
        }
    }
    match doc.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => {}
        _ => out.push(problem("description", "\"description\" is missing or empty", NOT_FOUND)),
    }
    if doc.get("type").and_then(Value::as_str) != Some("stdio") {
        out.push(problem("type", format!("\"type\" is {}, expected \"stdio\"", doc["type"]), NOT_FOUND));
    }
    if family == Family::Mozilla {
        check_allowed_extensions(&doc, &mut out);
    } else {
        check_allowed_origins(&doc, &mut out);
    }
    let target = match doc.get("path").and_then(Value::as_str) {
        None | Some("") => {
            out.push(problem("path", "\"path\" is missing or empty", NOT_FOUND));
            None
        }
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                Some(p)
            } else if platform == Platform::Windows {
                Some(file.parent().unwrap_or(Path::new("")).join(p))
            } else {
                out.push(problem(
                    "path",
                    format!("{} is relative; it must be absolute", p.display()),
                    NOT_FOUND,
                ));
                None
            }
        }
    };
    if let Some(t) = &target {
        check_binary(t, &mut out);
    }
    (target, out)
}

/// Chromium's `allowed_origins`: exact `chrome-extension://<id>/` entries, ours among them.
fn check_allowed_origins(doc: &Value, out: &mut Vec<Problem>) {
    match doc.get("allowed_origins").and_then(Value::as_array) {
        None => {
            out.push(problem("allowed_origins", "\"allowed_origins\" is missing or not a list", NOT_FOUND))
        }
        Some(list) => {
            let mut ours = false;
            for o in list {
                match o.as_str() {
                    Some(s) if origin_id(s).is_some() => ours |= origin_id(s) == Some(EXTENSION_ID),
                    Some(s)
                        if s.starts_with("chrome-extension://") && origin_id(&format!("{s}/")).is_some() =>
                    {
                        out.push(problem(
                            "allowed_origins",
                            format!("{s:?} lacks the trailing slash (must be chrome-extension://<id>/)"),
                            NOT_FOUND,
                        ))
                    }
                    _ => out.push(problem(
                        "allowed_origins",
                        format!("{o} is not chrome-extension://<32 letters a-p>/ (no wildcards)"),
                        NOT_FOUND,
                    )),
                }
            }
            if !ours && out.iter().all(|p| p.check != "allowed_origins") {
                out.push(problem(
                    "allowed_origins",
                    format!("does not list {}, the Keepsake extension", origin(EXTENSION_ID)),
                    FORBIDDEN,
                ));
            }
        }
    }
}

/// Firefox's `allowed_extensions`: a non-empty list of add-on IDs, ours among them.
fn check_allowed_extensions(doc: &Value, out: &mut Vec<Problem>) {
    let Some(list) = doc.get("allowed_extensions").and_then(Value::as_array) else {
        out.push(problem(
            "allowed_extensions",
            "\"allowed_extensions\" is missing or not a list (Firefox needs it)",
            FF_NOT_FOUND,
        ));
        return;
    };
    let mut ours = false;
    for o in list {
        match o.as_str() {
            Some(id) if valid_addon_id(id) => ours |= id == FIREFOX_ADDON_ID,
            _ => out.push(problem(
                "allowed_extensions",
                format!("{o} is not a Firefox add-on ID (name@domain or {{GUID}})"),
                FF_NOT_FOUND,
            )),
        }
    }
    if !ours && out.iter().all(|p| p.check != "allowed_extensions") {
        out.push(problem(
            "allowed_extensions",
            format!("does not list {FIREFOX_ADDON_ID}, the Keepsake add-on"),
            FF_NOT_FOUND,
        ));
    }
}

fn check_binary(t: &Path, out: &mut Vec<Problem>) {
    match std::fs::metadata(t) {
        Err(e) => out.push(problem("path", format!("{} cannot be used: {e}", t.display()), NOT_FOUND)),
        Ok(m) if !m.is_file() => {
            out.push(problem("path", format!("{} is not a regular file", t.display()), FAILED_TO_START))
        }
        Ok(m) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if m.permissions().mode() & 0o111 == 0 {
                    out.push(problem(
                        "path",
                        format!(
                            "{} is not executable (mode {:o})",
                            t.display(),
                            m.permissions().mode() & 0o7777
                        ),
                        EXITED,
                    ));
                }
            }
            #[cfg(not(unix))]
            let _ = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(platform: Platform, vars: &[(&str, &str)]) -> Env {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        Env::from_vars(platform, |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| OsString::from(v)), None)
            .expect("home")
    }

    #[test]
    fn linux_locations_follow_xdg_config_home() {
        let e = env(Platform::Linux, &[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")]);
        let l = user_locations(&e);
        let chromium = l.iter().find(|l| l.browser == "Chromium").unwrap();
        assert_eq!(chromium.hosts_dir, Path::new("/x/chromium/NativeMessagingHosts"));
        let brave = l.iter().find(|l| l.browser == "Brave").unwrap();
        assert_eq!(
            brave.manifest(),
            Path::new("/x/BraveSoftware/Brave-Browser/NativeMessagingHosts/dev.keepsake.host.json")
        );
        let opera = l.iter().find(|l| l.browser == "Opera").unwrap();
        assert_eq!(opera.config_dir, Path::new("/x/opera"));
        assert_eq!(opera.hosts_dir, Path::new("/x/google-chrome/NativeMessagingHosts"));
        // A relative XDG_CONFIG_HOME is ignored (XDG base directory spec).
        let e = env(Platform::Linux, &[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")]);
        assert_eq!(e.config_home, Path::new("/h/.config"));
        let s = system_locations(&e);
        assert_eq!(s[0].hosts_dir, Path::new("/etc/opt/chrome/native-messaging-hosts"));
        assert!(s[0].wanted && s[1].wanted);
    }

    #[test]
    fn macos_locations_live_under_application_support() {
        let e = env(Platform::Macos, &[("HOME", "/Users/u"), ("XDG_CONFIG_HOME", "/ignored")]);
        let l = user_locations(&e);
        let chrome = l.iter().find(|l| l.browser == "Google Chrome").unwrap();
        assert_eq!(
            chrome.hosts_dir,
            Path::new("/Users/u/Library/Application Support/Google/Chrome/NativeMessagingHosts")
        );
        let arc = l.iter().find(|l| l.browser == "Arc").unwrap();
        assert_eq!(
            arc.hosts_dir,
            Path::new("/Users/u/Library/Application Support/Arc/User Data/NativeMessagingHosts")
        );
        assert!(sandbox_warnings(&e).is_empty());
    }

    #[test]
    fn system_root_prefixes_system_paths() {
        let e = env(Platform::Linux, &[("HOME", "/h"), (SYSTEM_ROOT_VAR, "/tmp/root")]);
        assert_eq!(e.sys("/etc/chromium"), Path::new("/tmp/root/etc/chromium"));
    }

    #[test]
    fn windows_registry_keys() {
        let keys = registry_keys();
        assert!(keys
            .iter()
            .any(|(_, k, _)| k == r"Software\Google\Chrome\NativeMessagingHosts\dev.keepsake.host"));
        assert!(keys
            .iter()
            .any(|(_, k, _)| k
                == r"Software\BraveSoftware\Brave-Browser\NativeMessagingHosts\dev.keepsake.host"));
        let mozilla: Vec<_> = keys.iter().filter(|(_, _, f)| *f == Family::Mozilla).collect();
        assert_eq!(mozilla.len(), 1);
        assert_eq!(mozilla[0].1, r"Software\Mozilla\NativeMessagingHosts\dev.keepsake.host");
        assert_eq!(keys.len(), 6);
        let e = env(
            Platform::Windows,
            &[("USERPROFILE", "/u"), ("LOCALAPPDATA", "/u/AppData/Local"), ("ProgramData", "/ProgramData")],
        );
        let (c, m) =
            (windows_manifest(&e, false, Family::Chromium), windows_manifest(&e, false, Family::Mozilla));
        assert_ne!(c, m, "Chromium and Firefox read different manifest shapes: two files");
        assert!(m.unwrap().ends_with(Path::new("Keepsake").join("mozilla").join(MANIFEST_FILE)));
        assert!(user_locations(&e).is_empty() && system_locations(&e).is_empty());
    }

    #[test]
    fn mozilla_locations() {
        let e = env(Platform::Linux, &[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")]);
        let moz: Vec<_> = user_locations(&e).into_iter().filter(|l| l.family == Family::Mozilla).collect();
        let dirs: Vec<_> = moz.iter().map(|l| l.manifest()).collect();
        assert_eq!(
            dirs,
            [
                Path::new("/h/.mozilla/native-messaging-hosts/dev.keepsake.host.json"),
                Path::new("/h/.librewolf/native-messaging-hosts/dev.keepsake.host.json"),
                Path::new("/h/.waterfox/native-messaging-hosts/dev.keepsake.host.json"),
            ]
        );
        assert_eq!(moz[0].config_dir, Path::new("/h/.mozilla/firefox"));
        let sys: Vec<_> = system_locations(&e).into_iter().filter(|l| l.family == Family::Mozilla).collect();
        assert_eq!(sys[0].hosts_dir, Path::new("/usr/lib/mozilla/native-messaging-hosts"));
        assert!(sys[0].wanted);
        assert_eq!(sys[1].hosts_dir, Path::new("/usr/lib64/mozilla/native-messaging-hosts"));

        let e = env(Platform::Macos, &[("HOME", "/Users/u")]);
        let moz: Vec<_> = user_locations(&e).into_iter().filter(|l| l.family == Family::Mozilla).collect();
        assert_eq!(
            moz[0].hosts_dir,
            Path::new("/Users/u/Library/Application Support/Mozilla/NativeMessagingHosts")
        );
        let sys: Vec<_> = system_locations(&e).into_iter().filter(|l| l.family == Family::Mozilla).collect();
        assert_eq!(sys[0].hosts_dir, Path::new("/Library/Application Support/Mozilla/NativeMessagingHosts"));
        assert!(sys[0].wanted);
    }

    #[test]
    fn addon_ids() {
        for ok in
            [FIREFOX_ADDON_ID, "a@b", "x.y_z-1@example.org", "@x", "{12345678-abcd-ef01-2345-6789abcdef01}"]
        {
            assert!(valid_addon_id(ok), "{ok}");
        }
        for bad in ["", "nope", "a@b@c", "a+b@x", "x@", "sp ace@x", "{12345678-abcd}", EXTENSION_ID] {
            assert!(!valid_addon_id(bad), "{bad}");
        }
        assert!(!valid_addon_id(&format!("{}@x.org", "a".repeat(80))));
    }

    #[test]
    fn mozilla_manifest_checks_follow_firefox_rules() {
        let dir = tempfile::tempdir().unwrap();
        let bin = std::env::current_exe().unwrap();
        let file = dir.path().join(MANIFEST_FILE);
        let good = mozilla_manifest_bytes(bin.to_str().unwrap(), &[FIREFOX_ADDON_ID.to_owned()]);
        let v: Value = serde_json::from_slice(&good).unwrap();
        assert_eq!(v["allowed_extensions"], json!([FIREFOX_ADDON_ID]));
        assert!(v.get("allowed_origins").is_none());
        let (target, probs) = check_manifest(&file, &good, Platform::Linux, Family::Mozilla);
        assert!(probs.is_empty(), "{probs:?}");
        assert_eq!(target.as_deref(), Some(bin.as_path()));
        // A Chromium manifest in a Mozilla folder fails, and the other way round.
        let chromium = manifest_bytes(bin.to_str().unwrap(), &[EXTENSION_ID.to_owned()]);
        let probs = check_manifest(&file, &chromium, Platform::Linux, Family::Mozilla).1;
        assert_eq!(
            probs.iter().map(|p| (p.check, p.browser_error)).collect::<Vec<_>>(),
            [("allowed_extensions", FF_NOT_FOUND)]
        );
        let probs = check_manifest(&file, &good, Platform::Linux, Family::Chromium).1;
        assert_eq!(probs.iter().map(|p| p.check).collect::<Vec<_>>(), ["allowed_origins"]);
        let other = mozilla_manifest_bytes(bin.to_str().unwrap(), &["other@example.org".to_owned()]);
        let probs = check_manifest(&file, &other, Platform::Linux, Family::Mozilla).1;
        assert!(probs[0].detail.contains(FIREFOX_ADDON_ID), "{probs:?}");
        let bad = mozilla_manifest_bytes(bin.to_str().unwrap(), &["not an id".to_owned()]);
        assert_eq!(
            check_manifest(&file, &bad, Platform::Linux, Family::Mozilla).1[0].check,
            "allowed_extensions"
        );
        let wrong_file = dir.path().join("other.json");
        assert_eq!(
            check_manifest(&wrong_file, &good, Platform::Linux, Family::Mozilla).1[0].check,
            "file name"
        );
    }

    #[test]
    fn allowed_ids_come_from_our_manifests_only() {
        let dir = tempfile::tempdir().unwrap();
        let ff = dir.path().join("ff.json");
        let cr = dir.path().join("cr.json");
        let foreign = dir.path().join("foreign.json");
        std::fs::write(
            &ff,
            mozilla_manifest_bytes(
                "/x",
                &[FIREFOX_ADDON_ID.into(), "store@keepsake.dev".into(), "bad id".into()],
            ),
        )
        .unwrap();
        std::fs::write(
            &cr,
            manifest_bytes("/x", &[EXTENSION_ID.into(), "abcdefghijklmnopabcdefghijklmnop".into()]),
        )
        .unwrap();
        std::fs::write(
            &foreign,
            json!({"name": "other.host", "allowed_extensions": ["evil@example.org"]}).to_string(),
        )
        .unwrap();
        let files = vec![ff, cr, foreign, dir.path().join("missing.json")];
        assert_eq!(allowed_addon_ids(&files), [FIREFOX_ADDON_ID, "store@keepsake.dev"]);
        assert_eq!(allowed_caller_ids(&files), [EXTENSION_ID, "abcdefghijklmnopabcdefghijklmnop"]);
    }

    #[test]
    fn ids_and_names() {
        assert!(valid_extension_id(EXTENSION_ID));
        assert!(!valid_extension_id("ejaedcjldiggibmnammkkoekohjgefkq"));
        assert!(!valid_extension_id("short"));
        assert!(valid_host_name(HOST_NAME));
        for bad in ["Dev.keepsake.host", ".a", "a.", "a..b", "a-b", ""] {
            assert!(!valid_host_name(bad), "{bad}");
        }
        assert_eq!(origin(EXTENSION_ID), "chrome-extension://ejaedcjldiggibmnammkkoekohjgefkk/");
    }

    /// The manifest the binary writes has exactly the template's shape.
    #[test]
    fn written_manifest_matches_the_template() {
        let template = include_str!("../../host-manifest/dev.keepsake.host.json.in");
        let ids = vec![EXTENSION_ID.to_owned(), "abcdefghijklmnopabcdefghijklmnop".to_owned()];
        let origins = serde_json::to_string(&ids.iter().map(|i| origin(i)).collect::<Vec<_>>()).unwrap();
        let filled = template.replace("@PATH@", "/opt/keepsake/keepsake-host").replace("@ORIGINS@", &origins);
        let from_template: Value = serde_json::from_str(&filled).expect("template fills to JSON");
        let written: Value =
            serde_json::from_slice(&manifest_bytes("/opt/keepsake/keepsake-host", &ids)).unwrap();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&written), keys(&from_template), "same keys in the same order");
        assert_eq!(written, from_template);
        let bytes = manifest_bytes("/x", &ids);
        assert!(!bytes.starts_with(b"\xEF\xBB\xBF"));
        assert!(bytes.ends_with(b"}\n"));
    }

    #[test]
    fn manifest_checks_follow_chromium_rules() {
        let dir = tempfile::tempdir().unwrap();
        let bin = std::env::current_exe().unwrap();
        let file = dir.path().join(MANIFEST_FILE);
        let good = manifest_bytes(bin.to_str().unwrap(), &[EXTENSION_ID.to_owned()]);
        let (target, probs) = check_manifest(&file, &good, Platform::Linux, Family::Chromium);
        assert!(probs.is_empty(), "{probs:?}");
        assert_eq!(target.as_deref(), Some(bin.as_path()));

        let checks = |bytes: &[u8]| -> Vec<(&'static str, &'static str)> {
            check_manifest(&file, bytes, Platform::Linux, Family::Chromium)
                .1
                .iter()
                .map(|p| (p.check, p.browser_error))
                .collect()
        };
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut v: Value = serde_json::from_slice(&good).unwrap();
            f(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        assert_eq!(checks(&edit(&|v| v["name"] = json!("other.host"))), [("file name", NOT_FOUND)]);
        assert_eq!(checks(&edit(&|v| v["name"] = json!("Dev.Keepsake"))), [("name", NOT_FOUND)]);
        assert_eq!(checks(&edit(&|v| v["description"] = json!(""))), [("description", NOT_FOUND)]);
        assert_eq!(checks(&edit(&|v| v["type"] = json!("pipe"))), [("type", NOT_FOUND)]);
        assert_eq!(checks(&edit(&|v| v["path"] = json!("keepsake-host"))), [("path", NOT_FOUND)]);
        assert_eq!(
            checks(&edit(&|v| v["path"] = json!("/nonexistent/keepsake-host"))),
            [("path", NOT_FOUND)]
        );
        assert_eq!(checks(&edit(&|v| v["path"] = json!("/"))), [("path", FAILED_TO_START)]);
        assert_eq!(
            checks(&edit(&|v| v["allowed_origins"] = json!([format!("chrome-extension://{EXTENSION_ID}")]))),
            [("allowed_origins", NOT_FOUND)]
        );
        assert_eq!(
            checks(&edit(&|v| v["allowed_origins"] = json!(["chrome-extension://*/"]))),
            [("allowed_origins", NOT_FOUND)]
        );
        assert_eq!(
            checks(&edit(
                &|v| v["allowed_origins"] = json!(["chrome-extension://abcdefghijklmnopabcdefghijklmnop/"])
            )),
            [("allowed_origins", FORBIDDEN)]
        );
        assert_eq!(checks(b"{not json"), [("json", NOT_FOUND)]);
        assert_eq!(checks(b"[]"), [("json", NOT_FOUND)]);
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend_from_slice(&good);
        assert_eq!(checks(&bom).len(), 1);
        assert_eq!(checks(&bom)[0].0, "encoding");
        let utf16: Vec<u8> = [0xFF, 0xFE].into_iter().chain(good.iter().flat_map(|b| [*b, 0])).collect();
        assert_eq!(checks(&utf16), [("encoding", NOT_FOUND)]);
        // A relative path is fine on Windows (relative to the manifest's folder).
        let rel = edit(&|v| v["path"] = json!(bin.file_name().unwrap().to_str().unwrap()));
        let in_bin_dir = bin.parent().unwrap().join(MANIFEST_FILE);
        assert!(check_manifest(&in_bin_dir, &rel, Platform::Windows, Family::Chromium).1.is_empty());
    }
}
