//! Datagrams the peer sent that the application has not taken: a ring of
//! bounded size that lets the oldest go when full.
//!
//! A peer may send hundreds of empty datagrams in a packet to an
//! application that never reads them, so a full queue is the common case
//! under attack: the newest takes the oldest's slot in place (one write,
//! the head moved), not a removal and an insertion. The ring grows by
//! doubling up to its bound, so a connection that receives a few
//! datagrams holds room for a few; it is boxed, so a connection that
//! receives none pays one pointer; and its bytes are counted as datagrams
//! come and go (the endpoint's memory budget asks after every turn).

use bytes::Bytes;

use super::lazy::{IsEmpty, Lazy};
use super::recv::owned;

/// The slots a ring starts with.
const FIRST_SLOTS: usize = 8;

/// Received datagrams, oldest first, at most a bound of them.
#[derive(Debug, Default)]
pub(crate) struct ReceivedDatagrams(Lazy<Ring>);

#[derive(Debug, Default)]
struct Ring {
    /// The datagrams from `head`, wrapping; the slots not holding one hold
    /// an empty `Bytes`.
    slots: Vec<Bytes>,
    head: usize,
    len: usize,
    /// The bytes of the datagrams held.
    bytes: usize,
    /// Datagrams dropped for newer ones since the last look.
    dropped: u64,
}

impl ReceivedDatagrams {
    /// Queues a copy of `datagram` behind the others, holding at most
    /// `bound` (at least one); returns whether the oldest was dropped for
    /// it. The copy is made only where it is kept: an empty datagram in a
    /// full ring whose oldest is empty too moves the head alone.
    #[inline]
    pub(crate) fn push(&mut self, datagram: &[u8], bound: usize) -> bool {
        self.0.get_or_default().push(datagram, bound.max(1))
    }

    /// Queues `count` empty datagrams behind the others, as `count` calls
    /// of [`push`](Self::push) with an empty one would: a peer may send
    /// hundreds in a packet, which the packet's reader counts and hands
    /// over together.
    pub(crate) fn push_empty(&mut self, count: usize, bound: usize) {
        self.0.get_or_default().push_empty(count, bound.max(1));
    }

    /// How many datagrams were dropped for newer ones since the last
    /// call (counted here, not per datagram in the connection's
    /// statistics: a peer may push out hundreds in a packet).
    pub(crate) fn take_dropped(&mut self) -> u64 {
        self.0
            .get_mut()
            .map_or(0, |ring| std::mem::take(&mut ring.dropped))
    }

    /// The oldest datagram, taken.
    pub(crate) fn pop(&mut self) -> Option<Bytes> {
        self.0.get_mut()?.pop()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.get().map_or(0, |ring| ring.len)
    }

    /// The bytes of every datagram waiting.
    pub(crate) fn bytes(&self) -> usize {
        self.0.get().map_or(0, |ring| ring.bytes)
    }

    /// Drops every datagram and the ring's memory.
    pub(crate) fn clear(&mut self) {
        self.0.release();
    }

    /// Gives the ring's memory back while it is empty.
    pub(crate) fn release_memory(&mut self) {
        self.0.release_if_empty();
    }
}

