//! Whole protected packets: header + frames + tag, sealed and opened in the
//! caller's buffer, and the key updates of each direction.
//!
//! A [`PacketSealer`] owns one direction's traffic secret, its current
//! [`PacketKey`] and the direction's packet-number counter: one 62-bit
//! sequence for the life of the connection, so a packet number, and with it
//! a nonce, is never used twice under a key. A number is consumed only when a
//! packet is sealed (or skipped on request); the count of packets sealed
//! under the current key stops at the key's limit.
//!
//! A [`PacketOpener`] holds the peer's keys: the current one, the previous
//! one for packets reordered across a key update, and the next one's secret.
//! An expanded key is about 500 bytes and most connections never update
//! theirs, so the next key is expanded only when a packet first claims the
//! next phase, and it and the previous key are kept out of line: an idle
//! connection holds one expanded key per direction. It rebuilds full packet numbers from the largest one it opened and
//! opens Data packets only; an IntroReply is opened by the handshake. It does
//! not track which numbers it has seen (the replay window lives in
//! tern-reliability) but refuses any packet whose header, ciphertext or tag
//! was altered.
//!
//! # Key update (RFC 9001 §6, per direction)
//!
//! The sender derives its next secret from the current one (see
//! [`crate::keys`]) and flips the key phase bit. It may do
//! so once the peer has acknowledged a packet sealed under the current key
//! ([`PacketSealer::key_update_confirmed`]), so never more often than once a
//! round trip, and should do so once [`PacketSealer::key_update_due`], half
//! way to the key's limit, which leaves the other half for the confirmation
//! of the previous update to arrive. The receiver tries the next key on a
//! packet whose phase bit differs and whose number is past the start of the
//! current phase, and switches only if that packet authenticates.
//!
//! The per-packet path (start, push, encode, finish, seal) is `#[inline]`:
//! the workspace builds without LTO, and inlined into the caller's crate the
//! frame's checks and size prediction fold away.

use rand_core::CryptoRngCore;
use zeroize::Zeroizing;

use crate::aead::{PacketKey, TAG_LEN};
use crate::codec::Frames;
use crate::error::{EncodeError, KeyUpdateError, OpenError, SealError};
use crate::frame::{Frame, Padding};
use crate::header::{
    Header, KeyPhase, MAX_PACKET_NUMBER, Packet, PacketNumber, PacketType, X25519_KEY_LEN,
};
use crate::keys::{KeyConfig, SECRET_LEN, TrafficSecret};
use crate::size;
use crate::varint::varint_len;

/// Seals outgoing packets for one direction.
#[derive(Debug)]
pub struct PacketSealer {
    key: PacketKey,
    secret: TrafficSecret,
    config: KeyConfig,
    key_phase: KeyPhase,
    /// The index the peer chose; every packet carries it.
    peer_index: u32,
    next_packet_number: u64,
    sealed_under_key: u64,
    /// The first packet number the current key may have sealed.
    phase_start: u64,
    largest_acked: Option<u64>,
}

impl PacketSealer {
    /// A sealer for the direction whose first secret is `secret`, sending
    /// to the connection the peer knows as `peer_index`, first packet
    /// number 0, key phase 0. The handshake builds one per connection.
    #[must_use]
    pub(crate) fn new(secret: TrafficSecret, peer_index: u32, config: KeyConfig) -> Self {
        Self {
            key: secret.packet_key(config.backend),
            secret,
            config,
            key_phase: KeyPhase(false),
            peer_index,
            next_packet_number: 0,
            sealed_under_key: 0,
            phase_start: 0,
            largest_acked: None,
        }
    }

    /// One direction of packet protection without a handshake: a sealer
    /// and the opener of its packets, under a fresh secret drawn from `rng`,
    /// for the connection the receiver knows as `receiver_index`. For tests,
    /// benchmarks and tools; connections get theirs from the handshake.
    ///
    /// The secret never leaves the pair, so no other sealer holds its key:
    /// the sealer's packet numbers, and with them its nonces, are used once.
    #[must_use]
    pub fn with_opener(
        rng: &mut impl CryptoRngCore,
        receiver_index: u32,
        config: KeyConfig,
    ) -> (Self, PacketOpener) {
        let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
        rng.fill_bytes(&mut secret[..]);
        (
            Self::new(TrafficSecret::from_bytes(*secret), receiver_index, config),
            PacketOpener::new(TrafficSecret::from_bytes(*secret), receiver_index, config),
        )
    }

    /// The number the next sealed packet will carry.
    #[must_use]
    pub const fn next_packet_number(&self) -> u64 {
        self.next_packet_number
    }

    /// The peer's index for this connection, written in every packet.
    #[must_use]
    pub const fn peer_index(&self) -> u32 {
        self.peer_index
    }

    /// The key phase of the current key.
    #[must_use]
    pub const fn key_phase(&self) -> KeyPhase {
        self.key_phase
    }

    /// Packets sealed under the current key.
    #[must_use]
    pub const fn packets_sealed_under_key(&self) -> u64 {
        self.sealed_under_key
    }

