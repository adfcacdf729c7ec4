use super::*;
use crate::error::AckError;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn packet(time_sent: Instant, size: u32) -> SentPacket<u64> {
    SentPacket {
        time_sent,
        size,
        ack_eliciting: true,
        in_flight: true,
        payload: u64::from(size),
    }
}

/// An ACK alone: neither ack-eliciting nor in flight.
fn ack_alone(time_sent: Instant, size: u32) -> SentPacket<u64> {
    SentPacket {
        ack_eliciting: false,
        in_flight: false,
        ..packet(time_sent, size)
    }
}

#[test]
fn packet_numbers_must_increase() {
    let (clock, _) = quanta::Clock::mock();
    let mut sent = SentPackets::new();
    sent.push(5, packet(clock.now(), 100)).unwrap();
    assert_eq!(
        sent.push(5, packet(clock.now(), 100)),
        Err(SendError::NotIncreasing {
            packet_number: 5,
            largest_sent: 5
        })
    );
    assert!(matches!(
        sent.push(5 + 2 + MAX_PACKET_NUMBER_GAP, packet(clock.now(), 1)),
        Err(SendError::GapTooLarge { .. })
    ));
    assert_eq!(
        sent.push(u64::MAX, packet(clock.now(), 1)),
        Err(SendError::OutOfRange(u64::MAX))
    );
    sent.invariants().unwrap();
}

#[test]
fn the_span_stops_at_its_limit_until_acknowledgements_shrink_it() {
    let (clock, _) = quanta::Clock::mock();
    let mut sent = SentPackets::new();
    sent.set_max_tracked(4);
    for pn in 0..3 {
        sent.push(pn, packet(clock.now(), 100)).unwrap();
    }
    // Skipped numbers count: they take slots too.
    assert_eq!(
        sent.push(4, packet(clock.now(), 100)),
        Err(SendError::TooManyTracked {
            tracked: 5,
            limit: 4
        })
    );
    sent.push(3, packet(clock.now(), 100)).unwrap();
    assert!(matches!(
        sent.push(4, packet(clock.now(), 100)),
        Err(SendError::TooManyTracked { .. })
    ));
    assert_eq!(sent.tracked_span(), 4);
    // Acknowledging the newest frees nothing: the oldest pins the span.
    sent.ack_range(3..=3, |_, _| {});
    sent.release(None);
    assert!(sent.push(4, packet(clock.now(), 100)).is_err());
    sent.ack_range(0..=1, |_, _| {});
    sent.release(None);
    sent.push(4, packet(clock.now(), 100)).unwrap();
    sent.push(5, packet(clock.now(), 100)).unwrap();
    assert_eq!(sent.tracked_span(), 4);
    sent.invariants().unwrap();
}

#[test]
fn at_its_limit_the_span_lets_go_of_the_acks_alone_at_its_front() {
    let (clock, _) = quanta::Clock::mock();
    let ack_alone = ack_alone(clock.now(), 40);
    let mut sent = SentPackets::new();
    sent.set_max_tracked(4);
    for pn in 0..3 {
        sent.push(pn, ack_alone.clone()).unwrap();
    }
    sent.push(3, packet(clock.now(), 100)).unwrap();
    // The three ACKs alone in front go; the ack-eliciting packet stays.
    for pn in 4..7 {
        sent.push(pn, ack_alone.clone()).unwrap();
    }
    assert_eq!(sent.tracked_span(), 4);
    assert_eq!(sent.unacked_count(), 4);
    assert_eq!(sent.get(3).map(|p| p.size), Some(100));
    // Now the front is unacknowledged and ack-eliciting: nothing goes.
    assert!(matches!(
        sent.push(7, ack_alone.clone()),
        Err(SendError::TooManyTracked { .. })
    ));
    sent.invariants().unwrap();
    // An ACK of the front lets the ACKs alone behind it go too.
    sent.ack_range(3..=3, |_, _| {});
    sent.push(7, ack_alone).unwrap();
    assert_eq!(sent.tracked_span(), 1);
    sent.invariants().unwrap();
}

#[test]
fn at_its_limit_the_span_lets_go_of_the_lost_records_at_its_front() {
    let (clock, _) = quanta::Clock::mock();
    let mut sent = SentPackets::new();
    sent.set_max_tracked(4);
    for pn in 0..4 {
        sent.push(pn, packet(clock.now(), 100)).unwrap();
    }
    sent.ack_range(3..=3, |_, _| {});
    let mut lost = Vec::new();
    sent.detect_lost(3, None, 3, clock.now(), None, |pn, _| lost.push(pn));
    assert_eq!(lost, [0]);
    // The lost record goes; the unacknowledged packet behind it holds.
    sent.push(4, packet(clock.now(), 100)).unwrap();
    assert_eq!(sent.tracked_span(), 4);
    assert!(matches!(
        sent.push(5, packet(clock.now(), 100)),
        Err(SendError::TooManyTracked { .. })
    ));
    sent.invariants().unwrap();
}

