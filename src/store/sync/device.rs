//! The sync seam the transport uses (docs/sync.md "The tables"): this device (set up, paused,
//! forgotten), the outbox of operations to seal, what was applied from whom, checkpoints,
//! pictures in and out, status counts, and which device each chat came from. The transport
//! (`src/sync/`) reads and writes the folder; everything here is one transaction.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use serde_json::{json, Value};

use super::apply::collect_unkept;
use super::recorder::RELAID_META;
use super::state::{self, Applied};
use crate::domain::import::sha256_hex;
use crate::domain::ingest::blob_from_bytes;
use crate::domain::sync::op::{StateDoc, Tombstone, OP_VERSION};
use crate::domain::sync::ranges::Ranges;
use crate::domain::sync::stamp::Stamp;
use crate::protocol::{HostError, HostResult};
use crate::store::blobs::get_blob;
use crate::store::connection::{Store, WriteOutcome};

/// This device as sync knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncDevice {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub paused: bool,
}

/// An operation waiting to be sealed: its number, stamp, JSON and the pictures it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxOp {
    pub seq: u64,
    pub stamp: String,
    pub json: String,
    pub blobs: Vec<String>,
}

/// What was applied from one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerApplied {
    pub dev: String,
    pub segments: Ranges,
    pub ops: Ranges,
    pub checkpoint: Option<u64>,
}

/// A checkpoint: the whole state (`json`, a document `sync_apply_checkpoint` reads) and the
/// operations it holds per device (`vector`, also inside `json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub vector: BTreeMap<String, Vec<(u64, u64)>>,
    pub json: String,
}

/// One other device in `sync status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    pub id: String,
    pub name: Option<String>,
    pub ops_applied: u64,
    pub segments_applied: u64,
    pub last_applied_at: Option<i64>,
    /// Segments (and checkpoints) waiting for pictures: `(kind, number, pictures missing)`.
    pub pending: Vec<(String, u64, usize)>,
}

/// The counts behind `sync status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncCounts {
    pub device: Option<SyncDevice>,
    /// Operations recorded here and not sealed yet.
    pub outbox: u64,
    /// Operations this device has recorded in all.
    pub recorded: u64,
    /// Local writes whose rows were laid out again to match the state (0 unless the state
    /// cannot hold a shape the store wrote: a bug to report).
    pub relaid: u64,
    pub peers: Vec<PeerStatus>,
}

const SYNC_TABLES: [&str; 13] = [
    "sync_sessions",
    "sync_entries",
    "sync_settings",
    "sync_tombstones",
    "sync_outbox",
    "sync_peers",
    "sync_applied_segments",
    "sync_applied_ops",
    "sync_pending",
    "sync_blobs",
    "sync_dropped",
    "sync_dirty",
    "sync_device",
];

impl Store {
    /// This device, once `sync init` / `sync join` set it up.
    pub fn sync_device(&mut self) -> HostResult<Option<SyncDevice>> {
        self.read(|tx| {
            Ok(state::device(tx)?.map(|d| SyncDevice {
                id: d.id,
                name: d.name,
                created_at: d.created_at,
                paused: d.paused,
            }))
        })
    }

    /// Set sync up as device `id` named `name`. The chats and synced settings this database has
    /// are recorded as this device's first operations in the same write (every register, as a
    /// new device's first write). Setting up again with the same id renames; another id while
    /// one is set up is `conflict` (`sync leave` first).
    pub fn sync_setup(&mut self, id: &str, name: &str) -> HostResult<WriteOutcome> {
        if id.is_empty() || id.len() > crate::domain::sync::op::ID_MAX || id.chars().any(char::is_control) {
            return Err(HostError::bad_request("a device id is 1–128 characters"));
        }
        self.write("sync.setup", None, |w| {
            if let Some(d) = state::device(&w.tx)? {
                if d.id != id {
                    return Err(HostError::conflict(format!(
                        "sync is set up here already as device {}; leave first (keepsake-host sync leave)",
                        d.id
                    )));
                }
                w.tx.execute("UPDATE sync_device SET name = ?1 WHERE id = 1", [name])?;
                return Ok(json!({"deviceId": id, "created": false}));
            }
            w.tx.execute(
                "INSERT INTO sync_device (id, device_id, name, created_at, paused, hlc_wall, hlc_counter, next_seq)
                 VALUES (1, ?1, ?2, ?3, 0, 0, 0, 1)",
                params![id, name, w.now],
            )?;
            // everything there is, recorded by this write's recorder
            w.tx.execute("INSERT OR IGNORE INTO sync_dirty (kind, id) SELECT 'session', id FROM sessions", [])?;
            w.tx.execute("INSERT OR IGNORE INTO sync_dirty (kind, id) SELECT 'setting', key FROM settings", [])?;
            Ok(json!({"deviceId": id, "created": true}))
        })
    }

