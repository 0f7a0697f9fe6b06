//! What each kind of sealed file holds once opened (docs/sync.md "The folder"). Every payload
//! names itself (device, number, hash) and the reader checks that against the path it was read
//! from, on top of the seal's associated data.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::seal::Refusal;
use crate::domain::import::hex;

/// Format version of every JSON payload.
pub const V: u32 = 1;

/// A segment: a run of one device's operations, in order, with no gap (`firstOp..=lastOp`), and
/// the pictures they reference (their sha256; the blob files were written first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Segment {
    pub v: u32,
    pub device: String,
    pub seq: u64,
    pub first_op: u64,
    pub last_op: u64,
    /// Sealed at (the writer's clock, ms).
    pub at: i64,
    /// Each operation's JSON as the store recorded it.
    pub ops: Vec<String>,
    pub blobs: Vec<String>,
}

/// `device`: who a device folder belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceInfo {
    pub v: u32,
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A checkpoint's header: the whole replicated state as the store exports it follows it, after
/// a newline, as of this device's segment `seq` (every segment of this device up to `seq` is in
/// it). The state stays the store's text: never parsed or copied into another document here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub v: u32,
    pub device: String,
    pub seq: u64,
    pub at: i64,
}

impl Checkpoint {
    pub fn to_bytes(&self, state: &str) -> Vec<u8> {
        let mut out = to_bytes(self);
        out.push(b'\n');
        out.extend_from_slice(state.as_bytes());
        out
    }

    /// The header and the state of an opened checkpoint, checked against its path.
    pub fn open<'a>(payload: &'a [u8], dev: &str, seq: u64) -> Result<(Checkpoint, &'a str), Refusal> {
        let bad = |why: &str| Refusal::BadPayload(why.to_owned());
        let nl = payload.iter().position(|&b| b == b'\n').ok_or_else(|| bad("no header"))?;
        let head: Checkpoint = from_bytes(&payload[..nl])?;
        if head.v != V || head.device != dev || head.seq != seq {
            return Err(bad("it names another checkpoint"));
        }
        let state = std::str::from_utf8(&payload[nl + 1..]).map_err(|_| bad("not UTF-8"))?;
        Ok((head, state))
    }
}

pub fn to_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("a payload serialises")
}

pub fn from_bytes<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(b).map_err(|e| Refusal::BadPayload(e.to_string()))
}

impl Segment {
    /// The checks a segment read from `<dev>/<seq>.seg` must pass beyond its seal.
    pub fn check(&self, dev: &str, seq: u64) -> Result<(), Refusal> {
        let bad = |why: String| Err(Refusal::BadPayload(why));
        if self.v != V {
            return bad(format!("segment format {}", self.v));
        }
        if self.device != dev || self.seq != seq {
            return bad(format!("it names segment {} of {}", self.seq, self.device));
        }
        let n = self.last_op.checked_sub(self.first_op).map(|d| d + 1);
        if self.first_op == 0 || n != Some(self.ops.len() as u64) {
            return bad(format!("{} operations for {}..={}", self.ops.len(), self.first_op, self.last_op));
        }
        Ok(())
    }
}

/// A blob's payload: a 4-byte little-endian length, a JSON header `{sha256, mime}`, the bytes.
pub fn blob_bytes(sha256: &str, mime: &str, bytes: &[u8]) -> Vec<u8> {
    let head = serde_json::to_vec(&serde_json::json!({"sha256": sha256, "mime": mime})).expect("json");
    let mut out = Vec::with_capacity(4 + head.len() + bytes.len());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(bytes);
    out
}

/// A blob's `(mime, bytes)`, checked: its bytes hash to the sha256 it names, and that is `want`.
pub fn open_blob(payload: &[u8], want: &str) -> Result<(String, Vec<u8>), Refusal> {
    let bad = |why: &str| Refusal::BadPayload(why.to_owned());
    let n =
        u32::from_le_bytes(payload.get(..4).ok_or_else(|| bad("too short"))?.try_into().expect("4")) as usize;
    let head: Value = serde_json::from_slice(payload.get(4..4 + n).ok_or_else(|| bad("header cut"))?)
        .map_err(|_| bad("header"))?;
    let sha = head["sha256"].as_str().ok_or_else(|| bad("no sha256"))?;
    let mime = head["mime"].as_str().unwrap_or("application/octet-stream").to_owned();
    let bytes = payload[4 + n..].to_vec();
    if sha != want || hex(&Sha256::digest(&bytes)) != want {
        return Err(bad("its bytes are not the picture its name promises"));
    }
    Ok((mime, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_must_name_its_own_place_and_count_its_operations() {
        let s = Segment {
            v: V,
            device: "d".into(),
            seq: 3,
            first_op: 10,
            last_op: 11,
            at: 0,
            ops: vec!["{}".into(), "{}".into()],
            blobs: vec![],
        };
        assert!(s.check("d", 3).is_ok());
        assert!(s.check("d", 4).is_err());
        assert!(s.check("e", 3).is_err());
        let mut t = s.clone();
        t.ops.pop();
        assert!(t.check("d", 3).is_err());
        let back: Segment = from_bytes(&to_bytes(&s)).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn a_blob_opens_only_as_the_picture_it_names() {
        let bytes = b"\x89PNG not really".to_vec();
        let sha = hex(&Sha256::digest(&bytes));
        let p = blob_bytes(&sha, "image/png", &bytes);
        assert_eq!(open_blob(&p, &sha).unwrap(), ("image/png".to_string(), bytes.clone()));
        assert!(open_blob(&p, &"0".repeat(64)).is_err());
        let other = blob_bytes(&sha, "image/png", b"other bytes");
        assert!(open_blob(&other, &sha).is_err());
        assert!(open_blob(&p[..3], &sha).is_err());
    }
}
