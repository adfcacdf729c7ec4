//! Reordering is not loss: on paths that reorder up to 10 % of the
//! datagrams, the sender declares at most 1.5 times as many packets lost as
//! the path dropped. In virtual time (tern-sim), seeded.
//!
//! tern-sim's reordering holds a datagram back one extra one-way delay plus
//! 1 ms, so later datagrams overtake it by far more than the packet
//! threshold of 3 and by more than the 9/8 RTT time threshold; only a
//! reordering window that adapts to the path tells it from a loss.

mod support;

use std::time::Duration;

use support::{Pair, StreamTransfer};
use tern_proto::{CongestionConfig, EndpointConfig};
use tern_sim::{Bottleneck, LinkConfig, Seed};

/// What one transfer saw.
struct Run {
    /// Packets the sender declared lost.
    declared: u64,
    /// Of those, losses it later found spurious.
    spurious: u64,
    /// Window reductions undone because their losses proved spurious.
    undone: u64,
    /// The reordering window at the end.
    window: Duration,
    /// Datagrams the data direction dropped (at random or at the queue).
    dropped: u64,
    /// Bytes the receiver read.
    read: u64,
}

/// One stream for `length` over a path of `rtt` whose data direction
/// reorders `reorder` and loses `loss` of its datagrams, with a 20 Mbit/s
/// bottleneck.
fn run(seed: u64, rtt: Duration, reorder: f64, loss: f64, length: Duration) -> Run {
    let forward = LinkConfig {
        delay: rtt / 2,
        reorder,
        loss,
        bottleneck: Some(Bottleneck {
            bits_per_second: 20_000_000,
            queue_bytes: 250_000,
        }),
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: rtt / 2,
        ..LinkConfig::default()
    };
    run_on(seed, EndpointConfig::default(), forward, back, length)
}

/// One stream for `length` from the client to the server over `forward`,
/// its ACKs coming back over `back`, with `config` at both ends.
fn run_on(
    seed: u64,
    config: EndpointConfig,
    forward: LinkConfig,
    back: LinkConfig,
    length: Duration,
) -> Run {
    let mut pair = Pair::new(seed, back, config);
    let (client, server) = (pair.client, pair.server);
    pair.sim.set_link(client, server, forward);
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    let start = pair.sim.elapsed();
    let mut read = 0;
    while pair.sim.elapsed() < start + length {
        read += transfer.turn(&mut pair);
        assert!(pair.sim.step(), "the transfer went quiet");
    }
    let link = pair.sim.link_stats(client, server);
    let stats = pair
        .client()
        .connection(transfer.client)
        .expect("open")
        .stats();
    Run {
        declared: stats.lost_packets,
        spurious: stats.spurious_losses,
        undone: stats.undone_reductions,
        window: stats.reordering_window,
        dropped: link.lost + link.queue_dropped,
        read,
    }
}

/// Spurious losses allowed while the window learns the path.
const LEARNING: u64 = 10;

#[test]
fn reordering_is_not_declared_loss() {
    let seed = Seed::from_env_or(2611).value();
    let mut rows = Vec::new();
    for (rtt_ms, reorder, loss) in [
        (50, 0.05, 0.0),
        (50, 0.10, 0.0),
        (50, 0.05, 0.01),
        (50, 0.10, 0.01),
        (10, 0.05, 0.03),
        (150, 0.10, 0.01),
    ] {
        let rtt = Duration::from_millis(rtt_ms);
        let r = run(seed, rtt, reorder, loss, Duration::from_secs(20));
        eprintln!(
            "rtt {rtt_ms} ms, reorder {:.0} %, loss {:.0} %: declared {} lost, {} of them spurious ({} reductions undone, window {:?}), path dropped {}; {:.2} Mbit/s",
            reorder * 100.0,
            loss * 100.0,
            r.declared,
            r.spurious,
            r.undone,
            r.window,
            r.dropped,
            r.read as f64 * 8.0 / 20e6,
        );
        rows.push((rtt_ms, reorder, loss, r));
    }
    for (rtt_ms, reorder, loss, r) in rows {
        assert!(
            r.spurious > 0,
            "the path reordered: some loss proves spurious"
        );
        assert!(r.window > Duration::ZERO, "and the window grew");
        // A path shows that it reorders by a loss that proves spurious:
        // the first few are the price of learning it.
        assert!(
            r.declared.saturating_sub(LEARNING) as f64 <= 1.5 * r.dropped as f64,
            "rtt {rtt_ms} ms, reorder {reorder}, loss {loss}: declared {} lost for {} dropped",
            r.declared,
            r.dropped
        );
    }
}

/// The relay of issue #26, both ways: 3 % loss, 2 % duplication, 5 %
/// reordering, 5 ± 2 ms; the data direction through a 20 Mbit/s
/// bottleneck.
fn relay(bottleneck: Option<Bottleneck>) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(2),
        reorder: 0.05,
        loss: 0.03,
        duplicate: 0.02,
        bottleneck,
        ..LinkConfig::default()
    }
}

#[test]
fn on_the_relay_path_declared_losses_stay_within_one_and_a_half_drops() {
    let base = Seed::from_env_or(2612).value();
    let mut cubic = EndpointConfig::default();
    cubic.connection.congestion = CongestionConfig::cubic();
    for (name, config, seed) in (base..base + 3)
        .map(|seed| ("ledbat", EndpointConfig::default(), seed))
        .chain((base..base + 3).map(|seed| ("cubic", cubic, seed)))
    {
        let forward = relay(Some(Bottleneck {
            bits_per_second: 20_000_000,
            queue_bytes: 250_000,
        }));
        let r = run_on(seed, config, forward, relay(None), Duration::from_secs(20));
        eprintln!(
            "relay, {name}, seed {seed}: declared {} lost, {} of them spurious ({} reductions undone, window {:?}), path dropped {}; {:.2} Mbit/s",
            r.declared,
            r.spurious,
            r.undone,
            r.window,
            r.dropped,
            r.read as f64 * 8.0 / 20e6,
        );
        assert!(
            r.declared as f64 <= 1.5 * r.dropped as f64,
            "{name}, seed {seed}: declared {} lost for {} dropped",
            r.declared,
            r.dropped
        );
    }
}
