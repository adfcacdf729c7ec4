//! A connection's life on tern-sim beyond the happy path: key updates, a
//! peer whose address changes, partitions it survives and one it does not,
//! simultaneous open, and an endpoint under a flood while it serves.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{Pair, StreamTransfer, drive, exchange, message};
use tern_proto::{ConnectionError, EndpointConfig, Event, Node};
use tern_sim::{LinkConfig, Seed};

fn link(delay_ms: u64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(delay_ms),
        ..LinkConfig::default()
    }
}

#[test]
fn keys_are_updated_many_times_during_a_transfer_without_loss_or_duplication() {
    let seed = Seed::from_env_or(41);
    let mut config = EndpointConfig::default();
    config.keys.key_limit = 256;
    let lossy = LinkConfig {
        loss: 0.02,
        reorder: 0.05,
        ..link(5)
    };
    let mut pair = Pair::new(seed.value(), lossy, config);
    let (client, server) = exchange(
        &mut pair,
        &[1 << 20, 100, 4 << 20],
        Duration::from_secs(120),
    );
    let client_updates = pair
        .client()
        .connection(client)
        .expect("client")
        .stats()
        .key_updates;
    let server_updates = pair
        .server()
        .connection(server)
        .expect("server")
        .stats()
        .key_updates;
    assert!(
        client_updates >= 10 && server_updates >= 3,
        "updates: client {client_updates}, server {server_updates}"
    );
}

/// The receiver of an upload sends nothing but ACKs, which are never
/// acknowledged: it has its key confirmed by a PING when an update is due.
/// Without that it reached the key's limit (after 1 024 ACKs here, about
/// 1.5 s) and could send nothing more. The bottleneck keeps the sender's
/// window well under half the limit, so that the sender's own updates
/// are confirmed in time.
#[test]
fn a_receiver_that_only_acknowledges_updates_its_keys_too() {
    let seed = Seed::from_env_or(44);
    let mut config = EndpointConfig::default();
    config.keys.key_limit = 1024;
    let narrow = LinkConfig {
        bottleneck: Some(tern_sim::Bottleneck {
            bits_per_second: 20_000_000,
            queue_bytes: 100_000,
        }),
        ..link(5)
    };
    let mut pair = Pair::new(seed.value(), narrow, config);
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    let start = pair.sim.elapsed();
    let mut received = 0;
    while pair.sim.elapsed() < start + Duration::from_secs(5) {
        received += transfer.turn(&mut pair);
        assert!(pair.sim.step(), "the transfer went quiet");
    }
    let server = pair
        .server()
        .connection(transfer.server)
        .expect("the connection lives");
    let updates = server.stats().key_updates;
    assert!(updates >= 5, "{updates} key updates, {received} bytes");
    assert!(received > 8 << 20, "{received} bytes");
}

/// An idle connection gives its expanded packet keys back between
/// keep-alives and expands them again for its next packet: after each
/// quiet period messages go both ways again, and keys updated (a low
/// limit makes each burst update them) across the quiet periods still
/// open the peer's packets.
#[test]
fn keys_given_back_while_quiet_serve_again_and_update_across_the_quiet() {
    const MESSAGES: u32 = 100;
    let seed = Seed::from_env_or(45);
    let mut config = EndpointConfig::default();
    config.keys.key_limit = 32;
    let mut pair = Pair::new(seed.value(), link(5), config);
    let (client, server) = exchange(&mut pair, &[10], Duration::from_secs(10));
    let (client_node, server_node) = (pair.client, pair.server);
    let key_updates = |pair: &mut Pair| {
        let client = pair.client().connection(client).expect("open");
        let client_updates = client.stats().key_updates;
        let server = pair.server().connection(server).expect("open");
        (client_updates, server.stats().key_updates)
    };
    let mut updates = key_updates(&mut pair);
    for round in 0..4 {
        // Past the keys' release (a second) and a keep-alive (10 s).
        pair.sim.run_for(Duration::from_secs(12));
        for id in 0..MESSAGES {
            let sent = message(round * MESSAGES + id, 300);
            let client = pair.client().connection(client).expect("open");
            client.send_message(sent.clone()).expect("room");
            let server = pair.server().connection(server).expect("open");
            server.send_message(sent).expect("room");
        }
        let (mut to_client, mut to_server) = (0, 0);
        let deadline = pair.sim.elapsed() + Duration::from_secs(10);
        drive(&mut pair.sim, deadline, |sim| {
            for (node, handle, count) in [
                (client_node, client, &mut to_client),
                (server_node, server, &mut to_server),
            ] {
                let connection = sim.node_mut(node).0.connection(handle).expect("open");
                while let Some(received) = connection.recv_message() {
                    let expected = message(round * MESSAGES + *count, 300);
                    assert_eq!(received, expected, "round {round}: in order, whole");
                    *count += 1;
                }
            }
            to_client == MESSAGES && to_server == MESSAGES
        });
        let now = key_updates(&mut pair);
        assert!(
            now.0 > updates.0 && now.1 > updates.1,
            "round {round}: key updates {updates:?} then {now:?}"
        );
        updates = now;
    }
}

