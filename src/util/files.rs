//! Files Keepsake creates: new, readable by the user only, never through a symbolic link, never
//! into someone else's file, never seen half written; and the folder entry of a new or renamed
//! file made durable.
//!
//! Every file the command line writes for the user goes through [`write_new`] (or
//! [`write_bytes`]): an export (`export --out`), a backup, the man pages, the browser manifests,
//! the install receipt and the recovery record. The rule, in this order:
//!
//! 1. The target is looked at without following a link. A symbolic link, a folder or device, or
//!    (Unix) a file owned by another user is refused before anything is created: the
//!    [`WriteError`] says which. A file that exists is refused too when the writer asks for
//!    [`Existing::Refuse`] (a backup never replaces anything); with [`Existing::ReplaceOwn`] a
//!    regular file the caller owns is replaced — by rename, so its old inode (and any other name
//!    it has) is never written.
//! 2. The bytes go into a temp file `.<name>.<random>.tmp` created new in the target's folder by
//!    [`private_new`] (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600), are fsynced, and the file gets
//!    its final mode (0600 for anything that holds the user's data, 0644 for a manifest or man
//!    page that others must read) on its own handle.
//! 3. The temp file is put at the target in one step: `rename` for `ReplaceOwn` (in a sticky
//!    folder such as `/tmp` the kernel refuses to rename over another user's file: the error says
//!    so), `renameat2(RENAME_NOREPLACE)` or `link` for `Refuse` (a file that appeared meanwhile is
//!    never replaced). Then the target is checked to be the very file written (same device and
//!    inode) and its folder is fsynced.
//!
//! A write that fails or is interrupted leaves the target as it was: at most the temp file
//! remains, never a half-written target.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// Mode of a file that holds the user's data (exports, backups, the receipt).
pub const PRIVATE: u32 = 0o600;
/// Mode of a file other users and programs must read (browser manifests, man pages).
pub const PUBLIC: u32 = 0o644;

/// Create `p`, which must not exist yet: mode 0600, without following a symbolic link (Unix).
pub fn private_new(p: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    o.open(p)
}

/// fsync the folder that holds `db` (so a file created or renamed in it survives a power cut).
pub fn sync_dir(db: &Path) {
    if let Some(d) = db.parent() {
        if let Ok(f) = File::open(if d.as_os_str().is_empty() { Path::new(".") } else { d }) {
            let _ = f.sync_all();
        }
    }
}

/// Make sure `dir` is a folder Keepsake may write copies into: created (with missing parents)
/// mode 0700 when absent; an existing folder is used as it is. A symbolic link at `dir` or
/// something that is not a folder is refused, and left as it was.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(md) if md.file_type().is_symlink() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is a symbolic link; Keepsake never writes through one", dir.display()),
            ))
        }
        Ok(md) if md.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} exists and is not a folder", dir.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)?;
    // a link put there meanwhile is refused as above
    match std::fs::symlink_metadata(dir) {
        Ok(md) if md.is_dir() && !md.file_type().is_symlink() => Ok(()),
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a folder", dir.display()))),
    }
}

/// The space free for this user and the size of the file system that holds `path` (or its
/// nearest existing parent), in bytes; `None` where it cannot be read.
pub fn free_space(path: &Path) -> Option<(u64, u64)> {
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
    }
    #[cfg(unix)]
    {
        let s = rustix::fs::statvfs(p).ok()?;
        Some((s.f_bavail.saturating_mul(s.f_frsize), s.f_blocks.saturating_mul(s.f_frsize)))
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        None
    }
}

/// Whether an I/O error means the disk (or a quota, or a file-size limit) is full.
pub fn is_no_space(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG)) {
            return true;
        }
    }
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::FileTooLarge | io::ErrorKind::QuotaExceeded
    )
}

/// What [`write_new`] does when the target already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Never replace anything: the target must not exist (backups).
    Refuse,
    /// Replace a regular file the caller owns, by rename (exports, man pages, manifests, the
    /// receipt, the recovery record).
    ReplaceOwn,
}

/// Why a file was not written. The target is left as it was in every case.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{} already exists and was left as it was; choose a new file name", .path.display())]
    Exists { path: PathBuf },
    #[error(
        "{} is a symbolic link; Keepsake never writes through one (the link and what it points to were left \
         as they were): remove it or choose another name", .path.display()
    )]
    Symlink { path: PathBuf },
    #[error("{} is not a regular file (a folder, device or socket) and was left as it was", .path.display())]
    NotRegular { path: PathBuf },
    #[error(
        "{} belongs to user {owner}, not to you (user {me}), and was left as it was; in a folder others can \
         write, such as /tmp, anyone can create a file under the name you chose before you do: write into a \
         folder only you can write", .path.display()
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{} was replaced by someone else's file while it was written (the folder is shared); nothing was written \
         into it: write into a folder only you can write", .path.display()
    )]
    Raced { path: PathBuf },
    #[error("cannot write {}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl WriteError {
    /// The target itself was refused (it exists, is a link, is not a regular file, is another
    /// user's, or changed under us), as opposed to an I/O failure.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, WriteError::Io { .. })
    }

    /// The I/O error behind a failure that is not a refusal.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            WriteError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A failed [`write_new`]: the file could not be written, or filling it failed.
