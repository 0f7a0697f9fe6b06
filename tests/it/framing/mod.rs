//! The frame and request boundary: framing, envelopes, chunked replies, stdout hygiene.

mod basics;
mod hostile;
mod memory;
