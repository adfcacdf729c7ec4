//! Charts of the end-to-end workloads, `e2e/<transport>/<workload>/...`,
//! Tern beside quinn where quinn ran, as grouped bars:
//!
//! - byte rates: every workload's `bytes_per_s` (`bulk`, `streams4`,
//!   `bidir`, `clients50`), with the ceilings Tern's run measured beside
//!   `bulk` (`e2e/tern/bulk/<ceiling>/bytes_per_s`: the raw pipeline and
//!   raw tern-sockio; quinn's run measures the same ceilings again, those
//!   are left out so each ceiling is one bar);
//! - latency: one panel per workload with percentiles (`rr64`, `connect`,
//!   `message_4k/rtt2ms`, ...), each on its own scale, because a cold
//!   connect or a 2 ms round trip would flatten a 30 µs request on a shared
//!   axis;
//! - 4-stream degradation beside the reference transport's and the bar.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{err, percentile_of};
use crate::metric::Metric;
use crate::units::{Scale, ns_per, significant};

/// The reference transport's 4-stream degradation (one stream's rate ÷ the
/// aggregate of four), from its published manual suite.
const REFERENCE_DEGRADATION: f64 = 6.3;
/// Tern's bar for the 4-stream degradation: at most this.
const DEGRADATION_BAR: f64 = 1.1;
/// Label of the reference transport's bar.
const REFERENCE: &str = "reference transport";
/// Suffix of the label of a ceiling's bar.
const CEILING: &str = " ceiling";
/// Width of one group on the x axis, in axis units (plotters formats the
/// labels of an integer axis, so bars sit at integer positions).
const SLOT: i32 = 1000;

/// Bars drawn side by side above one name on the axis.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Group {
    /// Its name under the axis: a workload or a percentile.
    pub(super) name: String,
    /// Each bar's label (its colour in the legend) and value.
    pub(super) bars: Vec<(String, f64)>,
}

/// A panel of grouped bars: its workload and groups.
pub(super) type Panel = (String, Vec<Group>);

/// Whether `name` is an end-to-end metric of a transport drawn here.
pub(super) fn is_transport_metric(name: &str) -> bool {
    transport_and_rest(name).is_some()
}

/// `e2e/<transport>/<rest>` as the transport's label and the segments of
/// `rest`, for the transports drawn here.
fn transport_and_rest(name: &str) -> Option<(&'static str, Vec<&str>)> {
    let (transport, rest) = name.strip_prefix("e2e/")?.split_once('/')?;
    let label = match transport {
        "tern" => "Tern",
        "quinn" => "quinn",
        _ => return None,
    };
    Some((label, rest.split('/').collect()))
}

/// Where a label's bar stands in its group: Tern, quinn, the ceilings,
/// the reference transport.
fn rank(label: &str) -> (u8, &str) {
    match label {
        "Tern" => (0, ""),
        "quinn" => (1, ""),
        REFERENCE => (3, ""),
        other => (2, other),
    }
}

/// Adds `(label, value)` to the group `name`, made on first use.
fn push(groups: &mut Vec<Group>, name: &str, label: String, value: f64) {
    let at = match groups.iter().position(|g| g.name == name) {
        Some(at) => at,
        None => {
            groups.push(Group {
                name: name.to_owned(),
                bars: Vec::new(),
            });
            groups.len() - 1
        }
    };
    groups[at].bars.push((label, value));
}

fn sort_bars(groups: &mut [Group]) {
    for group in groups {
        group.bars.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)));
    }
}

/// Byte rates by workload: a bar per transport, and the ceilings of Tern's
/// run; a workload with only ceilings is left out.
pub(super) fn rate_groups(metrics: &[Metric]) -> Vec<Group> {
    let mut groups = Vec::new();
    for metric in metrics.iter().filter(|m| m.unit == "B/s") {
        let Some((transport, rest)) = transport_and_rest(&metric.name) else {
            continue;
        };
        let (workload, label) = match rest[..] {
            [workload, "bytes_per_s"] => (workload, transport.to_owned()),
            [workload, ceiling, "bytes_per_s"] if transport == "Tern" => {
                (workload, format!("{ceiling}{CEILING}"))
            }
            _ => continue,
        };
        push(&mut groups, workload, label, metric.median);
    }
    groups.retain(|g| g.bars.iter().any(|(label, _)| !label.ends_with(CEILING)));
    sort_bars(&mut groups);
    groups
}

