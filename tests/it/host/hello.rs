//! host.hello and basic serving over real pipes.
use crate::harness::*;
use serde_json::json;

#[test]
fn hello_reports_versions_db_and_limits() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let r = h.hello();
    assert_eq!(r["name"], "keepsake-host");
    assert_eq!(r["protocolVersion"], keepsake_host::protocol::limits::PROTOCOL_VERSION);
    assert_eq!(r["schemaVersion"], keepsake_host::store::migrate::LATEST);
    assert_eq!(r["dbPath"], db.display().to_string());
    assert_eq!(r["limits"]["maxOutboundFrame"], 1_048_576);
    // the per-turn image caps the side panel's attach-time gate reads (extension/lib/caps.js)
    assert_eq!(r["limits"]["turnMaxImages"], 8);
    assert_eq!(r["limits"]["turnImageBudget"], 3_145_728);
    assert!(r["dbError"].is_null());
    let (code, took) = h.close();
    assert_eq!(code, Some(0));
    // Chrome kills a host 2 s after closing its pipes (platform.md §5): EOF must end it before
    assert!(took.as_millis() < 2000, "exit took {took:?}");
}

#[test]
fn status_reports_sizes_counts_and_doctor_findings() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    h.ok("history.append", json!({"entry": user("hello")}));
    let r = h.ok("host.status", json!({}));
    assert_eq!(r["path"], db.display().to_string());
    assert_eq!(r["counts"]["historyEntries"], 1);
    assert!(r["sizes"]["database"].as_u64().unwrap() > 0, "{r}");
    assert!(r.get("doctor").is_none(), "doctor runs only when asked");
    let r = h.ok("host.status", json!({"doctor": true}));
    let checks = r["doctor"]["checks"].as_array().expect("doctor checks");
    let db_check = checks.iter().find(|c| c["check"] == "database path").expect("database path check");
    assert_eq!(db_check["detail"], db.display().to_string());
    assert_eq!(h.err("host.status", json!({"doctor": "yes"})), "bad_request");
}

#[test]
fn hello_schema_hash_is_the_sha256_of_the_printed_schema() {
    use sha2::{Digest, Sha256};
    let (_d, db) = temp_db();
    let (code, out, err) = cli(&db, &["schema"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("schema is JSON");
    let ops = doc["ops"].as_array().expect("ops");
    assert!(ops.iter().any(|o| o["name"] == "history.append" && o["kind"] == "write"));
    assert!(ops.iter().any(|o| o["name"] == "host.hello" && o["kind"] == "read"));
    let hex: String = Sha256::digest(out.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let mut h = Host::spawn(&db);
    let r = h.hello();
    assert_eq!(r["schemaHash"], json!(hex));
    h.close();
}
