//! Two endpoints wired to each other directly, datagram by datagram, on a
//! mock clock: no simulator (whose own queues and timing would be counted),
//! so every count a test takes of what crosses the wire is deterministic.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quanta::{Clock, Mock};
use tern_proto::{ConnectionHandle, Endpoint, EndpointConfig, Node, Transmit, TransmitLimits};

use super::{identity, seed_bytes, wall_start};

/// The largest datagram either side sends.
pub const PAYLOAD: usize = 1452;
/// The most datagrams one transmit (one GSO send) carries.
pub const SEGMENTS: usize = 64;

/// One transmit: its bytes and its stride (every datagram but the last is
/// the stride long).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub len: usize,
    pub stride: usize,
}

impl Run {
    pub fn datagrams(self) -> usize {
        self.len.div_ceil(self.stride)
    }

    /// Each datagram's length, in order.
    pub fn datagram_lens(self) -> impl Iterator<Item = usize> {
        (0..self.len)
            .step_by(self.stride)
            .map(move |start| self.stride.min(self.len - start))
    }

    /// Whether every datagram of the run is a full one.
    pub fn is_full(self) -> bool {
        self.stride == PAYLOAD && self.len.is_multiple_of(PAYLOAD)
    }
}

/// A client endpoint and a server endpoint (with [`identity`]), their
/// addresses, and the buffer their transmits are written into.
pub struct DirectPair {
    pub clock: Clock,
    pub mock: Arc<Mock>,
    pub client: Endpoint,
    pub server: Endpoint,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    buf: Vec<u8>,
}

impl DirectPair {
    /// A new pair with default configs, seeded from `seed`, its clock a
    /// second past its start.
    pub fn new(seed: u64) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let now = clock.now();
        let config = EndpointConfig::default();
        let client = Endpoint::new(config, None, seed_bytes(seed, 1), now, wall_start())
            .expect("valid config");
        let server = Endpoint::new(
            config,
            Some(identity()),
            seed_bytes(seed, 2),
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
        }
    }

    /// The client's connect to the server (its intro waits to be sent).
    pub fn connect(&mut self) -> ConnectionHandle {
        let public = self.server.public().expect("identity");
        let now = self.clock.now();
        self.client
            .connect(now, self.server_addr, &public)
            .expect("connect")
    }

    /// Hands the server every transmit the client has now; `on_run` sees
    /// each.
    pub fn client_sends(&mut self, on_run: impl FnMut(Run)) {
        let now = self.clock.now();
        let addrs = (self.client_addr, self.server_addr);
        flush(
            &mut self.client,
            &mut self.server,
            addrs,
            now,
            &mut self.buf,
            on_run,
        );
    }

    /// Hands the client every transmit the server has now; `on_run` sees
    /// each.
    pub fn server_sends(&mut self, on_run: impl FnMut(Run)) {
        let now = self.clock.now();
        let addrs = (self.server_addr, self.client_addr);
        flush(
            &mut self.server,
            &mut self.client,
            addrs,
            now,
            &mut self.buf,
            on_run,
        );
    }

    /// Fires the client's timer if it is due.
    pub fn client_timer(&mut self) {
        fire_if_due(&mut self.client, self.clock.now());
    }

    /// Fires the server's timer if it is due.
    pub fn server_timer(&mut self) {
        fire_if_due(&mut self.server, self.clock.now());
    }
}

fn fire_if_due(node: &mut Endpoint, now: quanta::Instant) {
    if node.poll_timeout().is_some_and(|d| d <= now) {
        node.handle_timeout(now);
    }
}

/// Every transmit `from` has at `now`, each datagram handed to `to`; no
/// allocation (the allocation tests count through it).
fn flush(
    from: &mut Endpoint,
    to: &mut Endpoint,
    (from_addr, to_addr): (SocketAddr, SocketAddr),
    now: quanta::Instant,
    buf: &mut [u8],
    mut on_run: impl FnMut(Run),
) {
    let limits = TransmitLimits::new(SEGMENTS, PAYLOAD);
    while let Some(Transmit {
        len, segment_size, ..
    }) = from.poll_transmit(now, limits, buf)
    {
        let stride = segment_size.unwrap_or(len).max(1);
        for datagram in buf[..len].chunks_mut(stride) {
            to.handle_datagram(now, to_addr, from_addr, datagram);
        }
        on_run(Run { len, stride });
    }
}
