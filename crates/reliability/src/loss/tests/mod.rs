use super::*;

use std::sync::Arc;

const MS: Duration = Duration::from_millis(1);

/// A detector, a mock clock and a reusable sink.
struct Harness {
    clock: quanta::Clock,
    time: Arc<quanta::Mock>,
    detector: LossDetector<u64>,
    events: RecoveryBuffer<u64>,
}

impl Harness {
    fn new() -> Self {
        Self::with_config(LossConfig::default())
    }
    fn with_config(config: LossConfig) -> Self {
        let (clock, time) = quanta::Clock::mock();
        Self {
            clock,
            time,
            detector: LossDetector::new(config),
            events: RecoveryBuffer::default(),
        }
    }
    fn now(&self) -> Instant {
        self.clock.now()
    }
    fn advance(&self, by: Duration) {
        self.time.increment(by);
    }
    fn send(&mut self, pn: u64) {
        self.send_with(pn, true);
    }
    fn send_with(&mut self, pn: u64, ack_eliciting: bool) {
        let packet = SentPacket {
            time_sent: self.now(),
            size: 1000,
            ack_eliciting,
            in_flight: ack_eliciting,
            payload: pn,
        };
        self.detector.on_sent(pn, packet).unwrap();
        self.detector.invariants().unwrap();
    }
    fn ack(
        &mut self,
        ranges: &[RangeInclusive<u64>],
        ack_delay: Duration,
    ) -> Result<AckSummary, AckError> {
        self.events.clear();
        let now = self.now();
        let result = self
            .detector
            .on_ack(now, ranges.iter().cloned(), ack_delay, &mut self.events);
        self.detector.invariants().unwrap();
        result
    }
    fn timeout(&mut self) -> TimerEvent {
        self.events.clear();
        let now = self.now();
        let event = self.detector.on_timeout(now, &mut self.events);
        self.detector.invariants().unwrap();
        event
    }
    fn lost(&self) -> Vec<u64> {
        self.events.lost.iter().map(|(pn, _)| *pn).collect()
    }
    fn acked(&self) -> Vec<u64> {
        self.events.acked.iter().map(|(pn, _)| *pn).collect()
    }
}

#[test]
fn third_later_packet_acked_declares_first_lost() {
    let mut h = Harness::new();
    for pn in 0..4 {
        h.send(pn);
    }
    h.advance(10 * MS);
    let summary = h.ack(&[1..=2], Duration::ZERO).unwrap();
    assert_eq!(
        summary.lost.packets, 0,
        "only two later packets acknowledged"
    );
    assert!(summary.timer.is_some(), "the loss timer waits for packet 0");
    let summary = h.ack(&[1..=3], Duration::ZERO).unwrap();
    assert_eq!(summary.lost.packets, 1);
    assert_eq!(summary.lost.bytes, 1000);
    assert_eq!(h.lost(), [0]);
    assert_eq!(
        h.events.lost[0].1.payload, 0,
        "the payload comes back for re-sending"
    );
    assert_eq!(h.detector.bytes_in_flight(), 0);
    assert_eq!(summary.timer, None);
}

#[test]
fn time_threshold_declares_loss_without_reordering() {
    let mut h = Harness::new();
    let t0 = h.now();
    h.send(0);
    h.advance(MS);
    h.send(1);
    h.advance(100 * MS);
    let summary = h.ack(&[1..=1], Duration::ZERO).unwrap();
    // One RTT sample of 100 ms: packet 0 is lost 9/8 × 100 ms = 112.5 ms after it was sent.
    assert_eq!(summary.rtt_sample, Some(100 * MS));
    assert_eq!(summary.lost.packets, 0);
    assert_eq!(summary.timer, Some(t0 + Duration::from_micros(112_500)));
    assert_eq!(h.detector.poll_timeout(), summary.timer);
    h.advance(11 * MS);
    assert_eq!(h.timeout(), TimerEvent::Idle, "too early");
    h.advance(Duration::from_micros(500));
    assert_eq!(
        h.timeout(),
        TimerEvent::LossDeclared(LossReport {
            packets: 1,
            in_flight_packets: 1,
            bytes: 1000,
            largest_sent_at: Some(t0),
            persistent_congestion: false,
        })
    );
    assert_eq!(h.lost(), [0]);
    assert_eq!(h.detector.poll_timeout(), None);
}

