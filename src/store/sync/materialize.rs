//! The replicated state laid out as local rows (docs/sync.md "From the state to the chat"), for the
//! sessions an apply touched — and, after a local write, for the sessions it recorded, which
//! then hold exactly what the state says. A session's rows are rewritten only where they differ:
//! rows move between places with their JSON, image references and attach metadata as they are
//! (as the store moves them itself), new entries are inserted with their references, changed
//! bodies rewritten; derived data (search index, entry counts, the drawer, image references)
//! follows. What stays local: a chat this device's cap evicted stays evicted here, and the live
//! window is this device's own (kept valid, moved to show what changed before it).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use super::local::{self, Row};
use super::state;
use crate::domain::entry::referenced_blobs;
use crate::domain::sync::regs::{Kind, SessionRegs};
use crate::domain::sync::tree::{self, Layout, Node};
use crate::domain::text::lower;
use crate::protocol::HostResult;
use crate::store::blobs::blob_exists;
use crate::store::entries::{count_path, insert_row, update_row};
use crate::store::rows::touched;
use crate::store::search;
use crate::store::tx::WriteTx;
use crate::store::window::{live_state, set_window, trim, unbind};

/// What laying out did.
pub(in crate::store) enum Laid {
    /// The sessions whose rows changed.
    Done(BTreeSet<String>),
    /// Pictures the entries need that are not stored yet (sha256): nothing was written.
    Missing(Vec<String>),
}

enum Plan {
    /// Not in the state yet, or dropped here: its rows stay as they are.
    Keep,
    /// Purged: its row goes.
    Gone,
    Lay {
        row: Box<Row>,
        layout: Layout,
    },
}

/// Where an entry goes: its session, its branch (`(fork key, version)`, `None`: the chosen
/// path) and its position there.
type Dest = (String, Option<(String, u32)>, usize);

