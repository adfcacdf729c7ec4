//! [`Node`]: the sans-IO contract the endpoint driver runs.
//!
//! [`Endpoint`](crate::Endpoint) (every connection on one socket)
//! implements it; tests and benchmarks implement it with toy nodes. The driver owns the
//! socket, the clock and the buffers; the node owns every decision.

use std::net::SocketAddr;

use quanta::Instant;

/// A protocol state machine that one driver task runs over one UDP socket.
///
/// Inputs are `handle_*`, outputs are `poll_*`; time is always an argument
/// (the driver reads its clock once per loop turn and passes the same `now`
/// to every call of that turn). One turn of the driver calls, in this order:
///
/// 1. [`handle_datagram`](Self::handle_datagram) for each datagram of up to a
///    few receive batches (bounded, so a flood cannot starve timers or sends),
///    then [`handle_send_refused`](Self::handle_send_refused) for each
///    datagram the kernel refused in the previous turn's sends;
/// 2. [`poll_timeout`](Self::poll_timeout), and
///    [`handle_timeout`](Self::handle_timeout) once if that deadline is at or
///    before `now` (asked after the datagrams, which may have moved it, so a
///    node is never woken for a timer it has already cancelled);
///    then, if datagrams arrived, [`wake_receivers`](Self::wake_receivers):
///    when it answers `true` the driver lets the woken tasks run before it
///    goes on (it gives up the node's lock and yields to its runtime once);
/// 3. [`poll_transmit`](Self::poll_transmit) until it returns `None` or the
///    driver's send buffer for this turn is full — so a node must keep what
///    it could not hand out and offer it again on a later turn;
/// 4. [`poll_timeout`](Self::poll_timeout), whose answer arms the driver's
///    timer until the next turn, and
///    [`take_answer_expected`](Self::take_answer_expected) and
///    [`take_exchange_opened`](Self::take_exchange_opened);
/// 5. [`end_turn`](Self::end_turn), once.
///
/// Between turns the driver sleeps until the socket is readable, the timer
/// expires, the socket is writable again (only while sends are pending), or
/// an application handle wakes it. While earlier sends are still waiting for
/// room in the socket, step 3 is skipped: back-pressure reaches the node as
/// `poll_transmit` not being called, never as a dropped datagram.
pub trait Node {
    /// One datagram arrived at `local` from `from`.
    ///
    /// `datagram` is the bytes where the kernel wrote them, writable so a
    /// packet can be decrypted in place. It is hostile input: a node drops
    /// (and counts) what it cannot parse, and never panics on it.
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        from: SocketAddr,
        datagram: &mut [u8],
    );

    /// Writes the next datagram, or run of equal-size datagrams for one
    /// destination, into the front of `buf`.
    ///
    /// `buf` is at least `limits.max_datagram_size` bytes long. A run may
    /// hold up to `limits.max_segments` datagrams, all of
    /// `segment_size` bytes but the last, which may be shorter, none longer
    /// than `limits.max_datagram_size`; the driver sends it with one GSO
    /// message where the socket has GSO. `None` means nothing to send now.
    fn poll_transmit(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit>;

    /// The next time the node wants [`handle_timeout`](Self::handle_timeout)
    /// called; `None` for no timer.
    fn poll_timeout(&mut self) -> Option<Instant>;

    /// The deadline from [`poll_timeout`](Self::poll_timeout) has passed (`now`
    /// is at or after it). Afterwards `poll_timeout` must answer a later
    /// deadline or `None`: a deadline left in the past is asked about again
    /// on every turn.
    fn handle_timeout(&mut self, now: Instant);

    /// The kernel refused a datagram of an earlier transmit to `destination`
    /// for its destination or size alone (it was not sent; the others were).
    /// A path MTU probe learns here at once that it was too large. The
    /// default ignores it, as a lost datagram would be.
    fn handle_send_refused(&mut self, now: Instant, destination: SocketAddr, reason: SendRefused) {
        let _ = (now, destination, reason);
    }

    /// Datagrams of this turn were handled (still under the node's lock). A
    /// node that serves application tasks wakes those waiting for what
    /// arrived and answers whether it woke any: the driver then lets them
    /// run before it transmits, so that an answer they hand over at once
    /// leaves in the same packet as the ACK of what they were answering
    /// (one datagram each way, and one wake-up of the peer, instead of an
    /// ACK alone first). The default wakes nobody.
    fn wake_receivers(&mut self, now: Instant) -> bool {
        let _ = now;
        false
    }

    /// When the soonest acknowledgement of what this turn's transmits sent
    /// is expected: the send time plus the sending connection's smoothed
    /// round trip, for packets that ask for one. Taken by the call (asked
    /// once per turn, after step 4). A driver may poll for it instead of
    /// parking its thread when it is due sooner than a wake-up is worth.
    /// The default: never.
    fn take_answer_expected(&mut self) -> Option<Instant> {
        None
    }

    /// When the soonest answer is expected to an exchange this turn's
    /// transmits opened: a packet that carries application data (stream
    /// bytes, a message, a datagram), sent by a connection that had nothing
    /// in flight before it (a request sent from quiet, not the next packet
    /// of a transfer whose acknowledgements keep arriving). Control frames
    /// alone open none: a bulk receiver sends its flow-control updates from
    /// quiet, and what answers them is the next data, which wakes the
    /// driver anyway. Taken by the call, like
    /// [`take_answer_expected`](Self::take_answer_expected). A driver may
    /// wake ahead of it when it is due later than a poll is worth. The
    /// default: never.
    fn take_exchange_opened(&mut self) -> Option<Instant> {
        None
    }

    /// The turn is over (still under the node's lock). A node that serves
    /// application tasks wakes here those its turn concerned, once per turn
    /// rather than once per datagram. The default does nothing.
    fn end_turn(&mut self, now: Instant) {
        let _ = now;
    }

    /// Whether the node holds nothing more to send or wait for (asked after
    /// [`end_turn`](Self::end_turn)). A driver whose application handles
    /// are all gone keeps running the node until it is idle, so that a
    /// close queued on the way out still leaves; the default says it always
    /// is.
    fn is_idle(&mut self) -> bool {
        true
    }
}

