//! LEDBAT (RFC 6817), with slow start and the LEDBAT++ remedies for its
//! unfairness.
//!
//! LEDBAT is a less-than-best-effort controller: it fills the bottleneck up
//! to a small target queuing delay and no further, and it backs off as soon
//! as anyone else's traffic makes the queue grow. Tern is background traffic
//! for the applications on the same access link, so this is its default.
//!
//! # Delay measurement
//!
//! Each ACK frame carries a one-way-delay sample: the receiver's clock at
//! arrival minus the sender's timestamp. The clocks are not synchronised, so
//! a sample is the path delay plus an unknown offset, and only differences
//! matter: queuing delay = (minimum of the last few samples,
//! [`CurrentDelayFilter`]) − (minimum per minute over the last
//! `base_history` minutes, [`BaseDelayHistory`]).
//!
//! A stale base is handled three ways:
//! - a shorter path (or a receiver clock that runs slow) lowers the base at
//!   once, because the newest bucket takes every smaller sample;
//! - a longer path is adopted when the old minima leave the history, after
//!   `base_history` minutes, as the RFC specifies;
//! - a clock that jumped forward or drifts fast makes the one-way samples
//!   grow with no queue behind them. The round trip, measured with the
//!   sender's clock alone, bounds the queuing delay on the forward path:
//!   `queuing delay ≤ latest RTT − minimum RTT`. When the one-way estimate
//!   exceeds that bound by more than a quarter of the target, the excess is
//!   clock error and the base is raised by it.
//!
//! Without one-way samples (a peer that does not send them) the queuing
//! delay is taken from the round trip, latest RTT − minimum RTT, as
//! LEDBAT++ does.
//!
//! # Slow start
//!
//! A connection starts with `initial_window_packets` (26 by default, as the
//! reference transport used — more than the RFC's `INIT_CWND`, see
//! [`LedbatConfig::initial_window_packets`]) and doubles its window every
//! round trip until the queuing delay reaches `slow_start_exit` × target
//! (3/4 by default), a loss, or the slow start threshold.
//!
//! # Latecomers and fairness: what this implementation chose, and why
//!
//! Two LEDBAT flows are unfair to each other in two ways. A *latecomer*
//! measures its base delay while the first flow's queue is already standing,
//! counts that queue as path delay, and pushes the first flow down to its
//! minimum window. And RFC 6817's window change is additive both ways
//! (`GAIN × off_target` packets per round trip), so two flows that do see
//! the same delay keep whatever difference in window they had.
//!
//! Tern takes two remedies of LEDBAT++ (draft-irtf-iccrg-ledbat-plus-plus),
//! adapted where the bottleneck model (`tests/bottleneck.rs`) showed a need.
//! The draft is paraphrased here and at the code marked `LEDBAT++`, never
//! quoted: its decrease formula is given in the draft's notation, the rest
//! in our words.
//! - **Multiplicative decrease.** At or above the target, the window
//!   changes by `GAIN − decrease_constant × W × (queuing delay / target − 1)`
//!   packets per round trip, and by no more than `−W/2`. Each flow gives back
//!   in proportion to its window, so the one equilibrium — a delay just
//!   above the target, `target × (1 + GAIN / (C × W))` — is where the windows
//!   are equal. Below the target RFC 6817's rule is kept as written. (With
//!   RFC 6817's rule on both sides, every split of the link is an
//!   equilibrium, and two flows keep whatever shares they happen to have.)
//! - **Periodic slowdowns.** Two round trips after slow start ends, and then
//!   every `slowdown_interval` times the duration of the previous slowdown
//!   (15 by default; the draft says 9), the window drops to the minimum for
//!   `slowdown_hold_round_trips` round trips (1 by default; the draft says
//!   2), so the queue drains and every flow on the bottleneck measures the
//!   true base delay: this is what corrects a latecomer's inflated base.
//!   After the hold the window restarts at the part of the old window that
//!   was on the wire rather than in the queue (old window × min RTT /
//!   smoothed RTT) instead of at 2 packets, and slow-starts back to the old
//!   window, ignoring queues below twice the target: a slowdown is a
//!   voluntary, temporary yield, and stopping the climb at 3/4 of the target
//!   would hand the share of a small flow to a large one at every slowdown.
//!   With these changes a slowdown costs about one base round trip of link
//!   time, and a single flow keeps more than 95 % of the link.
//!
//! Of the draft's other changes, the slow-start exit at 3/4 of the target is
//! taken (see *Slow start*) and the queuing delay from the round trip when
//! no one-way samples come (see *Delay measurement*); its dynamic gain, a
//! smaller gain on short base delays, is not: `gain` is configurable, and
//! RFC 6817's GAIN of 1 keeps utilisation high on the LAN paths peers often
//! share.
//!
//! Arithmetic is integer: the window is kept in 1/65 536 byte so increases
//! of a fraction of a byte per ACK, on large windows, are not lost.

