//! Recording local writes (docs/sync.md "What an operation is"): before a write commits, while
//! sync is set up, the sessions and settings it touched (`sync_dirty`, filled by triggers, so
//! every write path is covered) are compared with the replicated state, and the registers that
//! differ become operations in `sync_outbox` — in the same transaction, which also merges them
//! into the state. A session's tree is read off its rows (`domain::sync::tree::derive`); an entry
//! the state had there and no table has any more was purged (a tombstone); a session row gone
//! likewise. Not recorded: what an apply wrote (it is the state already), a move to the trash by
//! this device's `maxSessions` cap (eviction is local), and settings that do not sync.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::params;
use serde_json::Value;

use super::local::{self, Row};
use super::materialize::{lay_out, Laid};
use super::state::{self, Touched};
use crate::domain::entry::{referenced_blobs, ENTRY_ID};
use crate::domain::sync::op::{EntryOp, Op, Purged, SessionOp, SettingOp, OP_VERSION};
use crate::domain::sync::regs::{EntryRegs, Fork, Kind, Loc, SessionRegs, Trash};
use crate::domain::sync::settings::is_synced;
use crate::domain::sync::stamp::Stamp;
use crate::domain::sync::tree::{self, effective, same_fork, Node};
use crate::protocol::HostResult;
use crate::store::entries::update_row;
use crate::store::rows::touched;
use crate::store::search;
use crate::store::tx::{setting_value, WriteTx};
use crate::store::window::binding;

/// How many local writes left rows the state lays out otherwise (`meta`; `sync_status_counts`).
pub(in crate::store) const RELAID_META: &str = "sync_relaid";

/// What the write under way touched.
#[derive(Default)]
struct Dirty {
    sessions: BTreeSet<String>,
    entries: BTreeSet<String>,
    settings: BTreeSet<String>,
    evicted: BTreeSet<String>,
}

fn take_dirty(w: &WriteTx) -> HostResult<Dirty> {
    let mut d = Dirty::default();
    {
        let mut st = w.tx.prepare_cached("SELECT kind, id FROM sync_dirty")?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        for r in rows {
            let (kind, id) = r?;
            match kind.as_str() {
                "session" => d.sessions.insert(id),
                "entry" => d.entries.insert(id),
                "setting" => d.settings.insert(id),
                "evicted" => d.evicted.insert(id),
                _ => false,
            };
        }
    }
    w.tx.execute("DELETE FROM sync_dirty", [])?;
    Ok(d)
}

fn any_dirty(w: &WriteTx) -> HostResult<bool> {
    Ok(w.tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM sync_dirty)")?.query_row([], |r| r.get(0))?)
}

/// An entry whose id was purged came back in a row (an import, a restore): it is given a new id,
/// so what the person put back is kept — a purged id never comes back.
fn re_id_entry(w: &mut WriteTx, old: &str) -> HostResult<()> {
    let new = uuid::Uuid::new_v4().to_string();
    let Some(mut e) = local::entry_json(&w.tx, old)? else { return Ok(()) };
    let row: i64 =
        w.tx.query_row("SELECT id FROM session_entries WHERE entry_id = ?1", [old], |r| r.get(0))?;
    if let Some(o) = e.as_object_mut() {
        o.insert(ENTRY_ID.into(), Value::String(new.clone()));
    }
    let sid = update_row(&w.tx, row, &e)?;
    w.tx.execute("UPDATE session_forks SET fork_entry_id = ?2 WHERE fork_entry_id = ?1", params![old, new])?;
    w.tx.execute(
        "UPDATE session_branches SET fork_entry_id = ?2 WHERE fork_entry_id = ?1",
        params![old, new],
    )?;
    w.reindex.insert(sid.clone());
    touched(w, &sid);
    Ok(())
}

/// A session whose id was purged came back (an import, a restore): its row, entries, versions
/// and binding move to a new id.
fn re_id_session(w: &mut WriteTx, old: &str) -> HostResult<()> {
    let new = uuid::Uuid::new_v4().to_string();
    w.tx.execute(
        "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at, extra,
                               name_auto, trashed_at, trash_reason, trash_origin)
         SELECT ?2, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at, extra, name_auto,
                trashed_at, trash_reason, trash_origin FROM sessions WHERE id = ?1",
        params![old, new],
    )?;
    for table in ["session_entries", "session_branches", "session_forks"] {
        w.tx.execute(
            &format!("UPDATE {table} SET session_id = ?2 WHERE session_id = ?1"),
            params![old, new],
        )?;
    }
    if binding(&w.tx)? == old {
        w.tx.execute("UPDATE live_state SET active_session_id = ?1 WHERE id = 1", [&new])?;
        w.changes.binding = true;
    }
    search::unindex_session(&w.tx, old)?;
    w.tx.execute("DELETE FROM sessions WHERE id = ?1", [old])?;
    w.reindex.remove(old);
    w.reindex.insert(new.clone());
    touched(w, old);
    touched(w, &new);
    Ok(())
}

