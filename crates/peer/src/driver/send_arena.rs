//! The send arena: one buffer the node writes a turn's datagrams into, and
//! the runs it wrote, coalesced into GSO transmits and kept until the socket
//! has taken all of them.

use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use tern_sockio::{RefusalReason, Sent, UdpSocket};

use crate::proto::{Instant, Node, SendRefused, TransmitLimits};

/// A run of equal-size datagrams (the last may be shorter) for one
/// destination, at `start..start + len` of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    destination: SocketAddr,
    start: usize,
    len: usize,
    stride: usize,
    segments: usize,
    /// The datagrams' own time to live; a run with one is never extended
    /// and never extends another.
    ttl: Option<u8>,
}

impl Run {
    /// Whether every datagram is `stride` bytes (no short tail) and none
    /// has its own TTL, so one more datagram of at most `stride` bytes may
    /// follow in the same run.
    fn extendable(&self) -> bool {
        self.stride > 0 && self.len == self.stride * self.segments && self.ttl.is_none()
    }
}

/// How a [`SendArena::fill`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Filled {
    /// The node had nothing more to send.
    Drained,
    /// The arena is full; the node may have more.
    Full,
}

/// One turn's outgoing datagrams, allocated once.
///
/// The node writes into `buf` back to back; each [`crate::proto::Transmit`]
/// becomes a run, merged into the run before it when it continues it (same
/// destination, same segment size, within the socket's segment limit), so
/// that the socket sends it as one GSO message. Nothing is gathered again
/// until every run has been sent: when the socket is full, the rest waits
/// here for writability and the node is not asked for more.
pub(crate) struct SendArena {
    buf: Box<[u8]>,
    runs: Vec<Run>,
    /// The first run not yet sent whole.
    front: usize,
    /// Datagrams of `runs[front]` already sent.
    front_segments: usize,
    /// Bytes of `buf` in use.
    written: usize,
    max_datagrams: usize,
    max_datagram_size: usize,
    /// The transmit list handed to the socket, rebuilt from `runs` for each
    /// send; kept empty between sends so that its storage is reused.
    transmits: Vec<tern_sockio::Transmit<'static>>,
    /// Refusals of the last send, for the node on the next turn.
    refused: Vec<(SocketAddr, SendRefused)>,
}

impl SendArena {
    /// Room for `max_datagrams` datagrams of `max_datagram_size` bytes.
    pub(crate) fn new(max_datagrams: usize, max_datagram_size: usize) -> Self {
        let max_datagrams = max_datagrams.max(1);
        let max_datagram_size = max_datagram_size.max(1);
        Self {
            buf: vec![0; max_datagrams.saturating_mul(max_datagram_size)].into_boxed_slice(),
            runs: Vec::with_capacity(max_datagrams),
            front: 0,
            front_segments: 0,
            written: 0,
            max_datagrams,
            max_datagram_size,
            transmits: Vec::with_capacity(max_datagrams),
            refused: Vec::with_capacity(max_datagrams),
        }
    }

    /// Whether everything gathered has been sent.
    pub(crate) fn is_empty(&self) -> bool {
        self.front >= self.runs.len()
    }

    /// Asks the node for transmits until it has none or the arena is full;
    /// runs hold at most `max_segments` datagrams. Returns how it ended and
    /// the datagrams gathered. Call only when [`is_empty`](Self::is_empty).
    pub(crate) fn fill(
        &mut self,
        node: &mut impl Node,
        now: Instant,
        max_segments: usize,
    ) -> (Filled, usize) {
        self.clear();
        let max_segments = max_segments.max(1);
        let mut datagrams = 0;
        while datagrams < self.max_datagrams {
            let limits = TransmitLimits::new(
                max_segments.min(self.max_datagrams - datagrams),
                self.max_datagram_size,
            );
            let room = (self.buf.len() - self.written).min(limits.max_run_bytes());
            let slice = &mut self.buf[self.written..self.written + room];
            let Some(transmit) = node.poll_transmit(now, limits, slice) else {
                return (Filled::Drained, datagrams);
            };
            // A node that claims more than it was given is held to its buffer.
            let len = transmit.len.min(room);
            let stride = match transmit.segment_size {
                Some(size) if size > 0 && size < len => size,
                _ => len,
            };
            let segments = if stride == 0 { 1 } else { len.div_ceil(stride) };
            let run = Run {
                destination: transmit.destination,
                start: self.written,
                len,
                stride,
                segments,
                ttl: transmit.ttl,
            };
            match self.runs.last_mut() {
                Some(last)
                    if last.destination == run.destination
                        && last.extendable()
                        && run.len > 0
                        && run.ttl.is_none()
                        && (run.stride == last.stride
                            || (run.segments == 1 && run.len <= last.stride))
                        && last.segments + run.segments <= max_segments =>
                {
                    last.len += run.len;
                    last.segments += run.segments;
                }
                _ => self.runs.push(run),
            }
            self.written += len;
            datagrams += segments;
        }
        (Filled::Full, datagrams)
    }

