//! The packet header: a type byte, the receiver's index and a truncated
//! packet number.
//!
//! Two layers, as smoltcp does it: [`Header`] is the value (`parse`, `emit`,
//! `len`), [`Packet`] is a checked view over a received datagram whose
//! accessors cannot fail once [`Packet::new_checked`] has succeeded.
//!
//! ```text
//! intro:       0x10 | 256 bytes RSA-OAEP ciphertext
//! x25519 intro: 0x50 | initiator ephemeral key (32) | sealed static key (48) | sealed body (176)
//! intro reply: 0x20|L   | receiver index (4) | packet number (L+1) | X25519 key (32) | sender index (4) | ciphertext | tag (16)
//! data:        0x30|K|L | receiver index (4) | packet number (L+1) | ciphertext | tag (16)
//! ```
//!
//! `K` (bit 2) is the key phase, `L` (bits 0-1) the packet number's length
//! minus one; bit 3 is reserved and must be zero. The header bytes of a
//! protected packet are the AEAD's associated data, so every bit of them is
//! authenticated.
//!
//! The packet number on the wire is the low 1 to 4 bytes of a 62-bit number
//! that counts one direction's packets for the life of the connection
//! (RFC 9000 §17.1); [`PacketNumber::encode`] picks the length from what the
//! peer acknowledged, [`PacketNumber::decode`] rebuilds the full number from
//! the largest one received.

use crate::error::{EncodeError, HeaderError};

/// Length of an X25519 public key.
pub const X25519_KEY_LEN: usize = 32;

/// The longest header Tern writes: a data packet with a 4-byte packet number
/// (type, receiver index, packet number).
pub const MAX_HEADER_LEN: usize = 1 + 4 + 4;

/// The largest packet number: numbers are 62-bit, as in QUIC.
pub const MAX_PACKET_NUMBER: u64 = (1 << 62) - 1;

/// Bits of the type byte that name the packet type.
const TYPE_MASK: u8 = 0xf0;
/// The reserved bit, which must be zero.
const RESERVED_BIT: u8 = 0x08;
/// The key phase bit of a data packet.
const KEY_PHASE_BIT: u8 = 0x04;
/// The packet number length minus one.
const PN_LEN_MASK: u8 = 0x03;

/// The kind of a Tern packet, from the high four bits of its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// The initiator's handshake packet: RSA-OAEP encrypted key material.
    Intro = 0x10,
    /// The responder's answer to an intro: its X25519 key, then sealed frames.
    IntroReply = 0x20,
    /// A packet of frames sealed with the connection's packet key.
    Data = 0x30,
    /// The responder's answer to an intro it will not decrypt yet: an
    /// address-validation token to send the intro again with.
    Retry = 0x40,
    /// The initiator's handshake packet to an X25519 identity: its
    /// ephemeral key, then what Diffie-Hellman exchanges sealed.
    IntroX25519 = 0x50,
    /// The initiator's handshake packet that resumes an earlier session:
    /// its ephemeral key, the responder's ticket, and what the ticket's
    /// resumption secret sealed.
    IntroResume = 0x60,
    /// The responder's answer to a resumed intro it will not take: send a
    /// full intro instead.
    ResumeRefused = 0x70,
}

impl PacketType {
    /// Reads the type from a first byte; anything Tern does not know is refused.
    pub fn from_byte(byte: u8) -> Result<Self, HeaderError> {
        match byte & TYPE_MASK {
            0x10 => Ok(Self::Intro),
            0x20 => Ok(Self::IntroReply),
            0x30 => Ok(Self::Data),
            0x40 => Ok(Self::Retry),
            0x50 => Ok(Self::IntroX25519),
            0x60 => Ok(Self::IntroResume),
            0x70 => Ok(Self::ResumeRefused),
            _ => Err(HeaderError::UnknownType(byte)),
        }
    }
}

/// Which of two alternating keys sealed a data packet (RFC 9001 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KeyPhase(pub bool);

