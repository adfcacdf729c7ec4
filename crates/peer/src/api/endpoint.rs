//! [`Endpoint`]: one UDP socket, its driver task, and every connection on it.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use rand_core::{OsRng, RngCore};
use tern_sockio::{Backend, CounterSnapshot, SocketConfig, UdpSocket};
use tern_wire::PublicIdentity;

use super::config::Config;
use super::connection::Connection;
use super::error::ConnectError;
use super::incoming::Incoming;
use super::published::PublishedEndpoint;
use super::state::{Accepts, EndpointState};
use crate::driver::{Driver, DriverHandle, DriverStats};
use crate::proto::{self, CongestionConfig, EndpointStats};

/// How much longer than the handshake timeout `connect` waits for the
/// protocol to report the handshake's end before it ends it itself.
const HANDSHAKE_GRACE: Duration = Duration::from_millis(500);

/// One UDP socket and every connection on it, run by one driver task.
///
/// [`bind`](Self::bind) opens the socket and spawns the driver on the
/// current tokio runtime. Clones share the endpoint. When the last
/// `Endpoint` is dropped, new connections are refused and those not yet
/// accepted are closed; its [`Connection`]s keep working. When the last
/// `Endpoint` and `Connection` are gone (a connection dropped while open
/// is closed gracefully), the driver runs on until every connection has
/// drained and closed, within the protocol's deadlines (a graceful close
/// gives up on a peer that stops acknowledging, see
/// [`ConnectionConfig::close_drain_timeout`](crate::proto::ConnectionConfig::close_drain_timeout))
/// and at most [`Config::drain_timeout`]; then it stops. The driver is a
/// task of the runtime: a runtime shut down first ends it there, so a
/// program that wants its last data delivered awaits
/// [`wait_idle`](Self::wait_idle) before it returns.
#[derive(Clone, Debug)]
pub struct Endpoint {
    driver: DriverHandle<EndpointState>,
    /// The endpoint's figures as the driver published them.
    figures: Arc<PublishedEndpoint>,
    /// The connections peers opened, as the driver queued them.
    accepts: Arc<Accepts>,
    public: Option<PublicIdentity>,
    /// The protocol's handshake timeout: `connect`'s own deadline too.
    handshake_timeout: Duration,
    /// How a socket of [`rebind`](Self::rebind) is set up.
    socket_config: Arc<SocketConfig>,
    /// Shut when the last `Endpoint` goes.
    _door: Arc<Door>,
}

/// Refuses new connections when the last [`Endpoint`] is dropped: nobody
/// can accept them any more.
#[derive(Debug)]
struct Door(DriverHandle<EndpointState>);

impl Drop for Door {
    fn drop(&mut self) {
        let now = self.0.now();
        let _ = self.0.with_node(|state| state.refuse_connections(now, 0));
    }
}

/// Figures about an endpoint: the protocol's, the driver's and the
/// socket's.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Stats {
    /// Routing and handshake counters (garbage, forged and replayed intros
    /// are counted here).
    pub protocol: EndpointStats,
    /// Loop turns, datagrams in and out, waits for a full socket.
    pub driver: DriverStats,
    /// System calls, datagrams, bytes and drops of the socket
    /// ([`CounterSnapshot::datagrams_per_recv_syscall`] and its send twin give
    /// the datagrams per system call).
    pub socket: CounterSnapshot,
    /// Connections held.
    pub connections: usize,
}

impl Endpoint {
    /// Binds a UDP socket to `addr` and starts the endpoint's driver on the
    /// current tokio runtime (either flavour; Tern recommends one
    /// current-thread runtime per endpoint, see [`crate::driver`]). With
    /// [`Config::identity`] it accepts connections.
    ///
    /// # Panics
    /// Outside a tokio runtime with I/O and time enabled.
    pub fn bind(addr: SocketAddr, config: Config) -> io::Result<Self> {
        let socket = UdpSocket::bind(addr, config.driver.socket_config())?;
        Self::start(socket, config)
    }

