//! Whole messages that fit in one packet: each is numbered, sent as one
//! frame, kept until acknowledged, sent again whole if its packet is lost,
//! and delivered exactly once however often it arrives.
//!
//! Messages are independent: each is delivered when it arrives, so a lost
//! one holds back no other (no head-of-line blocking), and no order between
//! them is promised. A message too large for one packet travels on a stream
//! of its own instead, and is delivered whole when its last byte arrives.

use bytes::Bytes;

use super::super::lazy_deque::LazyDeque;
use super::range_set::RangeSet;

pub(crate) mod assembly;

/// How far ahead of the oldest undelivered message a peer may number a
/// message: bounds what the receiver remembers to spot duplicates.
pub(crate) const MESSAGE_WINDOW: u64 = 1 << 16;

/// What a small message counts against the connection's flow-control
/// window on top of its bytes, on both sides: what the receiver spends to
/// hold one until the application takes it. Without it an empty message
/// would cost nothing, and a peer could queue millions of them.
pub(crate) const MESSAGE_CHARGE: u64 = 64;

/// One message held until acknowledged.
#[derive(Debug)]
struct Held {
    /// The message (`None` once acknowledged).
    message: Option<Bytes>,
    /// Its number is in the queue to send: it goes in at most once, so a
    /// loss need not look through the queue to know.
    queued: bool,
}

/// Messages waiting to be sent or acknowledged.
///
/// Every operation is O(1) amortised, however many messages wait: each
/// number enters the queue once when pushed and once per loss, and leaves
/// it once; acknowledged messages leave `held` from the front.
#[derive(Debug, Default)]
pub struct MessageSender {
    /// Number of the first message in `held`.
    base: u64,
    /// Messages not yet acknowledged, by number from `base`.
    held: LazyDeque<Held>,
    /// Numbers to send: new ones and lost ones.
    queue: LazyDeque<u64>,
    /// Messages held, and their bytes.
    held_count: usize,
    held_bytes: usize,
    /// Queue entries and slots looked at: what the tests count as work.
    #[cfg(test)]
    visited: u64,
}

impl MessageSender {
    /// Nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `message`; returns its number.
    pub fn push(&mut self, message: Bytes) -> u64 {
        let id = self.next_id();
        self.held_count += 1;
        self.held_bytes += message.len();
        self.held.push_back(Held {
            message: Some(message),
            queued: true,
        });
        self.queue.push_back(id);
        id
    }

    /// Drops every message held, sent or not; numbering goes on where it
    /// was. For a connection that closed at once and sends no data again.
    pub fn abandon(&mut self) {
        self.base = self.next_id();
        self.held.clear();
        self.queue.clear();
        self.release_memory();
        self.held_count = 0;
        self.held_bytes = 0;
    }

    /// Gives the queues' memory back while nothing is held.
    pub fn release_memory(&mut self) {
        self.held.release_if_empty();
        self.queue.release_if_empty();
    }

    /// The number the next message pushed will get.
    pub fn next_id(&self) -> u64 {
        self.base + self.held.len() as u64
    }

    /// Messages held until acknowledged.
    pub fn held(&self) -> usize {
        self.held_count
    }

    /// Bytes held until acknowledged.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Whether a message waits to be sent.
    pub fn wants_to_send(&self) -> bool {
        !self.queue.is_empty()
    }

    fn index(&self, id: u64) -> Option<usize> {
        usize::try_from(id.checked_sub(self.base)?).ok()
    }

    fn slot_mut(&mut self, id: u64) -> Option<&mut Held> {
        let index = self.index(id)?;
        self.held.get_mut(index)
    }

