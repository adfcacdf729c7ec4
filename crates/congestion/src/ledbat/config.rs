//! What a [`Ledbat`](super::Ledbat) controller is configured with, and the
//! ranges it checks.

use crate::window::BoundsError;
use crate::{MAX_BASE_HISTORY, MAX_CURRENT_FILTER};
use std::time::Duration;

/// Configuration of a [`Ledbat`](super::Ledbat) controller.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LedbatConfig {
    /// TARGET: the queuing delay the flow may add, in time (default 100 ms;
    /// at most 100 ms).
    pub target: Duration,
    /// GAIN: window growth per round trip at zero queuing delay, in packets
    /// (dimensionless factor, default 1; in (0, 1]).
    pub gain: f64,
    /// ALLOWED_INCREASE: how far the window may grow beyond the bytes that
    /// were actually in flight, in packets (default 1; at least 1).
    pub allowed_increase_packets: u32,
    /// BASE_HISTORY: one-minute buckets of base-delay minima, in buckets
    /// (default 10; 2 to [`MAX_BASE_HISTORY`]).
    pub base_history: usize,
    /// CURRENT_FILTER: one-way-delay samples the current delay is the
    /// minimum of, in samples (default 4; 1 to [`MAX_CURRENT_FILTER`]).
    pub current_filter: usize,
    /// MSS: the size of a full packet, in bytes (default 1452; 1 to 65 535).
    pub max_datagram_size: u64,
    /// INIT_CWND: the window a connection starts with, in packets
    /// (default 26).
    ///
    /// RFC 6817 asks for 2 and at most TCP's initial window; Tern starts
    /// larger, as its reference transport did, because peer-to-peer messages
    /// are mostly a few dozen packets, which then need no round trip of
    /// ramp-up. Slow start leaves as soon as the queue grows, and pacing
    /// spreads the first window over the initial round trip.
    pub initial_window_packets: u32,
    /// MIN_CWND: the smallest window, in packets (default 2; at least 1).
    pub min_window_packets: u32,
    /// The largest window, in bytes (default 64 MiB; at least the initial
    /// window, at most [`MAX_WINDOW_LIMIT`](super::MAX_WINDOW_LIMIT)).
    pub max_window: u64,
    /// Slow start ends when the queuing delay reaches this fraction of the
    /// target (dimensionless, default 0.75; in (0, 1]).
    pub slow_start_exit: f64,
    /// LEDBAT++'s multiplicative-decrease constant (dimensionless, default 1;
    /// 0 to 16; 0 gives RFC 6817's purely additive decrease).
    pub decrease_constant: f64,
    /// Whether to slow down periodically so every flow re-measures its base
    /// delay (default true).
    pub periodic_slowdowns: bool,
    /// The time between slowdowns, as a multiple of the previous slowdown's
    /// duration (dimensionless, default 15; at least 1).
    ///
    /// LEDBAT++ says 9. A slowdown leaves the link idle for about one base
    /// round trip, so the interval sets what a lone flow loses: on a
    /// 100 Mbit/s, 50 ms path, 2.5 % of the link at 9 and 1.6 % at 15. A
    /// latecomer still converges to a fair share through the slowdowns
    /// that remain (`tests/bottleneck.rs`: Jain index 0.93 or more).
    pub slowdown_interval: u32,
    /// How long a slowdown holds the minimum window, in smoothed round trips
    /// as measured when it begins (default 1; at least 1).
    ///
    /// LEDBAT++ holds for two. One is enough for the queue to drain: the
    /// round trip measured at the start includes the whole queue, and the
    /// first packets of the ramp after the hold then measure the drained
    /// path. It halves what slowdowns cost in throughput.
    pub slowdown_hold_round_trips: u32,
}

impl Default for LedbatConfig {
    fn default() -> Self {
        Self {
            target: Duration::from_millis(100),
            gain: 1.0,
            allowed_increase_packets: 1,
            base_history: 10,
            current_filter: 4,
            max_datagram_size: 1_452,
            initial_window_packets: 26,
            min_window_packets: 2,
            max_window: 64 << 20,
            slow_start_exit: 0.75,
            decrease_constant: 1.0,
            periodic_slowdowns: true,
            slowdown_interval: 15,
            slowdown_hold_round_trips: 1,
        }
    }
}

/// A [`LedbatConfig`] value out of its documented range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LedbatConfigError {
    /// `target` is zero or above 100 ms.
    #[error("target must be in (0, 100 ms]")]
    Target,
    /// `gain` is not in (0, 1].
    #[error("gain must be in (0, 1]")]
    Gain,
    /// `allowed_increase_packets` is zero.
    #[error("allowed increase must be at least 1 packet")]
    AllowedIncrease,
    /// `base_history` is not in 2..=MAX_BASE_HISTORY.
    #[error("base history must be 2 to {MAX_BASE_HISTORY} buckets")]
    BaseHistory,
    /// `current_filter` is not in 1..=MAX_CURRENT_FILTER.
    #[error("current filter must be 1 to {MAX_CURRENT_FILTER} samples")]
    CurrentFilter,
    /// `max_datagram_size` is zero or above 65 535.
    #[error("max datagram size must be 1 to 65 535 bytes")]
    MaxDatagramSize,
    /// `min_window_packets` is zero, or the initial window is below it.
    #[error("windows must be at least 1 packet and the initial one at least the minimum")]
    Window,
    /// `max_window` is below the initial window or above MAX_WINDOW_LIMIT.
    #[error("max window must be at least the initial window and at most 2^46 bytes")]
    MaxWindow,
    /// `slow_start_exit` is not in (0, 1].
    #[error("slow start exit must be in (0, 1]")]
    SlowStartExit,
    /// `decrease_constant` is not in [0, 16].
    #[error("decrease constant must be in [0, 16]")]
    DecreaseConstant,
    /// `slowdown_interval` or `slowdown_hold_round_trips` is zero.
    #[error("slowdown interval and hold must be at least 1")]
    SlowdownInterval,
}

// What failed in the window bounds' check the controllers share, as this
// error (hidden: the check is private to the crate).
#[doc(hidden)]
impl From<BoundsError> for LedbatConfigError {
    fn from(error: BoundsError) -> Self {
        match error {
            BoundsError::MaxDatagramSize => Self::MaxDatagramSize,
            BoundsError::Window => Self::Window,
            BoundsError::MaxWindow => Self::MaxWindow,
        }
    }
}
