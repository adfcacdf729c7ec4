//! Tern's end-to-end benchmark harness (levels 2 and 3).
//!
//! Implements the command line and JSON-lines output of the benchmark
//! contract that `cargo xtask bench` reads: metrics on standard output, one
//! JSON object per line; progress on standard error. Each benchmark group
//! lives in its own module and belongs to one level; level 2 has the sockio
//! backend matrix with its raw-syscall ceilings, tern-peer's endpoint
//! driver beside raw tern-sockio, and the end-to-end workloads of Tern's
//! async API beside their ceilings (and quinn's, with the `quinn` feature);
//! level 3 has one endpoint under load.

mod affinity;
mod alloc_count;
mod cli;
mod driver;
mod e2e;
mod level3;
mod raw;
mod relay;
mod report;
mod server_thread;
mod sockio_matrix;

use cli::{Args, Mode};

#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

/// A named set of benchmarks of one level, run as a unit.
pub(crate) trait Group {
    /// The prefix of every metric name in the group (what `--list` prints).
    fn name(&self) -> &str;
    /// The benchmark level the group belongs to.
    fn level(&self) -> u8;
    /// Whether any of its metrics passes the filter.
    fn selected(&self, args: &Args) -> bool;
    /// Runs the selected benchmarks and emits their metrics.
    fn run(&self, args: &Args);
}

fn groups(args: &Args) -> Vec<Box<dyn Group>> {
    let mut all: Vec<Box<dyn Group>> = Vec::new();
    all.extend(sockio_matrix::groups(args));
    all.extend(driver::groups(args));
    all.extend(e2e::groups(args));
    all.extend(level3::groups(args));
    all.retain(|g| args.levels.contains(&g.level()) && g.selected(args));
    all
}

fn main() {
    // The idle-connections workload's server runs in a process of its own.
    if let Some(count) = level3::idle_child_requested() {
        if let Err(e) = level3::run_idle_child(count) {
            eprintln!("tern-harness: idle server: {e}");
            std::process::exit(1);
        }
        return;
    }
    let args = match cli::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let groups = groups(&args);
    if args.list {
        for group in &groups {
            println!("{}", group.name());
        }
        return;
    }
    let mode = match args.mode {
        Mode::Quick => "quick",
        Mode::Normal => "normal",
        Mode::Full => "full",
    };
    eprintln!(
        "tern-harness: levels {:?}, {mode} mode ({} x {:?} per cell), {} groups",
        args.levels,
        args.mode.samples(),
        args.mode.sample_time(),
        groups.len()
    );
    let start = std::time::Instant::now();
    for group in &groups {
        eprintln!("== {}", group.name());
        group.run(&args);
    }
    eprintln!(
        "tern-harness: done in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}
