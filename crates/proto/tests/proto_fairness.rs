//! Sharing: concurrent transfers on one connection, and connections on one
//! endpoint, through one simulated bottleneck each get an equal share; the
//! streams of a connection share one send buffer budget.

mod support;

use std::time::Duration;

use support::{Pair, drive, exchange, message};
use tern_proto::{ConnectionHandle, EndpointConfig, ReadOutcome, StreamId};
use tern_sim::{Bottleneck, LinkConfig, Seed};

/// A 10 Mbit/s bottleneck with 20 ms of round trip and 200 ms of queue:
/// deeper than LEDBAT's 100 ms target, so the flows are paced by the delay
/// they build, the regime LEDBAT is made for. Behind a queue shorter than
/// its target (40 ms was tried) LEDBAT is paced by drop-tail losses instead,
/// and four connections' shares spread to 0.19–0.31 over 20 s, the same
/// connections ahead at every seed.
fn bottleneck() -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(10),
        bottleneck: Some(Bottleneck {
            bits_per_second: 10_000_000,
            queue_bytes: 250_000,
        }),
        ..LinkConfig::default()
    }
}

/// Shares of the bytes each of `counts` received.
fn shares(counts: &[u64]) -> Vec<f64> {
    let total: u64 = counts.iter().sum();
    counts.iter().map(|&c| c as f64 / total as f64).collect()
}

const CHUNK: [u8; 16_384] = [7; 16_384];

#[test]
fn four_streams_on_one_connection_share_a_bottleneck_equally() {
    let seed = Seed::from_env_or(61);
    let mut pair = Pair::new(seed.value(), bottleneck(), EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[1], Duration::from_secs(10));
    let connection = pair.client().connection(client).expect("client");
    let streams: Vec<StreamId> = (0..4)
        .map(|_| connection.open_stream().expect("allowed"))
        .collect();
    let mut accepted: Vec<StreamId> = Vec::new();
    let mut counts = [0u64; 4];
    let (client_node, server_node) = (pair.client, pair.server);
    let start = pair.sim.elapsed();
    let measure_from = start + Duration::from_secs(5);
    let mut buf = vec![0u8; 65_536];
    drive(&mut pair.sim, start + Duration::from_secs(40), |sim| {
        let elapsed = sim.elapsed();
        let connection = sim
            .node_mut(client_node)
            .0
            .connection(client)
            .expect("client");
        for &id in &streams {
            while connection.write(id, &CHUNK).expect("open") > 0 {}
        }
        let connection = sim
            .node_mut(server_node)
            .0
            .connection(server)
            .expect("server");
        while let Some(id) = connection.accept_stream() {
            accepted.push(id);
        }
        for (i, &id) in accepted.iter().enumerate() {
            while let ReadOutcome::Read(n @ 1..) = connection.read(id, &mut buf).expect("readable")
            {
                if elapsed >= measure_from {
                    counts[i] += n as u64;
                }
            }
        }
        elapsed >= start + Duration::from_secs(25)
    });
    assert_eq!(accepted.len(), 4);
    for share in shares(&counts) {
        assert!(
            (0.20..=0.30).contains(&share),
            "shares {:?}",
            shares(&counts)
        );
    }
}