    /// The next message to put in a packet, if `fits(number, size)` says
    /// so; it then counts as sent. A message that does not fit stays first
    /// in line for the next packet. The bytes are lent, not cloned: a
    /// clone of an application's `Bytes` can allocate.
    pub fn poll(&mut self, fits: impl FnOnce(u64, usize) -> bool) -> Option<(u64, &[u8])> {
        loop {
            let id = *self.queue.front()?;
            #[cfg(test)]
            {
                self.visited += 1;
            }
            let Some(len) = self
                .slot_mut(id)
                .and_then(|slot| slot.message.as_ref())
                .map(Bytes::len)
            else {
                // Acknowledged after it was queued again: nothing to send.
                self.queue.pop_front();
                if let Some(slot) = self.slot_mut(id) {
                    slot.queued = false;
                }
                continue;
            };
            if !fits(id, len) {
                return None;
            }
            self.queue.pop_front();
            let slot = self.slot_mut(id)?;
            slot.queued = false;
            return slot.message.as_deref().map(|m| (id, m));
        }
    }

    /// Message `id` was acknowledged: it is dropped. Returns its size the
    /// first time (0 for a repeated acknowledgement).
    pub fn on_acked(&mut self, id: u64) -> usize {
        let Some(message) = self.slot_mut(id).and_then(|slot| slot.message.take()) else {
            return 0;
        };
        self.held_count -= 1;
        self.held_bytes -= message.len();
        while self.held.front().is_some_and(|slot| slot.message.is_none()) {
            #[cfg(test)]
            {
                self.visited += 1;
            }
            self.held.pop_front();
            self.base += 1;
        }
        message.len()
    }

    /// The oldest message not yet acknowledged (the next one when none is
    /// held): the receiver accepts numbers up to [`MESSAGE_WINDOW`] past it.
    pub fn oldest_unacked(&self) -> u64 {
        self.base
    }

    /// The packet with message `id` was lost: it is sent again, first.
    pub fn on_lost(&mut self, id: u64) {
        if let Some(slot) = self.slot_mut(id)
            && slot.message.is_some()
            && !slot.queued
        {
            slot.queued = true;
            self.queue.push_front(id);
        }
    }
}

/// The peer numbered a message too far ahead of what was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("message {id} is beyond the receive window (oldest missing: {oldest_missing})")]
pub struct MessageWindowError {
    /// The message's number.
    pub id: u64,
    /// The oldest number not yet delivered.
    pub oldest_missing: u64,
}

/// Which messages were delivered, to deliver each once.
///
/// Numbers below `in_order` were all delivered, and only the ones past it
/// are kept as ranges: messages arriving in order (the common case, and a
/// peer's cheapest flood) cost a comparison and an increment each, no
/// search of the ranges.
#[derive(Debug, Default)]
pub struct MessageReceiver {
    /// Every number below it was delivered; it was not.
    in_order: u64,
    /// Numbers past `in_order` delivered out of order.
    delivered: RangeSet,
    duplicates: u64,
}

impl MessageReceiver {
    /// Nothing delivered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Message `id` arrived: whether to deliver it (false for a duplicate).
    #[inline]
    pub fn on_message(&mut self, id: u64) -> Result<bool, MessageWindowError> {
        let oldest_missing = self.in_order;
        if id >= oldest_missing.saturating_add(MESSAGE_WINDOW) {
            return Err(MessageWindowError { id, oldest_missing });
        }
        if id == self.in_order {
            self.in_order += 1;
            if !self.delivered.is_empty() {
                self.absorb_ranges();
            }
            return Ok(true);
        }
        if id < self.in_order || self.delivered.contains(id..id + 1) {
            self.duplicates += 1;
            return Ok(false);
        }
        self.delivered.insert(id..id + 1);
        Ok(true)
    }

    /// The numbers delivered out of order that now follow `in_order`
    /// join it.
    fn absorb_ranges(&mut self) {
        if let Some(first) = self.delivered.first()
            && first.start == self.in_order
        {
            self.delivered.pop_front(u64::MAX);
            self.in_order = first.end;
        }
    }

    /// Duplicates seen (and dropped).
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
}

