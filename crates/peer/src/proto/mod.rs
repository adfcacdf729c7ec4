//! The sans-IO protocol core. Time is always an argument
//! (`quanta::Instant`); randomness comes from a caller-supplied RNG, so a
//! seeded run is reproducible.
//!
//! [`Endpoint`] is the whole protocol for one socket: it implements
//! [`Node`], routes each datagram to its [`Connection`] by receiver index,
//! answers and rate-limits handshakes, and is what the application drives
//! (`connect`, `accept`, `connection(handle)` for the commands,
//! `poll_event`). A [`Connection`] ties packet protection, loss recovery,
//! congestion control, flow control, messages and streams together; its
//! documentation gives the order of its calls. Everything below is what
//! they are built from.
//!
//! What an endpoint needs before any connection exists lives here too:
//! - [`ReceiverIndex`]: the table that finds a connection from the 32-bit
//!   index its packets carry, without trusting the source address;
//! - [`IntroLimiter`]: how many handshake intros (each an RSA decryption)
//!   an endpoint will process, per source and in total;
//! - [`AmplificationLimit`]: how many bytes may go to an address that has
//!   not proved it receives them.
//!
//! The data plane of a connection: [`SendStream`] and [`RecvStream`]
//! (bytes copied in once and out once, resent as ranges, reassembled from
//! any order), whole messages that fit a packet ([`MessageSender`],
//! [`MessageReceiver`]: resent whole, delivered once, never held behind
//! each other), flow control ([`RecvWindow`], [`SendCredit`]) and stream
//! numbering with per-side limits ([`StreamId`], [`StreamLimits`]), the
//! send buffer budget the streams of a connection share ([`SendBudget`]); whose
//! turn it is to send ([`Scheduler`]: round-robin, resends first); what a
//! packet carried is a fixed-size [`CarriedRecord`] kept in the sent-packet
//! tracker, so lost information is sent again as new frames.
//!
//! And what each path of a connection needs: [`Path`], the peer's address
//! with its validation (for roaming peers), and [`PathMtu`], the search for
//! the largest datagram it carries.
//!
//! [`Node`] is the contract between all of this and the I/O: the calls an
//! endpoint driver makes, in the order it makes them.

mod amplification;
mod carried;
mod config;
mod connection;
mod endpoint;
mod flow_control;
mod intro_limit;
mod messages;
mod node;
mod path;
mod path_mtu;
mod range_set;
mod receiver_index;
mod recv_stream;
mod ring;
mod scheduler;
mod send_budget;
mod send_stream;
mod stream_id;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod test_rng;

pub use amplification::{AMPLIFICATION_FACTOR, AmplificationLimit};
pub use carried::{CARRIED_MAX, Carried, CarriedRecord};
pub use config::{
    ConnectionConfig, EndpointConfig, INITIAL_CONNECTION_WINDOW, INITIAL_MAX_STREAMS,
    INITIAL_STREAM_WINDOW,
};
pub use connection::{
    Connection, ConnectionError, ConnectionStats, Event, ProtocolError, ReadError, ReadOutcome,
    SendError, WriteError,
};
pub use endpoint::{ConnectError, ConnectionHandle, Endpoint, EndpointStats};
pub use flow_control::{FlowControlError, RecvWindow, SendCredit};
pub use intro_limit::{IntroLimiter, IntroLimiterConfig, IntroRefused};
pub use messages::{MESSAGE_WINDOW, MessageReceiver, MessageSender, MessageWindowError};
pub use node::{Node, SendRefused, Transmit, TransmitLimits};
pub use path::{CHALLENGES_KEPT, ChallengeToken, Path, PathTimeout};
pub use path_mtu::{MAX_PROBES, PathMtu, PathMtuConfig};
pub use range_set::{Gaps, RangeSet};
pub use receiver_index::{IndexFull, ReceiverIndex, VacantIndex};
pub use recv_stream::{RecvStream, StreamError};
pub use scheduler::{Scheduler, Urgency};
pub use send_budget::{Charge, SendBudget};
pub use send_stream::{SendChunk, SendStream};
pub use stream_id::{Direction, Side, StreamId, StreamIdError, StreamLimits};
