//! Request bodies: `request.build`, body deltas, and the reduction and compaction rules behind
//! them.

mod build;
mod compaction;
mod delta;
mod reduction;
