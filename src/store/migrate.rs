//! The migration runner (reliability.md §4): take the write lock first, read `user_version`
//! under it, apply every numbered migration after it, set `user_version`, commit — all in one
//! transaction, so several host processes starting at once never apply a step twice and a crash
//! leaves version k or k+1, nothing between.

use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::error::StoreError;
use crate::protocol::{ErrorCode, HostError};

/// Numbered, append-only migrations: never edit one that has shipped; add the next file. A file
/// may hold a line `-- @step <name>`: the host runs the Rust step of that name there (data SQL
/// alone cannot move), between the statements before and after it. On an empty database every
/// step is a no-op, so running a file whole gives the same schema.
pub const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_attachments.sql")),
    (3, include_str!("migrations/0003_search_index.sql")),
    (4, include_str!("migrations/0004_search_piece_keys.sql")),
    (5, include_str!("migrations/0005_keepsake_keeps.sql")),
    (6, include_str!("migrations/0006_image_renditions.sql")),
    (7, include_str!("migrations/0007_sync.sql")),
];

/// The schema version this binary writes.
pub const LATEST: u32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

const STEP_MARK: &str = "-- @step ";

pub fn schema_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// A Rust step named in a migration file. Damage it meets stays damage (`Corrupt`: the start
/// answers `db_corrupt` and leaves the marker, so the next start salvages the file), as a busy
/// database stays busy; a step that cannot run for another reason is `Other`.
fn run_step(tx: &Transaction, name: &str) -> Result<(), StoreError> {
    match name {
        "fold_live_history" => {
            super::fold::fold_live_history(tx).map_err(|e| step_failed(&format!("migration step {name}"), e))
        }
        other => Err(StoreError::Other(format!("a migration names an unknown step {other:?}"))),
    }
}

/// What the runner reports when Rust work inside it fails.
fn step_failed(what: &str, e: HostError) -> StoreError {
    match e.code {
        ErrorCode::DbCorrupt => StoreError::Corrupt(e.message),
        ErrorCode::Busy => StoreError::Busy(e.message),
        _ => StoreError::Other(format!("{what} failed: {}", e.message)),
    }
}

/// Run every migration after `found` up to `target` inside `tx`, one statement at a time,
/// setting `user_version` after each, then build what SQL cannot (the search index, when
/// migration 3 ran); `after(i)` is called after the i-th statement, step, version update or
/// build (tests crash the process there). Everything the runner does before its commit; returns
/// how many calls there were.
pub fn apply(
    tx: &Transaction,
    found: u32,
    target: u32,
    mut after: impl FnMut(usize),
) -> Result<usize, StoreError> {
    let mut i = 0;
    let mut tick = |i: &mut usize| {
        after(*i);
        *i += 1;
    };
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found && *v <= target) {
        // damage (or a busy database) met by a statement stays what it is, as for a step
        let fail = |e: rusqlite::Error| match StoreError::from(e) {
            StoreError::Other(m) => StoreError::Other(format!("migration {version} failed: {m}")),
            other => other,
        };
        let mut rest: &str = sql;
        loop {
            let (part, step) = match rest.find(STEP_MARK) {
                Some(at) => {
                    let line_end = rest[at..].find('\n').map_or(rest.len(), |n| at + n);
                    (&rest[..at], Some((rest[at + STEP_MARK.len()..line_end].trim(), line_end)))
                }
                None => (rest, None),
            };
            let mut batch = rusqlite::Batch::new(tx, part);
            while let Some(mut st) = batch.next().map_err(fail)? {
                let mut rows = st.raw_query();
                while rows.next().map_err(fail)?.is_some() {}
                drop(rows);
                tick(&mut i);
            }
            match step {
                Some((name, end)) => {
                    run_step(tx, name)?;
                    tick(&mut i);
                    rest = &rest[end..];
                }
                None => break,
            }
        }
        tx.pragma_update(None, "user_version", version)?;
        tick(&mut i);
    }
    if found < 3 && target == LATEST {
        // migration 3 created the search index, derived data that SQL alone cannot compute:
        // built once the tables have their latest shape (a cache that holds the index while
        // every session adds its postings, as for an import). Below the latest the tables do
        // not have the shape the index is read from: `migrate_to` an older version is only
        // for an empty database (salvage), which has nothing to index.
        tx.execute_batch("PRAGMA cache_size=-262144;")?;
        let r = super::indexing::reindex_all(tx);
        tx.execute_batch("PRAGMA cache_size=-16384;")?;
        r.map_err(|e| step_failed("migration 3 (the search index)", e))?;
        tick(&mut i);
    }
    Ok(i)
}

/// Bring the database to [`LATEST`] (the open path). Under the write lock, once the version is
/// read there and is an older one (≥ 1: an empty database has nothing to keep), `before(found)`
/// runs before the first migration statement: the open path's pre-migration copy
/// (`copies::premigration_copy`). When it fails, the transaction rolls back and nothing is
/// migrated. Returns the version found before migrating.
pub fn migrate(
    conn: &mut Connection,
    before: impl FnOnce(u32) -> Result<(), StoreError>,
) -> Result<u32, StoreError> {
    migrate_inner(conn, LATEST, Some(before))
}

/// Bring the database to version `target` (≤ [`LATEST`]; salvage copies a damaged file's rows
/// into an empty database brought to the damaged file's own version, then migrates it the rest
/// of the way; a restore migrates its scratch copy of an older backup). No copy is made first.
pub fn migrate_to(conn: &mut Connection, target: u32) -> Result<u32, StoreError> {
    migrate_inner(conn, target, None::<fn(u32) -> Result<(), StoreError>>)
}

fn migrate_inner(
    conn: &mut Connection,
    target: u32,
    before: Option<impl FnOnce(u32) -> Result<(), StoreError>>,
) -> Result<u32, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = schema_version(&tx)?;
    if found > LATEST {
        return Err(StoreError::TooNew { found, supported: LATEST });
    }
    if found >= 1 && found < target {
        if let Some(before) = before {
            before(found)?;
        }
    }
    apply(&tx, found, target, |_| {})?;
    tx.commit()?;
    Ok(found)
}
