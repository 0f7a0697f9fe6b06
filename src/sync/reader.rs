//! The reader (docs/sync.md "How it runs"): other devices' checkpoints and segments, opened,
//! checked and applied, each exactly once (the store records a segment as applied in the same
//! transaction as its effects), in any order across devices and ascending within one.
//!
//! Nothing in the folder is trusted and nothing in it is fatal: a file that does not open is
//! waited for while it may still be arriving and reported once it settled (`folder::Settle`); a
//! segment whose pictures have not arrived is left pending and retried at every look; a device
//! folder written with another sync key is reported once, as one problem. The same pass without
//! applying (`apply = false`) is what `sync status` shows when no host is running.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::folder::{read_sealed, Settle, Verdict};
use super::layout::{context, list_device, list_devices, Folder};
use super::payload::{self, open_blob, Checkpoint, DeviceInfo, Segment};
use super::replica::{Applied, Replica};
use super::seal::{Kind, Refusal, SyncKey};
use super::SyncError;
use crate::store::ChangeEvent;

/// One thing `sync status` lists under problems.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// `damaged`, `foreign`, `pictures`, `folder`, `key`.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub detail: String,
}

/// One device as the folder and the database show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceStatus {
    pub id: String,
    pub name: String,
    #[serde(rename = "self")]
    pub this_device: bool,
    /// Segments in the folder.
    pub segments: u64,
    pub checkpoints: u64,
    /// Segments applied here (this device's own: all of them).
    pub applied: u64,
    /// Segments in the folder not applied yet (arriving, waiting for pictures, or not looked at).
    pub pending: u64,
    /// Pictures its pending segments wait for.
    pub waiting_pictures: u64,
    /// Operations applied here from this device by this process, and when it last applied one.
    pub ops_applied: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_at: Option<i64>,
}

/// What one look saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderStatus {
    pub devices: Vec<DeviceStatus>,
    pub problems: Vec<Problem>,
    /// Segments and operations this look applied.
    #[serde(skip)]
    pub applied_segments: u64,
    #[serde(skip)]
    pub applied_ops: u64,
}

pub struct Reader {
    folder: Folder,
    me: String,
    key: SyncKey,
    settle: Settle,
    /// Refused files reported already (skipped until they change), with their problem.
    reported: HashMap<PathBuf, Problem>,
    names: HashMap<String, String>,
    ops_applied: HashMap<String, u64>,
    last_applied: HashMap<String, i64>,
    /// Segments waiting for pictures: what they wait for.
    pending: BTreeMap<(String, u64), Vec<String>>,
    /// Set at shutdown: a look stops between two segments.
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

fn rel(folder: &Folder, p: &Path) -> String {
    p.strip_prefix(&folder.root).unwrap_or(p).display().to_string()
}

impl Reader {
    pub fn new(folder: Folder, me: &str, key: SyncKey) -> Reader {
        Reader {
            folder,
            me: me.to_owned(),
            key,
            settle: Settle::default(),
            reported: HashMap::new(),
            names: HashMap::new(),
            ops_applied: HashMap::new(),
            last_applied: HashMap::new(),
            pending: BTreeMap::new(),
            stop: None,
        }
    }

