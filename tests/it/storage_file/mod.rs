//! The SQLite file itself: migrations and upgrades, the copies kept of it, corruption, a full disk,
//! permissions.

mod backups;
mod corruption;
mod disk_full;
mod migrations;
mod permissions;
mod upgrades;
