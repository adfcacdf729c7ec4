//! One small error enum per operation.
//!
//! Every input that comes from the network can fail in several ways; each way
//! has its own variant so callers can count and log them, and none of them is
//! ever a panic. The enums are `#[non_exhaustive]`: later versions may learn
//! new ways to fail without breaking callers.

use crate::frame::FrameType;
use crate::header::PacketType;

/// Parsing a packet header failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The datagram has no bytes at all.
    #[error("empty datagram")]
    Empty,
    /// The first byte is not a packet type Tern knows.
    #[error("unknown packet type {0:#04x}")]
    UnknownType(u8),
    /// The datagram ends inside the header.
    #[error("truncated header")]
    Truncated,
    /// A reserved bit is set (bit 3 of any type byte, the key phase of an
    /// intro reply, any low bit of an intro).
    #[error("reserved bits set in type byte {0:#04x}")]
    ReservedBits(u8),
}

/// Writing a header or a frame failed; nothing was written past the caller's slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The destination slice cannot hold the encoding.
    #[error("buffer too small: {needed} bytes needed, {available} available")]
    BufferTooSmall {
        /// Bytes the encoding needs.
        needed: usize,
        /// Bytes the slice has.
        available: usize,
    },
    /// A field is larger than the wire format allows (see [`crate::VARINT_MAX`]).
    #[error("{field} = {value} is larger than the wire format allows")]
    ValueTooLarge {
        /// The field's name.
        field: &'static str,
        /// The refused value (saturated to `u64::MAX` for durations).
        value: u64,
    },
    /// A padding frame must cover at least one byte.
    #[error("padding of zero bytes")]
    EmptyPadding,
    /// ACK ranges must be non-empty, descending, separated by at least one
    /// missing packet number, and at most [`crate::MAX_ACK_RANGES`] long.
    #[error("invalid ACK ranges: {0}")]
    InvalidAckRanges(&'static str),
    /// A field that must be at least 1 is 0 (an ACK-eliciting threshold).
    #[error("{0} must not be zero")]
    Zero(&'static str),
    /// An address no packet can come from (unspecified, multicast,
    /// broadcast, or port 0) in an observed-address report.
    #[error("{0} is not an address packets come from")]
    InvalidAddress(core::net::SocketAddr),
}

/// Decoding a frame failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// There are no bytes to decode.
    #[error("no bytes to decode")]
    Empty,
    /// The frame-type byte is not one Tern knows.
    #[error("unknown frame type {0:#04x}")]
    UnknownFrameType(u8),
    /// The frame ends before its fields do, or a length runs past the end.
    #[error("{0:?} frame is truncated")]
    Truncated(FrameType),
    /// A field is not a valid encoding (overlong varint, a bool other than 0 or 1).
    #[error("{0:?} frame is malformed")]
    Malformed(FrameType),
    /// A field is encoded with more bytes than needed.
    #[error("{0:?} frame is not minimally encoded")]
    NonCanonical(FrameType),
    /// A field is above [`crate::VARINT_MAX`], or an offset plus a length
    /// is, or above the frame's own bound (an ACK-eliciting threshold above
    /// `u32::MAX`, a requested ACK delay above
    /// [`crate::MAX_REQUESTED_ACK_DELAY`]).
    #[error("{0:?} frame carries an absurd value")]
    ValueTooLarge(FrameType),
    /// A field that must be at least 1 is 0 (an ACK-eliciting threshold).
    #[error("{0:?} frame carries a zero where it may not")]
    Zero(FrameType),
    /// ACK ranges that go below packet number zero or number more than
    /// [`crate::MAX_ACK_RANGES`].
    #[error("invalid ACK ranges: {0}")]
    InvalidAckRanges(&'static str),
    /// Bytes follow a frame that had to fill its slice exactly.
    #[error("{0} trailing bytes after the frame")]
    TrailingBytes(usize),
}

/// Sealing a packet failed; the packet number was not consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The key has sealed as many packets as it safely can: update it
    /// ([`crate::PacketSealer::update_key`]) or close.
    #[error("packet limit of {limit} reached for this key")]
    PacketLimitReached {
        /// The per-key limit ([`crate::PACKET_LIMIT`] unless lowered).
        limit: u64,
    },
    /// The direction used all 2^62 packet numbers.
    #[error("packet numbers exhausted")]
    PacketNumbersExhausted,
    /// The peer has not acknowledged anything in the last 2^31 packets, so
    /// even a 4-byte packet number could be rebuilt wrongly.
    #[error("too many unacknowledged packets for a 4-byte packet number")]
    TooManyUnacknowledged,
    /// The buffer cannot hold the header, the payload and the tag.
    #[error("buffer too small: {needed} bytes needed, {available} available")]
    BufferTooSmall {
        /// Bytes the packet needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// The cipher refused the input (only if a payload exceeded GCM's 64 GiB limit).
    #[error("the AEAD refused to seal")]
    Cipher,
}

/// A sender could not update its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyUpdateError {
    /// The peer has not acknowledged a packet sealed under the current key
    /// yet, so it may not hold the key: updating again could leave it two
    /// phases behind (RFC 9001 §6.1).
    #[error("the current key is not confirmed by the peer yet")]
    NotConfirmed,
}

