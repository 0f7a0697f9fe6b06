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
    /// `None` until the database is opened: `host.hello` is answered without it, the server
    /// opens it right after hello's reply ([`Ctx::open_store`]), or the first operation that
    /// needs it does. Then the open store, or why it could not be opened (every op but
    /// `host.hello` reports it).
    pub store: Option<Result<Store, HostError>>,
    /// When this process next looks whether the trash's expiry is due (after a reply).
    pub next_expiry_look: std::time::Instant,
    /// API keys still in the database file are moved to the secret store after the first reply.
    pub keys_move_due: bool,
    /// Where the change poller starts (this store's origin and its change sequence number when
    /// it was opened); taken by the server, which starts the poller once.
    pub poll_from: Option<(String, i64)>,
    /// `host.hello` was answered on this connection: from then on every open (the one right
    /// after hello's reply, a retry after `busy`) is announced with a `db` event.
    pub hello_answered: bool,
    /// An open was tried that the client has not been told about yet.
    pub db_event_due: bool,
}

impl Ctx {
    /// A server state whose database is not opened yet.
    pub fn new(db_path: PathBuf) -> Ctx {
        Ctx {
            db_path,
            store: None,
            next_expiry_look: std::time::Instant::now() + crate::server::EXPIRY_FIRST_LOOK,
            keys_move_due: true,
            poll_from: None,
            hello_answered: false,
            db_event_due: false,
        }
    }

    /// Open (create, migrate, salvage) the database if this process has not yet, or again when
    /// the last try lost the race for the lock (`busy`). True when it tried.
    pub fn open_store(&mut self) -> bool {
        let retry = matches!(&self.store, Some(Err(e)) if e.code == ErrorCode::Busy);
        if self.store.is_some() && !retry {
            return false;
        }
        let mut opened = Store::open(&self.db_path).map_err(HostError::from);
        match &mut opened {
            Ok(s) => {
                // the poller announces other processes' commits after this point
                self.poll_from = Some((s.origin().to_owned(), s.current_seq().unwrap_or(0)));
            }
            Err(e) => tracing::error!(error = %e, db = %self.db_path.display(), "cannot open the database"),
        }
        self.store = Some(opened);
        self.db_event_due = self.hello_answered;
        true
    }

    /// The open store, or `None` while not opened or after a failed open.
    pub fn store_if_open(&mut self) -> Option<&mut Store> {
        match &mut self.store {
            Some(Ok(s)) => Some(s),
            _ => None,
        }
    }

    /// What `host.hello` and the `db` event say about the database: `dbOpened` (false until
    /// this process has tried), `schemaVersion` (null until open), `latestSchemaVersion`,
    /// `dbError` (null, or `{code, message}` when the open failed).
    pub fn db_state(&mut self) -> Value {
        let (opened, schema, db_error) = match &mut self.store {
            None => (false, None, Value::Null),
            Some(Ok(s)) => (true, s.schema_version().ok(), Value::Null),
            Some(Err(e)) => (true, None, json!({"code": e.code.as_str(), "message": e.message})),
        };
        json!({
            "dbOpened": opened,
            "schemaVersion": schema,
            "latestSchemaVersion": LATEST,
            "dbError": db_error,
        })
    }
}

/// Names of every operation, `host.hello` included.
pub fn op_names() -> Vec<&'static str> {
    OPS.iter().map(|e| e.name).collect()
}

/// `host.hello`: answered from the server state; it never opens the database (the server opens
/// it right after this reply and announces the outcome in a `db` event).
pub fn hello(ctx: &mut Ctx) -> Value {
    let db = ctx.db_state();
    json!({
        "name": "keepsake-host",
        "version": env!("CARGO_PKG_VERSION"),
        "protocolVersion": PROTOCOL_VERSION,
        "dbPath": ctx.db_path.display().to_string(),
        "dbOpened": db["dbOpened"],
        "schemaVersion": db["schemaVersion"],
        "latestSchemaVersion": LATEST,
        "dbError": db["dbError"],
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
            ctx.hello_answered = true;
            return Ok(read(hello(ctx)));
        }
        Run::Store(f) => f,
    };
    // Opened on the first operation that needs it; a start that lost the race for the lock
    // (busy) retries on the next request.
    ctx.open_store();
    let store = match &mut ctx.store {
        Some(Ok(s)) => s,
        Some(Err(e)) => return Err(e.clone()),
        None => unreachable!("open_store leaves a store or an error"),
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