/// The trash register a session row holds.
fn trash_of(row: &Row) -> Option<Trash> {
    row.trash.clone()
}

/// A fork as the local rows hold it at `node`: its register when it has a fork row, else the
/// one way on (or none).
fn local_fork(tree: &tree::Tree, node: &str, kids: &[String]) -> (Vec<String>, Option<usize>) {
    match tree.forks.get(node) {
        Some(f) => (f.versions.clone(), Some(f.chosen)),
        None => (kids.to_vec(), kids.len().checked_sub(1)),
    }
}

/// One session's part of the write: its operation's registers (stamps filled in later).
struct SessionDiff {
    sid: String,
    session: Option<SessionOp>,
    session_created: bool,
    entries: Vec<EntryOp>,
    purged: Vec<Purged>,
    /// The state, once these registers are merged, lays the session out as its rows are.
    laid_as_rows: bool,
}

impl SessionDiff {
    fn is_empty(&self) -> bool {
        self.session.is_none() && self.entries.is_empty() && self.purged.is_empty()
    }
}

/// Compare session `sid`'s rows with the state (`None`: nothing to compare, its row and its
/// registers are both gone or kept). `fresh`: a new stamp for each entry made here.
fn diff_session(
    w: &WriteTx,
    sid: &str,
    dirty: &Dirty,
    fresh: &mut dyn FnMut() -> Stamp,
) -> HostResult<Option<SessionDiff>> {
    let regs = state::session(&w.tx, sid)?;
    let Some(row) = local::row(&w.tx, sid)? else {
        // the row is gone: purged here (or dropped after this device's cap evicted it); after a
        // restore, it is laid out again from the state instead
        let Some(regs) = regs.filter(SessionRegs::ready) else { return Ok(None) };
        if w.sync_union {
            return Ok(None);
        }
        if state::dropped(&w.tx, sid)? || state::tombstoned(&w.tx, Kind::Session, sid)? {
            return Ok(None);
        }
        if dirty.evicted.contains(sid) && regs.trash().is_none() {
            w.tx.execute("INSERT OR IGNORE INTO sync_dropped (session_id) VALUES (?1)", [sid])?;
            return Ok(None);
        }
        let mut purged = vec![Purged { kind: Kind::Session, id: sid.to_owned() }];
        for e in state::entries_in(&w.tx, sid)? {
            if e.ready() && !local::has_entry(&w.tx, &e.id)? {
                purged.push(Purged { kind: Kind::Entry, id: e.id });
            }
        }
        return Ok(Some(SessionDiff {
            sid: sid.to_owned(),
            session: None,
            session_created: false,
            entries: vec![],
            purged,
            laid_as_rows: true,
        }));
    };
    w.tx.execute("DELETE FROM sync_dropped WHERE session_id = ?1", [sid])?;
    let layout = local::layout(&w.tx, sid)?;
    let tree = tree::derive(&layout);
    // the state's registers of every entry here (wherever the state has them now)
    let mut known: BTreeMap<String, EntryRegs> =
        state::entries_in(&w.tx, sid)?.into_iter().map(|e| (e.id.clone(), e)).collect();
    for id in layout.ids() {
        if !known.contains_key(id) {
            if let Some(e) = state::entry(&w.tx, id, false)? {
                known.insert(id.clone(), e);
            }
        }
    }
    let mut created: BTreeMap<String, Stamp> = BTreeMap::new();
    let mut new_here: BTreeSet<String> = BTreeSet::new();
    for id in layout.ids() {
        let k = known.get(id);
        if !k.is_some_and(EntryRegs::ready) {
            new_here.insert(id.clone());
        }
        let c = k.and_then(|e| e.created.clone()).unwrap_or_else(&mut *fresh);
        created.insert(id.clone(), c);
    }
    let kids = tree.children(&|id: &str| created.get(id).cloned());
    let none: Vec<String> = Vec::new();
    let kids_of = |n: &str| kids.get(n).unwrap_or(&none);

    // the session's own registers
    let regs = regs.unwrap_or_else(|| SessionRegs::empty(sid));
    let mut s = SessionOp { id: sid.to_owned(), ..Default::default() };
    let mut any = false;
    if regs.name.as_ref().map(|r| &r.v) != Some(&row.name) {
        s.name = Some(row.name.clone());
        any = true;
    }
    if regs.pinned.as_ref().map(|r| r.v) != Some(row.pinned) {
        s.pinned = Some(row.pinned);
        any = true;
    }
    if regs.created_at.as_ref().map(|r| r.v) != Some(row.created_at) {
        s.created_at = Some(row.created_at);
        any = true;
    }
    if !row.evicted() && regs.trash() != trash_of(&row).as_ref() {
        s.trash = Some(trash_of(&row));
        any = true;
    }
    if regs.extra.as_ref().and_then(|r| r.v.as_ref()) != row.extra.as_ref() {
        s.extra = Some(row.extra.clone());
        any = true;
    }
    let root_local = local_fork(&tree, "", kids_of(""));
    let mut root_after = regs.root.as_ref().map(|r| r.v.clone());
    if !same_fork(&root_local, &effective(regs.root.as_ref().map(|r| &r.v), kids_of(""))) {
        let f = Fork { versions: root_local.0, chosen: root_local.1.unwrap_or(0) };
        root_after = Some(f.clone());
        s.root = Some(f);
        any = true;
    }
    let session_created = regs.created.is_none();

    // its entries' registers, and the tree the state will hold for them
    let mut entries = Vec::new();
    let mut nodes = Vec::new();
    for id in layout.ids() {
        let k = known.get(id);
        let is_new = new_here.contains(id);
        let loc = Loc { session: sid.to_owned(), parent: tree.parent.get(id).cloned().unwrap_or_default() };
        let mut op = EntryOp { id: id.clone(), created: created.get(id).cloned(), ..Default::default() };
        if is_new || k.and_then(|e| e.loc.as_ref()).map(|l| &l.v) != Some(&loc) {
            op.loc = Some(loc);
        }
        if is_new || dirty.entries.contains(id) {
            let mine = local::entry_json(&w.tx, id)?;
            let theirs = if is_new { None } else { state::entry_body(&w.tx, id)? };
            if mine.is_some() && mine != theirs {
                op.body = mine;
            }
        }
        let f = local_fork(&tree, id, kids_of(id));
        let mut fork_after = k.and_then(|e| e.fork.as_ref()).map(|r| r.v.clone());
        if !same_fork(&f, &effective(k.and_then(|e| e.fork.as_ref()).map(|r| &r.v), kids_of(id))) {
            let fork = Fork { versions: f.0, chosen: f.1.unwrap_or(0) };
            fork_after = Some(fork.clone());
            op.fork = Some(fork);
        }
        nodes.push(Node {
            id: id.clone(),
            parent: tree.parent.get(id).cloned().unwrap_or_default(),
            created: created.get(id).cloned().expect("given above"),
            fork: fork_after,
        });
        if is_new || op.loc.is_some() || op.body.is_some() || op.fork.is_some() {
            entries.push(op);
        }
    }
    // entries the state had here that no table holds any more: purged; one another session's
    // rows hold, or one kept (a restore, a session the state does not hold yet), stays in the
    // state's layout of this session until that is merged: laid out again below
    let mut purged = Vec::new();
    let mut laid_as_rows = true;
    let here: BTreeSet<&String> = layout.ids().collect();
    for e in known.values() {
        if e.session() != Some(sid) || !e.ready() || here.contains(&e.id) {
            continue;
        }
        if regs.ready() && !w.sync_union && !local::has_entry(&w.tx, &e.id)? {
            purged.push(Purged { kind: Kind::Entry, id: e.id.clone() });
        } else {
            laid_as_rows = false;
        }
    }
    // the state's layout once these registers are merged (as `materialize::plan` computes it)
    laid_as_rows = laid_as_rows && tree::materialize(&nodes, root_after.as_ref()) == layout;
    let diff = SessionDiff {
        sid: sid.to_owned(),
        session: (any || session_created).then_some(s),
        session_created,
        entries,
        purged,
        laid_as_rows,
    };
    Ok(Some(diff))
}

