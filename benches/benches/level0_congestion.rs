//! Level 0 benchmarks of tern-congestion: the cost of each call a connection
//! makes per packet — LEDBAT's on_sent, on_ack (slow start and congestion
//! avoidance, directly and through the `AnyController` enum), on_loss,
//! Reno's on_ack, CUBIC's on_sent and on_ack (HyStart++ slow start and
//! congestion avoidance) — and of the pacer's and the token bucket's "when
//! may this packet leave?". The controllers keep no RTT estimate and no flight count
//! of their own: each call is handed the connection's (an `Rtt` snapshot,
//! the tracker's bytes in flight), as a connection would.
//!
//! Time advances on a mock clock by a few microseconds per iteration (the
//! mock's atomic add is part of every figure). Every benchmark runs in
//! steady state, so allocation counts should be zero.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use divan::{Bencher, black_box};
use quanta::{Clock, Mock};
use tern_congestion::{
    Acked, AnyController, Controller, Cubic, CubicConfig, Ledbat, LedbatConfig, Lost,
    MAX_WINDOW_LIMIT, OneWayDelay, Pacer, PacerConfig, Reno, RenoConfig, Rtt, TokenBucket,
    take_all,
};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const PACKET: u64 = 1_452;
/// Base one-way delay of the modelled path, in nanoseconds.
const BASE_OWD: i64 = 20_000_000;
const BASE_RTT: Duration = Duration::from_millis(40);
/// A flight that never drains, so the window is never capped by its use.
const FLIGHT: u64 = u64::MAX / 2;

/// The connection's RTT figures with `queuing` of queue on the path.
fn rtt(queuing: Duration) -> Rtt {
    Rtt::new(BASE_RTT + queuing / 2, BASE_RTT, BASE_RTT + queuing)
}

fn clock() -> (Clock, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    mock.increment(Duration::from_secs(1));
    (clock, mock)
}

/// One packet sent now and declared lost now: a congestion event, which
/// ends slow start.
fn lose_one(cc: &mut impl Controller, clock: &Clock) {
    let lost = Lost {
        packets: 1,
        bytes: PACKET,
        largest_sent_at: clock.now(),
    };
    cc.on_loss(clock.now(), &lost, &rtt(Duration::ZERO));
}

/// `on_sent` of `cc`, one packet every 10 µs into a flight that never
/// drains.
fn bench_on_sent(bencher: Bencher, clock: &Clock, mock: &Mock, mut cc: impl Controller) {
    bencher.bench_local(|| {
        mock.increment(Duration::from_micros(10));
        cc.on_sent(clock.now(), black_box(FLIGHT));
    });
}

/// A LEDBAT controller that stays in its phase for any number of
/// iterations: no slowdowns, an unreachable maximum window, and a flight
/// that never drains.
fn ledbat(clock: &Clock, mock: &Mock, slow_start: bool) -> Ledbat {
    let mut config = LedbatConfig::default();
    config.periodic_slowdowns = false;
    config.max_window = MAX_WINDOW_LIMIT;
    let mut cc = Ledbat::new(config).expect("a valid configuration");
    cc.on_sent(clock.now(), FLIGHT);
    // An empty-queue sample sets the base delay.
    let acked = Acked {
        bytes: PACKET,
        largest_sent_at: clock.now(),
        bytes_in_flight: FLIGHT,
        one_way_delay: Some(OneWayDelay::from_nanos(BASE_OWD)),
        app_limited: false,
    };
    cc.on_ack(clock.now(), &acked, &rtt(Duration::ZERO));
    if !slow_start {
        mock.increment(Duration::from_millis(1));
        lose_one(&mut cc, clock);
    }
    assert_eq!(cc.in_slow_start(), slow_start);
    cc
}

mod ledbat {
    use super::*;

    /// One ACK of one packet (sent just before), with the queue at `queuing_ms`.
    pub(crate) fn ack(cc: &mut impl Controller, clock: &Clock, mock: &Mock, queuing_ms: u64) {
        let sent = clock.now();
        mock.increment(Duration::from_micros(10));
        let queuing = Duration::from_millis(queuing_ms);
        let acked = Acked {
            bytes: black_box(PACKET),
            largest_sent_at: sent,
            bytes_in_flight: FLIGHT,
            one_way_delay: Some(OneWayDelay::from_nanos(
                BASE_OWD + queuing.as_nanos() as i64,
            )),
            app_limited: false,
        };
        cc.on_ack(clock.now(), &acked, &rtt(queuing));
    }

    #[divan::bench]
    fn on_sent(bencher: Bencher) {
        let (clock, mock) = clock();
        bench_on_sent(bencher, &clock, &mock, ledbat(&clock, &mock, false));
    }

    mod on_ack {
        use super::*;

        /// Slow start with an empty queue: the window grows by the bytes
        /// acknowledged.
        #[divan::bench]
        fn slow_start(bencher: Bencher) {
            let (clock, mock) = clock();
            let mut cc = ledbat(&clock, &mock, true);
            bencher.bench_local(|| ack(&mut cc, &clock, &mock, 0));
            assert!(cc.in_slow_start());
        }

        /// Half way to the target: RFC 6817's rule.
        #[divan::bench]
        fn congestion_avoidance(bencher: Bencher) {
            let (clock, mock) = clock();
            let mut cc = ledbat(&clock, &mock, false);
            bencher.bench_local(|| ack(&mut cc, &clock, &mock, 50));
        }

