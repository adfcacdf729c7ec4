//! The receiver's record of packet numbers received, as the ranges an ACK frame carries.
//!
//! Ranges are kept ascending in a `VecDeque`: packets mostly arrive in order,
//! which extends the last range in O(1); a late packet costs a binary search
//! and a shift of at most `max_ranges` entries. The number of ranges is
//! bounded; when a new gap would exceed it the oldest range is dropped, as
//! RFC 9000 §13.2.3 allows: "If it does not, then older ranges (those with the
//! smallest packet numbers) are omitted."
//!
//! # What is remembered and what is sent
//!
//! The set remembers more ranges than one ACK frame carries (the frame
//! takes the newest `MAX_ACK_RANGES` of them): a number below the oldest
//! range is refused as possibly seen before, so every gap that reordering
//! keeps open must still be remembered when its packet arrives. At 100
//! Mbit/s (8 600 packets/s) with a tenth of the packets held back for tens
//! of milliseconds, more than 64 gaps are open at once, and a held-back
//! packet refused then is never acknowledged: its loss is re-sent and never
//! proves spurious.
//!
//! # Late packets in a full frame
//!
//! When more ranges are open than a frame carries, the newest alone would
//! leave out the range a held-back packet just filled, if it is older than
//! them: the sender, told nothing, declares that packet lost, and learns
//! only when enough newer gaps fill that it spuriously did so. Traced at
//! 100 Mbit/s × 300 ms with a tenth of the packets held back half a round
//! trip (about 130 gaps open at once): 14 losses declared in 12 ms, all
//! proved spurious by one ACK. So the numbers of the last
//! [`LATE_ARRIVALS`] late packets are remembered, and a full frame gives
//! up to a quarter of its ranges to the older ranges they fell into
//! ([`AckRanges::ack_frame_ranges`]). Each late packet makes its ACK go at
//! once (RFC 9000 §13.2.1), so it is reported in the next frame and in the
//! frames after it until newer late packets take its place.
//!
//! # Bound
//!
//! [`DEFAULT_MAX_RANGES`] is 1 024 ranges of 16 bytes: 16 KiB at most per
//! connection, reached only by a peer that leaves a gap after every packet
//! it sends (the `VecDeque` never holds more than `max_ranges`, so its
//! doubling capacity stops at 1 024). The set grows with the gaps actually
//! seen: an in-order connection holds one range.

use std::collections::VecDeque;
use std::ops::RangeInclusive;

/// Default bound on the number of ranges remembered (an ACK frame carries
/// the newest `MAX_ACK_RANGES` of them). See the module docs for its size.
pub const DEFAULT_MAX_RANGES: usize = 1024;

/// Late packets whose ranges a full ACK frame still carries (see the
/// module docs).
const LATE_ARRIVALS: usize = 16;

/// How a received packet number relates to those received before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The next number after the largest received (or the first packet).
    InOrder,
    /// Above the largest received, leaving a gap: packets were lost or reordered.
    AfterGap,
    /// Below the largest received, filling a gap: the packet was reordered.
    Late,
    /// Already recorded.
    Duplicate,
    /// Below the oldest number still tracked; not recorded.
    Forgotten,
}

impl Arrival {
    /// Whether the packet arrived out of order (RFC 9000 §13.2.1 asks for an
    /// immediate ACK then).
    #[must_use]
    pub fn is_reordered(self) -> bool {
        matches!(self, Arrival::AfterGap | Arrival::Late)
    }

    /// Whether the packet number was new.
    #[must_use]
    pub fn is_new(self) -> bool {
        matches!(self, Arrival::InOrder | Arrival::AfterGap | Arrival::Late)
    }
}

