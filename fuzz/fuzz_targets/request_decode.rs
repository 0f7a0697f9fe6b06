//! Arbitrary bytes as one frame body through decode, dispatch (a temporary store) and the reply
//! frames; properties in `props/request.rs`.
#![no_main]

#[path = "../props/request.rs"]
#[allow(dead_code)]
mod request;

libfuzzer_sys::fuzz_target!(|data: &[u8]| request::check(data));
