//! Comparing a run with a saved baseline, metric by metric.
//!
//! A change of the median smaller than the level's noise band is noise; a
//! larger one is an improvement or a regression depending on the metric's
//! `better`. The bands are the reference suite's: 2 % for pure computation
//! (level 0), 5 % for protocol logic (1), 10 % for loopback UDP (2) and 15 %
//! for stress (3).

use crate::metric::{Better, Metric};
use crate::results::Run;

/// The relative change of the median that is still noise at `level`.
pub(crate) fn noise_threshold(level: u8) -> f64 {
    match level {
        0 => 0.02,
        1 => 0.05,
        2 => 0.10,
        _ => 0.15,
    }
}

/// What a change means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Better by more than the noise band.
    Improved,
    /// Worse by more than the noise band.
    Regressed,
    /// Within the noise band.
    Noise,
    /// The baseline has no such metric.
    New,
    /// The baseline measured it in another unit.
    Incomparable,
}

impl Verdict {
    /// How the table and report spell it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Improved => "improved",
            Self::Regressed => "REGRESSED",
            Self::Noise => "within noise",
            Self::New => "new",
            Self::Incomparable => "unit changed",
        }
    }
}

/// One metric of the current run against the baseline.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    /// The metric's name.
    pub(crate) name: String,
    /// The baseline's median, when comparable.
    pub(crate) baseline: Option<f64>,
    /// `(current - baseline) / baseline`; `None` if the baseline is zero or absent.
    pub(crate) relative: Option<f64>,
    /// What the change means.
    pub(crate) verdict: Verdict,
}

/// Classifies the move of a median from `old` to `new`.
pub(crate) fn classify(better: Better, level: u8, old: f64, new: f64) -> (Option<f64>, Verdict) {
    let relative = (old != 0.0).then(|| (new - old) / old.abs());
    let beyond_noise = match relative {
        Some(r) => r.abs() > noise_threshold(level),
        // From zero (e.g. allocations per iteration) any change is real.
        None => new != old,
    };
    let verdict = if !beyond_noise {
        Verdict::Noise
    } else if (new > old) == (better == Better::Higher) {
        Verdict::Improved
    } else {
        Verdict::Regressed
    };
    (relative, verdict)
}

/// Compares `current` with the same-named metric of `baseline`.
pub(crate) fn compare(current: &Metric, baseline: &Run) -> Change {
    let (baseline_median, relative, verdict) = match baseline.metric(&current.name) {
        None => (None, None, Verdict::New),
        Some(old) if old.unit != current.unit => (None, None, Verdict::Incomparable),
        Some(old) => {
            let (relative, verdict) =
                classify(current.better, current.level, old.median, current.median);
            (Some(old.median), relative, verdict)
        }
    };
    Change {
        name: current.name.clone(),
        baseline: baseline_median,
        relative,
        verdict,
    }
}

/// `+3.2 %`, `-12 %`, or the direction of a change from zero.
pub(crate) fn format_relative(change: &Change) -> String {
    match (change.relative, change.baseline) {
        (Some(r), _) => format!("{:+.1} %", r * 100.0),
        (None, Some(_)) if change.verdict != Verdict::Noise => "from 0".to_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Environment;
    use crate::metric::Summary;

    #[test]
    fn each_level_has_the_reference_noise_band() {
        assert_eq!(noise_threshold(0), 0.02);
        assert_eq!(noise_threshold(1), 0.05);
        assert_eq!(noise_threshold(2), 0.10);
        assert_eq!(noise_threshold(3), 0.15);
    }

    #[test]
    fn slower_time_beyond_the_band_is_a_regression() {
        assert_eq!(
            classify(Better::Lower, 0, 100.0, 103.0).1,
            Verdict::Regressed
        );
        assert_eq!(classify(Better::Lower, 0, 100.0, 97.0).1, Verdict::Improved);
        assert_eq!(classify(Better::Lower, 0, 100.0, 101.9).1, Verdict::Noise);
    }

    #[test]
    fn higher_throughput_beyond_the_band_is_an_improvement() {
        assert_eq!(
            classify(Better::Higher, 2, 1000.0, 1150.0).1,
            Verdict::Improved
        );
        assert_eq!(
            classify(Better::Higher, 2, 1000.0, 850.0).1,
            Verdict::Regressed
        );
        assert_eq!(
            classify(Better::Higher, 2, 1000.0, 1090.0).1,
            Verdict::Noise
        );
        assert_eq!(classify(Better::Higher, 2, 1000.0, 910.0).1, Verdict::Noise);
    }

    #[test]
    fn the_same_change_is_noise_at_a_noisier_level() {
        // +8 %: beyond levels 0 and 1, within 2 and 3.
        let verdicts: Vec<Verdict> = (0..4)
            .map(|level| classify(Better::Lower, level, 100.0, 108.0).1)
            .collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Regressed,
                Verdict::Regressed,
                Verdict::Noise,
                Verdict::Noise
            ]
        );
        // +12 %: only level 3 calls it noise.
        assert_eq!(
            classify(Better::Higher, 2, 100.0, 112.0).1,
            Verdict::Improved
        );
        assert_eq!(classify(Better::Higher, 3, 100.0, 112.0).1, Verdict::Noise);
    }

    #[test]
    fn the_relative_change_is_reported() {
        let (relative, _) = classify(Better::Lower, 1, 200.0, 150.0);
        assert_eq!(relative, Some(-0.25));
    }

    #[test]
    fn a_new_allocation_where_there_was_none_is_a_regression() {
        assert_eq!(
            classify(Better::Lower, 0, 0.0, 1.0),
            (None, Verdict::Regressed)
        );
        assert_eq!(classify(Better::Lower, 0, 0.0, 0.0), (None, Verdict::Noise));
        assert_eq!(
            classify(Better::Higher, 0, 0.0, 5.0),
            (None, Verdict::Improved)
        );
    }

    fn metric(name: &str, unit: &str, median: f64) -> Metric {
        let summary = Summary {
            median,
            min: median,
            max: median,
            samples: 1,
        };
        Metric::new(name.to_owned(), 0, unit, Better::Lower, summary)
    }

    #[test]
    fn metrics_are_matched_by_name_and_unit() {
        let baseline = Run {
            environment: Environment {
                host: String::new(),
                cpu: String::new(),
                kernel: String::new(),
                rustc: String::new(),
                revision: String::new(),
                dirty: false,
            },
            time: String::new(),
            quick: true,
            others_cpu_share: None,
            metrics: vec![metric("a", "ns", 100.0), metric("b", "ns", 10.0)],
        };
        let regressed = compare(&metric("a", "ns", 110.0), &baseline);
        assert_eq!(regressed.verdict, Verdict::Regressed);
        assert_eq!(regressed.baseline, Some(100.0));
        assert_eq!(format_relative(&regressed), "+10.0 %");
        assert_eq!(
            compare(&metric("c", "ns", 1.0), &baseline).verdict,
            Verdict::New
        );
        assert_eq!(
            compare(&metric("b", "B/s", 10.0), &baseline).verdict,
            Verdict::Incomparable
        );
    }
}
