//! An endpoint holds 1 500 connections at a bounded cost each.
//! `allocation_counter` installs a counting global allocator in this test
//! binary. What the connections cost is what the two endpoints hold once
//! every handshake is over, less what each held empty: each connection,
//! what it holds on the heap, and what the endpoint's tables grew by. It
//! is counted as the bytes freed when the two endpoints are dropped, not
//! as what the run left on the heap: the simulator's queues and datagram
//! buffers keep the capacity 1 500 handshakes in flight at once gave them
//! (about 1 200 bytes a connection, counted in the figures here until
//! they were told apart). 1 500 is not a power of two, so a table that
//! grows by doubling shows its slack here.
//!
//! The bounds are the figures measured when they were set (see
//! docs/benchmarks.md, level 3, memory per idle connection) with about
//! 2 % of room, so that a change that makes every idle connection larger
//! fails here rather than in a level-3 run nobody makes. They no longer
//! depend on the packet keys' backend: an idle connection holds its keys'
//! material only, not the backend's expanded keys (ring's are 232 bytes
//! larger than RustCrypto's).
//!
//! An idle connection here has been quiet since its handshake: it holds
//! no congestion controller, pacer or sent-packet ring (each given back
//! once nothing was in flight), no record of the ACKs it sent alone, no
//! expanded packet key (given back a second after its last packet) and
//! no queue's memory (made at the first use, given back when quiet).

mod support;

use std::time::Duration;

use support::{Pair, drive, exchange, identity, message, seed_bytes, wall_start};
use tern_proto::{ConnectionHandle, Endpoint, EndpointConfig, Event, ReadOutcome};
use tern_sim::{LinkConfig, Seed};

