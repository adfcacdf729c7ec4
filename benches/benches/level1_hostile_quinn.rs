//! Level 1, the reference beside Tern's `level1_hostile`: what its stream
//! classes and the per-packet classes quinn's API can make a client send
//! cost quinn-proto 0.11 (the state machine under quinn; rustls
//! with ring, AES-128-GCM) per byte it receives, against its own bulk
//! data. Built only with the `quinn` feature, which also gives Tern's
//! packets ring's AES-GCM: both sides then open packets with the same code.
//!
//! Each sample is a quinn-proto client and server in memory, the handshake
//! completed (datagrams handed both ways until neither side sends, then
//! once more after the delayed ACKs' timers, on a fixed clock advanced by
//! hand, the endpoints' rng seeded), and the client's datagrams for the
//! class taken from its `poll_transmit` beforehand, outside the
//! measurement. What is measured, [`deliver`], mirrors Tern's: the server
//! handles every datagram (`Endpoint::handle`, then the connection's
//! event), then takes its turn: everything it transmits (`poll_transmit`
//! until none, one datagram at a time, its endpoint events exchanged
//! before each call), its next deadline (`poll_timeout`), and the
//! application events it would be woken for (`poll` until none, each
//! dropped: the application accepts no stream within it). As in Tern's,
//! `honest_bulk`'s application reads its stream after [`deliver`]: in the
//! time, not in the instructions a profiler counts in [`deliver`].
//!
//! Both sides keep quinn's defaults (100 two-way streams, its flow-control
//! windows) but for three things: MTU discovery off, so every datagram is
//! at most the initial 1200 bytes; the client's initial congestion
//! window raised past 4 GiB, where quinn stops pacing, so a class's
//! datagrams leave in one go; and the client's send buffer for unreliable
//! datagrams unbounded, so the datagram classes queue theirs at once.
//!
//! Tern's other per-packet classes cannot be made through quinn's API, so
//! they are not here: empty messages (quinn has no messages), one-byte
//! stream fragments, a hundred to a packet (quinn writes a stream's
//! pending bytes as one frame a packet) and ACKs of everything (quinn's ACK frames
//! are what it received, sent when it has something new to acknowledge).
//! `one_byte_datagrams` has no class of Tern's beside it.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use quinn_proto::congestion::CubicConfig;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    ServerConfig, StreamId, TransportConfig, VarInt,
};

/// The TLS configurations of the end-to-end comparison.
#[path = "../src/harness/e2e/quinn_tls.rs"]
mod quinn_tls;

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// The most datagrams one `poll_transmit` may return: one, as Tern's
/// driver takes them.
const ONE_DATAGRAM: usize = 1;

/// Room for the largest datagram either side sends (MTU discovery off:
/// 1 200 bytes).
const DATAGRAM_BUFFER: usize = 1500;

/// The two-way streams quinn grants by default
/// (`TransportConfig::max_concurrent_bidi_streams`), as many as Tern's.
const STREAMS: u64 = 100;

/// One side: its endpoint, its address and its connection once it has one.
struct Peer {
    endpoint: Endpoint,
    addr: SocketAddr,
    connection: Option<(ConnectionHandle, Connection)>,
}

impl Peer {
    fn new(server: Option<Arc<ServerConfig>>, addr: SocketAddr, seed: u8) -> Self {
        Self {
            endpoint: Endpoint::new(
                Arc::new(EndpointConfig::default()),
                server,
                false,
                Some([seed; 32]),
            ),
            addr,
            connection: None,
        }
    }

    fn connection(&mut self) -> &mut Connection {
        &mut self.connection.as_mut().expect("connected").1
    }

