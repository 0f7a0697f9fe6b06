//! `host.*`: the handshake and the status report.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::Op;
use crate::protocol::HostResult;
use crate::server::bodies::BodyCache;
use crate::server::dispatch::{read, Reply};
use crate::store::Store;

/// `host.hello` (no arguments; answered by the dispatcher from the server state).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Hello {}

impl Op for Hello {
    const NAME: &'static str = "host.hello";
    const WRITE: bool = false;
    fn run(self, _: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        unreachable!("host.hello is answered by the dispatcher")
    }
}

/// `host.status`: counts, sizes, schema and integrity (what `keepsake-host inspect` prints), and
/// with `doctor: true` the findings of `keepsake-host doctor --json`, run as a child process of
/// this binary so the checks see the installation exactly as the CLI does (its stdout is a pipe
/// of ours, never the browser's).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Status {
    pub doctor: Option<bool>,
}

impl Op for Status {
    const NAME: &'static str = "host.status";
    const WRITE: bool = false;
    fn run(self, s: &mut Store, _: &mut BodyCache) -> HostResult<Reply> {
        let mut status = s.inspect()?;
        if self.doctor.unwrap_or(false) {
            status["doctor"] = run_doctor(s.path());
        }
        Ok(read(status))
    }
}

fn run_doctor(db: &std::path::Path) -> Value {
    let out = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .arg("--db")
            .arg(db)
            .args(["doctor", "--json"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
    });
    match out {
        Ok(o) => serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            json!({"ok": false, "checks": [{"check": "doctor", "status": "fail", "detail": format!("unreadable doctor output: {e}")}]})
        }),
        Err(e) => json!({"ok": false, "checks": [{"check": "doctor", "status": "fail", "detail": format!("cannot run doctor: {e}")}]}),
    }
}
