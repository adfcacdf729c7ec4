//! The one table a run prints, as aligned text or as markdown.
//!
//! Columns: level, metric, median, min–max, unit; then the ceiling's median
//! and the metric's share of it when any metric has a ceiling; then the
//! baseline's median, the change and its verdict when a baseline is given.

use crate::diff::{Change, format_relative};
use crate::metric::Metric;
use crate::units::Scale;

/// A table of text cells.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    headers: Vec<&'static str>,
    /// Whether each column holds numbers (right-aligned in text).
    numeric: Vec<bool>,
    rows: Vec<Vec<String>>,
}

/// The results table of `metrics`, with `changes` (one per metric, same
/// order) when comparing against a baseline.
pub(crate) fn results_table(metrics: &[Metric], changes: Option<&[Change]>) -> Table {
    let with_ceiling = metrics.iter().any(|m| m.ceiling.is_some());
    let mut headers = vec!["lvl", "metric", "median", "min–max", "unit"];
    let mut numeric = vec![true, false, true, true, false];
    if with_ceiling {
        headers.extend(["ceiling", "of ceiling"]);
        numeric.extend([false, true]);
    }
    if changes.is_some() {
        headers.extend(["baseline", "change", "verdict"]);
        numeric.extend([true, true, false]);
    }
    let rows = metrics
        .iter()
        .enumerate()
        .map(|(i, metric)| {
            let scale = Scale::for_value(metric.median, &metric.unit);
            let mut row = vec![
                metric.level.to_string(),
                metric.name.clone(),
                scale.format(metric.median),
                format!("{}–{}", scale.format(metric.min), scale.format(metric.max)),
                scale.unit.clone(),
            ];
            if with_ceiling {
                row.extend(ceiling_cells(metric, metrics));
            }
            if let Some(change) = changes.and_then(|c| c.get(i)) {
                row.push(change.baseline.map(|b| scale.format(b)).unwrap_or_default());
                row.push(format_relative(change));
                row.push(change.verdict.label().to_owned());
            }
            row
        })
        .collect();
    Table {
        headers,
        numeric,
        rows,
    }
}

/// The ceiling's median (in its own unit) and this metric's share of it.
fn ceiling_cells(metric: &Metric, metrics: &[Metric]) -> [String; 2] {
    let Some(name) = &metric.ceiling else {
        return [String::new(), String::new()];
    };
    match metrics.iter().find(|m| &m.name == name) {
        None => ["not run".to_owned(), String::new()],
        Some(ceiling) => {
            let scale = Scale::for_value(ceiling.median, &ceiling.unit);
            let value = format!("{} {}", scale.format(ceiling.median), scale.unit);
            let share = if ceiling.unit != metric.unit {
                "units differ".to_owned()
            } else if ceiling.median == 0.0 {
                String::new()
            } else {
                format!("{:.1} %", 100.0 * metric.median / ceiling.median)
            };
            [value, share]
        }
    }
}

impl Table {
    /// A table of `rows` under `headers`; `numeric` says which columns hold
    /// numbers (right-aligned in text). Every row has one cell per header.
    pub(crate) fn new(
        headers: Vec<&'static str>,
        numeric: Vec<bool>,
        rows: Vec<Vec<String>>,
    ) -> Self {
        Self {
            headers,
            numeric,
            rows,
        }
    }

    /// Whether the table has no rows.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Aligned plain text, columns separated by two spaces.
    pub(crate) fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|col| {
                let cells = self.rows.iter().map(|row| row[col].chars().count());
                cells
                    .chain([self.headers[col].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut out = String::new();
            for (col, cell) in cells.enumerate() {
                let pad = " ".repeat(widths[col] - cell.chars().count());
                if col > 0 {
                    out.push_str("  ");
                }
                if self.numeric[col] {
                    out.push_str(&pad);
                    out.push_str(cell);
                } else {
                    out.push_str(cell);
                    out.push_str(&pad);
                }
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            out
        };
        let mut text = line(&mut self.headers.iter().copied());
        let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
        text.push_str(&line(&mut rule.iter().map(String::as_str)));
        for row in &self.rows {
            text.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        text
    }

    /// A GitHub-flavoured markdown table.
    pub(crate) fn to_markdown(&self) -> String {
        let escape = |cell: &str| cell.replace('|', "\\|");
        let mut md = format!("| {} |\n", self.headers.join(" | "));
        let rule: Vec<&str> = self
            .numeric
            .iter()
            .map(|&n| if n { "---:" } else { "---" })
            .collect();
        md.push_str(&format!("| {} |\n", rule.join(" | ")));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
            md.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::Verdict;
    use crate::metric::{Better, Summary};

    fn metric(name: &str, unit: &str, median: f64, min: f64, max: f64) -> Metric {
        let summary = Summary {
            median,
            min,
            max,
            samples: 5,
        };
        Metric::new(name.to_owned(), 2, unit, Better::Higher, summary)
    }

    fn sockio() -> Vec<Metric> {
        let mut offload = metric(
            "sockio/offload/1452B/batch64/datagrams_per_s",
            "datagrams/s",
            600e3,
            590e3,
            630e3,
        );
        offload.ceiling = Some("sockio/raw_gso/1452B/batch64/datagrams_per_s".to_owned());
        let raw = metric(
            "sockio/raw_gso/1452B/batch64/datagrams_per_s",
            "datagrams/s",
            800e3,
            790e3,
            805e3,
        );
        let mut orphan = metric("e2e/1452B/throughput", "B/s", 1.2e9, 1.1e9, 1.3e9);
        orphan.ceiling = Some("raw/absent".to_owned());
        vec![offload, raw, orphan]
    }

    #[test]
    fn rows_show_scaled_values_and_the_share_of_the_ceiling() {
        let text = results_table(&sockio(), None).to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("lvl  metric"), "{text}");
        assert!(lines[0].contains("of ceiling"), "{text}");
        assert!(
            lines[2].contains("600K  590K–630K  datagrams/s  800K datagrams/s"),
            "{text}"
        );
        assert!(lines[2].ends_with("  75.0 %"), "{text}");
        let orphan: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            orphan,
            [
                "2",
                "e2e/1452B/throughput",
                "1.2",
                "1.1–1.3",
                "GB/s",
                "not",
                "run"
            ]
        );
    }

    #[test]
    fn columns_for_ceilings_and_baselines_appear_only_when_needed() {
        let plain = vec![metric("level0_wire/seal", "ns", 800.0, 790.0, 900.0)];
        let table = results_table(&plain, None);
        assert_eq!(
            table.headers,
            ["lvl", "metric", "median", "min–max", "unit"]
        );
        let changes = [Change {
            name: "level0_wire/seal".to_owned(),
            baseline: Some(700.0),
            relative: Some(800.0 / 700.0 - 1.0),
            verdict: Verdict::Regressed,
        }];
        let table = results_table(&plain, Some(&changes));
        assert_eq!(table.headers.len(), 8);
        assert_eq!(table.rows[0][5..], ["700", "+14.3 %", "REGRESSED"]);
    }

    #[test]
    fn markdown_has_a_header_rule_and_one_line_per_metric() {
        let md = results_table(&sockio(), None).to_markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[1], "| ---: | --- | ---: | ---: | --- | --- | ---: |");
        assert!(
            lines[2].starts_with("| 2 | sockio/offload/1452B/batch64/datagrams_per_s | 600K |")
        );
    }
}