    /// Hands the endpoint a datagram from `from`, and what it makes of it
    /// to the connection (a new one is accepted).
    fn receive(&mut self, now: Instant, from: SocketAddr, datagram: BytesMut) {
        let mut response = Vec::new();
        match self
            .endpoint
            .handle(now, from, None, None, datagram, &mut response)
        {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                let (own, connection) = self.connection.as_mut().expect("a connection");
                assert_eq!(*own, handle, "one connection");
                connection.handle_event(event);
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                let accepted = self
                    .endpoint
                    .accept(incoming, now, &mut response, None)
                    .map_err(|e| e.cause)
                    .expect("accepted");
                self.connection = Some(accepted);
            }
            Some(DatagramEvent::Response(_)) => panic!("a stateless response"),
            None => {}
        }
    }

    /// The side's turn: everything it transmits, each datagram handed to
    /// `sent`, its endpoint events exchanged before each `poll_transmit`;
    /// then its next deadline and its application events.
    fn turn(&mut self, now: Instant, mut sent: impl FnMut(&[u8])) {
        let (handle, connection) = self.connection.as_mut().expect("a connection");
        let mut buf = Vec::with_capacity(DATAGRAM_BUFFER);
        loop {
            while let Some(event) = connection.poll_endpoint_events() {
                if let Some(event) = self.endpoint.handle_event(*handle, event) {
                    connection.handle_event(event);
                }
            }
            buf.clear();
            let Some(transmit) = connection.poll_transmit(now, ONE_DATAGRAM, &mut buf) else {
                break;
            };
            sent(&buf[..transmit.size]);
        }
        black_box(connection.poll_timeout());
        while let Some(event) = connection.poll() {
            black_box(event);
        }
    }

    /// Runs the connection's timers due by `now`.
    fn timers(&mut self, now: Instant) {
        let connection = self.connection();
        if connection.poll_timeout().is_some_and(|at| at <= now) {
            connection.handle_timeout(now);
        }
    }
}

/// A client and a server in memory, and the clock they share.
struct Pair {
    client: Peer,
    server: Peer,
    now: Instant,
}

/// The TLS configurations, made once (a certificate each time would be
/// setup work for nothing).
fn crypto() -> &'static (Arc<QuicServerConfig>, Arc<QuicClientConfig>) {
    static CRYPTO: OnceLock<(Arc<QuicServerConfig>, Arc<QuicClientConfig>)> = OnceLock::new();
    CRYPTO.get_or_init(|| {
        let (server, client) = quinn_tls::tls().expect("TLS configurations");
        (
            Arc::new(QuicServerConfig::try_from(server).expect("server TLS")),
            Arc::new(QuicClientConfig::try_from(client).expect("client TLS")),
        )
    })
}

impl Pair {
    /// A client connected to a server, the handshake confirmed on both
    /// sides and every packet acknowledged.
    fn connect() -> Self {
        let (server_crypto, client_crypto) = crypto();
        let server_config = ServerConfig::with_crypto(server_crypto.clone());
        let mut client_config = ClientConfig::new(client_crypto.clone());
        let mut transport = TransportConfig::default();
        let mut cubic = CubicConfig::default();
        // Past u32::MAX quinn does not pace (`Pacer::delay`).
        cubic.initial_window(1 << 33);
        transport.congestion_controller_factory(Arc::new(cubic));
        // Room for the datagram classes' datagrams, queued at once.
        transport.datagram_send_buffer_size(usize::MAX);
        client_config.transport_config(Arc::new(transport));
        let server_addr: SocketAddr = "192.0.2.1:7000".parse().expect("address");
        let client_addr: SocketAddr = "198.51.100.7:40000".parse().expect("address");
        let mut pair = Self {
            client: Peer::new(None, client_addr, 1),
            server: Peer::new(Some(Arc::new(server_config)), server_addr, 2),
            now: Instant::now(),
        };
        let connecting = pair
            .client
            .endpoint
            .connect(pair.now, client_config, server_addr, quinn_tls::SERVER_NAME)
            .expect("connect");
        pair.client.connection = Some(connecting);
        pair.exchange();
        // The delayed ACKs' timers, then what they send.
        pair.now += Duration::from_millis(100);
        pair.client.timers(pair.now);
        pair.server.timers(pair.now);
        pair.exchange();
        assert!(!pair.client.connection().is_handshaking(), "connected");
        assert!(!pair.server.connection().is_handshaking(), "connected");
        // Nothing left to do but wait for the idle timeout.
        let now = pair.now;
        let due = pair.server.connection().poll_timeout();
        assert!(due.is_none_or(|at| at > now), "no timer due");
        pair
    }