#[test]
fn a_peer_behind_a_rebinding_nat_keeps_its_connection() {
    let seed = Seed::from_env_or(42);
    let mut pair = Pair::new(seed.value(), link(10), EndpointConfig::default());
    let public: SocketAddr = "10.0.0.7:40000".parse().expect("address");
    pair.sim
        .schedule_rebind(Duration::from_millis(150), pair.client_addr, public);
    let (_, server) = exchange(&mut pair, &[4 << 20, 10], Duration::from_secs(60));
    let connection = pair.server().connection(server).expect("server connection");
    assert_eq!(connection.remote(), public, "the server follows the peer");
    assert_eq!(
        connection.stats().migrations,
        1,
        "after validating the path"
    );
}

#[test]
fn a_five_second_partition_is_survived() {
    let seed = Seed::from_env_or(43);
    let narrow = LinkConfig {
        bottleneck: Some(tern_sim::Bottleneck {
            bits_per_second: 20_000_000,
            queue_bytes: 100_000,
        }),
        ..link(10)
    };
    let mut pair = Pair::new(seed.value(), narrow, EndpointConfig::default());
    let (client, server) = (pair.client, pair.server);
    pair.sim.schedule_partition(
        client,
        server,
        Duration::from_secs(1),
        Duration::from_secs(5),
    );
    exchange(&mut pair, &[8 << 20, 1], Duration::from_secs(60));
    assert!(
        pair.sim.link_stats(client, server).down_dropped > 0,
        "the partition cut the transfer"
    );
}

#[test]
fn a_sixty_second_partition_ends_the_connection_cleanly_on_both_sides() {
    let seed = Seed::from_env_or(44);
    let mut pair = Pair::new(seed.value(), link(10), EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[1_000], Duration::from_secs(10));
    let (client_node, server_node) = (pair.client, pair.server);
    let started = pair.sim.elapsed();
    pair.sim.schedule_partition(
        client_node,
        server_node,
        Duration::ZERO,
        Duration::from_secs(60),
    );
    let mut errors = [None, None];
    drive(&mut pair.sim, started + Duration::from_secs(45), |sim| {
        for (i, (node, handle)) in [(client_node, client), (server_node, server)]
            .into_iter()
            .enumerate()
        {
            while let Some((h, event)) = sim.node_mut(node).0.poll_event() {
                assert_eq!(h, handle);
                if let Event::Closed(e) = event {
                    errors[i] = Some(e);
                }
            }
        }
        errors.iter().all(Option::is_some)
    });
    assert_eq!(
        errors,
        [
            Some(ConnectionError::TimedOut),
            Some(ConnectionError::TimedOut)
        ]
    );
    for node in [client_node, server_node] {
        let endpoint = &mut pair.sim.node_mut(node).0;
        let _ = endpoint.poll_timeout();
        assert!(endpoint.is_empty(), "the connection's state is freed");
    }
}

