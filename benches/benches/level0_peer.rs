//! Level 0 benchmarks of tern-proto's endpoint tables: finding a connection
//! from the receiver index of a packet (the per-packet demultiplexing cost)
//! beside a `HashMap<u32, usize>` baseline, and admitting or refusing an
//! intro.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use divan::{Bencher, black_box};
use tern_proto::IntroLimiterConfig;
use tern_proto::internals::{IntroLimiter, ReceiverIndex};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// Connections held while looking up.
const CONNECTIONS: usize = 10_000;

/// A table of `CONNECTIONS` entries and their indices in a scattered order.
fn table() -> (ReceiverIndex<usize>, Vec<u32>) {
    let mut table = ReceiverIndex::with_capacity(CONNECTIONS);
    let mut indices: Vec<u32> = (0..CONNECTIONS)
        .map(|i| table.insert(i, &mut rand_core::OsRng).expect("room"))
        .collect();
    // Visit them in an order unrelated to their slots, as packets arrive.
    indices.sort_by_key(|i| i.rotate_left(13) ^ 0x5bd1_e995);
    (table, indices)
}

#[divan::bench_group]
mod receiver_index {
    use super::*;

    #[divan::bench]
    fn lookup_hit(bencher: Bencher) {
        let (table, indices) = table();
        let mut next = 0;
        bencher.bench_local(|| {
            next = (next + 1) % indices.len();
            black_box(table.get(black_box(indices[next])))
        });
    }

    /// A forged index: the slot exists, the tag does not match.
    #[divan::bench]
    fn lookup_forged(bencher: Bencher) {
        let (table, indices) = table();
        let mut next = 0;
        bencher.bench_local(|| {
            next = (next + 1) % indices.len();
            black_box(table.get(black_box(indices[next] ^ 0x8000_0000)))
        });
    }

    /// The baseline: the same indices in a `HashMap` with std's hasher.
    #[divan::bench]
    fn hashmap_baseline(bencher: Bencher) {
        let (_, indices) = table();
        let map: HashMap<u32, usize> = indices.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let mut next = 0;
        bencher.bench_local(|| {
            next = (next + 1) % indices.len();
            black_box(map.get(black_box(&indices[next])))
        });
    }
}

#[divan::bench_group]
mod intro_limiter {
    use super::*;

    /// A flood from ever-new sources: each admit finds, evicts and refuses.
    #[divan::bench]
    fn admit_flood(bencher: Bencher) {
        let (clock, time) = quanta::Clock::mock();
        let mut limiter = IntroLimiter::new(IntroLimiterConfig::default(), 1);
        let mut source = 0u32;
        bencher.bench_local(|| {
            source = source.wrapping_add(1);
            time.increment(Duration::from_micros(1));
            let ip = IpAddr::from(Ipv4Addr::from(source));
            black_box(limiter.admit(ip, clock.now()))
        });
    }
}
