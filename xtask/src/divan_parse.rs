//! Reading divan's text table, line by line, into metrics.
//!
//! divan prints no machine-readable format, so this parser takes its tree
//! apart by the drawing characters alone and never by column offsets (a
//! long name can push a row's columns to the right):
//!
//! ```text
//! level0_wire          fastest       │ slowest       │ median        │ mean   │ samples │ iters
//! ╰─ seal                            │               │               │        │         │
//!    ╰─ copy_bytes                   │               │               │        │         │
//!       ├─ 1452        78.91 ns      │ 102 ns        │ 81.1 ns       │ 84 ns  │ 10      │ 320
//!       │              18.39 GB/s    │ 14.22 GB/s    │ 17.9 GB/s     │ ...    │         │
//!       │              alloc:        │               │               │        │         │
//!       │                1           │ 1             │ 1             │ 1      │         │
//!       │                1.452 KB    │ 1.452 KB      │ 1.452 KB      │ ...    │         │
//! ```
//!
//! A node row starts (after the tree's `│` and spaces, three characters per
//! level) with `├─` or `╰─`; its name ends at the first double space. A row
//! without a branch mark belongs to the last leaf: a throughput, or an
//! allocation label (`alloc:`, `dealloc:`, `grow:`, `shrink:`, `max alloc:`)
//! followed by a count row and a byte-size row.
//!
//! Each leaf gives `<target>/<path>` in `ns` (min = fastest, max = slowest);
//! a throughput row gives `<...>/throughput` (`B/s`, `items/s`, `chars/s` or
//! `Hz`); `alloc:` gives `<...>/allocs` and `<...>/alloc_bytes` per iteration,
//! `grow:` and `shrink:` give `<...>/grows` and `<...>/shrinks`. `dealloc:`
//! mirrors `alloc:` and `max alloc:` is peak usage: both are read and dropped.

use crate::metric::{Better, Metric, Summary};
use crate::units::{parse_bytes, parse_count, parse_duration_ns, parse_rate};

/// Names a divan leaf's extra rows append to the leaf's metric name; the
/// filter translation needs them to know what a pattern may end with.
pub(crate) const EXTRA_METRIC_SUFFIXES: [&str; 5] = [
    "/throughput",
    "/allocs",
    "/alloc_bytes",
    "/grows",
    "/shrinks",
];

/// Columns of a table row after the name: fastest, slowest, median, mean,
/// samples, iters.
const COLUMNS: usize = 6;

/// Where the parser is inside an allocation block of the current leaf.
#[derive(Clone, Copy, Debug, PartialEq)]
enum AllocRow {
    /// The label was read; the count row comes next.
    Count(AllocKind),
    /// The count was read; the size row comes next.
    Bytes(AllocKind),
}

/// The allocation statistics divan's AllocProfiler prints.
#[derive(Clone, Copy, Debug, PartialEq)]
enum AllocKind {
    Alloc,
    Dealloc,
    Grow,
    Shrink,
    MaxAlloc,
}

impl AllocKind {
    fn from_label(label: &str) -> Option<Self> {
        Some(match label {
            "alloc" => Self::Alloc,
            "dealloc" => Self::Dealloc,
            "grow" => Self::Grow,
            "shrink" => Self::Shrink,
            "max alloc" => Self::MaxAlloc,
            _ => return None,
        })
    }

    /// The metric name suffix and unit of this kind's count, if kept.
    fn count_metric(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Alloc => Some(("allocs", "allocs/iter")),
            Self::Grow => Some(("grows", "grows/iter")),
            Self::Shrink => Some(("shrinks", "shrinks/iter")),
            Self::Dealloc | Self::MaxAlloc => None,
        }
    }

    /// The metric name suffix of this kind's byte size, if kept.
    fn bytes_metric(self) -> Option<&'static str> {
        (self == Self::Alloc).then_some("alloc_bytes")
    }
}

/// The leaf that extra rows attach to.
#[derive(Debug)]
struct Leaf {
    /// Full metric name of the leaf's time.
    name: String,
    samples: usize,
}

/// Turns divan's output, fed one line at a time, into metrics.
#[derive(Debug)]
pub(crate) struct DivanParser {
    target: String,
    level: u8,
    in_table: bool,
    path: Vec<String>,
    leaf: Option<Leaf>,
    alloc: Option<AllocRow>,
    metrics: Vec<Metric>,
    warnings: Vec<String>,
}