#[derive(Debug)]
pub enum WriteFailed<E> {
    /// The target was refused, or the temp file could not be made, synced or put in place.
    File(WriteError),
    /// What the `fill` function returned.
    Content(E),
}

impl<E> From<WriteError> for WriteFailed<E> {
    fn from(e: WriteError) -> Self {
        WriteFailed::File(e)
    }
}

fn io_err(path: &Path, source: io::Error) -> WriteError {
    WriteError::Io { path: path.to_path_buf(), source }
}

#[cfg(unix)]
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why what exists at `target` (its `lstat`) may not be written, if it may not.
fn refusal(target: &Path, md: &std::fs::Metadata, existing: Existing) -> Option<WriteError> {
    let path = target.to_path_buf();
    if md.file_type().is_symlink() {
        return Some(WriteError::Symlink { path });
    }
    if !md.is_file() {
        return Some(WriteError::NotRegular { path });
    }
    if existing == Existing::Refuse {
        return Some(WriteError::Exists { path });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = euid();
        if md.uid() != me {
            return Some(WriteError::NotOwned { path, owner: md.uid(), me });
        }
    }
    None
}

/// Step 1: may `target` be written?
fn check_target(target: &Path, existing: Existing) -> Result<(), WriteError> {
    match std::fs::symlink_metadata(target) {
        Ok(md) => refusal(target, &md, existing).map_or(Ok(()), Err),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(target, e)),
    }
}

/// The refusal that explains a failed publish (what is at the target now), else `fallback`.
fn explain(target: &Path, existing: Existing, fallback: WriteError) -> WriteError {
    match std::fs::symlink_metadata(target) {
        Ok(md) => refusal(target, &md, existing).unwrap_or(fallback),
        Err(_) => fallback,
    }
}

/// A temp file beside `target`: `.<name>.<random>.tmp`, created new (0600, no link followed).
fn temp_beside(target: &Path) -> Result<(PathBuf, File), WriteError> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name: String = target
        .file_name()
        .map(|n| n.to_string_lossy().chars().take(100).collect())
        .ok_or_else(|| io_err(target, io::Error::new(io::ErrorKind::InvalidInput, "it names no file")))?;
    let mut last = None;
    for _ in 0..8 {
        let random = uuid::Uuid::new_v4().simple().to_string();
        let tmp = dir.join(format!(".{name}.{}.tmp", &random[..16]));
        match private_new(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(io_err(
                    target,
                    io::Error::new(e.kind(), format!("cannot create a file in {}: {e}", dir.display())),
                ))
            }
        }
    }
    Err(io_err(target, last.unwrap_or_else(|| io::Error::other("no free temp name"))))
}

/// Remove a file, never through a symbolic link (a link there is left alone).
pub fn remove_file_no_follow(p: &Path) -> io::Result<()> {
    let md = std::fs::symlink_metadata(p)?;
    if !md.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", p.display()),
        ));
    }
    std::fs::remove_file(p)
}

/// Put `tmp` at `target`, which must not exist (never replacing one that appeared meanwhile).
fn publish_new(tmp: &Path, target: &Path) -> Result<(), WriteError> {
    let exists = || explain(target, Existing::Refuse, WriteError::Exists { path: target.to_path_buf() });
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        use rustix::io::Errno;
        match renameat_with(CWD, tmp, CWD, target, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(e) if e == Errno::EXIST => return Err(exists()),
            // a file system (or kernel) without it (EINVAL, ENOSYS, ENOTSUP…): a hard link is just
            // as exclusive; any other error, `link` meets again and reports
            Err(_) => {}
        }
    }
    match std::fs::hard_link(tmp, target) {
        Ok(()) => {
            let _ = std::fs::remove_file(tmp);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(exists()),
        // a file system without hard links (FAT, some network shares): check, then rename
        Err(e) if matches!(e.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported) => {
            check_target(target, Existing::Refuse)?;
            std::fs::rename(tmp, target).map_err(|e| io_err(target, e))
        }
        Err(e) => Err(io_err(target, e)),
    }
}

/// Put `tmp` at `target`, replacing a regular file the caller owns (checked before).
fn publish_replace(tmp: &Path, target: &Path) -> Result<(), WriteError> {
    std::fs::rename(tmp, target).map_err(|e| {
        let denied = e.kind() == io::ErrorKind::PermissionDenied;
        let e = io_err(target, e);
        // a sticky folder refuses to rename over another user's file (EPERM): say whose it is
        if denied {
            explain(target, Existing::ReplaceOwn, e)
        } else {
            e
        }
    })
}