#[test]
fn pto_backs_off_exponentially_and_resets_on_ack() {
    let mut h = Harness::new();
    let t0 = h.now();
    h.send(0);
    // No RTT sample yet: PTO = 333 + 4 × 166.5 + 25 = 1024 ms.
    assert_eq!(h.detector.poll_timeout(), Some(t0 + 1024 * MS));
    h.advance(1024 * MS);
    assert_eq!(h.timeout(), TimerEvent::Probe { pto_count: 1 });
    assert!(h.events.lost.is_empty(), "a PTO declares nothing lost");
    assert_eq!(h.detector.poll_timeout(), Some(t0 + 2048 * MS));
    h.advance(1024 * MS);
    assert_eq!(h.timeout(), TimerEvent::Probe { pto_count: 2 });
    assert_eq!(h.detector.poll_timeout(), Some(t0 + 4096 * MS));
    // A probe is sent; its timer runs from its own send time with the backed-off period.
    h.send(1);
    assert_eq!(h.detector.poll_timeout(), Some(h.now() + 4096 * MS));
    h.advance(100 * MS);
    h.ack(&[1..=1], Duration::ZERO).unwrap();
    assert_eq!(h.detector.pto_count(), 0);
    assert_eq!(h.detector.stats().probe_timeouts, 2);
}

#[test]
fn loss_timer_takes_precedence_over_pto() {
    let mut h = Harness::new();
    h.send(0);
    h.send(1);
    h.send(2);
    h.advance(50 * MS);
    let summary = h.ack(&[2..=2], Duration::ZERO).unwrap();
    let sent_at = h.now() - 50 * MS;
    assert_eq!(summary.timer, Some(sent_at + Duration::from_micros(56_250)));
}

#[test]
fn spurious_loss_is_reported_when_a_lost_packet_is_acked() {
    let mut h = Harness::new();
    for pn in 0..4 {
        h.send(pn);
    }
    h.advance(10 * MS);
    h.ack(&[1..=3], Duration::ZERO).unwrap();
    assert_eq!(h.lost(), [0]);
    h.advance(MS);
    let summary = h.ack(&[0..=3], Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.spurious), (0, 1));
    assert_eq!(h.events.spurious[0].packet_number, 0);
    assert_eq!(
        h.detector.stats(),
        LossStats {
            acked: 3,
            lost: 1,
            spurious: 1,
            probe_timeouts: 0,
            persistent_congestion: 0,
        }
    );
    // Reported once only.
    let summary = h.ack(&[0..=3], Duration::ZERO).unwrap();
    assert_eq!(summary.spurious, 0);
}

#[test]
fn lost_records_are_forgotten_once_a_late_ack_is_implausible() {
    let mut h = Harness::new();
    for pn in 0..4 {
        h.send(pn);
    }
    h.advance(10 * MS);
    h.ack(&[1..=3], Duration::ZERO).unwrap();
    assert_eq!(
        h.detector.sent_packets().tracked_span(),
        4,
        "lost packet 0 is remembered and holds the front"
    );
    // Records live three PTOs (at the estimate of the moment); wait well past that.
    h.advance(h.detector.pto() * 4);
    h.send(4);
    h.ack(&[4..=4], Duration::ZERO).unwrap();
    assert_eq!(h.detector.sent_packets().tracked_span(), 0);
    let summary = h.ack(&[4..=4, 0..=0], Duration::ZERO).unwrap();
    assert_eq!(summary.spurious, 0, "too late to tell");
}

