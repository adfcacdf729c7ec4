//! Level 1: the goodput matrix's 10 000 transfers (issue #26). Every cell
//! of tern-proto's `proto_matrix` test (1, 10, 100 Mbit/s; 10 to 300 ms;
//! loss independent or in bursts; reordering; LEDBAT and CUBIC) with 28
//! seeds instead of three: 10 080 transfers of 4 MiB in virtual time,
//! asserted as the test asserts them (intact, never 3 s without progress,
//! spurious losses bounded) and summed up per rate on standard error (the
//! longest wait, its 99th percentile, the waits of a second or more). The
//! time divan reports is the wall time of the whole matrix, one rate a
//! thread.
//!
//! A full run (`cargo xtask bench --levels 1 --full --filter matrix`) takes
//! minutes; in quick mode (`TERN_BENCH_MODE=quick`, which xtask sets) each
//! cell runs one seed, so the benchmark smoke stays short.

#[path = "../../crates/proto/tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use std::thread;

use support::matrix::matrix;

fn main() {
    divan::main();
}

/// Seeds per cell: 28 in a full run, one in quick mode.
fn seeds() -> u64 {
    match std::env::var("TERN_BENCH_MODE").as_deref() {
        Ok("quick") => 1,
        _ => 28,
    }
}

/// Every cell at every rate, each rate on a thread of its own.
#[divan::bench(sample_count = 1, sample_size = 1)]
fn ten_thousand_transfers() {
    let seeds = seeds();
    thread::scope(|scope| {
        for mbit in [1, 10, 100] {
            scope.spawn(move || matrix(mbit, seeds).check(mbit));
        }
    });
}
