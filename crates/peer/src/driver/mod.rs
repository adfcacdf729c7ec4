//! The endpoint driver: the I/O half of an endpoint, on tokio and tern-sockio.
//!
//! One [`Driver`] task owns one UDP socket and runs one sans-IO
//! [`Node`](crate::proto::Node) over it — the future endpoint with all its
//! connections, or any node that implements the trait. It is the only place
//! in tern-peer that owns a socket or reads a clock.
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

pub use config::DriverConfig;
pub use endpoint::{Driver, DriverHandle, DriverStats, DriverStopped, Stopped};
