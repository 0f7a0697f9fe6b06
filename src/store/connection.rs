//! The [`Store`]: one open connection to the database and how every operation runs on it:
//! opening (salvage first, then migrations), read and write transactions (a write's
//! `clientRequestId`, search data, new blobs and change-log row, all before its commit), the
//! damage it meets, and bounding the -wal and closing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::blobs;
use super::changelog::{self, ChangeEvent};
use super::copies;
use super::drawer;
use super::error::{is_corrupt, StoreError};
use super::indexing;
use super::migrate;
use super::open::{self, Mode};
use super::salvage::{check, marker, recover};
use super::search;
use super::sync::recorder;
use super::tx::{ChangeSet, WriteTx};
use crate::domain::backups::{Kind, KEEP_PREMIGRATION};
use crate::protocol::{ErrorCode, HostError, HostResult};
use crate::util::paths::backups_dir_for;
use crate::util::time::now_ms;

/// The outcome of a write: its result and, if it committed changes, the event to announce.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    pub result: Value,
    pub event: Option<ChangeEvent>,
}

/// A -wal larger than this after a commit is checkpointed with RESTART ([`Store::write`]).
const WAL_RESTART_BYTES: u64 = 8 * 1024 * 1024;

/// An open database.
pub struct Store {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) mode: Mode,
    /// Identifies this process's commits in the change log.
    pub(super) origin: String,
    /// Set when this connection met `SQLITE_CORRUPT` / `SQLITE_NOTADB`: writes stop (§7).
    damaged: Option<String>,
    /// Whether this process has checked that every session is in the search index.
    pub(super) search_checked: bool,
    /// The drawer as the last `sessions.list` read it (reused while the database is unchanged).
    pub(super) drawer: Option<std::sync::Arc<drawer::Drawer>>,
    /// A write committed since the last [`Store::tidy`]: the -wal may need bounding.
    wal_check_due: bool,
    /// The clock writes stamp their rows with (ms since the Unix epoch); tests inject their own.
    clock: Clock,
    /// Where provider API keys are kept (`keys.rs`); tests inject their own.
    pub(super) secrets: std::sync::Arc<dyn crate::secrets::SecretStore>,
    /// Chats counted in each backup copy (`backups.list`), by path, size and modification time.
    pub(super) copy_sessions: std::collections::HashMap<(PathBuf, u64, i128), Option<u64>>,
}

