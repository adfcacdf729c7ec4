//! Tern's connections and endpoints.
//!
//! [`proto`] is the protocol as a pure state machine: every decision is a
//! function of its state, its input and the time it is given, with no
//! socket, thread or clock read, so the hard cases (loss, reordering,
//! floods, roaming) are tested in virtual time and reproduce from a seed.
//! [`driver`] is the I/O half: one tokio task per endpoint that owns the
//! UDP socket (through tern-sockio's batched backends), reads the clock, and
//! runs a [`proto::Node`] — the calls of the sans-IO contract, in the order
//! the trait documents. The async API is built on top of both.
//!
//! # Example
//! An endpoint finds a connection from the receiver index in its packets,
//! whatever address they came from, and a stale or forged index finds
//! nothing:
//! ```
//! use tern_peer::proto::ReceiverIndex;
//!
//! let mut connections = ReceiverIndex::with_capacity(1024);
//! let index = connections.insert("peer A", &mut rand_core::OsRng)?;
//! assert_eq!(connections.get(index), Some(&"peer A"));
//! assert_eq!(connections.remove(index), Some("peer A"));
//! assert_eq!(connections.get(index), None);
//! # Ok::<(), tern_peer::proto::IndexFull>(())
//! ```
//!
//! # Running a node
//! A node decides; the driver moves its datagrams. This one answers every
//! datagram with its length, and the driver runs it on a loopback socket:
//! ```
//! use std::net::SocketAddr;
//!
//! use quanta::Instant;
//! use tern_peer::driver::{Driver, DriverConfig};
//! use tern_peer::proto::{Node, Transmit, TransmitLimits};
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
//!         Some(Transmit { destination, len: 1, segment_size: None })
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

mod api;
pub mod driver;
pub mod proto;

pub use api::{Config, ConnectError, Connection, Endpoint, Error, Stats, Stream};
pub use proto::{ConnectionError, ConnectionStats, StreamId};
pub use tern_wire::{IdentityKey, PublicIdentity};