/// What [`DivanParser::finish`] hands back.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// Metrics in the order divan printed them.
    pub(crate) metrics: Vec<Metric>,
    /// Lines that looked like part of the table but could not be read.
    pub(crate) warnings: Vec<String>,
}

impl DivanParser {
    /// A parser for the output of bench target `target` at `level`.
    pub(crate) fn new(target: &str, level: u8) -> Self {
        Self {
            target: target.to_owned(),
            level,
            in_table: false,
            path: Vec::new(),
            leaf: None,
            alloc: None,
            metrics: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Reads one complete line; returns the tree path (`seal/copy_bytes/64`)
    /// of a leaf whose measurement it completes, for the progress line.
    pub(crate) fn push_line(&mut self, line: &str) -> Option<String> {
        let line = line.trim_end_matches(['\n', '\r']);
        if !self.in_table {
            self.in_table = is_header(line);
            return None;
        }
        if line.trim().is_empty() {
            return None;
        }
        match split_tree(line) {
            Some((depth, rest)) => self.node_row(line, depth, rest),
            None => {
                self.extra_row(line);
                None
            }
        }
    }

    /// The tree path of the leaf divan has started measuring, given the
    /// unfinished line it prints (and flushes) before measuring it.
    pub(crate) fn running(&self, partial: &str) -> Option<String> {
        if !self.in_table {
            return None;
        }
        let (depth, rest) = split_tree(partial)?;
        let name = rest.trim();
        if name.is_empty() || rest.contains('│') {
            return None;
        }
        let mut path: Vec<&str> = self.path.iter().take(depth).map(String::as_str).collect();
        path.push(name);
        Some(path.join("/"))
    }

    /// The metrics read so far and any warnings; warns if no table was seen.
    pub(crate) fn finish(mut self) -> Parsed {
        if !self.in_table {
            self.warnings
                .push(format!("{}: no divan table in the output", self.target));
        }
        Parsed {
            metrics: self.metrics,
            warnings: self.warnings,
        }
    }

    fn node_row(&mut self, line: &str, depth: usize, rest: &str) -> Option<String> {
        let cells: Vec<&str> = rest.split('│').collect();
        let (name, fastest) = match cells[0].trim().split_once("  ") {
            Some((name, value)) => (name.trim(), value.trim()),
            None => (cells[0].trim(), ""),
        };
        self.path.truncate(depth);
        self.path.push(name.to_owned());
        self.leaf = None;
        self.alloc = None;
        let values_blank = fastest.is_empty() && cells[1..].iter().all(|c| c.trim().is_empty());
        if values_blank {
            return None;
        }
        let tree_path = self.path.join("/");
        let name = format!("{}/{tree_path}", self.target);
        let parsed = (cells.len() == COLUMNS)
            .then(|| {
                let fastest = parse_duration_ns(fastest)?;
                let slowest = parse_duration_ns(cells[1])?;
                let median = parse_duration_ns(cells[2])?;
                let samples: usize = cells[4].trim().parse().ok()?;
                Some((fastest, slowest, median, samples))
            })
            .flatten();
        let Some((fastest, slowest, median, samples)) = parsed else {
            self.warn(line);
            return None;
        };
        let summary = Summary {
            median,
            min: fastest,
            max: slowest,
            samples,
        };
        self.metrics.push(Metric::new(
            name.clone(),
            self.level,
            "ns",
            Better::Lower,
            summary,
        ));
        self.leaf = Some(Leaf { name, samples });
        Some(tree_path)
    }

    fn extra_row(&mut self, line: &str) {
        let body = line.trim_start_matches(['│', ' ']);
        let cells: Vec<&str> = body.split('│').map(str::trim).collect();
        let Some(leaf) = self.leaf.as_ref() else {
            self.warn(line);
            return;
        };
        if cells.len() != COLUMNS {
            self.warn(line);
            return;
        }
        let (base, samples) = (leaf.name.clone(), leaf.samples);
        if let Some(label) = cells[0].strip_suffix(':') {
            match AllocKind::from_label(label) {
                Some(kind) => self.alloc = Some(AllocRow::Count(kind)),
                None => self.warn(line),
            }
            return;
        }
        match self.alloc.take() {
            Some(AllocRow::Count(kind)) => {
                self.alloc = Some(AllocRow::Bytes(kind));
                if let Some((suffix, unit)) = kind.count_metric() {
                    self.push_spread(line, &base, suffix, unit, samples, &cells, parse_count);
                }
            }
            Some(AllocRow::Bytes(kind)) => {
                if let Some(suffix) = kind.bytes_metric() {
                    self.push_spread(line, &base, suffix, "B/iter", samples, &cells, parse_bytes);
                }
            }
            None => {
                let rates: Option<Vec<(f64, &str)>> =
                    cells[..3].iter().map(|c| parse_rate(c)).collect();
                match rates {
                    Some(rates) if rates.iter().all(|(_, unit)| *unit == rates[0].1) => {
                        let values: Vec<f64> = rates.iter().map(|(v, _)| *v).collect();
                        let summary = spread(&values, samples);
                        let name = format!("{base}/throughput");
                        self.metrics.push(Metric::new(
                            name,
                            self.level,
                            rates[0].1,
                            Better::Higher,
                            summary,
                        ));
                    }
                    _ => self.warn(line),
                }
            }
        }
    }

    /// Pushes a lower-is-better metric read from the fastest, slowest and
    /// median cells of an allocation row.
    #[allow(clippy::too_many_arguments)]
    fn push_spread(
        &mut self,
        line: &str,
        base: &str,
        suffix: &str,
        unit: &str,
        samples: usize,
        cells: &[&str],
        parse: fn(&str) -> Option<f64>,
    ) {
        let values: Option<Vec<f64>> = cells[..3].iter().map(|c| parse(c)).collect();
        match values {
            Some(values) => {
                let name = format!("{base}/{suffix}");
                let summary = spread(&values, samples);
                self.metrics
                    .push(Metric::new(name, self.level, unit, Better::Lower, summary));
            }
            None => self.warn(line),
        }
    }

    fn warn(&mut self, line: &str) {
        self.warnings
            .push(format!("{}: unreadable divan line: {line}", self.target));
    }
}

/// Median (the third cell) and extremes of the fastest, slowest and median
/// cells: for a throughput the fastest sample has the largest value.
fn spread(values: &[f64], samples: usize) -> Summary {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Summary {
        median: values[2],
        min,
        max,
        samples,
    }
}

/// Whether `line` is the table's header (`<target>  fastest │ slowest │ ...`).
fn is_header(line: &str) -> bool {
    ["fastest", "slowest", "median", "samples"]
        .iter()
        .all(|column| line.contains(column))
}

/// Splits a node row into its depth and the text after the branch mark.
fn split_tree(line: &str) -> Option<(usize, &str)> {
    let body = line.trim_start_matches(['│', ' ']);
    let prefix_chars = line[..line.len() - body.len()].chars().count();
    let rest = body
        .strip_prefix("├─")
        .or_else(|| body.strip_prefix("╰─"))?;
    Some((prefix_chars / 3, rest))
}

/// Leaf paths (`seal/copy_bytes`) of divan's `--list` tree, in order; a
/// leaf with arguments is listed once, without them.
pub(crate) fn parse_list(output: &str) -> Vec<String> {
    let nodes: Vec<(usize, String)> = output
        .lines()
        .filter_map(|line| split_tree(line).map(|(depth, rest)| (depth, rest.trim().to_owned())))
        .collect();
    let mut path: Vec<&str> = Vec::new();
    let mut leaves = Vec::new();
    for (i, (depth, name)) in nodes.iter().enumerate() {
        path.truncate(*depth);
        path.push(name);
        let has_children = nodes.get(i + 1).is_some_and(|(next, _)| next > depth);
        if !has_children {
            leaves.push(path.join("/"));
        }
    }
    leaves
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIXED: &str = include_str!("fixtures/divan_mixed.txt");
    const BINARY: &str = include_str!("fixtures/divan_binary_bytes.txt");
    const LIST: &str = include_str!("fixtures/divan_list.txt");
    const LEVEL0_WIRE: &str = include_str!("fixtures/divan_level0_wire.txt");

    fn parse(target: &str, output: &str) -> Parsed {
        let mut parser = DivanParser::new(target, 0);
        for line in output.lines() {
            parser.push_line(line);
        }
        parser.finish()
    }

    fn metric<'a>(parsed: &'a Parsed, name: &str) -> &'a Metric {
        parsed
            .metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no metric {name}"))
    }

