//! The content-search index (storage-model §5.3), as pure functions: no SQL here.
//!
//! A session's searchable text is kept in **pieces** of about 900 bytes, each with its
//! lower-cased form and where that form starts in the whole lower-cased text (`start`, bytes).
//! Beside the pieces, every distinct one- and two-character sequence (**gram**) of the
//! lower-cased text is listed once with the byte position of its first occurrence.
//!
//! A query of one or two characters is then answered by the index alone (its first hit is the
//! gram's position); a longer one needs every one of its two-character grams to be present, and
//! is verified by scanning forward from the latest position the grams allow (a hit cannot start
//! before `pos(g) - offset of g in the query` for any gram `g`). The snippet is cut from the few
//! pieces around the hit, never from the whole text.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::sessions::{SNIPPET_AFTER, SNIPPET_BEFORE};
use super::text::lower;

/// Target size of a piece: its original text and lower-cased copy together, in bytes (a piece
/// ends at the first character boundary at or after it). Two such rows fill one 4 KiB
/// database page (larger rows would leave half of every page empty).
pub const PIECE_BYTES: usize = 1800;

/// One piece of a session's searchable text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Byte offset of `lower` in the whole lower-cased text.
    pub start: usize,
    pub text: String,
    pub lower: String,
}

/// A piece's original text and where its lower-cased form starts: what a snippet needs. The
/// text is UTF-8 bytes as stored, checked only where the snippet is cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub text: Vec<u8>,
}

/// What indexing a text (or text appended to an indexed one) produces.
#[derive(Debug, Default)]
pub struct Indexed {
    pub pieces: Vec<Piece>,
    /// Each gram not seen before, with the byte position of its first occurrence; sorted by gram.
    pub grams: Vec<(String, usize)>,
    /// Byte length of the whole lower-cased text afterwards.
    pub lower_bytes: usize,
    /// The last character of the whole lower-cased text afterwards (for the next append).
    pub last_char: Option<char>,
}

/// The indexed state of a text, needed to index text appended to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tail {
    /// Byte length of the lower-cased text indexed so far.
    pub lower_bytes: usize,
    /// Its last character, if any.
    pub last_char: Option<char>,
}

/// Index `text` appended after `tail` (use `Tail::default()` for a whole text).
///
/// Grams already present in the indexed text are reported again only if they first occur
/// here; the store keeps the earlier position (`INSERT OR IGNORE`), so reporting a gram the
/// text already had is harmless.
pub fn index_text(text: &str, tail: Tail) -> Indexed {
    index_text_with(text, tail, PIECE_BYTES)
}

/// [`index_text`] with a chosen piece size (tests use tiny pieces to cross boundaries).
pub fn index_text_with(text: &str, tail: Tail, piece_bytes: usize) -> Indexed {
    let full_lower = lower(text);
    let mut pieces = Vec::new();
    let mut grams = FirstSeen::default();
    let mut prev = tail.last_char;
    let mut prev_pos = tail.lower_bytes.saturating_sub(prev.map_or(0, char::len_utf8));
    // Walk the original and the lower-cased text together: every original character lowers
    // to a run of the same byte length in both `c.to_lowercase()` and the contextual
    // `full_lower` (final sigma has equal-length forms), so piece cuts line up.
    let mut orig_from = 0;
    let mut low_from = 0;
    let mut low_at = 0;
    for (i, c) in text.char_indices() {
        let low_len = lowered_len(c);
        let low_run = &full_lower[low_at..low_at + low_len];
        let mut at = low_at;
        for lc in low_run.chars() {
            let pos = tail.lower_bytes + at;
            grams.note(lc, None, pos);
            if let Some(p) = prev {
                grams.note(p, Some(lc), prev_pos);
            }
            prev = Some(lc);
            prev_pos = pos;
            at += lc.len_utf8();
        }
        low_at += low_len;
        let end = i + c.len_utf8();
        if (end - orig_from) + (low_at - low_from) >= piece_bytes {
            pieces.push(Piece {
                start: tail.lower_bytes + low_from,
                text: text[orig_from..end].to_owned(),
                lower: full_lower[low_from..low_at].to_owned(),
            });
            orig_from = end;
            low_from = low_at;
        }
    }
    if orig_from < text.len() {
        pieces.push(Piece {
            start: tail.lower_bytes + low_from,
            text: text[orig_from..].to_owned(),
            lower: full_lower[low_from..].to_owned(),
        });
    }
    Indexed {
        pieces,
        grams: grams.into_sorted(),
        lower_bytes: tail.lower_bytes + full_lower.len(),
        last_char: prev,
    }
}