#[test]
fn memory_is_released_as_packets_are_acknowledged() {
    let mut h = Harness::new();
    for round in 0..100u64 {
        for pn in round * 10..round * 10 + 10 {
            h.send(pn);
        }
        h.advance(10 * MS);
        // The receiver repeats the whole history each time.
        h.ack(&[0..=round * 10 + 9], Duration::ZERO).unwrap();
        assert_eq!(h.detector.sent_packets().tracked_span(), 0);
    }
    assert_eq!(h.detector.stats().acked, 1000);
}

#[test]
fn rtt_sample_needs_the_largest_newly_acknowledged() {
    let mut h = Harness::new();
    h.send(0);
    h.send(1);
    h.advance(30 * MS);
    assert_eq!(
        h.ack(&[1..=1], Duration::ZERO).unwrap().rtt_sample,
        Some(30 * MS)
    );
    h.advance(30 * MS);
    // Packet 0 is newly acknowledged but the largest, 1, is not.
    let summary = h.ack(&[0..=1], Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.rtt_sample), (1, None));
}

#[test]
fn ack_of_only_non_ack_eliciting_packets_gives_no_rtt_sample() {
    let mut h = Harness::new();
    h.send_with(0, false);
    h.advance(30 * MS);
    let summary = h.ack(&[0..=0], Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.rtt_sample), (1, None));
    assert!(!h.detector.rtt().has_sample());
}

#[test]
fn after_a_path_change_only_packets_sent_on_the_new_path_give_rtt_samples() {
    let mut h = Harness::new();
    h.send(0);
    h.advance(20 * MS);
    h.ack(&[0..=0], Duration::ZERO).unwrap();
    assert_eq!(h.detector.rtt().min(), Some(20 * MS));
    h.send(1);
    h.advance(MS);
    let moved = h.now();
    h.detector.on_path_change(moved);
    assert!(!h.detector.rtt().has_sample(), "the estimator starts again");
    h.send(2);
    h.advance(100 * MS);
    // Packet 1 left on the old path: its ACK is no sample of the new one.
    let summary = h.ack(&[1..=1], Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.rtt_sample), (1, None));
    let summary = h.ack(&[1..=2], Duration::ZERO).unwrap();
    assert_eq!(summary.rtt_sample, Some(100 * MS));
    assert_eq!(h.detector.rtt().min(), Some(100 * MS));
}

#[test]
fn a_packet_sent_again_under_its_number_gives_no_rtt_sample() {
    let mut h = Harness::new();
    h.send(0);
    h.advance(5_000 * MS);
    // Packet 0 went again as it was: its ACK may be for either copy.
    h.detector.on_resent(h.now());
    h.advance(20 * MS);
    let summary = h.ack(&[0..=0], Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.rtt_sample), (1, None));
    assert!(!h.detector.rtt().has_sample());
    h.send(1);
    h.advance(20 * MS);
    let summary = h.ack(&[0..=1], Duration::ZERO).unwrap();
    assert_eq!(summary.rtt_sample, Some(20 * MS));
}

#[test]
fn after_a_path_change_packets_sent_on_the_old_path_leave_bytes_in_flight() {
    let mut h = Harness::new();
    h.send(0);
    h.send(1);
    let old_path = h.detector.bytes_in_flight();
    assert!(old_path > 0);
    h.advance(MS);
    h.detector.on_path_change(h.now());
    assert_eq!(h.detector.bytes_in_flight(), 0);
    h.send(2);
    let new_path = h.detector.bytes_in_flight();
    assert_eq!(new_path, old_path / 2, "only the new path's packet");
    // The old packets' ACK frees nothing of the new path's count.
    h.advance(30 * MS);
    let summary = h.ack(&[0..=1], Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.acked_bytes), (2, 0));
    assert_eq!(h.detector.bytes_in_flight(), new_path);
}

