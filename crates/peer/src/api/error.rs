//! The async API's errors: one small enum per operation, each naming the
//! causes that operation can meet, with `io::Error` only at the edge (the
//! streams' `AsyncRead` and `AsyncWrite`, which tokio's traits require; the
//! typed error travels inside it, for `get_ref().downcast_ref()`).

use std::io;

use crate::driver::{DriverStopped, StopCause};
use crate::proto::{self, ConnectionError};

/// Why `connect` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Nobody answered with the given identity within the handshake
    /// timeout: nothing listens there, or not with that key.
    #[error("no answer within the handshake timeout (wrong address or wrong key)")]
    HandshakeTimedOut,
    /// The connection ended during the handshake for another reason.
    #[error("{0}")]
    Connection(ConnectionError),
    /// The connection could not start: the endpoint is full, or the intro
    /// could not be made.
    #[error("{0}")]
    Start(#[from] proto::ConnectError),
    /// The endpoint's driver has ended, for this cause.
    #[error("the endpoint has stopped: {0}")]
    EndpointStopped(StopCause),
    /// The protocol gave the connection up during the handshake without
    /// reporting why (a handshake it found forged, replayed or lost).
    #[error("the handshake was abandoned")]
    Abandoned,
    /// The rendezvous refused the introduction
    /// ([`Endpoint::connect_via`](crate::Endpoint::connect_via)).
    #[error("the rendezvous refused the introduction: {0:?}")]
    IntroductionRefused(proto::RefusalReason),
    /// The rendezvous introduced the two peers, but no connection
    /// completed: their NATs let no direct path through, and the relay
    /// was not allowed or did not carry one either.
    #[error("no path to the peer (direct or relayed)")]
    NoDirectPath,
    /// The rendezvous connection cannot carry the request (it is closed,
    /// or too many introductions are pending).
    #[error("{0}")]
    ConnectVia(#[from] proto::ConnectViaError),
}

impl From<ConnectionError> for ConnectError {
    fn from(e: ConnectionError) -> Self {
        match e {
            ConnectionError::HandshakeTimedOut => Self::HandshakeTimedOut,
            other => Self::Connection(other),
        }
    }
}

impl From<DriverStopped> for ConnectError {
    fn from(e: DriverStopped) -> Self {
        Self::EndpointStopped(e.cause)
    }
}

/// Why a connection can no longer be used: what ends every operation on
/// it once it is over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionLost {
    /// The connection is over: closed by the peer, timed out, or failed.
    #[error("{0}")]
    Connection(#[from] ConnectionError),
    /// The connection is closing: this side called `close`.
    #[error("the connection is closing")]
    Closing,
    /// The endpoint's driver has ended, for this cause.
    #[error("the endpoint has stopped: {0}")]
    EndpointStopped(StopCause),
    /// The endpoint let the connection go without reporting why.
    #[error("the connection was abandoned")]
    Abandoned,
}

impl From<DriverStopped> for ConnectionLost {
    fn from(e: DriverStopped) -> Self {
        Self::EndpointStopped(e.cause)
    }
}

/// Why [`Connection::send`](crate::Connection::send) did not send a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Larger than the peer accepts
    /// ([`Connection::max_message_size`](crate::Connection::max_message_size)):
    /// refused here rather than sent to end the connection.
    #[error("message of {size} bytes is over the peer's {limit}-byte limit")]
    TooLarge {
        /// The message's length.
        size: u64,
        /// The peer's limit.
        limit: u64,
    },
    /// The connection is over.
    #[error(transparent)]
    ConnectionLost(#[from] ConnectionLost),
}

/// Why a datagram was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendDatagramError {
    /// Larger than one packet carries
    /// ([`Connection::max_datagram_size`](crate::Connection::max_datagram_size)).
    #[error("datagram of {size} bytes is over the {max}-byte limit")]
    TooLarge {
        /// The datagram's length.
        size: usize,
        /// The largest datagram sent.
        max: usize,
    },
    /// The connection is over.
    #[error(transparent)]
    ConnectionLost(#[from] ConnectionLost),
}

/// Why a write on a [`SendStream`](crate::SendStream) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The peer asked this side to stop sending, with this code.
    #[error("stream stopped by the peer (code {0})")]
    Stopped(u64),
    /// The stream was finished or reset here: nothing more goes on it.
    #[error("the stream was finished or reset")]
    ClosedStream,
    /// The connection is over.
    #[error(transparent)]
    ConnectionLost(#[from] ConnectionLost),
}

/// Why a read on a [`RecvStream`](crate::RecvStream) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The peer abandoned sending (reset the stream), with this code.
    #[error("stream reset by the peer (code {0})")]
    Reset(u64),
    /// This side asked the peer to stop, or read to the end already.
    #[error("the stream was stopped or read to its end")]
    ClosedStream,
    /// The connection is over.
    #[error(transparent)]
    ConnectionLost(#[from] ConnectionLost),
}

/// Why [`RecvStream::read_to_end`](crate::RecvStream::read_to_end) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadToEndError {
    /// A read failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The stream holds more than the limit the caller gave.
    #[error("the stream is longer than {limit} bytes")]
    TooLong {
        /// The limit given.
        limit: usize,
    },
}

/// A finish, reset or stop on a stream half that is already closed (or
/// whose connection is over): there is nothing left to do to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the stream is closed")]
pub struct ClosedStream;

/// The kind an `io::Error` gets for a connection that is over.
fn lost_kind(lost: &ConnectionLost) -> io::ErrorKind {
    match lost {
        ConnectionLost::Connection(ConnectionError::TimedOut) => io::ErrorKind::TimedOut,
        _ => io::ErrorKind::NotConnected,
    }
}

impl From<WriteError> for io::Error {
    fn from(e: WriteError) -> Self {
        let kind = match &e {
            WriteError::Stopped(_) => io::ErrorKind::ConnectionReset,
            WriteError::ClosedStream => io::ErrorKind::BrokenPipe,
            WriteError::ConnectionLost(lost) => lost_kind(lost),
        };
        io::Error::new(kind, e)
    }
}

impl From<ReadError> for io::Error {
    fn from(e: ReadError) -> Self {
        let kind = match &e {
            ReadError::Reset(_) => io::ErrorKind::ConnectionReset,
            ReadError::ClosedStream => io::ErrorKind::BrokenPipe,
            ReadError::ConnectionLost(lost) => lost_kind(lost),
        };
        io::Error::new(kind, e)
    }
}
