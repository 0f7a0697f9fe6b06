//! Who launched the host (reliability.md §8 "wrong caller", platform.md §4).
//!
//! Chromium passes the caller's origin `chrome-extension://<id>/` as argv[1] (Windows adds
//! `--parent-window=<HWND>`, and native-initiated connections add two more arguments; trailing
//! arguments are ignored). Firefox passes the manifest's absolute path, then the add-on ID.
//! Anything else is the CLI. The allowed IDs (Chromium extension IDs and Firefox add-on IDs) are
//! supplied by the caller (the binary reads them from the registrations it made); this module is
//! pure.

/// Prefix of a Chromium extension origin.
pub const CHROME_ORIGIN_PREFIX: &str = "chrome-extension://";

/// How the process was started, judged from argv alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// argv[1] starts with `chrome-extension://`. `id` is the extension ID when the origin is
    /// well formed (exactly `chrome-extension://<32 letters a–p>/`), else `None`.
    Chrome { origin: String, id: Option<String> },
    /// argv[1] is an absolute path ending in `.json` (Firefox's manifest); argv[2] the add-on ID.
    Firefox { manifest: String, addon_id: Option<String> },
    /// Not a browser launch: the CLI.
    Cli,
}

/// A Chromium extension ID: exactly 32 letters `a`–`p`.
pub fn valid_extension_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

/// The ID in an exact origin `chrome-extension://<id>/`, or `None`.
pub fn origin_extension_id(origin: &str) -> Option<&str> {
    origin
        .strip_prefix(CHROME_ORIGIN_PREFIX)
        .and_then(|r| r.strip_suffix('/'))
        .filter(|id| valid_extension_id(id))
}

fn is_absolute_json_path(a: &str) -> bool {
    if !a.ends_with(".json") {
        return false;
    }
    // Absolute on this platform, or Windows-style `C:\…` / `\\server\…` (Firefox on Windows).
    std::path::Path::new(a).is_absolute()
        || a.starts_with("\\\\")
        || (a.len() > 3 && a.as_bytes()[0].is_ascii_alphabetic() && &a.as_bytes()[1..3] == b":\\")
}

/// Classify argv (argv[0] is the program). Non-UTF-8 arguments are never a browser launch.
pub fn classify<S: AsRef<str>>(args: &[Option<S>]) -> Launch {
    let Some(Some(first)) = args.get(1) else { return Launch::Cli };
    let first = first.as_ref();
    if first.starts_with(CHROME_ORIGIN_PREFIX) {
        return Launch::Chrome {
            origin: first.to_owned(),
            id: origin_extension_id(first).map(str::to_owned),
        };
    }
    if is_absolute_json_path(first) {
        let addon_id = match args.get(2) {
            Some(Some(a)) if !a.as_ref().is_empty() && !a.as_ref().starts_with("--") => {
                Some(a.as_ref().to_owned())
            }
            _ => None,
        };
        return Launch::Firefox { manifest: first.to_owned(), addon_id };
    }
    Launch::Cli
}

