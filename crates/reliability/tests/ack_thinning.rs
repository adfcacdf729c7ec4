//! ACK thinning at a high rate against loss detection: a sender and a
//! receiver exchange packets over a path of fixed one-way delay, in virtual
//! time, with one packet dropped. With the ACK frequency a sender asks for
//! on a large window (an ACK every 32 packets), the loss is still declared
//! by the packet threshold as early as when every other packet is
//! acknowledged, within RFC 9002's bounds, and with far fewer ACKs.

use std::ops::RangeInclusive;
use std::time::Duration;

use quanta::Instant;
use tern_reliability::{
    AckFrequency, AckPolicy, AckRanges, DEFAULT_MAX_ACK_ELICITING_THRESHOLD, LossDetector,
    RecoveryBuffer, SentPacket,
};

/// 100 000 packets per second.
const INTERVAL: Duration = Duration::from_micros(10);
const ONE_WAY: Duration = Duration::from_millis(10);
const PACKETS: u64 = 4_000;
const DROPPED: u64 = 2_000;
const MSS: u64 = 1_452;

/// One ACK frame on its way back.
struct Ack {
    /// Sent by the receiver at this offset from the start.
    sent: Duration,
    ranges: Vec<RangeInclusive<u64>>,
    ack_delay: Duration,
}

/// The receiver's side: every packet but `DROPPED` arrives `ONE_WAY` after
/// it was sent; ACKs leave when the policy says so (on arrival, or when its
/// timer fires before the next arrival).
fn receiver_acks(start: Instant, request: Option<AckFrequency>) -> Vec<Ack> {
    let mut ranges = AckRanges::default();
    let mut policy = AckPolicy::default();
    if let Some(request) = request {
        assert!(policy.on_ack_frequency(start, request));
    }
    let mut acks = Vec::new();
    let mut emit = |ranges: &AckRanges, policy: &mut AckPolicy, at: Instant| {
        acks.push(Ack {
            sent: at.duration_since(start),
            ranges: ranges.iter().collect(),
            ack_delay: policy.ack_delay(at),
        });
        policy.on_ack_sent();
    };
    for pn in (0..PACKETS).filter(|&pn| pn != DROPPED) {
        let arrival = start + INTERVAL * u32::try_from(pn).expect("few packets") + ONE_WAY;
        if let Some(deadline) = policy.poll_timeout()
            && deadline < arrival
        {
            emit(&ranges, &mut policy, deadline);
        }
        let how = ranges.insert(pn);
        policy.on_received(arrival, true, how);
        policy.invariants().expect("policy invariants");
        if policy.ack_due(arrival) {
            emit(&ranges, &mut policy, arrival);
        }
    }
    if let Some(deadline) = policy.poll_timeout() {
        emit(&ranges, &mut policy, deadline);
    }
    acks
}

/// What the sender saw.
struct Outcome {
    acks: usize,
    /// When `DROPPED` was declared lost, from the start.
    declared: Duration,
    losses: u64,
}

/// The sender's side: packets every `INTERVAL`, ACKs processed as they
/// arrive `ONE_WAY` after the receiver sent them.
fn run(request: Option<AckFrequency>) -> Outcome {
    let (clock, mock) = quanta::Clock::mock();
    mock.increment(Duration::from_secs(1));
    let start = clock.now();
    let acks = receiver_acks(start, request);
    let mut detector: LossDetector<()> = LossDetector::default();
    let mut events = RecoveryBuffer::default();
    let mut declared = None;
    let mut next_ack = acks.iter().peekable();
    let mut now = Duration::ZERO;
    let advance_to = |at: Duration, now: &mut Duration| {
        if at > *now {
            mock.increment(at - *now);
            *now = at;
        }
    };
    // One pass more than there are packets: it delivers the last ACKs.
    for pn in 0..=PACKETS {
        let send_at = if pn < PACKETS {
            INTERVAL * u32::try_from(pn).expect("few packets")
        } else {
            Duration::MAX
        };
        while let Some(ack) = next_ack.next_if(|ack| ack.sent + ONE_WAY <= send_at) {
            advance_to(ack.sent + ONE_WAY, &mut now);
            events.clear();
            detector
                .on_ack(
                    clock.now(),
                    ack.ranges.iter().cloned(),
                    ack.ack_delay,
                    &mut events,
                )
                .expect("a valid ACK");
            if events.lost.iter().any(|(lost, _)| *lost == DROPPED) {
                declared = Some(now);
            }
        }
        if pn == PACKETS {
            break;
        }
        advance_to(send_at, &mut now);
        let packet = SentPacket {
            time_sent: clock.now(),
            size: 1_452,
            ack_eliciting: true,
            in_flight: true,
            payload: (),
        };
        detector.on_sent(pn, packet).expect("increasing numbers");
    }
    detector.invariants().expect("detector invariants");
    Outcome {
        acks: acks.len(),
        declared: declared.expect("the dropped packet is declared lost"),
        losses: detector.stats().lost,
    }
}

#[test]
fn thinned_acks_still_declare_a_loss_as_early_as_every_other_packet_acks() {
    let rtt = ONE_WAY * 2;
    // 2 000 packets of window: the sender asks for the cap.
    let request = AckFrequency::for_path(1, 2_000 * MSS, MSS, rtt);
    assert_eq!(
        request.ack_eliciting_threshold,
        DEFAULT_MAX_ACK_ELICITING_THRESHOLD
    );
    let thinned = run(Some(request));
    let every_other = run(None);

    // Only the dropped packet is lost: thinning causes no false loss.
    assert_eq!((thinned.losses, every_other.losses), (1, 1));
    // Declared by the packet threshold: when the ACK sent on the arrival of
    // the third packet after it comes back, as with every-other-packet ACKs.
    let third_later_arrives = INTERVAL * u32::try_from(DROPPED + 3).expect("small") + ONE_WAY;
    assert_eq!(thinned.declared, third_later_arrives + ONE_WAY);
    assert_eq!(thinned.declared, every_other.declared);
    // RFC 9002 §6.1.2: at the latest 9/8 of the round trip after it was sent.
    let sent = INTERVAL * u32::try_from(DROPPED).expect("small");
    assert!(thinned.declared <= sent + rtt * 9 / 8);
    // And with about 16 times fewer ACKs.
    assert!(
        thinned.acks * 12 < every_other.acks,
        "{} ACKs thinned, {} every other packet",
        thinned.acks,
        every_other.acks
    );
}
