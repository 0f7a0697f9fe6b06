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
    assert!(read("CHANGELOG.md").contains("## Unreleased"));
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
    // model output and user text reach the page only as text nodes (lib/markdown.js builds nodes)
    for p in extension_sources() {
        let text = fs::read_to_string(&p).unwrap();
        for banned in
            ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"]
        {
            assert!(!text.contains(banned), "{} uses {banned}", p.display());
        }
    }
}
