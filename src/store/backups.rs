//! The `backups.*` operations and the daily backup (docs/reliability.md §7 "Copies and
//! backups"): the list of copies, "Back up now", restore (itself undoable), and the daily backup
//! with its lock row, free-space floor and rotation. How a copy is made, read and removed is in
//! `copies.rs`; the rules (names, rotation, when a day is due, the floor) in `domain::backups`.
//!
//! **Restore** (`backups.restore`): the chosen copy is checked first (`integrity_check`; a copy
//! newer than this host is refused); a copy of an older schema is copied to a scratch file and
//! migrated there, so the copy itself stays untouched and is its own pre-migration copy. Then, in
//! ONE `BEGIN IMMEDIATE` transaction on the live database: a checked `prerestore` copy of the
//! database as it is (made under that write lock, so no other host's write can land between it
//! and the restore), every table's rows replaced by the copy's, the device's own settings and
//! bookkeeping kept, and a change-log row `{"restored": true}` numbered after every change the
//! database has seen, which every other host's poller announces. A kill at any moment leaves the
//! old database or the restored one, never a mix. (SQLite's backup API could write the live file
//! too, but not under a write lock the same process holds: an acknowledged write landing between
//! the pre-restore copy and the restore would be in neither.)

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::changelog::current_seq;
use super::connection::{Store, WriteOutcome};
use super::copies::{self, Listed, Made};
use super::migrate::{self, LATEST};
use super::open::{self, file_uri, Mode};
use super::tx::setting_value;
use crate::domain::backups::{
    self as rules, file_name_of_id, leaves_floor, may_claim, DailyCopy, DailyRow, Kind, KEEP_PRERESTORE,
};
use crate::domain::settings::{
    backup_daily, backup_folder, backup_weekly, backups_enabled, BACKUPS_ENABLED, BACKUP_DAILY,
    BACKUP_FOLDER, BACKUP_WEEKLY, DEVICE_LOCAL,
};
use crate::protocol::{ErrorCode, HostError, HostResult};
use crate::util::files;
use crate::util::paths::backups_dir_for;
use crate::util::time::{local_day, local_week};

/// The lock row of the daily backup (`domain::backups::DailyRow`).
const DAILY_META: &str = "daily_backup";
/// What the last restore did: `{seq, undo, restored, at}` (the `undo` of `backups.list`).
const RESTORE_META: &str = "last_restore";
/// `meta` rows that describe this device's host, not the history: a restore keeps them.
const DEVICE_META: [&str; 4] =
    [DAILY_META, "trash_expired_at", super::sync_folder::FOLDER_META, super::sync_folder::KEY_META];
/// The name the copy being restored is attached under.
const RESTORED: &str = "restored";

/// The backup settings as the host reads them (storage-model §3).
#[derive(Debug, Clone)]
pub struct BackupSettings {
    pub enabled: bool,
    /// Where daily, manual and pre-restore copies go.
    pub folder: PathBuf,
    pub daily: u32,
    pub weekly: u32,
}

/// What [`Store::daily_backup`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Daily {
    /// Backups are off.
    Off,
    /// Nothing to do: today's backup is made (or another host is making it).
    NotDue,
    /// This host ran today's backup: the lock row as it left it (outcome made, skipped or failed).
    Ran(DailyRow),
}

fn meta_get(conn: &Connection, key: &str) -> HostResult<Option<String>> {
    Ok(conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).optional()?)
}

fn meta_set(conn: &Connection, key: &str, value: &str) -> HostResult<()> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

fn daily_row(conn: &Connection) -> HostResult<Option<DailyRow>> {
    Ok(meta_get(conn, DAILY_META)?.and_then(|v| serde_json::from_str(&v).ok()))
}

fn set_daily_row(conn: &Connection, row: &DailyRow) -> HostResult<()> {
    let text = serde_json::to_string(row).map_err(|e| HostError::internal(e.to_string()))?;
    meta_set(conn, DAILY_META, &text)
}

