//! What the caller hands to a send: [`Transmit`]s in, [`Sent`] out.

use std::net::SocketAddr;

/// One outgoing message: a destination and its contents, optionally cut into
/// equal segments that leave as separate UDP datagrams.
///
/// With `segment_size` set, `contents` is a run of datagrams of exactly
/// `segment_size` bytes each, except the last, which may be shorter. A
/// backend with UDP generic segmentation offload hands such a run to the
/// kernel in one call (the kernel cuts it); the others send each segment on
/// its own. Either way the receiver sees the same datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transmit<'a> {
    /// Where the datagrams go.
    pub destination: SocketAddr,
    /// The bytes of one datagram, or of a run of datagrams when `segment_size` is set.
    pub contents: &'a [u8],
    /// Size in bytes of every datagram in `contents` but the last; `None` means
    /// `contents` is a single datagram. Must not be `Some(0)`.
    pub segment_size: Option<usize>,
    /// The IP time to live (IPv6 hop limit) of these datagrams alone;
    /// `None` leaves the socket's. A NAT traversal sets a small one so that
    /// a punch opens the sender's own NAT and expires before the peer's.
    pub ttl: Option<u8>,
}

impl<'a> Transmit<'a> {
    /// One datagram with `contents` to `destination`.
    pub fn new(destination: SocketAddr, contents: &'a [u8]) -> Self {
        Self {
            destination,
            contents,
            segment_size: None,
            ttl: None,
        }
    }

    /// The same datagrams with their own IP time to live (IPv6 hop limit).
    pub fn with_ttl(self, ttl: u8) -> Self {
        Self {
            ttl: Some(ttl),
            ..self
        }
    }

    /// The same contents read as a run of datagrams of `segment_size` bytes
    /// (the last one may be shorter).
    pub fn with_segment_size(self, segment_size: usize) -> Self {
        Self {
            segment_size: Some(segment_size),
            ..self
        }
    }

    /// The size of each datagram but the last (the whole contents for a single datagram).
    pub fn stride(&self) -> usize {
        match self.segment_size {
            Some(size) if size < self.contents.len() => size,
            _ => self.contents.len(),
        }
    }

    /// How many datagrams this transmit puts on the wire (an empty transmit is one empty datagram).
    pub fn datagrams(&self) -> usize {
        let stride = self.stride();
        if stride == 0 {
            1
        } else {
            self.contents.len().div_ceil(stride)
        }
    }

    /// What is left after its first `segments` datagrams went out: how a caller
    /// resumes after a [`Sent`] that stopped inside this transmit.
    pub fn skip_segments(&self, segments: usize) -> Self {
        let start = segments
            .saturating_mul(self.stride())
            .min(self.contents.len());
        Self {
            contents: &self.contents[start..],
            ..*self
        }
    }
}

/// How far a send got through a batch of [`Transmit`]s.
///
/// Everything before `transmits` went out (or was refused for its
/// destination alone and counted, see the counters' `send_errors`); of the
/// transmit at index `transmits`, the first `segments` datagrams went out. A
/// segmented transmit is only split like this by backends that send its
/// segments in separate datagrams and ran out of socket buffer half-way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// Transmits at the front of the batch that went out whole.
    pub transmits: usize,
    /// Datagrams of the next transmit that went out before the socket filled.
    pub segments: usize,
}

/// A transmit, or part of one, that the kernel refused for its destination
/// or its size alone: it was skipped (the rest of the batch went on) and
/// counted in the counters' `send_errors`.
///
/// [`UdpSocket::refusals`](crate::UdpSocket::refusals) lists them for the
/// last send call, so a connection learns at once that, say, a path MTU
/// probe was too large, rather than waiting for it to be declared lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendRefusal {
    /// Index of the refused transmit in the batch handed to that call.
    pub transmit: usize,
    /// Why the kernel refused it.
    pub reason: RefusalReason,
}

/// Why the kernel refused a datagram for its destination or size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Larger than the path or the socket allows (`EMSGSIZE`): with
    /// [`MtuDiscovery::Do`](crate::MtuDiscovery::Do), a datagram larger than
    /// the known path MTU.
    TooLarge,
    /// The destination is unreachable or refused an earlier datagram (an
    /// ICMP error reported back, no route, network or host down).
    Unreachable,
    /// Not an address this socket can send to (port 0, an address of the
    /// wrong family, one not available here).
    InvalidDestination,
    /// Refused by local policy or resources (a firewall rule, no buffers).
    Denied,
}

/// The refusals of one send call, in storage allocated once: past its
/// capacity (the socket's batch size) refusals are still counted in
/// `send_errors` but no longer listed.
#[derive(Debug, Default)]
pub(crate) struct Refusals(Vec<SendRefusal>);

impl Refusals {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// Lists a refusal if there is room left (never reallocates).
    pub(crate) fn push(&mut self, transmit: usize, reason: RefusalReason) {
        if self.0.len() < self.0.capacity() {
            self.0.push(SendRefusal { transmit, reason });
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Gives the refusals listed from index `from` on the transmit index
    /// `transmit`: for a datagram sent on its own on behalf of that transmit.
    pub(crate) fn relabel_since(&mut self, from: usize, transmit: usize) {
        for refusal in self.0.iter_mut().skip(from) {
            refusal.transmit = transmit;
        }
    }

    pub(crate) fn as_slice(&self) -> &[SendRefusal] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    #[test]
    fn a_run_with_a_short_tail_counts_the_tail_as_a_datagram() {
        let bytes = [0u8; 25];
        let t = Transmit::new(dest(), &bytes).with_segment_size(10);
        assert_eq!(t.datagrams(), 3);
        assert_eq!(t.stride(), 10);
        assert_eq!(t.skip_segments(2).contents.len(), 5);
        assert_eq!(t.skip_segments(9).contents.len(), 0);
    }

    #[test]
    fn a_segment_size_larger_than_the_contents_is_one_datagram() {
        let bytes = [0u8; 5];
        let t = Transmit::new(dest(), &bytes).with_segment_size(10);
        assert_eq!((t.datagrams(), t.stride()), (1, 5));
        assert_eq!(Transmit::new(dest(), &[]).datagrams(), 1);
    }
}
