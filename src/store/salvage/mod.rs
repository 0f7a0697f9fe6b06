//! The corruption policy (reliability.md §7), the way Firefox Places does it.
//!
//! 1. A host that meets `SQLITE_CORRUPT` or `SQLITE_NOTADB` stops writing, answers `db_corrupt`
//!    and leaves a marker, `<db>.damaged`, beside the database ([`note_damage`]). Every host
//!    refuses writes while the marker exists.
//! 2. The next start that finds the marker re-checks the file (`PRAGMA integrity_check`; a
//!    healthy file only loses the stale marker) and, at most once per 24 h, moves the damaged
//!    file aside as `<db>.corrupt-<UTC time>` (with `-wal` and `-shm`). Keepsake never deletes
//!    these copies.
//! 3. It salvages the copy table by table into a fresh database built by our own migrations:
//!    `INSERT … SELECT` per table, and when that fails, row by row forward by rowid, then
//!    backward from the end, then by probing seeks past the damaged pages; a header that makes
//!    the file unreadable is rebuilt in a scratch copy first. Derived data (image references,
//!    search text, entry counts, positions) is rebuilt, images that were lost become a text
//!    note in their entries, and the change log is reset so every client reloads.
//! 4. `<db>.recovery.json` records what came back, per table, and where the damaged copy is;
//!    `keepsake-host doctor` reports it.
//!
//! **Moving aside without harming another process.** Renaming a database another process has
//! open is one of SQLite's "how to corrupt" cases: a process that opened the path a moment
//! earlier keeps the old inode but opens `-wal` and `-shm` *by name* (the new database's), and
//! its last close checkpoints that WAL into the wrong file and deletes it. So the file is never
//! renamed or deleted. With no SQLite connection to it in this process (recovery runs before
//! the process opens the database):
//!
//! - take SQLite's own POSIX locks, exclusively and without waiting: a write lock on the
//!   database's PENDING, RESERVED and SHARED bytes and on the `-shm` lock bytes including the
//!   dead-man switch. Every connection to a WAL database holds a read lock on the `-shm` DMS byte
//!   while it is open and a SHARED lock on the database after its first read, so a refused lock
//!   means some process has the file open: nothing is moved (this start answers `db_corrupt`;
//!   a later one retries). A process that has opened the path but not read yet blocks on these
//!   locks (its busy timeout) and then reads the repaired file through the same inode;
//! - copy the database, `-wal` and `-shm` byte for byte to the aside files (0600, fsynced);
//! - salvage from the aside copy into a scratch database;
//! - still holding the locks, empty `-wal` and `-shm` and overwrite the database in place with
//!   the scratch database's bytes (fsynced), then release the locks.
//!
//! Every access to the database, `-wal` and `-shm` while the locks are held goes through the
//! one handle that holds them: closing any other descriptor on those files would drop this
//! process's POSIX locks. A crash part-way leaves `completed: false` in the record; the next
//! start resumes from the aside copy instead of copying again.
//!
//! One job per file: `marker.rs` (the damage marker, a leaf), `check.rs` (is the file damaged),
//! `record.rs` (the recovery record and the damaged copies), `lock.rs` (the exclusive hold),
//! `copy.rs` (byte copies under it), `fresh.rs` (salvage into a fresh database), `header.rs`
//! (a rebuilt header), `scan.rs` (reading the damaged tables), `repair.rs` (the invariants
//! restored), `recover.rs` (the recovery run at start or by `keepsake-host salvage`); this file
//! only declares them and re-exports what the rest of the crate uses.

pub(super) mod check;
mod copy;
mod fresh;
mod header;
mod lock;
pub(super) mod marker;
mod record;
pub(super) mod recover;
mod repair;
mod scan;

pub use check::{check_damage, too_short};
pub use marker::{content_damage, damage_noted, marker_path, note_damage, read_marker, CONTENT_DAMAGE};
pub use record::{aside_copies, last_move_ms, load_record, record_path, Recovery, TableReport};
pub use recover::{recover_at_start, salvage_command, MOVE_INTERVAL_MS};
pub use repair::LOST_IMAGE_TEXT;
