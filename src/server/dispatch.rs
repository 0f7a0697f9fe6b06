//! One table maps every wire operation to its handler; the dispatcher is the panic boundary
//! (a panic becomes `internal`, its open transaction rolls back on drop).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::args::Args;
use super::bodies::{text_result, BodyCache};
use crate::domain::attach::Ctx as PageCtx;
use crate::domain::dataurl::{canonical_data_url, decode_image_data_url, DataUrlError};
use crate::domain::history::parse_index;
use crate::domain::images::{THUMB_MAX_EDGE, THUMB_PASS_BYTES, THUMB_QUALITY, UNSEEN_IMAGE_BYTES_BUDGET};
use crate::domain::import::SettingsMode;
use crate::domain::reduce::{is_context_overflow, AgeOptions};
use crate::domain::request::{Kind, Pass};
use crate::protocol::envelope::Payload;
use crate::protocol::limits::{MAX_IMAGE_BYTES, MAX_INBOUND_FRAME, MAX_OUTBOUND_FRAME, PROTOCOL_VERSION};
use crate::protocol::ErrorCode;
use crate::protocol::{HostError, HostResult};
use crate::store::migrate::LATEST;
use crate::store::{AttachArgs, BuildArgs, ChangeEvent, ImageRefsMode, ImportOptions, Store, WriteOutcome};

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

