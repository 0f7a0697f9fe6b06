//! Native-messaging framing: a 4-byte native-endian length, then that many bytes of UTF-8 JSON.
//! The declared length is checked against the cap before a single body byte is allocated.

use std::io::{self, IoSlice, Read, Write};

use super::limits::MAX_OUTBOUND_FRAME;

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream ended inside a length prefix or a body: the peer is gone.
    #[error("stream ended inside a frame ({got} of {want} bytes)")]
    Truncated { got: usize, want: usize },
    /// The declared length is over the cap; the stream cannot be resynchronised.
    #[error("frame of {declared} bytes exceeds the {cap}-byte cap")]
    TooLarge { declared: u64, cap: usize },
    #[error("I/O error reading a frame: {0}")]
    Io(#[from] io::Error),
}

/// Read exactly `buf.len()` bytes, reporting how many arrived before EOF.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Read one frame. `Ok(None)` is a clean end of stream at a frame boundary.
pub fn read_frame(r: &mut impl Read, cap: usize) -> Result<Option<Vec<u8>>, FrameError> {
    let mut len = [0u8; 4];
    let got = read_full(r, &mut len)?;
    if got == 0 {
        return Ok(None);
    }
    if got < 4 {
        return Err(FrameError::Truncated { got, want: 4 });
    }
    let declared = u32::from_ne_bytes(len) as u64;
    if declared > cap as u64 {
        return Err(FrameError::TooLarge { declared, cap });
    }
    let n = declared as usize;
    // Allocate in steps so a lying prefix (declares 60 MiB, sends 10 bytes) costs what arrived.
    let mut body = Vec::with_capacity(n.min(1 << 20));
    let mut limited = r.take(declared);
    limited.read_to_end(&mut body)?;
    if body.len() < n {
        return Err(FrameError::Truncated { got: body.len(), want: n });
    }
    Ok(Some(body))
}

/// Write one frame. Refuses (without writing anything) a body over the outbound cap.
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    write_frames(w, &[body])
}

/// Write frames back to back, prefixes and bodies together in as few `write_vectored` calls as
/// the writer takes (one `writev` on a pipe): the reader wakes once for a reply, not once for a
/// length prefix and again for its body. Refuses (without writing anything) if any body is over
/// the outbound cap.
pub fn write_frames(w: &mut impl Write, bodies: &[&[u8]]) -> io::Result<()> {
    if let Some(big) = bodies.iter().find(|b| b.len() > MAX_OUTBOUND_FRAME) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to write a {}-byte frame (cap {MAX_OUTBOUND_FRAME})", big.len()),
        ));
    }
    let prefixes: Vec<[u8; 4]> = bodies.iter().map(|b| (b.len() as u32).to_ne_bytes()).collect();
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(bodies.len() * 2);
    for (prefix, body) in prefixes.iter().zip(bodies) {
        slices.push(IoSlice::new(prefix));
        if !body.is_empty() {
            slices.push(IoSlice::new(body));
        }
    }
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write a whole frame")),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame(&mut v, body).unwrap();
        v
    }

    #[test]
    fn round_trip_and_clean_eof() {
        let mut data = framed(b"{\"a\":1}");
        data.extend(framed(b""));
        let mut r = &data[..];
        assert_eq!(read_frame(&mut r, 100).unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(read_frame(&mut r, 100).unwrap().unwrap(), b"");
        assert!(read_frame(&mut r, 100).unwrap().is_none());
    }

    #[test]
    fn oversized_prefix_is_refused_before_reading_the_body() {
        let data = (u32::MAX).to_ne_bytes();
        let mut r = &data[..];
        assert!(matches!(read_frame(&mut r, 1024), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn truncation_is_reported() {
        let mut r = &[1u8, 0][..];
        assert!(matches!(read_frame(&mut r, 1024), Err(FrameError::Truncated { got: 2, want: 4 })));
        let mut data = 10u32.to_ne_bytes().to_vec();
        data.extend(b"abc");
        let mut r = &data[..];
        assert!(matches!(read_frame(&mut r, 1024), Err(FrameError::Truncated { got: 3, want: 10 })));
    }

    /// A writer that takes at most `max` bytes per call and records each call's size.
    struct Dribble {
        out: Vec<u8>,
        calls: Vec<usize>,
        max: usize,
        interrupt_next: bool,
    }

    impl Write for Dribble {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            if std::mem::take(&mut self.interrupt_next) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            self.interrupt_next = true;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.max - n);
                self.out.extend_from_slice(&b[..take]);
                n += take;
                if n == self.max {
                    break;
                }
            }
            self.calls.push(n);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn frames_go_out_whole_in_one_call_or_resume_where_a_short_write_stopped() {
        let bodies: [&[u8]; 4] = [b"{\"id\":1}", b"", b"{\"chunk\":\"abcdefghij\"}", b"x"];
        let mut want = Vec::new();
        for b in bodies {
            want.extend((b.len() as u32).to_ne_bytes());
            want.extend(b);
        }
        // a pipe that takes it all: prefixes and bodies in one call
        let mut whole =
            Dribble { out: Vec::new(), calls: Vec::new(), max: usize::MAX, interrupt_next: false };
        write_frames(&mut whole, &bodies).unwrap();
        assert_eq!(whole.out, want);
        assert_eq!(whole.calls, vec![want.len()]);
        // short writes (3 bytes at a time, cutting prefixes) and EINTR between them
        let mut short = Dribble { out: Vec::new(), calls: Vec::new(), max: 3, interrupt_next: true };
        write_frames(&mut short, &bodies).unwrap();
        assert_eq!(short.out, want);
        assert_eq!(short.calls.len(), want.len().div_ceil(3));
        let mut r = &short.out[..];
        for b in bodies {
            assert_eq!(read_frame(&mut r, 100).unwrap().unwrap(), b);
        }
    }

    #[test]
    fn a_writer_that_takes_nothing_is_an_error_not_a_hang() {
        let mut stuck = Dribble { out: Vec::new(), calls: Vec::new(), max: 0, interrupt_next: false };
        let e = write_frames(&mut stuck, &[b"{}"]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    }

    #[test]
    fn writer_refuses_oversized_frames() {
        let mut out = Vec::new();
        assert!(write_frame(&mut out, &vec![b' '; MAX_OUTBOUND_FRAME + 1]).is_err());
        assert!(out.is_empty());
        assert!(write_frame(&mut out, &vec![b' '; MAX_OUTBOUND_FRAME]).is_ok());
        let mut out = Vec::new();
        let big = vec![b' '; MAX_OUTBOUND_FRAME + 1];
        assert!(write_frames(&mut out, &[b"{}", &big]).is_err());
        assert!(out.is_empty(), "nothing written when any frame is over the cap");
    }
}
