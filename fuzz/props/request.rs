//! `request_decode`: arbitrary bytes as one frame body, through what the server does with it:
//! `decode_request` (envelope), then `dispatch` (argument validation and the handler of every
//! operation in the table, on a real store in a temporary directory), then the reply frames.
//!
//! Properties:
//!
//! 1. **The envelope agrees with an independent reading of the spec** (PROTOCOL.md, reliability
//!    §8): empty, non-UTF-8, non-JSON and non-object bodies, a missing or invalid `id`, a missing
//!    or non-string `op`, non-object `args` and extra envelope fields are `bad_request`; the
//!    recovered id is `null` until a valid `id` was seen. A frame over the memory budget (nesting
//!    over 127, over 100,000 values, a string over 48 MiB, counted independently here) is
//!    `too_large`, with the request's id when the frame's envelope is otherwise valid.
//! 2. **Errors are typed**: an operation's failure is one of the codes a request can cause
//!    (`bad_request`, `not_found`, `conflict`, `too_large`, `unsupported`, `unknown_op`,
//!    `image_rejected`), never `internal` (a bug or a caught panic), `busy` or a database-state
//!    code; an operation outside the table is `unknown_op`.
//! 3. **Replies fit the wire**: every frame of the reply (whole or chunked) is ≤ 1,048,576 bytes
//!    of JSON, starts with the request's id, and the chunks reassemble to the reply exactly.
//! 4. **Ids come back as sent**: a numeric id, read the way a JavaScript client reads JSON
//!    (correctly rounded), is the same number in the request text and in the reply.
//!
//! The store is one database per process in a temporary directory (`/dev/shm` when present),
//! replaced by a fresh one every [`RESET_EVERY`] requests so state stays small. `host.status`
//! with `doctor: true` is not dispatched: it re-runs the current executable as the CLI, and here
//! that executable is the fuzzer or the test binary.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use keepsake_host::protocol::chunk::frames_for_reply;
use keepsake_host::protocol::envelope::{decode_request, error_reply, payload_reply};
use keepsake_host::protocol::limits::{MAX_OUTBOUND_FRAME, REQUEST_ID_MAX};
use keepsake_host::protocol::ErrorCode;
use keepsake_host::server::dispatch::{dispatch, op_names, Ctx};
use keepsake_host::store::Store;
use serde_json::{Map, Value};

/// Requests served by one database before it is replaced.
pub const RESET_EVERY: usize = 256;