#[test]
fn repeated_ranges_skip_acknowledged_packets() {
    let (clock, _) = quanta::Clock::mock();
    let mut sent = SentPackets::new();
    for pn in 0..1000 {
        sent.push(pn, packet(clock.now(), 10)).unwrap();
    }
    let mut acked = Vec::new();
    sent.ack_range(1..=998, |pn, _| acked.push(pn));
    assert_eq!(acked.len(), 998);
    acked.clear();
    // The same range again finds nothing and, after pointer compression,
    // reaches 999 in one jump.
    sent.ack_range(1..=999, |pn, _| acked.push(pn));
    assert_eq!(acked, [999]);
    sent.invariants().unwrap();
    sent.release(None);
    assert_eq!(sent.tracked_span(), 1000, "packet 0 still holds the front");
    sent.ack_range(0..=0, |_, _| {});
    sent.release(None);
    assert_eq!(sent.tracked_span(), 0);
    assert_eq!(sent.bytes_in_flight(), 0);
}

#[test]
fn skipped_numbers_are_refused_in_acks() {
    let (clock, _) = quanta::Clock::mock();
    let mut sent = SentPackets::new();
    sent.push(0, packet(clock.now(), 10)).unwrap();
    sent.push(2, packet(clock.now(), 10)).unwrap();
    assert_eq!(sent.validate_ack([2..=2, 0..=0]), Ok(2));
    assert_eq!(
        sent.validate_ack([0..=2]),
        Err(AckError::UnsentPacket { packet_number: 1 })
    );
    sent.invariants().unwrap();
}

#[test]
fn its_memory_is_the_room_it_allocated_until_it_shrinks_empty() {
    let (clock, _) = quanta::Clock::mock();
    let mut sent = SentPackets::new();
    assert_eq!(sent.memory(), 0);
    sent.push(0, packet(clock.now(), 10)).unwrap();
    // Numbers 1 and 2 skipped: slots of their own, and listed.
    sent.push(3, packet(clock.now(), 10)).unwrap();
    let slot = size_of::<Slot<u64>>();
    let memory = sent.memory();
    assert!(memory >= 4 * slot + 2 * size_of::<u64>(), "{memory}");
    assert_eq!(
        memory,
        sent.slots.capacity() * slot + sent.skipped.capacity() * size_of::<u64>()
    );
    // Acknowledged and released, the room stays until it is given back.
    sent.ack_range(0..=3, |_, _| {});
    sent.release(None);
    assert_eq!(sent.tracked_span(), 0);
    assert_eq!(sent.memory(), memory);
    sent.shrink_when_empty();
    assert_eq!(sent.memory(), 0);
}

#[test]
fn an_ack_alone_sent_with_nothing_tracked_leaves_the_ring_empty() {
    let (clock, _) = quanta::Clock::mock();
    let ack_only = |size| ack_alone(clock.now(), size);
    let mut sent = SentPackets::new();
    sent.push(0, packet(clock.now(), 10)).unwrap();
    // With a packet tracked, an ACK alone is recorded like any other.
    sent.push_released(1, ack_only(20)).unwrap();
    assert_eq!(sent.tracked_span(), 2);
    sent.ack_range(0..=1, |_, _| {});
    sent.release(None);
    sent.shrink_when_empty();
    assert_eq!((sent.tracked_span(), sent.slots.capacity()), (0, 0));
    // Nothing tracked: numbered, not kept, and the skipped one before it
    // is released with it.
    sent.push_released(3, ack_only(30)).unwrap();
    assert_eq!((sent.tracked_span(), sent.slots.capacity()), (0, 0));
    assert_eq!(sent.largest_sent(), Some(3));
    sent.invariants().unwrap();
    // An ACK of it is valid and resolves nothing.
    assert_eq!(sent.validate_ack([3..=3]), Ok(3));
    let mut resolved = 0;
    sent.ack_range(0..=3, |_, _| resolved += 1);
    assert_eq!(resolved, 0);
    // The numbers still only go up, and the next packet is tracked.
    assert!(matches!(
        sent.push_released(3, ack_only(30)),
        Err(SendError::NotIncreasing { .. })
    ));
    sent.push_released(4, packet(clock.now(), 40)).unwrap();
    assert_eq!((sent.tracked_span(), sent.bytes_in_flight()), (1, 40));
    assert_eq!(sent.unacked().map(|(pn, _)| pn).collect::<Vec<_>>(), [4]);
    sent.invariants().unwrap();
}

