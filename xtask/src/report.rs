//! `--report`: `target/tern-bench/report.md` with the table and the charts.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::charts;
use crate::diff::Change;
use crate::results::Run;
use crate::table::results_table;

/// What the report says about how the run was made.
#[derive(Clone, Debug)]
pub(crate) struct Context<'a> {
    /// Levels run.
    pub(crate) levels: &'a [u8],
    /// `--filter`, if given.
    pub(crate) filter: Option<&'a str>,
    /// The baseline's name and run, with one change per metric of the run.
    pub(crate) baseline: Option<(&'a str, &'a Run, &'a [Change])>,
    /// Warnings of the run, repeated at the end of the report.
    pub(crate) warnings: &'a [String],
}

/// Writes the report and its charts into `dir`; returns the report's path.
pub(crate) fn write(dir: &Path, run: &Run, context: &Context<'_>) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let changes = context.baseline.map(|(_, _, changes)| changes);
    let charts = charts::draw_all(dir, &run.metrics, changes);
    let path = dir.join("report.md");
    std::fs::write(&path, render(run, context, &charts))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn render(run: &Run, context: &Context<'_>, charts: &[charts::Chart]) -> String {
    let env = &run.environment;
    let mut md = String::from("# Tern benchmark report\n\n");
    let levels: Vec<String> = context.levels.iter().map(u8::to_string).collect();
    let dirty = if env.dirty { " (work tree dirty)" } else { "" };
    let _ = writeln!(md, "- time: {}", run.time);
    let _ = writeln!(md, "- revision: `{}`{dirty}", env.revision);
    let _ = writeln!(md, "- host: {} — {}", env.host, env.cpu);
    let _ = writeln!(md, "- kernel: {}; compiler: {}", env.kernel, env.rustc);
    let mode = if run.quick { "quick" } else { "full" };
    let _ = writeln!(md, "- mode: {mode}; levels: {}", levels.join(", "));
    if let Some(share) = run.others_cpu_share {
        let _ = writeln!(
            md,
            "- CPU used by other processes while measuring: {:.0} %",
            share * 100.0
        );
    }
    if let Some(filter) = context.filter {
        let _ = writeln!(md, "- filter: `{filter}`");
    }
    if let Some((name, baseline, _)) = context.baseline {
        let dirty = if baseline.environment.dirty {
            ", dirty"
        } else {
            ""
        };
        let _ = writeln!(
            md,
            "- baseline: `{name}` (revision `{}`{dirty}, {}); noise bands 2 / 5 / 10 / 15 % at levels 0 / 1 / 2 / 3",
            baseline.environment.revision, baseline.time
        );
    }
    md.push_str("\n## Results\n\n");
    let table = results_table(&run.metrics, context.baseline.map(|(_, _, c)| c));
    if table.is_empty() {
        md.push_str("No metrics in this run.\n");
    } else {
        md.push_str(&table.to_markdown());
    }
    md.push_str("\n## Charts\n");
    for chart in charts {
        let _ = write!(md, "\n### {}\n\n", chart.title);
        match &chart.outcome {
            Ok(file) => {
                let _ = writeln!(md, "![{}]({file})", chart.title);
            }
            Err(why) => {
                let _ = writeln!(md, "Not drawn: {why}.");
            }
        }
    }
    if !context.warnings.is_empty() {
        md.push_str("\n## Warnings\n\n");
        for warning in context.warnings {
            let _ = writeln!(md, "- {}", warning.replace('\n', " "));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Environment;
    use crate::metric::{Better, Metric, Summary};

    fn run(metrics: Vec<Metric>) -> Run {
        Run {
            environment: Environment {
                host: "h".to_owned(),
                cpu: "c".to_owned(),
                kernel: "k".to_owned(),
                rustc: "rustc 1.95.0".to_owned(),
                revision: "abc".to_owned(),
                dirty: false,
            },
            time: "2026-05-01T10:00:00Z".to_owned(),
            quick: true,
            others_cpu_share: None,
            metrics,
        }
    }

    #[test]
    fn the_report_has_the_table_and_says_why_charts_are_missing() {
        let summary = Summary {
            median: 1.0,
            min: 1.0,
            max: 1.0,
            samples: 1,
        };
        let metrics = vec![Metric::new(
            "level0_wire/x".to_owned(),
            0,
            "ns",
            Better::Lower,
            summary,
        )];
        let dir = std::env::temp_dir().join(format!("tern-xtask-report-{}", std::process::id()));
        let warnings = ["tern-harness: no metrics from this source for level 2".to_owned()];
        let context = Context {
            levels: &[0, 2],
            filter: Some("x"),
            baseline: None,
            warnings: &warnings,
        };
        let path = write(&dir, &run(metrics), &context).expect("written");
        let md = std::fs::read_to_string(path).expect("report");
        assert!(md.contains("| 0 | level0_wire/x | 1 | 1–1 | ns |"), "{md}");
        assert!(md.contains("- mode: quick; levels: 0, 2"), "{md}");
        assert_eq!(md.matches("Not drawn: ").count(), 7, "{md}");
        assert!(md.contains("Not drawn: no --baseline given."), "{md}");
        assert!(md.contains("## Warnings"), "{md}");
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