/// Why a browser launch is refused, as the sentence the `forbidden_origin` reply carries; `None`
/// when the caller may be served. `chrome` holds the Chromium extension IDs the host accepts,
/// `firefox` the Firefox add-on IDs (Firefox passes the caller's ID as argv[2]; it enforces the
/// manifest's `allowed_extensions` itself, and the host checks again, as for Chromium, so a
/// manifest someone else wrote for this binary serves only the add-ons Keepsake registered).
pub fn refusal(launch: &Launch, chrome: &[String], firefox: &[String]) -> Option<String> {
    match launch {
        Launch::Cli => None,
        Launch::Chrome { origin, id: None } => Some(format!(
            "caller origin {origin:?} is not of the form chrome-extension://<32 letters a-p>/; this host serves \
             nothing to it"
        )),
        Launch::Chrome { id: Some(id), .. } if chrome.iter().any(|a| a == id) => None,
        Launch::Chrome { id: Some(id), .. } => Some(format!(
            "extension {id} is not allowed to use this host (allowed: {}); if this is a Keepsake build, register \
             it with `keepsake-host install --extension-id {id}`",
            chrome.join(", ")
        )),
        Launch::Firefox { addon_id: Some(id), .. } if firefox.iter().any(|a| a == id) => None,
        Launch::Firefox { addon_id: Some(id), .. } => Some(format!(
            "Firefox add-on {id:?} is not allowed to use this host (allowed: {}); if this is a Keepsake build you \
             sign yourself under that ID, register it with `keepsake-host install --extension-id {id}` (an ID \
             nobody holds on addons.mozilla.org can be signed by anyone)",
            firefox.join(", ")
        )),
        Launch::Firefox { manifest, addon_id: None } => {
            Some(format!("launched with manifest {manifest:?} but without an add-on ID; this host serves nothing"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "ejaedcjldiggibmnammkkoekohjgefkk";

    fn argv(a: &[&str]) -> Vec<Option<String>> {
        std::iter::once("keepsake-host").chain(a.iter().copied()).map(|s| Some(s.to_owned())).collect()
    }

    #[test]
    fn chrome_origins_are_parsed_exactly() {
        let ok = format!("chrome-extension://{ID}/");
        assert_eq!(classify(&argv(&[&ok])), Launch::Chrome { origin: ok.clone(), id: Some(ID.into()) });
        assert_eq!(
            classify(&argv(&[&ok, "--parent-window=0"])),
            Launch::Chrome { origin: ok.clone(), id: Some(ID.into()) }
        );
        for bad in [
            format!("chrome-extension://{ID}"),
            format!("chrome-extension://{ID}/x"),
            format!("chrome-extension://{}/", ID.to_uppercase()),
            format!("chrome-extension://{ID}q/"),
            "chrome-extension://ejaedcjldiggibmnammkkoekohjgefkz/".to_owned(),
            "chrome-extension:///".to_owned(),
            "chrome-extension://".to_owned(),
        ] {
            assert_eq!(classify(&argv(&[&bad])), Launch::Chrome { origin: bad.clone(), id: None }, "{bad}");
        }
    }

    #[test]
    fn firefox_and_cli_launches() {
        let l =
            classify(&argv(&["/home/u/.mozilla/native-messaging-hosts/dev.keepsake.host.json", "k@x.org"]));
        assert!(matches!(l, Launch::Firefox { addon_id: Some(ref a), .. } if a == "k@x.org"));
        let l = classify(&argv(&["C:\\Users\\u\\dev.keepsake.host.json", "k@x.org"]));
        assert!(matches!(l, Launch::Firefox { addon_id: Some(_), .. }));
        let l = classify(&argv(&["/x/dev.keepsake.host.json"]));
        assert!(matches!(l, Launch::Firefox { addon_id: None, .. }));
        for cli in [&["serve"][..], &[], &["import", "dump.json"], &["--db", "/x.db", "inspect"]] {
            assert_eq!(classify(&argv(cli)), Launch::Cli, "{cli:?}");
        }
        assert_eq!(classify::<String>(&[Some("k".into()), None]), Launch::Cli);
    }

    #[test]
    fn only_allowed_well_formed_origins_are_served() {
        let allowed = vec![ID.to_owned()];
        let l = |a: &str| classify(&argv(&[a, "--parent-window=0"]));
        assert_eq!(refusal(&l(&format!("chrome-extension://{ID}/")), &allowed, &[]), None);
        let other = l("chrome-extension://abcdefghijklmnopabcdefghijklmnop/");
        let msg = refusal(&other, &allowed, &[]).unwrap();
        assert!(msg.contains("--extension-id abcdefghijklmnopabcdefghijklmnop"), "{msg}");
        assert!(refusal(&other, &["abcdefghijklmnopabcdefghijklmnop".to_owned()], &[]).is_none());
        assert!(refusal(&l(&format!("chrome-extension://{ID}")), &allowed, &[]).is_some());
        assert!(refusal(&l("chrome-extension://evil/"), &allowed, &[]).is_some());
        assert!(refusal(&Launch::Cli, &[], &[]).is_none());
    }

    #[test]
    fn only_allowed_firefox_addons_are_served() {
        let ours = vec!["keepsake@keepsake.dev".to_owned()];
        let ff =
            |id: &str| classify(&argv(&["/h/.mozilla/native-messaging-hosts/dev.keepsake.host.json", id]));
        assert_eq!(refusal(&ff("keepsake@keepsake.dev"), &[], &ours), None);
        let msg = refusal(&ff("evil@example.org"), &[ID.to_owned()], &ours).unwrap();
        assert!(msg.contains("--extension-id evil@example.org"), "{msg}");
        assert!(msg.contains("keepsake@keepsake.dev"), "{msg}");
        // A Chromium ID in the Chromium list does not admit a Firefox caller of that name.
        assert!(refusal(&ff(ID), &[ID.to_owned()], &ours).is_some());
        assert!(refusal(&ff("evil@example.org"), &[], &["evil@example.org".to_owned()]).is_none());
        let no_id = classify(&argv(&["/h/.mozilla/native-messaging-hosts/dev.keepsake.host.json"]));
        assert!(refusal(&no_id, &[], &ours).is_some());
    }
}
