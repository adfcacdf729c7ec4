//! Why a connection ended, and why its commands fail.
//!
//! The errors are shared by the connection and its streams; they live
//! apart from both so that `streams` needs nothing from the connection's
//! own module.

use bytes::Bytes;
use tern_reliability::AckError;
use tern_wire::{CloseKind, DecodeError};

#[cfg(doc)]
use super::Event;
use super::streams::flow_control::FlowControlError;
use super::streams::messages::MessageWindowError;
use super::streams::recv_stream::StreamError;
use super::streams::stream_id::StreamIdError;
use crate::StreamId;

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// No reply to the intro within the handshake timeout: nobody listens
    /// there, or not with the key that was used.
    #[error("the handshake timed out")]
    HandshakeTimedOut,
    /// Nothing arrived from the peer within the idle timeout.
    #[error("the connection timed out")]
    TimedOut,
    /// The peer closed the connection.
    #[error("closed by the peer ({kind:?} code {code})")]
    PeerClosed {
        /// Whose code it is.
        kind: CloseKind,
        /// The code.
        code: u64,
        /// The peer's reason, as it sent it.
        reason: Bytes,
    },
    /// This side closed the connection.
    #[error("closed locally (code {code})")]
    LocallyClosed {
        /// The application's code.
        code: u64,
    },
    /// The endpoint's connection table was full and a new peer came: this
    /// connection, the one that had carried no application data for the
    /// longest, was closed to make room (the peer is told with a transport
    /// Close).
    #[error("evicted: idle while the connection table was full")]
    Evicted,
    /// The peer broke the protocol; the connection was closed with a
    /// transport error.
    #[error("protocol violation: {0}")]
    Protocol(#[from] ProtocolError),
    /// The endpoint's memory budget was reached and this connection held
    /// the most of it: it was closed, and what it held dropped.
    #[error("closed to keep the endpoint within its memory budget")]
    MemoryBudget,
    /// This side requires the initiator to prove its identity
    /// ([`ConnectionConfig::require_identity`](crate::ConnectionConfig::require_identity))
    /// and no proof came within the handshake timeout (the peer is told
    /// with a transport Close).
    #[error("the peer did not prove its identity within the handshake")]
    IdentityNotProven,
    /// This side's packet key reached its confidentiality limit (RFC 9001
    /// §6.6: AEAD_LIMIT_REACHED) before the peer confirmed it, so it could
    /// be neither used nor updated: the peer acknowledged nothing sealed
    /// under it while this side used up the packets kept for that (the
    /// peer is told with a transport Close, the key's last packet).
    #[error("the packet key reached its limit before the peer confirmed it")]
    AeadLimitReached,
}

/// A rule of the protocol that the peer broke (after its packet was
/// authenticated: unauthenticated garbage is only counted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A frame did not decode.
    #[error("malformed frame: {0}")]
    Frame(#[from] DecodeError),
    /// An ACK acknowledged a packet never sent, or was malformed.
    #[error("invalid ACK: {0}")]
    Ack(#[from] AckError),
    /// A stream id the peer may not use.
    #[error("stream: {0}")]
    Stream(StreamIdError),
    /// Stream data broke flow control or the final size.
    #[error("stream data: {0}")]
    StreamData(StreamError),
    /// More data than the connection window allows.
    #[error("{0}")]
    FlowControl(FlowControlError),
    /// A message numbered too far ahead.
    #[error("{0}")]
    MessageWindow(MessageWindowError),
    /// A message larger than this side accepts.
    #[error("message larger than the configured maximum")]
    MessageTooLarge,
    /// A datagram larger than any Tern sender sends: what one packet at
    /// the minimum UDP payload carries (`send_datagram` refuses more).
    #[error("datagram larger than the maximum")]
    DatagramTooLarge,
    /// The peer updated its packet key again before this side had
    /// acknowledged a packet under the previous update (RFC 9001 §6.2:
    /// KEY_UPDATE_ERROR).
    #[error("key update before the previous one was acknowledged")]
    KeyUpdateTooSoon,
    /// The initiator's identity proof did not verify for this session:
    /// not an RSA-2048 key, or a signature forged, altered or made for
    /// another session.
    #[error("the identity proof does not verify")]
    IdentityProof,
    /// The peer acknowledged so little that this side's record of the
    /// packets it sent reached its bound (see `recovery::max_tracked`):
    /// a peer that never acknowledges while it makes this side answer
    /// would otherwise grow it without end.
    #[error("the peer acknowledges too little")]
    TooLittleAcknowledged,
}

/// Why a write, finish or reset on a stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// No such stream to send on (never opened, done with, or one-way).
    #[error("unknown stream {0:?}")]
    UnknownStream(StreamId),
    /// The peer asked this side to stop sending, or the stream was reset.
    #[error("stream stopped (code {0})")]
    Stopped(u64),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// Why a read or stop-sending on a stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No such stream to read (never opened, fully read, or one-way).
    #[error("unknown stream {0:?}")]
    UnknownStream(StreamId),
    /// The peer reset the stream.
    #[error("stream reset by the peer (code {0})")]
    Reset(u64),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// Why `send_message` or `send_datagram` did not take its bytes.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send buffer is full: try again after [`Event::MessagesWritable`]
    /// (a message) or [`Event::DatagramsWritable`] (a datagram).
    #[error("the send buffer is full")]
    Blocked(Bytes),
    /// A datagram larger than a packet can carry.
    #[error("datagram of {0} bytes does not fit a packet")]
    TooLarge(usize),
    /// A message larger than the peer accepts
    /// ([`Connection::peer_max_message_size`](super::Connection::peer_max_message_size)):
    /// sending it would end the connection as a protocol violation.
    #[error("message of {size} bytes is over the peer's {limit}-byte limit")]
    MessageTooLarge {
        /// The message's length.
        size: u64,
        /// The peer's limit.
        limit: u64,
    },
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

impl std::fmt::Debug for SendError {
    // The refused bytes can be large: their length says enough.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Blocked(message) => write!(f, "Blocked({} bytes)", message.len()),
            Self::TooLarge(len) => write!(f, "TooLarge({len})"),
            Self::MessageTooLarge { size, limit } => {
                write!(f, "MessageTooLarge {{ size: {size}, limit: {limit} }}")
            }
            Self::Closed => f.write_str("Closed"),
        }
    }
}