fn read(result: impl Into<Payload>) -> Reply {
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

/// An operation's handler.
#[derive(Clone, Copy)]
pub enum Handler {
    /// Works on the store alone.
    Plain(fn(&mut Store, &Map<String, Value>) -> HostResult<Reply>),
    /// Also uses this connection's body cache (`request.build` with `since`).
    Bodies(fn(&mut Store, &mut BodyCache, &Map<String, Value>) -> HostResult<Reply>),
}

use Handler::{Bodies, Plain};

/// Every operation this host serves (PROTOCOL.md documents each one; a convention test checks
/// the two lists agree).
pub const OPS: &[(&str, Handler)] = &[
    ("host.status", Plain(host_status)),
    ("settings.get", Plain(settings_get)),
    ("settings.set", Plain(settings_set)),
    ("settings.remove", Plain(settings_remove)),
    ("history.get", Plain(history_get)),
    ("history.meta", Plain(history_meta)),
    ("history.setBinding", Plain(history_set_binding)),
    ("history.append", Plain(history_append)),
    ("history.replace", Plain(history_replace)),
    ("history.clear", Plain(history_clear)),
    ("history.removeAt", Plain(history_remove_at)),
    ("history.truncateFrom", Plain(history_truncate_from)),
    ("history.removeByAttachId", Plain(history_remove_by_attach_id)),
    ("history.removeLastPageContext", Plain(history_remove_last_page_context)),
    ("history.markImagesSeen", Plain(history_mark_images_seen)),
    ("history.branch", Plain(history_branch)),
    ("history.switchVersion", Plain(history_switch_version)),
    ("history.markFailed", Plain(history_mark_failed)),
    ("history.boundImages", Plain(history_bound_images)),
    ("history.attach", Plain(history_attach)),
    ("attach.trackChange", Plain(attach_track_change)),
    ("attach.summaryPlan", Plain(attach_summary_plan)),
    ("attach.applySummary", Plain(attach_apply_summary)),
    ("images.get", Plain(images_get)),
    ("images.thumbnail", Plain(images_thumbnail)),
    ("sessions.save", Plain(sessions_save)),
    ("sessions.list", Plain(sessions_list)),
    ("sessions.get", Plain(sessions_get)),
    ("sessions.load", Plain(sessions_load)),
    ("sessions.rename", Plain(sessions_rename)),
    ("sessions.pin", Plain(sessions_pin)),
    ("sessions.delete", Plain(sessions_delete)),
    ("sessions.clearAll", Plain(sessions_clear_all)),
    ("sessions.appendTo", Plain(sessions_append_to)),
    ("sessions.export", Plain(sessions_export)),
    ("sessions.evictionPlan", Plain(sessions_eviction_plan)),
    ("trash.list", Plain(trash_list)),
    ("trash.restore", Plain(trash_restore)),
    ("trash.purge", Plain(trash_purge)),
    ("storage.import", Plain(storage_import)),
    ("storage.importPreview", Plain(storage_import_preview)),
    ("changes.since", Plain(changes_since)),
    ("request.isContextOverflow", Plain(request_is_context_overflow)),
    ("request.build", Bodies(request_build)),
    ("request.commitRescue", Plain(request_commit_rescue)),
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

/// Run one operation with no connection memory (every `request.build` `since` is unknown).
/// Panics are caught here and reported as `internal`.
pub fn dispatch(ctx: &mut Ctx, op: &str, args: &Map<String, Value>) -> HostResult<Reply> {
    dispatch_with(ctx, &mut BodyCache::default(), op, args)
}

/// Run one operation with this connection's memory (`serve` keeps one `BodyCache` for the life
/// of the process). Panics are caught here and reported as `internal`.
pub fn dispatch_with(
    ctx: &mut Ctx,
    bodies: &mut BodyCache,
    op: &str,
    args: &Map<String, Value>,
) -> HostResult<Reply> {
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
    let run = || match handler {
        Handler::Plain(f) => f(store, args),
        Handler::Bodies(f) => f(store, bodies, args),
    };
    match catch_unwind(AssertUnwindSafe(run)) {
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

// ---- host -----------------------------------------------------------------------------------

/// Counts, sizes, schema and integrity (what `keepsake-host inspect` prints), and with
/// `doctor: true` the findings of `keepsake-host doctor --json`, run as a child process of this
/// binary so the checks see the installation exactly as the CLI does (its stdout is a pipe of
/// ours, never the browser's).
fn host_status(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["doctor"], false)?;
    let mut status = s.inspect()?;
    if a.opt_bool("doctor")? {
        status["doctor"] = run_doctor(s.path());
    }
    Ok(read(status))
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
    let a = Args::new(a, &["entry", "markImagesSeen", "copyVideoSrc", "fallbackName"], true)?;
    let crid = a.client_request_id()?;
    let entry = a.req_value("entry")?.clone();
    Ok(s.history_append(
        entry,
        a.opt_bool("markImagesSeen")?,
        a.opt_bool("copyVideoSrc")?,
        a.opt_str("fallbackName")?,
        crid.as_deref(),
    )?
    .into())
}

fn history_replace(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["entries", "fallbackName"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_replace(a.req_array("entries")?.clone(), a.opt_str("fallbackName")?, crid.as_deref())?
        .into())
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

fn history_branch(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["index", "entry", "markImagesSeen"], true)?;
    let crid = a.client_request_id()?;
    let entry = a.req_value("entry")?.clone();
    Ok(s.history_branch(a.req_index("index")?, entry, a.opt_bool("markImagesSeen")?, crid.as_deref())?.into())
}

fn history_switch_version(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["forkEntryId", "version"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.history_switch_version(a.req_str("forkEntryId")?, a.req_index("version")?, crid.as_deref())?.into())
}

fn history_mark_failed(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["index", "entryId", "code", "message"], true)?;
    let crid = a.client_request_id()?;
    let code = a.req_str("code")?;
    let message = a.req_str("message")?;
    if code.is_empty() || code.len() > 200 || message.len() > 8_000 {
        return Err(HostError::bad_request("code must be 1–200 bytes and message at most 8,000"));
    }
    let target = match (a.opt_str("entryId")?, a.opt_index("index")?) {
        (Some(id), None) => crate::store::FailedTarget::EntryId(id.to_owned()),
        (None, Some(i)) => crate::store::FailedTarget::Index(i),
        _ => return Err(HostError::bad_request("history.markFailed takes either entryId or index")),
    };
    Ok(s.history_mark_failed(target, code, message, crid.as_deref())?.into())
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
    Ok(read(Payload::Text(s.sessions_list(a.opt_str("query")?)?.to_json())))
}

fn sessions_get(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "images", "from", "limit"], false)?;
    let inline = crate::store::parse_images_mode(a.raw("images"))?;
    let from = a.opt_index("from")?.unwrap_or(0);
    Ok(read(s.sessions_get(a.req_str("id")?, inline, from, a.opt_index("limit")?)?))
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
    let a = Args::new(a, &["id", "entry", "copyVideoSrc", "fallbackName", "markImagesSeen"], true)?;
    let crid = a.client_request_id()?;
    let entry = a.req_value("entry")?.clone();
    let fallback = a.opt_str("fallbackName")?;
    let flags = crate::store::AppendFlags {
        copy_video_src: a.opt_bool("copyVideoSrc")?,
        mark_images_seen: a.opt_bool("markImagesSeen")?,
    };
    Ok(s.sessions_append_to(a.req_str("id")?, entry, flags, fallback, crid.as_deref())?.into())
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

fn sessions_eviction_plan(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["cap"], false)?;
    Ok(read(s.sessions_eviction_plan(a.req_index("cap")?)?))
}