#[test]
fn a_simultaneous_open_resolves_each_connect_to_the_peer_it_named() {
    let seed = Seed::from_env_or(45);
    let mut pair = Pair::symmetric(seed.value(), link(20));
    let (a, b) = pair.open_both_ways();
    let (client_node, server_node) = (pair.client, pair.server);
    // Each side's connect is answered by the other's responder, which
    // proves the key it named; each side also accepts the other's. A
    // message sent on each connect arrives on the other side's accepted
    // connection.
    let mut connected = [false, false];
    let mut incoming = [None, None];
    let mut got = [0, 0];
    drive(&mut pair.sim, Duration::from_secs(20), |sim| {
        for (i, (node, handle)) in [(client_node, a), (server_node, b)].into_iter().enumerate() {
            let endpoint = &mut sim.node_mut(node).0;
            while let Some((h, event)) = endpoint.poll_event() {
                match event {
                    Event::Connected if h == handle && !connected[i] => {
                        connected[i] = true;
                        let connection = endpoint.connection(handle).expect("connection");
                        connection
                            .send_message(message(i as u32, 5_000))
                            .expect("room");
                    }
                    Event::Closed(e) => panic!("closed: {e}"),
                    _ => {}
                }
            }
            if let Some(accepted) = endpoint.accept() {
                assert_eq!(incoming[i].replace(accepted), None, "one incoming");
            }
            if let Some(connection) = incoming[i].and_then(|h| endpoint.connection(h)) {
                while let Some(m) = connection.recv_message() {
                    assert_eq!(m, message(1 - i as u32, 5_000));
                    got[i] += 1;
                }
            }
        }
        got == [1, 1]
    });
    for node in [client_node, server_node] {
        assert_eq!(pair.sim.node(node).0.len(), 2, "its connect and the peer's");
    }
}

#[test]
fn garbage_forged_and_replayed_intros_do_not_disturb_a_transfer() {
    let seed = Seed::from_env_or(46);
    let mut pair = Pair::new(seed.value(), link(5), EndpointConfig::default());
    // An intro captured off the wire, to replay.
    let mut spy = tern_proto::Endpoint::new(
        EndpointConfig::default(),
        None,
        [9; 32],
        pair.sim.now(),
        support::wall_start(),
    )
    .expect("config");
    let public = pair.server().public().expect("identity");
    let server_addr = pair.server_addr;
    spy.connect(pair.sim.now(), server_addr, &public)
        .expect("connect");
    let mut intro = vec![0u8; 2048];
    let limits = tern_proto::TransmitLimits::new(1, 1452);
    let sent = spy
        .poll_transmit(pair.sim.now(), limits, &mut intro)
        .expect("the intro");
    intro.truncate(sent.len);

    let server_node = pair.server;
    let attacker: SocketAddr = "10.0.0.66:6666".parse().expect("address");
    let mut noise = 0u64;
    let mut injected = 0;
    let start = pair.sim.now();
    let (client, server) = {
        // Run the transfer while, at every step, the attacker injects a
        // few datagrams at the server.
        let mut flood = |sim: &mut support::EndpointSim| {
            let now = sim.now();
            let endpoint = &mut sim.node_mut(server_node).0;
            for kind in 0..4u64 {
                noise = noise
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let from = SocketAddr::new(attacker.ip(), 1000 + (noise >> 48) as u16 % 50);
                let mut datagram = match kind {
                    0 => intro.clone(),
                    1 => {
                        let mut forged = intro.clone();
                        forged[1 + (noise as usize % 200)] ^= 0x40;
                        forged
                    }
                    2 => (0..(noise % 1500) as usize)
                        .map(|i| (i as u64 ^ noise) as u8)
                        .collect(),
                    _ => {
                        let mut data = vec![0x22u8; 100];
                        data[0] = 0x02;
                        data
                    }
                };
                endpoint.handle_datagram(now, server_addr, from, &mut datagram);
                injected += 1;
            }
        };
        support::exchange_with(
            &mut pair,
            &[2 << 20, 300],
            Duration::from_secs(60),
            &mut flood,
        )
    };
    let _ = (client, server);
    let stats = pair.server().stats();
    let elapsed = pair
        .sim
        .now()
        .saturating_duration_since(start)
        .as_secs_f64();
    let limits = EndpointConfig::default().intro_limits;
    let decrypted = stats.intros_accepted + stats.intros_refused;
    assert!(injected > 1_000, "the flood ran ({injected} datagrams)");
    assert!(
        stats.intros_rate_limited > 0 && stats.dropped_unroutable > 0,
        "{stats:?}"
    );
    assert!(
        decrypted as f64 <= limits.total_burst as f64 + limits.total_rate as f64 * elapsed + 1.0,
        "RSA work stays within the intro rate: {decrypted} in {elapsed:.2} s"
    );
    assert_eq!(
        pair.server().accept(),
        None,
        "no connection for the attacker"
    );
}

