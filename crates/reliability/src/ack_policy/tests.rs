use super::*;
use crate::AckRanges;
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

struct Receiver {
    ranges: AckRanges,
    policy: AckPolicy,
}

impl Receiver {
    fn new() -> Self {
        Self {
            ranges: AckRanges::default(),
            policy: AckPolicy::default(),
        }
    }
    fn receive(&mut self, now: Instant, pn: u64, ack_eliciting: bool) {
        let arrival = self.ranges.insert(pn);
        self.policy.on_received(now, ack_eliciting, arrival);
        self.policy.invariants().unwrap();
    }
}

/// A receiver with the default policy, and the time it starts at.
fn start() -> (Instant, Receiver) {
    let (clock, _) = quanta::Clock::mock();
    (clock.now(), Receiver::new())
}

fn request(sequence: u64, threshold: u32, delay: Duration) -> AckFrequency {
    AckFrequency {
        sequence,
        ack_eliciting_threshold: threshold,
        max_ack_delay: delay,
    }
}

#[test]
fn single_ack_eliciting_packet_waits_max_ack_delay() {
    let (t0, mut rx) = start();
    rx.receive(t0, 0, true);
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 25 * MS));
    assert!(!rx.policy.ack_due(t0 + 24 * MS));
    assert!(rx.policy.ack_due(t0 + 25 * MS));
    assert_eq!(rx.policy.ack_delay(t0 + 25 * MS), 25 * MS);
}

#[test]
fn second_ack_eliciting_packet_makes_the_ack_due_at_once() {
    let (t0, mut rx) = start();
    rx.receive(t0, 0, true);
    rx.receive(t0 + 3 * MS, 1, true);
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 3 * MS));
    rx.policy.on_ack_sent();
    assert_eq!(rx.policy.poll_timeout(), None);
    assert_eq!(rx.policy.pending_ack_eliciting(), 0);
}

#[test]
fn a_packet_asking_for_an_ack_is_acknowledged_at_once_under_thinning() {
    let (t0, mut rx) = start();
    assert!(rx.policy.on_ack_frequency(t0, request(1, 8, 5 * MS)));
    // Nothing waits: asking changes nothing.
    rx.policy.ack_at_once(t0);
    assert_eq!(rx.policy.poll_timeout(), None);
    // A probe, in order, one of eight: thinned, it would wait 5 ms.
    rx.receive(t0 + MS, 0, true);
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 6 * MS));
    rx.policy.ack_at_once(t0 + MS);
    assert!(rx.policy.ack_due(t0 + MS));
    assert!(rx.policy.worth_sending_alone(t0 + MS));
    rx.policy.on_ack_sent();
    // The next probe gets an ACK of its own too.
    rx.receive(t0 + 2 * MS, 1, true);
    rx.policy.ack_at_once(t0 + 2 * MS);
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 2 * MS));
}

#[test]
fn one_packet_waits_for_data_to_carry_its_ack_and_two_are_worth_an_ack_alone() {
    let (t0, mut rx) = start();
    // Thinned by the peer: 8 packets before an ACK is due.
    assert!(rx.policy.on_ack_frequency(t0, request(1, 8, 5 * MS)));
    rx.receive(t0, 0, true);
    assert!(!rx.policy.worth_sending_alone(t0));
    assert!(
        rx.policy.worth_sending_alone(t0 + 5 * MS),
        "due by its delay"
    );
    rx.receive(t0 + MS, 1, true);
    assert!(!rx.policy.ack_due(t0 + MS));
    assert!(rx.policy.worth_sending_alone(t0 + MS));
    rx.policy.on_ack_sent();
    assert!(!rx.policy.worth_sending_alone(t0 + MS));
    // Packets that elicit no ACK never make one worth sending.
    rx.receive(t0 + 2 * MS, 2, false);
    rx.receive(t0 + 2 * MS, 3, false);
    assert!(!rx.policy.worth_sending_alone(t0 + 100 * MS));
}

