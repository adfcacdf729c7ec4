//! A token bucket: a rate in bytes per second and a burst in bytes.
//!
//! Tern uses one per connection and one per endpoint to cap sending rates
//! the operator configured, and the [`Pacer`](crate::Pacer) is one whose rate
//! follows the congestion window. A packet may leave when both its
//! connection's and its endpoint's buckets hold enough tokens
//! ([`take_all`]).
//!
//! Arithmetic is integer and exact: tokens are counted in units of
//! 10⁻⁹ byte, so `elapsed nanoseconds × rate in bytes/s` is a whole number of
//! units and no fraction is ever lost. Refills saturate and are capped at the
//! burst, so a bucket left idle for years, or asked twice at the same
//! instant, or given an instant earlier than the last one, behaves: it never
//! panics and never overflows.

use crate::InvariantViolation;
use crate::time::add_saturating;
use quanta::Instant;
use std::num::NonZeroU64;
use std::time::Duration;

/// Token units per byte (one unit is a nanosecond's worth at 1 byte/s).
const UNITS_PER_BYTE: i128 = 1_000_000_000;

/// The answer to "may these bytes leave?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Yes, now.
    Now,
    /// Not before this instant (if nothing else takes tokens meanwhile).
    WaitUntil(Instant),
}

/// Why a bucket could not be built or reconfigured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenBucketError {
    /// A rate of 0 bytes/s would never admit anything.
    #[error("token bucket rate must be at least 1 byte/s")]
    ZeroRate,
    /// A burst of 0 bytes would never admit anything.
    #[error("token bucket burst must be at least 1 byte")]
    ZeroBurst,
}