/// Latency panels, one per workload with percentiles: a group per
/// percentile, a bar per transport, in ns.
pub(super) fn latency_panels(metrics: &[Metric]) -> Vec<Panel> {
    let mut panels: Vec<(String, Vec<(f64, Group)>)> = Vec::new();
    for metric in metrics {
        let (Some(ns), Some((transport, rest))) =
            (ns_per(&metric.unit), transport_and_rest(&metric.name))
        else {
            continue;
        };
        let Some((token, workload)) = rest.split_last() else {
            continue;
        };
        let Some(percentile) = percentile_of(token) else {
            continue;
        };
        let workload = workload.join("/");
        let at = match panels.iter().position(|(name, _)| *name == workload) {
            Some(at) => at,
            None => {
                panels.push((workload, Vec::new()));
                panels.len() - 1
            }
        };
        let groups = &mut panels[at].1;
        let bar = (transport.to_owned(), metric.median * ns);
        match groups.iter_mut().find(|(p, _)| *p == percentile) {
            Some((_, group)) => group.bars.push(bar),
            None => groups.push((
                percentile,
                Group {
                    name: (*token).to_owned(),
                    bars: vec![bar],
                },
            )),
        }
    }
    panels
        .into_iter()
        .map(|(workload, mut groups)| {
            groups.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut groups: Vec<Group> = groups.into_iter().map(|(_, g)| g).collect();
            sort_bars(&mut groups);
            (workload, groups)
        })
        .collect()
}

/// The 4-stream degradation of each transport, and the reference
/// transport's beside them; empty when no transport has one.
pub(super) fn degradation_bars(metrics: &[Metric]) -> Vec<(String, f64)> {
    let mut bars: Vec<(String, f64)> = metrics
        .iter()
        .filter(|m| m.unit == "x")
        .filter_map(|m| match transport_and_rest(&m.name)? {
            (transport, rest) if rest[..] == ["streams4", "degradation"] => {
                Some((transport.to_owned(), m.median))
            }
            _ => None,
        })
        .collect();
    if !bars.is_empty() {
        bars.push((REFERENCE.to_owned(), REFERENCE_DEGRADATION));
        bars.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)));
    }
    bars
}

/// Every label of `groups`, in bar order: a label keeps its colour across
/// the panels of one chart.
fn labels<'a>(groups: impl IntoIterator<Item = &'a Group>) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for group in groups {
        for (label, _) in &group.bars {
            if !labels.contains(label) {
                labels.push(label.clone());
            }
        }
    }
    labels.sort_by(|a, b| rank(a).cmp(&rank(b)));
    labels
}

/// A label's colour: the same for Tern, quinn and the reference transport
/// in every chart; the ceilings take the others in turn.
fn colour(label: &str, labels: &[String]) -> RGBColor {
    const OTHERS: [RGBColor; 4] = [
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(23, 190, 207),
    ];
    match label {
        "Tern" => RGBColor(31, 119, 180),
        "quinn" => RGBColor(255, 127, 14),
        REFERENCE => RGBColor(150, 150, 150),
        _ => {
            let others = labels.iter().filter(|l| rank(l).0 == 2);
            let at = others.take_while(|l| *l != label).count();
            OTHERS[at % OTHERS.len()]
        }
    }
}

pub(super) fn draw_rates(path: &Path, groups: &[Group]) -> Result<(), String> {
    let width = (260 * groups.len() as u32 + 240).max(640);
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let style = PanelStyle {
        caption: "End-to-end byte rates (median), beside Tern's same-run ceilings",
        unit: "B/s",
        y_desc: None,
        lines: &[],
    };
    draw_panel(&root, &style, groups, &labels(groups))?;
    root.present().map_err(err)
}

