//! Reading the damaged copy's tables (step 3 of the policy in `mod.rs`): a table in one
//! `INSERT … SELECT`, else row by row forward by rowid, backward from the end and by seeks past
//! the damage; and, for a table whose b-tree could not be walked completely, the records on its
//! intact pages (`pagescan.rs`).

use std::path::Path;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OpenFlags};

use super::header::{page_size_candidates, rebuild_header};
use super::record::TableReport;
use crate::store::pagescan::{self, Val};
use crate::util::paths::sidecar;

fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

pub(super) fn columns(conn: &Connection, schema: &str, table: &str) -> Vec<String> {
    let sql = format!("PRAGMA {schema}.table_info({})", q(table));
    conn.prepare(&sql)
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(1))?.collect())
        .unwrap_or_default()
}

/// Rows read from the damaged copy per batch (each batch is then written in one transaction).
const BATCH: i64 = 256;

/// A table's columns as the page scan matches records against them.
struct Shape {
    table: String,
    names: Vec<String>,
    /// Declared type: 'i' integer, 't' text, 'b' blob, 'r' real, '?' anything.
    kinds: Vec<char>,
    notnull: Vec<bool>,
    /// The INTEGER PRIMARY KEY column (stored as NULL in the record; the rowid is its value).
    alias: Option<usize>,
}

fn shape(conn: &Connection, table: &str) -> rusqlite::Result<Shape> {
    let mut st = conn.prepare(&format!("PRAGMA main.table_info({})", q(table)))?;
    let rows: Vec<(String, String, bool, i64)> = st
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(5)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let pk_count = rows.iter().filter(|r| r.3 > 0).count();
    let kinds = rows
        .iter()
        .map(|r| match r.1.to_ascii_uppercase().as_str() {
            t if t.contains("INT") => 'i',
            t if t.contains("TEXT") || t.contains("CHAR") => 't',
            t if t.contains("BLOB") => 'b',
            t if t.contains("REAL") => 'r',
            _ => '?',
        })
        .collect::<Vec<_>>();
    let alias = rows.iter().position(|r| r.3 == 1 && pk_count == 1 && r.1.eq_ignore_ascii_case("INTEGER"));
    Ok(Shape {
        table: table.to_owned(),
        names: rows.iter().map(|r| r.0.clone()).collect(),
        notnull: rows.iter().map(|r| r.2 || r.3 > 0).collect(),
        kinds,
        alias,
    })
}

impl Shape {
    /// The record as this table's row, if every value fits its column.
    fn fit(&self, rowid: i64, vals: &[Val]) -> Option<Vec<SqlValue>> {
        if vals.len() > self.names.len() || vals.is_empty() {
            return None;
        }
        // columns missing at the end (rows written before an ADD COLUMN) must allow NULL
        if (vals.len()..self.names.len()).any(|i| self.notnull[i]) {
            return None;
        }
        let mut out = Vec::with_capacity(self.names.len());
        for (i, v) in vals.iter().enumerate() {
            if Some(i) == self.alias {
                if *v != Val::Null {
                    return None;
                }
                out.push(SqlValue::Integer(rowid));
                continue;
            }
            out.push(match (v, self.kinds[i]) {
                (Val::Null, _) if !self.notnull[i] => SqlValue::Null,
                (Val::Int(n), 'i' | '?') => SqlValue::Integer(*n),
                (Val::Real(f), 'r' | '?') => SqlValue::Real(*f),
                (Val::Int(n), 'r') => SqlValue::Real(*n as f64),
                (Val::Text(t), 't' | '?') => SqlValue::Text(clean_text(t)?),
                (Val::Blob(b), 'b' | '?') => SqlValue::Blob(b.clone()),
                _ => return None,
            });
        }
        out.resize(self.names.len(), SqlValue::Null);
        if self.alias.is_some_and(|a| a >= vals.len()) {
            return None;
        }
        Some(out)
    }
}

