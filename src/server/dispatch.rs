//! One table maps every wire operation to its handler; the dispatcher is the panic boundary
//! (a panic becomes `internal`, its open transaction rolls back on drop).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::args::Args;
use crate::domain::import::SettingsMode;
use crate::protocol::limits::{MAX_IMAGE_BYTES, MAX_INBOUND_FRAME, MAX_OUTBOUND_FRAME, PROTOCOL_VERSION};
use crate::protocol::{HostError, HostResult};
use crate::store::migrate::LATEST;
use crate::store::{ChangeEvent, ImportOptions, Store, WriteOutcome};

/// What a handler produced.
pub struct Reply {
    pub result: Value,
    pub event: Option<ChangeEvent>,
}

impl From<WriteOutcome> for Reply {
    fn from(w: WriteOutcome) -> Self {
        Reply { result: w.result, event: w.event }
    }
}

fn read(result: Value) -> Reply {
    Reply { result, event: None }
}

/// Server state shared by handlers.
pub struct Ctx {
    pub db_path: PathBuf,
    /// The open store, or why it could not be opened (every op but `host.hello` reports it).
    pub store: Result<Store, HostError>,
}

type Handler = fn(&mut Store, &Map<String, Value>) -> HostResult<Reply>;

/// Every operation this host serves (PROTOCOL.md documents each one; a convention test checks
/// the two lists agree).
pub const OPS: &[(&str, Handler)] = &[
    ("settings.get", settings_get),
    ("settings.set", settings_set),
    ("settings.remove", settings_remove),
    ("history.get", history_get),
    ("history.meta", history_meta),
    ("history.setBinding", history_set_binding),
    ("history.append", history_append),
    ("history.replace", history_replace),
    ("history.clear", history_clear),
    ("history.removeAt", history_remove_at),
    ("history.truncateFrom", history_truncate_from),
    ("history.removeByAttachId", history_remove_by_attach_id),
    ("history.removeLastPageContext", history_remove_last_page_context),
    ("history.markImagesSeen", history_mark_images_seen),
    ("images.get", images_get),
    ("sessions.save", sessions_save),
    ("sessions.list", sessions_list),
    ("sessions.get", sessions_get),
    ("sessions.load", sessions_load),
    ("sessions.rename", sessions_rename),
    ("sessions.pin", sessions_pin),
    ("sessions.delete", sessions_delete),
    ("sessions.clearAll", sessions_clear_all),
    ("sessions.appendTo", sessions_append_to),
    ("sessions.export", sessions_export),
    ("storage.import", storage_import),
    ("changes.since", changes_since),
];

/// Names of every operation, `host.hello` included.
pub fn op_names() -> Vec<&'static str> {
    std::iter::once("host.hello").chain(OPS.iter().map(|(n, _)| *n)).collect()
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
        },
        "ops": op_names(),
    })
}

/// Run one operation. Panics are caught here and reported as `internal`.
pub fn dispatch(ctx: &mut Ctx, op: &str, args: &Map<String, Value>) -> HostResult<Reply> {
    if op == "host.hello" {
        Args::new(args, &[], false)?;
        return Ok(read(hello(ctx)));
    }
    let Some((_, handler)) = OPS.iter().find(|(n, _)| *n == op) else {
        return Err(HostError::new(
            crate::protocol::ErrorCode::UnknownOp,
            format!("unknown operation {op:?}"),
        ));
    };
    // A start that lost the race for the lock (busy) retries on the next request.
    if matches!(&ctx.store, Err(e) if e.code == crate::protocol::ErrorCode::Busy) {
        ctx.store = Store::open(&ctx.db_path).map_err(HostError::from);
    }
    let store = match &mut ctx.store {
        Ok(s) => s,
        Err(e) => return Err(e.clone()),
    };
    match catch_unwind(AssertUnwindSafe(|| handler(store, args))) {
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

// ---- settings -------------------------------------------------------------------------------

fn settings_get(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["keys"], false)?;
    Ok(read(s.settings_get(&a.req_string_list("keys")?)?))
}

fn settings_set(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["map"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.settings_set(a.req_object("map")?, crid.as_deref())?.into())
}

fn settings_remove(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["keys"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.settings_remove(&a.req_string_list("keys")?, crid.as_deref())?.into())
}

// ---- history --------------------------------------------------------------------------------

fn history_get(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["from", "limit", "images"], false)?;
    let page = crate::store::Page {
        from: a.opt_index("from")?.unwrap_or(0),
        limit: a.opt_index("limit")?,
        inline: crate::store::parse_images_mode(a.raw("images"))?,
    };
    Ok(read(s.history_get(page)?))
}

