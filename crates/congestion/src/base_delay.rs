//! The base-delay history of RFC 6817: the smallest one-way delay of each of
//! the last `BASE_HISTORY` minutes.
//!
//! The base delay is what the path's one-way delay would be with empty
//! queues, plus the unknown offset between the two hosts' clocks. Keeping one
//! minimum per minute instead of one all-time minimum lets the estimate rise
//! again, within `BASE_HISTORY` minutes, when the path gets longer or a clock
//! drifts; a shorter path is adopted at once, since a smaller sample lowers
//! the newest bucket immediately.

use crate::InvariantViolation;
use quanta::Instant;
use std::time::Duration;

/// The largest allowed `base_history` length.
pub const MAX_BASE_HISTORY: usize = 32;

/// Length of one bucket of the history.
pub const BUCKET: Duration = Duration::from_secs(60);

/// Marks a bucket that holds no sample yet (the RFC's `+INFINITY`).
const EMPTY: i64 = i64::MAX;

/// One-way-delay minima, one per minute, in nanoseconds with the clocks'
/// arbitrary offset. The buckets are allocated at the configured length
/// (10 by default, 80 bytes), not the largest allowed: every connection
/// holds one, idle ones included.
#[derive(Debug, Clone)]
pub struct BaseDelayHistory {
    /// One minimum per minute: `base_history` of them.
    buckets: Box<[i64]>,
    /// Index of the bucket of the current minute.
    current: usize,
    /// When the current bucket was opened (`last_rollover` in the RFC).
    last_rollover: Option<Instant>,
    /// Minimum over all buckets, kept so reading it costs nothing.
    min: i64,
}

impl BaseDelayHistory {
    /// A history of `len` one-minute buckets, `len` clamped to
    /// `2..=MAX_BASE_HISTORY`.
    pub fn new(len: usize) -> Self {
        Self {
            buckets: vec![EMPTY; len.clamp(2, MAX_BASE_HISTORY)].into_boxed_slice(),
            current: 0,
            last_rollover: None,
            min: EMPTY,
        }
    }

    /// Forgets every minimum, as a new history of the same length would,
    /// without allocating one.
    pub fn clear(&mut self) {
        self.buckets.fill(EMPTY);
        self.current = 0;
        self.last_rollover = None;
        self.min = EMPTY;
    }

    /// The number of one-minute buckets.
    fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Records a sample (nanoseconds, arbitrary offset) taken at `now`.
    pub fn update(&mut self, now: Instant, sample: i64) {
        // RFC 6817, section 2.4.2 (update_base_delay):
        //   # Maintain BASE_HISTORY delay-minima.
        //   # Each minimum is measured over a period of a minute.
        //   if round_to_minute(now) != round_to_minute(last_rollover)
        //       last_rollover = now
        //       delete first item in base_delays list
        //       append delay to base_delays list
        //   else
        //       base_delays.tail = MIN(base_delays.tail, delay)
        // A quanta::Instant has no minute boundaries, so a bucket is a minute
        // after `last_rollover`. After a long silence every minute passed
        // opens its own (empty) bucket, so minima older than BASE_HISTORY
        // minutes are forgotten rather than kept because no sample came.
        let elapsed_minutes = match self.last_rollover {
            None => 1,
            Some(last) => now.saturating_duration_since(last).as_secs() / BUCKET.as_secs(),
        };
        if elapsed_minutes > 0 {
            let len = self.len();
            let rotations = usize::try_from(elapsed_minutes).map_or(len, |m| m.min(len));
            for _ in 0..rotations {
                self.current = (self.current + 1) % len;
                self.buckets[self.current] = EMPTY;
            }
            self.last_rollover = Some(now);
            self.buckets[self.current] = sample;
            self.min = self.buckets.iter().copied().fold(EMPTY, i64::min);
        } else {
            let tail = &mut self.buckets[self.current];
            *tail = (*tail).min(sample);
            self.min = self.min.min(sample);
        }
    }

