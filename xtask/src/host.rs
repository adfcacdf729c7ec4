//! What a run was measured on: machine, CPU, kernel, compiler and revision.
//!
//! A figure without these cannot be compared with anything, so they are
//! stored with every result file and printed at the top of the report.
//! Whatever cannot be found is recorded as `unknown` rather than failing.

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Stored in result files; field names follow the bench contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Environment {
    /// Host name.
    pub(crate) host: String,
    /// CPU model and number of logical CPUs.
    pub(crate) cpu: String,
    /// Kernel release.
    pub(crate) kernel: String,
    /// `rustc -V` of the toolchain cargo uses here.
    pub(crate) rustc: String,
    /// Commit the work tree is at.
    pub(crate) revision: String,
    /// Whether the work tree differs from that commit.
    pub(crate) dirty: bool,
}

const UNKNOWN: &str = "unknown";

impl Environment {
    /// Gathers the environment of the workspace at `root`.
    pub(crate) fn detect(root: &Path) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let revision = command_line(
            Command::new("git")
                .args(["rev-parse", "HEAD"])
                .current_dir(root),
        );
        let dirty = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(root)
            .output()
            .map(|o| o.status.success() && !o.stdout.is_empty())
            .unwrap_or(false);
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        Self {
            host: read_trimmed("/proc/sys/kernel/hostname")
                .or_else(|| command_line(&mut Command::new("hostname")))
                .unwrap_or_else(|| UNKNOWN.to_owned()),
            cpu: cpu_model(&cpuinfo).unwrap_or_else(|| UNKNOWN.to_owned()),
            kernel: read_trimmed("/proc/sys/kernel/osrelease")
                .map(|release| format!("Linux {release}"))
                .or_else(|| command_line(Command::new("uname").arg("-sr")))
                .unwrap_or_else(|| UNKNOWN.to_owned()),
            rustc: command_line(Command::new(rustc).arg("-V").current_dir(root))
                .unwrap_or_else(|| UNKNOWN.to_owned()),
            revision: revision.unwrap_or_else(|| UNKNOWN.to_owned()),
            dirty,
        }
    }
}

/// `model name` of `/proc/cpuinfo` (ARM kernels may only have `Hardware`
/// or `CPU part`) and the number of logical CPUs.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            (name.trim() == key).then(|| value.trim().to_owned())
        })
    };
    let model = field("model name").or_else(|| field("Hardware"))?;
    let cpus = cpuinfo
        .lines()
        .filter(|line| {
            line.split_once(':')
                .is_some_and(|(name, _)| name.trim() == "processor")
        })
        .count();
    Some(if cpus > 0 {
        format!("{model} ({cpus} logical CPUs)")
    } else {
        model
    })
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The first line a successful command prints.
fn command_line(command: &mut Command) -> Option<String> {
    let output = command.output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next()?.trim();
    (output.status.success() && !line.is_empty()).then(|| line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_and_count_come_from_cpuinfo() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\n\
                       processor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(
            cpu_model(cpuinfo).as_deref(),
            Some("AMD EPYC 7B13 (2 logical CPUs)")
        );
        assert_eq!(cpu_model("flags : fpu"), None);
    }

    #[test]
    fn this_machine_is_described() {
        let env = Environment::detect(Path::new(env!("CARGO_MANIFEST_DIR")));
        assert_ne!(env.rustc, UNKNOWN);
        assert!(env.rustc.starts_with("rustc "), "{}", env.rustc);
        assert_ne!(env.kernel, UNKNOWN);
    }
}
