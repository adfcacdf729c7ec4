//! Unreliable datagrams the application queued, until a packet has room:
//! a bounded queue that lets the oldest go when full. A datagram is never
//! re-sent, so one that waited behind a full congestion window (or a peer
//! that acknowledges nothing) is worth less than a newer one, and the
//! application is never made to wait for it — unless it asks to: a
//! sender that would rather wait than drop is told when one left.

use bytes::Bytes;

use super::lazy_deque::LazyDeque;

/// Datagrams to send, at most `capacity` of them.
#[derive(Debug)]
pub(super) struct DatagramQueue {
    queue: LazyDeque<Bytes>,
    /// Their bytes together.
    bytes: usize,
    capacity: usize,
    /// A sender found it full and waits for room.
    wanted: bool,
    /// One left since a sender found it full.
    room_released: bool,
}

impl DatagramQueue {
    /// An empty queue of at most `capacity` datagrams (at least one).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            queue: LazyDeque::new(),
            bytes: 0,
            capacity: capacity.max(1),
            wanted: false,
            room_released: false,
        }
    }

    /// Queues `datagram`; returns whether the oldest was dropped for it.
    pub(super) fn push(&mut self, datagram: Bytes) -> bool {
        let dropped = self.queue.len() >= self.capacity;
        if dropped && let Some(oldest) = self.queue.pop_front() {
            self.bytes -= oldest.len();
        }
        self.bytes += datagram.len();
        self.queue.push_back(datagram);
        dropped
    }

    /// The next datagram to send.
    pub(super) fn front(&self) -> Option<&Bytes> {
        self.queue.front()
    }

    /// How many more datagrams fit before one pushes out the oldest.
    pub(super) fn room(&self) -> usize {
        self.capacity.saturating_sub(self.queue.len())
    }

    /// Whether another datagram would push out the oldest.
    pub(super) fn is_full(&self) -> bool {
        self.queue.len() >= self.capacity
    }

    /// A sender found the queue full and waits: the next one to leave
    /// releases room for it.
    pub(super) fn want_room(&mut self) {
        self.wanted = true;
    }

    /// Whether room was released for a waiting sender since the last look.
    pub(super) fn take_room_released(&mut self) -> bool {
        std::mem::take(&mut self.room_released)
    }

    /// The next datagram went out.
    pub(super) fn pop(&mut self) {
        if let Some(sent) = self.queue.pop_front() {
            self.bytes -= sent.len();
            self.room_released |= std::mem::take(&mut self.wanted);
        }
    }

    /// Drops every datagram queued, and the queue's memory.
    pub(super) fn abandon(&mut self) {
        self.queue.clear();
        self.queue.release_if_empty();
        self.bytes = 0;
    }

    /// Gives the queue's memory back while it is empty.
    pub(super) fn release_memory(&mut self) {
        self.queue.release_if_empty();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Bytes queued.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_its_oldest_and_counts_bytes() {
        let mut queue = DatagramQueue::new(2);
        assert!(!queue.push(Bytes::from_static(b"a")));
        assert_eq!(queue.room(), 1);
        assert!(!queue.push(Bytes::from_static(b"bb")));
        assert_eq!(queue.room(), 0);
        assert!(queue.push(Bytes::from_static(b"ccc")));
        assert_eq!(queue.room(), 0);
        assert_eq!(queue.bytes(), 5);
        assert_eq!(queue.front().map(|d| &d[..]), Some(&b"bb"[..]));
        queue.pop();
        queue.pop();
        assert!(queue.is_empty());
        assert_eq!(queue.room(), 2);
        assert_eq!(queue.bytes(), 0);
        queue.pop();
        assert_eq!(queue.bytes(), 0);
    }

    #[test]
    fn a_waiting_sender_learns_of_room_once_a_datagram_left() {
        let mut queue = DatagramQueue::new(1);
        queue.push(Bytes::from_static(b"a"));
        assert!(queue.is_full());
        queue.want_room();
        assert!(!queue.take_room_released(), "nothing left yet");
        queue.pop();
        assert!(!queue.is_full());
        assert!(queue.take_room_released());
        assert!(!queue.take_room_released(), "told once");
        queue.push(Bytes::from_static(b"b"));
        queue.pop();
        assert!(!queue.take_room_released(), "nobody waited for this one");
    }
}
