//! The replicated state's tables (migration 7, docs/sync.md "The tables"): this device's row and
//! clock, the registers of sessions, entries and synced settings, tombstones, the ranges of what
//! was applied, and merging registers into them. Every function runs inside the caller's
//! transaction.

use std::collections::BTreeSet;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::super::salvage::marker::content_damage;
use crate::domain::sync::op::Registers;
use crate::domain::sync::ranges::Ranges;
use crate::domain::sync::regs::{EntryRegs, Fork, Kind, Loc, Name, Reg, SessionRegs, SettingReg, Trash};
use crate::domain::sync::stamp::{Hlc, Stamp};
use crate::protocol::HostResult;

/// This device, as `sync_device` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub paused: bool,
    pub hlc: Hlc,
    pub next_seq: u64,
}

/// This device's row; `None` until sync is set up.
pub(in crate::store) fn device(conn: &Connection) -> HostResult<Option<Device>> {
    Ok(conn
        .prepare_cached(
            "SELECT device_id, name, created_at, paused, hlc_wall, hlc_counter, next_seq FROM sync_device WHERE id = 1",
        )?
        .query_row([], |r| {
            Ok(Device {
                id: r.get(0)?,
                name: r.get(1)?,
                created_at: r.get(2)?,
                paused: r.get::<_, i64>(3)? != 0,
                hlc: Hlc { t: r.get(4)?, c: r.get::<_, i64>(5)?.clamp(0, u32::MAX as i64) as u32 },
                next_seq: r.get::<_, i64>(6)?.max(1) as u64,
            })
        })
        .optional()?)
}

/// Keep the clock and the next operation number.
pub(in crate::store) fn save_clock(conn: &Connection, hlc: Hlc, next_seq: u64) -> HostResult<()> {
    conn.prepare_cached(
        "UPDATE sync_device SET hlc_wall = ?1, hlc_counter = ?2, next_seq = ?3 WHERE id = 1",
    )?
    .execute(params![hlc.t, hlc.c as i64, next_seq as i64])?;
    Ok(())
}

fn stamp_col(s: Option<String>) -> rusqlite::Result<Option<Stamp>> {
    match s {
        None => Ok(None),
        Some(t) => Stamp::decode(&t).map(Some).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Text,
                format!("not a stamp: {t:?}").into(),
            )
        }),
    }
}

fn json_col<T: serde::de::DeserializeOwned>(s: Option<String>) -> rusqlite::Result<Option<T>> {
    match s {
        None => Ok(None),
        Some(t) => serde_json::from_str(&t).map(Some).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        }),
    }
}

fn reg<T>(v: Option<T>, s: Option<Stamp>) -> Option<Reg<T>> {
    Some(Reg { v: v?, s: s? })
}

/// A register whose value may be NULL (a value in its own right): present when it has a stamp.
fn nullable_reg<T>(v: Option<T>, s: Option<Stamp>) -> Option<Reg<Option<T>>> {
    s.map(|s| Reg { v, s })
}

fn damaged(e: rusqlite::Error) -> crate::protocol::HostError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..) => {
            content_damage(format!("a sync register no longer reads: {e}"))
        }
        other => other.into(),
    }
}

const SESSION_COLS: &str =
    "session_id, created, name, name_auto, name_stamp, pinned, pinned_stamp, created_at,
    created_at_stamp, trash, trash_stamp, extra, extra_stamp, root, root_stamp";

fn session_of(r: &rusqlite::Row) -> rusqlite::Result<SessionRegs> {
    let name: Option<String> = r.get(2)?;
    let auto: Option<i64> = r.get(3)?;
    Ok(SessionRegs {
        id: r.get(0)?,
        created: stamp_col(r.get(1)?)?,
        name: reg(name.map(|n| Name { name: n, auto: auto.unwrap_or(0) != 0 }), stamp_col(r.get(4)?)?),
        pinned: reg(r.get::<_, Option<i64>>(5)?.map(|p| p != 0), stamp_col(r.get(6)?)?),
        created_at: reg(r.get(7)?, stamp_col(r.get(8)?)?),
        trash: nullable_reg(json_col::<Trash>(r.get(9)?)?, stamp_col(r.get(10)?)?),
        extra: nullable_reg(json_col::<Value>(r.get(11)?)?, stamp_col(r.get(12)?)?),
        root: reg(json_col::<Fork>(r.get(13)?)?, stamp_col(r.get(14)?)?),
    })
}

/// A session's registers.
pub(in crate::store) fn session(conn: &Connection, id: &str) -> HostResult<Option<SessionRegs>> {
    conn.prepare_cached(&format!("SELECT {SESSION_COLS} FROM sync_sessions WHERE session_id = ?1"))?
        .query_row([id], session_of)
        .optional()
        .map_err(damaged)
}

