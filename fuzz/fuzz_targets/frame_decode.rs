//! Arbitrary bytes through the frame reader; properties in `props/frame.rs`.
#![no_main]

#[path = "../props/alloc.rs"]
#[allow(dead_code)]
mod alloc;
#[path = "../props/frame.rs"]
#[allow(dead_code)]
mod frame;

libfuzzer_sys::fuzz_target!(|data: &[u8]| frame::check(data));