    /// How many more packets the current key may seal.
    #[must_use]
    pub const fn remaining_packets(&self) -> u64 {
        self.config.limit().saturating_sub(self.sealed_under_key)
    }

    /// Whether the current key has sealed half its limit: time to update.
    #[must_use]
    pub const fn key_update_due(&self) -> bool {
        self.sealed_under_key >= self.config.limit() / 2
    }

    /// Whether the peer acknowledged a packet sealed under the current key,
    /// which proves it holds the key: only then may the key be updated again.
    #[must_use]
    pub fn key_update_confirmed(&self) -> bool {
        self.largest_acked
            .is_some_and(|acked| acked >= self.phase_start)
    }

    /// Records the largest packet number the peer acknowledged (from an
    /// authenticated ACK frame). It sets how many bytes packet numbers take
    /// and confirms key updates. Numbers never sent are ignored.
    pub fn on_ack(&mut self, largest_acked: u64) {
        if largest_acked < self.next_packet_number {
            self.largest_acked = self.largest_acked.max(Some(largest_acked));
        }
    }

    /// Switches to the next key and flips the key phase. Refused until the
    /// peer confirmed the current key ([`Self::key_update_confirmed`]).
    pub fn update_key(&mut self) -> Result<(), KeyUpdateError> {
        if !self.key_update_confirmed() {
            return Err(KeyUpdateError::NotConfirmed);
        }
        self.secret = self.secret.next();
        self.key = self.secret.packet_key(self.config.backend);
        self.key_phase = self.key_phase.flipped();
        self.phase_start = self.next_packet_number;
        self.sealed_under_key = 0;
        Ok(())
    }

    /// Jumps the counter, for size tests that need large numbers.
    #[cfg(test)]
    pub(crate) const fn set_next_packet_number(&mut self, packet_number: u64) {
        self.next_packet_number = packet_number;
    }

    /// Consumes the next packet number without sending it and returns it.
    /// A peer that acknowledges it acknowledges a packet it never received
    /// (RFC 9000 §21.4's defence against optimistic ACKs).
    pub fn skip_packet_number(&mut self) -> Result<u64, SealError> {
        let skipped = self.next_packet_number;
        if skipped >= MAX_PACKET_NUMBER {
            return Err(SealError::PacketNumbersExhausted);
        }
        self.next_packet_number += 1;
        Ok(skipped)
    }

    /// Starts a data packet in `buf`, which should be exactly as long as the
    /// largest datagram the path allows (the packet may end up shorter).
    #[inline]
    pub fn start<'s, 'b>(
        &'s mut self,
        buf: &'b mut [u8],
    ) -> Result<PacketBuilder<'s, 'b>, SealError> {
        let receiver_index = self.peer_index;
        let key_phase = self.key_phase;
        self.start_with(
            PacketNumber::encode_data,
            |packet_number| Header::Data {
                receiver_index,
                key_phase,
                packet_number,
            },
            buf,
        )
    }

    /// Starts an intro reply (key phase 0) carrying the responder's X25519
    /// key and index in its header.
    pub(crate) fn start_reply<'s, 'b>(
        &'s mut self,
        ephemeral: [u8; X25519_KEY_LEN],
        sender_index: u32,
        buf: &'b mut [u8],
    ) -> Result<PacketBuilder<'s, 'b>, SealError> {
        let receiver_index = self.peer_index;
        self.start_with(
            PacketNumber::encode,
            |packet_number| Header::IntroReply {
                receiver_index,
                packet_number,
                ephemeral,
                sender_index,
            },
            buf,
        )
    }

    #[inline]
    fn start_with<'s, 'b>(
        &'s mut self,
        encode: fn(u64, Option<u64>) -> Option<PacketNumber>,
        make_header: impl FnOnce(PacketNumber) -> Header,
        buf: &'b mut [u8],
    ) -> Result<PacketBuilder<'s, 'b>, SealError> {
        if self.sealed_under_key >= self.config.limit() {
            return Err(SealError::PacketLimitReached {
                limit: self.config.limit(),
            });
        }
        let packet_number = self.next_packet_number;
        if packet_number > MAX_PACKET_NUMBER {
            return Err(SealError::PacketNumbersExhausted);
        }
        let truncated =
            encode(packet_number, self.largest_acked).ok_or(SealError::TooManyUnacknowledged)?;
        let header = make_header(truncated);
        let needed = header.len() + TAG_LEN;
        let available = buf.len();
        if available < needed {
            return Err(SealError::BufferTooSmall { needed, available });
        }
        let header_len = header
            .emit(buf)
            .map_err(|_| SealError::BufferTooSmall { needed, available })?;
        Ok(PacketBuilder {
            sealer: self,
            buf,
            header_len,
            end: header_len,
            packet_number,
        })
    }
}

