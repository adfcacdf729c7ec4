//! The current-delay filter of RFC 6817: the minimum of the last few
//! one-way-delay samples.
//!
//! One sample can be inflated by a burst in some queue or by scheduling on
//! either host; the minimum of a few recent ones is the delay the path
//! actually has now. The filter allocates once, when made: a ring of the
//! configured length (4 by default, 96 bytes; at most
//! [`MAX_CURRENT_FILTER`]), since every connection holds one.

use crate::InvariantViolation;
use quanta::Instant;
use std::time::Duration;

/// The largest allowed `current_filter` length.
pub const MAX_CURRENT_FILTER: usize = 16;

/// The last `len` one-way-delay samples, with the time each was taken.
#[derive(Debug, Clone)]
pub struct CurrentDelayFilter {
    /// The ring: `current_filter` samples, each with when it was taken.
    samples: Box<[(i64, Option<Instant>)]>,
    /// Index of the newest sample.
    newest: usize,
    filled: usize,
}

impl CurrentDelayFilter {
    /// A filter over the last `len` samples, `len` clamped to
    /// `1..=MAX_CURRENT_FILTER`.
    pub fn new(len: usize) -> Self {
        Self {
            samples: vec![(0, None); len.clamp(1, MAX_CURRENT_FILTER)].into_boxed_slice(),
            newest: 0,
            filled: 0,
        }
    }

    /// Forgets every sample, as a new filter of the same length would,
    /// without allocating one.
    pub fn clear(&mut self) {
        self.samples.fill((0, None));
        self.newest = 0;
        self.filled = 0;
    }

    /// The number of samples the filter spans.
    fn len(&self) -> usize {
        self.samples.len()
    }

    /// Adds a sample (nanoseconds, arbitrary offset) taken at `now`.
    pub fn push(&mut self, now: Instant, sample: i64) {
        // RFC 6817, section 2.4.2 (update_current_delay):
        //   # Maintain a list of CURRENT_FILTER last delays observed.
        //   delete first item in current_delays list
        //   append delay to current_delays list
        self.newest = (self.newest + 1) % self.len();
        self.samples[self.newest] = (sample, Some(now));
        self.filled = (self.filled + 1).min(self.len());
    }

    /// The minimum of the samples taken within `max_age` before `now`, the
    /// newest sample always included; `None` before the first sample.
    pub fn min(&self, now: Instant, max_age: Duration) -> Option<i64> {
        if self.filled == 0 {
            return None;
        }
        let (newest, _) = self.samples[self.newest];
        // RFC 6817, section 2.5: "CURRENT_FILTER MUST be limited such that
        // samples in the list are not older than an RTT in the past."
        let min = self
            .samples
            .iter()
            .filter_map(|&(sample, at)| {
                let age = now.saturating_duration_since(at?);
                (age <= max_age).then_some(sample)
            })
            .fold(newest, i64::min);
        Some(min)
    }

    /// Checks the ring's bookkeeping.
    pub fn invariants(&self) -> Result<(), InvariantViolation> {
        if !(1..=MAX_CURRENT_FILTER).contains(&self.len()) {
            return Err(InvariantViolation("current filter length out of range"));
        }
        if self.newest >= self.len() || self.filled > self.len() {
            return Err(InvariantViolation("current filter index out of range"));
        }
        let stored = self.samples.iter().filter(|(_, at)| at.is_some()).count();
        if stored != self.filled {
            return Err(InvariantViolation("current filter fill count is wrong"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_filter_has_no_minimum() {
        let (clock, _mock) = quanta::Clock::mock();
        let filter = CurrentDelayFilter::new(4);
        assert_eq!(filter.min(clock.now(), Duration::MAX), None);
        filter.invariants().unwrap();
    }

    #[test]
    fn the_minimum_covers_only_the_last_len_samples() {
        let (clock, _mock) = quanta::Clock::mock();
        let now = clock.now();
        let mut filter = CurrentDelayFilter::new(3);
        for sample in [5, 9, 7, 8] {
            filter.push(now, sample);
        }
        // 5 was pushed out by the fourth sample.
        assert_eq!(filter.min(now, Duration::MAX), Some(7));
        filter.invariants().unwrap();
    }

    #[test]
    fn samples_older_than_max_age_are_ignored_but_the_newest_counts() {
        let (clock, mock) = quanta::Clock::mock();
        let mut filter = CurrentDelayFilter::new(4);
        filter.push(clock.now(), 1);
        mock.increment(Duration::from_millis(500));
        filter.push(clock.now(), 50);
        assert_eq!(
            filter.min(clock.now(), Duration::from_millis(100)),
            Some(50)
        );
        mock.increment(Duration::from_secs(10));
        assert_eq!(
            filter.min(clock.now(), Duration::from_millis(100)),
            Some(50)
        );
    }

    #[test]
    fn negative_samples_from_clock_offsets_are_ordinary_values() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut filter = CurrentDelayFilter::new(4);
        filter.push(clock.now(), -1_000_000);
        filter.push(clock.now(), -2_000_000);
        assert_eq!(filter.min(clock.now(), Duration::MAX), Some(-2_000_000));
    }

    #[test]
    fn lengths_out_of_range_are_clamped() {
        assert!(CurrentDelayFilter::new(0).invariants().is_ok());
        let filter = CurrentDelayFilter::new(1_000);
        assert_eq!(filter.len(), MAX_CURRENT_FILTER);
    }

    #[test]
    fn a_cleared_filter_is_a_new_one_of_the_same_length() {
        let (clock, _mock) = quanta::Clock::mock();
        let mut filter = CurrentDelayFilter::new(3);
        for sample in [5, 9, 7, 8] {
            filter.push(clock.now(), sample);
        }
        filter.clear();
        assert_eq!(filter.min(clock.now(), Duration::MAX), None);
        filter.invariants().unwrap();
        filter.push(clock.now(), 6);
        assert_eq!(filter.min(clock.now(), Duration::MAX), Some(6));
        assert_eq!(filter.len(), 3);
    }
}
