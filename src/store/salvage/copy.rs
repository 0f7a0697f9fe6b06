//! Byte copies under the exclusive hold (`lock.rs`): the damaged database, `-wal` and `-shm`
//! copied aside, and the repaired database written over the damaged one in place.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::lock::Exclusive;
use super::record::{ASIDE_INFIX, ASIDE_TIME};
use crate::util::files::{private_new, sync_dir};
use crate::util::paths::sidecar;

impl Exclusive {
    /// Copy the database and its sidecars to `<db>.corrupt-<UTC time>[-n]` (+ `-wal`, `-shm`).
    pub(super) fn copy_aside(&mut self, db: &Path) -> io::Result<(PathBuf, Vec<PathBuf>)> {
        let stamp = chrono::Utc::now().format(ASIDE_TIME).to_string();
        let base = (1..100)
            .map(|n| {
                let suffix = if n == 1 { String::new() } else { format!("-{n}") };
                sidecar(db, &format!("{ASIDE_INFIX}{stamp}{suffix}"))
            })
            .find(|p| ["", "-wal", "-shm"].iter().all(|s| std::fs::symlink_metadata(sidecar(p, s)).is_err()))
            .ok_or_else(|| io::Error::other("too many damaged copies this second"))?;
        let mut made = Vec::new();
        let res = (|| {
            let mut sidecars = Vec::new();
            for (src, suffix) in
                [(Some(&self.db), ""), (self.wal.as_ref(), "-wal"), (self.shm.as_ref(), "-shm")]
            {
                let Some(src) = src else { continue };
                let dest = sidecar(&base, suffix);
                let mut out = private_new(&dest)?;
                made.push(dest.clone());
                copy_from_start(src, &mut out)?;
                out.sync_all()?;
                if !suffix.is_empty() {
                    sidecars.push(dest);
                }
            }
            sync_dir(db);
            Ok((base.clone(), sidecars))
        })();
        if res.is_err() {
            // only our own partial copies; the damaged original is untouched
            for p in made {
                let _ = std::fs::remove_file(p);
            }
        }
        res
    }

    /// Replace the damaged bytes with the repaired database, in place, under the locks.
    pub(super) fn install(&mut self, scratch: &Path) -> io::Result<()> {
        let mut src = File::open(scratch)?;
        if let Some(w) = &self.wal {
            w.set_len(0)?;
            w.sync_all()?;
        }
        if let Some(s) = &self.shm {
            s.set_len(0)?;
        }
        self.db.set_len(0)?;
        let mut pos = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = io::Read::read(&mut src, &mut buf)?;
            if n == 0 {
                break;
            }
            write_all_at(&self.db, &buf[..n], pos)?;
            pos += n as u64;
        }
        self.db.sync_all()
    }
}

fn copy_from_start(src: &File, out: &mut File) -> io::Result<()> {
    let mut pos = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = read_at(src, &mut buf, pos)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n])?;
        pos += n as u64;
    }
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(f, buf, pos)
}

#[cfg(unix)]
pub(super) fn write_all_at(f: &File, buf: &[u8], pos: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, pos)
}

#[cfg(windows)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(f, buf, pos)
}

#[cfg(windows)]
pub(super) fn write_all_at(f: &File, mut buf: &[u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(f, buf, pos)?;
        buf = &buf[n..];
        pos += n as u64;
    }
    Ok(())
}