    /// Hands datagrams both ways until neither side sends any.
    fn exchange(&mut self) {
        loop {
            let to_server = self.client_sends();
            for datagram in &to_server {
                self.server
                    .receive(self.now, self.client.addr, BytesMut::from(&datagram[..]));
            }
            let mut to_client = Vec::new();
            if self.server.connection.is_some() {
                self.server
                    .turn(self.now, |datagram| to_client.push(datagram.to_vec()));
            }
            for datagram in to_client.iter() {
                self.client
                    .receive(self.now, self.server.addr, BytesMut::from(&datagram[..]));
            }
            if to_server.is_empty() && to_client.is_empty() {
                break;
            }
        }
    }

    /// The client's turn: the datagrams it sends.
    fn client_sends(&mut self) -> Vec<Vec<u8>> {
        let mut sent = Vec::new();
        self.client
            .turn(self.now, |datagram| sent.push(datagram.to_vec()));
        sent
    }

    /// The server's connection as the batch leaves it.
    fn server_connection(&mut self) -> &mut Connection {
        self.server.connection()
    }
}

/// A server and the client's datagrams to hand it. The pair is boxed:
/// moved into [`deliver`] and out, it would be copied each way (its
/// endpoints and connections are several kilobytes), work that is the
/// benchmark's, not the server's.
struct Batch {
    pair: Box<Pair>,
    datagrams: Vec<BytesMut>,
    bytes: usize,
}

/// A pair connected, and the datagrams `send` has the client send.
fn batch(send: impl FnOnce(&mut Pair) -> Vec<Vec<u8>>) -> Batch {
    let mut pair = Box::new(Pair::connect());
    let sent = send(&mut pair);
    let bytes = sent.iter().map(Vec::len).sum();
    Batch {
        pair,
        datagrams: sent.iter().map(|d| BytesMut::from(&d[..])).collect(),
        bytes,
    }
}

/// The server's work on a batch: every datagram, then its turn (see the
/// module's doc). Never inlined, so a profiler can count its instructions
/// alone (`--toggle-collect` in callgrind).
#[inline(never)]
fn deliver(mut batch: Batch) -> Batch {
    let pair = &mut batch.pair;
    let (now, from) = (pair.now, pair.client.addr);
    for datagram in batch.datagrams.drain(..) {
        pair.server.receive(now, from, datagram);
    }
    pair.server.turn(now, |datagram| {
        black_box(datagram);
    });
    batch
}

/// The server's connection is still open after the batch: the class kept
/// to the rules.
fn still_open(batch: &mut Batch) {
    let connection = batch.pair.server_connection();
    assert!(!connection.is_closed(), "the batch broke a rule");
}

fn run(bencher: Bencher, make: fn() -> Batch, after: fn(&mut Batch)) {
    bencher
        .with_inputs(make)
        .input_counter(|b: &Batch| BytesCount::new(b.bytes))
        .bench_local_values(|b| {
            let mut b = deliver(b);
            after(&mut b);
            black_box(b)
        });
}

/// The client's two-way streams, opened: as many as the server granted.
fn open_all(pair: &mut Pair) -> Vec<StreamId> {
    let mut streams = pair.client.connection().streams();
    let ids: Vec<StreamId> = std::iter::from_fn(|| streams.open(Dir::Bi)).collect();
    assert_eq!(ids.len() as u64, STREAMS, "the streams granted");
    ids
}

/// Writes all of `data` to stream `id`.
fn write(pair: &mut Pair, id: StreamId, data: &[u8]) {
    let written = pair
        .client
        .connection()
        .send_stream(id)
        .write(data)
        .expect("writable");
    assert_eq!(written, data.len(), "within the windows");
}