    /// Runs an endpoint on a socket the application already bound (or was
    /// handed: systemd socket activation, a port reserved before the
    /// runtime started), with `config`'s backend, batch and buffer sizes;
    /// its address and `SO_REUSEPORT` are the socket's own. Otherwise as
    /// [`bind`](Self::bind).
    ///
    /// # Panics
    /// Outside a tokio runtime with I/O and time enabled.
    pub fn from_socket(socket: std::net::UdpSocket, config: Config) -> io::Result<Self> {
        let socket = UdpSocket::from_std(socket, config.driver.socket_config())?;
        Self::start(socket, config)
    }

    /// Starts the driver over `socket`.
    fn start(socket: UdpSocket, config: Config) -> io::Result<Self> {
        let Config {
            driver: driver_config,
            endpoint: endpoint_config,
            identity,
        } = config;
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        let proto = proto::Endpoint::new(
            endpoint_config,
            identity,
            seed,
            proto::Instant::now(),
            SystemTime::now(),
        )
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let public = proto.public();
        let handshake_timeout = endpoint_config.connection.handshake_timeout;
        let state = EndpointState::new(proto);
        state.publish_figures();
        let figures = Arc::clone(&state.figures);
        let accepts = Arc::clone(&state.accepts);
        let (driver, handle) = Driver::new(socket, state, &driver_config)?;
        tokio::spawn(driver.run());
        Ok(Self {
            _door: Arc::new(Door(handle.clone())),
            driver: handle,
            figures,
            accepts,
            public,
            handshake_timeout,
            socket_config: Arc::new(driver_config.socket_config()),
        })
    }

    /// Moves the endpoint to a new socket bound to `addr` (with the
    /// configuration it started with), keeping every connection: the old
    /// socket is closed at the driver's next turn, each connection sends a
    /// packet from the new address at once, and its peer takes the new
    /// path up after validating it, as after a NAT rebinding (datagrams
    /// in flight to the old address are lost and sent again). For a client
    /// whose network changed; a server's peers keep sending to the address
    /// they know until they hear from the new one.
    pub fn rebind(&self, addr: SocketAddr) -> io::Result<()> {
        let socket = UdpSocket::bind(addr, (*self.socket_config).clone())?;
        self.move_to(socket)
    }

    /// [`rebind`](Self::rebind) onto a socket the application bound.
    pub fn rebind_socket(&self, socket: std::net::UdpSocket) -> io::Result<()> {
        let socket = UdpSocket::from_std(socket, (*self.socket_config).clone())?;
        self.move_to(socket)
    }

    fn move_to(&self, socket: UdpSocket) -> io::Result<()> {
        self.driver.replace_socket(socket)?;
        self.driver
            .with_node(EndpointState::ping_all)
            .map_err(io::Error::other)
    }

    /// Connects to the endpoint at `addr` whose identity is `identity`:
    /// one round trip. Fails with [`ConnectError::HandshakeTimedOut`] when
    /// nobody answers with that key within the handshake timeout, and ends
    /// with an error by then whatever happened (the protocol gave the
    /// connection up, the endpoint stopped).
    pub async fn connect(
        &self,
        addr: SocketAddr,
        identity: &PublicIdentity,
    ) -> Result<Connection, ConnectError> {
        self.connect_using(addr, identity, None).await
    }

    /// [`connect`](Self::connect), with a congestion controller of its own
    /// for this connection instead of the endpoint's
    /// ([`Config::congestion`]): Reno for a connection that should take
    /// its share against TCP, say, beside LEDBAT background transfers.
    pub async fn connect_with(
        &self,
        addr: SocketAddr,
        identity: &PublicIdentity,
        congestion: CongestionConfig,
    ) -> Result<Connection, ConnectError> {
        self.connect_using(addr, identity, Some(congestion)).await
    }

