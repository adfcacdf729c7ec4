//! The interface every congestion controller offers to a connection.
//!
//! A connection reports what happened — a packet left, an ACK frame
//! acknowledged packets, loss detection declared packets lost, a loss turned
//! out to be spurious, persistent congestion — and asks two questions: how
//! many bytes may be in flight ([`Controller::window`]) and how fast they may
//! leave ([`Controller::pacing_rate`]). Time is always an argument; nothing
//! here reads a clock.
//!
//! # One source of truth
//!
//! A controller keeps no round-trip estimate and no count of bytes in flight
//! of its own. The connection has exactly one RTT estimator (tern-reliability's
//! `RttEstimator`, ACK delay subtracted as RFC 9002 §5 asks) and one sent-packet
//! tracker that counts bytes in flight; it copies their figures into the
//! arguments of each call ([`Rtt`], [`Acked::bytes_in_flight`],
//! [`Controller::on_sent`]'s `bytes_in_flight`). Loss detection, pacing and
//! LEDBAT therefore see the same smoothed RTT, and the window is compared with
//! the same byte count the tracker keeps. tern-congestion cannot depend on
//! tern-reliability (they are siblings), hence the copy:
//!
//! ```text
//! let rtt = Rtt::new(est.smoothed(), est.min().unwrap_or(est.smoothed()), est.latest());
//! ```
//!
//! [`AnyController`] is an enum over the controllers this crate ships, so the
//! per-packet calls of a connection are direct calls a compiler can inline,
//! not virtual ones.

use crate::{Cubic, InvariantViolation, Ledbat, Reno};
use quanta::Instant;
use std::time::Duration;

/// A one-way-delay sample as carried in an ACK frame: the receiver's clock
/// when the packet arrived minus the sender's timestamp in the packet, in
/// nanoseconds.
///
/// The two clocks are not synchronised, so the value has an arbitrary,
/// possibly negative, offset and may drift. It is only ever compared with
/// other samples of the same connection: a delay-based controller looks at
/// differences to the smallest sample seen, never at the value itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OneWayDelay(i64);

impl OneWayDelay {
    /// A sample of `nanos` nanoseconds (any sign: the clocks have an offset).
    pub const fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// A sample of `micros` microseconds, saturating beyond ±292 years.
    pub const fn from_micros(micros: i64) -> Self {
        Self(micros.saturating_mul(1_000))
    }

    /// The sample in nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
}

/// The connection's round-trip figures at the moment of a call, copied from
/// its one RTT estimator. tern-congestion cannot depend on tern-reliability
/// (they are siblings), so the connection copies the figures over:
///
/// ```text
/// let rtt = Rtt::new(est.smoothed(), est.min().unwrap_or(est.smoothed()), est.latest());
/// ```
///
/// The constructor keeps the snapshot consistent whatever it is given (a zero
/// becomes 1 ns so rates stay finite; the minimum is never above the smoothed
/// or the latest value), so a controller may rely on `min <= smoothed` and
/// `min <= latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    smoothed: Duration,
    min: Duration,
    latest: Duration,
}

impl Rtt {
    /// A snapshot of the smoothed RTT (ACK delay subtracted), the minimum RTT
    /// over the connection and the latest raw sample.
    pub fn new(smoothed: Duration, min: Duration, latest: Duration) -> Self {
        let floor = Duration::from_nanos(1);
        let smoothed = smoothed.max(floor);
        let latest = latest.max(floor);
        Self {
            smoothed,
            min: min.max(floor).min(smoothed).min(latest),
            latest,
        }
    }

    /// The snapshot before any sample: all three figures are the initial RTT
    /// (RFC 9002 §6.2.2's 333 ms, or a remembered value).
    pub fn initial(rtt: Duration) -> Self {
        Self::new(rtt, rtt, rtt)
    }

    /// The smoothed RTT: what pacing spreads a window over and what LEDBAT
    /// times its round trips with.
    pub const fn smoothed(&self) -> Duration {
        self.smoothed
    }

    /// The smallest RTT seen on the path: its unloaded round trip.
    pub const fn min(&self) -> Duration {
        self.min
    }

    /// The most recent raw sample (not adjusted for ACK delay).
    pub const fn latest(&self) -> Duration {
        self.latest
    }
}

