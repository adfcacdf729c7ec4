//! Random operation sequences against a model.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Send {
        ack_eliciting: bool,
        skip: bool,
    },
    /// Acknowledge, from the largest sent minus `top_back`, the numbers whose bit is set.
    Ack {
        top_back: u64,
        mask: u64,
        delay_ms: u64,
    },
    /// Random ranges, probably nonsense.
    HostileAck {
        ranges: Vec<(u64, u64)>,
        delay_ms: u64,
    },
    Advance {
        ms: u64,
    },
    Timeout,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (prop::bool::weighted(0.9), prop::bool::weighted(0.05))
            .prop_map(|(ack_eliciting, skip)| Op::Send { ack_eliciting, skip }),
        5 => (0u64..8, any::<u64>(), 0u64..50).prop_map(|(top_back, mask, delay_ms)| Op::Ack { top_back, mask, delay_ms }),
        1 => (prop::collection::vec((0u64..300, 0u64..300), 0..4), 0u64..20_000)
            .prop_map(|(ranges, delay_ms)| Op::HostileAck { ranges, delay_ms }),
        4 => (0u64..400).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Timeout),
    ]
}

/// What happened to every packet sent, to judge persistent congestion
/// independently of the tracker.
#[derive(Default)]
struct History {
    /// Packet number → (send time, ack-eliciting, declared lost, acknowledged).
    packets: BTreeMap<u64, (Instant, bool, bool, bool)>,
    first_sample: Option<Instant>,
}

impl History {
    fn record(&mut self, h: &Harness, summary_had_sample: bool) {
        if summary_had_sample {
            self.first_sample.get_or_insert(h.now());
        }
        for pn in h.acked() {
            if let Some(p) = self.packets.get_mut(&pn) {
                p.3 = true;
            }
        }
        for pn in h.lost() {
            if let Some(p) = self.packets.get_mut(&pn) {
                p.2 = true;
            }
        }
        for loss in &h.events.spurious {
            if let Some(p) = self.packets.get_mut(&loss.packet_number) {
                p.3 = true;
            }
        }
    }

    /// RFC 9002 §7.6.2 over the whole history: two ack-eliciting lost
    /// packets, sent after the first RTT sample and `duration` or more
    /// apart, with every packet sent between them lost (never-sent
    /// numbers are not in the history, so they do not interrupt).
    fn allows_persistent_congestion(&self, duration: Duration) -> bool {
        let mut oldest: Option<Instant> = None;
        for &(sent, eliciting, lost, acked) in self.packets.values() {
            if !lost || acked {
                oldest = None;
                continue;
            }
            if !eliciting || self.first_sample.is_none_or(|f| sent <= f) {
                continue;
            }
            match oldest {
                Some(first) if sent.saturating_duration_since(first) >= duration => {
                    return true;
                }
                Some(_) => {}
                None => oldest = Some(sent),
            }
        }
        false
    }
}