use crate::pacer::{PACING_GAIN_PERMILLE, SLOW_START_PACING_GAIN_PERMILLE, pacing_rate};
use crate::recovery::Recovery;
use crate::time::add_saturating;
use crate::window::{BoundsError, WindowBounds};
use crate::{
    Acked, BaseDelayHistory, Controller, CurrentDelayFilter, InvariantViolation, Lost,
    MAX_BASE_HISTORY, MAX_CURRENT_FILTER, OneWayDelay, Rtt,
};
use quanta::Instant;
use std::time::Duration;

/// Fractional bits of the internal window.
const FRAC_BITS: u32 = 16;
/// 1.0 in the 16.16 fixed point used for gains.
const ONE: u64 = 1 << FRAC_BITS;
/// The largest window the fixed point can hold with room to spare, in bytes.
pub const MAX_WINDOW_LIMIT: u64 = 1 << 46;
/// Acknowledged bytes counted per call at most (a bound for the arithmetic;
/// far above any real window).
const MAX_ACKED: u64 = 1 << 40;

/// Configuration of a [`Ledbat`] controller.
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
    /// window, at most [`MAX_WINDOW_LIMIT`]).
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

/// Where the controller is in its cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The window doubles every round trip.
    SlowStart,
    /// The window follows the queuing delay (RFC 6817's controller).
    CongestionAvoidance,
    /// A LEDBAT++ slowdown: the window is held at the minimum until
    /// `until`, then restarts at `restart` bytes.
    SlowdownHold { until: Instant, restart: u64 },
}

/// What undoing a window reduction restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Undo {
    window: u64,
    ssthresh: u64,
    /// The loss ended slow start: undone, slow start goes on.
    ended_slow_start: bool,
    /// When the next slowdown was due before the loss scheduled the first.
    next_slowdown: Option<Instant>,
}

/// The LEDBAT congestion controller. The [module docs](crate::ledbat) explain
/// what it implements, and why.
#[derive(Debug, Clone)]
pub struct Ledbat {
    target_nanos: u64,
    gain: u64,
    allowed_increase: u64,
    mss: u64,
    min_window: u64,
    max_window: u64,
    slow_start_exit_nanos: u64,
    decrease_constant: u64,
    periodic_slowdowns: bool,
    slowdown_interval: u32,
    slowdown_hold: u32,

    /// Congestion window, in 1/65 536 byte.
    window: u64,
    /// Slow start ends when the window reaches this, in bytes.
    ssthresh: u64,
    phase: Phase,
    current: CurrentDelayFilter,
    base: BaseDelayHistory,
    queuing_delay_nanos: u64,
    /// Peak bytes in flight (the tracker's count, as reported) in the
    /// current and the previous round trip: how much of the window the
    /// application actually used.
    flight_peak: u64,
    flight_peak_previous: u64,
    /// When the current round trip of `flight_peak` began.
    flight_period_start: Option<Instant>,
    /// The recovery period of the last loss, and what undoing it restores.
    recovery: Recovery<Undo>,
    /// When the next periodic slowdown begins.
    next_slowdown: Option<Instant>,
    /// When the slowdown under way (hold or ramp back) began.
    slowdown_started: Option<Instant>,
}