/// What one ACK frame acknowledged, as the connection's loss detection
/// summarised it (tern-reliability's `AckSummary`), plus the frame's
/// one-way-delay sample and the sender's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// Newly acknowledged bytes that had counted toward bytes in flight
    /// (`AckSummary::acked_bytes`).
    pub bytes: u64,
    /// When the largest newly acknowledged packet was sent
    /// (`AckSummary::largest_acked_sent_at`). RFC 9002 §7.3.2: the window
    /// does not grow for packets sent before the current recovery period
    /// began; this send time tells.
    pub largest_sent_at: Instant,
    /// Bytes in flight after this ACK, from the sent-packet tracker
    /// (`LossDetector::bytes_in_flight`).
    pub bytes_in_flight: u64,
    /// The one-way-delay sample the ACK frame carried, if any: the delay of
    /// the largest newly acknowledged packet.
    pub one_way_delay: Option<OneWayDelay>,
    /// Whether the sender is application- or flow-control-limited: the last
    /// time it stopped sending, it stopped with room left in the window
    /// (nothing more to send, or the peer's flow-control limit), not because
    /// the window was full or the pacer made it wait. RFC 9002 §7.8: then
    /// "the congestion window SHOULD NOT be increased in either slow start or
    /// congestion avoidance". The connection sets it when `poll_transmit`
    /// runs out of data with `bytes_in_flight < window`, and clears it when
    /// sending stops at the window.
    pub app_limited: bool,
}

/// What one round of loss detection declared lost: everything one ACK frame
/// (or one expiry of the loss timer) found, as one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// Packets declared lost that had counted toward bytes in flight.
    pub packets: u64,
    /// Their bytes (`AckSummary::lost_bytes`).
    pub bytes: u64,
    /// When the newest of them was sent (`AckSummary::largest_lost_sent_at`):
    /// losses of packets sent before the last window reduction belong to the
    /// congestion event that caused it (RFC 9002 §7.3.2).
    pub largest_sent_at: Instant,
}

/// What a connection tells its congestion controller, and what it asks.
///
/// Per ACK frame: [`on_ack`](Self::on_ack) if it newly acknowledged in-flight
/// bytes, [`on_loss`](Self::on_loss) if loss detection declared in-flight
/// packets lost (also when the loss timer does), [`on_spurious_loss`](Self::on_spurious_loss)
/// for each in-flight loss it proved spurious, and [`on_persistent_congestion`](Self::on_persistent_congestion)
/// if the tracker reported persistent congestion (after `on_loss`). Per
/// packet sent: [`on_sent`](Self::on_sent). Before sending, check
/// `bytes_in_flight + size <= window()` with the tracker's count, and ask a
/// [`Pacer`](crate::Pacer) with [`pacing_rate`](Self::pacing_rate) when the
/// packet may leave. Every argument may come from a hostile peer (through
/// ACK frames): any value, however absurd, is accepted without panicking and
/// leaves the window within its bounds.
pub trait Controller {
    /// A packet left at `now`; `bytes_in_flight` is the tracker's count
    /// including it (only packets that count toward bytes in flight need be
    /// reported).
    fn on_sent(&mut self, now: Instant, bytes_in_flight: u64);

    /// An ACK frame newly acknowledged in-flight bytes at `now`. `rtt` is the
    /// connection's estimate after the frame's sample was taken.
    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &Rtt);

    /// Loss detection declared in-flight packets lost at `now`. The window
    /// shrinks at most once per congestion event: losses of packets sent
    /// before the last reduction are part of the same event.
    fn on_loss(&mut self, now: Instant, lost: &Lost, rtt: &Rtt);

    /// A packet declared lost at `declared_lost_at` was acknowledged after
    /// all (tern-reliability's `SpuriousLoss`; report only those whose
    /// `in_flight` is set, as [`Lost::packets`] counts only those). Each
    /// controller documents what it does: all of this crate's undo a window
    /// reduction once every loss of its congestion event has proved spurious.
    fn on_spurious_loss(&mut self, now: Instant, declared_lost_at: Instant);

    /// The tracker established persistent congestion (RFC 9002 §7.6): every
    /// packet sent over more than three probe timeouts was lost. RFC 9002
    /// §7.6.2: "the sender's congestion window MUST be reduced to the minimum
    /// congestion window". Call it after [`on_loss`](Self::on_loss) for the
    /// same ACK.
    fn on_persistent_congestion(&mut self, now: Instant);

    /// The connection moved to a new path at `now` (its peer proved it
    /// receives at a new address). RFC 9000 §9.4: the congestion controller
    /// starts again from its initial values, and "packets sent on the old
    /// path MUST NOT contribute to congestion control ... for the new
    /// path": from now on, every report about a packet sent before `now` is
    /// ignored. The round trip is the connection's to reset (its one RTT
    /// estimator), as the same section asks.
    fn on_path_change(&mut self, now: Instant);

    /// The congestion window: bytes that may be in flight, in bytes.
    fn window(&self) -> u64;

    /// The rate at which packets should leave, in bytes per second: the
    /// window spread over `rtt`'s smoothed round trip, times a small gain.
    fn pacing_rate(&self, rtt: &Rtt) -> u64;

    /// Whether the window is still growing exponentially (it doubles per
    /// round trip).
    fn in_slow_start(&self) -> bool;

    /// Checks the controller's internal consistency (used by the tests).
    fn invariants(&self) -> Result<(), InvariantViolation>;
}