/// After the publish: `target` is the file written (same device and inode as the handle).
#[cfg(unix)]
fn is_ours(target: &Path, f: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(target), f.metadata()) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(not(unix))]
fn is_ours(_: &Path, _: &File) -> bool {
    true
}

#[cfg(unix)]
fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_: &File, _: u32) -> io::Result<()> {
    Ok(())
}

/// Write `target` by the rule in the module documentation: `fill` writes the content into the
/// temp file (given both its path, for SQLite, and its handle); the file then gets `mode`, is
/// fsynced and put at `target` as `existing` says. On any failure the temp file is removed and
/// the target is as it was.
pub fn write_new<T, E>(
    target: &Path,
    mode: u32,
    existing: Existing,
    fill: impl FnOnce(&Path, &mut File) -> Result<T, E>,
) -> Result<T, WriteFailed<E>> {
    check_target(target, existing)?;
    let (tmp, mut f) = temp_beside(target)?;
    let result = (|| {
        let v = fill(&tmp, &mut f).map_err(WriteFailed::Content)?;
        if mode != 0o600 {
            set_mode(&f, mode).map_err(|e| io_err(target, e))?;
        }
        f.sync_all().map_err(|e| io_err(target, e))?;
        match existing {
            Existing::Refuse => publish_new(&tmp, target)?,
            Existing::ReplaceOwn => publish_replace(&tmp, target)?,
        }
        Ok(v)
    })();
    match result {
        Ok(v) => {
            sync_dir(target);
            if !is_ours(target, &f) {
                return Err(WriteError::Raced { path: target.to_path_buf() }.into());
            }
            Ok(v)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// [`write_new`] with `bytes` as the content.
pub fn write_bytes(target: &Path, mode: u32, existing: Existing, bytes: &[u8]) -> Result<(), WriteError> {
    use std::io::Write;
    write_new(target, mode, existing, |_, f| f.write_all(bytes)).map_err(|e| match e {
        WriteFailed::File(e) => e,
        WriteFailed::Content(e) => io_err(target, e),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn listing(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_file_is_written_whole_with_its_mode_and_no_temp_file_left() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        write_bytes(&p, PRIVATE, Existing::ReplaceOwn, b"hello").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        assert_eq!(mode(&p), 0o600);
        let q = d.path().join("page.1");
        write_bytes(&q, PUBLIC, Existing::Refuse, b"man").unwrap();
        assert_eq!(mode(&q), 0o644);
        assert_eq!(listing(d.path()), ["out.txt", "page.1"]);
    }

    #[test]
    fn replace_own_renames_over_the_old_inode_and_refuse_leaves_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let other_name = d.path().join("hard");
        std::fs::hard_link(&p, &other_name).unwrap();
        assert!(matches!(write_bytes(&p, PRIVATE, Existing::Refuse, b"new"), Err(WriteError::Exists { .. })));
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        write_bytes(&p, PRIVATE, Existing::ReplaceOwn, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(mode(&p), 0o600, "a new inode, not the old 0666 one");
        assert_eq!(std::fs::read(&other_name).unwrap(), b"old", "the old inode was written");
        assert_eq!(listing(d.path()), ["hard", "x"]);
    }

    #[test]
    fn links_and_folders_are_refused_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let aim = d.path().join("aim");
        std::fs::write(&aim, b"aim").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&aim, &link).unwrap();
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
        for existing in [Existing::Refuse, Existing::ReplaceOwn] {
            for l in [&link, &dangling] {
                let e = write_bytes(l, PRIVATE, existing, b"x").unwrap_err();
                assert!(matches!(e, WriteError::Symlink { .. }), "{e}");
                assert!(e.is_refusal());
            }
            let e = write_bytes(d.path(), PRIVATE, existing, b"x").unwrap_err();
            assert!(matches!(e, WriteError::NotRegular { .. } | WriteError::Io { .. }), "{e}");
        }
        assert_eq!(std::fs::read(&aim).unwrap(), b"aim");
        assert!(!d.path().join("nowhere").exists());
        assert_eq!(listing(d.path()), ["aim", "dangling", "link"]);
    }

    #[test]
    fn a_failing_fill_leaves_no_file_and_the_target_as_it_was() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, b"before").unwrap();
        let r: Result<(), WriteFailed<&str>> = write_new(&p, PRIVATE, Existing::ReplaceOwn, |_, f| {
            use std::io::Write;
            f.write_all(b"half").unwrap();
            Err("interrupted")
        });
        assert!(matches!(r, Err(WriteFailed::Content("interrupted"))));
        assert_eq!(std::fs::read(&p).unwrap(), b"before");
        assert_eq!(listing(d.path()), ["x"]);
    }

    #[test]
    fn a_missing_folder_is_an_io_error() {
        let d = tempfile::tempdir().unwrap();
        let e = write_bytes(&d.path().join("no/such/x"), PRIVATE, Existing::ReplaceOwn, b"x").unwrap_err();
        assert!(!e.is_refusal(), "{e}");
        assert_eq!(e.io_error().unwrap().kind(), io::ErrorKind::NotFound);
    }
}
