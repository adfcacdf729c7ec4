//! SVG charts for the report, drawn with plotters' SVG backend.
//!
//! Each chart picks its metrics by name and unit; when a run has none that
//! fit (a filtered run, a level not run, a benchmark not written yet) the
//! chart is skipped and the report says why instead of showing an empty
//! frame.
//!
//! - throughput vs message size: byte rates (`B/s`) whose name has a size
//!   segment (`1452` or `1452B`), one line per name with the size taken out;
//! - the sockio heatmap: `sockio/<backend>/<size>B/batch<N>/datagrams_per_s`,
//!   one panel per backend, size across and batch up;
//! - latency percentiles: time metrics whose name has a `p50`/`p95`/`p99`
//!   token, one line per name with the percentile taken out;
//! - baseline diff: the relative change of every compared metric, coloured
//!   by verdict;
//! - the end-to-end workloads, Tern beside quinn ([`e2e`]): byte rates
//!   beside the ceilings, latency percentiles per workload, and the 4-stream
//!   degradation. Their latencies are left out of the latency chart above.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::diff::{Change, Verdict};
use crate::metric::Metric;
use crate::units::{Scale, ns_per, significant};

mod e2e;
#[cfg(test)]
mod tests;

/// What became of one chart.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Chart {
    /// Its title.
    pub(crate) title: &'static str,
    /// The file written, relative to the report, or why there is none.
    pub(crate) outcome: Result<String, String>,
}

type Series = BTreeMap<String, Vec<(f64, f64)>>;
/// Labelled lines of one panel of a chart.
type Lines<'a> = Vec<(&'a str, &'a [(f64, f64)])>;

/// Draws every chart that has data into `dir`.
pub(crate) fn draw_all(dir: &Path, metrics: &[Metric], changes: Option<&[Change]>) -> Vec<Chart> {
    let throughput = throughput_series(metrics);
    let cells = heatmap_cells(metrics);
    let latency = latency_series(metrics);
    let rates = e2e::rate_groups(metrics);
    let e2e_latency = e2e::latency_panels(metrics);
    let degradation = e2e::degradation_bars(metrics);
    let mut charts = vec![
        chart(
            dir,
            "Throughput vs message size",
            "throughput_vs_size.svg",
            !throughput.is_empty(),
            |path| draw_throughput(path, &throughput),
        ),
        chart(
            dir,
            "sockio: datagrams/s by size and batch",
            "sockio_heatmap.svg",
            !cells.is_empty(),
            |path| draw_heatmap(path, &cells),
        ),
        chart(
            dir,
            "Latency percentiles",
            "latency_percentiles.svg",
            !latency.is_empty(),
            |path| draw_latency(path, &latency),
        ),
        chart(
            dir,
            "End-to-end byte rates beside the ceilings",
            "e2e_rates.svg",
            !rates.is_empty(),
            |path| e2e::draw_rates(path, &rates),
        ),
        chart(
            dir,
            "End-to-end latency percentiles",
            "e2e_latency.svg",
            !e2e_latency.is_empty(),
            |path| e2e::draw_latency(path, &e2e_latency),
        ),
        chart(
            dir,
            "4-stream degradation",
            "e2e_degradation.svg",
            !degradation.is_empty(),
            |path| e2e::draw_degradation(path, &degradation),
        ),
    ];
    let title = "Change against the baseline";
    charts.push(match changes {
        Some(changes) => {
            let bars = diff_bars(changes);
            chart(dir, title, "baseline_diff.svg", !bars.is_empty(), |path| {
                draw_diff(path, &bars)
            })
        }
        None => Chart {
            title,
            outcome: Err("no --baseline given".to_owned()),
        },
    });
    charts
}

/// Runs `draw` on `dir/file` if there is data for it.
fn chart(
    dir: &Path,
    title: &'static str,
    file: &str,
    has_data: bool,
    draw: impl FnOnce(&Path) -> Result<(), String>,
) -> Chart {
    let outcome = if has_data {
        draw(&dir.join(file)).map(|()| file.to_owned())
    } else {
        Err("no metrics of this kind in this run".to_owned())
    };
    Chart { title, outcome }
}

