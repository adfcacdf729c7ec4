//! Ceilings for divan metrics, by naming convention.
//!
//! The harness names each metric's ceiling itself; divan's text has no room
//! for that. So a level 0–1 throughput whose path has a `tern` segment takes
//! as its ceiling the metric of the same run that differs only by a `raw_*`
//! segment there (`level0_wire/seal/tern/1452/throughput` →
//! `level0_wire/seal/raw_aes_gcm/1452/throughput`), when exactly one exists
//! in the same unit. Only higher-is-better metrics get one: for a time the
//! raw figure is a floor, not a ceiling.

use crate::metric::{Better, Metric};

/// Segment that marks Tern's own implementation in a benchmark path.
const TERN: &str = "tern";
/// Prefix that marks the bare primitive measured beside it.
const RAW: &str = "raw_";

/// Sets the ceiling of every metric without one that has a `raw_*` twin.
pub(crate) fn assign_divan_ceilings(metrics: &mut [Metric]) {
    let found: Vec<Option<String>> = metrics.iter().map(|m| raw_twin(m, metrics)).collect();
    for (metric, ceiling) in metrics.iter_mut().zip(found) {
        if metric.ceiling.is_none() {
            metric.ceiling = ceiling;
        }
    }
}

fn raw_twin(metric: &Metric, metrics: &[Metric]) -> Option<String> {
    if metric.better != Better::Higher || metric.level > 1 {
        return None;
    }
    let segments: Vec<&str> = metric.name.split('/').collect();
    let at = segments.iter().position(|s| *s == TERN)?;
    let mut twins = metrics.iter().filter(|other| {
        let theirs: Vec<&str> = other.name.split('/').collect();
        other.unit == metric.unit
            && theirs.len() == segments.len()
            && theirs[at].starts_with(RAW)
            && theirs
                .iter()
                .zip(&segments)
                .enumerate()
                .all(|(i, (a, b))| i == at || a == b)
    });
    let twin = twins.next()?;
    twins.next().is_none().then(|| twin.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Summary;

    fn metric(name: &str, unit: &str, better: Better) -> Metric {
        let summary = Summary {
            median: 1.0,
            min: 1.0,
            max: 1.0,
            samples: 1,
        };
        Metric::new(name.to_owned(), 0, unit, better, summary)
    }

    #[test]
    fn a_tern_throughput_takes_its_raw_twin_as_ceiling() {
        let mut metrics = vec![
            metric(
                "level0_wire/seal/tern/1452/throughput",
                "B/s",
                Better::Higher,
            ),
            metric("level0_wire/seal/tern/1452", "ns", Better::Lower),
            metric(
                "level0_wire/seal/raw_aes_gcm/1452/throughput",
                "B/s",
                Better::Higher,
            ),
            metric("level0_wire/seal/raw_aes_gcm/1452", "ns", Better::Lower),
            metric(
                "level0_wire/seal/raw_aes_gcm/64/throughput",
                "B/s",
                Better::Higher,
            ),
            metric(
                "level0_wire/packet_creation/tern/64/throughput",
                "B/s",
                Better::Higher,
            ),
        ];
        assign_divan_ceilings(&mut metrics);
        assert_eq!(
            metrics[0].ceiling.as_deref(),
            Some("level0_wire/seal/raw_aes_gcm/1452/throughput")
        );
        assert_eq!(
            metrics[1].ceiling, None,
            "a time has a floor, not a ceiling"
        );
        assert_eq!(metrics[5].ceiling, None, "no raw twin");
        assert!(metrics[2..5].iter().all(|m| m.ceiling.is_none()));
    }

    #[test]
    fn two_raw_twins_are_ambiguous_and_a_named_ceiling_is_kept() {
        let mut metrics = vec![
            metric("l0/open/tern/64/throughput", "B/s", Better::Higher),
            metric("l0/open/raw_aes_gcm/64/throughput", "B/s", Better::Higher),
            metric("l0/open/raw_ring/64/throughput", "B/s", Better::Higher),
            metric("l0/seal/tern/64/throughput", "B/s", Better::Higher),
            metric("l0/seal/raw_ring/64/throughput", "B/s", Better::Higher),
        ];
        metrics[3].ceiling = Some("named/by/the/source".to_owned());
        assign_divan_ceilings(&mut metrics);
        assert_eq!(metrics[0].ceiling, None);
        assert_eq!(metrics[3].ceiling.as_deref(), Some("named/by/the/source"));
    }
}
