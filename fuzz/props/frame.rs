//! `frame_decode`: arbitrary bytes through the native-messaging frame reader
//! (`protocol::frame::read_frame`), checked against an independent parse of the same bytes.
//!
//! Input layout: byte 0 picks the cap, byte 1 how the reader hands out bytes, the rest is the
//! stream. Properties, for every frame read until the stream ends or an error:
//!
//! 1. **Agrees with the oracle**: the same bodies in the same order, then the same end: a clean
//!    EOF exactly at a frame boundary, `Truncated {got, want}` with the oracle's counts, or
//!    `TooLarge {declared, cap}` for a declared length over the cap. An in-memory stream never
//!    yields `Io` (interrupted reads are retried).
//! 2. **Allocation is bounded before the body arrives**: a refused length prefix (`TooLarge`) or
//!    a cut prefix allocates 0 bytes; otherwise no single allocation exceeds the cap, and the peak
//!    is at most `max(min(declared, 1 MiB), 3 × bytes delivered) + 64`.
//! 3. **Round trip**: every body read is ≤ the cap, and writing it again with `write_frame` gives
//!    exactly the bytes it was read from.

use std::io::{self, Read};

use keepsake_host::protocol::frame::{read_frame, write_frame, FrameError};
use keepsake_host::protocol::limits::{MAX_INBOUND_FRAME, MAX_OUTBOUND_FRAME};

use super::alloc::measure;

/// Hands out the stream `step` bytes at a time, optionally failing every other read with
/// `Interrupted` (which the reader must retry).
struct Dribble<'a> {
    data: &'a [u8],
    step: usize,
    interrupt: bool,
    flip: bool,
}

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.interrupt {
            self.flip = !self.flip;
            if self.flip {
                // a simple kind: no allocation of our own inside the measured call
                return Err(io::ErrorKind::Interrupted.into());
            }
        }
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// What the oracle expects next.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Eof,
    Frame {
        at: usize,
        len: usize,
    },
    /// `prefix`: the cut is inside the length prefix (`want` is 4 then, as for a 4-byte body).
    Truncated {
        got: usize,
        want: usize,
        prefix: bool,
    },
    TooLarge {
        declared: u64,
        cap: usize,
    },
}

fn oracle(stream: &[u8], pos: usize, cap: usize) -> Next {
    let rest = &stream[pos..];
    if rest.is_empty() {
        return Next::Eof;
    }
    if rest.len() < 4 {
        return Next::Truncated { got: rest.len(), want: 4, prefix: true };
    }
    let declared = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as u64;
    if declared > cap as u64 {
        return Next::TooLarge { declared, cap };
    }
    let len = declared as usize;
    if rest.len() - 4 < len {
        return Next::Truncated { got: rest.len() - 4, want: len, prefix: false };
    }
    Next::Frame { at: pos + 4, len }
}

pub fn check(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let cap = match data[0] & 3 {
        0 => MAX_INBOUND_FRAME,
        1 => (data[0] >> 2) as usize * 8,
        2 => 1 << 20,
        _ => 0,
    };
    let step = match data[1] & 0x3f {
        0 => usize::MAX,
        s => s as usize,
    };
    let stream = &data[2..];
    let mut r = Dribble { data: stream, step, interrupt: data[1] & 0x40 != 0, flip: false };
    let mut pos = 0usize;
    loop {
        let expected = oracle(stream, pos, cap);
        let (got, usage) = measure(|| read_frame(&mut r, cap));
        match (got, expected) {
            (Ok(None), Next::Eof) => return,
            (Ok(Some(body)), Next::Frame { at, len }) => {
                assert_eq!(body.len(), len, "body length");
                assert!(body.len() <= cap, "a body over the cap was returned");
                assert_eq!(&body[..], &stream[at..at + len], "body bytes");
                // the first buffer is at most the declared length; growth past 1 MiB doubles it
                let bound = 3 * len + 64;
                assert!(usage.peak <= bound, "peak {} B for a {len}-byte frame (bound {bound})", usage.peak);
                assert!(usage.largest <= cap.max(64), "one allocation of {} B, cap {cap}", usage.largest);
                // round trip: the writer reproduces the exact bytes
                if len <= MAX_OUTBOUND_FRAME {
                    let mut out = Vec::new();
                    write_frame(&mut out, &body).expect("write_frame of a frame under the cap");
                    assert_eq!(&out[..], &stream[at - 4..at + len], "write_frame(read_frame(x)) != x");
                }
                pos = at + len;
            }
            (Err(FrameError::Truncated { got, want }), Next::Truncated { got: g, want: w, prefix }) => {
                assert_eq!((got, want), (g, w), "Truncated counts");
                if prefix {
                    assert_eq!(usage.peak, 0, "a cut length prefix allocated {} B", usage.peak);
                } else {
                    let bound = want.min(1 << 20).max(3 * got) + 64;
                    assert!(
                        usage.peak <= bound,
                        "peak {} B for {got} of {want} B (bound {bound})",
                        usage.peak
                    );
                }
                return;
            }
            (Err(FrameError::TooLarge { declared, cap: c }), Next::TooLarge { declared: d, cap: c2 }) => {
                assert_eq!((declared, c), (d, c2), "TooLarge fields");
                assert_eq!(usage.peak, 0, "a refused length prefix allocated {} B", usage.peak);
                return;
            }
            (got, expected) => panic!("read_frame gave {got:?}, the oracle expected {expected:?}"),
        }
    }
}
