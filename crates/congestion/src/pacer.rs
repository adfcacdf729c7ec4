//! Pacing: a congestion window spread over a round trip instead of sent as
//! one burst.
//!
//! A window of 100 packets released at once lands in the bottleneck queue as
//! a 100-packet spike: it inflates the very delay LEDBAT measures and, with a
//! small buffer, gets packets dropped. The pacer lets packets leave at the
//! controller's [`pacing_rate`](crate::Controller::pacing_rate) — the window
//! over the smoothed round trip, times a small gain so the window is still
//! used up within the round trip — with a burst allowance of a few packets,
//! or of one timer tick's worth of bytes at high rates, since the driver's
//! timer cannot wake up more finely than that.

use crate::{InvariantViolation, Take, TokenBucket};
use quanta::Instant;
use std::num::NonZeroU64;
use std::time::Duration;

/// Pacing gain in congestion avoidance, in thousandths (1.25): enough to
/// send a whole window within the round trip despite timer slack.
pub const PACING_GAIN_PERMILLE: u32 = 1_250;

/// Pacing gain in slow start, in thousandths (2.0): the window doubles every
/// round trip, so the rate must keep up with it.
pub const SLOW_START_PACING_GAIN_PERMILLE: u32 = 2_000;

/// How a [`Pacer`] may burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PacerConfig {
    /// Packets that may leave back to back, in packets (default 4).
    pub burst_packets: u32,
    /// Size of a full packet, in bytes (default 1452: 1500 MTU − 40 IPv6 −
    /// 8 UDP).
    pub max_datagram_size: u64,
    /// Resolution of the timer that will wake the sender, in time (default
    /// 1 ms): the burst is at least what the rate allows in one tick.
    pub timer_granularity: Duration,
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            burst_packets: 4,
            max_datagram_size: 1_452,
            timer_granularity: Duration::from_millis(1),
        }
    }
}

/// The pacing rate for `window` bytes over `rtt`, times `gain_permille`/1000,
/// in bytes per second (at least 1).
pub fn pacing_rate(window: u64, rtt: Duration, gain_permille: u32) -> u64 {
    let rtt_nanos = rtt.as_nanos().max(1);
    let rate = u128::from(window) * u128::from(gain_permille) * 1_000_000_000 / (rtt_nanos * 1_000);
    u64::try_from(rate).unwrap_or(u64::MAX).max(1)
}

/// Decides when the next packet may leave.
#[derive(Debug, Clone)]
pub struct Pacer {
    config: PacerConfig,
    bucket: TokenBucket,
}

impl Pacer {
    /// A pacer with a full burst allowance.
    pub fn new(config: PacerConfig) -> Self {
        let bucket = TokenBucket::with(NonZeroU64::MIN, Self::burst_for(&config, NonZeroU64::MIN));
        Self { config, bucket }
    }

    /// When a packet of `bytes` bytes may leave at `rate` bytes per second
    /// (the controller's current pacing rate; 0 is taken as 1).
    pub fn poll(&mut self, now: Instant, rate: u64, bytes: u64) -> Take {
        let rate = NonZeroU64::new(rate).unwrap_or(NonZeroU64::MIN);
        self.bucket.apply_rate(now, rate);
        self.bucket
            .apply_burst(now, Self::burst_for(&self.config, rate));
        self.bucket.ready_at(bytes, now)
    }

    /// Bytes that may still leave back to back, as of the last
    /// [`poll`](Self::poll) (0 while in debt): a run of datagrams admitted
    /// by one `poll` stays within it.
    pub fn available(&self) -> u64 {
        self.bucket.available()
    }

