//! The endpoint's memory under eight greedy peers, against its budget
//! (issue #23): the run of `crates/proto/tests/proto_budget.rs`, included
//! from the test support rather than copied. Eight peers each send a
//! 4 MiB message the application never takes to one endpoint with an
//! 8 MiB budget and a 1 MiB receive window, 100 ms apart, and an honest
//! peer then streams 4 MiB the application reads; all over tern-sim (5 ms
//! links), in virtual time, on this thread.
//!
//! Reported: the most the endpoint's connections held at once (receive
//! and send memory, `held_bytes`), the most its budget charged
//! (`charged_bytes`, which counts credit granted and not yet used), and
//! the most heap the process held beyond what it held before the run
//! (`heap_peak_bytes`: both sides' endpoints, the simulator's queues, the
//! messages, the greedy peers' own 4 MiB messages among them: an upper
//! bound of the endpoint's own). Each beside the budget; and, for scale,
//! what the connections held in the same run with a 1 GiB budget
//! (`held_bytes_1gib_budget`), where nobody is stopped. The run is
//! deterministic (seeded), so one sample.

use std::time::Duration;

#[path = "../../../../crates/proto/tests/support/mod.rs"]
mod support;

use support::greedy::{BUDGET, run as greedy_run};

use crate::alloc_count::heap_peak;
use crate::cli::Args;
use crate::report::Better;

const PREFIX: &str = "level3/budget/";
/// The seed of the test's run.
const SEED: u64 = 23;
/// The budget of the run for scale: larger than all the peers send.
const LARGE_BUDGET: u64 = 1 << 30;
/// The longest the run may take in virtual time (the honest transfer
/// completes in a few seconds of it).
const DEADLINE: Duration = Duration::from_secs(60);

pub(super) fn names() -> Vec<String> {
    [
        "held_bytes",
        "charged_bytes",
        "heap_peak_bytes",
        "held_bytes_1gib_budget",
    ]
    .iter()
    .map(|metric| format!("{PREFIX}{metric}"))
    .collect()
}

pub(super) fn run(args: &Args) {
    let (outcome, peak) = heap_peak(|| greedy_run(SEED, BUDGET, DEADLINE));
    let unbounded = greedy_run(SEED, LARGE_BUDGET, DEADLINE);
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    eprintln!(
        "   {PREFIX}: budget {:.2} MiB: held at most {:.2} MiB, charged at most {:.2} MiB, heap peak {:.2} MiB; {} greedy peers closed, honest peer read {:.2} MiB; with a 1 GiB budget the connections held {:.2} MiB",
        mib(BUDGET),
        mib(outcome.peak_held),
        mib(outcome.peak_charged),
        mib(peak),
        outcome.closed.len(),
        mib(outcome.honest_read),
        mib(unbounded.peak_held),
    );
    let ceiling = Some(format!("budget {BUDGET} B"));
    for (metric, value) in [
        ("held_bytes", outcome.peak_held),
        ("charged_bytes", outcome.peak_charged),
        ("heap_peak_bytes", peak),
        ("held_bytes_1gib_budget", unbounded.peak_held),
    ] {
        super::emit_metric(
            args,
            format!("{PREFIX}{metric}"),
            "B",
            Better::Lower,
            vec![value as f64],
            ceiling.clone(),
        );
    }
}
