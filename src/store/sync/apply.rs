//! Applying other devices' operations and checkpoints (docs/sync.md "Applying"): one write
//! transaction each, which merges the registers, lays the touched sessions out again, rebuilds
//! derived data, writes the synced settings, and records what was applied (segment and
//! operation numbers) — so each is applied exactly once, in any order, and a crash leaves it
//! applied whole or not at all. A segment whose entries need pictures not stored yet changes
//! nothing and is noted as pending; the caller applies it again once they have arrived. The
//! write's change event names the sessions it touched (and the live chat when it changed), so
//! open panels and drawers update as for any write.

use std::collections::{BTreeSet, HashMap};

use rusqlite::params;
use serde_json::{json, Value};

use super::materialize::{lay_out, Laid};
use super::state::{self, Applied, Touched};
use crate::domain::sync::op::{Op, Registers, StateDoc};
use crate::domain::sync::regs::Kind;
use crate::domain::sync::stamp::{Hlc, Stamp};
use crate::protocol::{HostError, HostResult};
use crate::store::changelog::ChangeEvent;
use crate::store::connection::Store;
use crate::store::tx::WriteTx;

/// Pictures kept for operations not applied yet are dropped after this long unreferenced.
pub const BLOB_WAIT_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// What applying a segment or a checkpoint did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Applied: `ops` operations new here (`duplicates` were applied before, from another
    /// segment), `sessions` laid out again.
    Applied { ops: usize, duplicates: usize, sessions: Vec<String> },
    /// Applied before (or this device's own): nothing changed.
    Duplicate,
    /// Waiting for these pictures (sha256): nothing changed.
    Pending { missing_blobs: Vec<String> },
}

/// The outcome and, when it committed changes, the event to announce.
#[derive(Debug, Clone)]
pub struct SyncApplied {
    pub outcome: ApplyOutcome,
    pub event: Option<ChangeEvent>,
}

enum Source {
    Segment(u64, Vec<Op>),
    Checkpoint(u64, StateDoc),
}

impl Source {
    fn kind(&self) -> &'static str {
        match self {
            Source::Segment(..) => "segment",
            Source::Checkpoint(..) => "checkpoint",
        }
    }

    fn seq(&self) -> u64 {
        match self {
            Source::Segment(s, _) | Source::Checkpoint(s, _) => *s,
        }
    }
}

fn observe_all(hlc: &mut Hlc, regs: &Registers) {
    let stamps = regs
        .sessions
        .iter()
        .flat_map(|s| s.stamps())
        .chain(regs.entries.iter().flat_map(|e| e.stamps()))
        .chain(regs.settings.iter().map(|s| &s.value.s));
    for s in stamps {
        hlc.observe(s.t, s.c);
    }
}

/// The synced settings the state changed, written to `settings` as the state says.
fn write_settings(w: &mut WriteTx, keys: &BTreeSet<String>) -> HostResult<()> {
    for key in keys {
        let Some(reg) = state::setting(&w.tx, key)? else { continue };
        let n = match &reg.value.v {
            Some(v) => w.tx.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
                 WHERE settings.value IS NOT excluded.value",
                params![key, v.to_string(), w.now],
            )?,
            None => w.tx.execute("DELETE FROM settings WHERE key = ?1", [key])?,
        };
        if n > 0 {
            w.changes.settings.insert(key.clone());
        }
    }
    Ok(())
}

/// Count `n` more operations (and `segments`) applied from `dev`.
fn count_applied(w: &WriteTx, dev: &str, ops: u64, segments: u64) -> HostResult<()> {
    w.tx.execute("INSERT OR IGNORE INTO sync_peers (device_id) VALUES (?1)", [dev])?;
    w.tx.execute(
        "UPDATE sync_peers SET ops_applied = ops_applied + ?2, segments_applied = segments_applied + ?3,
             last_applied_at = ?4 WHERE device_id = ?1",
        params![dev, ops as i64, segments as i64, w.now],
    )?;
    Ok(())
}