fn settings_in(conn: &Connection, db: &Path) -> HostResult<BackupSettings> {
    Ok(BackupSettings {
        enabled: backups_enabled(setting_value(conn, BACKUPS_ENABLED)?.as_ref()),
        folder: backup_folder(setting_value(conn, BACKUP_FOLDER)?.as_ref())
            .map_or_else(|| backups_dir_for(db), PathBuf::from),
        daily: backup_daily(setting_value(conn, BACKUP_DAILY)?.as_ref()),
        weekly: backup_weekly(setting_value(conn, BACKUP_WEEKLY)?.as_ref()),
    })
}

/// `last` of `backups.list`: the daily backup's lock row for a person.
fn last_json(row: &DailyRow) -> Value {
    let mut v = json!({
        "day": row.day,
        "outcome": row.outcome(),
        "at": row.finished_at.unwrap_or(row.claimed_at),
    });
    if let Some(id) = &row.id {
        v["id"] = json!(id);
    }
    if let Some(m) = &row.message {
        v["message"] = json!(m);
    }
    v
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The error of a copy id that names no copy.
fn no_copy(id: &str) -> HostError {
    HostError::not_found(format!("no copy {id:?} (backups.list lists them)"))
}

/// A folder a user may name in `backupFolder` (`settings.set`): it may be missing (it is created
/// 0700 at the first backup), but not a symbolic link or a file.
pub(super) fn check_backup_folder(v: &Value) -> HostResult<()> {
    let Some(p) = backup_folder(Some(v)) else { return Ok(()) };
    match std::fs::symlink_metadata(&p) {
        Ok(md) if md.file_type().is_symlink() => Err(HostError::bad_request(format!(
            "backupFolder {p:?} is a symbolic link; Keepsake never writes copies through one: name the folder itself"
        ))),
        Ok(md) if !md.is_dir() => Err(HostError::bad_request(format!("backupFolder {p:?} is not a folder"))),
        _ => Ok(()),
    }
}

impl Store {
    /// The backup settings now.
    pub fn backup_settings(&mut self) -> HostResult<BackupSettings> {
        let db = self.path.clone();
        self.read(|tx| settings_in(tx, &db))
    }

    /// The daily backup's lock row (the last daily outcome), if any.
    pub fn backups_last(&mut self) -> HostResult<Option<DailyRow>> {
        self.read(|tx| daily_row(tx))
    }

    /// The folders copies are in: the backup folder, then the pre-migration folder beside the
    /// database when that is another one.
    fn copy_folders(&self, s: &BackupSettings) -> Vec<PathBuf> {
        let mut out = vec![s.folder.clone()];
        let beside = backups_dir_for(&self.path);
        if beside != s.folder {
            out.push(beside);
        }
        out
    }

    /// Chats in a copy, counted once per file state.
    fn sessions_in(&mut self, c: &Listed) -> Option<u64> {
        let key = (c.path.clone(), c.bytes, c.mtime_ns);
        if let Some(n) = self.copy_sessions.get(&key) {
            return *n;
        }
        let n = copies::copy_sessions(&c.path);
        if self.copy_sessions.len() > 1_000 {
            self.copy_sessions.clear();
        }
        self.copy_sessions.insert(key, n);
        n
    }

    fn copy_json(&mut self, c: &Listed, kind: &str) -> Value {
        json!({
            "id": c.id,
            "kind": kind,
            "createdAt": c.at_ms,
            "schemaVersion": c.schema,
            "sessions": self.sessions_in(c),
            "bytes": c.bytes,
        })
    }

    fn made_json(&mut self, m: &Made) -> Value {
        let listed = Listed {
            id: m.id.clone(),
            kind: m.kind,
            at_ms: m.at_ms,
            schema: m.schema,
            path: m.path.clone(),
            bytes: m.bytes,
            mtime_ns: 0,
        };
        self.copy_json(&listed, m.kind.as_str())
    }

    /// `backups.list`: the settings, every copy (newest first), the last daily outcome and the
    /// undo of the last restore (while nothing was written since).
    pub fn backups_list(&mut self) -> HostResult<Value> {
        let db = self.path.clone();
        let (s, last, restore, seq) = self.read(|tx| {
            let restore: Option<Value> =
                meta_get(tx, RESTORE_META)?.and_then(|v| serde_json::from_str(&v).ok());
            Ok((settings_in(tx, &db)?, daily_row(tx)?, restore, current_seq(tx)?))
        })?;
        let mut listed: Vec<Listed> = Vec::new();
        for dir in self.copy_folders(&s) {
            for c in copies::list_dir(&dir) {
                if !listed.iter().any(|l| l.id == c.id) {
                    listed.push(c);
                }
            }
        }
        listed.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then_with(|| b.id.cmp(&a.id)));
        let weekly = self.rotation(&listed, &s).weekly;
        let copies: Vec<Value> = listed
            .iter()
            .map(|c| {
                let kind =
                    if c.kind == Kind::Daily && weekly.contains(&c.id) { "weekly" } else { c.kind.as_str() };
                self.copy_json(c, kind)
            })
            .collect();
        let undo = restore.and_then(|r| {
            let id = r["undo"].as_str()?;
            let c = listed.iter().find(|c| c.id == id)?;
            (r["seq"].as_i64() == Some(seq)).then(|| json!({"id": c.id, "createdAt": c.at_ms}))
        });
        Ok(json!({
            "folder": s.folder.display().to_string(),
            "enabled": s.enabled,
            "daily": s.daily,
            "weekly": s.weekly,
            "copies": copies,
            "last": last.as_ref().map(last_json),
            "undo": undo,
        }))
    }

    /// The rotation of the daily copies among `listed` in the backup folder.
    fn rotation(&self, listed: &[Listed], s: &BackupSettings) -> rules::Rotation {
        let daily: Vec<DailyCopy> = listed
            .iter()
            .filter(|c| c.kind == Kind::Daily && c.path.parent() == Some(s.folder.as_path()))
            .map(|c| DailyCopy { id: c.id.clone(), at_ms: c.at_ms, week: local_week(c.at_ms) })
            .collect();
        rules::rotate(&daily, s.daily, s.weekly)
    }

    /// The database's size as a copy would have it (pages × page size).
    fn copy_bytes(&self) -> HostResult<u64> {
        let (pages, size): (i64, i64) = self.conn.query_row(
            "SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((pages.max(0) as u64) * (size.max(0) as u64))
    }

    /// `backups.create` ("Back up now"): a `manual` copy in the backup folder, kept until the
    /// user removes it. A retried `clientRequestId` returns the copy already made.
    pub fn backups_create(&mut self, crid: Option<&str>) -> HostResult<WriteOutcome> {
        const OP: &str = "backups.create";
        if self.mode == Mode::ReadOnly {
            return Err(HostError::unsupported("this database was opened read-only"));
        }
        if let Some(result) = self.recorded_result(OP, crid)? {
            return Ok(WriteOutcome { result, event: None });
        }
        let s = self.backup_settings()?;
        let bytes = self.copy_bytes()?;
        if let Some((avail, _)) = files::free_space(&s.folder) {
            if avail < bytes {
                return Err(HostError::new(
                    ErrorCode::DiskFull,
                    format!(
                        "no copy was made: {} has {} free and the copy needs {}; free some space and retry",
                        s.folder.display(),
                        mib(avail),
                        mib(bytes)
                    ),
                ));
            }
        }
        let schema = self.schema_version()?;
        let now = self.now();
        let made = copies::make_copy(&self.conn, &s.folder, Kind::Manual, now, schema, &|| false);
        let made = self.observe(made)?;
        tracing::info!(copy = %made.path.display(), bytes = made.bytes, "manual copy made");
        let copy = self.made_json(&made);
        self.write(OP, crid, |_| Ok(json!({"copy": copy})))
    }

    /// Where the copy `id` is: the backup folder, then the pre-migration folder.
    fn find_copy(&mut self, id: &str) -> HostResult<PathBuf> {
        let name = file_name_of_id(id).ok_or_else(|| {
            HostError::bad_request(format!("{id:?} is not a copy's id (keepsake-<kind>-<time>Z-v<schema>)"))
        })?;
        let s = self.backup_settings()?;
        self.copy_folders(&s)
            .into_iter()
            .map(|d| d.join(&name))
            .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .ok_or_else(|| no_copy(id))
    }

    /// `backups.restore`: put the copy `id` in place of the database (the module comment says
    /// how). Returns `{restored, undo, schemaVersion}`; `undo` is the pre-restore copy, which
    /// `backups.restore` puts back.
    pub fn backups_restore(&mut self, id: &str, crid: Option<&str>) -> HostResult<WriteOutcome> {
        const OP: &str = "backups.restore";
        if self.mode == Mode::ReadOnly {
            return Err(HostError::unsupported("this database was opened read-only"));
        }
        if let Some(result) = self.recorded_result(OP, crid)? {
            return Ok(WriteOutcome { result, event: None });
        }
        let path = self.find_copy(id)?;
        let id = rules::copy_id(path.file_name().and_then(|n| n.to_str()).unwrap_or(id)).to_owned();
        let (version, scratch) = prepare_restore(&path, &id, &backups_dir_for(&self.path))?;
        let attach = match &scratch {
            Some(s) => s.path.display().to_string(),
            None => file_uri(&path, "immutable=1"),
        };
        let r = self
            .conn
            .execute("ATTACH DATABASE ?1 AS restored", [&attach])
            .map_err(|e| HostError::internal(format!("cannot read the copy {id}: {e}")))
            .and_then(|_| self.restore_attached(&id, version, crid));
        let _ = self.conn.execute_batch("DETACH DATABASE restored");
        drop(scratch);
        let out = r?;
        let s = self.backup_settings()?;
        copies::keep_newest(&s.folder, Kind::Prerestore, KEEP_PRERESTORE);
        tracing::info!(copy = %id, undo = %out.result["undo"], "restored a copy");
        Ok(out)
    }

    /// The restore's transaction, the copy attached as `restored` (same schema as the database).
    fn restore_attached(&mut self, id: &str, version: u32, crid: Option<&str>) -> HostResult<WriteOutcome> {
        let db = self.path.clone();
        // sync's tables are this device's, like its backup settings: a copy never replaces them
        // (the recorder then records what the copy holds, keeping what other devices added)
        let tables: Vec<Table> =
            same_tables(&self.conn)?.into_iter().filter(|t| !t.name.starts_with("sync_")).collect();
        self.write("backups.restore", crid, |w| {
            let now = w.now;
            // 1. the database as it is, checked, under this transaction's write lock
            let s = settings_in(&w.tx, &db)?;
            let src = open::open_read_only(&db)?;
            let undo = copies::make_copy(&src, &s.folder, Kind::Prerestore, now, LATEST, &|| false)
                .map_err(|e| HostError::new(e.code, format!("nothing was restored: {}", e.message)))?;
            drop(src);
            // 2. what stays: the device's own settings and bookkeeping, the change sequence
            let local = device_rows(&w.tx)?;
            let live_seq = current_seq(&w.tx)?;
            // 3. every row replaced by the copy's (foreign keys checked at the commit); with sync
            // set up, what the copy holds is recorded as this write's, and what it lacks is kept
            // (never purged on the other devices)
            w.sync_union = true;
            w.tx.execute_batch("PRAGMA defer_foreign_keys=ON;")?;
            for t in &tables {
                w.tx.execute(&format!("DELETE FROM main.\"{}\"", t.name), [])?;
            }
            for t in &tables {
                w.tx.execute(
                    &format!(
                        "INSERT INTO main.\"{name}\" ({cols}) SELECT {cols} FROM {RESTORED}.\"{name}\"",
                        name = t.name,
                        cols = t.columns
                    ),
                    [],
                )?;
            }
            // AUTOINCREMENT counters last: the inserts above wrote rows of their own there
            w.tx.execute_batch(&format!(
                "DELETE FROM main.sqlite_sequence;
                 INSERT INTO main.sqlite_sequence (name, seq) SELECT name, seq FROM {RESTORED}.sqlite_sequence;"
            ))?;
            put_device_rows(&w.tx, &local)?;
            // 4. the change log starts after every change either database has seen: one row,
            // `restored`, announced by every host (`changes.since` from before it: reset)
            let copy_seq: i64 = w.tx.query_row(
                "SELECT max(coalesce((SELECT max(seq) FROM main.changes), 0),
                            coalesce((SELECT seq FROM main.sqlite_sequence WHERE name = 'changes'), 0))",
                [],
                |r| r.get(0),
            )?;
            let base = live_seq.max(copy_seq);
            w.tx.execute("DELETE FROM main.changes", [])?;
            w.tx.execute("DELETE FROM main.sqlite_sequence WHERE name = 'changes'", [])?;
            w.tx.execute("INSERT INTO main.sqlite_sequence (name, seq) VALUES ('changes', ?1)", [base])?;
            meta_set(&w.tx, "changes_floor", &base.to_string())?;
            let record = json!({"seq": base + 1, "undo": undo.id, "restored": id, "at": now});
            meta_set(&w.tx, RESTORE_META, &record.to_string())?;
            w.changes.restored = true;
            Ok(json!({"restored": id, "undo": undo.id, "schemaVersion": version}))
        })
    }

    /// The daily backup, if due (run by the server's backup thread at open and then hourly, on a
    /// connection of its own; `stop` ends a copy under way between two steps). The day is claimed
    /// in the lock row first (`domain::backups::may_claim`), so two hosts never make two backups
    /// for one day; a copy that would leave less than the free-space floor is skipped; the
    /// outcome is kept in the row and logged; then the daily copies are rotated.
    pub fn daily_backup(&mut self, stop: &dyn Fn() -> bool) -> HostResult<Daily> {
        const OP: &str = "backups.daily";
        let s = self.backup_settings()?;
        if !s.enabled {
            return Ok(Daily::Off);
        }
        let now = self.now();
        let today = local_day(now);
        let origin = self.origin.clone();
        let claim = DailyRow {
            day: today.clone(),
            claimed_at: now,
            origin,
            finished_at: None,
            id: None,
            outcome: None,
            message: None,
        };
        let mut before: Option<DailyRow> = None;
        let claimed = self.write(OP, None, |w| {
            let row = daily_row(&w.tx)?;
            if !may_claim(row.as_ref(), &today, now) {
                return Ok(json!(false));
            }
            before = row;
            set_daily_row(&w.tx, &claim)?;
            Ok(json!(true))
        })?;
        if claimed.result != json!(true) {
            return Ok(Daily::NotDue);
        }
        let schema = self.schema_version()?;
        let bytes = self.copy_bytes()?;
        let mut row = claim.clone();
        let made = match files::free_space(&s.folder) {
            Some((avail, total)) if !leaves_floor(avail, total, bytes) => Err((
                rules::OUTCOME_SKIPPED,
                format!(
                    "skipped: {} has {} free; a copy of {} would leave less than {} (1 GiB or 10 % of the disk, \
                     whichever is smaller); free some space or choose another backup folder",
                    s.folder.display(),
                    mib(avail),
                    mib(bytes),
                    mib(rules::floor_bytes(total))
                ),
            )),
            _ => copies::make_copy(&self.conn, &s.folder, Kind::Daily, now, schema, stop).map_err(|e| {
                if e.code == ErrorCode::DbCorrupt {
                    self.note_damage(&e.message);
                }
                (rules::OUTCOME_FAILED, e.message)
            }),
        };
        if made.is_err() && stop() {
            // the host is shutting down: give the day back, as it was, to the next host
            let mine = claim.clone();
            let _ = self.write(OP, None, |w| {
                if daily_row(&w.tx)?.as_ref() == Some(&mine) {
                    match &before {
                        Some(r) => set_daily_row(&w.tx, r)?,
                        None => {
                            w.tx.execute("DELETE FROM meta WHERE key = ?1", [DAILY_META])?;
                        }
                    }
                }
                Ok(Value::Null)
            });
            return Ok(Daily::NotDue);
        }
        row.finished_at = Some(self.now());
        match &made {
            Ok(m) => {
                row.outcome = Some(rules::OUTCOME_MADE.into());
                row.id = Some(m.id.clone());
                tracing::info!(copy = %m.path.display(), bytes = m.bytes, day = %today, "daily backup made");
            }
            Err((outcome, message)) => {
                row.outcome = Some((*outcome).into());
                row.message = Some(message.clone());
                tracing::warn!(day = %today, outcome, message = %message, "daily backup not made");
            }
        }
        let mine = claim;
        let done = row.clone();
        self.write(OP, None, |w| {
            // a host that took the claim over (this one looked dead) keeps its own row
            if daily_row(&w.tx)?.as_ref() == Some(&mine) {
                set_daily_row(&w.tx, &done)?;
            }
            Ok(Value::Null)
        })?;
        if made.is_ok() {
            let listed = copies::list_dir(&s.folder);
            let remove = self.rotation(&listed, &s).remove;
            copies::remove_copies(&s.folder, &remove);
        }
        Ok(Daily::Ran(row))
    }
}

