use super::*;
use crate::test_ops::{self, Harness, Op, op};
use crate::{AnyController, OneWayDelay};
use proptest::prelude::*;
use std::ops::{Deref, DerefMut};

mod delay;
mod path;
mod slow_start;
mod slowdowns;
mod window;

const MSS: u64 = 1_452;
const BASE_OWD_MS: u64 = 20;
const BASE_RTT_MS: u64 = 40;

/// A LEDBAT controller on the shared mock-clock harness, playing a path of
/// 20 ms one-way delay (40 ms round trip) plus a chosen queuing delay. The
/// path also keeps the connection's RTT estimate, handed to the controller
/// with every call.
struct Path {
    link: Harness<Ledbat>,
    /// Offset of the receiver's clock, in nanoseconds.
    offset: i64,
    /// The connection's RTT estimate: RFC 9002's first sample, then 7/8
    /// smoothing (the ACKs here carry no ACK delay).
    rtt: Rtt,
    sampled: bool,
}

impl Deref for Path {
    type Target = Harness<Ledbat>;

    fn deref(&self) -> &Self::Target {
        &self.link
    }
}

impl DerefMut for Path {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.link
    }
}

impl Path {
    fn new(config: LedbatConfig) -> Self {
        Self {
            link: Harness::new(Ledbat::new(config).unwrap()),
            offset: 0,
            rtt: Rtt::initial(Duration::from_millis(333)),
            sampled: false,
        }
    }

    /// The connection's estimator takes one sample.
    fn sample(&mut self, latest: Duration) {
        let (smoothed, min) = if self.sampled {
            (
                (self.rtt.smoothed() * 7 + latest) / 8,
                self.rtt.min().min(latest),
            )
        } else {
            (latest, latest)
        };
        self.sampled = true;
        self.rtt = Rtt::new(smoothed, min, latest);
    }

    fn send(&mut self, bytes: u64) {
        self.send_bytes(bytes);
    }

    /// Acknowledges `bytes` with samples showing `queuing_ms` of queue.
    fn ack(&mut self, bytes: u64, queuing_ms: u64) {
        let owd = i64::try_from((BASE_OWD_MS + queuing_ms) * 1_000_000).unwrap() + self.offset;
        self.ack_with(bytes, queuing_ms, Some(OneWayDelay::from_nanos(owd)));
    }

    fn ack_with(&mut self, bytes: u64, queuing_ms: u64, owd: Option<OneWayDelay>) {
        self.sample(Duration::from_millis(BASE_RTT_MS + queuing_ms));
        let rtt = self.rtt;
        self.ack_bytes(bytes, owd, &rtt);
    }

    /// Loss detection declares `bytes` lost, the newest sent at `sent_at`.
    fn lose(&mut self, bytes: u64, sent_at: Instant) {
        let rtt = self.rtt;
        self.lose_bytes(1, bytes, sent_at, &rtt);
    }

    /// One round trip: a full window sent, then acknowledged packet by
    /// packet with `queuing_ms` of queue.
    fn round_trip(&mut self, queuing_ms: u64) {
        let packets = self.cc.window() / MSS;
        for _ in 0..packets {
            self.send(MSS);
        }
        self.advance(Duration::from_millis(BASE_RTT_MS + queuing_ms));
        for _ in 0..packets {
            self.ack(MSS, queuing_ms);
        }
    }

    /// Round trips with `queuing_ms` of queue, ACK by ACK 1 ms apart, until
    /// `event` holds after an ACK; returns the time, and the smoothed RTT
    /// the controller acted on (the estimate with that ACK's sample).
    fn until(&mut self, queuing_ms: u64, event: impl Fn(&Ledbat) -> bool) -> (Instant, Duration) {
        loop {
            let packets = self.cc.window() / MSS;
            for _ in 0..packets {
                self.send(MSS);
            }
            self.advance(Duration::from_millis(
                BASE_RTT_MS + queuing_ms - packets.min(BASE_RTT_MS),
            ));
            for _ in 0..packets {
                self.advance(Duration::from_millis(1));
                self.ack(MSS, queuing_ms);
                if event(&self.cc) {
                    return (self.now(), self.rtt.smoothed());
                }
            }
        }
    }

