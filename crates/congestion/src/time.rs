//! Instant arithmetic that cannot panic.
//!
//! `quanta::Instant + Duration` panics when the sum does not fit. Waits computed
//! here come from rates and byte counts the caller chose (a rate of 1 byte/s and
//! a 64 KiB take means a wait of 18 hours; absurd inputs mean absurd waits), so
//! every addition saturates at the latest representable instant instead.

use quanta::Instant;
use std::time::Duration;

/// `at + wait`, or the latest instant representable after `at` if the sum
/// does not fit.
pub(crate) fn add_saturating(at: Instant, wait: Duration) -> Instant {
    if let Some(sum) = at.checked_add(wait) {
        return sum;
    }
    // Find the largest addend that still fits, by halving steps: at most
    // 64 iterations, and only on this already absurd path.
    let mut result = at;
    let mut step = Duration::from_nanos(1 << 63);
    while !step.is_zero() {
        if let Some(sum) = result.checked_add(step) {
            result = sum;
        }
        step /= 2;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_waits_add_exactly() {
        let (clock, _mock) = quanta::Clock::mock();
        let now = clock.now();
        let later = add_saturating(now, Duration::from_millis(5));
        assert_eq!(later.duration_since(now), Duration::from_millis(5));
    }

    #[test]
    fn an_unrepresentable_wait_saturates_instead_of_panicking() {
        let (clock, mock) = quanta::Clock::mock();
        mock.increment(Duration::from_secs(10));
        let now = clock.now();
        let far = add_saturating(now, Duration::MAX);
        assert!(far > now);
        assert_eq!(far.checked_add(Duration::from_nanos(1)), None);
    }
}