impl KeyPhase {
    /// The other phase.
    #[must_use]
    pub const fn flipped(self) -> Self {
        Self(!self.0)
    }
}

/// A packet number as sent: its low `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketNumber {
    truncated: u32,
    len: u8,
}

impl PacketNumber {
    /// Truncates `full` to the fewest bytes (1 to 4) that represent more
    /// than twice the distance to the largest number the peer acknowledged
    /// (RFC 9000 §17.1), or `None` if even 4 bytes cannot.
    #[must_use]
    #[inline]
    pub const fn encode(full: u64, largest_acked: Option<u64>) -> Option<Self> {
        let unacked = match largest_acked {
            Some(acked) if acked < full => full - acked,
            Some(_) => 1,
            None => full.saturating_add(1),
        };
        let len = if unacked < 1 << 7 {
            1
        } else if unacked < 1 << 15 {
            2
        } else if unacked < 1 << 23 {
            3
        } else if unacked < 1 << 31 {
            4
        } else {
            return None;
        };
        let mask = (1u64 << (8 * len)) - 1;
        Some(Self {
            truncated: (full & mask) as u32,
            len,
        })
    }

    /// As [`encode`](Self::encode), in two bytes at least: how Data
    /// packets are numbered. RFC 9000 §17.1 allows one byte while fewer
    /// than 128 packets are unacknowledged, and lets a sender use more. A
    /// packet the path holds back is rebuilt against the largest number
    /// received by the time it arrives, and a sender whose packets were
    /// all just acknowledged (after a wait for credit or an idle moment)
    /// may send more than 128 in the time one is held back (76 ms on the
    /// matrix's reordering path at 100 Mbit/s): rebuilt wrong, it failed to
    /// open, was declared lost, and its loss could never prove spurious.
    /// Two bytes tell apart 32 767 packets either side.
    #[must_use]
    #[inline]
    pub const fn encode_data(full: u64, largest_acked: Option<u64>) -> Option<Self> {
        match Self::encode(full, largest_acked) {
            Some(Self { len: 1, .. }) => Some(Self {
                truncated: (full & 0xffff) as u32,
                len: 2,
            }),
            other => other,
        }
    }

    /// A truncated number as read from the wire; `len` is 1 to 4.
    #[must_use]
    pub const fn from_wire(truncated: u32, len: u8) -> Option<Self> {
        if len == 0 || len > 4 || (len < 4 && truncated >> (8 * len) != 0) {
            return None;
        }
        Some(Self { truncated, len })
    }

    /// The bytes on the wire.
    #[must_use]
    pub const fn len(self) -> usize {
        self.len as usize
    }

    /// Always false: at least one byte is sent.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        false
    }

    /// The truncated value.
    #[must_use]
    pub const fn truncated(self) -> u32 {
        self.truncated
    }

    /// The full packet number closest to one past `largest_received`
    /// (RFC 9000 Appendix A.3).
    #[must_use]
    #[inline]
    pub const fn decode(self, largest_received: Option<u64>) -> u64 {
        let expected = match largest_received {
            Some(largest) => largest + 1,
            None => 0,
        };
        let window = 1u64 << (8 * self.len);
        let half = window / 2;
        let candidate = (expected & !(window - 1)) | self.truncated as u64;
        if candidate + half <= expected && candidate < (1 << 62) - window {
            candidate + window
        } else if candidate > expected + half && candidate >= window {
            candidate - window
        } else {
            candidate
        }
    }
}

