//! Stamps and the hybrid logical clock (docs/sync.md "Stamps"): every register of the replicated
//! state carries the stamp of the write that set it, `(t, c, dev)` — wall time in ms, a counter,
//! the device id — compared in that order, so "later" is defined across devices whose clocks
//! disagree and ties go to the greater device id. A device's clock never goes back past a stamp it
//! has made or applied: a write after a remote stamp is later than that stamp, whatever the wall
//! clock says.

use std::cmp::Ordering;
use std::fmt;

/// Wall times are kept in 15 digits (ms until the year 33658); a stamp's text form sorts as the
/// stamp does.
const T_MAX: i64 = 999_999_999_999_999;

/// A register's stamp.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub t: i64,
    pub c: u32,
    pub dev: String,
}

impl Ord for Stamp {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.t, self.c, self.dev.as_str()).cmp(&(o.t, o.c, o.dev.as_str()))
    }
}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Stamp {
    pub fn new(t: i64, c: u32, dev: &str) -> Stamp {
        Stamp { t: t.clamp(0, T_MAX), c, dev: dev.to_owned() }
    }

    /// The text form kept in the database: `<t, 15 digits>-<c, 10 digits>-<device id>`, which
    /// sorts as the stamp does (readable with `sqlite3`).
    pub fn encode(&self) -> String {
        format!("{:015}-{:010}-{}", self.t.clamp(0, T_MAX), self.c, self.dev)
    }

    /// Read [`Stamp::encode`]'s form back.
    pub fn decode(s: &str) -> Option<Stamp> {
        let (t, rest) = s.split_once('-')?;
        let (c, dev) = rest.split_once('-')?;
        if t.len() != 15 || c.len() != 10 || dev.is_empty() {
            return None;
        }
        Some(Stamp { t: t.parse().ok()?, c: c.parse().ok()?, dev: dev.to_owned() })
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

/// The device's hybrid logical clock: the greatest `(t, c)` it has made or applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hlc {
    pub t: i64,
    pub c: u32,
}

impl Hlc {
    /// A new stamp's `(t, c)` at wall time `now`: later than every stamp seen so far. The wall
    /// time is taken when it moved past the clock; otherwise the counter goes up.
    pub fn tick(&mut self, now: i64) -> (i64, u32) {
        let now = now.clamp(0, T_MAX);
        if now > self.t {
            self.t = now;
            self.c = 0;
        } else if self.c == u32::MAX {
            self.t += 1;
            self.c = 0;
        } else {
            self.c += 1;
        }
        (self.t, self.c)
    }

    /// Move the clock past a stamp applied from another device.
    pub fn observe(&mut self, t: i64, c: u32) {
        let t = t.clamp(0, T_MAX);
        if (t, c) > (self.t, self.c) {
            self.t = t;
            self.c = c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_order_by_time_counter_then_device_and_their_text_sorts_the_same() {
        let a = Stamp::new(5, 0, "b");
        let b = Stamp::new(5, 1, "a");
        let c = Stamp::new(5, 1, "c");
        let d = Stamp::new(6, 0, "a");
        let mut v = vec![d.clone(), c.clone(), a.clone(), b.clone()];
        v.sort();
        assert_eq!(v, vec![a.clone(), b.clone(), c.clone(), d.clone()]);
        let mut texts: Vec<String> = [&d, &c, &a, &b].iter().map(|s| s.encode()).collect();
        texts.sort();
        assert_eq!(texts, [&a, &b, &c, &d].iter().map(|s| s.encode()).collect::<Vec<_>>());
        for s in [a, b, c, d, Stamp::new(1_712_345_678_901, 4_000_000_000, "9f1c-x")] {
            assert_eq!(Stamp::decode(&s.encode()), Some(s));
        }
        assert_eq!(Stamp::decode("12-3-x"), None);
        assert_eq!(Stamp::new(-5, 0, "a").t, 0);
    }

    #[test]
    fn the_clock_never_goes_back_and_moves_past_what_it_applies() {
        let mut h = Hlc::default();
        assert_eq!(h.tick(100), (100, 0));
        assert_eq!(h.tick(100), (100, 1));
        // the wall clock went back an hour: the counter goes on
        assert_eq!(h.tick(100 - 3_600_000), (100, 2));
        // a remote stamp three hours ahead: the next local stamp is after it
        h.observe(100 + 3 * 3_600_000, 7);
        let next = h.tick(200);
        assert!(next > (100 + 3 * 3_600_000, 7), "{next:?}");
        // an older remote stamp changes nothing
        let before = h;
        h.observe(50, 99);
        assert_eq!(h, before);
        // the counter's end moves the time on
        let mut h = Hlc { t: 10, c: u32::MAX };
        assert_eq!(h.tick(10), (11, 0));
    }
}
