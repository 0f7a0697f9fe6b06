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

/// Split an oversized line at `size` units on code-point boundaries.
fn split_line(line: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while u16_len(rest) > size {
        let mut head = cut_u16(rest, size);
        if head.is_empty() {
            // a single char wider than `size`: take it whole rather than loop forever
            let c = rest.chars().next().map(char::len_utf8).unwrap_or(rest.len());
            head = &rest[..c];
        }
        out.push(head.to_owned());
        rest = &rest[head.len()..];
    }
    out.push(rest.to_owned());
    out
}

/// Split an oversized table between rows; continuation pieces repeat the first two rows.
fn split_table(rows: &[&str], size: usize) -> Vec<String> {
    if rows.len() <= 2 {
        return vec![rows.join("\n")];
    }
    let header = &rows[..2];
    let mut pieces = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let row = rows[i];
        let mut candidate = current.clone();
        candidate.push(row);
        let base = if pieces.is_empty() { 0 } else { 2 };
        if current.len() > base && joined_len(&candidate) > size {
            pieces.push(current.join("\n"));
            current = header.to_vec();
            continue;
        }
        current.push(row);
        i += 1;
    }
    if current.len() > if pieces.is_empty() { 0 } else { 2 } {
        pieces.push(current.join("\n"));
    }
    pieces
}

fn finish(chunk: &mut Vec<String>, out: &mut Vec<String>) {
    if chunk.is_empty() {
        return;
    }
    let text = chunk.join("\n");
    chunk.clear();
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
    let mut chunk: Vec<String> = Vec::new();
    let mut chunk_len = 0usize;
    for (kind, lines) in units(text) {
        let unit = lines.join("\n");
        let len = u16_len(&unit);
        let pieces: Vec<String> = if len <= size {
            vec![unit]
        } else {
            match kind {
                Kind::Fence => {
                    finish(&mut chunk, &mut out);
                    chunk_len = 0;
                    out.push(unit);
                    continue;
                }
                Kind::Table => split_table(&lines, size),
                Kind::Line => split_line(&unit, size),
            }
        };
        for p in pieces {
            let plen = u16_len(&p);
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
