//! markdownChunks (storage-model §7.4, §11.22): split Markdown into chunks of at most `size`
//! UTF-16 units along units that must not be cut (fenced blocks, tables, lines).

use super::text::{js_trim, u16_len};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fence,
    Table,
    Line,
}

fn fence_char(line: &str) -> Option<char> {
    let t = line.trim_start_matches(super::text::is_js_space);
    if t.starts_with("```") {
        Some('`')
    } else if t.starts_with("~~~") {
        Some('~')
    } else {
        None
    }
}

fn closes_fence(line: &str, c: char) -> bool {
    let t = js_trim(line);
    t.chars().count() >= 3 && t.chars().all(|x| x == c)
}

fn is_table_line(line: &str) -> bool {
    line.trim_start_matches(super::text::is_js_space).starts_with('|')
}

/// Split the text into units (§7.4).
fn units(text: &str) -> Vec<(Kind, Vec<&str>)> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(c) = fence_char(line) {
            let mut j = i + 1;
            while j < lines.len() && !closes_fence(lines[j], c) {
                j += 1;
            }
            let end = (j + 1).min(lines.len());
            out.push((Kind::Fence, lines[i..end].to_vec()));
            i = end;
        } else if is_table_line(line) {
            let mut j = i;
            while j < lines.len() && is_table_line(lines[j]) {
                j += 1;
            }
            out.push((Kind::Table, lines[i..j].to_vec()));
            i = j;
        } else {
            out.push((Kind::Line, vec![line]));
            i += 1;
        }
    }
    out
}

fn joined_len(lines: &[&str]) -> usize {
    lines.iter().map(|l| u16_len(l)).sum::<usize>() + lines.len().saturating_sub(1)
}

/// A piece of a chunk: a whole unit, or a fragment of a line longer than the chunk size.
/// Fragments are never trimmed or dropped (they may be all spaces, but they are part of a
/// non-blank line).
struct Piece {
    text: String,
    fragment: bool,
}

/// Split an oversized line at `size` units on code-point boundaries, in one pass. Every piece
/// is non-empty; a single character wider than `size` goes out whole.
fn split_line(line: &str, size: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    let (mut start, mut len) = (0usize, 0usize);
    for (i, c) in line.char_indices() {
        let w = c.len_utf16();
        if len > 0 && len + w > size {
            out.push(Piece { text: line[start..i].to_owned(), fragment: true });
            (start, len) = (i, 0);
        }
        len += w;
    }
    if start < line.len() || out.is_empty() {
        out.push(Piece { text: line[start..].to_owned(), fragment: true });
    }
    out
}

/// Split an oversized table between rows. Every continuation piece (one that starts at a row
/// past the first two) starts with the table's first two rows when they fit beside that row; no
/// piece exceeds `size` (§11.22 wins over the repeated header), and a row longer than `size` is
/// split like a long line.
fn split_table(rows: &[&str], size: usize) -> Vec<Piece> {
    let header = &rows[..rows.len().min(2)];
    let mut pieces: Vec<Piece> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let flush = |current: &mut Vec<&str>, pieces: &mut Vec<Piece>| {
        if !current.is_empty() {
            pieces.push(Piece { text: current.join("\n"), fragment: false });
            current.clear();
        }
    };
    for (i, row) in rows.iter().enumerate() {
        if u16_len(row) > size {
            flush(&mut current, &mut pieces);
            pieces.extend(split_line(row, size));
            continue;
        }
        if !current.is_empty() && joined_len(&current) + 1 + u16_len(row) <= size {
            current.push(row);
            continue;
        }
        flush(&mut current, &mut pieces);
        current.push(row);
        if i >= 2 && joined_len(header) + 1 + u16_len(row) <= size {
            current.splice(0..0, header.iter().copied());
        }
    }
    flush(&mut current, &mut pieces);
    pieces
}

fn finish(chunk: &mut Vec<Piece>, out: &mut Vec<String>) {
    // (line, is a fragment of a long line): fragments are never trimmed, even when blank
    let mut lines: Vec<(&str, bool)> = Vec::new();
    for p in chunk.iter() {
        if p.fragment {
            lines.push((&p.text, true));
        } else {
            lines.extend(p.text.split('\n').map(|l| (l, false)));
        }
    }
    while lines.last().is_some_and(|&(l, fragment)| !fragment && js_trim(l).is_empty()) {
        lines.pop();
    }
    if !lines.is_empty() {
        out.push(lines.iter().map(|&(l, _)| l).collect::<Vec<_>>().join("\n"));
    }
    chunk.clear();
}