    #[test]
    fn captured_divan_output_parses_without_warnings() {
        let parsed = parse("fixture", MIXED);
        assert_eq!(parsed.warnings, Vec::<String>::new());
        let times = parsed.metrics.iter().filter(|m| m.unit == "ns").count();
        // add_ints, alloc_and_free, sleep_2ms, 3 types of default_vec,
        // chars, cycles, shrink_string, 2 consts of shift, 3 args of
        // copy_bytes, 2 args of grow_vec.
        assert_eq!(times, 16);
    }

    #[test]
    fn sub_nanosecond_and_millisecond_times_become_nanoseconds() {
        let parsed = parse("fixture", MIXED);
        let add = metric(&parsed, "fixture/add_ints");
        assert_eq!((add.min, add.max, add.median), (0.493, 0.495, 0.495));
        assert_eq!((add.samples, add.level, add.better), (10, 0, Better::Lower));
        let sleep = metric(&parsed, "fixture/sleep_2ms");
        assert_eq!((sleep.min, sleep.median), (2_061_000.0, 2_065_000.0));
    }

    #[test]
    fn args_generic_types_and_consts_become_path_segments() {
        let parsed = parse("fixture", MIXED);
        let big = metric(&parsed, "fixture/seal/copy_bytes/65536");
        assert_eq!(
            (big.min, big.median, big.max),
            (21_420.0, 21_460.0, 63_930.0)
        );
        metric(&parsed, "fixture/default_vec/String");
        metric(&parsed, "fixture/default_vec/u64");
        metric(&parsed, "fixture/group/shift/8");
        metric(&parsed, "fixture/group/shrink_string");
    }

