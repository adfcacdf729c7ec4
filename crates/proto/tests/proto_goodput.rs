//! Goodput on a bottleneck, in virtual time: one stream through a
//! 100 Mbit/s link with a queue of 250 ms (deeper than LEDBAT's 100 ms
//! target, as home routers' queues are, so that LEDBAT, not tail drop,
//! decides how full it gets), at several
//! round-trip times and loss rates. tern-sim is deterministic, so the
//! figures are properties of the protocol (LEDBAT with slow start, loss
//! recovery, flow control), not of the machine, and are checked two ways:
//! against the bars of the issue (no loss: ≥ 95 % of the bottleneck; random
//! loss: ≥ 90 % of what halving on loss allows, the Mathis bound
//! MSS/RTT × 1.22/√p), and against a committed snapshot of the whole table
//! (`TERN_BLESS=1` rewrites it after a deliberate change).

mod support;

use std::fmt::Write as _;
use std::time::Duration;

use support::{Pair, StreamTransfer};
use tern_proto::EndpointConfig;
use tern_sim::{Bottleneck, LinkConfig, Seed};

const RATE_BPS: u64 = 100_000_000;
/// The bottleneck's queue, in time at its rate.
const QUEUE: Duration = Duration::from_millis(250);
/// Stream bytes per full packet at the 1 452-byte path MTU (the MSS of the
/// Mathis bound).
const MSS: f64 = 1_400.0;

/// What one run measured.
struct Run {
    /// Stream bytes read by the receiver per second, after the first
    /// `WARM_UP` of the transfer.
    goodput_bps: f64,
    /// The bottleneck queue's mean delay over the same window.
    queue_delay: Duration,
    /// UDP payload the sender put on the link per second over the window
    /// (what the bottleneck carries: goodput plus Tern's headers, frames
    /// and retransmissions).
    sent_bps: f64,
}

/// One stream, client to server, for `length` of virtual time.
fn run(seed: u64, rtt: Duration, loss: f64, length: Duration, warm_up: Duration) -> Run {
    let one_way = rtt / 2;
    let queue = (RATE_BPS as f64 / 8.0 * QUEUE.as_secs_f64()) as usize;
    let forward = LinkConfig {
        delay: one_way,
        loss,
        bottleneck: Some(Bottleneck {
            bits_per_second: RATE_BPS,
            queue_bytes: queue,
        }),
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: one_way,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed, back, EndpointConfig::default());
    let (client_node, server_node) = (pair.client, pair.server);
    pair.sim.set_link(client_node, server_node, forward);
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(60));
    let client = transfer.client;
    let start = pair.sim.elapsed();
    let (mut read, mut read_at_warm, mut sent_at_warm) = (0u64, None, 0);
    let (mut queue_sum, mut queue_samples) = (0.0, 0u64);
    let mut next_sample = start + warm_up;
    while pair.sim.elapsed() < start + length {
        read += transfer.turn(&mut pair);
        let elapsed = pair.sim.elapsed();
        if elapsed >= start + warm_up && read_at_warm.is_none() {
            read_at_warm = Some(read);
            sent_at_warm = pair
                .client()
                .connection(client)
                .expect("open")
                .stats()
                .sent_bytes;
        }
        while elapsed >= next_sample {
            queue_sum += pair.sim.queue_bytes(client_node, server_node) as f64;
            queue_samples += 1;
            next_sample += Duration::from_millis(1);
        }
        assert!(pair.sim.step(), "the transfer went quiet");
    }
    let sent = pair
        .client()
        .connection(client)
        .expect("open")
        .stats()
        .sent_bytes
        - sent_at_warm;
    let measured = (length - warm_up).as_secs_f64();
    let bytes = read - read_at_warm.unwrap_or(0);
    let mean_queue = queue_sum / queue_samples.max(1) as f64;
    Run {
        goodput_bps: bytes as f64 * 8.0 / measured,
        queue_delay: Duration::from_secs_f64(mean_queue * 8.0 / RATE_BPS as f64),
        sent_bps: sent as f64 * 8.0 / measured,
    }
}

