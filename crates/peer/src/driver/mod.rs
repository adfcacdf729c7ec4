//! The endpoint driver: the I/O half of an endpoint, on tokio and tern-sockio.
//!
//! One [`Driver`] task owns one UDP socket and runs one sans-IO
//! [`Node`](crate::proto::Node) over it — the protocol's endpoint with all
//! its connections (what [`crate::Endpoint`] runs), or any node that
//! implements the trait. It is the only place in tern-peer that owns a
//! socket, and the clock it gives the node once per turn (quanta's) is the
//! one [`DriverHandle::now`] reads for the node's commands that take a time.
//!
//! How it is meant to be used:
//! - One [`Driver`] per endpoint (per socket). [`Driver::bind`] opens the
//!   socket as [`DriverConfig`] says; [`Driver::run`] is the loop, to spawn
//!   on any tokio runtime or to run with `block_on` on a thread of its own.
//!   Tern recommends one current-thread runtime per endpoint: measured on
//!   this machine, the driver moves 96.8 % of raw tern-sockio's datagrams
//!   that way, but 68.6 % on a two-worker multi-thread runtime, where every
//!   wake crosses threads (docs/benchmarks.md, "Which runtime").
//! - The application reaches the node through [`DriverHandle::with_node`]:
//!   it takes the node's lock (the same lock the driver takes once per loop
//!   turn, never per packet), runs the closure and wakes the driver, which
//!   then sends whatever the closure queued. Keep closures short.
//! - Several endpoints on one port, one per core, each with its own driver:
//!   [`DriverConfig::reuse_port`].
//! - Latency before CPU: [`DriverConfig::busy_poll`] keeps the driver
//!   polling (and yielding to the runtime's other tasks) for a while after
//!   each exchange instead of parking its thread. It needs a CPU per
//!   spinning thread: pin each endpoint's thread to a core of its own.
//! - [`DriverHandle::stop`] ends the loop after the turn it is in;
//!   dropping every handle ends it once the node is idle
//!   ([`Node::is_idle`](crate::proto::Node::is_idle): an endpoint's
//!   connections closed and drained, so the Close a dropped connection
//!   queued still leaves) or [`DriverConfig::drain_timeout`] passed. The
//!   driver then sends what it had already taken from the node and returns
//!   [`Stopped`], the node and the socket. No task outlives it.
//! - [`DriverHandle::stats`] and [`DriverHandle::socket_counters`] show what
//!   it does: turns, datagrams in and out, waits for a full socket, and
//!   tern-sockio's datagrams per system call.
//!
//! ```no_run
//! # use tern_peer::proto::Node;
//! # async fn example<N: Node + Send + 'static>(node: N) -> Result<(), Box<dyn std::error::Error>> {
//! use tern_peer::driver::{Driver, DriverConfig};
//!
//! let config = DriverConfig::default().max_udp_payload(1452);
//! let (driver, handle) = Driver::bind("0.0.0.0:7000".parse()?, node, &config)?;
//! let task = tokio::spawn(driver.run());
//! // The application reaches the node through the handle; the driver wakes.
//! handle.with_node(|node| { /* queue data, open a connection, ... */ })?;
//! handle.stop();
//! let stopped = task.await??;
//! println!("{:?}", stopped.socket.counters());
//! # Ok(())
//! # }
//! ```

mod config;
mod endpoint;
mod send_arena;
mod stats;
mod stopped;

pub use config::DriverConfig;
pub use endpoint::{Driver, DriverHandle};
pub use stats::DriverStats;
pub use stopped::{DriverStopped, StopCause, Stopped};