fn fixed(value: f64) -> u64 {
    // Validated finite and in [0, 16] before this is called.
    (value * ONE as f64).round() as u64
}

impl Ledbat {
    /// A controller in slow start with the initial window.
    pub fn new(config: LedbatConfig) -> Result<Self, LedbatConfigError> {
        type E = LedbatConfigError;
        let in_range = |v: f64, lo: f64, hi: f64| v.is_finite() && v >= lo && v <= hi;
        // RFC 6817, section 2.5: "TARGET MUST be 100 milliseconds or less".
        if config.target.is_zero() || config.target > Duration::from_millis(100) {
            return Err(E::Target);
        }
        // RFC 6817, section 2.5: "GAIN MUST be set to 1 or less."
        if !in_range(config.gain, f64::MIN_POSITIVE, 1.0) {
            return Err(E::Gain);
        }
        // RFC 6817, section 2.5: "ALLOWED_INCREASE SHOULD be 1, and it MUST
        // be greater than 0."
        if config.allowed_increase_packets == 0 {
            return Err(E::AllowedIncrease);
        }
        if !(2..=MAX_BASE_HISTORY).contains(&config.base_history) {
            return Err(E::BaseHistory);
        }
        if !(1..=MAX_CURRENT_FILTER).contains(&config.current_filter) {
            return Err(E::CurrentFilter);
        }
        let bounds = WindowBounds::new(
            config.max_datagram_size,
            config.min_window_packets,
            config.initial_window_packets,
            config.max_window,
        )?;
        let mss = bounds.mss;
        if !in_range(config.slow_start_exit, f64::MIN_POSITIVE, 1.0) {
            return Err(E::SlowStartExit);
        }
        if !in_range(config.decrease_constant, 0.0, 16.0) {
            return Err(E::DecreaseConstant);
        }
        if config.slowdown_interval == 0 || config.slowdown_hold_round_trips == 0 {
            return Err(E::SlowdownInterval);
        }
        let target_nanos = u64::try_from(config.target.as_nanos()).unwrap_or(u64::MAX);
        Ok(Self {
            target_nanos,
            gain: fixed(config.gain).max(1),
            allowed_increase: u64::from(config.allowed_increase_packets) * mss,
            mss,
            min_window: bounds.min,
            max_window: bounds.max,
            slow_start_exit_nanos: ((u128::from(target_nanos)
                * u128::from(fixed(config.slow_start_exit)))
                >> FRAC_BITS) as u64,
            decrease_constant: fixed(config.decrease_constant),
            periodic_slowdowns: config.periodic_slowdowns,
            slowdown_interval: config.slowdown_interval,
            slowdown_hold: config.slowdown_hold_round_trips,
            window: bounds.initial << FRAC_BITS,
            ssthresh: u64::MAX,
            phase: Phase::SlowStart,
            current: CurrentDelayFilter::new(config.current_filter),
            base: BaseDelayHistory::new(config.base_history),
            queuing_delay_nanos: 0,
            flight_peak: 0,
            flight_peak_previous: 0,
            flight_period_start: None,
            recovery: Recovery::new(),
            next_slowdown: None,
            slowdown_started: None,
        })
    }

    /// The latest queuing-delay estimate.
    pub fn queuing_delay(&self) -> Duration {
        Duration::from_nanos(self.queuing_delay_nanos)
    }

    /// Whether a periodic slowdown holds the window at the minimum now.
    pub fn in_slowdown(&self) -> bool {
        matches!(self.phase, Phase::SlowdownHold { .. })
    }

    /// Window reductions undone because every loss of their congestion
    /// event proved spurious.
    pub fn undone_reductions(&self) -> u64 {
        self.recovery.undone()
    }

