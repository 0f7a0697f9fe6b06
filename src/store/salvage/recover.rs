//! The recovery (the policy in `mod.rs`): at a read-write start, or by `keepsake-host salvage`,
//! a damaged database is checked, copied aside under the exclusive hold, salvaged into a scratch
//! database, written back in place and recorded.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::check::check_damage;
use super::fresh::salvage_into;
use super::lock::Exclusive;
use super::marker::{damage_noted, marker_path, note_damage, read_marker, CONTENT_DAMAGE};
use super::record::{last_move_ms, load_record, save_record, Recovery};
use crate::store::error::StoreError;
use crate::store::open;
use crate::util::paths::sidecar;
use crate::util::time::now_ms;

/// A damaged file is moved aside at most once per this many milliseconds (Places: 24 h).
pub const MOVE_INTERVAL_MS: i64 = 24 * 60 * 60 * 1000;

fn scratch_path(db: &Path) -> PathBuf {
    sidecar(db, ".salvage-tmp")
}

fn fmt_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// Called at every read-write start, before this process opens the database: deal with damage
/// a host reported (or finish an interrupted recovery). `Ok(None)`: nothing to do (or the
/// marker was stale). `Err(Corrupt)`: the file is damaged and could not be moved this time.
pub fn recover_at_start(db: &Path) -> Result<Option<Recovery>, StoreError> {
    let interrupted = load_record(db).is_some_and(|r| !r.completed);
    if !damage_noted(db) && !interrupted {
        return Ok(None);
    }
    recover(db, false)
}

/// `keepsake-host salvage`: check the database now and, if it is damaged, move it aside and
/// salvage it regardless of the 24-hour limit (still never while another process has it open).
/// `Ok(None)`: the database is healthy.
pub fn salvage_command(db: &Path) -> Result<Option<Recovery>, StoreError> {
    recover(db, true)
}

fn recover(db: &Path, by_command: bool) -> Result<Option<Recovery>, StoreError> {
    open::refuse_links(db)?;
    if std::fs::symlink_metadata(db).is_err() {
        let _ = std::fs::remove_file(marker_path(db));
        return if by_command {
            Err(StoreError::Path(format!("no database at {}", db.display())))
        } else {
            Ok(None)
        };
    }
    let before = load_record(db);
    let pending = before.clone().filter(|r| !r.completed && r.damaged_copy.exists());
    let damage = match &pending {
        Some(r) => r.damage.clone(),
        None => match check_damage(db)? {
            // SQLite sees nothing wrong, but a content check did: trust it
            None if read_marker(db).is_some_and(|m| m.get("kind") == Some(&json!("content"))) => {
                read_marker(db)
                    .and_then(|m| m.get("error").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| CONTENT_DAMAGE.to_owned())
            }
            None => {
                if damage_noted(db) {
                    tracing::info!(db = %db.display(), "integrity_check passes; removing a stale damage marker");
                    let _ = std::fs::remove_file(marker_path(db));
                }
                return Ok(None);
            }
            Some(d) => d,
        },
    };
    if pending.is_none() && !by_command {
        if let Some(last) = last_move_ms(db).filter(|t| now_ms() - t < MOVE_INTERVAL_MS) {
            note_damage(db, &damage);
            return Err(StoreError::Corrupt(format!(
                "{damage}. A damaged copy was already moved aside at {} and Keepsake moves one at most once per 24 h \
                 (not before {}); run `keepsake-host salvage` to repair it now, or `keepsake-host doctor` for details",
                fmt_utc(last),
                fmt_utc(last + MOVE_INTERVAL_MS)
            )));
        }
    }
    let mut lock = match Exclusive::acquire(db) {
        Ok(Some(l)) => l,
        Ok(None) => {
            note_damage(db, &damage);
            return Err(StoreError::Corrupt(format!(
                "{damage}. Another keepsake-host process has the file open, so it cannot be moved aside yet; it is \
                 moved aside and salvaged at the next start after they exit"
            )));
        }
        Err(e) => return Err(StoreError::Corrupt(format!("{damage}. It cannot be moved aside: {e}"))),
    };
    // Under the lock: another start may have finished the job meanwhile.
    let now_record = load_record(db);
    if now_record.as_ref().map(|r| (r.moved_at, r.completed))
        != before.as_ref().map(|r| (r.moved_at, r.completed))
        || (!by_command && pending.is_none() && !damage_noted(db))
    {
        return Ok(None);
    }
    let mut rec = match pending {
        Some(r) => r,
        None => {
            let (copy, sidecars) = lock.copy_aside(db).map_err(|e| {
                StoreError::Corrupt(format!("{damage}. It cannot be moved aside (copying it failed: {e})"))
            })?;
            Recovery {
                moved_at: now_ms(),
                damaged_copy: copy,
                sidecars,
                damage,
                by_command,
                ..Default::default()
            }
        }
    };
    save_record(db, &rec).map_err(|e| {
        StoreError::Corrupt(format!(
            "{}. Moved aside to {}, but the recovery record cannot be written ({e})",
            rec.damage,
            rec.damaged_copy.display()
        ))
    })?;
    tracing::warn!(db = %db.display(), copy = %rec.damaged_copy.display(), "moved the damaged database aside; salvaging");
    let scratch = scratch_path(db);
    remove_scratch(&scratch);
    let outcome = salvage_into(&rec.damaged_copy, &scratch);
    let result = outcome.and_then(|s| {
        lock.install(&scratch)
            .map_err(|e| StoreError::Other(format!("cannot write the repaired database: {e}")))?;
        Ok(s)
    });
    remove_scratch(&scratch);
    let s = result.map_err(|e| {
        StoreError::Corrupt(format!(
            "{}. Salvage failed ({e}); the damaged copy is kept at {}",
            rec.damage,
            rec.damaged_copy.display()
        ))
    })?;
    rec.header_rebuilt = s.header_rebuilt;
    rec.rows_recovered = s.tables.iter().map(|t| t.recovered).sum();
    rec.tables = s.tables;
    rec.repairs = s.repairs;
    rec.completed = true;
    if let Err(e) = save_record(db, &rec) {
        tracing::warn!(error = %e, "cannot update the recovery record");
    }
    let _ = std::fs::remove_file(marker_path(db));
    drop(lock);
    tracing::warn!(
        db = %db.display(),
        rows = rec.rows_recovered,
        copy = %rec.damaged_copy.display(),
        "salvaged the damaged database into a fresh one"
    );
    Ok(Some(rec))
}

fn remove_scratch(scratch: &Path) {
    for s in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(sidecar(scratch, s));
    }
    for extra in ["-src", "-pages"] {
        let src = sidecar(scratch, extra);
        for s in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(sidecar(&src, s));
        }
    }
}