        /// Above the target: LEDBAT++'s multiplicative decrease.
        #[divan::bench]
        fn above_target(bencher: Bencher) {
            let (clock, mock) = clock();
            let mut cc = ledbat(&clock, &mock, false);
            bencher.bench_local(|| ack(&mut cc, &clock, &mock, 120));
        }

        /// Congestion avoidance through the `AnyController` enum.
        #[divan::bench]
        fn any_controller(bencher: Bencher) {
            let (clock, mock) = clock();
            let mut cc = AnyController::from(ledbat(&clock, &mock, false));
            bencher.bench_local(|| ack(&mut cc, &clock, &mock, 50));
        }
    }

    /// A loss that halves the window (each one is a new congestion event).
    #[divan::bench]
    fn on_loss(bencher: Bencher) {
        let (clock, mock) = clock();
        let mut cc = ledbat(&clock, &mock, false);
        bencher.bench_local(|| {
            mock.increment(Duration::from_micros(10));
            let now = clock.now();
            let lost = Lost {
                packets: 1,
                bytes: black_box(PACKET),
                largest_sent_at: now,
            };
            cc.on_loss(now, &lost, &rtt(Duration::ZERO));
        });
    }
}

mod reno {
    use super::*;

    /// One ACK of one packet in congestion avoidance (RFC 9002's Reno).
    #[divan::bench]
    fn on_ack(bencher: Bencher) {
        let (clock, mock) = clock();
        let mut config = RenoConfig::default();
        config.max_window = MAX_WINDOW_LIMIT;
        let mut cc = Reno::new(config).expect("a valid configuration");
        lose_one(&mut cc, &clock);
        bencher.bench_local(|| super::ledbat::ack(&mut cc, &clock, &mock, 0));
        assert!(!cc.in_slow_start());
    }
}

mod cubic {
    use super::*;

    /// A CUBIC controller that stays in its phase for any number of
    /// iterations: an unreachable maximum window; congestion avoidance
    /// after a loss, or the initial slow start with HyStart++.
    fn cubic(clock: &Clock, slow_start: bool) -> Cubic {
        let mut config = CubicConfig::default();
        config.max_window = MAX_WINDOW_LIMIT;
        let mut cc = Cubic::new(config).expect("a valid configuration");
        if !slow_start {
            lose_one(&mut cc, clock);
        }
        assert_eq!(cc.in_slow_start(), slow_start);
        cc
    }

    #[divan::bench]
    fn on_sent(bencher: Bencher) {
        let (clock, mock) = clock();
        bench_on_sent(bencher, &clock, &mock, cubic(&clock, false));
    }

    mod on_ack {
        use super::*;

        /// Slow start with a steady round trip: every ACK is one HyStart++
        /// RTT sample of one long round (the packet acknowledged was sent
        /// before the round began), compared with the last round's minimum
        /// once it has eight.
        #[divan::bench]
        fn slow_start(bencher: Bencher) {
            let (clock, mock) = clock();
            let mut cc = cubic(&clock, true);
            let sent = clock.now();
            bencher.bench_local(|| {
                mock.increment(Duration::from_micros(10));
                let acked = Acked {
                    bytes: black_box(PACKET),
                    largest_sent_at: sent,
                    bytes_in_flight: FLIGHT,
                    one_way_delay: None,
                    app_limited: false,
                };
                cc.on_ack(clock.now(), &acked, &rtt(Duration::ZERO));
            });
            assert!(cc.in_slow_start());
        }

        /// Congestion avoidance: W_cubic(t) and W_est on every ACK (RFC
        /// 9438 §4.2-4.5).
        #[divan::bench]
        fn congestion_avoidance(bencher: Bencher) {
            let (clock, mock) = clock();
            let mut cc = cubic(&clock, false);
            bencher.bench_local(|| super::super::ledbat::ack(&mut cc, &clock, &mock, 0));
            assert!(!cc.in_slow_start());
        }
    }
}

mod token_bucket {
    use super::*;

    /// 1 GB/s and a 64 KB burst; 1.5 µs between takes of a packet, so about
    /// every other take has to wait.
    #[divan::bench]
    fn take(bencher: Bencher) {
        let (clock, mock) = clock();
        let mut bucket = TokenBucket::new(1_000_000_000, 65_536).expect("valid");
        bencher.bench_local(|| {
            mock.increment(Duration::from_nanos(1_500));
            black_box(bucket.take(black_box(PACKET), clock.now()));
        });
    }

    /// A connection's cap and its endpoint's cap, both consulted.
    #[divan::bench]
    fn take_all_connection_and_endpoint(bencher: Bencher) {
        let (clock, mock) = clock();
        let mut connection = TokenBucket::new(1_000_000_000, 65_536).expect("valid");
        let mut endpoint = TokenBucket::new(2_000_000_000, 262_144).expect("valid");
        bencher.bench_local(|| {
            mock.increment(Duration::from_nanos(1_500));
            black_box(take_all(
                &mut [&mut connection, &mut endpoint],
                black_box(PACKET),
                clock.now(),
            ));
        });
    }
}

mod pacer {
    use super::*;

    /// One decision at a rate of about one packet per 1.5 µs (≈ 1 GB/s),
    /// charging the packet when it may leave.
    #[divan::bench]
    fn poll(bencher: Bencher) {
        let (clock, mock) = clock();
        let mut pacer = Pacer::new(PacerConfig::default());
        bencher.bench_local(|| {
            mock.increment(Duration::from_nanos(1_000));
            let now = clock.now();
            if pacer.poll(now, black_box(968_000_000), PACKET) == tern_congestion::Take::Now {
                pacer.on_sent(now, PACKET);
            }
        });
    }
}
