//! The headline table: one row per end-to-end workload with Tern's figure,
//! its ceiling and share, and quinn's figure and Tern ÷ quinn where quinn
//! ran; then the best tern-sockio backend beside its raw ceiling. It is what
//! a reader of `cargo xtask bench` came for; `--all` adds the full table.
//!
//! Rows come from the metric names, so a new workload needs no change here:
//! every `e2e/<transport>/<workload>/<measure>` of Tern or quinn is a row.

use crate::metric::{Better, Metric};
use crate::table::Table;
use crate::units::Scale;

/// Transport names in end-to-end metric names.
const TERN: &str = "tern";
const QUINN: &str = "quinn";

/// The headline of `metrics` (empty when they hold none of its rows).
pub(crate) fn headline_table(metrics: &[Metric]) -> Table {
    let find = |name: &str| metrics.iter().find(|m| m.name == name);
    let mut workloads: Vec<&str> = Vec::new();
    for metric in metrics {
        if let Some((transport, workload)) = split_e2e(&metric.name)
            && (transport == TERN || transport == QUINN)
            && !workloads.contains(&workload)
        {
            workloads.push(workload);
        }
    }
    let mut rows: Vec<Vec<String>> = workloads
        .iter()
        .map(|workload| {
            let tern = find(&format!("e2e/{TERN}/{workload}"));
            let quinn = find(&format!("e2e/{QUINN}/{workload}"));
            row(workload, tern, quinn, metrics)
        })
        .collect();
    if let Some(best) = best_sockio(metrics) {
        rows.push(row(
            &format!(
                "udp datagrams ({})",
                best.name.trim_start_matches("sockio/")
            ),
            Some(best),
            None,
            metrics,
        ));
    }
    Table::new(
        vec![
            "workload",
            "Tern",
            "ceiling",
            "of ceiling",
            "quinn",
            "Tern ÷ quinn",
        ],
        vec![false, true, true, true, true, true],
        rows,
    )
}

/// `e2e/<transport>/<rest>` as (transport, rest).
fn split_e2e(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("e2e/")?.split_once('/')
}

/// The fastest non-raw tern-sockio backend at 1452-byte datagrams.
fn best_sockio(metrics: &[Metric]) -> Option<&Metric> {
    metrics
        .iter()
        .filter(|m| {
            m.name.starts_with("sockio/")
                && !m.name.starts_with("sockio/raw_")
                && m.name.contains("/1452B/")
                && m.name.ends_with("/datagrams_per_s")
        })
        .max_by(|a, b| a.median.total_cmp(&b.median))
}

fn value(metric: &Metric) -> String {
    let scale = Scale::for_value(metric.median, &metric.unit);
    format!("{} {}", scale.format(metric.median), scale.unit)
}

fn row(label: &str, tern: Option<&Metric>, quinn: Option<&Metric>, all: &[Metric]) -> Vec<String> {
    let ceiling = tern
        .and_then(|t| t.ceiling.as_deref())
        .and_then(|name| all.iter().find(|m| m.name == name));
    let share = match (tern, ceiling) {
        (Some(t), Some(c)) if c.unit == t.unit && c.median != 0.0 => {
            format!("{:.0} %", 100.0 * t.median / c.median)
        }
        _ => String::new(),
    };
    let ratio = match (tern, quinn) {
        (Some(t), Some(q)) if q.unit == t.unit && q.median != 0.0 => {
            let better = match t.better {
                Better::Higher => t.median >= q.median,
                Better::Lower => t.median <= q.median,
            };
            format!(
                "{:.2}x {}",
                t.median / q.median,
                if better { "ahead" } else { "behind" }
            )
        }
        _ => String::new(),
    };
    vec![
        label.to_owned(),
        tern.map_or_else(|| "not run".to_owned(), value),
        ceiling.map(value).unwrap_or_default(),
        share,
        quinn.map(value).unwrap_or_default(),
        ratio,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Summary;

    fn metric(name: &str, unit: &str, better: Better, median: f64) -> Metric {
        let summary = Summary {
            median,
            min: median,
            max: median,
            samples: 3,
        };
        Metric::new(name.to_owned(), 2, unit, better, summary)
    }

    #[test]
    fn a_row_per_workload_with_ceiling_share_and_quinn() {
        let mut tern = metric("e2e/tern/bulk/bytes_per_s", "B/s", Better::Higher, 1.5e9);
        tern.ceiling = Some("e2e/raw/bulk/bytes_per_s".to_owned());
        let metrics = vec![
            metric("level0_wire/seal/tern", "ns", Better::Lower, 700.0),
            tern,
            metric("e2e/raw/bulk/bytes_per_s", "B/s", Better::Higher, 2.0e9),
            metric("e2e/quinn/bulk/bytes_per_s", "B/s", Better::Higher, 1.0e9),
            metric("e2e/quinn/rr64/p50", "ns", Better::Lower, 60_000.0),
            metric("e2e/tern/rr64/p50", "ns", Better::Lower, 30_000.0),
        ];
        let text = headline_table(&metrics).to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[2].starts_with("bulk/bytes_per_s"), "{text}");
        assert!(
            lines[2].contains("75 %") && lines[2].contains("1.50x ahead"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("rr64/p50") && lines[3].contains("0.50x ahead"),
            "{text}"
        );
    }

    #[test]
    fn quinn_alone_shows_tern_as_not_run_and_sockio_picks_the_fastest_backend() {
        let metrics = vec![
            metric("e2e/quinn/connect/p50", "ns", Better::Lower, 400_000.0),
            metric(
                "sockio/mmsg/1452B/batch500/datagrams_per_s",
                "datagrams/s",
                Better::Higher,
                3e5,
            ),
            metric(
                "sockio/offload/1452B/batch500/datagrams_per_s",
                "datagrams/s",
                Better::Higher,
                7e6,
            ),
            metric(
                "sockio/raw_gso/1452B/batch500/datagrams_per_s",
                "datagrams/s",
                Better::Higher,
                8e6,
            ),
        ];
        let text = headline_table(&metrics).to_text();
        assert!(
            text.contains("connect/p50") && text.contains("not run"),
            "{text}"
        );
        assert!(
            text.contains("udp datagrams (offload/1452B/batch500/datagrams_per_s)"),
            "{text}"
        );
        assert!(
            !text.contains("raw_gso/1452B/batch500/datagrams_per_s)"),
            "{text}"
        );
    }

    #[test]
    fn nothing_to_headline_is_an_empty_table() {
        let metrics = vec![metric("level0_wire/seal/tern", "ns", Better::Lower, 700.0)];
        assert!(headline_table(&metrics).is_empty());
    }
}
