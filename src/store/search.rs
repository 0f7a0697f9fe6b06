//! The content-search index's SQL (storage-model §5.3): tables `search_docs`, `search_pieces`
//! and `search_grams` (migrations 0003, 0004). What is indexed and how a query is answered is pure
//! logic in `domain::search`; this module only reads and writes the rows.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row, Statement};

use super::salvage::marker::content_damage;
use crate::domain::search::{
    exact_by_index, grams_of, index_text, query_grams, snippet_around, snippet_in_piece, Finder, Indexed,
    Span, Tail,
};
use crate::protocol::{HostError, HostResult};

/// Index a session's whole searchable text, replacing what the index held for it.
pub(super) fn index_session(conn: &Connection, sid: &str, text: &str) -> rusqlite::Result<()> {
    let mut postings = Postings::default();
    index_session_into(conn, sid, text, &mut postings)?;
    postings.flush(conn)
}

/// [`index_session`] with the session's postings added to `postings` instead of written at
/// once: a write that indexes many sessions (an import, a rebuild) writes them together, in key
/// order. The caller [`Postings::flush`]es before anything reads the index.
pub(super) fn index_session_into(
    conn: &Connection,
    sid: &str,
    text: &str,
    postings: &mut Postings,
) -> rusqlite::Result<()> {
    unindex_session(conn, sid)?;
    conn.prepare_cached("INSERT INTO search_docs (session_id, lower_bytes, last_char) VALUES (?1, 0, '')")?
        .execute([sid])?;
    let doc = conn.last_insert_rowid();
    let ix = index_text(text, Tail::default());
    write_pieces(conn, doc, &ix)?;
    postings.add(conn, doc, ix.grams)
}

/// Postings (`search_grams` rows) waiting to be written. Every indexed session has postings all
/// over the gram key space; written one session after another, each insert descends to another
/// leaf. Sorted by key across many sessions, consecutive inserts land on the same leaf (and a
/// new session's postings of a gram follow the older sessions', its doc being the newest), and
/// they go in [`ROWS_PER_INSERT`] rows to a statement.
#[derive(Default)]
pub(super) struct Postings {
    /// (packed gram, doc, position)
    rows: Vec<(PackedGram, i64, usize)>,
}

/// Rows one `INSERT` of postings writes (3 parameters each).
const ROWS_PER_INSERT: usize = 64;

impl Postings {
    /// Rows held before they are written (32 MiB of RAM at most).
    const FLUSH_AT: usize = 1 << 20;

    fn add(&mut self, conn: &Connection, doc: i64, grams: Vec<(String, usize)>) -> rusqlite::Result<()> {
        let mut one = conn.prepare_cached(INSERT_POSTING)?;
        for (g, pos) in grams {
            match PackedGram::new(&g) {
                Some(k) => self.rows.push((k, doc, pos)),
                // cannot happen (a gram is one or two characters): written at once
                None => _ = one.execute(params![g, doc, pos as i64])?,
            }
        }
        if self.rows.len() >= Self::FLUSH_AT {
            self.flush(conn)?;
        }
        Ok(())
    }

    /// Write every held posting, in key order (`(gram, doc)`, the table's primary key).
    pub(super) fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.rows.sort_unstable_by_key(|&(k, doc, _)| (k, doc));
        let many_sql = format!(
            "INSERT OR IGNORE INTO search_grams (gram, doc, pos) VALUES {}",
            vec!["(?, ?, ?)"; ROWS_PER_INSERT].join(", ")
        );
        let mut many = conn.prepare_cached(&many_sql)?;
        let mut one = conn.prepare_cached(INSERT_POSTING)?;
        let mut chunks = self.rows.chunks_exact(ROWS_PER_INSERT);
        for chunk in &mut chunks {
            for (i, (k, doc, pos)) in chunk.iter().enumerate() {
                many.raw_bind_parameter(3 * i + 1, k.as_str())?;
                many.raw_bind_parameter(3 * i + 2, doc)?;
                many.raw_bind_parameter(3 * i + 3, *pos as i64)?;
            }
            many.raw_execute()?;
        }
        for (k, doc, pos) in chunks.remainder() {
            one.execute(params![k.as_str(), doc, *pos as i64])?;
        }
        self.rows.clear();
        Ok(())
    }
}

const INSERT_POSTING: &str = "INSERT OR IGNORE INTO search_grams (gram, doc, pos) VALUES (?1, ?2, ?3)";

/// A gram (up to 8 bytes of UTF-8) held without an allocation, ordered as SQLite orders the
/// text (bytes compared, then the shorter first).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PackedGram {
    bytes: [u8; 8],
    len: u8,
}

impl PackedGram {
    fn new(g: &str) -> Option<PackedGram> {
        let mut bytes = [0u8; 8];
        bytes.get_mut(..g.len())?.copy_from_slice(g.as_bytes());
        Some(PackedGram { bytes, len: g.len() as u8 })
    }