struct Session {
    dir: PathBuf,
    generation: usize,
    served: usize,
    ctx: Ctx,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

fn base_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("KEEPSAKE_FUZZ_DIR") {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Remove directories left by earlier processes that are gone (a fuzzer is usually killed).
fn sweep(base: &Path) {
    let Ok(rd) = std::fs::read_dir(base) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("keepsake-fuzz-") else { continue };
        if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn open(dir: &Path, generation: usize) -> Ctx {
    let db_path = dir.join(format!("fuzz-{generation}.db"));
    match Store::open(&db_path) {
        Ok(mut s) => {
            // a fuzz run never writes to the machine's secret store: keys stay in the file
            s.set_secret_store(std::sync::Arc::new(keepsake_host::secrets::Off("fuzz run".into())));
            let mut ctx = Ctx::new(db_path);
            ctx.store = Some(Ok(s));
            ctx.next_expiry_look = std::time::Instant::now();
            ctx.keys_move_due = false;
            ctx
        }
        Err(e) => panic!("cannot open the fuzz store at {}: {e}", db_path.display()),
    }
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

fn with_ctx<T>(f: impl FnOnce(&mut Ctx) -> T) -> T {
    let mut guard = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let session = guard.get_or_insert_with(|| {
        let base = base_dir();
        sweep(&base);
        let dir = base.join(format!("keepsake-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the fuzz store directory");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let ctx = open(&dir, 0);
        Session { dir, generation: 0, served: 0, ctx }
    });
    if session.served >= RESET_EVERY {
        let old = session.ctx.store.take();
        if let Some(Ok(s)) = old {
            s.close();
        }
        remove_db(&session.ctx.db_path);
        session.generation += 1;
        session.served = 0;
        session.ctx = open(&session.dir, session.generation);
    }
    session.served += 1;
    f(&mut session.ctx)
}

/// Close the store and delete this process's directory (the corpus replay calls it at the end).
pub fn finish() {
    let mut guard = SESSION.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = guard.take() {
        if let Some(Ok(store)) = s.ctx.store {
            store.close();
        }
        let _ = std::fs::remove_dir_all(&s.dir);
    }
}

fn valid_id(v: &Value) -> bool {
    match v {
        Value::String(s) => s.len() <= REQUEST_ID_MAX,
        Value::Number(_) => true,
        _ => false,
    }
}

/// The envelope rule, read from PROTOCOL.md: `Ok((id, op, args))` or `Err(recovered id)`.
fn envelope_oracle(body: &[u8]) -> Result<(Value, String, Map<String, Value>), Value> {
    let text = std::str::from_utf8(body).map_err(|_| Value::Null)?;
    let v: Value = serde_json::from_str(text).map_err(|_| Value::Null)?;
    let Value::Object(obj) = v else { return Err(Value::Null) };
    let id = match obj.get("id") {
        Some(id) if valid_id(id) => id.clone(),
        _ => return Err(Value::Null),
    };
    let Some(Value::String(op)) = obj.get("op") else { return Err(id) };
    let args = match obj.get("args") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(id),
    };
    if obj.keys().any(|k| !matches!(k.as_str(), "id" | "op" | "args")) {
        return Err(id);
    }
    Ok((id, op.clone(), args))
}

/// Which part of the memory budget a valid-UTF-8 `body` exceeds, counted independently of the
/// host: nesting by brackets outside strings, values and the longest string from the parsed
/// tree (keys counted as values). `None` when it is within the budget or not UTF-8.
fn over_budget(body: &[u8]) -> Option<&'static str> {
    use keepsake_host::protocol::limits::{MAX_FRAME_DEPTH, MAX_FRAME_VALUES, MAX_STRING_BYTES};
    let text = std::str::from_utf8(body).ok()?;
    let (mut depth, mut max_depth, mut in_str, mut esc) = (0usize, 0usize, false, false);
    let (mut run, mut longest) = (0usize, 0usize);
    for &c in text.as_bytes() {
        if in_str {
            if esc {
                esc = false;
                run += 1;
            } else if c == b'\\' {
                esc = true;
                run += 1;
            } else if c == b'"' {
                in_str = false;
                longest = longest.max(run);
            } else {
                run += 1;
            }
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                run = 0;
            }
            b'[' | b'{' => {
                depth += 1;
                max_depth = max_depth.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if in_str {
        longest = longest.max(run);
    }
    if max_depth > MAX_FRAME_DEPTH {
        return Some("depth");
    }
    if longest > MAX_STRING_BYTES {
        return Some("string");
    }
    fn nodes(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(nodes).sum(),
            Value::Object(m) => m.values().map(|x| 1 + nodes(x)).sum(),
            _ => 0,
        }
    }
    let v: Value = serde_json::from_str(text).ok()?;
    (nodes(&v) > MAX_FRAME_VALUES).then_some("values")
}

/// Byte length of the JSON value at the start of `s` (which is valid JSON text).
fn value_len(s: &[u8]) -> usize {
    let (mut depth, mut i, mut in_str) = (0usize, 0usize, false);
    while i < s.len() {
        let c = s[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => {
                    in_str = false;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return i,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return i,
                _ => {}
            }
        }
        i += 1;
    }
    s.len()
}

/// The raw text of the top-level `id` member of a body that decoded as a request object (the
/// last one, as the decoder keeps the last of duplicate keys).
fn raw_id(body: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(body).ok()?;
    let b = text.as_bytes();
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    let mut i = 0;
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = None;
    loop {
        ws(&mut i);
        if b.get(i) != Some(&b'"') {
            return found;
        }
        let klen = value_len(&b[i..]);
        let key: String = serde_json::from_str(&text[i..i + klen]).ok()?;
        i += klen;
        ws(&mut i);
        i += 1; // ':'
        ws(&mut i);
        let vlen = value_len(&b[i..]);
        if key == "id" {
            found = Some(&text[i..i + vlen]);
        }
        i += vlen;
        ws(&mut i);
        if b.get(i) != Some(&b',') {
            return found;
        }
        i += 1;
    }
}

/// A numeric id comes back as the number the client sent: what a JavaScript client reads from the
/// reply (`JSON.parse`, correctly rounded) equals what it wrote.
fn check_id_fidelity(body: &[u8], id: &Value) {
    let Value::Number(_) = id else { return };
    let Some(sent) = raw_id(body) else { panic!("no raw id found in a decoded request") };
    let echoed = serde_json::to_string(id).expect("a number serialises");
    let (a, b) = (sent.parse::<f64>(), echoed.parse::<f64>());
    assert!(
        matches!((a, b), (Ok(a), Ok(b)) if a == b),
        "numeric id {sent} comes back as {echoed}: a client would not match the reply"
    );
}

/// Every frame carries `id`, fits the outbound cap, and the frames give back `reply`.
fn check_frames(id: &Value, reply: &str) {
    let id_text = serde_json::to_string(id).expect("an id serialises");
    assert!(reply.starts_with(&format!("{{\"id\":{id_text},")), "reply does not start with the id");
    let v: Value = serde_json::from_str(reply).expect("the reply is JSON");
    assert!(v.is_object(), "the reply is an object");
    let frames = frames_for_reply(id, reply.to_owned());
    assert!(!frames.is_empty());
    if frames.len() == 1 {
        assert!(frames[0].len() <= MAX_OUTBOUND_FRAME, "whole reply frame of {} B", frames[0].len());
        assert_eq!(frames[0], reply);
        return;
    }
    let mut joined = String::with_capacity(reply.len());
    for (i, f) in frames.iter().enumerate() {
        assert!(f.len() <= MAX_OUTBOUND_FRAME, "chunk frame {i} of {} B", f.len());
        let c: Value = serde_json::from_str(f).expect("a chunk frame is JSON");
        assert!(f.starts_with(&format!("{{\"id\":{id_text},")), "chunk {i} does not start with the id");
        assert_eq!(c["chunk"]["index"], i, "chunk index");
        assert_eq!(c["chunk"]["count"], frames.len(), "chunk count");
        joined.push_str(c["data"].as_str().expect("chunk data is a string"));
    }
    assert_eq!(joined, reply, "chunks reassemble to the reply");
}

fn allowed_failure(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::BadRequest
            | ErrorCode::NotFound
            | ErrorCode::Conflict
            | ErrorCode::TooLarge
            | ErrorCode::Unsupported
            | ErrorCode::UnknownOp
            | ErrorCode::ImageRejected
    )
}

/// Would this request make the host start a child process (see the module comment)?
fn spawns_child(op: &str, args: &Map<String, Value>) -> bool {
    op == "host.status" && args.get("doctor") == Some(&Value::Bool(true))
}

pub fn check(body: &[u8]) {
    let expected = envelope_oracle(body);
    let req = match (decode_request(body), expected) {
        (Ok(req), Ok((id, op, args))) => {
            assert_eq!((&req.id, &req.op, &req.args), (&id, &op, &args), "decoded envelope");
            check_id_fidelity(body, &req.id);
            req
        }
        (Err(rej), _) if rej.error.code == ErrorCode::TooLarge => {
            // the memory budget (PROTOCOL.md §1): an independent count says the frame is over it
            over_budget(body)
                .unwrap_or_else(|| panic!("too_large for a frame within the budget: {}", rej.error));
            assert!(rej.error.message.contains("limit"), "{}", rej.error);
            let (Ok((id, _, _)) | Err(id)) = envelope_oracle(body);
            if !id.is_null() {
                assert_eq!(rej.id, id, "recovered id");
            }
            check_frames(&rej.id, &error_reply(&rej.id, &rej.error));
            return;
        }
        (Err(rej), Err(id)) => {
            assert_eq!(rej.error.code, ErrorCode::BadRequest, "envelope error code: {}", rej.error);
            assert_eq!(rej.id, id, "recovered id");
            assert!(!rej.error.message.is_empty());
            check_frames(&rej.id, &error_reply(&rej.id, &rej.error));
            return;
        }
        (got, want) => panic!("decode_request gave {got:?}, the envelope rule says {want:?}"),
    };
    if spawns_child(&req.op, &req.args) {
        return;
    }
    let outcome = with_ctx(|ctx| dispatch(ctx, &req.op, &req.args));
    let known = op_names().contains(&req.op.as_str());
    match outcome {
        Ok(r) => {
            assert!(known, "unknown op {:?} succeeded", req.op);
            check_frames(&req.id, &payload_reply(&req.id, &r.result));
        }
        Err(e) => {
            assert!(allowed_failure(e.code), "{} answered {}", req.op, e);
            assert_eq!(e.code == ErrorCode::UnknownOp, !known, "{} answered {}", req.op, e);
            check_frames(&req.id, &error_reply(&req.id, &e));
        }
    }
}
