//! CUBIC (RFC 9438), with HyStart++ (RFC 9406) for slow start: Tern's
//! foreground controller.
//!
//! [`Ledbat`](crate::Ledbat) yields to every other flow on the path, which
//! is right for background replication and wrong for a user waiting on a
//! file. CUBIC is the loss-based controller of the Linux, Windows and Apple
//! TCP stacks: beside their flows it takes its share, no less.
//!
//! # Window growth
//!
//! After a congestion event the window follows a cubic function of the time
//! `t` since congestion avoidance began, `W_cubic(t) = C × (t − K)³ + W_max`:
//! concave while it climbs back to `W_max`, the window at the last
//! congestion event, with a plateau there, and convex beyond it as it probes
//! for more. Each ACK moves the window towards `W_cubic(t + RTT)`, clamped
//! between the window and 1.5 times it. Where Reno would grow faster (short
//! round trips, small windows), the window follows Reno's estimate `W_est`
//! instead (the Reno-friendly region). A loss multiplies the window by
//! `beta` (0.7); with fast convergence, a flow whose saturation point fell
//! sets its plateau lower still, to make room for a newcomer.
//!
//! Slow start is HyStart++ (see the `hystart` module): it leaves for
//! Conservative Slow Start when the round trip rises, and for congestion
//! avoidance a few rounds later, usually before any loss. HyStart++ runs
//! only during the initial slow start, as RFC 9406 §4.3 asks; a slow start
//! after persistent congestion is RFC 5681's, up to the threshold.
//!
//! # Units and arithmetic
//!
//! RFC 9438 counts windows in segments; Tern counts bytes, so `C` applies as
//! `C × max_datagram_size` bytes per s³. The window and `W_est` are integers
//! in 1/65 536 byte, so that increases of a fraction of a byte per ACK, on
//! large windows, are not lost; only `K` and `W_cubic(t)` are `f64`, and a
//! cubic value becomes bytes only through the clamp between the window and
//! 1.5 times it (a value that is not finite counts as the window).
//!
//! # What Tern chose where the RFC leaves room
//!
//! - **The reduction is computed from the window**, not from the flight
//!   size that RFC 9438 §4.6 names: a [`Lost`] report carries no flight
//!   size, and since an application-limited sender does not grow its window
//!   (RFC 9438 §5.8), the window does not run far ahead of what was used.
//!   RFC 9002 §7.3.2 does the same for Reno.
//! - **The congestion avoidance stage begins with the first ACK that may
//!   grow the window** after a reduction, that is when the recovery period
//!   is over: `t_epoch` is that ACK's time and `cwnd_epoch` the window then.
//! - **In the Reno-friendly region the window becomes `max(cwnd, W_est)`**:
//!   an ACK never shrinks it (the RFC's "cwnd SHOULD be set to W_est" would,
//!   when the window has run ahead of `W_cubic(t)` towards `W_cubic(t+RTT)`).
//! - **Application-limited time is taken out of `t`** by moving `t_epoch`
//!   forward by the time between ACKs that report the sender
//!   application-limited ([`Acked::app_limited`]).
//! - **Undo** restores the state before the reduction once every loss of the
//!   event proved spurious (the crate's `recovery` module decides when), as
//!   RFC 9438 §4.9.2 describes; the HyStart++ state is restored with it, so a
//!   spurious loss during the initial slow start does not end it.

mod config;
mod hystart;
#[cfg(test)]
mod tests;

pub use config::{CubicConfig, CubicConfigError};
pub use hystart::HyStartConfig;

use crate::pacer::{PACING_GAIN_PERMILLE, SLOW_START_PACING_GAIN_PERMILLE, pacing_rate};
use crate::recovery::Recovery;
use crate::time::add_saturating;
use crate::window::WindowBounds;
use crate::{Acked, Controller, InvariantViolation, Lost, Rtt};
use hystart::{HyStart, Step};
use quanta::Instant;
use std::time::Duration;

