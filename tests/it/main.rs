//! Keepsake's integration tests: one test crate (`cargo test --test it`), one module per subject.
//! Most tests drive the real `keepsake-host` binary over real pipes on a temp database, through
//! the shared [`harness`]; the pure ones call the library directly.
//!
//! Pick tests by module path or by name: `cargo test --test it framing::`, `cargo test --test it
//! t20` (reliability.md's T-numbers stay in the test names). Every test here runs in one
//! process: state that is process-wide (the environment, the current directory, the umask,
//! rlimits, signal handlers) is only ever changed in a spawned child (`pre_exec`), never here,
//! and a test that counts processes counts only its own (see the harness). The counting allocator
//! of `fuzz_corpus` (fuzz/props/alloc.rs) is this binary's global allocator; it counts per thread.

mod harness;
mod powerfs;

mod concurrency;
mod conventions;
mod framing;
mod fuzz_corpus;
mod history;
mod host;
mod images;
mod install;
mod properties;
mod requests;
mod sessions;
mod settings;
mod storage_file;
mod sync;