    /// `sync pause` / `sync resume`: the folder is left alone while paused; writes are still
    /// recorded and sealed once it resumes.
    pub fn sync_set_paused(&mut self, paused: bool) -> HostResult<WriteOutcome> {
        self.write("sync.pause", None, |w| {
            let n = w.tx.execute("UPDATE sync_device SET paused = ?1 WHERE id = 1", [paused as i64])?;
            if n == 0 {
                return Err(HostError::not_found("sync is not set up on this device"));
            }
            Ok(json!({"paused": paused}))
        })
    }

    /// `sync leave`: this device stops syncing. Its chats stay as they are; the replicated state,
    /// the outbox and what was applied are forgotten (a later `join` starts over).
    pub fn sync_forget(&mut self) -> HostResult<WriteOutcome> {
        self.write("sync.leave", None, |w| {
            for t in SYNC_TABLES {
                w.tx.execute(&format!("DELETE FROM {t}"), [])?;
            }
            // pictures kept only for sync go
            w.tx.execute(
                "DELETE FROM images WHERE NOT EXISTS (SELECT 1 FROM image_refs r WHERE r.sha256 = images.sha256)",
                [],
            )?;
            w.tx.execute("DELETE FROM meta WHERE key = ?1", [RELAID_META])?;
            Ok(json!({}))
        })
    }

    /// The name another device gave itself (read from its folder).
    pub fn sync_set_peer_name(&mut self, dev: &str, name: &str) -> HostResult<()> {
        self.write("sync.peer", None, |w| {
            w.tx.execute("INSERT OR IGNORE INTO sync_peers (device_id) VALUES (?1)", [dev])?;
            w.tx.execute("UPDATE sync_peers SET name = ?2 WHERE device_id = ?1", params![dev, name])?;
            Ok(Value::Null)
        })?;
        Ok(())
    }

