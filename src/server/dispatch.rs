//! The dispatcher: finds an operation's row in the typed table (`ops::OPS`), validates its args
//! and runs its handler; it is the panic boundary (a panic becomes `internal`, its open
//! transaction rolls back on drop).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::bodies::BodyCache;
use super::ops::{self, Run, OPS};
use crate::protocol::envelope::Payload;
use crate::protocol::limits::{MAX_IMAGE_BYTES, MAX_INBOUND_FRAME, MAX_OUTBOUND_FRAME, PROTOCOL_VERSION};
use crate::protocol::{ErrorCode, HostError, HostResult};
use crate::store::migrate::LATEST;
use crate::store::{ChangeEvent, Store, WriteOutcome};

/// Work the server runs after sending a reply, as its own transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followup {
    /// The byte-budget pass after an attach (storage-model §4.3 step 4, §11.5).
    BoundImages,
}

/// What a handler produced.
pub struct Reply {
    pub result: Payload,
    pub event: Option<ChangeEvent>,
    pub followup: Option<Followup>,
}

impl From<WriteOutcome> for Reply {
    fn from(w: WriteOutcome) -> Self {
        Reply { result: w.result.into(), event: w.event, followup: None }
    }
}

/// The reply of a read (no event, no follow-up).
pub fn read(result: impl Into<Payload>) -> Reply {
    Reply { result: result.into(), event: None, followup: None }
}

/// Server state shared by handlers.
pub struct Ctx {
    pub db_path: PathBuf,
    /// The open store, or why it could not be opened (every op but `host.hello` reports it).
    pub store: Result<Store, HostError>,
    /// When this process next looks whether the trash's expiry is due (after a reply).
    pub next_expiry_look: std::time::Instant,
    /// API keys still in the database file are moved to the secret store after the first reply.
    pub keys_move_due: bool,
}

/// Names of every operation, `host.hello` included.
pub fn op_names() -> Vec<&'static str> {
    OPS.iter().map(|e| e.name).collect()
}

pub fn hello(ctx: &mut Ctx) -> Value {
    let (schema, db_error) = match &mut ctx.store {
        Ok(s) => (s.schema_version().ok(), Value::Null),
        Err(e) => (None, json!({"code": e.code.as_str(), "message": e.message})),
    };
    json!({
        "name": "keepsake-host",
        "version": env!("CARGO_PKG_VERSION"),
        "protocolVersion": PROTOCOL_VERSION,
        "dbPath": ctx.db_path.display().to_string(),
        "schemaVersion": schema,
        "latestSchemaVersion": LATEST,
        "dbError": db_error,
        "limits": {
            "maxInboundFrame": MAX_INBOUND_FRAME,
            "maxOutboundFrame": MAX_OUTBOUND_FRAME,
            "maxImageBytes": MAX_IMAGE_BYTES,
            "maxHistory": crate::domain::history::MAX_HISTORY,
            "maxTotalChars": crate::domain::history::MAX_TOTAL_CHARS,
            "turnMaxImages": crate::domain::images::TURN_MAX_IMAGES,
            "turnImageBudget": crate::domain::images::TURN_IMAGE_BUDGET,
        },
        "ops": op_names(),
        "schemaHash": ops::schema_hash(),
    })
}

/// Run one operation with no connection memory (every `request.build` `since` is unknown).
/// Panics are caught here and reported as `internal`.
pub fn dispatch(ctx: &mut Ctx, op: &str, args: &Map<String, Value>) -> HostResult<Reply> {
    dispatch_with(ctx, &mut BodyCache::default(), op, args.clone())
}

/// Run one operation with this connection's memory (`serve` keeps one `BodyCache` for the life
/// of the process): find its row in [`OPS`], validate `args` into the op's type, run its
/// handler. Panics are caught here and reported as `internal`.
pub fn dispatch_with(
    ctx: &mut Ctx,
    bodies: &mut BodyCache,
    op: &str,
    args: Map<String, Value>,
) -> HostResult<Reply> {
    let Some(entry) = ops::find(op) else {
        return Err(HostError::new(ErrorCode::UnknownOp, format!("unknown operation {op:?}")));
    };
    let run = match entry.run {
        Run::Hello => {
            ops::parse_args::<ops::host::Hello>(args)?;
            return Ok(read(hello(ctx)));
        }
        Run::Store(f) => f,
    };
    // A start that lost the race for the lock (busy) retries on the next request.
    if matches!(&ctx.store, Err(e) if e.code == ErrorCode::Busy) {
        ctx.store = Store::open(&ctx.db_path).map_err(HostError::from);
    }
    let store = match &mut ctx.store {
        Ok(s) => s,
        Err(e) => return Err(e.clone()),
    };
    match catch_unwind(AssertUnwindSafe(|| run(store, bodies, args))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            tracing::error!(op, panic = %msg, "handler panicked");
            Err(HostError::internal(format!("the host hit a bug handling {op}; see the log")))
        }
    }
}
