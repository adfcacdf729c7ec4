//! The async API's errors: typed, with `io::Error` only at the edge
//! (stream reads and writes, which tokio's traits require).

use std::io;

use crate::driver::{DriverStopped, StopCause};
use crate::proto::{self, ConnectionError, ReadError, WriteError};

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

/// Why a message, datagram or stream operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The connection is over.
    #[error("{0}")]
    Connection(#[from] ConnectionError),
    /// A datagram larger than a packet can carry.
    #[error("datagram of {0} bytes does not fit a packet")]
    DatagramTooLarge(usize),
    /// The peer reset the stream.
    #[error("stream reset by the peer (code {0})")]
    Reset(u64),
    /// The peer asked this side to stop sending on the stream.
    #[error("stream stopped by the peer (code {0})")]
    Stopped(u64),
    /// The stream is no longer known (finished, or never opened here).
    #[error("unknown stream")]
    UnknownStream,
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

impl From<DriverStopped> for Error {
    fn from(e: DriverStopped) -> Self {
        Self::EndpointStopped(e.cause)
    }
}

impl Error {
    pub(crate) fn from_write(e: WriteError) -> Self {
        match e {
            WriteError::Stopped(code) => Self::Stopped(code),
            _ => Self::UnknownStream,
        }
    }

    pub(crate) fn from_read(e: ReadError) -> Self {
        match e {
            ReadError::Reset(code) => Self::Reset(code),
            _ => Self::UnknownStream,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Connection(ConnectionError::TimedOut) => io::ErrorKind::TimedOut,
            Error::Connection(_)
            | Error::Closing
            | Error::EndpointStopped(_)
            | Error::Abandoned => io::ErrorKind::NotConnected,
            Error::Reset(_) | Error::Stopped(_) => io::ErrorKind::ConnectionReset,
            Error::DatagramTooLarge(_) => io::ErrorKind::InvalidInput,
            Error::UnknownStream => io::ErrorKind::BrokenPipe,
        };
        io::Error::new(kind, e)
    }
}