    /// The connection moves to a new path: its RTT estimator starts again
    /// (RFC 9000 §9.4), and it tells the controller.
    fn change_path(&mut self) {
        self.rtt = Rtt::initial(Duration::from_millis(333));
        self.sampled = false;
        let now = self.now();
        self.cc.on_path_change(now);
        self.cc.invariants().unwrap();
    }

    /// Round trips with an empty queue until slow start ends by a loss;
    /// a millisecond later, so the packets sent from then on are outside
    /// the recovery period (RFC 9002 counts a packet sent at the very
    /// instant of the reduction as inside).
    fn enter_congestion_avoidance(&mut self) {
        self.round_trip(0);
        let sent = self.now();
        self.lose(0, sent);
        self.advance(Duration::from_millis(1));
        assert!(!self.cc.in_slow_start());
    }
}

fn config() -> LedbatConfig {
    LedbatConfig {
        periodic_slowdowns: false,
        ..LedbatConfig::default()
    }
}

#[test]
fn configurations_out_of_range_are_refused() {
    let cases: [(LedbatConfig, LedbatConfigError); 12] = [
        (
            LedbatConfig {
                target: Duration::ZERO,
                ..config()
            },
            LedbatConfigError::Target,
        ),
        (
            LedbatConfig {
                target: Duration::from_millis(101),
                ..config()
            },
            LedbatConfigError::Target,
        ),
        (
            LedbatConfig {
                gain: 0.0,
                ..config()
            },
            LedbatConfigError::Gain,
        ),
        (
            LedbatConfig {
                gain: f64::NAN,
                ..config()
            },
            LedbatConfigError::Gain,
        ),
        (
            LedbatConfig {
                allowed_increase_packets: 0,
                ..config()
            },
            LedbatConfigError::AllowedIncrease,
        ),
        (
            LedbatConfig {
                base_history: 1,
                ..config()
            },
            LedbatConfigError::BaseHistory,
        ),
        (
            LedbatConfig {
                current_filter: 17,
                ..config()
            },
            LedbatConfigError::CurrentFilter,
        ),
        (
            LedbatConfig {
                max_datagram_size: 70_000,
                ..config()
            },
            LedbatConfigError::MaxDatagramSize,
        ),
        (
            LedbatConfig {
                initial_window_packets: 1,
                ..config()
            },
            LedbatConfigError::Window,
        ),
        (
            LedbatConfig {
                max_window: MSS,
                ..config()
            },
            LedbatConfigError::MaxWindow,
        ),
        (
            LedbatConfig {
                slow_start_exit: 1.5,
                ..config()
            },
            LedbatConfigError::SlowStartExit,
        ),
        (
            LedbatConfig {
                decrease_constant: -1.0,
                ..config()
            },
            LedbatConfigError::DecreaseConstant,
        ),
    ];
    for (config, error) in cases {
        assert_eq!(Ledbat::new(config).unwrap_err(), error, "{config:?}");
    }
    let zero_interval = LedbatConfig {
        slowdown_interval: 0,
        ..config()
    };
    assert_eq!(
        Ledbat::new(zero_interval).unwrap_err(),
        LedbatConfigError::SlowdownInterval
    );
}

/// The controllers' shared random-operation test, on LEDBAT through the
/// `AnyController` enum.
fn run(config: LedbatConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let cc = AnyController::from(Ledbat::new(config).unwrap());
    let min_window = u64::from(config.min_window_packets) * config.max_datagram_size;
    test_ops::run(cc, min_window, config.max_window, ops)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_operations_keep_every_ledbat_invariant(ops in proptest::collection::vec(op(4, 4), 1..200)) {
        run(LedbatConfig::default(), ops)?;
    }

    #[test]
    fn random_operations_keep_the_invariants_of_any_configuration(
        target_ms in 1..=100u64,
        min_window_packets in 1..4u32,
        max_window_packets in 26..2_000u64,
        decrease_constant in 0.0..16.0f64,
        slowdowns in any::<bool>(),
        ops in proptest::collection::vec(op(4, 4), 1..100),
    ) {
        let config = LedbatConfig {
            target: Duration::from_millis(target_ms),
            min_window_packets,
            max_window: max_window_packets * MSS,
            decrease_constant,
            periodic_slowdowns: slowdowns,
            ..LedbatConfig::default()
        };
        run(config, ops)?;
    }
}