#[test]
fn acks_alone_are_forgotten_only_when_nothing_else_is_tracked() {
    let (clock, _) = quanta::Clock::mock();
    let ack_only = |size| ack_alone(clock.now(), size);
    let mut sent = SentPackets::new();
    sent.push(0, ack_only(10)).unwrap();
    sent.push(1, packet(clock.now(), 20)).unwrap();
    sent.push(3, ack_only(30)).unwrap();
    // A packet in flight keeps them all.
    assert!(!sent.forget_acks_alone());
    assert_eq!(sent.tracked_span(), 4);
    sent.ack_range(1..=1, |_, _| {});
    // Only ACKs alone left (0 and 3; 2 was skipped): forgotten, numbered.
    assert!(sent.forget_acks_alone());
    assert_eq!((sent.tracked_span(), sent.unacked_count()), (0, 0));
    assert_eq!(sent.largest_sent(), Some(3));
    sent.invariants().unwrap();
    assert_eq!(sent.validate_ack([3..=3, 0..=1]), Ok(3));
    let mut resolved = 0;
    sent.ack_range(0..=3, |_, _| resolved += 1);
    assert_eq!(resolved, 0);
    sent.push(4, packet(clock.now(), 40)).unwrap();
    assert_eq!(sent.unacked().map(|(pn, _)| pn).collect::<Vec<_>>(), [4]);
    sent.invariants().unwrap();

    // A declared loss is remembered for a late ACK: it keeps them too.
    sent.push(5, ack_only(50)).unwrap();
    sent.ack_range(5..=5, |_, _| {});
    sent.detect_lost(5, None, 1, clock.now(), None, |_, _| {});
    sent.push(6, ack_only(60)).unwrap();
    assert_eq!(sent.bytes_in_flight(), 0);
    assert!(!sent.forget_acks_alone());
    sent.release(Some(clock.now()));
    assert!(sent.forget_acks_alone());
    assert_eq!(sent.tracked_span(), 0);
    sent.invariants().unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    Send { gap: u64, size: u32 },
    Ack { top_back: u64, len: u64 },
    Lose { threshold: u64 },
    Release,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop::bool::weighted(0.1), 1u32..1500)
            .prop_map(|(skip, size)| Op::Send { gap: u64::from(skip), size }),
        4 => (0u64..40, 0u64..40).prop_map(|(top_back, len)| Op::Ack { top_back, len }),
        1 => (1u64..6).prop_map(|threshold| Op::Lose { threshold }),
        1 => Just(Op::Release),
    ]
}

#[derive(Debug, PartialEq)]
enum State {
    Unacked(u32),
    Lost(u32),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// The tracker against a `BTreeMap` of packet number → state: every
    /// range acknowledges exactly the model's pending numbers in it, losses
    /// are exactly the model's unacked numbers far enough below the largest
    /// acknowledged, and the counters match.
    #[test]
    fn sent_packets_match_a_btreemap_model(ops in prop::collection::vec(op(), 1..300)) {
        let (clock, _) = quanta::Clock::mock();
        let now = clock.now();
        let mut sent = SentPackets::new();
        let mut model: BTreeMap<u64, State> = BTreeMap::new();
        let mut next_pn = 0;
        let mut largest_acked = None;
        for op in ops {
            match op {
                Op::Send { gap, size } => {
                    let pn = next_pn + gap;
                    sent.push(pn, packet(now, size)).unwrap();
                    model.insert(pn, State::Unacked(size));
                    next_pn = pn + 1;
                }
                Op::Ack { top_back, len } => {
                    let Some(largest) = sent.largest_sent() else { continue };
                    let end = largest.saturating_sub(top_back);
                    let range = end.saturating_sub(len)..=end;
                    let mut got = Vec::new();
                    sent.ack_range(range.clone(), |pn, resolved| got.push((pn, resolved)));
                    let expected: Vec<u64> = model.range(range).map(|(&pn, _)| pn).collect();
                    prop_assert_eq!(got.iter().map(|(pn, _)| *pn).collect::<Vec<_>>(), expected);
                    for (pn, resolved) in got {
                        match (model.remove(&pn), resolved) {
                            (Some(State::Unacked(size)), Resolved::Acked(p)) => prop_assert_eq!(p.size, size),
                            (Some(State::Lost(size)), Resolved::Spurious(s)) => prop_assert_eq!(s.size, size),
                            (state, resolved) => prop_assert!(false, "{pn}: model {state:?}, tracker {resolved:?}"),
                        }
                        largest_acked = largest_acked.max(Some(pn));
                    }
                }
                Op::Lose { threshold } => {
                    let Some(largest) = largest_acked else { continue };
                    let mut lost = Vec::new();
                    sent.detect_lost(largest, None, threshold, now, None, |pn, _| lost.push(pn));
                    let expected: Vec<u64> = model
                        .iter()
                        .filter(|&(&pn, s)| matches!(s, State::Unacked(_)) && pn <= largest && largest - pn >= threshold)
                        .map(|(&pn, _)| pn)
                        .collect();
                    prop_assert_eq!(&lost, &expected);
                    for pn in lost {
                        if let Some(State::Unacked(size)) = model.remove(&pn) {
                            model.insert(pn, State::Lost(size));
                        }
                    }
                }
                Op::Release => {
                    sent.release(Some(now));
                    model.retain(|_, s| matches!(s, State::Unacked(_)) );
                }
            }
            prop_assert_eq!(sent.invariants(), Ok(()));
            let unacked: Vec<u64> = sent.unacked().map(|(pn, _)| pn).collect();
            let model_unacked: Vec<u64> =
                model.iter().filter(|(_, s)| matches!(s, State::Unacked(_))).map(|(&pn, _)| pn).collect();
            prop_assert_eq!(unacked, model_unacked);
            let bytes: u64 = model.values().map(|s| match s { State::Unacked(size) => u64::from(*size), State::Lost(_) => 0 }).sum();
            prop_assert_eq!(sent.bytes_in_flight(), bytes);
        }
    }
}

