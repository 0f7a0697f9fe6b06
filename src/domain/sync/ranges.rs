//! Sets of numbers kept as ranges: which operations and segments of a device were applied
//! (numbers from 1, mostly contiguous, arriving in any order).

/// Disjoint, sorted, non-adjacent inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    pub fn new() -> Ranges {
        Ranges(Vec::new())
    }

    /// From stored ranges in any order (overlaps merged).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u64)>) -> Ranges {
        let mut r = Ranges::new();
        for (lo, hi) in pairs {
            r.insert_range(lo, hi);
        }
        r
    }

    pub fn pairs(&self) -> &[(u64, u64)] {
        &self.0
    }

    pub fn contains(&self, x: u64) -> bool {
        let i = self.0.partition_point(|&(_, hi)| hi < x);
        self.0.get(i).is_some_and(|&(lo, _)| lo <= x)
    }

    /// Add `x`. Returns whether it was new.
    pub fn insert(&mut self, x: u64) -> bool {
        if self.contains(x) {
            return false;
        }
        self.insert_range(x, x);
        true
    }

    pub fn insert_range(&mut self, lo: u64, hi: u64) {
        if lo > hi {
            return;
        }
        let (mut lo, mut hi) = (lo, hi);
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut placed = false;
        for &(a, b) in &self.0 {
            if b.saturating_add(1) < lo {
                out.push((a, b));
            } else if hi.saturating_add(1) < a {
                if !placed {
                    out.push((lo, hi));
                    placed = true;
                }
                out.push((a, b));
            } else {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        }
        if !placed {
            out.push((lo, hi));
        }
        out.sort_unstable();
        self.0 = out;
    }

    /// How many numbers the ranges hold.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// The greatest number held.
    pub fn max(&self) -> Option<u64> {
        self.0.last().map(|r| r.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_in_any_order() {
        let mut r = Ranges::new();
        for x in [5, 1, 3, 2, 9, 4, 10, 8] {
            assert!(r.insert(x));
        }
        assert!(!r.insert(3));
        assert_eq!(r.pairs(), &[(1, 5), (8, 10)]);
        assert!(r.contains(1) && r.contains(5) && r.contains(9) && !r.contains(6) && !r.contains(11));
        assert_eq!(r.count(), 8);
        r.insert_range(6, 7);
        assert_eq!(r.pairs(), &[(1, 10)]);
        assert_eq!(Ranges::from_pairs([(7, 9), (1, 3), (2, 5)]).pairs(), &[(1, 5), (7, 9)]);
        assert_eq!(Ranges::new().max(), None);
    }
}
