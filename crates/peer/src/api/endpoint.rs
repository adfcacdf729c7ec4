//! [`Endpoint`]: one UDP socket, its driver task, and every connection on it.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::task::Poll;
use std::time::SystemTime;

use rand_core::{OsRng, RngCore};
use tern_sockio::{Backend, CounterSnapshot};
use tern_wire::PublicIdentity;

use super::config::Config;
use super::connection::Connection;
use super::error::ConnectError;
use super::state::EndpointState;
use crate::driver::{Driver, DriverHandle, DriverStats};
use crate::proto::{self, EndpointStats};

/// One UDP socket and every connection on it, run by one driver task.
///
/// [`bind`](Self::bind) opens the socket and spawns the driver on the
/// current tokio runtime. Clones share the endpoint; it runs while an
/// `Endpoint` or a [`Connection`] of it exists, and stops when the last is
/// dropped (a connection dropped while open is first closed gracefully,
/// if the endpoint still runs to send it).
#[derive(Clone, Debug)]
pub struct Endpoint {
    driver: DriverHandle<EndpointState>,
    public: Option<PublicIdentity>,
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
            quanta::Instant::now(),
            SystemTime::now(),
        )
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let public = proto.public();
        let (driver, handle) = Driver::bind(addr, EndpointState::new(proto), &driver_config)?;
        tokio::spawn(driver.run());
        Ok(Self {
            driver: handle,
            public,
        })
    }

    /// Connects to the endpoint at `addr` whose identity is `identity`:
    /// one round trip. Fails with [`ConnectError::HandshakeTimedOut`] when
    /// nobody answers with that key within the handshake timeout.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        identity: &PublicIdentity,
    ) -> Result<Connection, ConnectError> {
        let slot = self.driver.with_node(|state| {
            let handle = state
                .proto
                .connect(self.driver.now(), addr, identity)
                .map_err(ConnectError::Start)?;
            Ok::<_, ConnectError>(state.add(handle))
        })??;
        let connection = Connection::new(self.driver.clone(), slot);
        poll_fn(|cx| {
            connection.with_slot(|slot, _| {
                if slot.connected {
                    return Poll::Ready(Ok(()));
                }
                if let Some(error) = &slot.closed {
                    return Poll::Ready(Err(ConnectError::from(error.clone())));
                }
                slot.connect.register(cx);
                Poll::Pending
            })?
        })
        .await?;
        Ok(connection)
    }

    /// The next connection a peer opened; `None` once the endpoint has
    /// stopped, or after [`close`](Self::close) when no connection waits
    /// to be taken.
    pub async fn accept(&self) -> Option<Connection> {
        let slot = poll_fn(|cx| {
            let taken = self.driver.with_node_unwoken(|state| {
                if let Some(slot) = state.incoming.pop_front() {
                    return Poll::Ready(Some(slot));
                }
                if state.closing {
                    return Poll::Ready(None);
                }
                state.accept.register(cx);
                Poll::Pending
            });
            taken.unwrap_or(Poll::Ready(None))
        })
        .await?;
        Some(Connection::new(self.driver.clone(), slot))
    }

    /// Closes gracefully every connection the endpoint holds (what was
    /// sent is delivered first), and makes [`accept`](Self::accept) return
    /// `None` rather than wait. It does not refuse new connections: the
    /// protocol still answers intros, and a connection a peer opens
    /// afterwards is established, queued for `accept`, and not closed.
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

    /// Figures about the endpoint now.
    pub fn stats(&self) -> Stats {
        let (protocol, connections) = self
            .driver
            .with_node_unwoken(|state| (state.proto.stats(), state.proto.len()))
            .unwrap_or_default();
        Stats {
            protocol,
            driver: self.driver.stats(),
            socket: self.driver.socket_counters(),
            connections,
        }
    }
}
