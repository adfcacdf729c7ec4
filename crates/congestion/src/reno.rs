//! A loss-based AIMD controller in the manner of TCP Reno (RFC 5681) as
//! QUIC uses it (RFC 9002, section 7).
//!
//! Tern's default is [`Ledbat`](crate::Ledbat); Reno is for paths where the
//! peer sends no one-way-delay samples and the application wants its fair
//! share rather than less, and it is the competing flow the bottleneck tests
//! check that LEDBAT yields to.

use crate::pacer::{PACING_GAIN_PERMILLE, SLOW_START_PACING_GAIN_PERMILLE, pacing_rate};
use crate::recovery::{Before, Recovery};
use crate::window::{BoundsError, WindowBounds};
use crate::{Acked, Controller, InvariantViolation, Lost, Rtt};
use quanta::Instant;

/// Configuration of a [`Reno`] controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RenoConfig {
    /// The size of a full packet, in bytes (default 1452; 1 to 65 535).
    pub max_datagram_size: u64,
    /// The window a connection starts with, in packets (default 10, as
    /// RFC 9002's kInitialWindow).
    pub initial_window_packets: u32,
    /// The smallest window, in packets (default 2, as RFC 9002's
    /// kMinimumWindow).
    pub min_window_packets: u32,
    /// The largest window, in bytes (default 64 MiB).
    pub max_window: u64,
}

impl Default for RenoConfig {
    fn default() -> Self {
        Self {
            max_datagram_size: 1_452,
            initial_window_packets: 10,
            min_window_packets: 2,
            max_window: 64 << 20,
        }
    }
}

/// A [`RenoConfig`] value out of its documented range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenoConfigError {
    /// `max_datagram_size` is zero or above 65 535.
    #[error("max datagram size must be 1 to 65 535 bytes")]
    MaxDatagramSize,
    /// A window is zero, the initial window is below the minimum, or the
    /// maximum below the initial window or above 2^46 bytes.
    #[error("windows must satisfy 1 packet <= min <= initial <= max <= 2^46 bytes")]
    Window,
}

// What failed in the window bounds' check the controllers share, as this
// error (hidden: the check is private to the crate).
#[doc(hidden)]
impl From<BoundsError> for RenoConfigError {
    fn from(error: BoundsError) -> Self {
        match error {
            BoundsError::MaxDatagramSize => Self::MaxDatagramSize,
            BoundsError::Window | BoundsError::MaxWindow => Self::Window,
        }
    }
}

/// Slow start, then one packet more per round trip, halved on loss.
#[derive(Debug, Clone)]
pub struct Reno {
    /// What the controller was made with, to start again on a new path.
    config: RenoConfig,
    mss: u64,
    min_window: u64,
    max_window: u64,
    /// Congestion window, in bytes.
    window: u64,
    /// Slow start ends at this window, in bytes.
    ssthresh: u64,
    /// Acknowledged bytes not yet turned into window growth in congestion
    /// avoidance, in bytes (always below the window).
    acked_credit: u64,
    /// The recovery period of the last loss, and what undoing it restores.
    recovery: Recovery,
}

impl Reno {
    /// A controller in slow start with the initial window.
    pub fn new(config: RenoConfig) -> Result<Self, RenoConfigError> {
        let bounds = WindowBounds::new(
            config.max_datagram_size,
            config.min_window_packets,
            config.initial_window_packets,
            config.max_window,
        )?;
        Ok(Self {
            config,
            mss: bounds.mss,
            min_window: bounds.min,
            max_window: bounds.max,
            window: bounds.initial,
            ssthresh: u64::MAX,
            acked_credit: 0,
            recovery: Recovery::new(),
        })
    }

    /// Window reductions undone because every loss of their congestion
    /// event proved spurious.
    pub fn undone_reductions(&self) -> u64 {
        self.recovery.undone()
    }
}

impl Controller for Reno {
    fn on_sent(&mut self, _now: Instant, _bytes_in_flight: u64) {}

    fn on_ack(&mut self, _now: Instant, acked: &Acked, _rtt: &Rtt) {
        // RFC 9002, Appendix B.5: "Do not increase congestion_window if
        // application limited or flow control limited" (section 7.8), and
        // "Do not increase congestion window in recovery period" (section
        // 7.3.2).
        if acked.app_limited
            || self.recovery.covers(acked.largest_sent_at)
            || self.recovery.sent_on_old_path(acked.largest_sent_at)
        {
            return;
        }
        if self.window < self.ssthresh {
            // RFC 9002, section 7.3.1: "While a sender is in slow start, the
            // congestion window increases by the number of bytes acknowledged
            // when each acknowledgment is processed."
            self.window = self.window.saturating_add(acked.bytes).min(self.ssthresh);
        } else {
            // RFC 9002, section 7.3.3: congestion avoidance "MUST limit the
            // increase to the congestion window to at most one maximum
            // datagram size for each congestion window that is acknowledged."
            self.acked_credit = self.acked_credit.saturating_add(acked.bytes);
            let windows = self.acked_credit / self.window;
            self.acked_credit %= self.window;
            self.window = self.window.saturating_add(windows.saturating_mul(self.mss));
        }
        self.window = self.window.clamp(self.min_window, self.max_window);
        self.acked_credit = self.acked_credit.min(self.window - 1);
    }