/// Fractional bits of the internal window, `W_est` and the factors.
const FRAC_BITS: u32 = 16;
/// 1.0 in that fixed point.
const ONE: u64 = 1 << FRAC_BITS;
/// Acknowledged bytes counted per call at most (a bound for the arithmetic;
/// far above any real window).
const MAX_ACKED: u64 = 1 << 40;

/// The current congestion avoidance stage.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Epoch {
    /// t_epoch: when the stage began, moved forward over the time the
    /// sender was application-limited.
    start: Instant,
    /// K: the time the cubic takes from `cwnd_epoch` to W_max, in seconds
    /// (negative if the stage began above W_max).
    k: f64,
    /// W_est: Reno's window over the stage, in 1/65 536 byte.
    w_est: u64,
}

/// What undoing a reduction restores (RFC 9438 §4.9.2's `prior_*`
/// variables, and the slow-start state).
#[derive(Debug, Clone, Copy)]
struct Undo {
    window: u64,
    ssthresh: u64,
    cwnd_prior: u64,
    w_max: Option<u64>,
    epoch: Option<Epoch>,
    hystart: Option<HyStart>,
}

/// The CUBIC congestion controller. The [module docs](crate::cubic) say
/// what it implements, and what it chose.
#[derive(Debug, Clone)]
pub struct Cubic {
    /// What the controller was made with, to start again on a new path.
    config: CubicConfig,
    mss: u64,
    min_window: u64,
    max_window: u64,
    /// C × MSS, in bytes per second³.
    c_bytes: f64,
    /// β_cubic, in 1/65 536.
    beta: u64,
    /// α_cubic, in 1/65 536.
    alpha: u64,
    fast_convergence: bool,

    /// cwnd, in 1/65 536 byte.
    window: u64,
    /// ssthresh, in bytes (`u64::MAX` until slow start first ends).
    ssthresh: u64,
    /// cwnd_prior: the window when ssthresh was last set, in bytes (0
    /// before then).
    cwnd_prior: u64,
    /// W_max, in bytes: the window at the last congestion event (less with
    /// fast convergence); `None` when undefined, before the first event and
    /// after persistent congestion, until congestion avoidance sets it.
    w_max: Option<u64>,
    /// The congestion avoidance stage, once its first ACK came.
    epoch: Option<Epoch>,
    /// HyStart++ during the initial slow start; `None` afterwards, or when
    /// not configured.
    hystart: Option<HyStart>,
    /// When the last ACK came.
    last_ack: Option<Instant>,
    /// The recovery period of the last loss, and what undoing it restores.
    recovery: Recovery<Undo>,
}

/// `value × factor / 65 536`, rounded to the nearest integer, saturating.
fn mul_fixed(value: u64, factor: u64) -> u64 {
    let product = (u128::from(value) * u128::from(factor) + u128::from(ONE / 2)) >> FRAC_BITS;
    u64::try_from(product).unwrap_or(u64::MAX)
}

impl Cubic {
    /// A controller in slow start with the initial window.
    pub fn new(config: CubicConfig) -> Result<Self, CubicConfigError> {
        type E = CubicConfigError;
        let bounds = WindowBounds::new(
            config.max_datagram_size,
            config.min_window_packets,
            config.initial_window_packets,
            config.max_window,
        )?;
        if !(config.c.is_finite() && config.c > 0.0 && config.c <= 100.0) {
            return Err(E::C);
        }
        if !(config.beta.is_finite() && config.beta > 0.0 && config.beta < 1.0) {
            return Err(E::Beta);
        }
        if config.hystart.is_some_and(|h| !h.is_valid()) {
            return Err(E::HyStart);
        }
        // RFC 9438, section 4.3: "α_cubic = 3 * (1 - β_cubic) / (1 +
        // β_cubic)", the additive increase that gives AIMD(α_cubic,
        // β_cubic) Reno's average window.
        let alpha = 3.0 * (1.0 - config.beta) / (1.0 + config.beta);
        // Both factors are finite, in (0, 3): the conversions are exact
        // enough and cannot saturate.
        let to_fixed = |value: f64| (value * ONE as f64).round() as u64;
        Ok(Self {
            config,
            mss: bounds.mss,
            min_window: bounds.min,
            max_window: bounds.max,
            c_bytes: config.c * bounds.mss as f64,
            beta: to_fixed(config.beta).clamp(1, ONE - 1),
            alpha: to_fixed(alpha).max(1),
            fast_convergence: config.fast_convergence,
            window: bounds.initial << FRAC_BITS,
            ssthresh: u64::MAX,
            cwnd_prior: 0,
            w_max: None,
            epoch: None,
            hystart: config.hystart.map(HyStart::new),
            last_ack: None,
            recovery: Recovery::new(),
        })
    }

