//! Text deltas for `request.build` bodies (PROTOCOL.md "Body deltas"): the new body text as
//! pieces copied from a text the extension already holds plus literal text, with offsets in
//! UTF-16 code units because the extension splices JavaScript strings.
//!
//! A body usually differs from the previous one by an appended tail, and, once the live history
//! is at its cap, by entries trimmed off its front (or an entry aged or stubbed in the middle), so
//! a plain common-prefix/suffix diff is not enough. After the common prefix and suffix, the middle
//! is matched block-wise as rsync does: the held text is indexed by 64-byte blocks, the new text
//! is scanned with a rolling hash, a block hit is verified byte for byte and extended both ways.
//! Linear time; every copy and every literal starts and ends on a character boundary, so no
//! UTF-16 offset ever splits a surrogate pair.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Block size of the index over the held text, bytes. Any common run of at least
/// `2 × BLOCK − 1` bytes is found.
pub const BLOCK: usize = 64;

/// Rough wire cost of one copy piece (`[123456,234567],`), used to decide whether a delta is
/// worth sending at all.
pub const COPY_COST: usize = 20;

/// One piece of the new text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    /// `old[start..end]` (byte offsets, both on character boundaries).
    Copy { start: usize, end: usize },
    /// Literal text of the new body.
    Insert(&'a str),
}

/// `sha256` of the UTF-8 bytes of `text`, 64 lower-case hex digits (the `bodyHash`).
pub fn text_hash(text: &str) -> String {
    super::import::sha256_hex(text.as_bytes())
}

/// UTF-16 code units of a UTF-8 byte run, counted per byte so any split of a valid string adds
/// up: every byte that starts a character counts 1, a 4-byte lead counts 1 more (a surrogate
/// pair).
pub fn u16_units(bytes: &[u8]) -> usize {
    // byte-wide counters over runs of 127 bytes (at most 254 each) let the loop vectorise
    bytes
        .chunks(127)
        .map(|run| run.iter().fold(0u8, |n, &b| n + u8::from(b as i8 >= -64) + u8::from(b >= 0xF0)) as usize)
        .sum()
}

/// Pieces that rebuild `new` from `old`, in order. Adjacent copies of contiguous ranges and
/// adjacent literals are merged; empty pieces are never produced.
pub fn diff<'a>(old: &str, new: &'a str) -> Vec<Piece<'a>> {
    let (o, n) = (old.as_bytes(), new.as_bytes());
    let mut out = Pieces::default();

    // common prefix, backed off to a character boundary
    let mut p = common_prefix(o, n);
    while !(old.is_char_boundary(p) && new.is_char_boundary(p)) {
        p -= 1;
    }
    // common suffix within what the prefix left, its start on a character boundary
    let room = o.len().min(n.len()) - p;
    let mut s = common_suffix(&o[o.len() - room..], &n[n.len() - room..]);
    while !(old.is_char_boundary(o.len() - s) && new.is_char_boundary(n.len() - s)) {
        s -= 1;
    }
    out.copy(0, p);
    Middle::new(old, new, p, o.len() - s).cover(p, n.len() - s, &mut out);
    out.copy(o.len() - s, o.len());
    out.list
}

/// Length of the common prefix of two byte strings (compared 32 bytes at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 32 <= n && a[i..i + 32] == b[i..i + 32] {
        i += 32;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Length of the common suffix of two byte strings.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    while i + 32 <= n && a[n - i - 32..n - i] == b[n - i - 32..n - i] {
        i += 32;
    }
    while i < n && a[n - i - 1] == b[n - i - 1] {
        i += 1;
    }
    i
}

#[derive(Default)]
struct Pieces<'a> {
    list: Vec<Piece<'a>>,
}

impl<'a> Pieces<'a> {
    fn copy(&mut self, start: usize, end: usize) {
        if start == end {
            return;
        }
        if let Some(Piece::Copy { end: last, .. }) = self.list.last_mut() {
            if *last == start {
                *last = end;
                return;
            }
        }
        self.list.push(Piece::Copy { start, end });
    }

    fn insert(&mut self, new: &'a str, start: usize, end: usize) {
        if start < end {
            self.list.push(Piece::Insert(&new[start..end]));
        }
    }
}

/// An identity hasher: the keys are already rolling hashes.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

const BASE: u64 = 0x100_0000_01b3; // FNV prime: odd, mixes well enough for a verified index

fn block_hash(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |h, &x| h.wrapping_mul(BASE).wrapping_add(u64::from(x) + 1))
}

type Index = HashMap<u64, usize, BuildHasherDefault<Identity>>;

/// Matching the middle of `new` against `old[..old_end]` (the held text short of the common
/// suffix).
struct Middle<'o, 'n> {
    old: &'o str,
    new: &'n str,
    old_end: usize,
    /// End of the last copy in `old`: where the next probe looks first.
    cursor: usize,
    /// Aligned blocks of `old[from..old_end]`, built the first time a probe fails.
    index: Option<Index>,
}

impl<'o, 'n> Middle<'o, 'n> {
    fn new(old: &'o str, new: &'n str, old_start: usize, old_end: usize) -> Self {
        Middle { old, new, old_end, cursor: old_start, index: None }
    }

