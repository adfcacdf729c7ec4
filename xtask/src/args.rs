//! The command line: `cargo xtask bench [OPTIONS]`, `cargo xtask ci`.

use std::ffi::OsString;

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Task {
    /// `cargo xtask bench`.
    Bench(BenchArgs),
    /// `cargo xtask ci`.
    Ci,
    /// Print the usage.
    Help,
}

/// Options of `cargo xtask bench`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BenchArgs {
    /// Levels to run, ascending, without repeats.
    pub(crate) levels: Vec<u8>,
    /// Longer runs and tighter intervals instead of quick mode.
    pub(crate) full: bool,
    /// Only metrics whose names contain this.
    pub(crate) filter: Option<String>,
    /// Save the run as `target/tern-bench/NAME.json`.
    pub(crate) save: Option<String>,
    /// Compare with `target/tern-bench/NAME.json`.
    pub(crate) baseline: Option<String>,
    /// Exit non-zero when a metric regressed against the baseline.
    pub(crate) fail_on_regression: bool,
    /// Write `target/tern-bench/report.md` and its charts.
    pub(crate) report: bool,
    /// List the benchmarks that would run, and run none.
    pub(crate) list: bool,
    /// Also run the end-to-end workloads on this other transport.
    pub(crate) compare: Option<Comparison>,
    /// Print the full table after the headline, not only the headline.
    pub(crate) all: bool,
}

/// A transport measured beside Tern in the end-to-end workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Comparison {
    /// quinn, built into the harness through `tern-benches`' `quinn` feature.
    Quinn,
}

impl Comparison {
    /// The `tern-benches` feature that builds it into the harness.
    pub(crate) fn feature(self) -> &'static str {
        match self {
            Self::Quinn => "quinn",
        }
    }
}

/// Levels `cargo xtask bench` runs unless told otherwise (stress is opt-in).
pub(crate) const DEFAULT_LEVELS: [u8; 3] = [0, 1, 2];
/// The highest benchmark level.
pub(crate) const MAX_LEVEL: u8 = 3;

/// Printed by `cargo xtask help` and after a usage error.
pub(crate) const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  bench    run Tern's benchmarks and print one table
  ci       run what CI runs (bash .ci/run)
  help     print this

