//! The congestion controller is a choice: a CUBIC connection fills a
//! bottleneck by itself, and beside a LEDBAT connection on the same
//! bottleneck takes most of it, since LEDBAT yields to loss-based traffic.
//! In virtual time (tern-sim), seeded: the figures are properties of the
//! controllers, not of the machine.
//!
//! The bottleneck is 100 Mbit/s with 50 ms of round trip and a queue of
//! 250 ms, deeper than LEDBAT's 100 ms target as home routers' queues are:
//! a loss-based flow fills it, and LEDBAT sees the delay and backs off.

mod support;

use std::time::Duration;

use support::{Pair, StreamTransfer, drive};
use tern_proto::{
    CongestionConfig, CongestionKind, ConnectionHandle, EndpointConfig, ReadOutcome, StreamId,
};
use tern_sim::{Bottleneck, LinkConfig, Seed};

const RATE_BPS: u64 = 100_000_000;
const RTT: Duration = Duration::from_millis(50);

/// A pair whose client-to-server link is the bottleneck, with a queue of
/// `queue` at its rate; the way back is plain delay.
fn pair(seed: u64, config: EndpointConfig, queue: Duration) -> Pair {
    let forward = LinkConfig {
        delay: RTT / 2,
        bottleneck: Some(Bottleneck {
            bits_per_second: RATE_BPS,
            queue_bytes: (RATE_BPS as f64 / 8.0 * queue.as_secs_f64()) as usize,
        }),
        ..LinkConfig::default()
    };
    let back = LinkConfig {
        delay: RTT / 2,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed, back, config);
    let (client, server) = (pair.client, pair.server);
    pair.sim.set_link(client, server, forward);
    pair
}

#[test]
fn a_cubic_connection_fills_a_100_mbit_50_ms_bottleneck() {
    let mut config = EndpointConfig::default();
    config.connection.congestion = CongestionConfig::cubic();
    let mut pair = pair(
        Seed::from_env_or(131).value(),
        config,
        Duration::from_millis(100),
    );
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    let start = pair.sim.elapsed();
    let (warm_up, length) = (Duration::from_secs(5), Duration::from_secs(20));
    let (mut read, mut read_at_warm) = (0u64, None);
    while pair.sim.elapsed() < start + length {
        read += transfer.turn(&mut pair);
        if pair.sim.elapsed() >= start + warm_up && read_at_warm.is_none() {
            read_at_warm = Some(read);
        }
        assert!(pair.sim.step(), "the transfer went quiet");
    }
    let stats = pair
        .client()
        .connection(transfer.client)
        .expect("open")
        .stats();
    assert_eq!(stats.congestion, CongestionKind::Cubic);
    let measured = (length - warm_up).as_secs_f64();
    let goodput = (read - read_at_warm.unwrap_or(read)) as f64 * 8.0 / measured;
    eprintln!(
        "CUBIC alone: {:.2} Mbit/s ({:.1} % of the bottleneck), {} packets lost",
        goodput / 1e6,
        goodput / RATE_BPS as f64 * 100.0,
        stats.lost_packets
    );
    // 2.4 % of each 1 452-byte datagram is Tern's header, AEAD tag and
    // frame headers, so 97.6 % is the ceiling.
    assert!(
        goodput >= 0.95 * RATE_BPS as f64,
        "CUBIC alone: {:.2} Mbit/s",
        goodput / 1e6
    );
}

/// What one connection's stream carries: every byte is its controller's
/// mark, so the server tells the two connections apart by what it reads.
const CUBIC_MARK: u8 = 0xc0;
const LEDBAT_MARK: u8 = 0x1e;