    /// Congestion events every loss of which proved spurious: their
    /// reduction was undone, unless the window had already grown back past
    /// its value before it (RFC 9438 §4.9.2 then keeps the current state).
    pub fn undone_reductions(&self) -> u64 {
        self.recovery.undone()
    }

    /// Whether HyStart++'s Conservative Slow Start is under way: the round
    /// trip rose, and the window grows a quarter as fast as in slow start.
    pub fn in_conservative_slow_start(&self) -> bool {
        self.hystart.as_ref().is_some_and(HyStart::in_css)
    }

    fn window_bytes(&self) -> u64 {
        self.window >> FRAC_BITS
    }

    fn set_window_bytes(&mut self, bytes: u64) {
        self.window = bytes.clamp(self.min_window, self.max_window) << FRAC_BITS;
    }

    fn undo_state(&self) -> Undo {
        Undo {
            window: self.window,
            ssthresh: self.ssthresh,
            cwnd_prior: self.cwnd_prior,
            w_max: self.w_max,
            epoch: self.epoch,
            hystart: self.hystart,
        }
    }

    /// RFC 9438, section 4.2, Figure 1: "W_cubic(t) = C * (t - K)^3 +
    /// W_max", in bytes, for `t` since the stage began.
    fn w_cubic(&self, t: Duration, k: f64, w_max: u64) -> f64 {
        let d = t.as_secs_f64() - k;
        self.c_bytes * d * d * d + w_max as f64
    }

    /// Slow start for one ACK of `bytes` bytes. Returns `false` if
    /// HyStart++ ended slow start instead: the ACK then belongs to
    /// congestion avoidance.
    fn slow_start(
        &mut self,
        now: Instant,
        acked: &Acked,
        latest_rtt: Duration,
        bytes: u64,
    ) -> bool {
        let step = self
            .hystart
            .as_mut()
            .map(|hystart| hystart.on_ack(now, acked.largest_sent_at, latest_rtt));
        let divisor = match step {
            None => 1,
            Some(Step::Grow { divisor }) => divisor,
            Some(Step::Exit) => {
                // RFC 9438, section 4.10: "When CUBIC uses HyStart++
                // [RFC9406], it may exit the first slow start without
                // incurring any packet loss and thus W_max is undefined. In
                // this special case, CUBIC sets cwnd_prior = cwnd and
                // switches to congestion avoidance." RFC 9406 sets
                // "ssthresh to the current cwnd".
                let cwnd = self.window_bytes();
                self.ssthresh = cwnd;
                self.cwnd_prior = cwnd;
                self.w_max = None;
                self.hystart = None;
                return false;
            }
        };
        // RFC 5681's (and RFC 9406's) slow start: the window grows by the
        // bytes acknowledged (divided by CSS_GROWTH_DIVISOR in CSS), up to
        // the threshold.
        let grown = self.window.saturating_add((bytes << FRAC_BITS) / divisor);
        let ceiling = self.ssthresh.min(self.max_window) << FRAC_BITS;
        self.window = grown.min(ceiling);
        true
    }