cargo xtask bench [options]
  --level N           run level N (repeatable); default: levels 0, 1 and 2
  --levels 0,1,3      run these levels
  --quick             short runs, wide intervals (the default)
  --full              longer runs, tighter intervals
  --filter PATTERN    only metrics whose names contain PATTERN
  --save NAME         save the results as <target>/tern-bench/NAME.json
  --baseline NAME     compare with a saved run; mark each metric improved,
                      regressed or within noise (2/5/10/15 % at levels 0/1/2/3)
  --fail-on-regression  exit with status 1 if any metric regressed
  --report            write <target>/tern-bench/report.md and SVG charts
  --list              list the benchmarks that would run, and stop
  --all               print every metric after the headline table (the
                      default prints the headline alone when it has rows,
                      and everything when --filter is given)
  --compare quinn     also run the end-to-end workloads on quinn (level 2;
                      builds the harness with tern-benches' `quinn` feature)
";

/// Parses the arguments after `cargo xtask`.
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Task, String> {
    use lexopt::prelude::*;

    let mut parser = lexopt::Parser::from_args(args);
    let task = match parser.next().map_err(|e| e.to_string())? {
        None => return Ok(Task::Help),
        Some(Value(task)) => task.string().map_err(|e| e.to_string())?,
        Some(Short('h') | Long("help")) => return Ok(Task::Help),
        Some(other) => return Err(other.unexpected().to_string()),
    };
    match task.as_str() {
        "bench" => Ok(parse_bench(&mut parser)?.map_or(Task::Help, Task::Bench)),
        "ci" => match parser.next().map_err(|e| e.to_string())? {
            None => Ok(Task::Ci),
            Some(other) => Err(other.unexpected().to_string()),
        },
        "help" => Ok(Task::Help),
        other => Err(format!("unknown task {other:?}")),
    }
}

/// The options of `bench`; `None` when help was asked for.
fn parse_bench(parser: &mut lexopt::Parser) -> Result<Option<BenchArgs>, String> {
    use lexopt::prelude::*;

    let mut levels: Vec<u8> = Vec::new();
    let (mut quick, mut full) = (false, false);
    let mut args = BenchArgs {
        levels: Vec::new(),
        full: false,
        filter: None,
        save: None,
        baseline: None,
        fail_on_regression: false,
        report: false,
        list: false,
        compare: None,
        all: false,
    };
    let value = |parser: &mut lexopt::Parser| -> Result<String, String> {
        parser
            .value()
            .map_err(|e| e.to_string())?
            .string()
            .map_err(|e| e.to_string())
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("level") => levels.push(parse_level(&value(parser)?)?),
            Long("levels") => {
                for level in value(parser)?.split(',').filter(|l| !l.trim().is_empty()) {
                    levels.push(parse_level(level)?);
                }
            }
            Long("quick") => quick = true,
            Long("full") => full = true,
            Long("filter") => args.filter = Some(value(parser)?).filter(|f| !f.is_empty()),
            Long("save") => args.save = Some(value(parser)?),
            Long("baseline") => args.baseline = Some(value(parser)?),
            Long("fail-on-regression") => args.fail_on_regression = true,
            Long("report") => args.report = true,
            Long("list") => args.list = true,
            Long("all") => args.all = true,
            Long("compare") => {
                args.compare = match value(parser)?.as_str() {
                    "quinn" => Some(Comparison::Quinn),
                    other => return Err(format!("--compare knows quinn, not {other:?}")),
                }
            }
            Short('h') | Long("help") => return Ok(None),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if quick && full {
        return Err("--quick and --full exclude each other".to_owned());
    }
    if args.fail_on_regression && args.baseline.is_none() {
        return Err("--fail-on-regression needs --baseline NAME".to_owned());
    }
    if levels.is_empty() {
        levels.extend(DEFAULT_LEVELS);
    }
    levels.sort_unstable();
    levels.dedup();
    args.levels = levels;
    args.full = full;
    Ok(Some(args))
}

fn parse_level(text: &str) -> Result<u8, String> {
    match text.trim().parse::<u8>() {
        Ok(level) if level <= MAX_LEVEL => Ok(level),
        _ => Err(format!("level {text:?}: levels are 0 to {MAX_LEVEL}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(args: &[&str]) -> Result<BenchArgs, String> {
        let args = std::iter::once("bench")
            .chain(args.iter().copied())
            .map(OsString::from);
        match parse(args)? {
            Task::Bench(bench) => Ok(bench),
            other => Err(format!("not bench: {other:?}")),
        }
    }

    #[test]
    fn bare_bench_runs_levels_0_to_2_in_quick_mode() {
        let args = bench(&[]).expect("valid");
        assert_eq!(args.levels, DEFAULT_LEVELS);
        assert!(!args.full && !args.report && !args.list);
        assert_eq!((args.filter, args.save, args.baseline), (None, None, None));
    }

    #[test]
    fn levels_come_from_repeated_or_listed_options() {
        assert_eq!(bench(&["--level", "3"]).expect("valid").levels, [3]);
        assert_eq!(
            bench(&["--level", "2", "--level=0"]).expect("valid").levels,
            [0, 2]
        );
        assert_eq!(
            bench(&["--levels", "3,0,1,1"]).expect("valid").levels,
            [0, 1, 3]
        );
        assert!(bench(&["--level", "4"]).is_err());
        assert!(bench(&["--levels", "0,x"]).is_err());
    }

    #[test]
    fn every_option_is_read() {
        let args = bench(&[
            "--full",
            "--filter",
            "seal/tern",
            "--save",
            "after",
            "--baseline",
            "before",
            "--fail-on-regression",
            "--report",
            "--compare",
            "quinn",
            "--all",
        ])
        .expect("valid");
        assert!(args.full && args.fail_on_regression && args.report && args.all);
        assert_eq!(args.compare, Some(Comparison::Quinn));
        assert_eq!(Comparison::Quinn.feature(), "quinn");
        assert_eq!(args.filter.as_deref(), Some("seal/tern"));
        assert_eq!(args.save.as_deref(), Some("after"));
        assert_eq!(args.baseline.as_deref(), Some("before"));
    }

    #[test]
    fn contradictions_and_strangers_are_refused() {
        assert!(bench(&["--quick", "--full"]).is_err());
        assert!(bench(&["--fail-on-regression"]).is_err());
        assert!(bench(&["--frobnicate"]).is_err());
        assert!(bench(&["stray"]).is_err());
        assert!(bench(&["--save"]).is_err());
        assert!(bench(&["--compare", "tcp"]).is_err());
        assert_eq!(bench(&[]).expect("valid").compare, None);
        assert!(!bench(&["--quick"]).expect("valid").full);
    }

    #[test]
    fn tasks_are_told_apart() {
        let parse = |args: &[&str]| parse(args.iter().map(OsString::from));
        assert_eq!(parse(&["ci"]), Ok(Task::Ci));
        assert_eq!(parse(&[]), Ok(Task::Help));
        assert_eq!(parse(&["--help"]), Ok(Task::Help));
        assert_eq!(parse(&["bench", "--help"]), Ok(Task::Help));
        assert!(parse(&["ci", "--now"]).is_err());
        assert!(parse(&["deploy"]).is_err());
    }
}