// ---- trash ------------------------------------------------------------------------------------

fn trash_list(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    Args::new(a, &[], false)?;
    Ok(read(s.trash_list()?))
}

fn trash_restore(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.trash_restore(a.req_str("id")?, crid.as_deref())?.into())
}

fn trash_purge(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["id", "all"], true)?;
    let crid = a.client_request_id()?;
    let id = a.opt_str("id")?;
    let all = a.opt_bool("all")?;
    if id.is_some() == all {
        return Err(HostError::bad_request("trash.purge takes either id or all: true"));
    }
    Ok(s.trash_purge(id, crid.as_deref())?.into())
}

fn storage_import(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["document", "settings"], true)?;
    let crid = a.client_request_id()?;
    let settings = match a.opt_str("settings")? {
        None | Some("none") => SettingsMode::None,
        Some("keep") => SettingsMode::Keep,
        Some("overwrite") => SettingsMode::Overwrite,
        Some(o) => {
            return Err(HostError::bad_request(format!(
                "settings must be \"none\", \"keep\" or \"overwrite\", got {o:?}"
            )))
        }
    };
    Ok(s.storage_import(a.req_value("document")?, ImportOptions { settings }, crid.as_deref())?.into())
}

fn storage_import_preview(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["document"], false)?;
    Ok(read(s.storage_import_preview(a.req_value("document")?)?))
}

fn changes_since(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["seq"], false)?;
    let seq = a.req_index("seq")?;
    Ok(read(s.changes_since(seq.min(i64::MAX as u64) as i64)?))
}

// ---- images, attach and requests --------------------------------------------------------------

fn history_bound_images(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["budget"], true)?;
    let crid = a.client_request_id()?;
    let budget = a.opt_index("budget")?.map(|b| b.min(usize::MAX as u64) as usize);
    Ok(s.history_bound_images(budget.unwrap_or(UNSEEN_IMAGE_BYTES_BUDGET), crid.as_deref())?.into())
}

fn history_attach(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(
        a,
        &["ctx", "images", "placement", "summarySource", "paper", "videoSrc", "fallbackName"],
        true,
    )?;
    let crid = a.client_request_id()?;
    let ctx = PageCtx::from_json(a.req_value("ctx")?).map_err(HostError::bad_request)?;
    let images = match a.raw("images") {
        None => Vec::new(),
        Some(Value::Array(v)) => v.clone(),
        Some(_) => return Err(HostError::bad_request("images must be an array")),
    };
    let placement_end = match a.opt_str("placement")? {
        None | Some("anchors") => false,
        Some("end") => true,
        Some(o) => {
            return Err(HostError::bad_request(format!(
                "placement must be \"anchors\" or \"end\", got {o:?}"
            )))
        }
    };
    let video_src = match a.raw("videoSrc") {
        None => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => return Err(HostError::bad_request("videoSrc must be an object {platform, url, tabId}")),
    };
    let args = AttachArgs {
        ctx,
        images,
        placement_end,
        summary_source: a.opt_str("summarySource")?.map(str::to_owned),
        paper: a.opt_bool("paper")?,
        video_src,
        fallback_name: a.opt_str("fallbackName")?.map(str::to_owned),
    };
    let mut r: Reply = s.history_attach(args, crid.as_deref())?.into();
    // a replayed clientRequestId applied nothing, so there is nothing to bound either
    if r.event.is_some() {
        r.followup = Some(Followup::BoundImages);
    }
    Ok(r)
}

fn attach_track_change(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["mode", "url", "text"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.attach_track_change(a.req_str("mode")?, a.req_str("url")?, a.req_str("text")?, crid.as_deref())?
        .into())
}

fn attach_summary_plan(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["attachId"], false)?;
    Ok(read(s.attach_summary_plan(a.req_str("attachId")?)?))
}

