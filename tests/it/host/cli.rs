//! The command line (`inspect`, `sessions`, `search`, `export`, `import`, `backup`, `doctor`),
//! read-only opening, and private file modes / symlink refusal (reliability.md §6, T21).
use crate::harness::*;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

struct Seeded {
    alpha: String,
    beta: String,
    gamma: String,
    /// The session the two-entry live history is kept in (auto-keep).
    live: String,
    /// A deleted session, in the trash.
    trashed: String,
    png: Vec<u8>,
}

/// A chat kept in its session from its first entry (docs/keeps.md), renamed, then "New chat".
fn save(h: &mut Host, name: &str, entries: Value) -> String {
    let r = h.ok("history.replace", json!({"entries": entries}));
    assert_eq!(r["kept"]["created"], json!(true), "{r}");
    let id = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    h.ok("sessions.rename", json!({"id": id, "name": name}));
    h.ok("history.clear", json!({}));
    id
}

/// Three sessions (one with an image, one pinned), one setting, a deleted session (in the trash),
/// a two-entry live history (a fourth session, named by its first message).
fn seed(db: &Path) -> Seeded {
    let png = png_bytes(16, 12, 42);
    let mut h = Host::spawn(db);
    h.ok("settings.set", json!({"map": {"theme": "dark"}}));
    let alpha = save(
        &mut h,
        "Alpha notes",
        json!([user("the quick brown fox"), assistant("jumps over the lazy dog")]),
    );
    let beta = save(
        &mut h,
        "Beta 猫咪",
        json!([
            {"role": "user", "content": [text_part("我的猫很可爱"), image_part(&data_url("image/png", &png))]},
            assistant("是的")
        ]),
    );
    let gamma = save(&mut h, "Gamma", json!([user("Rust ownership rules"), assistant("borrowing")]));
    h.ok("sessions.pin", json!({"id": gamma, "pinned": true}));
    let trashed = save(&mut h, "Zebra draft", json!([user("zebra crossing"), assistant("striped")]));
    assert_eq!(h.ok("sessions.delete", json!({ "id": trashed })), json!({"deleted": true}));
    let r = h.ok("history.replace", json!({"entries": [user("live question"), assistant("live answer")]}));
    let live = r["kept"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(h.close().0, Some(0));
    Seeded { alpha, beta, gamma, live, trashed, png }
}

fn json_out(db: &Path, args: &[&str]) -> Value {
    let (code, out, err) = cli(db, args);
    assert_eq!(code, 0, "{args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed non-JSON ({e}): {out}"))
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode()
        & 0o777
}