#[test]
fn ack_delay_is_capped_at_peer_max_ack_delay() {
    let mut h = Harness::new();
    h.send(0);
    h.advance(100 * MS);
    h.ack(&[0..=0], Duration::ZERO).unwrap();
    h.send(1);
    h.advance(200 * MS);
    h.ack(&[1..=1], 150 * MS).unwrap();
    // adjusted = 200 − min(150, 25) = 175; smoothed = 7/8 · 100 + 1/8 · 175.
    assert_eq!(h.detector.rtt().smoothed(), Duration::from_micros(109_375));
}

#[test]
fn ack_for_packet_never_sent_is_refused() {
    let mut h = Harness::new();
    assert_eq!(
        h.ack(&[0..=0], Duration::ZERO),
        Err(AckError::UnsentPacket { packet_number: 0 })
    );
    h.send(0);
    h.send(1);
    assert_eq!(
        h.ack(&[0..=5], Duration::ZERO),
        Err(AckError::UnsentPacket { packet_number: 5 })
    );
    h.send(3);
    assert_eq!(
        h.ack(&[3..=3, 0..=2], Duration::ZERO),
        Err(AckError::UnsentPacket { packet_number: 2 })
    );
    assert_eq!(
        h.detector.sent_packets().unacked_count(),
        3,
        "a refused ACK changes nothing"
    );
    assert_eq!(h.detector.largest_acked(), None);
}

#[test]
fn malformed_ranges_are_refused() {
    let mut h = Harness::new();
    for pn in 0..10 {
        h.send(pn);
    }
    assert_eq!(h.ack(&[], Duration::ZERO), Err(AckError::NoRanges));
    #[allow(clippy::reversed_empty_ranges)]
    let inverted = [5..=3];
    assert_eq!(
        h.ack(&inverted, Duration::ZERO),
        Err(AckError::InvertedRange { start: 5, end: 3 })
    );
    assert_eq!(
        h.ack(&[2..=3, 5..=6], Duration::ZERO),
        Err(AckError::RangesNotDescending {
            end: 6,
            previous_start: 2
        })
    );
    assert_eq!(
        h.ack(&[4..=8, 1..=4], Duration::ZERO),
        Err(AckError::RangesNotDescending {
            end: 4,
            previous_start: 4
        })
    );
    assert_eq!(h.detector.sent_packets().unacked_count(), 10);
}

#[test]
fn absurd_ack_delay_is_refused() {
    let mut h = Harness::new();
    h.send(0);
    let delay = Duration::from_secs(3600);
    assert_eq!(
        h.ack(&[0..=0], delay),
        Err(AckError::AckDelayTooLarge {
            ack_delay: delay,
            limit: Duration::from_millis(16_384)
        })
    );
}

#[test]
fn acked_packets_and_their_payloads_reach_the_sink() {
    let mut h = Harness::new();
    for pn in 0..6 {
        h.send(pn);
    }
    h.advance(MS);
    let summary = h.ack(&[4..=5, 0..=1], Duration::ZERO).unwrap();
    assert_eq!(h.acked(), [4, 5, 0, 1]);
    assert_eq!(summary.acked_bytes, 4000);
    assert!(h.events.acked.iter().all(|(pn, p)| p.payload == *pn));
    assert_eq!(h.lost(), [2], "5 − 2 ≥ 3; 3 is only two below");
}