    /// Sends what is left without waiting; `Ok(false)` if the socket was
    /// full before everything went out.
    pub(crate) fn try_send(&mut self, socket: &mut UdpSocket) -> io::Result<bool> {
        if self.is_empty() {
            return Ok(true);
        }
        match self.with_transmits(|t| socket.try_send(t)) {
            Ok(sent) => {
                self.advance(sent, socket);
                Ok(self.is_empty())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sends what is left, waiting for room; ready once the socket took some.
    pub(crate) fn poll_send(
        &mut self,
        socket: &mut UdpSocket,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let sent = match self.with_transmits(|t| socket.poll_send(cx, t)) {
            Poll::Ready(Ok(sent)) => sent,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        self.advance(sent, socket);
        Poll::Ready(Ok(()))
    }

    /// What the kernel refused since the last call, for the node.
    pub(crate) fn take_refused(&mut self) -> impl Iterator<Item = (SocketAddr, SendRefused)> + '_ {
        self.refused.drain(..)
    }

    /// Calls `f` with the unsent runs as tern-sockio transmits. The list's
    /// storage is the arena's own, reused from call to call.
    fn with_transmits<R>(&mut self, f: impl FnOnce(&[tern_sockio::Transmit<'_>]) -> R) -> R {
        let mut transmits: Vec<tern_sockio::Transmit<'_>> = std::mem::take(&mut self.transmits);
        for (i, run) in self.runs[self.front..].iter().enumerate() {
            let bytes = &self.buf[run.start..run.start + run.len];
            let mut transmit = tern_sockio::Transmit::new(run.destination, bytes);
            if run.segments > 1 {
                transmit = transmit.with_segment_size(run.stride);
            }
            if let Some(ttl) = run.ttl {
                transmit = transmit.with_ttl(ttl);
            }
            if i == 0 && self.front_segments > 0 {
                transmit = transmit.skip_segments(self.front_segments);
            }
            transmits.push(transmit);
        }
        let result = f(&transmits);
        transmits.clear();
        // An empty list of borrowed transmits becomes an empty list of
        // 'static ones: the same type but for the lifetime, so the collect
        // happens in place and the storage is kept.
        #[expect(
            clippy::unnecessary_filter_map,
            reason = "`filter` would keep the borrowed lifetime; this changes it"
        )]
        let recycled = transmits.into_iter().filter_map(|_| None).collect();
        self.transmits = recycled;
        result
    }

    /// Moves past what `sent` says went out and notes what the socket refused.
    fn advance(&mut self, sent: Sent, socket: &UdpSocket) {
        for refusal in socket.refusals() {
            if let Some(run) = self.runs.get(self.front + refusal.transmit) {
                let reason = match refusal.reason {
                    RefusalReason::TooLarge => SendRefused::TooLarge,
                    RefusalReason::Unreachable => SendRefused::Unreachable,
                    _ => SendRefused::Invalid,
                };
                if self.refused.len() < self.refused.capacity() {
                    self.refused.push((run.destination, reason));
                }
            }
        }
        self.skip(sent.transmits, sent.segments);
    }

    /// Marks `transmits` whole runs from the front, then `segments` datagrams
    /// of the next, as sent.
    fn skip(&mut self, transmits: usize, segments: usize) {
        if transmits > 0 {
            self.front += transmits;
            self.front_segments = 0;
        }
        self.front_segments += segments;
        if self.is_empty() {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.front = 0;
        self.front_segments = 0;
        self.written = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Transmit;

    /// Writes the queued (destination, length) datagrams one per call.
    struct Queue(Vec<(SocketAddr, usize)>, usize);

    impl Node for Queue {
        fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {}

        fn poll_transmit(
            &mut self,
            _: Instant,
            limits: TransmitLimits,
            buf: &mut [u8],
        ) -> Option<Transmit> {
            let (destination, len) = *self.0.get(self.1)?;
            assert!(len <= limits.max_datagram_size && len <= buf.len());
            buf[..len].fill(self.1 as u8);
            self.1 += 1;
            Some(Transmit {
                destination,
                len,
                segment_size: None,
                ttl: None,
            })
        }

        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }

        fn handle_timeout(&mut self, _: Instant) {}
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn shape(arena: &SendArena) -> Vec<(u16, usize, usize)> {
        arena
            .runs
            .iter()
            .map(|r| (r.destination.port(), r.stride, r.segments))
            .collect()
    }

    #[test]
    fn consecutive_equal_datagrams_to_one_peer_become_one_run_up_to_the_segment_limit() {
        let mut node = Queue(
            vec![
                (addr(1), 100),
                (addr(1), 100),
                (addr(1), 100),
                (addr(1), 40), // a short tail ends the run
                (addr(1), 100),
                (addr(2), 100), // another peer starts another
                (addr(2), 100),
                (addr(2), 100),
            ],
            0,
        );
        let mut arena = SendArena::new(16, 100);
        let now = quanta::Clock::mock().0.now();
        assert_eq!(arena.fill(&mut node, now, 2), (Filled::Drained, 8));
        assert_eq!(
            shape(&arena),
            [
                (1, 100, 2),
                (1, 100, 2),
                (1, 100, 1),
                (2, 100, 2),
                (2, 100, 1)
            ]
        );
        // Contents stay where the node wrote them, in order.
        let run = arena.runs[1];
        assert_eq!(run.len, 140);
        assert_eq!(arena.buf[run.start], 2);
        assert_eq!(arena.buf[run.start + 100], 3);
    }

    /// The queue's datagram number `.1` with TTL 2, as a NAT-opening punch.
    struct WithTtl(Queue, usize);

    impl Node for WithTtl {
        fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {}

        fn poll_transmit(
            &mut self,
            now: Instant,
            limits: TransmitLimits,
            buf: &mut [u8],
        ) -> Option<Transmit> {
            let marked = self.0.1 == self.1;
            let transmit = self.0.poll_transmit(now, limits, buf)?;
            Some(Transmit {
                ttl: marked.then_some(2),
                ..transmit
            })
        }

        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }

        fn handle_timeout(&mut self, _: Instant) {}
    }

    #[test]
    fn a_datagram_with_its_own_ttl_runs_alone_and_keeps_it() {
        let mut node = WithTtl(Queue(vec![(addr(1), 100); 5], 0), 2);
        let mut arena = SendArena::new(16, 100);
        let now = quanta::Clock::mock().0.now();
        assert_eq!(arena.fill(&mut node, now, 64), (Filled::Drained, 5));
        assert_eq!(shape(&arena), [(1, 100, 2), (1, 100, 1), (1, 100, 2)]);
        let ttls = arena.with_transmits(|t| t.iter().map(|t| t.ttl).collect::<Vec<_>>());
        assert_eq!(ttls, [None, Some(2), None]);
    }

    #[test]
    fn a_full_arena_stops_asking_and_progress_resumes_inside_a_run() {
        let mut node = Queue(vec![(addr(1), 10); 10], 0);
        let mut arena = SendArena::new(4, 10);
        let now = quanta::Clock::mock().0.now();
        assert_eq!(arena.fill(&mut node, now, 64), (Filled::Full, 4));
        assert_eq!(shape(&arena), [(1, 10, 4)]);
        // The socket took three datagrams of the run: one is left.
        arena.skip(0, 3);
        assert!(!arena.is_empty());
        let left = arena.with_transmits(|t| (t.len(), t[0].datagrams(), t[0].contents[0]));
        assert_eq!(left, (1, 1, 3));
        arena.skip(1, 0);
        assert!(arena.is_empty());
        // The node kept what did not fit and offers it on the next fill.
        assert_eq!(arena.fill(&mut node, now, 64), (Filled::Full, 4));
        assert_eq!(arena.buf[0], 4);
    }

    #[test]
    fn the_transmit_list_keeps_its_storage_from_send_to_send() {
        let mut node = Queue(vec![(addr(1), 10), (addr(2), 10), (addr(3), 10)], 0);
        let mut arena = SendArena::new(4, 10);
        let now = quanta::Clock::mock().0.now();
        arena.fill(&mut node, now, 64);
        let before = arena.transmits.as_ptr();
        let count = arena.with_transmits(|t| t.len());
        assert_eq!(count, 3);
        assert_eq!(arena.transmits.as_ptr(), before);
        assert!(arena.transmits.capacity() >= 4);
    }

    /// Writes scripted transmits: (peer, datagram size, datagrams), each
    /// datagram filled with its own number; a run's last datagram is cut
    /// short when the script says so. Keeps within the limits it is given.
    struct Script {
        steps: Vec<(u16, usize, usize, bool)>,
        next: usize,
        numbered: u8,
        written: Vec<(SocketAddr, Vec<u8>)>,
    }

    impl Node for Script {
        fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {}

        fn poll_transmit(
            &mut self,
            _: Instant,
            limits: TransmitLimits,
            buf: &mut [u8],
        ) -> Option<Transmit> {
            let (peer, size, count, short_tail) = *self.steps.get(self.next)?;
            self.next += 1;
            let size = size.min(limits.max_datagram_size);
            let count = count
                .min(limits.max_segments)
                .min(buf.len() / size.max(1))
                .max(1);
            let mut len = 0;
            for k in 0..count {
                // A tail of nothing cannot be told from no tail at all.
                let this = if short_tail && k + 1 == count && count > 1 && size > 1 {
                    size / 2
                } else {
                    size
                };
                buf[len..len + this].fill(self.numbered);
                self.written
                    .push((addr(peer), buf[len..len + this].to_vec()));
                self.numbered = self.numbered.wrapping_add(1);
                len += this;
            }
            Some(Transmit {
                destination: addr(peer),
                len,
                segment_size: (count > 1).then_some(size),
                ttl: None,
            })
        }

        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }

        fn handle_timeout(&mut self, _: Instant) {}
    }

    /// The datagrams the socket would put on the wire for what is left.
    fn on_the_wire(arena: &mut SendArena) -> Vec<(SocketAddr, Vec<u8>)> {
        arena.with_transmits(|transmits| {
            transmits
                .iter()
                .flat_map(|t| {
                    let stride = t.stride().max(1);
                    let chunks: Vec<&[u8]> = if t.contents.is_empty() {
                        vec![&[][..]]
                    } else {
                        t.contents.chunks(stride).collect()
                    };
                    chunks.into_iter().map(move |c| (t.destination, c.to_vec()))
                })
                .collect()
        })
    }

    proptest::proptest! {
        #[test]
        fn runs_carry_exactly_the_datagrams_the_node_wrote_in_order_and_within_gso_rules(
            steps in proptest::collection::vec((1u16..4, 1usize..40, 1usize..6, proptest::bool::ANY), 0..60),
            max_segments in 1usize..8,
            max_datagrams in 1usize..40,
            progress in (0usize..60, 0usize..8),
        ) {
            let mut node = Script { steps, next: 0, numbered: 0, written: Vec::new() };
            let mut arena = SendArena::new(max_datagrams, 32);
            let now = quanta::Clock::mock().0.now();
            let (filled, datagrams) = arena.fill(&mut node, now, max_segments);
            proptest::prop_assert_eq!(datagrams, node.written.len());
            proptest::prop_assert!(datagrams <= max_datagrams);
            proptest::prop_assert!(filled == Filled::Drained || datagrams == max_datagrams);
            for run in &arena.runs {
                proptest::prop_assert!(run.segments >= 1 && run.segments <= max_segments);
                proptest::prop_assert!(run.len <= run.stride * run.segments);
                proptest::prop_assert!(run.len > run.stride * (run.segments - 1) || run.segments == 1);
            }
            let wire = on_the_wire(&mut arena);
            proptest::prop_assert_eq!(&wire, &node.written);
            // After any progress the socket reports, what is left is
            // exactly the rest, nothing lost or repeated.
            let runs = arena.runs.len();
            let transmits = progress.0.min(runs);
            let segments = match arena.runs.get(transmits) {
                Some(run) => progress.1.min(run.segments - 1),
                None => 0,
            };
            let done: usize = arena.runs[..transmits].iter().map(|r| r.segments).sum::<usize>() + segments;
            arena.skip(transmits, segments);
            proptest::prop_assert_eq!(on_the_wire(&mut arena), node.written[done..].to_vec());
        }
    }
}
