//! A set of `u64` ranges: which bytes of a stream were acknowledged, must
//! be sent again or have arrived; which message numbers were delivered.
//! Ranges are half-open (`start..end`), kept merged and sorted, so a set's
//! size follows the number of gaps, not the number of bytes or messages.
//!
//! The last range is kept apart from the ordered map that holds the rest:
//! bytes arriving in order (every packet of a bulk transfer, and a peer's
//! one-byte frames) only move its end, with no walk of the map, and a set
//! that never had a gap never allocates a node.

use std::collections::BTreeMap;
use std::ops::{Bound, Range};

/// Disjoint, non-adjacent ranges, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    /// start → end of each range before `last`.
    ranges: BTreeMap<u64, u64>,
    /// The last range (empty when the set is): every range in `ranges`
    /// ends before its start, with a gap between.
    last: Range<u64>,
}

impl RangeSet {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Empties the set. A set that never had a gap (a stream's bytes in
    /// order, or a reset one's single byte) has no map to drop: nothing
    /// is made and dropped for it.
    pub(crate) fn clear(&mut self) {
        if !self.ranges.is_empty() {
            self.ranges.clear();
        }
        self.last = 0..0;
    }

    /// Whether the set holds no byte.
    pub(crate) fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// How many separate ranges the set holds.
    pub(crate) fn len(&self) -> usize {
        self.ranges.len() + usize::from(!self.last.is_empty())
    }

    /// Adds `range`, merging with what it touches or overlaps.
    ///
    /// A range at or after the last one's start (bytes arriving in order,
    /// one frame or one packet at a time) grows or replaces the last range
    /// without a look at the map.
    #[inline]
    pub(crate) fn insert(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        if self.last.is_empty() {
            self.last = range;
        } else if range.start >= self.last.start {
            if range.start > self.last.end {
                let last = std::mem::replace(&mut self.last, range);
                self.ranges.insert(last.start, last.end);
            } else if range.end > self.last.end {
                self.last.end = range.end;
            }
        } else {
            self.insert_before_last(range);
        }
    }

    /// [`Self::insert`] of a range starting before the last one.
    fn insert_before_last(&mut self, range: Range<u64>) {
        if range.end < self.last.start {
            // Clear of the last range: merged within the map.
            insert_into(&mut self.ranges, range);
            return;
        }
        // It reaches the last range: the last range grows back to its
        // start, and takes in the ranges of the map it reaches.
        self.last.start = range.start;
        self.last.end = self.last.end.max(range.end);
        while let Some(entry) = self.ranges.last_entry()
            && *entry.get() >= self.last.start
        {
            let (start, _) = entry.remove_entry();
            self.last.start = self.last.start.min(start);
        }
    }

    /// Removes `range` from the set, splitting a range it falls inside.
    pub(crate) fn remove(&mut self, range: Range<u64>) {
        if range.is_empty() || self.last.is_empty() {
            return;
        }
        // The last range joins the map for the removal, and the map's last
        // range is kept apart again after it.
        self.ranges.insert(self.last.start, self.last.end);
        remove_from(&mut self.ranges, range);
        self.last = self.ranges.pop_last().map_or(0..0, |(s, e)| s..e);
    }

    /// Whether every byte of `range` is in the set.
    pub(crate) fn contains(&self, range: Range<u64>) -> bool {
        if range.is_empty() {
            return true;
        }
        if range.start >= self.last.start {
            return range.end <= self.last.end;
        }
        self.ranges
            .range(..=range.start)
            .next_back()
            .is_some_and(|(_, &e)| e >= range.end)
    }

    /// The first range.
    pub(crate) fn first(&self) -> Option<Range<u64>> {
        match self.ranges.first_key_value() {
            Some((&s, &e)) => Some(s..e),
            None => (!self.last.is_empty()).then(|| self.last.clone()),
        }
    }

    /// The end of the last range: nothing at or past it is in the set.
    pub(crate) fn end(&self) -> Option<u64> {
        (!self.last.is_empty()).then_some(self.last.end)
    }

    /// Removes and returns up to `max` bytes from the front of the first range.
    pub(crate) fn pop_front(&mut self, max: u64) -> Option<Range<u64>> {
        let first = self.first()?;
        let end = first.end.min(first.start.saturating_add(max.max(1)));
        if self.ranges.is_empty() {
            self.last.start = end;
            if self.last.is_empty() {
                self.last = 0..0;
            }
        } else {
            self.ranges.remove(&first.start);
            if end < first.end {
                self.ranges.insert(end, first.end);
            }
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
        let last = (!self.last.is_empty() && self.last.start < range.end).then_some(&self.last);
        Gaps {
            covered: self.ranges.range(from..range.end),
            last,
            cursor: range.start,
            end: range.end,
        }
    }

    /// Every range, in order.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.ranges
            .iter()
            .map(|(&s, &e)| s..e)
            .chain((!self.last.is_empty()).then(|| self.last.clone()))
    }
}

/// Adds `range` to `ranges`, merging with what it touches or overlaps.
fn insert_into(ranges: &mut BTreeMap<u64, u64>, range: Range<u64>) {
    let mut end = range.end;
    // A range starting at or before `range.start` that reaches it
    // takes the new end in place.
    let grown = match ranges.range_mut(..=range.start).next_back() {
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
    while let Some((&s, &e)) = ranges
        .range((Bound::Excluded(start), Bound::Included(end)))
        .next()
    {
        end = end.max(e);
        ranges.remove(&s);
        merged = true;
    }
    if grown.is_none() || merged {
        ranges.insert(start, end);
    }
}

/// Removes `range` from `ranges`, splitting a range it falls inside.
fn remove_from(ranges: &mut BTreeMap<u64, u64>, range: Range<u64>) {
    if let Some((&s, &e)) = ranges.range(..range.start).next_back()
        && e > range.start
    {
        ranges.insert(s, range.start);
        if e > range.end {
            ranges.insert(range.end, e);
            return;
        }
    }
    while let Some((&s, &e)) = ranges.range(range.start..range.end).next() {
        ranges.remove(&s);
        if e > range.end {
            ranges.insert(range.end, e);
            break;
        }
    }
}

/// The gaps of a [`RangeSet`] within a range: see [`RangeSet::gaps`].
#[derive(Debug)]
pub(crate) struct Gaps<'a> {
    covered: std::collections::btree_map::Range<'a, u64, u64>,
    /// The set's last range, once `covered` is done, if it starts
    /// within the range.
    last: Option<&'a Range<u64>>,
    cursor: u64,
    end: u64,
}

impl Iterator for Gaps<'_> {
    type Item = Range<u64>;