/// The first position of each gram seen: plain arrays for ASCII (most text, and no hashing
/// per character), a map for the rest.
struct FirstSeen {
    one: Vec<usize>,
    two: Vec<usize>,
    /// Grams with a character past ASCII, keyed by [`gram_key`].
    other: HashMap<u64, usize, BuildHasherDefault<GramHasher>>,
}

/// A gram as one number: its first character in the high half, its second (or `u32::MAX`
/// for a one-character gram) in the low half.
fn gram_key(a: char, b: Option<char>) -> u64 {
    (u64::from(a as u32) << 32) | u64::from(b.map_or(u32::MAX, |b| b as u32))
}

fn gram_of_key(k: u64) -> (char, Option<char>) {
    let a = char::from_u32((k >> 32) as u32).unwrap_or(char::REPLACEMENT_CHARACTER);
    let b = k as u32;
    (a, (b != u32::MAX).then(|| char::from_u32(b).unwrap_or(char::REPLACEMENT_CHARACTER)))
}

/// A hasher for [`gram_key`]s (one multiply and a rotation, as rustc's FxHash): the default
/// SipHash took a tenth of an import's time noting the grams of Chinese text. A crafted text
/// could make its grams collide: that costs indexing time, never a wrong result.
#[derive(Default)]
struct GramHasher(u64);

impl Hasher for GramHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0xf135_7aea_2e62_a9c5);
    }

    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

impl Default for FirstSeen {
    fn default() -> Self {
        FirstSeen { one: vec![usize::MAX; 128], two: vec![usize::MAX; 128 * 128], other: HashMap::default() }
    }
}

impl FirstSeen {
    fn note(&mut self, a: char, b: Option<char>, pos: usize) {
        let slot = match b {
            None if a.is_ascii() => &mut self.one[a as usize],
            Some(b) if a.is_ascii() && b.is_ascii() => &mut self.two[(a as usize) * 128 + b as usize],
            _ => self.other.entry(gram_key(a, b)).or_insert(usize::MAX),
        };
        if pos < *slot {
            *slot = pos;
        }
    }

    fn into_sorted(self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for (i, &pos) in self.one.iter().enumerate() {
            if pos != usize::MAX {
                out.push((char::from(i as u8).to_string(), pos));
            }
        }
        for (i, &pos) in self.two.iter().enumerate() {
            if pos != usize::MAX {
                out.push(([char::from((i / 128) as u8), char::from((i % 128) as u8)].iter().collect(), pos));
            }
        }
        for (k, pos) in self.other {
            let (a, b) = gram_of_key(k);
            let mut g = String::with_capacity(8);
            g.push(a);
            g.extend(b);
            out.push((g, pos));
        }
        out.sort_unstable();
        out
    }
}

/// The distinct grams of an indexed text, as [`index_text`] lists them (to delete its
/// postings). `lowers` are the lower-cased pieces in order.
pub fn grams_of<'a>(lowers: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen = FirstSeen::default();
    let mut prev: Option<char> = None;
    for piece in lowers {
        for c in piece.chars() {
            seen.note(c, None, 0);
            if let Some(p) = prev {
                seen.note(p, Some(c), 0);
            }
            prev = Some(c);
        }
    }
    seen.into_sorted().into_iter().map(|(g, _)| g).collect()
}