pub(super) fn draw_latency(path: &Path, panels: &[Panel]) -> Result<(), String> {
    let columns = panels.len().clamp(1, 3);
    let rows = panels.len().div_ceil(columns);
    let size = (440 * columns as u32, 320 * rows as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let labels = labels(panels.iter().flat_map(|(_, groups)| groups));
    for (area, (workload, groups)) in root.split_evenly((rows, columns)).iter().zip(panels) {
        let caption = format!("{workload}: latency (median of runs)");
        let style = PanelStyle {
            caption: &caption,
            unit: "ns",
            y_desc: None,
            lines: &[],
        };
        draw_panel(area, &style, groups, &labels)?;
    }
    root.present().map_err(err)
}

pub(super) fn draw_degradation(path: &Path, bars: &[(String, f64)]) -> Result<(), String> {
    let root = SVGBackend::new(path, (720, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let groups = [Group {
        name: "streams4".to_owned(),
        bars: bars.to_vec(),
    }];
    let bar = format!("bar: at most {DEGRADATION_BAR}x");
    let style = PanelStyle {
        caption: "4-stream degradation (one stream's rate ÷ four's aggregate)",
        unit: "x",
        y_desc: Some("x (1.0 = none, lower is better)"),
        lines: &[(&bar, DEGRADATION_BAR)],
    };
    draw_panel(&root, &style, &groups, &labels(&groups))?;
    root.present().map_err(err)
}

/// What a panel says besides its bars.
struct PanelStyle<'a> {
    caption: &'a str,
    /// Unit of the values; picks the scale.
    unit: &'a str,
    /// The y axis's description; the scaled unit when `None`.
    y_desc: Option<&'a str>,
    /// Dashed horizontal lines: label and value.
    lines: &'a [(&'a str, f64)],
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    style: &PanelStyle<'_>,
    groups: &[Group],
    labels: &[String],
) -> Result<(), String> {
    let max = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.1))
        .chain(style.lines.iter().map(|l| l.1))
        .fold(0.0, f64::max);
    let scale = Scale::for_value(max, style.unit);
    // Room above the tallest bar for its value and the legend.
    let top = (scale.apply(max) * 1.4).max(f64::MIN_POSITIVE);
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    let span = groups.len().max(1) as i32 * SLOT;
    let centres: Vec<i32> = (0..groups.len() as i32)
        .map(|i| i * SLOT + SLOT / 2)
        .collect();
    let mut chart = ChartBuilder::on(area)
        .caption(style.caption, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d((0..span).with_key_points(centres), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .y_desc(style.y_desc.unwrap_or(scale.unit.as_str()))
        .x_label_formatter(&|x| {
            names
                .get(usize::try_from(x / SLOT).unwrap_or(0))
                .map(|n| n.to_string())
                .unwrap_or_default()
        })
        .draw()
        .map_err(err)?;
    // One bar width for the whole panel, at most 30 % of a slot, so that a
    // lone bar does not fill its group; the bars of a group are centred.
    let most = groups
        .iter()
        .map(|g| g.bars.len())
        .max()
        .unwrap_or(1)
        .max(1) as i32;
    let width = (SLOT * 8 / 10 / most).min(SLOT * 3 / 10);
    let value_style = TextStyle::from(("sans-serif", 11).into_font())
        .pos(Pos::new(HPos::Center, VPos::Bottom))
        .color(&BLACK);
    for label in labels {
        let colour = colour(label, labels);
        // (left, right, value) of this label's bar in each group.
        let placed: Vec<(i32, i32, f64)> = groups
            .iter()
            .enumerate()
            .filter_map(|(i, group)| {
                let at = group.bars.iter().position(|b| b.0 == *label)?;
                let start = i as i32 * SLOT + (SLOT - group.bars.len() as i32 * width) / 2;
                let left = start + at as i32 * width;
                Some((left, left + width * 9 / 10, scale.apply(group.bars[at].1)))
            })
            .collect();
        if placed.is_empty() {
            continue;
        }
        chart
            .draw_series(
                placed
                    .iter()
                    .map(|&(l, r, v)| Rectangle::new([(l, 0.0), (r, v)], colour.filled())),
            )
            .map_err(err)?
            .label(label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
        chart
            .draw_series(
                placed.iter().map(|&(l, r, v)| {
                    Text::new(significant(v), ((l + r) / 2, v), value_style.clone())
                }),
            )
            .map_err(err)?;
    }
    for &(label, value) in style.lines {
        let y = scale.apply(value);
        let line = BLACK.stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new([(0, y), (span, y)], 6, 4, line))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], line));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 11))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::tests::metric;

    fn bars(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|&(l, v)| (l.to_owned(), v)).collect()
    }

    #[test]
    fn byte_rates_group_by_workload_with_tern_quinn_then_ceilings() {
        let metrics = [
            metric("e2e/tern/bulk/sockio/bytes_per_s", "B/s", 3e9),
            metric("e2e/quinn/bulk/bytes_per_s", "B/s", 0.8e9),
            metric("e2e/tern/bulk/bytes_per_s", "B/s", 1e9),
            metric("e2e/tern/bulk/pipeline/bytes_per_s", "B/s", 1.4e9),
            metric("e2e/quinn/bulk/pipeline/bytes_per_s", "B/s", 1.3e9),
            metric("e2e/tern/bulk/mb_per_cpu_s", "MB/cpu-s", 600.0),
            metric("e2e/tern/bidir/bytes_per_s", "B/s", 0.7e9),
            metric("e2e/quinn/streams4/bytes_per_s", "B/s", 0.5e9),
            metric("e2e/tern/clients50/sockio/bytes_per_s", "B/s", 2e9),
            metric("e2e/other/bulk/bytes_per_s", "B/s", 9e9),
            metric("level0_wire/seal/tern/1452/throughput", "B/s", 1.5e9),
        ];
        let groups = rate_groups(&metrics);
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["bulk", "bidir", "streams4"]);
        assert_eq!(
            groups[0].bars,
            bars(&[
                ("Tern", 1e9),
                ("quinn", 0.8e9),
                ("pipeline ceiling", 1.4e9),
                ("sockio ceiling", 3e9),
            ])
        );
        assert_eq!(groups[2].bars, bars(&[("quinn", 0.5e9)]));
        assert!(rate_groups(&metrics[5..6]).is_empty());
    }

    #[test]
    fn latency_panels_are_per_workload_in_ns_by_percentile() {
        let metrics = [
            metric("e2e/tern/rr64/requests_per_s", "requests/s", 30e3),
            metric("e2e/tern/rr64/p99", "ns", 90e3),
            metric("e2e/quinn/rr64/p50", "µs", 55.0),
            metric("e2e/tern/rr64/p50", "ns", 30e3),
            metric("e2e/tern/connect/p50", "ms", 2.5),
            metric("e2e/tern/message_4k/rtt2ms/p50", "ns", 2.2e6),
            metric("e2e/tern/streams4/degradation", "x", 1.05),
            metric("level1/stream/p50", "ns", 10.0),
        ];
        let panels = latency_panels(&metrics);
        let names: Vec<&str> = panels.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["rr64", "connect", "message_4k/rtt2ms"]);
        let rr64 = &panels[0].1;
        assert_eq!(rr64.len(), 2);
        assert_eq!(rr64[0].name, "p50");
        assert_eq!(rr64[0].bars, bars(&[("Tern", 30e3), ("quinn", 55e3)]));
        assert_eq!(rr64[1].name, "p99");
        assert_eq!(panels[1].1[0].bars, bars(&[("Tern", 2.5e6)]));
        assert!(latency_panels(&metrics[6..]).is_empty());
    }

    #[test]
    fn a_transport_keeps_its_colour_and_ceilings_take_distinct_ones() {
        let few = labels(&[Group {
            name: "bidir".to_owned(),
            bars: bars(&[("quinn", 1.0), ("Tern", 1.0)]),
        }]);
        assert_eq!(few, ["Tern", "quinn"]);
        let many = labels(&rate_groups(&[
            metric("e2e/tern/bulk/bytes_per_s", "B/s", 1.0),
            metric("e2e/tern/bulk/sockio/bytes_per_s", "B/s", 1.0),
            metric("e2e/tern/bulk/pipeline/bytes_per_s", "B/s", 1.0),
            metric("e2e/quinn/bulk/bytes_per_s", "B/s", 1.0),
        ]));
        assert_eq!(
            many,
            ["Tern", "quinn", "pipeline ceiling", "sockio ceiling"]
        );
        for label in ["Tern", "quinn"] {
            assert_eq!(colour(label, &few), colour(label, &many));
        }
        let colours: Vec<RGBColor> = many.iter().map(|l| colour(l, &many)).collect();
        for (i, c) in colours.iter().enumerate() {
            assert!(!colours[i + 1..].contains(c), "{many:?} share a colour");
        }
    }

    #[test]
    fn degradation_sits_beside_the_reference_transport() {
        let metrics = [
            metric("e2e/quinn/streams4/degradation", "x", 1.4),
            metric("e2e/tern/streams4/degradation", "x", 1.02),
            metric("e2e/tern/streams4/bytes_per_s", "B/s", 1e9),
        ];
        assert_eq!(
            degradation_bars(&metrics),
            bars(&[("Tern", 1.02), ("quinn", 1.4), (REFERENCE, 6.3)])
        );
        assert!(
            degradation_bars(&metrics[2..]).is_empty(),
            "the reference alone is no chart"
        );
    }
}
