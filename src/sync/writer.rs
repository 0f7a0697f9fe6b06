//! The writer (docs/sync.md "How it runs"): this device's recorded operations, sealed into
//! segments in its own folder, pictures first.
//!
//! Durable at every step: the outbox is in the database; a segment is written whole or not at all
//! (`folder.rs`) and only then are its operations marked sealed. A kill after the rename and
//! before the mark leaves a segment the outbox still holds: [`Writer::start`] reads the newest
//! segment back and marks what it holds, so the next segment continues after it and no operation
//! is sealed twice. A segment of this device that no longer opens (damaged in the folder by
//! something else) is made good by a checkpoint, which holds the whole state and so everything
//! that segment held. Segment numbers only grow (a checkpoint's number counts too).

use std::collections::BTreeSet;
use std::time::Duration;

use super::folder::{read_sealed, remove_stale_temps, write_sealed};
use super::layout::{context, list_device, Folder};
use super::payload::{self, Checkpoint, DeviceInfo, Segment, V};
use super::replica::{Device, OutboxOp, Replica};
use super::seal::{Kind, SyncKey};
use super::SyncError;
use crate::util::files::{Existing, WriteError};

/// A segment holds at most this many bytes of operations (one larger operation goes alone).
pub const SEGMENT_BYTES: usize = 4 * 1024 * 1024;
/// Operations read from the outbox at a time.
const OUTBOX_BATCH: usize = 2_000;
/// A checkpoint is written after this many segments of this device since the last one.
pub const CHECKPOINT_EVERY: u64 = 1_000;

pub struct Writer {
    folder: Folder,
    dev: String,
    key: SyncKey,
    /// The number the next segment gets.
    next: u64,
    /// The newest checkpoint of this device, and the one before it.
    checkpoints: Vec<u64>,
    /// One of this device's segments since its newest checkpoint does not open: the next flush
    /// writes a checkpoint, which carries everything that segment held.
    repair_due: bool,
}

fn io(e: WriteError) -> SyncError {
    SyncError::Folder(e.to_string())
}