/// The grams a lower-cased, non-empty query needs, each with its byte offset in the query:
/// the query itself when it has one or two characters, else its distinct two-character grams
/// (first offset of each).
pub fn query_grams(q: &str) -> Vec<(String, usize)> {
    let chars: Vec<(usize, char)> = q.char_indices().collect();
    if chars.len() <= 2 {
        return if q.is_empty() { Vec::new() } else { vec![(q.to_owned(), 0)] };
    }
    let mut out: Vec<(String, usize)> = Vec::new();
    for w in chars.windows(2) {
        let g: String = [w[0].1, w[1].1].iter().collect();
        if !out.iter().any(|(h, _)| *h == g) {
            out.push((g, w[0].0));
        }
    }
    out
}

/// Whether a query is answered by the index alone (its grams' first position is the hit).
pub fn exact_by_index(q: &str) -> bool {
    let mut it = q.chars();
    it.next().is_some() && it.nth(1).is_none()
}

/// Finds the first occurrence of a lower-cased query in lower-cased pieces fed in order,
/// across piece boundaries.
pub struct Finder<'q> {
    needle: &'q [u8],
    finder: memchr::memmem::Finder<'q>,
    /// The last `needle.len() - 1` bytes seen so far, and where they start.
    carry: Vec<u8>,
    carry_start: usize,
    /// Hits before this byte position do not count.
    from: usize,
}

impl<'q> Finder<'q> {
    pub fn new(q: &'q str, from: usize) -> Self {
        Finder {
            needle: q.as_bytes(),
            finder: memchr::memmem::Finder::new(q.as_bytes()),
            carry: Vec::new(),
            carry_start: 0,
            from,
        }
    }

    /// Feed the next piece (`start`: its position in the whole lower-cased text). Returns the
    /// position of the first hit at or after `from`, once one is seen.
    pub fn feed(&mut self, start: usize, lower: &[u8]) -> Option<usize> {
        let (buf_start, hit) = if self.carry.is_empty() || self.carry_start + self.carry.len() != start {
            (start, self.search(start, lower))
        } else {
            let mut buf = std::mem::take(&mut self.carry);
            buf.extend_from_slice(lower);
            let s = self.carry_start;
            let hit = self.search(s, &buf);
            self.carry = buf;
            (s, hit)
        };
        if hit.is_some() {
            return hit;
        }
        // keep the tail that could start a hit completed by the next piece
        let keep = self.needle.len().saturating_sub(1);
        let whole: Vec<u8> =
            if buf_start == start { lower.to_vec() } else { std::mem::take(&mut self.carry) };
        let cut = whole.len().saturating_sub(keep);
        self.carry = whole[cut..].to_vec();
        self.carry_start = buf_start + cut;
        None
    }

    fn search(&self, buf_start: usize, buf: &[u8]) -> Option<usize> {
        let skip = self.from.saturating_sub(buf_start);
        if skip > buf.len() {
            return None;
        }
        self.finder.find(&buf[skip..]).map(|i| buf_start + skip + i)
    }
}

