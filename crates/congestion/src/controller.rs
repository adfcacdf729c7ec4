//! The interface every congestion controller offers to a connection.
//!
//! A connection reports three events — a packet left, packets were
//! acknowledged, a packet was declared lost — and asks two questions: how many
//! bytes may be in flight ([`Controller::window`]) and how fast they may leave
//! ([`Controller::pacing_rate`]). Time is always an argument; nothing here
//! reads a clock.
//!
//! [`AnyController`] is an enum over the controllers this crate ships, so the
//! per-packet calls of a connection are direct calls a compiler can inline,
//! not virtual ones.

use crate::{InvariantViolation, Ledbat, Reno};
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

/// What a connection tells its congestion controller, and what it asks.
///
/// Call order per packet: [`on_sent`](Self::on_sent) when it leaves, then
/// exactly one of [`on_ack`](Self::on_ack) or [`on_loss`](Self::on_loss) for
/// its bytes. Before sending, check `bytes_in_flight() + size <= window()` and
/// ask a [`Pacer`](crate::Pacer) with [`pacing_rate`](Self::pacing_rate) when
/// it may leave. Calls with inconsistent byte counts (acknowledging more than
/// is in flight) saturate; they never panic.
pub trait Controller {
    /// A packet of `bytes` bytes (the whole UDP payload) was sent at `now`.
    fn on_sent(&mut self, now: Instant, bytes: u64);

    /// `acked_bytes` bytes were newly acknowledged at `now`.
    ///
    /// `acked_bytes` counts, in bytes, only packets that counted toward bytes
    /// in flight (tern-reliability's `AckSummary::acked_bytes`). `rtt` is the
    /// raw round-trip sample of the largest newly acknowledged packet, not
    /// adjusted for ACK delay, if the ACK yields one (`AckSummary::rtt_sample`);
    /// `one_way_delay` the one-way-delay sample the peer put in the ACK frame,
    /// if any. Both come from the network or a peer that may be hostile: any
    /// value, however absurd, is accepted without panicking and leaves the
    /// window within its bounds.
    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: u64,
        rtt: Option<Duration>,
        one_way_delay: Option<OneWayDelay>,
    );

    /// A packet of `lost_bytes` bytes, sent at `sent_at`, was declared lost at
    /// `now`. The window shrinks at most once per round trip: losses of
    /// packets sent before the last reduction are part of the same congestion
    /// event.
    ///
    /// `sent_at` must be the lost packet's own send time (tern-reliability's
    /// `SentPacket::time_sent`), never the time of detection, or every loss
    /// of one burst would start a new congestion event. Call it for packets
    /// that counted toward bytes in flight. A loss later found spurious (an
    /// ACK arrives for it) is not undone: there is no hook for it, and the
    /// reduction stands (RFC 9002 does not ask for it to be undone).
    fn on_loss(&mut self, now: Instant, lost_bytes: u64, sent_at: Instant);

    /// Nothing was acknowledged for a whole congestion timeout: the path may
    /// have changed completely. tern-reliability does not decide this; the
    /// connection calls it when consecutive probe timeouts (its
    /// `TimerEvent::Probe { pto_count, .. }`) reach its chosen limit, e.g. 3,
    /// RFC 9002's kPersistentCongestionThreshold. `now` is when it decided.
    fn on_congestion_timeout(&mut self, now: Instant);

    /// The congestion window: bytes that may be in flight, in bytes.
    fn window(&self) -> u64;

    /// Bytes sent and neither acknowledged nor declared lost, in bytes.
    fn bytes_in_flight(&self) -> u64;

    /// The rate at which packets should leave, in bytes per second: the
    /// window spread over the smoothed round trip, times a small gain.
    fn pacing_rate(&self) -> u64;

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

macro_rules! dispatch {
    ($self:ident, $c:ident => $body:expr) => {
        match $self {
            AnyController::Ledbat($c) => $body,
            AnyController::Reno($c) => $body,
        }
    };
}

impl Controller for AnyController {
    #[inline]
    fn on_sent(&mut self, now: Instant, bytes: u64) {
        dispatch!(self, c => c.on_sent(now, bytes))
    }

    #[inline]
    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: u64,
        rtt: Option<Duration>,
        one_way_delay: Option<OneWayDelay>,
    ) {
        dispatch!(self, c => c.on_ack(now, acked_bytes, rtt, one_way_delay))
    }

    #[inline]
    fn on_loss(&mut self, now: Instant, lost_bytes: u64, sent_at: Instant) {
        dispatch!(self, c => c.on_loss(now, lost_bytes, sent_at))
    }

    #[inline]
    fn on_congestion_timeout(&mut self, now: Instant) {
        dispatch!(self, c => c.on_congestion_timeout(now))
    }

    #[inline]
    fn window(&self) -> u64 {
        dispatch!(self, c => c.window())
    }

    #[inline]
    fn bytes_in_flight(&self) -> u64 {
        dispatch!(self, c => c.bytes_in_flight())
    }

    #[inline]
    fn pacing_rate(&self) -> u64 {
        dispatch!(self, c => c.pacing_rate())
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
    use crate::{LedbatConfig, RenoConfig};

    #[test]
    fn microsecond_samples_convert_to_nanoseconds_and_saturate() {
        assert_eq!(OneWayDelay::from_micros(-3).as_nanos(), -3_000);
        assert_eq!(OneWayDelay::from_micros(i64::MAX).as_nanos(), i64::MAX);
        assert_eq!(OneWayDelay::from_micros(i64::MIN).as_nanos(), i64::MIN);
    }

    #[test]
    fn the_enum_forwards_every_call_to_the_controller_inside() {
        let (clock, mock) = quanta::Clock::mock();
        let mut direct = Ledbat::new(LedbatConfig::default()).unwrap();
        let mut any = AnyController::from(direct.clone());
        for controller in [&mut direct as &mut dyn Controller, &mut any] {
            controller.on_sent(clock.now(), 1_452);
            controller.on_sent(clock.now(), 1_452);
        }
        mock.increment(Duration::from_millis(40));
        for controller in [&mut direct as &mut dyn Controller, &mut any] {
            controller.on_ack(
                clock.now(),
                1_452,
                Some(Duration::from_millis(40)),
                Some(OneWayDelay::from_micros(20_000)),
            );
            controller.on_loss(clock.now(), 1_452, clock.now());
        }
        assert_eq!(any.window(), direct.window());
        assert_eq!(any.bytes_in_flight(), direct.bytes_in_flight());
        assert_eq!(any.pacing_rate(), direct.pacing_rate());
        assert_eq!(any.in_slow_start(), direct.in_slow_start());
        any.invariants().unwrap();

        let reno = AnyController::from(Reno::new(RenoConfig::default()).unwrap());
        assert!(reno.in_slow_start());
        reno.invariants().unwrap();
    }
}
