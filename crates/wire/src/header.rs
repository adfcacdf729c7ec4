//! The packet header: a type byte and, for protected packets, a packet number.
//!
//! Two layers, as smoltcp does it: [`Header`] is the value (`parse`, `emit`,
//! `len`), [`Packet`] is a checked view over a received datagram whose
//! accessors cannot fail once [`Packet::new_checked`] has succeeded.
//!
//! ```text
//! intro:               type (0x01) | 256 bytes RSA-OAEP ciphertext
//! intro reply, data:   type (0x02 / 0x03) | packet number (varint) | ciphertext | 16-byte tag
//! ```
//!
//! The header bytes of a protected packet are the AEAD's associated data, so
//! every bit of them is authenticated.

use crate::aead::PACKET_LIMIT;
use crate::error::{EncodeError, HeaderError};
use crate::varint::varint_len;

/// The first byte of every Tern packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// The initiator's handshake packet: RSA-OAEP encrypted key material.
    Intro = 0x01,
    /// The responder's answer to an intro, already sealed with the
    /// responder-to-initiator packet key.
    IntroReply = 0x02,
    /// A packet of frames sealed with the connection's packet key.
    Data = 0x03,
}

impl PacketType {
    /// Reads a type byte; anything Tern does not know is refused.
    pub fn from_byte(byte: u8) -> Result<Self, HeaderError> {
        match byte {
            0x01 => Ok(Self::Intro),
            0x02 => Ok(Self::IntroReply),
            0x03 => Ok(Self::Data),
            other => Err(HeaderError::UnknownType(other)),
        }
    }

    /// Whether packets of this type carry a packet number and are sealed with a packet key.
    #[must_use]
    pub const fn is_protected(self) -> bool {
        !matches!(self, Self::Intro)
    }
}

/// The longest header Tern writes: the type byte and a packet number below
/// [`PACKET_LIMIT`] (2^23 needs 4 varint bytes).
pub const MAX_HEADER_LEN: usize = 1 + varint_len(PACKET_LIMIT - 1);

/// A parsed packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// An intro; its body is the RSA ciphertext.
    Intro,
    /// The reply to an intro.
    IntroReply {
        /// The packet number, also the AEAD nonce counter.
        packet_number: u64,
    },
    /// A data packet.
    Data {
        /// The packet number, also the AEAD nonce counter.
        packet_number: u64,
    },
}

