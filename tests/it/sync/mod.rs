//! Sync over a folder (docs/sync.md): the transport and the surface with the real binary, and
//! two real Syncthing instances on loopback.

mod common;
mod syncthing;

mod converge;
mod crash;
mod privacy;
mod replication;