/// The snippet for a hit (storage-model §5.3), cut from the pieces around it: `piece` holds
/// the hit's first byte (lower-cased bytes `hit .. hit + hit_len`); `prev(start)` / `next(start)`
/// give the piece before / after the one starting at `start` (`None` at either end of the
/// text). Only the characters up to the hit's end are walked; the context on either side is
/// taken from neighbouring pieces only when the hit's own piece lacks it. `Ok(None)` when the
/// bytes cut are not UTF-8 (damage: the host only stores strings).
pub fn snippet_around<E>(
    hit: usize,
    hit_len: usize,
    piece: Span,
    mut prev: impl FnMut(usize) -> Result<Option<Span>, E>,
    mut next: impl FnMut(usize) -> Result<Option<Span>, E>,
) -> Result<Option<String>, E> {
    let (mut first_start, mut last_start) = (piece.start, piece.start);
    let mut text = piece.text;
    // the hit's characters, as byte offsets in `text`: the first and one past the last
    let (first, mut end) = hit_bytes(&text, piece.start, hit, hit_len);
    while end.is_none() {
        let Some(p) = next(last_start)? else { break };
        last_start = p.start;
        let from = text.len();
        text.extend_from_slice(&p.text);
        end = hit_bytes(&text[from..], p.start, hit, hit_len).1.map(|e| from + e);
    }
    let (mut first, mut end) = (first.unwrap_or(0), end.unwrap_or(text.len()));
    // one character more than the snippet shows on each side, so a cut is seen as a cut
    while chars_after(&text, end, SNIPPET_AFTER + 1).1 <= SNIPPET_AFTER {
        let Some(p) = next(last_start)? else { break };
        last_start = p.start;
        text.extend_from_slice(&p.text);
    }
    while chars_before(&text, first, SNIPPET_BEFORE + 1).1 <= SNIPPET_BEFORE {
        let Some(p) = prev(first_start)? else { break };
        first_start = p.start;
        first += p.text.len();
        end += p.text.len();
        text.splice(0..0, p.text);
    }
    Ok(cut(&text, first, end))
}

/// The snippet for a hit when the hit's own piece holds it with all its context: `text` is the
/// piece's original text as stored (UTF-8 bytes, checked only where the snippet is cut), whose
/// lower-cased form starts at `start`; `first_piece` / `last_piece` say whether the session's
/// text begins / ends with it. `None` when the context runs into a neighbouring piece (or the
/// bytes there are not UTF-8): then [`snippet_around`] fetches the neighbours. Most hits are
/// answered here without copying the piece.
pub fn snippet_in_piece(
    text: &[u8],
    start: usize,
    hit: usize,
    hit_len: usize,
    first_piece: bool,
    last_piece: bool,
) -> Option<String> {
    let (first, end) = hit_bytes(text, start, hit, hit_len);
    let (first, end) = (first?, end?);
    // one character more than the snippet shows on each side, so a cut is seen as a cut
    let (from, before) = chars_before(text, first, SNIPPET_BEFORE + 1);
    if before <= SNIPPET_BEFORE && !first_piece {
        return None;
    }
    let (to, after) = chars_after(text, end, SNIPPET_AFTER + 1);
    if after <= SNIPPET_AFTER && !last_piece {
        return None;
    }
    let (from, to, head, tail) = shown(text, (from, before), (to, after));
    Some(render(std::str::from_utf8(&text[from..to]).ok()?, head, tail))
}

/// Where a hit covering lower-cased bytes `hit .. hit + hit_len` lies in `bytes` (UTF-8, whose
/// lower-cased form starts at `start`): the byte offset of its first character, if `bytes`
/// holds it, and one past its last, if `bytes` holds the whole hit. A byte that does not start
/// a UTF-8 character counts as one byte both ways.
fn hit_bytes(bytes: &[u8], start: usize, hit: usize, hit_len: usize) -> (Option<usize>, Option<usize>) {
    let hit_end = hit + hit_len;
    let mut first = None;
    let (mut i, mut pos) = (0, start);
    while i < bytes.len() {
        if pos >= hit_end {
            return (first, Some(i));
        }
        // whole 16-byte blocks before the hit with no character that changes length when
        // lower-cased: lower-cased offsets advance with the bytes (a block may end inside such a
        // character; `i` is then moved back to its first byte)
        if pos + 16 <= hit
            && bytes.get(i..i + 16).and_then(|b| b.try_into().ok()).is_some_and(same_length_block)
        {
            let mut skip = 16;
            while skip > 0 && i + skip < bytes.len() && bytes[i + skip] & 0xc0 == 0x80 {
                skip -= 1;
            }
            if skip > 0 {
                i += skip;
                pos += skip;
                continue;
            }
        }
        // (UTF-8 length, lower-cased UTF-8 length) of the character at `i`, read off its lead
        // byte for ASCII and the caseless blocks (U+3000–U+9FFF: E3–E9; U+B000–U+CFFF, Hangul:
        // EB–EC), which are most of the text; decoded otherwise
        let (len, lowered) = match bytes[i] {
            0..=0x7f => (1, 1),
            0xe3..=0xe9 | 0xeb..=0xec => (3, 3),
            _ => char_at(bytes, i).map_or((1, 1), |c| (c.len_utf8(), lowered_len(c))),
        };
        let next = pos + lowered;
        if pos <= hit && hit < next {
            first = Some(i);
        }
        pos = next;
        i += len;
    }
    (first, (pos >= hit_end).then_some(bytes.len()))
}

