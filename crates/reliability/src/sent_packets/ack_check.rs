//! An ACK's ranges checked before any is acted on, in one pass that also
//! notes which of them have anything left to resolve.
//!
//! A peer chooses how many ranges an ACK holds and may repeat them in
//! every packet; what it repeats was resolved the first time. So the check
//! looks, for each range, at the one slot that tells whether anything in
//! it is still pending, and the ranges acted on afterwards are only those
//! (an ACK that only repeats is read once).

use std::ops::RangeInclusive;

use super::{SentPackets, Slot};
use crate::error::AckError;

/// How many ranges with something to resolve [`PendingRanges`] holds. An
/// ACK that resolves packets in more ranges than this is walked again
/// whole: each such range resolves a packet, so that costs no more than
/// the packets themselves.
const PENDING_ROOM: usize = 8;

/// The ranges of an ACK that have a packet left to resolve, largest first,
/// on the stack.
#[derive(Debug)]
pub(crate) struct PendingRanges {
    ranges: [(u64, u64); PENDING_ROOM],
    len: usize,
    /// More came than it holds.
    overflowed: bool,
}

impl PendingRanges {
    pub(crate) const fn new() -> Self {
        Self {
            ranges: [(0, 0); PENDING_ROOM],
            len: 0,
            overflowed: false,
        }
    }

    fn push(&mut self, start: u64, end: u64) {
        match self.ranges.get_mut(self.len) {
            Some(slot) => {
                *slot = (start, end);
                self.len += 1;
            }
            None => self.overflowed = true,
        }
    }

    /// The ranges noted, largest first; `None` when more came than it
    /// holds (walk the ACK again).
    pub(crate) fn noted(&self) -> Option<impl Iterator<Item = RangeInclusive<u64>> + '_> {
        (!self.overflowed).then(|| {
            self.ranges[..self.len]
                .iter()
                .map(|&(start, end)| start..=end)
        })
    }
}

impl<T> SentPackets<T> {
    /// Checks an ACK's ranges (largest first) without changing anything and
    /// returns the largest packet number they acknowledge.
    ///
    /// # Errors
    /// [`AckError`] if the ranges are empty, inverted, not strictly descending,
    /// or cover a packet number never sent. Costs O(r + k log s) for r ranges,
    /// s skipped numbers still tracked and k of them between the ranges.
    pub fn validate_ack<I>(&self, ranges: I) -> Result<u64, AckError>
    where
        I: IntoIterator<Item = RangeInclusive<u64>>,
    {
        self.validate_ack_noting(ranges, &mut PendingRanges::new())
    }

    /// [`validate_ack`](Self::validate_ack), noting in `pending` the ranges
    /// that have a packet left to resolve (unacked or declared lost).
    pub(crate) fn validate_ack_noting<I>(
        &self,
        ranges: I,
        pending: &mut PendingRanges,
    ) -> Result<u64, AckError>
    where
        I: IntoIterator<Item = RangeInclusive<u64>>,
    {
        let mut ranges = ranges.into_iter();
        let (mut previous_start, largest) = ranges.next().ok_or(AckError::NoRanges)?.into_inner();
        if previous_start > largest {
            return Err(AckError::InvertedRange {
                start: previous_start,
                end: largest,
            });
        }
        if self.largest_sent.is_none_or(|sent| largest > sent) {
            return Err(AckError::UnsentPacket {
                packet_number: largest,
            });
        }
        // The largest skipped number below the previous range's start (of
        // all of them before the first range): the ranges descend, so only
        // it and those below it can fall in the next one.
        let mut largest_below = self.skipped.back().copied();
        self.check_range(previous_start, largest, &mut largest_below, pending)?;
        for range in ranges {
            let (start, end) = range.into_inner();
            if start > end {
                return Err(AckError::InvertedRange { start, end });
            }
            if end >= previous_start {
                return Err(AckError::RangesNotDescending {
                    end,
                    previous_start,
                });
            }
            previous_start = start;
            self.check_range(start, end, &mut largest_below, pending)?;
        }
        Ok(largest)
    }

    /// Checks that `start..=end`, below every range before it, holds no
    /// skipped number, and notes it in `pending` if it has a packet left
    /// to resolve. `largest_below` is the largest skipped number below
    /// the previous range's start, moved below this one's.
    #[inline(always)]
    fn check_range(
        &self,
        start: u64,
        end: u64,
        largest_below: &mut Option<u64>,
        pending: &mut PendingRanges,
    ) -> Result<(), AckError> {
        // Those below the previous start are below this one too unless
        // the largest of them is not: only then are they searched.
        if largest_below.is_some_and(|skipped| skipped >= start) {
            let below = self.skipped.partition_point(|&s| s < start);
            if let Some(&skipped) = self.skipped.get(below)
                && skipped <= end
            {
                return Err(AckError::UnsentPacket {
                    packet_number: skipped,
                });
            }
            *largest_below = below
                .checked_sub(1)
                .and_then(|i| self.skipped.get(i).copied());
        }
        if !self.resolved_through(start, end) {
            pending.push(start, end);
        }
        Ok(())
    }

    /// Whether nothing in `from..=end` is pending: it is released, or its
    /// first tracked slot is resolved with a pointer beyond `end`. One look
    /// at one slot, for the ranges an ACK repeats; anything else is left to
    /// [`next_pending`](Self::next_pending).
    pub(super) fn resolved_through(&self, from: u64, end: u64) -> bool {
        if end < self.base {
            return true;
        }
        // Past the newest slot (no slot to get) nothing is pending either.
        let offset = usize::try_from(from.max(self.base) - self.base).unwrap_or(usize::MAX);
        match self.slots.get(offset) {
            None => true,
            Some(Slot::Resolved { next }) => *next > end,
            Some(_) => false,
        }
    }
}
