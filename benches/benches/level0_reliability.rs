//! Level 0 benchmarks of tern-reliability: the per-packet and per-ACK costs of
//! the sender's loss detector and the receiver's ACK ranges, replay window and
//! RTT estimator. Every benchmark runs in steady state (the tracker neither
//! grows nor shrinks across iterations), so allocation counts should be zero.

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use tern_reliability::{
    AckFrequency, AckPolicy, AckRanges, Arrival, LossDetector, RecoveryBuffer, ReplayWindow,
    RttEstimator, SentPacket,
};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// Packets in flight while the sender's benchmarks run.
const IN_FLIGHT: u64 = 10_000;
/// Time between two sends: 10 000 packets in flight make a 100 ms RTT.
const SEND_INTERVAL: Duration = Duration::from_micros(10);
const MAX_PACKET: u32 = 1452;

/// A loss detector with `IN_FLIGHT` packets outstanding, acknowledged oldest first.
struct Flight {
    clock: quanta::Clock,
    time: Arc<quanta::Mock>,
    detector: LossDetector<u64>,
    events: RecoveryBuffer<u64>,
    next_send: u64,
    next_ack: u64,
}

impl Flight {
    fn new() -> Self {
        let (clock, time) = quanta::Clock::mock();
        time.increment(Duration::from_secs(1));
        let mut flight = Self {
            clock,
            time,
            detector: LossDetector::default(),
            events: RecoveryBuffer::with_capacity(1024),
            next_send: 0,
            next_ack: 0,
        };
        for _ in 0..IN_FLIGHT {
            let (pn, packet) = flight.next_packet();
            flight
                .detector
                .on_sent(pn, packet)
                .expect("increasing packet numbers");
        }
        flight
    }

    /// The next packet to send, a send interval after the previous one.
    fn next_packet(&mut self) -> (u64, SentPacket<u64>) {
        self.time.increment(SEND_INTERVAL);
        let pn = self.next_send;
        self.next_send += 1;
        let packet = SentPacket {
            time_sent: self.clock.now(),
            size: MAX_PACKET,
            ack_eliciting: true,
            in_flight: true,
            payload: pn,
        };
        (pn, packet)
    }

    /// The range acknowledging the `k` oldest packets not yet covered by a range.
    fn next_ack_range(&mut self, k: u64) -> RangeInclusive<u64> {
        let range = self.next_ack..=self.next_ack + k - 1;
        self.next_ack += k;
        range
    }

    fn ack(&mut self, range: RangeInclusive<u64>) {
        self.events.clear();
        let now = self.clock.now();
        let summary = self
            .detector
            .on_ack(now, [range], Duration::from_millis(1), &mut self.events)
            .expect("valid ACK");
        debug_assert_eq!(summary.lost.packets, 0);
    }
}

/// The sender: recording sent packets and processing ACKs.
mod loss_detector {
    use super::*;

    /// One `on_sent` with ~10 000 packets in flight (the oldest packet is
    /// acknowledged, untimed, before each send).
    #[divan::bench(sample_size = 64)]
    fn on_sent(bencher: Bencher) {
        let flight = RefCell::new(Flight::new());
        bencher
            .with_inputs(|| {
                let mut flight = flight.borrow_mut();
                let range = flight.next_ack_range(1);
                flight.ack(range);
                flight.next_packet()
            })
            .bench_local_values(|(pn, packet)| {
                flight
                    .borrow_mut()
                    .detector
                    .on_sent(pn, packet)
                    .expect("increasing packet numbers");
            });
    }

    /// One ACK frame newly acknowledging the `k` oldest of ~10 000 packets in
    /// flight; `k` new packets are sent, untimed, before each ACK.
    #[divan::bench(args = [1, 16, 256], sample_size = 16)]
    fn on_ack(bencher: Bencher, k: u64) {
        let flight = RefCell::new(Flight::new());
        bencher
            .counter(ItemsCount::new(k))
            .with_inputs(|| {
                let mut flight = flight.borrow_mut();
                for _ in 0..k {
                    let (pn, packet) = flight.next_packet();
                    flight
                        .detector
                        .on_sent(pn, packet)
                        .expect("increasing packet numbers");
                }
                flight.next_ack_range(k)
            })
            .bench_local_values(|range| flight.borrow_mut().ack(range));
    }
}

/// Comparison: the bare map operations of a `BTreeMap`-keyed sent-packet
/// record under the same workload, with no RTT, loss or timer logic. It shows
/// what the ring buffer saves, chiefly the allocations of B-tree nodes as
/// packet numbers stream through.
mod btreemap_baseline {
    use super::*;
    use std::collections::BTreeMap;

    fn filled(clock: &quanta::Clock) -> BTreeMap<u64, SentPacket<u64>> {
        (0..IN_FLIGHT)
            .map(|pn| {
                let packet = SentPacket {
                    time_sent: clock.now(),
                    size: MAX_PACKET,
                    ack_eliciting: true,
                    in_flight: true,
                    payload: pn,
                };
                (pn, packet)
            })
            .collect()
    }

    /// Insert one packet with ~10 000 in the map (oldest removed, untimed).
    #[divan::bench(sample_size = 64)]
    fn on_sent(bencher: Bencher) {
        let (clock, _) = quanta::Clock::mock();
        let map = RefCell::new(filled(&clock));
        let next = std::cell::Cell::new(IN_FLIGHT);
        bencher
            .with_inputs(|| {
                map.borrow_mut().pop_first();
                let pn = next.get();
                next.set(pn + 1);
                let packet = SentPacket {
                    time_sent: clock.now(),
                    size: MAX_PACKET,
                    ack_eliciting: true,
                    in_flight: true,
                    payload: pn,
                };
                (pn, packet)
            })
            .bench_local_values(|(pn, packet)| map.borrow_mut().insert(pn, packet));
    }