/// Every session's registers (a checkpoint).
pub(in crate::store) fn all_sessions(conn: &Connection) -> HostResult<Vec<SessionRegs>> {
    let mut st = conn.prepare(&format!("SELECT {SESSION_COLS} FROM sync_sessions ORDER BY session_id"))?;
    let rows = st.query_map([], session_of).map_err(damaged)?;
    rows.collect::<Result<_, _>>().map_err(damaged)
}

/// Every session id the state has registers for.
pub(in crate::store) fn all_session_ids(conn: &Connection) -> HostResult<Vec<String>> {
    let mut st = conn.prepare("SELECT session_id FROM sync_sessions ORDER BY session_id")?;
    let rows = st.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("registers serialize")
}

pub(in crate::store) fn put_session(conn: &Connection, s: &SessionRegs) -> HostResult<()> {
    let enc = |st: Option<&Stamp>| st.map(Stamp::encode);
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO sync_sessions ({SESSION_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
    ))?
    .execute(params![
        s.id,
        enc(s.created.as_ref()),
        s.name.as_ref().map(|r| r.v.name.clone()),
        s.name.as_ref().map(|r| r.v.auto as i64),
        enc(s.name.as_ref().map(|r| &r.s)),
        s.pinned.as_ref().map(|r| r.v as i64),
        enc(s.pinned.as_ref().map(|r| &r.s)),
        s.created_at.as_ref().map(|r| r.v),
        enc(s.created_at.as_ref().map(|r| &r.s)),
        s.trash.as_ref().and_then(|r| r.v.as_ref()).map(text),
        enc(s.trash.as_ref().map(|r| &r.s)),
        s.extra.as_ref().and_then(|r| r.v.as_ref()).map(text),
        enc(s.extra.as_ref().map(|r| &r.s)),
        s.root.as_ref().map(|r| text(&r.v)),
        enc(s.root.as_ref().map(|r| &r.s)),
    ])?;
    Ok(())
}

/// An entry's columns, its body last (`body` or `NULL` when the body is not read).
fn entry_cols(body: &str) -> String {
    format!("entry_id, created, session_id, parent, loc_stamp, fork, fork_stamp, body_stamp, {body}")
}

fn entry_of(r: &rusqlite::Row, with_body: bool) -> rusqlite::Result<EntryRegs> {
    let session: Option<String> = r.get(2)?;
    let parent: Option<String> = r.get(3)?;
    let loc = match (session, parent) {
        (Some(session), Some(parent)) => Some(Loc { session, parent }),
        _ => None,
    };
    let body_stamp = stamp_col(r.get(7)?)?;
    let body = if with_body {
        reg(json_col::<Value>(r.get(8)?)?, body_stamp)
    } else {
        // the body's stamp only; its value (not read) stands as null
        body_stamp.map(|s| Reg { v: Value::Null, s })
    };
    Ok(EntryRegs {
        id: r.get(0)?,
        created: stamp_col(r.get(1)?)?,
        loc: reg(loc, stamp_col(r.get(4)?)?),
        fork: reg(json_col::<Fork>(r.get(5)?)?, stamp_col(r.get(6)?)?),
        body,
    })
}

/// An entry's registers; `with_body` false reads everything but the body's value (`null`).
pub(in crate::store) fn entry(conn: &Connection, id: &str, with_body: bool) -> HostResult<Option<EntryRegs>> {
    let cols = entry_cols(if with_body { "body" } else { "NULL" });
    conn.prepare_cached(&format!("SELECT {cols} FROM sync_entries WHERE entry_id = ?1"))?
        .query_row([id], |r| entry_of(r, with_body))
        .optional()
        .map_err(damaged)
}

/// The registers of every entry whose place is session `sid` (bodies not read).
pub(in crate::store) fn entries_in(conn: &Connection, sid: &str) -> HostResult<Vec<EntryRegs>> {
    let cols = entry_cols("NULL");
    let mut st = conn.prepare_cached(&format!("SELECT {cols} FROM sync_entries WHERE session_id = ?1"))?;
    let rows = st.query_map([sid], |r| entry_of(r, false)).map_err(damaged)?;
    rows.collect::<Result<_, _>>().map_err(damaged)
}

/// Every entry's registers, bodies included (a checkpoint), in entryId order.
pub(in crate::store) fn all_entries(conn: &Connection, mut each: impl FnMut(EntryRegs)) -> HostResult<()> {
    let mut st =
        conn.prepare(&format!("SELECT {} FROM sync_entries ORDER BY entry_id", entry_cols("body")))?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        each(entry_of(r, true).map_err(damaged)?);
    }
    Ok(())
}

