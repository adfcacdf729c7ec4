//! A run's result file: `target/tern-bench/NAME.json`.
//!
//! ```json
//! { "host": "...", "cpu": "...", "kernel": "...", "rustc": "...",
//!   "revision": "...", "dirty": false, "time": "2026-05-01T10:00:00Z",
//!   "quick": true,
//!   "metrics": [ { "name": "level0_wire/seal/tern/1452", "level": 0,
//!                  "unit": "ns", "better": "lower", "median": 812.4,
//!                  "min": 790.1, "max": 901.0, "samples": 10 } ] }
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::host::Environment;
use crate::metric::Metric;

/// One run of `cargo xtask bench`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    /// Machine, toolchain and revision.
    #[serde(flatten)]
    pub(crate) environment: Environment,
    /// When the run ended, RFC 3339 in UTC.
    pub(crate) time: String,
    /// Whether the run was in quick mode (short runs, wide intervals).
    pub(crate) quick: bool,
    /// Share (0–1) of all CPUs that other processes used while measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) others_cpu_share: Option<f64>,
    /// Every metric of the run.
    pub(crate) metrics: Vec<Metric>,
}

impl Run {
    /// A run that ends now.
    pub(crate) fn now(environment: Environment, quick: bool, metrics: Vec<Metric>) -> Self {
        Self {
            environment,
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            quick,
            others_cpu_share: None,
            metrics,
        }
    }

    /// The metric called `name`, if the run has it.
    pub(crate) fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// Writes the run as pretty JSON, creating the directory if needed.
    pub(crate) fn save(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut json = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        json.push('\n');
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Reads a run saved by [`Run::save`].
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let json = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&json)
            .map_err(|e| format!("{} is not a Tern result file: {e}", path.display()))
    }
}

/// The file a run saved as `name` lives in; `name` must be a plain file
/// name (letters, digits, `.`, `_`, `-`) so it cannot escape the directory.
pub(crate) fn result_path(results_dir: &Path, name: &str) -> Result<PathBuf, String> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if plain {
        Ok(results_dir.join(format!("{name}.json")))
    } else {
        Err(format!(
            "result name {name:?}: use letters, digits, '.', '_' and '-' only (it becomes NAME.json)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::{Better, Summary};

    fn sample_run() -> Run {
        let mut harness = Metric::new(
            "sockio/offload/1452B/batch64/datagrams_per_s".to_owned(),
            2,
            "datagrams/s",
            Better::Higher,
            Summary::of(&[612_345.0, 630_001.2, 598_765.4]).expect("finite"),
        );
        harness.ceiling = Some("sockio/raw_gso/1452B/batch64/datagrams_per_s".to_owned());
        let divan = Metric::new(
            "level0_wire/seal/tern/1452".to_owned(),
            0,
            "ns",
            Better::Lower,
            Summary {
                median: 812.4,
                min: 790.1,
                max: 901.0,
                samples: 10,
            },
        );
        Run {
            environment: Environment {
                host: "bench-host".to_owned(),
                cpu: "AMD EPYC 7B13 (2 logical CPUs)".to_owned(),
                kernel: "Linux 6.8.0".to_owned(),
                rustc: "rustc 1.95.0".to_owned(),
                revision: "37f9e2d".to_owned(),
                dirty: true,
            },
            time: "2026-05-01T10:00:00Z".to_owned(),
            quick: true,
            others_cpu_share: Some(0.04),
            metrics: vec![divan, harness],
        }
    }

    #[test]
    fn a_run_survives_a_round_trip_through_a_file() {
        let dir = std::env::temp_dir().join(format!("tern-xtask-results-{}", std::process::id()));
        let path = result_path(&dir, "before").expect("plain name");
        let run = sample_run();
        run.save(&path).expect("saved");
        assert_eq!(Run::load(&path).expect("loaded"), run);
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }

    #[test]
    fn the_file_has_the_contract_fields() {
        let value = serde_json::to_value(sample_run()).expect("serialise");
        for field in [
            "host", "cpu", "kernel", "rustc", "revision", "dirty", "time", "quick", "metrics",
        ] {
            assert!(value.get(field).is_some(), "missing {field}");
        }
        let metric = &value["metrics"][1];
        assert_eq!(metric["median"], 612_345.0);
        assert_eq!(metric["samples"], 3);
        assert_eq!(metric["better"], "higher");
        assert_eq!(
            metric["ceiling"],
            "sockio/raw_gso/1452B/batch64/datagrams_per_s"
        );
        assert!(value["metrics"][0].get("ceiling").is_none());
    }

    #[test]
    fn the_time_is_rfc3339_utc() {
        let run = Run::now(sample_run().environment, false, Vec::new());
        assert_eq!(run.time.len(), "2026-05-01T10:00:00Z".len(), "{}", run.time);
        assert!(
            run.time.ends_with('Z') && run.time.as_bytes()[10] == b'T',
            "{}",
            run.time
        );
    }

    #[test]
    fn result_names_cannot_leave_the_results_directory() {
        let dir = Path::new("/t/tern-bench");
        assert_eq!(
            result_path(dir, "main-2026.05").expect("plain"),
            dir.join("main-2026.05.json")
        );
        for bad in ["", "../x", "a/b", ".hidden", "white space"] {
            assert!(result_path(dir, bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_file_that_is_not_a_run_is_refused() {
        let dir = std::env::temp_dir().join(format!("tern-xtask-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("bad.json");
        std::fs::write(&path, "{\"metrics\": 3}").expect("written");
        assert!(Run::load(&path).is_err());
        assert!(Run::load(&dir.join("absent.json")).is_err());
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