/// RFC 9002 §7.6.3's assumptions: smoothed_rtt = 1 (here 100 ms),
/// rttvar = 0, max_ack_delay = 0; kGranularity is taken as 0 so the
/// persistent congestion duration is exactly 3. Packets 0..100 warm the
/// estimator up (identical samples decay rttvar to zero); returns the
/// next packet number.
fn rfc_9002_example_harness() -> (Harness, u64) {
    let mut h = Harness::with_config(LossConfig {
        granularity: Duration::ZERO,
        peer_max_ack_delay: Duration::ZERO,
        ..LossConfig::default()
    });
    for pn in 0..100 {
        h.send(pn);
        h.advance(100 * MS);
        h.ack(&[pn..=pn], Duration::ZERO).unwrap();
    }
    assert_eq!(h.detector.rtt().smoothed(), 100 * MS);
    assert_eq!(h.detector.rtt().rttvar(), Duration::ZERO);
    assert_eq!(h.detector.persistent_congestion_duration(), 300 * MS);
    (h, 100)
}

/// Sends packets 1..=4 of the RFC's example at t = 0, 1, 3 and 7 (in
/// units of 100 ms from now), packet numbers from `first`, and returns
/// them with the time t = 8.
fn rfc_9002_example_sends(h: &mut Harness, first: u64) -> [u64; 4] {
    let pns = [first, first + 1, first + 2, first + 3];
    for (pn, wait) in pns.into_iter().zip([1, 2, 4, 1]) {
        h.send(pn);
        h.advance(wait * 100 * MS);
    }
    pns
}

#[test]
fn persistent_congestion_is_established_as_in_rfc_9002_example() {
    let (mut h, first) = rfc_9002_example_harness();
    let [p1, p2, p3, p4] = rfc_9002_example_sends(&mut h, first);
    // t = 8: the ACK of packet 4; packets 1 to 3 are lost, sent over 3 units.
    let summary = h.ack(&[p4..=p4], Duration::ZERO).unwrap();
    assert_eq!(h.lost(), [p1, p2, p3]);
    assert_eq!(summary.lost.in_flight_packets, 3);
    assert!(summary.lost.persistent_congestion);
    assert_eq!(h.detector.stats().persistent_congestion, 1);
    // RFC 9002 §5.2: min_rtt restarts from the newest sample.
    assert_eq!(h.detector.rtt().min(), Some(100 * MS));
}

#[test]
fn a_delivered_packet_between_the_losses_means_no_persistent_congestion() {
    let (mut h, first) = rfc_9002_example_harness();
    let [p1, p2, p3, p4] = rfc_9002_example_sends(&mut h, first);
    let summary = h.ack(&[p4..=p4, p2..=p2], Duration::ZERO).unwrap();
    assert_eq!(h.lost(), [p1, p3]);
    assert!(!summary.lost.persistent_congestion);
}

#[test]
fn losses_over_less_than_the_duration_are_not_persistent_congestion() {
    let (mut h, first) = rfc_9002_example_harness();
    let pns = [first, first + 1, first + 2, first + 3];
    // Sent at t = 0, 1, 2.9, 3.9: the lost run spans 2.9 units.
    for (pn, wait) in pns.into_iter().zip([100, 190, 100, 100]) {
        h.send(pn);
        h.advance(wait * MS);
    }
    let summary = h.ack(&[pns[3]..=pns[3]], Duration::ZERO).unwrap();
    assert_eq!(summary.lost.packets, 3);
    assert!(!summary.lost.persistent_congestion);
}

#[test]
fn losses_before_the_first_rtt_sample_are_not_persistent_congestion() {
    let mut h = Harness::with_config(LossConfig {
        initial_rtt: 100 * MS,
        granularity: Duration::ZERO,
        peer_max_ack_delay: Duration::ZERO,
        ..LossConfig::default()
    });
    for (pn, wait) in (0..4).zip([1, 2, 4, 1]) {
        h.send(pn);
        h.advance(wait * 100 * MS);
    }
    let summary = h.ack(&[3..=3], Duration::ZERO).unwrap();
    assert_eq!(summary.lost.packets, 3);
    assert!(!summary.lost.persistent_congestion);
}

