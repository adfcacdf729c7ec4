//! Level 1: the goodput matrix's 10 000 transfers (issue #26). Every cell
//! of tern-proto's `proto_matrix` test (1, 10, 100 Mbit/s; 10 to 300 ms;
//! loss independent or in bursts; reordering; LEDBAT and CUBIC) with 28
//! seeds instead of three: 10 080 transfers of 4 MiB in virtual time,
//! asserted as the test asserts every transfer (intact, never 3 s without
//! progress, spurious losses bounded per rate; the cells beyond the bound
//! are printed, not asserted) and summed up per rate on standard error
//! (the longest wait, its 99th percentile, the waits of a second or more).
//! The test's per-cell targets (`Tally::assert_targets`) are not asserted
//! here: over 28 seeds a few more cells wait a second (docs/benchmarks.md). Then the deep- and shallow-buffer cells at every rate and RTT,
//! without loss and with 1 %, 28 seeds: 2 688 transfers, asserted as the
//! test's buffer cells are (but for goodput without loss: at least 15 % of
//! the ideal, since at 100 Mbit/s × 300 ms a 4 MiB transfer is over in a
//! few round trips). The time divan reports is the wall time of the
//! whole matrix (or of the buffer cells), one rate a thread.
//!
//! A full run (`cargo xtask bench --levels 1 --full --filter matrix`) takes
//! minutes; in quick mode (`TERN_BENCH_MODE=quick`, which xtask sets) each
//! cell runs one seed, so the benchmark smoke stays short.

#[path = "../../crates/proto/tests/support/mod.rs"]
#[allow(missing_docs)]
mod support;

use std::thread;

use support::matrix::{buffer_cells, check_buffer_cells, matrix};

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

/// The deep- and shallow-buffer cells at every rate and RTT, each rate on
/// a thread of its own.
#[divan::bench(sample_count = 1, sample_size = 1)]
fn deep_and_shallow_buffers() {
    let seeds = seeds();
    thread::scope(|scope| {
        for mbit in [1, 10, 100] {
            scope.spawn(move || {
                let runs = buffer_cells(mbit, &[10, 50, 150, 300], seeds);
                check_buffer_cells(&runs, 0.15);
            });
        }
    });
}
