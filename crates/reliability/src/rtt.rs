//! Round-trip time estimation in the manner of RFC 9002 §5.
//!
//! The estimator keeps four figures: the latest sample, the minimum over the
//! connection, an exponentially weighted smoothed RTT and its mean variation.
//! Loss detection reads them to size its time threshold and probe timeout;
//! congestion control may read `min_rtt` and `smoothed_rtt`.

use std::time::Duration;

/// RFC 9002 §6.2.2: "When no previous RTT is available, the initial RTT
/// SHOULD be set to 333 milliseconds."
pub const DEFAULT_INITIAL_RTT: Duration = Duration::from_millis(333);

/// An RTT estimator (RFC 9002 §5).
///
/// Feed it one sample per ACK that newly acknowledges the largest acknowledged
/// packet ([`RttEstimator::update`]); [`crate::LossDetector`] does this for
/// you.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// The value the estimator starts from and returns to on [`RttEstimator::reset`].
    initial: Duration,
    /// Most recent raw sample (ack time − send time), not adjusted for ack delay.
    latest: Duration,
    /// EWMA of the ack-delay-adjusted samples.
    smoothed: Duration,
    /// Mean deviation of the adjusted samples.
    rttvar: Duration,
    /// Lowest raw sample seen; `None` before the first sample.
    min: Option<Duration>,
}

impl RttEstimator {
    /// A fresh estimator that assumes `initial` until the first sample.
    ///
    /// RFC 9002 §5.3: "smoothed_rtt = kInitialRtt; rttvar = kInitialRtt / 2".
    #[must_use]
    pub fn new(initial: Duration) -> Self {
        Self {
            initial,
            latest: initial,
            smoothed: initial,
            rttvar: initial / 2,
            min: None,
        }
    }

    /// Forgets every sample (e.g. after a path change) and starts again from the initial RTT.
    pub fn reset(&mut self) {
        *self = Self::new(self.initial);
    }

    /// Adds one RTT sample.
    ///
    /// `latest_rtt` is the time from sending the largest newly acknowledged
    /// packet to receiving its acknowledgement; `ack_delay` is the delay the
    /// peer reported, already limited to the peer's `max_ack_delay` by the
    /// caller (RFC 9002 §5.3 "MUST use the lesser of the acknowledgment delay
    /// and the peer's max_ack_delay after the handshake is confirmed").
    pub fn update(&mut self, latest_rtt: Duration, ack_delay: Duration) {
        self.latest = latest_rtt;
        // RFC 9002 §5.2: "min_rtt MUST be set to the latest_rtt on the first RTT
        // sample. min_rtt MUST be set to the lesser of min_rtt and latest_rtt
        // (Section 5.1) on all other samples."
        let Some(min) = self.min else {
            // RFC 9002 §5.3: "On the first RTT sample after initialization,
            // smoothed_rtt and rttvar are set as follows: smoothed_rtt =
            // latest_rtt; rttvar = latest_rtt / 2".
            self.min = Some(latest_rtt);
            self.smoothed = latest_rtt;
            self.rttvar = latest_rtt / 2;
            return;
        };
        let min = min.min(latest_rtt);
        self.min = Some(min);
        // RFC 9002 §5.3: an endpoint "MUST NOT subtract the acknowledgment
        // delay from the RTT sample if the resulting value is smaller than the
        // min_rtt."
        let adjusted = match min.checked_add(ack_delay) {
            Some(floor) if latest_rtt >= floor => latest_rtt - ack_delay,
            _ => latest_rtt,
        };
        // RFC 9002 §5.3: "smoothed_rtt = 7/8 * smoothed_rtt + 1/8 * adjusted_rtt;
        // rttvar_sample = abs(smoothed_rtt - adjusted_rtt); rttvar = 3/4 *
        // rttvar + 1/4 * rttvar_sample". As in the RFC's pseudocode (Appendix
        // A.7) the variation is measured against the previous smoothed_rtt.
        let rttvar_sample = self.smoothed.abs_diff(adjusted);
        self.rttvar = (self.rttvar.saturating_mul(3) + rttvar_sample) / 4;
        self.smoothed = (self.smoothed.saturating_mul(7) + adjusted) / 8;
    }

    /// Persistent congestion was established: RFC 9002 §5.2 says endpoints
    /// "SHOULD set the min_rtt to the newest RTT sample after persistent
    /// congestion is established", since the path may have changed. Tern
    /// takes the newest sample, but not above the smoothed RTT, so that
    /// `min_rtt <= smoothed_rtt` keeps holding (pacing and LEDBAT's restart
    /// after a slowdown divide by one and multiply by the other).
    pub fn on_persistent_congestion(&mut self) {
        if self.min.is_some() {
            self.min = Some(self.latest.min(self.smoothed));
        }
    }

    /// The most recent raw sample, or the initial RTT before any sample.
    #[must_use]
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The smoothed RTT (initial RTT before any sample).
    #[must_use]
    pub fn smoothed(&self) -> Duration {
        self.smoothed
    }

