//! The drawer (storage-model §5.3) held in memory between `sessions.list` calls: every saved
//! session's row in the drawer's order, with its lower-cased name and its search-index
//! document. One read of the `sessions` table serves every list and search until the database
//! changes, so a search joins its postings with rows in memory instead of looking each one up.
//!
//! The copy is tied to the database state it was read from: `PRAGMA data_version` (changes
//! when another connection commits) and this connection's `total_changes()` (changes when it
//! writes, commits or not). A read that finds either changed reads the table again.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use super::search::{int_col, text_col, utf8};
use crate::domain::listing::{cursor_after, SortKey};
use crate::domain::sessions::{DrawerRow, OriginDevice};
use crate::protocol::{HostError, HostResult};

/// The columns [`drawer_row`] reads, from the `sessions` table aliased `s`: the row's own, then
/// the device the chat began on when that is another one (the device of the stamp sync first
/// recorded it with, `sync_sessions.created`; its name from `sync_peers`).
pub(super) const ROW_COLS: &str = "s.id, s.name, s.created_at, s.pinned, s.entry_count,
    (SELECT substr(y.created, 28) FROM sync_sessions y WHERE y.session_id = s.id
        AND substr(y.created, 28) IS NOT (SELECT device_id FROM sync_device)),
    (SELECT p.name FROM sync_sessions y JOIN sync_peers p ON p.device_id = substr(y.created, 28)
        WHERE y.session_id = s.id)";

/// How many columns [`ROW_COLS`] has.
const ROW_COL_COUNT: usize = 7;

/// A drawer row from [`ROW_COLS`] at the start of `r`.
pub(super) fn drawer_row(r: &rusqlite::Row) -> rusqlite::Result<DrawerRow> {
    let device: Option<String> = r.get(5)?;
    Ok(DrawerRow {
        id: r.get(0)?,
        name: r.get(1)?,
        created_at: r.get(2)?,
        pinned: r.get::<_, i64>(3)? != 0,
        entry_count: r.get(4)?,
        content_match: None,
        snippet: None,
        device: device.map(|id| OriginDevice { id, name: r.get(6).ok().flatten() }),
    })
}

/// The drawer's order: pinned first, then newest first (`insert_seq`, then the id, break ties):
/// descending [`SortKey`]s.
const ORDER: &str = "ORDER BY s.pinned DESC, s.created_at DESC, s.insert_seq DESC, s.id DESC";

/// Every saved session in the drawer's order, as of one database state.
pub(super) struct Drawer {
    stamp: Stamp,
    rows: Vec<DrawerRow>,
    /// Each row's `insert_seq` (the rest of its sort key is in the row).
    seq: Vec<i64>,
    /// The lower-cased names (`sessions.name_lower`) in the rows' order, each followed by a
    /// 0xFF byte (never part of UTF-8, so no match of a query crosses it), for name hits.
    names: Vec<u8>,
    /// Where each row's name starts in `names`.
    name_at: Vec<usize>,
    /// Search-index document → (index in `rows`, byte length of its lower-cased text).
    docs: HashMap<i64, (usize, usize)>,
    /// Every saved session (kept between calls), or only one page of the list ([`Drawer::page`]).
    pub(super) whole: bool,
}

/// What identifies a database state to this connection.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    data_version: i64,
    total_changes: u64,
}

/// A page of a plain list within a [`Drawer`] copy: its rows' indexes, the list's total and
/// whether rows follow.
pub(super) struct Page {
    pub(super) rows: std::ops::Range<usize>,
    pub(super) total: usize,
    pub(super) more: bool,
}

/// The state `conn`'s read transaction sees. Must be the transaction's first statement: the
/// pragma starts the read, so the version is the snapshot's.
pub(super) fn stamp(conn: &Connection) -> HostResult<Stamp> {
    let data_version = conn.query_row("PRAGMA data_version", [], |r| r.get(0))?;
    Ok(Stamp { data_version, total_changes: conn.total_changes() })
}

