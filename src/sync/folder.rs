//! Reading and writing sealed files in the sync folder (docs/sync.md "The folder").
//!
//! Writing: the one writer of files Keepsake makes (`util::files::write_bytes`): a temp file
//! `.<name>.<random>.tmp` created new beside the target, fsynced, renamed into place (a segment
//! or blob never replaces a file that exists), then the folder fsynced. A kill at any point
//! leaves the target absent or whole; a leftover temp file has a name no reader looks at, and
//! the writer removes its own stale ones ([`remove_stale_temps`]).
//!
//! Reading never trusts a file: a symbolic link is refused, the length is checked against the
//! kind's cap before anything is read, then the header and the tag (`seal.rs`). A refused file
//! may still be arriving (some syncers write in place): [`Settle`] says when it has stopped
//! changing, and only then is it reported as damaged or foreign, and skipped until it changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::seal::{Kind, Refusal, SyncKey};
use crate::util::files::{self, Existing, WriteError};

/// Read and open a sealed file.
pub fn read_sealed(path: &Path, kind: Kind, context: &str, key: &SyncKey) -> Result<Vec<u8>, Refusal> {
    let bytes = read_capped(path, kind)?;
    key.open(kind, context, &bytes)
}

/// A file's bytes, if it is a regular file no longer than `kind` allows.
pub fn read_capped(path: &Path, kind: Kind) -> Result<Vec<u8>, Refusal> {
    let md = std::fs::symlink_metadata(path).map_err(|e| Refusal::Io(e.to_string()))?;
    if md.file_type().is_symlink() {
        return Err(Refusal::NotSealed("it is a symbolic link".into()));
    }
    if !md.is_file() {
        return Err(Refusal::NotSealed("it is not a file".into()));
    }
    if md.len() > kind.max_len() + super::seal::HEADER_LEN as u64 {
        return Err(Refusal::BadLength(format!(
            "{} bytes, more than a {} file may have",
            md.len(),
            kind.name()
        )));
    }
    std::fs::read(path).map_err(|e| Refusal::Io(e.to_string()))
}

/// Put `bytes` at `path` durably: new only (`Refuse`), or replacing our own file (`ReplaceOwn`,
/// for the device file). The folder is created (0700) when missing.
pub fn write_sealed(path: &Path, existing: Existing, bytes: &[u8]) -> Result<(), WriteError> {
    if let Some(dir) = path.parent() {
        files::private_dir(dir).map_err(|e| WriteError::Io { path: dir.to_path_buf(), source: e })?;
    }
    files::write_bytes(path, files::PRIVATE, existing, bytes)
}

/// Remove temp files a killed writer left in `dir` (`.<name>.<random>.tmp`) older than `age`.
pub fn remove_stale_temps(dir: &Path, age: Duration) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|el| el >= age);
        if old {
            let _ = files::remove_file_no_follow(&e.path());
        }
    }
}

/// How long a refused file must stay unchanged before it is reported as damaged or foreign.
pub const SETTLE: Duration = Duration::from_secs(10);

/// What the reader does with a refused file now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It may still be arriving: look again later, say nothing yet.
    Wait,
    /// It stopped changing and is still refused: report it (once) and skip it until it changes.
    Report,
}

/// Refused files seen, by path: their length and modification time when first refused.
#[derive(Debug, Default)]
pub struct Settle {
    seen: HashMap<PathBuf, (u64, Option<SystemTime>, Instant)>,
}

impl Settle {
    /// A file was refused now: is it settled? Settled = the same length and modification time
    /// as when this reader first refused it, `SETTLE` or more ago; or a modification time
    /// `SETTLE` or more in the past (for a reader that just started).
    pub fn judge(&mut self, path: &Path) -> Verdict {
        self.judge_at(path, Instant::now(), SystemTime::now())
    }

    pub fn judge_at(&mut self, path: &Path, now: Instant, wall: SystemTime) -> Verdict {
        let md = std::fs::symlink_metadata(path).ok();
        let len = md.as_ref().map_or(0, |m| m.len());
        let mtime = md.as_ref().and_then(|m| m.modified().ok());
        let e = self.seen.entry(path.to_path_buf()).or_insert((len, mtime, now));
        if (e.0, e.1) != (len, mtime) {
            *e = (len, mtime, now);
        }
        let unchanged_long = now.duration_since(e.2) >= SETTLE;
        let old_mtime = mtime.and_then(|t| wall.duration_since(t).ok()).is_some_and(|d| d >= SETTLE);
        if unchanged_long || old_mtime {
            Verdict::Report
        } else {
            Verdict::Wait
        }
    }

    /// The file opened (or went away): forget it.
    pub fn clear(&mut self, path: &Path) {
        self.seen.remove(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_are_whole_private_and_never_replaced_unless_asked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("keepsake/devices/x/000000000001.seg");
        write_sealed(&p, Existing::Refuse, b"one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        assert!(write_sealed(&p, Existing::Refuse, b"two").is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write_sealed(&p, Existing::ReplaceOwn, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        }
        // no temp file is left
        let names: Vec<_> =
            std::fs::read_dir(p.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_unread_and_a_link_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("device");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(Kind::Device.max_len() + 1000).unwrap();
        assert!(matches!(read_capped(&p, Kind::Device), Err(Refusal::BadLength(_))));
        #[cfg(unix)]
        {
            let l = d.path().join("link");
            std::os::unix::fs::symlink(&p, &l).unwrap();
            assert!(matches!(read_capped(&l, Kind::Device), Err(Refusal::NotSealed(_))));
        }
    }

    #[test]
    fn a_refused_file_is_reported_only_once_it_stops_changing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("000000000001.seg");
        std::fs::write(&p, b"KSY").unwrap();
        let mut s = Settle::default();
        let t0 = Instant::now();
        let wall = SystemTime::now();
        assert_eq!(s.judge_at(&p, t0, wall), Verdict::Wait);
        assert_eq!(s.judge_at(&p, t0 + Duration::from_secs(5), wall), Verdict::Wait);
        // it grew: the clock starts again
        std::fs::write(&p, b"KSYNC").unwrap();
        assert_eq!(s.judge_at(&p, t0 + Duration::from_secs(11), wall), Verdict::Wait);
        assert_eq!(s.judge_at(&p, t0 + Duration::from_secs(22), wall), Verdict::Report);
        // a reader that just started: an old modification time is enough
        let mut fresh = Settle::default();
        assert_eq!(fresh.judge_at(&p, t0, wall + Duration::from_secs(60)), Verdict::Report);
    }
}
