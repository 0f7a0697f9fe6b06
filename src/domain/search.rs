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

use super::sessions::{SNIPPET_AFTER, SNIPPET_BEFORE};
use super::text::{is_js_space, lower};

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

/// A piece's original text and where its lower-cased form starts: what a snippet needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub text: String,
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
    other: HashMap<(char, Option<char>), usize>,
}

impl Default for FirstSeen {
    fn default() -> Self {
        FirstSeen { one: vec![usize::MAX; 128], two: vec![usize::MAX; 128 * 128], other: HashMap::new() }
    }
}

impl FirstSeen {
    fn note(&mut self, a: char, b: Option<char>, pos: usize) {
        let slot = match b {
            None if a.is_ascii() => &mut self.one[a as usize],
            Some(b) if a.is_ascii() && b.is_ascii() => &mut self.two[(a as usize) * 128 + b as usize],
            _ => self.other.entry((a, b)).or_insert(usize::MAX),
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
        for ((a, b), pos) in self.other {
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
/// taken from neighbouring pieces only when the hit's own piece lacks it.
pub fn snippet_around<E>(
    hit: usize,
    hit_len: usize,
    piece: Span,
    mut prev: impl FnMut(usize) -> Result<Option<Span>, E>,
    mut next: impl FnMut(usize) -> Result<Option<Span>, E>,
) -> Result<String, E> {
    let (mut first_start, mut last_start) = (piece.start, piece.start);
    let mut text = piece.text;
    // the hit's characters, as byte offsets in `text`: the first and one past the last
    let (first, mut end) = hit_bytes(&text, piece.start, hit, hit_len);
    while end.is_none() {
        let Some(p) = next(last_start)? else { break };
        last_start = p.start;
        let from = text.len();
        text.push_str(&p.text);
        end = hit_bytes(&text[from..], p.start, hit, hit_len).1.map(|e| from + e);
    }
    let (mut first, mut end) = (first.unwrap_or(0), end.unwrap_or(text.len()));
    // one character more than the snippet shows on each side, so a cut is seen as a cut
    while chars_after(&text, end, SNIPPET_AFTER + 1).1 <= SNIPPET_AFTER {
        let Some(p) = next(last_start)? else { break };
        last_start = p.start;
        text.push_str(&p.text);
    }
    while chars_before(&text, first, SNIPPET_BEFORE + 1).1 <= SNIPPET_BEFORE {
        let Some(p) = prev(first_start)? else { break };
        first_start = p.start;
        first += p.text.len();
        end += p.text.len();
        text.insert_str(0, &p.text);
    }
    Ok(cut(&text, first, end))
}

/// Where a hit covering lower-cased bytes `hit .. hit + hit_len` lies in `text` (whose
/// lower-cased form starts at `start`): the byte offset of its first character, if `text`
/// holds it, and one past its last, if `text` holds the whole hit.
fn hit_bytes(text: &str, start: usize, hit: usize, hit_len: usize) -> (Option<usize>, Option<usize>) {
    let hit_end = hit + hit_len;
    let mut first = None;
    let mut pos = start;
    for (i, c) in text.char_indices() {
        if pos >= hit_end {
            return (first, Some(i));
        }
        let next = pos + lowered_len(c);
        if pos <= hit && hit < next {
            first = Some(i);
        }
        pos = next;
    }
    (first, (pos >= hit_end).then_some(text.len()))
}

/// The byte offset `n` characters before `at` (or 0) and how many characters that is.
fn chars_before(text: &str, at: usize, n: usize) -> (usize, usize) {
    let mut from = at;
    let mut count = 0;
    for (i, _) in text[..at].char_indices().rev().take(n) {
        from = i;
        count += 1;
    }
    (from, count)
}

/// The byte offset `n` characters after `at` (or the end) and how many characters that is.
fn chars_after(text: &str, at: usize, n: usize) -> (usize, usize) {
    let mut count = 0;
    let mut to = at;
    for c in text[at..].chars().take(n) {
        to += c.len_utf8();
        count += 1;
    }
    (to, count)
}

/// The snippet for a hit cut from `text`, a run of the original text whose lower-cased form
/// starts at `text_start`; the hit covers lower-cased bytes `hit .. hit + hit_len`.
pub fn snippet_in(text: &str, text_start: usize, hit: usize, hit_len: usize) -> String {
    let (first, end) = hit_bytes(text, text_start, hit, hit_len);
    cut(text, first.unwrap_or(0), end.unwrap_or(text.len()))
}

/// §5.3's cut of the hit `text[first..end]`: up to [`SNIPPET_BEFORE`] characters before it
/// and [`SNIPPET_AFTER`] after, whitespace runs collapsed to one space, `…` where `text` goes
/// on.
fn cut(text: &str, first: usize, end: usize) -> String {
    let (from, before) = chars_before(text, first, SNIPPET_BEFORE + 1);
    let (to, after) = chars_after(text, end, SNIPPET_AFTER + 1);
    let from = if before > SNIPPET_BEFORE { chars_before(text, first, SNIPPET_BEFORE).0 } else { from };
    let to = if after > SNIPPET_AFTER { chars_after(text, end, SNIPPET_AFTER).0 } else { to };
    let mut out = String::with_capacity(to - from + 8);
    if before > SNIPPET_BEFORE {
        out.push('…');
    }
    let mut in_space = false;
    for c in text[from..to].chars() {
        if is_js_space(c) {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    if after > SNIPPET_AFTER {
        out.push('…');
    }
    out
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
    use proptest::prelude::*;

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
        let span = |p: &Piece| Span { start: p.start, text: p.text.clone() };
        let before = |start: usize| -> Result<Option<Span>, ()> {
            let i = pieces.partition_point(|p| p.start < start);
            Ok(i.checked_sub(1).map(|i| span(&pieces[i])))
        };
        let after = |start: usize| -> Result<Option<Span>, ()> {
            Ok(pieces.get(pieces.partition_point(|p| p.start <= start)).map(span))
        };
        Some(snippet_around(hit, q.len(), span(&pieces[at]), before, after).unwrap())
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
