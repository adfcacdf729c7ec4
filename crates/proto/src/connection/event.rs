//! What the application is told about a connection: its [`Event`]s, which
//! the connection queues once per kind until they are taken.

use super::lazy_deque::LazyDeque;

#[cfg(doc)]
use super::Connection;
use super::error::ConnectionError;
use crate::{ConnectionHandle, StreamId};
use tern_wire::{KeyFingerprint, RefusalReason};

/// Something the application should know about; drained with
/// [`Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake finished: data flows.
    Connected,
    /// A whole message arrived ([`Connection::recv_message`]).
    MessageReceived,
    /// A datagram arrived ([`Connection::recv_datagram`]).
    DatagramReceived,
    /// The peer opened a stream ([`Connection::accept_stream`],
    /// [`Connection::accept_uni`]).
    StreamOpened,
    /// A stream has bytes to read, ended, or was reset by the peer.
    StreamReadable(StreamId),
    /// A stream whose last write took less than it was given has room
    /// again, the peer asked it to stop, or its sending half is done with
    /// ([`Connection::stopped`]).
    StreamWritable(StreamId),
    /// Messages were acknowledged, or the peer allows more large ones:
    /// `send_message` has room again.
    MessagesWritable,
    /// A datagram left the full send queue that
    /// [`Connection::try_send_datagram`] found.
    DatagramsWritable,
    /// The peer reported another address for this side
    /// ([`Connection::observed_address`]): the first report, or a new NAT
    /// mapping.
    ObservedAddressChanged,
    /// The peer allows more application streams: `open_stream` or
    /// `open_uni` may succeed.
    StreamsAvailable,
    /// The connection ended for the application: closed by either side,
    /// timed out, or failed. After a local close the endpoint still holds
    /// it for its closing period, repeating the Close to a peer that still
    /// sends; [`Connection::is_closed`](crate::Connection::is_closed) says
    /// when nothing more is sent.
    Closed(ConnectionError),
    /// On a connection to a rendezvous: the peer asked for with
    /// [`Endpoint::connect_via`](crate::Endpoint::connect_via) is
    /// connected on `connection`, having proved its key.
    Introduced {
        /// The peer's key fingerprint.
        peer: KeyFingerprint,
        /// The connection to it.
        connection: ConnectionHandle,
    },
    /// On a connection to a rendezvous: the introduction to `peer` ended
    /// without a connection: refused by the rendezvous (`reason`), or no
    /// connect completed (`None`).
    IntroductionFailed {
        /// The peer's key fingerprint.
        peer: KeyFingerprint,
        /// The rendezvous's refusal, if it refused.
        reason: Option<RefusalReason>,
    },
}

/// The events waiting for the application, each queued once until it is
/// taken. Whether one already waits is known at a constant cost, however
/// many the queue holds (a peer that opens and resets a hundred streams
/// queues a hundred): a bit per kind for the kinds without a payload,
/// and the stream itself for its [`Event::StreamReadable`] (its receiving
/// half remembers, see [`Events::push_new`]). The rest are rare and
/// looked for along the queue.
#[derive(Debug, Default)]
pub(super) struct Events {
    queue: LazyDeque<Event>,
    /// A bit per kind without a payload that waits in `queue`.
    kinds: u16,
}

impl Events {
    /// Queues `event` unless one like it waits already. Inlined: for an
    /// event the caller names, whether it waits is one test of a bit (a
    /// peer may make one per frame, hundreds per packet).
    #[inline(always)]
    pub(super) fn push(&mut self, event: Event) {
        let bit = kind_bit(&event);
        if bit.is_some_and(|bit| self.kinds & bit != 0) {
            return;
        }
        self.queue_unless_waiting(event, bit);
    }

    /// [`Events::push`] for an event not known to wait: its kind's bit, or
    /// a look along the queue for the kinds with a payload.
    fn queue_unless_waiting(&mut self, event: Event, bit: Option<u16>) {
        match bit {
            Some(bit) => self.kinds |= bit,
            None if self.queue.contains(&event) => return,
            None => {}
        }
        self.queue.push_back(event);
    }

    /// Queues `event`, which the caller knows is not waiting (a stream's
    /// readable event, which its stream remembers queuing).
    pub(super) fn push_new(&mut self, event: Event) {
        self.queue.push_back(event);
    }

    /// The oldest event.
    pub(super) fn pop(&mut self) -> Option<Event> {
        let event = self.queue.pop_front()?;
        if let Some(bit) = kind_bit(&event) {
            self.kinds &= !bit;
        }
        Some(event)
    }

    /// Gives the queue's memory back while it is empty.
    pub(super) fn release_memory(&mut self) {
        self.queue.release_if_empty();
    }
}

/// The bit of an event's kind, for the kinds without a payload.
#[inline(always)]
fn kind_bit(event: &Event) -> Option<u16> {
    let index = match event {
        Event::Connected => 0,
        Event::MessageReceived => 1,
        Event::DatagramReceived => 2,
        Event::StreamOpened => 3,
        Event::MessagesWritable => 4,
        Event::DatagramsWritable => 5,
        Event::ObservedAddressChanged => 6,
        Event::StreamsAvailable => 7,
        Event::StreamReadable(_)
        | Event::StreamWritable(_)
        | Event::Closed(_)
        | Event::Introduced { .. }
        | Event::IntroductionFailed { .. } => return None,
    };
    Some(1 << index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_waits_once_until_taken() {
        let mut events = Events::default();
        let stream = StreamId(4);
        for _ in 0..3 {
            events.push(Event::MessageReceived);
            events.push(Event::StreamWritable(stream));
        }
        events.push_new(Event::StreamReadable(stream));
        events.push(Event::DatagramReceived);
        let taken: Vec<_> = std::iter::from_fn(|| events.pop()).collect();
        assert_eq!(
            taken,
            [
                Event::MessageReceived,
                Event::StreamWritable(stream),
                Event::StreamReadable(stream),
                Event::DatagramReceived,
            ]
        );
        events.push(Event::MessageReceived);
        assert_eq!(
            events.pop(),
            Some(Event::MessageReceived),
            "queued again once taken"
        );
        assert_eq!(events.pop(), None);
    }
}
