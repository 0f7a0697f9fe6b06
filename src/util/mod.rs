//! Small shared helpers: data paths, logging, the stdout guard, time.

pub mod files;
pub mod logging;
pub mod paths;
pub mod stdio;
pub mod time;
