//! Native-messaging framing: a 4-byte native-endian length, then that many bytes of UTF-8 JSON.
//! The declared length is checked against the cap before a single body byte is allocated.

use std::io::{self, Read, Write};

use byteorder::{NativeEndian, ReadBytesExt, WriteBytesExt};

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
    if body.len() > MAX_OUTBOUND_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to write a {}-byte frame (cap {MAX_OUTBOUND_FRAME})", body.len()),
        ));
    }
    w.write_u32::<NativeEndian>(body.len() as u32)?;
    w.write_all(body)?;
    w.flush()
}

/// Read a frame's length prefix only (used by tests and tools).
pub fn read_len(r: &mut impl Read) -> io::Result<u32> {
    r.read_u32::<NativeEndian>()
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

    #[test]
    fn writer_refuses_oversized_frames() {
        let mut out = Vec::new();
        assert!(write_frame(&mut out, &vec![b' '; MAX_OUTBOUND_FRAME + 1]).is_err());
        assert!(out.is_empty());
        assert!(write_frame(&mut out, &vec![b' '; MAX_OUTBOUND_FRAME]).is_ok());
    }
}