#[test]
fn a_lost_close_is_sent_again_so_a_silent_peer_still_hears_it() {
    let seed = Seed::from_env_or(45);
    let mut pair = Pair::new(seed.value(), link(10), EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[1_000], Duration::from_secs(10));
    let (client_node, server_node) = (pair.client, pair.server);
    // Let delayed ACKs settle: then the server has nothing to send, and
    // only the client's Close can tell it.
    pair.sim.run_for(Duration::from_millis(500));
    let now = pair.sim.now();
    pair.client().connection(client).expect("open").close(
        now,
        3,
        bytes::Bytes::from_static(b"bye"),
    );
    let lossy = LinkConfig {
        loss: 1.0,
        ..link(10)
    };
    pair.sim.set_link(client_node, server_node, lossy);
    // The first Close goes out and is lost.
    pair.sim.run_for(Duration::from_millis(5));
    pair.sim.set_link(client_node, server_node, link(10));
    let started = pair.sim.elapsed();
    let mut closed = None;
    drive(&mut pair.sim, started + Duration::from_secs(5), |sim| {
        while let Some((h, event)) = sim.node_mut(server_node).0.poll_event() {
            assert_eq!(h, server);
            if let Event::Closed(e) = event {
                closed = Some(e);
            }
        }
        closed.is_some()
    });
    assert!(
        matches!(closed, Some(ConnectionError::PeerClosed { code: 3, .. })),
        "{closed:?}"
    );
    assert!(pair.sim.link_stats(client_node, server_node).lost > 0);
}

#[test]
fn an_endpoint_queues_each_event_once_while_the_application_does_not_look() {
    let seed = Seed::from_env_or(47);
    let mut pair = Pair::new(seed.value(), link(1), EndpointConfig::default());
    let public = pair.server().public().expect("identity");
    let (now, server_addr) = (pair.sim.now(), pair.server_addr);
    let client = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    let mut server = None;
    drive(&mut pair.sim, Duration::from_secs(5), |sim| {
        server = server.or_else(|| sim.node_mut(pair.server).0.accept());
        server.is_some()
    });
    let server = server.expect("accepted");
    while pair.server().poll_event().is_some() {}
    // 200 messages arrive one by one, each in turns of its own, and the
    // server's application takes no event meanwhile.
    let count = 200;
    for i in 0..count {
        pair.client()
            .connection(client)
            .expect("client")
            .send_message(message(i, 100))
            .expect("room");
        let until = pair.sim.elapsed() + Duration::from_millis(5);
        drive(&mut pair.sim, until + Duration::from_secs(30), |sim| {
            sim.elapsed() >= until
        });
    }
    let mut events = Vec::new();
    while let Some((handle, event)) = pair.server().poll_event() {
        assert_eq!(handle, server);
        events.push(event);
    }
    let arrivals = events
        .iter()
        .filter(|&e| *e == Event::MessageReceived)
        .count();
    assert_eq!(arrivals, 1, "one event stands for all: {events:?}");
    for (i, event) in events.iter().enumerate() {
        assert!(!events[..i].contains(event), "each kind once: {events:?}");
    }
    let connection = pair.server().connection(server).expect("server");
    let mut received = 0;
    while let Some(m) = connection.recv_message() {
        assert_eq!(m, message(received, 100));
        received += 1;
    }
    assert_eq!(received, count);
}
