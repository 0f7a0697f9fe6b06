//! Sealed files (docs/sync.md "The folder"): every file Keepsake puts in a sync folder is one of
//! these, so the folder holds no plain text and a reader never applies a file that is still
//! arriving, damaged, forged or moved to another name.
//!
//! ```text
//! 0..6    magic "KSYNC1"
//! 6       kind (segment, checkpoint, device, blob, keycheck)
//! 7       format version (1)
//! 8..32   a random 24-byte nonce
//! 32..40  the ciphertext's length, u64 little-endian (payload + 16-byte tag)
//! 40..    XChaCha20-Poly1305 ciphertext of the payload
//! ```
//!
//! The associated data is the 40 header bytes followed by the file's **context**: its kind, device
//! id and number as the path names them (`segment/<device>/<seq>`), so a file copied under another
//! name, another device's folder or another kind does not open. The cipher key and the key that
//! names blobs are derived from the 256-bit sync key by HMAC-SHA256 with distinct labels, so the
//! sync key itself is used for nothing else.

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::domain::import::hex;

pub const MAGIC: &[u8; 6] = b"KSYNC1";
pub const VERSION: u8 = 1;
pub const NONCE_LEN: usize = 24;
pub const TAG_LEN: usize = 16;
pub const HEADER_LEN: usize = 6 + 1 + 1 + NONCE_LEN + 8;

/// What a sealed file holds. The byte is in the header and in the associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Segment = 1,
    Checkpoint = 2,
    Device = 3,
    Blob = 4,
    KeyCheck = 5,
}

impl Kind {
    pub fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Segment,
            2 => Kind::Checkpoint,
            3 => Kind::Device,
            4 => Kind::Blob,
            5 => Kind::KeyCheck,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Segment => "segment",
            Kind::Checkpoint => "checkpoint",
            Kind::Device => "device",
            Kind::Blob => "blob",
            Kind::KeyCheck => "keycheck",
        }
    }

    /// The largest file of this kind a reader reads into memory; anything longer is refused
    /// without reading it. The writer keeps segments far below ([`crate::sync::writer`]).
    pub fn max_len(self) -> u64 {
        const MIB: u64 = 1024 * 1024;
        match self {
            Kind::Segment => 64 * MIB,
            // a picture is at most 32 MiB (protocol limits), plus its small header
            Kind::Blob => 48 * MIB,
            Kind::Checkpoint => 4096 * MIB,
            Kind::Device | Kind::KeyCheck => MIB,
        }
    }
}

/// The 256-bit sync key.
#[derive(Clone, PartialEq, Eq)]
pub struct SyncKey(pub [u8; 32]);

impl std::fmt::Debug for SyncKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SyncKey(…)")
    }
}

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().into()
}

impl SyncKey {
    /// 256 random bits from the operating system.
    pub fn random() -> SyncKey {
        let k = XChaCha20Poly1305::generate_key(&mut OsRng);
        SyncKey(k.into())
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        let k = hmac(&self.0, b"keepsake-sync seal v1");
        XChaCha20Poly1305::new((&k).into())
    }

    /// A blob's file name: HMAC-SHA256 of its sha256 (hex) under the naming key, in hex. A plain
    /// sha256 would let anyone holding a known picture test whether it is in the folder.
    pub fn blob_name(&self, sha256_hex: &str) -> String {
        let k = hmac(&self.0, b"keepsake-sync names v1");
        hex(&hmac(&k, sha256_hex.as_bytes()))
    }

    /// Seal `payload` as a file of `kind` whose path names `context`.
    pub fn seal(&self, kind: Kind, context: &str, payload: &[u8]) -> Vec<u8> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + TAG_LEN);
        out.extend_from_slice(MAGIC);
        out.push(kind as u8);
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&((payload.len() + TAG_LEN) as u64).to_le_bytes());
        let aad = associated(&out[..HEADER_LEN], context);
        let ct = self
            .cipher()
            .encrypt(&nonce, Payload { msg: payload, aad: &aad })
            .expect("XChaCha20-Poly1305 encrypts any payload under 256 GiB");
        out.extend_from_slice(&ct);
        out
    }

    /// Open a sealed file's bytes, expecting `kind` and `context`. Nothing is trusted: the
    /// length, magic, kind and version are checked before the tag, and the payload is returned
    /// only when the tag checks.
    pub fn open(&self, kind: Kind, context: &str, bytes: &[u8]) -> Result<Vec<u8>, Refusal> {
        let h = check_header(kind, bytes)?;
        let aad = associated(&bytes[..HEADER_LEN], context);
        let nonce = XNonce::from_slice(&bytes[8..8 + NONCE_LEN]);
        self.cipher()
            .decrypt(nonce, Payload { msg: &bytes[HEADER_LEN..HEADER_LEN + h as usize], aad: &aad })
            .map_err(|_| Refusal::Tag)
    }
}

fn associated(header: &[u8], context: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(header.len() + context.len());
    aad.extend_from_slice(header);
    aad.extend_from_slice(context.as_bytes());
    aad
}