impl IsEmpty for Ring {
    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Ring {
    #[inline]
    fn push(&mut self, datagram: &[u8], bound: usize) -> bool {
        let size = self.slots.len();
        if self.len < size {
            self.push_unchecked(datagram);
            false
        } else if size < bound {
            self.grow(bound);
            self.push_unchecked(datagram);
            false
        } else {
            let oldest = &mut self.slots[self.head];
            // An empty datagram in an empty one's place changes nothing
            // but the head (a flood of empty ones makes and drops nothing).
            if !(oldest.is_empty() && datagram.is_empty()) {
                self.bytes = self.bytes - oldest.len() + datagram.len();
                *oldest = owned(datagram);
            }
            self.head = wrap(self.head + 1, size);
            self.dropped += 1;
            true
        }
    }

    fn push_empty(&mut self, mut count: usize, bound: usize) {
        while count > 0 && (self.len < self.slots.len() || self.slots.len() < bound) {
            self.push(&[], bound);
            count -= 1;
        }
        // Full: each takes the oldest's place, which only a datagram that
        // was not empty leaves anything to drop in.
        let size = self.slots.len();
        self.dropped += count as u64;
        for _ in 0..count {
            let oldest = &mut self.slots[self.head];
            if !oldest.is_empty() {
                self.bytes -= oldest.len();
                *oldest = Bytes::new();
            }
            self.head = wrap(self.head + 1, size);
        }
    }

    /// Queues `datagram` into a slot known to be free.
    #[inline]
    fn push_unchecked(&mut self, datagram: &[u8]) {
        self.bytes += datagram.len();
        let at = wrap(self.head + self.len, self.slots.len());
        self.slots[at] = owned(datagram);
        self.len += 1;
    }

    /// Doubles the slots, up to `bound`, the oldest first again.
    #[cold]
    fn grow(&mut self, bound: usize) {
        self.slots.rotate_left(self.head);
        self.head = 0;
        let size = (self.slots.len() * 2).clamp(FIRST_SLOTS.min(bound), bound);
        self.slots.resize(size, Bytes::new());
    }

    fn pop(&mut self) -> Option<Bytes> {
        if self.len == 0 {
            return None;
        }
        let oldest = std::mem::take(&mut self.slots[self.head]);
        self.head = wrap(self.head + 1, self.slots.len());
        self.len -= 1;
        self.bytes -= oldest.len();
        Some(oldest)
    }
}

/// `index` within a ring of `size` slots, for an index below twice it.
#[inline]
fn wrap(index: usize, size: usize) -> usize {
    if index >= size { index - size } else { index }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_full_ring_drops_its_oldest_and_counts_bytes() {
        let mut ring = ReceivedDatagrams::default();
        assert_eq!((ring.pop(), ring.bytes()), (None, 0));
        assert!(!ring.push(b"a", 2));
        assert!(!ring.push(b"bb", 2));
        assert!(ring.push(b"ccc", 2));
        assert_eq!((ring.len(), ring.bytes()), (2, 5));
        assert_eq!((ring.take_dropped(), ring.take_dropped()), (1, 0));
        assert_eq!(ring.pop().as_deref(), Some(&b"bb"[..]));
        assert_eq!(ring.pop().as_deref(), Some(&b"ccc"[..]));
        assert_eq!((ring.pop(), ring.bytes()), (None, 0));
        ring.release_memory();
        assert!(
            !ring.0.holds_memory(),
            "an empty ring gives its memory back"
        );
    }

    #[test]
    fn a_bound_of_zero_still_holds_the_newest() {
        let mut ring = ReceivedDatagrams::default();
        assert!(!ring.push(b"a", 0));
        assert!(ring.push(b"b", 0));
        assert_eq!(ring.pop().as_deref(), Some(&b"b"[..]));
    }

    #[test]
    fn a_ring_grows_with_what_it_holds() {
        let mut ring = ReceivedDatagrams::default();
        ring.push(b"", 1024);
        assert_eq!(ring.0.get().map(|r| r.slots.len()), Some(FIRST_SLOTS));
        for _ in 0..2000 {
            ring.push(b"", 1024);
        }
        assert_eq!(ring.0.get().map(|r| r.slots.len()), Some(1024));
        ring.clear();
        assert_eq!((ring.len(), ring.bytes()), (0, 0));
    }

    proptest! {
        /// The ring against a plain queue that drops its front when full:
        /// the same datagrams out, the same drops, the same byte count;
        /// empty datagrams pushed together as one by one.
        #[test]
        fn the_ring_is_a_queue_dropping_its_oldest(
            bound in 0usize..20,
            steps in proptest::collection::vec((0u8..3, 0usize..5), 0..300),
        ) {
            let mut ring = ReceivedDatagrams::default();
            let mut model: VecDeque<Bytes> = VecDeque::new();
            let mut dropped = 0u64;
            for (k, (step, len)) in steps.into_iter().enumerate() {
                match step {
                    0 => {
                        let datagram = Bytes::from(vec![k as u8; len]);
                        let full = model.len() >= bound.max(1);
                        if full {
                            model.pop_front();
                            dropped += 1;
                        }
                        model.push_back(datagram.clone());
                        prop_assert_eq!(ring.push(&datagram, bound), full);
                    }
                    1 => {
                        let count = len * 5;
                        for _ in 0..count {
                            if model.len() >= bound.max(1) {
                                model.pop_front();
                                dropped += 1;
                            }
                            model.push_back(Bytes::new());
                        }
                        ring.push_empty(count, bound);
                    }
                    _ => prop_assert_eq!(ring.pop(), model.pop_front()),
                }
                prop_assert_eq!(ring.len(), model.len());
                prop_assert_eq!(ring.bytes(), model.iter().map(Bytes::len).sum::<usize>());
            }
            prop_assert_eq!(ring.take_dropped(), dropped);
            while let Some(datagram) = model.pop_front() {
                prop_assert_eq!(ring.pop(), Some(datagram));
            }
        }
    }
}
