//! Tern's wire format, version 2: packet layout with receiver index, key
//! phase and truncated packet numbers, frames and their postcard codec,
//! AES-128-GCM packet protection with counter nonces and key updates, and
//! the handshakes (to an RSA-2048 or an X25519 identity) that deliver the keys.
//!
//! This crate is pure: no sockets, no threads, no clock. It turns frames into
//! sealed datagrams and back, in buffers the caller owns, without allocating
//! per packet. Every byte it reads may come from an attacker, so every
//! malformed, truncated, forged or replayed input gives a typed error, never
//! a panic. `docs/wire-format.md` is the normative description of the bytes.
//!
//! - [`header`]: packet type, receiver index, key phase, packet number ([`Header`], checked view [`Packet`]).
//! - [`frame`] and [`codec`]: the [`Frame`]s and their encoding.
//! - [`aead`]: [`PacketKey`], AES-128-GCM sealed in place, nonce = IV XOR packet number.
//! - [`keys`]: the HKDF key schedule and [`KeyConfig`].
//! - [`packet`]: [`PacketSealer`] / [`PacketOpener`], whole packets and key updates.
//! - [`size`]: how much data fits a datagram of a given size.
//! - [`identity`]: RSA-2048 and X25519 identities ([`IdentityKey`], [`PublicIdentity`], [`IdentityKind`]).
//! - [`handshake`]: the intro and its reply ([`PendingIntro`], [`Responder`]) that deliver the keys.
//! - [`proof`]: the initiator's optional proof of its own identity ([`IdentityProof`]).
//! - [`replay`]: the responder's [`ReplayGuard`].
//!
//! # Example
//!
//! Seal a packet with two frames, open it on the other side, decode the frames:
//!
//! ```
//! use rand_core::OsRng;
//! use tern_wire::{Frame, KeyConfig, Message, PacketSealer, Stream};
//!
//! // One direction's sealer and opener, for the connection the receiver
//! // knows as 7 (a handshake delivers them; here a fresh random secret).
//! let (mut sealer, mut opener) = PacketSealer::with_opener(&mut OsRng, 7, KeyConfig::default());
//!
//! let mut buf = [0u8; tern_wire::DEFAULT_UDP_PAYLOAD];
//! let mut packet = sealer.start(&mut buf)?;
//! packet.push(&Frame::Message(Message { id: 0, data: b"hello" }))?;
//! packet.push(&Frame::Stream(Stream { id: 4, offset: 0, fin: true, data: b"bye" }))?;
//! let (len, packet_number) = packet.finish()?;
//!
//! let opened = opener.open(&mut buf[..len])?;
//! assert_eq!(opened.packet_number(), packet_number);
//! let frames: Vec<Frame<'_>> = opened.frames().collect::<Result<_, _>>()?;
//! assert_eq!(frames[0], Frame::Message(Message { id: 0, data: b"hello" }));
//! assert!(matches!(frames[1], Frame::Stream(Stream { id: 4, fin: true, .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub mod aead;
pub mod codec;
mod crypto;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod header;
pub mod identity;
pub mod keys;
pub mod packet;
pub mod proof;
pub mod rendezvous;
pub mod replay;
pub mod size;
#[cfg(test)]
mod test_support;
pub mod ticket;
pub mod token;
pub mod varint;
#[cfg(all(test, wire_format_doc))]
mod wire_format_doc;

/// The random-number traits the API takes (`IdentityKey::generate`,
/// `PacketSealer::with_opener`), re-exported so callers name the same
/// version.
pub use rand_core;

pub use aead::{Backend, IV_LEN, KEY_LEN, PACKET_LIMIT, PacketKey, TAG_LEN};
pub use codec::{FrameHandler, Frames};
pub use error::{
    AcceptError, DecodeError, EncodeError, HeaderError, IntroError, KeyError, KeyUpdateError,
    OpenError, ProofError, ReplyBuildError, ReplyError, SealError, SizeError,
};
pub use frame::{
    Ack, AckFrameRanges, AckFrameRangesIter, AckFrequency, Close, CloseKind,
    DEFAULT_MAX_MESSAGE_SIZE, DataBlocked, Datagram, Frame, FrameType, Identity, MAX_ACK_RANGES,
    MAX_REQUESTED_ACK_DELAY, MaxData, MaxMessageSize, MaxStreamData, MaxStreams, Message,
    NewTicket, ObservedAddress, Padding, PathChallenge, PathResponse, ResetStream, StopSending,
    Stream, StreamDataBlocked,
};
pub use handshake::{
    Accepted, ConnectionKeys, EphemeralKey, EphemeralKeys, Established, INTRO_LEN, MAX_REPLY_LEN,
    PROTOCOL_VERSION, PendingIntro, RESUME_REFUSED_LEN, RefusedReply, Responder, TicketPolicy,
    Transcript, intro_id, parse_resume_refused, write_resume_refused,
};
pub use header::{
    Header, KeyPhase, MAX_HEADER_LEN, MAX_PACKET_NUMBER, Packet, PacketNumber, PacketType,
    peek_receiver_index,
};
pub use identity::{IdentityKey, IdentityKind, PublicIdentity};
pub use keys::{KeyConfig, SECRET_LEN};
pub use packet::{OpenedPacket, PacketBuilder, PacketOpener, PacketSealer};
pub use proof::IdentityProof;
pub use rendezvous::{
    Candidates, ConnectVia, FINGERPRINT_LEN, Introduce, IntroductionRefused, KeyFingerprint,
    MAX_CANDIDATES, MAX_START_DELAY, PUNCH_LEN, PUNCH_TYPE, RELAY_HEADER_LEN, RELAY_TYPE,
    RefusalReason, Register, RelayGrant, RelayRefused, RelayRequest, is_unicast_source,
    parse_punch, parse_relay, write_punch, write_relay_header,
};
pub use replay::{DEFAULT_INTRO_RATE, DEFAULT_TIMESTAMP_WINDOW, IntroId, ReplayGuard};
pub use size::{DEFAULT_UDP_PAYLOAD, MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, MaxUdpPayload};
pub use ticket::{ResumptionSecret, TICKET_LEN, Ticket, TicketContents, TicketKey};
pub use token::{
    INTRO_WITH_TOKEN_LEN, RETRY_LEN, TOKEN_LEN, Token, TokenError, TokenKey, parse_retry,
    split_intro, token_issued, write_retry,
};
pub use varint::VARINT_MAX;
