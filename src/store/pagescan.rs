//! Reading rows straight off the pages of a damaged database file, for the salvage's last
//! phase (`salvage/`): when a table's b-tree cannot be walked (a damaged root or interior
//! page, or a schema that cannot be read because page 1 is damaged), its rows still sit in
//! intact leaf pages. This reads every table-leaf page that is not on the freelist, decodes its
//! cells (following overflow chains) into records, and leaves it to the caller to match each
//! record to a table by its shape. Everything is bounds-checked: a damaged page yields fewer
//! records, never a panic.
//!
//! The file format is SQLite's (fileformat2.html): b-tree page header at offset 0 (100 on page
//! 1), type 0x0d for a table leaf, cells `varint payload-size, varint rowid, payload[, u32
//! first overflow page]`, records `varint header-size, serial types…, values…`.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

/// One decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

/// A database image (the file after its WAL was checkpointed into it), read a page at a time
/// so a large file never has to fit in memory.
pub struct Pages {
    file: File,
    /// The first 100 bytes.
    header: Vec<u8>,
    pages: u32,
    page_size: usize,
    usable: usize,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|x| u16::from_be_bytes([x[0], x[1]]))
}

/// SQLite varint at `at`: (value, length).
fn varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let x = *b.get(at + i)?;
        if i == 8 {
            return Some(((v << 8) | x as u64, 9));
        }
        v = (v << 7) | (x & 0x7f) as u64;
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The page size a 100-byte header declares, if valid.
pub fn header_page_size(header: &[u8]) -> Option<usize> {
    let ps = match be16(header, 16)? {
        1 => 65536,
        n => n as usize,
    };
    ((512..=65536).contains(&ps) && ps.is_power_of_two()).then_some(ps)
}

/// The first `n` bytes of a file (fewer when it is shorter).
pub fn read_head(path: &Path, n: usize) -> Option<Vec<u8>> {
    let f = File::open(path).ok()?;
    let mut buf = vec![0u8; n];
    let got = read_at(&f, &mut buf, 0).ok()?;
    buf.truncate(got);
    Some(buf)
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match std::os::unix::fs::FileExt::read_at(f, &mut buf[done..], pos + done as u64)? {
            0 => break,
            k => done += k,
        }
    }
    Ok(done)
}

#[cfg(windows)]
fn read_at(f: &File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match std::os::windows::fs::FileExt::seek_read(f, &mut buf[done..], pos + done as u64)? {
            0 => break,
            k => done += k,
        }
    }
    Ok(done)
}

impl Pages {
    /// `None` when the file cannot be read or its header gives no usable page size.
    pub fn open(path: &Path) -> Option<Pages> {
        let file = File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        let mut header = vec![0u8; 100];
        if read_at(&file, &mut header, 0).ok()? < 100 {
            return None;
        }
        let ps = header_page_size(&header)?;
        let reserved = header[20] as usize;
        let usable = ps.checked_sub(reserved).filter(|u| *u >= 480)?;
        let pages = u32::try_from(len / ps as u64).ok()?;
        Some(Pages { file, header, pages, page_size: ps, usable })
    }

    pub fn count(&self) -> u32 {
        self.pages
    }

    fn page(&self, n: u32) -> Option<Vec<u8>> {
        if n == 0 || n > self.pages {
            return None;
        }
        let mut buf = vec![0u8; self.page_size];
        let got = read_at(&self.file, &mut buf, (n as u64 - 1) * self.page_size as u64).ok()?;
        (got == self.page_size).then_some(buf)
    }

    /// Every freelist page (trunks and leaves); `None` when the list cannot be read.
    pub fn freelist(&self) -> Option<HashSet<u32>> {
        let mut trunk = be32(&self.header, 32)?;
        let total = be32(&self.header, 36)?;
        let mut out = HashSet::new();
        if total > self.count() {
            return None;
        }
        while trunk != 0 {
            if trunk > self.count() || !out.insert(trunk) {
                return None;
            }
            let p = self.page(trunk)?;
            let n = be32(&p, 4)? as usize;
            if n > (self.usable - 8) / 4 {
                return None;
            }
            for i in 0..n {
                let leaf = be32(&p, 8 + 4 * i)?;
                if leaf == 0 || leaf > self.count() {
                    return None;
                }
                out.insert(leaf);
            }
            trunk = be32(&p, 0)?;
        }
        (out.len() as u64 == total as u64).then_some(out)
    }

    /// The payload of a table-leaf cell whose payload starts at `at` in page `p`.
    fn payload(&self, p: &[u8], at: usize, size: usize) -> Option<Vec<u8>> {
        let u = self.usable;
        let x = u - 35;
        if size <= x {
            return p.get(at..at + size).filter(|_| at + size <= u).map(<[u8]>::to_vec);
        }
        let m = ((u - 12) * 32 / 255) - 23;
        let k = m + ((size - m) % (u - 4));
        let local = if k <= x { k } else { m };
        if at + local + 4 > u {
            return None;
        }
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(p.get(at..at + local)?);
        let mut next = be32(p, at + local)?;
        let mut seen = HashSet::new();
        while out.len() < size {
            if next == 0 || next > self.count() || !seen.insert(next) {
                return None;
            }
            let o = self.page(next)?;
            let take = (size - out.len()).min(u - 4);
            out.extend_from_slice(o.get(4..4 + take)?);
            next = be32(&o, 0)?;
        }
        Some(out)
    }

