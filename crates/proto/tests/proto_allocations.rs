//! A connection in steady state touches the heap for nothing: sending,
//! acknowledging, pacing and receiving stream data reuse what the
//! connection already holds. `allocation_counter` installs a counting global
//! allocator in this test binary; it counts the allocations of the test's
//! own thread, so tests running beside it cannot disturb the count.
//!
//! The two endpoints are wired to each other directly (no simulator, whose
//! own queues would be counted), datagram by datagram, with a mock clock
//! moved to the next deadline whenever both sides are waiting.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use quanta::{Clock, Mock};
use support::{identity, seed_bytes, wall_start};
use tern_proto::{
    ConnectionHandle, Endpoint, EndpointConfig, Node, ReadOutcome, StreamId, Transmit,
    TransmitLimits,
};

/// Runs `f` and returns how many allocations (a reallocation is one) it
/// made on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

const PAYLOAD: usize = 1452;
const SEGMENTS: usize = 64;

/// Two endpoints joined by a perfect, instant link.
struct Wire {
    clock: Clock,
    mock: Arc<Mock>,
    client: Endpoint,
    server: Endpoint,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    buf: Vec<u8>,
    /// Datagrams each side received: what the test divides by.
    datagrams: u64,
}

impl Wire {
    fn new() -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let now = clock.now();
        let config = EndpointConfig::default();
        let client =
            Endpoint::new(config, None, seed_bytes(7, 1), now, wall_start()).expect("valid config");
        let server = Endpoint::new(
            config,
            Some(identity()),
            seed_bytes(7, 2),
            now,
            wall_start(),
        )
        .expect("valid config");
        Self {
            clock,
            mock,
            client,
            server,
            client_addr: "10.0.0.1:4000".parse().expect("address"),
            server_addr: "10.0.0.2:5000".parse().expect("address"),
            buf: vec![0; SEGMENTS * PAYLOAD],
            datagrams: 0,
        }
    }

    /// Delivers everything either side has to send now; returns whether
    /// anything moved.
    fn exchange(&mut self) -> bool {
        let now = self.clock.now();
        let limits = TransmitLimits::new(SEGMENTS, PAYLOAD);
        let mut moved = false;
        for client_sends in [true, false] {
            let (from, to, from_addr, to_addr) = if client_sends {
                (
                    &mut self.client,
                    &mut self.server,
                    self.client_addr,
                    self.server_addr,
                )
            } else {
                (
                    &mut self.server,
                    &mut self.client,
                    self.server_addr,
                    self.client_addr,
                )
            };
            while let Some(Transmit {
                len, segment_size, ..
            }) = from.poll_transmit(now, limits, &mut self.buf)
            {
                let segment = segment_size.unwrap_or(len).max(1);
                for datagram in self.buf[..len].chunks_mut(segment) {
                    to.handle_datagram(now, to_addr, from_addr, datagram);
                    self.datagrams += 1;
                }
                moved = true;
            }
        }
        moved
    }

    /// Exchanges until both sides are quiet, then moves the clock to the
    /// earlier deadline and fires it. Events are taken and dropped, as an
    /// application's loop would take them.
    fn step(&mut self) {
        let moved = self.exchange();
        while self.client.poll_event().is_some() {}
        while self.server.poll_event().is_some() {}
        if moved {
            return;
        }
        let next = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .expect("a connection always has a timer");
        let now = self.clock.now();
        if next > now {
            self.mock.increment(next - now);
        }
        let now = self.clock.now();
        self.client.handle_timeout(now);
        self.server.handle_timeout(now);
    }
}

/// A connected pair and a stream from the client to the server.
fn connected_stream() -> (Wire, ConnectionHandle, ConnectionHandle, StreamId) {
    let mut wire = Wire::new();
    let public = wire.server.public().expect("identity");
    let now = wire.clock.now();
    let client = wire
        .client
        .connect(now, wire.server_addr, &public)
        .expect("connect");
    let mut server = None;
    while server.is_none() {
        wire.step();
        server = wire.server.accept();
    }
    let server = server.expect("accepted");
    let stream = wire
        .client
        .connection(client)
        .and_then(|c| c.open_stream())
        .expect("a stream");
    (wire, client, server, stream)
}

/// Moves `total` bytes on the stream in 64 KiB writes and reads; returns
/// what arrived, each byte checked.
fn transfer(
    wire: &mut Wire,
    (client, server): (ConnectionHandle, ConnectionHandle),
    stream: StreamId,
    remote: &mut Option<StreamId>,
    (start, total): (u64, u64),
    chunk: &mut [u8],
    buf: &mut [u8],
) -> u64 {
    let (mut written, mut read) = (start, start);
    let end = start + total;
    while read < end {
        let connection = wire.client.connection(client).expect("client");
        while written < end {
            let n = (end - written).min(chunk.len() as u64) as usize;
            fill(&mut chunk[..n], written);
            let taken = connection.write(stream, &chunk[..n]).expect("open");
            if taken == 0 {
                break;
            }
            written += taken as u64;
        }
        let connection = wire.server.connection(server).expect("server");
        if remote.is_none() {
            *remote = connection.accept_stream();
        }
        if let Some(remote) = *remote {
            while let Ok(ReadOutcome::Read(n @ 1..)) = connection.read(remote, buf) {
                for (k, &byte) in buf[..n].iter().enumerate() {
                    assert_eq!(byte, byte_at(read + k as u64), "byte {}", read + k as u64);
                }
                read += n as u64;
            }
        }
        wire.step();
    }
    read - start
}