/// A parsed packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// An intro; its body is the RSA ciphertext.
    Intro,
    /// An intro to an X25519 identity; its body is the initiator's
    /// ephemeral key and what it sealed.
    IntroX25519,
    /// A Retry; its body is the intro id and the token.
    Retry,
    /// A resumed intro; its body is the initiator's ephemeral key, the
    /// ticket and what the ticket's secret sealed.
    IntroResume,
    /// A ResumeRefused; its body is the intro id.
    ResumeRefused,
    /// The reply to an intro. Everything here is associated data.
    IntroReply {
        /// The index the initiator chose for this connection.
        receiver_index: u32,
        /// The packet number (the responder's first packets).
        packet_number: PacketNumber,
        /// The responder's ephemeral X25519 public key.
        ephemeral: [u8; X25519_KEY_LEN],
        /// The index the responder chose: the initiator's data packets carry it.
        sender_index: u32,
    },
    /// A data packet.
    Data {
        /// The index the receiver chose for this connection.
        receiver_index: u32,
        /// Which key sealed the packet.
        key_phase: KeyPhase,
        /// The packet number.
        packet_number: PacketNumber,
    },
}

impl Header {
    /// The packet type.
    #[must_use]
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Self::Intro => PacketType::Intro,
            Self::IntroX25519 => PacketType::IntroX25519,
            Self::Retry => PacketType::Retry,
            Self::IntroResume => PacketType::IntroResume,
            Self::ResumeRefused => PacketType::ResumeRefused,
            Self::IntroReply { .. } => PacketType::IntroReply,
            Self::Data { .. } => PacketType::Data,
        }
    }

    /// The receiver's index, for protected packets.
    #[must_use]
    pub const fn receiver_index(&self) -> Option<u32> {
        match self {
            Self::Intro
            | Self::IntroX25519
            | Self::Retry
            | Self::IntroResume
            | Self::ResumeRefused => None,
            Self::IntroReply { receiver_index, .. } | Self::Data { receiver_index, .. } => {
                Some(*receiver_index)
            }
        }
    }

    /// The truncated packet number, for protected packets.
    #[must_use]
    pub const fn packet_number(&self) -> Option<PacketNumber> {
        match self {
            Self::Intro
            | Self::IntroX25519
            | Self::Retry
            | Self::IntroResume
            | Self::ResumeRefused => None,
            Self::IntroReply { packet_number, .. } | Self::Data { packet_number, .. } => {
                Some(*packet_number)
            }
        }
    }

    /// The number of bytes [`Header::emit`] writes.
    #[must_use]
    #[inline]
    pub const fn len(&self) -> usize {
        match self {
            Self::Intro
            | Self::IntroX25519
            | Self::Retry
            | Self::IntroResume
            | Self::ResumeRefused => 1,
            Self::IntroReply { packet_number, .. } => {
                1 + 4 + packet_number.len() + X25519_KEY_LEN + 4
            }
            Self::Data { packet_number, .. } => 1 + 4 + packet_number.len(),
        }
    }

    /// Always false: a header has at least its type byte. Present because `len` is.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the header at the start of `buf`, returning its length.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let len = self.len();
        let available = buf.len();
        let dst = buf.get_mut(..len).ok_or(EncodeError::BufferTooSmall {
            needed: len,
            available,
        })?;
        match self {
            Self::Intro => dst[0] = PacketType::Intro as u8,
            Self::IntroX25519 => dst[0] = PacketType::IntroX25519 as u8,
            Self::Retry => dst[0] = PacketType::Retry as u8,
            Self::IntroResume => dst[0] = PacketType::IntroResume as u8,
            Self::ResumeRefused => dst[0] = PacketType::ResumeRefused as u8,
            Self::IntroReply {
                receiver_index,
                packet_number,
                ephemeral,
                sender_index,
            } => {
                dst[0] = PacketType::IntroReply as u8 | (packet_number.len - 1);
                let at = emit_index_and_number(dst, *receiver_index, *packet_number);
                dst[at..at + X25519_KEY_LEN].copy_from_slice(ephemeral);
                dst[at + X25519_KEY_LEN..].copy_from_slice(&sender_index.to_be_bytes());
            }
            Self::Data {
                receiver_index,
                key_phase,
                packet_number,
            } => {
                let phase = if key_phase.0 { KEY_PHASE_BIT } else { 0 };
                dst[0] = PacketType::Data as u8 | phase | (packet_number.len - 1);
                emit_index_and_number(dst, *receiver_index, *packet_number);
            }
        }
        Ok(len)
    }

    /// Parses the header at the start of `bytes`, returning it and its length.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<(Self, usize), HeaderError> {
        let (&first, rest) = bytes.split_first().ok_or(HeaderError::Empty)?;
        let packet_type = PacketType::from_byte(first)?;
        if first & RESERVED_BIT != 0 {
            return Err(HeaderError::ReservedBits(first));
        }
        let header = match packet_type {
            PacketType::IntroReply | PacketType::Data => {
                return Self::parse_protected(packet_type, first, rest);
            }
            PacketType::Intro => Self::Intro,
            PacketType::Retry => Self::Retry,
            PacketType::IntroX25519 => Self::IntroX25519,
            PacketType::IntroResume => Self::IntroResume,
            PacketType::ResumeRefused => Self::ResumeRefused,
        };
        // A packet without index or number has no flags either.
        if first != packet_type as u8 {
            return Err(HeaderError::ReservedBits(first));
        }
        Ok((header, 1))
    }

    /// The rest of a header with a receiver index and a packet number
    /// (`packet_type` is `IntroReply` or `Data`), after its first byte.
    #[inline]
    fn parse_protected(
        packet_type: PacketType,
        first: u8,
        rest: &[u8],
    ) -> Result<(Self, usize), HeaderError> {
        let (index, rest) = rest
            .split_first_chunk::<4>()
            .ok_or(HeaderError::Truncated)?;
        let receiver_index = u32::from_be_bytes(*index);
        let pn_len = (first & PN_LEN_MASK) + 1;
        let pn_bytes = rest
            .get(..usize::from(pn_len))
            .ok_or(HeaderError::Truncated)?;
        let truncated = pn_bytes
            .iter()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
        let packet_number = PacketNumber {
            truncated,
            len: pn_len,
        };
        let rest = &rest[usize::from(pn_len)..];
        let header = if packet_type == PacketType::IntroReply {
            if first & KEY_PHASE_BIT != 0 {
                return Err(HeaderError::ReservedBits(first));
            }
            let (ephemeral, rest) = rest
                .split_first_chunk::<X25519_KEY_LEN>()
                .ok_or(HeaderError::Truncated)?;
            let (sender, _) = rest
                .split_first_chunk::<4>()
                .ok_or(HeaderError::Truncated)?;
            Self::IntroReply {
                receiver_index,
                packet_number,
                ephemeral: *ephemeral,
                sender_index: u32::from_be_bytes(*sender),
            }
        } else {
            Self::Data {
                receiver_index,
                key_phase: KeyPhase(first & KEY_PHASE_BIT != 0),
                packet_number,
            }
        };
        Ok((header, header.len()))
    }
}