/// The last phase: a scratch copy of the damaged file with its WAL checkpointed into it (and
/// its header rebuilt when unreadable) is read page by page (`pagescan.rs`); every record on a
/// live table-leaf page that fits exactly one of `targets` is inserted into it (`OR IGNORE`:
/// rows the SQL phase already copied stay as they are). Without a readable freelist nothing is
/// scanned: freed pages still hold deleted rows, which must not come back.
pub(super) fn scan_pages(
    conn: &Connection,
    src: &Path,
    dest: &Path,
    targets: &[String],
    reports: &mut [TableReport],
) -> Result<(), String> {
    let copy = sidecar(dest, "-pages");
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(sidecar(&copy, s));
    }
    let res = (|| {
        let ps = page_size_candidates(src).first().copied().unwrap_or(4096);
        let header_ok = pagescan::read_head(src, 100).is_some_and(|b| {
            b.len() == 100 && b.starts_with(b"SQLite format 3\0") && pagescan::header_page_size(&b).is_some()
        });
        if header_ok {
            std::fs::copy(src, &copy).map_err(|e| e.to_string())?;
            if std::fs::metadata(sidecar(src, "-wal")).is_ok() {
                std::fs::copy(sidecar(src, "-wal"), sidecar(&copy, "-wal")).map_err(|e| e.to_string())?;
            }
        } else {
            rebuild_header(src, &copy, ps).map_err(|e| e.to_string())?;
        }
        // apply committed WAL frames (the last connection's close checkpoints and removes it)
        if std::fs::metadata(sidecar(&copy, "-wal")).is_ok() {
            if let Ok(c) = Connection::open_with_flags(
                &copy,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ) {
                let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                let _ = c.close();
            }
        }
        let pages = pagescan::Pages::open(&copy).ok_or("no usable page size")?;
        let free = pages
            .freelist()
            .ok_or("the freelist cannot be read, so freed pages (deleted rows) cannot be told apart")?;
        let shapes: Vec<Shape> = targets
            .iter()
            .map(|t| shape(conn, t))
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| e.to_string())?;
        let mut found: Vec<Vec<Vec<SqlValue>>> = vec![Vec::new(); shapes.len()];
        for n in 1..=pages.count() {
            if free.contains(&n) {
                continue;
            }
            for (rowid, vals) in pages.leaf_records(n) {
                let fits: Vec<(usize, Vec<SqlValue>)> = shapes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.fit(rowid, &vals).map(|v| (i, v)))
                    .collect();
                if let [(i, row)] = fits.as_slice() {
                    found[*i].push(row.clone());
                }
            }
        }
        for (s, rows) in shapes.iter().zip(found) {
            let verb = if s.table == "live_state" { "INSERT OR REPLACE" } else { "INSERT OR IGNORE" };
            let list = s.names.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ");
            let marks = vec!["?"; s.names.len()].join(", ");
            let insert = format!("{verb} INTO main.{} ({list}) VALUES ({marks})", q(&s.table));
            let mut scan = Scan { inserted: 0, refused: 0, last: None, broken: false };
            let batch: Vec<Row> = rows.into_iter().map(|r| (0, Some(r))).collect();
            write_batch(conn, &insert, &batch, &mut scan);
            if let Some(r) = reports.iter_mut().find(|r| r.table == s.table) {
                r.recovered += scan.inserted;
                if scan.inserted > 0 {
                    r.note = Some(format!(
                        "{}; {} more rows read directly off its intact pages",
                        r.note.clone().unwrap_or_else(|| "damaged".into()),
                        scan.inserted
                    ));
                }
            }
        }
        Ok(())
    })();
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(sidecar(&copy, s));
    }
    res
}

/// One scan of the damaged table: rows in `ORDER BY rowid [DESC]` order within bounds, read
/// in batches and inserted, until the end or the first unreadable page.
///
/// The damaged copy is only ever read outside a write transaction: a `SQLITE_CORRUPT` met
/// inside one poisons it (every later write in it, and its commit, fail too).
struct Scan {
    inserted: u64,
    refused: u64,
    /// Rowid of the last row read.
    last: Option<i64>,
    /// The scan stopped on an error (a damaged page).
    broken: bool,
}