fn attach_apply_summary(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["attachId", "summary"], true)?;
    let crid = a.client_request_id()?;
    Ok(s.attach_apply_summary(a.req_str("attachId")?, a.req_str("summary")?, crid.as_deref())?.into())
}

fn images_thumbnail(_s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["dataUrl", "maxEdge", "quality"], false)?;
    let url = a.req_str("dataUrl")?;
    let max_edge = a.opt_index("maxEdge")?.unwrap_or(THUMB_MAX_EDGE as u64);
    if !(1..=crate::imaging::MAX_SIDE as u64).contains(&max_edge) {
        return Err(HostError::bad_request(format!("maxEdge must be 1–{}", crate::imaging::MAX_SIDE)));
    }
    let quality = a.opt_index("quality")?.unwrap_or(THUMB_QUALITY as u64);
    if !(1..=100).contains(&quality) {
        return Err(HostError::bad_request("quality must be 1–100"));
    }
    let img = match decode_image_data_url(url, MAX_IMAGE_BYTES) {
        Ok(i) => i,
        Err(DataUrlError::NotImage) => {
            return Err(HostError::bad_request(
                "dataUrl must be a data:image/…;base64, URL with valid base64",
            ))
        }
        Err(DataUrlError::TooLarge { declared_bytes, cap }) => {
            return Err(HostError::too_large(format!(
                "image of about {declared_bytes} bytes exceeds the {cap}-byte cap"
            )))
        }
    };
    let rejected = |e: crate::imaging::Rejected| HostError::new(ErrorCode::ImageRejected, e.0);
    // already small enough: returned unchanged (after the same checks as any other image)
    if let Some((w, h)) = crate::imaging::dimensions(&img.bytes) {
        if w.max(h) as u64 <= max_edge && img.bytes.len() <= THUMB_PASS_BYTES {
            // decoding applies EXIF orientation, so the reported size is the one a browser shows
            let (w, h) = crate::imaging::oriented_size(&img.bytes).map_err(rejected)?;
            return Ok(read(json!({"dataUrl": url, "width": w, "height": h})));
        }
    }
    let t = crate::imaging::thumbnail(&img.bytes, max_edge as u32, quality as u8).map_err(rejected)?;
    Ok(read(
        json!({"dataUrl": canonical_data_url("image/jpeg", &t.jpeg), "width": t.width, "height": t.height}),
    ))
}

fn request_is_context_overflow(_s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["message"], false)?;
    Ok(read(json!(is_context_overflow(a.opt_str("message")?))))
}

fn pass_arg(v: Option<&Value>) -> HostResult<Pass> {
    let Some(v) = v else { return Ok(Pass::First) };
    let (kind, o) = match v {
        Value::String(k) => (k.as_str(), None),
        Value::Object(o) => (o.get("kind").and_then(Value::as_str).unwrap_or(""), Some(o)),
        _ => {
            return Err(HostError::bad_request("pass must be a string or {kind, previousReply, instruction}"))
        }
    };
    let field = |k: &str| -> HostResult<String> {
        match o.and_then(|o| o.get(k)) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(HostError::bad_request(format!("pass.{k} must be a string for a second pass"))),
        }
    };
    match kind {
        "first" => Ok(Pass::First),
        "continuation" => Ok(Pass::Continuation {
            previous_reply: field("previousReply")?,
            instruction: field("instruction")?,
        }),
        "timestampRewrite" => Ok(Pass::TimestampRewrite {
            previous_reply: field("previousReply")?,
            instruction: field("instruction")?,
        }),
        other => Err(HostError::bad_request(format!(
            "pass.kind must be first, continuation or timestampRewrite, got {other:?}"
        ))),
    }
}

fn image_refs_arg(v: Option<&Value>) -> HostResult<ImageRefsMode> {
    match v {
        None | Some(Value::Bool(false)) => Ok(ImageRefsMode::Inline),
        Some(Value::Bool(true)) => Ok(ImageRefsMode::All),
        Some(Value::Array(list)) => list
            .iter()
            .map(|x| {
                x.as_str()
                    .filter(|s| crate::domain::entry::parse_image_ref(s).is_some())
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        HostError::bad_request(
                            "imageRefs entries must be keepsake-image:sha256:<hex> references",
                        )
                    })
            })
            .collect::<HostResult<_>>()
            .map(ImageRefsMode::Held),
        Some(_) => Err(HostError::bad_request("imageRefs must be a boolean or a list of held references")),
    }
}

