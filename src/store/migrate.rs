//! The migration runner (reliability.md §4): take the write lock first, read `user_version`
//! under it, apply every numbered migration after it, set `user_version`, commit — all in one
//! transaction, so several host processes starting at once never apply a step twice and a crash
//! leaves version k or k+1, nothing between.

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// Numbered, append-only migrations: never edit one that has shipped; add the next file.
pub const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_attachments.sql")),
    (3, include_str!("migrations/0003_search_index.sql")),
    (4, include_str!("migrations/0004_search_piece_keys.sql")),
];

/// The schema version this binary writes.
pub const LATEST: u32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

pub fn schema_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Bring the database to [`LATEST`]. Returns the version found before migrating.
pub fn migrate(conn: &mut Connection) -> Result<u32, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = schema_version(&tx)?;
    if found > LATEST {
        return Err(StoreError::TooNew { found, supported: LATEST });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.execute_batch(sql).map_err(|e| StoreError::Other(format!("migration {version} failed: {e}")))?;
        tx.pragma_update(None, "user_version", version)?;
    }
    if found < 3 {
        // migration 3 created the search index, derived data that SQL alone cannot compute:
        // built once the tables have their latest shape (a cache that holds the index while
        // every session adds its postings, as for an import)
        tx.execute_batch("PRAGMA cache_size=-262144;")?;
        let r = super::search::reindex_all(&tx);
        tx.execute_batch("PRAGMA cache_size=-16384;")?;
        r.map_err(|e| StoreError::Other(format!("migration 3 failed: {}", e.message)))?;
    }
    tx.commit()?;
    Ok(found)
}