/// `sessions`, and every session whose rows hold entries the state places in one of them or
/// that the state places entries of theirs in: a move touches both ends.
fn closure(w: &WriteTx, sessions: &BTreeSet<String>) -> HostResult<BTreeSet<String>> {
    let mut all = sessions.clone();
    let mut queue: Vec<String> = sessions.iter().cloned().collect();
    while let Some(s) = queue.pop() {
        let mut found: Vec<String> = Vec::new();
        for sql in [
            "SELECT DISTINCT e.session_id FROM session_entries l JOIN sync_entries e ON e.entry_id = l.entry_id
             WHERE l.session_id = ?1 AND e.session_id IS NOT NULL",
            "SELECT DISTINCT l.session_id FROM sync_entries e JOIN session_entries l ON l.entry_id = e.entry_id
             WHERE e.session_id = ?1",
        ] {
            let mut st = w.tx.prepare_cached(sql)?;
            found.extend(st.query_map([&s], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?);
        }
        for t in found {
            if all.insert(t.clone()) {
                queue.push(t);
            }
        }
    }
    Ok(all)
}

/// The row the state gives session `regs` (a ready one), keeping this device's eviction.
fn desired_row(regs: &SessionRegs, old: Option<&Row>) -> Row {
    let trash = match (regs.trash(), old) {
        (None, Some(o)) if o.evicted() => o.trash.clone(),
        (t, _) => t.cloned(),
    };
    Row {
        name: regs.name.as_ref().map(|r| r.v.clone()).expect("ready"),
        pinned: regs.pinned.as_ref().is_some_and(|r| r.v),
        created_at: regs.created_at.as_ref().map(|r| r.v).expect("ready"),
        trash,
        extra: regs.extra.as_ref().and_then(|r| r.v.clone()),
    }
}

fn plan(w: &WriteTx, sid: &str) -> HostResult<Plan> {
    if state::tombstoned(&w.tx, Kind::Session, sid)? {
        return Ok(Plan::Gone);
    }
    if state::dropped(&w.tx, sid)? {
        return Ok(Plan::Keep);
    }
    let Some(regs) = state::session(&w.tx, sid)?.filter(SessionRegs::ready) else {
        return Ok(Plan::Keep);
    };
    let nodes: Vec<Node> = state::entries_in(&w.tx, sid)?
        .into_iter()
        .filter(|e| e.ready())
        .map(|e| Node {
            parent: e.loc.as_ref().map(|l| l.v.parent.clone()).unwrap_or_default(),
            created: e.created.clone().expect("ready"),
            fork: e.fork.map(|f| f.v),
            id: e.id,
        })
        .collect();
    let layout = tree::materialize(&nodes, regs.root.as_ref().map(|r| &r.v));
    let old = local::row(&w.tx, sid)?;
    Ok(Plan::Lay { row: Box::new(desired_row(&regs, old.as_ref())), layout })
}

/// Where an entry's row is now: `(row id, session, branch, position)`.
type Placed = (i64, String, Option<i64>, i64);

fn placed(w: &WriteTx, eid: &str) -> HostResult<Option<Placed>> {
    Ok(w.tx
        .prepare_cached(
            "SELECT id, session_id, branch_id, position FROM session_entries WHERE entry_id = ?1",
        )?
        .query_row([eid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?)
}

/// Write session `sid`'s row as `row` says (inserted when it is missing).
fn write_row(w: &mut WriteTx, sid: &str, row: &Row, exists: bool) -> HostResult<()> {
    let (trashed_at, reason, origin) = match &row.trash {
        Some(t) => (Some(t.at), Some(t.reason.clone()), Some(t.origin.to_string())),
        None => (None, None, None),
    };
    let extra = row.extra.as_ref().map(Value::to_string);
    if exists {
        w.tx.execute(
            "UPDATE sessions SET name = ?2, name_lower = ?3, name_auto = ?4, pinned = ?5, created_at = ?6,
                 trashed_at = ?7, trash_reason = ?8, trash_origin = ?9, extra = ?10, updated_at = ?11
             WHERE id = ?1",
            params![
                sid,
                row.name.name,
                lower(&row.name.name),
                row.name.auto as i64,
                row.pinned as i64,
                row.created_at,
                trashed_at,
                reason,
                origin,
                extra,
                w.now
            ],
        )?;
    } else {
        let seq: i64 =
            w.tx.query_row("SELECT coalesce(max(insert_seq), 0) + 1 FROM sessions", [], |r| r.get(0))?;
        w.tx.execute(
            "INSERT INTO sessions (id, name, name_lower, created_at, pinned, insert_seq, entry_count, updated_at, extra,
                                   name_auto, trashed_at, trash_reason, trash_origin)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                sid,
                row.name.name,
                lower(&row.name.name),
                row.created_at,
                row.pinned as i64,
                seq,
                w.now,
                extra,
                row.name.auto as i64,
                trashed_at,
                reason,
                origin
            ],
        )?;
    }
    Ok(())
}

/// Lay the state out for `sessions` (and the sessions moves connect them to); `bodies`: entries
/// whose body changed in the state. `Missing` when a picture an entry needs is not stored yet:
/// then nothing was written and the caller rolls the transaction back.
pub(in crate::store) fn lay_out(
    w: &mut WriteTx,
    sessions: &BTreeSet<String>,
    bodies: &BTreeSet<String>,
) -> HostResult<Laid> {
    let all = closure(w, sessions)?;
    let mut plans: BTreeMap<String, Plan> = BTreeMap::new();
    for sid in &all {
        plans.insert(sid.clone(), plan(w, sid)?);
    }
    // where every laid-out entry goes
    let mut dest: HashMap<String, Dest> = HashMap::new();
    for (sid, p) in &plans {
        if let Plan::Lay { layout, .. } = p {
            for (i, id) in layout.path.iter().enumerate() {
                dest.insert(id.clone(), (sid.clone(), None, i));
            }
            for (k, run) in &layout.branches {
                for (i, id) in run.iter().enumerate() {
                    dest.insert(id.clone(), (sid.clone(), Some(k.clone()), i));
                }
            }
        }
    }
    // what must be written: rows that differ, entries new here, bodies that changed
    let mut changed: BTreeSet<String> = BTreeSet::new();
    let mut relaid: BTreeSet<String> = BTreeSet::new();
    let mut old_paths: HashMap<String, Vec<String>> = HashMap::new();
    let mut write_body: BTreeMap<String, Value> = BTreeMap::new();
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let mut have_blob: HashMap<String, bool> = HashMap::new();
    for (sid, p) in &plans {
        match p {
            Plan::Keep => {}
            Plan::Gone => {
                if local::row(&w.tx, sid)?.is_some() {
                    changed.insert(sid.clone());
                }
            }
            Plan::Lay { row, layout } => {
                let old_row = local::row(&w.tx, sid)?;
                let old = local::layout(&w.tx, sid)?;
                if old_row.as_ref() != Some(row) {
                    changed.insert(sid.clone());
                }
                if old != *layout {
                    changed.insert(sid.clone());
                    relaid.insert(sid.clone());
                }
                let had: std::collections::HashSet<&String> = old.ids().collect();
                for id in layout.ids() {
                    let here = if bodies.contains(id) {
                        local::entry_json(&w.tx, id)?
                    } else if had.contains(id) || local::has_entry(&w.tx, id)? {
                        continue;
                    } else {
                        None
                    };
                    let Some(body) = state::entry_body(&w.tx, id)? else { continue };
                    if here.as_ref() == Some(&body) {
                        continue;
                    }
                    for sha in referenced_blobs(&body) {
                        let ok = match have_blob.get(&sha) {
                            Some(ok) => *ok,
                            None => {
                                let ok = blob_exists(&w.tx, &sha)?;
                                have_blob.insert(sha.clone(), ok);
                                ok
                            }
                        };
                        if !ok {
                            missing.insert(sha);
                        }
                    }
                    changed.insert(sid.clone());
                    write_body.insert(id.clone(), body);
                }
                old_paths.insert(sid.clone(), old.path);
            }
        }
    }
    if !missing.is_empty() {
        return Ok(Laid::Missing(missing.into_iter().collect()));
    }
    if changed.is_empty() {
        return Ok(Laid::Done(changed));
    }
    let (bound, from) = live_state(&w.tx)?;
    let old_trashed: BTreeSet<String> = changed
        .iter()
        .filter(|s| local::row(&w.tx, s).ok().flatten().is_some_and(|r| r.trash.is_some()))
        .cloned()
        .collect();
    // 1. rows first (entries need their session), then every relaid session's branches go
    for sid in &changed {
        if let Some(Plan::Lay { row, .. }) = plans.get(sid) {
            let old = local::row(&w.tx, sid)?;
            if old.as_ref() != Some(row) {
                write_row(w, sid, row, old.is_some())?;
            }
        }
    }
    for sid in &relaid {
        w.tx.execute(
            "UPDATE session_entries SET branch_id = NULL WHERE session_id = ?1 AND branch_id IS NOT NULL",
            [sid],
        )?;
        w.tx.execute("DELETE FROM session_branches WHERE session_id = ?1", [sid])?;
        w.tx.execute("DELETE FROM session_forks WHERE session_id = ?1", [sid])?;
    }
    // 2. each relaid session's forks and branches, then every entry in its place
    let mut branch_ids: HashMap<(String, String, u32), i64> = HashMap::new();
    for sid in &relaid {
        let Some(Plan::Lay { layout, .. }) = plans.get(sid) else { continue };
        for (key, (chosen, versions)) in &layout.forks {
            w.tx.execute(
                "INSERT INTO session_forks (session_id, fork_entry_id, chosen, versions) VALUES (?1, ?2, ?3, ?4)",
                params![sid, key, chosen, versions],
            )?;
        }
        for (key, version) in layout.branches.keys() {
            w.tx.execute(
                "INSERT INTO session_branches (session_id, fork_entry_id, version, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![sid, key, version, w.now],
            )?;
            branch_ids.insert((sid.clone(), key.clone(), *version), w.tx.last_insert_rowid());
        }
    }
    for sid in &changed {
        let Some(Plan::Lay { layout, .. }) = plans.get(sid) else { continue };
        if !relaid.contains(sid) {
            // the same layout: only bodies change
            for id in layout.ids() {
                if let (Some(body), Some((row, ..))) = (write_body.get(id), placed(w, id)?) {
                    update_row(&w.tx, row, body)?;
                }
            }
            continue;
        }
        for id in layout.ids() {
            let (dsid, branch, pos) = dest.get(id).expect("laid out").clone();
            let bid = branch.map(|(k, v)| branch_ids[&(dsid.clone(), k, v)]);
            match placed(w, id)? {
                Some((row, s, b, p)) => {
                    if s != dsid || b != bid || p != pos as i64 {
                        w.tx.execute(
                            "UPDATE session_entries SET session_id = ?2, branch_id = ?3, position = ?4 WHERE id = ?1",
                            params![row, dsid, bid, pos as i64],
                        )?;
                    }
                    if let Some(body) = write_body.get(id) {
                        update_row(&w.tx, row, body)?;
                    }
                }
                None => {
                    let body = match write_body.get(id) {
                        Some(b) => b.clone(),
                        None => match state::entry_body(&w.tx, id)? {
                            Some(b) => b,
                            None => continue,
                        },
                    };
                    insert_row(&w.tx, &dsid, bid, pos, &body, w.now)?;
                }
            }
        }
    }
    // 3. rows the state places nowhere (purged, or in a purged chat) go; so do purged chats
    for sid in &relaid {
        let rows: Vec<(i64, Option<String>)> =
            w.tx.prepare_cached("SELECT id, entry_id FROM session_entries WHERE session_id = ?1")?
                .query_map([sid], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
        for (row, eid) in rows {
            if eid.is_some_and(|e| !dest.contains_key(&e)) {
                w.tx.execute("DELETE FROM session_entries WHERE id = ?1", [row])?;
            }
        }
    }
    for sid in &changed {
        match plans.get(sid) {
            Some(Plan::Gone) => {
                search::unindex_session(&w.tx, sid)?;
                w.tx.execute("DELETE FROM sessions WHERE id = ?1", [sid])?;
                w.reindex.remove(sid);
            }
            Some(Plan::Lay { .. }) => {
                w.tx.execute(
                    "UPDATE sessions SET entry_count = ?2, updated_at = ?3 WHERE id = ?1",
                    params![sid, count_path(&w.tx, sid)? as i64, w.now],
                )?;
                w.reindex.insert(sid.clone());
            }
            _ => {}
        }
        touched(w, sid);
        let trashed_now = local::row(&w.tx, sid)?.is_some_and(|r| r.trash.is_some());
        if old_trashed.contains(sid) || trashed_now || matches!(plans.get(sid), Some(Plan::Gone)) {
            w.changes.trash = true;
        }
    }
    // 4. the live window: this device's own; it follows its chat and shows what changed
    if changed.contains(&bound) {
        match local::row(&w.tx, &bound)? {
            Some(r) if r.trash.is_none() => {
                let new_path = local::layout(&w.tx, &bound)?.path;
                let old_path = old_paths.get(&bound).cloned().unwrap_or_default();
                let same = old_path.iter().zip(&new_path).take_while(|(a, b)| a == b).count();
                let start = if same < from { same } else { from.min(new_path.len()) };
                set_window(w, &bound, start)?;
                trim(w)?;
                let (_, now_from) = live_state(&w.tx)?;
                let shown_before = old_path.get(from..).unwrap_or(&[]);
                let shown_now = new_path.get(now_from..).unwrap_or(&[]);
                if shown_before != shown_now || shown_now.iter().any(|id| write_body.contains_key(id)) {
                    w.changes.history = true;
                }
            }
            _ => unbind(w)?,
        }
    }
    Ok(Laid::Done(changed))
}