/// One row as a drawer query reads it.
struct Read {
    row: DrawerRow,
    name_lower: String,
    /// The session's search-index document and the byte length of its lower-cased text.
    doc: Option<(i64, usize)>,
    seq: i64,
}

impl Read {
    fn of(r: &rusqlite::Row) -> HostResult<Read> {
        let row = drawer_row(r)?;
        let n = ROW_COL_COUNT;
        let name_lower = utf8(text_col(r, n)?)?.to_owned();
        // a session the index lacks has no document (the LEFT JOIN's NULL): name hits only
        let doc = match r.get_ref(n + 1)? {
            ValueRef::Null => None,
            _ => Some((int_col(r, n + 1)?, usize::try_from(int_col(r, n + 2)?).unwrap_or(usize::MAX))),
        };
        Ok(Read { row, name_lower, doc, seq: int_col(r, n + 3)? })
    }
}

impl Drawer {
    /// `held` if the database has not changed since it was read, else a fresh read. Call first
    /// in a read transaction (see [`stamp`]).
    pub(super) fn current(conn: &Connection, held: Option<Arc<Drawer>>) -> HostResult<Arc<Drawer>> {
        let now = stamp(conn)?;
        match held {
            Some(d) if d.stamp == now => Ok(d),
            _ => Ok(Arc::new(Drawer::read(conn, now)?)),
        }
    }

