//! The headline table: one row per end-to-end workload with Tern's figure,
//! its ceiling and share, and quinn's figure and Tern ÷ quinn where quinn
//! ran; then the best tern-sockio backend beside its raw ceiling. It is what
//! a reader of `cargo xtask bench` came for; `--all` adds the full table.
//! Tern ÷ quinn is how many times better Tern is, on rates and times alike
//! (> 1 = ahead; [`times_better`]).
//!
//! Rows come from the metric names, so a new workload needs no change here:
//! in `e2e/<transport>/<workload>/<measure>` of Tern or quinn, the workload
//! is everything between the transport and the last segment (`bulk`,
//! `message_4k/rtt2ms`). A workload nested in another (`bulk/pipeline`, a
//! ceiling of `bulk`) is no row of its own. Each row shows one measure, the
//! first of [`PRIMARY`] the workload has; p95, p99 and the secondary
//! measures are in the full table (`--all`).

use crate::metric::{Better, Metric};
use crate::table::Table;
use crate::units::Scale;

/// Transport names in end-to-end metric names.
const TERN: &str = "tern";
const QUINN: &str = "quinn";

/// The measure a workload's row shows, most telling first: the figure its
/// bar is set on (4-stream degradation, datagrams per receive call of the
/// many clients), else its rate, else its median latency. A workload with
/// none of these shows the first measure it has.
const PRIMARY: [&str; 7] = [
    "degradation",
    "datagrams_per_recv_call",
    "bytes_per_s",
    "requests_per_s",
    "messages_per_s",
    "achieved_share",
    "p50",
];

/// Tern workloads quinn has no figure of its own for, each with the quinn
/// workload its row compares with: Tern's connects with other identities
/// against quinn's one cold connect (a full TLS 1.3 handshake).
const QUINN_COUNTERPARTS: [(&str, &str); 2] = [
    ("connect_x25519", "connect"),
    ("connect_resumed", "connect"),
];

/// The quinn workload a Tern-only `workload` compares with, if any.
fn quinn_counterpart(workload: &str) -> Option<&'static str> {
    QUINN_COUNTERPARTS
        .iter()
        .find(|(tern, _)| *tern == workload)
        .map(|(_, quinn)| *quinn)
}