/// Descending ranges of the numbers `top - i` for each set bit `i` of `mask`.
fn ranges_from_mask(top: u64, mask: u64) -> Vec<RangeInclusive<u64>> {
    let mut ranges: Vec<RangeInclusive<u64>> = Vec::new();
    for i in 0..64u64.min(top + 1) {
        if mask & (1 << i) == 0 {
            continue;
        }
        let pn = top - i;
        match ranges.last_mut() {
            Some(range) if *range.start() == pn + 1 => *range = pn..=*range.end(),
            _ => ranges.push(pn..=pn),
        }
    }
    ranges
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Random sends, ACKs (valid and hostile), time jumps and timeouts keep
    /// every invariant, and the unacked packets always match a `BTreeMap`
    /// model updated from what the sink reports.
    #[test]
    fn random_operations_keep_invariants_and_match_a_model(ops in prop::collection::vec(op(), 1..200)) {
        let mut h = Harness::new();
        let mut model: BTreeMap<u64, bool> = BTreeMap::new();
        let mut history = History::default();
        let mut skipped: Vec<u64> = Vec::new();
        let mut next_pn = 0u64;
        for op in ops {
            match op {
                Op::Send { ack_eliciting, skip } => {
                    if skip {
                        skipped.push(next_pn);
                        next_pn += 1;
                    }
                    h.send_with(next_pn, ack_eliciting);
                    model.insert(next_pn, ack_eliciting);
                    history.packets.insert(next_pn, (h.now(), ack_eliciting, false, false));
                    next_pn += 1;
                }
                Op::Ack { top_back, mask, delay_ms } => {
                    let Some(largest) = h.detector.sent_packets().largest_sent() else { continue };
                    let ranges: Vec<_> = ranges_from_mask(largest.saturating_sub(top_back), mask)
                        .into_iter()
                        .filter(|r| !skipped.iter().any(|s| r.contains(s)))
                        .collect();
                    if ranges.is_empty() { continue; }
                    let previously_largest = h.detector.largest_acked();
                    let summary = h.ack(&ranges, Duration::from_millis(delay_ms)).unwrap();
                    history.record(&h, summary.rtt_sample.is_some());
                    if summary.lost.persistent_congestion {
                        let duration = h.detector.persistent_congestion_duration();
                        prop_assert!(history.allows_persistent_congestion(duration));
                    }
                    let expected: Vec<u64> = ranges
                        .iter()
                        .flat_map(|r| model.range(r.clone()).map(|(&pn, _)| pn).collect::<Vec<_>>())
                        .collect();
                    prop_assert_eq!(h.acked(), expected);
                    prop_assert_eq!(summary.newly_acked, h.events.acked.len());
                    for pn in h.acked() { model.remove(&pn); }
                    let largest_acked = h.detector.largest_acked().unwrap();
                    prop_assert_eq!(largest_acked, previously_largest.max(Some(*ranges[0].end())).unwrap());
                    for pn in h.lost() {
                        prop_assert!(pn < largest_acked);
                        prop_assert!(model.remove(&pn).is_some());
                    }
                    // Nothing far enough below the largest acknowledged
                    // survives, while the packet threshold applies (until a
                    // loss proves the path reorders).
                    if !h.detector.reordering_seen() {
                        prop_assert!(model.range(..largest_acked.saturating_sub(2)).next().is_none());
                    }
                }
                Op::HostileAck { ranges, delay_ms } => {
                    let ranges: Vec<_> = ranges.into_iter().map(|(a, b)| a..=b).collect();
                    let before = h.detector.sent_packets().unacked_count();
                    match h.ack(&ranges, Duration::from_millis(delay_ms)) {
                        Ok(summary) => {
                            history.record(&h, summary.rtt_sample.is_some());
                            if summary.lost.persistent_congestion {
                                let duration = h.detector.persistent_congestion_duration();
                                prop_assert!(history.allows_persistent_congestion(duration));
                            }
                            for pn in h.acked() { prop_assert!(model.remove(&pn).is_some()); }
                            for pn in h.lost() { prop_assert!(model.remove(&pn).is_some()); }
                        }
                        Err(_) => prop_assert_eq!(h.detector.sent_packets().unacked_count(), before),
                    }
                }
                Op::Advance { ms } => h.advance(Duration::from_millis(ms)),
                Op::Timeout => {
                    let event = h.timeout();
                    history.record(&h, false);
                    if let TimerEvent::LossDeclared(report) = event {
                        prop_assert_eq!(report.packets, h.events.lost.len());
                        if report.persistent_congestion {
                            let duration = h.detector.persistent_congestion_duration();
                            prop_assert!(history.allows_persistent_congestion(duration));
                        }
                    }
                    for pn in h.lost() { prop_assert!(model.remove(&pn).is_some()); }
                }
            }
            let unacked: Vec<u64> = h.detector.unacked().map(|(pn, _)| pn).collect();
            prop_assert_eq!(unacked, model.keys().copied().collect::<Vec<_>>());
            let eliciting = model.values().filter(|&&e| e).count();
            prop_assert_eq!(h.detector.sent_packets().ack_eliciting_unacked(), eliciting);
            // One count of bytes in flight: the sum of the in-flight packets' sizes.
            prop_assert_eq!(h.detector.bytes_in_flight(), 1000 * eliciting as u64);
            if eliciting > 0 {
                prop_assert!(h.detector.poll_timeout().is_some(), "ack-eliciting packets in flight need a timer");
            }
            if model.is_empty() {
                prop_assert_eq!(h.detector.poll_timeout(), None);
            }
        }
    }
}