    async fn connect_using(
        &self,
        addr: SocketAddr,
        identity: &PublicIdentity,
        congestion: Option<CongestionConfig>,
    ) -> Result<Connection, ConnectError> {
        let slot = self.driver.with_node(|state| {
            let now = self.driver.now();
            let handle = match congestion {
                Some(congestion) => state.proto.connect_with(now, addr, identity, congestion),
                None => state.proto.connect(now, addr, identity),
            }
            .map_err(ConnectError::Start)?;
            let slot = state.add(now, handle, addr);
            let published = state.published(slot).ok_or(ConnectError::Abandoned)?;
            Ok::<_, ConnectError>((slot, published))
        })??;
        let (slot, published) = slot;
        let connection = Connection::new(self.driver.clone(), slot, published);
        let handshake = poll_fn(|cx| {
            connection.with_slot(|slot, _| {
                if slot.connected {
                    return Poll::Ready(Ok(()));
                }
                if let Some(error) = slot.closed.as_deref() {
                    return Poll::Ready(Err(ConnectError::from(error.clone())));
                }
                if slot.handle.is_none() {
                    return Poll::Ready(Err(ConnectError::Abandoned));
                }
                slot.connect.register(cx);
                Poll::Pending
            })?
        });
        // The protocol's own deadline ends the handshake first; this one
        // (a little later, for the driver's turn) holds whatever happens.
        let deadline = self.handshake_timeout + HANDSHAKE_GRACE;
        match tokio::time::timeout(deadline, handshake).await {
            Ok(outcome) => outcome?,
            Err(_) => return Err(ConnectError::HandshakeTimedOut),
        }
        Ok(connection)
    }

    /// Asks the rendezvous at the other end of `rendezvous` to introduce
    /// this endpoint to whoever asks for its key
    /// ([`connect_via`](Self::connect_via)); this side proved its identity
    /// there if it has one ([`Config`]'s default), and names its local
    /// addresses there (the socket's, or its interfaces' if bound to the
    /// unspecified address), so that a peer behind the same NAT reaches it
    /// directly. Peers that find it this way arrive at
    /// [`accept`](Self::accept).
    pub fn register(&self, rendezvous: &Connection) -> Result<(), ConnectError> {
        let slot = rendezvous.slot();
        let candidates = super::candidates::local_candidates(self.local_addr());
        let registered = self.driver.with_node(|state| {
            let handle = state.connection(slot).and_then(|(slot, _)| slot.handle);
            state.proto.set_local_candidates(candidates);
            handle.is_some_and(|handle| state.proto.register(handle))
        })?;
        if registered {
            Ok(())
        } else {
            Err(ConnectError::ConnectVia(
                proto::ConnectViaError::NoConnection,
            ))
        }
    }

    /// Connects to the peer holding `peer`, found through the rendezvous
    /// at the other end of `rendezvous` (where that peer registered): the
    /// rendezvous tells each side where the other is, and the two open a
    /// direct path through their NATs; when none opens within the
    /// configured bound (2 s by default), the connection runs through the
    /// rendezvous's relay, which forwards it sealed
    /// ([`Connection::path`] says which). Ends at a peer that proved
    /// `peer`, or in a typed error: the rendezvous refused
    /// ([`ConnectError::IntroductionRefused`]), or no connection completed
    /// ([`ConnectError::NoDirectPath`]).
    pub async fn connect_via(
        &self,
        rendezvous: &Connection,
        peer: &PublicIdentity,
    ) -> Result<Connection, ConnectError> {
        self.connect_via_with(rendezvous, peer, proto::PathPolicy::default())
            .await
    }

