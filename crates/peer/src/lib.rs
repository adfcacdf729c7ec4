//! Tern's connections and endpoints.
//!
//! [`proto`] is the protocol as a pure state machine: every decision is a
//! function of its state, its input and the time it is given, with no
//! socket, thread or clock read, so the hard cases (loss, reordering,
//! floods, roaming) are tested in virtual time and reproduce from a seed.
//! The tokio driver and the async API are built on top of it.
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

pub mod driver;
pub mod proto;