    /// Opens the congestion avoidance stage at `now` with the window `cwnd`;
    /// returns it and its W_max.
    fn begin_epoch(&mut self, now: Instant, cwnd: u64) -> (Epoch, u64) {
        // RFC 9438, sections 4.8 and 4.10: without a congestion event behind
        // the stage (after HyStart++ or persistent congestion), "K is set to
        // 0, and W_max is set to the congestion window size at the beginning
        // of the current congestion avoidance stage".
        let w_max = self.w_max.unwrap_or(cwnd);
        self.w_max = Some(w_max);
        // RFC 9438, section 4.2, Figure 2: "K = cubic_root((W_max -
        // cwnd_epoch) / C)"
        let k = ((w_max as f64 - cwnd as f64) / self.c_bytes).cbrt();
        let epoch = Epoch {
            start: now,
            k: if k.is_finite() { k } else { 0.0 },
            // RFC 9438, section 4.3: "W_est is set equal to cwnd_epoch at
            // the start of the congestion avoidance stage."
            w_est: self.window,
        };
        self.epoch = Some(epoch);
        (epoch, w_max)
    }

    /// Congestion avoidance for one ACK of `bytes` bytes at `now`.
    fn congestion_avoidance(&mut self, now: Instant, bytes: u64, srtt: Duration) {
        let cwnd = self.window_bytes();
        let (mut epoch, w_max) = match (self.epoch, self.w_max) {
            (Some(epoch), Some(w_max)) => (epoch, w_max),
            _ => self.begin_epoch(now, cwnd),
        };
        let t = now.saturating_duration_since(epoch.start);

        // RFC 9438, section 4.2: "Upon receiving a new ACK during congestion
        // avoidance, CUBIC computes the target congestion window size after
        // the next RTT using Figure 1 as follows, where RTT is the smoothed
        // round-trip time. The lower and upper bounds below ensure that
        // CUBIC's congestion window increase rate is non-decreasing and is
        // less than the increase rate of slow start":
        //   target = cwnd              if W_cubic(t + RTT) < cwnd
        //            1.5 * cwnd        if W_cubic(t + RTT) > 1.5 * cwnd
        //            W_cubic(t + RTT)  otherwise
        let next = self.w_cubic(t.saturating_add(srtt), epoch.k, w_max);
        let upper = cwnd.saturating_add(cwnd / 2);
        let target = if next.is_nan() || next <= cwnd as f64 {
            cwnd
        } else if next >= upper as f64 {
            upper
        } else {
            next as u64
        };

        // RFC 9438, section 4.3: "W_est = W_est + α_cubic * segments_acked /
        // cwnd" (in bytes: α × acked × SMSS / cwnd), and "Once W_est has
        // grown to reach the cwnd at the time of most recently setting
        // ssthresh -- that is, W_est >= cwnd_prior -- the sender SHOULD set
        // α_cubic to 1".
        let alpha = if epoch.w_est >> FRAC_BITS >= self.cwnd_prior {
            ONE
        } else {
            self.alpha
        };
        let est_increase =
            u128::from(alpha) * u128::from(bytes) * u128::from(self.mss) / u128::from(cwnd.max(1));
        epoch.w_est = epoch
            .w_est
            .saturating_add(u64::try_from(est_increase).unwrap_or(u64::MAX))
            .min(self.max_window << FRAC_BITS);

        let now_cubic = self.w_cubic(t, epoch.k, w_max);
        let w_est = epoch.w_est as f64 / ONE as f64;
        if now_cubic < w_est {
            // RFC 9438, section 4.3: "If W_cubic(t) is less than W_est, then
            // the protocol is in the Reno-friendly region and cwnd SHOULD be
            // set to W_est at each reception of a new ACK." (Never lower.)
            self.window = self.window.max(epoch.w_est);
        } else {
            // RFC 9438, sections 4.4 and 4.5: in the concave and convex
            // regions alike, "cwnd MUST be incremented by (target - cwnd) /
            // cwnd for each received new ACK" (per SMSS acknowledged; in
            // bytes: (target − cwnd) × acked / cwnd).
            let increase = (u128::from(target - cwnd) << FRAC_BITS) * u128::from(bytes)
                / u128::from(cwnd.max(1));
            self.window = self
                .window
                .saturating_add(u64::try_from(increase).unwrap_or(u64::MAX));
        }
        self.window = self.window.min(self.max_window << FRAC_BITS);
        self.epoch = Some(epoch);
    }
}

