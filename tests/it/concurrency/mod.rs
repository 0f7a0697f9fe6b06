//! Several host processes on one database, and what survives kill -9 and power cuts.

mod crash;
mod power;
mod processes;
mod simultaneous;
