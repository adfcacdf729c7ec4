//! A loss-based AIMD controller in the manner of TCP Reno (RFC 5681) as
//! QUIC uses it (RFC 9002, section 7).
//!
//! Tern's default is [`Ledbat`](crate::Ledbat); Reno is for paths where the
//! peer sends no one-way-delay samples and the application wants its fair
//! share rather than less, and it is the competing flow the bottleneck tests
//! check that LEDBAT yields to.

use crate::pacer::{PACING_GAIN_PERMILLE, SLOW_START_PACING_GAIN_PERMILLE, pacing_rate};
use crate::rtt::PathRtt;
use crate::{Controller, InvariantViolation, MAX_WINDOW_LIMIT, OneWayDelay};
use quanta::Instant;
use std::time::Duration;

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
    /// The round trip assumed before the first sample, in time (default
    /// 333 ms).
    pub initial_rtt: Duration,
}

impl Default for RenoConfig {
    fn default() -> Self {
        Self {
            max_datagram_size: 1_452,
            initial_window_packets: 10,
            min_window_packets: 2,
            max_window: 64 << 20,
            initial_rtt: Duration::from_millis(333),
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
    /// `initial_rtt` is zero.
    #[error("initial RTT must not be zero")]
    InitialRtt,
}

/// Slow start, then one packet more per round trip, halved on loss.
#[derive(Debug, Clone)]
pub struct Reno {
    mss: u64,
    min_window: u64,
    max_window: u64,
    initial_rtt: Duration,
    /// Congestion window, in bytes.
    window: u64,
    /// Slow start ends at this window, in bytes.
    ssthresh: u64,
    bytes_in_flight: u64,
    /// Acknowledged bytes not yet turned into window growth in congestion
    /// avoidance, in bytes (always below the window).
    acked_credit: u64,
    /// When the current recovery period began.
    recovery_start: Option<Instant>,
    rtt: PathRtt,
}

impl Reno {
    /// A controller in slow start with the initial window.
    pub fn new(config: RenoConfig) -> Result<Self, RenoConfigError> {
        if !(1..=65_535).contains(&config.max_datagram_size) {
            return Err(RenoConfigError::MaxDatagramSize);
        }
        let mss = config.max_datagram_size;
        let min_window = u64::from(config.min_window_packets) * mss;
        let initial_window = u64::from(config.initial_window_packets) * mss;
        if min_window == 0
            || initial_window < min_window
            || config.max_window < initial_window
            || config.max_window > MAX_WINDOW_LIMIT
        {
            return Err(RenoConfigError::Window);
        }
        if config.initial_rtt.is_zero() {
            return Err(RenoConfigError::InitialRtt);
        }
        Ok(Self {
            mss,
            min_window,
            max_window: config.max_window,
            initial_rtt: config.initial_rtt,
            window: initial_window,
            ssthresh: u64::MAX,
            bytes_in_flight: 0,
            acked_credit: 0,
            recovery_start: None,
            rtt: PathRtt::new(),
        })
    }
}

impl Controller for Reno {
    fn on_sent(&mut self, _now: Instant, bytes: u64) {
        self.bytes_in_flight = self.bytes_in_flight.saturating_add(bytes);
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        acked_bytes: u64,
        rtt: Option<Duration>,
        _one_way_delay: Option<OneWayDelay>,
    ) {
        if let Some(rtt) = rtt {
            self.rtt.update(rtt);
        }
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(acked_bytes);
        if self.window < self.ssthresh {
            // RFC 9002, section 7.3.1: "While a sender is in slow start, the
            // congestion window increases by the number of bytes acknowledged
            // when each acknowledgment is processed."
            self.window = self.window.saturating_add(acked_bytes).min(self.ssthresh);
        } else {
            // RFC 9002, section 7.3.3: congestion avoidance "MUST limit the
            // increase to the congestion window to at most one maximum
            // datagram size for each congestion window that is acknowledged."
            self.acked_credit = self.acked_credit.saturating_add(acked_bytes);
            let windows = self.acked_credit / self.window;
            self.acked_credit %= self.window;
            self.window = self.window.saturating_add(windows.saturating_mul(self.mss));
        }
        self.window = self.window.clamp(self.min_window, self.max_window);
        self.acked_credit = self.acked_credit.min(self.window - 1);
    }

    fn on_loss(&mut self, now: Instant, lost_bytes: u64, sent_at: Instant) {
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(lost_bytes);
        // RFC 9002, section 7.3.2: "The recovery period aims to limit
        // congestion window reduction to once per round trip."
        if self.recovery_start.is_some_and(|start| sent_at <= start) {
            return;
        }
        self.recovery_start = Some(now);
        self.ssthresh = (self.window / 2).max(self.min_window);
        self.window = self.ssthresh;
        self.acked_credit = 0;
    }

    fn on_congestion_timeout(&mut self, now: Instant) {
        // RFC 9002, section 7.6.2: "When persistent congestion is declared,
        // the sender's congestion window MUST be reduced to the minimum
        // congestion window (kMinimumWindow)".
        self.ssthresh = (self.window / 2).max(self.min_window);
        self.window = self.min_window;
        self.acked_credit = 0;
        self.recovery_start = Some(now);
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    fn pacing_rate(&self) -> u64 {
        let gain = if self.in_slow_start() {
            SLOW_START_PACING_GAIN_PERMILLE
        } else {
            PACING_GAIN_PERMILLE
        };
        let rtt = self.rtt.smoothed().unwrap_or(self.initial_rtt);
        pacing_rate(self.window, rtt, gain)
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
        self.rtt.invariants()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reno() -> Reno {
        Reno::new(RenoConfig::default()).unwrap()
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
        let bad_rtt = RenoConfig {
            initial_rtt: Duration::ZERO,
            ..RenoConfig::default()
        };
        assert_eq!(Reno::new(bad_rtt).unwrap_err(), RenoConfigError::InitialRtt);
    }

    #[test]
    fn slow_start_doubles_the_window_per_round_trip() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut reno = reno();
        let window = reno.window();
        reno.on_sent(clock.now(), window);
        reno.on_ack(clock.now(), window, Some(Duration::from_millis(50)), None);
        assert_eq!(reno.window(), 2 * window);
        assert!(reno.in_slow_start());
        reno.invariants().unwrap();
    }

    #[test]
    fn a_loss_halves_once_per_round_trip_and_ends_slow_start() {
        let (clock, mock) = quanta::Clock::mock();
        let mut reno = reno();
        let sent = clock.now();
        reno.on_sent(sent, 10 * 1_452);
        mock.increment(Duration::from_millis(50));
        reno.on_loss(clock.now(), 1_452, sent);
        assert_eq!(reno.window(), 5 * 1_452);
        reno.on_loss(clock.now(), 1_452, sent);
        assert_eq!(reno.window(), 5 * 1_452, "same congestion event");
        assert!(!reno.in_slow_start());
        mock.increment(Duration::from_millis(1));
        reno.on_loss(clock.now(), 1_452, clock.now());
        assert_eq!(reno.window(), 2 * 1_452 + 1_452 / 2);
        reno.invariants().unwrap();
    }

    #[test]
    fn congestion_avoidance_adds_one_packet_per_window_acknowledged() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut reno = reno();
        reno.on_loss(clock.now(), 0, clock.now());
        let window = reno.window();
        for _ in 0..window / 1_452 {
            reno.on_ack(clock.now(), 1_452, None, None);
        }
        assert_eq!(reno.window(), window + 1_452);
        reno.on_ack(clock.now(), u64::MAX, None, None);
        assert_eq!(reno.window(), RenoConfig::default().max_window);
        reno.invariants().unwrap();
    }

    #[test]
    fn a_congestion_timeout_collapses_to_the_minimum() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut reno = reno();
        reno.on_congestion_timeout(clock.now());
        assert_eq!(reno.window(), 2 * 1_452);
        assert!(reno.in_slow_start());
        reno.invariants().unwrap();
    }
}
