//! Level 1: tern-sim's own speed. A node sends 1452-byte datagrams in GSO
//! runs of 32, one run every 50 µs of virtual time (7.4 Gbit/s, ~3 200
//! datagrams in flight), through a delayed, jittery, lossy link with a
//! bottleneck queue to a node that counts them; the figure is simulated datagrams per
//! second of the benchmark thread's time, so a protocol test is never slowed
//! by its network.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use quanta::Instant;
use tern_sim::{Bottleneck, LinkConfig, Node, Sim, SimConfig, Transmit};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const DATAGRAM: usize = 1452;
const RUN: usize = 32;
/// Datagrams per benchmark iteration.
const DATAGRAMS: u64 = 100_000;

/// Virtual time between two runs.
const INTERVAL: Duration = Duration::from_micros(50);

enum Toy {
    /// Datagrams still to send, where, when the next run is due, and
    /// whether it is due now.
    Blaster(u64, SocketAddr, Option<Instant>, bool),
    /// Datagrams received.
    Sink(u64),
}

impl Node for Toy {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, d: &mut [u8]) {
        if let Toy::Sink(n) = self {
            *n += u64::from(!d.is_empty());
        }
    }

    fn poll_transmit(&mut self, _: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let Toy::Blaster(left, to, _, due) = self else {
            return None;
        };
        let n = (*left).min(RUN as u64) as usize;
        if n == 0 || !*due {
            return None;
        }
        *due = false;
        *left -= n as u64;
        buf[0] = n as u8;
        Some(Transmit {
            source: None,
            destination: *to,
            len: n * DATAGRAM,
            segment_size: Some(DATAGRAM),
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        match self {
            Toy::Blaster(left, _, next, _) if *left > 0 => *next,
            _ => None,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Toy::Blaster(_, _, next, due) = self {
            *due = true;
            *next = Some(now + INTERVAL);
        }
    }
}

fn link(lossy: bool) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(5),
        jitter: if lossy {
            Duration::from_micros(200)
        } else {
            Duration::ZERO
        },
        loss: if lossy { 0.01 } else { 0.0 },
        bottleneck: Some(Bottleneck {
            bits_per_second: 100_000_000_000,
            queue_bytes: 1 << 30,
        }),
        ..LinkConfig::default()
    }
}

fn network(lossy: bool) -> Sim<Toy> {
    let (a, b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:1".parse().expect("address"),
        "10.0.0.2:2".parse().expect("address"),
    );
    let mut sim = Sim::new(SimConfig::seeded(1).with_default_link(link(lossy)));
    let start = sim.now();
    sim.add_node(Toy::Blaster(DATAGRAMS, b, Some(start), false), &[a])
        .expect("address");
    sim.add_node(Toy::Sink(0), &[b]).expect("address");
    sim
}

/// Datagrams through a link with delay, jitter, 1 % loss and a queue.
#[divan::bench(args = [false, true])]
fn datagrams(bencher: Bencher, lossy: bool) {
    bencher
        .counter(ItemsCount::new(DATAGRAMS))
        .with_inputs(|| network(lossy))
        .bench_local_values(|mut sim| {
            while sim.step() {}
            black_box(sim.stats().delivered)
        });
}

/// The same runs counted in simulator events (deliveries and timers), so the
/// figure is events per second.
#[divan::bench(args = [false, true])]
fn events(bencher: Bencher, lossy: bool) {
    let mut probe = network(lossy);
    while probe.step() {}
    let events = probe.stats().events;
    bencher
        .counter(ItemsCount::new(events))
        .with_inputs(|| network(lossy))
        .bench_local_values(|mut sim| {
            while sim.step() {}
            black_box(sim.stats().events)
        });
}