fn request_build(s: &mut Store, bodies: &mut BodyCache, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(
        a,
        &[
            "kind",
            "turn",
            "systemPrompt",
            "bodyFields",
            "source",
            "upTo",
            "pass",
            "rescue",
            "backfill",
            "aging",
            "imageRefs",
            "since",
            "retry",
        ],
        false,
    )?;
    // PROTOCOL.md "Body deltas": with `since` the body comes back as text or as a delta
    let since = match a.raw("since") {
        None => None,
        Some(Value::String(h)) => Some(h.as_str()),
        Some(_) => {
            return Err(HostError::bad_request(
                "since must be a string: the bodyHash of a body this port received, or \"\"",
            ))
        }
    };
    let kind = Kind::parse(a.req_str("kind")?)
        .ok_or_else(|| HostError::bad_request("kind must be chat, responses, anthropic, runs or agent"))?;
    let turn = match a.raw("turn") {
        None => Map::new(),
        Some(Value::Object(t)) => t.clone(),
        Some(_) => return Err(HostError::bad_request("turn must be an object {userText, images}")),
    };
    let user_text = match turn.get("userText") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(_) => return Err(HostError::bad_request("turn.userText must be a string")),
    };
    let images = match turn.get("images") {
        None | Some(Value::Null) => None,
        Some(Value::Array(v)) => Some(v.clone()),
        Some(_) => return Err(HostError::bad_request("turn.images must be an array")),
    };
    let body_fields = match a.raw("bodyFields") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(HostError::bad_request("bodyFields must be an object")),
    };
    let source_session = match a.raw("source") {
        None => None,
        Some(Value::Object(o)) => match o.get("sessionId") {
            Some(Value::String(id)) => Some(id.clone()),
            None | Some(Value::Null) => None,
            _ => return Err(HostError::bad_request("source.sessionId must be a string")),
        },
        Some(_) => return Err(HostError::bad_request("source must be an object {sessionId}")),
    };
    let rescue = match a.raw("rescue") {
        None => None,
        Some(Value::Object(o)) => {
            Some(o.get("errorMessage").and_then(Value::as_str).unwrap_or("").to_owned())
        }
        Some(_) => return Err(HostError::bad_request("rescue must be an object {errorMessage}")),
    };
    let mut aging = AgeOptions::default();
    match a.raw("aging") {
        None => {}
        Some(Value::Object(o)) => {
            if let Some(v) = o.get("minUserTurnsAfter") {
                aging.min_user_turns_after = parse_index(Some(v))
                    .map_err(|m| HostError::bad_request(format!("aging.minUserTurnsAfter {m}")))?
                    as usize;
            }
            if let Some(v) = o.get("minChars") {
                aging.min_chars = parse_index(Some(v))
                    .map_err(|m| HostError::bad_request(format!("aging.minChars {m}")))?
                    as usize;
            }
        }
        Some(_) => {
            return Err(HostError::bad_request("aging must be an object {minUserTurnsAfter, minChars}"))
        }
    }
    let system_prompt = a.opt_str("systemPrompt")?.map(str::to_owned);
    let args = BuildArgs {
        kind,
        user_text,
        images,
        system_prompt,
        body_fields,
        source_session,
        up_to: a.opt_index("upTo")?,
        pass: pass_arg(a.raw("pass"))?,
        rescue,
        backfill: a.opt_bool("backfill")?,
        aging,
        image_refs: image_refs_arg(a.raw("imageRefs"))?,
        retry: a.opt_index("retry")?,
    };
    if args.retry.is_some() && (!args.user_text.is_empty() || args.images.is_some()) {
        return Err(HostError::bad_request(
            "retry resends a stored user entry: turn must be empty (its text and images are the entry's)",
        ));
    }
    let result = s.request_build(args)?;
    Ok(read(match since {
        Some(since) => text_result(result, since, bodies),
        None => result,
    }))
}

fn request_commit_rescue(s: &mut Store, a: &Map<String, Value>) -> HostResult<Reply> {
    let a = Args::new(a, &["attachIds", "sessionId"], true)?;
    let crid = a.client_request_id()?;
    let ids = a.req_string_list("attachIds")?;
    Ok(s.request_commit_rescue(&ids, a.opt_str("sessionId")?, crid.as_deref())?.into())
}
