//! Convention tests: the documents and the code agree, and the layering holds.

use std::fs;
use std::path::Path;

use keepsake_host::protocol::ErrorCode;
use keepsake_host::server::dispatch::op_names;

fn read(p: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Operation names documented in PROTOCOL.md's tables (rows starting with "| `area.op`").
fn documented_ops() -> Vec<String> {
    read("PROTOCOL.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|n| n.contains('.') && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_dispatched_op_is_documented_and_vice_versa() {
    let documented = documented_ops();
    let served: Vec<String> = op_names().into_iter().map(str::to_owned).collect();
    for op in &served {
        assert!(documented.contains(op), "{op} is served but not documented in PROTOCOL.md");
    }
    for op in &documented {
        assert!(served.contains(op), "{op} is documented in PROTOCOL.md but not served");
    }
}

#[test]
fn every_error_code_is_in_the_protocol_table() {
    let doc = read("PROTOCOL.md");
    for c in ErrorCode::ALL {
        assert!(doc.contains(&format!("| `{}` |", c.as_str())), "{} missing from PROTOCOL.md", c.as_str());
    }
}

/// The settings an import may write (`domain::settings::KNOWN_KEYS`, issue 32) are the ones the
/// extension keeps: every key of its lists (`OPTION_KEYS`, `TURN_SETTING_KEYS`, `BACKUP_KEYS`,
/// `AGENT_SESSIONS_KEY`) and the composer draft is known, and every known key is one the
/// extension names. A setting added to the extension without the host knowing it would be dropped
/// by every import.
#[test]
fn the_settings_an_import_writes_are_the_extensions() {
    use keepsake_host::domain::settings::KNOWN_KEYS;
    let quoted =
        |text: &str| -> Vec<String> { text.split('\'').skip(1).step_by(2).map(str::to_owned).collect() };
    let list = |file: &str, name: &str| -> Vec<String> {
        let js = read(file);
        let at = js.find(&format!("{name} = ")).unwrap_or_else(|| panic!("{name} not in {file}"));
        let rest = &js[at..];
        let end = rest.find(";").unwrap();
        quoted(&rest[..end])
    };
    let mut ext: Vec<String> = Vec::new();
    ext.extend(list("extension/options/providers.js", "OPTION_KEYS"));
    ext.extend(list("extension/background/settings-memory.js", "TURN_SETTING_KEYS"));
    ext.extend(list("extension/options/backups.js", "BACKUP_KEYS"));
    ext.extend(list("extension/background/agent-sessions.js", "AGENT_SESSIONS_KEY"));
    assert!(
        read("extension/sidepanel/sidepanel.js").contains("map: { composerDraft:"),
        "the draft's key moved"
    );
    ext.push("composerDraft".into());
    assert!(ext.len() > 10, "{ext:?}");
    for k in &ext {
        assert!(KNOWN_KEYS.contains(&k.as_str()), "the extension keeps {k:?}; add it to KNOWN_KEYS");
    }
    for k in KNOWN_KEYS {
        assert!(ext.iter().any(|e| e == k), "KNOWN_KEYS has {k:?}, which the extension does not keep");
    }
}

/// The extension knows every host code: a constant and a user-facing explanation.
#[test]
fn every_error_code_is_known_to_the_extension() {
    let js = read("extension/lib/protocol.js");
    for c in ErrorCode::ALL {
        let code = c.as_str();
        assert!(
            js.contains(&format!(": '{code}',")),
            "{code} missing from HostErrorCode in extension/lib/protocol.js"
        );
        assert!(
            js.contains(&format!("  {code}: {{")),
            "{code} has no explanation in extension/lib/protocol.js"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn pure_layers_do_no_sql_and_no_stdio() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for layer in ["domain", "imaging", "protocol"] {
        let mut files = Vec::new();
        rust_files(&root.join(layer), &mut files);
        assert!(!files.is_empty());
        for f in files {
            let text = fs::read_to_string(&f).unwrap();
            for banned in [
                "rusqlite",
                "crate::store",
                "crate::server",
                "crate::cli",
                "std::io::stdin",
                "std::io::stdout",
                "println!",
                "print!(",
            ] {
                assert!(
                    !text.contains(banned),
                    "{} uses {banned}: pure layers stay free of SQL and stdio",
                    f.display()
                );
            }
        }
    }
}

#[test]
fn sql_lives_only_in_the_store() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    for f in files {
        if f.starts_with(root.join("store")) {
            continue;
        }
        let text = fs::read_to_string(&f).unwrap();
        assert!(!text.contains("rusqlite"), "{} uses rusqlite: SQL belongs in src/store", f.display());
    }
}

#[test]
fn migrations_are_numbered_and_all_registered() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/migrations");
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for (i, n) in names.iter().enumerate() {
        assert!(n.starts_with(&format!("{:04}_", i + 1)), "migration {n} out of sequence");
    }
    assert_eq!(names.len() as u32, keepsake_host::store::migrate::LATEST);
}

#[test]
fn changelog_and_docs_exist() {
    for f in ["README.md", "ARCHITECTURE.md", "CHANGELOG.md", "PROTOCOL.md"] {
        assert!(read(f).len() > 200, "{f} is missing or empty");
    }
}

/// The Firefox add-on ID is chosen in one place (`browsers::FIREFOX_ADDON_ID`, platform.md §13):
/// the Firefox build carries it, the host trusts it and nothing else built in (the manifests
/// `install` and the Debian package write list it: tests/it/install/registration.rs), and the
/// documents say what protects a Firefox user.
#[test]
fn the_firefox_add_on_id_is_chosen_in_one_place() {
    use keepsake_host::cli::browsers::{allowed_addon_ids, FIREFOX_ADDON_ID};
    let build = read("scripts/firefox.mjs");
    assert!(
        build.contains(&format!("export const GECKO_ID = '{FIREFOX_ADDON_ID}';")),
        "scripts/firefox.mjs GECKO_ID is not {FIREFOX_ADDON_ID}"
    );
    // with no manifest registered, the host trusts exactly this ID (what `install` and the package
    // write is checked against it in tests/it/install/registration.rs)
    assert_eq!(allowed_addon_ids(&[]), [FIREFOX_ADDON_ID], "the built-in trust");
    let platform = read("docs/platform.md");
    let section = platform.split("\n## ").find(|s| s.starts_with("13. ")).expect("docs/platform.md §13");
    for (doc, text) in [("docs/platform.md §13", section), ("README.md", &read("README.md"))] {
        for needle in
            [FIREFOX_ADDON_ID, "addons.mozilla.org", "--extension-id", "xpinstall.signatures.required"]
        {
            assert!(text.contains(needle), "{doc} does not say {needle}");
        }
    }
}

/// CHANGELOG.md has one section per version ("## [0.1.0] — …"), and in each a kind of change
/// ("### Added", "### Fixed", …) at most once, one line per change.
#[test]
fn changelog_has_one_section_per_version() {
    let log = read("CHANGELOG.md");
    let mut versions: Vec<&str> = Vec::new();
    let mut kinds: Vec<&str> = Vec::new();
    for l in log.lines() {
        if let Some(v) = l.strip_prefix("## ") {
            assert!(
                v.starts_with('['),
                "a version heading reads \"## [x.y.z] — date\" or \"## [Unreleased]\": {l}"
            );
            assert!(!versions.contains(&v), "version {v} appears twice");
            versions.push(v);
            kinds.clear();
        } else if let Some(k) = l.strip_prefix("### ") {
            assert!(!versions.is_empty(), "{l} before any version heading");
            assert!(!kinds.contains(&k), "\"{l}\" twice under {}", versions.last().unwrap());
            kinds.push(k);
        }
    }
    assert!(!versions.is_empty(), "CHANGELOG.md has no version section");
}

/// Every file of the repository as git sees it (tracked, plus new files not ignored), repo-relative.
fn repository_files() -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|f| root.join(f).is_file())
        .map(str::to_owned)
        .collect()
}

