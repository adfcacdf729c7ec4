//! Data leaves in runs of equal datagrams (one GSO send each): every
//! datagram of a run but the last is the run's stride long, so a packet
//! that its data left a byte short of the stride ends the run. Stream
//! frames reckon their room for the largest offset, so each data packet
//! used to come out a byte or two short of the one before: a 16 KiB
//! message went out as six runs of two datagrams, each a system call and a
//! receive of its own, and bulk transfers were cut the same way.
//!
//! The two endpoints are wired to each other directly, datagram by
//! datagram, with a mock clock: every figure here is deterministic.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use quanta::{Clock, Mock};
use std::sync::Arc;
use support::{identity, message, seed_bytes, wall_start};
use tern_proto::{
    ConnectionHandle, Endpoint, EndpointConfig, Node, ReadOutcome, StreamId, Transmit,
    TransmitLimits,
};

const PAYLOAD: usize = 1452;
const SEGMENTS: usize = 64;

/// One run: its bytes and its stride.
#[derive(Debug, Clone, Copy)]
struct Run {
    len: usize,
    stride: usize,
}

impl Run {
    fn datagrams(self) -> usize {
        self.len.div_ceil(self.stride)
    }

    /// Whether every datagram of the run is a full one.
    fn is_full(self) -> bool {
        self.stride == PAYLOAD && self.len.is_multiple_of(PAYLOAD)
    }
}

/// A client and a server wired directly, connected and settled.
struct Wire {
    clock: Clock,
    mock: Arc<Mock>,
    client: Endpoint,
    server: Endpoint,
    handle: ConnectionHandle,
    /// The server's side, once accepted, and its stream, once opened.
    accepted: Option<(ConnectionHandle, Option<StreamId>)>,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    buf: Vec<u8>,
}

impl Wire {
    /// The handshake, and a few small messages from the client, so that
    /// both sides settle (the path's datagram size probed, the first ACKs
    /// exchanged).
    fn settled() -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let config = EndpointConfig::default();
        let client = Endpoint::new(config, None, seed_bytes(11, 1), clock.now(), wall_start())
            .expect("valid config");
        let server = Endpoint::new(
            config,
            Some(identity()),
            seed_bytes(11, 2),
            clock.now(),
            wall_start(),
        )
        .expect("valid config");
        let public = server.public().expect("identity");
        let mut wire = Self {
            clock,
            mock,
            client,
            server,
            handle: ConnectionHandle(0),
            accepted: None,
            client_addr: "10.0.0.1:4000".parse().expect("address"),
            server_addr: "10.0.0.2:5000".parse().expect("address"),
            buf: vec![0; SEGMENTS * PAYLOAD],
        };
        let now = wire.clock.now();
        wire.handle = wire
            .client
            .connect(now, wire.server_addr, &public)
            .expect("connect");
        for round in 0..20 {
            if round >= 5 {
                wire.connection()
                    .send_message(message(round, 64))
                    .expect("send");
            }
            wire.round();
        }
        wire
    }

    fn connection(&mut self) -> &mut tern_proto::Connection {
        self.client.connection(self.handle).expect("connected")
    }

    /// A millisecond later, every run the client sends then, and the
    /// server's answers.
    fn round(&mut self) -> Vec<Run> {
        self.mock.increment(Duration::from_millis(1));
        let now = self.clock.now();
        let _ = self.client.poll_timeout();
        self.client.handle_timeout(now);
        let _ = self.server.poll_timeout();
        self.server.handle_timeout(now);
        let sent = runs(
            &mut self.client,
            &mut self.server,
            (self.client_addr, self.server_addr),
            now,
            &mut self.buf,
        );
        runs(
            &mut self.server,
            &mut self.client,
            (self.server_addr, self.client_addr),
            now,
            &mut self.buf,
        );
        while self.server.poll_event().is_some() {}
        while self.client.poll_event().is_some() {}
        if let Some(handle) = self.server.accept() {
            self.accepted = Some((handle, None));
        }
        if let Some((handle, stream)) = self.accepted.as_mut() {
            let connection = self.server.connection(*handle).expect("accepted");
            while connection.recv_message().is_some() {}
            if let Some(id) = connection.accept_stream() {
                *stream = Some(id);
            }
            if let Some(id) = *stream {
                while let Ok(ReadOutcome::Read(1..)) = connection.read(id, &mut self.buf) {}
            }
        }
        sent
    }
}

/// Every run `from` has to send now, each datagram delivered to `to`.
fn runs(
    from: &mut Endpoint,
    to: &mut Endpoint,
    (from_addr, to_addr): (SocketAddr, SocketAddr),
    now: quanta::Instant,
    buf: &mut [u8],
) -> Vec<Run> {
    let limits = TransmitLimits::new(SEGMENTS, PAYLOAD);
    let mut runs = Vec::new();
    while let Some(Transmit {
        len, segment_size, ..
    }) = from.poll_transmit(now, limits, buf)
    {
        let stride = segment_size.unwrap_or(len).max(1);
        for datagram in buf[..len].chunks_mut(stride) {
            to.handle_datagram(now, to_addr, from_addr, datagram);
        }
        runs.push(Run { len, stride });
    }
    runs
}

#[test]
fn a_16_kib_message_leaves_as_one_run_of_full_datagrams() {
    let mut wire = Wire::settled();
    let len = 16 * 1024;
    wire.connection()
        .send_message(message(99, len))
        .expect("send");
    let sent = wire.round();
    assert_eq!(sent.len(), 1, "one run: {sent:?}");
    let run = sent[0];
    assert!(run.len > len, "the whole message in the run: {run:?}");
    assert_eq!(run.stride, PAYLOAD, "full datagrams: {run:?}");
    // 16 KiB and a packet's overhead each: 12 datagrams.
    assert_eq!(run.datagrams(), 12, "{run:?}");
}

#[test]
fn a_bulk_stream_leaves_in_runs_of_full_datagrams() {
    let mut wire = Wire::settled();
    let stream = wire.connection().open_stream().expect("a stream");
    let chunk = vec![0x5a; 64 * 1024];
    let mut runs = 0;
    let mut datagrams = 0;
    for _ in 0..50 {
        let connection = wire.connection();
        while connection.write(stream, &chunk).expect("open") > 0 {}
        let sent = wire.round();
        // The last run of a round ends where the written data does.
        let Some((_, before_last)) = sent.split_last() else {
            continue;
        };
        let cut: Vec<&Run> = before_last.iter().filter(|run| !run.is_full()).collect();
        assert!(cut.is_empty(), "runs cut short {cut:?} in {sent:?}");
        runs += sent.len();
        datagrams += sent.iter().map(|run| run.datagrams()).sum::<usize>();
    }
    // Each round sends what the send buffer holds (256 KiB): two runs of
    // the 64 datagrams a transmit may carry and one of the rest.
    assert!(
        datagrams >= SEGMENTS / 2 * runs,
        "{datagrams} datagrams in {runs} runs"
    );
}