    /// The RTT variation (half the initial RTT before any sample).
    #[must_use]
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The minimum raw sample over the connection; `None` before the first sample.
    #[must_use]
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// Whether at least one sample has been taken.
    #[must_use]
    pub fn has_sample(&self) -> bool {
        self.min.is_some()
    }

    /// The probe timeout before back-off, RFC 9002 §6.2.1:
    /// "PTO = smoothed_rtt + max(4*rttvar, kGranularity) + max_ack_delay".
    #[must_use]
    pub fn pto_base(&self, granularity: Duration, max_ack_delay: Duration) -> Duration {
        self.smoothed
            .saturating_add(self.rttvar.saturating_mul(4).max(granularity))
            .saturating_add(max_ack_delay)
    }

    /// Checks the estimator's internal consistency.
    ///
    /// # Errors
    /// A description of the first broken invariant.
    pub fn invariants(&self) -> Result<(), String> {
        if let Some(min) = self.min {
            if min > self.latest {
                return Err(format!(
                    "min_rtt {min:?} exceeds latest_rtt {:?}",
                    self.latest
                ));
            }
            // Every adjusted sample is at least the min_rtt of its time, and
            // min_rtt only falls, so the average cannot sink below it.
            if self.smoothed < min {
                return Err(format!(
                    "smoothed_rtt {:?} below min_rtt {min:?}",
                    self.smoothed
                ));
            }
        }
        Ok(())
    }
}

impl Default for RttEstimator {
    fn default() -> Self {
        Self::new(DEFAULT_INITIAL_RTT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn before_any_sample_estimator_uses_initial_rtt() {
        let rtt = RttEstimator::default();
        assert_eq!(rtt.smoothed(), 333 * MS);
        assert_eq!(rtt.rttvar(), Duration::from_micros(166_500));
        assert_eq!(rtt.min(), None);
        // 333 + 4 × 166.5 + 25 ≈ 1 s + max_ack_delay, as RFC 9002 §6.2.2 intends.
        assert_eq!(rtt.pto_base(MS, 25 * MS), 1024 * MS);
    }

    #[test]
    fn first_sample_replaces_initial_values_and_ignores_ack_delay() {
        let mut rtt = RttEstimator::new(333 * MS);
        rtt.update(100 * MS, 20 * MS);
        assert_eq!(rtt.smoothed(), 100 * MS);
        assert_eq!(rtt.rttvar(), 50 * MS);
        assert_eq!(rtt.min(), Some(100 * MS));
        assert_eq!(rtt.latest(), 100 * MS);
    }

    #[test]
    fn later_samples_are_averaged_with_ack_delay_subtracted() {
        let mut rtt = RttEstimator::new(333 * MS);
        rtt.update(100 * MS, Duration::ZERO);
        rtt.update(140 * MS, 20 * MS);
        // adjusted = 120; smoothed = 7/8·100 + 1/8·120 = 102.5; rttvar = 3/4·50 + 1/4·20 = 42.5
        assert_eq!(rtt.smoothed(), Duration::from_micros(102_500));
        assert_eq!(rtt.rttvar(), Duration::from_micros(42_500));
        assert_eq!(rtt.min(), Some(100 * MS));
    }

    #[test]
    fn ack_delay_that_would_go_below_min_rtt_is_not_subtracted() {
        let mut rtt = RttEstimator::new(333 * MS);
        rtt.update(100 * MS, Duration::ZERO);
        rtt.update(110 * MS, 50 * MS);
        // 110 − 50 < 100, so the raw 110 is used.
        assert_eq!(rtt.smoothed(), Duration::from_micros(101_250));
    }

    #[test]
    fn min_rtt_follows_the_lowest_raw_sample() {
        let mut rtt = RttEstimator::new(333 * MS);
        rtt.update(100 * MS, Duration::ZERO);
        rtt.update(60 * MS, Duration::ZERO);
        rtt.update(200 * MS, Duration::ZERO);
        assert_eq!(rtt.min(), Some(60 * MS));
        assert_eq!(rtt.latest(), 200 * MS);
    }

    #[test]
    fn reset_returns_to_initial_rtt() {
        let mut rtt = RttEstimator::new(50 * MS);
        rtt.update(10 * MS, Duration::ZERO);
        rtt.reset();
        assert_eq!(rtt.smoothed(), 50 * MS);
        assert!(!rtt.has_sample());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_sample_sequence_keeps_invariants(
            samples in prop::collection::vec((0u64..10_000_000, 0u64..1_000_000), 1..64)
        ) {
            let mut rtt = RttEstimator::default();
            for (latest_us, delay_us) in samples {
                rtt.update(Duration::from_micros(latest_us), Duration::from_micros(delay_us));
                prop_assert_eq!(rtt.invariants(), Ok(()));
            }
        }
    }
}