/// Resets stream `id` with error code 1.
fn reset(pair: &mut Pair, id: StreamId) {
    pair.client
        .connection()
        .send_stream(id)
        .reset(VarInt::from_u32(1))
        .expect("a stream");
}

/// The server received `count` frames of each stream of a class (its
/// `FrameStats`), and is still open.
fn received(batch: &mut Batch, stream: u64, reset_stream: u64) {
    still_open(batch);
    let frames = batch.pair.server_connection().stats().frame_rx;
    assert_eq!((frames.stream, frames.reset_stream), (stream, reset_stream));
}

/// Full packets of stream data in order on one two-way stream, read by the
/// server's application: the yardstick. As much data as Tern's
/// `honest_bulk` (58 chunks of 1 100 bytes), read as it is there (up to
/// 4 096 bytes a read, until nothing more).
#[divan::bench]
fn honest_bulk(bencher: Bencher) {
    const DATA: usize = 58 * 1_100;
    run(
        bencher,
        || {
            batch(|pair| {
                let id = pair
                    .client
                    .connection()
                    .streams()
                    .open(Dir::Bi)
                    .expect("a stream");
                write(pair, id, &[0x5a; DATA]);
                pair.client_sends()
            })
        },
        |b| {
            still_open(b);
            let connection = b.pair.server_connection();
            let id = connection.streams().accept(Dir::Bi).expect("the stream");
            let mut stream = connection.recv_stream(id);
            let mut chunks = stream.read(true).expect("readable");
            let mut read = 0;
            while let Ok(Some(chunk)) = chunks.next(4096) {
                read += chunk.bytes.len();
            }
            let _ = chunks.finalize();
            assert_eq!(read, DATA, "all read");
        },
    );
}

/// A reset of each two-way stream the server granted, no byte written:
/// quinn sends RESET_STREAM alone, at final size 0, packed.
#[divan::bench]
fn resets_alone_packed(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(|pair| {
                for id in open_all(pair) {
                    reset(pair, id);
                }
                pair.client_sends()
            })
        },
        |b| received(b, 0, STREAMS),
    );
}

/// A byte into each two-way stream, then its reset, packed. quinn drops
/// what a reset stream has not sent, so the client sends the bytes first
/// (their datagrams), then the resets (theirs), at final size 1.
#[divan::bench]
fn resets_packed(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(|pair| {
                let ids = open_all(pair);
                for &id in &ids {
                    write(pair, id, b"x");
                }
                let mut sent = pair.client_sends();
                for &id in &ids {
                    reset(pair, id);
                }
                sent.extend(pair.client_sends());
                sent
            })
        },
        |b| received(b, STREAMS, STREAMS),
    );
}

/// As [`resets_packed`], one stream a datagram as near as quinn sends it:
/// each datagram holds a stream's byte and the reset of the stream before
/// it (the first no reset, and a last one the last reset alone).
#[divan::bench]
fn resets(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(|pair| {
                let mut sent = Vec::new();
                for id in open_all(pair) {
                    write(pair, id, b"x");
                    sent.extend(pair.client_sends());
                    reset(pair, id);
                }
                sent.extend(pair.client_sends());
                assert_eq!(sent.len() as u64, STREAMS + 1, "a datagram a stream");
                sent
            })
        },
        |b| received(b, STREAMS, STREAMS),
    );
}

/// The bytes of a request: a typical request header, as Tern's.
const REQUEST: &[u8] = &[0x5a; 16];

/// A whole request on each two-way stream (its bytes and its end), packed.
#[divan::bench]
fn honest_requests_packed(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(|pair| {
                for id in open_all(pair) {
                    request(pair, id);
                }
                pair.client_sends()
            })
        },
        |b| received(b, STREAMS, 0),
    );
}