    fn on_loss(&mut self, now: Instant, lost: &Lost, _rtt: &Rtt) {
        // RFC 9002, section 7.3.2: "The recovery period aims to limit
        // congestion window reduction to once per round trip."
        let before = Before {
            window: self.window,
            ssthresh: self.ssthresh,
        };
        if self.recovery.sent_on_old_path(lost.largest_sent_at)
            || !self.recovery.on_loss(now, lost, before)
        {
            return;
        }
        self.ssthresh = (self.window / 2).max(self.min_window);
        self.window = self.ssthresh;
        self.acked_credit = 0;
    }

    /// Once every loss of the last congestion event proved spurious, the
    /// window and slow-start threshold return to their values before it
    /// (see the `recovery` module).
    fn on_spurious_loss(&mut self, _now: Instant, declared_lost_at: Instant) {
        if let Some(before) = self.recovery.on_spurious_loss(declared_lost_at) {
            self.window = self.window.max(before.window);
            self.ssthresh = self.ssthresh.max(before.ssthresh);
        }
    }

    fn on_persistent_congestion(&mut self, _now: Instant) {
        // RFC 9002, section 7.6.2: "When persistent congestion is declared,
        // the sender's congestion window MUST be reduced to the minimum
        // congestion window (kMinimumWindow)". Appendix B.8 leaves
        // ssthresh where the congestion event just put it.
        self.window = self.min_window;
        self.acked_credit = 0;
        self.recovery.on_persistent_congestion();
    }

    /// RFC 9000 §9.4: on a new path the controller starts again from its
    /// initial values (the new path's capacity is unknown), and ignores
    /// from now on what is reported about packets sent on the old one.
    fn on_path_change(&mut self, now: Instant) {
        // `config` was accepted by `new` once, so it is again.
        if let Ok(fresh) = Self::new(self.config) {
            let mut recovery = self.recovery;
            recovery.on_path_change(now);
            *self = Self { recovery, ..fresh };
        }
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn pacing_rate(&self, rtt: &Rtt) -> u64 {
        let gain = if self.in_slow_start() {
            SLOW_START_PACING_GAIN_PERMILLE
        } else {
            PACING_GAIN_PERMILLE
        };
        pacing_rate(self.window, rtt.smoothed(), gain)
    }

    fn in_slow_start(&self) -> bool {
        self.window < self.ssthresh
    }

    fn invariants(&self) -> Result<(), InvariantViolation> {
        if self.window < self.min_window || self.window > self.max_window {
            return Err(InvariantViolation("Reno window outside [min, max]"));
        }
        if self.ssthresh < self.min_window {
            return Err(InvariantViolation(
                "Reno slow start threshold below the minimum",
            ));
        }
        if self.acked_credit >= self.window {
            return Err(InvariantViolation(
                "Reno credit of a whole window not applied",
            ));
        }
        self.recovery.invariants()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AnyController;
    use crate::test_ops::{self, Op, op};
    use proptest::prelude::*;
    use std::time::Duration;

    const MSS: u64 = 1_452;
    const MS: Duration = Duration::from_millis(1);

    fn reno() -> Reno {
        Reno::new(RenoConfig::default()).unwrap()
    }

    fn rtt() -> Rtt {
        Rtt::new(50 * MS, 50 * MS, 50 * MS)
    }

    fn acked(bytes: u64, largest_sent_at: Instant) -> Acked {
        Acked {
            bytes,
            largest_sent_at,
            bytes_in_flight: 0,
            one_way_delay: None,
            app_limited: false,
        }
    }

    fn lost(largest_sent_at: Instant) -> Lost {
        Lost {
            packets: 1,
            bytes: MSS,
            largest_sent_at,
        }
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let bad_mss = RenoConfig {
            max_datagram_size: 0,
            ..RenoConfig::default()
        };
        assert_eq!(
            Reno::new(bad_mss).unwrap_err(),
            RenoConfigError::MaxDatagramSize
        );
        let bad_window = RenoConfig {
            initial_window_packets: 1,
            ..RenoConfig::default()
        };
        assert_eq!(Reno::new(bad_window).unwrap_err(), RenoConfigError::Window);
    }

    #[test]
    fn slow_start_doubles_the_window_per_round_trip() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut reno = reno();
        let window = reno.window();
        reno.on_sent(clock.now(), window);
        reno.on_ack(clock.now(), &acked(window, clock.now()), &rtt());
        assert_eq!(reno.window(), 2 * window);
        assert!(reno.in_slow_start());
        reno.invariants().unwrap();
    }

    #[test]
    fn a_loss_halves_once_per_round_trip_and_ends_slow_start() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        let sent = clock.now();
        reno.on_sent(sent, 10 * MSS);
        mock.increment(50 * MS);
        reno.on_loss(clock.now(), &lost(sent), &rtt());
        assert_eq!(reno.window(), 5 * MSS);
        reno.on_loss(clock.now(), &lost(sent), &rtt());
        assert_eq!(reno.window(), 5 * MSS, "same congestion event");
        assert!(!reno.in_slow_start());
        mock.increment(MS);
        reno.on_loss(clock.now(), &lost(clock.now()), &rtt());
        assert_eq!(reno.window(), 2 * MSS + MSS / 2);
        reno.invariants().unwrap();
    }

