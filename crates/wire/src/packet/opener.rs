//! The receiving half: the peer's keys and the opening of its packets.

use super::LazyKey;
use crate::aead::{PacketKey, TAG_LEN};
use crate::codec::Frames;
use crate::error::OpenError;
use crate::header::{Header, KeyPhase, Packet, PacketType};
use crate::keys::{KeyConfig, TrafficSecret};

/// Opens incoming Data packets for one direction and follows the peer's
/// key updates.
#[derive(Debug)]
pub struct PacketOpener {
    /// The index this side chose; packets carrying another are refused.
    local_index: u32,
    config: KeyConfig,
    current: LazyKey,
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
            current: LazyKey::new(secret.material()),
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

    /// Gives back the expansions of the current key (about 340 bytes) and
    /// of a next key a packet claimed without moving to it; the next packet
    /// opened expands what it needs again. For a connection gone quiet: the
    /// previous key stays until [`Self::discard_previous_key`].
    pub fn release_keys(&mut self) {
        self.current.release();
        self.next = None;
    }

    /// Whether an expansion [`Self::release_keys`] gives back is held.
    #[must_use]
    pub const fn keys_expanded(&self) -> bool {
        self.current.is_expanded() || self.next.is_some()
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
        let backend = self.config.backend;
        let key_updated = if phase == self.current_phase {
            self.current
                .get(backend)
                .open_in_place(packet_number, aad, payload, tag)?;
            if self.current_start.is_none_or(|start| packet_number < start) {
                self.current_start = Some(packet_number);
            }
            false
        } else if let (true, Some(previous)) = (older_than_phase, &self.previous) {
            previous.open_in_place(packet_number, aad, payload, tag)?;
            false
        } else {
            // A new phase: only a packet that authenticates under the next
            // key moves the opener to it.
            let next_secret = &self.next_secret;
            self.next
                .get_or_insert_with(|| Box::new(next_secret.packet_key(backend)))
                .open_in_place(packet_number, aad, payload, tag)?;
            self.rotate(packet_number);
            true
        };
        if self
            .largest_received
            .is_none_or(|largest| packet_number > largest)
        {
            self.largest_received = Some(packet_number);
        }

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
        let backend = self.config.backend;
        let next = self
            .next
            .take()
            .unwrap_or_else(|| Box::new(self.next_secret.packet_key(backend)));
        let current = LazyKey::with_expanded(self.next_secret.material(), next);
        // The old key is expanded already unless a release gave it back
        // since its last packet.
        let previous = core::mem::replace(&mut self.current, current);
        self.previous = Some(previous.into_expanded(backend));
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