    /// [`connect_via`](Self::connect_via) on the paths `policy` allows:
    /// direct only (failing rather than relaying), or relayed only
    /// (without hole punching).
    pub async fn connect_via_with(
        &self,
        rendezvous: &Connection,
        peer: &PublicIdentity,
        policy: proto::PathPolicy,
    ) -> Result<Connection, ConnectError> {
        let via = rendezvous.slot();
        let fingerprint = peer.fingerprint();
        self.driver.with_node(|state| {
            let handle = state.connection(via).and_then(|(slot, _)| slot.handle);
            let handle = handle.ok_or(proto::ConnectViaError::NoConnection)?;
            state.introductions.remove(&(via, fingerprint));
            state.proto.connect_via_with(handle, peer, policy)
        })??;
        let outcome = poll_fn(|cx| {
            let looked = self.driver.with_node_unwoken(|state| {
                if let Some(outcome) = state.introductions.remove(&(via, fingerprint)) {
                    return Poll::Ready(outcome.map(|id| (id, state.peer(id))));
                }
                if state
                    .connection(via)
                    .is_none_or(|(slot, _)| slot.closed.is_some())
                {
                    return Poll::Ready(Err(None));
                }
                state.introduced.register(cx);
                Poll::Pending
            });
            match looked {
                Ok(Poll::Pending) => Poll::Pending,
                Ok(Poll::Ready(outcome)) => Poll::Ready(Ok(outcome)),
                Err(stopped) => Poll::Ready(Err(stopped)),
            }
        });
        // The introduction's connects run to the protocol's handshake
        // timeout; this bound (the asks' round trip and a grace) holds
        // whatever happens.
        let deadline = 2 * self.handshake_timeout + HANDSHAKE_GRACE;
        match tokio::time::timeout(deadline, outcome).await {
            Err(_) => Err(ConnectError::HandshakeTimedOut),
            Ok(Err(stopped)) => Err(stopped.into()),
            Ok(Ok(Err(Some(reason)))) => Err(ConnectError::IntroductionRefused(reason)),
            Ok(Ok(Err(None))) => Err(ConnectError::NoDirectPath),
            Ok(Ok(Ok((id, peer)))) => {
                let peer = peer.ok_or(ConnectError::Abandoned)?;
                Ok(Connection::new(self.driver.clone(), id, peer.published))
            }
        }
    }

    /// The next connection a peer opened, for the application to accept or
    /// refuse once it knows the peer's address and proven identity (see
    /// [`Incoming`]); `None` once the endpoint has stopped or after
    /// [`close`](Self::close).
    ///
    /// ```no_run
    /// # async fn serve(server: tern_peer::Endpoint, known: Vec<tern_peer::PublicIdentity>) {
    /// while let Some(incoming) = server.accept().await {
    ///     if incoming.identity().is_some_and(|id| known.contains(id)) {
    ///         let connection = incoming.accept();
    ///         # drop(connection);
    ///     } else {
    ///         incoming.refuse(1);
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn accept(&self) -> Option<Incoming> {
        let (slot, peer) = poll_fn(|cx| {
            // The driver's end wakes a task that waits.
            if self.driver.is_stopped() {
                return Poll::Ready(None);
            }
            self.accepts.poll_next(cx)
        })
        .await?;
        let connection = Connection::new(self.driver.clone(), slot, peer.published);
        Some(Incoming::new(connection, peer.remote, peer.identity))
    }

    /// The next connection a peer opened, accepted whoever opened it:
    /// [`accept`](Self::accept) and [`Incoming::accept`] in one.
    pub async fn accept_connection(&self) -> Option<Connection> {
        self.accept().await.map(Incoming::accept)
    }

    /// Closes gracefully every connection the endpoint holds (what was
    /// sent is delivered first) and refuses new ones: intros are dropped
    /// unread (counted in [`EndpointStats::intros_declined`]), a connection
    /// whose handshake was under way is closed when it completes, and
    /// [`accept`](Self::accept) returns `None` from now on (connections
    /// that waited to be accepted are closed too).
    /// [`wait_idle`](Self::wait_idle) waits until the endpoint holds no
    /// connection.
    pub fn close(&self, code: u64) {
        let now = self.driver.now();
        let _ = self.driver.with_node(|state| state.close_all(now, code));
    }