    /// The base delay: the minimum over the history, `None` before the first
    /// sample.
    pub fn base(&self) -> Option<i64> {
        (self.min != EMPTY).then_some(self.min)
    }

    /// Raises every minimum by `by` nanoseconds: the correction applied when
    /// the round trip proves the one-way samples jumped because a clock did,
    /// not because a queue grew.
    pub(crate) fn raise(&mut self, by: i64) {
        for bucket in &mut self.buckets {
            if *bucket != EMPTY {
                *bucket = bucket.saturating_add(by).min(EMPTY - 1);
            }
        }
        self.min = self.buckets.iter().copied().fold(EMPTY, i64::min);
    }

    /// Checks the cached minimum and the ring's bookkeeping.
    pub fn invariants(&self) -> Result<(), InvariantViolation> {
        if !(2..=MAX_BASE_HISTORY).contains(&self.len()) || self.current >= self.len() {
            return Err(InvariantViolation("base history index out of range"));
        }
        let min = self.buckets.iter().copied().fold(EMPTY, i64::min);
        if min != self.min {
            return Err(InvariantViolation(
                "cached base delay differs from the buckets",
            ));
        }
        if self.last_rollover.is_none() && self.min != EMPTY {
            return Err(InvariantViolation("base delay without a first bucket"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_is_the_smallest_sample_of_the_window() {
        let (clock, mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(10);
        assert_eq!(history.base(), None);
        history.update(clock.now(), 30);
        history.update(clock.now(), 20);
        mock.increment(Duration::from_secs(61));
        history.update(clock.now(), 25);
        assert_eq!(history.base(), Some(20));
        history.invariants().unwrap();
    }

    #[test]
    fn a_shorter_path_is_adopted_at_once() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(10);
        history.update(clock.now(), 50_000_000);
        history.update(clock.now(), 10_000_000);
        assert_eq!(history.base(), Some(10_000_000));
    }

    #[test]
    fn a_longer_path_is_adopted_after_base_history_minutes() {
        let (clock, mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(10);
        history.update(clock.now(), 10);
        for minute in 1..=10 {
            mock.increment(BUCKET);
            history.update(clock.now(), 40);
            let expected = if minute < 10 { 10 } else { 40 };
            assert_eq!(history.base(), Some(expected), "minute {minute}");
        }
        history.invariants().unwrap();
    }

    #[test]
    fn a_long_silence_forgets_every_old_minimum() {
        let (clock, mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(10);
        history.update(clock.now(), 10);
        mock.increment(Duration::from_secs(3_600));
        history.update(clock.now(), 70);
        assert_eq!(history.base(), Some(70));
        history.invariants().unwrap();
    }

    #[test]
    fn the_same_instant_twice_stays_in_one_bucket() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(2);
        let now = clock.now();
        history.update(now, 9);
        history.update(now, 7);
        history.update(now, 8);
        assert_eq!(history.base(), Some(7));
        history.invariants().unwrap();
    }

    #[test]
    fn a_cleared_history_is_a_new_one_of_the_same_length() {
        let (clock, mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(3);
        history.update(clock.now(), 5);
        mock.increment(BUCKET);
        history.update(clock.now(), 8);
        history.clear();
        assert_eq!(history.base(), None);
        history.invariants().unwrap();
        history.update(clock.now(), 40);
        assert_eq!(history.base(), Some(40));
        assert_eq!(history.len(), 3);
        history.invariants().unwrap();
    }

    #[test]
    fn raising_moves_every_stored_minimum_and_saturates() {
        let (clock, mock) = quanta::Clock::mock();
        let mut history = BaseDelayHistory::new(3);
        history.update(clock.now(), 5);
        mock.increment(BUCKET);
        history.update(clock.now(), 8);
        history.raise(100);
        assert_eq!(history.base(), Some(105));
        history.raise(i64::MAX);
        assert!(history.base().is_some());
        history.invariants().unwrap();
    }
}