    fn window_bytes(&self) -> u64 {
        self.window >> FRAC_BITS
    }

    fn set_window_bytes(&mut self, bytes: u64) {
        self.window = bytes.clamp(self.min_window, self.max_window) << FRAC_BITS;
    }

    /// The most bytes in flight during the last round trip or so: RFC
    /// 6817's `flightsize`, taken over the previous round trip as its
    /// section 2.5 describes, so a window that was used is not mistaken for
    /// an unused one while its ACKs drain the flight.
    fn flight_used(&mut self, now: Instant, flight: u64, srtt: Duration) -> u64 {
        let period_over = self
            .flight_period_start
            .is_none_or(|start| now.saturating_duration_since(start) >= srtt);
        if period_over {
            self.flight_peak_previous = self.flight_peak;
            self.flight_peak = flight;
            self.flight_period_start = Some(now);
        }
        self.flight_peak = self.flight_peak.max(flight);
        self.flight_peak.max(self.flight_peak_previous)
    }

    /// Starts or ends a slowdown when its time has come.
    fn advance_phase(&mut self, now: Instant, rtt: &Rtt) {
        match self.phase {
            Phase::SlowdownHold { until, restart } if now >= until => {
                // LEDBAT++: after the hold, slow start back up to the window
                // the flow had before the slowdown (kept in ssthresh).
                self.set_window_bytes(restart);
                self.phase = Phase::SlowStart;
            }
            Phase::CongestionAvoidance if self.next_slowdown.is_some_and(|at| now >= at) => {
                // LEDBAT++: the window drops to the minimum for long enough
                // for the queue to drain.
                self.next_slowdown = None;
                self.slowdown_started = Some(now);
                let window = self.window_bytes();
                self.ssthresh = window;
                // Of the window, the share min RTT / smoothed RTT was on the
                // wire and the rest in the queue: after the hold the ramp
                // restarts from the wire's share (a bandwidth-delay product
                // measured just now), not from 2 packets, so a slowdown costs
                // about one base round trip of idle link instead of a whole
                // slow start. The queue is drained either way, and the
                // restart's first packets measure the empty path.
                let srtt = rtt.smoothed();
                let share = u128::from(window) * rtt.min().as_nanos() / srtt.as_nanos().max(1);
                let restart = u64::try_from(share).unwrap_or(window);
                self.set_window_bytes(self.min_window);
                let hold = srtt.saturating_mul(self.slowdown_hold);
                self.phase = Phase::SlowdownHold {
                    until: add_saturating(now, hold),
                    restart: restart.clamp(self.min_window, window),
                };
            }
            _ => {}
        }
    }

    fn exit_slow_start(&mut self, now: Instant, srtt: Duration) {
        self.phase = Phase::CongestionAvoidance;
        if !self.periodic_slowdowns {
            return;
        }
        match self.slowdown_started.take() {
            Some(started) => {
                // The next slowdown comes `slowdown_interval` times the length
                // of this one later, so slowdowns cost about 1/(interval + 1)
                // of the time.
                let duration = now.saturating_duration_since(started);
                let wait = duration.saturating_mul(self.slowdown_interval);
                self.next_slowdown = Some(add_saturating(now, wait));
            }
            None if self.next_slowdown.is_none() => {
                // LEDBAT++'s initial slowdown, two round trips after the first
                // slow start.
                self.next_slowdown = Some(add_saturating(now, srtt.saturating_mul(2)));
            }
            None => {}
        }
    }