/// A column value as a parameter; `None` for text that is not UTF-8 (damaged bytes).
fn owned(v: rusqlite::types::ValueRef) -> Option<SqlValue> {
    use rusqlite::types::ValueRef;
    Some(match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Integer(i),
        ValueRef::Real(f) => SqlValue::Real(f),
        ValueRef::Text(t) => SqlValue::Text(clean_text(t)?),
        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
    })
}

/// Text as Keepsake writes it: UTF-8 without NUL bytes (JSON escapes them; names and keys
/// never carry one). A zero-filled or random range inside a row fails this.
fn clean_text(t: &[u8]) -> Option<String> {
    if t.contains(&0) {
        return None;
    }
    String::from_utf8(t.to_vec()).ok()
}

type Row = (i64, Option<Vec<SqlValue>>);

/// Read at most `BATCH` rows; `true` when the read stopped on an error.
fn read_batch(conn: &Connection, select: &str, bounds: (i64, i64), ncols: usize, out: &mut Vec<Row>) -> bool {
    let Ok(mut sel) = conn.prepare(select) else { return true };
    let Ok(mut rows) = sel.query(params![bounds.0, bounds.1, BATCH]) else { return true };
    loop {
        match rows.next() {
            Ok(Some(r)) => {
                let Ok(rowid) = r.get::<_, i64>(0) else { return true };
                let vals: Option<Vec<SqlValue>> =
                    (1..=ncols).map(|i| r.get_ref(i).ok().and_then(owned)).collect();
                out.push((rowid, vals));
            }
            Ok(None) => return false,
            Err(_) => return true,
        }
    }
}