/// The numbered sections of a Markdown document: headings ("## 7. Targets" → "7", "### 4.3
/// Attaching" → "4.3") and the numbered list items of a numbered top-level section ("12. " under
/// "## 11. Resolutions" → "11.12").
fn numbered_sections(doc: &str) -> Vec<String> {
    let number = |w: Option<&str>| -> Option<String> {
        let n = w?.trim_end_matches('.');
        (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.')).then(|| n.to_owned())
    };
    let mut out = Vec::new();
    let mut top: Option<String> = None;
    for l in doc.lines() {
        if l.starts_with('#') {
            let n = number(l.trim_start_matches('#').split_whitespace().next());
            if l.starts_with("## ") {
                top = n.clone().filter(|n| !n.contains('.'));
            }
            out.extend(n);
        } else if let (Some(t), Some(item)) = (&top, l.split_once(". ").map(|(a, _)| a)) {
            if !item.is_empty() && item.chars().all(|c| c.is_ascii_digit()) {
                out.push(format!("{t}.{item}"));
            }
        }
    }
    out
}

/// A token that names a file by its path from the top of the repository: `src/store/open.rs`,
/// `extension/lib/caps.js`, `tests/e2e/run.sh` (not a glob, not a folder).
fn cites_repository_path(tok: &str) -> bool {
    const TOP: &[&str] =
        &["src/", "extension/", "tests/", "bench/", "fuzz/", "docs/", "host-manifest/", "examples/"];
    const EXT: &[&str] =
        &[".rs", ".js", ".mjs", ".md", ".sql", ".sh", ".html", ".css", ".py", ".toml", ".json", ".ps1"];
    TOP.iter().any(|t| tok.starts_with(t))
        && EXT.iter().any(|e| tok.ends_with(e))
        && !tok.contains('*')
        && !tok.contains("/..")
}

/// Every document a source file, script or document cites is in the repository: a path or a file
/// name ending in `.md` names a file of the repository, a doc cited by section
/// ("storage-model §4.3", "platform.md §9") exists under docs/ or at the top and has that numbered
/// section, and nothing points outside the repository. Example file names that tests and docs
/// use as data (export names) are listed in `DATA_NAMES`.
#[test]
fn every_cited_document_is_in_the_repository() {
    const DATA_NAMES: &[&str] =
        &["f.md", "a-b.md", "../a/b.md", "keepsake-x-2026-01-02.md", "keepsake-My-chat-2026-01-05.md"];
    const TEXT: &[&str] =
        &["rs", "js", "mjs", "md", "sh", "ps1", "toml", "html", "css", "sql", "py", "json", "txt"];
    // the team's notes the documents under docs/ started from (spelled in two pieces so that
    // `grep -rn` for it finds nothing in the repository)
    const OUTSIDE: &str = concat!("shared", "/spec");
    let files = repository_files();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let basenames: std::collections::HashSet<&str> =
        files.iter().map(|f| f.rsplit('/').next().unwrap()).collect();
    let exists = |from: &str, cited: &str| -> bool {
        if !cited.contains('/') {
            return basenames.contains(cited);
        }
        let dir = Path::new(from).parent().unwrap_or(Path::new(""));
        [dir.join(cited), Path::new(cited).to_path_buf()].iter().any(|p| {
            // normalise "a/../b" without touching the file system, refusing to climb above the root
            let mut parts: Vec<String> = Vec::new();
            for c in p.components() {
                match c {
                    std::path::Component::ParentDir if parts.pop().is_none() => return false,
                    std::path::Component::ParentDir => {}
                    std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
                    _ => {}
                }
            }
            files.contains(&parts.join("/"))
        })
    };
    // a doc cited by section: "storage-model" or "platform.md" → docs/<name>.md, else <name>.md at the top
    let doc_for = |name: &str| -> Option<String> {
        let file = if name.ends_with(".md") { name.to_owned() } else { format!("{name}.md") };
        let file = file.rsplit('/').next().unwrap().to_owned();
        [format!("docs/{file}"), file].into_iter().find(|f| files.contains(f))
    };
    let mut problems = Vec::new();
    let mut sections_checked = 0;
    for f in files.iter().filter(|f| TEXT.iter().any(|e| f.ends_with(&format!(".{e}")))) {
        if f.starts_with("tests/fixtures/") || f.ends_with("package-lock.json") || f.contains("/vendor/") {
            continue;
        }
        let Ok(text) = fs::read_to_string(root.join(f)) else { continue };
        for (i, line) in text.lines().enumerate() {
            let at = format!("{f}:{}", i + 1);
            if line.contains(OUTSIDE) {
                problems.push(format!("{at}: cites {OUTSIDE}, which is outside the repository"));
            }
            // every path into the repository's folders names a file that is there
            let tokens = line.split(|c: char| !(c.is_ascii_alphanumeric() || "._/~-".contains(c)));
            for tok in tokens.clone().filter(|t| cites_repository_path(t)) {
                // the benchmark's test build copies bench/ext/ into the extension as bench/
                let in_test_build = tok.strip_prefix("bench/").map(|t| format!("bench/ext/{t}"));
                if !files.iter().any(|f| f == tok || Some(f) == in_test_build.as_ref()) {
                    problems.push(format!("{at}: names {tok}, which is not in the repository"));
                }
            }
            // every token that names a Markdown file
            for tok in tokens.filter(|t| t.ends_with(".md") && t.len() > 3) {
                let tok = tok.trim_start_matches("./");
                if DATA_NAMES.contains(&tok) || tok.contains('*') {
                    continue;
                }
                if !exists(f, tok) {
                    problems.push(format!("{at}: cites {tok}, which is not in the repository"));
                }
            }
            // a document named before "§N" or "§N.M": it exists and has that numbered section
            let words: Vec<&str> = line.split_whitespace().collect();
            for w in words.windows(2) {
                // the file name the word ends with: "test('platform.md" → "platform.md"
                let name = w[0].trim_end_matches(|c: char| "`)\"'*]".contains(c));
                let keep = |c: char| c.is_ascii_alphanumeric() || "._/-".contains(c);
                let start =
                    name.char_indices().rfind(|&(_, c)| !keep(c)).map_or(0, |(i, c)| i + c.len_utf8());
                let name = &name[start..];
                let Some(sec) = w[1].strip_prefix('§') else { continue };
                let named = name.ends_with(".md")
                    || (name.contains('-') && name.chars().all(|c| c.is_ascii_lowercase() || c == '-'));
                if !named {
                    continue; // "§2.4" on its own: the file's own context names the document
                }
                let sec: String = sec.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                let sec = sec.trim_end_matches('.');
                let Some(doc) = doc_for(name) else {
                    problems.push(format!(
                        "{at}: cites {name} §{sec}, and no such document is in the repository"
                    ));
                    continue;
                };
                let have = numbered_sections(&fs::read_to_string(root.join(&doc)).unwrap());
                if !sec.is_empty() && !have.iter().any(|h| h == sec) {
                    problems.push(format!("{at}: cites {name} §{sec}, and {doc} has no section {sec}"));
                }
                sections_checked += 1;
            }
        }
    }
    assert!(sections_checked > 100, "only {sections_checked} section citations found: is the scan broken?");
    assert!(problems.is_empty(), "{} citation problems:\n{}", problems.len(), problems.join("\n"));
}

/// Every extension source file (JavaScript and HTML), skipping tests and fixtures.
fn extension_sources() -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if name != "fixtures" && name != "node_modules" {
                    walk(&p, out);
                }
            } else if (name.ends_with(".js") || name.ends_with(".mjs") || name.ends_with(".html"))
                && !name.contains(".test.")
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("extension"), &mut out);
    out
}