    /// A look stops between two segments once `flag` is set (the host is shutting down).
    pub fn stop_on(mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Reader {
        self.stop = Some(flag);
        self
    }

    fn stopping(&self) -> bool {
        self.stop.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Open `path`; a refusal is judged (wait, or report once it settled). `Ok(None)`: skip it
    /// for now.
    fn open(&mut self, path: &Path, kind: Kind, ctx: &str, dev: Option<&str>) -> Option<Vec<u8>> {
        match read_sealed(path, kind, ctx, &self.key) {
            Ok(b) => {
                self.settle.clear(path);
                self.reported.remove(path);
                Some(b)
            }
            Err(r) => {
                self.refused(path, &r, dev);
                None
            }
        }
    }

    fn refused(&mut self, path: &Path, r: &Refusal, dev: Option<&str>) {
        if matches!(r, Refusal::Io(_)) && !path.exists() {
            self.settle.clear(path);
            self.reported.remove(path);
            return;
        }
        if self.settle.judge(path) == Verdict::Report && !self.reported.contains_key(path) {
            let p = Problem {
                kind: if r.is_foreign() { "foreign" } else { "damaged" }.into(),
                device: dev.map(str::to_owned),
                file: Some(rel(&self.folder, path)),
                detail: r.to_string(),
            };
            tracing::warn!(file = %path.display(), problem = %p.detail, "a sync file is refused");
            self.reported.insert(path.to_path_buf(), p);
        }
    }

    /// One pass over the folder; with `apply`, what is new is applied and each commit's event
    /// handed to `emit`.
    pub fn look(
        &mut self,
        r: &mut dyn Replica,
        apply: bool,
        now: i64,
        emit: &mut dyn FnMut(ChangeEvent),
    ) -> Result<FolderStatus, SyncError> {
        let devices = list_devices(&self.folder)
            .map_err(|e| SyncError::Folder(format!("{}: {e}", self.folder.devices().display())))?;
        let mut st = FolderStatus::default();
        let mut present: HashSet<PathBuf> = HashSet::new();
        for dev in devices {
            let dir = self.folder.device_dir(&dev);
            let Ok(files) = list_device(&dir) else { continue };
            let mut ds = DeviceStatus {
                id: dev.clone(),
                this_device: dev == self.me,
                segments: files.segments.len() as u64,
                checkpoints: files.checkpoints.len() as u64,
                ..Default::default()
            };
            let dfile = self.folder.device_file(&dev);
            present.insert(dfile.clone());
            if files.has_device_file {
                if let Some(b) = self.open(&dfile, Kind::Device, &context(Kind::Device, &dev, 0), Some(&dev))
                {
                    if let Ok(info) = payload::from_bytes::<DeviceInfo>(&b) {
                        if info.id == dev && self.names.get(&dev) != Some(&info.name) {
                            if apply {
                                r.sync_device_names(&[(dev.clone(), info.name.clone())])?;
                            }
                            self.names.insert(dev.clone(), info.name);
                        }
                    }
                }
            }
            ds.name = self.names.get(&dev).cloned().unwrap_or_default();
            if ds.this_device {
                ds.applied = ds.segments;
                st.devices.push(ds);
                continue;
            }
            // a device whose own `device` file is sealed with another key: one problem for the
            // folder, none for each of its files
            if self.reported.get(&dfile).is_some_and(|p| p.kind == "foreign") {
                st.devices.push(ds);
                continue;
            }
            let mut applied = r.sync_applied(&dev)?;
            if let Some(&n) = files.checkpoints.last() {
                let path = self.folder.checkpoint(&dev, n);
                present.insert(path.clone());
                if n > applied.floor && apply {
                    if let Some(b) =
                        self.open(&path, Kind::Checkpoint, &context(Kind::Checkpoint, &dev, n), Some(&dev))
                    {
                        match Checkpoint::open(&b, &dev, n) {
                            Ok((_, state)) => {
                                let (mut out, mut ev) = r.sync_apply_checkpoint(&dev, n, state)?;
                                // a checkpoint names no pictures ahead: the ones its chats need
                                // are fetched when the store says which, then it is applied again
                                // (still missing: the next look tries again)
                                if let Applied::Pending { missing_blobs } = &out {
                                    if self.fetch_blobs(r, missing_blobs, true, &mut present)?.is_empty() {
                                        (out, ev) = r.sync_apply_checkpoint(&dev, n, state)?;
                                    }
                                }
                                self.count(&dev, &out, now, &mut st);
                                if let Some(ev) = ev {
                                    emit(ev);
                                }
                                applied = r.sync_applied(&dev)?;
                            }
                            Err(why) => self.refused(&path, &why, Some(&dev)),
                        }
                    }
                }
            }
            for &seq in &files.segments {
                if applied.contains(seq) {
                    continue;
                }
                if self.stopping() {
                    break;
                }
                let path = self.folder.segment(&dev, seq);
                present.insert(path.clone());
                if self.reported.contains_key(&path) && self.settle.judge(&path) == Verdict::Report {
                    // reported and unchanged since: skip (a changed file is looked at again)
                    ds.pending += 1;
                    continue;
                }
                let Some(b) = self.open(&path, Kind::Segment, &context(Kind::Segment, &dev, seq), Some(&dev))
                else {
                    ds.pending += 1;
                    continue;
                };
                let seg =
                    match payload::from_bytes::<Segment>(&b).and_then(|s| s.check(&dev, seq).map(|()| s)) {
                        Ok(s) => s,
                        Err(why) => {
                            self.refused(&path, &why, Some(&dev));
                            ds.pending += 1;
                            continue;
                        }
                    };
                let missing = self.fetch_blobs(r, &seg.blobs, apply, &mut present)?;
                if !apply {
                    ds.pending += 1;
                    ds.waiting_pictures += missing.len() as u64;
                    continue;
                }
                let (out, ev) = r.sync_apply(&dev, seq, &seg.ops)?;
                if let Some(ev) = ev {
                    emit(ev);
                }
                match &out {
                    Applied::Pending { missing_blobs } => {
                        ds.pending += 1;
                        ds.waiting_pictures += missing_blobs.len() as u64;
                        self.pending.insert((dev.clone(), seq), missing_blobs.clone());
                    }
                    _ => {
                        self.pending.remove(&(dev.clone(), seq));
                        applied.segments.insert(seq);
                    }
                }
                self.count(&dev, &out, now, &mut st);
            }
            ds.applied = files.segments.iter().filter(|&&s| applied.contains(s)).count() as u64;
            ds.ops_applied = self.ops_applied.get(&dev).copied().unwrap_or(0);
            ds.last_applied_at = self.last_applied.get(&dev).copied();
            if ds.waiting_pictures > 0 {
                st.problems.push(Problem {
                    kind: "pictures".into(),
                    device: Some(dev.clone()),
                    file: None,
                    detail: format!(
                        "waiting for {} picture{} from {}",
                        ds.waiting_pictures,
                        if ds.waiting_pictures == 1 { "" } else { "s" },
                        if ds.name.is_empty() { dev.as_str() } else { ds.name.as_str() }
                    ),
                });
            }
            st.devices.push(ds);
        }
        // files reported earlier that are gone or applied since are no longer problems
        self.reported.retain(|p, _| present.contains(p));
        let mut reported: Vec<Problem> = self.reported.values().cloned().collect();
        reported.sort_by(|a, b| a.file.cmp(&b.file));
        st.problems.splice(0..0, reported);
        Ok(st)
    }

    fn count(&mut self, dev: &str, out: &Applied, now: i64, st: &mut FolderStatus) {
        if let Applied::Applied { ops, .. } = out {
            *self.ops_applied.entry(dev.to_owned()).or_default() += *ops as u64;
            self.last_applied.insert(dev.to_owned(), now);
            st.applied_segments += 1;
            st.applied_ops += *ops as u64;
        }
    }

    /// Bring the pictures `blobs` (sha256) into the database (with `apply`); the ones still
    /// missing (not arrived, or refused).
    fn fetch_blobs(
        &mut self,
        r: &mut dyn Replica,
        blobs: &[String],
        apply: bool,
        present: &mut HashSet<PathBuf>,
    ) -> Result<Vec<String>, SyncError> {
        let mut missing = Vec::new();
        for sha in blobs {
            if r.sync_has_blob(sha)? {
                continue;
            }
            let name = self.key.blob_name(sha);
            let path = self.folder.blob(&name);
            present.insert(path.clone());
            let got = self
                .open(&path, Kind::Blob, &context(Kind::Blob, &name, 0), None)
                .map(|b| open_blob(&b, sha))
                .transpose();
            match got {
                Ok(Some((mime, bytes))) if apply => r.sync_put_blob(sha, &mime, &bytes)?,
                Ok(Some(_)) => {}
                Ok(None) => missing.push(sha.clone()),
                Err(why) => {
                    self.refused(&path, &why, None);
                    missing.push(sha.clone());
                }
            }
        }
        Ok(missing)
    }
}