/// An entry's body, as stored.
pub(in crate::store) fn entry_body(conn: &Connection, id: &str) -> HostResult<Option<Value>> {
    let raw: Option<Option<String>> = conn
        .prepare_cached("SELECT body FROM sync_entries WHERE entry_id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    raw.flatten()
        .map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| content_damage(format!("a synced entry no longer parses: {e}")))
        })
        .transpose()
}

/// Write an entry's registers (read with its body).
pub(in crate::store) fn put_entry(conn: &Connection, e: &EntryRegs) -> HostResult<()> {
    let enc = |st: Option<&Stamp>| st.map(Stamp::encode);
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO sync_entries ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        entry_cols("body")
    ))?
    .execute(params![
        e.id,
        enc(e.created.as_ref()),
        e.loc.as_ref().map(|r| r.v.session.clone()),
        e.loc.as_ref().map(|r| r.v.parent.clone()),
        enc(e.loc.as_ref().map(|r| &r.s)),
        e.fork.as_ref().map(|r| text(&r.v)),
        enc(e.fork.as_ref().map(|r| &r.s)),
        enc(e.body.as_ref().map(|r| &r.s)),
        e.body.as_ref().map(|r| r.v.to_string()),
    ])?;
    Ok(())
}

pub(in crate::store) fn setting(conn: &Connection, key: &str) -> HostResult<Option<SettingReg>> {
    conn.prepare_cached("SELECT value, stamp FROM sync_settings WHERE key = ?1")?
        .query_row([key], |r| {
            Ok(SettingReg {
                key: key.to_owned(),
                value: Reg {
                    v: json_col::<Value>(r.get(0)?)?,
                    s: stamp_col(Some(r.get(1)?))?.expect("a stamp"),
                },
            })
        })
        .optional()
        .map_err(damaged)
}

pub(in crate::store) fn all_settings(conn: &Connection) -> HostResult<Vec<SettingReg>> {
    let keys: Vec<String> = conn
        .prepare("SELECT key FROM sync_settings ORDER BY key")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for k in keys {
        out.extend(setting(conn, &k)?);
    }
    Ok(out)
}

fn put_setting(conn: &Connection, s: &SettingReg) -> HostResult<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO sync_settings (key, value, stamp) VALUES (?1, ?2, ?3)")?
        .execute(params![s.key, s.value.v.as_ref().map(Value::to_string), s.value.s.encode()])?;
    Ok(())
}