/// The UTF-8 character starting at byte `i`, if one does.
fn char_at(bytes: &[u8], i: usize) -> Option<char> {
    let w = &bytes[i..bytes.len().min(i + 4)];
    let valid = match std::str::from_utf8(w) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&w[..e.valid_up_to()]).ok()?,
    };
    valid.chars().next()
}

/// Whether a byte can be part of a character whose lower-cased form has the same UTF-8 bytes
/// length, as far as this byte tells: ASCII, continuation bytes, and the lead bytes of the
/// caseless blocks U+3000–U+9FFF (E3–E9) and U+B000–U+CFFF (EB–EC).
fn same_length_byte(b: u8) -> bool {
    // `|`, not `||`: no branches
    (b < 0xc0) | (b.wrapping_sub(0xe3) < 7) | (b.wrapping_sub(0xeb) < 2)
}

/// [`same_length_byte`] for 16 bytes, tested without branches (so the test is vectorised).
fn same_length_block(block: &[u8; 16]) -> bool {
    block.iter().fold(true, |ok, &b| ok & same_length_byte(b))
}

/// The byte offset `n` characters before `at` (or 0) and how many characters that is
/// (`text` is UTF-8 and `at` a character boundary).
fn chars_before(text: &[u8], at: usize, n: usize) -> (usize, usize) {
    let (mut i, mut count) = (at, 0);
    while count < n && i > 0 {
        i -= 1;
        while i > 0 && text[i] & 0xc0 == 0x80 {
            i -= 1;
        }
        count += 1;
    }
    (i, count)
}

/// The byte offset `n` characters after `at` (or the end) and how many characters that is.
fn chars_after(text: &[u8], at: usize, n: usize) -> (usize, usize) {
    let (mut i, mut count) = (at, 0);
    while count < n && i < text.len() {
        i += 1;
        while i < text.len() && text[i] & 0xc0 == 0x80 {
            i += 1;
        }
        count += 1;
    }
    (i, count)
}

/// The snippet for a hit cut from `text`, a run of the original text whose lower-cased form
/// starts at `text_start`; the hit covers lower-cased bytes `hit .. hit + hit_len`.
pub fn snippet_in(text: &str, text_start: usize, hit: usize, hit_len: usize) -> String {
    let (first, end) = hit_bytes(text.as_bytes(), text_start, hit, hit_len);
    // a `str` is UTF-8 and the offsets are its character boundaries: `cut` cannot refuse it
    cut(text.as_bytes(), first.unwrap_or(0), end.unwrap_or(text.len())).unwrap_or_default()
}

/// §5.3's cut of the hit `text[first..end]`: up to [`SNIPPET_BEFORE`] characters before it
/// and [`SNIPPET_AFTER`] after, whitespace runs collapsed to one space, `…` where `text` goes
/// on. `None` when the bytes cut are not UTF-8.
fn cut(text: &[u8], first: usize, end: usize) -> Option<String> {
    let (from, to, head, tail) =
        shown(text, chars_before(text, first, SNIPPET_BEFORE + 1), chars_after(text, end, SNIPPET_AFTER + 1));
    Some(render(std::str::from_utf8(&text[from..to]).ok()?, head, tail))
}

