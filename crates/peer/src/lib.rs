//! Tern's connections and endpoints.
//!
//! An [`Endpoint`] is one UDP socket; [`Endpoint::connect`] reaches a peer
//! by address and public key in one round trip, [`Endpoint::accept`] yields
//! the connections peers open as [`Incoming`]s, to accept or refuse by
//! the peer's address and the identity it proved. A [`Connection`] carries whole messages of
//! any size ([`Connection::send`], [`Connection::recv`]: each delivered
//! once, a small one never behind a large one), unreliable datagrams, and
//! streams of ordered bytes for data that should not sit in memory whole,
//! in halves that two tasks may own ([`SendStream`], `AsyncWrite`;
//! [`RecvStream`], `AsyncRead`). Each operation fails with its own typed
//! error: a write with [`WriteError::Stopped`] when the peer stopped the
//! stream, a read with [`ReadError::Reset`] when the peer reset it, and
//! either with `ConnectionLost` when the connection is over. A message
//! above the peer's limit ([`Connection::max_message_size`]) is refused
//! with [`SendError::TooLarge`] and the connection lives.
//!
//! An endpoint can also start on a socket the application bound
//! ([`Endpoint::from_socket`]), move to another with its connections kept
//! ([`Endpoint::rebind`]), and give one connection a congestion controller
//! of its own ([`Endpoint::connect_with`]).
//!
//! # Example
//! ```
//! use bytes::Bytes;
//! use tern_peer::{Config, Endpoint, IdentityKey};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let identity = IdentityKey::random()?;
//! let public = identity.public(); // what clients need to know
//! let server = Endpoint::bind("127.0.0.1:0".parse()?, Config::default().identity(identity))?;
//! // A client with an identity of its own proves it when it connects.
//! let client_identity = IdentityKey::random()?;
//! let client_public = client_identity.public();
//! let client = Endpoint::bind("127.0.0.1:0".parse()?, Config::default().identity(client_identity))?;
//!
//! let (to_server, incoming) =
//!     tokio::join!(client.connect(server.local_addr(), &public), server.accept());
//! let (to_server, incoming) = (to_server?, incoming.ok_or("stopped")?);
//! // The server sees who connected before it takes the connection.
//! assert_eq!(incoming.identity(), Some(&client_public));
//! assert_eq!(incoming.remote_address(), client.local_addr());
//! let from_client = incoming.accept();
//! assert_eq!(to_server.peer_identity(), Some(public));
//!
//! // Messages of any size arrive whole, up to the peer's limit.
//! to_server.send(Bytes::from(vec![7u8; 100_000])).await?;
//! assert_eq!(from_client.recv().await?.len(), 100_000);
//! assert_eq!(to_server.max_message_size(), Some(1 << 30)); // the default
//!
//! // Streams carry bytes in order to their end; each half has its owner.
//! let (mut upload, _) = to_server.open_bi().await?;
//! upload.write_all(b"a file's bytes").await?;
//! upload.finish()?;
//! let (_, mut download) = from_client.accept_bi().await?;
//! assert_eq!(download.read_to_end(1 << 20).await?, b"a file's bytes");
//! // Every byte arrived: the peer acknowledged them all.
//! assert_eq!(upload.stopped().await?, None);
//!
//! // A one-way stream: this side writes, the peer reads.
//! let mut log = to_server.open_uni().await?;
//! log.write_all(b"one way").await?;
//! log.finish()?;
//! let mut incoming = from_client.accept_uni().await?;
//! assert_eq!(incoming.read_to_end(1024).await?, b"one way");
//!
//! // Delivers what was sent first, then tells the peer; returns once the
//! // peer has acknowledged everything (or stopped acknowledging for the
//! // drain timeout) and the Close is queued.
//! to_server.close(0, Bytes::from_static(b"done")).await;
//! // The client's network changed: a new socket, its connections kept.
//! client.rebind("127.0.0.1:0".parse()?)?;
//! // Dropping every handle would still let the Close leave; a program about
//! // to end its runtime waits for that.
//! client.wait_idle().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Time
//! The async API takes and gives spans of time as `std::time::Duration`
//! (timeouts, intervals, [`ConnectionStats::rtt`]) and never asks the
//! application for a clock reading. The protocol's clock,
//! [`proto::Instant`] (quanta's: cheaper to read than
//! `std::time::Instant` on the per-packet path), appears only at the
//! driver's level, whose [`proto::Node`] calls take it;
//! [`driver::DriverHandle::now`] reads it.
//!
//! # Layers
//! [`proto`] is tern-proto, the protocol as a pure state machine: every
//! decision is a function of its state, its input and the time it is
//! given, with no socket, thread or clock read, so the hard cases (loss,
//! reordering, floods, roaming) are tested in virtual time and reproduce
//! from a seed; it builds without tokio, for other event loops. This crate
//! adds the I/O: [`driver`] is one tokio task per endpoint that owns the UDP
//! socket (through tern-sockio's batched backends), reads the clock, and
//! runs a [`proto::Node`] — the calls of the sans-IO contract, in the order
//! the trait documents. The async API ([`Endpoint`], [`Connection`],
//! [`SendStream`], [`RecvStream`]) is built on top of both: application handles share the
//! protocol's state with the driver under one short lock and are woken
//! once per driver turn, by what concerns them; what they only read of a
//! connection ([`Connection::stats`], its address and limits) is published
//! by the driver behind a lock of its own and never waits for its turn,
//! and what they queue (a stream write, a message, a datagram) is handed
//! off within the room the protocol had while the driver's turn holds the
//! lock; what a reader reads (stream bytes, messages) the driver moves,
//! once the reader has taken the lock, into a small buffer of the
//! reader's at the end of its turn, still charged to flow control.
//!
//! # Running a node
//! A node decides; the driver moves its datagrams. This one answers every
//! datagram with its length, and the driver runs it on a loopback socket:
//! ```
//! use std::net::SocketAddr;
//!
//! use tern_peer::driver::{Driver, DriverConfig};
//! use tern_peer::proto::{Instant, Node, Transmit, TransmitLimits};
//!
//! #[derive(Default)]
//! struct Lengths {
//!     answers: Vec<(SocketAddr, u8)>,
//! }
//!
//! impl Node for Lengths {
//!     fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, d: &mut [u8]) {
//!         self.answers.push((from, d.len() as u8));
//!     }
//!
//!     fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, buf: &mut [u8]) -> Option<Transmit> {
//!         let (destination, len) = self.answers.pop()?;
//!         buf[0] = len;
//!         Some(Transmit { destination, len: 1, segment_size: None, ttl: None })
//!     }
//!
//!     fn poll_timeout(&mut self) -> Option<Instant> {
//!         None
//!     }
//!
//!     fn handle_timeout(&mut self, _: Instant) {}
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = DriverConfig::default();
//! let (driver, handle) = Driver::bind("127.0.0.1:0".parse()?, Lengths::default(), &config)?;
//! let task = tokio::spawn(driver.run());
//!
//! let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
//! client.send_to(b"hello", handle.local_addr()).await?;
//! let mut answer = [0u8; 1];
//! client.recv_from(&mut answer).await?;
//! assert_eq!(answer, [5]);
//!
//! handle.stop(); // or drop every handle
//! let stopped = task.await??;
//! assert_eq!(stopped.socket.counters().datagrams_sent, 1);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod api;
pub mod driver;

/// The sans-IO protocol this crate drives: tern-proto, re-exported.
pub use tern_proto as proto;

/// The batched UDP I/O the driver runs on: tern-sockio, re-exported (its
/// backends, counters and socket appear in the driver's API).
pub use tern_sockio as sockio;

pub use api::{
    ClosedStream, Config, ConnectError, Connection, ConnectionLost, Endpoint, Incoming, ReadError,
    ReadToEndError, RecvStream, SendDatagramError, SendError, SendStream, Stats, WriteError,
};
pub use bytes::Bytes;
pub use driver::StopCause;
pub use proto::{CongestionConfig, CongestionKind, ConnectionError, ConnectionStats, StreamId};
pub use tern_sockio::Backend;
pub use tern_wire::{IdentityKey, IdentityKind, PublicIdentity, TicketPolicy};
