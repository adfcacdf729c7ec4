//! tern-reliability's tracker and tern-congestion's controllers driven
//! together, as a connection drives them: random sends, ACKs (valid, with
//! random delays, one-way-delay samples and application-limited flags),
//! timeouts and time jumps. It checks the one-source-of-truth contract:
//! bytes in flight is the sum of the in-flight packets' sizes, every
//! invariant of both holds, the window never falls below its minimum,
//! persistent congestion collapses it, and neither an application-limited
//! sender nor an ACK of packets sent before the recovery period grows it.
//!
//! This lives with the benchmarks because it is the one crate that depends
//! on both (the two are siblings and may not depend on each other).

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use quanta::{Clock, Instant, Mock};
use tern_congestion::{
    Acked, AnyController, Controller, Ledbat, LedbatConfig, Lost, OneWayDelay, Reno, RenoConfig,
    Rtt,
};
use tern_reliability::{
    AckSummary, LossDetector, LossReport, RecoveryBuffer, RttEstimator, SentPacket, TimerEvent,
};

const MSS: u64 = 1_452;
const MIN_WINDOW: u64 = 2 * MSS;

/// The connection's glue between the tracker and the controller.
struct Connection {
    clock: Clock,
    mock: Arc<Mock>,
    detector: LossDetector<()>,
    events: RecoveryBuffer<()>,
    cc: AnyController,
    next_pn: u64,
    app_limited: bool,
    /// When `on_loss` last made the window smaller; `None` once a spurious
    /// loss or persistent congestion may have ended that recovery period.
    reduced_at: Option<Instant>,
}

/// The copy of the one RTT estimator the controller is handed.
fn snapshot(rtt: &RttEstimator) -> Rtt {
    Rtt::new(
        rtt.smoothed(),
        rtt.min().unwrap_or(rtt.smoothed()),
        rtt.latest(),
    )
}

impl Connection {
    fn new(cc: AnyController) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        Self {
            clock,
            mock,
            detector: LossDetector::default(),
            events: RecoveryBuffer::default(),
            cc,
            next_pn: 0,
            app_limited: false,
            reduced_at: None,
        }
    }

    fn send(&mut self, size: u32, ack_eliciting: bool) {
        let now = self.clock.now();
        let packet = SentPacket {
            time_sent: now,
            size,
            ack_eliciting,
            in_flight: ack_eliciting,
            payload: (),
        };
        self.detector
            .on_sent(self.next_pn, packet)
            .expect("increasing packet numbers");
        self.next_pn += 1;
        if ack_eliciting {
            self.cc.on_sent(now, self.detector.bytes_in_flight());
        }
    }

    fn ack(
        &mut self,
        ranges: &[RangeInclusive<u64>],
        ack_delay: Duration,
        owd: Option<OneWayDelay>,
    ) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        self.events.clear();
        let summary: AckSummary = self
            .detector
            .on_ack(now, ranges.iter().cloned(), ack_delay, &mut self.events)
            .map_err(|e| TestCaseError::fail(format!("valid ACK refused: {e}")))?;
        let rtt = snapshot(self.detector.rtt());
        if summary.acked_bytes > 0 {
            let largest_sent_at = summary
                .largest_acked_sent_at
                .ok_or_else(|| TestCaseError::fail("acked bytes without a send time"))?;
            let before = self.cc.window();
            // The end of a LEDBAT slowdown's hold restores the window the
            // flow yielded; that is no growth from this ACK.
            let holding = matches!(&self.cc, AnyController::Ledbat(l) if l.in_slowdown());
            let acked = Acked {
                bytes: summary.acked_bytes,
                largest_sent_at,
                bytes_in_flight: self.detector.bytes_in_flight(),
                one_way_delay: owd,
                app_limited: self.app_limited,
            };
            self.cc.on_ack(now, &acked, &rtt);
            if self.app_limited && !holding {
                prop_assert!(self.cc.window() <= before, "an app-limited sender grew");
            }
            if self.reduced_at.is_some_and(|at| largest_sent_at <= at) && !holding {
                prop_assert!(self.cc.window() <= before, "grew in the recovery period");
            }
        }
        self.on_losses(now, summary.lost, &rtt)?;
        for spurious in self.events.spurious.iter().filter(|s| s.in_flight) {
            self.cc.on_spurious_loss(now, spurious.declared_lost_at);
            self.reduced_at = None;
        }
        Ok(())
    }

    fn on_losses(
        &mut self,
        now: Instant,
        report: LossReport,
        rtt: &Rtt,
    ) -> Result<(), TestCaseError> {
        if let Some(largest_sent_at) = report.largest_sent_at {
            let before = self.cc.window();
            let lost = Lost {
                packets: report.in_flight_packets as u64,
                bytes: report.bytes,
                largest_sent_at,
            };
            self.cc.on_loss(now, &lost, rtt);
            prop_assert!(self.cc.window() <= before, "a loss grew the window");
            if self.cc.window() < before {
                self.reduced_at = Some(now);
            }
        }
        if report.persistent_congestion {
            self.cc.on_persistent_congestion(now);
            prop_assert_eq!(self.cc.window(), MIN_WINDOW);
            self.reduced_at = None;
        }
        Ok(())
    }

    fn timeout(&mut self) -> Result<(), TestCaseError> {
        let now = self.clock.now();
        self.events.clear();
        if let TimerEvent::LossDeclared(report) = self.detector.on_timeout(now, &mut self.events) {
            let rtt = snapshot(self.detector.rtt());
            self.on_losses(now, report, &rtt)?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.detector.invariants(), Ok(()));
        prop_assert!(self.cc.invariants().is_ok(), "{:?}", self.cc.invariants());
        let sum: u64 = self
            .detector
            .unacked()
            .filter(|(_, p)| p.in_flight)
            .map(|(_, p)| u64::from(p.size))
            .sum();
        prop_assert_eq!(self.detector.bytes_in_flight(), sum);
        prop_assert!(self.cc.window() >= MIN_WINDOW);
        prop_assert!(self.cc.pacing_rate(&snapshot(self.detector.rtt())) > 0);
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Op {
    Send {
        size: u32,
        ack_eliciting: bool,
    },
    /// Acknowledge, from the largest sent minus `top_back`, the numbers whose bit is set.
    Ack {
        top_back: u64,
        mask: u64,
        delay_ms: u64,
        owd_ms: Option<i64>,
    },
    AppLimited(bool),
    Advance {
        ms: u64,
    },
    Timeout,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1u32..=1452, prop::bool::weighted(0.9))
            .prop_map(|(size, ack_eliciting)| Op::Send { size, ack_eliciting }),
        5 => (0u64..8, any::<u64>(), 0u64..30, proptest::option::of(0i64..300))
            .prop_map(|(top_back, mask, delay_ms, owd_ms)| Op::Ack { top_back, mask, delay_ms, owd_ms }),
        1 => any::<bool>().prop_map(Op::AppLimited),
        4 => prop_oneof![0u64..50, 0u64..2_000].prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Timeout),
    ]
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