/// The bytes a snippet shows, from the walks one character past what it shows on each side
/// (`chars_before(…, SNIPPET_BEFORE + 1)`, `chars_after(…, SNIPPET_AFTER + 1)`): `from`, `to`,
/// and whether the text goes on before / after them.
fn shown(
    text: &[u8],
    (from, before): (usize, usize),
    (to, after): (usize, usize),
) -> (usize, usize, bool, bool) {
    let (head, tail) = (before > SNIPPET_BEFORE, after > SNIPPET_AFTER);
    let from = if head { chars_after(text, from, 1).0 } else { from };
    let to = if tail { chars_before(text, to, 1).0 } else { to };
    (from, to, head, tail)
}

/// A snippet's text: `shown` with whitespace runs collapsed to one space, `…` before it when
/// the text goes on before it (`head`), after it when it goes on after (`tail`).
fn render(shown: &str, head: bool, tail: bool) -> String {
    let mut out = String::with_capacity(shown.len() + 8);
    if head {
        out.push('…');
    }
    // runs of whitespace become one space; the text between them is copied whole, and so is
    // a run that is one space already (most runs, in prose)
    let bytes = shown.as_bytes();
    let space_at = |i: usize| if MAY_START_SPACE[usize::from(bytes[i])] { space_len(bytes, i) } else { 0 };
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        let n = space_at(i);
        if n == 0 {
            i += 1;
            continue;
        }
        let mut end = i + n;
        while end < bytes.len() {
            match space_at(end) {
                0 => break,
                m => end += m,
            }
        }
        if end - i > 1 || bytes[i] != b' ' {
            out.push_str(&shown[copied..i]);
            out.push(' ');
            copied = end;
        }
        i = end;
    }
    out.push_str(&shown[copied..]);
    if tail {
        out.push('…');
    }
    out
}

/// The bytes that can start a whitespace character ([`space_len`]): `\t`–`\r`, space, and the
/// lead bytes C2, E1, E2, E3 and EF.
const MAY_START_SPACE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = matches!(b, 0x09..=0x0d | 0x20 | 0xc2 | 0xe1 | 0xe2 | 0xe3 | 0xef);
        b += 1;
    }
    t
};

/// The UTF-8 length of the whitespace character (`is_js_space`: Unicode White_Space and U+FEFF)
/// starting at byte `i` of `b`, or 0, read off the bytes: only ASCII and the lead bytes C2, E1,
/// E2, E3 and EF can start one.
fn space_len(b: &[u8], i: usize) -> usize {
    let next = |k: usize| b.get(i + k).copied().unwrap_or(0);
    match b[i] {
        b'\t'..=b'\r' | b' ' => 1,
        0xc2 if matches!(next(1), 0x85 | 0xa0) => 2,
        0xe1 if (next(1), next(2)) == (0x9a, 0x80) => 3,
        0xe2 if matches!((next(1), next(2)), (0x80, 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf) | (0x81, 0x9f)) => 3,
        0xe3 if (next(1), next(2)) == (0x80, 0x80) => 3,
        0xef if (next(1), next(2)) == (0xbb, 0xbf) => 3,
        _ => 0,
    }
}

