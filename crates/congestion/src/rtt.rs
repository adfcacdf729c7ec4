//! The little round-trip bookkeeping a controller needs of its own.
//!
//! Loss detection owns the full estimator (variance, ACK-delay adjustment)
//! in tern-reliability; a controller only needs a smoothed round trip to pace
//! with and to time its phases, and the minimum as the path's unloaded
//! round trip.

use crate::InvariantViolation;
use std::time::Duration;

/// Smoothed, minimum and latest round-trip time of one path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathRtt {
    smoothed: Option<Duration>,
    min: Option<Duration>,
    latest: Option<Duration>,
}

impl PathRtt {
    pub(crate) const fn new() -> Self {
        Self {
            smoothed: None,
            min: None,
            latest: None,
        }
    }

    /// Takes one sample; a zero sample (same `now` for send and ACK, as a mock
    /// clock gives) is kept as 1 ns so rates derived from it stay finite.
    pub(crate) fn update(&mut self, sample: Duration) {
        let sample = sample.max(Duration::from_nanos(1));
        self.latest = Some(sample);
        self.min = Some(self.min.map_or(sample, |min| min.min(sample)));
        // RFC 9002, section 5.3: "smoothed_rtt = 7/8 * smoothed_rtt + 1/8 *
        // adjusted_rtt", in u128 nanoseconds so that no sample, however
        // absurd, overflows (the mean of two `Duration`s is one).
        self.smoothed = Some(match self.smoothed {
            None => sample,
            Some(smoothed) => {
                let nanos = (7 * smoothed.as_nanos() + sample.as_nanos()) / 8;
                let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
                Duration::new(secs, (nanos % 1_000_000_000) as u32)
            }
        });
    }

    pub(crate) fn smoothed(&self) -> Option<Duration> {
        self.smoothed
    }

    pub(crate) fn min(&self) -> Option<Duration> {
        self.min
    }

    pub(crate) fn invariants(&self) -> Result<(), InvariantViolation> {
        match (self.smoothed, self.min, self.latest) {
            (None, None, None) => Ok(()),
            (Some(smoothed), Some(min), Some(latest)) => {
                if min.is_zero() {
                    return Err(InvariantViolation("minimum RTT is zero"));
                }
                if smoothed < min || latest < min {
                    return Err(InvariantViolation("an RTT is below the minimum RTT"));
                }
                Ok(())
            }
            _ => Err(InvariantViolation("RTT fields are partly set")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_sets_everything_and_later_ones_smooth() {
        let mut rtt = PathRtt::new();
        assert_eq!(rtt.smoothed(), None);
        rtt.update(Duration::from_millis(80));
        assert_eq!(rtt.smoothed(), Some(Duration::from_millis(80)));
        rtt.update(Duration::from_millis(160));
        assert_eq!(rtt.smoothed(), Some(Duration::from_millis(90)));
        assert_eq!(rtt.min(), Some(Duration::from_millis(80)));
        rtt.invariants().unwrap();
    }

    #[test]
    fn absurdly_long_samples_saturate_instead_of_overflowing() {
        let mut rtt = PathRtt::new();
        rtt.update(Duration::MAX);
        rtt.update(Duration::MAX);
        assert_eq!(rtt.smoothed(), Some(Duration::MAX));
        rtt.update(Duration::from_millis(10));
        assert_eq!(rtt.min(), Some(Duration::from_millis(10)));
        rtt.invariants().unwrap();
    }

    #[test]
    fn a_zero_sample_counts_as_one_nanosecond() {
        let mut rtt = PathRtt::new();
        rtt.update(Duration::ZERO);
        assert_eq!(rtt.min(), Some(Duration::from_nanos(1)));
        rtt.invariants().unwrap();
    }
}