/// The set of received packet numbers, as a bounded list of disjoint ranges.
#[derive(Debug, Clone)]
pub struct AckRanges {
    /// Inclusive `(start, end)` pairs, ascending, disjoint and non-adjacent.
    /// It grows with the gaps actually seen, not to `max_ranges` up front:
    /// most connections, idle ones above all, hold one range.
    ranges: VecDeque<(u64, u64)>,
    /// Most ranges kept.
    max_ranges: usize,
    /// Largest number ever received; kept even when its range is dropped
    /// (RFC 9000 §13.2.3: receivers "MUST retain the largest packet number
    /// that has been successfully processed").
    largest: Option<u64>,
    /// Numbers below this are no longer tracked.
    floor: u64,
    /// The last [`LATE_ARRIVALS`] numbers that arrived late, newest last
    /// (allocated only once a packet is late).
    late: VecDeque<u64>,
}

impl Default for AckRanges {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_RANGES)
    }
}

impl AckRanges {
    /// An empty set remembering at most `max_ranges` ranges (at least 1).
    #[must_use]
    pub fn new(max_ranges: usize) -> Self {
        let max_ranges = max_ranges.max(1);
        Self {
            ranges: VecDeque::new(),
            max_ranges,
            largest: None,
            floor: 0,
            late: VecDeque::new(),
        }
    }

    /// Records a received packet number and says how it arrived.
    ///
    /// RFC 9000 §13.1: "A packet MUST NOT be acknowledged until packet
    /// protection has been successfully removed and all frames contained in the
    /// packet have been processed." Call this after that.
    pub fn insert(&mut self, packet_number: u64) -> Arrival {
        let pn = packet_number;
        // Most packets: the next number after the largest, which ends the
        // newest range. What the steps below would do, in one look.
        if let Some(last) = self.ranges.back_mut()
            && self.largest == Some(last.1)
            && last.1.checked_add(1) == Some(pn)
        {
            last.1 = pn;
            self.largest = Some(pn);
            return Arrival::InOrder;
        }
        if pn < self.floor {
            return Arrival::Forgotten;
        }
        let arrival = match self.largest {
            None => Arrival::InOrder,
            Some(largest) if largest.checked_add(1) == Some(pn) => Arrival::InOrder,
            Some(largest) if pn > largest => Arrival::AfterGap,
            Some(_) => Arrival::Late,
        };
        let recorded = match self.ranges.back_mut() {
            Some(last) if last.1.checked_add(1) == Some(pn) => {
                last.1 = pn;
                true
            }
            Some(last) if pn <= last.1 => self.insert_below_last(pn),
            _ => {
                self.add_range(self.ranges.len(), pn);
                true
            }
        };
        if !recorded {
            return Arrival::Duplicate;
        }
        if arrival == Arrival::Late {
            if self.late.len() == LATE_ARRIVALS {
                self.late.pop_front();
            }
            self.late.push_back(pn);
        }
        self.largest = Some(self.largest.map_or(pn, |l| l.max(pn)));
        arrival
    }

    /// Puts the new range `pn..=pn` at `index`, dropping the oldest range
    /// first when the set is full, so that it never holds more than
    /// `max_ranges` (nor allocates room for more).
    fn add_range(&mut self, mut index: usize, pn: u64) {
        if self.ranges.len() >= self.max_ranges {
            // A receiver "MUST retain an ACK Range unless it can ensure that it
            // will not subsequently accept packets with numbers in that range"
            // (RFC 9000 §13.2.3): the floor keeps dropped numbers out.
            if index == 0 {
                // The new range would be the oldest: it is the one dropped.
                self.floor = pn + 1;
                return;
            }
            if let Some((_, end)) = self.ranges.pop_front() {
                self.floor = end + 1;
            }
            index -= 1;
        }
        if self.ranges.capacity() == 0 {
            // Room for the one range an in-order connection ever holds
            // (16 bytes), not the four a first push makes room for.
            self.ranges.reserve_exact(1);
        }
        self.ranges.insert(index, (pn, pn));
    }

