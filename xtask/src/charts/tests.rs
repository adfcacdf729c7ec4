use super::*;
use crate::metric::{Better, Summary};

/// A level-2 metric with three samples at `median` (the e2e charts'
/// tests use it too).
pub(super) fn metric(name: &str, unit: &str, median: f64) -> Metric {
    let summary = Summary {
        median,
        min: median,
        max: median,
        samples: 3,
    };
    Metric::new(name.to_owned(), 2, unit, Better::Higher, summary)
}

fn sample_metrics() -> Vec<Metric> {
    vec![
        metric("level0_wire/seal/tern/64/throughput", "B/s", 0.5e9),
        metric("level0_wire/seal/tern/1452/throughput", "B/s", 1.5e9),
        metric("level0_wire/seal/tern/1452", "ns", 950.0),
        metric("level0_wire/open/tern/1452/throughput", "B/s", 1.4e9),
        metric(
            "sockio/offload/1452B/batch64/datagrams_per_s",
            "datagrams/s",
            612e3,
        ),
        metric(
            "sockio/offload/1452B/batch1/datagrams_per_s",
            "datagrams/s",
            90e3,
        ),
        metric(
            "sockio/offload/64B/batch64/datagrams_per_s",
            "datagrams/s",
            700e3,
        ),
        metric(
            "sockio/portable/1452B/batch1/datagrams_per_s",
            "datagrams/s",
            80e3,
        ),
        metric(
            "sockio/offload/1452B/batch64/mb_per_cpu_s",
            "MB/cpu-s",
            900.0,
        ),
        metric("e2e/latency/1452B/p50", "µs", 40.0),
        metric("e2e/latency/1452B/p99", "µs", 95.0),
        metric("e2e/latency/1452B/p999", "ns", 200_000.0),
        metric("connect/handshake_p95", "ms", 1.5),
        metric("e2e/tern/bulk/bytes_per_s", "B/s", 1.2e9),
        metric("e2e/tern/bulk/pipeline/bytes_per_s", "B/s", 1.6e9),
        metric("e2e/quinn/bulk/bytes_per_s", "B/s", 0.8e9),
        metric("e2e/tern/rr64/p50", "ns", 30e3),
        metric("e2e/quinn/rr64/p50", "ns", 55e3),
        metric("e2e/tern/connect/p99", "ns", 2.5e6),
        metric("e2e/tern/streams4/degradation", "x", 1.05),
    ]
}

#[test]
fn throughput_lines_group_sizes_under_one_name() {
    let series = throughput_series(&sample_metrics());
    assert_eq!(series.len(), 1, "{series:?}");
    assert_eq!(
        series["level0_wire/seal/tern/*/throughput"],
        [(64.0, 0.5e9), (1452.0, 1.5e9)]
    );
}

#[test]
fn throughput_panels_are_named_by_the_first_two_segments() {
    assert_eq!(
        panel_of("level0_wire/seal/tern/*/throughput"),
        ("level0_wire/seal", "tern/*/throughput")
    );
    assert_eq!(
        panel_of("sockio/offload/*/batch50/bytes_per_s"),
        ("sockio/offload", "*/batch50/bytes_per_s")
    );
    assert_eq!(panel_of("e2e/*"), ("e2e/*", "e2e/*"));
}

#[test]
fn heatmap_cells_come_from_sockio_datagram_rates_only() {
    let cells = heatmap_cells(&sample_metrics());
    assert_eq!(cells.keys().collect::<Vec<_>>(), ["offload", "portable"]);
    assert_eq!(cells["offload"].len(), 3);
    assert!(cells["offload"].contains(&Cell {
        size: 64,
        batch: 64,
        datagrams_per_s: 700e3
    }));
}

#[test]
fn latency_lines_are_in_microseconds_by_percentile() {
    let series = latency_series(&sample_metrics());
    assert_eq!(
        series["e2e/latency/1452B/pXX"],
        [(50.0, 40.0), (99.0, 95.0), (99.9, 200.0)]
    );
    assert_eq!(series["connect/handshake_pXX"], [(95.0, 1500.0)]);
    assert_eq!(series.len(), 2, "end-to-end latencies have their own chart");
    assert_eq!(percentile_of("p5x"), None);
    assert_eq!(percentile_of("pad"), None);
}

#[test]
fn diff_bars_keep_comparable_changes_largest_last() {
    let change = |name: &str, relative: Option<f64>, verdict| Change {
        name: name.to_owned(),
        baseline: relative.map(|_| 1.0),
        relative,
        verdict,
    };
    let bars = diff_bars(&[
        change("a", Some(0.01), Verdict::Noise),
        change("b", Some(-0.3), Verdict::Regressed),
        change("c", None, Verdict::New),
    ]);
    assert_eq!(bars.len(), 2);
    assert_eq!(bars[1].0, "b");
}

#[test]
fn every_chart_is_written_or_skipped_with_a_reason() {
    let dir = std::env::temp_dir().join(format!("tern-xtask-charts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let changes = [Change {
        name: "level0_wire/seal/tern/1452".to_owned(),
        baseline: Some(900.0),
        relative: Some(950.0 / 900.0 - 1.0),
        verdict: Verdict::Regressed,
    }];
    let charts = draw_all(&dir, &sample_metrics(), Some(&changes));
    assert_eq!(charts.len(), 7);
    for chart in &charts {
        let file = chart.outcome.as_ref().expect("drawn");
        let svg = std::fs::read_to_string(dir.join(file)).expect("svg written");
        assert!(svg.starts_with("<svg"), "{file}");
    }
    let heatmap = std::fs::read_to_string(dir.join("sockio_heatmap.svg")).expect("svg");
    assert!(
        heatmap.contains("612K") && heatmap.contains("1452 B"),
        "heatmap lacks its labels"
    );
    let rates = std::fs::read_to_string(dir.join("e2e_rates.svg")).expect("svg");
    for text in ["bulk", "Tern", "quinn", "pipeline ceiling", "GB/s"] {
        assert!(rates.contains(text), "byte rates lack {text}");
    }
    let latency = std::fs::read_to_string(dir.join("e2e_latency.svg")).expect("svg");
    for text in ["rr64: latency", "connect: latency", "µs", "ms", "p99"] {
        assert!(latency.contains(text), "e2e latency lacks {text}");
    }
    let degradation = std::fs::read_to_string(dir.join("e2e_degradation.svg")).expect("svg");
    for text in ["reference transport", "bar: at most 1.1x", "6.3", "1.05"] {
        assert!(degradation.contains(text), "degradation lacks {text}");
    }

    let empty = draw_all(&dir, &[], None);
    assert!(empty.iter().all(|c| c.outcome.is_err()), "{empty:?}");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}