#[test]
fn idle_connections_cost_at_most_their_measured_bound_each() {
    const CONNECTIONS: usize = 1_500;
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
    config.max_connections_per_address = CONNECTIONS;
    let mut pair = Pair::new(seed.value(), link, config);
    let public = pair.server().public().expect("identity");
    let server_addr = pair.server_addr;
    let (client_node, server_node) = (pair.client, pair.server);
    // Two endpoints like the pair's, empty: what one holds before any
    // connection, and what takes the place of each at the end.
    let mut spares = Vec::new();
    let empty = allocation_counter::measure(|| {
        let now = pair.sim.now();
        for (salt, identity) in [(11, None), (12, Some(identity()))] {
            let endpoint = Endpoint::new(
                config,
                identity,
                seed_bytes(seed.value(), salt),
                now,
                wall_start(),
            );
            spares.push(endpoint.expect("valid config"));
        }
    })
    .bytes_current;
    let left = allocation_counter::measure(|| {
        let now = pair.sim.now();
        for _ in 0..CONNECTIONS {
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
            connected == CONNECTIONS && accepted == CONNECTIONS
        });
        // Idle as a long-lived connection is: every handshake's last ACKs
        // settled, the responders' handshake timeout past (a transcript
        // kept for a late identity proof goes then) and a keep-alive
        // answered each way.
        pair.sim.run_for(Duration::from_secs(15));
    })
    .bytes_current;
    assert_eq!(pair.sim.node(server_node).0.len(), CONNECTIONS);
    let freed = -allocation_counter::measure(|| {
        for node in [server_node, client_node] {
            let spare = spares.pop().expect("a spare for each");
            drop(std::mem::replace(&mut pair.sim.node_mut(node).0, spare));
        }
    })
    .bytes_current;
    let per_connection = (freed - empty) / (2 * CONNECTIONS) as i64;
    let simulator = (left - (freed - empty)) / (2 * CONNECTIONS) as i64;
    let inline = size_of::<tern_proto::Connection>();
    eprintln!(
        "an idle connection: {per_connection} bytes, {inline} of them inline \
         (and {simulator} bytes of the simulator's)"
    );
    // Measured 4 960 bytes inline (6 896 before the keys, configuration,
    // RNG and rare paths moved out of line) and 7 561 bytes in all
    // (11 824 before; 8 921 before the scratch memory was given back),
    // then 5 088 inline and 7 837 in all (workspace build; 4 976 and
    // 7 725 alone) as the identity proof, one-way streams, path changes,
    // observed addresses, message limits and resumption came in beside
    // it, all of these with the simulator's buffers and 200 ms after the
    // handshakes. Counted as now (the endpoints alone, 15 s idle): 6 073
    // bytes in all alone, then 5 741 in all and 4 448 inline (6 205 and
    // 4 912 with ring's keys) once the RustCrypto key left out AES's
    // decryption schedule, the close state and the rate cap went out of
    // line and the initiator shared the responder's key with the caller.
    // 5 808 in all and 4 512 inline (6 272 and 4 976 with ring's) as later
    // work came in, then 5 536 and 4 240 (6 000 and 4 704) once the
    // streams' maps and lists stayed out of line until the first stream.
    // 4 305 and 3 552 (4 769 and 4 016 with ring's) once a quiet connection
    // gave back its congestion controller and pacer and kept no record of
    // the ACKs it sent alone. 3 709 and 2 960 (3 725 and 2 976 with
    // ring's) once a quiet connection kept its packet keys' material and
    // not their expansions. 3 277 and 2 528 once the rare counters, the
    // queues of messages, datagrams and events, the scheduler's queues
    // and a new path's validation state went out of line; 3 213 and
    // 2 464 once the ACK-processing lists were boxed too; 3 277 and 2 528
    // with the late packets an ACK frame remembers (a deque's header) and
    // the message numbers' last range kept out of their ordered map.
    // 3 165 and 2 464 once the loss detector's parameters were shared by
    // the endpoint's connections and the side that only answers
    // keep-alives gave back its scratch memory with its keys. 3 229 and
    // 2 528 in the workspace build (3 213 and 2 512 alone) with a reader's
    // taken datagrams counted and the reordering window's recent RTT
    // samples. 3 122 and 2 528 alone once the receiver's ACK ranges made
    // room for one range (16 bytes, not 64), the flow-control repeats
    // were boxed (40 bytes fewer inline) and the replay window's first
    // 64 bytes of bitmap moved inline (one allocation fewer).
    let (inline_bound, bound) = (2_580, 3_200);
    assert!(
        inline <= inline_bound,
        "a connection is {inline} bytes inline"
    );
    assert!(
        per_connection <= bound,
        "an idle connection costs {per_connection} bytes ({inline} of them inline)"
    );
}

/// A connection that carried a stream, messages and datagrams both ways
/// gives back what they needed once it is quiet (the streams' tables and
/// spare pages, the scheduler's and the queues' memory, the congestion
/// controller, the packet keys' expansions), and carries all three again
/// after each release: its endpoints then hold what those of a connection
/// that stayed idle as long hold.
#[test]
fn a_quiet_connection_gives_back_what_its_data_needed_and_carries_data_again() {
    const ROUNDS: u32 = 3;
    let seed = Seed::from_env_or(64);
    let held = |rounds: u32| {
        let link = LinkConfig {
            delay: Duration::from_millis(1),
            ..LinkConfig::default()
        };
        let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
        let (client, server) = exchange(&mut pair, &[10], Duration::from_secs(10));
        for round in 0..rounds {
            pair.sim.run_for(Duration::from_secs(15));
            carry_data(&mut pair, client, server, round);
        }
        let idle_until = Duration::from_secs(20 * u64::from(ROUNDS) + 15);
        pair.sim
            .run_for(idle_until.saturating_sub(pair.sim.elapsed()));
        endpoints_heap(&mut pair, seed.value())
    };
    let (idle, carried) = (held(0), held(ROUNDS));
    eprintln!(
        "both endpoints of an idle connection: {idle} bytes; of one that \
         carried data {ROUNDS} times: {carried} bytes"
    );
    // Measured 2 232 bytes more (not broken down yet: what a transfer
    // leaves outside the connections, or in what the release keeps),
    // against 16 072 more before the quiet release gave back the streams'
    // tables and spare pages and the queues' and the scheduler's memory.
    assert!(
        carried <= idle + 2_600,
        "{carried} bytes held after carrying data, {idle} idle"
    );
}

