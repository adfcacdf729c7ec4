//! What the application is told about a connection: its [`Event`]s, which
//! the connection queues once per kind until they are taken.

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
