//! One measured quantity: its name, level, unit, direction and summary.
//!
//! Both sources end up here: divan rows arrive already summarised (fastest,
//! slowest, median, sample count) and harness lines arrive as raw samples,
//! summarised by [`Summary::of`].

use serde::{Deserialize, Serialize};

/// Which direction of change is an improvement for a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Better {
    /// Larger is better (throughput, datagrams per syscall).
    Higher,
    /// Smaller is better (time per operation, latency, allocations).
    Lower,
}

/// Median, extremes and number of a set of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Summary {
    /// The middle sample; the mean of the two middle ones for an even count.
    pub(crate) median: f64,
    /// The smallest sample.
    pub(crate) min: f64,
    /// The largest sample.
    pub(crate) max: f64,
    /// How many samples were summarised.
    pub(crate) samples: usize,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none or one is not finite,
    /// because a median over NaN or infinity would silently mislead.
    pub(crate) fn of(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            samples: n,
        })
    }
}

/// A metric as stored in a result file and printed in the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Metric {
    /// `/`-separated, unique within a run, e.g. `level0_wire/seal/tern/1452`.
    pub(crate) name: String,
    /// Benchmark level 0–3; it picks the noise threshold.
    pub(crate) level: u8,
    /// Unit of `median`, `min` and `max`, e.g. `ns`, `B/s`, `datagrams/s`.
    pub(crate) unit: String,
    /// Which direction of change is an improvement.
    pub(crate) better: Better,
    /// Median of the samples.
    pub(crate) median: f64,
    /// Smallest sample.
    pub(crate) min: f64,
    /// Largest sample.
    pub(crate) max: f64,
    /// Number of samples behind the summary.
    pub(crate) samples: usize,
    /// Name of the metric in the same run that limits this one (raw UDP with
    /// the same backend, raw AEAD): the table prints the ratio to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ceiling: Option<String>,
}

impl Metric {
    /// A metric without a ceiling from a summary.
    pub(crate) fn new(name: String, level: u8, unit: &str, better: Better, s: Summary) -> Self {
        Self {
            name,
            level,
            unit: unit.to_owned(),
            better,
            median: s.median,
            min: s.min,
            max: s.max,
            samples: s.samples,
            ceiling: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count_takes_the_middle_sample() {
        let s = Summary::of(&[5.0, 1.0, 3.0]).expect("finite samples");
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert_eq!(s.samples, 3);
    }

    #[test]
    fn even_count_averages_the_two_middle_samples() {
        let s = Summary::of(&[10.0, 2.0, 4.0, 8.0]).expect("finite samples");
        assert_eq!(s.median, 6.0);
        assert_eq!(s.min, 2.0);
        assert_eq!(s.max, 10.0);
        assert_eq!(s.samples, 4);
    }

    #[test]
    fn single_sample_is_its_own_median_min_and_max() {
        let s = Summary::of(&[612_345.0]).expect("finite sample");
        assert_eq!(
            (s.median, s.min, s.max, s.samples),
            (612_345.0, 612_345.0, 612_345.0, 1)
        );
    }

    #[test]
    fn no_samples_or_non_finite_samples_give_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::of(&[f64::INFINITY]), None);
    }

    #[test]
    fn better_serialises_as_the_contract_spells_it() {
        assert_eq!(
            serde_json::to_string(&Better::Higher).expect("serialise"),
            "\"higher\""
        );
        assert_eq!(
            serde_json::from_str::<Better>("\"lower\"").expect("deserialise"),
            Better::Lower
        );
    }
}
