//! host.hello and basic serving over real pipes.
mod common;
use common::*;
use serde_json::json;

#[test]
fn hello_reports_versions_db_and_limits() {
    let (_d, db) = temp_db();
    let mut h = Host::spawn(&db);
    let r = h.ok("host.hello", json!({}));
    assert_eq!(r["name"], "keepsake-host");
    assert_eq!(r["protocolVersion"], 1);
    assert_eq!(r["schemaVersion"], keepsake_host::store::migrate::LATEST);
    assert_eq!(r["dbPath"], db.display().to_string());
    assert_eq!(r["limits"]["maxOutboundFrame"], 1_048_576);
    assert!(r["dbError"].is_null());
    let (code, took) = h.close();
    assert_eq!(code, Some(0));
    assert!(took.as_millis() < 500, "exit took {took:?}");
}