fn run(cc: AnyController, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut conn = Connection::new(cc);
    for op in ops {
        match op {
            Op::Send {
                size,
                ack_eliciting,
            } => conn.send(size, ack_eliciting),
            Op::Ack {
                top_back,
                mask,
                delay_ms,
                owd_ms,
            } => {
                let Some(largest) = conn.detector.sent_packets().largest_sent() else {
                    continue;
                };
                let ranges = ranges_from_mask(largest.saturating_sub(top_back), mask);
                if ranges.is_empty() {
                    continue;
                }
                let owd = owd_ms.map(|ms| OneWayDelay::from_micros(ms * 1_000));
                conn.ack(&ranges, Duration::from_millis(delay_ms), owd)?;
            }
            Op::AppLimited(limited) => conn.app_limited = limited,
            Op::Advance { ms } => conn.mock.increment(Duration::from_millis(ms)),
            Op::Timeout => conn.timeout()?,
        }
        conn.check()?;
    }
    Ok(())
}

fn ledbat() -> AnyController {
    AnyController::from(Ledbat::new(LedbatConfig::default()).expect("the default configuration"))
}

fn reno() -> AnyController {
    AnyController::from(Reno::new(RenoConfig::default()).expect("the default configuration"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tracker_and_ledbat_keep_one_consistent_state(ops in prop::collection::vec(op(), 1..300)) {
        run(ledbat(), ops)?;
    }

    #[test]
    fn tracker_and_reno_keep_one_consistent_state(ops in prop::collection::vec(op(), 1..300)) {
        run(reno(), ops)?;
    }
}

/// RFC 9002 §7.6.3's scenario end to end: the tracker establishes persistent
/// congestion and the controller collapses to its minimum window.
#[test]
fn persistent_congestion_reaches_the_controller() {
    for cc in [ledbat(), reno()] {
        let mut conn = Connection::new(cc);
        // An RTT sample first (persistent congestion needs one).
        conn.send(1_452, true);
        conn.mock.increment(Duration::from_millis(100));
        conn.ack(&[0..=0], Duration::ZERO, None).expect("valid");
        // Then a run of losses over far more than three probe timeouts.
        let first = conn.next_pn;
        for wait_ms in [1_000, 2_000, 4_000, 100] {
            conn.send(1_452, true);
            conn.mock.increment(Duration::from_millis(wait_ms));
        }
        let last = conn.next_pn - 1;
        conn.ack(&[last..=last], Duration::ZERO, None)
            .expect("valid");
        assert_eq!(conn.detector.stats().lost, last - first);
        assert_eq!(conn.detector.stats().persistent_congestion, 1);
        assert_eq!(conn.cc.window(), MIN_WINDOW);
        conn.check().expect("consistent");
    }
}