    fn as_str(&self) -> &str {
        // made from a &str in `new`
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or_default()
    }
}

/// Index text appended to a session's searchable text (`sessions.appendTo`). `false`: the session
/// has no index document to add to (cannot happen through the host's own writes), nothing done.
pub(super) fn append_to_index(conn: &Connection, sid: &str, add: &str) -> HostResult<bool> {
    let found: Option<(i64, i64, String)> = conn
        .query_row("SELECT doc, lower_bytes, last_char FROM search_docs WHERE session_id = ?1", [sid], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some((doc, lower_bytes, last)) = found else { return Ok(false) };
    let tail =
        Tail { lower_bytes: usize::try_from(lower_bytes).unwrap_or(0), last_char: last.chars().next() };
    write_indexed(conn, doc, &index_text(add, tail))?;
    Ok(true)
}

/// A piece's key: `doc * 2^32 + start` (the table's CHECK refuses a start past 32 bits).
fn piece_key(doc: i64, start: usize) -> i64 {
    doc.saturating_mul(1 << 32).saturating_add(i64::try_from(start).unwrap_or(i64::MAX))
}

/// The keys of one document's pieces: `lo ..= lo + (2^32 - 1)`.
fn doc_keys(doc: i64) -> (i64, i64) {
    (piece_key(doc, 0), piece_key(doc, u32::MAX as usize))
}

fn write_indexed(conn: &Connection, doc: i64, ix: &Indexed) -> rusqlite::Result<()> {
    write_pieces(conn, doc, ix)?;
    let mut gram =
        conn.prepare_cached("INSERT OR IGNORE INTO search_grams (gram, doc, pos) VALUES (?1, ?2, ?3)")?;
    for (g, pos) in &ix.grams {
        gram.execute(params![g, doc, *pos as i64])?;
    }
    Ok(())
}

/// An indexed text's pieces and its document's tail (everything but the postings).
fn write_pieces(conn: &Connection, doc: i64, ix: &Indexed) -> rusqlite::Result<()> {
    let mut piece = conn.prepare_cached(
        "INSERT INTO search_pieces (key, doc, start, text, text_lower) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for p in &ix.pieces {
        piece.execute(params![piece_key(doc, p.start), doc, p.start as i64, p.text, p.lower])?;
    }
    conn.prepare_cached("UPDATE search_docs SET lower_bytes = ?2, last_char = ?3 WHERE doc = ?1")?
        .execute(params![doc, ix.lower_bytes as i64, ix.last_char.map(String::from).unwrap_or_default()])?;
    Ok(())
}

/// Remove a session from the index: its postings (found from its own text, since postings
/// are keyed by gram), then its row (a trigger removes its pieces).
pub(super) fn unindex_session(conn: &Connection, sid: &str) -> rusqlite::Result<()> {
    let Some(doc) = conn
        .query_row("SELECT doc FROM search_docs WHERE session_id = ?1", [sid], |r| r.get::<_, i64>(0))
        .optional()?
    else {
        return Ok(());
    };
    let lowers: Vec<String> = conn
        .prepare_cached("SELECT text_lower FROM search_pieces WHERE key BETWEEN ?1 AND ?2 ORDER BY key")?
        .query_map(doc_keys(doc), |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut del = conn.prepare_cached("DELETE FROM search_grams WHERE gram = ?1 AND doc = ?2")?;
    for g in grams_of(lowers.iter().map(String::as_str)) {
        del.execute(params![g, doc])?;
    }
    conn.execute("DELETE FROM search_docs WHERE doc = ?1", [doc])?;
    Ok(())
}

/// Empty the index (every session deleted).
pub(super) fn clear(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("DELETE FROM search_grams; DELETE FROM search_pieces; DELETE FROM search_docs;")?;
    Ok(())
}

/// The sessions holding a trimmed, lower-cased, non-empty query, for the drawer rows `wanted`
/// accepts (the others, name hits, need no content check), without their snippets
/// ([`snippet_of`] cuts one for a row that is sent). `doc_row` gives a search-index document's
/// drawer row and the byte length of its lower-cased text (`Drawer::doc`), `None` for a document
/// no session has.
///
/// A query of one or two characters is answered by its postings alone (the count is an index
/// count); a longer one is verified in each candidate's text, from where its grams allow a hit.
pub(super) fn content_candidates(
    conn: &Connection,
    q: &str,
    doc_row: impl Fn(i64) -> Option<(usize, usize)>,
    wanted: impl Fn(usize) -> bool,
) -> HostResult<Vec<Candidate>> {
    // candidates: sessions holding every gram; a hit cannot start before `from`. The rarest
    // gram's postings are read whole; each candidate is then looked up in the others'.
    let mut grams = Vec::new();
    let mut count = conn.prepare_cached("SELECT count(*) FROM search_grams WHERE gram = ?1")?;
    for (g, off) in query_grams(q) {
        let n: i64 = count.query_row([&g], |r| r.get(0))?;
        if n == 0 {
            return Ok(Vec::new());
        }
        grams.push((n, g, off));
    }
    grams.sort();
    let Some(((_, rarest, off), rest)) = grams.split_first() else { return Ok(Vec::new()) };
    // every session holding the rarest gram; postings of a document no session has (left by a
    // deleted session) drop out
    let mut from: Vec<Candidate> = Vec::new();
    let mut stmt = conn.prepare_cached("SELECT doc, pos FROM search_grams WHERE gram = ?1")?;
    let mut rows = stmt.query([rarest])?;
    while let Some(r) = rows.next()? {
        let doc = int_col(r, 0)?;
        let pos = usize::try_from(int_col(r, 1)?).unwrap_or(0);
        if let Some((row, lower_bytes)) = doc_row(doc).filter(|(row, _)| wanted(*row)) {
            from.push(Candidate { doc, from: pos.saturating_sub(*off), row, lower_bytes });
        }
    }
    let mut seek = conn.prepare_cached("SELECT pos FROM search_grams WHERE gram = ?1 AND doc = ?2")?;
    for (_, g, off) in rest {
        let mut keep = Vec::with_capacity(from.len());
        for mut c in from {
            let mut found = seek.query(params![g, c.doc])?;
            if let Some(r) = found.next()? {
                c.from = c.from.max(usize::try_from(int_col(r, 0)?).unwrap_or(0).saturating_sub(*off));
                keep.push(c);
            }
        }
        from = keep;
    }
    if exact_by_index(q) {
        return Ok(from);
    }
    // a longer query: its grams may all be there without it; find the hit itself
    let mut out = Vec::with_capacity(from.len());
    for mut c in from {
        if let Some(at) = find(conn, c.doc, q, c.from)? {
            c.from = at;
            out.push(c);
        }
    }
    Ok(out)
}

/// The snippet of a content hit found by [`content_candidates`]; `None` when the session does not
/// hold the query after all (a posting that does not match its text, which the host's own
/// writes never leave: then the text is trusted).
pub(super) fn snippet_of(conn: &Connection, q: &str, c: &Candidate) -> HostResult<Option<String>> {
    let Candidate { doc, from, lower_bytes, .. } = *c;
    let mut at_stmt = conn.prepare_cached(
        "SELECT key, text, text_lower FROM search_pieces WHERE key BETWEEN ?1 AND ?2
         ORDER BY key DESC LIMIT 1",
    )?;
    let mut found = piece_at(&mut at_stmt, doc, from, q, lower_bytes)?.filter(|p| p.holds);
    let mut hit = from;
    if found.is_none() {
        let Some(at) = find(conn, doc, q, 0)? else { return Ok(None) };
        hit = at;
        found = piece_at(&mut at_stmt, doc, at, q, lower_bytes)?;
    }
    let Some(found) = found else { return Ok(None) };
    let snippet = match found.cut {
        Ok(snippet) => snippet,
        // the context runs into a neighbouring piece
        Err(piece) => {
            let mut prev_stmt = conn.prepare_cached(
                "SELECT key, text FROM search_pieces WHERE key < ?1 AND key >= ?2 ORDER BY key DESC LIMIT 1",
            )?;
            let mut next_stmt = conn.prepare_cached(
                "SELECT key, text FROM search_pieces WHERE key > ?1 AND key <= ?2 ORDER BY key LIMIT 1",
            )?;
            snippet_around(
                hit,
                q.len(),
                piece,
                |start| neighbour(&mut prev_stmt, doc, start, false),
                |start| neighbour(&mut next_stmt, doc, start, true),
            )?
            .ok_or_else(|| content_damage("stored text is not UTF-8 where a snippet is cut"))?
        }
    };
    Ok(Some(snippet))
}

/// A session holding the query: its index number, where the hit starts (for a longer query; for
/// one of one or two characters, its postings' first position), its row in the drawer, and the
/// byte length of its lower-cased text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    doc: i64,
    from: usize,
    pub(super) row: usize,
    lower_bytes: usize,
}

/// The piece holding a hit: whether its lower-cased text there starts with the query, and the
/// snippet when the piece alone holds it (else the piece, for `snippet_around`).
struct AtPiece {
    holds: bool,
    cut: Result<String, Span>,
}

/// The first hit of `q` at or after `from` in one session's lower-cased text.
fn find(conn: &Connection, doc: i64, q: &str, from: usize) -> HostResult<Option<usize>> {
    let (lo, hi) = doc_keys(doc);
    let first: i64 = conn
        .prepare_cached(
            "SELECT key FROM search_pieces WHERE key BETWEEN ?1 AND ?2 ORDER BY key DESC LIMIT 1",
        )?
        .query_row(params![lo, piece_key(doc, from)], |r| r.get(0))
        .optional()?
        .unwrap_or(lo);
    let mut stmt = conn.prepare_cached(
        "SELECT key, text_lower FROM search_pieces WHERE key BETWEEN ?1 AND ?2 ORDER BY key",
    )?;
    let mut rows = stmt.query(params![first, hi])?;
    let mut finder = Finder::new(q, from);
    while let Some(r) = rows.next()? {
        let start = piece_start(r.get(0)?, lo);
        if let Some(hit) = finder.feed(start, text_col(r, 1)?) {
            return Ok(Some(hit));
        }
    }
    Ok(None)
}

/// A piece's start from its key and its document's first key.
fn piece_start(key: i64, lo: i64) -> usize {
    usize::try_from(key - lo).unwrap_or(0)
}

/// The piece holding lower-cased byte `at` of a session whose lower-cased text is
/// `lower_bytes` long, and the snippet of a hit of `q` there: the piece with the largest key
/// up to the byte's own, one descent (`stmt`: key, text, text_lower of the pieces with keys in
/// ?1 ..= ?2, largest first).
fn piece_at(
    stmt: &mut Statement,
    doc: i64,
    at: usize,
    q: &str,
    lower_bytes: usize,
) -> HostResult<Option<AtPiece>> {
    let lo = piece_key(doc, 0);
    let mut rows = stmt.query(params![lo, piece_key(doc, at)])?;
    let Some(r) = rows.next()? else { return Ok(None) };
    let start = piece_start(r.get(0)?, lo);
    let lower = text_col(r, 2)?;
    let holds = at.checked_sub(start).and_then(|i| lower.get(i..)).is_some_and(|rest| {
        let n = rest.len().min(q.len());
        n > 0 && rest[..n] == q.as_bytes()[..n]
    });
    let last = start + lower.len() >= lower_bytes;
    let text = text_col(r, 1)?;
    let cut = match snippet_in_piece(text, start, at, q.len(), start == 0, last) {
        Some(s) => Ok(s),
        None => Err(Span { start, text: text.to_vec() }),
    };
    Ok(Some(AtPiece { holds, cut }))
}

/// The piece after (or before) the one starting at `start` (`stmt`: key and text of the piece
/// nearest key ?1 on that side, up to ?2, the document's last or first key).
fn neighbour(stmt: &mut Statement, doc: i64, start: usize, after: bool) -> HostResult<Option<Span>> {
    let (lo, hi) = doc_keys(doc);
    let mut rows = stmt.query([piece_key(doc, start), if after { hi } else { lo }])?;
    let Some(r) = rows.next()? else { return Ok(None) };
    Ok(Some(Span { start: piece_start(r.get(0)?, lo), text: text_col(r, 1)?.to_vec() }))
}

/// Integer column `i` of a search-index row. Every such column is NOT NULL, so a value of another
/// type read back is damage SQLite cannot see (a zeroed record header reads as NULL).
pub(super) fn int_col(r: &Row, i: usize) -> HostResult<i64> {
    match r.get_ref(i)? {
        ValueRef::Integer(v) => Ok(v),
        v => Err(not_as_written(v, "an integer")),
    }
}

/// Text column `i` of a search-index row, as bytes (see [`int_col`]).
pub(super) fn text_col<'r>(r: &'r Row, i: usize) -> HostResult<&'r [u8]> {
    match r.get_ref(i)? {
        ValueRef::Text(b) => Ok(b),
        v => Err(not_as_written(v, "text")),
    }
}

fn not_as_written(v: ValueRef, want: &str) -> HostError {
    content_damage(format!("the search index holds {} where {want} belongs", v.data_type()))
}

/// Stored text as a `String`: the host only ever stores Rust strings, so bytes that are not
/// UTF-8 are damage.
pub(super) fn utf8(b: &[u8]) -> HostResult<String> {
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|e| content_damage(format!("stored text is not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::PackedGram;

    #[test]
    fn packed_grams_round_trip_and_sort_as_sqlite_sorts_text() {
        let grams = ["a", "a\0", "ab", "b", "文", "文件", "😀文", "\0", "z😀"];
        let mut packed: Vec<PackedGram> = grams.iter().map(|g| PackedGram::new(g).unwrap()).collect();
        for (p, g) in packed.iter().zip(grams) {
            assert_eq!(p.as_str(), g);
        }
        packed.sort();
        let mut want: Vec<&str> = grams.to_vec();
        want.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        assert_eq!(packed.iter().map(PackedGram::as_str).collect::<Vec<_>>(), want);
        assert!(PackedGram::new("😀😀x").is_none(), "more than 8 bytes");
    }
}
