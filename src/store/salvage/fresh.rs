//! Salvage into a fresh database (step 3 of the policy in `mod.rs`): the damaged copy is
//! attached to a new database built by our own migrations (at the copy's schema version), its
//! tables are read (`scan.rs`), the result is migrated the rest of the way, repaired
//! (`repair.rs`) and checked.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::header::{page_size_candidates, rebuild_header};
use super::record::TableReport;
use super::repair::repair;
use super::scan::{columns, copy_table, scan_pages};
use crate::store::error::StoreError;
use crate::store::migrate;
use crate::store::open::{self, Mode};
use crate::util::paths::sidecar;

/// Derived tables: rebuilt from the entries (display renditions: remade when next asked for),
/// never copied.
const DERIVED: &[&str] =
    &["image_refs", "session_search", "search_docs", "search_pieces", "search_grams", "image_renditions"];

pub(super) struct Salvaged {
    pub(super) tables: Vec<TableReport>,
    pub(super) header_rebuilt: bool,
    pub(super) repairs: Vec<String>,
}

fn damaged_schema_readable(conn: &Connection) -> bool {
    conn.query_row("SELECT count(*) FROM damaged.sqlite_schema WHERE type = 'table'", [], |r| {
        r.get::<_, i64>(0)
    })
    .is_ok_and(|n| n > 0)
}

fn attach(conn: &Connection, src: &Path) -> rusqlite::Result<()> {
    conn.execute("ATTACH DATABASE ?1 AS damaged", [src.to_string_lossy()])?;
    Ok(())
}

/// Salvage the damaged database at `src` into a new database at `dest`.
pub(super) fn salvage_into(src: &Path, dest: &Path) -> Result<Salvaged, StoreError> {
    let mut conn = open::open_connection(dest, Mode::ReadWrite)?;
    // Never checkpoint the damaged copy into itself, nor delete its WAL, when closing.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    // writable_schema: a partly unreadable schema still yields the tables it can parse;
    // cell_size_check: damaged cells fail instead of being read as data.
    // synchronous=OFF: a scratch file, synced once it is complete (`Exclusive::install`).
    conn.execute_batch(
        "PRAGMA foreign_keys=OFF; PRAGMA cell_size_check=ON; PRAGMA writable_schema=ON; PRAGMA main.synchronous=OFF;",
    )?;
    let mut header_rebuilt = false;
    let mut readable = attach(&conn, src).is_ok() && damaged_schema_readable(&conn);
    if !readable {
        let _ = conn.execute_batch("DETACH DATABASE damaged");
        let rebuilt = sidecar(dest, "-src");
        for ps in page_size_candidates(src) {
            for s in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(sidecar(&rebuilt, s));
            }
            if rebuild_header(src, &rebuilt, ps).is_err() {
                break;
            }
            if attach(&conn, &rebuilt).is_ok() && damaged_schema_readable(&conn) {
                readable = true;
                header_rebuilt = true;
                break;
            }
            let _ = conn.execute_batch("DETACH DATABASE damaged");
        }
        if !readable {
            // whatever a partly readable schema still yields (writable_schema)
            let _ = attach(&conn, src);
        }
    }
    // the file attached as `damaged` (the copy, or its scratch copy with a rebuilt header)
    let attached: Option<PathBuf> = conn
        .query_row("SELECT file FROM pragma_database_list WHERE name = 'damaged'", [], |r| {
            r.get::<_, String>(0)
        })
        .optional()?
        .map(PathBuf::from);
    let found = conn.query_row("PRAGMA damaged.user_version", [], |r| r.get::<_, u32>(0)).ok();
    if let Some(v) = found.filter(|v| *v > migrate::LATEST) {
        return Err(StoreError::TooNew { found: v, supported: migrate::LATEST });
    }
    // The rows are copied into tables of the damaged file's own version, then migrated the rest
    // of the way like any older database (an older file's tables may have no counterpart in
    // the latest schema: version 4's live history became sessions in version 5).
    let copy_at = copy_version(&conn, found, header_rebuilt);
    migrate_detached(&mut conn, attached.as_deref(), copy_at)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rootpage")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut reports = Vec::new();
    for t in &tables {
        if DERIVED.contains(&t.as_str()) {
            continue;
        }
        let mine = columns(&conn, "main", t);
        let theirs: HashSet<String> = columns(&conn, "damaged", t).into_iter().collect();
        let cols: Vec<String> = mine.into_iter().filter(|c| theirs.contains(c)).collect();
        if cols.is_empty() {
            reports.push(TableReport {
                table: t.clone(),
                note: Some("not readable in the damaged copy (its schema entry is lost)".into()),
                ..Default::default()
            });
            continue;
        }
        reports.push(copy_table(&conn, t, &cols));
    }
    // tables whose b-tree could not be walked completely: read their rows off the pages. Not
    // sync's: most of them keep their rows in index pages (WITHOUT ROWID), and their loose shapes
    // would take other tables' rows; what they held is recorded again from the salvaged chats
    // (`repair.rs`) and the other devices still have the rest
    let targets: Vec<String> = reports
        .iter()
        .filter(|r| {
            !r.complete && !["about", "meta"].contains(&r.table.as_str()) && !r.table.starts_with("sync_")
        })
        .map(|r| r.table.clone())
        .collect();
    if !targets.is_empty() {
        if let Err(e) = scan_pages(&conn, src, dest, &targets, &mut reports) {
            tracing::warn!(error = %e, "page scan skipped");
            for r in reports.iter_mut().filter(|r| targets.contains(&r.table)) {
                r.note = Some(format!("{}; pages not scanned: {e}", r.note.clone().unwrap_or_default()));
            }
        }
    }
    // read outside the repair's write transaction (see `Scan`)
    let seq_damaged: Option<i64> = conn
        .query_row("SELECT seq FROM damaged.sqlite_sequence WHERE name = 'changes'", [], |r| r.get(0))
        .optional()
        .ok()
        .flatten();
    let mut repairs = Vec::new();
    if copy_at < migrate::LATEST {
        // an entry the migrations cannot read would fail them (and with them the whole salvage):
        // such rows are left out here, as the repair below leaves them out of a current copy
        let dropped = drop_unreadable_entries(&conn)?;
        if dropped > 0 {
            repairs.push(format!("{dropped} unreadable entry row(s) dropped"));
        }
        // and the counts they check the bodies against follow the rows that came back (the
        // repair below recounts every body again, branches apart, once it has its latest shape)
        conn.execute(
            "UPDATE main.sessions SET entry_count =
                 (SELECT count(*) FROM main.session_entries e WHERE e.session_id = sessions.id)",
            [],
        )?;
        migrate_detached(&mut conn, None, migrate::LATEST)?;
    }
    let tx = conn.transaction()?;
    repairs.extend(
        repair(&tx, seq_damaged)
            .map_err(|e| StoreError::Other(format!("repairing the salvaged data failed: {e}")))?,
    );
    tx.commit()?;
    let problems: Vec<String> = conn
        .prepare("PRAGMA main.integrity_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if problems != ["ok"] {
        return Err(StoreError::Other(format!(
            "the salvaged database fails integrity_check: {}",
            problems.join("; ")
        )));
    }
    let fk: Vec<String> = conn
        .prepare("SELECT \"table\" || ' → ' || parent FROM pragma_foreign_key_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !fk.is_empty() {
        return Err(StoreError::Other(format!(
            "the salvaged database has {} foreign-key violations ({})",
            fk.len(),
            fk.into_iter().take(5).collect::<Vec<_>>().join(", ")
        )));
    }
    let _ = conn.execute_batch("DETACH DATABASE damaged");
    conn.execute_batch("PRAGMA main.wal_checkpoint(TRUNCATE);")?;
    conn.close().map_err(|(_, e)| StoreError::from(e))?;
    Ok(Salvaged { tables: reports, header_rebuilt, repairs })
}