    /// Records of page `n` if it is a table-leaf page: `(rowid, values)` for every cell that
    /// decodes cleanly.
    pub fn leaf_records(&self, n: u32) -> Vec<(i64, Vec<Val>)> {
        let mut out = Vec::new();
        let Some(page) = self.page(n) else { return out };
        let p = page.as_slice();
        let h = if n == 1 { 100 } else { 0 };
        if p.get(h) != Some(&0x0d) {
            return out;
        }
        let Some(cells) = be16(p, h + 3) else { return out };
        let ptrs = h + 8;
        if ptrs + 2 * cells as usize > self.usable {
            return out;
        }
        for i in 0..cells as usize {
            let Some(off) = be16(p, ptrs + 2 * i).map(usize::from) else { continue };
            if off < ptrs + 2 * cells as usize || off >= self.usable {
                continue;
            }
            let Some((size, a)) = varint(p, off) else { continue };
            let Some((rowid, b)) = varint(p, off + a) else { continue };
            if size > (1 << 30) {
                continue;
            }
            let Some(payload) = self.payload(p, off + a + b, size as usize) else { continue };
            if let Some(vals) = record(&payload) {
                out.push((rowid as i64, vals));
            }
        }
        out
    }
}

/// Decode a record; `None` unless the header and the values add up exactly.
pub fn record(b: &[u8]) -> Option<Vec<Val>> {
    let (hlen, n) = varint(b, 0)?;
    let hlen = hlen as usize;
    if hlen > b.len() || hlen < n {
        return None;
    }
    let mut types = Vec::new();
    let mut at = n;
    while at < hlen {
        let (t, k) = varint(b, at)?;
        types.push(t);
        at += k;
    }
    if at != hlen {
        return None;
    }
    let mut body = hlen;
    let mut vals = Vec::with_capacity(types.len());
    for t in types {
        let take = |len: usize, body: &mut usize| -> Option<&[u8]> {
            let end = body.checked_add(len)?;
            let s = b.get(*body..end)?;
            *body = end;
            Some(s)
        };
        let int = |s: &[u8]| -> i64 {
            let mut v: i64 = if s.first().is_some_and(|x| x & 0x80 != 0) { -1 } else { 0 };
            for x in s {
                v = (v << 8) | *x as i64;
            }
            v
        };
        vals.push(match t {
            0 => Val::Null,
            1 => Val::Int(int(take(1, &mut body)?)),
            2 => Val::Int(int(take(2, &mut body)?)),
            3 => Val::Int(int(take(3, &mut body)?)),
            4 => Val::Int(int(take(4, &mut body)?)),
            5 => Val::Int(int(take(6, &mut body)?)),
            6 => Val::Int(int(take(8, &mut body)?)),
            7 => {
                let s = take(8, &mut body)?;
                Val::Real(f64::from_bits(u64::from_be_bytes(s.try_into().ok()?)))
            }
            8 => Val::Int(0),
            9 => Val::Int(1),
            10 | 11 => return None,
            t if t % 2 == 0 => Val::Blob(take(usize::try_from((t - 12) / 2).ok()?, &mut body)?.to_vec()),
            t => Val::Text(take(usize::try_from((t - 13) / 2).ok()?, &mut body)?.to_vec()),
        });
    }
    (body == b.len()).then_some(vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_records_decode() {
        assert_eq!(varint(&[0x7f], 0), Some((127, 1)));
        assert_eq!(varint(&[0x81, 0x00], 0), Some((128, 2)));
        // header 4 bytes: NULL, int8, text(2)
        let rec = [4u8, 0, 1, 17, 0xfe, b'h', b'i'];
        assert_eq!(record(&rec), Some(vec![Val::Null, Val::Int(-2), Val::Text(b"hi".to_vec())]));
        assert_eq!(record(&rec[..6]), None, "a short body is refused");
        assert_eq!(record(&[2u8, 10]), None, "reserved serial types are refused");
    }

    #[test]
    fn rows_come_back_from_a_real_file_page_by_page() {
        let dir = std::env::temp_dir().join(format!("keepsake-pagescan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.db");
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA page_size=4096; CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, b BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
             INSERT INTO t (s, b) SELECT printf('row %d %s', i, hex(randomblob(60))), randomblob(i * 40) FROM n;
             DELETE FROM t WHERE id % 3 = 0;",
        )
        .unwrap();
        drop(c);
        let pages = Pages::open(&path).unwrap();
        let free = pages.freelist().expect("readable freelist");
        let mut ids = Vec::new();
        for n in 1..=pages.count() {
            if free.contains(&n) {
                continue;
            }
            for (rowid, vals) in pages.leaf_records(n) {
                if let [Val::Null, Val::Text(s), Val::Blob(b)] = vals.as_slice() {
                    assert!(String::from_utf8_lossy(s).starts_with(&format!("row {rowid} ")));
                    assert_eq!(b.len(), rowid as usize * 40);
                    ids.push(rowid);
                }
            }
        }
        ids.sort();
        let want: Vec<i64> = (1..=300).filter(|i| i % 3 != 0).collect();
        assert_eq!(ids, want);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