/// The heap both endpoints of `pair` hold, as the bytes freed when they
/// are dropped (replaced by fresh ones, made beforehand).
fn endpoints_heap(pair: &mut Pair, seed: u64) -> i64 {
    let now = pair.sim.now();
    let mut spares: Vec<_> = [(21, None), (22, Some(identity()))]
        .into_iter()
        .map(|(salt, identity)| {
            Endpoint::new(
                EndpointConfig::default(),
                identity,
                seed_bytes(seed, salt),
                now,
                wall_start(),
            )
            .expect("valid config")
        })
        .collect();
    let (client_node, server_node) = (pair.client, pair.server);
    -allocation_counter::measure(|| {
        for node in [server_node, client_node] {
            let spare = spares.pop().expect("a spare for each");
            drop(std::mem::replace(&mut pair.sim.node_mut(node).0, spare));
        }
    })
    .bytes_current
}

/// One round of [`a_quiet_connection_gives_back_what_its_data_needed_and_carries_data_again`]:
/// the client opens a stream, writes 20 000 bytes and finishes; the
/// server reads them all and finishes its half; and each side sends the
/// other three messages and three datagrams, each checked as it arrives.
fn carry_data(pair: &mut Pair, client: ConnectionHandle, server: ConnectionHandle, round: u32) {
    const STREAM_BYTES: usize = 20_000;
    let data = message(round, STREAM_BYTES);
    let (client_node, server_node) = (pair.client, pair.server);
    let connection = pair.client().connection(client).expect("open");
    let stream = connection.open_stream().expect("a stream");
    assert_eq!(connection.write(stream, &data).expect("open"), STREAM_BYTES);
    connection.finish(stream).expect("open");
    for (node, handle) in [(client_node, client), (server_node, server)] {
        let connection = pair.sim.node_mut(node).0.connection(handle).expect("open");
        for id in 0..3 {
            connection
                .send_message(message(round * 10 + id, 100))
                .expect("room");
            connection
                .send_datagram(message(round * 10 + id, 50))
                .expect("room");
        }
    }
    let mut read = Vec::new();
    let mut buf = vec![0; 4096];
    let (mut messages, mut datagrams) = ([0u32; 2], [0u32; 2]);
    let mut server_finished = false;
    let mut client_saw_end = false;
    let deadline = pair.sim.elapsed() + Duration::from_secs(10);
    drive(&mut pair.sim, deadline, |sim| {
        for (side, node, handle) in [(0, client_node, client), (1, server_node, server)] {
            let connection = sim.node_mut(node).0.connection(handle).expect("open");
            while let Some(received) = connection.recv_message() {
                assert_eq!(received, message(round * 10 + messages[side], 100));
                messages[side] += 1;
            }
            while let Some(received) = connection.recv_datagram() {
                assert_eq!(received, message(round * 10 + datagrams[side], 50));
                datagrams[side] += 1;
            }
        }
        let connection = sim
            .node_mut(server_node)
            .0
            .connection(server)
            .expect("open");
        if let Some(id) = connection.accept_stream() {
            assert_eq!(id, stream);
        }
        while !server_finished {
            match connection.read(stream, &mut buf) {
                Ok(ReadOutcome::Read(0)) | Err(_) => break,
                Ok(ReadOutcome::Read(n)) => read.extend_from_slice(&buf[..n]),
                Ok(ReadOutcome::Finished) => {
                    connection.finish(stream).expect("open");
                    server_finished = true;
                }
            }
        }
        let connection = sim
            .node_mut(client_node)
            .0
            .connection(client)
            .expect("open");
        client_saw_end |= connection.read(stream, &mut buf) == Ok(ReadOutcome::Finished);
        server_finished && client_saw_end && messages == [3; 2] && datagrams == [3; 2]
    });
    assert_eq!(read, data, "round {round}: the stream's bytes, whole");
}
