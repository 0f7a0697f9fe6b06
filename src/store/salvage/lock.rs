//! The exclusive hold on a damaged file (the module comment of `salvage/mod.rs`): SQLite's own
//! POSIX locks on the database and its `-shm`, taken without waiting, so a refused lock means
//! another process has the file open. Every access to the files while they are held goes
//! through the handles kept here (`copy.rs`): closing any other descriptor on those files would
//! drop this process's locks.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

#[cfg(unix)]
use crate::util::paths::sidecar;

/// SQLite's lock bytes (os_unix.c): PENDING at 1 GiB, then RESERVED, then 510 SHARED bytes;
/// the `-shm` locks are 8 bytes at 120 followed by the dead-man switch.
#[cfg(unix)]
const PENDING_BYTE: i64 = 0x4000_0000;
#[cfg(unix)]
const DB_LOCK_LEN: i64 = 2 + 510;
#[cfg(unix)]
const SHM_LOCK_START: i64 = 120;
#[cfg(unix)]
const SHM_LOCK_LEN: i64 = 9;

/// The database, `-wal` and `-shm` held exclusively (see the module comment).
#[cfg_attr(not(unix), allow(dead_code))]
pub(super) struct Exclusive {
    pub(super) db: File,
    pub(super) wal: Option<File>,
    pub(super) shm: Option<File>,
}

#[cfg_attr(not(unix), allow(dead_code))]
fn open_rw_nofollow(p: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW);
    }
    o.open(p)
}

#[cfg(unix)]
fn try_write_lock(f: &File, start: i64, len: i64) -> io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: an all-zero flock is a valid value; fcntl only reads it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = start as _;
    fl.l_len = len as _;
    // SAFETY: F_SETLK on a descriptor we own with a properly initialised flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

impl Exclusive {
    /// `Ok(None)`: another process has the database open (retried for about a second, to ride
    /// out a host that is just exiting).
    #[cfg(unix)]
    pub(super) fn acquire(db: &Path) -> io::Result<Option<Exclusive>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1000);
        loop {
            if let Some(x) = Self::try_once(db)? {
                return Ok(Some(x));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    #[cfg(unix)]
    fn try_once(db: &Path) -> io::Result<Option<Exclusive>> {
        let f = open_rw_nofollow(db)?;
        if !try_write_lock(&f, PENDING_BYTE, DB_LOCK_LEN)? {
            return Ok(None);
        }
        let shm = match open_rw_nofollow(&sidecar(db, "-shm")) {
            Ok(s) => {
                if !try_write_lock(&s, SHM_LOCK_START, SHM_LOCK_LEN)? {
                    return Ok(None);
                }
                Some(s)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let wal = match open_rw_nofollow(&sidecar(db, "-wal")) {
            Ok(w) => Some(w),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Some(Exclusive { db: f, wal, shm }))
    }

    /// Without POSIX locks there is no safe way to know that no other process has the file
    /// open, so automatic recovery is not attempted (`keepsake-host doctor` explains).
    #[cfg(not(unix))]
    pub(super) fn acquire(_db: &Path) -> io::Result<Option<Exclusive>> {
        Err(io::Error::other("moving a damaged database aside is only automatic on Linux and macOS"))
    }
}