fn history_meta(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    Args::new(a, &[], false)?;
    Ok(read(s.history_meta()?))
}

fn history_set_binding(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_set_binding(a.req_str("id")?, crid.as_deref())?.into())
}

fn history_append(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["entry", "markImagesSeen"], true)?;
    let crid = a.client_request_id()?;
    let entry = a.req_value("entry")?.clone();
    Ok(s.history_append(entry, a.opt_bool("markImagesSeen")?, crid.as_deref())?.into())
}

fn history_replace(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["entries"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_replace(a.req_array("entries")?.clone(), crid.as_deref())?.into())
}

fn history_clear(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["saveCurrent"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_clear(a.opt_bool("saveCurrent")?, crid.as_deref())?.into())
}

fn history_remove_at(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["index"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_remove_at(a.req_index("index")?, crid.as_deref())?.into())
}

fn history_truncate_from(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["index"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_truncate_from(a.req_index("index")?, crid.as_deref())?.into())
}

fn history_remove_by_attach_id(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["attachId"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_remove_by_attach_id(a.opt_str("attachId")?, crid.as_deref())?.into())
}

fn history_remove_last_page_context(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &[], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_remove_last_page_context(crid.as_deref())?.into())
}

fn history_mark_images_seen(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &[], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_mark_images_seen(crid.as_deref())?.into())
}

fn images_get(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["ref"], false)?;
    Ok(read(s.images_get(a.req_str("ref")?)?))
}

// ---- sessions -------------------------------------------------------------------------------

fn sessions_save(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "name", "fallbackName"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.sessions_save(a.opt_str("id")?, a.opt_str("name")?, a.opt_str("fallbackName")?, crid.as_deref())?
        .into())
}

fn sessions_list(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["query"], false)?;
    Ok(read(s.sessions_list(a.opt_str("query")?)?))
}

fn sessions_get(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "images"], false)?;
    let inline = crate::store::parse_images_mode(a.raw("images"))?;
    Ok(read(s.sessions_get(a.req_str("id")?, inline)?))
}

fn sessions_load(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "saveCurrent"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.sessions_load(a.req_str("id")?, a.opt_bool("saveCurrent")?, crid.as_deref())?.into())
}

fn sessions_rename(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "name"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.sessions_rename(a.req_str("id")?, a.req_str("name")?, crid.as_deref())?.into())
}

fn sessions_pin(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "pinned"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.sessions_pin(a.req_str("id")?, a.req_bool("pinned")?, crid.as_deref())?.into())
}

fn sessions_delete(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.sessions_delete(a.req_str("id")?, crid.as_deref())?.into())
}

fn sessions_clear_all(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &[], true)?;
    let crid = a.client_request_id()?;
    Ok(s.sessions_clear_all(crid.as_deref())?.into())
}

fn sessions_append_to(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "entry"], true)?;
    let crid = a.client_request_id()?;
    let entry = a.req_value("entry")?.clone();
    Ok(s.sessions_append_to(a.req_str("id")?, entry, crid.as_deref())?.into())
}

fn sessions_export(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["ids", "format"], false)?;
    let ids = a.req_string_list("ids")?;
    let format = match a.req_str("format")? {
        "markdown" => crate::store::ExportFormat::Markdown,
        "json" => crate::store::ExportFormat::Json,
        other => {
            return Err(HostError::bad_request(format!(
                "format must be \"markdown\" or \"json\", got {other:?}"
            )))
        }
    };
    if ids.is_empty() {
        return Err(HostError::bad_request("ids must name at least one session"));
    }
    if format == crate::store::ExportFormat::Markdown && ids.len() != 1 {
        return Err(HostError::bad_request("markdown export takes exactly one session id"));
    }
    Ok(read(s.sessions_export(&ids, format)?))
}

fn storage_import(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["document", "settings"], true)?;
    let crid = a.client_request_id()?;
    let settings = match a.opt_str("settings")? {
        None | Some("keep") => SettingsMode::Keep,
        Some("overwrite") => SettingsMode::Overwrite,
        Some(o) => {
            return Err(HostError::bad_request(format!(
                "settings must be \"keep\" or \"overwrite\", got {o:?}"
            )))
        }
    };
    Ok(s.storage_import(a.req_value("document")?, ImportOptions { settings }, crid.as_deref())?.into())
}

fn changes_since(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["seq"], false)?;
    let seq = a.req_index("seq")?;
    Ok(read(s.changes_since(seq.min(i64::MAX as u64) as i64)?))
}
