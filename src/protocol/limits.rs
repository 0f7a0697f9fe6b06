//! Every cap of the wire protocol, with where it comes from.

/// Chrome refuses browser → host messages over 64 MiB (`Message exceeded maximum allowed size of
/// 64MiB.`, platform.md §2); a larger declared length is refused before allocating.
pub const MAX_INBOUND_FRAME: usize = 64 * 1024 * 1024;

/// Chrome closes the port on a host → browser message over 1,048,576 bytes, inclusive
/// (platform.md §2, measured). No frame we write may exceed it.
pub const MAX_OUTBOUND_FRAME: usize = 1_048_576;

/// Replies up to this many bytes go out whole; larger ones are chunked (platform.md §2 suggests
/// ~1,000,000 to leave room for the envelope).
pub const WHOLE_REPLY_MAX: usize = 1_000_000;

/// Each chunk's `data` string is at most this many bytes once JSON-escaped, so a chunk frame
/// (envelope included) stays far below [`MAX_OUTBOUND_FRAME`].
pub const CHUNK_DATA_MAX: usize = 700 * 1024;

/// JSON values one inbound frame may hold: every string (object keys included), number, literal,
/// array and object (see `shape`). Parsed, a value costs ~90–400 bytes (a `serde_json::Value`,
/// its map slot, the copies an import makes), so this bounds the tree of any frame to tens of
/// MiB. An import larger than this goes in pieces (the extension splits it by session).
pub const MAX_FRAME_VALUES: usize = 100_000;

/// Nesting of arrays and objects in one frame, the envelope's own levels included. serde_json
/// stops at 128 on its own; this names the limit in a `too_large` first.
pub const MAX_FRAME_DEPTH: usize = 127;

/// Bytes of one string as written in a frame: room for a 32 MiB image as a base64 data URL
/// (about 42.7 MiB), well short of the frame cap.
pub const MAX_STRING_BYTES: usize = 48 * 1024 * 1024;

/// Decoded image bytes accepted per image (base64 length is checked before decoding).
/// Well above any screenshot; far below SQLite's length limit.
pub const MAX_IMAGE_BYTES: usize = 32 * 1024 * 1024;

/// SQLite's per-value length limit, lowered from 1 GB (reliability.md §3 step 6): no stored
/// value can be larger than an inbound frame.
pub const SQLITE_MAX_LENGTH: i32 = 64 * 1024 * 1024 + 1024;

/// Protocol version reported by `host.hello`; bumped on incompatible wire changes.
pub const PROTOCOL_VERSION: u32 = 4;

/// `clientRequestId` length bounds (storage-model §2.8), in UTF-16 units.
pub const CLIENT_REQUEST_ID_MAX: usize = 128;

/// Request ids are strings up to this length or JSON numbers.
pub const REQUEST_ID_MAX: usize = 256;