#[test]
fn only_the_port_module_calls_connect_native() {
    let callers: Vec<String> = extension_sources()
        .into_iter()
        .filter(|p| fs::read_to_string(p).unwrap().contains("connectNative"))
        .map(|p| p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string())
        .collect();
    assert_eq!(callers, vec!["extension/lib/native-port.js".to_owned()], "connectNative callers");
}

#[test]
fn the_extension_never_parses_html_strings() {
    // model output and user text reach the page only as text nodes (lib/markdown.js builds nodes).
    // extension/vendor/ holds libraries as published, each used by one named module:
    // Mozilla's Readability runs only inside a tab, injected by background/page-attach.js on a copy
    // of that page's document; PDF.js runs only in the offscreen document offscreen/pdf.js, which
    // reads PDF bytes (no web page's markup). No panel or options page loads either.
    // highlight.js and KaTeX are loaded (on demand) only by lib/highlight.js and lib/math.js, which
    // turn their output into nodes through allow-lists (highlight.js's HTML string through a strict
    // converter, KaTeX's node tree through toNode), never an HTML parser.
    let vendor = Path::new(env!("CARGO_MANIFEST_DIR")).join("extension/vendor");
    let users = [
        ("vendor/readability", "background/page-attach.js"),
        ("vendor/pdfjs", "offscreen/pdf.js"),
        ("vendor/highlight", "lib/highlight.js"),
        ("vendor/katex", "lib/math.js"),
    ];
    for p in extension_sources() {
        if p.starts_with(&vendor) {
            continue;
        }
        let text = fs::read_to_string(&p).unwrap();
        // the repository's vendor/ folder (the pins and the copy script) is not extension/vendor/
        let mut named = text.matches("vendor/").count()
            - text.matches("vendor/package.json").count()
            - text.matches("vendor/copy.mjs").count();
        for (folder, user) in users {
            let n = text.matches(folder).count();
            assert!(
                n == 0 || p.ends_with(user),
                "{} names extension/{folder}: only {user} uses it",
                p.display()
            );
            named -= n;
        }
        assert_eq!(named, 0, "{} names a vendored folder no rule admits", p.display());
    }
    for p in extension_sources().into_iter().filter(|p| !p.starts_with(&vendor)) {
        let text = fs::read_to_string(&p).unwrap();
        for banned in
            ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"]
        {
            assert!(!text.contains(banned), "{} uses {banned}", p.display());
        }
    }
}

