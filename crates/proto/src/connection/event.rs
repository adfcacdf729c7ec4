//! What the application is told: the connection's [`Event`]s, queued once
//! per kind until taken, including what its streams' readiness became.

use super::Connection;
use super::error::ConnectionError;
use crate::StreamId;

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
    /// The peer opened a stream ([`Connection::accept_stream`]).
    StreamOpened,
    /// A stream has bytes to read, ended, or was reset by the peer.
    StreamReadable(StreamId),
    /// A stream whose last write took less than it was given has room
    /// again, or the peer asked it to stop.
    StreamWritable(StreamId),
    /// Messages were acknowledged, or the peer allows more large ones:
    /// `send_message` has room again.
    MessagesWritable,
    /// The peer allows more bidirectional streams: `open_stream` may succeed.
    StreamsAvailable,
    /// The connection is over.
    Closed(ConnectionError),
}

impl Connection {
    /// Queues `event` unless the same one already waits: the queue holds
    /// each event once, so packets from the peer cannot grow it while the
    /// application is not looking (one `MessageReceived` means "call
    /// `recv_message` until it is empty").
    pub(super) fn notify(&mut self, event: Event) {
        if !self.events.contains(&event) {
            self.events.push_back(event);
        }
    }

    /// The next event, if any. Each kind of event is queued once until it
    /// is taken: after `MessageReceived`, take every message; after
    /// `StreamOpened`, accept every stream.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Streams the last frames or commands made readable, writable or
    /// opened, as events.
    pub(super) fn flush_readable(&mut self) {
        self.streams.wake_writers();
        while let Some(id) = self.streams.poll_readable() {
            self.notify(Event::StreamReadable(id));
        }
        while let Some(id) = self.streams.poll_writable() {
            self.notify(Event::StreamWritable(id));
        }
        if self.streams.take_opened_by_peer() {
            self.notify(Event::StreamOpened);
        }
    }
}