    /// Stops tracking numbers below `packet_number`, e.g. once the peer has
    /// acknowledged an ACK frame that covered them. RFC 9000 §13.2.3: "After
    /// receiving acknowledgments for an ACK frame, the receiver SHOULD stop
    /// tracking those acknowledged ACK Ranges."
    ///
    /// The floor never passes above the largest number received, so the range
    /// holding it is always kept.
    pub fn forget_below(&mut self, packet_number: u64) {
        let Some(largest) = self.largest else { return };
        let floor = packet_number.min(largest);
        if floor <= self.floor {
            return;
        }
        self.floor = floor;
        while self.ranges.front().is_some_and(|&(_, end)| end < floor) {
            self.ranges.pop_front();
        }
        if let Some(first) = self.ranges.front_mut() {
            first.0 = first.0.max(floor);
        }
    }

    /// The ranges to put in an ACK frame, largest first.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = RangeInclusive<u64>> + ExactSizeIterator + Clone + '_ {
        self.ranges.iter().rev().map(|&(start, end)| start..=end)
    }

    /// The ranges an ACK frame that carries at most `max` should carry,
    /// largest first, into `out` (cleared first): all of them if they fit;
    /// otherwise the newest, and in place of up to a quarter of them the
    /// older ranges the last late packets fell into (see the module docs).
    pub fn ack_frame_ranges(&self, max: usize, out: &mut Vec<RangeInclusive<u64>>) {
        out.clear();
        let len = self.ranges.len();
        if len <= max {
            out.extend(self.iter());
            return;
        }
        let reserved = self.late.len().min(max / 4);
        // Ranges below this index are not among the newest `max - reserved`.
        let older = len - (max - reserved);
        for &pn in self.late.iter().rev() {
            if out.len() == reserved {
                break;
            }
            let index = self.ranges.partition_point(|&(_, end)| end < pn);
            if index < older && self.ranges[index].0 <= pn {
                let (start, end) = self.ranges[index];
                if !out.contains(&(start..=end)) {
                    out.push(start..=end);
                }
            }
        }
        let late = out.len();
        // The newest ranges fill the rest; below `older` one may be a late
        // packet's range, already in.
        for index in (0..len).rev() {
            if out.len() == max {
                break;
            }
            let (start, end) = self.ranges[index];
            if index >= older || !out[..late].contains(&(start..=end)) {
                out.push(start..=end);
            }
        }
        out.sort_unstable_by(|a, b| b.start().cmp(a.start()));
    }

    /// Whether `packet_number` is recorded as received.
    #[must_use]
    pub fn contains(&self, packet_number: u64) -> bool {
        let index = self.ranges.partition_point(|&(_, end)| end < packet_number);
        self.ranges
            .get(index)
            .is_some_and(|&(start, _)| start <= packet_number)
    }

    /// The largest packet number received.
    #[must_use]
    pub fn largest(&self) -> Option<u64> {
        self.largest
    }

    /// Numbers below this are no longer tracked.
    #[must_use]
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// How many ranges are held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether no range is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The most ranges held.
    #[must_use]
    pub fn max_ranges(&self) -> usize {
        self.max_ranges
    }

    /// Checks the set's internal consistency.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn invariants(&self) -> Result<(), String> {
        if self.ranges.len() > self.max_ranges {
            return Err(format!(
                "{} ranges exceed the bound {}",
                self.ranges.len(),
                self.max_ranges
            ));
        }
        let mut previous_end: Option<u64> = None;
        for &(start, end) in &self.ranges {
            if start > end || start < self.floor {
                return Err(format!(
                    "range {start}..={end} inverted or below the floor {}",
                    self.floor
                ));
            }
            if previous_end.is_some_and(|p| p.saturating_add(1) >= start) {
                return Err(format!(
                    "range {start}..={end} touches or overlaps the previous one"
                ));
            }
            previous_end = Some(end);
        }
        match (self.largest, self.ranges.back()) {
            (None, None) => Ok(()),
            (Some(largest), Some(&(_, end))) if largest == end => Ok(()),
            (largest, last) => Err(format!(
                "largest {largest:?} is not the end of the last range {last:?}"
            )),
        }
    }

    /// Inserts a number below the last range's end. Returns `false` if already present.
    fn insert_below_last(&mut self, pn: u64) -> bool {
        // The first range ending at or after pn exists: the last range does.
        let index = self.ranges.partition_point(|&(_, end)| end < pn);
        let (start, _) = self.ranges[index];
        if start <= pn {
            return false;
        }
        let joins_previous = index > 0 && self.ranges[index - 1].1 + 1 == pn;
        let joins_next = start == pn + 1;
        match (joins_previous, joins_next) {
            (true, true) => {
                self.ranges[index - 1].1 = self.ranges[index].1;
                self.ranges.remove(index);
            }
            (true, false) => self.ranges[index - 1].1 = pn,
            (false, true) => self.ranges[index].0 = pn,
            (false, false) => self.add_range(index, pn),
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn ranges(set: &AckRanges) -> Vec<RangeInclusive<u64>> {
        set.iter().collect()
    }

    #[test]
    fn in_order_packets_form_one_range() {
        let mut set = AckRanges::default();
        for pn in 0..100 {
            assert_eq!(set.insert(pn), Arrival::InOrder);
        }
        assert_eq!(ranges(&set), vec![0..=99]);
        // Room for that one range only; a gap makes more.
        assert_eq!(set.ranges.capacity(), 1);
        set.insert(200);
        assert_eq!(ranges(&set), vec![200..=200, 0..=99]);
        assert!(set.ranges.capacity() >= 2);
    }

    #[test]
    fn gap_opens_a_new_range_and_late_packet_closes_it() {
        let mut set = AckRanges::default();
        set.insert(1);
        assert_eq!(set.insert(4), Arrival::AfterGap);
        assert_eq!(ranges(&set), vec![4..=4, 1..=1]);
        assert_eq!(set.insert(2), Arrival::Late);
        assert_eq!(set.insert(3), Arrival::Late);
        assert_eq!(ranges(&set), vec![1..=4]);
        assert_eq!(set.insert(0), Arrival::Late);
        assert_eq!(ranges(&set), vec![0..=4]);
    }

    #[test]
    fn duplicate_is_reported_and_changes_nothing() {
        let mut set = AckRanges::default();
        set.insert(5);
        set.insert(7);
        assert_eq!(set.insert(5), Arrival::Duplicate);
        assert_eq!(set.insert(7), Arrival::Duplicate);
        assert_eq!(ranges(&set), vec![7..=7, 5..=5]);
    }

    #[test]
    fn too_many_ranges_drop_the_oldest() {
        let mut set = AckRanges::new(3);
        for pn in [0, 2, 4, 6] {
            set.insert(pn);
        }
        assert_eq!(ranges(&set), vec![6..=6, 4..=4, 2..=2]);
        assert_eq!(set.floor(), 1);
        assert_eq!(set.insert(0), Arrival::Forgotten);
        assert_eq!(set.insert(1), Arrival::Late);
        assert_eq!(ranges(&set), vec![6..=6, 4..=4, 1..=2]);
    }

    #[test]
    fn a_packet_held_back_behind_hundreds_of_gaps_is_still_accepted() {
        let mut set = AckRanges::default();
        // Every fifth packet of 2 000 held back: 400 gaps, more than an
        // ACK frame carries.
        for pn in (0..2_000).filter(|pn| pn % 5 != 0) {
            set.insert(pn);
        }
        assert_eq!(set.len(), 400);
        assert_eq!(set.floor(), 0);
        for pn in (0..2_000).step_by(5) {
            assert_eq!(set.insert(pn), Arrival::Late, "held back {pn}");
        }
        assert_eq!(ranges(&set), vec![0..=1_999]);
    }

    #[test]
    fn a_gap_after_every_packet_holds_at_most_the_bound() {
        let mut set = AckRanges::default();
        let max = DEFAULT_MAX_RANGES as u64;
        for i in 0..4 * max {
            set.insert(2 * i);
        }
        assert_eq!(set.len(), DEFAULT_MAX_RANGES);
        // Never room for more than the bound: 16 KiB.
        let bytes = set.ranges.capacity() * std::mem::size_of::<(u64, u64)>();
        assert!(bytes <= 16 * 1024, "{bytes} bytes");
        // The oldest remembered gap can still fill; below it, nothing is
        // accepted again, even a number never received.
        let oldest = 2 * (3 * max);
        assert_eq!(set.floor(), oldest - 1);
        assert_eq!(set.insert(oldest - 2), Arrival::Forgotten);
        assert_eq!(set.insert(oldest - 3), Arrival::Forgotten);
        assert_eq!(set.insert(oldest + 1), Arrival::Late);
        set.invariants().unwrap();
    }

    #[test]
    fn in_order_packets_allocate_room_for_one_range() {
        let mut set = AckRanges::default();
        for pn in 0..100_000 {
            set.insert(pn);
        }
        assert!(set.ranges.capacity() <= 4, "{}", set.ranges.capacity());
    }

    #[test]
    fn a_frame_that_fits_carries_every_range() {
        let mut set = AckRanges::default();
        for pn in [0, 2, 4, 3] {
            set.insert(pn);
        }
        let mut frame = Vec::new();
        set.ack_frame_ranges(64, &mut frame);
        assert_eq!(frame, ranges(&set));
    }

    #[test]
    fn a_full_frame_still_carries_the_range_a_late_packet_filled() {
        let mut set = AckRanges::default();
        // 100 gaps: one packet in two held back.
        for pn in (0..200).step_by(2) {
            set.insert(pn);
        }
        assert_eq!(set.insert(11), Arrival::Late);
        assert_eq!(set.insert(31), Arrival::Late);
        let mut frame = Vec::new();
        set.ack_frame_ranges(64, &mut frame);
        assert_eq!(frame.len(), 64);
        assert!(frame.contains(&(10..=12)), "{frame:?}");
        assert!(frame.contains(&(30..=32)), "{frame:?}");
        assert_eq!(frame[0], 198..=198, "the newest range first");
        assert_eq!(frame[61], 76..=76, "then the newest 62");
        assert!(
            frame.windows(2).all(|w| w[0].start() > w[1].end()),
            "descending and disjoint: {frame:?}"
        );
    }

    #[test]
    fn a_full_frame_gives_late_packets_a_quarter_of_its_ranges_at_most() {
        let mut set = AckRanges::default();
        for pn in (0..400).step_by(2) {
            set.insert(pn);
        }
        for pn in (1..200).step_by(10) {
            set.insert(pn);
        }
        let mut frame = Vec::new();
        set.ack_frame_ranges(8, &mut frame);
        // Two of the eight: the last two late packets, 191 and 181.
        assert_eq!(
            frame,
            vec![
                398..=398,
                396..=396,
                394..=394,
                392..=392,
                390..=390,
                388..=388,
                190..=192,
                180..=182
            ]
        );
    }

    #[test]
    fn forgetting_acknowledged_ranges_keeps_the_largest() {
        let mut set = AckRanges::default();
        for pn in [0, 1, 2, 5, 6, 9] {
            set.insert(pn);
        }
        set.forget_below(6);
        assert_eq!(ranges(&set), vec![9..=9, 6..=6]);
        set.forget_below(100);
        assert_eq!(ranges(&set), vec![9..=9]);
        assert_eq!(set.largest(), Some(9));
        assert_eq!(set.insert(8), Arrival::Forgotten);
        assert_eq!(set.insert(10), Arrival::InOrder);
    }

    #[test]
    fn largest_packet_number_does_not_overflow() {
        let mut set = AckRanges::default();
        assert_eq!(set.insert(u64::MAX), Arrival::InOrder);
        assert_eq!(set.insert(u64::MAX), Arrival::Duplicate);
        assert_eq!(set.insert(u64::MAX - 1), Arrival::Late);
        assert_eq!(ranges(&set), vec![u64::MAX - 1..=u64::MAX]);
        set.invariants().unwrap();
    }

    /// The model: a set of numbers plus a floor, evicting the lowest run of
    /// consecutive numbers whenever there are more runs than allowed.
    struct Model {
        set: BTreeSet<u64>,
        floor: u64,
        max_ranges: usize,
        largest: Option<u64>,
    }

    impl Model {
        fn runs(&self) -> Vec<RangeInclusive<u64>> {
            let mut runs: Vec<RangeInclusive<u64>> = Vec::new();
            for &pn in &self.set {
                match runs.last_mut() {
                    Some(run) if *run.end() + 1 == pn => *run = *run.start()..=pn,
                    _ => runs.push(pn..=pn),
                }
            }
            runs.reverse();
            runs
        }

        /// How a new number arrives, against the largest before it.
        fn arrival(&self, pn: u64) -> Arrival {
            match self.largest {
                None => Arrival::InOrder,
                Some(largest) if largest + 1 == pn => Arrival::InOrder,
                Some(largest) if pn > largest => Arrival::AfterGap,
                Some(_) => Arrival::Late,
            }
        }

        fn insert(&mut self, pn: u64) -> bool {
            if pn < self.floor || !self.set.insert(pn) {
                return false;
            }
            self.largest = self.largest.max(Some(pn));
            let runs = self.runs();
            if runs.len() > self.max_ranges
                && let Some(oldest) = runs.last()
            {
                for dropped in oldest.clone() {
                    self.set.remove(&dropped);
                }
                self.floor = oldest.end() + 1;
            }
            true
        }

        fn forget_below(&mut self, pn: u64, largest: Option<u64>) {
            let Some(largest) = largest else { return };
            let floor = pn.min(largest);
            if floor > self.floor {
                self.floor = floor;
                self.set.retain(|&x| x >= floor);
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        /// The number after the largest (the in-order step most packets take).
        InsertNext,
        Forget(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..200).prop_map(Op::Insert),
            3 => Just(Op::InsertNext),
            1 => (0u64..200).prop_map(Op::Forget),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn ranges_match_a_set_model_with_bounded_eviction(
            max_ranges in 1usize..8,
            frame_max in 1usize..6,
            ops in prop::collection::vec(op(), 1..200),
        ) {
            let mut set = AckRanges::new(max_ranges);
            let mut model = Model { set: BTreeSet::new(), floor: 0, max_ranges, largest: None };
            for op in ops {
                let insert = match op {
                    Op::Insert(pn) => Some(pn),
                    Op::InsertNext => Some(model.largest.map_or(0, |l| l + 1)),
                    Op::Forget(pn) => {
                        model.forget_below(pn, set.largest());
                        set.forget_below(pn);
                        None
                    }
                };
                if let Some(pn) = insert {
                    let expected = model.arrival(pn);
                    let arrival = set.insert(pn);
                    let new = model.insert(pn);
                    prop_assert_eq!(arrival.is_new(), new, "insert {} gave {:?}", pn, arrival);
                    if new {
                        prop_assert_eq!(arrival, expected, "insert {}", pn);
                    }
                    prop_assert_eq!(set.largest(), model.largest);
                }
                prop_assert_eq!(set.invariants(), Ok(()));
                prop_assert_eq!(ranges(&set), model.runs());
                prop_assert_eq!(set.floor(), model.floor);
                let mut frame = Vec::new();
                set.ack_frame_ranges(frame_max, &mut frame);
                let all = ranges(&set);
                prop_assert!(frame.len() <= frame_max);
                prop_assert_eq!(frame.len(), all.len().min(frame_max));
                prop_assert_eq!(frame.first(), all.first(), "the largest is reported");
                prop_assert!(frame.iter().all(|r| all.contains(r)));
                prop_assert!(frame.windows(2).all(|w| w[0].start() > w[1].end()));
            }
        }
    }
}