#[test]
fn non_ack_eliciting_packets_never_schedule_an_ack() {
    let (t0, mut rx) = start();
    for pn in 0..10 {
        rx.receive(t0, pn * 2, false);
    }
    assert_eq!(rx.policy.poll_timeout(), None);
}

#[test]
fn gap_before_ack_eliciting_packet_triggers_immediate_ack() {
    let (t0, mut rx) = start();
    rx.receive(t0, 0, true);
    rx.policy.on_ack_sent();
    rx.receive(t0 + MS, 2, true);
    assert!(rx.policy.ack_due(t0 + MS));
}

#[test]
fn late_ack_eliciting_packet_triggers_immediate_ack() {
    let (t0, mut rx) = start();
    rx.receive(t0, 0, true);
    rx.receive(t0, 2, false);
    rx.policy.on_ack_sent();
    rx.receive(t0 + MS, 1, true);
    assert!(rx.policy.ack_due(t0 + MS));
    // The ACK delay is measured from the largest packet, not the late one.
    assert_eq!(rx.policy.ack_delay(t0 + MS), MS);
}

#[test]
fn duplicate_packet_changes_nothing() {
    let (t0, mut rx) = start();
    rx.receive(t0, 0, true);
    rx.policy.on_ack_sent();
    rx.receive(t0 + MS, 0, true);
    assert_eq!(rx.policy.poll_timeout(), None);
}

#[test]
fn a_senders_request_thins_in_order_acks() {
    let (t0, mut rx) = start();
    assert!(rx.policy.on_ack_frequency(t0, request(1, 16, 5 * MS)));
    for pn in 0..15 {
        rx.receive(t0, pn, true);
        assert!(!rx.policy.ack_due(t0), "packet {pn}");
    }
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 5 * MS));
    rx.receive(t0, 15, true);
    assert!(rx.policy.ack_due(t0));
}

#[test]
fn requests_are_bounded_by_the_receivers_limits() {
    let (t0, mut rx) = start();
    assert!(
        rx.policy
            .on_ack_frequency(t0, request(1, u32::MAX, Duration::MAX))
    );
    assert_eq!(
        rx.policy.ack_eliciting_threshold(),
        DEFAULT_MAX_ACK_ELICITING_THRESHOLD
    );
    assert_eq!(
        rx.policy.max_ack_delay(),
        25 * MS,
        "never beyond the advertised"
    );
    assert!(
        rx.policy
            .on_ack_frequency(t0, request(2, 0, Duration::ZERO))
    );
    assert_eq!(rx.policy.ack_eliciting_threshold(), 1);
    rx.policy.invariants().unwrap();
}

#[test]
fn stale_requests_are_ignored() {
    let (t0, mut rx) = start();
    assert!(rx.policy.on_ack_frequency(t0, request(5, 8, 5 * MS)));
    assert!(!rx.policy.on_ack_frequency(t0, request(4, 30, 5 * MS)));
    assert!(!rx.policy.on_ack_frequency(t0, request(5, 30, 5 * MS)));
    assert_eq!(rx.policy.ack_eliciting_threshold(), 8);
}

#[test]
fn a_request_makes_a_pending_ack_due_by_the_new_rules() {
    let (t0, mut rx) = start();
    rx.policy.on_ack_frequency(t0, request(1, 16, 20 * MS));
    for pn in 0..4 {
        rx.receive(t0, pn, true);
    }
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 20 * MS));
    rx.policy.on_ack_frequency(t0 + MS, request(2, 16, 2 * MS));
    assert_eq!(rx.policy.poll_timeout(), Some(t0 + 2 * MS));
    rx.policy.on_ack_frequency(t0 + MS, request(3, 4, 2 * MS));
    assert!(rx.policy.ack_due(t0 + MS));
}

