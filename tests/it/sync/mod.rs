//! Sync's core (issue 31, docs/sync.md): the replicated state, its merge and its layout as rows,
//! recording local writes, applying other devices' operations — on real SQLite files through the
//! library's `Store`, with an in-process folder that carries each device's sealed batches the way
//! the transport does (whole files only, any order, any number of times).
//!
//! - `round_trip`: local rows → state → rows again is the identity for chats made by every
//!   write path;
//! - `merge`: the merge rules on two and three devices (concurrent continuations, purge, trash,
//!   eviction, settings, pictures);
//! - `properties`: random operation sequences on three devices with random delivery converge;
//! - `crash`: kill -9 during apply, hundreds of times: every batch applied exactly once.
//! - `cost`: what recording costs an append to a long chat (printed; a wide bound only).
//!
//! The transport and the surface, with the real binary (the sealed folder, `sync init`/`join`,
//! the serving host's threads) and real Syncthing on loopback:
//!
//! - `replication`: the Syncthing harness (`syncthing.rs`) itself;
//! - `privacy`: no word typed, picture or key in the folder; a wrong key changes nothing; a
//!   flipped byte is refused and reported;
//! - `crash_writer`: kill -9 while a host writes segments, hundreds of times (T31);
//! - `converge`: two hosts through two Syncthing instances, with a paused stretch (T32);
//! - `surface`: `sync init/status/pause/resume/leave`, the `sync.*` operations, `doctor`; a chat
//!   continued elsewhere reaches the open panel; replies never wait for a catch-up;
//! - `figures`: bytes in the folder per byte stored, a new device catching up (seconds, peak RSS,
//!   operations/s): BENCHMARKS.md "Sync" (`BENCH_ONLY=sync ./bench.sh`).

mod cost;
mod crash;
mod merge;
mod properties;
mod round_trip;

mod common;
mod syncthing;

mod converge;
mod crash_writer;
mod figures;
mod privacy;
mod replication;
mod surface;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use keepsake_host::domain::new_entry::NewEntry;
use keepsake_host::domain::sync::settings::SYNCED_SETTINGS;
use keepsake_host::store::{ApplyOutcome, ExportFormat, Store};
use serde_json::{json, Value};

pub const HOUR: i64 = 60 * 60 * 1000;

pub fn entry(v: Value) -> NewEntry {
    NewEntry::from_value(v).unwrap()
}

/// One sealed batch of a device's operations, as a segment file carries them.
#[derive(Debug, Clone)]
pub struct Segment {
    pub dev: String,
    pub seq: u64,
    pub ops: Vec<String>,
}

/// What the folder holds: every device's segments and the pictures they need.
#[derive(Default)]
pub struct Folder {
    pub segments: Vec<Segment>,
    pub blobs: BTreeMap<String, (String, Vec<u8>)>,
}

/// A device: its own database file, clock (a shared base plus this device's skew) and id.
pub struct Dev {
    pub s: Store,
    pub id: String,
    pub next_segment: u64,
    _dir: tempfile::TempDir,
}

