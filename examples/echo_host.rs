//! A raw native messaging host for the benchmark (./bench.sh, scenario 9): the channel's floor with
//! no database, no base64 encoding and no request logic. `bench/run.mjs` registers it as
//! `dev.keepsake.bench_echo` for the temp profile only.
//!
//! Frames are read and written like keepsake-host's (4-byte native-endian length + UTF-8 JSON,
//! `keepsake_host::protocol::frame`). Each request gets:
//!
//! - `{"op": "host.hello"}` → `{"id", "ok": true, "result": {"name": "bench-echo", "protocolVersion": PROTOCOL_VERSION}}`,
//!   so the extension's real NativePort can open it;
//! - `{"op": "bench.reply", "args": {"mime": M, "chars": N}}` → the reply `images.get` gives for an
//!   image whose base64 is N chars long, `{"id", "ok": true, "result": {"mime": M, "bytes": "<N chars>"}}`,
//!   cut into chunk frames by keepsake-host's own `frames_for_reply` and written with one
//!   `write_all`. The N base64 chars are built once per size and kept, so a reply costs only the
//!   copy into the reply text, the chunking and the pipe;
//! - `{"op": "bench.replay", "args": {"file": F}}` → `{"id", "ok": true, "result": <the JSON text in F>}`
//!   (read once and kept), cut and written the same way: the channel's floor for a reply keepsake-host
//!   gave (scenario 8 writes a `sessions.list` result there); with `"spinUs": N` the host first
//!   keeps its CPU busy for N µs, like a host that works that long before it answers;
//! - anything else: the request frame's bytes, echoed back unchanged.
//!
//! Run: `cargo build --release --example echo_host` (target/release/examples/echo_host).

use std::collections::HashMap;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use serde_json::Value;

use keepsake_host::protocol::chunk::frames_for_reply;
use keepsake_host::protocol::frame::read_frame;
use keepsake_host::protocol::limits::{MAX_INBOUND_FRAME, PROTOCOL_VERSION};

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn framed(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(&(body.len() as u32).to_ne_bytes());
    out.extend_from_slice(body);
}

fn main() -> io::Result<()> {
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    let mut payloads: HashMap<usize, String> = HashMap::new();
    let mut files: HashMap<String, String> = HashMap::new();
    loop {
        let frame = match read_frame(&mut input, MAX_INBOUND_FRAME) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(()),
            Err(e) => return Err(io::Error::other(e.to_string())),
        };
        let req: Value = serde_json::from_slice(&frame).unwrap_or(Value::Null);
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let mut out = Vec::new();
        match req.get("op").and_then(Value::as_str) {
            Some("host.hello") => {
                let reply = serde_json::json!({"id": id, "ok": true,
                    "result": {"name": "bench-echo", "protocolVersion": PROTOCOL_VERSION}});
                framed(&mut out, reply.to_string().as_bytes());
            }
            Some("bench.reply") => {
                let args = req.get("args").cloned().unwrap_or(Value::Null);
                let mime = args.get("mime").and_then(Value::as_str).unwrap_or("image/png").to_owned();
                let chars = args.get("chars").and_then(Value::as_u64).unwrap_or(0) as usize;
                let data = payloads
                    .entry(chars)
                    .or_insert_with(|| (0..chars).map(|i| B64[(i * 7 + i / 64) % 64] as char).collect());
                let text = format!(
                    "{{\"id\":{id},\"ok\":true,\"result\":{{\"mime\":{},\"bytes\":\"{data}\"}}}}",
                    Value::String(mime)
                );
                for f in frames_for_reply(&id, text) {
                    framed(&mut out, f.as_bytes());
                }
            }
            Some("bench.replay") => {
                let file = req.pointer("/args/file").and_then(Value::as_str).unwrap_or("").to_owned();
                let result = match files.get(&file) {
                    Some(r) => r,
                    None => {
                        let text = std::fs::read_to_string(&file).unwrap_or_else(|_| "null".to_owned());
                        files.entry(file).or_insert(text)
                    }
                };
                if let Some(us) = req.pointer("/args/spinUs").and_then(Value::as_u64) {
                    // a host that works this long before it answers (CPU busy, as keepsake-host is)
                    let until = Instant::now() + Duration::from_micros(us);
                    // no `spin_loop` (PAUSE): a hypervisor may take a pausing vCPU off its core
                    let mut x = 1u64;
                    while Instant::now() < until {
                        for _ in 0..64 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                    }
                }
                let text = format!("{{\"id\":{id},\"ok\":true,\"result\":{result}}}");
                for f in frames_for_reply(&id, text) {
                    framed(&mut out, f.as_bytes());
                }
            }
            _ => framed(&mut out, &frame),
        }
        output.write_all(&out)?;
        output.flush()?;
    }
}