/// The at-most-once rule of `clientRequestId` (PROTOCOL.md §2): the result recorded for `crid`
/// when it was used for `op` already; `conflict` when it was used for another operation.
fn recorded(conn: &Connection, op: &str, crid: &str) -> HostResult<Option<Value>> {
    let prior: Option<(String, String)> = conn
        .query_row("SELECT op, result FROM client_requests WHERE client_request_id = ?1", [crid], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let Some((prior_op, result)) = prior else { return Ok(None) };
    if prior_op != op {
        return Err(HostError::conflict(format!("clientRequestId {crid:?} was already used for {prior_op}")));
    }
    serde_json::from_str(&result)
        .map(Some)
        .map_err(|e| marker::content_damage(format!("a recorded result no longer parses: {e}")))
}

/// A source of the current time in ms since the Unix epoch.
pub type Clock = std::sync::Arc<dyn Fn() -> i64 + Send + Sync>;

impl Store {
    /// Open (creating if needed) and migrate the database at `path`. A damaged database a host
    /// reported earlier is moved aside and salvaged first (reliability.md §7, `salvage/`); this
    /// must run before the process holds any other connection to the file.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(r) = recover::recover_at_start(path)? {
            tracing::warn!(rows = r.rows_recovered, copy = %r.damaged_copy.display(), "started on a salvaged database");
        }
        let opened = match check::too_short(path) {
            Some(s) => Err(StoreError::Corrupt(s)),
            None => Ok(()),
        }
        .and_then(|_| open::open_connection(path, Mode::ReadWrite))
        .and_then(|mut conn| {
            // A current schema needs no write lock: versions only grow and each migration
            // commits whole, so a snapshot at LATEST is final. Skipping the lock keeps a start
            // from queueing behind another host's write (issue 6 scenario 9); any other version
            // goes through `migrate`, which takes the lock and reads the version again under it.
            if migrate::schema_version(&conn)? != migrate::LATEST {
                // a copy first, made under the migration's lock (docs/reliability.md §4)
                let mut made = None;
                migrate::migrate(&mut conn, |found| {
                    made = Some(copies::premigration_copy(path, found, now_ms())?);
                    Ok(())
                })?;
                if made.is_some() {
                    // older pre-migration copies go only once a newer one was made and checked
                    copies::keep_newest(&backups_dir_for(path), Kind::Premigration, KEEP_PREMIGRATION);
                }
            }
            Ok(conn)
        });
        match opened {
            Ok(conn) => Ok(Store::wrap(conn, path, Mode::ReadWrite)),
            Err(StoreError::Corrupt(m)) => {
                marker::note_damage(path, &m);
                Err(StoreError::Corrupt(format!(
                    "{m}; writes are stopped, and the next start moves the file aside and salvages it (see keepsake-host doctor)"
                )))
            }
            Err(e) => Err(e),
        }
    }

    /// Open another connection to a database this process has already opened and migrated
    /// (the change poller's connection); never migrates.
    pub fn open_more(path: &Path, origin: String) -> Result<Store, StoreError> {
        let conn = open::open_connection(path, Mode::ReadWrite)?;
        Ok(Store::wrap(conn, path, Mode::ReadWrite).with_origin(origin))
    }

    /// Open an existing database read-only (CLI inspection); never migrates or creates.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if let Some(s) = check::too_short(path) {
            marker::note_damage(path, &s);
            return Err(StoreError::Corrupt(s));
        }
        let conn = open::open_read_only(path)?;
        let v = migrate::schema_version(&conn).inspect_err(|e| {
            if is_corrupt(e) {
                marker::note_damage(path, &e.to_string());
            }
        })?;
        if v > migrate::LATEST {
            return Err(StoreError::TooNew { found: v, supported: migrate::LATEST });
        }
        if v < migrate::LATEST {
            return Err(StoreError::Other(format!(
                "the database is at schema version {v}; open it once with the host (any write command or the extension) to upgrade it to {}",
                migrate::LATEST
            )));
        }
        Ok(Store::wrap(conn, path, Mode::ReadOnly))
    }

    fn wrap(conn: Connection, path: &Path, mode: Mode) -> Store {
        let origin =
            format!("pid {} {}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8]);
        // Damaged cells fail as SQLITE_CORRUPT when their page is loaded instead of being read
        // as data (T19: fewer silent wrong answers from a damaged file).
        let _ = conn.execute_batch("PRAGMA cell_size_check=ON");
        Store {
            conn,
            path: path.to_path_buf(),
            mode,
            origin,
            damaged: None,
            search_checked: false,
            drawer: None,
            wal_check_due: false,
            clock: std::sync::Arc::new(now_ms),
            secrets: crate::secrets::system(),
            copy_sessions: Default::default(),
        }
    }

    /// Keep API keys in another secret store from now on (tests of a store that fails).
    /// The secret store this connection uses (API keys, the sync key).
    pub fn secret_store(&self) -> std::sync::Arc<dyn crate::secrets::SecretStore> {
        self.secrets.clone()
    }

    pub fn set_secret_store(&mut self, secrets: std::sync::Arc<dyn crate::secrets::SecretStore>) {
        self.secrets = secrets;
    }

    /// Use another clock for every write from now on (tests of expiry and ordering).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The store's clock now.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// Share another connection's origin, so its commits count as this process's own.
    pub fn with_origin(mut self, origin: String) -> Store {
        self.origin = origin;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn schema_version(&self) -> HostResult<u32> {
        Ok(migrate::schema_version(&self.conn)?)
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Run `f` in one read transaction (one consistent state).
    pub fn read<T>(&mut self, f: impl FnOnce(&rusqlite::Transaction) -> HostResult<T>) -> HostResult<T> {
        let r = (|| {
            let tx = self.conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })();
        self.observe(r)
    }

    /// Remember damage an operation met: this process stops writing, and the marker beside
    /// the database stops every other host's writes and triggers the salvage at the next start.
    pub(crate) fn observe<T>(&mut self, r: HostResult<T>) -> HostResult<T> {
        if let Err(e) = &r {
            if e.code == ErrorCode::DbCorrupt {
                self.note_damage(&e.message);
            }
        }
        r
    }

    /// Record damage found by this connection (see [`Store::observe`]).
    pub fn note_damage(&mut self, what: &str) {
        if self.damaged.is_none() {
            self.damaged = Some(what.to_owned());
        }
        marker::note_damage(&self.path, what);
    }

    /// Why writes are refused, if the database is known to be damaged.
    pub fn damage(&self) -> Option<String> {
        if let Some(d) = &self.damaged {
            return Some(d.clone());
        }
        if marker::damage_noted(&self.path) {
            let what = marker::read_marker(&self.path)
                .and_then(|m| m.get("error").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "damage reported by another keepsake-host process".into());
            return Some(what);
        }
        None
    }

    /// Run a write as one `BEGIN IMMEDIATE` transaction with the at-most-once rule for
    /// `client_request_id`: a recorded id for the same op returns the recorded result and
    /// applies nothing; for another op it is `conflict`. A write that changes nothing still
    /// records its id (§11.4) but writes no change-log row and emits no event.
    pub fn write(
        &mut self,
        op: &str,
        client_request_id: Option<&str>,
        f: impl FnOnce(&mut WriteTx) -> HostResult<Value>,
    ) -> HostResult<WriteOutcome> {
        if self.mode == Mode::ReadOnly {
            return Err(HostError::unsupported("this database was opened read-only"));
        }
        if let Some(d) = self.damage() {
            return Err(HostError::new(
                ErrorCode::DbCorrupt,
                format!(
                    "the database is damaged ({d}); writes are stopped until the next start moves it aside and \
                     salvages it (see keepsake-host doctor)"
                ),
            ));
        }
        let r = self.write_inner(op, client_request_id, f);
        if r.is_ok() {
            self.wal_check_due = true;
        }
        self.observe(r)
    }

    fn write_inner(
        &mut self,
        op: &str,
        client_request_id: Option<&str>,
        f: impl FnOnce(&mut WriteTx) -> HostResult<Value>,
    ) -> HostResult<WriteOutcome> {
        let now = self.now();
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(crid) = client_request_id {
            if let Some(result) = recorded(&tx, op, crid)? {
                tx.commit()?;
                return Ok(WriteOutcome { result, event: None });
            }
        }
        let mut w = WriteTx {
            tx,
            changes: ChangeSet::default(),
            new_blobs: Vec::new(),
            now,
            reindex: BTreeSet::new(),
            sync_applying: false,
            sync_union: false,
        };
        let result = f(&mut w)?;
        // while sync is set up: what this write changed becomes operations, in this transaction
        recorder::record(&mut w)?;
        let mut postings = search::Postings::default();
        for sid in std::mem::take(&mut w.reindex) {
            indexing::rebuild_search(&w.tx, &sid, &mut postings)?;
        }
        postings.flush(&w.tx)?;
        blobs::collect_new(&w)?;
        let event = if w.changes.is_empty() {
            None
        } else {
            Some(changelog::record(&w.tx, &w.changes, client_request_id, &self.origin, w.now)?)
        };
        if let Some(crid) = client_request_id {
            w.tx.execute(
                "INSERT INTO client_requests (client_request_id, op, result, created_at) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![crid, op, result.to_string(), w.now],
            )?;
            changelog::prune_client_requests(&w.tx, w.now)?;
        }
        w.tx.commit()?;
        Ok(WriteOutcome { result, event })
    }

    /// The result recorded for `clientRequestId` `crid` of `op`, if that write was applied already
    /// (a write whose work happens before its transaction looks first: `backups.create`).
    pub(crate) fn recorded_result(&mut self, op: &str, crid: Option<&str>) -> HostResult<Option<Value>> {
        let Some(crid) = crid else { return Ok(None) };
        self.read(|tx| recorded(tx, op, crid))
    }

    /// Work a write leaves for after its reply: bound the -wal ([`Store::bound_wal`]). The server
    /// calls it once a request's reply (and event) are out; [`Store::close`] calls it too.
    pub fn tidy(&mut self) {
        if std::mem::take(&mut self.wal_check_due) {
            self.bound_wal();
        }
    }

    /// Keep the -wal bounded under readers that never pause (reliability.md T15: under 16 MiB).
    /// SQLite's automatic checkpoint (PASSIVE) copies frames back but starts the file over only
    /// when no reader holds an older snapshot, which a streaming reader and other writers seldom
    /// allow: T15 saw the file reach 33 MiB. Past [`WAL_RESTART_BYTES`] a RESTART checkpoint
    /// waits (busy handler) for the reads under way, new readers go on, and the next write
    /// starts the file over (`journal_size_limit` then cuts it back to 4 MiB). The write has
    /// committed: a checkpoint that fails is only logged.
    fn bound_wal(&self) {
        let wal = crate::util::paths::sidecar(&self.path, "-wal");
        if std::fs::metadata(wal).map_or(0, |m| m.len()) <= WAL_RESTART_BYTES {
            return;
        }
        if let Err(e) = self.conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())) {
            tracing::debug!(error = %e, "wal checkpoint (restart) failed");
        }
    }

    /// `PRAGMA optimize` before closing (reliability.md §3 step 7).
    pub fn close(mut self) {
        self.tidy();
        if self.mode == Mode::ReadWrite {
            let _ = self.conn.execute_batch("PRAGMA optimize;");
        }
        let _ = self.conn.close();
    }
}