/// Record the write under way (see the module comment). Called by `Store::write` before the
/// change log and the commit.
pub(in crate::store) fn record(w: &mut WriteTx) -> HostResult<()> {
    if !any_dirty(w)? {
        return Ok(());
    }
    let first = take_dirty(w)?;
    if w.sync_applying {
        return Ok(());
    }
    let Some(mut dev) = state::device(&w.tx)? else { return Ok(()) };
    // purged ids that came back in rows get new ids first
    let mut reid = false;
    for sid in &first.sessions {
        if local::row(&w.tx, sid)?.is_some() && state::tombstoned(&w.tx, Kind::Session, sid)? {
            re_id_session(w, sid)?;
            reid = true;
        }
    }
    let mut dirty = first;
    if reid {
        let more = take_dirty(w)?;
        dirty.sessions.extend(more.sessions);
        dirty.entries.extend(more.entries);
    }
    let mut gone_ids = Vec::new();
    for sid in &dirty.sessions {
        gone_ids.extend(state::tombstoned_entries_in(&w.tx, sid)?);
    }
    if !gone_ids.is_empty() {
        for id in &gone_ids {
            re_id_entry(w, id)?;
        }
        let more = take_dirty(w)?;
        dirty.sessions.extend(more.sessions);
        dirty.entries.extend(more.entries);
    }

    let now = w.now;
    let mut hlc = dev.hlc;
    let dev_id = dev.id.clone();
    let mut fresh = || {
        let (t, c) = hlc.tick(now);
        Stamp::new(t, c, &dev_id)
    };
    // sessions whose rows the state, once merged, lays out otherwise (a shape it does not hold
    // as the rows have it): laid out again below, so every device shows the same
    let mut relay: BTreeSet<String> = BTreeSet::new();
    let mut diffs: Vec<SessionDiff> = Vec::new();
    for sid in &dirty.sessions {
        if let Some(d) = diff_session(w, sid, &dirty, &mut fresh)? {
            if !d.laid_as_rows {
                relay.insert(d.sid.clone());
            }
            if !d.is_empty() {
                diffs.push(d);
            }
        }
    }
    let mut settings = Vec::new();
    for key in dirty.settings.iter().filter(|k| is_synced(k)) {
        let mine = setting_value(&w.tx, key)?;
        let theirs = state::setting(&w.tx, key)?;
        let differs = match &theirs {
            None => mine.is_some(),
            Some(r) => r.value.v != mine,
        };
        if differs {
            settings.push(SettingOp { key: key.clone(), value: mine });
        }
    }
    if diffs.is_empty() && settings.is_empty() {
        // only stamps for entries that turned out to need none: nothing to keep
        return follow_state(w, &relay);
    }
    let stamp = fresh();
    let mut ops = Vec::new();
    for d in diffs {
        let mut session = d.session;
        if d.session_created {
            if let Some(s) = session.as_mut() {
                s.created = Some(stamp.clone());
            }
        }
        ops.push(Op {
            v: OP_VERSION,
            dev: dev.id.clone(),
            seq: 0,
            t: stamp.t,
            c: stamp.c,
            sessions: session.into_iter().collect(),
            entries: d.entries,
            purged: d.purged,
            settings: Vec::new(),
        });
    }
    if !settings.is_empty() {
        ops.push(Op {
            v: OP_VERSION,
            dev: dev.id.clone(),
            seq: 0,
            t: stamp.t,
            c: stamp.c,
            sessions: Vec::new(),
            entries: Vec::new(),
            purged: Vec::new(),
            settings,
        });
    }
    let mut touched_state = Touched::default();
    for op in &mut ops {
        op.seq = dev.next_seq;
        dev.next_seq += 1;
        let blobs: BTreeSet<String> =
            op.entries.iter().filter_map(|e| e.body.as_ref()).flat_map(referenced_blobs).collect();
        w.tx.prepare_cached(
            "INSERT INTO sync_outbox (seq, stamp, op, blobs, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            op.seq as i64,
            stamp.encode(),
            serde_json::to_string(&op).expect("an operation serializes"),
            serde_json::to_string(&blobs).expect("a list serializes"),
            now
        ])?;
        // kept until the operation is sealed, even if its entry goes meanwhile
        for sha in &blobs {
            w.tx.prepare_cached(
                "INSERT OR IGNORE INTO sync_blobs (sha256, why, put_at) VALUES (?1, 'out', ?2)",
            )?
            .execute(params![sha, now])?;
        }
        state::merge(&w.tx, &op.registers(), &|_, _| stamp.clone(), &mut touched_state)?;
    }
    state::save_clock(&w.tx, hlc, dev.next_seq)?;
    // the rows now say what the state says; where the state lays a session out otherwise (a
    // shape it does not hold), the rows follow it, so every device shows the same
    if w.sync_union {
        relay.extend(dirty.sessions.iter().cloned());
        relay.extend(touched_state.sessions);
        relay.extend(state::all_session_ids(&w.tx)?);
    }
    follow_state(w, &relay)
}

/// Lay sessions `relay` out again from the state (see `record`), then clear the dirty marks
/// that wrote.
fn follow_state(w: &mut WriteTx, relay: &BTreeSet<String>) -> HostResult<()> {
    if !relay.is_empty() {
        if let Laid::Done(changed) = lay_out(w, relay, &BTreeSet::new())? {
            if !changed.is_empty() && !w.sync_union {
                // a shape the state does not hold as the rows had it: counted (sync status), logged
                tracing::warn!(sessions = ?changed, "sync: rows laid out again after a local write");
                w.tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, '1')
                     ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
                    [RELAID_META],
                )?;
            }
        }
    }
    take_dirty(w)?;
    Ok(())
}