#[test]
fn four_connections_through_one_bottleneck_share_it_equally() {
    let seed = Seed::from_env_or(62);
    let mut pair = Pair::new(seed.value(), bottleneck(), EndpointConfig::default());
    let public = pair.server().public().expect("identity");
    let server_addr = pair.server_addr;
    let now = pair.sim.now();
    let clients: Vec<ConnectionHandle> = (0..4)
        .map(|_| {
            pair.client()
                .connect(now, server_addr, &public)
                .expect("connect")
        })
        .collect();
    let mut servers: Vec<(ConnectionHandle, StreamId)> = Vec::new();
    let mut client_streams: Vec<Option<StreamId>> = vec![None; 4];
    let mut counts = [0u64; 4];
    let (client_node, server_node) = (pair.client, pair.server);
    let mut buf = vec![0u8; 65_536];
    let mut measure_from = None;
    drive(&mut pair.sim, Duration::from_secs(60), |sim| {
        let elapsed = sim.elapsed();
        let endpoint = &mut sim.node_mut(client_node).0;
        while endpoint.poll_event().is_some() {}
        for (i, &handle) in clients.iter().enumerate() {
            let connection = endpoint.connection(handle).expect("client");
            if client_streams[i].is_none() && connection.is_established() {
                client_streams[i] = connection.open_stream();
            }
            if let Some(id) = client_streams[i] {
                while connection.write(id, &CHUNK).expect("open") > 0 {}
            }
        }
        let endpoint = &mut sim.node_mut(server_node).0;
        while endpoint.poll_event().is_some() {}
        while let Some(handle) = endpoint.accept() {
            servers.push((handle, StreamId(u64::MAX)));
        }
        if servers.len() == 4 && measure_from.is_none() {
            measure_from = Some(elapsed + Duration::from_secs(5));
        }
        for (slot, (handle, stream)) in servers.iter_mut().enumerate() {
            let connection = endpoint.connection(*handle).expect("server");
            if stream.0 == u64::MAX {
                if let Some(id) = connection.accept_stream() {
                    *stream = id;
                } else {
                    continue;
                }
            }
            while let ReadOutcome::Read(n @ 1..) =
                connection.read(*stream, &mut buf).expect("readable")
            {
                if measure_from.is_some_and(|m| elapsed >= m) {
                    counts[slot] += n as u64;
                }
            }
        }
        measure_from.is_some_and(|m| elapsed >= m + Duration::from_secs(20))
    });
    for share in shares(&counts) {
        assert!(
            (0.20..=0.30).contains(&share),
            "shares {:?}",
            shares(&counts)
        );
    }
}

#[test]
fn four_streams_never_hold_more_than_the_send_buffer_and_all_arrive_whole() {
    let seed = Seed::from_env_or(63);
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        loss: 0.01,
        reorder: 0.01,
        ..LinkConfig::default()
    };
    let mut config = EndpointConfig::default();
    config.connection.stream_send_buffer = 1 << 20;
    config.connection.send_buffer = 1 << 20;
    let budget = config.connection.send_buffer;
    let mut pair = Pair::new(seed.value(), link, config);
    let (client, server) = exchange(&mut pair, &[1], Duration::from_secs(10));
    let connection = pair.client().connection(client).expect("client");
    let streams: Vec<StreamId> = (0..4)
        .map(|_| connection.open_stream().expect("allowed"))
        .collect();
    let data: Vec<_> = (0..4).map(|i| message(i, 3 << 20)).collect();
    let mut written = [0usize; 4];
    let mut received: Vec<(StreamId, Vec<u8>, bool)> = Vec::new();
    let mut peak = 0;
    let (client_node, server_node) = (pair.client, pair.server);
    let mut buf = vec![0u8; 65_536];
    drive(&mut pair.sim, Duration::from_secs(600), |sim| {
        let connection = sim
            .node_mut(client_node)
            .0
            .connection(client)
            .expect("client");
        for (i, &id) in streams.iter().enumerate() {
            if written[i] < data[i].len() {
                written[i] += connection.write(id, &data[i][written[i]..]).expect("open");
                if written[i] == data[i].len() {
                    connection.finish(id).expect("open");
                }
            }
        }
        let held = connection.stream_send_buffered();
        assert!(held <= budget, "{held} bytes held, {budget} allowed");
        peak = peak.max(held);
        let connection = sim
            .node_mut(server_node)
            .0
            .connection(server)
            .expect("server");
        while let Some(id) = connection.accept_stream() {
            received.push((id, Vec::new(), false));
        }
        for (id, bytes, finished) in &mut received {
            while !*finished {
                match connection.read(*id, &mut buf).expect("readable") {
                    ReadOutcome::Read(0) => break,
                    ReadOutcome::Read(n) => bytes.extend_from_slice(&buf[..n]),
                    ReadOutcome::Finished => *finished = true,
                }
            }
        }
        received.len() == 4 && received.iter().all(|(_, _, finished)| *finished)
    });
    assert!(peak > budget / 2, "the budget was barely used: {peak}");
    for (i, &id) in streams.iter().enumerate() {
        let (_, bytes, _) = received
            .iter()
            .find(|(r, _, _)| *r == id)
            .expect("every stream arrived");
        assert!(bytes[..] == data[i][..], "stream {i}: its bytes, in order");
    }
}