/// What one [`Node::poll_transmit`] call may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransmitLimits {
    /// Most datagrams in one run (the socket's GSO segment limit; 1 without
    /// GSO, then the driver still coalesces single datagrams it can).
    pub max_segments: usize,
    /// Largest UDP payload in bytes of any one datagram.
    pub max_datagram_size: usize,
}

impl TransmitLimits {
    /// Limits of `max_segments` datagrams of at most `max_datagram_size`
    /// bytes (both at least 1).
    pub fn new(max_segments: usize, max_datagram_size: usize) -> Self {
        Self {
            max_segments: max_segments.max(1),
            max_datagram_size: max_datagram_size.max(1),
        }
    }

    /// Most bytes one run may take: `max_segments × max_datagram_size`.
    pub fn max_run_bytes(&self) -> usize {
        self.max_segments.saturating_mul(self.max_datagram_size)
    }
}

/// What [`Node::poll_transmit`] wrote: `len` bytes at the front of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where the datagrams go.
    pub destination: SocketAddr,
    /// Bytes written.
    pub len: usize,
    /// Size in bytes of every datagram but the last when several were
    /// written; `None` for one datagram of `len` bytes.
    pub segment_size: Option<usize>,
    /// The IP time to live (IPv6 hop limit) for these datagrams alone;
    /// `None`, as for all but a NAT-opening punch, keeps the socket's. A
    /// driver keeps a transmit with its own TTL out of runs with others.
    pub ttl: Option<u8>,
}

impl Transmit {
    /// The size of each datagram but the last (all of `len` for one).
    pub fn stride(&self) -> usize {
        match self.segment_size {
            Some(size) if size > 0 && size < self.len => size,
            _ => self.len,
        }
    }

    /// How many datagrams it holds (an empty transmit is one empty datagram).
    pub fn datagrams(&self) -> usize {
        match self.stride() {
            0 => 1,
            stride => self.len.div_ceil(stride),
        }
    }
}

/// Why the kernel refused a datagram (see [`Node::handle_send_refused`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendRefused {
    /// Larger than the path or the socket allows.
    TooLarge,
    /// The destination is unreachable or refused an earlier datagram.
    Unreachable,
    /// Not an address the socket can send to, or refused by local policy.
    Invalid,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    #[test]
    fn a_run_counts_its_short_tail_and_a_single_datagram_is_one() {
        let run = Transmit {
            destination: to(),
            len: 25,
            segment_size: Some(10),
            ttl: None,
        };
        assert_eq!((run.stride(), run.datagrams()), (10, 3));
        let one = Transmit {
            destination: to(),
            len: 7,
            segment_size: None,
            ttl: None,
        };
        assert_eq!((one.stride(), one.datagrams()), (7, 1));
        let empty = Transmit { len: 0, ..one };
        assert_eq!(empty.datagrams(), 1);
        let limits = TransmitLimits::new(0, 1452);
        assert_eq!((limits.max_segments, limits.max_run_bytes()), (1, 1452));
    }
}