    /// Updates the delay estimates with one ACK's samples.
    fn update_delays(&mut self, now: Instant, rtt: &Rtt, one_way_delay: Option<OneWayDelay>) {
        // The queuing delay the round trip proves: latest RTT − minimum RTT.
        let rtt_queuing =
            u64::try_from(rtt.latest().saturating_sub(rtt.min()).as_nanos()).unwrap_or(u64::MAX);
        let Some(sample) = one_way_delay.map(OneWayDelay::as_nanos) else {
            self.queuing_delay_nanos = rtt_queuing;
            return;
        };
        // RFC 6817, section 2.4.2 (on acknowledgement):
        //   for each delay sample in the acknowledgement:
        //       delay = acknowledgement.delay
        //       update_base_delay(delay)
        //       update_current_delay(delay)
        self.base.update(now, sample);
        self.current.push(now, sample);
        //   queuing_delay = FILTER(current_delays) - MIN(base_delays)
        let filtered = self.current.min(now, rtt.smoothed()).unwrap_or(sample);
        let base = self.base.base().unwrap_or(sample);
        let mut queuing = u64::try_from(filtered.saturating_sub(base)).unwrap_or(0);
        // Clock error: the forward queue cannot be longer than the whole
        // round trip grew. Beyond a quarter target of slack, the excess is a
        // clock that jumped or drifts, and the base moves up by it.
        let slack = self.target_nanos / 4;
        if queuing > rtt_queuing.saturating_add(slack) {
            let excess = queuing - rtt_queuing;
            let shift = i64::try_from(excess).unwrap_or(i64::MAX);
            self.base.raise(shift);
            queuing = rtt_queuing;
        }
        self.queuing_delay_nanos = queuing;
    }

    /// RFC 6817's window update below the target, LEDBAT++'s above it, for
    /// `acked` bytes with `flight_used` bytes in flight in the last round
    /// trip. Decreases always apply; increases only if `may_grow`.
    fn congestion_avoidance(&mut self, acked: u64, flight_used: u64, may_grow: bool) {
        let acked = i128::from(acked.min(MAX_ACKED));
        let target = i128::from(self.target_nanos);
        // Beyond 16 × target the decrease is at its cap of W/2 anyway.
        let queuing = i128::from(
            self.queuing_delay_nanos
                .min(self.target_nanos.saturating_mul(16)),
        );
        let window = i128::from(self.window_bytes().max(1));
        let mss = i128::from(self.mss);
        let gain = i128::from(self.gain);
        let delta = if queuing < target || self.decrease_constant == 0 {
            // RFC 6817, section 2.4.2 (also above the target when the
            // LEDBAT++ decrease is off):
            //   off_target = (TARGET - queuing_delay) / TARGET
            //   cwnd += GAIN * off_target * bytes_newly_acked * MSS / cwnd
            gain * (target - queuing) * acked * mss / (target * window)
        } else {
            // LEDBAT++: at or above the target the window changes by
            // GAIN − C × W × (delay/target − 1) packets per round trip, i.e.
            // per ACK GAIN × acked × MSS / W − C × (delay/target − 1) × acked
            // bytes, and never by more than −W/2 per round trip (−acked/2
            // per ACK). Each flow gives back in proportion to its window, so
            // the only equilibrium, at a delay just above the target, is the
            // one where the windows are equal.
            let increase = gain * acked * mss / window;
            let decrease = i128::from(self.decrease_constant) * (queuing - target) * acked / target;
            (increase - decrease).max(-(acked << FRAC_BITS) / 2)
        };

        let old = i128::from(self.window);
        let mut new = old + delta;
        if delta > 0 && !may_grow {
            return;
        }
        if delta > 0 {
            // RFC 6817, section 2.4.2:
            //   max_allowed_cwnd = flightsize + ALLOWED_INCREASE * MSS
            //   cwnd = min(cwnd, max_allowed_cwnd)
            // Section 2.5: "an ALLOWED_INCREASE of 1 allows and limits the
            // cwnd increase based on flightsize in the previous RTT": the cap
            // stops growth, it does not shrink a window an application left
            // unused.
            let allowed =
                i128::from(flight_used.saturating_add(self.allowed_increase)) << FRAC_BITS;
            new = new.min(allowed).max(old);
        }
        //   cwnd = max(cwnd, MIN_CWND * MSS)
        let min = i128::from(self.min_window) << FRAC_BITS;
        let max = i128::from(self.max_window) << FRAC_BITS;
        self.window = u64::try_from(new.clamp(min, max)).unwrap_or(self.min_window << FRAC_BITS);
    }