fn chmod(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

fn file_hash(p: &Path) -> String {
    sha256_hex(&std::fs::read(p).unwrap())
}

fn dir_listing(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn sessions_of(conn: &rusqlite::Connection) -> Vec<(String, String, i64)> {
    let mut st = conn.prepare("SELECT id, name, pinned FROM sessions ORDER BY id").unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
}

// ---------------------------------------------------------------------------------------------
// inspect, sessions, search

#[test]
fn inspect_reports_counts_sizes_schema_and_integrity() {
    let (_d, db) = temp_db();
    let s = seed(&db);
    let v = json_out(&db, &["inspect", "--json"]);
    assert_eq!(v["schemaVersion"], json!(keepsake_host::store::migrate::LATEST));
    assert_eq!(v["integrity"], json!(["ok"]));
    let c = &v["counts"];
    assert_eq!(c["sessions"], json!(4), "{v}");
    assert_eq!(c["trash"], json!(1), "{v}");
    // every entry row, the trashed session's too
    assert_eq!(c["sessionEntries"], json!(10), "{v}");
    assert_eq!(c["historyEntries"], json!(2), "{v}");
    assert_eq!(v["activeSessionId"], json!(s.live), "{v}");
    assert_eq!(c["settings"], json!(1), "{v}");
    assert_eq!(c["images"], json!(1), "{v}");
    let size = std::fs::metadata(&db).unwrap().len();
    assert_eq!(v["sizes"]["database"], json!(size), "{v}");
    assert!(size > 0);
    eprintln!("inspect --json: {v}");

    let (code, out, err) = cli(&db, &["inspect"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&db.display().to_string()), "{out}");
    let line = |k: &str| {
        out.lines().find(|l| l.starts_with(k)).unwrap_or_else(|| panic!("no {k} line in {out}")).to_owned()
    };
    assert!(line("schema").contains(&format!("version {}", keepsake_host::store::migrate::LATEST)), "{out}");
    assert!(line("sessions").contains('4'), "{out}");
    assert!(line("integrity").trim_end().ends_with("ok"), "{out}");
    assert!(line("size").contains(&size.to_string()), "{out}");
}

#[test]
fn sessions_lists_pinned_first_in_text_and_json() {
    let (_d, db) = temp_db();
    let s = seed(&db);
    let rows = json_out(&db, &["sessions", "--json"]);
    let ids: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        vec![s.gamma.as_str(), s.live.as_str(), s.beta.as_str(), s.alpha.as_str()],
        "pinned first, then newest"
    );
    assert_eq!(rows[0]["pinned"], json!(true));
    assert_eq!(rows[1]["name"], json!("live question"));
    assert_eq!(rows[2]["name"], json!("Beta 猫咪"));
    assert_eq!(rows[3]["entryCount"], json!(2));
    let (code, out, err) = cli(&db, &["sessions"]);
    assert_eq!(code, 0, "{err}");
    let pos = |needle: &str| out.find(needle).unwrap_or_else(|| panic!("{needle} missing from {out}"));
    assert!(
        pos(&s.gamma) < pos(&s.live) && pos(&s.live) < pos(&s.beta) && pos(&s.beta) < pos(&s.alpha),
        "{out}"
    );
    for name in ["Alpha notes", "Beta 猫咪", "Gamma", "live question"] {
        pos(name);
    }
    assert!(!out.contains(&s.trashed) && !out.contains("Zebra"), "the trash is not listed: {out}");
}

#[test]
fn search_finds_names_content_and_single_cjk_characters() {
    let (_d, db) = temp_db();
    let s = seed(&db);
    // Name hit.
    let rows = json_out(&db, &["search", "ALPHA", "--json"]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], json!(s.alpha));
    assert_eq!(rows[0]["contentMatch"], json!(false));
    // Content hit with a snippet.
    let rows = json_out(&db, &["search", "lazy", "--json"]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], json!(s.alpha));
    assert_eq!(rows[0]["contentMatch"], json!(true));
    assert!(rows[0]["snippet"].as_str().unwrap().contains("lazy"), "{rows}");
    // A single CJK character found only in content.
    let rows = json_out(&db, &["search", "爱", "--json"]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["id"], json!(s.beta));
    assert_eq!(rows[0]["contentMatch"], json!(true));
    assert!(rows[0]["snippet"].as_str().unwrap().contains('爱'), "{rows}");
    // A single CJK character in the name.
    let rows = json_out(&db, &["search", "猫", "--json"]);
    assert_eq!(rows[0]["id"], json!(s.beta), "{rows}");
    // No hit.
    assert_eq!(json_out(&db, &["search", "zzzz-nothing", "--json"]), json!([]));
    // The trash is not searched, by name or content.
    assert_eq!(json_out(&db, &["search", "zebra", "--json"]), json!([]));
    assert_eq!(json_out(&db, &["search", "striped", "--json"]), json!([]));
    // No hit, in text: says what was searched for (not "(no sessions)": there are sessions)
    let (code, out, _) = cli(&db, &["search", "nothinghere"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "No saved chat matches “nothinghere” (names and full text were searched).");
    // Text form.
    let (code, out, err) = cli(&db, &["search", "ownership"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&s.gamma) && out.contains("ownership"), "{out}");
    assert!(!out.contains(&s.alpha), "{out}");
    assert!(!out.contains(&s.trashed), "{out}");
}

// ---------------------------------------------------------------------------------------------
// export, import

