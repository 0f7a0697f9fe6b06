//! markdownChunks (storage-model §7.4, §11.22): split Markdown into chunks of at most `size`
//! UTF-16 units along units that must not be cut (fenced blocks, tables, lines).

use super::text::{cut_u16, js_trim, u16_len};

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

/// Split an oversized line at `size` units on code-point boundaries.
fn split_line(line: &str, size: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = line;
    while u16_len(rest) > size {
        let mut head = cut_u16(rest, size);
        if head.is_empty() {
            // a single char wider than `size`: take it whole rather than loop forever
            let c = rest.chars().next().map(char::len_utf8).unwrap_or(rest.len());
            head = &rest[..c];
        }
        out.push(Piece { text: head.to_owned(), fragment: true });
        rest = &rest[head.len()..];
    }
    out.push(Piece { text: rest.to_owned(), fragment: true });
    out
}

/// Split an oversized table between rows; continuation pieces repeat the first two rows. No
/// piece exceeds `size` (§11.22 wins): a continuation row that does not fit even with the header
/// goes out without it, and a row longer than `size` is split like a long line.
fn split_table(rows: &[&str], size: usize) -> Vec<Piece> {
    if rows.len() <= 2 {
        return split_line_or_whole(&rows.join("\n"), size);
    }
    let header = &rows[..2];
    let mut pieces: Vec<Piece> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    // rows of `current` that are data rather than the repeated header
    let mut data_rows = 0usize;
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
            data_rows = 0;
            continue;
        }
        let mut candidate = current.clone();
        candidate.push(row);
        if joined_len(&candidate) <= size {
            current.push(row);
            data_rows += usize::from(i >= 2);
            continue;
        }
        // does not fit: close the piece (unless it holds only a repeated header)
        if data_rows > 0 || i < 2 {
            flush(&mut current, &mut pieces);
        } else {
            current.clear();
        }
        let mut with_header = header.to_vec();
        with_header.push(row);
        if joined_len(&with_header) <= size {
            current = with_header;
        } else {
            current = vec![row];
        }
        data_rows = 1;
    }
    if data_rows > 0 || pieces.is_empty() {
        flush(&mut current, &mut pieces);
    }
    pieces
}

fn split_line_or_whole(text: &str, size: usize) -> Vec<Piece> {
    if text.contains('\n') || u16_len(text) <= size {
        vec![Piece { text: text.to_owned(), fragment: false }]
    } else {
        split_line(text, size)
    }
}

fn finish(chunk: &mut Vec<Piece>, out: &mut Vec<String>) {
    if chunk.is_empty() {
        return;
    }
    let ends_in_fragment = chunk.last().is_some_and(|p| p.fragment);
    let text = chunk.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n");
    chunk.clear();
    if ends_in_fragment {
        out.push(text);
        return;
    }
    let mut lines: Vec<&str> = text.split('\n').collect();
    while lines.last().is_some_and(|l| js_trim(l).is_empty()) {
        lines.pop();
    }
    if !lines.is_empty() {
        out.push(lines.join("\n"));
    }
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
}
