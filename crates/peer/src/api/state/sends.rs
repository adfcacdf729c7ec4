//! The lock's side of messages and datagrams handed off
//! ([`DriverHandle::hand_off`](crate::driver::DriverHandle::hand_off)):
//! a `send` or `send_datagram` that finds the endpoint's lock held hands
//! its message or datagram over in a command and returns, within the
//! connection's [`SendCredits`]; whoever takes the lock next gives it to
//! the protocol.
//!
//! Only what fits a packet is handed off (a larger message travels on a
//! stream of its own, which the protocol may refuse for want of streams),
//! and a message only within the peer's `max_message_size` as last seen
//! (a peer announces it by the handshake's end, so that it only changes
//! before a connection is handed to the application). Messages are
//! granted the room the protocol's message send buffer had, datagrams the
//! room in its datagram send queue. Calls that take the lock can still
//! use up that room before a command runs: a message that then finds none
//! is *parked*, sent in order once the peer's acknowledgements free room
//! (`MessagesWritable`), and the connection's messages get no credit
//! meanwhile, so that later sends take the lock and wait behind it, and a
//! graceful close or release of the connection waits too; a datagram
//! pushes out the oldest, counted as the protocol counts every such drop
//! (without a race a handed-off datagram never does: `send_datagram`
//! drops only under the lock, where `stats()` shows it at once). A
//! handed-off send that meets the connection's end is let go: the next
//! call, which gets no credit, takes the lock and learns why.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::credit::Credit;
use super::{EndpointState, Slot, SlotId};
use crate::api::published::Published;
use crate::proto::{Connection as ProtoConnection, ConnectionHandle, Instant, SendError};

/// How far the handles of a connection may hand off messages and
/// datagrams, shared by them and the lock's side in the connection's
/// [`Published`].
#[derive(Debug, Default)]
pub(crate) struct SendCredits {
    /// Bytes of messages.
    messages: Credit,
    /// The largest message that may be handed off (0 until granted).
    largest_message: AtomicU64,
    /// Datagrams.
    datagrams: Credit,
    /// The largest datagram that may be handed off (0 until granted).
    largest_datagram: AtomicU64,
}

impl SendCredits {
    /// Reserves room to hand off a message of `len` bytes; whether there
    /// was.
    pub(crate) fn take_message(&self, len: usize) -> bool {
        len as u64 <= self.largest_message.load(Ordering::Acquire)
            && self.messages.take(len as u64, false) > 0
    }

    /// Reserves room to hand off a datagram of `len` bytes; whether there
    /// was.
    pub(crate) fn take_datagram(&self, len: usize) -> bool {
        len as u64 <= self.largest_datagram.load(Ordering::Acquire)
            && self.datagrams.take(1, false) > 0
    }
}

/// What the lock's side keeps of a connection's messages and datagrams
/// sent without its lock.
#[derive(Debug)]
pub(crate) struct Sends {
    /// What the handles read, with the credits they send within.
    published: Arc<Published>,
    /// Bytes of handed-off messages taken in all: given to the protocol,
    /// parked, or let go with the connection.
    messages_taken: u64,
    /// Handed-off datagrams taken in all.
    datagrams_taken: u64,
    /// Messages the protocol had no room for when their command ran, in
    /// order.
    parked: VecDeque<Bytes>,
    /// The connection no longer sends: no more credit.
    ended: bool,
}

impl Sends {
    fn new(published: Arc<Published>) -> Self {
        Self {
            published,
            messages_taken: 0,
            datagrams_taken: 0,
            parked: VecDeque::new(),
            ended: false,
        }
    }

    /// Grants the credit the protocol's room allows now: no message credit
    /// while messages are parked, none at all once the connection is gone.
    fn regrant(&self, connection: Option<&ProtoConnection>) {
        let credits = self.published.credits();
        let Some(connection) = connection.filter(|_| !self.ended) else {
            credits.messages.revoke();
            credits.datagrams.revoke();
            return;
        };
        let small = connection.max_datagram_size() as u64;
        if self.parked.is_empty() {
            let room = connection.message_send_room() as u64;
            credits.messages.grant(self.messages_taken + room);
            let largest = small.min(connection.peer_max_message_size());
            credits.largest_message.store(largest, Ordering::Release);
        } else {
            credits.messages.revoke();
        }
        let room = connection.datagram_send_room() as u64;
        credits.datagrams.grant(self.datagrams_taken + room);
        credits.largest_datagram.store(small, Ordering::Release);
    }

