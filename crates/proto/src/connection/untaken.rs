//! What the peer delivered and the application has not taken yet
//! (messages, datagrams), with its bytes counted as items come and go: the
//! endpoint's memory budget asks what a connection holds after every turn,
//! and a peer may leave hundreds of thousands of small messages waiting,
//! so the answer must not walk them.

use bytes::Bytes;

use super::lazy_deque::LazyDeque;

/// A queue of delivered items, each some bytes and a note `T`.
#[derive(Debug)]
pub(crate) struct Untaken<T> {
    items: LazyDeque<(Bytes, T)>,
    bytes: usize,
}

impl<T> Untaken<T> {
    pub(crate) fn new() -> Self {
        Self {
            items: LazyDeque::new(),
            bytes: 0,
        }
    }

    /// Always inlined: a peer may deliver hundreds of small messages in a
    /// packet, each pushed here.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, data: Bytes, note: T) {
        self.bytes += data.len();
        self.items.push_back((data, note));
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<(Bytes, T)> {
        let item = self.items.pop_front()?;
        self.bytes -= item.0.len();
        Some(item)
    }

    /// The first item, if any, left in place.
    pub(crate) fn front(&self) -> Option<(&Bytes, &T)> {
        self.items.front().map(|(data, note)| (data, note))
    }

    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
    }

    /// Gives the queue's memory back while it is empty.
    pub(crate) fn release_memory(&mut self) {
        self.items.release_if_empty();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The bytes of every item waiting.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_count_follows_what_comes_and_goes() {
        let mut queue = Untaken::new();
        queue.push_back(Bytes::from_static(b"abc"), ());
        queue.push_back(Bytes::from_static(b"de"), ());
        assert_eq!((queue.len(), queue.bytes()), (2, 5));
        assert_eq!(queue.front().map(|(b, ())| b.len()), Some(3));
        assert_eq!(queue.pop_front().map(|(b, ())| b.len()), Some(3));
        assert_eq!(queue.bytes(), 2);
        assert_eq!(queue.front().map(|(b, ())| b.as_ref()), Some(&b"de"[..]));
        queue.clear();
        assert!(queue.front().is_none());
        assert!(queue.is_empty());
        assert_eq!(queue.bytes(), 0);
        assert!(queue.pop_front().is_none());
    }
}
