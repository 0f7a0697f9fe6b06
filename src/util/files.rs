//! Private files: created new, readable by the user only, never through a symbolic link; and
//! the folder entry of a new or renamed file made durable.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

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