/// A packet being filled with frames; [`PacketBuilder::finish`] seals it.
///
/// Dropping a builder without finishing it consumes nothing: the next
/// packet gets the same number.
#[derive(Debug)]
pub struct PacketBuilder<'s, 'b> {
    sealer: &'s mut PacketSealer,
    buf: &'b mut [u8],
    header_len: usize,
    /// End of the frames written so far.
    end: usize,
    packet_number: u64,
}

impl PacketBuilder<'_, '_> {
    /// The number this packet will carry.
    #[must_use]
    pub const fn packet_number(&self) -> u64 {
        self.packet_number
    }

    /// Bytes of frames that still fit (the tag's room is already reserved).
    #[must_use]
    pub const fn remaining(&self) -> usize {
        self.buf.len() - TAG_LEN - self.end
    }

    /// Bytes of frames written so far.
    #[must_use]
    pub const fn payload_len(&self) -> usize {
        self.end - self.header_len
    }

    /// The most stream data one `Stream` frame for `stream_id` at `offset`
    /// can carry in what is left of this packet (0 if not even an empty
    /// frame fits).
    #[must_use]
    pub const fn stream_capacity(&self, stream_id: u64, offset: u64) -> usize {
        size::stream_data_capacity(self.remaining(), stream_id, offset)
    }

    /// The longest payload of a `Message` frame numbered `id` that fits in
    /// what is left.
    #[must_use]
    pub const fn message_capacity(&self, id: u64) -> usize {
        size::byte_string_capacity(self.remaining().saturating_sub(1 + varint_len(id)))
    }

    /// The longest `Datagram` frame payload that fits in what is left.
    #[must_use]
    pub const fn datagram_capacity(&self) -> usize {
        size::byte_string_capacity(self.remaining().saturating_sub(1))
    }

    /// Appends a frame; if it does not fit, nothing is appended.
    #[inline]
    pub fn push(&mut self, frame: &Frame<'_>) -> Result<(), EncodeError> {
        let limit = self.buf.len() - TAG_LEN;
        let written = frame.encode(&mut self.buf[self.end..limit])?;
        self.end += written;
        Ok(())
    }

    /// Appends padding so the sealed packet is `packet_len` bytes long
    /// (nothing if it already is at least that long).
    pub fn pad_to(&mut self, packet_len: usize) -> Result<(), EncodeError> {
        let sealed = self.end + TAG_LEN;
        if packet_len <= sealed {
            return Ok(());
        }
        self.push(&Frame::Padding(Padding {
            len: packet_len - sealed,
        }))
    }

    /// Seals the packet in place and returns its length (the datagram is
    /// `buf[..len]`) and its packet number. Consumes the number only on success.
    #[inline]
    pub fn finish(self) -> Result<(usize, u64), SealError> {
        let packet_number = self.packet_number;
        let (header, rest) = self.buf.split_at_mut(self.header_len);
        let (payload, tail) = rest.split_at_mut(self.end - self.header_len);
        let tag = self
            .sealer
            .key
            .seal_in_place(packet_number, header, payload)?;
        tail[..TAG_LEN].copy_from_slice(&tag);
        self.sealer.next_packet_number = packet_number + 1;
        self.sealer.sealed_under_key += 1;
        Ok((self.end + TAG_LEN, packet_number))
    }
}

/// Opens incoming Data packets for one direction and follows the peer's
/// key updates.
#[derive(Debug)]
pub struct PacketOpener {
    /// The index this side chose; packets carrying another are refused.
    local_index: u32,
    config: KeyConfig,
    current: PacketKey,
    current_phase: KeyPhase,
    /// The smallest packet number opened under the current key.
    current_start: Option<u64>,
    previous: Option<Box<PacketKey>>,
    /// The next phase's key, expanded from `next_secret` when a packet
    /// first claims that phase (and kept: a forged phase bit costs one
    /// expansion, not one per packet).
    next: Option<Box<PacketKey>>,
    /// The secret of the next phase, from which the one after is derived.
    next_secret: TrafficSecret,
    largest_received: Option<u64>,
}

impl PacketOpener {
    /// An opener for the direction whose first secret is `secret`, for the
    /// connection this side knows as `local_index`.
    #[must_use]
    pub(crate) fn new(secret: TrafficSecret, local_index: u32, config: KeyConfig) -> Self {
        Self {
            local_index,
            config,
            current: secret.packet_key(config.backend),
            current_phase: KeyPhase(false),
            current_start: None,
            previous: None,
            next: None,
            next_secret: secret.next(),
            largest_received: None,
        }
    }

    /// The largest packet number opened so far.
    #[must_use]
    pub const fn largest_received(&self) -> Option<u64> {
        self.largest_received
    }

    /// The peer's current key phase, as far as this side has seen.
    #[must_use]
    pub const fn key_phase(&self) -> KeyPhase {
        self.current_phase
    }

    /// Forgets the key before the last update. Call it about three probe
    /// timeouts after the update (RFC 9001 §6.5): later packets of the old
    /// phase are then lost, not opened.
    pub fn discard_previous_key(&mut self) {
        self.previous = None;
    }