/// Writes the receiver index and packet number after the type byte; returns
/// where the next field starts.
#[inline]
fn emit_index_and_number(
    dst: &mut [u8],
    receiver_index: u32,
    packet_number: PacketNumber,
) -> usize {
    dst[1..5].copy_from_slice(&receiver_index.to_be_bytes());
    let len = packet_number.len();
    let bytes = packet_number.truncated.to_be_bytes();
    dst[5..5 + len].copy_from_slice(&bytes[4 - len..]);
    5 + len
}

/// The receiver index of a protected datagram, read without any key, so an
/// endpoint can find the connection a packet belongs to whatever address it
/// came from. The index is authenticated only once the packet opens.
#[must_use]
pub fn peek_receiver_index(datagram: &[u8]) -> Option<u32> {
    let (&first, rest) = datagram.split_first()?;
    match PacketType::from_byte(first).ok()? {
        PacketType::Intro
        | PacketType::IntroX25519
        | PacketType::Retry
        | PacketType::IntroResume
        | PacketType::ResumeRefused => None,
        PacketType::IntroReply | PacketType::Data => {
            rest.first_chunk::<4>().map(|b| u32::from_be_bytes(*b))
        }
    }
}

/// A checked view over a received datagram: the header has been parsed, so
/// the accessors below never fail and never panic.
#[derive(Debug, Clone)]
pub struct Packet<T> {
    buffer: T,
    header: Header,
    header_len: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Validates the header of `buffer`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, HeaderError> {
        let (header, header_len) = Header::parse(buffer.as_ref())?;
        Ok(Self {
            buffer,
            header,
            header_len,
        })
    }