#[test]
fn export_takes_the_start_of_an_id_and_refuses_one_that_several_ids_share() {
    let (d, db) = temp_db();
    let doc = json!({
        "format": "keepsake.sessions", "version": 1, "exportedAt": "2026-12-06T00:00:00Z", "images": {},
        "sessions": [
            {"id": "harbour-1111", "name": "Tides", "createdAt": 1_700_000_000_000i64, "pinned": false,
             "entries": [user("when is low water?"), assistant("at noon")]},
            {"id": "harbour-2222", "name": "Lamps", "createdAt": 1_700_000_100_000i64, "pinned": false,
             "entries": [user("how bright?"), assistant("very")]},
        ]
    });
    let file = d.path().join("doc.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let (code, _, err) = cli(&db, &["import", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, md, err) = cli(&db, &["export", "harbour-2"]);
    assert_eq!(code, 0, "{err}");
    assert!(md.starts_with("# Lamps\n"), "{md}");
    let (code, out, err) = cli(&db, &["export", "harbour-"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("“harbour-” starts the ids of 2 saved chats; give more of the id:"), "{err}");
    assert!(err.contains("harbour-1111  Tides") && err.contains("harbour-2222  Lamps"), "{err}");
    let (code, _, err) = cli(&db, &["export", "--format", "json", "harbour-1", "harbour-2"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn export_markdown_to_stdout_and_json_to_a_file_then_import_it_elsewhere() {
    let (d, db) = temp_db();
    let s = seed(&db);
    let (code, md, err) = cli(&db, &["export", &s.alpha]);
    assert_eq!(code, 0, "{err}");
    assert!(md.starts_with("# Alpha notes\n"), "{md}");
    let user_at = md.find("## User").expect("## User");
    let fox = md.find("the quick brown fox").expect("user text");
    let asst = md.find("## Assistant").expect("## Assistant");
    let dog = md.find("jumps over the lazy dog").expect("assistant text");
    assert!(user_at < fox && fox < asst && asst < dog, "{md}");
    let (code, md, _) = cli(&db, &["export", &s.beta]);
    assert_eq!(code, 0);
    assert!(md.contains("我的猫很可爱") && md.contains("[image]"), "{md}");
    // Markdown takes exactly one id; unknown ids fail.
    assert_ne!(cli(&db, &["export", &s.alpha, &s.beta]).0, 0);
    let (code, _, err) = cli(&db, &["export", "no-such-session"]);
    assert_eq!(code, 2);
    assert!(err.contains("no saved chat has an id starting with “no-such-session”"), "{err}");
    // The first 8 characters of an id are enough, as `sessions` prints them.
    let (code, md8, err) = cli(&db, &["export", &s.alpha[..8]]);
    assert_eq!(code, 0, "{err}");
    assert!(md8.starts_with("# Alpha notes\n"), "{md8}");

    let out = d.path().join("all.json");
    let (code, stdout, err) = cli(
        &db,
        &["export", &s.alpha, &s.beta, &s.gamma, "--format", "json", "--out", out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "--out still printed to stdout: {stdout}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["format"], json!("keepsake.sessions"));
    assert_eq!(doc["version"], json!(2), "export format 2 (versions)");
    let sessions = doc["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    let hash = sha256_hex(&s.png);
    let beta = sessions.iter().find(|x| x["id"] == json!(s.beta)).unwrap();
    assert_eq!(
        beta["entries"][0]["content"][1]["image_url"]["url"],
        json!(format!("keepsake-image:sha256:{hash}"))
    );
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(doc["images"][&hash]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(data, s.png);

    // Import into a database that does not exist yet.
    let other = d.path().join("other").join("keepsake.db");
    let r = json_out(&other, &["import", out.to_str().unwrap()]);
    assert_eq!(r["sessionsImported"], json!(3), "{r}");
    assert_eq!(r["imagesStored"], json!(1), "{r}");
    let again = json_out(&other, &["import", out.to_str().unwrap()]);
    assert_eq!(again["sessionsImported"], json!(0), "import is not idempotent: {again}");
    assert_eq!(again["imagesStored"], json!(0), "{again}");
    let exported: Vec<_> = sessions_of(&sql(&db))
        .into_iter()
        .filter(|(id, _, _)| [&s.alpha, &s.beta, &s.gamma].contains(&id))
        .collect();
    assert_eq!(exported.len(), 3);
    assert_eq!(sessions_of(&sql(&other)), exported);
    // Import from stdin.
    let third = d.path().join("third").join("keepsake.db");
    let mut child = Command::new(BIN)
        .arg("--db")
        .arg(&third)
        .args(["import", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&std::fs::read(&out).unwrap()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["sessionsImported"], json!(3));
    // The imported copy exports the same Markdown.
    assert_eq!(cli(&other, &["export", &s.alpha]).1.lines().next(), Some("# Alpha notes"));
}

// ---------------------------------------------------------------------------------------------
// backup

#[test]
fn backup_writes_a_private_valid_copy_and_refuses_an_existing_target() {
    let (d, db) = temp_db();
    seed(&db);
    let target = d.path().join("copy.db");
    let (code, out, err) = cli(&db, &["backup", target.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    eprintln!("backup: {}", out.trim());
    let copy =
        rusqlite::Connection::open_with_flags(&target, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let ok: String = copy.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let src = sql(&db);
    assert_eq!(sessions_of(&copy), sessions_of(&src));
    assert_eq!(sessions_of(&copy).len(), 5, "four sessions and the trashed one");
    for t in ["session_entries", "history_entries", "images", "settings"] {
        let q = format!("SELECT count(*) FROM {t}");
        let a: i64 = copy.query_row(&q, [], |r| r.get(0)).unwrap();
        let b: i64 = src.query_row(&q, [], |r| r.get(0)).unwrap();
        assert_eq!(a, b, "{t}");
    }
    assert_eq!(mode(&target), 0o600, "backup file mode {:o}", mode(&target));
    drop(copy);

    // An existing target is refused and left alone.
    let existing = d.path().join("existing.db");
    std::fs::write(&existing, b"keep me").unwrap();
    let (code, _, err) = cli(&db, &["backup", existing.to_str().unwrap()]);
    assert_ne!(code, 0, "backup overwrote an existing file");
    assert!(!err.is_empty());
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    let (code, _, _) = cli(&db, &["backup", target.to_str().unwrap()]);
    assert_ne!(code, 0, "backup overwrote the earlier backup");
}

// ---------------------------------------------------------------------------------------------
// doctor

fn check_status<'a>(doc: &'a Value, status: &str) -> Vec<&'a Value> {
    doc["checks"].as_array().unwrap().iter().filter(|c| c["status"] == json!(status)).collect()
}

#[test]
fn doctor_is_ok_on_a_healthy_database_warns_on_0644_and_fails_on_a_symlink() {
    let (d, db) = temp_db();
    seed(&db);
    let (code, out, err) = cli(&db, &["doctor", "--json"]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    assert_eq!(code, 0, "{out}");
    assert_eq!(doc["ok"], json!(true), "{doc}");
    assert!(check_status(&doc, "fail").is_empty(), "{doc}");
    assert!(check_status(&doc, "warn").is_empty(), "healthy database has warnings: {doc}");
    let (code, text, _) = cli(&db, &["doctor"]);
    assert_eq!(code, 0);
    assert!(text.lines().count() >= 3, "{text}");
    assert!(!text.contains("fail"), "{text}");

    // A world-readable database file is pointed out.
    chmod(&db, 0o644);
    let (code, out, _) = cli(&db, &["doctor", "--json"]);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 0, "a warning is not a failure: {doc}");
    assert_eq!(doc["ok"], json!(true));
    let warns = check_status(&doc, "warn");
    assert!(
        warns.iter().any(|c| c["detail"].as_str().unwrap_or("").contains("644")),
        "no warning names the 0644 database file: {doc}"
    );
    // ...and made private by that very open, so the next doctor is quiet
    assert_eq!(std::fs::metadata(&db).unwrap().permissions().mode() & 0o777, 0o600);
    chmod(&db, 0o644);
    let (_, text, _) = cli(&db, &["doctor"]);
    assert!(text.lines().any(|l| l.starts_with("warn") && l.contains("644")), "{text}");
    let (_, text, _) = cli(&db, &["doctor"]);
    assert!(!text.lines().any(|l| l.starts_with("warn") && l.contains("644")), "{text}");

    // A symlinked database path fails.
    let link = d.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let (code, out, _) = cli(&link, &["doctor", "--json"]);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_ne!(code, 0, "doctor exit code on a symlinked database: {doc}");
    assert_eq!(doc["ok"], json!(false), "{doc}");
    assert!(!check_status(&doc, "fail").is_empty(), "{doc}");
}

// ---------------------------------------------------------------------------------------------
// read-only opening

/// Restores permissions on drop so the temp dir can always be removed.
struct PermGuard(Vec<(PathBuf, u32)>);

impl Drop for PermGuard {
    fn drop(&mut self) {
        for (p, m) in self.0.iter().rev() {
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(*m));
        }
    }
}

/// Run the CLI, as the unprivileged `nobody` when we are root (root ignores file modes).
fn cli_unprivileged(db: &Path, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--db").arg(db).args(args);
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let o = cmd.output().expect("run CLI");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn read_only_commands_work_on_a_read_only_database_and_change_nothing() {
    let (d, db) = temp_db();
    let s = seed(&db);
    let dir = db.parent().unwrap().to_path_buf();
    let root = unsafe { libc::geteuid() } == 0;
    let mut guard = PermGuard(Vec::new());
    if root {
        // Let `nobody` reach the directory (the temp dir itself is 0700).
        guard.0.push((d.path().to_path_buf(), mode(d.path())));
        chmod(d.path(), 0o755);
    }
    guard.0.push((dir.clone(), mode(&dir)));
    let mut files = vec![db.clone()];
    for sfx in ["-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{sfx}", db.display()));
        if p.exists() {
            files.push(p);
        }
    }
    for f in &files {
        guard.0.push((f.clone(), mode(f)));
        chmod(f, 0o444);
    }
    chmod(&dir, 0o555);
    let hashes: Vec<String> = files.iter().map(|f| file_hash(f)).collect();
    let listing = dir_listing(&dir);
    eprintln!("read-only run as {} with files {listing:?}", if root { "nobody" } else { "the current user" });

    let mut failures = Vec::new();
    let mut run = |args: &[&str], check: &dyn Fn(&str) -> bool| {
        let (code, out, err) = cli_unprivileged(&db, args);
        if code != 0 || !check(&out) {
            failures.push(format!("{args:?}: exit {code}, stdout {out:?}, stderr {err:?}"));
        }
    };
    run(&["inspect", "--json"], &|o| o.contains("\"sessions\": 4"));
    run(&["inspect"], &|o| o.contains("integrity"));
    run(&["sessions", "--json"], &|o| o.contains(&s.alpha));
    run(&["sessions"], &|o| o.contains("Gamma"));
    run(&["search", "lazy", "--json"], &|o| o.contains(&s.alpha));
    run(&["search", "爱"], &|o| o.contains(&s.beta));
    run(&["export", &s.alpha], &|o| o.starts_with("# Alpha notes"));
    run(&["export", &s.beta, "--format", "json"], &|o| o.contains("keepsake.sessions"));
    run(&["doctor", "--json"], &|o| o.contains("\"ok\""));
    run(&["trash", "--json"], &|o| o.contains(&s.trashed));
    run(&["trash"], &|o| o.contains("Zebra draft"));

    let after: Vec<String> = files.iter().map(|f| file_hash(f)).collect();
    let listing_after = dir_listing(&dir);
    drop(guard);
    assert_eq!(after, hashes, "a read-only command changed the database bytes");
    assert_eq!(listing_after, listing, "a read-only command created files beside the database");
    assert!(
        failures.is_empty(),
        "read-only commands failed on a read-only database:\n{}",
        failures.join("\n")
    );
}

#[test]
fn read_commands_on_a_missing_database_fail_clearly_and_create_nothing() {
    let d = tempfile::tempdir().unwrap();
    // Parent exists, file does not.
    let db = d.path().join("keepsake.db");
    for args in [
        &["inspect"][..],
        &["sessions", "--json"],
        &["search", "x"],
        &["export", "abc"],
        &["backup", "/nonexistent-dir/x.db"],
    ] {
        let (code, out, err) = cli(&db, args);
        assert_ne!(code, 0, "{args:?} succeeded on a missing database: {out}");
        assert!(
            err.to_lowercase().contains("no database") || err.contains(&db.display().to_string()),
            "{args:?}: unclear message {err:?}"
        );
        assert!(dir_listing(d.path()).is_empty(), "{args:?} created {:?}", dir_listing(d.path()));
    }
    // Parent missing too.
    let db = d.path().join("missing-dir").join("keepsake.db");
    let (code, _, err) = cli(&db, &["inspect", "--json"]);
    assert_ne!(code, 0);
    assert!(!err.is_empty());
    assert!(!db.parent().unwrap().exists(), "inspect created the data directory");
}

// ---------------------------------------------------------------------------------------------
// private files and symlinks (reliability.md §6, T21)

fn write_frame(w: &mut impl Write, v: &Value) {
    let b = v.to_string().into_bytes();
    w.write_all(&(b.len() as u32).to_ne_bytes()).unwrap();
    w.write_all(&b).unwrap();
    w.flush().unwrap();
}

fn read_frame(r: &mut impl Read) -> Value {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_ne_bytes(len) as usize];
    r.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn files_created_under_a_permissive_umask_are_private() {
    for umask in ["022", "002"] {
        let (_d, db) = temp_db();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(BIN)
            .arg(ORIGIN)
            .env("KEEPSAKE_DB", &db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        write_frame(&mut stdin, &json!({"id": 1, "op": "host.hello"}));
        let hello = read_frame(&mut stdout);
        assert!(hello["result"]["dbError"].is_null(), "{hello}");
        // hello is answered before the database opens; the open follows as a `db` event
        let opened = read_frame(&mut stdout);
        assert_eq!(opened["event"], json!("db"), "{opened}");
        assert!(opened["dbError"].is_null(), "{opened}");
        write_frame(
            &mut stdin,
            &json!({"id": 2, "op": "history.append", "args": {"entry": {"role": "user", "content": "private"}}}),
        );
        let r = read_frame(&mut stdout);
        assert_eq!(r["ok"], json!(true), "{r}");
        // While the host runs, -wal and -shm exist.
        let dir = db.parent().unwrap();
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        let shm = PathBuf::from(format!("{}-shm", db.display()));
        let log = dir.join("keepsake-host.log");
        let mut seen = vec![(dir.to_path_buf(), mode(dir), 0o700)];
        for f in [&db, &wal, &shm, &log] {
            assert!(f.exists(), "{} missing while the host runs", f.display());
            seen.push((f.to_path_buf(), mode(f), 0o600));
        }
        drop(stdin);
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(0));
        for (p, m, want) in &seen {
            eprintln!("umask {umask}: {} mode {m:o}", p.file_name().unwrap().to_string_lossy());
            assert_eq!(*m, *want, "umask {umask}: {} has mode {m:o}, want {want:o}", p.display());
        }
        // And after exit the survivors are still private.
        for f in [&db, &log] {
            assert_eq!(mode(f) & 0o077, 0, "{}", f.display());
        }
    }
}

#[test]
fn a_symlinked_database_path_is_refused_and_its_target_untouched() {
    let (d, db) = temp_db();
    seed(&db);
    let real_dir = db.parent().unwrap().to_path_buf();
    let before_listing = dir_listing(&real_dir);
    let before_hash = file_hash(&db);
    let link_dir = d.path().join("elsewhere");
    std::fs::create_dir(&link_dir).unwrap();
    let link = link_dir.join("keepsake.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();

    let mut h = Host::spawn(&link);
    let hello = h.hello();
    let db_error = &hello["dbError"];
    assert!(db_error.is_object(), "symlinked database accepted: {hello}");
    let code = db_error["code"].as_str().expect("dbError.code").to_owned();
    assert!(db_error["message"].as_str().is_some_and(|m| !m.is_empty()));
    eprintln!("symlinked database: dbError {db_error}");
    for (op, args) in [
        ("history.meta", json!({})),
        ("history.get", json!({})),
        ("sessions.list", json!({})),
        ("history.append", json!({"entry": user("must not land")})),
        ("settings.set", json!({"map": {"x": 1}})),
    ] {
        let got = h.err(op, args);
        assert_eq!(got, code, "{op} on a refused database");
    }
    assert_eq!(h.close().0, Some(0));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the symlink was replaced");
    assert_eq!(file_hash(&db), before_hash, "the symlink target was modified");
    assert_eq!(dir_listing(&real_dir), before_listing, "files appeared beside the symlink target");
    let beside: Vec<String> =
        dir_listing(&link_dir).into_iter().filter(|n| n.starts_with("keepsake.db")).collect();
    assert_eq!(beside, vec!["keepsake.db".to_owned()], "sidecar files created beside the symlink");
    // The CLI refuses it too.
    let (code, _, err) = cli(&link, &["inspect"]);
    assert_ne!(code, 0);
    assert!(err.contains("symbolic link") || err.to_lowercase().contains("symlink"), "{err}");
}

/// Issue 32 (13): `export --all` writes every saved chat as the panel's "Export all" does (the
/// trashed one stays out), and every `--json` flag and `trash restore`'s id say what they are in
/// `--help`.
#[test]
fn export_all_and_help_texts() {
    let (d, db) = temp_db();
    let s = seed(&db);
    let out = d.path().join("everything.json");
    let (code, stdout, err) = cli(&db, &["export", "--all", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["format"], json!("keepsake.sessions"), "--all implies json");
    let mut got: Vec<String> =
        doc["sessions"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_owned()).collect();
    got.sort();
    let listed = json_out(&db, &["sessions", "--json"]);
    let mut want: Vec<String> = listed["rows"]
        .as_array()
        .or(listed.as_array())
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_owned())
        .collect();
    want.sort();
    assert_eq!(got, want, "every saved chat");
    for id in [&s.alpha, &s.beta, &s.gamma, &s.live] {
        assert!(got.contains(id), "{id} missing from {got:?}");
    }
    assert!(!got.contains(&s.trashed), "the trash is not exported");
    // to stdout too; ids and --all do not mix; neither is a usage error
    let (code, text, _) = cli(&db, &["export", "--all"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["sessions"].as_array().unwrap().len(),
        got.len()
    );
    assert_eq!(cli(&db, &["export", "--all", &s.alpha]).0, 2);
    assert_eq!(cli(&db, &["export"]).0, 2);

    let help = |args: &[&str]| {
        let (code, out, err) = cli(&db, args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    let export = help(&["export", "--help"]);
    assert!(export.contains("--all") && export.contains("Export every saved chat"), "{export}");
    let restore = help(&["trash", "restore", "--help"]);
    assert!(restore.contains("The item's id, as `keepsake-host trash` lists it"), "{restore}");
    let purge = help(&["trash", "purge", "--help"]);
    assert!(purge.contains("Destroy every item in the trash"), "{purge}");
    // every --json flag has its line of help (`-h`: one line per option)
    for cmd in [
        &["inspect"][..],
        &["sessions"],
        &["search"],
        &["trash"],
        &["backups"],
        &["restore"],
        &["salvage"],
        &["doctor"],
        &["install"],
        &["uninstall"],
        &["sync", "status"],
    ] {
        let text = help(&[cmd, &["-h"]].concat());
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("--json"))
            .unwrap_or_else(|| panic!("{cmd:?}: {text}"));
        assert!(line.trim_start().len() > "--json".len() + 4, "{cmd:?}: --json has no help: {line:?}");
    }
}