#[test]
fn the_packets_after_a_gap_are_acknowledged_at_once_despite_thinning() {
    let (t0, mut rx) = start();
    rx.policy.on_ack_frequency(t0, request(1, 32, 20 * MS));
    rx.receive(t0, 0, true);
    rx.policy.on_ack_sent();
    // Packet 1 is lost: 2 arrives after a gap, then 3, 4, 5 promptly acknowledged.
    for pn in 2..=5 {
        rx.receive(t0, pn, true);
        assert!(rx.policy.ack_due(t0), "packet {pn}");
        rx.policy.on_ack_sent();
    }
    rx.receive(t0, 6, true);
    assert!(!rx.policy.ack_due(t0), "thinned again");
}

#[test]
fn a_sender_asks_for_acks_in_proportion_to_its_window() {
    let rtt = 80 * MS;
    // Small windows keep RFC 9000's every other packet.
    let small = AckFrequency::for_path(1, 10 * 1452, 1452, rtt);
    assert_eq!(small.ack_eliciting_threshold, 2);
    // 80 packets: 8 ACKs per window.
    let medium = AckFrequency::for_path(2, 80 * 1452, 1452, rtt);
    assert_eq!(medium.ack_eliciting_threshold, 10);
    assert_eq!(medium.max_ack_delay, 10 * MS);
    // Large windows stop at the cap.
    let large = AckFrequency::for_path(3, 100_000 * 1452, 1452, rtt);
    assert_eq!(
        large.ack_eliciting_threshold,
        DEFAULT_MAX_ACK_ELICITING_THRESHOLD
    );
    // A LAN round trip still asks for at least the timer granularity.
    let lan = AckFrequency::for_path(4, 80 * 1452, 1452, Duration::from_micros(100));
    assert_eq!(lan.max_ack_delay, MIN_REQUESTED_ACK_DELAY);
    assert!(medium.supersedes(&small));
    assert!(!AckFrequency::for_path(5, 90 * 1452, 1452, rtt).supersedes(&medium));
    assert!(large.supersedes(&medium));
    assert!(lan.supersedes(&medium), "the delay changed tenfold");
    // Degenerate inputs give a usable request.
    let odd = AckFrequency::for_path(6, u64::MAX, 0, Duration::MAX);
    assert_eq!(
        odd.ack_eliciting_threshold,
        DEFAULT_MAX_ACK_ELICITING_THRESHOLD
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn ack_is_never_due_later_than_max_ack_delay_after_an_ack_eliciting_packet(
        events in prop::collection::vec((0u64..64, any::<bool>(), 0u64..40, prop::bool::weighted(0.2)), 1..100),
        requests in prop::collection::vec((0u64..100, any::<u32>(), 0u64..100_000), 0..5),
    ) {
        let (clock, mock) = quanta::Clock::mock();
        let mut rx = Receiver::new();
        let mut oldest_unacked: Option<Instant> = None;
        let mut requests = requests.into_iter();
        for (pn, ack_eliciting, advance_ms, send_ack) in events {
            mock.increment(Duration::from_millis(advance_ms));
            let now = clock.now();
            if pn % 16 == 0
                && let Some((sequence, threshold, delay_us)) = requests.next()
            {
                rx.policy.on_ack_frequency(now, request(sequence, threshold, Duration::from_micros(delay_us)));
                prop_assert_eq!(rx.policy.invariants(), Ok(()));
            }
            let arrival = rx.ranges.insert(pn);
            rx.policy.on_received(now, ack_eliciting, arrival);
            if ack_eliciting && arrival.is_new() && oldest_unacked.is_none() {
                oldest_unacked = Some(now);
            }
            prop_assert_eq!(rx.policy.invariants(), Ok(()));
            if let Some(oldest) = oldest_unacked {
                let deadline = rx.policy.poll_timeout();
                prop_assert!(deadline.is_some_and(|d| d <= oldest + 25 * MS));
                if rx.policy.pending_ack_eliciting() >= rx.policy.ack_eliciting_threshold() {
                    prop_assert!(rx.policy.ack_due(now), "threshold reached");
                }
            }
            if send_ack {
                rx.policy.on_ack_sent();
                oldest_unacked = None;
            }
        }
    }
}