/// UTF-8 length of a character's lower-case mapping, with fast paths for ASCII and for the
/// CJK blocks, which have no case.
fn lowered_len(c: char) -> usize {
    if c.is_ascii() {
        1
    } else if ('\u{3000}'..='\u{9fff}').contains(&c) || ('\u{ac00}'..='\u{d7a3}').contains(&c) {
        3
    } else {
        c.to_lowercase().map(char::len_utf8).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::sessions::snippet;
    use crate::domain::text::is_js_space;
    use proptest::prelude::*;

    #[test]
    fn space_len_agrees_with_is_js_space_for_every_character() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let b = c.encode_utf8(&mut buf).as_bytes();
            let want = if is_js_space(c) { b.len() } else { 0 };
            assert_eq!(space_len(b, 0), want, "U+{:04X}", c as u32);
            if want > 0 {
                assert!(MAY_START_SPACE[usize::from(b[0])], "U+{:04X}", c as u32);
            }
        }
    }

    #[test]
    fn same_length_bytes_are_those_of_characters_lower_cased_to_the_same_length() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let b = c.encode_utf8(&mut buf).as_bytes();
            if b.iter().all(|&x| same_length_byte(x)) {
                assert_eq!(
                    c.to_lowercase().map(char::len_utf8).sum::<usize>(),
                    b.len(),
                    "U+{:04X}",
                    c as u32
                );
            }
        }
    }

    /// The index's answer for `q` over `text` indexed in `parts` (each appended to the last),
    /// computed the way the store does it, with every piece at hand.
    fn search(parts: &[&str], q: &str, piece_bytes: usize) -> Option<String> {
        let mut pieces: Vec<Piece> = Vec::new();
        let mut postings: HashMap<String, usize> = HashMap::new();
        let mut tail = Tail::default();
        for p in parts {
            let ix = index_text_with(p, tail, piece_bytes);
            for (g, pos) in ix.grams {
                postings.entry(g).or_insert(pos);
            }
            tail = Tail { lower_bytes: ix.lower_bytes, last_char: ix.last_char };
            pieces.extend(ix.pieces);
        }
        let q = lower(q);
        let mut from = 0;
        for (g, off) in query_grams(&q) {
            from = from.max(postings.get(&g)?.saturating_sub(off));
        }
        let first = pieces.partition_point(|p| p.start <= from).saturating_sub(1);
        let mut f = Finder::new(&q, from);
        let hit = pieces[first..].iter().find_map(|p| f.feed(p.start, p.lower.as_bytes()))?;
        if exact_by_index(&q) {
            assert_eq!(hit, from, "a one- or two-character query's first hit is its gram's position");
        }
        let at = pieces.partition_point(|p| p.start <= hit) - 1;
        let span = |p: &Piece| Span { start: p.start, text: p.text.clone().into_bytes() };
        let before = |start: usize| -> Result<Option<Span>, ()> {
            let i = pieces.partition_point(|p| p.start < start);
            Ok(i.checked_sub(1).map(|i| span(&pieces[i])))
        };
        let after = |start: usize| -> Result<Option<Span>, ()> {
            Ok(pieces.get(pieces.partition_point(|p| p.start <= start)).map(span))
        };
        snippet_around(hit, q.len(), span(&pieces[at]), before, after).unwrap()
    }

    #[test]
    fn pieces_cut_at_char_boundaries_and_line_up_with_the_lower_case() {
        let text = "Ab中文İx ΣΑΣ".repeat(50);
        let ix = index_text_with(&text, Tail::default(), 7);
        let joined: String = ix.pieces.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(joined, text);
        let joined_lower: String = ix.pieces.iter().map(|p| p.lower.as_str()).collect();
        assert_eq!(joined_lower, lower(&text));
        let mut at = 0;
        for p in &ix.pieces {
            assert_eq!(p.start, at);
            assert!(p.text.len() + p.lower.len() >= 7 || p == ix.pieces.last().unwrap());
            at += p.lower.len();
        }
        assert_eq!(ix.lower_bytes, at);
    }

    #[test]
    fn grams_hold_first_positions_including_across_appends() {
        let a = index_text("abc", Tail::default());
        let pos: HashMap<_, _> = a.grams.iter().cloned().collect();
        assert_eq!(pos["a"], 0);
        assert_eq!(pos["bc"], 1);
        assert_eq!(a.last_char, Some('c'));
        let b = index_text("Da", Tail { lower_bytes: a.lower_bytes, last_char: a.last_char });
        let pos: HashMap<_, _> = b.grams.iter().cloned().collect();
        assert_eq!(pos["cd"], 2, "the bigram across the append starts at the old last char");
        assert_eq!(pos["d"], 3);
        assert_eq!(b.pieces[0].start, 3);
        assert_eq!(grams_of(["abc", "da"]).len(), 4 + 4);
    }

    #[test]
    fn grams_past_ascii_keep_their_characters_and_first_positions() {
        // one-character and mixed grams past ASCII go through the numeric keys
        let a = index_text("文件a文件😀文", Tail::default());
        let pos: HashMap<_, _> = a.grams.iter().cloned().collect();
        assert_eq!(pos["文"], 0);
        assert_eq!(pos["文件"], 0);
        assert_eq!(pos["件a"], 3);
        assert_eq!(pos["a文"], 6);
        assert_eq!(pos["件😀"], 10);
        assert_eq!(pos["😀"], 13);
        assert_eq!(pos["😀文"], 13);
        assert_eq!(a.grams.len(), 9, "{:?}", a.grams);
        assert!(a.grams.windows(2).all(|w| w[0] < w[1]), "sorted, each once");
        for (x, y) in [('文', None), ('a', Some('😀')), ('\u{10ffff}', Some('\0'))] {
            assert_eq!(gram_of_key(gram_key(x, y)), (x, y));
        }
    }

    #[test]
    fn the_caseless_fast_path_is_exact() {
        for c in ('\u{3000}'..='\u{9fff}').chain('\u{ac00}'..='\u{d7a3}') {
            assert!(c.to_lowercase().eq(std::iter::once(c)), "{c:?} has a lower-case mapping");
            assert_eq!(lowered_len(c), c.len_utf8());
        }
    }

    #[test]
    fn queries_use_the_whole_query_or_its_bigrams() {
        assert_eq!(query_grams("鲸"), vec![("鲸".to_owned(), 0)]);
        assert_eq!(query_grams("琥珀"), vec![("琥珀".to_owned(), 0)]);
        assert_eq!(query_grams("aaaa"), vec![("aa".to_owned(), 0)]);
        assert_eq!(query_grams("quill").len(), 4);
        assert!(exact_by_index("ab") && !exact_by_index("abc") && !exact_by_index(""));
    }

    #[test]
    fn finder_sees_hits_across_pieces_and_respects_from() {
        let mut f = Finder::new("needle", 0);
        assert_eq!(f.feed(0, b"xxnee"), None);
        assert_eq!(f.feed(5, b"dlexx"), Some(2));
        let mut f = Finder::new("ab", 3);
        assert_eq!(f.feed(0, b"ab ab"), Some(3));
    }

    #[test]
    fn index_answers_match_the_whole_text_scan() {
        let text = format!("{}\n\nNeedle  here{}", "a".repeat(100), "b".repeat(100));
        for q in ["needle", "e", "ne", "here", "ab", "zz", "b\n"] {
            assert_eq!(search(&[&text], q, 16), snippet(&text, &lower(q)), "query {q:?}");
        }
        let cjk = "我们的数据缓存。鲸鱼 Whale 琥珀\n".repeat(30);
        for q in ["鲸", "琥珀", "whale", "WHALE 琥", "存。鲸"] {
            assert_eq!(search(&[&cjk, "tail 鲸\n"], q, 10), snippet(&format!("{cjk}tail 鲸\n"), &lower(q)));
        }
    }

    proptest! {
        #[test]
        fn index_search_equals_scanning_the_whole_text(
            parts in proptest::collection::vec("[aAbΣσς İi̇中文 \n]{0,40}\n", 1..4),
            q in "[aAbΣσς İi̇中文 \n]{1,5}",
            piece in 1usize..24,
        ) {
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            let whole: String = parts.concat();
            let ql = lower(&q);
            prop_assume!(!crate::domain::text::js_trim(&ql).is_empty());
            prop_assert_eq!(search(&refs, &q, piece), snippet(&whole, &ql));
        }
    }
}
