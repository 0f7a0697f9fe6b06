//! The sync folder's layout (docs/sync.md "The folder"). Everything Keepsake writes is under
//! `<folder>/keepsake/`, so the folder a person shares may hold other things too:
//!
//! ```text
//! keepsake/keycheck                                   sealed known text: is this the right key?
//! keepsake/blobs/<64 hex>                             a picture, named by HMAC(key, its sha256)
//! keepsake/devices/<device id>/device                 the device's name and creation time
//! keepsake/devices/<device id>/<12 digits>.seg        a segment: that device's operations, in order
//! keepsake/devices/<device id>/checkpoint-<12 digits>.ckp   the whole state as of that segment
//! ```
//!
//! File names are ids and numbers only. Each device writes only its own folder (and blobs, where
//! the same name always means the same bytes), so a folder syncer never sees two writers of a
//! file. Names of any other shape (a syncer's temp files, `.sync-conflict` copies, our own temp
//! files `.<name>.<random>.tmp`) are ignored.

use std::path::{Path, PathBuf};

use super::seal::Kind;

/// The folder under the shared folder that Keepsake owns.
pub const BASE: &str = "keepsake";

/// A sync folder, as the person named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub root: PathBuf,
}

impl Folder {
    pub fn new(root: impl Into<PathBuf>) -> Folder {
        Folder { root: root.into() }
    }
    pub fn base(&self) -> PathBuf {
        self.root.join(BASE)
    }
    pub fn keycheck(&self) -> PathBuf {
        self.base().join("keycheck")
    }
    pub fn blobs(&self) -> PathBuf {
        self.base().join("blobs")
    }
    pub fn blob(&self, name: &str) -> PathBuf {
        self.blobs().join(name)
    }
    pub fn devices(&self) -> PathBuf {
        self.base().join("devices")
    }
    pub fn device_dir(&self, dev: &str) -> PathBuf {
        self.devices().join(dev)
    }
    pub fn device_file(&self, dev: &str) -> PathBuf {
        self.device_dir(dev).join("device")
    }
    pub fn segment(&self, dev: &str, seq: u64) -> PathBuf {
        self.device_dir(dev).join(segment_name(seq))
    }
    pub fn checkpoint(&self, dev: &str, seq: u64) -> PathBuf {
        self.device_dir(dev).join(checkpoint_name(seq))
    }
}

pub fn segment_name(seq: u64) -> String {
    format!("{seq:012}.seg")
}

pub fn checkpoint_name(seq: u64) -> String {
    format!("checkpoint-{seq:012}.ckp")
}

fn twelve_digits(s: &str) -> Option<u64> {
    (s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// `000000000042.seg` → 42.
pub fn parse_segment(name: &str) -> Option<u64> {
    twelve_digits(name.strip_suffix(".seg")?).filter(|&n| n > 0)
}

/// `checkpoint-000000000042.ckp` → 42.
pub fn parse_checkpoint(name: &str) -> Option<u64> {
    twelve_digits(name.strip_prefix("checkpoint-")?.strip_suffix(".ckp")?).filter(|&n| n > 0)
}

/// A device id as Keepsake makes them: a lower-case hyphenated UUID. A folder of any other name
/// under `devices/` is not a device.
pub fn is_device_id(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// A blob file name: 64 lower-case hex digits.
pub fn is_blob_name(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The associated-data context of a file: its kind and what its path names (`seal.rs`).
pub fn context(kind: Kind, dev: &str, n: u64) -> String {
    match kind {
        Kind::Segment => format!("segment/{dev}/{n}"),
        Kind::Checkpoint => format!("checkpoint/{dev}/{n}"),
        Kind::Device => format!("device/{dev}"),
        Kind::Blob => format!("blob/{dev}"),
        Kind::KeyCheck => "keycheck".into(),
    }
}

/// What one device's folder holds, by number.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeviceFiles {
    pub segments: Vec<u64>,
    pub checkpoints: Vec<u64>,
    pub has_device_file: bool,
}

/// The device folders under `devices/` (names that are device ids only), sorted.
pub fn list_devices(f: &Folder) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(f.devices())? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if is_device_id(&name) && e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// One device folder's segments and checkpoints, ascending; names of other shapes ignored.
pub fn list_device(dir: &Path) -> std::io::Result<DeviceFiles> {
    let mut d = DeviceFiles::default();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(n) = parse_segment(&name) {
            d.segments.push(n);
        } else if let Some(n) = parse_checkpoint(&name) {
            d.checkpoints.push(n);
        } else if name == "device" {
            d.has_device_file = true;
        }
    }
    d.segments.sort_unstable();
    d.checkpoints.sort_unstable();
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_ignored() {
        assert_eq!(segment_name(42), "000000000042.seg");
        assert_eq!(parse_segment("000000000042.seg"), Some(42));
        assert_eq!(parse_checkpoint(&checkpoint_name(7)), Some(7));
        for bad in [
            "42.seg",
            "000000000042.seg.tmp",
            ".000000000042.seg.x1.tmp",
            "000000000042.sync-conflict-20240101-000000-ABC.seg",
            "00000000004a.seg",
            "000000000000.seg",
            "+00000000042.seg",
        ] {
            assert_eq!(parse_segment(bad), None, "{bad}");
        }
        assert!(is_device_id("0b7e1d3c-5a4f-4c1e-9d2b-6f8a7e9c0d1e"));
        assert!(!is_device_id("../../../../etc/passwd-aaaaaaaaaaaaaaaaa"));
        assert!(!is_device_id("0B7E1D3C-5A4F-4C1E-9D2B-6F8A7E9C0D1E"));
        assert!(is_blob_name(&"a".repeat(64)));
        assert!(!is_blob_name(&"a".repeat(63)));
    }

    #[test]
    fn a_device_folder_lists_by_number() {
        let d = tempfile::tempdir().unwrap();
        for n in ["000000000003.seg", "000000000001.seg", "checkpoint-000000000002.ckp", "device", "junk"] {
            std::fs::write(d.path().join(n), b"x").unwrap();
        }
        let l = list_device(d.path()).unwrap();
        assert_eq!(l, DeviceFiles { segments: vec![1, 3], checkpoints: vec![2], has_device_file: true });
    }
}
