//! A header that makes the damaged file unreadable is rebuilt in a scratch copy (step 3 of the
//! policy in `mod.rs`) from what a Keepsake database always has.

use std::fs::File;
use std::io;
use std::path::Path;

use super::copy::write_all_at;
use crate::store::{migrate, pagescan};
use crate::util::files::private_new;
use crate::util::paths::sidecar;

/// A scratch copy of `src` (and its `-wal`) with the 100-byte header rebuilt from what a
/// Keepsake database always has (UTF-8, schema format 4, no auto-vacuum), keeping a valid page
/// size from the damaged header when there is one.
pub(super) fn rebuild_header(src: &Path, dest: &Path, page_size: u32) -> io::Result<()> {
    let len = std::fs::metadata(src)?.len();
    if len < page_size as u64 {
        return Err(io::Error::other("shorter than one page"));
    }
    let old = pagescan::read_head(src, 100)
        .filter(|h| h.len() == 100)
        .ok_or_else(|| io::Error::other("unreadable"))?;
    let has_wal = std::fs::metadata(sidecar(src, "-wal")).is_ok_and(|m| m.len() > 32);
    let mut h = [0u8; 100];
    h[..16].copy_from_slice(b"SQLite format 3\0");
    let ps: u16 = if page_size == 65536 { 1 } else { page_size as u16 };
    h[16..18].copy_from_slice(&ps.to_be_bytes());
    h[18] = if has_wal { 2 } else { 1 };
    h[19] = h[18];
    h[21] = 64;
    h[22] = 32;
    h[23] = 32;
    h[24..28].copy_from_slice(&1u32.to_be_bytes());
    let pages = u32::try_from(len / page_size as u64).unwrap_or(u32::MAX);
    h[28..32].copy_from_slice(&pages.to_be_bytes());
    // keep the freelist when the damaged header still names a plausible one: the page scan
    // needs it to tell freed pages (deleted rows) from live ones
    let old32 = |at: usize| u32::from_be_bytes([old[at], old[at + 1], old[at + 2], old[at + 3]]);
    let (trunk, free) = (old32(32), old32(36));
    if trunk <= pages && free < pages && (trunk == 0) == (free == 0) {
        h[32..40].copy_from_slice(&old[32..40]);
    }
    h[40..44].copy_from_slice(&1u32.to_be_bytes());
    h[44..48].copy_from_slice(&4u32.to_be_bytes());
    h[56..60].copy_from_slice(&1u32.to_be_bytes());
    // the user_version: the damaged header's when it names a version this host knows (the rows
    // are copied into tables of that version), else 0 (the version is read off the schema)
    let version = old32(60);
    let version = if (1..=migrate::LATEST).contains(&version) { version } else { 0 };
    h[60..64].copy_from_slice(&version.to_be_bytes());
    h[92..96].copy_from_slice(&1u32.to_be_bytes());
    h[96..100].copy_from_slice(&3_050_002u32.to_be_bytes());
    let mut out = private_new(dest)?;
    io::copy(&mut File::open(src)?, &mut out)?;
    write_all_at(&out, &h, 0)?;
    out.sync_all()?;
    if has_wal {
        let mut w = private_new(&sidecar(dest, "-wal"))?;
        io::copy(&mut File::open(sidecar(src, "-wal"))?, &mut w)?;
        w.sync_all()?;
    }
    Ok(())
}

/// Page sizes worth trying for a rebuilt header: the damaged header's own when valid, then
/// Keepsake's 4 KiB, then the rest.
pub(super) fn page_size_candidates(src: &Path) -> Vec<u32> {
    let mut v = Vec::new();
    if let Some(ps) = pagescan::read_head(src, 100).as_deref().and_then(pagescan::header_page_size) {
        v.push(ps as u32);
    }
    for ps in [4096, 1024, 2048, 8192, 16384, 32768, 65536, 512] {
        if !v.contains(&ps) {
            v.push(ps);
        }
    }
    v
}
