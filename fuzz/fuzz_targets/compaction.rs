//! A history (JSON, or derived from the bytes) through aging, the byte-budget plan,
//! request.build and markdownChunks; properties in `props/compaction.rs`.
#![no_main]

#[path = "../props/compaction.rs"]
#[allow(dead_code)]
mod compaction;

libfuzzer_sys::fuzz_target!(|data: &[u8]| compaction::check(data));
