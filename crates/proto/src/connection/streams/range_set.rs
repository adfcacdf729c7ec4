//! A set of `u64` ranges: which bytes of a stream were acknowledged, must
//! be sent again or have arrived; which message numbers were delivered.
//! Ranges are half-open (`start..end`), kept merged and sorted, so a set's
//! size follows the number of gaps, not the number of bytes or messages.

use std::collections::BTreeMap;
use std::ops::{Bound, Range};

/// Disjoint, non-adjacent ranges, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    /// start → end of each range.
    ranges: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Whether the set holds no byte.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many separate ranges the set holds.
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Adds `range`, merging with what it touches or overlaps.
    ///
    /// A range that reaches `range.start` grows in place, so bytes arriving
    /// in order (every packet of a bulk transfer) change one value in the
    /// map and never insert or remove a node.
    pub(crate) fn insert(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        // At or after the last range's start (bytes arriving in order, one
        // frame or one packet at a time): only the last range can be
        // touched, and it is reached without a search.
        if let Some(mut last) = self.ranges.last_entry()
            && range.start >= *last.key()
        {
            let end = last.get_mut();
            if range.start > *end {
                self.ranges.insert(range.start, range.end);
            } else if range.end > *end {
                *end = range.end;
            }
            return;
        }
        let mut end = range.end;
        // A range starting at or before `range.start` that reaches it
        // takes the new end in place.
        let grown = match self.ranges.range_mut(..=range.start).next_back() {
            Some((_, e)) if *e >= end => return,
            Some((&s, e)) if *e >= range.start => {
                *e = end;
                Some(s)
            }
            _ => None,
        };
        let start = grown.unwrap_or(range.start);
        // Ranges starting after `start`, up to the new end, merge into it.
        let mut merged = false;
        while let Some((&s, &e)) = self
            .ranges
            .range((Bound::Excluded(start), Bound::Included(end)))
            .next()
        {
            end = end.max(e);
            self.ranges.remove(&s);
            merged = true;
        }
        if grown.is_none() || merged {
            self.ranges.insert(start, end);
        }
    }

    /// Removes `range` from the set, splitting a range it falls inside.
    pub(crate) fn remove(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        if let Some((&s, &e)) = self.ranges.range(..range.start).next_back()
            && e > range.start
        {
            self.ranges.insert(s, range.start);
            if e > range.end {
                self.ranges.insert(range.end, e);
                return;
            }
        }
        while let Some((&s, &e)) = self.ranges.range(range.start..range.end).next() {
            self.ranges.remove(&s);
            if e > range.end {
                self.ranges.insert(range.end, e);
                break;
            }
        }
    }

    /// Whether every byte of `range` is in the set.
    pub(crate) fn contains(&self, range: Range<u64>) -> bool {
        range.is_empty()
            || self
                .ranges
                .range(..=range.start)
                .next_back()
                .is_some_and(|(_, &e)| e >= range.end)
    }

    /// The first range.
    pub(crate) fn first(&self) -> Option<Range<u64>> {
        self.ranges.first_key_value().map(|(&s, &e)| s..e)
    }

    /// The end of the last range: nothing at or past it is in the set.
    pub(crate) fn end(&self) -> Option<u64> {
        self.ranges.last_key_value().map(|(_, &e)| e)
    }

    /// Removes and returns up to `max` bytes from the front of the first range.
    pub(crate) fn pop_front(&mut self, max: u64) -> Option<Range<u64>> {
        let first = self.first()?;
        let end = first.end.min(first.start.saturating_add(max.max(1)));
        self.ranges.remove(&first.start);
        if end < first.end {
            self.ranges.insert(end, first.end);
        }
        Some(first.start..end)
    }

    /// The parts of `range` not in the set, in order.
    pub(crate) fn gaps(&self, range: Range<u64>) -> Gaps<'_> {
        // Start from the range covering `range.start`, if any.
        let from = self
            .ranges
            .range(..=range.start)
            .next_back()
            .map_or(range.start, |(&s, _)| s);
        Gaps {
            covered: self.ranges.range(from..range.end),
            cursor: range.start,
            end: range.end,
        }
    }

    /// Every range, in order.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.ranges.iter().map(|(&s, &e)| s..e)
    }
}

/// The gaps of a [`RangeSet`] within a range: see [`RangeSet::gaps`].
#[derive(Debug)]
pub(crate) struct Gaps<'a> {
    covered: std::collections::btree_map::Range<'a, u64, u64>,
    cursor: u64,
    end: u64,
}

impl Iterator for Gaps<'_> {
    type Item = Range<u64>;

    fn next(&mut self) -> Option<Range<u64>> {
        while self.cursor < self.end {
            match self.covered.next() {
                Some((&start, &end)) => {
                    let gap = self.cursor..start.min(self.end);
                    self.cursor = self.cursor.max(end);
                    if gap.start < gap.end {
                        return Some(gap);
                    }
                }
                None => {
                    let gap = self.cursor..self.end;
                    self.cursor = self.end;
                    return Some(gap);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn inserts_merge_and_removes_split() {
        let mut set = RangeSet::new();
        set.insert(10..20);
        set.insert(30..40);
        set.insert(20..30);
        assert_eq!((set.first(), set.len()), (Some(10..40), 1));
        set.remove(15..25);
        assert_eq!(set.iter().collect::<Vec<_>>(), [10..15, 25..40]);
        assert!(set.contains(26..40) && !set.contains(14..16));
        assert_eq!(set.gaps(0..50).collect::<Vec<_>>(), [0..10, 15..25, 40..50]);
        assert_eq!(set.pop_front(3), Some(10..13));
        assert_eq!(set.first(), Some(13..15));
        assert_eq!(set.end(), Some(40));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Remove(u64, u64),
        Pop(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..200, 0u64..40).prop_map(|(s, l)| Op::Insert(s, s + l)),
            (0u64..200, 0u64..40).prop_map(|(s, l)| Op::Remove(s, s + l)),
            (1u64..30).prop_map(Op::Pop),
        ]
    }

    proptest! {
        /// Against a bitmap model: membership, merging, gaps and popping
        /// agree, and ranges stay sorted, disjoint and non-adjacent.
        #[test]
        fn agrees_with_a_bitmap(ops in proptest::collection::vec(op(), 0..100)) {
            let mut set = RangeSet::new();
            let mut model = [false; 256];
            for op in ops {
                match op {
                    Op::Insert(s, e) => { set.insert(s..e); model[s as usize..e as usize].fill(true); }
                    Op::Remove(s, e) => { set.remove(s..e); model[s as usize..e as usize].fill(false); }
                    Op::Pop(max) => {
                        let popped = set.pop_front(max);
                        let first = model.iter().position(|b| *b);
                        prop_assert_eq!(popped.as_ref().map(|r| r.start), first.map(|f| f as u64));
                        if let Some(r) = popped {
                            prop_assert!(r.end - r.start <= max);
                            model[r.start as usize..r.end as usize].fill(false);
                        }
                    }
                }
                let ranges: Vec<_> = set.iter().collect();
                for pair in ranges.windows(2) {
                    prop_assert!(pair[0].end < pair[1].start);
                }
                for (i, bit) in model.iter().enumerate() {
                    prop_assert_eq!(set.contains(i as u64..i as u64 + 1), *bit);
                }
                let last = model.iter().rposition(|b| *b).map(|i| i as u64 + 1);
                prop_assert_eq!(set.end(), last);
                let gaps: u64 = set.gaps(0..256).map(|g| g.end - g.start).sum();
                prop_assert_eq!(gaps, model.iter().filter(|b| !**b).count() as u64);
            }
        }
    }
}