/// The header's checks; the ciphertext's declared length when they pass.
pub fn check_header(kind: Kind, bytes: &[u8]) -> Result<u64, Refusal> {
    let have = bytes.len() as u64;
    if bytes.len() < HEADER_LEN {
        // a prefix of the magic may be a file being written in place
        if !MAGIC.starts_with(&bytes[..bytes.len().min(MAGIC.len())]) {
            return Err(Refusal::NotSealed("it does not start as a Keepsake sync file".into()));
        }
        return Err(Refusal::Short { have, want: None });
    }
    if &bytes[..6] != MAGIC {
        return Err(Refusal::NotSealed("it does not start as a Keepsake sync file".into()));
    }
    match Kind::from_byte(bytes[6]) {
        Some(k) if k == kind => {}
        Some(k) => {
            return Err(Refusal::NotSealed(format!("it is a {} file, not a {}", k.name(), kind.name())))
        }
        None => return Err(Refusal::NotSealed(format!("unknown kind {}", bytes[6]))),
    }
    if bytes[7] != VERSION {
        return Err(Refusal::NotSealed(format!(
            "format version {} (this keepsake-host reads {VERSION}; a newer one wrote it?)",
            bytes[7]
        )));
    }
    let declared = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
    if declared < TAG_LEN as u64 || declared > kind.max_len() {
        return Err(Refusal::BadLength(format!("it declares {declared} bytes of content")));
    }
    let want = HEADER_LEN as u64 + declared;
    if have < want {
        return Err(Refusal::Short { have, want: Some(want) });
    }
    if have > want {
        return Err(Refusal::BadLength(format!("{} bytes longer than it declares", have - want)));
    }
    Ok(declared)
}

/// Why a sealed file was not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than its header (or than a header): perhaps still arriving.
    Short { have: u64, want: Option<u64> },
    /// Not a Keepsake sealed file of the expected kind and version.
    NotSealed(String),
    /// A length that cannot be right.
    BadLength(String),
    /// The tag does not check: damaged, sealed with another sync key, or moved from another name.
    Tag,
    /// Opened, but what it holds is not what this kind of file holds.
    BadPayload(String),
    /// It could not be read.
    Io(String),
}

impl Refusal {
    /// Damaged, or foreign: the two words `sync status` uses.
    pub fn is_foreign(&self) -> bool {
        matches!(self, Refusal::Tag)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Short { have, want: Some(w) } => write!(f, "incomplete: {have} of {w} bytes"),
            Refusal::Short { have, want: None } => write!(f, "incomplete: {have} bytes, shorter than a header"),
            Refusal::NotSealed(why) => write!(f, "not a Keepsake sync file: {why}"),
            Refusal::BadLength(why) => write!(f, "damaged: {why}"),
            Refusal::Tag => f.write_str(
                "its seal does not check: damaged, written with another sync key, or renamed from another file",
            ),
            Refusal::BadPayload(why) => write!(f, "damaged content: {why}"),
            Refusal::Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SyncKey {
        SyncKey([b; 32])
    }

    #[test]
    fn a_sealed_file_opens_with_its_key_kind_and_context_only() {
        let k = key(7);
        let f = k.seal(Kind::Segment, "segment/dev/1", b"hello operations");
        assert_eq!(&f[..6], MAGIC);
        assert_eq!(f.len(), HEADER_LEN + 16 + TAG_LEN);
        assert_eq!(k.open(Kind::Segment, "segment/dev/1", &f).unwrap(), b"hello operations");
        assert!(!f.windows(5).any(|w| w == b"hello"), "the payload is not in the file");
        assert_eq!(key(8).open(Kind::Segment, "segment/dev/1", &f), Err(Refusal::Tag));
        assert_eq!(k.open(Kind::Segment, "segment/dev/2", &f), Err(Refusal::Tag), "renamed");
        assert_eq!(k.open(Kind::Segment, "segment/other/1", &f), Err(Refusal::Tag), "moved");
        assert!(matches!(k.open(Kind::Checkpoint, "segment/dev/1", &f), Err(Refusal::NotSealed(_))));
        // two seals of the same bytes differ (random nonce)
        assert_ne!(f, k.seal(Kind::Segment, "segment/dev/1", b"hello operations"));
    }

    #[test]
    fn every_prefix_is_incomplete_and_every_extension_damaged() {
        let k = key(1);
        let f = k.seal(Kind::Device, "device/d", b"{\"name\":\"laptop\"}");
        for n in 0..f.len() {
            match k.open(Kind::Device, "device/d", &f[..n]) {
                Err(Refusal::Short { have, .. }) => assert_eq!(have, n as u64),
                other => panic!("prefix of {n} bytes: {other:?}"),
            }
        }
        let mut longer = f.clone();
        longer.push(0);
        assert!(matches!(k.open(Kind::Device, "device/d", &longer), Err(Refusal::BadLength(_))));
        // a file written in place over zeros is not mistaken for an incomplete one
        assert!(matches!(k.open(Kind::Device, "device/d", &[0u8; 3]), Err(Refusal::NotSealed(_))));
    }

    /// The fuzz-like proof: every byte of a small sealed file flipped (each bit pattern 0x01,
    /// 0x80, 0xff) is refused, 100 %; never a panic, never a payload.
    #[test]
    fn every_flipped_byte_is_refused() {
        let k = key(3);
        let f = k.seal(Kind::Segment, "segment/d/42", b"[{\"op\":\"entry\",\"text\":\"marker\"}]");
        let mut refused = 0;
        let mut tried = 0;
        for i in 0..f.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut g = f.clone();
                g[i] ^= flip;
                tried += 1;
                if k.open(Kind::Segment, "segment/d/42", &g).is_err() {
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, tried, "{refused} of {tried} flipped files refused");
        eprintln!("flipped-byte files refused: {refused} of {tried} (100 %), file of {} bytes", f.len());
    }

    #[test]
    fn blob_names_depend_on_the_key_and_hide_the_hash() {
        let sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let a = key(1).blob_name(sha);
        assert_eq!(a.len(), 64);
        assert_eq!(a, key(1).blob_name(sha));
        assert_ne!(a, key(2).blob_name(sha));
        assert_ne!(a, sha);
    }

    #[test]
    fn random_keys_differ() {
        assert_ne!(SyncKey::random(), SyncKey::random());
    }
}