pub(in crate::store) fn tombstoned(conn: &Connection, kind: Kind, id: &str) -> HostResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sync_tombstones WHERE kind = ?1 AND id = ?2")?
        .query_row(params![kind.as_str(), id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The entryIds of session `sid`'s rows that a purge made final (an import or a restore brought
/// them back).
pub(in crate::store) fn tombstoned_entries_in(conn: &Connection, sid: &str) -> HostResult<Vec<String>> {
    let mut st = conn.prepare_cached(
        "SELECT e.entry_id FROM session_entries e JOIN sync_tombstones t ON t.kind = 'entry' AND t.id = e.entry_id
         WHERE e.session_id = ?1",
    )?;
    let rows = st.query_map([sid], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every tombstone `(kind, id, stamp)` (a checkpoint).
pub(in crate::store) fn all_tombstones(conn: &Connection) -> HostResult<Vec<(Kind, String, Stamp)>> {
    let mut st = conn.prepare("SELECT kind, id, stamp FROM sync_tombstones ORDER BY kind, id")?;
    let rows = st.query_map([], |r| {
        let kind = if r.get::<_, String>(0)? == "session" { Kind::Session } else { Kind::Entry };
        Ok((kind, r.get(1)?, stamp_col(Some(r.get(2)?))?.expect("a stamp")))
    });
    let out: Vec<(Kind, String, Stamp)> =
        rows.map_err(damaged)?.collect::<Result<_, _>>().map_err(damaged)?;
    Ok(out)
}

/// A session locally evicted and purged (stays gone here, `sync_dropped`).
pub(in crate::store) fn dropped(conn: &Connection, sid: &str) -> HostResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sync_dropped WHERE session_id = ?1")?
        .query_row([sid], |_| Ok(()))
        .optional()?
        .is_some())
}

/// What a merge changed: the sessions to lay out again, the entries whose body changed, the
/// settings to write.
#[derive(Debug, Default, Clone)]
pub struct Touched {
    pub sessions: BTreeSet<String>,
    pub bodies: BTreeSet<String>,
    pub settings: BTreeSet<String>,
}

/// Merge registers into the state; `stamp` is the tombstones' (an operation's own, or a
/// checkpoint's per tombstone via `tomb_stamp`). Purges first: a purged id's registers go and are
/// never taken again, whatever order things arrive in.
pub(in crate::store) fn merge(
    conn: &Connection,
    regs: &Registers,
    tomb_stamp: &dyn Fn(Kind, &str) -> Stamp,
    touched: &mut Touched,
) -> HostResult<()> {
    for (kind, id) in &regs.purged {
        if tombstoned(conn, *kind, id)? {
            continue;
        }
        conn.prepare_cached("INSERT INTO sync_tombstones (kind, id, stamp) VALUES (?1, ?2, ?3)")?
            .execute(params![kind.as_str(), id, tomb_stamp(*kind, id).encode()])?;
        match kind {
            Kind::Session => {
                conn.prepare_cached("DELETE FROM sync_sessions WHERE session_id = ?1")?.execute([id])?;
                touched.sessions.insert(id.clone());
            }
            Kind::Entry => {
                if let Some(old) = entry(conn, id, false)? {
                    touched.sessions.extend(old.session().map(str::to_owned));
                }
                conn.prepare_cached("DELETE FROM sync_entries WHERE entry_id = ?1")?.execute([id])?;
            }
        }
        touched.sessions.extend(local_session_of(conn, *kind, id)?);
    }
    for s in &regs.sessions {
        if tombstoned(conn, Kind::Session, &s.id)? {
            continue;
        }
        let mut mine = session(conn, &s.id)?.unwrap_or_else(|| SessionRegs::empty(&s.id));
        if mine.merge(s) {
            put_session(conn, &mine)?;
            touched.sessions.insert(s.id.clone());
        }
    }
    for e in &regs.entries {
        if tombstoned(conn, Kind::Entry, &e.id)? {
            continue;
        }
        let mut mine = entry(conn, &e.id, true)?.unwrap_or_else(|| EntryRegs::empty(&e.id));
        let was = mine.session().map(str::to_owned);
        let ch = mine.merge(e);
        if ch.any() {
            put_entry(conn, &mine)?;
            touched.sessions.extend(was);
            touched.sessions.extend(mine.session().map(str::to_owned));
            touched.sessions.extend(local_session_of(conn, Kind::Entry, &e.id)?);
            if ch.body {
                touched.bodies.insert(e.id.clone());
            }
        }
    }
    for s in &regs.settings {
        let mut mine = setting(conn, &s.key)?.map(|r| r.value);
        if crate::domain::sync::regs::lww(&mut mine, &Some(s.value.clone())) {
            put_setting(conn, &SettingReg { key: s.key.clone(), value: mine.expect("merged") })?;
            touched.settings.insert(s.key.clone());
        }
    }
    Ok(())
}

/// The local session an id's rows are in (an entry's row, or the session itself).
fn local_session_of(conn: &Connection, kind: Kind, id: &str) -> HostResult<Option<String>> {
    Ok(match kind {
        Kind::Session => Some(id.to_owned()),
        Kind::Entry => conn
            .prepare_cached("SELECT session_id FROM session_entries WHERE entry_id = ?1")?
            .query_row([id], |r| r.get(0))
            .optional()?,
    })
}

/// The ranges of device `dev`'s numbers applied, from `table` (`sync_applied_ops` or
/// `sync_applied_segments`).
pub(in crate::store) fn ranges(conn: &Connection, table: Applied, dev: &str) -> HostResult<Ranges> {
    let mut st = conn.prepare_cached(&format!("SELECT lo, hi FROM {} WHERE device_id = ?1", table.name()))?;
    let rows =
        st.query_map([dev], |r| Ok((r.get::<_, i64>(0)?.max(0) as u64, r.get::<_, i64>(1)?.max(0) as u64)))?;
    Ok(Ranges::from_pairs(rows.collect::<Result<Vec<_>, _>>()?))
}

pub(in crate::store) fn put_ranges(
    conn: &Connection,
    table: Applied,
    dev: &str,
    r: &Ranges,
) -> HostResult<()> {
    conn.prepare_cached(&format!("DELETE FROM {} WHERE device_id = ?1", table.name()))?.execute([dev])?;
    let mut ins = conn
        .prepare_cached(&format!("INSERT INTO {} (device_id, lo, hi) VALUES (?1, ?2, ?3)", table.name()))?;
    for (lo, hi) in r.pairs() {
        ins.execute(params![dev, *lo as i64, *hi as i64])?;
    }
    Ok(())
}

/// The two tables of applied numbers.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Applied {
    Ops,
    Segments,
}

impl Applied {
    fn name(self) -> &'static str {
        match self {
            Applied::Ops => "sync_applied_ops",
            Applied::Segments => "sync_applied_segments",
        }
    }
}

/// Every device with applied numbers in `table`.
pub(in crate::store) fn applied_devices(conn: &Connection, table: Applied) -> HostResult<Vec<String>> {
    let mut st =
        conn.prepare(&format!("SELECT DISTINCT device_id FROM {} ORDER BY device_id", table.name()))?;
    let rows = st.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}
