//! What a run did, for tests to assert on: an optional event list, and a
//! digest of every event that is always kept, so two runs can be compared
//! bit for bit without storing them.

use std::net::SocketAddr;
use std::time::Duration;

use crate::link::DropReason;

/// One thing that happened in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    /// Virtual time since the simulation started.
    pub at: Duration,
    /// What happened.
    pub kind: TraceKind,
    /// The sender's address as the network shows it.
    pub from: SocketAddr,
    /// The destination address.
    pub to: SocketAddr,
    /// Datagram bytes.
    pub len: usize,
}

/// The kinds of [`TraceEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    /// A node sent a datagram onto a link.
    Sent,
    /// A datagram reached its node.
    Delivered,
    /// A datagram was dropped.
    Dropped(DropReason),
}

/// A running digest of events: a cheap non-cryptographic mix, enough to
/// tell two runs apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Self(0x243f_6a88_85a3_08d3)
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn addr_word(addr: &SocketAddr) -> u64 {
    match addr {
        SocketAddr::V4(a) => u64::from(a.ip().to_bits()) << 16 | u64::from(a.port()),
        SocketAddr::V6(a) => {
            let bits = a.ip().to_bits();
            (bits as u64) ^ ((bits >> 64) as u64).rotate_left(17) ^ u64::from(a.port())
        }
    }
}

impl Digest {
    pub(crate) fn add(&mut self, event: &TraceEvent) {
        let kind = match event.kind {
            TraceKind::Sent => 1,
            TraceKind::Delivered => 2,
            TraceKind::Dropped(reason) => 3 + reason as u64,
        };
        for word in [
            event.at.as_nanos() as u64,
            kind,
            addr_word(&event.from),
            addr_word(&event.to),
            event.len as u64,
        ] {
            self.0 = mix(self.0 ^ word);
        }
    }

    pub(crate) fn value(self) -> u64 {
        self.0
    }
}
