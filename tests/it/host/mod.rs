//! The host process: hello, start-up, lifecycle and the caller check, and the command line.

mod cli;
mod hello;
mod lifecycle;
mod start;