    /// Slow start: the window grows by the bytes acknowledged, as long as the
    /// queue stays short.
    fn slow_start(
        &mut self,
        now: Instant,
        acked: u64,
        flight_used: u64,
        may_grow: bool,
        srtt: Duration,
    ) {
        // After a slowdown the flow climbs back to the window it held, which
        // was its share before it yielded: others' queue (at the target, if
        // they are LEDBAT flows) must not stop it at 3/4 of the target, or
        // every slowdown would hand the share of a small flow to a large
        // one. Only a queue twice the target — someone else's congestion —
        // ends the climb early.
        let exit_at = if self.slowdown_started.is_some() {
            self.target_nanos.saturating_mul(2)
        } else {
            self.slow_start_exit_nanos
        };
        if self.queuing_delay_nanos >= exit_at {
            self.exit_slow_start(now, srtt);
            return;
        }
        if !may_grow {
            return;
        }
        let old = self.window_bytes();
        // Only a window that was used grows: to at most twice what was in
        // flight in the last round trip (as a doubling per round trip needs).
        let allowed = flight_used
            .saturating_mul(2)
            .max(flight_used.saturating_add(self.allowed_increase));
        let grown = old.saturating_add(acked).min(allowed).max(old);
        let ceiling = self.ssthresh.min(self.max_window);
        self.set_window_bytes(grown.min(ceiling));
        if grown >= ceiling {
            self.exit_slow_start(now, srtt);
        }
    }
}

impl Controller for Ledbat {
    fn on_sent(&mut self, _now: Instant, bytes_in_flight: u64) {
        self.flight_peak = self.flight_peak.max(bytes_in_flight);
    }