impl Dev {
    pub fn new(id: &str, clock: Arc<AtomicI64>, skew: i64) -> Dev {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("keepsake.db")).unwrap();
        let c = Arc::clone(&clock);
        s.set_clock(Arc::new(move || c.load(Ordering::SeqCst) + skew));
        s.sync_setup(id, &format!("device {id}")).unwrap();
        Dev { s, id: id.to_owned(), next_segment: 1, _dir: dir }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.s.path().to_path_buf()
    }

    /// Seal up to `limit` waiting operations into the next segment (and their pictures into
    /// the folder), as the transport's writer does.
    pub fn seal_some(&mut self, folder: &mut Folder, limit: usize) -> Option<Segment> {
        let ops = self.s.sync_outbox(limit).unwrap();
        let last = ops.last()?.seq;
        for op in &ops {
            for sha in &op.blobs {
                if !folder.blobs.contains_key(sha) {
                    let b = self.s.sync_blob(sha).unwrap().expect("a picture an operation needs is stored");
                    folder.blobs.insert(sha.clone(), b);
                }
            }
        }
        let seg = Segment {
            dev: self.id.clone(),
            seq: self.next_segment,
            ops: ops.into_iter().map(|o| o.json).collect(),
        };
        self.next_segment += 1;
        self.s.sync_outbox_sealed(last).unwrap();
        folder.segments.push(seg.clone());
        Some(seg)
    }

    pub fn seal(&mut self, folder: &mut Folder) -> Option<Segment> {
        self.seal_some(folder, usize::MAX)
    }

    /// Apply a segment as the reader does: pictures fetched from the folder when it is pending.
    pub fn apply(&mut self, seg: &Segment, folder: &Folder) -> ApplyOutcome {
        let r = self.s.sync_apply(&seg.dev, seg.seq, &seg.ops).unwrap();
        match r.outcome {
            ApplyOutcome::Pending { missing_blobs } => {
                for sha in &missing_blobs {
                    let (mime, bytes) = folder.blobs.get(sha).expect("the folder has the picture").clone();
                    self.s.sync_put_blob(sha, &mime, bytes).unwrap();
                }
                let again = self.s.sync_apply(&seg.dev, seg.seq, &seg.ops).unwrap();
                assert!(!matches!(again.outcome, ApplyOutcome::Pending { .. }), "still pending: {again:?}");
                again.outcome
            }
            o => o,
        }
    }

    /// Apply every segment in the folder not from this device.
    pub fn catch_up(&mut self, folder: &Folder) {
        let segs: Vec<Segment> = folder.segments.iter().filter(|s| s.dev != self.id).cloned().collect();
        for s in &segs {
            self.apply(s, folder);
        }
    }

    pub fn append(&mut self, role: &str, text: &str) -> Value {
        self.s
            .history_append(entry(json!({"role": role, "content": text})), false, false, None, None)
            .unwrap()
            .result
    }

    pub fn live(&mut self) -> Value {
        self.s.history_get(keepsake_host::store::Page { from: 0, limit: None, inline: false }).unwrap()
    }

    pub fn drawer(&mut self) -> Vec<String> {
        self.s.sessions_list(None, None, None).unwrap().rows().into_iter().map(|r| r.id).collect()
    }

    pub fn trash(&mut self) -> Vec<Value> {
        self.s.trash_list().unwrap()["items"].as_array().unwrap().clone()
    }
}

/// Seal every device's outbox, then apply everything everywhere until nothing new arrives.
pub fn settle(devs: &mut [&mut Dev], folder: &mut Folder) {
    for _ in 0..4 {
        let mut any = false;
        for d in devs.iter_mut() {
            any |= d.seal(folder).is_some();
        }
        for d in devs.iter_mut() {
            d.catch_up(folder);
        }
        if !any {
            break;
        }
    }
}

/// What a person sees on a device, through the product's own read paths, without what is this
/// device's own (the live window, drawer tie order, insert order): every chat in the drawer and
/// in the trash exported whole (chosen path and every version), the trash items, the synced
/// settings.
pub fn dump(s: &mut Store) -> Value {
    let mut drawer: Vec<Value> = s
        .sessions_list(None, None, None)
        .unwrap()
        .rows()
        .into_iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    // which device a chat came from is said relative to the device that shows it
    for r in &mut drawer {
        r.as_object_mut().unwrap().remove("device");
    }
    drawer.sort_by_key(|r| r["id"].as_str().unwrap().to_owned());
    let mut trash = s.trash_list().unwrap()["items"].as_array().unwrap().clone();
    trash.sort_by_key(|r| r["id"].as_str().unwrap().to_owned());
    let ids: Vec<String> = drawer
        .iter()
        .chain(&trash)
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut chats = Vec::new();
    if !ids.is_empty() {
        let doc = s.sessions_export(&ids, ExportFormat::Json).unwrap();
        let doc: Value = serde_json::from_str(doc["text"].as_str().unwrap()).unwrap();
        chats = doc["sessions"].as_array().unwrap().clone();
        chats.sort_by_key(|c| c["id"].as_str().unwrap().to_owned());
    }
    let keys: Vec<String> = SYNCED_SETTINGS.iter().map(|k| k.to_string()).collect();
    let settings = s.settings_get(&keys).unwrap();
    json!({"drawer": drawer, "trash": trash, "chats": chats, "settings": settings})
}

/// The first difference between two dumps, as a path and the two values (for a readable failure).
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                let (va, vb) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
                if let Some(d) = first_difference(va, vb, &format!("{path}.{k}")) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            let at = x.iter().zip(y).position(|(va, vb)| va != vb).unwrap_or(x.len().min(y.len()));
            if at < x.len() && at < y.len() {
                return first_difference(&x[at], &y[at], &format!("{path}[{at}]"));
            }
            let (va, vb) = (x.get(at).unwrap_or(&Value::Null), y.get(at).unwrap_or(&Value::Null));
            (x.len() != y.len())
                .then(|| format!("{path}[{at}] (lengths {} and {}): {va} vs {vb}", x.len(), y.len()))
        }
        _ if a == b => None,
        _ => {
            let cut = |v: &Value| v.to_string().chars().take(400).collect::<String>();
            Some(format!("{path}: {} vs {}", cut(a), cut(b)))
        }
    }
}