    /// A verified common run holding `new[i..i + BLOCK]` at `old[j..]`, extended backwards into
    /// the pending literal and forwards up to `to`, trimmed to character boundaries:
    /// `(old start, old end, new start, new end)`, or None when nothing is left.
    fn extend(&self, i: usize, j: usize, lit: usize, to: usize) -> Option<(usize, usize, usize, usize)> {
        let (o, n) = (self.old.as_bytes(), self.new.as_bytes());
        let back = common_suffix(&o[..j], &n[lit..i]);
        let (mut a, mut c) = (j - back, i - back);
        let fwd = common_prefix(&o[j + BLOCK..], &n[i + BLOCK..to]);
        let (mut b, mut d) = (j + BLOCK + fwd, i + BLOCK + fwd);
        while a < b && !(self.old.is_char_boundary(a) && self.new.is_char_boundary(c)) {
            a += 1;
            c += 1;
        }
        while b > a && !(self.old.is_char_boundary(b) && self.new.is_char_boundary(d)) {
            b -= 1;
            d -= 1;
        }
        (b > a).then_some((a, b, c, d))
    }

    /// The first place after the last copy where `new[i..i + BLOCK]` occurs (a SIMD substring
    /// search: the common case is that the held text continues right there or a little later).
    fn probe(&self, i: usize) -> Option<usize> {
        let hay = &self.old.as_bytes()[self.cursor.min(self.old_end)..self.old_end];
        memchr::memmem::find(hay, &self.new.as_bytes()[i..i + BLOCK]).map(|k| self.cursor + k)
    }

    fn index(&mut self) -> &Index {
        let (o, from, to) = (self.old.as_bytes(), self.cursor.min(self.old_end), self.old_end);
        self.index.get_or_insert_with(|| {
            let mut index = Index::with_capacity_and_hasher((to - from) / BLOCK, Default::default());
            let mut j = from;
            while j + BLOCK <= to {
                index.entry(block_hash(&o[j..j + BLOCK])).or_insert(j);
                j += BLOCK;
            }
            index
        })
    }

    /// Cover `new[from..to]`: at the start of each literal a substring probe (until one
    /// misses), then a rolling hash over the block index until a verified hit; copies where they
    /// match, literals elsewhere.
    fn cover(mut self, from: usize, to: usize, out: &mut Pieces<'n>) {
        let new = self.new;
        let (o, n) = (self.old.as_bytes(), new.as_bytes());
        let top = BASE.wrapping_pow(BLOCK as u32 - 1); // weight of the byte leaving the window
        let mut lit = from; // start of the pending literal
        let mut i = from; // window start in `new`
        'outer: while to - i >= BLOCK {
            // probe until the first miss; from then on the index finds every later match
            let mut hit = if self.index.is_none() {
                self.probe(i).and_then(|j| self.extend(i, j, lit, to))
            } else {
                None
            };
            if hit.is_none() {
                let mut h = block_hash(&n[i..i + BLOCK]);
                loop {
                    let found = self.index().get(&h).copied();
                    if let Some(j) = found.filter(|&j| o[j..j + BLOCK] == n[i..i + BLOCK]) {
                        hit = self.extend(i, j, lit, to);
                        if hit.is_some() {
                            break;
                        }
                    }
                    if i + BLOCK >= to {
                        break 'outer;
                    }
                    // roll the window one byte on
                    h = h
                        .wrapping_sub(top.wrapping_mul(u64::from(n[i]) + 1))
                        .wrapping_mul(BASE)
                        .wrapping_add(u64::from(n[i + BLOCK]) + 1);
                    i += 1;
                }
            }
            let Some((a, b, c, d)) = hit else { break };
            out.insert(new, lit, c);
            out.copy(a, b);
            self.cursor = b;
            lit = d;
            i = d;
        }
        out.insert(new, lit, to);
    }
}

/// Converts byte offsets of one text to UTF-16 offsets; checkpoints every 4 KiB keep each
/// lookup short whatever order the offsets come in.
pub struct U16Offsets<'a> {
    bytes: &'a [u8],
    marks: Vec<usize>,
}

const MARK: usize = 4096;

impl<'a> U16Offsets<'a> {
    pub fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut marks = Vec::with_capacity(bytes.len() / MARK + 1);
        let mut acc = 0;
        for chunk in bytes.chunks(MARK) {
            marks.push(acc);
            acc += u16_units(chunk);
        }
        U16Offsets { bytes, marks }
    }

    /// UTF-16 offset of byte offset `b` (a character boundary).
    pub fn at(&self, b: usize) -> usize {
        let k = b / MARK;
        match self.marks.get(k) {
            Some(&m) => m + u16_units(&self.bytes[k * MARK..b]),
            None => u16_units(self.bytes), // b == len on a chunk boundary
        }
    }
}

/// Rebuild the new text from byte-offset pieces (tests and the host's own self-check).
pub fn apply(old: &str, pieces: &[Piece<'_>]) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Copy { start, end } => s.push_str(&old[*start..*end]),
            Piece::Insert(t) => s.push_str(t),
        }
    }
    s
}