/// Every controller of this crate, for static dispatch on the hot path.
///
/// The LEDBAT variant is large (its delay histories are inline arrays, about
/// 1 KB); it is not boxed because a connection holds exactly one controller
/// for its lifetime, and a box would add an indirection to every packet.
#[derive(Debug, Clone)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)]
pub enum AnyController {
    /// Delay-based, less-than-best-effort: the default for Tern.
    Ledbat(Ledbat),
    /// Loss-based AIMD, for paths where one-way delay cannot be measured.
    Reno(Reno),
    /// Loss-based, for foreground transfers that should take their fair
    /// share beside TCP.
    Cubic(Cubic),
}

impl From<Ledbat> for AnyController {
    fn from(controller: Ledbat) -> Self {
        Self::Ledbat(controller)
    }
}

impl From<Reno> for AnyController {
    fn from(controller: Reno) -> Self {
        Self::Reno(controller)
    }
}

impl From<Cubic> for AnyController {
    fn from(controller: Cubic) -> Self {
        Self::Cubic(controller)
    }
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $body:expr) => {
        match $self {
            AnyController::Ledbat($c) => $body,
            AnyController::Reno($c) => $body,
            AnyController::Cubic($c) => $body,
        }
    };
}

impl AnyController {
    /// Window reductions undone because every loss that caused them proved
    /// spurious (each controller's `undone_reductions`).
    #[must_use]
    pub fn undone_reductions(&self) -> u64 {
        dispatch!(self, c => c.undone_reductions())
    }
}

impl Controller for AnyController {
    #[inline]
    fn on_sent(&mut self, now: Instant, bytes_in_flight: u64) {
        dispatch!(self, c => c.on_sent(now, bytes_in_flight))
    }

