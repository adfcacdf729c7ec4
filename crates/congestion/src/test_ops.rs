//! What the controllers' tests share: a mock-clock harness that plays the
//! connection's part, and the property test every controller runs (random
//! sequences of the calls a connection makes, with values as absurd as a
//! hostile peer can cause, after each of which the controller must keep its
//! invariants and its window within its bounds).

use crate::{Acked, Controller, Lost, OneWayDelay, Rtt};
use proptest::prelude::*;
use quanta::{Clock, Instant, Mock};
use std::sync::Arc;
use std::time::Duration;

const MSS: u64 = 1_452;

/// A controller on a mock clock, with the connection's part played: one
/// count of bytes in flight and the send time of the newest packet, handed
/// to the controller with every call. Each controller's tests add the
/// helpers that speak their units (packets, queuing delay) on top.
pub(crate) struct Harness<C> {
    clock: Clock,
    mock: Arc<Mock>,
    pub(crate) cc: C,
    /// Bytes in flight, as the connection's tracker counts them.
    pub(crate) flight: u64,
    /// Send time of the newest packet.
    pub(crate) last_sent: Instant,
    /// What the next ACKs say about the sender's use of the window.
    pub(crate) app_limited: bool,
}

impl<C: Controller> Harness<C> {
    /// `cc` on a clock that starts a second after zero, so a test can look
    /// back in time.
    pub(crate) fn new(cc: C) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let last_sent = clock.now();
        Self {
            clock,
            mock,
            cc,
            flight: 0,
            last_sent,
            app_limited: false,
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    pub(crate) fn advance(&self, by: Duration) {
        self.mock.increment(by);
    }

    /// `bytes` leave now.
    pub(crate) fn send_bytes(&mut self, bytes: u64) {
        let now = self.now();
        self.flight = self.flight.saturating_add(bytes);
        self.last_sent = now;
        self.cc.on_sent(now, self.flight);
    }

    /// An ACK of `bytes` up to the newest packet arrives now.
    pub(crate) fn ack_bytes(&mut self, bytes: u64, one_way_delay: Option<OneWayDelay>, rtt: &Rtt) {
        let now = self.now();
        self.flight = self.flight.saturating_sub(bytes);
        let acked = Acked {
            bytes,
            largest_sent_at: self.last_sent,
            bytes_in_flight: self.flight,
            one_way_delay,
            app_limited: self.app_limited,
        };
        self.cc.on_ack(now, &acked, rtt);
        self.cc.invariants().unwrap();
    }

    /// Loss detection declares `packets` lost (`bytes` in all), the newest
    /// sent at `sent_at`.
    pub(crate) fn lose_bytes(&mut self, packets: u64, bytes: u64, sent_at: Instant, rtt: &Rtt) {
        let now = self.now();
        self.flight = self.flight.saturating_sub(bytes);
        let lost = Lost {
            packets,
            bytes,
            largest_sent_at: sent_at,
        };
        self.cc.on_loss(now, &lost, rtt);
        self.cc.invariants().unwrap();
    }
}

/// One call of a connection to its controller, or time passing.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Send(u64),
    Ack {
        bytes: u64,
        flight: u64,
        sent_ago_micros: u64,
        rtt_micros: (u64, u64, u64),
        owd_micros: Option<i64>,
        app_limited: bool,
    },
    Loss {
        packets: u64,
        bytes: u64,
        sent_ago_micros: u64,
    },
    Spurious {
        declared_ago_micros: u64,
    },
    PersistentCongestion,
    PathChange,
    Advance(u64),
}

/// Any [`Op`], sends and ACKs weighted `send` and `ack` against one loss,
/// one spurious loss, one persistent congestion and three clock advances
/// (a loss-based controller wants more ACKs to grow its window at all).
pub(crate) fn op(send: u32, ack: u32) -> impl Strategy<Value = Op> {
    let bytes = prop_oneof![Just(0u64), 1..3 * MSS, 0..1_000_000u64, any::<u64>()];
    let micros = prop_oneof![1..2_000_000u64, any::<u64>().prop_map(|r| r >> 20)];
    let advance = prop_oneof![
        Just(0u64),
        0..200_000_000u64,
        0..10_000_000_000u64,
        Just(3_600_000_000_000u64),
    ];
    prop_oneof![
        send => bytes.clone().prop_map(Op::Send),
        ack => (
            (bytes.clone(), bytes.clone(), 0..1_000_000u64),
            (micros.clone(), micros.clone(), micros),
            proptest::option::of(prop_oneof![-1_000_000..1_000_000i64, any::<i64>()]),
            any::<bool>(),
        )
            .prop_map(|((bytes, flight, sent_ago_micros), rtt_micros, owd_micros, app_limited)| Op::Ack {
                bytes, flight, sent_ago_micros, rtt_micros, owd_micros, app_limited,
            }),
        1 => (0..4u64, bytes, 0..1_000_000u64)
            .prop_map(|(packets, bytes, sent_ago_micros)| Op::Loss { packets, bytes, sent_ago_micros }),
        1 => (0..1_000_000u64).prop_map(|declared_ago_micros| Op::Spurious { declared_ago_micros }),
        1 => Just(Op::PersistentCongestion),
        1 => Just(Op::PathChange),
        3 => advance.prop_map(Op::Advance),
    ]
}

/// Plays `ops` on `cc`, whose window must stay within `min_window` and
/// `max_window` and be `min_window` right after persistent congestion.
pub(crate) fn run(
    mut cc: impl Controller,
    min_window: u64,
    max_window: u64,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let (clock, mock) = Clock::mock();
    mock.increment(Duration::from_secs(1));
    let mut rtt = Rtt::initial(Duration::from_millis(333));
    let ago = |now: Instant, micros: u64| {
        now.checked_sub(Duration::from_micros(micros))
            .unwrap_or(now)
    };
    for op in ops {
        let now = clock.now();
        match op {
            Op::Send(bytes) => cc.on_sent(now, bytes),
            Op::Ack {
                bytes,
                flight,
                sent_ago_micros,
                rtt_micros: (smoothed, min, latest),
                owd_micros,
                app_limited,
            } => {
                rtt = Rtt::new(
                    Duration::from_micros(smoothed),
                    Duration::from_micros(min),
                    Duration::from_micros(latest),
                );
                let acked = Acked {
                    bytes,
                    largest_sent_at: ago(now, sent_ago_micros),
                    bytes_in_flight: flight,
                    one_way_delay: owd_micros.map(OneWayDelay::from_micros),
                    app_limited,
                };
                cc.on_ack(now, &acked, &rtt);
            }
            Op::Loss {
                packets,
                bytes,
                sent_ago_micros,
            } => {
                let lost = Lost {
                    packets,
                    bytes,
                    largest_sent_at: ago(now, sent_ago_micros),
                };
                cc.on_loss(now, &lost, &rtt);
            }
            Op::Spurious {
                declared_ago_micros,
            } => cc.on_spurious_loss(now, ago(now, declared_ago_micros)),
            Op::PersistentCongestion => {
                cc.on_persistent_congestion(now);
                prop_assert_eq!(cc.window(), min_window);
            }
            Op::PathChange => cc.on_path_change(now),
            Op::Advance(nanos) => mock.increment(nanos),
        }
        prop_assert!(cc.invariants().is_ok(), "{:?}", cc.invariants());
        prop_assert!(cc.window() >= min_window);
        prop_assert!(cc.window() <= max_window);
        prop_assert!(cc.pacing_rate(&rtt) > 0);
    }
    Ok(())
}