/// Rebuild from UTF-16 pieces, as the extension does (`base.slice(start, end)`); `None` when a
/// range is out of bounds or splits a surrogate pair. Mirrors `applyBodyDelta` in turns.js.
pub fn apply_u16(old: &str, pieces: &[U16Piece]) -> Option<String> {
    let units: Vec<u16> = old.encode_utf16().collect();
    let mut out: Vec<u16> = Vec::new();
    for p in pieces {
        match p {
            U16Piece::Copy(a, b) => out.extend_from_slice(units.get(*a..*b)?),
            U16Piece::Insert(t) => out.extend(t.encode_utf16()),
        }
    }
    String::from_utf16(&out).ok()
}

/// A piece with UTF-16 offsets, as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum U16Piece {
    Copy(usize, usize),
    Insert(String),
}

/// The pieces with UTF-16 offsets into `old`.
pub fn to_u16(old: &str, pieces: &[Piece<'_>]) -> Vec<U16Piece> {
    let offs = U16Offsets::new(old);
    pieces
        .iter()
        .map(|p| match p {
            Piece::Copy { start, end } => U16Piece::Copy(offs.at(*start), offs.at(*end)),
            Piece::Insert(t) => U16Piece::Insert((*t).to_owned()),
        })
        .collect()
}

/// Approximate wire bytes of a delta (literal bytes plus a fixed cost per copy); compared with
/// the full text's length to decide whether a delta is worth it.
pub fn wire_cost(pieces: &[Piece<'_>]) -> usize {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Copy { .. } => COPY_COST,
            Piece::Insert(t) => t.len() + 3,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(old: &str, new: &str) -> Vec<U16Piece> {
        let pieces = diff(old, new);
        assert_eq!(apply(old, &pieces), new, "byte pieces rebuild the text");
        let u = to_u16(old, &pieces);
        assert_eq!(apply_u16(old, &u).as_deref(), Some(new), "UTF-16 pieces rebuild the text");
        u
    }

    #[test]
    fn identical_is_one_copy() {
        let t = "x".repeat(1000);
        assert_eq!(round(&t, &t), vec![U16Piece::Copy(0, 1000)]);
        assert_eq!(round("", ""), vec![]);
    }

    #[test]
    fn append_is_prefix_plus_literal_plus_suffix() {
        let old = format!("{{\"messages\":[{}]}}", "\"a\",".repeat(100));
        let new = format!("{{\"messages\":[{}\"tail\"]}}", "\"a\",".repeat(100));
        let u = round(&old, &new);
        assert_eq!(u.len(), 3, "{u:?}");
        assert!(matches!(&u[1], U16Piece::Insert(t) if t.len() < 10));
    }

    #[test]
    fn front_trim_plus_append_copies_the_kept_middle() {
        let entries: Vec<String> = (0..60)
            .map(|i| format!("{{\"role\":\"user\",\"content\":\"entry {i} {}\"}}", "lorem ipsum ".repeat(40)))
            .collect();
        let old = format!("{{\"model\":\"m\",\"messages\":[{}]}}", entries[..58].join(","));
        let new = format!("{{\"model\":\"m\",\"messages\":[{}]}}", entries[2..].join(","));
        let u = round(&old, &new);
        let literal: usize = u.iter().map(|p| if let U16Piece::Insert(t) = p { t.len() } else { 0 }).sum();
        let appended = entries[58].len() + entries[59].len() + 2;
        assert!(literal <= appended + 2 * BLOCK, "literal {literal} vs appended {appended}: {u:?}");
    }

    #[test]
    fn offsets_count_utf16_units_around_emoji_and_cjk() {
        let old = format!("é😀{}中😀", "z".repeat(200));
        let new = format!("é😀{}中😀x", "z".repeat(200));
        let u = round(&old, &new);
        assert_eq!(u[0], U16Piece::Copy(0, old.encode_utf16().count()));
        // a change inside a run of astral characters never splits a pair
        let old = "😀😁😂".repeat(100);
        let new = format!("{}😃{}", "😀😁😂".repeat(50), "😀😁😂".repeat(50));
        round(&old, &new);
        // differing characters that share UTF-8 lead and continuation bytes
        round("aé😀b", "aè😁b");
        round("中文", "中丈");
    }

    #[test]
    fn unrelated_and_empty_texts() {
        round("abc", "");
        round("", "abc");
        let a: String = (0..5000u32).map(|i| char::from_u32(0x4e00 + (i * 7919) % 20000).unwrap()).collect();
        let b: String =
            (0..5000u32).map(|i| char::from_u32(0x4e00 + (i * 104729) % 20000).unwrap()).collect();
        round(&a, &b);
    }

    #[test]
    fn u16_offsets_match_encode_utf16() {
        let t = "a😀é中".repeat(1200);
        let offs = U16Offsets::new(&t);
        for (b, _) in t.char_indices().step_by(7).chain(std::iter::once((t.len(), ' '))) {
            assert_eq!(offs.at(b), t[..b].encode_utf16().count());
        }
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(text_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(text_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