/// Remove picture `sha` when no entry refers to it and sync keeps it for nothing.
pub(super) fn collect_unkept(w: &WriteTx, sha: &str) -> HostResult<()> {
    w.tx.execute(
        "DELETE FROM images WHERE sha256 = ?1 AND NOT EXISTS (SELECT 1 FROM image_refs WHERE sha256 = ?1)
             AND NOT EXISTS (SELECT 1 FROM sync_blobs WHERE sha256 = ?1)",
        [sha],
    )?;
    Ok(())
}

/// Pictures that arrived for operations (`sync_blobs`): once an entry refers to one it is an
/// image like any other; one nothing refers to after [`BLOB_WAIT_MS`] goes.
fn tidy_waiting_blobs(w: &WriteTx) -> HostResult<()> {
    w.tx.execute(
        "DELETE FROM sync_blobs WHERE why = 'in' AND sha256 IN (SELECT sha256 FROM image_refs)",
        [],
    )?;
    let old: Vec<String> =
        w.tx.prepare_cached("SELECT sha256 FROM sync_blobs WHERE why = 'in' AND put_at < ?1")?
            .query_map([w.now - BLOB_WAIT_MS], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
    for sha in old {
        w.tx.execute("DELETE FROM sync_blobs WHERE sha256 = ?1 AND why = 'in'", [&sha])?;
        collect_unkept(w, &sha)?;
    }
    Ok(())
}

impl Store {
    /// Apply segment `segment_seq` of device `dev` (its operations as JSON texts, in order).
    /// Malformed or foreign operations are `bad_request` and change nothing.
    pub fn sync_apply(&mut self, dev: &str, segment_seq: u64, ops: &[String]) -> HostResult<SyncApplied> {
        let parsed = ops
            .iter()
            .map(|t| Op::parse(t, dev))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| HostError::bad_request(format!("segment {segment_seq} of device {dev}: {e}")))?;
        self.apply_source(dev, Source::Segment(segment_seq, parsed))
    }

    /// Apply checkpoint `seq` of device `dev` (the whole state as of then, `Checkpoint::json`):
    /// every register merged, the operations it holds counted as applied.
    pub fn sync_apply_checkpoint(&mut self, dev: &str, seq: u64, json: &str) -> HostResult<SyncApplied> {
        let doc = StateDoc::parse(json, dev)
            .map_err(|e| HostError::bad_request(format!("checkpoint {seq} of device {dev}: {e}")))?;
        self.apply_source(dev, Source::Checkpoint(seq, doc))
    }

    fn apply_source(&mut self, dev: &str, src: Source) -> HostResult<SyncApplied> {
        let mut outcome = None;
        let mut missing = None;
        let r = self.write("sync.apply", None, |w| {
            w.sync_applying = true;
            let me = state::device(&w.tx)?.ok_or_else(|| {
                HostError::not_found("sync is not set up on this device (keepsake-host sync init)")
            })?;
            if dev == me.id {
                outcome = Some(ApplyOutcome::Duplicate);
                return Ok(json!({}));
            }
            let mut hlc = me.hlc;
            let mut touched = Touched::default();
            let mut applied_ops = state::ranges(&w.tx, Applied::Ops, dev)?;
            let (mut new_ops, mut dup_ops) = (0usize, 0usize);
            match &src {
                Source::Segment(seq, ops) => {
                    let mut segments = state::ranges(&w.tx, Applied::Segments, dev)?;
                    if segments.contains(*seq) {
                        outcome = Some(ApplyOutcome::Duplicate);
                        return Ok(json!({}));
                    }
                    for op in ops {
                        if applied_ops.contains(op.seq) {
                            dup_ops += 1;
                            continue;
                        }
                        let regs = op.registers();
                        let stamp = op.stamp();
                        state::merge(&w.tx, &regs, &|_, _| stamp.clone(), &mut touched)?;
                        hlc.observe(stamp.t, stamp.c);
                        observe_all(&mut hlc, &regs);
                        applied_ops.insert(op.seq);
                        new_ops += 1;
                    }
                    segments.insert(*seq);
                    state::put_ranges(&w.tx, Applied::Segments, dev, &segments)?;
                    count_applied(w, dev, new_ops as u64, 1)?;
                }
                Source::Checkpoint(seq, doc) => {
                    let done: Option<i64> = w.tx.query_row(
                        "SELECT max(checkpoint_applied) FROM sync_peers WHERE device_id = ?1",
                        [dev],
                        |r| r.get(0),
                    )?;
                    if done.is_some_and(|d| d >= *seq as i64) {
                        outcome = Some(ApplyOutcome::Duplicate);
                        return Ok(json!({}));
                    }
                    let tombs: HashMap<(Kind, String), Stamp> =
                        doc.purged.iter().map(|t| ((t.kind, t.id.clone()), t.s.clone())).collect();
                    let regs = doc.registers();
                    let fallback = Stamp::new(0, 0, dev);
                    state::merge(
                        &w.tx,
                        &regs,
                        &|k, id| tombs.get(&(k, id.to_owned())).cloned().unwrap_or_else(|| fallback.clone()),
                        &mut touched,
                    )?;
                    observe_all(&mut hlc, &regs);
                    for s in tombs.values() {
                        hlc.observe(s.t, s.c);
                    }
                    for (d, pairs) in &doc.vector {
                        if *d == me.id {
                            continue;
                        }
                        let mut r = if d == dev {
                            applied_ops.clone()
                        } else {
                            state::ranges(&w.tx, Applied::Ops, d)?
                        };
                        let before = r.count();
                        for (lo, hi) in pairs {
                            r.insert_range(*lo, *hi);
                        }
                        let added = r.count() - before;
                        if d == dev {
                            applied_ops = r;
                            new_ops += added as usize;
                        } else {
                            state::put_ranges(&w.tx, Applied::Ops, d, &r)?;
                            count_applied(w, d, added, 0)?;
                        }
                    }
                    count_applied(w, dev, new_ops as u64, 0)?;
                    w.tx.execute(
                        "UPDATE sync_peers SET checkpoint_applied = ?2 WHERE device_id = ?1",
                        params![dev, *seq as i64],
                    )?;
                }
            }
            let changed = match lay_out(w, &touched.sessions, &touched.bodies)? {
                Laid::Missing(m) => {
                    missing = Some(m);
                    return Err(HostError::internal("waiting for pictures"));
                }
                Laid::Done(changed) => changed,
            };
            write_settings(w, &touched.settings)?;
            state::put_ranges(&w.tx, Applied::Ops, dev, &applied_ops)?;
            w.tx.execute(
                "DELETE FROM sync_pending WHERE device_id = ?1 AND kind = ?2 AND seq = ?3",
                params![dev, src.kind(), src.seq() as i64],
            )?;
            tidy_waiting_blobs(w)?;
            state::save_clock(&w.tx, hlc, me.next_seq)?;
            outcome = Some(ApplyOutcome::Applied {
                ops: new_ops,
                duplicates: dup_ops,
                sessions: changed.into_iter().collect(),
            });
            Ok(json!({}))
        });
        match r {
            Ok(o) => Ok(SyncApplied { outcome: outcome.expect("set by the write"), event: o.event }),
            Err(_) if missing.is_some() => {
                let missing_blobs = missing.unwrap_or_default();
                let list = serde_json::to_string(&missing_blobs).expect("a list serializes");
                self.write("sync.pending", None, |w| {
                    w.tx.execute(
                        "INSERT INTO sync_pending (device_id, kind, seq, missing, since) VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT(device_id, kind, seq) DO UPDATE SET missing = excluded.missing",
                        params![dev, src.kind(), src.seq() as i64, list, w.now],
                    )?;
                    Ok(Value::Null)
                })?;
                Ok(SyncApplied { outcome: ApplyOutcome::Pending { missing_blobs }, event: None })
            }
            Err(e) => Err(e),
        }
    }
}