/// What an ACK check must answer, worked out the plain way: every range
/// in order, each number in it from `tracked_from` on (those below were
/// released: skipped ones can no longer be told apart) looked up in the
/// set of those sent.
fn validate_ack_model(
    sent: &std::collections::BTreeSet<u64>,
    tracked_from: u64,
    largest_sent: Option<u64>,
    ranges: &[RangeInclusive<u64>],
) -> Result<u64, AckError> {
    let mut previous_start = None;
    for range in ranges {
        let (start, end) = (*range.start(), *range.end());
        if start > end {
            return Err(AckError::InvertedRange { start, end });
        }
        match previous_start {
            None if largest_sent.is_none_or(|l| end > l) => {
                return Err(AckError::UnsentPacket { packet_number: end });
            }
            Some(previous_start) if end >= previous_start => {
                return Err(AckError::RangesNotDescending {
                    end,
                    previous_start,
                });
            }
            _ => {}
        }
        previous_start = Some(start);
        if let Some(skipped) = (start.max(tracked_from)..=end).find(|pn| !sent.contains(pn)) {
            return Err(AckError::UnsentPacket {
                packet_number: skipped,
            });
        }
    }
    ranges.first().map(|r| *r.end()).ok_or(AckError::NoRanges)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    /// The one-pass ACK check (first range apart, skipped numbers searched
    /// only below the last range, one slot look) answers as the plain
    /// model does for ACKs of any shape, valid or not, whatever was
    /// already acknowledged.
    #[test]
    fn the_ack_check_answers_as_a_plain_model(
        gaps in prop::collection::vec(0u64..3, 1..60),
        acked in prop::collection::vec((0u64..70, 0u64..4), 0..6),
        ranges in prop::collection::vec((0u64..70, 0u64..6), 0..8),
    ) {
        let (clock, _) = quanta::Clock::mock();
        let now = clock.now();
        let mut tracker = SentPackets::new();
        let mut sent = std::collections::BTreeSet::new();
        let mut pn = 0;
        for gap in gaps {
            pn += gap;
            tracker.push(pn, packet(now, 100)).unwrap();
            sent.insert(pn);
            pn += 1;
        }
        for (end, len) in acked {
            let range = end.saturating_sub(len)..=end;
            if tracker.validate_ack([range.clone()]).is_ok() {
                tracker.ack_range(range, |_, _| {});
            }
        }
        tracker.release(None);
        // Mostly descending, sometimes not: (end, length) pairs sorted
        // from the largest end, some left as they came.
        let mut ranges: Vec<_> = ranges
            .into_iter()
            .map(|(end, len)| end.saturating_sub(len)..=end)
            .collect();
        if ranges.len() % 3 != 0 {
            ranges.sort_by_key(|r| std::cmp::Reverse(*r.end()));
        }
        prop_assert_eq!(
            tracker.validate_ack(ranges.iter().cloned()),
            validate_ack_model(&sent, tracker.base, tracker.largest_sent(), &ranges)
        );
    }
}