    /// Authenticates and decrypts the Data packet in `datagram`, in place.
    ///
    /// The header is checked first (type, receiver index), the full packet
    /// number rebuilt, the key chosen by the phase bit, then the tag over
    /// header and ciphertext is checked; only then is the plaintext returned
    /// and the opener's state (largest number, key phase) updated. After a
    /// failure the datagram's contents are unspecified (the ring backend
    /// decrypts before it compares the tag): keep a copy if the bytes are
    /// needed again.
    #[inline]
    pub fn open<'b>(&mut self, datagram: &'b mut [u8]) -> Result<OpenedPacket<'b>, OpenError> {
        self.open_typed(datagram, PacketType::Data)
    }

    /// Opens a packet of type `expected` (the handshake opens its reply here).
    #[inline]
    pub(crate) fn open_typed<'b>(
        &mut self,
        datagram: &'b mut [u8],
        expected: PacketType,
    ) -> Result<OpenedPacket<'b>, OpenError> {
        let mut packet = Packet::new_checked(datagram)?;
        let header = packet.header();
        if header.packet_type() != expected {
            return Err(OpenError::WrongType(header.packet_type()));
        }
        let (receiver_index, truncated, phase) = match header {
            Header::Data {
                receiver_index,
                key_phase,
                packet_number,
            } => (receiver_index, packet_number, key_phase),
            Header::IntroReply {
                receiver_index,
                packet_number,
                ..
            } => (receiver_index, packet_number, KeyPhase(false)),
            Header::Intro
            | Header::IntroX25519
            | Header::Retry
            | Header::IntroResume
            | Header::ResumeRefused => {
                return Err(OpenError::WrongType(header.packet_type()));
            }
        };
        if receiver_index != self.local_index {
            return Err(OpenError::WrongReceiverIndex(receiver_index));
        }
        let packet_number = truncated.decode(self.largest_received);
        let (aad, body) = packet.split_mut();
        let payload_len = body.len().checked_sub(TAG_LEN).ok_or(OpenError::TooShort)?;
        let (payload, tag) = body.split_at_mut(payload_len);
        let tag: &[u8; TAG_LEN] = (&*tag).try_into().map_err(|_| OpenError::TooShort)?;

        let older_than_phase = self
            .current_start
            .is_some_and(|start| packet_number < start);
        let key_updated = if phase == self.current_phase {
            self.current
                .open_in_place(packet_number, aad, payload, tag)?;
            self.current_start = self
                .current_start
                .min(Some(packet_number))
                .or(Some(packet_number));
            false
        } else if let (true, Some(previous)) = (older_than_phase, &self.previous) {
            previous.open_in_place(packet_number, aad, payload, tag)?;
            false
        } else {
            // A new phase: only a packet that authenticates under the next
            // key moves the opener to it.
            let backend = self.config.backend;
            let next_secret = &self.next_secret;
            self.next
                .get_or_insert_with(|| Box::new(next_secret.packet_key(backend)))
                .open_in_place(packet_number, aad, payload, tag)?;
            self.rotate(packet_number);
            true
        };
        self.largest_received = self.largest_received.max(Some(packet_number));

        let header_len = header.len();
        let datagram: &'b [u8] = packet.into_inner();
        let payload = &datagram[header_len..header_len + payload_len];
        Ok(OpenedPacket {
            header,
            packet_number,
            payload,
            key_updated,
        })
    }

    /// The peer switched to the next key with `packet_number`.
    fn rotate(&mut self, packet_number: u64) {
        // The next key's box takes the current key: no allocation here.
        let mut key = self
            .next
            .take()
            .unwrap_or_else(|| Box::new(self.next_secret.packet_key(self.config.backend)));
        core::mem::swap(&mut self.current, &mut key);
        self.previous = Some(key);
        self.next_secret = self.next_secret.next();
        self.current_phase = self.current_phase.flipped();
        self.current_start = Some(packet_number);
    }
}

/// An authenticated, decrypted packet; its payload borrows the datagram buffer.
#[derive(Debug, Clone, Copy)]
pub struct OpenedPacket<'b> {
    header: Header,
    packet_number: u64,
    payload: &'b [u8],
    key_updated: bool,
}

impl<'b> OpenedPacket<'b> {
    /// The header (type, receiver index, key phase, truncated number).
    #[must_use]
    pub const fn header(&self) -> Header {
        self.header
    }

    /// The full packet number.
    #[must_use]
    pub const fn packet_number(&self) -> u64 {
        self.packet_number
    }

    /// Whether this packet moved the opener to the peer's next key.
    #[must_use]
    pub const fn key_updated(&self) -> bool {
        self.key_updated
    }