/// The headline of `metrics` (empty when they hold none of its rows).
pub(crate) fn headline_table(metrics: &[Metric]) -> Table {
    let find = |name: &str| metrics.iter().find(|m| m.name == name);
    let mut rows: Vec<Vec<String>> = primary_measures(metrics)
        .iter()
        .map(|(workload, measure)| {
            let tern = find(&format!("e2e/{TERN}/{workload}/{measure}"));
            let quinn = find(&format!("e2e/{QUINN}/{workload}/{measure}")).or_else(|| {
                let counterpart = quinn_counterpart(workload)?;
                find(&format!("e2e/{QUINN}/{counterpart}/{measure}"))
            });
            row(&format!("{workload}/{measure}"), tern, quinn, metrics)
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

/// `e2e/<transport>/<workload>/<measure>` as (transport, workload, measure).
fn split_e2e(name: &str) -> Option<(&str, &str, &str)> {
    let (transport, rest) = name.strip_prefix("e2e/")?.split_once('/')?;
    let (workload, measure) = rest.rsplit_once('/')?;
    Some((transport, workload, measure))
}

/// Each workload of Tern or quinn, in order of first appearance, with the
/// measure its row shows.
fn primary_measures(metrics: &[Metric]) -> Vec<(&str, &str)> {
    let mut workloads: Vec<(&str, Vec<&str>)> = Vec::new();
    for metric in metrics {
        let Some((transport, workload, measure)) = split_e2e(&metric.name) else {
            continue;
        };
        if transport != TERN && transport != QUINN {
            continue;
        }
        match workloads.iter_mut().find(|(w, _)| *w == workload) {
            Some((_, measures)) if !measures.contains(&measure) => measures.push(measure),
            Some(_) => {}
            None => workloads.push((workload, vec![measure])),
        }
    }
    let nested = |workload: &str| {
        workloads.iter().any(|(outer, _)| {
            workload
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('/'))
        })
    };
    workloads
        .iter()
        .filter(|(workload, _)| !nested(workload))
        .filter_map(|(workload, measures)| {
            let primary = PRIMARY
                .iter()
                .find(|p| measures.contains(p))
                .or(measures.first())?;
            Some((*workload, *primary))
        })
        .collect()
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

/// How many times better Tern's `tern` is than quinn's `quinn` on a metric
/// that is better `better`: Tern's rate ÷ quinn's, quinn's time ÷ Tern's.
/// So the column reads one way on every row, > 1 = Tern ahead (a time of
/// 40 µs against quinn's 80 µs is 2x ahead, not "0.5x"). `None` when the
/// divisor is zero.
fn times_better(better: Better, tern: f64, quinn: f64) -> Option<f64> {
    let (numerator, divisor) = match better {
        Better::Higher => (tern, quinn),
        Better::Lower => (quinn, tern),
    };
    (divisor != 0.0).then(|| numerator / divisor)
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
        (Some(t), Some(q)) if q.unit == t.unit => times_better(t.better, t.median, q.median)
            .map(|times| {
                let side = if times >= 1.0 { "ahead" } else { "behind" };
                format!("{times:.2}x {side}")
            })
            .unwrap_or_default(),
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
            lines[3].starts_with("rr64/p50") && lines[3].contains("2.00x ahead"),
            "{text}"
        );
    }

    #[test]
    fn tern_over_quinn_is_how_many_times_better_tern_is_whichever_way_the_metric_goes() {
        // Rates: Tern's ÷ quinn's.
        assert_eq!(times_better(Better::Higher, 1.5e9, 1.0e9), Some(1.5));
        assert_eq!(times_better(Better::Higher, 1.0e9, 2.0e9), Some(0.5));
        // Times: quinn's ÷ Tern's, so faster is > 1 too.
        assert_eq!(times_better(Better::Lower, 40.0, 80.0), Some(2.0));
        assert_eq!(times_better(Better::Lower, 1_500.0, 375.0), Some(0.25));
        assert_eq!(times_better(Better::Lower, 73.0, 73.0), Some(1.0));
        // Nothing to divide by.
        assert_eq!(times_better(Better::Higher, 1.0, 0.0), None);
        assert_eq!(times_better(Better::Lower, 0.0, 1.0), None);
    }

    #[test]
    fn a_latency_row_faster_than_quinn_reads_ahead_above_one() {
        let metrics = vec![
            metric("e2e/tern/message_4k/rtt0ms/p50", "ns", Better::Lower, 66e3),
            metric("e2e/quinn/message_4k/rtt0ms/p50", "ns", Better::Lower, 81e3),
            metric("e2e/tern/connect/p50", "ns", Better::Lower, 1.5e6),
            metric("e2e/quinn/connect/p50", "ns", Better::Lower, 375e3),
            metric("e2e/tern/streams4/degradation", "x", Better::Lower, 1.0),
            metric("e2e/quinn/streams4/degradation", "x", Better::Lower, 1.1),
        ];
        let text = headline_table(&metrics).to_text();
        let line = |workload: &str| {
            text.lines()
                .find(|l| l.starts_with(workload))
                .unwrap_or_else(|| panic!("no {workload} row in {text}"))
        };
        assert!(line("message_4k").ends_with("1.23x ahead"), "{text}");
        assert!(line("connect").ends_with("0.25x behind"), "{text}");
        assert!(line("streams4").ends_with("1.10x ahead"), "{text}");
    }

    #[test]
    fn a_connect_with_other_identities_compares_with_quinns_cold_connect() {
        let metrics = vec![
            metric("e2e/tern/connect/p50", "ns", Better::Lower, 1.5e6),
            metric("e2e/tern/connect_x25519/p50", "ns", Better::Lower, 150e3),
            metric("e2e/quinn/connect/p50", "ns", Better::Lower, 375e3),
        ];
        let text = headline_table(&metrics).to_text();
        let rows: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(rows[0].starts_with("connect/p50"), "{text}");
        assert!(
            rows[1].starts_with("connect_x25519/p50")
                && rows[1].contains("375 µs")
                && rows[1].ends_with("2.50x ahead"),
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
    fn one_row_per_workload_shows_its_primary_measure() {
        let higher = |name: &str, unit: &str| metric(name, unit, Better::Higher, 1.0);
        let lower = |name: &str| metric(name, "ns", Better::Lower, 1.0);
        let mut metrics = vec![
            higher("e2e/tern/bulk/mb_per_cpu_s", "MB/cpu-s"),
            higher("e2e/tern/bulk/bytes_per_s", "B/s"),
            higher("e2e/tern/bulk/pipeline/bytes_per_s", "B/s"),
            higher("e2e/tern/bulk/sockio/bytes_per_s", "B/s"),
            higher("e2e/quinn/bulk/pipeline/bytes_per_s", "B/s"),
            higher("e2e/quinn/bulk/bytes_per_s", "B/s"),
            higher("e2e/tern/streams4/bytes_per_s", "B/s"),
            higher("e2e/tern/streams4/degradation", "x"),
            higher("e2e/tern/clients50/bytes_per_s", "B/s"),
            higher(
                "e2e/tern/clients50/datagrams_per_recv_call",
                "datagrams/call",
            ),
            higher("e2e/quinn/clients50/bytes_per_s", "B/s"),
            higher("e2e/tern/msgs1k/messages_per_s", "messages/s"),
            higher("e2e/tern/ratecap/10mbit/achieved_share", "share"),
            higher("e2e/tern/ratecap/100mbit/achieved_share", "share"),
        ];
        for transport in ["tern", "quinn"] {
            for measure in ["p50", "p95", "p99"] {
                metrics.push(lower(&format!("e2e/{transport}/rr64/{measure}")));
                metrics.push(lower(&format!(
                    "e2e/{transport}/message_4k/rtt2ms/{measure}"
                )));
            }
            metrics.push(higher(
                &format!("e2e/{transport}/rr64/requests_per_s"),
                "requests/s",
            ));
            metrics.push(lower(&format!("e2e/{transport}/connect/p99")));
            metrics.push(lower(&format!("e2e/{transport}/connect/p50")));
        }
        assert_eq!(
            primary_measures(&metrics),
            [
                ("bulk", "bytes_per_s"),
                ("streams4", "degradation"),
                ("clients50", "datagrams_per_recv_call"),
                ("msgs1k", "messages_per_s"),
                ("ratecap/10mbit", "achieved_share"),
                ("ratecap/100mbit", "achieved_share"),
                ("rr64", "requests_per_s"),
                ("message_4k/rtt2ms", "p50"),
                ("connect", "p50"),
            ]
        );
        let text = headline_table(&metrics).to_text();
        assert_eq!(text.lines().count(), 2 + 9, "{text}");
        assert!(
            !text.contains("p99") && !text.contains("pipeline"),
            "{text}"
        );
    }

    #[test]
    fn a_workload_with_no_primary_measure_shows_its_first() {
        let metrics = vec![
            metric("e2e/tern/rr64/p99", "ns", Better::Lower, 1.0),
            metric("e2e/tern/rr64/p95", "ns", Better::Lower, 1.0),
            metric("e2e/tern", "ns", Better::Lower, 1.0),
        ];
        assert_eq!(primary_measures(&metrics), [("rr64", "p99")]);
    }

    #[test]
    fn nothing_to_headline_is_an_empty_table() {
        let metrics = vec![metric("level0_wire/seal/tern", "ns", Better::Lower, 700.0)];
        assert!(headline_table(&metrics).is_empty());
    }
}
