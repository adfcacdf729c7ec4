//! Sharing: concurrent transfers on one connection, and connections on one
//! endpoint, through one simulated bottleneck each get an equal share; and
//! an endpoint holds a thousand connections at a bounded cost each.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use support::{Pair, drive, exchange};
use tern_peer::proto::{ConnectionHandle, EndpointConfig, Event, ReadOutcome, StreamId};
use tern_sim::{Bottleneck, LinkConfig, Seed};

/// Counts the bytes live on the heap, to measure what a connection costs.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; the
// counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout goes to the system allocator as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as for `dealloc` and `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A 10 Mbit/s bottleneck with 20 ms of round trip and a queue of about
/// two round trips.
fn bottleneck() -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(10),
        bottleneck: Some(Bottleneck {
            bits_per_second: 10_000_000,
            queue_bytes: 50_000,
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
fn a_thousand_connections_on_one_endpoint_cost_at_most_16_kib_each_when_idle() {
    let seed = Seed::from_env_or(63);
    let link = LinkConfig {
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let mut config = EndpointConfig::default();
    // One client endpoint makes all the connections: let it.
    config.intro_limits.total_rate = 100_000;
    config.intro_limits.total_burst = 100_000;
    config.intro_limits.per_source_rate = 100_000;
    config.intro_limits.per_source_burst = 100_000;
    let mut pair = Pair::new(seed.value(), link, config);
    let public = pair.server().public().expect("identity");
    let server_addr = pair.server_addr;
    let (client_node, server_node) = (pair.client, pair.server);
    let before = LIVE.load(Ordering::Relaxed);
    let now = pair.sim.now();
    for _ in 0..1_000 {
        pair.client()
            .connect(now, server_addr, &public)
            .expect("connect");
    }
    let mut connected = 0;
    let mut accepted = 0;
    drive(&mut pair.sim, Duration::from_secs(30), |sim| {
        while let Some((_, event)) = sim.node_mut(client_node).0.poll_event() {
            assert!(!matches!(event, Event::Closed(_)), "{event:?}");
            connected += usize::from(event == Event::Connected);
        }
        let server = &mut sim.node_mut(server_node).0;
        while server.poll_event().is_some() {}
        while server.accept().is_some() {
            accepted += 1;
        }
        connected == 1_000 && accepted == 1_000
    });
    // Let every handshake's last ACKs settle, then measure both sides.
    pair.sim.run_for(Duration::from_millis(200));
    let per_connection = (LIVE.load(Ordering::Relaxed) - before) / 2_000;
    assert_eq!(pair.sim.node(server_node).0.len(), 1_000);
    assert!(
        per_connection <= 16 * 1024,
        "an idle connection costs {per_connection} bytes ({} of them inline)",
        size_of::<tern_peer::proto::Connection>()
    );
}