/// The Mathis bound in bits per second.
fn mathis_bps(rtt: Duration, loss: f64) -> f64 {
    MSS * 8.0 / rtt.as_secs_f64() * 1.22 / loss.sqrt()
}

#[test]
fn goodput_on_a_100_mbit_50_ms_bottleneck_meets_the_bars() {
    let rtt = Duration::from_millis(50);
    let length = Duration::from_secs(60);
    let warm_up = Duration::from_secs(20);
    let clean = run(Seed::from_env_or(91).value(), rtt, 0.0, length, warm_up);
    eprintln!(
        "no loss: {:.2} Mbit/s, {:.2} Mbit/s on the link",
        clean.goodput_bps / 1e6,
        clean.sent_bps / 1e6
    );
    // The bar: 95 % of the bottleneck. 2.4 % of each 1 452-byte datagram
    // is Tern's header, AEAD tag and frame headers; LEDBAT's periodic
    // slowdowns leave the link idle about 1.6 % of the time.
    assert!(
        clean.goodput_bps >= 0.95 * RATE_BPS as f64 && clean.sent_bps >= 0.97 * RATE_BPS as f64,
        "no loss: goodput {:.2} Mbit/s, {:.2} Mbit/s on the link",
        clean.goodput_bps / 1e6,
        clean.sent_bps / 1e6
    );
    for (seed, loss) in [(92, 0.001), (93, 0.01)] {
        let lossy = run(Seed::from_env_or(seed).value(), rtt, loss, length, warm_up);
        let bound = mathis_bps(rtt, loss).min(RATE_BPS as f64);
        eprintln!(
            "{} % loss: {:.2} Mbit/s, Mathis bound {:.2} Mbit/s",
            loss * 100.0,
            lossy.goodput_bps / 1e6,
            bound / 1e6
        );
        assert!(
            lossy.goodput_bps >= 0.9 * bound,
            "{} % loss: {:.2} Mbit/s, Mathis bound {:.2} Mbit/s",
            loss * 100.0,
            lossy.goodput_bps / 1e6,
            bound / 1e6
        );
    }
}

#[test]
fn the_loss_by_rtt_table_matches_its_snapshot() {
    let mut table = String::from(
        "| RTT | loss | goodput Mbit/s | share of 100 Mbit/s | Mathis bound Mbit/s | mean queuing delay ms |\n|---|---|---:|---:|---:|---:|\n",
    );
    for (i, rtt_ms) in [2u64, 50, 300].into_iter().enumerate() {
        for (j, loss) in [0.0, 0.001, 0.01, 0.05].into_iter().enumerate() {
            let rtt = Duration::from_millis(rtt_ms);
            let r = run(
                100 + (i * 4 + j) as u64,
                rtt,
                loss,
                Duration::from_secs(60),
                Duration::from_secs(20),
            );
            let bound = if loss > 0.0 {
                format!("{:.2}", mathis_bps(rtt, loss) / 1e6)
            } else {
                "—".to_owned()
            };
            let _ = writeln!(
                table,
                "| {rtt_ms} ms | {} % | {:.2} | {:.1} % | {bound} | {:.2} |",
                loss * 100.0,
                r.goodput_bps / 1e6,
                r.goodput_bps / RATE_BPS as f64 * 100.0,
                r.queue_delay.as_secs_f64() * 1e3
            );
        }
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/goodput.md");
    if std::env::var_os("TERN_BLESS").is_some() {
        std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"))
            .expect("a directory");
        std::fs::write(path, &table).expect("writes the snapshot");
        return;
    }
    let snapshot = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        table, snapshot,
        "the goodput table changed; if on purpose, rerun with TERN_BLESS=1 and commit it"
    );
}