    /// The decrypted frames, undecoded.
    #[must_use]
    pub const fn payload(&self) -> &'b [u8] {
        self.payload
    }

    /// The frames, decoded lazily.
    #[must_use]
    pub const fn frames(&self) -> Frames<'b> {
        Frames::new(self.payload)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::{BTreeMap, HashSet};

    use proptest::collection::vec;
    use proptest::prelude::*;
    use rand_core::OsRng;

    use super::*;
    use crate::aead::{Backend, PACKET_LIMIT};
    use crate::codec::tests::{OwnedFrame, any_frame};
    use crate::error::HeaderError;
    use crate::frame::{Message, Stream};

    const SECRET: [u8; SECRET_LEN] = [0x5a; SECRET_LEN];
    const INDEX: u32 = 0x0102_0304;

    pub(crate) fn pair_with(config: KeyConfig) -> (PacketSealer, PacketOpener) {
        (
            PacketSealer::new(TrafficSecret::from_bytes(SECRET), INDEX, config),
            PacketOpener::new(TrafficSecret::from_bytes(SECRET), INDEX, config),
        )
    }

    fn pair() -> (PacketSealer, PacketOpener) {
        pair_with(KeyConfig::default())
    }

    fn seal(sealer: &mut PacketSealer, frames: &[OwnedFrame]) -> Vec<u8> {
        let mut buf = vec![0u8; 1452];
        let mut packet = sealer.start(&mut buf).unwrap();
        for frame in frames {
            packet.push(&frame.as_frame()).unwrap();
        }
        let (len, _) = packet.finish().unwrap();
        buf.truncate(len);
        buf
    }

    #[test]
    fn packets_open_in_order_with_consecutive_numbers_and_their_frames() {
        let (mut sealer, mut opener) = pair();
        for expected_number in 0..5u64 {
            let mut buf = [0u8; 200];
            let mut packet = sealer.start(&mut buf).unwrap();
            assert_eq!(packet.packet_number(), expected_number);
            packet.push(&Frame::Ping).unwrap();
            packet
                .push(&Frame::Message(Message {
                    id: 0,
                    data: b"abc",
                }))
                .unwrap();
            let (len, number) = packet.finish().unwrap();
            assert_eq!(number, expected_number);
            let opened = opener.open(&mut buf[..len]).unwrap();
            assert_eq!(opened.packet_number(), expected_number);
            assert_eq!(opened.header().receiver_index(), Some(INDEX));
            let frames: Vec<_> = opened.frames().collect::<Result<_, _>>().unwrap();
            assert_eq!(
                frames,
                [
                    Frame::Ping,
                    Frame::Message(Message {
                        id: 0,
                        data: b"abc"
                    })
                ]
            );
        }
        assert_eq!(sealer.next_packet_number(), 5);
    }

    #[test]
    fn each_fresh_pair_opens_its_own_packets_and_no_other_pairs() {
        let config = KeyConfig::default();
        let mut pairs = [
            PacketSealer::with_opener(&mut OsRng, INDEX, config),
            PacketSealer::with_opener(&mut OsRng, INDEX, config),
        ];
        // Both sealers start at packet number 0, under different keys.
        let packets = pairs
            .each_mut()
            .map(|(sealer, _)| seal(sealer, &[OwnedFrame::Ping]));
        assert_ne!(packets[0], packets[1]);
        for (i, packet) in packets.iter().enumerate() {
            let other = &mut pairs[1 - i].1;
            assert_eq!(
                other.open(&mut packet.clone()).map(|_| ()),
                Err(OpenError::Authentication)
            );
            let own = &mut pairs[i].1;
            assert_eq!(
                own.open(&mut packet.clone()).map(|o| o.packet_number()),
                Ok(0)
            );
        }
    }

    #[test]
    fn nonces_never_repeat_over_2_pow_20_packets_in_either_direction() {
        const PACKETS: u64 = 1 << 20;
        let mut seen = HashSet::with_capacity(2 * PACKETS as usize);
        for secret in [[1u8; SECRET_LEN], [2u8; SECRET_LEN]] {
            let mut sealer =
                PacketSealer::new(TrafficSecret::from_bytes(secret), 0, KeyConfig::default());
            let mut opener =
                PacketOpener::new(TrafficSecret::from_bytes(secret), 0, KeyConfig::default());
            let mut buf = [0u8; 32];
            for expected in 0..PACKETS {
                let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
                assert_eq!(number, expected);
                // The number is rebuilt from the sealed bytes, not the counter.
                assert_eq!(
                    opener.open(&mut buf[..len]).unwrap().packet_number(),
                    expected
                );
                sealer.on_ack(expected);
                assert!(
                    seen.insert(sealer.key.nonce(expected)),
                    "nonce reused at {expected}"
                );
            }
        }
        assert_eq!(seen.len(), 2 * PACKETS as usize);
    }

    #[test]
    fn point_7_the_key_limit_counts_packets_under_the_key_and_an_update_restores_it() {
        let config = KeyConfig {
            key_limit: 4,
            ..KeyConfig::default()
        };
        let (mut sealer, mut opener) = pair_with(config);
        let mut buf = [0u8; 64];
        for _ in 0..4 {
            let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
            opener.open(&mut buf[..len]).unwrap();
            sealer.on_ack(number);
        }
        assert!(sealer.key_update_due());
        assert_eq!(sealer.remaining_packets(), 0);
        assert!(matches!(
            sealer.start(&mut buf),
            Err(SealError::PacketLimitReached { limit: 4 })
        ));
        sealer.update_key().unwrap();
        assert_eq!(sealer.remaining_packets(), 4);
        // Numbers continue across the key: the sequence outlives it.
        let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
        assert_eq!(number, 4);
        let opened = opener.open(&mut buf[..len]).unwrap();
        assert!(opened.key_updated());
        assert_eq!(opened.packet_number(), 4);
        assert_eq!(PACKET_LIMIT, 1 << 23);
    }

    #[test]
    fn an_update_is_refused_until_the_peer_acknowledges_the_current_key() {
        let (mut sealer, _) = pair();
        assert_eq!(sealer.update_key(), Err(KeyUpdateError::NotConfirmed));
        let mut buf = [0u8; 64];
        let (_, first) = sealer.start(&mut buf).unwrap().finish().unwrap();
        // An ACK for a number never sent confirms nothing.
        sealer.on_ack(first + 10);
        assert!(!sealer.key_update_confirmed());
        sealer.on_ack(first);
        sealer.update_key().unwrap();
        // The ACK was for the old key: the new one is not confirmed yet.
        assert_eq!(sealer.update_key(), Err(KeyUpdateError::NotConfirmed));
    }

    #[test]
    fn a_forged_phase_flip_does_not_move_the_opener() {
        let (mut sealer, mut opener) = pair();
        let mut buf = [0u8; 64];
        let (len, _) = sealer.start(&mut buf).unwrap().finish().unwrap();
        let mut forged = buf[..len].to_vec();
        forged[0] ^= 0x04;
        assert_eq!(
            opener.open(&mut forged).map(|_| ()),
            Err(OpenError::Authentication)
        );
        assert_eq!(opener.key_phase(), KeyPhase(false));
        // The genuine packet still opens under the current key.
        assert!(!opener.open(&mut buf[..len]).unwrap().key_updated());
    }

    #[test]
    fn a_skipped_number_is_never_sent_and_the_next_packet_jumps_it() {
        let (mut sealer, mut opener) = pair();
        let mut buf = [0u8; 64];
        assert_eq!(sealer.skip_packet_number(), Ok(0));
        let (len, number) = sealer.start(&mut buf).unwrap().finish().unwrap();
        assert_eq!(number, 1);
        assert_eq!(sealer.packets_sealed_under_key(), 1);
        assert_eq!(opener.open(&mut buf[..len]).unwrap().packet_number(), 1);
    }

    /// Many key phases with a lowered limit; each flip surrounded by loss and
    /// reordering. Every payload arrives exactly once (lost packets are
    /// resent under new numbers, as the reliability layer does), and every
    /// packet delivered opens.
    #[test]
    fn many_key_updates_with_loss_and_reordering_lose_and_duplicate_nothing() {
        const LIMIT: u64 = 16;
        const MESSAGES: u32 = 2_000;
        let config = KeyConfig {
            key_limit: LIMIT,
            ..KeyConfig::default()
        };
        let (mut sealer, mut opener) = pair_with(config);
        let mut in_flight: Vec<(u64, u32, Vec<u8>)> = Vec::new();
        let mut to_send: std::collections::VecDeque<u32> = (0..MESSAGES).collect();
        let mut delivered: BTreeMap<u32, u64> = BTreeMap::new();
        let mut opened_numbers = HashSet::new();
        let mut flips = 0;
        let mut step = 0u64;
        while delivered.len() < MESSAGES as usize {
            // Send a few packets, updating the key as soon as it is allowed
            // and due.
            for _ in 0..3 {
                let Some(message) = to_send.pop_front() else {
                    break;
                };
                if sealer.key_update_due() && sealer.key_update_confirmed() {
                    sealer.update_key().unwrap();
                }
                let mut buf = vec![0u8; 64];
                let Ok(mut packet) = sealer.start(&mut buf) else {
                    // Limit reached, update not yet confirmed: wait for ACKs.
                    to_send.push_front(message);
                    break;
                };
                packet
                    .push(&Frame::Message(Message {
                        id: u64::from(message),
                        data: &message.to_be_bytes(),
                    }))
                    .unwrap();
                let (len, number) = packet.finish().unwrap();
                buf.truncate(len);
                in_flight.push((number, message, buf));
            }
            // The network: every 7th packet is lost, the rest arrive with the
            // newest two swapped every other step.
            step += 1;
            if step.is_multiple_of(2) && in_flight.len() >= 2 {
                let n = in_flight.len();
                in_flight.swap(n - 1, n - 2);
            }
            let keep_back = usize::from(step.is_multiple_of(3)).min(in_flight.len());
            let arriving: Vec<_> = in_flight.drain(..in_flight.len() - keep_back).collect();
            let mut largest_acked = None;
            for (number, message, mut bytes) in arriving {
                if number % 7 == 3 {
                    to_send.push_back(message);
                    continue;
                }
                let opened = opener
                    .open(&mut bytes)
                    .unwrap_or_else(|e| panic!("packet {number} did not open: {e}"));
                flips += usize::from(opened.key_updated());
                assert_eq!(opened.packet_number(), number);
                assert!(
                    opened_numbers.insert(number),
                    "packet {number} opened twice"
                );
                let Some(Ok(Frame::Message(m))) = opened.frames().next() else {
                    panic!("no message in {number}")
                };
                let got = u32::from_be_bytes(m.data.try_into().unwrap());
                assert_eq!(got, message);
                assert!(
                    delivered.insert(got, number).is_none(),
                    "message {got} twice"
                );
                largest_acked = largest_acked.max(Some(number));
            }
            if let Some(acked) = largest_acked {
                sealer.on_ack(acked);
            }
        }
        assert_eq!(delivered.len(), MESSAGES as usize);
        assert!(flips > 50, "only {flips} key updates");
        assert_eq!(opener.key_phase(), sealer.key_phase());
    }

    #[test]
    fn a_packet_reordered_across_a_flip_opens_under_the_previous_key() {
        let config = KeyConfig {
            key_limit: 2,
            ..KeyConfig::default()
        };
        let (mut sealer, mut opener) = pair_with(config);
        let mut old = [0u8; 64];
        let mut first = [0u8; 64];
        let (len0, n0) = sealer.start(&mut first).unwrap().finish().unwrap();
        let (old_len, _) = sealer.start(&mut old).unwrap().finish().unwrap();
        let old_copy = old;
        opener.open(&mut first[..len0]).unwrap();
        sealer.on_ack(n0);
        sealer.update_key().unwrap();
        let mut new = [0u8; 64];
        let (new_len, _) = sealer.start(&mut new).unwrap().finish().unwrap();
        assert!(opener.open(&mut new[..new_len]).unwrap().key_updated());
        // The old-phase packet arrives late: the previous key opens it.
        let late = opener.open(&mut old[..old_len]).unwrap();
        assert!(!late.key_updated());
        assert_eq!(opener.key_phase(), KeyPhase(true));
        // Once discarded, the previous key no longer does, and the late
        // packet is not taken for yet another update.
        opener.discard_previous_key();
        let mut again = old_copy;
        assert_eq!(
            opener.open(&mut again[..old_len]).map(|_| ()),
            Err(OpenError::Authentication)
        );
        assert_eq!(opener.key_phase(), KeyPhase(true));
    }

    #[test]
    fn a_frame_that_does_not_fit_is_not_appended() {
        let (mut sealer, mut opener) = pair();
        let mut buf = [0u8; 48];
        let mut packet = sealer.start(&mut buf).unwrap();
        // A Data header of 7 bytes: its number takes two (`encode_data`).
        assert_eq!(packet.remaining(), 48 - 7 - TAG_LEN);
        let big = Frame::Stream(Stream {
            id: 1,
            offset: 0,
            fin: false,
            data: &[7; 30],
        });
        assert!(matches!(
            packet.push(&big),
            Err(EncodeError::BufferTooSmall { .. })
        ));
        assert_eq!(packet.payload_len(), 0);
        packet.push(&Frame::Ping).unwrap();
        let (len, _) = packet.finish().unwrap();
        assert_eq!(opener.open(&mut buf[..len]).unwrap().payload(), &[0x01]);
    }

    #[test]
    fn capacity_helpers_fill_what_is_left_of_the_packet_exactly() {
        let (mut sealer, _) = pair();
        let mut buf = [0u8; 1452];
        let mut packet = sealer.start(&mut buf).unwrap();
        packet.push(&Frame::Ping).unwrap();
        let data = [0xab; 1452];
        let capacity = packet.stream_capacity(9, 1 << 20);
        let frame = |len: usize| {
            Frame::Stream(Stream {
                id: 9,
                offset: 1 << 20,
                fin: false,
                data: &data[..len],
            })
        };
        assert!(packet.push(&frame(capacity + 1)).is_err());
        packet.push(&frame(capacity)).unwrap();
        assert!(packet.remaining() <= 1);
        let mut packet = sealer.start(&mut buf).unwrap();
        let capacity = packet.message_capacity(300);
        assert!(
            packet
                .push(&Frame::Message(Message {
                    id: 300,
                    data: &data[..capacity + 1]
                }))
                .is_err()
        );
        packet
            .push(&Frame::Message(Message {
                id: 300,
                data: &data[..capacity],
            }))
            .unwrap();
        assert!(packet.remaining() <= 1);
    }

    #[test]
    fn padding_reaches_the_requested_datagram_size_exactly() {
        let (mut sealer, mut opener) = pair();
        let mut buf = [0u8; 1200];
        let mut packet = sealer.start(&mut buf).unwrap();
        packet.push(&Frame::Ping).unwrap();
        packet.pad_to(1200).unwrap();
        let (len, _) = packet.finish().unwrap();
        assert_eq!(len, 1200);
        let opened = opener.open(&mut buf[..len]).unwrap();
        let frames: Vec<_> = opened.frames().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            frames,
            [
                Frame::Ping,
                Frame::Padding(Padding {
                    len: 1200 - 7 - 1 - TAG_LEN
                })
            ]
        );
    }

    #[test]
    fn a_buffer_without_room_for_header_and_tag_is_refused() {
        let (mut sealer, _) = pair();
        let mut buf = [0u8; 21];
        assert_eq!(
            sealer.start(&mut buf).map(|_| ()),
            Err(SealError::BufferTooSmall {
                needed: 23,
                available: 21
            })
        );
    }

    #[test]
    fn point_5_the_data_path_refuses_intro_replies_and_intros() {
        let (mut sealer, mut opener) = pair();
        let mut buf = [0u8; 200];
        let (len, _) = sealer
            .start_reply([9; X25519_KEY_LEN], 77, &mut buf)
            .unwrap()
            .finish()
            .unwrap();
        // Authentic under the opener's key, but an intro reply.
        assert_eq!(
            opener.open(&mut buf[..len].to_vec()).map(|_| ()),
            Err(OpenError::WrongType(PacketType::IntroReply))
        );
        assert!(
            opener
                .open_typed(&mut buf[..len], PacketType::IntroReply)
                .is_ok()
        );
        let mut intro = [0x10; 257];
        assert_eq!(
            opener.open(&mut intro).map(|_| ()),
            Err(OpenError::WrongType(PacketType::Intro))
        );
    }

    #[test]
    fn wrong_key_index_truncation_and_empty_are_refused_with_typed_errors() {
        let (mut sealer, _) = pair();
        let packet = seal(&mut sealer, &[OwnedFrame::Ping]);
        let mut wrong = PacketOpener::new(
            TrafficSecret::from_bytes([0; SECRET_LEN]),
            INDEX,
            KeyConfig::default(),
        );
        assert_eq!(
            wrong.open(&mut packet.clone()).map(|_| ()),
            Err(OpenError::Authentication)
        );
        let mut elsewhere = PacketOpener::new(
            TrafficSecret::from_bytes(SECRET),
            INDEX + 1,
            KeyConfig::default(),
        );
        assert_eq!(
            elsewhere.open(&mut packet.clone()).map(|_| ()),
            Err(OpenError::WrongReceiverIndex(INDEX))
        );
        let (_, mut opener) = pair();
        assert_eq!(
            opener.open(&mut packet[..10].to_vec()).map(|_| ()),
            Err(OpenError::TooShort)
        );
        assert_eq!(
            opener.open(&mut []).map(|_| ()),
            Err(OpenError::Header(HeaderError::Empty))
        );
    }

    #[test]
    fn every_single_bit_flip_of_a_sealed_packet_is_refused() {
        for backend in Backend::ALL {
            let config = KeyConfig {
                backend: *backend,
                ..KeyConfig::default()
            };
            let (mut sealer, mut opener) = pair_with(config);
            let packet = seal(
                &mut sealer,
                &[OwnedFrame::Message {
                    id: 0,
                    data: b"flip me".to_vec(),
                }],
            );
            for bit in 0..packet.len() * 8 {
                let mut copy = packet.clone();
                copy[bit / 8] ^= 1 << (bit % 8);
                assert!(opener.open(&mut copy).is_err(), "{backend:?} bit {bit}");
            }
            assert_eq!(opener.largest_received(), None);
            assert_eq!(opener.key_phase(), KeyPhase(false));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn sealed_frames_open_to_the_same_frames(frames in vec(any_frame(), 1..4)) {
            let (mut sealer, mut opener) = pair();
            let mut packet = seal(&mut sealer, &frames);
            let opened = opener.open(&mut packet).unwrap();
            let mut expected = vec![0u8; 1452];
            let mut at = 0;
            for frame in &frames {
                at += frame.as_frame().encode(&mut expected[at..]).unwrap();
            }
            prop_assert_eq!(opened.payload(), &expected[..at]);
        }

        #[test]
        fn arbitrary_datagrams_never_panic_and_never_open(bytes in vec(any::<u8>(), 0..200)) {
            let (_, mut opener) = pair();
            let mut bytes = bytes;
            prop_assert!(opener.open(&mut bytes).is_err());
        }

        #[test]
        fn mutated_or_truncated_packets_never_panic_and_never_open(
            frames in vec(any_frame(), 1..4),
            mutations in vec((any::<prop::sample::Index>(), 1u8..), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let (mut sealer, mut opener) = pair();
            let packet = seal(&mut sealer, &frames);
            let mut mutated = packet.clone();
            for (index, xor) in mutations {
                let i = index.index(mutated.len());
                mutated[i] ^= xor;
            }
            if mutated != packet {
                prop_assert!(opener.open(&mut mutated).is_err());
            }
            let cut = cut.index(packet.len());
            prop_assert!(opener.open(&mut packet[..cut].to_vec()).is_err());
        }
    }
}