    /// The parsed header.
    #[must_use]
    pub const fn header(&self) -> Header {
        self.header
    }

    /// The header bytes exactly as received: the AEAD's associated data.
    #[must_use]
    pub fn header_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len]
    }

    /// Everything after the header: ciphertext and tag, or the intro body.
    #[must_use]
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len..]
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The header bytes and the body, the body writable (for opening in place).
    pub fn split_mut(&mut self) -> (&[u8], &mut [u8]) {
        let (header, body) = self.buffer.as_mut().split_at_mut(self.header_len);
        (header, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_number() -> impl Strategy<Value = PacketNumber> {
        (1u8..=4, any::<u32>()).prop_map(|(len, v)| {
            let v = if len == 4 {
                v
            } else {
                v & ((1 << (8 * len)) - 1)
            };
            PacketNumber::from_wire(v, len).unwrap()
        })
    }

    fn any_header() -> impl Strategy<Value = Header> {
        prop_oneof![
            Just(Header::Intro),
            Just(Header::Retry),
            Just(Header::IntroX25519),
            Just(Header::IntroResume),
            Just(Header::ResumeRefused),
            (any::<u32>(), any_number(), any::<[u8; 32]>(), any::<u32>()).prop_map(
                |(receiver_index, packet_number, ephemeral, sender_index)| Header::IntroReply {
                    receiver_index,
                    packet_number,
                    ephemeral,
                    sender_index
                }
            ),
            (any::<u32>(), any::<bool>(), any_number()).prop_map(
                |(receiver_index, phase, packet_number)| Header::Data {
                    receiver_index,
                    key_phase: KeyPhase(phase),
                    packet_number
                }
            ),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn header_round_trips_and_every_truncation_is_refused(header in any_header(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut buf = [0u8; 64];
            let written = header.emit(&mut buf).unwrap();
            prop_assert_eq!(written, header.len());
            let mut datagram = buf[..written].to_vec();
            datagram.extend_from_slice(&tail);
            let packet = Packet::new_checked(&datagram[..]).unwrap();
            prop_assert_eq!(packet.header(), header);
            prop_assert_eq!(packet.header_bytes(), &buf[..written]);
            prop_assert_eq!(packet.body(), &tail[..]);
            prop_assert_eq!(peek_receiver_index(&datagram), header.receiver_index());
            for cut in 0..written {
                prop_assert!(Header::parse(&buf[..cut]).is_err(), "cut at {}", cut);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_header_parser(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok((header, len)) = Header::parse(&bytes) {
                prop_assert_eq!(len, header.len());
                let mut again = [0u8; 64];
                header.emit(&mut again).unwrap();
                prop_assert_eq!(&again[..len], &bytes[..len]);
            }
        }

        /// RFC 9000 §17.1: any number within half the window of the next
        /// expected one is rebuilt exactly.
        #[test]
        fn truncated_numbers_decode_to_the_full_number(
            largest in 0u64..1 << 40,
            ahead in 1u64..1 << 20,
            acked_behind in 0u64..1 << 20,
        ) {
            let full = largest + ahead;
            // The sender's largest acknowledged is at most the receiver's largest.
            let acked = largest.checked_sub(acked_behind);
            let encoded = PacketNumber::encode(full, acked).unwrap();
            prop_assert_eq!(encoded.decode(Some(largest)), full);
        }

        #[test]
        fn reordered_older_numbers_decode_exactly(largest in 1u64..1 << 40, behind in 1u64..1 << 6) {
            let full = largest.saturating_sub(behind);
            // Sent when the peer had acknowledged nothing newer than `full - 1`.
            let encoded = PacketNumber::encode(full, full.checked_sub(1)).unwrap();
            prop_assert_eq!(encoded.decode(Some(largest)), full);
        }

        /// A Data packet sent when the peer had acknowledged everything
        /// before it, overtaken by up to 16 383 later packets, is rebuilt
        /// exactly (one byte would tell apart only 127).
        #[test]
        fn reordered_data_numbers_decode_exactly(largest in 1u64..1 << 40, behind in 1u64..1 << 14) {
            let full = largest.saturating_sub(behind);
            let encoded = PacketNumber::encode_data(full, full.checked_sub(1)).unwrap();
            prop_assert!(encoded.len() >= 2);
            prop_assert_eq!(encoded.decode(Some(largest)), full);
        }
    }

    #[test]
    fn rfc_9000_appendix_a_examples() {
        // A.3: largest 0xa82f30ea, truncated 0x9b32 (16 bits) -> 0xa82f9b32.
        let pn = PacketNumber::from_wire(0x9b32, 2).unwrap();
        assert_eq!(pn.decode(Some(0xa82f_30ea)), 0xa82f_9b32);
        // A.2: sending 0xac5c02 with 0xabe8b3 acknowledged needs 2 bytes;
        // sending 0xace8fe needs 3.
        assert_eq!(
            PacketNumber::encode(0xac5c02, Some(0xabe8b3))
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            PacketNumber::encode(0xace8fe, Some(0xabe8b3))
                .unwrap()
                .len(),
            3
        );
        assert_eq!(PacketNumber::encode(0, None).unwrap().len(), 1);
        assert_eq!(PacketNumber::encode(1 << 31, Some(0)), None);
    }

    #[test]
    fn bad_headers_give_typed_errors() {
        assert_eq!(Header::parse(&[]), Err(HeaderError::Empty));
        assert_eq!(Header::parse(&[0x00]), Err(HeaderError::UnknownType(0)));
        // A version 1 data packet's type byte.
        assert_eq!(Header::parse(&[0x03]), Err(HeaderError::UnknownType(3)));
        assert_eq!(Header::parse(&[0x30, 1, 2, 3]), Err(HeaderError::Truncated));
        assert_eq!(
            Header::parse(&[0x33, 0, 0, 0, 1, 9, 9, 9]),
            Err(HeaderError::Truncated)
        );
        assert_eq!(
            Header::parse(&[0x38, 0, 0, 0, 1, 9]),
            Err(HeaderError::ReservedBits(0x38))
        );
        // An intro reply never has the key phase set.
        assert_eq!(
            Header::parse(&[0x24; 64]),
            Err(HeaderError::ReservedBits(0x24))
        );
        assert_eq!(
            Header::parse(&[0x11, 0]),
            Err(HeaderError::ReservedBits(0x11))
        );
        assert_eq!(Header::parse(&[0x10, 0xaa]), Ok((Header::Intro, 1)));
        assert_eq!(Header::parse(&[0x40, 0xaa]), Ok((Header::Retry, 1)));
        assert_eq!(Header::parse(&[0x41]), Err(HeaderError::ReservedBits(0x41)));
        assert_eq!(peek_receiver_index(&[0x30, 0, 0, 1]), None);
        assert_eq!(peek_receiver_index(&[0x34, 0, 0, 1, 2]), Some(258));
    }

    #[test]
    fn emit_into_a_short_buffer_is_refused() {
        let mut buf = [0u8; 6];
        let header = Header::Data {
            receiver_index: 7,
            key_phase: KeyPhase(true),
            packet_number: PacketNumber::encode(300, None).unwrap(),
        };
        assert_eq!(
            header.emit(&mut buf),
            Err(EncodeError::BufferTooSmall {
                needed: 7,
                available: 6
            })
        );
    }
}
