//! Pictures: decode limits and image bombs, thumbnails, the byte-budget pass, and originals that
//! are never lost.

mod bombs;
mod bound;
mod display;
mod pixels;
mod thumbnails;