    /// Sends the parked messages while the protocol takes them.
    fn flush(&mut self, connection: &mut ProtoConnection) {
        while let Some(message) = self.parked.pop_front() {
            match connection.send_message(message) {
                Ok(()) => {}
                Err(SendError::Blocked(back)) => {
                    self.parked.push_front(back);
                    return;
                }
                // The connection is over: the next call learns why.
                Err(_) => self.end(),
            }
        }
    }

    /// The connection is over: nothing parked will be sent, and no more
    /// credit is granted.
    fn end(&mut self) {
        self.parked.clear();
        self.ended = true;
        let credits = self.published.credits();
        credits.messages.revoke();
        credits.datagrams.revoke();
    }
}

impl Slot {
    /// The connection's record of sends without the lock, made on first
    /// use.
    fn sends(&mut self) -> &mut Sends {
        let published = &self.published;
        self.sends
            .get_or_insert_with(|| Box::new(Sends::new(Arc::clone(published))))
    }

    /// A call under the lock sent a message or datagram: the handles are
    /// granted the room left.
    pub(crate) fn sent(&mut self, connection: &ProtoConnection) {
        self.sends().regrant(Some(connection));
    }

    /// Whether messages wait for room: a send under the lock waits behind
    /// them.
    pub(crate) fn has_parked_messages(&self) -> bool {
        self.sends.as_ref().is_some_and(|s| !s.parked.is_empty())
    }

    /// The connection is over: parked messages go, and no more credit.
    pub(crate) fn end_sends(&mut self) {
        if let Some(sends) = &mut self.sends {
            sends.end();
        }
    }

    /// The message send buffer has room again: parked messages go, and
    /// the handles are granted what room is left.
    fn on_messages_writable(&mut self, connection: Option<&mut ProtoConnection>) {
        let Some(sends) = &mut self.sends else {
            return;
        };
        match connection {
            Some(connection) => {
                sends.flush(connection);
                sends.regrant(Some(connection));
            }
            None => sends.end(),
        }
    }
}

impl EndpointState {
    /// The message send buffer of the connection of `handle` (slot `id`)
    /// has room again: its parked messages go, and what waited for them
    /// follows.
    pub(crate) fn on_messages_writable(
        &mut self,
        now: Instant,
        handle: ConnectionHandle,
        id: SlotId,
    ) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        slot.on_messages_writable(self.proto.connection(handle));
        self.run_deferred_if_flushed(now, handle, id);
    }

    /// Runs a `send` of `message` on the connection of `slot` that a handle
    /// handed off: sent, or parked while the protocol has no room.
    pub(crate) fn send_handed_off(&mut self, slot: SlotId, message: Bytes) {
        let Some((slot, mut connection)) = self.connection(slot) else {
            return;
        };
        let sends = slot.sends();
        sends.messages_taken += message.len() as u64;
        match connection.as_deref_mut() {
            Some(connection) if sends.parked.is_empty() => match connection.send_message(message) {
                Ok(()) => {}
                Err(SendError::Blocked(back)) => sends.parked.push_back(back),
                Err(_) => sends.end(),
            },
            Some(_) => sends.parked.push_back(message),
            None => sends.end(),
        }
        sends.regrant(connection.as_deref());
        slot.publish_if_watched(connection.as_deref());
    }

    /// Runs a `send_datagram` of `datagram` on the connection of `slot`
    /// that a handle handed off.
    pub(crate) fn send_datagram_handed_off(&mut self, slot: SlotId, datagram: Bytes) {
        let Some((slot, mut connection)) = self.connection(slot) else {
            return;
        };
        let sends = slot.sends();
        sends.datagrams_taken += 1;
        let queued = connection
            .as_deref_mut()
            .map(|connection| connection.send_datagram(datagram));
        if !matches!(queued, Some(Ok(()))) {
            sends.end();
        }
        sends.regrant(connection.as_deref());
        slot.publish_if_watched(connection.as_deref());
    }
}