/// A table the restore replaces: its name and the columns it copies (the rowid too where no
/// column is its alias, so every row keeps its rowid).
struct Table {
    name: String,
    columns: String,
}

/// The tables of the database (SQLite's own apart), checked to be those of the attached copy,
/// column for column.
fn same_tables(conn: &Connection) -> HostResult<Vec<Table>> {
    let names = |schema: &str| -> HostResult<Vec<String>> {
        let mut st = conn.prepare(&format!(
            "SELECT name FROM {schema}.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ))?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let columns = |schema: &str, table: &str| -> HostResult<Vec<(String, String, i64)>> {
        let mut st =
            conn.prepare(&format!("SELECT name, type, pk FROM {schema}.pragma_table_info(?1) ORDER BY cid"))?;
        let rows = st.query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let mine = names("main")?;
    let theirs = names(RESTORED)?;
    if mine != theirs {
        return Err(HostError::internal(format!(
            "the copy's tables differ from the database's after its migration ({theirs:?} vs {mine:?}); nothing was restored"
        )));
    }
    let mut out = Vec::new();
    for name in mine {
        let cols = columns("main", &name)?;
        if cols != columns(RESTORED, &name)? {
            return Err(HostError::internal(format!(
                "table {name}'s columns differ between the copy and the database; nothing was restored"
            )));
        }
        let alias = cols.iter().filter(|c| c.2 > 0).count() == 1
            && cols.iter().any(|c| c.2 > 0 && c.1.eq_ignore_ascii_case("INTEGER"));
        let without_rowid = conn
            .query_row(&format!("SELECT rowid FROM main.\"{name}\" LIMIT 0"), [], |_| Ok(()))
            .optional()
            .is_err();
        let mut list: Vec<String> =
            cols.iter().map(|c| format!("\"{}\"", c.0.replace('"', "\"\""))).collect();
        if !alias && !without_rowid {
            list.insert(0, "rowid".into());
        }
        out.push(Table { name: name.replace('"', "\"\""), columns: list.join(", ") });
    }
    Ok(out)
}

/// The rows a restore keeps from the database it replaces.
struct DeviceRows {
    settings: Vec<(String, String, i64)>,
    meta: Vec<(String, String)>,
}

fn device_rows(conn: &Connection) -> HostResult<DeviceRows> {
    let mut settings = Vec::new();
    for k in DEVICE_LOCAL {
        let row: Option<(String, i64)> = conn
            .query_row("SELECT value, updated_at FROM main.settings WHERE key = ?1", [k], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        if let Some((v, at)) = row {
            settings.push((k.to_owned(), v, at));
        }
    }
    let mut meta = Vec::new();
    for k in DEVICE_META {
        if let Some(v) = meta_get(conn, k)? {
            meta.push((k.to_owned(), v));
        }
    }
    Ok(DeviceRows { settings, meta })
}

fn put_device_rows(conn: &Connection, d: &DeviceRows) -> HostResult<()> {
    for k in DEVICE_LOCAL {
        conn.execute("DELETE FROM main.settings WHERE key = ?1", [k])?;
    }
    for (k, v, at) in &d.settings {
        conn.execute(
            "INSERT INTO main.settings (key, value, updated_at) VALUES (?1, ?2, ?3)",
            params![k, v, at],
        )?;
    }
    for k in DEVICE_META {
        conn.execute("DELETE FROM main.meta WHERE key = ?1", [k])?;
    }
    for (k, v) in &d.meta {
        meta_set(conn, k, v)?;
    }
    Ok(())
}

/// A scratch file a restore prepares an older copy in; removed when dropped.
struct Scratch {
    path: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = files::remove_file_no_follow(&self.path);
    }
}

/// Check the copy at `path` and make it ready to attach: `(its schema version, the scratch file
/// holding it migrated to LATEST, or None when it is at LATEST already and is attached as it is)`.
/// A copy that cannot be read or fails `integrity_check` is `bad_request`, one newer than this
/// host `unsupported`: nothing is changed in either case.
fn prepare_restore(path: &Path, id: &str, scratch_dir: &Path) -> HostResult<(u32, Option<Scratch>)> {
    let damaged = |why: String| {
        HostError::bad_request(format!(
            "the copy {id} is damaged ({why}); nothing was restored, choose another copy"
        ))
    };
    let src = copies::open_copy(path).map_err(|e| damaged(e.to_string()))?;
    let version = copies::copy_version(&src).map_err(|e| damaged(e.to_string()))?;
    if version > LATEST {
        return Err(HostError::unsupported(format!(
            "the copy {id} holds schema {version}, written by a newer keepsake-host (this one reads up to {LATEST}); \
             nothing was restored: update keepsake-host to restore it"
        )));
    }
    if version == 0 {
        return Err(damaged("it holds no Keepsake database: schema version 0".into()));
    }
    let lines: Vec<String> = src
        .prepare("PRAGMA integrity_check")
        .and_then(|mut st| st.query_map([], |r| r.get::<_, String>(0))?.collect())
        .map_err(|e| damaged(e.to_string()))?;
    if lines != ["ok"] {
        return Err(damaged(format!("integrity_check: {}", lines.join("; "))));
    }
    if version == LATEST {
        return Ok((version, None));
    }
    // an older schema: migrated in a scratch copy; the copy itself stays as it is
    files::private_dir(scratch_dir)
        .map_err(|e| HostError::internal(format!("cannot use {}: {e}", scratch_dir.display())))?;
    let random = uuid::Uuid::new_v4().simple().to_string();
    let scratch = Scratch { path: scratch_dir.join(format!(".keepsake-restore-{}.tmp", &random[..16])) };
    let mut file = files::private_new(&scratch.path)
        .map_err(|e| HostError::internal(format!("cannot create {}: {e}", scratch.path.display())))?;
    let lines = copies::fill_copy(&src, &scratch.path, &mut file, &|| false)?;
    drop(file);
    if lines != ["ok"] {
        return Err(damaged(format!("integrity_check of its scratch copy: {}", lines.join("; "))));
    }
    let mut conn = Connection::open_with_flags(
        &scratch.path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch(
        "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; PRAGMA foreign_keys=ON; PRAGMA trusted_schema=OFF;",
    )?;
    migrate::migrate_to(&mut conn, LATEST).map_err(|e| {
        HostError::internal(format!(
            "the copy {id} (schema {version}) could not be migrated to {LATEST}: {e}"
        ))
    })?;
    Ok((version, Some(scratch)))
}