    #[test]
    fn throughput_rows_become_higher_is_better_rates() {
        let parsed = parse("fixture", MIXED);
        let bytes = metric(&parsed, "fixture/seal/copy_bytes/1452/throughput");
        assert_eq!(bytes.unit, "B/s");
        assert_eq!(bytes.better, Better::Higher);
        assert_eq!(
            (bytes.min, bytes.median, bytes.max),
            (13.52e9, 15.74e9, 15.88e9)
        );
        let items = metric(&parsed, "fixture/seal/grow_vec/100/throughput");
        assert_eq!((items.unit.as_str(), items.median), ("items/s", 231.8e6));
        assert_eq!(
            metric(&parsed, "fixture/group/chars/throughput").unit,
            "chars/s"
        );
        assert_eq!(
            metric(&parsed, "fixture/group/cycles/throughput").unit,
            "Hz"
        );
    }

    #[test]
    fn allocation_rows_become_counts_and_bytes_per_iteration() {
        let parsed = parse("fixture", MIXED);
        let allocs = metric(&parsed, "fixture/seal/copy_bytes/1452/allocs");
        assert_eq!((allocs.unit.as_str(), allocs.median), ("allocs/iter", 1.0));
        let bytes = metric(&parsed, "fixture/seal/copy_bytes/1452/alloc_bytes");
        assert_eq!((bytes.unit.as_str(), bytes.median), ("B/iter", 1452.0));
        let grows = metric(&parsed, "fixture/seal/grow_vec/100/grows");
        assert_eq!(grows.median, 5.0);
        let shrinks = metric(&parsed, "fixture/group/shrink_string/shrinks");
        assert_eq!(shrinks.median, 1.0);
        // `max alloc:` and `dealloc:` are read but kept out of the results.
        assert!(!parsed.metrics.iter().any(|m| m.name.contains("dealloc")));
        assert_eq!(metric(&parsed, "fixture/alloc_and_free/allocs").median, 1.0);
        assert_eq!(
            metric(&parsed, "fixture/alloc_and_free/alloc_bytes").median,
            100.0
        );
        // A leaf without an AllocProfiler row has no allocation metric.
        assert!(
            !parsed
                .metrics
                .iter()
                .any(|m| m.name == "fixture/add_ints/allocs")
        );
    }