    /// RFC 6817's update on acknowledgement, with LEDBAT++'s decrease above
    /// the target. Growth (in slow start or congestion avoidance) needs the
    /// largest acknowledged packet to have been sent after the current
    /// recovery period began (RFC 9002 §7.3.2) and the sender not to be
    /// application-limited (RFC 9002 §7.8); a queue above the target shrinks
    /// the window whatever the two say.
    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &Rtt) {
        self.advance_phase(now, rtt);
        self.update_delays(now, rtt, acked.one_way_delay);
        // The flight before this ACK drained it: what the window carried.
        let flight = acked.bytes_in_flight.saturating_add(acked.bytes);
        let flight_used = self.flight_used(now, flight, rtt.smoothed());
        let may_grow = !acked.app_limited && !self.recovery.covers(acked.largest_sent_at);
        match self.phase {
            Phase::SlowStart => {
                self.slow_start(now, acked.bytes, flight_used, may_grow, rtt.smoothed());
            }
            Phase::CongestionAvoidance => {
                self.congestion_avoidance(acked.bytes, flight_used, may_grow);
            }
            // The hold keeps the minimum window; its ACKs only measure.
            Phase::SlowdownHold { .. } => {}
        }
    }

    fn on_loss(&mut self, now: Instant, lost: &Lost, rtt: &Rtt) {
        // RFC 6817, section 2.4.2 (on data loss): the window is halved
        //   # at most once per RTT
        // A packet sent before the last reduction was in flight when the
        // window was already cut for this congestion event.
        let before = Undo {
            window: self.window_bytes(),
            ssthresh: self.ssthresh,
            ended_slow_start: self.phase == Phase::SlowStart,
            next_slowdown: self.next_slowdown,
        };
        if !self.recovery.on_loss(now, lost, before) {
            return;
        }
        //   cwnd = min (cwnd, max (cwnd/2, MIN_CWND * MSS))
        let halved = self.window_bytes() / 2;
        self.set_window_bytes(halved);
        match self.phase {
            Phase::SlowStart => self.exit_slow_start(now, rtt.smoothed()),
            Phase::SlowdownHold { .. } => {
                // The window is already at the minimum; the loss lowers the
                // level the ramp after the hold returns to.
                self.ssthresh = (self.ssthresh / 2).max(self.min_window);
            }
            Phase::CongestionAvoidance => {}
        }
    }

    /// Undoes the last halving once every loss of its congestion event
    /// proved spurious (see the `recovery` module): the window returns to
    /// at least what it was (during a slowdown's hold, only the level the
    /// ramp after it returns to). A slow start the loss ended goes on, as if
    /// the loss had never been declared: ended early by a reordered packet,
    /// it would leave the window to grow one packet per round trip from
    /// wherever the reordering caught it.
    fn on_spurious_loss(&mut self, _now: Instant, declared_lost_at: Instant) {
        let Some(before) = self.recovery.on_spurious_loss(declared_lost_at) else {
            return;
        };
        if !self.in_slowdown() {
            let window = self.window_bytes().max(before.window);
            self.set_window_bytes(window);
        }
        self.ssthresh = self.ssthresh.max(before.ssthresh);
        if before.ended_slow_start && self.phase == Phase::CongestionAvoidance {
            self.phase = Phase::SlowStart;
            self.next_slowdown = before.next_slowdown;
        }
    }

    fn on_persistent_congestion(&mut self, _now: Instant) {
        // RFC 6817, section 2.4.2:
        //   if no ACKs are received within a CTO:
        //       # extreme congestion, or significant RTT change.
        //       # set cwnd to 1MSS and backoff the congestion timer.
        //       cwnd = 1 * MSS
        // RFC 9002's persistent congestion is that event, established by the
        // tracker. Tern keeps MIN_CWND instead of 1 MSS (section 2.5: "a
        // MIN_CWND of 2 allows FILTER() to use more than a single
        // instantaneous delay estimate") and slow-starts back to the window
        // the loss left (already halved by on_loss); the caller's probe
        // timer does the back-off.
        self.ssthresh = self.window_bytes().max(self.min_window);
        self.set_window_bytes(self.min_window);
        self.recovery.on_persistent_congestion();
        self.slowdown_started = None;
        self.phase = Phase::SlowStart;
    }

    fn window(&self) -> u64 {
        self.window_bytes()
    }

    fn pacing_rate(&self, rtt: &Rtt) -> u64 {
        let gain = if self.phase == Phase::SlowStart {
            SLOW_START_PACING_GAIN_PERMILLE
        } else {
            PACING_GAIN_PERMILLE
        };
        pacing_rate(self.window_bytes(), rtt.smoothed(), gain)
    }

    fn in_slow_start(&self) -> bool {
        self.phase == Phase::SlowStart
    }

    fn invariants(&self) -> Result<(), InvariantViolation> {
        let window = self.window_bytes();
        if window < self.min_window {
            return Err(InvariantViolation("LEDBAT window below the minimum"));
        }
        if window > self.max_window || self.max_window > MAX_WINDOW_LIMIT {
            return Err(InvariantViolation("LEDBAT window above the maximum"));
        }
        if self.ssthresh < self.min_window {
            return Err(InvariantViolation(
                "LEDBAT slow start threshold below the minimum",
            ));
        }
        if matches!(self.phase, Phase::SlowdownHold { .. }) && window != self.min_window {
            return Err(InvariantViolation(
                "LEDBAT slowdown holds more than the minimum window",
            ));
        }
        if self.slowdown_started.is_some() && self.phase == Phase::CongestionAvoidance {
            return Err(InvariantViolation(
                "LEDBAT slowdown still open in congestion avoidance",
            ));
        }
        if self.next_slowdown.is_some() && !self.periodic_slowdowns {
            return Err(InvariantViolation(
                "LEDBAT slowdown scheduled while disabled",
            ));
        }
        self.current.invariants()?;
        self.base.invariants()?;
        self.recovery.invariants()
    }
}

#[cfg(test)]
mod tests;