/// The schema version whose tables the damaged file's rows are copied into: its `user_version`,
/// unless that is unknown (a rebuilt header) or contradicts the tables the file has, which the
/// version is then read off (a version-4 file's live history must land in version-4 tables for
/// migration 5 to move it into a session). The latest when neither tells.
fn copy_version(conn: &Connection, found: Option<u32>, header_rebuilt: bool) -> u32 {
    let found = found.filter(|v| (1..=migrate::LATEST).contains(v));
    let tables: HashSet<String> = conn
        .prepare("SELECT name FROM damaged.sqlite_schema WHERE type = 'table'")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
        .unwrap_or_default();
    let has = |t: &str| tables.contains(t);
    let read_off = if has("sync_device") || has("sync_entries") {
        Some(7)
    } else if has("image_renditions") {
        Some(6)
    } else if has("session_branches") || has("session_forks") {
        Some(5)
    } else if has("history_entries") || has("history_trimmed") {
        Some(if columns(conn, "damaged", "search_pieces").iter().any(|c| c == "key") {
            4
        } else if has("search_docs") {
            3
        } else if has("attachments") || has("attach_tracker") {
            2
        } else {
            1
        })
    } else {
        None
    };
    match (found, read_off) {
        // before version 5 and from it on are different tables: the schema decides
        (Some(f), Some(r)) if (f >= 5) != (r >= 5) => r,
        (Some(f), Some(r)) if header_rebuilt && f != r => r,
        (Some(f), _) => f,
        (None, Some(r)) => r,
        (None, None) => migrate::LATEST,
    }
}

/// Migrate the scratch database to `target` with the damaged copy detached: the runner's
/// write transaction would otherwise begin on every attached database, and its statements would
/// load the damaged schema without `writable_schema` (both fail on a damaged file). `reattach`:
/// the file to attach again afterwards.
fn migrate_detached(conn: &mut Connection, reattach: Option<&Path>, target: u32) -> Result<(), StoreError> {
    let _ = conn.execute_batch("DETACH DATABASE damaged");
    conn.execute_batch("PRAGMA writable_schema=OFF;")?;
    migrate::migrate_to(conn, target)?;
    conn.execute_batch("PRAGMA writable_schema=ON;")?;
    if let Some(p) = reattach {
        attach(conn, p)?;
    }
    Ok(())
}

/// Before an older copy is migrated: delete the entry rows (saved, live and trimmed) whose entry
/// is not a JSON object, which migration 5 could not give an entryId. Returns how many.
fn drop_unreadable_entries(conn: &Connection) -> rusqlite::Result<usize> {
    let mut n = 0;
    for table in ["session_entries", "history_entries", "history_trimmed"] {
        let exists: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = ?1)",
            [table],
            |r| r.get(0),
        )?;
        if !exists {
            continue;
        }
        let bad: Vec<i64> = {
            let mut st = conn.prepare(&format!("SELECT id, entry FROM main.{table}"))?;
            let rows = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)))?;
            let mut bad = Vec::new();
            for row in rows {
                let (id, raw) = row?;
                let readable =
                    raw.and_then(|t| serde_json::from_str::<Value>(&t).ok()).is_some_and(|e| e.is_object());
                if !readable {
                    bad.push(id);
                }
            }
            bad
        };
        for id in bad {
            n += conn.execute(&format!("DELETE FROM main.{table} WHERE id = ?1"), [id])?;
        }
    }
    Ok(n)
}