/// markdownChunks(text, size).
pub fn markdown_chunks(text: &str, size: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let size = size.max(1);
    let mut out = Vec::new();
    let mut chunk: Vec<Piece> = Vec::new();
    let mut chunk_len = 0usize;
    for (kind, lines) in units(text) {
        let unit = lines.join("\n");
        let len = u16_len(&unit);
        let pieces: Vec<Piece> = if len <= size {
            vec![Piece { text: unit, fragment: false }]
        } else {
            match kind {
                Kind::Fence => {
                    // an atomic fenced block: its own chunk, untruncated
                    finish(&mut chunk, &mut out);
                    chunk_len = 0;
                    let mut own = vec![Piece { text: unit, fragment: false }];
                    finish(&mut own, &mut out);
                    continue;
                }
                Kind::Table => split_table(&lines, size),
                Kind::Line => split_line(&unit, size),
            }
        };
        for p in pieces {
            let plen = u16_len(&p.text);
            if chunk.is_empty() || chunk_len + 1 + plen <= size {
                chunk_len += if chunk.is_empty() { plen } else { 1 + plen };
                chunk.push(p);
            } else {
                finish(&mut chunk, &mut out);
                chunk_len = plen;
                chunk.push(p);
            }
        }
    }
    finish(&mut chunk, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_join_until_the_size() {
        assert_eq!(markdown_chunks("aaa\nbbb\nccc", 7), vec!["aaa\nbbb", "ccc"]);
        assert!(markdown_chunks("", 10).is_empty());
        assert_eq!(markdown_chunks("a\n\n\n", 10), vec!["a"]);
    }

    #[test]
    fn fences_stay_whole_even_when_large() {
        let t = "intro\n```\nline1\nline2\n```\nafter";
        let c = markdown_chunks(t, 8);
        assert!(c.contains(&"```\nline1\nline2\n```".to_string()));
        let unclosed = "x\n~~~\ncode";
        assert_eq!(markdown_chunks(unclosed, 100), vec![unclosed]);
    }

    #[test]
    fn big_tables_split_between_rows_with_the_header_repeated() {
        let t = "|h|\n|-|\n|1|\n|2|\n|3|";
        let c = markdown_chunks(t, 11);
        assert_eq!(c, vec!["|h|\n|-|\n|1|", "|h|\n|-|\n|2|", "|h|\n|-|\n|3|"]);
    }

    #[test]
    fn long_lines_split_at_code_points() {
        let c = markdown_chunks(&"😀".repeat(5), 4);
        assert_eq!(c, vec!["😀😀", "😀😀", "😀"]);
        assert!(c.iter().all(|p| u16_len(p) <= 4));
    }

    // the four inputs the compaction fuzz target found (fuzz/artifacts/compaction)
    #[test]
    fn a_table_keeps_its_own_header_when_the_first_row_does_not_fit_beside_it() {
        assert_eq!(markdown_chunks("|a|\n|-|\n|1|", 8), vec!["|a|\n|-|", "|1|"]);
    }

    #[test]
    fn a_two_row_table_over_the_size_splits_between_its_rows() {
        assert_eq!(markdown_chunks("|aaaa|\n|bbbb|", 8), vec!["|aaaa|", "|bbbb|"]);
    }

    #[test]
    fn a_char_wider_than_the_size_leaves_no_empty_chunk() {
        assert_eq!(markdown_chunks("😀", 1), vec!["😀"]);
        assert_eq!(markdown_chunks("😀a", 1), vec!["😀", "a"]);
    }

    #[test]
    fn the_blank_tail_of_a_split_line_is_kept() {
        assert_eq!(markdown_chunks("abcd \n", 4), vec!["abcd", " "]);
    }

    #[test]
    fn rows_after_a_long_row_start_with_the_header_again() {
        let t = "|h|\n|-|\n|0123456789|\n|2|";
        assert_eq!(markdown_chunks(t, 11), vec!["|h|\n|-|", "|0123456789", "|", "|h|\n|-|\n|2|"]);
    }
}