fn byte_at(offset: u64) -> u8 {
    (offset ^ (offset >> 11)) as u8
}

fn fill(chunk: &mut [u8], start: u64) {
    for (k, byte) in chunk.iter_mut().enumerate() {
        *byte = byte_at(start + k as u64);
    }
}

#[test]
fn a_stream_in_steady_state_allocates_nothing() {
    let (mut wire, client, server, stream) = connected_stream();
    let mut remote = None;
    let (mut chunk, mut buf) = (vec![0u8; 65_536], vec![0u8; 65_536]);
    // Warm up: the window opens, buffers reach their working size.
    let warm = 32 << 20;
    let handles = (client, server);
    let moved = transfer(
        &mut wire,
        handles,
        stream,
        &mut remote,
        (0, warm),
        &mut chunk,
        &mut buf,
    );
    assert_eq!(moved, warm);
    let datagrams_before = wire.datagrams;
    let measured = 64 << 20;
    let mut moved = 0;
    let allocations = allocations_in(|| {
        moved = transfer(
            &mut wire,
            handles,
            stream,
            &mut remote,
            (warm, measured),
            &mut chunk,
            &mut buf,
        );
    });
    assert_eq!(moved, measured);
    let datagrams = wire.datagrams - datagrams_before;
    assert!(datagrams > 40_000, "{datagrams} datagrams");
    assert_eq!(
        allocations, 0,
        "allocations while {datagrams} datagrams carried {measured} bytes"
    );
}

/// Sends `count` copies of `message` from one side to the other and takes
/// them all, checked.
fn one_way(
    wire: &mut Wire,
    (from, to): (ConnectionHandle, ConnectionHandle),
    message: &Bytes,
    count: u64,
) {
    let (mut sent, mut received) = (0, 0);
    while received < count {
        let connection = wire.client.connection(from).expect("client");
        while sent < count && connection.send_message(message.clone()).is_ok() {
            sent += 1;
        }
        let connection = wire.server.connection(to).expect("server");
        while let Some(m) = connection.recv_message() {
            assert_eq!(&m, message);
            received += 1;
        }
        // No step after the last: with nothing left to move, a step
        // would move the clock to the next deadline (a keep-alive, 10 s
        // on), and a connection quiet for a second gives back what its
        // transfers use (a steady state has no such pauses).
        if received < count {
            wire.step();
        }
    }
}

#[test]
fn small_messages_in_steady_state_allocate_only_what_is_delivered() {
    let (mut wire, client, server, _) = connected_stream();
    let message = Bytes::from_static(&[0x5a; 64]);
    // Warm up: on this perfect link the window grows until the message
    // window holds it, and the records of packets in flight and acknowledged
    // grow with it. Steady state is a round that allocates for nothing but
    // what it delivers.
    let round = 100_000;
    let warm = (0..10)
        .any(|_| allocations_in(|| one_way(&mut wire, (client, server), &message, round)) == round);
    assert!(warm, "no steady state within a million messages");
    let allocations = allocations_in(|| {
        for _ in 0..3 {
            one_way(&mut wire, (client, server), &message, round);
        }
    });
    let count = 3 * round;
    // Each message delivered is a buffer of its own, handed to the
    // application; nothing else may allocate.
    assert_eq!(allocations, count);
}

/// One request, one response, `count` times, with `gap` of virtual time
/// between round trips; returns the messages delivered.
fn requests(
    wire: &mut Wire,
    (client, server): (ConnectionHandle, ConnectionHandle),
    count: u64,
    gap: Duration,
) -> u64 {
    let request = Bytes::from_static(&[0xa5; 64]);
    let mut delivered = 0;
    for _ in 0..count {
        wire.client
            .connection(client)
            .expect("client")
            .send_message(request.clone())
            .expect("room for one request");
        let answer = loop {
            wire.step();
            let connection = wire.server.connection(server).expect("server");
            if let Some(m) = connection.recv_message() {
                delivered += 1;
                connection.send_message(m).expect("room for one answer");
            }
            if let Some(m) = wire
                .client
                .connection(client)
                .expect("client")
                .recv_message()
            {
                break m;
            }
        };
        delivered += 1;
        assert_eq!(answer, request);
        wire.mock.increment(gap);
    }
    delivered
}

#[test]
fn requests_and_responses_in_steady_state_allocate_only_what_is_delivered() {
    let (mut wire, client, server, _) = connected_stream();
    let gap = Duration::from_micros(20);
    requests(&mut wire, (client, server), 50_000, gap);
    // Long enough that growth per round trip anywhere (queues, timers,
    // records) would show.
    let mut delivered = 0;
    let allocations = allocations_in(|| {
        delivered = requests(&mut wire, (client, server), 200_000, gap);
    });
    assert_eq!(allocations, delivered);
}
