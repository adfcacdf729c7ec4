//! A seeded, virtual-time network simulator for sans-IO nodes.
//!
//! Every protocol claim Tern makes — exactly-once delivery under loss, no
//! wedge, fairness, LEDBAT's queuing delay — is proved here in seconds, on
//! any machine, with a seed that replays a failure bit for bit. tern-sim
//! depends on no other Tern crate: it drives anything that implements
//! [`Node`] (handle a datagram, poll a datagram to send, poll and handle a
//! timer). Tern's protocol endpoint runs on it through a small adapter in
//! tern-proto's tests.
//!
//! Links are per direction, each with delay, jitter, reordering, independent
//! and bursty (Gilbert–Elliott) loss, duplication, bit corruption, a
//! bottleneck rate with a finite tail-drop queue, and a maximum datagram
//! size; partitions and NAT rebindings are scheduled events. Nodes can sit
//! behind NATs ([`Sim::add_nat`], [`NatConfig`]) with the mapping and
//! filtering behaviours of RFC 4787, a mapping timeout, seeded port
//! allocation and optional hairpinning. A run never
//! sleeps: [`Sim::step`] jumps to the next event. Per-link counters, an
//! optional event trace, a digest of the whole run and a pcap capture show
//! what happened.
//!
//! # Example
//! A node that answers every datagram, and one that sends a greeting:
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use quanta::Instant;
//! use tern_sim::{LinkConfig, Node, Sim, SimConfig, Transmit};
//!
//! #[derive(Default)]
//! struct Echo { peer: Option<SocketAddr>, out: Vec<Vec<u8>>, got: Vec<Vec<u8>> }
//!
//! impl Node for Echo {
//!     fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, d: &mut [u8]) {
//!         self.got.push(d.to_vec());
//!         if self.peer.is_none() {
//!             self.peer = Some(from);
//!             self.out.push(d.to_vec());
//!         }
//!     }
//!     fn poll_transmit(&mut self, _: Instant, buf: &mut [u8]) -> Option<Transmit> {
//!         let d = self.out.pop()?;
//!         buf[..d.len()].copy_from_slice(&d);
//!         Some(Transmit { source: None, destination: self.peer?, len: d.len(), segment_size: None })
//!     }
//!     fn poll_timeout(&mut self) -> Option<Instant> { None }
//!     fn handle_timeout(&mut self, _: Instant) {}
//! }
//!
//! let (a, b): (SocketAddr, SocketAddr) = ("10.0.0.1:1".parse()?, "10.0.0.2:2".parse()?);
//! let link = LinkConfig { delay: Duration::from_millis(25), ..LinkConfig::default() };
//! let mut sim = Sim::new(SimConfig::seeded(7).with_default_link(link));
//! let client = sim.add_node(Echo { peer: Some(b), out: vec![b"hi".to_vec()], ..Echo::default() }, &[a])?;
//! sim.add_node(Echo::default(), &[b])?;
//! sim.run_until(|sim| !sim.node(client).got.is_empty(), Duration::from_secs(1))?;
//! assert_eq!(sim.node(client).got, [b"hi".to_vec()]);
//! assert_eq!(sim.elapsed(), Duration::from_millis(50)); // one round trip, in virtual time
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod link;
mod nat;
mod node;
mod pcap;
mod seed;
mod sim;
mod trace;

pub use link::{Bottleneck, DropReason, GilbertElliott, LinkConfig, LinkStats};
pub use nat::{
    DEFAULT_MAPPING_TIMEOUT, Filtering, Mapping, Nat, NatConfig, NatStats, PortAllocation,
};
pub use node::{Node, Transmit};
pub use seed::{SEED_ENV, Seed};
pub use sim::{
    AddressInUse, DeadlineReached, MAX_DATAGRAM, NatId, NodeId, Sim, SimConfig, SimStats,
};
pub use trace::{TraceEvent, TraceKind};