/// Opening (authenticating and decrypting) a packet failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The header is not valid.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The packet is not of the type this path opens (an intro or an intro
    /// reply on the data path, a data packet on the handshake path).
    #[error("{0:?} packets are not opened here")]
    WrongType(PacketType),
    /// The packet names another connection.
    #[error("receiver index {0:#010x} is not this connection's")]
    WrongReceiverIndex(u32),
    /// The packet is too short to hold the 16-byte tag.
    #[error("packet too short for the authentication tag")]
    TooShort,
    /// The tag does not match: wrong key, or the header, ciphertext or tag
    /// was changed on the way.
    #[error("packet failed authentication")]
    Authentication,
}

/// A maximum UDP payload outside what Tern supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// The value is below [`crate::MIN_UDP_PAYLOAD`] or above [`crate::MAX_UDP_PAYLOAD`].
    #[error("max UDP payload {0} is outside 1200..=65507")]
    OutOfRange(usize),
}

/// Loading or saving an RSA identity key failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The PKCS#8 document (private key) is not valid.
    #[error("invalid PKCS#8 private key")]
    Pkcs8(#[source] rsa::pkcs8::Error),
    /// The SubjectPublicKeyInfo document (public key) is not valid.
    #[error("invalid SPKI public key")]
    Spki(#[source] rsa::pkcs8::spki::Error),
    /// The key is valid RSA but not the 2048-bit size the intro is laid out for.
    #[error("RSA key has {0} bits, Tern uses 2048")]
    WrongSize(usize),
    /// Key generation failed.
    #[error("RSA key generation failed")]
    Generation(#[source] rsa::Error),
}

/// Writing an intro failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IntroError {
    /// The buffer cannot hold the intro packet.
    #[error("buffer too small: {needed} bytes needed, {available} available")]
    BufferTooSmall {
        /// Bytes the intro needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// The clock given is before 1970.
    #[error("the current time is before the UNIX epoch")]
    ClockBeforeEpoch,
    /// The responder's X25519 key is a low-order point, or the
    /// initiator's own gives an all-zero exchange with it.
    #[error("degenerate X25519 key")]
    DegenerateKey,
    /// Sealing the X25519 intro failed.
    #[error("sealing the intro failed")]
    Sealing,
    /// RSA-OAEP encryption failed.
    #[error("RSA-OAEP encryption failed")]
    Encryption(#[source] rsa::Error),
}

/// A responder refused an intro.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptError {
    /// The datagram is not an intro packet.
    #[error("not an intro packet")]
    NotAnIntro,
    /// An intro is exactly 257 bytes long.
    #[error("intro has {0} bytes, expected 257")]
    WrongLength(usize),
    /// The intro does not open with our key: RSA-OAEP decryption or the
    /// X25519 intro's seals failed (not made for our key, or altered).
    #[error("intro does not decrypt with our key")]
    Decryption,
    /// The decrypted contents are not an intro body.
    #[error("malformed intro body")]
    Malformed,
    /// The intro's secret is all zeros, or its X25519 key is a low-order
    /// point that would make the shared secret all zeros.
    #[error("degenerate key material")]
    DegenerateKey,
    /// The initiator speaks a protocol version we do not.
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u32),
    /// The intro's timestamp is outside the accepted window around now, or
    /// not newer than an intro the replay guard had to evict when full.
    #[error("intro timestamp is {skew_ms} ms away from now, outside the window or too old")]
    StaleTimestamp {
        /// How far the timestamp is from the responder's clock, in milliseconds.
        skew_ms: u64,
    },
    /// This intro was already accepted within the window. The id lets an
    /// endpoint that still holds the connection resend the reply it kept
    /// (the initiator repeats its intro when a reply is lost).
    #[error("replayed intro")]
    Replayed {
        /// The repeated intro's id.
        intro_id: [u8; 16],
    },
    /// The clock given is before 1970.
    #[error("the current time is before the UNIX epoch")]
    ClockBeforeEpoch,
    /// An intro for the other kind of identity: an RSA intro to an X25519
    /// responder, or the reverse.
    #[error("intro for another kind of identity")]
    WrongKind,
    /// A resumed intro whose ticket does not open here: forged, altered,
    /// sealed by another responder or before this one restarted, or this
    /// responder issues no tickets.
    #[error("resumption ticket does not open")]
    TicketRefused,
    /// A resumed intro whose ticket is older than the ticket lifetime.
    #[error("resumption ticket expired")]
    TicketExpired,
    /// A resumed intro whose ticket was already used (tickets are
    /// single-use).
    #[error("resumption ticket already used")]
    TicketReused,
}

impl AcceptError {
    /// Whether the intro was a resumed one this responder will not resume:
    /// its initiator should fall back to a full intro.
    #[must_use]
    pub const fn is_ticket_refusal(&self) -> bool {
        matches!(
            self,
            Self::TicketRefused | Self::TicketExpired | Self::TicketReused
        )
    }
}

/// An initiator could not use a packet as the reply to its intro.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// The packet is not an intro reply for this intro, or did not open
    /// with the keys it implies.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The reply's X25519 key is a low-order point (all-zero shared secret),
    /// or the derived keys are degenerate.
    #[error("degenerate key material in the reply")]
    DegenerateKey,
}