fn write_batch(conn: &Connection, insert: &str, batch: &[Row], out: &mut Scan) {
    let res = (|| {
        conn.execute_batch("BEGIN")?;
        let mut ins = conn.prepare_cached(insert)?;
        for (_, vals) in batch {
            match vals {
                Some(v) => match ins.execute(rusqlite::params_from_iter(v.iter())) {
                    Ok(n) if n > 0 => out.inserted += 1,
                    _ => out.refused += 1,
                },
                None => out.refused += 1,
            }
        }
        drop(ins);
        conn.execute_batch("COMMIT")
    })();
    if res.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

fn scan(
    conn: &Connection,
    select: &str,
    bounds: (i64, i64),
    descending: bool,
    insert: &str,
    ncols: usize,
) -> Scan {
    let mut out = Scan { inserted: 0, refused: 0, last: None, broken: false };
    let (mut lo, mut hi) = bounds;
    loop {
        let mut batch = Vec::new();
        let mut broken = read_batch(conn, select, (lo, hi), ncols, &mut batch);
        // A damaged b-tree can hand rows back out of order (a child pointer aimed at another
        // subtree), and the seek bound is not re-checked per row: keep only rows that move the
        // scan forward, and stop at the first that does not, so the scan always ends.
        if let Some(k) = batch.iter().position(|(r, _)| if descending { *r >= hi } else { *r <= lo }) {
            batch.truncate(k);
            broken = true;
        }
        if let Some(k) =
            batch.windows(2).position(|w| if descending { w[1].0 >= w[0].0 } else { w[1].0 <= w[0].0 })
        {
            batch.truncate(k + 1);
            broken = true;
        }
        if let Some((last, _)) = batch.last() {
            out.last = Some(*last);
            if descending {
                hi = *last;
            } else {
                lo = *last;
            }
        }
        write_batch(conn, insert, &batch, &mut out);
        if broken {
            out.broken = true;
            return out;
        }
        if (batch.len() as i64) < BATCH {
            return out;
        }
    }
}

/// SQL that holds for a row of `t` whose values have the declared types of `cols` (our schema
/// never stores another type) and whose text has no NUL byte.
fn valid_predicate(conn: &Connection, t: &str, cols: &[String]) -> String {
    let Ok(sh) = shape(conn, t) else { return "1".into() };
    let mut parts = Vec::new();
    for ((name, kind), notnull) in sh.names.iter().zip(&sh.kinds).zip(&sh.notnull) {
        if !cols.contains(name) {
            continue;
        }
        let c = q(name);
        let check = match kind {
            'i' => format!("typeof({c}) = 'integer'"),
            't' => format!("(typeof({c}) = 'text' AND instr(CAST({c} AS BLOB), x'00') = 0)"),
            'b' => format!("typeof({c}) = 'blob'"),
            'r' => format!("typeof({c}) IN ('real', 'integer')"),
            _ => continue,
        };
        parts.push(if *notnull { check } else { format!("({c} IS NULL OR {check})") });
    }
    if parts.is_empty() {
        "1".into()
    } else {
        parts.join(" AND ")
    }
}

/// Copy one table: the whole table in one statement, else forward by rowid, backward from the
/// end, then seeks past the damage in growing steps.
pub(super) fn copy_table(conn: &Connection, t: &str, cols: &[String]) -> TableReport {
    let list = cols.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ");
    let verb = if t == "live_state" { "INSERT OR REPLACE" } else { "INSERT OR IGNORE" };
    let mut report = TableReport { table: t.to_owned(), ..Default::default() };
    // rows whose values do not have their columns' types (a child pointer aimed at another
    // table's page reads that table's rows as this one's) or carry NUL bytes in text are left out
    let valid = valid_predicate(conn, t, cols);
    let clean = format!(" WHERE {valid}");
    let whole = format!("{verb} INTO main.{} ({list}) SELECT {list} FROM damaged.{}{clean}", q(t), q(t));
    let fast = (|| {
        conn.execute_batch("BEGIN")?;
        let n = conn.execute(&whole, [])?;
        conn.execute_batch("COMMIT")?;
        Ok::<_, rusqlite::Error>(n)
    })();
    match fast {
        Ok(n) => {
            report.recovered = n as u64;
            report.complete = true;
            return report;
        }
        Err(_) => {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    let marks = vec!["?"; cols.len()].join(", ");
    let insert = format!("{verb} INTO main.{} ({list}) VALUES ({marks})", q(t));
    let fwd = format!(
        "SELECT rowid, {list} FROM damaged.{} WHERE rowid > ?1 AND rowid < ?2 AND ({valid}) ORDER BY rowid LIMIT ?3",
        q(t)
    );
    let back = format!(
        "SELECT rowid, {list} FROM damaged.{} WHERE rowid > ?1 AND rowid < ?2 AND ({valid}) ORDER BY rowid DESC LIMIT ?3",
        q(t)
    );
    let n = cols.len();
    let add = |s: &Scan, r: &mut TableReport| {
        r.recovered += s.inserted;
        r.refused += s.refused;
    };
    // forward from the start
    let s = scan(conn, &fwd, (i64::MIN, i64::MAX), false, &insert, n);
    add(&s, &mut report);
    if !s.broken {
        report.complete = true;
        report.note = Some("read row by row".into());
        return report;
    }
    let mut low = s.last.unwrap_or(i64::MIN);
    // backward from the end
    let s = scan(conn, &back, (low, i64::MAX), true, &insert, n);
    add(&s, &mut report);
    let high = if s.broken { s.last.unwrap_or(i64::MAX) } else { low.saturating_add(1) };
    // probe the gap between the two: seek to low + step, doubling the step while seeks fail
    let mut step: i64 = 1;
    let mut probes = 0;
    while probes < 256 {
        let start = low.saturating_add(step);
        if start >= high || start == i64::MAX {
            break;
        }
        probes += 1;
        let s = scan(conn, &fwd, (start - 1, high), false, &insert, n);
        add(&s, &mut report);
        match s.last {
            Some(last) => {
                low = last;
                step = 1;
                if !s.broken {
                    break;
                }
            }
            None if !s.broken => break,
            None => step = step.saturating_mul(2),
        }
    }
    report.note = Some("damaged pages skipped: rows on them are lost".into());
    report
}