#[test]
fn every_link_the_extension_draws_goes_through_the_one_link_rule() {
    // issue 30: an address from a page, a reply or an imported file becomes an `href` only through
    // extension/lib/links.js `setLink` (h() and renderMarkdown call it). Any other way of setting one
    // — `setAttribute('href', …)` / `setAttributeNS(…, 'href', …)` in any case, `.href = …`,
    // `['href'] = …` — fails here, except the two lines named below.
    let allowed: [(&str, &str, &str); 2] = [
        (
            "lib/links.js",
            "el.setAttribute('href', href);",
            "the rule itself: `href` is what safeHref returned",
        ),
        (
            "lib/math.js",
            "link.setAttribute('href', STYLESHEET);",
            "the packaged KaTeX stylesheet's <link>, made from import.meta.url, never from data",
        ),
    ];
    let ext = Path::new(env!("CARGO_MANIFEST_DIR")).join("extension");
    let vendor = ext.join("vendor");
    let mut seen = vec![0usize; allowed.len()];
    let mut bad = Vec::new();
    for p in extension_sources() {
        let name = p.to_string_lossy();
        if p.starts_with(&vendor) || !(name.ends_with(".js") || name.ends_with(".mjs")) {
            continue;
        }
        let rel = p.strip_prefix(&ext).unwrap().to_string_lossy().replace('\\', "/");
        for (n, line) in fs::read_to_string(&p).unwrap().lines().enumerate() {
            let code = line.trim();
            if code.starts_with("//") || code.starts_with("/*") || code.starts_with('*') {
                continue;
            }
            let flat: String = code.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase();
            let assigns = |needle: &str| {
                flat.match_indices(needle).any(|(i, _)| !flat[i + needle.len()..].starts_with('='))
            };
            let sets = (flat.contains("setattribute") && flat.contains("href"))
                || assigns(".href=")
                || assigns("['href']=")
                || assigns("[\"href\"]=")
                || assigns("[`href`]=");
            if !sets {
                continue;
            }
            match allowed.iter().position(|(file, text, _)| rel == *file && code == *text) {
                Some(i) => seen[i] += 1,
                None => bad.push(format!("extension/{rel}:{}: {code}", n + 1)),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "an href set outside lib/links.js setLink (use h('a', {{href}}) or setLink):\n{}",
        bad.join("\n")
    );
    for (i, (file, text, why)) in allowed.iter().enumerate() {
        assert_eq!(seen[i], 1, "extension/{file} should hold `{text}` once ({why})");
    }
}

/// The top-level argument names of one `{…}` shape from a PROTOCOL.md Args cell (`a?: t`,
/// `b`, `c \| d` → a, b, c, d; nested shapes are skipped).
fn shape_names(shape: &str) -> Vec<String> {
    let inner = shape.trim().strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or("");
    let (mut pieces, mut cur, mut depth, mut quoted) = (Vec::new(), String::new(), 0i32, false);
    for c in inner.chars() {
        match c {
            '"' => quoted = !quoted,
            '{' | '[' | '(' if !quoted => depth += 1,
            '}' | ']' | ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                pieces.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    pieces.push(cur);
    let mut names = Vec::new();
    for piece in pieces {
        let key = piece.split(':').next().unwrap_or("");
        for part in key.split('|') {
            let name = part.trim().trim_end_matches('?').trim();
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// PROTOCOL.md §7: op → (write, argument names) for every row naming an `area.op`.
fn documented_contract() -> std::collections::BTreeMap<String, (bool, std::collections::BTreeSet<String>)> {
    let doc = read("PROTOCOL.md");
    let start = doc.find("\n## 7.").expect("PROTOCOL.md has §7");
    let end = doc[start..].find("\n## 8.").map_or(doc.len(), |e| start + e);
    let mut out = std::collections::BTreeMap::new();
    for line in doc[start..end].lines().filter(|l| l.starts_with("| `")) {
        let line = line.replace("\\|", "\u{1}");
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (op_cell, args_cell) = (cells[1], cells[2]);
        let op = op_cell.split('`').nth(1).unwrap_or("");
        if !op.contains('.') {
            continue; // the request-body tables of §7 list kinds, not operations
        }
        let write = op_cell.ends_with(" W");
        let mut names = std::collections::BTreeSet::new();
        for (i, span) in args_cell.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with('{') {
                names.extend(shape_names(&span.replace('\u{1}', "|")));
            }
        }
        if let Some((w, prev)) = out.insert(op.to_owned(), (write, names.clone())) {
            assert_eq!((w, &prev), (write, &names), "{op}: two PROTOCOL.md rows disagree");
        }
    }
    out
}

/// extension/lib/protocol.js: `OP_ARGS` (op → argument names) and `WRITE_OPS`.
fn extension_contract() -> std::collections::BTreeMap<String, (bool, std::collections::BTreeSet<String>)> {
    let js = read("extension/lib/protocol.js");
    let block = |head: &str| -> String {
        let s = js.find(head).unwrap_or_else(|| panic!("protocol.js has `{head}`"));
        let end = if head.ends_with('[') { "\n]);" } else { "\n});" };
        let e = s + js[s..].find(end).expect("block end");
        js[s + head.len()..e].to_owned()
    };
    let quoted =
        |line: &str| -> Vec<String> { line.split('\'').skip(1).step_by(2).map(str::to_owned).collect() };
    let writes: Vec<String> =
        block("export const WRITE_OPS = Object.freeze([").lines().flat_map(quoted).collect();
    let mut out = std::collections::BTreeMap::new();
    for line in block("export const OP_ARGS = Object.freeze({").lines() {
        let mut q = quoted(line);
        if q.is_empty() {
            continue;
        }
        let op = q.remove(0);
        out.insert(op.clone(), (writes.contains(&op), q.into_iter().collect()));
    }
    out
}

#[test]
fn protocol_md_the_extension_and_the_host_schema_agree_on_every_operation_and_argument() {
    let schema = keepsake_host::server::ops::schema_document();
    let mut host = std::collections::BTreeMap::new();
    for op in schema["ops"].as_array().expect("ops") {
        let name = op["name"].as_str().expect("name").to_owned();
        let write = op["kind"] == "write";
        let mut args: std::collections::BTreeSet<String> =
            op["args"]["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default();
        // a write's clientRequestId is what "W" (PROTOCOL.md) and WRITE_OPS (protocol.js) say
        assert_eq!(args.remove("clientRequestId"), write, "{name}: clientRequestId iff a write");
        host.insert(name, (write, args));
    }
    assert_eq!(
        host.keys().collect::<Vec<_>>(),
        op_names()
            .iter()
            .map(|s| s.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .iter()
            .collect::<Vec<_>>(),
        "the schema lists every served op"
    );
    for (what, other) in
        [("PROTOCOL.md §7", documented_contract()), ("extension/lib/protocol.js", extension_contract())]
    {
        for (op, (write, args)) in &host {
            let Some((w, a)) = other.get(op) else { panic!("{op} is served but missing from {what}") };
            assert_eq!(w, write, "{op}: read/write differs between the host schema and {what}");
            assert_eq!(a, args, "{op}: arguments differ between the host schema (right) and {what} (left)");
        }
        for op in other.keys() {
            assert!(host.contains_key(op), "{op} is in {what} but not in the host schema");
        }
    }
}

use std::collections::{BTreeMap, BTreeSet};

/// The module a file under `src/store` is: `store`, `store::sessions`, `store::salvage::marker`.
fn store_module_of(store: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(store).unwrap().with_extension("");
    let mut m = vec!["store".to_owned()];
    m.extend(rel.iter().map(|c| c.to_string_lossy().into_owned()));
    if m.last().is_some_and(|l| l == "mod") {
        m.pop();
    }
    m
}

/// Rust source with comments, string and character literals blanked out (newlines kept), so a
/// path in a doc comment or an SQL string is not read as a use.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            while i < b.len() {
                if src[i..].starts_with("/*") {
                    depth += 1;
                    i += 2;
                } else if src[i..].starts_with("*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (b[i] == b'r' || rest.starts_with("br")) && (i == 0 || !ident(b[i - 1])) && {
            let r = rest.trim_start_matches('b').strip_prefix('r').unwrap_or("");
            r.trim_start_matches('#').starts_with('"')
        } {
            let r = rest.trim_start_matches('b').strip_prefix('r').unwrap();
            let hashes = r.len() - r.trim_start_matches('#').len();
            let close = format!("\"{}", "#".repeat(hashes));
            let open = rest.len() - r.len() + hashes + 1;
            let end = rest[open..].find(&close).map_or(rest.len(), |e| open + e + close.len());
            out.push_str("\"\"");
            i += end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if b[i] == b'\'' {
            // a character literal ('x', '\n', '\u{..}'), or a lifetime ('a) which is kept
            let lit = if rest[1..].starts_with('\\') {
                rest.get(3..).and_then(|r| r.find('\'')).map(|e| e + 4)
            } else {
                rest[1..]
                    .chars()
                    .next()
                    .filter(|c| rest[1 + c.len_utf8()..].starts_with('\''))
                    .map(|c| c.len_utf8() + 2)
            };
            match lit {
                Some(n) => {
                    out.push_str("' '");
                    i += n;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Every path a use tree at the start of `s` names, each appended to `prefix`
/// (`{a, b::{c, d}}` gives `a`, `b::c`, `b::d`; `self` in a group names the prefix).
fn use_tree_paths(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let t = s.trim_start();
    let mut at = s.len() - t.len();
    if let Some(inner) = t.strip_prefix('{') {
        at += 1;
        let mut rest = inner;
        loop {
            let r = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            at += rest.len() - r.len();
            if r.starts_with('}') || r.is_empty() {
                return at + 1;
            }
            let n = use_tree_paths(r, prefix, out);
            at += n;
            rest = &r[n..];
        }
    }
    let name: String = t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if name.is_empty() {
        out.push(prefix.to_vec());
        return at;
    }
    at += name.len();
    let mut path = prefix.to_vec();
    if name != "self" {
        path.push(name);
    }
    let after = &s[at..];
    let a = after.trim_start();
    if let Some(more) = a.strip_prefix("::") {
        let m = more.trim_start();
        if m.starts_with('{') || m.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            let skipped = after.len() - m.len();
            return at + skipped + use_tree_paths(m, &path, out);
        }
    }
    out.push(path);
    at
}

/// The modules `code` (of module `me`, comments and literals blanked) names: `super::x`,
/// `self::x`, `crate::store::x` paths in `use` items and in code, and paths that start with the
/// name of a child the file declares (`mod x;` then `x::f()` or `pub use x::Y`: how a `mod.rs`
/// uses its children), resolved against `modules` (the longest module a path starts with).
/// Inline `mod name { … }` blocks are followed, so `use super::*` in a `mod tests` names the
/// file itself (and a child's bare name inside one names nothing). A `mod` declaration alone is
/// no edge.
fn store_edges(code: &str, me: &[String], modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut edges = BTreeSet::new();
    // the children this file declares (`mod x;`, `pub mod x;`, `pub(super) mod x;`)
    let children: Vec<String> = code
        .match_indices("mod ")
        .filter(|(i, _)| *i == 0 || !ident(b[i - 1]))
        .filter_map(|(i, _)| {
            let r = code[i + 4..].trim_start();
            let name: String = r.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty() && r[name.len()..].trim_start().starts_with(';')).then_some(name)
        })
        .collect();
    // inline modules: (name, brace depth inside it)
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < b.len() {
        let rest = &code[i..];
        let starts_word = i == 0 || !(ident(b[i - 1]) || b[i - 1] == b':');
        if b[i] == b'{' {
            depth += 1;
        } else if b[i] == b'}' {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth -= 1;
        } else if starts_word && rest.starts_with("mod ") {
            let r = rest[4..].trim_start();
            let name: String = r.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if r[name.len()..].trim_start().starts_with('{') {
                inline.push((name, depth + 1));
            }
        }
        let is_path = starts_word
            && ["crate::store::", "self::", "super::"].iter().any(|p| rest.starts_with(p))
            // `pub(in crate::store)` names who may see an item, not what it uses
            && !code[..i].trim_end().ends_with("(in");
        // `child::…` where this file declared `mod child;` (not inside an inline module, where
        // the bare name is out of scope, nor after `.`: a method's turbofish)
        let child = (starts_word && inline.is_empty() && (i == 0 || b[i - 1] != b'.'))
            .then(|| {
                children.iter().find_map(|c| Some((c, rest.strip_prefix(c.as_str())?.strip_prefix("::")?)))
            })
            .flatten();
        let head = if let Some((c, r)) = child {
            let mut here = me.to_vec();
            here.push(c.clone());
            Some((here, r))
        } else if !is_path {
            None
        } else if let Some(r) = rest.strip_prefix("crate::store::") {
            Some((vec!["store".to_owned()], r))
        } else {
            let mut here: Vec<String> = me.to_vec();
            here.extend(inline.iter().map(|(n, _)| n.clone()));
            let mut r = rest;
            if let Some(s) = r.strip_prefix("self::") {
                r = s;
            }
            while let Some(s) = r.strip_prefix("super::") {
                here.pop();
                r = s;
            }
            Some((here, r))
        };
        if let Some((base, r)) = head {
            let mut paths = Vec::new();
            use_tree_paths(r, &base, &mut paths);
            for p in paths {
                let target = (1..=p.len()).rev().map(|n| p[..n].to_vec()).find(|m| modules.contains(m));
                if let Some(t) = target.filter(|t| t.as_slice() != me) {
                    edges.insert(t);
                }
            }
            i += rest.len() - r.len();
            continue;
        }
        i += rest.chars().next().unwrap().len_utf8();
    }
    edges
}

/// A cycle in `graph`, as `a -> b -> … -> a`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<String> {
        if let Some(at) = stack.iter().position(|s| s == n) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(n.to_owned());
            return Some(cycle.join(" -> "));
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_owned());
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

/// The files of `src/store` as modules, each with the modules it names (see [`store_edges`]).
fn store_import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let mut files = Vec::new();
    rust_files(&store, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| store_module_of(&store, f)).collect();
    files
        .iter()
        .map(|f| {
            let me = store_module_of(&store, f);
            let code = code_only(&fs::read_to_string(f).unwrap());
            let edges = store_edges(&code, &me, &modules).into_iter().map(|m| m.join("::")).collect();
            (me.join("::"), edges)
        })
        .collect()
}

/// `src/store` is layered: no module reaches itself again through `use super::x`,
/// `use crate::store::x` or a `super::x::` / `crate::store::x::` path. A parent's uses of its
/// children count too (`child::f()` or `pub use child::X` in a `mod.rs` is an edge to
/// `store::child`), so a `mod.rs` that defines what its children import (`use super::Store`)
/// is a cycle: `store/mod.rs` and `store/salvage/mod.rs` only declare and re-export, and every
/// child imports from the module that defines the item.
#[test]
fn store_modules_have_no_import_cycle() {
    // the parser and the cycle search on known input first, so the check below cannot pass by
    // reading nothing
    let known: BTreeSet<Vec<String>> = ["store", "store::a", "store::b", "store::c", "store::z"]
        .iter()
        .map(|m| m.split("::").map(str::to_owned).collect())
        .collect();
    let sample = code_only(
        "use super::{a::{self, X}, Store};\n/// super::c::f()\nfn f() { let _ = \"super::c::g\"; \
         crate::store::b::h::<u8>(); }\nmod tests { use super::*; }",
    );
    let found: Vec<String> = store_edges(&sample, &["store".into(), "z".into()], &known)
        .into_iter()
        .map(|m| m.join("::"))
        .collect();
    assert_eq!(found, ["store", "store::a", "store::b"], "the import parser");
    // a parent's uses of the children it declares count; a bare name inside an inline module,
    // after `::` or after `.`, or a declaration alone, does not
    let parent = code_only(
        "mod a;\npub mod b;\npub(super) mod c;\npub use a::{X, Y};\nfn f() { b::g::<u8>(); \
         crate::x::c::h(); q.c::<u8>(); }\nmod tests { use c::Z; }",
    );
    let found: Vec<String> =
        store_edges(&parent, &["store".into()], &known).into_iter().map(|m| m.join("::")).collect();
    assert_eq!(found, ["store::a", "store::b"], "the import parser on a parent");
    let ring: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(f, t)| (f.to_string(), BTreeSet::from([t.to_string()])))
        .collect();
    assert_eq!(find_cycle(&ring).as_deref(), Some("a -> b -> c -> a"), "the cycle search");

    let graph = store_import_graph();
    assert!(graph.len() > 20 && graph.values().map(BTreeSet::len).sum::<usize>() > 50, "{graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("src/store has an import cycle: {cycle}");
    }
}

/// ARCHITECTURE.md's file map names every file under `src/` and `extension/` in the section of its
/// folder ("### `src/store/`"), and names nothing that is not there.
#[test]
fn the_file_map_lists_every_file_under_src_and_extension() {
    let doc = read("ARCHITECTURE.md");
    let map = doc.split("\n## File map").nth(1).expect("ARCHITECTURE.md has a \"## File map\" section");
    let map = map.split("\n## ").next().unwrap();
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut folder: Option<String> = None;
    for l in map.lines() {
        if let Some(h) = l.strip_prefix("### `") {
            folder = Some(h.trim_end_matches('`').trim_end_matches('/').to_owned());
        } else if let (Some(f), true) = (&folder, l.starts_with('|')) {
            // the File column, or a "tests" row's list: every backticked name that is a file name
            let cells: Vec<&str> = l.split('|').collect();
            let cell = if cells.get(1).is_some_and(|c| c.trim() == "tests") { cells[2] } else { cells[1] };
            for name in cell.split('`').skip(1).step_by(2) {
                listed.entry(f.clone()).or_default().insert(name.to_owned());
            }
        }
    }
    let files: Vec<String> = repository_files()
        .into_iter()
        .filter(|f| f.starts_with("src/") || f.starts_with("extension/"))
        .collect();
    let mut missing = Vec::new();
    for f in &files {
        let (dir, name) = f.rsplit_once('/').unwrap();
        if !listed.get(dir).is_some_and(|names| names.contains(name)) {
            missing.push(f.clone());
        }
    }
    let mut stale = Vec::new();
    for (dir, names) in &listed {
        for n in names {
            if !files.contains(&format!("{dir}/{n}")) {
                stale.push(format!("{dir}/{n}"));
            }
        }
    }
    assert!(files.len() > 150, "only {} files under src/ and extension/?", files.len());
    assert!(missing.is_empty(), "ARCHITECTURE.md's file map does not list: {missing:#?}");
    assert!(stale.is_empty(), "ARCHITECTURE.md's file map lists files that are not there: {stale:#?}");
}
