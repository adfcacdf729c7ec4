//! What the simulator drives: any sans-IO node.

use std::net::SocketAddr;

use quanta::Instant;

/// A datagram (or a run of equal-size datagrams) a node wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The node's own address it leaves from (one of the addresses it was
    /// added with; `None` means its first).
    pub source: Option<SocketAddr>,
    /// Where it goes.
    pub destination: SocketAddr,
    /// Bytes written at the front of the buffer.
    pub len: usize,
    /// With `Some(n)`, the bytes are a run of datagrams of `n` bytes each,
    /// the last possibly shorter (as for UDP segmentation offload).
    pub segment_size: Option<usize>,
}

/// A node in the simulated network: a state machine that never reads a
/// clock, sleeps or touches a socket, so the simulator can run it in
/// virtual time.
///
/// The simulator calls, at the virtual time `now` of each event:
/// 1. [`handle_datagram`](Self::handle_datagram) for a datagram that
///    arrived, or [`handle_timeout`](Self::handle_timeout) when the time
///    [`poll_timeout`](Self::poll_timeout) gave has come;
/// 2. then [`poll_transmit`](Self::poll_transmit) until it returns `None`,
///    sending each datagram onto the links;
/// 3. then [`poll_timeout`](Self::poll_timeout) for the node's next timer.
///
/// A node changed from outside between events (through
/// [`Sim::node_mut`](crate::Sim::node_mut)) is polled the same way at the
/// next step.
pub trait Node {
    /// A datagram arrived at the node's address `local` from `from` (the
    /// sender's address as the network shows it). Writable, so the node
    /// can decrypt it in place.
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        from: SocketAddr,
        datagram: &mut [u8],
    );

    /// The next datagram(s) to send: written into `buf` (65 535 bytes),
    /// described by the returned [`Transmit`].
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;

    /// When the node next wants [`handle_timeout`](Self::handle_timeout).
    fn poll_timeout(&mut self) -> Option<Instant>;

    /// The time from [`poll_timeout`](Self::poll_timeout) has come.
    fn handle_timeout(&mut self, now: Instant);
}
