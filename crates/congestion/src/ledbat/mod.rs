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
//! A stale base is handled five ways:
//! - a shorter path (or a receiver clock that runs slow) lowers the base at
//!   once, because the newest bucket takes every smaller sample;
//! - a connection that moves to a new path (its peer's address changed)
//!   says so ([`Controller::on_path_change`]), and the controller starts
//!   again from nothing, as RFC 9000 §9.4 asks of every controller: the
//!   first samples on the new path are its base;
//! - after a quiet period, no sample for longer than [`QUIET_PERIOD`] (one
//!   bucket of the history), the history restarts from the next sample: a
//!   route may have changed while nothing measured it, and RFC 6817's rule
//!   below would take `base_history` minutes to notice. The price is a
//!   latecomer's: a queue that another flow keeps standing when the flow
//!   resumes is counted as path, until a slowdown (theirs or ours) drains
//!   it and the next bucket takes the true minimum;
//! - a longer path that nothing announced is adopted when the old minima
//!   leave the history, after `base_history` minutes, as the RFC specifies;
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

mod config;
mod delay;
mod slow_start;
mod slowdown;
mod window;

pub use config::{LedbatConfig, LedbatConfigError};

use crate::pacer::{PACING_GAIN_PERMILLE, SLOW_START_PACING_GAIN_PERMILLE, pacing_rate};
use crate::recovery::Recovery;
use crate::window::WindowBounds;
use crate::{
    Acked, BaseDelayHistory, Controller, CurrentDelayFilter, InvariantViolation, Lost,
    MAX_BASE_HISTORY, MAX_CURRENT_FILTER, Rtt,
};
use quanta::Instant;
use std::time::Duration;

/// Fractional bits of the internal window.
const FRAC_BITS: u32 = 16;
/// 1.0 in the 16.16 fixed point used for gains.
const ONE: u64 = 1 << FRAC_BITS;
/// The largest window the fixed point can hold with room to spare, in bytes.
pub const MAX_WINDOW_LIMIT: u64 = 1 << 46;
/// How long the flow may go without a one-way-delay sample before its
/// base-delay history is forgotten: one bucket of the history. Longer, and
/// the path may have changed with nothing to show it.
pub const QUIET_PERIOD: Duration = crate::BUCKET;
/// Acknowledged bytes counted per call at most (a bound for the arithmetic;
/// far above any real window).
const MAX_ACKED: u64 = 1 << 40;

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
    /// What the controller was made with, to start again on a new path.
    config: LedbatConfig,
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
    /// When the last one-way-delay sample came.
    last_sample: Option<Instant>,
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
            config,
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
            last_sample: None,
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
        if self.recovery.sent_on_old_path(acked.largest_sent_at) {
            return;
        }
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
        if self.recovery.sent_on_old_path(lost.largest_sent_at)
            || !self.recovery.on_loss(now, lost, before)
        {
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

    /// RFC 9000 §9.4: on a new path the controller starts again from its
    /// initial values, in slow start. For LEDBAT this matters beyond the
    /// window: the base delay of a shorter old path would read the longer
    /// new one as a standing queue, and hold the window at the minimum for
    /// `base_history` minutes; the fresh history measures the new path with
    /// its first samples. Reports about packets sent on the old path are
    /// ignored from now on (their one-way delays are the old path's).
    fn on_path_change(&mut self, now: Instant) {
        // `config` was accepted by `new` once, so it is again.
        if let Ok(fresh) = Self::new(self.config) {
            let mut recovery = self.recovery;
            recovery.on_path_change(now);
            *self = Self { recovery, ..fresh };
        }
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
