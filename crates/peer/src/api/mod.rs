//! The async API: [`Endpoint`], [`Connection`] and [`Stream`] on tokio.
//!
//! An [`Endpoint`] is one UDP socket run by one driver task
//! ([`crate::driver`]) over the protocol ([`crate::proto`]). Application
//! handles share the protocol's state with the driver under one short lock
//! and wake it when they queued something; the driver wakes exactly the
//! tasks its turn concerned (a message arrived, room to send, a stream
//! readable), once per turn.

mod config;
mod connection;
mod endpoint;
mod error;
mod state;
mod stream;

pub use config::Config;
pub use connection::Connection;
pub use endpoint::{Endpoint, Stats};
pub use error::{ConnectError, Error};
pub use stream::Stream;