impl Controller for Cubic {
    fn on_sent(&mut self, _now: Instant, _bytes_in_flight: u64) {}

    /// Slow start (HyStart++ in the initial one) or RFC 9438's congestion
    /// avoidance. Growth needs the largest acknowledged packet to have been
    /// sent after the current recovery period began (RFC 9002 §7.3.2) and
    /// the sender not to be application-limited (RFC 9438 §5.8).
    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &Rtt) {
        if self.recovery.sent_on_old_path(acked.largest_sent_at) {
            return;
        }
        let since_last_ack = self
            .last_ack
            .replace(now)
            .map(|last| now.saturating_duration_since(last));
        if acked.app_limited {
            // RFC 9438, section 5.8: "CUBIC does not increase its congestion
            // window if a flow is application limited." Section 4.2: "The
            // elapsed time t in Figure 1 MUST NOT include periods during
            // which cwnd has not been updated due to application-limited
            // behavior".
            if let (Some(epoch), Some(gap)) = (self.epoch.as_mut(), since_last_ack) {
                epoch.start = add_saturating(epoch.start, gap).min(now);
            }
            return;
        }
        // RFC 9002, Appendix B.5: "Do not increase congestion window in
        // recovery period."
        if self.recovery.covers(acked.largest_sent_at) {
            return;
        }
        let bytes = acked.bytes.min(MAX_ACKED);
        if self.in_slow_start() && self.slow_start(now, acked, rtt.latest(), bytes) {
            return;
        }
        self.congestion_avoidance(now, bytes, rtt.smoothed());
    }

    fn on_loss(&mut self, now: Instant, lost: &Lost, _rtt: &Rtt) {
        // RFC 9002, section 7.3.2: "The recovery period aims to limit
        // congestion window reduction to once per round trip."
        if self.recovery.sent_on_old_path(lost.largest_sent_at)
            || !self.recovery.on_loss(now, lost, self.undo_state())
        {
            return;
        }
        let cwnd = self.window_bytes();
        // RFC 9438, section 4.7: "With fast convergence, when a congestion
        // event occurs, W_max is updated as follows, before the window
        // reduction described in Section 4.6."
        //   if cwnd < W_max and fast convergence enabled, further reduce
        //   W_max: W_max = cwnd * (1 + β_cubic) / 2
        //   otherwise, remember cwnd before reduction: W_max = cwnd
        let w_max = match self.w_max {
            Some(w_max) if self.fast_convergence && cwnd < w_max => {
                mul_fixed(cwnd, ONE + self.beta) / 2
            }
            _ => cwnd,
        };
        self.w_max = Some(w_max);
        // RFC 9438, section 4.6: "In case of packet loss, the sender MUST
        // reduce cwnd and ssthresh immediately upon entering loss recovery"
        //   ssthresh = flight_size * β_cubic
        //   cwnd_prior = cwnd
        //   cwnd = max(ssthresh, 2)
        // (from the window, not the flight size: see the module docs; the
        // floor is the minimum window.)
        self.ssthresh = mul_fixed(cwnd, self.beta).max(self.min_window);
        self.cwnd_prior = cwnd;
        self.set_window_bytes(self.ssthresh);
        // A new congestion avoidance stage begins when recovery ends; a
        // loss ends HyStart++ for good.
        self.epoch = None;
        self.hystart = None;
    }

    /// Once every loss of the last congestion event proved spurious, the
    /// state before it returns if the window is still below what it was.
    fn on_spurious_loss(&mut self, _now: Instant, declared_lost_at: Instant) {
        let Some(prior) = self.recovery.on_spurious_loss(declared_lost_at) else {
            return;
        };
        // RFC 9438, section 4.9.2: "Once the previously declared packet loss
        // is confirmed to be spurious, CUBIC MAY restore the original values
        // of the above-mentioned variables as follows if the current cwnd is
        // lower than prior_cwnd."
        //   if cwnd < prior_cwnd {
        //     cwnd = prior_cwnd; ssthresh = prior_ssthresh;
        //     W_max = prior_W_max; K = prior_K;
        //     epoch_start = prior_epoch_start; W_est = prior_W_est }
        // (K, epoch_start and W_est are the epoch's.)
        if self.window < prior.window {
            self.window = prior.window;
            self.ssthresh = prior.ssthresh;
            self.cwnd_prior = prior.cwnd_prior;
            self.w_max = prior.w_max;
            self.epoch = prior.epoch;
            self.hystart = prior.hystart;
        }
    }

    fn on_persistent_congestion(&mut self, _now: Instant) {
        // RFC 9002, section 7.6.2: "When persistent congestion is declared,
        // the sender's congestion window MUST be reduced to the minimum
        // congestion window (kMinimumWindow)". RFC 9438, section 4.8: "In
        // the case of a timeout, CUBIC follows Reno to reduce cwnd [RFC5681]
        // but sets ssthresh using β_cubic (same as in Section 4.6)" (on_loss
        // did), and in the next congestion avoidance stage "K is set to 0,
        // and W_max is set to the congestion window size at the beginning of
        // the current congestion avoidance stage".
        self.set_window_bytes(self.min_window);
        self.w_max = None;
        self.epoch = None;
        self.hystart = None;
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
        self.window_bytes()
    }

    fn pacing_rate(&self, rtt: &Rtt) -> u64 {
        let gain = if self.in_slow_start() {
            SLOW_START_PACING_GAIN_PERMILLE
        } else {
            PACING_GAIN_PERMILLE
        };
        pacing_rate(self.window_bytes(), rtt.smoothed(), gain)
    }

    /// In slow start or HyStart++'s Conservative Slow Start.
    fn in_slow_start(&self) -> bool {
        self.window_bytes() < self.ssthresh
    }

    fn invariants(&self) -> Result<(), InvariantViolation> {
        let window = self.window_bytes();
        if window < self.min_window || window > self.max_window {
            return Err(InvariantViolation("CUBIC window outside [min, max]"));
        }
        if self.ssthresh < self.min_window {
            return Err(InvariantViolation(
                "CUBIC slow start threshold below the minimum",
            ));
        }
        if self.w_max.is_some_and(|w_max| w_max > self.max_window) {
            return Err(InvariantViolation("CUBIC W_max above the maximum window"));
        }
        if let Some(hystart) = &self.hystart {
            if self.ssthresh != u64::MAX {
                return Err(InvariantViolation(
                    "HyStart++ outside the initial slow start",
                ));
            }
            if !hystart.is_consistent() {
                return Err(InvariantViolation("HyStart++ past its CSS rounds"));
            }
        }
        if let Some(epoch) = &self.epoch {
            if self.w_max.is_none() {
                return Err(InvariantViolation("CUBIC stage without W_max"));
            }
            if window < self.ssthresh {
                return Err(InvariantViolation("CUBIC stage open in slow start"));
            }
            if !epoch.k.is_finite() {
                return Err(InvariantViolation("CUBIC K not finite"));
            }
            if epoch.w_est > self.max_window << FRAC_BITS {
                return Err(InvariantViolation("CUBIC W_est above the maximum"));
            }
        }
        self.recovery.invariants()
    }
}
