//! The SQLite file itself: migrations and upgrades, corruption, a full disk, permissions.

mod corruption;
mod disk_full;
mod migrations;
mod permissions;
mod upgrades;
