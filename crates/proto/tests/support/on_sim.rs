//! The one adapter between tern-proto's [`Node`] and tern-sim's, so a
//! protocol endpoint (or any other `Node`) runs in the simulated network.
//! tern-sim depends on no Tern crate and tern-proto not on tern-sim, so
//! the adapter is test code: tern-proto's simulation tests use it as a
//! module of their support, and the level-1 benchmark includes this same
//! file.

use std::net::SocketAddr;

use quanta::Instant;

use tern_proto::{Node, Transmit, TransmitLimits};

/// A [`Node`] as a tern-sim node.
///
/// The simulator takes what a Linux GSO send takes: up to
/// [`OnSim::MAX_SEGMENTS`] datagrams of one size per transmit, each at most
/// the simulated link's payload (1 452 bytes, an Ethernet path).
#[derive(Debug, Default)]
pub struct OnSim<N>(pub N);

impl<N> OnSim<N> {
    /// Datagrams per transmit, as in one `sendmsg` with `UDP_SEGMENT`.
    pub const MAX_SEGMENTS: usize = 64;
    /// The largest datagram the adapter lets the node write, in bytes.
    pub const MAX_DATAGRAM: usize = 1452;
}

impl<N: Node> tern_sim::Node for OnSim<N> {
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        from: SocketAddr,
        datagram: &mut [u8],
    ) {
        self.0.handle_datagram(now, local, from, datagram);
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<tern_sim::Transmit> {
        let limits = TransmitLimits::new(Self::MAX_SEGMENTS, Self::MAX_DATAGRAM);
        let Transmit {
            destination,
            len,
            segment_size,
            ..
        } = self.0.poll_transmit(now, limits, buf)?;
        Some(tern_sim::Transmit {
            source: None,
            destination,
            len,
            segment_size,
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.0.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now);
    }
}
