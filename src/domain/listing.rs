//! Pages of the drawer (`sessions.list`, storage-model §5.3): the sort key of a drawer row and
//! the cursor that carries it from one page to the next. Pure logic: no SQL here.
//!
//! A cursor is keyset-based: it holds the last sent row's sort key, so the next page starts
//! right after that key in the drawer as it is then. A write between pages moves only the rows
//! it changes (a pin, a new chat, a deleted one); a row that stayed put is sent exactly once.

use crate::protocol::{HostError, HostResult};

/// Rows a page holds when `limit` is not given.
pub const PAGE_DEFAULT: usize = 50;
/// The largest `limit` a page may ask for.
pub const PAGE_MAX: usize = 1000;

/// A drawer row's place in the drawer's order: pinned first, then newest first, then the later
/// inserted first, then the greater id first (ids are unique, so no two rows share a key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SortKey {
    pub pinned: bool,
    pub created_at: i64,
    pub insert_seq: i64,
    pub id: String,
}

/// What every cursor starts with (the format's version).
const TAG: &str = "k1.";

/// A tag of the query a cursor was made for (FNV-1a of its trimmed, lower-cased form), so a
/// cursor of one search is not taken for another's.
fn query_tag(q: &str) -> u32 {
    q.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The cursor of the page after the row with key `k`, for the (trimmed, lower-cased) query `q`.
pub fn cursor_after(k: &SortKey, q: &str) -> String {
    format!("{TAG}{}.{}.{}.{:08x}.{}", u8::from(k.pinned), k.created_at, k.insert_seq, query_tag(q), k.id)
}

/// The sort key a cursor made by [`cursor_after`] for the same query holds; anything else is
/// `bad_request`.
pub fn parse_cursor(cursor: &str, q: &str) -> HostResult<SortKey> {
    let bad = |why: &str| HostError::bad_request(format!("cursor: {why}"));
    let body = cursor.strip_prefix(TAG).ok_or_else(|| bad("not a cursor this host made"))?;
    let mut parts = body.splitn(5, '.');
    let mut next = || parts.next().ok_or_else(|| bad("not a cursor this host made"));
    let (pinned, created, seq, tag, id) = (next()?, next()?, next()?, next()?, next()?);
    let pinned = match pinned {
        "0" => false,
        "1" => true,
        _ => return Err(bad("not a cursor this host made")),
    };
    let int = |s: &str| s.parse::<i64>().map_err(|_| bad("not a cursor this host made"));
    let (created_at, insert_seq) = (int(created)?, int(seq)?);
    if tag.len() != 8 || u32::from_str_radix(tag, 16).ok() != Some(query_tag(q)) {
        return Err(bad("made for another query"));
    }
    if id.is_empty() {
        return Err(bad("not a cursor this host made"));
    }
    Ok(SortKey { pinned, created_at, insert_seq, id: id.to_owned() })
}

/// How many rows a page asked for with `limit` holds: [`PAGE_DEFAULT`] when not given; 1 ..=
/// [`PAGE_MAX`] or `bad_request`.
pub fn page_limit(limit: Option<u64>) -> HostResult<usize> {
    match limit {
        None => Ok(PAGE_DEFAULT),
        Some(n) if (1..=PAGE_MAX as u64).contains(&n) => Ok(n as usize),
        Some(n) => Err(HostError::bad_request(format!("limit must be 1 to {PAGE_MAX}, not {n}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pinned: bool, created_at: i64, insert_seq: i64, id: &str) -> SortKey {
        SortKey { pinned, created_at, insert_seq, id: id.into() }
    }

    #[test]
    fn a_cursor_gives_back_its_key_for_its_own_query_only() {
        for k in [key(true, 1_764_759_940_000, 7, "a.b.c"), key(false, -3, 0, "鲸")] {
            let c = cursor_after(&k, "quill");
            assert_eq!(parse_cursor(&c, "quill").unwrap(), k);
            let e = parse_cursor(&c, "quilt").unwrap_err();
            assert_eq!(e.code, crate::protocol::ErrorCode::BadRequest);
            assert!(e.message.contains("another query"), "{}", e.message);
        }
        let listed = cursor_after(&key(false, 5, 5, "x"), "");
        assert!(parse_cursor(&listed, "").is_ok());
        assert!(parse_cursor(&listed, "x").is_err());
    }

    #[test]
    fn anything_else_is_bad_request() {
        for bad in [
            "",
            "k1.",
            "k2.0.1.2.811c9dc5.x",
            "k1.2.1.2.811c9dc5.x",
            "k1.0.one.2.811c9dc5.x",
            "k1.0.1.2.811c9dc5.",
            "k1.0.1.2.811c9dc5",
            "k1.0.1.2.xyz.x",
            "[1,2]",
        ] {
            let e = parse_cursor(bad, "").unwrap_err();
            assert_eq!(e.code, crate::protocol::ErrorCode::BadRequest, "{bad}");
        }
    }

    #[test]
    fn limits_default_and_bound() {
        assert_eq!(page_limit(None).unwrap(), PAGE_DEFAULT);
        assert_eq!(page_limit(Some(1)).unwrap(), 1);
        assert_eq!(page_limit(Some(PAGE_MAX as u64)).unwrap(), PAGE_MAX);
        assert!(page_limit(Some(0)).is_err());
        assert!(page_limit(Some(PAGE_MAX as u64 + 1)).is_err());
    }

    #[test]
    fn keys_order_as_the_drawer_does() {
        // the drawer runs from the greatest key down
        assert!(key(true, 0, 0, "a") > key(false, 9, 9, "z"));
        assert!(key(false, 2, 0, "a") > key(false, 1, 9, "z"));
        assert!(key(false, 1, 2, "a") > key(false, 1, 1, "z"));
        assert!(key(false, 1, 1, "b") > key(false, 1, 1, "a"));
    }
}
