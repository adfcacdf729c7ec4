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

use std::time::Duration;

use bytes::Bytes;
use support::direct::{DirectPair, Run};
use tern_proto::{ConnectionHandle, Node, ReadOutcome, StreamId};

/// Runs `f` and returns how many allocations (a reallocation is one) it
/// made on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    allocation_counter::measure(f).count_total
}

/// Two endpoints joined by a perfect, instant link.
struct Wire {
    pair: DirectPair,
    /// Datagrams each side received: what the test divides by.
    datagrams: u64,
}

impl Wire {
    fn new() -> Self {
        Self {
            pair: DirectPair::new(7),
            datagrams: 0,
        }
    }

    /// Delivers everything either side has to send now; returns whether
    /// anything moved.
    fn exchange(&mut self) -> bool {
        let mut moved = false;
        let mut datagrams = 0;
        let mut count = |run: Run| {
            datagrams += run.datagrams() as u64;
            moved = true;
        };
        self.pair.client_sends(&mut count);
        self.pair.server_sends(&mut count);
        self.datagrams += datagrams;
        moved
    }

    /// Exchanges until both sides are quiet, then moves the clock to the
    /// earlier deadline and fires it. Events are taken and dropped, as an
    /// application's loop would take them.
    fn step(&mut self) {
        let moved = self.exchange();
        while self.pair.client.poll_event().is_some() {}
        while self.pair.server.poll_event().is_some() {}
        if moved {
            return;
        }
        let next = [
            self.pair.client.poll_timeout(),
            self.pair.server.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a connection always has a timer");
        let now = self.pair.clock.now();
        if next > now {
            self.pair.mock.increment(next - now);
        }
        let now = self.pair.clock.now();
        self.pair.client.handle_timeout(now);
        self.pair.server.handle_timeout(now);
    }
}

/// A connected pair and a stream from the client to the server.
fn connected_stream() -> (Wire, ConnectionHandle, ConnectionHandle, StreamId) {
    let mut wire = Wire::new();
    let client = wire.pair.connect();
    let mut server = None;
    while server.is_none() {
        wire.step();
        server = wire.pair.server.accept();
    }
    let server = server.expect("accepted");
    let stream = wire
        .pair
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
        let connection = wire.pair.client.connection(client).expect("client");
        while written < end {
            let n = (end - written).min(chunk.len() as u64) as usize;
            fill(&mut chunk[..n], written);
            let taken = connection.write(stream, &chunk[..n]).expect("open");
            if taken == 0 {
                break;
            }
            written += taken as u64;
        }
        let connection = wire.pair.server.connection(server).expect("server");
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
        if read == end {
            // Done: a step more would let the clock run to the next
            // deadline, a second's quiet that gives the connection's
            // memory back before the next transfer.
            break;
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
    // Warm up: the window opens, buffers reach their working size, and
    // both sides skip a packet number once (one comes within 2 + 2 × 1024
    // packets), which allocates their lists of skipped numbers. The server
    // sends only ACKs and flow-control updates, about one datagram for 30
    // of the client's, so it takes the longer.
    const SKIP_WITHIN: u64 = 2 + 2 * 1024;
    let step = 8 << 20;
    let mut warm = 0;
    let handles = (client, server);
    let server_sent = |wire: &mut Wire| {
        let connection = wire.pair.server.connection(server).expect("server");
        connection.stats().sent_packets
    };
    while warm < 32 << 20 || server_sent(&mut wire) <= SKIP_WITHIN {
        assert!(warm < 1 << 30, "the server sent too little to warm up");
        let moved = transfer(
            &mut wire,
            handles,
            stream,
            &mut remote,
            (warm, step),
            &mut chunk,
            &mut buf,
        );
        assert_eq!(moved, step);
        warm += step;
    }
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
        let connection = wire.pair.client.connection(from).expect("client");
        while sent < count && connection.send_message(message.clone()).is_ok() {
            sent += 1;
        }
        let connection = wire.pair.server.connection(to).expect("server");
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
        wire.pair
            .client
            .connection(client)
            .expect("client")
            .send_message(request.clone())
            .expect("room for one request");
        let answer = loop {
            wire.step();
            let connection = wire.pair.server.connection(server).expect("server");
            if let Some(m) = connection.recv_message() {
                delivered += 1;
                connection.send_message(m).expect("room for one answer");
            }
            if let Some(m) = wire
                .pair
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
        wire.pair.mock.increment(gap);
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
