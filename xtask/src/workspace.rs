//! Where the workspace and cargo's target directory are, asked of cargo.
//!
//! `cargo metadata` knows the target directory exactly as every other cargo
//! command will use it: `CARGO_TARGET_DIR`, `build.target-dir` in
//! configuration, or `<workspace>/target`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::process;

/// The workspace xtask works in.
#[derive(Clone, Debug)]
pub(crate) struct Workspace {
    /// Directory of the root `Cargo.toml`.
    pub(crate) root: PathBuf,
    /// cargo's target directory for this workspace.
    pub(crate) target_dir: PathBuf,
    /// Bench and bin target names of the benchmark package.
    pub(crate) bench_package: Option<BenchPackage>,
}

/// The package that holds the benchmarks (`tern-benches`).
#[derive(Clone, Debug)]
pub(crate) struct BenchPackage {
    /// Directory of its `Cargo.toml`.
    pub(crate) dir: PathBuf,
    /// Whether it has the `tern-harness` binary.
    pub(crate) has_harness: bool,
    /// Its bench targets built only with some of its features
    /// (`required-features`), by name, with those features.
    pub(crate) feature_benches: Vec<(String, Vec<String>)>,
}

/// Name of the benchmark package.
pub(crate) const BENCH_PACKAGE: &str = "tern-benches";
/// Name of the end-to-end harness binary in it.
pub(crate) const HARNESS_BIN: &str = "tern-harness";

#[derive(Deserialize)]
struct Metadata {
    workspace_root: PathBuf,
    target_directory: PathBuf,
    packages: Vec<Package>,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    targets: Vec<Target>,
}

#[derive(Deserialize)]
struct Target {
    name: String,
    kind: Vec<String>,
    #[serde(default, rename = "required-features")]
    required_features: Vec<String>,
}

/// The cargo that started xtask (`CARGO`), else the one on `PATH`.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

impl Workspace {
    /// Asks cargo about the workspace around the current directory.
    pub(crate) fn locate() -> Result<Self, String> {
        let mut command = cargo();
        command.args(["metadata", "--no-deps", "--format-version", "1"]);
        let (finished, out) = process::capture(&mut command)
            .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
        if !finished.status.success() {
            return Err(format!(
                "cargo metadata failed:\n{}",
                finished.stderr_tail(20)
            ));
        }
        Self::from_metadata(&out)
    }

    fn from_metadata(json: &str) -> Result<Self, String> {
        let metadata: Metadata =
            serde_json::from_str(json).map_err(|e| format!("unexpected cargo metadata: {e}"))?;
        let bench_package = metadata
            .packages
            .iter()
            .find(|p| p.name == BENCH_PACKAGE)
            .map(|p| BenchPackage {
                dir: p
                    .manifest_path
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
                has_harness: p
                    .targets
                    .iter()
                    .any(|t| t.name == HARNESS_BIN && t.kind.iter().any(|k| k == "bin")),
                feature_benches: p
                    .targets
                    .iter()
                    .filter(|t| {
                        t.kind.iter().any(|k| k == "bench") && !t.required_features.is_empty()
                    })
                    .map(|t| (t.name.clone(), t.required_features.clone()))
                    .collect(),
            });
        Ok(Self {
            root: metadata.workspace_root,
            target_dir: metadata.target_directory,
            bench_package,
        })
    }

    /// Where result files, the report and its charts go.
    pub(crate) fn results_dir(&self) -> PathBuf {
        self.target_dir.join("tern-bench")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_gives_root_target_dir_and_the_harness() {
        let json = r#"{"workspace_root":"/w","target_directory":"/t","packages":[
            {"name":"tern-benches","manifest_path":"/w/benches/Cargo.toml","targets":[
                {"name":"tern-harness","kind":["bin"]},{"name":"level0_wire","kind":["bench"]},
                {"name":"level1_x_quinn","kind":["bench"],"required-features":["quinn"]}]},
            {"name":"xtask","manifest_path":"/w/xtask/Cargo.toml","targets":[{"name":"xtask","kind":["bin"]}]}],
            "version":1}"#;
        let ws = Workspace::from_metadata(json).expect("valid metadata");
        assert_eq!(ws.root, Path::new("/w"));
        assert_eq!(ws.results_dir(), Path::new("/t/tern-bench"));
        let bench = ws.bench_package.expect("tern-benches");
        assert_eq!(bench.dir, Path::new("/w/benches"));
        assert!(bench.has_harness);
        assert_eq!(
            bench.feature_benches,
            [("level1_x_quinn".to_owned(), vec!["quinn".to_owned()])]
        );
    }

    #[test]
    fn a_workspace_without_benches_has_no_bench_package() {
        let json = r#"{"workspace_root":"/w","target_directory":"/w/target","packages":[]}"#;
        let ws = Workspace::from_metadata(json).expect("valid metadata");
        assert!(ws.bench_package.is_none());
    }
}