    /// A packet of `bytes` bytes left at `now` (paced or not: ACKs and probes
    /// are charged too, so the average rate holds).
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.bucket.consume(bytes, now);
    }

    fn burst_for(config: &PacerConfig, rate: NonZeroU64) -> NonZeroU64 {
        let packets =
            u64::from(config.burst_packets.max(1)).saturating_mul(config.max_datagram_size.max(1));
        let per_tick = u128::from(rate.get()) * config.timer_granularity.as_nanos() / 1_000_000_000;
        let burst = packets.max(u64::try_from(per_tick).unwrap_or(u64::MAX));
        NonZeroU64::new(burst).unwrap_or(NonZeroU64::MIN)
    }

    /// Bytes that left at `now` without asking the pacer (a flight that
    /// began with nothing in flight, as far as the initial window): they
    /// spend the tokens there are, but leave no debt. Charged in full, a
    /// flight from quiet after each answer would add its debt to the last
    /// whenever the answers come sooner than the rate repays it, until the
    /// first paced packet waits for all of it.
    pub fn on_sent_unpaced(&mut self, now: Instant, bytes: u64) {
        self.bucket.spend(bytes, now);
    }

    /// Checks the underlying bucket.
    pub fn invariants(&self) -> Result<(), InvariantViolation> {
        self.bucket.invariants()?;
        if self.bucket.burst() < self.config.max_datagram_size.max(1) {
            return Err(InvariantViolation("pacer burst smaller than one packet"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_spreads_the_window_over_the_round_trip_with_the_gain() {
        // 125 000 bytes over 100 ms is 1.25 MB/s; ×1.25 is 1.5625 MB/s.
        assert_eq!(
            pacing_rate(125_000, Duration::from_millis(100), 1_000),
            1_250_000
        );
        assert_eq!(
            pacing_rate(125_000, Duration::from_millis(100), 1_250),
            1_562_500
        );
    }

    #[test]
    fn degenerate_inputs_give_a_finite_nonzero_rate() {
        assert_eq!(pacing_rate(0, Duration::from_millis(100), 1_250), 1);
        assert_eq!(pacing_rate(u64::MAX, Duration::ZERO, u32::MAX), u64::MAX);
        assert_eq!(pacing_rate(1, Duration::MAX, 1_250), 1);
    }

    #[test]
    fn a_burst_of_a_few_packets_leaves_at_once_then_packets_are_spaced() {
        let (clock, _mock) = quanta::Clock::mock();
        let now = clock.now();
        let mut pacer = Pacer::new(PacerConfig::default());
        let rate = 1_452_000; // one packet per millisecond
        for _ in 0..4 {
            assert_eq!(pacer.poll(now, rate, 1_452), Take::Now);
            pacer.on_sent(now, 1_452);
        }
        assert_eq!(
            pacer.poll(now, rate, 1_452),
            Take::WaitUntil(now + Duration::from_millis(1))
        );
        pacer.invariants().unwrap();
    }

    #[test]
    fn what_is_available_is_the_burst_less_what_was_sent() {
        let (clock, _mock) = quanta::Clock::mock();
        let now = clock.now();
        let mut pacer = Pacer::new(PacerConfig::default());
        assert_eq!(pacer.poll(now, 1_452_000, 1_452), Take::Now);
        assert_eq!(pacer.available(), 4 * 1_452);
        pacer.on_sent(now, 3 * 1_452);
        assert_eq!(pacer.available(), 1_452);
        pacer.on_sent(now, 2 * 1_452);
        assert_eq!(pacer.available(), 0, "in debt");
    }

    #[test]
    fn a_window_is_spread_over_the_round_trip() {
        let (clock, mock) = quanta::Clock::mock();
        let mut pacer = Pacer::new(PacerConfig::default());
        let start = clock.now();
        // 100 packets over 100 ms at gain 1: the last leaves after ~96 ms.
        let rate = pacing_rate(100 * 1_452, Duration::from_millis(100), 1_000);
        let mut sent = 0;
        while sent < 100 {
            match pacer.poll(clock.now(), rate, 1_452) {
                Take::Now => {
                    pacer.on_sent(clock.now(), 1_452);
                    sent += 1;
                }
                Take::WaitUntil(at) => mock.increment(at.duration_since(clock.now())),
            }
        }
        let spread = clock.now().duration_since(start);
        assert!(spread >= Duration::from_millis(95), "{spread:?}");
        assert!(spread <= Duration::from_millis(100), "{spread:?}");
    }

    #[test]
    fn at_high_rates_the_burst_covers_one_timer_tick() {
        let (clock, _mock) = quanta::Clock::mock();
        let now = clock.now();
        let mut pacer = Pacer::new(PacerConfig::default());
        // 1.452 GB/s: 1 000 packets per millisecond; all leave in one tick.
        let rate = 1_452_000_000;
        pacer.poll(now, rate, 1_452);
        let mut burst = 0;
        while pacer.poll(now, rate, 1_452) == Take::Now {
            pacer.on_sent(now, 1_452);
            burst += 1;
        }
        // The bucket started at the small burst and refills from there.
        assert!(burst >= 4, "{burst}");
        pacer.invariants().unwrap();
    }

    #[test]
    fn what_left_unpaced_spends_the_tokens_but_leaves_no_debt() {
        let (clock, _mock) = quanta::Clock::mock();
        let now = clock.now();
        let mut pacer = Pacer::new(PacerConfig::default());
        let rate = 1_452_000;
        assert_eq!(pacer.poll(now, rate, 1_452), Take::Now);
        // 26 packets from quiet: the 4 packets' tokens are spent, no more.
        pacer.on_sent_unpaced(now, 26 * 1_452);
        assert_eq!(
            pacer.poll(now, rate, 1_452),
            Take::WaitUntil(now + Duration::from_millis(1))
        );
        // A debt already there stays.
        pacer.on_sent(now, 2 * 1_452);
        pacer.on_sent_unpaced(now, 26 * 1_452);
        assert_eq!(
            pacer.poll(now, rate, 1_452),
            Take::WaitUntil(now + Duration::from_millis(3))
        );
        pacer.invariants().unwrap();
    }

    #[test]
    fn a_zero_rate_is_treated_as_one_byte_per_second() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut pacer = Pacer::new(PacerConfig::default());
        assert_eq!(pacer.poll(clock.now(), 0, 1_452), Take::Now);
        pacer.invariants().unwrap();
    }
}
