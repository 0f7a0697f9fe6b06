//! `uninstall` removes only what it can prove `install` wrote.
//!
//! The receipt sits in a folder the user can write, and `uninstall --system` runs as root, so no
//! path read from it is trusted: a file goes only when it is a regular file (not a symbolic link,
//! not a folder) whose content proves what it is —
//! - a **manifest**: a JSON object, at most 64 KiB, whose `name` is `dev.keepsake.host`;
//! - the **binary**: named `keepsake-host` (`.exe`), an executable (ELF, Mach-O or PE header) whose
//!   bytes contain both `dev.keepsake.host` and `keepsake-host` (every version of the host
//!   carries both: it writes the manifest).
//!
//! Where the path must be (a folder `install` writes) is the caller's check. On Unix the file is
//! opened, read and unlinked through one handle on its folder (`openat`, `O_NOFOLLOW`,
//! `unlinkat`), and the entry unlinked is the one read (same device and inode), so swapping a
//! folder or the file for a link between the check and the removal removes nothing else.

use std::io::{self, Read};
use std::path::Path;

use super::browsers::HOST_NAME;

/// What a file must prove to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Manifest,
    Binary,
}

/// Why a file was left where it is.
#[derive(Debug)]
pub enum Left {
    /// Nothing there: not an error.
    Missing,
    /// It is not provably ours: reported, never removed.
    NotOurs(String),
    /// It is ours but could not be removed.
    Io(io::Error),
}

const MANIFEST_MAX: u64 = 64 * 1024;
/// The host binary is ~9 MB; anything past 512 MiB is not it.
const BINARY_MAX: u64 = 512 * 1024 * 1024;

fn is_executable_header(b: &[u8]) -> bool {
    const MAGICS: [&[u8]; 6] = [
        b"\x7fELF",
        b"\xcf\xfa\xed\xfe", // Mach-O 64, little endian
        b"\xfe\xed\xfa\xcf", // Mach-O 64, big endian
        b"\xce\xfa\xed\xfe", // Mach-O 32
        b"\xca\xfe\xba\xbe", // universal (fat) Mach-O
        b"MZ",               // PE (Windows)
    ];
    MAGICS.iter().any(|m| b.starts_with(m))
}

/// Whether `bytes` (the whole file) are what `kind` says; `Err` says why not.
pub fn check(kind: Kind, name: &str, bytes: &[u8]) -> Result<(), String> {
    match kind {
        Kind::Manifest => {
            let v: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|_| "it is not a JSON manifest".to_owned())?;
            match v.get("name").and_then(|n| n.as_str()) {
                Some(HOST_NAME) => Ok(()),
                Some(other) => Err(format!("it is the manifest of another host ({other})")),
                None => Err("it is not a native messaging manifest (no \"name\")".to_owned()),
            }
        }
        Kind::Binary => {
            if name != "keepsake-host" && !name.eq_ignore_ascii_case("keepsake-host.exe") {
                return Err(format!("its name is {name}, not keepsake-host"));
            }
            if !is_executable_header(bytes) {
                return Err("it is not an executable".to_owned());
            }
            let finder = |needle: &[u8]| memchr::memmem::find(bytes, needle).is_some();
            if !finder(HOST_NAME.as_bytes()) || !finder(b"keepsake-host") {
                return Err("it is not a keepsake-host binary".to_owned());
            }
            Ok(())
        }
    }
}

fn limit(kind: Kind) -> u64 {
    match kind {
        Kind::Manifest => MANIFEST_MAX,
        Kind::Binary => BINARY_MAX,
    }
}

fn read_bounded(f: impl Read, max: u64) -> Result<Vec<u8>, Left> {
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes).map_err(Left::Io)?;
    if bytes.len() as u64 > max {
        return Err(Left::NotOurs(format!("it is larger than {max} bytes")));
    }
    Ok(bytes)
}

