//! [`Incoming`]: a connection a peer opened, for the application to accept
//! or refuse once it knows who is at the other end.

use std::net::SocketAddr;

use tern_wire::PublicIdentity;

use super::connection::Connection;

/// A connection a peer opened, yielded by
/// [`Endpoint::accept`](crate::Endpoint::accept) once its handshake is
/// done: the application looks at who opened it, then
/// [`accept`](Self::accept)s or [`refuse`](Self::refuse)s it.
///
/// Its [`identity`](Self::identity) is the key the initiator proved, if it
/// proved one. An endpoint that
/// [requires a proof](crate::Config::require_identity) yields a connection
/// only once the proof verified, so `identity` is then always `Some`;
/// otherwise the proof usually comes with the initiator's first packet,
/// and a proof that came later is reported by
/// [`Connection::peer_identity`]. Until it is accepted, the connection
/// costs what its handshake cost and the data the peer may send ahead
/// (its initial flow-control window); refused, or dropped undecided, it is
/// closed at once, what it holds dropped, and counted in
/// [`EndpointStats::connections_refused`](crate::proto::EndpointStats::connections_refused).
#[derive(Debug)]
pub struct Incoming {
    connection: Connection,
    /// Accepted or refused: nothing is left to do on drop.
    decided: bool,
    remote: SocketAddr,
    identity: Option<PublicIdentity>,
}

impl Incoming {
    pub(crate) fn new(
        connection: Connection,
        remote: SocketAddr,
        identity: Option<PublicIdentity>,
    ) -> Self {
        Self {
            connection,
            decided: false,
            remote,
            identity,
        }
    }

    /// The address the connection came from.
    pub fn remote_address(&self) -> SocketAddr {
        self.remote
    }

    /// The key the initiator proved holding, or `None` for an anonymous
    /// initiator (see the type's documentation).
    pub fn identity(&self) -> Option<&PublicIdentity> {
        self.identity.as_ref()
    }

    /// Takes the connection.
    pub fn accept(mut self) -> Connection {
        self.decided = true;
        self.connection.clone()
    }

    /// Refuses the connection: it is closed at once and the peer is told
    /// the application's `code` (it reads it as
    /// [`ConnectionError::PeerClosed`](crate::proto::ConnectionError::PeerClosed)).
    pub fn refuse(mut self, code: u64) {
        self.decided = true;
        self.connection.refuse(code);
    }
}

impl Drop for Incoming {
    /// Undecided, it is refused with code 0.
    fn drop(&mut self) {
        if !self.decided {
            self.connection.refuse(0);
        }
    }
}