    /// Waits until the endpoint holds no connection (all closed and
    /// drained), or its driver stopped.
    pub async fn wait_idle(&self) {
        poll_fn(|cx| {
            let idle = self.driver.with_node_unwoken(|state| {
                if state.proto.is_empty() {
                    return true;
                }
                state.idle.register(cx);
                false
            });
            if idle.unwrap_or(true) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.driver.local_addr()
    }

    /// The identity peers connect to, if this endpoint accepts.
    pub fn public(&self) -> Option<&PublicIdentity> {
        self.public.as_ref()
    }

    /// The tern-sockio backend the socket uses.
    pub fn backend(&self) -> Backend {
        self.driver.backend()
    }

    /// The driver's handle, for tests that hold the endpoint's lock.
    #[cfg(test)]
    pub(crate) fn driver(&self) -> &DriverHandle<EndpointState> {
        &self.driver
    }

    /// Figures about the endpoint: the driver's and the socket's now, the
    /// protocol's as of the driver's last turn (or the last endpoint-level
    /// call, such as `connect`, that changed them), published so that this
    /// never waits for the lock the driver holds for its turns. Zeroed
    /// once the endpoint stopped.
    pub fn stats(&self) -> Stats {
        let (protocol, connections) = if self.driver.is_stopped() {
            Default::default()
        } else {
            self.figures.read()
        };
        Stats {
            protocol,
            driver: self.driver.stats(),
            socket: self.driver.socket_counters(),
            connections,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a handle reads of its connection, and the endpoint's figures,
    /// never wait for the lock the driver holds for its turns: here the
    /// lock is held throughout, and another thread still reads the
    /// connection's figures, address and limits and the endpoint's
    /// figures.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_a_connection_does_not_wait_for_the_endpoints_lock() {
        let localhost = "127.0.0.1:0".parse().expect("an address");
        let key = tern_wire::IdentityKey::generate_x25519(&mut OsRng);
        let public = key.public();
        let server = Endpoint::bind(localhost, Config::default().identity(key)).expect("binds");
        let client = Endpoint::bind(localhost, Config::default()).expect("binds");
        let (connection, accepted) = tokio::join!(
            client.connect(server.local_addr(), &public),
            server.accept_connection()
        );
        let (connection, _accepted) = (connection.expect("connects"), accepted.expect("accepts"));
        let before = connection.stats().expect("open");
        let read = client
            .driver
            .with_node_unwoken(|_| {
                let (tx, rx) = std::sync::mpsc::channel();
                let reader = connection.clone();
                let endpoint = client.clone();
                std::thread::spawn(move || {
                    let read = (
                        reader.stats(),
                        reader.remote_address(),
                        reader.max_message_size(),
                        endpoint.stats().connections,
                    );
                    let _ = tx.send(read);
                });
                rx.recv_timeout(Duration::from_secs(5))
            })
            .expect("the driver runs")
            .expect("read while the lock is held");
        let (stats, remote, max_message_size, connections) = read;
        assert_eq!(stats.map(|s| s.congestion), Some(before.congestion));
        assert_eq!(remote, server.local_addr());
        assert!(max_message_size.is_some());
        assert_eq!(connections, 1);
    }

    #[tokio::test]
    async fn a_connect_the_protocol_gives_up_without_a_word_ends_abandoned_at_once() {
        // Long enough that only the abandonment can end the connect in time.
        let handshake = Duration::from_secs(30);
        let client = Endpoint::bind(
            "127.0.0.1:0".parse().expect("an address"),
            Config::default().handshake_timeout(handshake),
        )
        .expect("binds");
        // A socket that never answers: the handshake stays under way.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("binds");
        let key = tern_wire::IdentityKey::generate_x25519(&mut OsRng);
        let connecting = tokio::spawn({
            let client = client.clone();
            let addr = silent.local_addr().expect("bound");
            async move { client.connect(addr, &key.public()).await }
        });
        // Once the connect is under way, the protocol lets it go unannounced.
        while client.stats().connections == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        client
            .driver
            .with_node(EndpointState::forget_every_connection)
            .expect("the driver runs");
        let connected = tokio::time::timeout(Duration::from_secs(5), connecting)
            .await
            .expect("connect ends long before the handshake timeout")
            .expect("the task ends");
        assert!(
            matches!(connected, Err(ConnectError::Abandoned)),
            "{connected:?}"
        );
    }
}