    #[test]
    fn binary_byte_units_are_read_as_powers_of_two() {
        let parsed = parse("fixture", BINARY);
        assert_eq!(parsed.warnings, Vec::<String>::new());
        let rate = metric(&parsed, "fixture/seal/copy_bytes/64/throughput");
        assert_eq!(rate.max, 3.092 * 1024.0 * 1024.0 * 1024.0);
        assert!(
            parsed
                .metrics
                .iter()
                .all(|m| m.name.starts_with("fixture/seal/"))
        );
    }

    #[test]
    fn metric_names_are_unique() {
        let parsed = parse("fixture", MIXED);
        let mut names: Vec<&str> = parsed.metrics.iter().map(|m| m.name.as_str()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }

    #[test]
    fn completed_leaves_and_running_leaves_are_reported_for_progress() {
        let mut parser = DivanParser::new("fixture", 0);
        let mut completed = Vec::new();
        for line in MIXED.lines() {
            completed.extend(parser.push_line(line));
        }
        assert_eq!(completed.len(), 16);
        assert_eq!(completed[0], "add_ints");
        assert!(completed.contains(&"seal/copy_bytes/1452".to_owned()));

        let mut parser = DivanParser::new("fixture", 0);
        for line in MIXED.lines().take_while(|l| !l.contains("├─ 64")) {
            parser.push_line(line);
        }
        assert_eq!(
            parser.running("   │  ├─ 64          ").as_deref(),
            Some("seal/copy_bytes/64")
        );
    }

    #[test]
    fn foreign_lines_and_bad_cells_warn_instead_of_failing() {
        let mut parser = DivanParser::new("t", 1);
        parser.push_line("some text a bench printed");
        parser.push_line("t      fastest │ slowest │ median │ mean │ samples │ iters");
        parser.push_line("├─ ok  1 ns    │ 2 ns    │ 1 ns   │ 1 ns │ 10      │ 100");
        parser.push_line("│      hello from a bench");
        parser.push_line("├─ bad  1 furlong │ 2 ns │ 1 ns │ 1 ns │ 10 │ 100");
        let parsed = parser.finish();
        assert_eq!(parsed.metrics.len(), 1);
        assert_eq!(parsed.metrics[0].name, "t/ok");
        assert_eq!(parsed.metrics[0].level, 1);
        assert_eq!(parsed.warnings.len(), 2);
    }

    #[test]
    fn the_level0_wire_bench_output_parses_completely() {
        let parsed = parse("level0_wire", LEVEL0_WIRE);
        assert_eq!(parsed.warnings, Vec::<String>::new());
        let seal = metric(&parsed, "level0_wire/seal/tern/1452");
        assert_eq!((seal.unit.as_str(), seal.level), ("ns", 0));
        assert!(seal.min <= seal.median && seal.median <= seal.max);
        let rate = metric(&parsed, "level0_wire/seal/raw_aes_gcm/1452/throughput");
        assert!(rate.min <= rate.median && rate.median <= rate.max);
        assert_eq!(metric(&parsed, "level0_wire/intro/accept").samples, 10);
        metric(&parsed, "level0_wire/intro/accept/allocs");
        metric(&parsed, "level0_wire/intro/accept/grows");
        let times = parsed.metrics.iter().filter(|m| m.unit == "ns").count();
        let rows = LEVEL0_WIRE
            .lines()
            .filter(|l| l.contains(" ns ") || l.contains(" µs ") || l.contains(" ms "))
            .count();
        assert_eq!(times, rows);
    }

    #[test]
    fn output_without_a_table_warns() {
        let parsed = parse("empty", "");
        assert!(parsed.metrics.is_empty());
        assert_eq!(parsed.warnings.len(), 1);
    }

    #[test]
    fn list_output_gives_leaf_functions_in_order() {
        let leaves = parse_list(LIST);
        assert_eq!(leaves.first().map(String::as_str), Some("add_ints"));
        assert!(leaves.contains(&"default_vec/u8".to_owned()));
        assert!(leaves.contains(&"group/shift/8".to_owned()));
        assert!(leaves.contains(&"seal/copy_bytes".to_owned()));
        assert!(!leaves.contains(&"seal".to_owned()));
        assert_eq!(leaves.len(), 13);
    }
}