    /// Remove the `k` oldest of ~10 000 packets by range, collecting them as
    /// an ACK would (refilled, untimed).
    #[divan::bench(args = [1, 16, 256], sample_size = 16)]
    fn on_ack(bencher: Bencher, k: u64) {
        let (clock, _) = quanta::Clock::mock();
        let map = RefCell::new(filled(&clock));
        let acked = RefCell::new(Vec::with_capacity(1024));
        let (next_send, next_ack) = (std::cell::Cell::new(IN_FLIGHT), std::cell::Cell::new(0));
        bencher
            .counter(ItemsCount::new(k))
            .with_inputs(|| {
                let mut map = map.borrow_mut();
                for _ in 0..k {
                    let pn = next_send.get();
                    next_send.set(pn + 1);
                    let packet = SentPacket {
                        time_sent: clock.now(),
                        size: MAX_PACKET,
                        ack_eliciting: true,
                        in_flight: true,
                        payload: pn,
                    };
                    map.insert(pn, packet);
                }
                let start = next_ack.get();
                next_ack.set(start + k);
                start..=start + k - 1
            })
            .bench_local_values(|range| {
                let mut map = map.borrow_mut();
                let mut acked = acked.borrow_mut();
                acked.clear();
                for pn in range {
                    if let Some(packet) = map.remove(&pn) {
                        acked.push((pn, packet));
                    }
                }
                acked.len()
            });
    }
}

/// The receiver's record of received packet numbers.
mod ack_ranges {
    use super::*;

    /// Packets arriving in order: the last range grows.
    #[divan::bench]
    fn insert_in_order(bencher: Bencher) {
        let mut ranges = AckRanges::default();
        let mut pn = 0u64;
        bencher.bench_local(|| {
            pn += 1;
            ranges.insert(black_box(pn))
        });
    }

    /// Every fourth packet missing: a new range every four packets, the oldest
    /// dropped once 64 are held.
    #[divan::bench]
    fn insert_with_gaps(bencher: Bencher) {
        let mut ranges = AckRanges::default();
        let mut pn = 0u64;
        bencher.bench_local(|| {
            pn += if pn % 4 == 2 { 2 } else { 1 };
            ranges.insert(black_box(pn))
        });
    }

    /// Neighbouring packets swapped (1, 0, 3, 2, ...): every other insert fills
    /// a hole below the largest and merges two ranges.
    #[divan::bench]
    fn insert_reordered(bencher: Bencher) {
        let mut ranges = AckRanges::default();
        let mut i = 0u64;
        bencher.bench_local(|| {
            i += 1;
            ranges.insert(black_box(i ^ 1))
        });
    }
}

/// The receiver's decision to acknowledge, per packet received in order.
mod ack_policy {
    use super::*;

    /// Receives packets in order, sending an ACK whenever one is due, with
    /// the policy as `request` leaves it.
    fn receive(bencher: Bencher, request: Option<AckFrequency>) {
        let (clock, time) = quanta::Clock::mock();
        let mut policy = AckPolicy::default();
        if let Some(request) = request {
            policy.on_ack_frequency(clock.now(), request);
        }
        bencher.bench_local(|| {
            time.increment(Duration::from_micros(1));
            let now = clock.now();
            policy.on_received(now, true, black_box(Arrival::InOrder));
            if policy.ack_due(now) {
                policy.on_ack_sent();
            }
        });
    }

    /// RFC 9000's default: an ACK every 2 ack-eliciting packets.
    #[divan::bench]
    fn on_received_every_other(bencher: Bencher) {
        receive(bencher, None);
    }

    /// Thinned as a sender with a large window asks: an ACK every 32.
    #[divan::bench]
    fn on_received_thinned(bencher: Bencher) {
        let request = AckFrequency::for_path(1, 10_000 * 1452, 1452, Duration::from_millis(50));
        receive(bencher, Some(request));
    }
}

/// The replay window (grown to its 4096 packet numbers).
mod replay_window {
    use super::*;

    /// Accepting the next packet number: check, slide by one, mark.
    #[divan::bench]
    fn accept_in_order(bencher: Bencher) {
        let mut window = ReplayWindow::default();
        let mut pn = 0u64;
        bencher.bench_local(|| {
            pn += 1;
            window.accept(black_box(pn))
        });
    }

    /// Checking a packet number scattered inside a full window (a duplicate).
    #[divan::bench]
    fn check_duplicate(bencher: Bencher) {
        let mut window = ReplayWindow::default();
        let largest = 1_000_000u64;
        window.accept(largest).expect("fresh packet number");
        // A packet a whole window late grows the window to its 4 096
        // numbers; the ones the growth adds count as accepted.
        assert!(window.accept(largest - 4095).is_err());
        assert_eq!(window.window(), 4096);
        for pn in largest - 511..largest {
            window.accept(pn).expect("fresh packet number");
        }
        let mut i = 0u64;
        bencher.bench_local(|| {
            i = i.wrapping_add(0x9E37_79B9);
            window.check(black_box(largest - i % 4096))
        });
    }
}

/// The RFC 9002 RTT estimator.
mod rtt {
    use super::*;

    /// One sample (latest RTT between 50 and 60 ms, 2 ms ack delay).
    #[divan::bench]
    fn update(bencher: Bencher) {
        let mut rtt = RttEstimator::default();
        let mut i = 0u64;
        bencher.bench_local(|| {
            i += 1;
            let latest = Duration::from_micros(50_000 + (i * 7919) % 10_000);
            rtt.update(black_box(latest), black_box(Duration::from_millis(2)));
            rtt.smoothed()
        });
    }
}