    fn next(&mut self) -> Option<Range<u64>> {
        while self.cursor < self.end {
            let next = match self.covered.next() {
                Some((&start, &end)) => Some(start..end),
                None => self.last.take().cloned(),
            };
            match next {
                Some(covered) => {
                    let gap = self.cursor..covered.start.min(self.end);
                    self.cursor = self.cursor.max(covered.end);
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
    fn a_cleared_set_is_empty_and_takes_ranges_anew() {
        let cases: [&[(u64, u64)]; 2] = [&[(0, 1)], &[(0, 4), (8, 9), (12, 20)]];
        for ranges in cases {
            let mut set = RangeSet::new();
            for &(start, end) in ranges {
                set.insert(start..end);
            }
            set.clear();
            assert!(set.is_empty());
            assert_eq!((set.len(), set.first(), set.end()), (0, None, None));
            set.insert(5..7);
            assert_eq!((set.len(), set.first()), (1, Some(5..7)));
        }
    }

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
        /// Inserted `gap` past the set's end (in order when 0).
        Append(u64, u64),
        Remove(u64, u64),
        Pop(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..200, 0u64..40).prop_map(|(s, l)| Op::Insert(s, s + l)),
            (0u64..3, 0u64..10).prop_map(|(gap, l)| Op::Append(gap, l)),
            (0u64..200, 0u64..40).prop_map(|(s, l)| Op::Remove(s, s + l)),
            (1u64..30).prop_map(Op::Pop),
        ]
    }

    /// The model's runs of set bits, as ranges.
    fn runs(model: &[bool]) -> Vec<Range<u64>> {
        let mut runs: Vec<Range<u64>> = Vec::new();
        for (i, _) in model.iter().enumerate().filter(|(_, b)| **b) {
            let i = i as u64;
            match runs.last_mut() {
                Some(run) if run.end == i => run.end = i + 1,
                _ => runs.push(i..i + 1),
            }
        }
        runs
    }

    proptest! {
        /// Against a bitmap model: the ranges (merged, sorted, apart),
        /// membership, gaps within any window and popping agree, whether
        /// ranges arrive in order (the last range kept apart) or not.
        #[test]
        fn agrees_with_a_bitmap(
            ops in proptest::collection::vec(op(), 0..100),
            window in (0u64..256, 0u64..256),
        ) {
            let mut set = RangeSet::new();
            let mut model = [false; 300];
            for op in ops {
                match op {
                    Op::Insert(s, e) => { set.insert(s..e); model[s as usize..e as usize].fill(true); }
                    Op::Append(gap, len) => {
                        let bound = model.len() as u64;
                        let s = (set.end().unwrap_or(0) + gap).min(bound);
                        let e = (s + len).min(bound);
                        set.insert(s..e);
                        model[s as usize..e as usize].fill(true);
                    }
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
                let expected = runs(&model);
                prop_assert_eq!(set.iter().collect::<Vec<_>>(), expected.clone());
                prop_assert_eq!(set.len(), expected.len());
                prop_assert_eq!(set.is_empty(), expected.is_empty());
                prop_assert_eq!(set.first(), expected.first().cloned());
                prop_assert_eq!(set.end(), expected.last().map(|r| r.end));
                for (i, bit) in model.iter().enumerate() {
                    prop_assert_eq!(set.contains(i as u64..i as u64 + 1), *bit);
                }
                let (from, to) = (window.0.min(window.1), window.0.max(window.1));
                let all_in = model[from as usize..to as usize].iter().all(|b| *b);
                prop_assert_eq!(set.contains(from..to), all_in);
                let gaps: Vec<_> = set.gaps(from..to).collect();
                let mut inverse = model;
                inverse.iter_mut().for_each(|b| *b = !*b);
                inverse[..from as usize].fill(false);
                inverse[to as usize..].fill(false);
                prop_assert_eq!(gaps, runs(&inverse));
            }
        }
    }
}
