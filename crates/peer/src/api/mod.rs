//! The async API: [`Endpoint`], [`Incoming`], [`Connection`], [`SendStream`]
//! and [`RecvStream`] on tokio.
//!
//! An [`Endpoint`] is one UDP socket run by one driver task
//! ([`crate::driver`]) over the protocol ([`crate::proto`]). Application
//! handles share the protocol's state with the driver under one short lock
//! and wake it when they queued something; the driver wakes exactly the
//! tasks its turn concerned (a message arrived, room to send, a stream
//! readable), once per turn. What handles only read of a connection
//! (figures, the peer's address and limits) the driver publishes per
//! connection behind a lock of its own, so reading it never waits for the
//! driver's turn.

mod candidates;
mod config;
mod connection;
#[cfg(test)]
mod delivery_tests;
mod endpoint;
mod error;
#[cfg(test)]
mod hand_off_tests;
mod incoming;
#[cfg(test)]
mod open_tests;
mod published;
mod recv_stream;
mod send_stream;
mod state;

pub use config::Config;
pub use connection::Connection;
pub use endpoint::{Endpoint, Stats};
pub use error::{
    ClosedStream, ConnectError, ConnectionLost, ReadError, ReadToEndError, SendDatagramError,
    SendError, WriteError,
};
pub use incoming::Incoming;
pub use recv_stream::RecvStream;
pub use send_stream::SendStream;
