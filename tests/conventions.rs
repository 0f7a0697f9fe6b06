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
