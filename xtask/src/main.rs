//! Tern's project tasks, run as `cargo xtask <task>`.
//!
//! - `cargo xtask bench` runs the benchmarks of levels 0–2 in quick mode and
//!   prints one table; see `cargo xtask help` for levels, filters, saved
//!   results, baselines and the report, and `docs/benchmarks.md` for the
//!   method.
//! - `cargo xtask ci` runs what CI runs.
//!
//! xtask needs nothing but cargo: it depends on no workspace crate and
//! drives the benchmarks through cargo itself, so it compiles in seconds.

#![forbid(unsafe_code)]

mod args;
mod bench;
mod ceiling;
mod charts;
mod ci;
mod diff;
mod divan;
mod divan_parse;
mod filter;
mod harness;
mod headline;
mod host;
mod load;
mod metric;
mod process;
mod progress;
mod report;
mod results;
mod source;
mod table;
mod units;
mod workspace;

use std::process::ExitCode;

use args::Task;

fn main() -> ExitCode {
    let outcome = match args::parse(std::env::args_os().skip(1)) {
        Ok(Task::Bench(bench_args)) => bench::run(&bench_args),
        Ok(Task::Ci) => ci::run(),
        Ok(Task::Help) => {
            print!("{}", args::USAGE);
            Ok(ExitCode::SUCCESS)
        }
        Err(usage) => {
            eprint!("error: {usage}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    outcome.unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::FAILURE
    })
}
