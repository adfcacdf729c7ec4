//! How a driver ends: [`Stopped`], what it gives back; [`DriverStopped`]
//! and its [`StopCause`], what every handle's call returns from then on.

use std::io;

use tern_sockio::UdpSocket;

/// What a stopped driver gives back.
#[derive(Debug)]
#[non_exhaustive]
pub struct Stopped<N> {
    /// The node, as the last turn left it.
    pub node: N,
    /// The socket, with its counters.
    pub socket: UdpSocket,
}

/// Why a driver ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StopCause {
    /// It stopped as asked ([`DriverHandle::stop`](super::DriverHandle::stop)),
    /// or drained after its last handle went.
    #[error("stopped")]
    Stopped,
    /// Its socket failed (an error of the socket itself, not of one
    /// datagram).
    #[error("socket error ({kind}): {message}")]
    Socket {
        /// The error's kind.
        kind: io::ErrorKind,
        /// The error, as it printed.
        message: String,
    },
    /// Its task panicked (in the node or in the driver).
    #[error("the driver panicked")]
    Panicked,
    /// Its future was dropped before it finished: the runtime shut down,
    /// or the task was aborted.
    #[error("the driver was cancelled")]
    Cancelled,
}

impl StopCause {
    pub(super) fn socket(error: &io::Error) -> Self {
        Self::Socket {
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// The node is gone: the driver has ended, and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the endpoint driver has stopped: {cause}")]
#[non_exhaustive]
pub struct DriverStopped {
    /// Why it ended.
    pub cause: StopCause,
}

impl DriverStopped {
    pub(crate) fn new(cause: StopCause) -> Self {
        Self { cause }
    }
}

impl From<DriverStopped> for io::Error {
    fn from(e: DriverStopped) -> Self {
        io::Error::new(io::ErrorKind::NotConnected, e)
    }
}