/// As [`honest_requests_packed`], one stream a datagram.
#[divan::bench]
fn honest_requests(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(|pair| {
                let mut sent = Vec::new();
                for id in open_all(pair) {
                    request(pair, id);
                    sent.extend(pair.client_sends());
                }
                assert_eq!(sent.len() as u64, STREAMS, "a datagram a stream");
                sent
            })
        },
        |b| received(b, STREAMS, 0),
    );
}

/// The pings of Tern's `pings`.
const PINGS: u64 = 400;

/// Datagrams holding a PING each: the client's `ping` and its turn, once
/// a datagram. quinn puts nothing else in them but padding: every packet
/// it sends is at least 6 bytes longer than a connection ID and the tag,
/// so a stateless reset looks like one. Checked here: no ACK goes with
/// the pings, and every datagram is [`PING_DATAGRAM`] bytes.
#[divan::bench]
fn pings(bencher: Bencher) {
    run(
        bencher,
        || {
            batch(|pair| {
                let acks = pair.client.connection().stats().frame_tx.acks;
                let mut sent = Vec::new();
                for _ in 0..PINGS {
                    pair.client.connection().ping();
                    sent.extend(pair.client_sends());
                }
                assert_eq!(sent.len() as u64, PINGS, "a datagram a ping");
                assert!(
                    sent.iter().all(|d| d.len() == PING_DATAGRAM),
                    "a ping alone"
                );
                let frames = pair.client.connection().stats().frame_tx;
                assert_eq!(frames.acks, acks, "no ACK with the pings");
                sent
            })
        },
        |b| {
            still_open(b);
            let frames = b.pair.server_connection().stats().frame_rx;
            assert_eq!(frames.ping, PINGS, "the pings");
        },
    );
}

/// A ping's datagram: a short header (1 byte and the 8-byte connection
/// ID), the packet number, PING and padding to 5 bytes, the 16-byte tag.
const PING_DATAGRAM: usize = 30;

/// The datagrams of the datagram classes: as many as fit quinn's default
/// receive buffer (`datagram_receive_buffer_size`, 1.25 MB, where each
/// datagram counts its bytes and 32 more), so the server drops none of
/// them.
const DATAGRAMS: u64 = 36_000;

/// Empty datagrams (quinn's unreliable datagrams, the DATAGRAM frame),
/// [`DATAGRAMS`] of them, as many to a packet as quinn packs, never taken:
/// frames of 2 bytes (each with its length), 583 to a 1 192-byte datagram.
#[divan::bench]
fn empty_datagrams(bencher: Bencher) {
    run(bencher, || datagrams(&[], 583), datagrams_received);
}

/// As [`empty_datagrams`], each datagram of one byte: frames of 3 bytes,
/// 389 to a 1 193-byte datagram.
#[divan::bench]
fn one_byte_datagrams(bencher: Bencher) {
    run(bencher, || datagrams(b"x", 389), datagrams_received);
}

/// A pair connected and the datagrams the client sends for [`DATAGRAMS`]
/// copies of `data`, queued at once (its send buffer raised for them),
/// checked to be `per_datagram` to a datagram (the last one fewer).
fn datagrams(data: &'static [u8], per_datagram: u64) -> Batch {
    batch(|pair| {
        let mut datagrams = pair.client.connection().datagrams();
        for _ in 0..DATAGRAMS {
            datagrams
                .send(Bytes::from_static(data), false)
                .expect("room for the datagram");
        }
        let sent = pair.client_sends();
        let expected = DATAGRAMS.div_ceil(per_datagram);
        assert_eq!(sent.len() as u64, expected, "{per_datagram} to a datagram");
        sent
    })
}

/// The server received every datagram and is still open.
fn datagrams_received(batch: &mut Batch) {
    still_open(batch);
    let frames = batch.pair.server_connection().stats().frame_rx;
    assert_eq!(frames.datagram, DATAGRAMS, "the datagrams");
}

/// [`REQUEST`] on stream `id`, and its end.
fn request(pair: &mut Pair, id: StreamId) {
    write(pair, id, REQUEST);
    pair.client
        .connection()
        .send_stream(id)
        .finish()
        .expect("a stream");
}