/// Remove `path` when it proves to be `kind`.
#[cfg(unix)]
pub fn remove_if_ours(path: &Path, kind: Kind) -> Result<(), Left> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Left::NotOurs("it is not a file path".to_owned()));
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let dirfd =
        match rustix::fs::open(dir, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e == rustix::io::Errno::NOENT => return Err(Left::Missing),
            Err(e) => return Err(Left::Io(e.into())),
        };
    let st = match rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(e) if e == rustix::io::Errno::NOENT => return Err(Left::Missing),
        Err(e) => return Err(Left::Io(e.into())),
    };
    let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
    if ft == rustix::fs::FileType::Symlink {
        return Err(Left::NotOurs("it is a symbolic link".to_owned()));
    }
    if ft != rustix::fs::FileType::RegularFile {
        return Err(Left::NotOurs("it is not a regular file".to_owned()));
    }
    let fd = rustix::fs::openat(
        &dirfd,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Left::Io(e.into()))?;
    let opened = rustix::fs::fstat(&fd).map_err(|e| Left::Io(e.into()))?;
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) {
        return Err(Left::NotOurs("it changed while it was being checked".to_owned()));
    }
    let bytes = read_bounded(std::fs::File::from(fd), limit(kind))?;
    check(kind, &name.to_string_lossy(), &bytes).map_err(Left::NotOurs)?;
    // The entry is still the file just read: same device and inode.
    let now = rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| Left::Io(e.into()))?;
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
        return Err(Left::NotOurs("it changed while it was being checked".to_owned()));
    }
    rustix::fs::unlinkat(&dirfd, name, AtFlags::empty()).map_err(|e| Left::Io(e.into()))
}

/// Remove `path` when it proves to be `kind` (Windows: no `openat`; a reparse point is refused).
#[cfg(not(unix))]
pub fn remove_if_ours(path: &Path, kind: Kind) -> Result<(), Left> {
    let md = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Left::Missing),
        Err(e) => return Err(Left::Io(e)),
    };
    if md.file_type().is_symlink() {
        return Err(Left::NotOurs("it is a symbolic link".to_owned()));
    }
    if !md.is_file() {
        return Err(Left::NotOurs("it is not a regular file".to_owned()));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let bytes = read_bounded(std::fs::File::open(path).map_err(Left::Io)?, limit(kind))?;
    check(kind, &name, &bytes).map_err(Left::NotOurs)?;
    std::fs::remove_file(path).map_err(Left::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_must_name_this_host() {
        assert!(check(
            Kind::Manifest,
            "dev.keepsake.host.json",
            br#"{"name":"dev.keepsake.host","path":"/x"}"#
        )
        .is_ok());
        assert!(check(Kind::Manifest, "dev.keepsake.host.json", br#"{"name":"com.other.host"}"#).is_err());
        assert!(
            check(Kind::Manifest, "dev.keepsake.host.json", b"root:x:0:0:root:/root:/bin/bash\n").is_err()
        );
        assert!(check(Kind::Manifest, "dev.keepsake.host.json", b"[]").is_err());
    }

    #[test]
    fn a_binary_must_be_an_executable_named_keepsake_host_that_carries_both_names() {
        let good = b"\x7fELF....dev.keepsake.host....keepsake-host....";
        assert!(check(Kind::Binary, "keepsake-host", good).is_ok());
        assert!(check(Kind::Binary, "keepsake-host.exe", b"MZ..dev.keepsake.host..keepsake-host").is_ok());
        assert!(check(Kind::Binary, "shadow", good).is_err(), "wrong name");
        assert!(
            check(Kind::Binary, "keepsake-host", b"text that says dev.keepsake.host keepsake-host").is_err()
        );
        assert!(check(Kind::Binary, "keepsake-host", b"\x7fELF....some other program....").is_err());
    }

    #[test]
    fn the_running_host_binary_proves_to_be_one() {
        let me = std::env::current_exe().unwrap();
        // the unit-test binary is not named keepsake-host, but it carries the same strings
        let bytes = std::fs::read(&me).unwrap();
        assert!(check(Kind::Binary, "keepsake-host", &bytes).is_ok());
    }
}