#[test]
fn persistent_congestion_builds_across_acks_and_is_declared_once() {
    let (mut h, first) = rfc_9002_example_harness();
    let [p1, p2, p3, p4] = rfc_9002_example_sends(&mut h, first);
    let p5 = p4 + 1;
    h.send(p5);
    // The first ACK (of 4) loses 1 to 3 at once; an ACK of 5 that also
    // repeats 4 adds nothing, so persistent congestion is not repeated.
    let summary = h.ack(&[p4..=p4], Duration::ZERO).unwrap();
    assert!(summary.lost.persistent_congestion);
    assert_eq!(h.lost(), [p1, p2, p3]);
    h.advance(100 * MS);
    let summary = h.ack(&[p4..=p5], Duration::ZERO).unwrap();
    assert!(!summary.lost.persistent_congestion);
    assert_eq!(h.detector.stats().persistent_congestion, 1);
}

#[test]
fn summaries_carry_the_send_times_congestion_control_needs() {
    let mut h = Harness::new();
    let t0 = h.now();
    for pn in 0..6 {
        h.send(pn);
        h.advance(MS);
    }
    let summary = h.ack(&[4..=5, 0..=0], Duration::ZERO).unwrap();
    // Largest newly acknowledged: 5, sent 5 ms after packet 0.
    assert_eq!(summary.largest_acked_sent_at, Some(t0 + 5 * MS));
    // Lost: 1 and 2 (three below 5), 3 by time (sent 3 ms ago with a
    // 1 ms RTT); the newest was sent at 3 ms.
    assert_eq!(h.lost(), [1, 2, 3]);
    assert_eq!(summary.lost.largest_sent_at, Some(t0 + 3 * MS));
    let summary = h.ack(&[4..=5, 0..=0], Duration::ZERO).unwrap();
    assert_eq!(summary.largest_acked_sent_at, None, "nothing new");
}

mod model;

#[test]
fn abandoning_what_is_in_flight_frees_the_ring_and_keeps_the_rtt() {
    let mut h = Harness::new();
    for pn in 0..4 {
        h.send(pn);
    }
    h.advance(30 * MS);
    h.ack(&[0..=1], Duration::ZERO).unwrap();
    let rtt = h.detector.rtt().smoothed();
    for pn in 4..2_000 {
        h.send(pn);
    }
    assert!(h.detector.sent_packets().memory() > 0);
    h.detector.abandon_in_flight();
    h.detector.invariants().unwrap();
    assert_eq!(h.detector.bytes_in_flight(), 0);
    assert_eq!(h.detector.sent_packets().unacked_count(), 0);
    assert_eq!(h.detector.sent_packets().memory(), 0);
    assert_eq!(h.detector.poll_timeout(), None, "nothing left to probe for");
    assert_eq!(h.detector.rtt().smoothed(), rtt);
}

#[test]
fn an_ack_resolving_more_ranges_than_noted_acks_them_all_and_its_repeat_nothing() {
    let mut h = Harness::new();
    for pn in 0..40 {
        h.send(pn);
    }
    // Twenty ranges of one packet, each new: more than the check notes,
    // so the ACK is walked again whole.
    let ranges: Vec<_> = (0..20u64).rev().map(|k| 2 * k..=2 * k).collect();
    let summary = h.ack(&ranges, Duration::ZERO).unwrap();
    assert_eq!(summary.newly_acked, 20);
    let mut acked = h.acked();
    acked.sort_unstable();
    assert_eq!(acked, (0..20).map(|k| 2 * k).collect::<Vec<_>>());
    // The same ranges again resolve nothing; one more range with a new
    // packet resolves it alone.
    let summary = h.ack(&ranges, Duration::ZERO).unwrap();
    assert_eq!((summary.newly_acked, summary.spurious), (0, 0));
    let mut more = vec![39..=39];
    more.extend(ranges.iter().cloned());
    let summary = h.ack(&more, Duration::ZERO).unwrap();
    assert_eq!(h.acked(), vec![39]);
    assert_eq!(summary.newly_acked, 1);
}