#[cfg(test)]
mod sender_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_message_that_does_not_fit_waits_first_in_line() {
        let mut tx = MessageSender::new();
        tx.push(Bytes::from_static(&[1; 100]));
        tx.push(Bytes::from_static(&[2; 10]));
        assert_eq!(tx.poll(|_, len| len <= 50), None);
        let (id, m) = tx.poll(|_, len| len <= 100).expect("fits now");
        assert_eq!((id, m.len()), (0, 100));
        tx.on_lost(0);
        assert_eq!(
            tx.poll(|_, _| true).map(|(id, _)| id),
            Some(0),
            "the lost one goes first"
        );
        assert_eq!(tx.poll(|_, _| true).map(|(id, _)| id), Some(1));
        tx.on_acked(1);
        tx.on_acked(0);
        assert_eq!((tx.held(), tx.held_bytes()), (0, 0));
        tx.on_lost(0);
        assert!(
            !tx.wants_to_send(),
            "an acknowledged message is never resent"
        );
    }

    #[test]
    fn the_window_moves_once_a_gap_fills() {
        let mut rx = MessageReceiver::new();
        for id in [1, 2, 4, 3] {
            assert_eq!(rx.on_message(id), Ok(true));
        }
        assert_eq!(
            rx.on_message(MESSAGE_WINDOW).map_err(|e| e.oldest_missing),
            Err(0)
        );
        assert_eq!(rx.on_message(0), Ok(true));
        assert_eq!(rx.on_message(MESSAGE_WINDOW + 4), Ok(true));
        assert_eq!(
            rx.on_message(MESSAGE_WINDOW + 5)
                .map_err(|e| e.oldest_missing),
            Err(5)
        );
        for id in [0, 3, 4, MESSAGE_WINDOW + 4] {
            assert_eq!(rx.on_message(id), Ok(false), "{id} again");
        }
        assert_eq!(rx.duplicates(), 4);
    }

    #[test]
    fn a_message_numbered_past_the_window_is_refused() {
        let mut rx = MessageReceiver::new();
        assert_eq!(rx.on_message(MESSAGE_WINDOW - 1), Ok(true));
        assert!(rx.on_message(MESSAGE_WINDOW).is_err());
        assert_eq!(
            rx.on_message(u64::MAX).map_err(|e| e.oldest_missing),
            Err(0)
        );
    }

    proptest! {
        /// Loss, duplication and reordering of packets: every message is
        /// delivered exactly once, and nothing stays held.
        #[test]
        fn every_message_is_delivered_exactly_once(
            count in 0usize..200,
            script in proptest::collection::vec((0u8..4, any::<usize>()), 0..600),
        ) {
            let mut tx = MessageSender::new();
            let mut rx = MessageReceiver::new();
            for i in 0..count {
                tx.push(Bytes::from(vec![i as u8; i % 37]));
            }
            let mut flight: Vec<(u64, Bytes)> = Vec::new();
            let mut delivered = vec![0u32; count];
            let finale = std::iter::repeat_n((0u8, 0usize), 4 * count + 10).chain(std::iter::repeat_n((1, 0), 4 * count + 10));
            for (action, pick) in script.into_iter().chain(finale) {
                match action {
                    0 => flight.extend(tx.poll(|_, _| true).map(|(id, m)| (id, Bytes::copy_from_slice(m)))),
                    1 | 2 if !flight.is_empty() => {
                        let (id, m) = flight.remove(pick % flight.len());
                        prop_assert_eq!(m.len(), id as usize % 37);
                        let times = if action == 2 { 2 } else { 1 };
                        for _ in 0..times {
                            if rx.on_message(id).map_err(|e| TestCaseError::fail(e.to_string()))? {
                                delivered[id as usize] += 1;
                            }
                        }
                        tx.on_acked(id);
                    }
                    3 if !flight.is_empty() => {
                        let (id, _) = flight.remove(pick % flight.len());
                        tx.on_lost(id);
                    }
                    _ => {}
                }
            }
            prop_assert!(delivered.iter().all(|d| *d == 1), "{:?}", delivered);
            prop_assert_eq!(tx.held(), 0);
        }
    }
}
