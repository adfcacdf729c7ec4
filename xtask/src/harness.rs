//! Levels 2 and 3: the `tern-harness` binary, which prints JSON lines.
//!
//! `tern-harness [--level N]... [--quick | --full] [--filter S] [--list]`
//! prints one JSON object per metric on standard output and human text on
//! standard error; `--list` prints the benchmark groups that would run.

use std::collections::HashSet;

use serde::Deserialize;

use crate::metric::{Better, Metric, Summary};
use crate::process::{self, Stdout};
use crate::progress::Progress;
use crate::source::{Collected, Mode};
use crate::workspace::{BENCH_PACKAGE, HARNESS_BIN, cargo};

/// Levels the harness serves.
pub(crate) const HARNESS_LEVELS: [u8; 2] = [2, 3];

/// One line of the harness's standard output.
#[derive(Debug, Deserialize)]
struct Line {
    name: String,
    level: u8,
    unit: String,
    better: Better,
    samples: Vec<f64>,
    #[serde(default)]
    ceiling: Option<String>,
}

/// Reads one JSON line into a metric.
pub(crate) fn parse_line(line: &str) -> Result<Metric, String> {
    let line: Line =
        serde_json::from_str(line).map_err(|e| format!("not a metric line ({e}): {line}"))?;
    if line.name.is_empty() || line.unit.is_empty() {
        return Err(format!("metric without a name or unit: {line:?}"));
    }
    let summary = Summary::of(&line.samples).ok_or_else(|| {
        format!(
            "{}: no samples, or a sample that is not a finite number",
            line.name
        )
    })?;
    let mut metric = Metric::new(line.name, line.level, &line.unit, line.better, summary);
    metric.ceiling = line.ceiling;
    Ok(metric)
}

/// Builds the harness in release mode with `features` of the bench package.
pub(crate) fn build(features: &[&str]) -> Result<(), String> {
    let status = cargo()
        .args([
            "build",
            "--release",
            "-p",
            BENCH_PACKAGE,
            "--bin",
            HARNESS_BIN,
        ])
        .args(feature_args(features))
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "building {HARNESS_BIN} failed (see cargo's messages above)"
        ))
    }
}

/// `--features a,b` for cargo, or nothing.
fn feature_args(features: &[&str]) -> Vec<String> {
    if features.is_empty() {
        Vec::new()
    } else {
        vec!["--features".to_owned(), features.join(",")]
    }
}

fn harness_command(
    levels: &[u8],
    filter: Option<&str>,
    features: &[&str],
) -> std::process::Command {
    let mut command = cargo();
    command.args([
        "run",
        "--release",
        "-q",
        "-p",
        BENCH_PACKAGE,
        "--bin",
        HARNESS_BIN,
    ]);
    command.args(feature_args(features));
    command.arg("--");
    for level in levels {
        command.args(["--level", &level.to_string()]);
    }
    if let Some(filter) = filter {
        command.args(["--filter", filter]);
    }
    command
}

/// The benchmark groups the harness would run, for the progress line.
pub(crate) fn list(
    levels: &[u8],
    filter: Option<&str>,
    features: &[&str],
) -> Result<Vec<String>, String> {
    let mut command = harness_command(levels, filter, features);
    command.arg("--list");
    let (finished, out) =
        process::capture(&mut command).map_err(|e| format!("cannot run cargo: {e}"))?;
    if !finished.status.success() {
        return Err(format!(
            "{HARNESS_BIN} --list failed:\n{}",
            finished.stderr_tail(15)
        ));
    }
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Runs the harness; a group counts as started when its name shows up on
/// standard error or begins a metric's name.
pub(crate) fn run(
    levels: &[u8],
    mode: Mode,
    filter: Option<&str>,
    features: &[&str],
    groups: &[String],
    progress: &Progress,
) -> Collected {
    let mut command = harness_command(levels, filter, features);
    command.arg(match mode {
        Mode::Quick => "--quick",
        Mode::Full => "--full",
    });
    let started = std::sync::Mutex::new(HashSet::<&str>::new());
    let notice = |text: &str, is_metric_name: bool| {
        let group = groups.iter().find(|g| {
            if is_metric_name {
                text.starts_with(g.as_str())
            } else {
                text.contains(g.as_str())
            }
        });
        let mut started = started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match group {
            Some(group) if started.insert(group.as_str()) => {
                progress.start(&format!("{HARNESS_BIN}: {group}"))
            }
            _ if !is_metric_name => progress.detail(text),
            _ => {}
        }
    };
    let mut collected = Collected::default();
    let finished = process::stream(
        &mut command,
        &mut |piece| {
            let Stdout::Line(line) = piece else { return };
            if line.trim().is_empty() {
                return;
            }
            match parse_line(line) {
                Ok(metric) => {
                    notice(&metric.name, true);
                    collected.metrics.push(metric);
                }
                Err(e) => collected.warnings.push(format!("{HARNESS_BIN}: {e}")),
            }
        },
        &|line| notice(line, false),
    );
    match finished {
        Err(e) => collected.failure = Some(format!("cannot run {HARNESS_BIN}: {e}")),
        Ok(finished) if !finished.status.success() => {
            collected.failure = Some(format!(
                "{HARNESS_BIN} failed ({}):\n{}",
                finished.status,
                finished.stderr_tail(20)
            ));
        }
        Ok(_) if collected.metrics.is_empty() => {
            let levels: Vec<String> = levels.iter().map(u8::to_string).collect();
            collected.warnings.push(format!(
                "{HARNESS_BIN}: no metrics from this source for level {}",
                levels.join(", ")
            ));
        }
        Ok(_) => {}
    }
    collected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_example_line_becomes_a_summarised_metric() {
        let line = r#"{"name":"sockio/offload/1452B/batch64/datagrams_per_s","level":2,"unit":"datagrams/s","better":"higher","samples":[612345.0,630001.2,598765.4],"ceiling":"sockio/raw_gso/1452B/batch64/datagrams_per_s"}"#;
        let metric = parse_line(line).expect("valid line");
        assert_eq!(metric.name, "sockio/offload/1452B/batch64/datagrams_per_s");
        assert_eq!(
            (metric.level, metric.unit.as_str(), metric.better),
            (2, "datagrams/s", Better::Higher)
        );
        assert_eq!(
            (metric.median, metric.min, metric.max, metric.samples),
            (612_345.0, 598_765.4, 630_001.2, 3)
        );
        assert_eq!(
            metric.ceiling.as_deref(),
            Some("sockio/raw_gso/1452B/batch64/datagrams_per_s")
        );
    }

    #[test]
    fn unknown_fields_are_tolerated_and_the_ceiling_is_optional() {
        let line = r#"{"name":"e2e/p99","level":2,"unit":"µs","better":"lower","samples":[80],"note":"x"}"#;
        let metric = parse_line(line).expect("valid line");
        assert_eq!(metric.ceiling, None);
        assert_eq!(metric.median, 80.0);
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for line in [
            "starting sockio",
            "{}",
            r#"{"name":"x","level":2,"unit":"ns","better":"higher","samples":[]}"#,
            r#"{"name":"x","level":2,"unit":"ns","better":"sideways","samples":[1]}"#,
            r#"{"name":"","level":2,"unit":"ns","better":"lower","samples":[1]}"#,
            r#"{"name":"x","level":-1,"unit":"ns","better":"lower","samples":[1]}"#,
        ] {
            assert!(parse_line(line).is_err(), "accepted {line}");
        }
    }
}