impl Writer {
    /// Take over this device's folder: the device file written (or renamed), stale temp files
    /// removed, the newest segment read back and its operations marked sealed.
    pub fn start(r: &mut dyn Replica, d: &Device, key: &SyncKey, now: i64) -> Result<Writer, SyncError> {
        let folder = Folder::new(&d.folder);
        let dir = folder.device_dir(&d.id);
        let mut w = Writer {
            folder,
            dev: d.id.clone(),
            key: key.clone(),
            next: 1,
            checkpoints: Vec::new(),
            repair_due: false,
        };
        w.device_file(d, now)?;
        remove_stale_temps(&dir, Duration::from_secs(60));
        let files = list_device(&dir).map_err(|e| SyncError::Folder(format!("{}: {e}", dir.display())))?;
        w.checkpoints = files.checkpoints.clone();
        let newest_seg = files.segments.last().copied().unwrap_or(0);
        let newest_ckp = files.checkpoints.last().copied().unwrap_or(0);
        w.next = newest_seg.max(newest_ckp) + 1;
        // this device's segments since its newest checkpoint, read back: the newest says what
        // is sealed already (a kill may have come between its rename and the mark); one that no
        // longer opens (damaged in the folder) is repaired by a checkpoint at the next flush
        for &n in files.segments.iter().filter(|&&n| n > newest_ckp) {
            let p = w.folder.segment(&w.dev, n);
            let read = read_sealed(&p, Kind::Segment, &context(Kind::Segment, &w.dev, n), key)
                .and_then(|b| payload::from_bytes::<Segment>(&b))
                .and_then(|s| s.check(&w.dev, n).map(|()| s));
            match read {
                Ok(seg) if n == newest_seg => r.sync_outbox_sealed(seg.last_op)?,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "a segment of this device does not open; a checkpoint will replace it");
                    w.repair_due = true;
                }
            }
        }
        Ok(w)
    }

    /// Write `device` unless it already says this name.
    fn device_file(&self, d: &Device, now: i64) -> Result<(), SyncError> {
        let p = self.folder.device_file(&d.id);
        let ctx = context(Kind::Device, &d.id, 0);
        let old: Option<DeviceInfo> =
            read_sealed(&p, Kind::Device, &ctx, &self.key).ok().and_then(|b| payload::from_bytes(&b).ok());
        if old.as_ref().is_some_and(|o| o.name == d.name && o.id == d.id) {
            return Ok(());
        }
        let info = DeviceInfo {
            v: V,
            id: d.id.clone(),
            name: d.name.clone(),
            created_at: old.map_or(d.created_at, |o| o.created_at),
            updated_at: now,
        };
        write_sealed(&p, Existing::ReplaceOwn, &self.key.seal(Kind::Device, &ctx, &payload::to_bytes(&info)))
            .map_err(io)
    }

    /// Seal every operation in the outbox into segments; the number of operations sealed. Each
    /// read of the outbox is cut into as many segments as it fills (reading it again for every
    /// segment read up to `OUTBOX_BATCH` operations to seal a few hundred: ~26 MB per 4 MiB
    /// segment when `sync init` recorded 10,000 chats).
    pub fn flush(&mut self, r: &mut dyn Replica, now: i64) -> Result<usize, SyncError> {
        let mut sealed = 0;
        loop {
            let ops = r.sync_outbox(OUTBOX_BATCH)?;
            if ops.is_empty() {
                if std::mem::take(&mut self.repair_due) {
                    self.checkpoint(r, now)?;
                }
                return Ok(sealed);
            }
            let mut rest = &ops[..];
            while !rest.is_empty() {
                let take = segment_len(rest);
                self.seal(r, &rest[..take], now)?;
                sealed += take;
                rest = &rest[take..];
            }
        }
    }

    /// One segment of `batch` (consecutive operations), its pictures written first; the outbox
    /// marked; a checkpoint when one is due.
    fn seal(&mut self, r: &mut dyn Replica, batch: &[OutboxOp], now: i64) -> Result<(), SyncError> {
        let blobs: BTreeSet<String> = batch.iter().flat_map(|o| o.blobs.iter().cloned()).collect();
        for sha in &blobs {
            self.put_blob(r, sha)?;
        }
        let seg = Segment {
            v: V,
            device: self.dev.clone(),
            seq: self.next,
            first_op: batch[0].seq,
            last_op: batch[batch.len() - 1].seq,
            at: now,
            ops: batch.iter().map(|o| o.json.clone()).collect(),
            blobs: blobs.into_iter().collect(),
        };
        let ctx = context(Kind::Segment, &self.dev, self.next);
        let sealed_bytes = self.key.seal(Kind::Segment, &ctx, &payload::to_bytes(&seg));
        write_sealed(&self.folder.segment(&self.dev, self.next), Existing::Refuse, &sealed_bytes)
            .map_err(io)?;
        r.sync_outbox_sealed(seg.last_op)?;
        self.next += 1;
        if self.next - 1 - self.checkpoints.last().copied().unwrap_or(0) >= CHECKPOINT_EVERY {
            self.checkpoint(r, now)?;
        }
        Ok(())
    }

    /// A picture into `blobs/` unless a file of its name is there (the same name always means
    /// the same bytes). A picture the database no longer holds is left out (it was purged: the
    /// operation that purged it follows).
    fn put_blob(&self, r: &mut dyn Replica, sha: &str) -> Result<(), SyncError> {
        let name = self.key.blob_name(sha);
        let p = self.folder.blob(&name);
        if std::fs::symlink_metadata(&p).is_ok() {
            return Ok(());
        }
        let Some((mime, bytes)) = r.sync_blob(sha)? else {
            tracing::warn!(sha, "a picture an operation references is not in the database");
            return Ok(());
        };
        let sealed = self.key.seal(
            Kind::Blob,
            &context(Kind::Blob, &name, 0),
            &payload::blob_bytes(sha, &mime, &bytes),
        );
        match write_sealed(&p, Existing::Refuse, &sealed) {
            Ok(()) | Err(WriteError::Exists { .. }) => Ok(()),
            Err(e) => Err(io(e)),
        }
    }

    /// Write a checkpoint of the whole state as of the last segment, then fold: this device's
    /// segments covered by the checkpoint before it, and that older checkpoint, are removed (one
    /// checkpoint of grace, so a device that has not seen the new one yet still finds the old).
    pub fn checkpoint(&mut self, r: &mut dyn Replica, now: i64) -> Result<u64, SyncError> {
        let seq = self.next - 1;
        if seq == 0 || self.checkpoints.last() == Some(&seq) {
            return Ok(seq);
        }
        let state = r.sync_checkpoint()?;
        let ck = Checkpoint { v: V, device: self.dev.clone(), seq, at: now };
        let ctx = context(Kind::Checkpoint, &self.dev, seq);
        let bytes = self.key.seal(Kind::Checkpoint, &ctx, &ck.to_bytes(&state));
        drop(state);
        write_sealed(&self.folder.checkpoint(&self.dev, seq), Existing::Refuse, &bytes).map_err(io)?;
        self.checkpoints.push(seq);
        if self.checkpoints.len() >= 3 {
            let keep_from = self.checkpoints[self.checkpoints.len() - 2];
            let dir = self.folder.device_dir(&self.dev);
            if let Ok(files) = list_device(&dir) {
                for s in files.segments.into_iter().filter(|&s| s <= keep_from) {
                    let _ = std::fs::remove_file(self.folder.segment(&self.dev, s));
                }
                for c in files.checkpoints.into_iter().filter(|&c| c < keep_from) {
                    let _ = std::fs::remove_file(self.folder.checkpoint(&self.dev, c));
                }
            }
            self.checkpoints.retain(|&c| c >= keep_from);
        }
        Ok(seq)
    }

    pub fn next_segment(&self) -> u64 {
        self.next
    }
}

/// How many of `ops` (at least one) go into one segment: consecutive operation numbers, at most
/// [`SEGMENT_BYTES`] of them (one larger operation goes alone).
fn segment_len(ops: &[OutboxOp]) -> usize {
    let mut bytes = 0;
    for (i, op) in ops.iter().enumerate() {
        if i > 0 && (bytes + op.json.len() > SEGMENT_BYTES || op.seq != ops[i - 1].seq + 1) {
            return i;
        }
        bytes += op.json.len();
    }
    ops.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(seq: u64, len: usize) -> OutboxOp {
        OutboxOp { seq, json: "x".repeat(len), blobs: Vec::new() }
    }

    #[test]
    fn a_read_of_the_outbox_is_cut_at_the_segment_size_and_at_a_gap() {
        let third = SEGMENT_BYTES / 3;
        let ops: Vec<OutboxOp> = (1..=7).map(|s| op(s, third)).collect();
        assert_eq!(segment_len(&ops), 3, "three thirds fill a segment");
        assert_eq!(segment_len(&ops[3..]), 3);
        assert_eq!(segment_len(&ops[6..]), 1);
        let gap = [op(1, 10), op(2, 10), op(4, 10)];
        assert_eq!(segment_len(&gap), 2, "a gap ends a segment");
        let big = [op(1, SEGMENT_BYTES * 2), op(2, 10)];
        assert_eq!(segment_len(&big), 1, "a larger operation goes alone");
        assert_eq!(segment_len(&[op(5, 10)]), 1);
    }
}
