//! Tern's wire format: packet layout, frames, their postcard codec, AES-128-GCM
//! packet protection with counter nonces, and the RSA-2048 intro handshake.
//!
//! This crate is pure: no sockets, no threads, no clock. It turns frames into
//! sealed datagrams and back, in buffers the caller owns, without allocating
//! per packet. Every byte it reads may come from an attacker, so every
//! malformed, truncated, forged or replayed input gives a typed error, never
//! a panic. `docs/wire-format.md` is the normative description of the bytes.
//!
//! - [`header`]: packet type and packet number ([`Header`], checked view [`Packet`]).
//! - [`frame`] and [`codec`]: the [`Frame`]s and their encoding.
//! - [`aead`]: [`PacketKey`], AES-128-GCM sealed in place, nonce = IV XOR packet number.
//! - [`packet`]: [`PacketSealer`] / [`PacketOpener`], whole packets.
//! - [`size`]: how much data fits a datagram of a given size.
//! - [`handshake`]: the RSA-2048 intro ([`PendingIntro`], [`Responder`]) that delivers the keys.
//!
//! # Example
//!
//! Seal a packet with two frames, open it on the other side, decode the frames:
//!
//! ```
//! use tern_wire::{Frame, Message, PacketKey, PacketOpener, PacketSealer, Stream};
//!
//! // One direction's key and IV (the intro handshake delivers these).
//! let (key, iv) = ([0x11; 16], [0x22; 12]);
//! let mut sealer = PacketSealer::new(PacketKey::new(&key, &iv));
//! let opener = PacketOpener::new(PacketKey::new(&key, &iv));
//!
//! let mut buf = [0u8; tern_wire::DEFAULT_UDP_PAYLOAD];
//! let mut packet = sealer.start(&mut buf)?;
//! packet.push(&Frame::Message(Message { data: b"hello" }))?;
//! packet.push(&Frame::Stream(Stream { id: 4, offset: 0, fin: true, data: b"bye" }))?;
//! let len = packet.finish()?;
//!
//! let opened = opener.open(&mut buf[..len])?;
//! assert_eq!(opened.packet_number(), 0);
//! let frames: Vec<Frame<'_>> = opened.frames().collect::<Result<_, _>>()?;
//! assert_eq!(frames[0], Frame::Message(Message { data: b"hello" }));
//! assert!(matches!(frames[1], Frame::Stream(Stream { id: 4, fin: true, .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod aead;
pub mod codec;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod header;
pub mod packet;
pub mod size;
#[cfg(test)]
mod test_support;
pub mod varint;

pub use aead::{Backend, IV_LEN, KEY_LEN, PACKET_LIMIT, PacketKey, TAG_LEN};
pub use codec::Frames;
pub use error::{
    AcceptError, DecodeError, EncodeError, HeaderError, IntroError, KeyError, OpenError,
    ReplyError, SealError, SizeError,
};
pub use frame::{
    Ack, AckRanges, AckRangesIter, Close, Frame, FrameType, MAX_ACK_RANGES, MaxData, MaxStreamData,
    Message, Padding, Stream,
};
pub use handshake::{
    Accepted, ConnectionKeys, DirectionKeys, INTRO_LEN, IdentityKey, IntroId, KeyMaterial,
    PROTOCOL_VERSION, PendingIntro, PublicIdentity, ReplayGuard, Responder,
};
pub use header::{Header, MAX_HEADER_LEN, Packet, PacketType};
pub use packet::{OpenedPacket, PacketBuilder, PacketOpener, PacketSealer};
pub use size::{DEFAULT_UDP_PAYLOAD, MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, MaxUdpPayload};
pub use varint::VARINT_MAX;