#[test]
fn beside_a_ledbat_connection_cubic_takes_most_of_the_bottleneck() {
    // One client endpoint (LEDBAT, the default) with two connections to
    // the same server over the same bottleneck, one of them CUBIC.
    let mut pair = pair(
        Seed::from_env_or(132).value(),
        EndpointConfig::default(),
        Duration::from_millis(250),
    );
    let public = pair.server().public().expect("identity");
    let (server_addr, now) = (pair.server_addr, pair.sim.now());
    let cubic = pair
        .client()
        .connect_with(now, server_addr, &public, CongestionConfig::cubic())
        .expect("connect");
    let ledbat = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    let senders: [(ConnectionHandle, [u8; 65_536]); 2] = [
        (cubic, [CUBIC_MARK; 65_536]),
        (ledbat, [LEDBAT_MARK; 65_536]),
    ];
    let mut streams: [Option<StreamId>; 2] = [None; 2];
    let mut receivers: Vec<(ConnectionHandle, Option<StreamId>)> = Vec::new();
    let (mut cubic_bytes, mut ledbat_bytes) = (0u64, 0u64);
    let (client_node, server_node) = (pair.client, pair.server);
    let mut buf = vec![0u8; 65_536];
    let (warm_up, length) = (Duration::from_secs(10), Duration::from_secs(30));
    let start = pair.sim.elapsed();
    drive(
        &mut pair.sim,
        start + length + Duration::from_secs(1),
        |sim| {
            let measuring = sim.elapsed() >= start + warm_up;
            let endpoint = &mut sim.node_mut(client_node).0;
            while endpoint.poll_event().is_some() {}
            for ((handle, chunk), stream) in senders.iter().zip(&mut streams) {
                let connection = endpoint.connection(*handle).expect("client");
                if stream.is_none() && connection.is_established() {
                    *stream = connection.open_stream();
                }
                if let Some(id) = *stream {
                    while connection.write(id, chunk).expect("open") > 0 {}
                }
            }
            let endpoint = &mut sim.node_mut(server_node).0;
            while endpoint.poll_event().is_some() {}
            while let Some(handle) = endpoint.accept() {
                receivers.push((handle, None));
            }
            for (handle, stream) in &mut receivers {
                let connection = endpoint.connection(*handle).expect("server");
                if stream.is_none() {
                    *stream = connection.accept_stream();
                }
                let Some(id) = *stream else { continue };
                while let ReadOutcome::Read(n @ 1..) =
                    connection.read(id, &mut buf).expect("readable")
                {
                    let counter = match buf[0] {
                        CUBIC_MARK => &mut cubic_bytes,
                        LEDBAT_MARK => &mut ledbat_bytes,
                        other => panic!("a byte no sender wrote: {other:#x}"),
                    };
                    if measuring {
                        *counter += n as u64;
                    }
                }
            }
            sim.elapsed() >= start + length
        },
    );
    let endpoint = pair.client();
    let kinds = [cubic, ledbat].map(|handle| {
        endpoint
            .connection(handle)
            .expect("open")
            .stats()
            .congestion
    });
    assert_eq!(kinds, [CongestionKind::Cubic, CongestionKind::Ledbat]);
    let measured = (length - warm_up).as_secs_f64();
    let total = (cubic_bytes + ledbat_bytes) as f64 * 8.0 / measured;
    let cubic_share = cubic_bytes as f64 / (cubic_bytes + ledbat_bytes).max(1) as f64;
    eprintln!(
        "CUBIC beside LEDBAT: {:.1} % of {:.2} Mbit/s (LEDBAT {:.2} Mbit/s)",
        cubic_share * 100.0,
        total / 1e6,
        ledbat_bytes as f64 * 8.0 / measured / 1e6
    );
    assert!(
        ledbat_bytes > 0,
        "LEDBAT yields down to its minimum window, not to nothing"
    );
    assert!(
        cubic_share >= 0.9,
        "CUBIC took {:.1} %",
        cubic_share * 100.0
    );
    assert!(
        total >= 0.9 * RATE_BPS as f64,
        "together {:.2} Mbit/s",
        total / 1e6
    );
}

/// A connection quiet for a while gives its congestion controller back
/// and starts the next transfer from a fresh one (RFC 7661's restart after
/// idle): the window a transfer opened is not kept for a path that may
/// have changed since, and LEDBAT measures its base delay again. The next
/// transfer runs as the first did.
#[test]
fn a_quiet_connection_starts_its_next_transfer_from_a_fresh_window() {
    let mut pair = pair(
        Seed::from_env_or(133).value(),
        EndpointConfig::default(),
        Duration::from_millis(100),
    );
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    // A second connection, which never sends: a fresh controller's window.
    let public = pair.server().public().expect("identity");
    let (server_addr, now) = (pair.server_addr, pair.sim.now());
    let fresh = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    let fresh_window = |pair: &mut Pair| {
        pair.client()
            .connection(fresh)
            .expect("open")
            .stats()
            .window
    };
    let initial = fresh_window(&mut pair);
    let client = transfer.client;
    let window = |pair: &mut Pair| {
        pair.client()
            .connection(client)
            .expect("open")
            .stats()
            .window
    };
    let run = |pair: &mut Pair, transfer: &mut StreamTransfer| {
        let (start, mut read) = (pair.sim.elapsed(), 0);
        while pair.sim.elapsed() < start + Duration::from_secs(3) {
            read += transfer.turn(pair);
            assert!(pair.sim.step(), "the transfer went quiet");
        }
        read
    };
    let first = run(&mut pair, &mut transfer);
    let opened = window(&mut pair);
    assert!(
        opened > 4 * initial,
        "{opened} B after 3 s, from {initial} B"
    );
    // The server reads what the client had queued, then all is quiet for
    // a second and more, before any keep-alive (10 s).
    let quiet_from = pair.sim.elapsed();
    while pair.sim.elapsed() < quiet_from + Duration::from_secs(4) {
        transfer.read(&mut pair);
        assert!(pair.sim.step(), "keep-alives keep the connection going");
    }
    assert_eq!(window(&mut pair), initial, "the window {opened} B was kept");
    assert_eq!(fresh_window(&mut pair), initial);
    let second = run(&mut pair, &mut transfer);
    eprintln!("3 s from a fresh window: {first} B, then {second} B after a quiet time");
    assert!(
        second * 10 >= first * 9,
        "the second transfer read {second} B, the first {first} B"
    );
    assert!(window(&mut pair) > 4 * initial);
}