impl Header {
    /// The packet type.
    #[must_use]
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Self::Intro => PacketType::Intro,
            Self::IntroReply { .. } => PacketType::IntroReply,
            Self::Data { .. } => PacketType::Data,
        }
    }

    /// The packet number, for protected packets.
    #[must_use]
    pub const fn packet_number(&self) -> Option<u64> {
        match self {
            Self::Intro => None,
            Self::IntroReply { packet_number } | Self::Data { packet_number } => {
                Some(*packet_number)
            }
        }
    }

    /// The number of bytes [`Header::emit`] writes.
    #[must_use]
    #[inline]
    pub const fn len(&self) -> usize {
        match self.packet_number() {
            None => 1,
            Some(pn) => 1 + varint_len(pn),
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
        dst[0] = self.packet_type() as u8;
        if let Some(pn) = self.packet_number() {
            if pn >= PACKET_LIMIT {
                return Err(EncodeError::ValueTooLarge {
                    field: "packet_number",
                    value: pn,
                });
            }
            postcard::to_slice(&pn, &mut dst[1..]).map_err(|_| EncodeError::BufferTooSmall {
                needed: len,
                available,
            })?;
        }
        Ok(len)
    }

    /// Parses the header at the start of `bytes`, returning it and its length.
    pub fn parse(bytes: &[u8]) -> Result<(Self, usize), HeaderError> {
        let (&first, rest) = bytes.split_first().ok_or(HeaderError::Empty)?;
        let packet_type = PacketType::from_byte(first)?;
        if !packet_type.is_protected() {
            return Ok((Self::Intro, 1));
        }
        let (pn, after) = postcard::take_from_bytes::<u64>(rest)
            .map_err(|_| HeaderError::MalformedPacketNumber)?;
        let used = rest.len() - after.len();
        if used != varint_len(pn) {
            return Err(HeaderError::NonCanonicalPacketNumber);
        }
        if pn >= PACKET_LIMIT {
            return Err(HeaderError::PacketNumberPastLimit(pn));
        }
        let header = match packet_type {
            PacketType::IntroReply => Self::IntroReply { packet_number: pn },
            _ => Self::Data { packet_number: pn },
        };
        Ok((header, 1 + used))
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

    fn any_header() -> impl Strategy<Value = Header> {
        prop_oneof![
            Just(Header::Intro),
            (0..PACKET_LIMIT).prop_map(|packet_number| Header::IntroReply { packet_number }),
            (0..PACKET_LIMIT).prop_map(|packet_number| Header::Data { packet_number }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn header_round_trips_and_len_predicts_the_bytes_written(header in any_header(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut buf = [0u8; 16];
            let written = header.emit(&mut buf).unwrap();
            prop_assert_eq!(written, header.len());
            let mut datagram = buf[..written].to_vec();
            datagram.extend_from_slice(&tail);
            let packet = Packet::new_checked(&datagram[..]).unwrap();
            prop_assert_eq!(packet.header(), header);
            prop_assert_eq!(packet.header_bytes(), &buf[..written]);
            prop_assert_eq!(packet.body(), &tail[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_header_parser(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok((header, len)) = Header::parse(&bytes) {
                prop_assert_eq!(len, header.len());
                let mut again = [0u8; 16];
                header.emit(&mut again).unwrap();
                prop_assert_eq!(&again[..len], &bytes[..len]);
            }
        }
    }

    #[test]
    fn largest_packet_number_fits_the_max_header_len() {
        let header = Header::Data {
            packet_number: PACKET_LIMIT - 1,
        };
        assert_eq!(header.len(), MAX_HEADER_LEN);
        assert_eq!(MAX_HEADER_LEN, 5);
    }

    #[test]
    fn emitting_a_packet_number_past_the_limit_is_refused() {
        let mut buf = [0u8; 16];
        let header = Header::Data {
            packet_number: PACKET_LIMIT,
        };
        assert!(matches!(
            header.emit(&mut buf),
            Err(EncodeError::ValueTooLarge { .. })
        ));
    }

    #[test]
    fn bad_headers_give_typed_errors() {
        assert_eq!(Header::parse(&[]), Err(HeaderError::Empty));
        assert_eq!(Header::parse(&[0x00]), Err(HeaderError::UnknownType(0)));
        assert_eq!(
            Header::parse(&[0x03]),
            Err(HeaderError::MalformedPacketNumber)
        );
        assert_eq!(
            Header::parse(&[0x03, 0x80]),
            Err(HeaderError::MalformedPacketNumber)
        );
        // 5 encoded as two bytes instead of one.
        assert_eq!(
            Header::parse(&[0x03, 0x85, 0x00]),
            Err(HeaderError::NonCanonicalPacketNumber)
        );
        // 2^23 = PACKET_LIMIT.
        assert_eq!(
            Header::parse(&[0x03, 0x80, 0x80, 0x80, 0x04]),
            Err(HeaderError::PacketNumberPastLimit(PACKET_LIMIT))
        );
        assert_eq!(Header::parse(&[0x01, 0xaa]), Ok((Header::Intro, 1)));
    }

    #[test]
    fn emit_into_a_short_buffer_is_refused() {
        let mut buf = [0u8; 2];
        let header = Header::Data { packet_number: 300 };
        assert_eq!(
            header.emit(&mut buf),
            Err(EncodeError::BufferTooSmall {
                needed: 3,
                available: 2
            })
        );
    }
}