    #[test]
    fn packets_sent_before_the_recovery_period_do_not_grow_the_window() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        let early = clock.now();
        mock.increment(10 * MS);
        reno.on_loss(clock.now(), &lost(early), &rtt());
        let window = reno.window();
        // A whole window of ACKs for packets sent before the reduction.
        for _ in 0..2 * window / MSS {
            reno.on_ack(clock.now(), &acked(MSS, early), &rtt());
        }
        assert_eq!(reno.window(), window);
        // The first packet sent after it ends the period.
        mock.increment(MS);
        let after = clock.now();
        for _ in 0..window / MSS {
            reno.on_ack(clock.now(), &acked(MSS, after), &rtt());
        }
        assert_eq!(reno.window(), window + MSS);
        reno.invariants().unwrap();
    }

    #[test]
    fn an_application_limited_sender_does_not_grow_the_window() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut reno = reno();
        let window = reno.window();
        let mut idle = acked(window, clock.now());
        idle.app_limited = true;
        for _ in 0..10 {
            reno.on_ack(clock.now(), &idle, &rtt());
        }
        assert_eq!(reno.window(), window);
        reno.invariants().unwrap();
    }

    #[test]
    fn congestion_avoidance_adds_one_packet_per_window_acknowledged() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        reno.on_loss(clock.now(), &lost(clock.now()), &rtt());
        mock.increment(MS);
        let window = reno.window();
        for _ in 0..window / MSS {
            reno.on_ack(clock.now(), &acked(MSS, clock.now()), &rtt());
        }
        assert_eq!(reno.window(), window + MSS);
        reno.on_ack(clock.now(), &acked(u64::MAX, clock.now()), &rtt());
        assert_eq!(reno.window(), RenoConfig::default().max_window);
        reno.invariants().unwrap();
    }

    #[test]
    fn a_reduction_whose_losses_all_proved_spurious_is_undone() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        let sent = clock.now();
        mock.increment(50 * MS);
        let declared = clock.now();
        reno.on_loss(declared, &lost(sent), &rtt());
        assert_eq!(reno.window(), 5 * MSS);
        mock.increment(MS);
        reno.on_spurious_loss(clock.now(), declared);
        assert_eq!(reno.window(), 10 * MSS);
        assert!(reno.in_slow_start(), "the threshold is restored too");
        assert_eq!(reno.undone_reductions(), 1);
        reno.invariants().unwrap();
    }

    #[test]
    fn a_genuine_loss_in_the_event_keeps_the_reduction() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        let sent = clock.now();
        mock.increment(50 * MS);
        let declared = clock.now();
        let two = Lost {
            packets: 2,
            bytes: 2 * MSS,
            largest_sent_at: sent,
        };
        reno.on_loss(declared, &two, &rtt());
        reno.on_spurious_loss(clock.now(), declared);
        assert_eq!(reno.window(), 5 * MSS);
        assert_eq!(reno.undone_reductions(), 0);
        reno.invariants().unwrap();
    }

    #[test]
    fn persistent_congestion_collapses_to_the_minimum() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        let sent = clock.now();
        mock.increment(50 * MS);
        reno.on_loss(clock.now(), &lost(sent), &rtt());
        reno.on_persistent_congestion(clock.now());
        assert_eq!(reno.window(), 2 * MSS);
        assert!(reno.in_slow_start());
        // Not undone by a late ACK, and the next ACK grows it again.
        reno.on_spurious_loss(clock.now(), clock.now());
        assert_eq!(reno.window(), 2 * MSS);
        reno.on_ack(clock.now(), &acked(MSS, sent), &rtt());
        assert_eq!(reno.window(), 3 * MSS);
        reno.invariants().unwrap();
    }

    /// The controllers' shared random-operation test, on Reno through the
    /// `AnyController` enum.
    fn run(config: RenoConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let cc = AnyController::from(Reno::new(config).unwrap());
        let min_window = u64::from(config.min_window_packets) * config.max_datagram_size;
        test_ops::run(cc, min_window, config.max_window, ops)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_operations_keep_every_reno_invariant(ops in proptest::collection::vec(op(2, 6), 1..200)) {
            run(RenoConfig::default(), ops)?;
        }

        #[test]
        fn random_operations_keep_the_invariants_of_any_configuration(
            min_window_packets in 1..4u32,
            initial_window_packets in 4..=20u32,
            max_window_packets in 20..2_000u64,
            max_datagram_size in 1..=65_535u64,
            ops in proptest::collection::vec(op(2, 6), 1..100),
        ) {
            let config = RenoConfig {
                max_datagram_size,
                initial_window_packets,
                min_window_packets,
                max_window: max_window_packets * max_datagram_size,
            };
            run(config, ops)?;
        }
    }
}
