//! The stdout guard: while serving, frames go to a private duplicate of the real stdout and file
//! descriptor 1 itself points at stderr, so a stray print from any dependency can never corrupt
//! the frame stream (one stray line closes the browser's port, platform.md §1).

#[cfg(unix)]
use std::fs::File;
use std::io::{self, Write};

/// Take the real stdout for frames and redirect fd 1 to stderr.
#[cfg(unix)]
pub fn take_frame_stdout() -> io::Result<Box<dyn Write + Send>> {
    use std::os::unix::io::FromRawFd;
    io::stdout().flush()?;
    // SAFETY: dup/dup2 on the process's own standard descriptors; the new fd is owned by the
    // returned File and nothing else closes it.
    let fd = unsafe { libc::dup(1) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Box::new(unsafe { File::from_raw_fd(fd) }))
}

#[cfg(not(unix))]
pub fn take_frame_stdout() -> io::Result<Box<dyn Write + Send>> {
    Ok(Box::new(io::stdout()))
}

/// Files we create are private: umask 077 for the whole host process (reliability.md §6).
pub fn private_umask() {
    #[cfg(unix)]
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe {
        libc::umask(0o077);
    }
}