/// Tokens accrue at `rate` bytes per second up to `burst` bytes.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Refill rate, in bytes per second (≥ 1).
    rate: u64,
    /// Capacity, in bytes (≥ 1).
    burst: u64,
    /// Tokens, in units of 10⁻⁹ byte. Negative after a forced
    /// [`consume`](Self::consume) larger than what was there: a debt later
    /// packets wait for.
    tokens: i128,
    /// The latest instant the bucket was refilled to.
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` bytes/s, holding at most `burst`
    /// bytes.
    pub fn new(rate: u64, burst: u64) -> Result<Self, TokenBucketError> {
        let rate = NonZeroU64::new(rate).ok_or(TokenBucketError::ZeroRate)?;
        let burst = NonZeroU64::new(burst).ok_or(TokenBucketError::ZeroBurst)?;
        Ok(Self::with(rate, burst))
    }

    /// [`new`](Self::new) for values already known to be valid.
    pub(crate) fn with(rate: NonZeroU64, burst: NonZeroU64) -> Self {
        Self {
            rate: rate.get(),
            burst: burst.get(),
            tokens: Self::units(burst.get()),
            last: None,
        }
    }

    /// The refill rate, in bytes per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The capacity, in bytes.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Whole bytes available now (0 while in debt), as of the last refill.
    pub fn available(&self) -> u64 {
        u64::try_from(self.tokens.max(0) / UNITS_PER_BYTE).unwrap_or(u64::MAX)
    }

    /// Changes the rate from `now` on; time before `now` accrued at the old
    /// rate.
    pub fn set_rate(&mut self, now: Instant, rate: u64) -> Result<(), TokenBucketError> {
        let rate = NonZeroU64::new(rate).ok_or(TokenBucketError::ZeroRate)?;
        self.apply_rate(now, rate);
        Ok(())
    }

    /// [`set_rate`](Self::set_rate) for a rate already known to be valid.
    pub(crate) fn apply_rate(&mut self, now: Instant, rate: NonZeroU64) {
        self.refill(now);
        self.rate = rate.get();
    }

    /// Changes the capacity from `now` on, dropping tokens above it.
    pub fn set_burst(&mut self, now: Instant, burst: u64) -> Result<(), TokenBucketError> {
        let burst = NonZeroU64::new(burst).ok_or(TokenBucketError::ZeroBurst)?;
        self.apply_burst(now, burst);
        Ok(())
    }

    /// [`set_burst`](Self::set_burst) for a burst already known to be valid.
    pub(crate) fn apply_burst(&mut self, now: Instant, burst: NonZeroU64) {
        self.refill(now);
        self.burst = burst.get();
        self.tokens = self.tokens.min(Self::units(burst.get()));
    }

    /// When `bytes` could be taken, without taking them.
    ///
    /// A request larger than the burst is admitted once the bucket is full
    /// (and then leaves a debt), so no size is refused forever.
    pub fn ready_at(&mut self, bytes: u64, now: Instant) -> Take {
        self.refill(now);
        let need = Self::units(bytes.min(self.burst));
        if self.tokens >= need {
            return Take::Now;
        }
        let missing = need - self.tokens;
        let rate = i128::from(self.rate);
        let wait_nanos = (missing + rate - 1) / rate;
        let wait = Duration::from_nanos(u64::try_from(wait_nanos).unwrap_or(u64::MAX));
        Take::WaitUntil(add_saturating(self.last.unwrap_or(now), wait))
    }

    /// Takes `bytes` if they may leave now; otherwise takes nothing and says
    /// when to ask again.
    pub fn take(&mut self, bytes: u64, now: Instant) -> Take {
        let answer = self.ready_at(bytes, now);
        if answer == Take::Now {
            self.tokens -= Self::units(bytes);
        }
        answer
    }

    /// Charges `bytes` sent regardless of the tokens (an ACK or a probe that
    /// must go): the bucket may go into debt.
    pub fn consume(&mut self, bytes: u64, now: Instant) {
        self.refill(now);
        let floor = -Self::units(u64::MAX);
        self.tokens = (self.tokens - Self::units(bytes)).max(floor);
    }

    /// Spends up to `bytes` of the tokens there are, without going into
    /// debt (a debt already there stays as it is): for bytes that left
    /// without asking.
    pub(crate) fn spend(&mut self, bytes: u64, now: Instant) {
        self.refill(now);
        if self.tokens > 0 {
            self.tokens = (self.tokens - Self::units(bytes)).max(0);
        }
    }

    /// Adds the tokens accrued since the last refill. An instant earlier than
    /// the last one adds nothing and does not move the bucket's time back.
    fn refill(&mut self, now: Instant) {
        let Some(last) = self.last else {
            self.last = Some(now);
            return;
        };
        let Some(elapsed) = now.checked_duration_since(last) else {
            return;
        };
        let cap = Self::units(self.burst);
        let room = u128::try_from(cap - self.tokens).unwrap_or(0);
        let accrued = elapsed.as_nanos().saturating_mul(u128::from(self.rate));
        // `room` fits in an i128 because both bounds of `tokens` do.
        self.tokens += i128::try_from(accrued.min(room)).unwrap_or(0);
        self.last = Some(now);
    }

    fn units(bytes: u64) -> i128 {
        i128::from(bytes) * UNITS_PER_BYTE
    }

    /// Checks the bounds: never above the burst, never below the largest
    /// possible debt, positive rate and burst.
    pub fn invariants(&self) -> Result<(), InvariantViolation> {
        if self.rate == 0 || self.burst == 0 {
            return Err(InvariantViolation("token bucket rate or burst is zero"));
        }
        if self.tokens > Self::units(self.burst) {
            return Err(InvariantViolation("token bucket holds more than its burst"));
        }
        if self.tokens < -Self::units(u64::MAX) {
            return Err(InvariantViolation("token bucket debt beyond bounds"));
        }
        Ok(())
    }
}

/// Takes `bytes` from every bucket if all of them admit it now; otherwise
/// takes nothing and answers the latest instant any of them names.
///
/// This is how a packet passes both its connection's cap and its endpoint's
/// cap: no bucket is charged for a packet another one holds back.
pub fn take_all(buckets: &mut [&mut TokenBucket], bytes: u64, now: Instant) -> Take {
    let mut answer = Take::Now;
    for bucket in buckets.iter_mut() {
        if let Take::WaitUntil(at) = bucket.ready_at(bytes, now) {
            answer = match answer {
                Take::WaitUntil(before) if before >= at => Take::WaitUntil(before),
                _ => Take::WaitUntil(at),
            };
        }
    }
    if answer == Take::Now {
        for bucket in buckets.iter_mut() {
            bucket.take(bytes, now);
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clock() -> (quanta::Clock, std::sync::Arc<quanta::Mock>) {
        let (clock, mock) = quanta::Clock::mock();
        mock.increment(Duration::from_secs(1));
        (clock, mock)
    }

    #[test]
    fn zero_rate_or_burst_is_refused() {
        assert_eq!(
            TokenBucket::new(0, 10).unwrap_err(),
            TokenBucketError::ZeroRate
        );
        assert_eq!(
            TokenBucket::new(10, 0).unwrap_err(),
            TokenBucketError::ZeroBurst
        );
        let (clock, _mock) = clock();
        let mut bucket = TokenBucket::new(10, 10).unwrap();
        assert_eq!(
            bucket.set_rate(clock.now(), 0),
            Err(TokenBucketError::ZeroRate)
        );
        assert_eq!(
            bucket.set_burst(clock.now(), 0),
            Err(TokenBucketError::ZeroBurst)
        );
    }

    #[test]
    fn a_full_bucket_admits_a_burst_then_waits_for_the_rate() {
        let (clock, _mock) = clock();
        let now = clock.now();
        let mut bucket = TokenBucket::new(1_000_000, 3_000).unwrap();
        assert_eq!(bucket.take(1_500, now), Take::Now);
        assert_eq!(bucket.take(1_500, now), Take::Now);
        // Empty: 1 500 bytes at 1 MB/s take 1.5 ms.
        assert_eq!(
            bucket.take(1_500, now),
            Take::WaitUntil(now + Duration::from_micros(1_500))
        );
        bucket.invariants().unwrap();
    }

    #[test]
    fn waiting_until_the_named_instant_is_enough() {
        let (clock, mock) = clock();
        let mut bucket = TokenBucket::new(12_345, 1_000).unwrap();
        assert_eq!(bucket.take(1_000, clock.now()), Take::Now);
        let Take::WaitUntil(at) = bucket.take(700, clock.now()) else {
            panic!("an empty bucket must ask to wait");
        };
        mock.increment(at.duration_since(clock.now()) - Duration::from_nanos(1));
        assert!(matches!(bucket.take(700, clock.now()), Take::WaitUntil(_)));
        mock.increment(Duration::from_nanos(1));
        assert_eq!(bucket.take(700, clock.now()), Take::Now);
    }

    #[test]
    fn the_same_instant_twice_adds_no_tokens() {
        let (clock, _mock) = clock();
        let now = clock.now();
        let mut bucket = TokenBucket::new(u64::MAX, 100).unwrap();
        assert_eq!(bucket.take(100, now), Take::Now);
        assert!(matches!(bucket.take(1, now), Take::WaitUntil(_)));
        assert_eq!(bucket.available(), 0);
    }

    #[test]
    fn a_long_idle_period_refills_only_up_to_the_burst() {
        let (clock, mock) = clock();
        let mut bucket = TokenBucket::new(u64::MAX, 5_000).unwrap();
        bucket.take(5_000, clock.now());
        mock.increment(Duration::from_secs(100 * 365 * 24 * 3_600));
        assert_eq!(bucket.ready_at(0, clock.now()), Take::Now);
        assert_eq!(bucket.available(), 5_000);
        bucket.invariants().unwrap();
    }

    #[test]
    fn an_earlier_instant_neither_refills_nor_rewinds() {
        let (clock, mock) = clock();
        let mut bucket = TokenBucket::new(1_000, 1_000).unwrap();
        let early = clock.now();
        mock.increment(Duration::from_millis(500));
        bucket.take(1_000, clock.now());
        assert!(matches!(bucket.take(1, early), Take::WaitUntil(_)));
        mock.increment(Duration::from_millis(1));
        assert_eq!(bucket.take(1, clock.now()), Take::Now);
        bucket.invariants().unwrap();
    }

    #[test]
    fn a_request_larger_than_the_burst_goes_when_full_and_leaves_a_debt() {
        let (clock, mock) = clock();
        let mut bucket = TokenBucket::new(1_000, 1_000).unwrap();
        assert_eq!(bucket.take(3_000, clock.now()), Take::Now);
        // 2 000 bytes of debt, then 1 byte: 2.001 s at 1 000 bytes/s.
        let Take::WaitUntil(at) = bucket.take(1, clock.now()) else {
            panic!("a bucket in debt must ask to wait");
        };
        assert_eq!(at.duration_since(clock.now()), Duration::from_millis(2_001));
        mock.increment(Duration::from_millis(2_001));
        assert_eq!(bucket.take(1, clock.now()), Take::Now);
    }

    #[test]
    fn an_absurd_wait_saturates_instead_of_panicking() {
        let (clock, _mock) = clock();
        let mut bucket = TokenBucket::new(1, u64::MAX).unwrap();
        bucket.consume(u64::MAX, clock.now());
        bucket.consume(u64::MAX, clock.now());
        assert!(matches!(
            bucket.take(u64::MAX, clock.now()),
            Take::WaitUntil(_)
        ));
        bucket.invariants().unwrap();
    }

    #[test]
    fn a_rate_change_applies_from_now_on() {
        let (clock, mock) = clock();
        let mut bucket = TokenBucket::new(1_000, 10_000).unwrap();
        bucket.take(10_000, clock.now());
        mock.increment(Duration::from_secs(1));
        bucket.set_rate(clock.now(), 2_000).unwrap();
        mock.increment(Duration::from_secs(1));
        bucket.ready_at(0, clock.now());
        assert_eq!(bucket.available(), 3_000);
        bucket.set_burst(clock.now(), 500).unwrap();
        assert_eq!(bucket.available(), 500);
        bucket.invariants().unwrap();
    }

    #[test]
    fn the_connection_and_endpoint_caps_must_both_admit_a_packet() {
        let (clock, mock) = clock();
        let mut connection = TokenBucket::new(1_000_000, 1_500).unwrap();
        let mut endpoint = TokenBucket::new(100_000, 3_000).unwrap();
        let now = clock.now();
        assert_eq!(
            take_all(&mut [&mut connection, &mut endpoint], 1_500, now),
            Take::Now
        );
        // The connection bucket is empty: it holds the packet back, and the
        // endpoint bucket is not charged for it.
        let answer = take_all(&mut [&mut connection, &mut endpoint], 1_500, now);
        assert_eq!(answer, Take::WaitUntil(now + Duration::from_micros(1_500)));
        assert_eq!(endpoint.available(), 1_500);
        mock.increment(Duration::from_micros(1_500));
        let now = clock.now();
        assert_eq!(
            take_all(&mut [&mut connection, &mut endpoint], 1_500, now),
            Take::Now
        );
        // Now the endpoint bucket, the slower one, is the one to wait for:
        // it refilled 150 bytes in 1.5 ms and lacks 1 350 (13.5 ms).
        let answer = take_all(&mut [&mut connection, &mut endpoint], 1_500, now);
        assert_eq!(answer, Take::WaitUntil(now + Duration::from_micros(13_500)));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Take(u64),
        Consume(u64),
        Advance(u64),
        SetRate(u64),
        SetBurst(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..100_000u64).prop_map(Op::Take),
            any::<u64>().prop_map(Op::Take),
            (0..100_000u64).prop_map(Op::Consume),
            prop_oneof![
                Just(0u64),
                0..10_000_000u64,
                any::<u64>().prop_map(|n| n >> 4)
            ]
            .prop_map(Op::Advance),
            prop_oneof![1..10_000_000u64, any::<u64>()].prop_map(Op::SetRate),
            prop_oneof![1..1_000_000u64, any::<u64>()].prop_map(Op::SetBurst),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_operations_keep_the_bucket_within_bounds(
            rate in 1..u64::MAX,
            burst in 1..u64::MAX,
            ops in proptest::collection::vec(op(), 1..64),
        ) {
            let (clock, mock) = quanta::Clock::mock();
            let mut bucket = TokenBucket::new(rate, burst).unwrap();
            for op in ops {
                let now = clock.now();
                match op {
                    Op::Take(bytes) => {
                        if let Take::WaitUntil(at) = bucket.take(bytes, now) {
                            prop_assert!(at > now);
                        }
                    }
                    Op::Consume(bytes) => bucket.consume(bytes, now),
                    Op::Advance(nanos) => {
                        // Keep the mock clock far from its own overflow.
                        mock.increment(nanos.min(u64::MAX / 4 - mock.value().min(u64::MAX / 4)));
                    }
                    Op::SetRate(rate) => bucket.set_rate(now, rate.max(1)).unwrap(),
                    Op::SetBurst(burst) => bucket.set_burst(now, burst.max(1)).unwrap(),
                }
                prop_assert!(bucket.invariants().is_ok(), "{:?}", bucket.invariants());
                prop_assert!(bucket.available() <= bucket.burst());
            }
        }
    }
}
