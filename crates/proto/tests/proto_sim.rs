//! The protocol on tern-sim: two endpoints, a handshake, and messages and
//! streams delivered whole, exactly once, under loss, reordering,
//! duplication and delay. Seeded: `TERN_SIM_SEED=n` replays a run.

mod support;

use std::time::Duration;

use support::{Outbox, Pair, connection_at, drive, exchange, message};
use tern_proto::{ConnectionError, EndpointConfig, Event, ReadOutcome};
use tern_sim::{GilbertElliott, LinkConfig, Seed};

const SIZES: [usize; 8] = [0, 1, 1_000, 4_096, 16_384, 65_536, 1 << 20, 3];

#[test]
fn messages_of_every_size_arrive_whole_and_once_on_a_clean_link() {
    let seed = Seed::from_env_or(1);
    let link = LinkConfig {
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
    exchange(&mut pair, &SIZES, Duration::from_secs(30));
}

#[test]
fn messages_of_a_hundred_megabytes_and_a_gigabyte_arrive_whole_and_once() {
    let seed = Seed::from_env_or(2);
    let link = LinkConfig {
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
    exchange(&mut pair, &[100 << 20, 1 << 30], Duration::from_secs(600));
}

#[test]
fn messages_arrive_whole_and_once_through_loss_reordering_and_duplication() {
    // 1 %, 5 % and 20 % loss at round trips of 0.1 ms, 2 ms, 50 ms and
    // 300 ms (one-way delays below), with jitter, reordering and
    // duplication.
    let mut seed = 10;
    for loss in [0.01, 0.05, 0.2] {
        for one_way_us in [50, 1_000, 25_000, 150_000] {
            seed += 1;
            let seed = Seed::from_env_or(seed);
            let link = LinkConfig {
                delay: Duration::from_micros(one_way_us),
                jitter: Duration::from_micros(one_way_us / 5),
                loss,
                reorder: 0.05,
                duplicate: 0.02,
                ..LinkConfig::default()
            };
            let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
            exchange(&mut pair, &SIZES, Duration::from_secs(3_600));
        }
    }
}

/// Messages of every size at the round-trip times the issue names, each
/// with bursty loss, corruption, reordering and duplication at once.
#[test]
fn messages_arrive_whole_and_once_through_bursty_loss_and_corruption_at_every_rtt() {
    let bursty = GilbertElliott {
        p_good_to_bad: 0.01,
        p_bad_to_good: 0.3,
        loss_good: 0.0,
        loss_bad: 0.5,
    };
    // One-way delays for 0.1 ms, 2 ms, 50 ms and 300 ms round trips.
    for (seed, one_way_us) in [(31, 50), (32, 1_000), (33, 25_000), (34, 150_000)] {
        let seed = Seed::from_env_or(seed);
        let link = LinkConfig {
            delay: Duration::from_micros(one_way_us),
            jitter: Duration::from_micros(one_way_us / 10),
            burst_loss: Some(bursty),
            corrupt: 0.01,
            reorder: 0.02,
            duplicate: 0.01,
            ..LinkConfig::default()
        };
        let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
        let (client, server) = exchange(&mut pair, &SIZES, Duration::from_secs(1_800));
        let corrupted = pair.sim.link_stats(pair.client, pair.server).corrupted
            + pair.sim.link_stats(pair.server, pair.client).corrupted;
        let dropped = pair
            .client()
            .connection(client)
            .map_or(0, |c| c.stats().dropped_unauthenticated)
            + pair
                .server()
                .connection(server)
                .map_or(0, |c| c.stats().dropped_unauthenticated);
        let reordered = pair.sim.link_stats(pair.client, pair.server).reordered
            + pair.sim.link_stats(pair.server, pair.client).reordered;
        assert!(corrupted > 0, "the link corrupted nothing");
        // Every corrupted datagram that reached a connection failed to
        // authenticate (a flipped bit in the receiver index sends it
        // nowhere instead). So may a datagram held back so long that more
        // than half its truncated packet number's range was sent after it
        // (RFC 9000 §17.1): it decodes to another number, whose nonce
        // does not open it.
        assert!(
            dropped > 0 && dropped <= corrupted + reordered,
            "{dropped} failed to authenticate; {corrupted} corrupted, {reordered} reordered"
        );
    }
}

#[test]
fn a_stream_carries_a_megabyte_in_order_with_its_end() {
    let seed = Seed::from_env_or(21);
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        loss: 0.02,
        reorder: 0.02,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[10], Duration::from_secs(30));
    let data = message(7, 1 << 20);
    let stream = pair
        .client()
        .connection(client)
        .expect("connection")
        .open_stream()
        .expect("a stream is allowed");
    let mut written = 0;
    let mut received = Vec::new();
    let mut server_stream = None;
    let mut finished = false;
    let (client_node, server_node) = (pair.client, pair.server);
    drive(&mut pair.sim, Duration::from_secs(120), |sim| {
        let connection = connection_at(sim, client_node, client);
        if written < data.len() {
            written += connection.write(stream, &data[written..]).expect("open");
            if written == data.len() {
                connection.finish(stream).expect("open");
            }
        }
        let connection = connection_at(sim, server_node, server);
        if server_stream.is_none() {
            server_stream = connection.accept_stream();
        }
        if let Some(id) = server_stream {
            let mut buf = [0u8; 65_536];
            loop {
                match connection.read(id, &mut buf).expect("readable") {
                    ReadOutcome::Read(0) => break,
                    ReadOutcome::Read(n) => received.extend_from_slice(&buf[..n]),
                    ReadOutcome::Finished => {
                        finished = true;
                        break;
                    }
                }
            }
        }
        finished
    });
    assert_eq!(received.len(), data.len());
    assert!(received == data[..], "the stream's bytes, in order");
}

#[test]
fn connecting_where_nobody_answers_fails_cleanly_within_the_timeout() {
    let seed = Seed::from_env_or(31);
    let mut pair = Pair::new(
        seed.value(),
        LinkConfig::default(),
        EndpointConfig::default(),
    );
    let public = pair.server().public().expect("identity");
    let now = pair.sim.now();
    let nowhere = "10.0.0.9:9".parse().expect("address");
    let handle = pair
        .client()
        .connect(now, nowhere, &public)
        .expect("connect");
    let mut error = None;
    let client_node = pair.client;
    drive(&mut pair.sim, Duration::from_secs(11), |sim| {
        while let Some((h, event)) = sim.node_mut(client_node).0.poll_event() {
            assert_eq!(h, handle);
            if let Event::Closed(e) = event {
                error = Some(e);
            }
        }
        error.is_some()
    });
    assert_eq!(error, Some(ConnectionError::HandshakeTimedOut));
}

#[test]
fn a_peer_that_only_sends_and_never_reads_keeps_going() {
    let seed = Seed::from_env_or(51);
    let lossy = LinkConfig {
        delay: Duration::from_millis(5),
        loss: 0.01,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed.value(), lossy, EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[1], Duration::from_secs(10));
    // The server talks back all the time; the client never reads it.
    let (mut from_client, mut from_server) = (Outbox::default(), Outbox::default());
    for i in 0..100 {
        from_client.push(message(i, 4_096));
        from_server.push(message(i, 4_096));
    }
    let mut got = vec![0u32; 100];
    let (client_node, server_node) = (pair.client, pair.server);
    drive(&mut pair.sim, Duration::from_secs(60), |sim| {
        from_client.pump(connection_at(sim, client_node, client));
        let connection = connection_at(sim, server_node, server);
        from_server.pump(connection);
        while let Some(m) = connection.recv_message() {
            let id = u32::from_le_bytes(m[..4].try_into().expect("4 bytes"));
            assert_eq!(m, message(id, 4_096));
            got[id as usize] += 1;
        }
        got.iter().all(|&n| n == 1)
    });
    assert!(got.iter().all(|&n| n == 1));
}

#[test]
fn small_messages_are_delivered_while_a_large_one_is_in_flight() {
    let seed = Seed::from_env_or(52);
    let link = LinkConfig {
        delay: Duration::from_millis(10),
        loss: 0.01,
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[1], Duration::from_secs(10));
    let large = message(1_000_000, 50 << 20);
    let mut outbox = Outbox::default();
    outbox.push(large.clone());
    for i in 0..1_000 {
        outbox.push(message(i, 100));
    }
    let mut small = 0;
    let mut small_done_before_large = false;
    let (client_node, server_node) = (pair.client, pair.server);
    drive(&mut pair.sim, Duration::from_secs(600), |sim| {
        outbox.pump(connection_at(sim, client_node, client));
        let connection = connection_at(sim, server_node, server);
        while let Some(m) = connection.recv_message() {
            if m.len() == 100 {
                small += 1;
            } else {
                assert!(m == large, "the large message, whole");
                small_done_before_large = small == 1_000;
                return true;
            }
        }
        false
    });
    assert!(
        small_done_before_large,
        "{small} small messages before the large one"
    );
}

/// Two hundred messages of up to 20 KB each way through 3 % loss: many
/// large messages are under assembly at once, and their bytes, held
/// against the connection window until each is whole, fill more than half
/// of the window in force. The receiver must still grant more credit, or
/// the sender, with too little credit to finish any of them, waits for
/// good.
#[test]
fn many_large_messages_under_assembly_through_loss_never_stall_the_connection_window() {
    let seed = Seed::from_env_or(23);
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(3),
        loss: 0.03,
        ..LinkConfig::default()
    };
    let sizes: Vec<usize> = (0..200).map(|i| 8 + (i * 997) % 20_000).collect();
    let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
    exchange(&mut pair, &sizes, Duration::from_secs(120));
}
