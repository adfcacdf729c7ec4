//! Levels 0 and 1: the divan bench targets `benches/benches/level<N>_*.rs`.
//!
//! Each file is one bench target whose level is in its name. Targets are
//! built together up front, listed (`-- --list`) for the progress line, then
//! run one by one with `cargo bench -p tern-benches --bench <target> --
//! <divan args>`, their output parsed as it streams. The run builds the
//! default features, so a target that needs others (`required-features`,
//! as a comparison transport's does) is left out with a note.

use std::collections::HashSet;
use std::path::Path;

use crate::divan_parse::{DivanParser, parse_list};
use crate::filter::DivanFilter;
use crate::process::{self, Stdout};
use crate::progress::Progress;
use crate::source::{Collected, Mode};
use crate::workspace::{BENCH_PACKAGE, cargo};

/// One divan bench target.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DivanTarget {
    /// Its level, from the name.
    pub(crate) level: u8,
    /// The bench target name, e.g. `level0_wire`.
    pub(crate) name: String,
}

/// divan arguments for quick mode: ten samples, at most 0.2 s per benchmark.
const QUICK_ARGS: [&str; 6] = [
    "--sample-count",
    "10",
    "--min-time",
    "0",
    "--max-time",
    "0.2",
];

/// The level of a bench target named `level<N>_<area>`.
pub(crate) fn level_of(name: &str) -> Option<u8> {
    let rest = name.strip_prefix("level")?;
    let (digits, area) = rest.split_once('_')?;
    if area.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The bench targets in `benches_dir` whose level is in `levels`, sorted by
/// level then name; files that do not follow the naming are noted.
pub(crate) fn discover(
    benches_dir: &Path,
    levels: &[u8],
    notes: &mut Vec<String>,
) -> Vec<DivanTarget> {
    let mut targets = Vec::new();
    let Ok(entries) = std::fs::read_dir(benches_dir) else {
        notes.push(format!("no bench folder {}", benches_dir.display()));
        return targets;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        match level_of(stem) {
            Some(level) if levels.contains(&level) => targets.push(DivanTarget {
                level,
                name: stem.to_owned(),
            }),
            Some(_) => {}
            None => notes.push(format!(
                "{}: not named level<N>_<area>.rs, so it belongs to no level and is skipped",
                path.display()
            )),
        }
    }
    targets.sort();
    targets
}

/// Builds every target in one cargo invocation, so that compiling is over
/// before the first measurement starts.
pub(crate) fn build(targets: &[DivanTarget]) -> Result<(), String> {
    if targets.is_empty() {
        return Ok(());
    }
    let mut command = cargo();
    command.args(["bench", "--no-run", "-p", BENCH_PACKAGE]);
    for target in targets {
        command.args(["--bench", &target.name]);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err("building the divan benches failed (see cargo's messages above)".to_owned())
    }
}

fn bench_command(target: &DivanTarget) -> std::process::Command {
    let mut command = cargo();
    command.args([
        "bench",
        "-q",
        "-p",
        BENCH_PACKAGE,
        "--bench",
        &target.name,
        "--",
        "--color",
        "never",
    ]);
    command
}

/// The leaf benchmarks `target` would run under `filter`, for the progress line.
pub(crate) fn list(target: &DivanTarget, filter: &DivanFilter) -> Result<Vec<String>, String> {
    let mut command = bench_command(target);
    command.arg("--list").args(filter.divan_args());
    let (finished, out) =
        process::capture(&mut command).map_err(|e| format!("cannot run cargo: {e}"))?;
    if !finished.status.success() {
        return Err(format!(
            "{} --list failed:\n{}",
            target.name,
            finished.stderr_tail(15)
        ));
    }
    Ok(parse_list(&out))
}

/// Runs `target`, updating `progress` per leaf in `listed`.
pub(crate) fn run(
    target: &DivanTarget,
    mode: Mode,
    filter: &DivanFilter,
    listed: &[String],
    progress: &Progress,
) -> Collected {
    let mut command = bench_command(target);
    // A benchmark too long for quick mode whole (level1_matrix) sizes
    // itself down by this.
    command.env("TERN_BENCH_MODE", mode.name());
    if mode == Mode::Quick {
        command.args(QUICK_ARGS);
    }
    command.args(filter.divan_args());
    let mut parser = DivanParser::new(&target.name, target.level);
    let mut started: HashSet<&str> = HashSet::new();
    let mut on_path = |path: &str| {
        let leaf = listed
            .iter()
            .find(|leaf| path == leaf.as_str() || path.starts_with(&format!("{leaf}/")));
        match leaf {
            Some(leaf) if started.insert(leaf.as_str()) => {
                progress.start(&format!("{}: {path}", target.name));
            }
            _ => progress.detail(path),
        }
    };
    let finished = process::stream(
        &mut command,
        &mut |piece| match piece {
            Stdout::Line(line) => {
                if let Some(path) = parser.push_line(line) {
                    on_path(&path);
                }
            }
            Stdout::Partial(partial) => {
                if let Some(path) = parser.running(partial) {
                    on_path(&path);
                }
            }
        },
        &|_| {},
    );
    let parsed = parser.finish();
    let mut collected = Collected {
        metrics: parsed.metrics,
        warnings: parsed.warnings,
        failure: None,
    };
    match finished {
        Err(e) => collected.failure = Some(format!("{}: cannot run cargo bench: {e}", target.name)),
        Ok(finished) if !finished.status.success() => {
            collected.failure = Some(format!(
                "{} failed ({}):\n{}",
                target.name,
                finished.status,
                finished.stderr_tail(20)
            ));
        }
        Ok(_) if collected.metrics.is_empty() => {
            collected.warnings.push(format!(
                "{}: no metrics from this bench target",
                target.name
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
    fn the_level_is_read_from_the_target_name() {
        assert_eq!(level_of("level0_wire"), Some(0));
        assert_eq!(level_of("level1_sim_pair"), Some(1));
        assert_eq!(level_of("level12_x"), Some(12));
        assert_eq!(level_of("level_wire"), None);
        assert_eq!(level_of("levelx_wire"), None);
        assert_eq!(level_of("level0_"), None);
        assert_eq!(level_of("wire"), None);
    }

    #[test]
    fn discovery_keeps_the_asked_levels_and_notes_strays() {
        let dir = std::env::temp_dir().join(format!("tern-xtask-discover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        for file in [
            "level1_sim.rs",
            "level0_wire.rs",
            "level0_congestion.rs",
            "level2_x.rs",
            "helpers.rs",
            "notes.txt",
        ] {
            std::fs::write(dir.join(file), "").expect("file");
        }
        let mut notes = Vec::new();
        let targets = discover(&dir, &[0, 1], &mut notes);
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["level0_congestion", "level0_wire", "level1_sim"]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("helpers.rs"));
        let mut notes = Vec::new();
        assert!(discover(&dir.join("absent"), &[0], &mut notes).is_empty());
        assert_eq!(notes.len(), 1);
        std::fs::remove_dir_all(&dir).expect("cleaned up");
    }
}