    /// Up to `limit` operations waiting to be sealed, oldest first.
    pub fn sync_outbox(&mut self, limit: usize) -> HostResult<Vec<OutboxOp>> {
        self.read(|tx| {
            let mut st =
                tx.prepare_cached("SELECT seq, stamp, op, blobs FROM sync_outbox ORDER BY seq LIMIT ?1")?;
            let rows = st.query_map([limit.min(i64::MAX as usize) as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            let mut out = Vec::new();
            for r in rows {
                let (seq, stamp, json, blobs) = r?;
                out.push(OutboxOp {
                    seq: seq.max(0) as u64,
                    stamp,
                    json,
                    blobs: serde_json::from_str(&blobs).unwrap_or_default(),
                });
            }
            Ok(out)
        })
    }

    /// The operations up to `upto` are sealed in a segment: they leave the outbox.
    pub fn sync_outbox_sealed(&mut self, upto: u64) -> HostResult<()> {
        self.write("sync.sealed", None, |w| {
            let upto = upto.min(i64::MAX as u64) as i64;
            let sealed: Vec<String> =
                w.tx.prepare(
                    "SELECT DISTINCT j.value FROM sync_outbox o, json_each(o.blobs) j WHERE o.seq <= ?1",
                )?
                .query_map([upto], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            w.tx.execute("DELETE FROM sync_outbox WHERE seq <= ?1", [upto])?;
            // their pictures are in the folder now: kept only while an entry or a later operation
            // needs them. The later operations' pictures are read once: `blobs` follows the op's
            // text in the row, so each read walks every remaining op's overflow pages (a query per
            // picture made sealing 10,000 chats with 500 pictures take 24.8 s; now 4.4 s)
            let later: std::collections::HashSet<String> = if sealed.is_empty() {
                Default::default()
            } else {
                w.tx.prepare("SELECT DISTINCT j.value FROM sync_outbox o, json_each(o.blobs) j")?
                    .query_map([], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            for sha in sealed {
                if !later.contains(&sha) {
                    w.tx.execute("DELETE FROM sync_blobs WHERE sha256 = ?1 AND why = 'out'", [&sha])?;
                    collect_unkept(w, &sha)?;
                }
            }
            Ok(Value::Null)
        })?;
        Ok(())
    }

    /// What was applied from each device: segments, operations, newest checkpoint.
    pub fn sync_applied(&mut self) -> HostResult<Vec<PeerApplied>> {
        self.read(|tx| {
            let mut devs = state::applied_devices(tx, Applied::Segments)?;
            devs.extend(state::applied_devices(tx, Applied::Ops)?);
            let peers: Vec<(String, Option<i64>)> = tx
                .prepare("SELECT device_id, checkpoint_applied FROM sync_peers")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            devs.extend(peers.iter().map(|p| p.0.clone()));
            devs.sort();
            devs.dedup();
            let cps: HashMap<String, Option<i64>> = peers.into_iter().collect();
            let mut out = Vec::new();
            for dev in devs {
                out.push(PeerApplied {
                    segments: state::ranges(tx, Applied::Segments, &dev)?,
                    ops: state::ranges(tx, Applied::Ops, &dev)?,
                    checkpoint: cps.get(&dev).copied().flatten().map(|c| c.max(0) as u64),
                    dev,
                });
            }
            Ok(out)
        })
    }

    /// A checkpoint of the whole replicated state as it is now (one read transaction).
    pub fn sync_checkpoint(&mut self) -> HostResult<Checkpoint> {
        self.read(|tx| {
            let me = state::device(tx)?
                .ok_or_else(|| HostError::not_found("sync is not set up on this device"))?;
            let mut vector = BTreeMap::new();
            for dev in state::applied_devices(tx, Applied::Ops)? {
                vector.insert(dev.clone(), state::ranges(tx, Applied::Ops, &dev)?.pairs().to_vec());
            }
            if me.next_seq > 1 {
                vector.insert(me.id.clone(), vec![(1, me.next_seq - 1)]);
            }
            let mut entries = Vec::new();
            state::all_entries(tx, |e| entries.push(e))?;
            let doc = StateDoc {
                v: OP_VERSION,
                dev: me.id.clone(),
                sessions: state::all_sessions(tx)?,
                entries,
                settings: state::all_settings(tx)?,
                purged: state::all_tombstones(tx)?
                    .into_iter()
                    .map(|(kind, id, s)| Tombstone { kind, id, s })
                    .collect(),
                vector: vector.clone(),
            };
            let json =
                serde_json::to_string(&doc).map_err(|e| HostError::internal(format!("a checkpoint: {e}")))?;
            Ok(Checkpoint { vector, json })
        })
    }

    /// A picture another device's operations need (from the folder): checked against its name,
    /// stored with the dimensions read off its bytes, kept until an entry refers to it (30 days
    /// at most). Returns whether it was new here.
    pub fn sync_put_blob(&mut self, sha256: &str, mime: &str, bytes: Vec<u8>) -> HostResult<bool> {
        if sha256_hex(&bytes) != sha256 {
            return Err(HostError::bad_request(format!("picture {sha256}: its bytes have another hash")));
        }
        let b = blob_from_bytes(mime.to_owned(), bytes);
        let mut new = false;
        self.write("sync.blob", None, |w| {
            let n = w.tx.execute(
                "INSERT INTO images (sha256, mime, width, height, byte_length, is_thumbnail, created_at, bytes)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7) ON CONFLICT(sha256) DO NOTHING",
                params![b.sha256, b.mime, b.width, b.height, b.bytes.len() as i64, w.now, b.bytes],
            )?;
            new = n == 1;
            if new {
                w.tx.execute(
                    "INSERT OR REPLACE INTO sync_blobs (sha256, why, put_at) VALUES (?1, 'in', ?2)",
                    params![b.sha256, w.now],
                )?;
            }
            Ok(Value::Null)
        })?;
        Ok(new)
    }

    /// A stored picture's `(mime, bytes)` (to upload): hashed again on the way out.
    pub fn sync_blob(&mut self, sha256: &str) -> HostResult<Option<(String, Vec<u8>)>> {
        self.read(|tx| get_blob(tx, sha256))
    }

    /// The counts behind `sync status`.
    pub fn sync_status_counts(&mut self) -> HostResult<SyncCounts> {
        self.read(|tx| {
            let d = state::device(tx)?;
            let outbox: i64 = tx.query_row("SELECT count(*) FROM sync_outbox", [], |r| r.get(0))?;
            let mut pending: HashMap<String, Vec<(String, u64, usize)>> = HashMap::new();
            {
                let mut st = tx.prepare("SELECT device_id, kind, seq, missing FROM sync_pending ORDER BY device_id, seq")?;
                let rows = st.query_map([], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, String>(3)?))
                })?;
                for r in rows {
                    let (dev, kind, seq, missing) = r?;
                    let n = serde_json::from_str::<Vec<String>>(&missing).map_or(0, |v| v.len());
                    pending.entry(dev).or_default().push((kind, seq.max(0) as u64, n));
                }
            }
            let mut st = tx.prepare(
                "SELECT device_id, name, ops_applied, segments_applied, last_applied_at FROM sync_peers ORDER BY device_id",
            )?;
            let rows = st.query_map([], |r| {
                Ok(PeerStatus {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    ops_applied: r.get::<_, i64>(2)?.max(0) as u64,
                    segments_applied: r.get::<_, i64>(3)?.max(0) as u64,
                    last_applied_at: r.get(4)?,
                    pending: Vec::new(),
                })
            })?;
            let mut peers: Vec<PeerStatus> = rows.collect::<Result<_, _>>()?;
            for p in &mut peers {
                p.pending = pending.remove(&p.id).unwrap_or_default();
            }
            for (dev, list) in pending {
                peers.push(PeerStatus {
                    id: dev,
                    name: None,
                    ops_applied: 0,
                    segments_applied: 0,
                    last_applied_at: None,
                    pending: list,
                });
            }
            let relaid: Option<String> = tx
                .query_row("SELECT value FROM meta WHERE key = ?1", [RELAID_META], |r| r.get(0))
                .optional()?;
            Ok(SyncCounts {
                relaid: relaid.and_then(|v| v.parse().ok()).unwrap_or(0),
                recorded: d.as_ref().map_or(0, |d| d.next_seq - 1),
                device: d.map(|d| SyncDevice { id: d.id, name: d.name, created_at: d.created_at, paused: d.paused }),
                outbox: outbox.max(0) as u64,
                peers,
            })
        })
    }

    /// The chats that began on another device: session id → `(device id, its name if known)`.
    pub fn sync_origins(&mut self) -> HostResult<HashMap<String, (String, Option<String>)>> {
        self.read(|tx| {
            let Some(me) = state::device(tx)? else { return Ok(HashMap::new()) };
            let mut st = tx.prepare(
                "SELECT s.session_id, s.created, p.name FROM sync_sessions s
                 LEFT JOIN sync_peers p ON p.device_id = substr(s.created, 28)
                 WHERE s.created IS NOT NULL",
            )?;
            let rows = st.query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?))
            })?;
            let mut out = HashMap::new();
            for r in rows {
                let (sid, created, name) = r?;
                if let Some(s) = Stamp::decode(&created) {
                    if s.dev != me.id {
                        out.insert(sid, (s.dev, name));
                    }
                }
            }
            Ok(out)
        })
    }

    /// Whether this device's state knows session `id` was purged (a tombstone).
    pub fn sync_purged(&mut self, kind: crate::domain::sync::regs::Kind, id: &str) -> HostResult<bool> {
        self.read(|tx| state::tombstoned(tx, kind, id))
    }

    /// The applied numbers one device's operations have here (`None`: nothing from it).
    pub fn sync_peer_ops(&mut self, dev: &str) -> HostResult<Option<u64>> {
        self.read(|tx| {
            Ok(tx
                .query_row("SELECT ops_applied FROM sync_peers WHERE device_id = ?1", [dev], |r| {
                    r.get::<_, i64>(0)
                })
                .optional()?
                .map(|n| n.max(0) as u64))
        })
    }
}