    #[inline]
    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &Rtt) {
        dispatch!(self, c => c.on_ack(now, acked, rtt))
    }

    #[inline]
    fn on_loss(&mut self, now: Instant, lost: &Lost, rtt: &Rtt) {
        dispatch!(self, c => c.on_loss(now, lost, rtt))
    }

    #[inline]
    fn on_spurious_loss(&mut self, now: Instant, declared_lost_at: Instant) {
        dispatch!(self, c => c.on_spurious_loss(now, declared_lost_at))
    }

    #[inline]
    fn on_persistent_congestion(&mut self, now: Instant) {
        dispatch!(self, c => c.on_persistent_congestion(now))
    }

    fn on_path_change(&mut self, now: Instant) {
        dispatch!(self, c => c.on_path_change(now))
    }

    #[inline]
    fn window(&self) -> u64 {
        dispatch!(self, c => c.window())
    }

    #[inline]
    fn pacing_rate(&self, rtt: &Rtt) -> u64 {
        dispatch!(self, c => c.pacing_rate(rtt))
    }

    #[inline]
    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }

    fn invariants(&self) -> Result<(), InvariantViolation> {
        dispatch!(self, c => c.invariants())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CubicConfig, LedbatConfig, RenoConfig};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn microsecond_samples_convert_to_nanoseconds_and_saturate() {
        assert_eq!(OneWayDelay::from_micros(-3).as_nanos(), -3_000);
        assert_eq!(OneWayDelay::from_micros(i64::MAX).as_nanos(), i64::MAX);
        assert_eq!(OneWayDelay::from_micros(i64::MIN).as_nanos(), i64::MIN);
    }

    #[test]
    fn an_rtt_snapshot_is_always_consistent() {
        let rtt = Rtt::new(40 * MS, 30 * MS, 50 * MS);
        assert_eq!(
            (rtt.smoothed(), rtt.min(), rtt.latest()),
            (40 * MS, 30 * MS, 50 * MS)
        );
        let odd = Rtt::new(10 * MS, 90 * MS, Duration::ZERO);
        assert_eq!(odd.latest(), Duration::from_nanos(1));
        assert_eq!(odd.min(), Duration::from_nanos(1));
        assert_eq!(Rtt::initial(333 * MS).min(), 333 * MS);
    }

    #[test]
    fn the_enum_forwards_every_call_to_the_controller_inside() {
        let (clock, mock) = quanta::Clock::mock();
        let mut direct = Ledbat::new(LedbatConfig::default()).unwrap();
        let mut any = AnyController::from(direct.clone());
        let sent = clock.now();
        for controller in [&mut direct as &mut dyn Controller, &mut any] {
            controller.on_sent(sent, 1_452);
            controller.on_sent(sent, 2 * 1_452);
        }
        mock.increment(40 * MS);
        let rtt = Rtt::new(40 * MS, 40 * MS, 40 * MS);
        for controller in [&mut direct as &mut dyn Controller, &mut any] {
            let acked = Acked {
                bytes: 1_452,
                largest_sent_at: sent,
                bytes_in_flight: 1_452,
                one_way_delay: Some(OneWayDelay::from_micros(20_000)),
                app_limited: false,
            };
            controller.on_ack(clock.now(), &acked, &rtt);
            let lost = Lost {
                packets: 1,
                bytes: 1_452,
                largest_sent_at: sent,
            };
            controller.on_loss(clock.now(), &lost, &rtt);
            controller.on_spurious_loss(clock.now(), clock.now());
        }
        assert_eq!(any.window(), direct.window());
        assert_eq!(any.pacing_rate(&rtt), direct.pacing_rate(&rtt));
        assert_eq!(any.in_slow_start(), direct.in_slow_start());
        any.invariants().unwrap();
        any.on_persistent_congestion(clock.now());
        assert_eq!(any.window(), 2 * 1_452);

        let reno = AnyController::from(Reno::new(RenoConfig::default()).unwrap());
        assert!(reno.in_slow_start());
        reno.invariants().unwrap();
        let cubic = AnyController::from(Cubic::new(CubicConfig::default()).unwrap());
        assert!(cubic.in_slow_start());
        assert_eq!(cubic.window(), 10 * 1_452);
        cubic.invariants().unwrap();
    }

    #[test]
    fn every_controller_starts_afresh_on_a_new_path_and_ignores_the_old_one() {
        let (clock, mock) = quanta::Clock::mock();
        let controllers = [
            AnyController::from(Ledbat::new(LedbatConfig::default()).unwrap()),
            AnyController::from(Reno::new(RenoConfig::default()).unwrap()),
            AnyController::from(Cubic::new(CubicConfig::default()).unwrap()),
        ];
        let rtt = Rtt::new(40 * MS, 40 * MS, 40 * MS);
        for mut cc in controllers {
            let initial = cc.window();
            let sent = clock.now();
            cc.on_sent(sent, initial);
            mock.increment(40 * MS);
            let acked = Acked {
                bytes: initial,
                largest_sent_at: sent,
                bytes_in_flight: 0,
                one_way_delay: Some(OneWayDelay::from_micros(20_000)),
                app_limited: false,
            };
            cc.on_ack(clock.now(), &acked, &rtt);
            assert!(cc.window() > initial);
            let lost = Lost {
                packets: 1,
                bytes: 1_452,
                largest_sent_at: sent,
            };
            cc.on_loss(clock.now(), &lost, &rtt);
            mock.increment(MS);
            cc.on_path_change(clock.now());
            assert_eq!(cc.window(), initial, "{cc:?}");
            assert!(cc.in_slow_start());
            // Reports about packets sent before the move change nothing.
            cc.on_loss(clock.now(), &lost, &rtt);
            cc.on_ack(clock.now(), &acked, &rtt);
            assert_eq!(cc.window(), initial, "{cc:?}");
            assert_eq!(cc.undone_reductions(), 0);
            cc.invariants().unwrap();
        }
    }
}