/// A responder could not build its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyBuildError {
    /// The frames do not fit in three times the intro's size (or in the buffer).
    #[error(transparent)]
    Encode(EncodeError),
    /// The buffer cannot hold the header and the tag.
    #[error(transparent)]
    Seal(SealError),
    /// The derived keys are degenerate (never happens with an accepted intro).
    #[error("degenerate key material")]
    DegenerateKey,
}

/// Making or checking an initiator's identity proof failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// The proof's public key is not an RSA-2048 SubjectPublicKeyInfo key
    /// (or this side's own key could not be encoded).
    #[error("identity key refused")]
    Key(#[source] KeyError),
    /// The signature does not verify for this session's transcript under
    /// the proof's key: forged, altered, or made for another session.
    #[error("identity signature does not verify for this session")]
    Signature,
    /// The signature, read as a big-endian integer, is not below the key's
    /// modulus (RFC 8017 §5.2.2: "signature representative out of range"):
    /// a valid signature plus the modulus, which the RSA arithmetic alone
    /// would accept.
    #[error("identity signature is not below the key's modulus")]
    SignatureOutOfRange,
    /// RSA signing failed.
    #[error("RSA signing failed")]
    Signing(#[source] rsa::Error),
    /// The key is neither RSA nor X25519.
    #[error("an identity proof takes an RSA or X25519 key")]
    NotRsa,
    /// An X25519 identity's proof needs the responder's ephemeral key
    /// (the initiator's public half, the responder's private half), which
    /// this transcript does not hold: the responder let it go (the
    /// initiator proved an identity in the intro), or this is the other
    /// side's transcript.
    #[error("no ephemeral key to prove or check an X25519 identity with")]
    NoExchange,
}
