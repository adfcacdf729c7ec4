//! Bad paths (issue #26), in virtual time (tern-sim), seeded: a transfer
//! whose path gets longer when the peer moves keeps its speed, and a lost
//! packet in a multi-megabyte window does not stop the sender until it is
//! repaired.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{Pair, StreamTransfer};
use tern_proto::{CongestionConfig, EndpointConfig};
use tern_sim::{Bottleneck, LinkConfig, Seed};

/// One way, before the move.
const SHORT: Duration = Duration::from_millis(20);
/// One way from the client after the move: 150 ms more than before, above
/// LEDBAT's 100 ms target, so to the old base delay it is a queue that
/// forbids any growth.
const LONG: Duration = Duration::from_millis(170);

/// A link of `delay` through a 20 Mbit/s bottleneck with 250 ms of queue.
fn narrow(delay: Duration) -> LinkConfig {
    LinkConfig {
        delay,
        bottleneck: Some(Bottleneck {
            bits_per_second: 20_000_000,
            queue_bytes: 625_000,
        }),
        ..LinkConfig::default()
    }
}

/// A 40 MB LEDBAT (the default) stream from the client to the server;
/// after 3 s the server's address changes (a new IP: it moved), and from
/// then on the way to it is 150 ms longer. Returns the virtual time from
/// the move to the last byte read (`None` if `deadline` passed first),
/// the bytes read, and the client's migration count.
fn across_a_move_to_a_longer_path(seed: u64, deadline: Duration) -> (Option<Duration>, u64, u64) {
    const SIZE: u64 = 40_000_000;
    let mut pair = Pair::new(seed, narrow(SHORT), EndpointConfig::default());
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    let moved_to: SocketAddr = "10.0.9.2:5000".parse().expect("address");
    let (client, server, server_addr) = (pair.client, pair.server, pair.server_addr);
    let move_at = pair.sim.elapsed() + Duration::from_secs(3);
    let (mut moved, mut read) = (false, 0);
    let finished = loop {
        read += transfer.turn(&mut pair);
        if read >= SIZE {
            break Some(pair.sim.elapsed() - move_at);
        }
        if !moved && pair.sim.elapsed() >= move_at {
            pair.sim
                .schedule_rebind(Duration::ZERO, server_addr, moved_to);
            pair.sim.set_link(client, server, narrow(LONG));
            moved = true;
        }
        if pair.sim.elapsed() >= move_at + deadline {
            break None;
        }
        assert!(pair.sim.step(), "the transfer went quiet");
    };
    let migrations = pair
        .client()
        .connection(transfer.client)
        .expect("open")
        .stats()
        .migrations;
    (finished, read, migrations)
}

#[test]
fn a_move_to_a_longer_path_keeps_a_ledbat_transfer_going() {
    // At 20 Mbit/s, 40 MB less what the first 3 s carried take about 14 s;
    // held at its minimum window by the old path's base delay, LEDBAT
    // would carry 2 packets per 190 ms round trip (0.12 Mbit/s).
    let deadline = Duration::from_secs(30);
    let (finished, read, migrations) =
        across_a_move_to_a_longer_path(Seed::from_env_or(261).value(), deadline);
    eprintln!(
        "40 MB across a move to a 150 ms longer path: {finished:?} after the move, {read} bytes read"
    );
    assert_eq!(migrations, 1, "the client followed the server");
    assert!(finished.is_some(), "{read} bytes read 30 s after the move");
}

/// What [`cubic_on_a_long_fat_path`] measured.
#[derive(Debug)]
struct Recovery {
    /// The longest time the sender kept less than half its window in
    /// flight, with data to send.
    longest_stall: Duration,
    /// Stream bytes read by the server per second over the run.
    goodput_mbit: f64,
    /// Packets the sender declared lost.
    lost: u64,
    /// The most the client's streams held to send.
    peak_send_memory: usize,
}

/// A CUBIC stream for 20 s through 100 Mbit/s with 150 ms of round trip
/// and a queue of one bandwidth-delay product (1.875 MB): the window
/// reaches 3-4 MB before the queue overflows, and each loss leaves a hole
/// that holds every byte sent after it until it is repaired, two round
/// trips or more later.
fn cubic_on_a_long_fat_path(seed: u64, rtt_ms: u64) -> Recovery {
    const RATE: u64 = 100_000_000;
    let rtt = Duration::from_millis(rtt_ms);
    let forward = LinkConfig {
        delay: rtt / 2,
        bottleneck: Some(Bottleneck {
            bits_per_second: RATE,
            queue_bytes: (RATE / 8 * rtt_ms / 1000) as usize,
        }),
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: rtt / 2,
        ..LinkConfig::default()
    };
    let mut config = EndpointConfig::default();
    config.connection.congestion = CongestionConfig::cubic();
    let mut pair = Pair::new(seed, back, config);
    let (client, server) = (pair.client, pair.server);
    pair.sim.set_link(client, server, forward);
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    let start = pair.sim.elapsed();
    let length = Duration::from_secs(20);
    let (mut read, mut stalled_since, mut longest_stall, mut peak_send_memory) =
        (0u64, None, Duration::ZERO, 0);
    while pair.sim.elapsed() < start + length {
        read += transfer.turn(&mut pair);
        let now = pair.sim.elapsed();
        let stats = pair
            .client()
            .connection(transfer.client)
            .expect("open")
            .stats();
        peak_send_memory = peak_send_memory.max(stats.send_memory);
        if stats.bytes_in_flight < stats.window / 2 {
            let since = *stalled_since.get_or_insert(now);
            longest_stall = longest_stall.max(now - since);
        } else {
            stalled_since = None;
        }
        assert!(pair.sim.step(), "the transfer went quiet");
    }
    let lost = pair
        .client()
        .connection(transfer.client)
        .expect("open")
        .stats()
        .lost_packets;
    Recovery {
        longest_stall,
        goodput_mbit: read as f64 * 8.0 / length.as_secs_f64() / 1e6,
        lost,
        peak_send_memory,
    }
}

#[test]
fn a_hole_in_a_multi_megabyte_cubic_window_does_not_stop_the_sender() {
    // With the send limits fixed at 4 MiB, the sender kept less than half
    // its window in flight for up to 169 ms at a time (91.9 Mbit/s): the
    // bytes sent after each hole filled the buffer.
    let outcome = cubic_on_a_long_fat_path(Seed::from_env_or(262).value(), 150);
    eprintln!("CUBIC, 100 Mbit/s, 150 ms: {outcome:?}");
    assert!(outcome.lost > 0, "the queue overflowed: there were holes");
    assert!(
        outcome.longest_stall < Duration::from_millis(50),
        "{outcome:?}"
    );
    assert!(outcome.goodput_mbit > 90.0, "{outcome:?}");
    assert!(
        outcome.peak_send_memory > 4 << 20 && outcome.peak_send_memory <= 16 << 20,
        "the limit grew with the window, and no further than 4 x 4 MiB: {outcome:?}"
    );
}
