//! Arbitrary bytes through image sniffing, decoding under limits and thumbnailing; properties in
//! `props/image.rs`. Run with `-rss_limit_mb=512`.
#![no_main]

#[path = "../props/image.rs"]
#[allow(dead_code)]
mod image_props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| image_props::check(data));