/// A size segment: `1452` or `1452B`.
fn size_of(segment: &str) -> Option<f64> {
    let digits = segment.strip_suffix('B').unwrap_or(segment);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|size: &f64| *size > 0.0)
}

/// Byte-rate lines over message size, keyed by the name with `*` for the size.
fn throughput_series(metrics: &[Metric]) -> Series {
    let mut series = Series::new();
    for metric in metrics.iter().filter(|m| m.unit == "B/s") {
        let segments: Vec<&str> = metric.name.split('/').collect();
        let Some(at) = segments.iter().rposition(|s| size_of(s).is_some()) else {
            continue;
        };
        let Some(size) = size_of(segments[at]) else {
            continue;
        };
        let mut key = segments.clone();
        key[at] = "*";
        series
            .entry(key.join("/"))
            .or_default()
            .push((size, metric.median));
    }
    series.retain(|_, points| points.len() >= 2);
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// One cell of the sockio heatmap.
#[derive(Clone, Debug, PartialEq)]
struct Cell {
    size: u32,
    batch: u32,
    datagrams_per_s: f64,
}

/// Heatmap cells per backend.
fn heatmap_cells(metrics: &[Metric]) -> BTreeMap<String, Vec<Cell>> {
    let mut backends: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    for metric in metrics {
        let segments: Vec<&str> = metric.name.split('/').collect();
        let ["sockio", backend, size, batch, "datagrams_per_s"] = segments[..] else {
            continue;
        };
        let size = size.strip_suffix('B').and_then(|s| s.parse().ok());
        let batch = batch.strip_prefix("batch").and_then(|b| b.parse().ok());
        if let (Some(size), Some(batch)) = (size, batch) {
            backends.entry(backend.to_owned()).or_default().push(Cell {
                size,
                batch,
                datagrams_per_s: metric.median,
            });
        }
    }
    backends
}

/// The percentile a token such as `p50`, `p99` or `p999` (99.9) stands for.
fn percentile_of(token: &str) -> Option<f64> {
    let digits = token.strip_prefix('p')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let text = if digits.len() <= 2 {
        digits.to_owned()
    } else {
        format!("{}.{}", &digits[..2], &digits[2..])
    };
    text.parse().ok().filter(|p: &f64| *p > 0.0 && *p < 100.0)
}

/// Latency lines in µs over percentile, keyed by the name with `pXX` for
/// the percentile token (inside a segment, tokens are split on `_`); the
/// end-to-end workloads of the transports have their own chart.
fn latency_series(metrics: &[Metric]) -> Series {
    let mut series = Series::new();
    for metric in metrics
        .iter()
        .filter(|m| !e2e::is_transport_metric(&m.name))
    {
        let Some(ns) = ns_per(&metric.unit) else {
            continue;
        };
        let mut percentile = None;
        let key: Vec<String> = metric
            .name
            .split('/')
            .map(|segment| {
                let tokens: Vec<&str> = segment
                    .split('_')
                    .map(|token| match percentile_of(token) {
                        Some(p) if percentile.is_none() => {
                            percentile = Some(p);
                            "pXX"
                        }
                        _ => token,
                    })
                    .collect();
                tokens.join("_")
            })
            .collect();
        if let Some(p) = percentile {
            series
                .entry(key.join("/"))
                .or_default()
                .push((p, metric.median * ns / 1e3));
        }
    }
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// Bars of the baseline diff: name, change in percent, verdict; the
/// largest changes first, at most 60 so the chart stays readable.
fn diff_bars(changes: &[Change]) -> Vec<(String, f64, Verdict)> {
    let mut bars: Vec<(String, f64, Verdict)> = changes
        .iter()
        .filter_map(|c| c.relative.map(|r| (c.name.clone(), r * 100.0, c.verdict)))
        .collect();
    bars.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    bars.truncate(60);
    bars.reverse();
    bars
}

fn err(e: impl std::fmt::Display) -> String {
    format!("cannot draw: {e}")
}

/// Splits a series key into its panel (the first two segments, e.g.
/// `level0_wire/seal` or `sockio/offload`) and the rest, the line's label.
fn panel_of(key: &str) -> (&str, &str) {
    match key.match_indices('/').nth(1) {
        Some((at, _)) => (&key[..at], &key[at + 1..]),
        None => (key, key),
    }
}

fn draw_throughput(path: &Path, series: &Series) -> Result<(), String> {
    let mut panels: BTreeMap<&str, Lines<'_>> = BTreeMap::new();
    for (key, points) in series {
        let (panel, label) = panel_of(key);
        panels.entry(panel).or_default().push((label, points));
    }
    let columns = if panels.len() > 1 { 2 } else { 1 };
    let rows = panels.len().div_ceil(columns);
    let root = SVGBackend::new(path, (620 * columns as u32, 400 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    for (area, (panel, lines)) in root.split_evenly((rows, columns)).iter().zip(&panels) {
        draw_throughput_panel(area, panel, lines)?;
    }
    root.present().map_err(err)
}

fn draw_throughput_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    panel: &str,
    lines: &[(&str, &[(f64, f64)])],
) -> Result<(), String> {
    let points = lines.iter().flat_map(|(_, points)| points.iter());
    let (min_x, max_x) = points.clone().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    let max_y = points.map(|p| p.1).fold(0.0, f64::max);
    let scale = Scale::for_value(max_y, "B/s");
    let top = scale.apply(max_y) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{panel}: throughput vs message size"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(
            (min_x * 0.8..max_x * 1.25).log_scale(),
            0.0..top.max(f64::MIN_POSITIVE),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("message size (bytes)")
        .y_desc(scale.unit.as_str())
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(err)?;
    for (i, (label, points)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let scaled: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x, scale.apply(y))).collect();
        chart
            .draw_series(LineSeries::new(scaled.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(*label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(scaled.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 11))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// Axis range for `n` categories drawn as segments; plotters cannot map a
/// range of a single value, so one category gets an empty neighbour.
fn categories(n: usize) -> std::ops::Range<i32> {
    0..(n.max(2) as i32 - 1)
}

fn draw_heatmap(path: &Path, backends: &BTreeMap<String, Vec<Cell>>) -> Result<(), String> {
    let all = backends.values().flatten();
    let lo = all
        .clone()
        .map(|c| c.datagrams_per_s)
        .fold(f64::MAX, f64::min);
    let hi = all.map(|c| c.datagrams_per_s).fold(f64::MIN, f64::max);
    let panel_height = 340;
    let height = panel_height * backends.len() as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((backends.len(), 1));
    // Every panel has the same axes, so that backends compare cell by cell.
    let mut sizes: Vec<u32> = backends.values().flatten().map(|c| c.size).collect();
    let mut batches: Vec<u32> = backends.values().flatten().map(|c| c.batch).collect();
    sizes.sort_unstable();
    sizes.dedup();
    batches.sort_unstable();
    batches.dedup();
    let size_labels: Vec<String> = sizes.iter().map(|s| format!("{s} B")).collect();
    let batch_labels: Vec<String> = batches.iter().map(u32::to_string).collect();
    for (panel, (backend, cells)) in panels.iter().zip(backends) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("sockio {backend}: datagrams/s (median)"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                categories(sizes.len()).into_segmented(),
                categories(batches.len()).into_segmented(),
            )
            .map_err(err)?;
        let label = |labels: &[String], v: &SegmentValue<i32>| match v {
            SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => usize::try_from(*i)
                .ok()
                .and_then(|i| labels.get(i))
                .cloned()
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(sizes.len())
            .y_labels(batches.len())
            .x_desc("datagram size")
            .y_desc("batch")
            .x_label_formatter(&|v| label(&size_labels, v))
            .y_label_formatter(&|v| label(&batch_labels, v))
            .draw()
            .map_err(err)?;
        let index = |list: &[u32], v: u32| list.iter().position(|&x| x == v).unwrap_or(0) as i32;
        let text = TextStyle::from(("sans-serif", 13).into_font())
            .pos(Pos::new(HPos::Center, VPos::Center));
        let (dark, light) = (text.color(&BLACK), text.color(&WHITE));
        chart
            .draw_series(cells.iter().map(|cell| {
                let (x, y) = (index(&sizes, cell.size), index(&batches, cell.batch));
                let color = ViridisRGB.get_color_normalized(
                    cell.datagrams_per_s as f32,
                    lo as f32,
                    hi.max(lo + 1.0) as f32,
                );
                Rectangle::new(
                    [
                        (SegmentValue::Exact(x), SegmentValue::Exact(y)),
                        (SegmentValue::Exact(x + 1), SegmentValue::Exact(y + 1)),
                    ],
                    color.filled(),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(cells.iter().map(|cell| {
                let (x, y) = (index(&sizes, cell.size), index(&batches, cell.batch));
                let bright = (cell.datagrams_per_s - lo) / (hi - lo).max(1.0) > 0.6;
                let value = Scale::for_value(cell.datagrams_per_s, "datagrams/s")
                    .format(cell.datagrams_per_s);
                let style = if bright { dark.clone() } else { light.clone() };
                Text::new(
                    value,
                    (SegmentValue::CenterOf(x), SegmentValue::CenterOf(y)),
                    style,
                )
            }))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

fn draw_latency(path: &Path, series: &Series) -> Result<(), String> {
    let mut percentiles: Vec<f64> = series.values().flatten().map(|p| p.0).collect();
    percentiles.sort_by(f64::total_cmp);
    percentiles.dedup();
    let values = series.values().flatten().map(|p| p.1).filter(|v| *v > 0.0);
    let lo = values.clone().fold(f64::MAX, f64::min);
    let hi = values.fold(f64::MIN, f64::max);
    if lo > hi {
        return Err("no positive latencies to plot".to_owned());
    }
    let labels: Vec<String> = percentiles.iter().map(|p| format!("p{p}")).collect();
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency percentiles (median of runs)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            categories(percentiles.len()).into_segmented(),
            (lo / 1.5..hi * 1.5).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(percentiles.len())
        .x_desc("percentile")
        .y_desc("µs (log scale)")
        .y_label_formatter(&|v| significant(*v))
        .x_label_formatter(&|v| match v {
            SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => usize::try_from(*i)
                .ok()
                .and_then(|i| labels.get(i))
                .cloned()
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .draw()
        .map_err(err)?;
    let at = |p: f64| percentiles.iter().position(|&q| q == p).unwrap_or(0) as i32;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let placed: Vec<(SegmentValue<i32>, f64)> = points
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|&(p, v)| (SegmentValue::CenterOf(at(p)), v))
            .collect();
        chart
            .draw_series(LineSeries::new(placed.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                placed
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn draw_diff(path: &Path, bars: &[(String, f64, Verdict)]) -> Result<(), String> {
    let reach = bars.iter().map(|b| b.1.abs()).fold(5.0, f64::max) * 1.1;
    let height = (120 + 24 * bars.len() as u32).max(280);
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let labels: Vec<&str> = bars.iter().map(|b| b.0.as_str()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Change of the median against the baseline (%)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(420)
        .build_cartesian_2d(-reach..reach, categories(bars.len()).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .y_labels(bars.len())
        .x_desc("change of the median, % (green: improved, red: regressed, grey: within noise)")
        .y_label_formatter(&|v| match v {
            SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => usize::try_from(*i)
                .ok()
                .and_then(|i| labels.get(i))
                .map(|s| s.to_string())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, change, verdict))| {
            let color = match verdict {
                Verdict::Improved => RGBColor(46, 160, 67),
                Verdict::Regressed => RGBColor(207, 34, 46),
                _ => RGBColor(150, 150, 150),
            };
            let i = i as i32;
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (*change, SegmentValue::Exact(i + 1)),
                ],
                color.filled(),
            );
            bar.set_margin(3, 3, 0, 0);
            bar
        }))
        .map_err(err)?;
    root.present().map_err(err)
}
