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
/// `self::x`, `crate::store::x` paths in `use` items and in code, resolved against `modules`
/// (the longest module a path starts with). Inline `mod name { … }` blocks are followed, so
/// `use super::*` in a `mod tests` names the file itself. A `mod` declaration is no edge.
fn store_edges(code: &str, me: &[String], modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut edges = BTreeSet::new();
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
        let head = if !is_path {
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
/// `use crate::store::x` or a `super::x::` / `crate::store::x::` path. (A parent's own uses of
/// its children, `child::f()` in a `mod.rs`, are not counted: they are how Rust nests modules.)
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
