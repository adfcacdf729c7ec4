//! `cargo xtask ci`: exactly what CI runs, which is `bash .ci/run`.
//!
//! The script is the single definition of CI; this task only makes it
//! reachable through the same front door as every other task.

use std::process::{Command, ExitCode};

use crate::workspace::Workspace;

/// Runs `.ci/run` from the workspace root and passes its exit status on.
pub(crate) fn run() -> Result<ExitCode, String> {
    let workspace = Workspace::locate()?;
    let script = workspace.root.join(".ci").join("run");
    if !script.is_file() {
        return Err(format!("{} does not exist", script.display()));
    }
    let status = Command::new("bash")
        .arg(&script)
        .current_dir(&workspace.root)
        .status()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