    fn read(conn: &Connection, stamp: Stamp) -> HostResult<Drawer> {
        // read in the table's own order and sorted here: walking the `sessions_order` index
        // looks every row up by its rowid, twice as slow at 10,000 sessions
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {ROW_COLS}, s.name_lower, d.doc, d.lower_bytes, s.insert_seq FROM sessions s
             LEFT JOIN search_docs d ON d.session_id = s.id WHERE s.trashed_at IS NULL"
        ))?;
        let mut q = stmt.query([])?;
        let mut all = Vec::new();
        while let Some(r) = q.next()? {
            all.push(Read::of(r)?);
        }
        // the drawer's order: descending keys
        all.sort_unstable_by(|a, b| {
            (b.row.pinned, b.row.created_at, b.seq, b.row.id.as_str()).cmp(&(
                a.row.pinned,
                a.row.created_at,
                a.seq,
                a.row.id.as_str(),
            ))
        });
        Ok(Drawer::of(all, stamp, true))
    }

    /// `held` when it is current (see [`Drawer::current`]), else only the page of the list that
    /// starts after `after` (`limit` rows, one more read to know whether rows follow), read in the
    /// drawer's order along the `sessions_order` index: after a write, a page of the list costs
    /// the page, not a read of every saved session (the next search reads them all again).
    /// Returns the copy, the list's total and whether rows follow the page.
    pub(super) fn page(
        conn: &Connection,
        held: Option<Arc<Drawer>>,
        after: Option<&SortKey>,
        limit: usize,
    ) -> HostResult<(Arc<Drawer>, Page)> {
        let now = stamp(conn)?;
        if let Some(d) = held.filter(|d| d.stamp == now) {
            let start = after.map_or(0, |k| d.after(k));
            let end = start.saturating_add(limit).min(d.len());
            let page = Page { rows: start..end, total: d.len(), more: end < d.len() };
            return Ok((d, page));
        }
        let total: i64 =
            conn.query_row("SELECT count(*) FROM sessions WHERE trashed_at IS NULL", [], |r| r.get(0))?;
        let total = usize::try_from(total).unwrap_or(0);
        let take = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let cols = format!(
            "SELECT {ROW_COLS}, s.name_lower, d.doc, d.lower_bytes, s.insert_seq FROM sessions s
             LEFT JOIN search_docs d ON d.session_id = s.id WHERE s.trashed_at IS NULL"
        );
        let mut d = match after {
            None => {
                let mut stmt = conn.prepare_cached(&format!("{cols} {ORDER} LIMIT ?1"))?;
                let q = stmt.query([take])?;
                Drawer::collect(q, now, false)?
            }
            Some(k) => {
                // rows run from the greatest key down: the page is the keys below the cursor's
                let mut stmt = conn.prepare_cached(&format!(
                    "{cols} AND (s.pinned, s.created_at, s.insert_seq, s.id) < (?1, ?2, ?3, ?4) {ORDER} LIMIT ?5"
                ))?;
                let q = stmt.query(rusqlite::params![
                    i64::from(k.pinned),
                    k.created_at,
                    k.insert_seq,
                    k.id,
                    take
                ])?;
                Drawer::collect(q, now, false)?
            }
        };
        let more = d.rows.len() > limit;
        if more {
            d.truncate(limit);
        }
        let n = d.len();
        Ok((Arc::new(d), Page { rows: 0..n, total, more }))
    }

    /// The drawer's rows from a query of `{ROW_COLS}, name_lower, doc, lower_bytes, insert_seq`.
    fn collect(mut q: rusqlite::Rows<'_>, stamp: Stamp, whole: bool) -> HostResult<Drawer> {
        let mut all = Vec::new();
        while let Some(r) = q.next()? {
            all.push(Read::of(r)?);
        }
        Ok(Drawer::of(all, stamp, whole))
    }

    /// A copy of `all`, in their order.
    fn of(all: Vec<Read>, stamp: Stamp, whole: bool) -> Drawer {
        let n = all.len();
        let (mut rows, mut seq, mut names, mut name_at, mut docs) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::new(), Vec::with_capacity(n), HashMap::new());
        for r in all {
            name_at.push(names.len());
            names.extend_from_slice(r.name_lower.as_bytes());
            names.push(0xff);
            if let Some((doc, lower_bytes)) = r.doc {
                docs.insert(doc, (rows.len(), lower_bytes));
            }
            seq.push(r.seq);
            rows.push(r.row);
        }
        Drawer { stamp, rows, seq, names, name_at, docs, whole }
    }

    /// Keep the first `n` rows (a page read one row long).
    fn truncate(&mut self, n: usize) {
        if n >= self.rows.len() {
            return;
        }
        self.rows.truncate(n);
        self.seq.truncate(n);
        let cut = self.name_at[n];
        self.names.truncate(cut);
        self.name_at.truncate(n);
        self.docs.retain(|_, (i, _)| *i < n);
    }

    /// How many rows the drawer holds.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Row `i`'s sort key.
    pub(super) fn key(&self, i: usize) -> SortKey {
        let r = &self.rows[i];
        SortKey { pinned: r.pinned, created_at: r.created_at, insert_seq: self.seq[i], id: r.id.clone() }
    }

    /// The index of the first row after the key `k` in the drawer's order (a row with that very
    /// key, if any is still there, is before it): one binary search.
    pub(super) fn after(&self, k: &SortKey) -> usize {
        let at = |i: usize| {
            let r = &self.rows[i];
            (r.pinned, r.created_at, self.seq[i], r.id.as_str())
        };
        let k = (k.pinned, k.created_at, k.insert_seq, k.id.as_str());
        // rows run from the greatest key down: those at or above `k` come first
        let (mut lo, mut hi) = (0, self.rows.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if at(mid) >= k {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Which rows' lower-cased names contain `q` (lower-cased, not empty): one scan of all the
    /// names.
    pub(super) fn name_hits(&self, q: &str) -> Vec<bool> {
        let mut hit = vec![false; self.rows.len()];
        let mut row = 0;
        for at in memchr::memmem::find_iter(&self.names, q.as_bytes()) {
            // the row whose name holds byte `at` (matches come in order)
            while row + 1 < self.name_at.len() && self.name_at[row + 1] <= at {
                row += 1;
            }
            hit[row] = true;
        }
        hit
    }

    /// The row index and lower-cased text length of a search-index document's session; `None`
    /// for a document no session has (postings a deleted session left behind).
    pub(super) fn doc(&self, doc: i64) -> Option<(usize, usize)> {
        self.docs.get(&doc).copied()
    }
}

/// `s` as a JSON string. Snippets seldom hold a byte JSON escapes (their whitespace is
/// collapsed to spaces): those are copied as they are, after a test of 16 bytes at a time
/// without branches (vectorised); the others are written by `serde_json`.
fn push_json_str(out: &mut String, s: &str) {
    let plain = |b: u8| (b >= 0x20) & (b != b'"') & (b != b'\\');
    if s.as_bytes().chunks(16).all(|c| c.iter().fold(true, |ok, &b| ok & plain(b))) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        // a string always serialises
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
}

/// A row as JSON text without its closing brace.
fn open_json(row: &DrawerRow) -> HostResult<String> {
    let mut text = serde_json::to_string(row)
        .map_err(|e| HostError::internal(format!("drawer row not serialisable: {e}")))?;
    text.pop();
    Ok(text)
}

/// A `sessions.list` answer: drawer rows in the drawer's order, each with what the search found
/// in it. Written as JSON text directly (each row's text made when the row is sent).
pub struct Listing {
    pub(super) drawer: Arc<Drawer>,
    found: Vec<(usize, Found)>,
    /// Rows the whole list or search has.
    total: usize,
    /// The next page's cursor; `None` on the last page.
    cursor: Option<String>,
}

/// What a search found in a row.
pub(super) enum Found {
    /// No query: the row as it is.
    Listed,
    /// The name holds the query (`contentMatch: false`).
    Name,
    /// The text holds it (`contentMatch: true`, the snippet).
    Content(String),
}

impl Listing {
    /// A page of `drawer`: the rows `found` says a list or search (query `q`) found, by index in
    /// `drawer`, in the drawer's order; `total` rows in all; `more` when rows follow the last.
    pub(super) fn page(
        drawer: Arc<Drawer>,
        q: &str,
        found: Vec<(usize, Found)>,
        total: usize,
        more: bool,
    ) -> Listing {
        let cursor = match found.last() {
            Some((last, _)) if more => Some(cursor_after(&drawer.key(*last), q)),
            _ => None,
        };
        Listing { drawer, found, total, cursor }
    }

    /// Rows the whole list or search has.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The next page's cursor (`None` on the last page).
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The rows as values.
    pub fn rows(&self) -> Vec<DrawerRow> {
        self.found
            .iter()
            .map(|(i, found)| {
                let row = self.drawer.rows[*i].clone();
                match found {
                    Found::Listed => row,
                    Found::Name => DrawerRow { content_match: Some(false), ..row },
                    Found::Content(s) => {
                        DrawerRow { content_match: Some(true), snippet: Some(s.clone()), ..row }
                    }
                }
            })
            .collect()
    }

    /// The page as JSON, `{rows, total, cursor}`: `rows` is the same text `serde_json` writes for
    /// [`Listing::rows`].
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.found.len() * 320 + 64);
        out.push_str(r#"{"rows":["#);
        for (n, (i, found)) in self.found.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            // the row's JSON without its closing brace (a row of strings, numbers and booleans
            // always serialises)
            out.push_str(&open_json(&self.drawer.rows[*i]).unwrap_or_else(|_| String::from("{")));
            match found {
                Found::Listed => {}
                Found::Name => out.push_str(r#","contentMatch":false"#),
                Found::Content(s) => {
                    out.push_str(r#","contentMatch":true,"snippet":"#);
                    push_json_str(&mut out, s);
                }
            }
            out.push('}');
        }
        out.push_str(r#"],"total":"#);
        out.push_str(&self.total.to_string());
        out.push_str(r#","cursor":"#);
        match &self.cursor {
            Some(c) => push_json_str(&mut out, c),
            None => out.push_str("null"),
        }
        out.push('}');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, name: &str, pinned: bool) -> DrawerRow {
        DrawerRow {
            id: id.into(),
            name: name.into(),
            created_at: 1_764_759_940_000,
            pinned,
            entry_count: 3,
            content_match: None,
            snippet: None,
            device: None,
        }
    }

    fn drawer(rows: Vec<DrawerRow>) -> Arc<Drawer> {
        let mut names = Vec::new();
        let mut name_at = Vec::new();
        for r in &rows {
            name_at.push(names.len());
            names.extend_from_slice(crate::domain::text::lower(&r.name).as_bytes());
            names.push(0xff);
        }
        let stamp = Stamp { data_version: 0, total_changes: 0 };
        let seq = (0..rows.len() as i64).rev().collect();
        Arc::new(Drawer { stamp, rows, seq, names, name_at, docs: HashMap::new(), whole: true })
    }

    #[test]
    fn listing_json_is_what_serde_writes_for_its_rows() {
        let d = drawer(vec![
            row("a", "say \"hi\" \\ 鲸", true),
            row("b", "tab\there\u{1}", false),
            row("c", "plain", false),
        ]);
        let rows_of = |l: &Listing| {
            let v: serde_json::Value = serde_json::from_str(&l.to_json()).unwrap();
            serde_json::to_string(&v["rows"]).unwrap()
        };
        let listed = (0..3).map(|i| (i, Found::Listed)).collect();
        let all = Listing::page(Arc::clone(&d), "", listed, 3, false);
        assert_eq!(rows_of(&all), serde_json::to_string(&all.rows()).unwrap());
        assert_eq!(all.rows().len(), 3);
        let v: serde_json::Value = serde_json::from_str(&all.to_json()).unwrap();
        assert_eq!((v["total"].as_u64(), v["cursor"].is_null()), (Some(3), true));
        let found = Listing::page(
            d,
            "鲸",
            vec![
                (0, Found::Name),
                (1, Found::Content("…a plain 鲸 hit, twenty or more bytes long…".into())),
                (2, Found::Content("…a \"quoted\" 鲸\u{7f} hit…".into())),
            ],
            7,
            true,
        );
        let rows = found.rows();
        assert_eq!(rows_of(&found), serde_json::to_string(&rows).unwrap());
        let v: serde_json::Value = serde_json::from_str(&found.to_json()).unwrap();
        assert_eq!(v["total"].as_u64(), Some(7));
        let k = crate::domain::listing::parse_cursor(v["cursor"].as_str().unwrap(), "鲸").unwrap();
        assert_eq!(found.drawer.after(&k), 3);
        assert_eq!(rows[0].content_match, Some(false));
        assert_eq!(rows[2].snippet.as_deref(), Some("…a \"quoted\" 鲸\u{7f} hit…"));
        for bad in ["\\", "\u{0}", "\u{1f}", "x\"", "0123456789abcdef0123456789\\"] {
            let mut out = String::new();
            push_json_str(&mut out, bad);
            assert_eq!(out, serde_json::to_string(bad).unwrap());
        }
        let none = Listing::page(all.drawer, "x", Vec::new(), 0, true);
        assert_eq!(none.to_json(), r#"{"rows":[],"total":0,"cursor":null}"#);
    }

    #[test]
    fn name_hits_never_cross_from_one_name_into_the_next() {
        let d = drawer(vec![row("a", "ab", false), row("b", "cd", false), row("c", "xcdx", false)]);
        assert_eq!(d.name_hits("bc"), vec![false, false, false]);
        assert_eq!(d.name_hits("cd"), vec![false, true, true]);
        assert_eq!(d.name_hits("a"), vec![true, false, false]);
        assert_eq!(d.name_hits("x"), vec![false, false, true]);
    }
}
