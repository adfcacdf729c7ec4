//! Tern's protocol as a sans-IO state machine.
//!
//! An [`Endpoint`] is the whole protocol for one UDP socket: it routes each
//! datagram to its [`Connection`] by the receiver index the packet carries,
//! answers and rate-limits handshakes, and is what the application drives
//! (`connect`, `accept`, [`Endpoint::connection`] for the commands of one
//! connection, [`Endpoint::poll_event`]). Nothing here owns a socket, a
//! thread or a clock: datagrams come in through [`Node::handle_datagram`],
//! go out through [`Node::poll_transmit`] into the caller's buffer, and
//! time is always an argument ([`Instant`]), so a run is a function of its
//! inputs and a seed. tern-peer runs it on tokio over batched UDP I/O; this
//! crate builds without either, for other event loops and simulators (its
//! own tests run it in tern-sim, in virtual time).
//!
//! What an endpoint's connections hold together is bounded by one memory
//! budget ([`EndpointConfig::memory_budget`]): past seven eighths of it no
//! connection grants its peer more flow-control credit, and the
//! connections holding the most are closed before it is passed
//! ([`ConnectionError::MemoryBudget`]).
//!
//! Each connection reports who is at the other end
//! ([`Connection::peer_identity`]): on a connect, the key it named, which
//! the handshake proved; on an accepted connection, the key the initiator
//! proved, if it proved one ([`ConnectionConfig::prove_identity`], on by
//! default for an endpoint with an identity). A responder may require the
//! proof ([`ConnectionConfig::require_identity`]), and the application may
//! refuse a connection after seeing who opened it ([`Endpoint::refuse`]).
//!
//! [`Node`] is the contract between the protocol and the I/O: the calls a
//! driver makes, in the order it makes them. [`Connection`]'s documentation
//! gives the order of a connection's calls within a turn.
//!
//! # Example
//! Two endpoints, with the datagrams carried by hand:
//! ```
//! use std::net::SocketAddr;
//! use std::time::SystemTime;
//!
//! use tern_proto::{Bytes, Endpoint, EndpointConfig, IdentityKey, Instant, Node, TransmitLimits};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (now, wall) = (Instant::now(), SystemTime::now());
//! let identity = IdentityKey::random()?;
//! let public = identity.public(); // what initiators need to know
//! let server_addr: SocketAddr = "192.0.2.1:7000".parse()?;
//! let client_addr: SocketAddr = "192.0.2.2:7000".parse()?;
//! // The seeds feed each endpoint's cryptographic RNG: from the OS in
//! // production, fixed in a simulation.
//! let mut server = Endpoint::new(EndpointConfig::default(), Some(identity), [1; 32], now, wall)?;
//! let mut client = Endpoint::new(EndpointConfig::default(), None, [2; 32], now, wall)?;
//!
//! let to_server = client.connect(now, server_addr, &public)?;
//! client.connection(to_server).ok_or("gone")?.send_message(Bytes::from_static(b"hello"))?;
//!
//! // A driver's turns, with a lossless zero-delay wire.
//! let limits = TransmitLimits::new(1, 1452);
//! let mut buf = vec![0; 1452];
//! let mut from_client = None;
//! while from_client.is_none() {
//!     while let Some(sent) = client.poll_transmit(now, limits, &mut buf) {
//!         server.handle_datagram(now, server_addr, client_addr, &mut buf[..sent.len]);
//!     }
//!     while let Some(sent) = server.poll_transmit(now, limits, &mut buf) {
//!         client.handle_datagram(now, client_addr, server_addr, &mut buf[..sent.len]);
//!     }
//!     from_client = server.accept();
//! }
//! let from_client = server.connection(from_client.ok_or("none")?).ok_or("gone")?;
//! assert_eq!(from_client.recv_message().as_deref(), Some(&b"hello"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! # What it is built from
//! The building blocks (the receiver-index table, the intro limiter, the
//! anti-amplification limit, paths and MTU search, stream and message
//! buffers, flow control, the scheduler) are internal: they change as the
//! protocol does. `internals` exposes some of them to Tern's own
//! benchmarks, outside any compatibility promise.
#![forbid(unsafe_code)]

mod config;
mod connection;
mod endpoint;
mod node;
#[cfg(test)]
mod test_rng;

pub use bytes::Bytes;
pub use quanta::Instant;
pub use tern_congestion::{
    CubicConfig, CubicConfigError, HyStartConfig, LedbatConfig, LedbatConfigError, RenoConfig,
    RenoConfigError,
};
pub use tern_wire::{
    Candidates, CloseKind, DEFAULT_MAX_MESSAGE_SIZE, IdentityKey, IdentityKind, KeyConfig,
    KeyFingerprint, PublicIdentity, RefusalReason,
};

pub use config::{
    ConfigError, CongestionConfig, CongestionKind, ConnectionConfig, DEFAULT_MEMORY_BUDGET,
    EndpointConfig, INITIAL_CONNECTION_WINDOW, INITIAL_MAX_STREAMS, INITIAL_STREAM_WINDOW,
    RelayConfig,
};
pub use connection::streams::stream_id::{Direction, Side, StreamId};
pub use connection::{
    Connection, ConnectionError, ConnectionStats, Event, ProtocolError, ReadError, ReadOutcome,
    SendError, WriteError,
};
pub use endpoint::intro_limit::IntroLimiterConfig;
pub use endpoint::{
    ConnectError, ConnectViaError, ConnectionHandle, ConnectionPath, Endpoint, EndpointStats,
    PathPolicy,
};
pub use node::{Node, SendRefused, Transmit, TransmitLimits};

/// Building blocks exposed for Tern's own benchmarks (level 0 and 1), so
/// their cost is measured alone. Not part of the API: no compatibility
/// promise covers them, and they change with the protocol.
#[doc(hidden)]
pub mod internals {
    pub use crate::connection::streams::messages::{MessageReceiver, MessageSender};
    pub use crate::connection::streams::pages::PagePool;
    pub use crate::connection::streams::recv_stream::RecvStream;
    pub use crate::connection::streams::send_stream::SendStream;
    pub use crate::endpoint::intro_limit::{IntroLimiter, IntroRefused};
    pub use crate::endpoint::receiver_index::{IndexFull, ReceiverIndex};
}
