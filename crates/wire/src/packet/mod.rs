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
//! An expanded key is 336 bytes (RustCrypto's) or more and most connections
//! never update theirs, so the next key is expanded only when a packet first
//! claims the next phase, and it and the previous key are kept out of line.
//! The current key of each direction is a [`LazyKey`](lazy_key): its 28
//! bytes of material, expanded while packets use it; a connection gone
//! quiet gives the expansions back ([`PacketSealer::release_key`],
//! [`PacketOpener::release_keys`]) and holds no expanded key. It rebuilds full packet numbers from the largest one it opened and
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
//! of the previous update to arrive. If it has not arrived by three
//! quarters of the limit, the key seals no more new data
//! ([`PacketSealer::may_seal_new_data`]): the rest goes to what lets both
//! sides confirm each other's keys (ACKs, probes, PINGs), so two senders
//! that both wait never leave each other without the ACK each needs, and
//! its last packet to a Close ([`PacketSealer::key_spent`]).
//!
//! The receiver tries the next key on a packet whose phase bit differs and
//! whose number is past the start of the current phase, and switches only
//! if that packet authenticates.
//!
//! The per-packet path (start, push, encode, finish, seal) is `#[inline]`:
//! the workspace builds without LTO, and inlined into the caller's crate the
//! frame's checks and size prediction fold away.

use rand_core::CryptoRngCore;
use zeroize::Zeroizing;

use crate::aead::TAG_LEN;
use crate::error::{EncodeError, KeyUpdateError, SealError};
use crate::frame::{Frame, Padding};
use crate::header::{Header, KeyPhase, MAX_PACKET_NUMBER, PacketNumber, X25519_KEY_LEN};
use crate::keys::{KeyConfig, SECRET_LEN, TrafficSecret};
use crate::size;
use crate::varint::varint_len;

/// Seals outgoing packets for one direction.
#[derive(Debug)]
pub struct PacketSealer {
    key: LazyKey,
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
            key: LazyKey::new(secret.material()),
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

    /// Whether the current key has sealed half its limit: time to update
    /// ([`KeyConfig::update_at`]).
    #[must_use]
    pub const fn key_update_due(&self) -> bool {
        self.sealed_under_key >= self.config.update_at()
    }

    /// Whether the current key may seal a packet of new data: it is below
    /// [`KeyConfig::new_data_until`], or the peer confirmed it (so it is
    /// updated before the next packet). The packets past that point are
    /// kept for ACKs, probes and PINGs, which let the peer confirm its own
    /// update and this side have its key confirmed, and for a Close.
    #[must_use]
    pub fn may_seal_new_data(&self) -> bool {
        self.sealed_under_key < self.config.new_data_until() || self.key_update_confirmed()
    }

    /// Whether the current key is down to its last packet, kept for a
    /// Close, and cannot be updated: the peer never confirmed it. RFC 9001
    /// §6.6: past the confidentiality limit an endpoint "MUST stop using
    /// the connection" (AEAD_LIMIT_REACHED).
    #[must_use]
    pub fn key_spent(&self) -> bool {
        self.remaining_packets() <= 1 && !self.key_update_confirmed()
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
        self.key
            .replace(self.secret.material(), self.config.backend);
        self.key_phase = self.key_phase.flipped();
        self.phase_start = self.next_packet_number;
        self.sealed_under_key = 0;
        Ok(())
    }

    /// Gives back the current key's expansion (about 340 bytes); the next
    /// packet sealed expands it again. For a connection gone quiet: the
    /// packet numbers and the key phase are untouched.
    pub fn release_key(&mut self) {
        self.key.release();
    }

    /// Whether the current key's expansion is held.
    #[must_use]
    pub const fn key_expanded(&self) -> bool {
        self.key.is_expanded()
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
        let backend = self.sealer.config.backend;
        let tag = self
            .sealer
            .key
            .get(backend)
            .seal_in_place(packet_number, header, payload)?;
        tail[..TAG_LEN].copy_from_slice(&tag);
        self.sealer.next_packet_number = packet_number + 1;
        self.sealer.sealed_under_key += 1;
        Ok((self.end + TAG_LEN, packet_number))
    }
}

mod lazy_key;
mod opener;
pub(crate) use lazy_key::KeyMaterial;
use lazy_key::LazyKey;
pub use opener::{OpenedPacket, PacketOpener};

#[cfg(test)]
pub(crate) mod tests;
