//! The RSA-2048 intro: one round trip from nothing to a protected connection.
//!
//! The initiator knows the responder's RSA public key (its identity). It
//! draws fresh AES-128-GCM keys and IVs for both directions, a random intro
//! id, and sends them with a protocol version and its wall-clock time,
//! RSA-OAEP(SHA-256) encrypted to the responder, in one 257-byte intro
//! packet. The responder decrypts, checks the version, refuses a timestamp
//! outside its window and an id it has already accepted within the window
//! (a bounded [`ReplayGuard`]), and answers with an intro reply that is
//! already an AES-GCM protected packet echoing the intro id. From then on
//! both sides exchange data packets.
//!
//! ```text
//! initiator                                      responder
//!   Intro { RSA-OAEP(version, time, id, keys) }  ->
//!                                                <- IntroReply { AEAD(id, frames...) }
//!   Data { AEAD(frames...) }                     <-> Data { AEAD(frames...) }
//! ```
//!
//! This crate never reads a clock or an entropy source: the current time and
//! a cryptographic RNG are arguments.
//!
//! What the endpoint must do around [`Responder::accept`]: every intro of the
//! right length costs an RSA-2048 decryption (about a millisecond), whether
//! it is garbage, a byte-for-byte replay or a fresh intro, and anyone who
//! knows the public key can make fresh valid intros for the price of an RSA
//! public-key operation (tens of microseconds). Nothing in the intro can be
//! checked before that decryption, so the endpoint must rate-limit intros
//! per source address and globally, below what its cores can decrypt. The
//! source address is not verified either, so the reply must stay within
//! three times the intro's size (RFC 9000 §8.1's anti-amplification limit).
//!
//! The `rsa` crate's decryption is not constant-time (the "Marvin" timing
//! side channel, RUSTSEC-2023-0071, has no fixed release yet). Decryption is
//! blinded with fresh randomness and the endpoint's intro rate limit bounds
//! how many timing measurements an attacker can collect.

use core::fmt;
use core::time::Duration;
use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use rand_core::CryptoRngCore;
use rsa::pkcs8::der::zeroize::Zeroizing;
use rsa::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use sha2::Sha256;

use crate::aead::{IV_LEN, KEY_LEN, PacketKey};
use crate::error::{AcceptError, IntroError, KeyError, ReplyError, SealError};
use crate::header::{Header, PacketType};
use crate::packet::{OpenedPacket, PacketBuilder, PacketOpener, PacketSealer};

/// The protocol version this crate speaks; an intro with another is refused.
pub const PROTOCOL_VERSION: u32 = 1;
/// RSA modulus size of identity keys, in bits.
pub const RSA_BITS: usize = 2048;
/// RSA ciphertext size: the modulus size in bytes.
const RSA_CIPHERTEXT_LEN: usize = RSA_BITS / 8;
/// Length of an intro packet: type byte and RSA ciphertext.
pub const INTRO_LEN: usize = 1 + RSA_CIPHERTEXT_LEN;
/// Length of the random intro id.
pub const INTRO_ID_LEN: usize = 16;
/// Length of the intro's plaintext: version (4), timestamp (8), id (16) and
/// two directions of key (16) and IV (12).
const INTRO_BODY_LEN: usize = 4 + 8 + INTRO_ID_LEN + 2 * (KEY_LEN + IV_LEN);

/// The default window around the responder's clock in which an intro's
/// timestamp must fall: generous for unsynchronised peers, short enough that
/// the replay cache only has to remember a minute of intros.
pub const DEFAULT_TIMESTAMP_WINDOW: Duration = Duration::from_secs(30);
/// The default number of intros the replay cache remembers: 1 000 intros a
/// second (about what one core can decrypt) for two default windows, so
/// the cache only fills when the endpoint's rate limit lets more through.
/// Memory grows with use, to a few megabytes when full.
pub const DEFAULT_REPLAY_CAPACITY: usize = 65_536;

/// A random intro id: names one intro attempt, echoed in the reply.
pub type IntroId = [u8; INTRO_ID_LEN];

/// The AES-128-GCM key and IV of one direction, wiped from memory when dropped.
#[derive(Clone, PartialEq, Eq, zeroize::Zeroize, zeroize::ZeroizeOnDrop)]
pub struct DirectionKeys {
    /// AES-128 key.
    pub key: [u8; KEY_LEN],
    /// GCM IV, XORed with the packet number to form each nonce.
    pub iv: [u8; IV_LEN],
}

impl fmt::Debug for DirectionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DirectionKeys(..)")
    }
}

impl DirectionKeys {
    fn generate(rng: &mut impl CryptoRngCore) -> Self {
        let mut keys = Self {
            key: [0; KEY_LEN],
            iv: [0; IV_LEN],
        };
        rng.fill_bytes(&mut keys.key);
        rng.fill_bytes(&mut keys.iv);
        keys
    }

    fn packet_key(&self) -> PacketKey {
        PacketKey::new(&self.key, &self.iv)
    }
}

/// The key material an intro carries: separate keys and IVs for each
/// direction, so the two peers never share a (key, nonce) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMaterial {
    /// Seals what the initiator sends.
    pub initiator_to_responder: DirectionKeys,
    /// Seals what the responder sends, starting with the intro reply.
    pub responder_to_initiator: DirectionKeys,
}

impl KeyMaterial {
    /// Fresh random key material.
    pub fn generate(rng: &mut impl CryptoRngCore) -> Self {
        Self {
            initiator_to_responder: DirectionKeys::generate(rng),
            responder_to_initiator: DirectionKeys::generate(rng),
        }
    }

    /// The initiator's sealer and opener.
    #[must_use]
    pub fn initiator_keys(&self) -> ConnectionKeys {
        ConnectionKeys {
            sealer: PacketSealer::new(self.initiator_to_responder.packet_key()),
            opener: PacketOpener::new(self.responder_to_initiator.packet_key()),
        }
    }

    /// The responder's sealer and opener.
    #[must_use]
    pub fn responder_keys(&self) -> ConnectionKeys {
        ConnectionKeys {
            sealer: PacketSealer::new(self.responder_to_initiator.packet_key()),
            opener: PacketOpener::new(self.initiator_to_responder.packet_key()),
        }
    }
}

/// One side's packet protection for a connection.
#[derive(Debug)]
pub struct ConnectionKeys {
    /// Seals what this side sends.
    pub sealer: PacketSealer,
    /// Opens what the peer sends.
    pub opener: PacketOpener,
}

/// A responder's long-term RSA-2048 key pair.
#[derive(Clone)]
pub struct IdentityKey(RsaPrivateKey);

impl fmt::Debug for IdentityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdentityKey(..)")
    }
}

fn check_size(public: &RsaPublicKey) -> Result<(), KeyError> {
    match public.size() * 8 {
        RSA_BITS => Ok(()),
        bits => Err(KeyError::WrongSize(bits)),
    }
}

impl IdentityKey {
    /// Generates a new key pair (about a quarter of a second).
    pub fn generate(rng: &mut impl CryptoRngCore) -> Result<Self, KeyError> {
        RsaPrivateKey::new(rng, RSA_BITS)
            .map(Self)
            .map_err(KeyError::Generation)
    }

    /// Loads a PKCS#8 DER private key.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::from_pkcs8_der(der).map_err(KeyError::Pkcs8)?;
        check_size(&key.to_public_key())?;
        Ok(Self(key))
    }

    /// Loads a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`).
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::from_pkcs8_pem(pem).map_err(KeyError::Pkcs8)?;
        check_size(&key.to_public_key())?;
        Ok(Self(key))
    }

    /// The private key as PKCS#8 DER (wiped from memory when dropped).
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        let doc = self.0.to_pkcs8_der().map_err(KeyError::Pkcs8)?;
        Ok(Zeroizing::new(doc.as_bytes().to_vec()))
    }

    /// The private key as PKCS#8 PEM (wiped from memory when dropped).
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>, KeyError> {
        self.0.to_pkcs8_pem(LineEnding::LF).map_err(KeyError::Pkcs8)
    }

    /// The public half, to give to initiators.
    #[must_use]
    pub fn public(&self) -> PublicIdentity {
        PublicIdentity(self.0.to_public_key())
    }
}

/// A responder's RSA-2048 public key, which an initiator must know beforehand.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicIdentity(RsaPublicKey);

impl fmt::Debug for PublicIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PublicIdentity(..)")
    }
}

impl PublicIdentity {
    /// Loads a SubjectPublicKeyInfo DER public key.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, KeyError> {
        let key = RsaPublicKey::from_public_key_der(der).map_err(KeyError::Spki)?;
        check_size(&key)?;
        Ok(Self(key))
    }

    /// Loads a SubjectPublicKeyInfo PEM public key (`-----BEGIN PUBLIC KEY-----`).
    pub fn from_spki_pem(pem: &str) -> Result<Self, KeyError> {
        let key = RsaPublicKey::from_public_key_pem(pem).map_err(KeyError::Spki)?;
        check_size(&key)?;
        Ok(Self(key))
    }

    /// The public key as SubjectPublicKeyInfo DER.
    pub fn to_spki_der(&self) -> Result<Vec<u8>, KeyError> {
        self.0
            .to_public_key_der()
            .map(|doc| doc.into_vec())
            .map_err(KeyError::Spki)
    }

    /// The public key as SubjectPublicKeyInfo PEM.
    pub fn to_spki_pem(&self) -> Result<String, KeyError> {
        self.0
            .to_public_key_pem(LineEnding::LF)
            .map_err(KeyError::Spki)
    }
}

/// Milliseconds since the UNIX epoch, the intro's timestamp unit.
fn unix_millis(now: SystemTime) -> Option<u64> {
    let since = now.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// The decrypted contents of an intro.
struct IntroBody {
    version: u32,
    timestamp_ms: u64,
    id: IntroId,
    keys: KeyMaterial,
}

impl IntroBody {
    fn to_bytes(&self) -> Zeroizing<[u8; INTRO_BODY_LEN]> {
        let mut out = Zeroizing::new([0u8; INTRO_BODY_LEN]);
        let parts: [&[u8]; 7] = [
            &self.version.to_be_bytes(),
            &self.timestamp_ms.to_be_bytes(),
            &self.id,
            &self.keys.initiator_to_responder.key,
            &self.keys.initiator_to_responder.iv,
            &self.keys.responder_to_initiator.key,
            &self.keys.responder_to_initiator.iv,
        ];
        let mut at = 0;
        for part in parts {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        out
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; INTRO_BODY_LEN] = bytes.try_into().ok()?;
        let (version, rest) = bytes.split_first_chunk::<4>()?;
        let (timestamp, rest) = rest.split_first_chunk::<8>()?;
        let (id, rest) = rest.split_first_chunk::<INTRO_ID_LEN>()?;
        let (k1, rest) = rest.split_first_chunk::<KEY_LEN>()?;
        let (iv1, rest) = rest.split_first_chunk::<IV_LEN>()?;
        let (k2, rest) = rest.split_first_chunk::<KEY_LEN>()?;
        let iv2: &[u8; IV_LEN] = rest.try_into().ok()?;
        Some(Self {
            version: u32::from_be_bytes(*version),
            timestamp_ms: u64::from_be_bytes(*timestamp),
            id: *id,
            keys: KeyMaterial {
                initiator_to_responder: DirectionKeys { key: *k1, iv: *iv1 },
                responder_to_initiator: DirectionKeys { key: *k2, iv: *iv2 },
            },
        })
    }
}

/// An intro that was sent and awaits its reply.
///
/// If the reply does not come, resend the same intro bytes: the responder
/// reports the repeat as [`AcceptError::Replayed`] with the intro id, so an
/// endpoint that still has the connection can resend its reply.
#[derive(Debug)]
pub struct PendingIntro {
    id: IntroId,
    keys: KeyMaterial,
}

impl PendingIntro {
    /// Writes an intro to `responder` into `buf[..INTRO_LEN]`, with fresh
    /// key material from `rng` and `now` as its timestamp.
    pub fn write(
        responder: &PublicIdentity,
        now: SystemTime,
        rng: &mut impl CryptoRngCore,
        buf: &mut [u8],
    ) -> Result<Self, IntroError> {
        let available = buf.len();
        let dst = buf.get_mut(..INTRO_LEN).ok_or(IntroError::BufferTooSmall {
            needed: INTRO_LEN,
            available,
        })?;
        let timestamp_ms = unix_millis(now).ok_or(IntroError::ClockBeforeEpoch)?;
        let mut id = [0u8; INTRO_ID_LEN];
        rng.fill_bytes(&mut id);
        let body = IntroBody {
            version: PROTOCOL_VERSION,
            timestamp_ms,
            id,
            keys: KeyMaterial::generate(rng),
        };
        let ciphertext = responder
            .0
            .encrypt(rng, Oaep::new::<Sha256>(), &body.to_bytes()[..])
            .map_err(IntroError::Encryption)?;
        // OAEP output is always exactly the modulus size, which check_size fixed.
        let ciphertext: &[u8; RSA_CIPHERTEXT_LEN] = ciphertext
            .as_slice()
            .try_into()
            .map_err(|_| IntroError::Encryption(rsa::Error::Internal))?;
        dst[0] = PacketType::Intro as u8;
        dst[1..].copy_from_slice(ciphertext);
        Ok(Self {
            id,
            keys: body.keys,
        })
    }

    /// The intro's random id.
    #[must_use]
    pub const fn id(&self) -> IntroId {
        self.id
    }

    /// Opens a datagram that should be the responder's reply. On success the
    /// connection's keys (the reply consumed nothing of the initiator's
    /// sending key) and the reply's frames, after the echoed intro id.
    ///
    /// A forged or unrelated datagram gives an error and leaves the intro
    /// pending, so the caller keeps waiting for the real reply.
    pub fn open_reply<'b>(
        &self,
        datagram: &'b mut [u8],
    ) -> Result<(ConnectionKeys, OpenedPacket<'b>), ReplyError> {
        let keys = self.keys.initiator_keys();
        let opened = keys.opener.open(datagram)?;
        if opened.header.packet_type() != PacketType::IntroReply {
            return Err(ReplyError::NotAReply);
        }
        let (echoed, frames) = opened
            .payload
            .split_first_chunk::<INTRO_ID_LEN>()
            .ok_or(ReplyError::WrongIntroId)?;
        if *echoed != self.id {
            return Err(ReplyError::WrongIntroId);
        }
        Ok((
            keys,
            OpenedPacket {
                payload: frames,
                ..opened
            },
        ))
    }
}

/// Remembers accepted intros until their timestamps leave the window, so a
/// replayed intro is refused, in bounded memory that an attacker cannot use
/// to lock honest initiators out.
///
/// Intros are kept ordered by timestamp. One whose timestamp has left the
/// window is forgotten, since the window check alone refuses its replay.
/// When the cache is over capacity the oldest intro is forgotten too, and
/// the guard raises a floor to its timestamp: from then on every intro not
/// newer than the floor is refused, so an evicted intro can never be
/// replayed, and a full cache never refuses an intro newer than everything
/// it evicted.
///
/// The trade-off: an attacker who can get `capacity` intros accepted within
/// one window (each costs it an RSA-OAEP encryption with the public key, and
/// the responder a decryption) keeps the floor near the newest forgotten
/// timestamp, so while the flood lasts initiators whose clocks run behind
/// that one are refused as [`AcceptError::StaleTimestamp`]. Size `capacity`
/// above the number of intros the endpoint's rate limit lets through in two
/// windows (an intro may be accepted `window` early and is remembered until
/// `window` after its timestamp), and the floor never rises in practice.
#[derive(Debug)]
pub struct ReplayGuard {
    window_ms: u64,
    capacity: usize,
    /// Remembered intros, oldest timestamp (ms since the UNIX epoch) first.
    /// Keyed by timestamp and id together: a replay repeats both.
    seen: BTreeSet<(u64, IntroId)>,
    /// The newest timestamp evicted for lack of room; intros not newer are refused.
    floor_ms: Option<u64>,
}

impl ReplayGuard {
    /// A guard accepting timestamps within `window` of now in either
    /// direction and remembering at most `capacity` intros.
    #[must_use]
    pub fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            capacity,
            seen: BTreeSet::new(),
            floor_ms: None,
        }
    }

    /// Number of intros remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no intro is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Accepts `id` with `timestamp_ms` at `now_ms` once; refuses it if the
    /// timestamp is outside the window or not newer than a forgotten intro,
    /// or the intro was accepted before.
    fn admit(&mut self, id: IntroId, timestamp_ms: u64, now_ms: u64) -> Result<(), AcceptError> {
        let skew_ms = timestamp_ms.abs_diff(now_ms);
        if skew_ms > self.window_ms {
            return Err(AcceptError::StaleTimestamp { skew_ms });
        }
        let entry = (timestamp_ms, id);
        if self.seen.contains(&entry) {
            return Err(AcceptError::Replayed { intro_id: id });
        }
        if self.floor_ms.is_some_and(|floor| timestamp_ms <= floor) {
            return Err(AcceptError::StaleTimestamp { skew_ms });
        }
        // A replay at `now` of an intro with timestamp `t` fails the window
        // check once now > t + window, so it can be forgotten.
        while let Some(&(oldest, _)) = self.seen.first()
            && oldest.saturating_add(self.window_ms) < now_ms
        {
            self.seen.pop_first();
        }
        self.seen.insert(entry);
        while self.seen.len() > self.capacity {
            // Possibly the intro just inserted: it is still accepted, and the
            // floor refuses its replays.
            let evicted = self.seen.pop_first().map(|(timestamp_ms, _)| timestamp_ms);
            self.floor_ms = self.floor_ms.max(evicted);
        }
        Ok(())
    }
}

impl Default for ReplayGuard {
    fn default() -> Self {
        Self::new(DEFAULT_TIMESTAMP_WINDOW, DEFAULT_REPLAY_CAPACITY)
    }
}

/// The responder's side of the intro: its identity key and its replay guard.
#[derive(Debug)]
pub struct Responder {
    identity: IdentityKey,
    replay: ReplayGuard,
}

impl Responder {
    /// A responder with the given identity and replay guard.
    #[must_use]
    pub const fn new(identity: IdentityKey, replay: ReplayGuard) -> Self {
        Self { identity, replay }
    }

    /// The responder's public identity.
    #[must_use]
    pub fn public(&self) -> PublicIdentity {
        self.identity.public()
    }

    /// The replay guard, e.g. to report its fill level.
    #[must_use]
    pub const fn replay_guard(&self) -> &ReplayGuard {
        &self.replay
    }

    /// Checks an intro datagram at time `now`. `rng` blinds the RSA
    /// decryption against timing attacks.
    pub fn accept(
        &mut self,
        datagram: &[u8],
        now: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Accepted, AcceptError> {
        if datagram.first() != Some(&(PacketType::Intro as u8)) {
            return Err(AcceptError::NotAnIntro);
        }
        if datagram.len() != INTRO_LEN {
            return Err(AcceptError::WrongLength(datagram.len()));
        }
        let now_ms = unix_millis(now).ok_or(AcceptError::ClockBeforeEpoch)?;
        let plaintext = Zeroizing::new(
            self.identity
                .0
                .decrypt_blinded(rng, Oaep::new::<Sha256>(), &datagram[1..])
                .map_err(|_| AcceptError::Decryption)?,
        );
        let body = IntroBody::from_bytes(&plaintext).ok_or(AcceptError::Malformed)?;
        if body.version != PROTOCOL_VERSION {
            return Err(AcceptError::UnsupportedVersion(body.version));
        }
        self.replay.admit(body.id, body.timestamp_ms, now_ms)?;
        Ok(Accepted {
            intro_id: body.id,
            keys: body.keys.responder_keys(),
        })
    }
}

/// An intro the responder accepted: the connection's keys, and the reply to send.
#[derive(Debug)]
pub struct Accepted {
    /// The intro's random id, which the reply echoes.
    pub intro_id: IntroId,
    /// The responder's sealer and opener for this connection.
    pub keys: ConnectionKeys,
}

impl Accepted {
    /// Starts the intro reply in `buf`: an IntroReply packet sealed with the
    /// responder's key, its plaintext beginning with the intro id. Frames may
    /// be pushed after it; [`PacketBuilder::finish`] seals it.
    pub fn start_reply<'s, 'b>(
        &'s mut self,
        buf: &'b mut [u8],
    ) -> Result<PacketBuilder<'s, 'b>, SealError> {
        let available = buf.len();
        let mut reply = self
            .keys
            .sealer
            .start_with(|packet_number| Header::IntroReply { packet_number }, buf)?;
        // What the builder already reserved (header and tag) plus the id.
        let needed = available - reply.remaining() + INTRO_ID_LEN;
        reply
            .push_bytes(&self.intro_id)
            .map_err(|_| SealError::BufferTooSmall { needed, available })?;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;
    use rand_core::OsRng;

    use super::*;
    use crate::error::OpenError;
    use crate::frame::{Frame, Message};
    use crate::test_support::{identity, other_identity, t0};

    fn responder(identity: &IdentityKey) -> Responder {
        Responder::new(identity.clone(), ReplayGuard::default())
    }

    fn intro(to: &IdentityKey, now: SystemTime) -> (PendingIntro, [u8; INTRO_LEN]) {
        let mut buf = [0u8; INTRO_LEN];
        let pending = PendingIntro::write(&to.public(), now, &mut OsRng, &mut buf).unwrap();
        (pending, buf)
    }

    #[test]
    fn intro_reply_and_data_round_trip_in_one_round_trip() {
        let (pending, intro_bytes) = intro(identity(), t0());
        let mut responder = responder(identity());
        let mut accepted = responder.accept(&intro_bytes, t0(), &mut OsRng).unwrap();
        assert_eq!(accepted.intro_id, pending.id());

        let mut reply_buf = [0u8; 1452];
        let mut reply = accepted.start_reply(&mut reply_buf).unwrap();
        reply
            .push(&Frame::Message(Message { data: b"welcome" }))
            .unwrap();
        let reply_len = reply.finish().unwrap();
        assert!(reply_len <= 3 * INTRO_LEN, "amplification bound");

        let (mut initiator, opened) = pending.open_reply(&mut reply_buf[..reply_len]).unwrap();
        let frames: Vec<_> = opened.frames().collect::<Result<_, _>>().unwrap();
        assert_eq!(frames, [Frame::Message(Message { data: b"welcome" })]);

        // Both directions now carry data; the reply used the responder's packet 0.
        let mut buf = [0u8; 1452];
        let mut packet = initiator.sealer.start(&mut buf).unwrap();
        packet.push(&Frame::Ping).unwrap();
        let len = packet.finish().unwrap();
        let opened = accepted.keys.opener.open(&mut buf[..len]).unwrap();
        assert_eq!(opened.packet_number(), 0);
        let mut packet = accepted.keys.sealer.start(&mut buf).unwrap();
        assert_eq!(packet.packet_number(), 1);
        packet.push(&Frame::Ping).unwrap();
        let len = packet.finish().unwrap();
        assert_eq!(
            initiator
                .opener
                .open(&mut buf[..len])
                .unwrap()
                .packet_number(),
            1
        );
    }

    #[test]
    fn an_intro_for_another_identity_is_refused() {
        let (_, intro_bytes) = intro(identity(), t0());
        let mut wrong = responder(other_identity());
        assert_eq!(
            wrong.accept(&intro_bytes, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Decryption)
        );
        assert!(wrong.replay_guard().is_empty());
    }

    #[test]
    fn a_replayed_intro_is_refused_and_names_its_id() {
        let (pending, intro_bytes) = intro(identity(), t0());
        let mut responder = responder(identity());
        responder.accept(&intro_bytes, t0(), &mut OsRng).unwrap();
        let later = t0() + Duration::from_secs(5);
        assert_eq!(
            responder
                .accept(&intro_bytes, later, &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::Replayed {
                intro_id: pending.id()
            })
        );
    }

    #[test]
    fn intros_outside_the_timestamp_window_are_refused_in_both_directions() {
        let (_, intro_bytes) = intro(identity(), t0());
        let mut responder = responder(identity());
        let window = DEFAULT_TIMESTAMP_WINDOW;
        let too_late = t0() + window + Duration::from_millis(1);
        let too_early = t0() - window - Duration::from_millis(1);
        for now in [too_late, too_early] {
            assert_eq!(
                responder.accept(&intro_bytes, now, &mut OsRng).map(|_| ()),
                Err(AcceptError::StaleTimestamp { skew_ms: 30_001 })
            );
        }
        // Exactly at the edge of the window it is still accepted.
        assert!(
            responder
                .accept(&intro_bytes, t0() + window, &mut OsRng)
                .is_ok()
        );
    }

    #[test]
    fn malformed_intros_are_refused_with_typed_errors() {
        let (_, intro_bytes) = intro(identity(), t0());
        let mut responder = responder(identity());
        let mut flipped = intro_bytes;
        flipped[100] ^= 0x01;
        assert_eq!(
            responder.accept(&flipped, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Decryption)
        );
        assert_eq!(
            responder
                .accept(&intro_bytes[..INTRO_LEN - 1], t0(), &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::WrongLength(INTRO_LEN - 1))
        );
        let mut longer = intro_bytes.to_vec();
        longer.push(0);
        assert_eq!(
            responder.accept(&longer, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::WrongLength(INTRO_LEN + 1))
        );
        let mut data_type = intro_bytes;
        data_type[0] = PacketType::Data as u8;
        assert_eq!(
            responder.accept(&data_type, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::NotAnIntro)
        );
        assert_eq!(
            responder.accept(&[], t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::NotAnIntro)
        );
        let before_epoch = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(
            responder
                .accept(&intro_bytes, before_epoch, &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::ClockBeforeEpoch)
        );
    }

    /// Encrypts an arbitrary plaintext as an intro, bypassing `PendingIntro`.
    fn raw_intro(plaintext: &[u8]) -> Vec<u8> {
        let public = identity().public();
        let mut out = vec![PacketType::Intro as u8];
        out.extend(
            public
                .0
                .encrypt(&mut OsRng, Oaep::new::<Sha256>(), plaintext)
                .unwrap(),
        );
        out
    }

    #[test]
    fn another_protocol_version_or_body_length_is_refused() {
        let body = IntroBody {
            version: PROTOCOL_VERSION + 1,
            timestamp_ms: unix_millis(t0()).unwrap(),
            id: [9; INTRO_ID_LEN],
            keys: KeyMaterial::generate(&mut OsRng),
        };
        let mut responder = responder(identity());
        let other_version = raw_intro(&body.to_bytes()[..]);
        assert_eq!(
            responder
                .accept(&other_version, t0(), &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::UnsupportedVersion(PROTOCOL_VERSION + 1))
        );
        let short = raw_intro(&body.to_bytes()[..INTRO_BODY_LEN - 1]);
        assert_eq!(
            responder.accept(&short, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Malformed)
        );
    }

    #[test]
    fn a_reply_must_echo_the_intro_id_and_be_an_intro_reply() {
        let (pending, intro_bytes) = intro(identity(), t0());
        let mut accepted = responder(identity())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();

        // A data packet under the right key is not a reply.
        let mut buf = [0u8; 200];
        let len = accepted
            .keys
            .sealer
            .start(&mut buf)
            .unwrap()
            .finish()
            .unwrap();
        assert_eq!(
            pending.open_reply(&mut buf[..len]).map(|_| ()),
            Err(ReplyError::NotAReply)
        );

        // A reply for another intro id.
        accepted.intro_id[0] ^= 1;
        let len = accepted.start_reply(&mut buf).unwrap().finish().unwrap();
        assert_eq!(
            pending.open_reply(&mut buf[..len]).map(|_| ()),
            Err(ReplyError::WrongIntroId)
        );

        // A reply to somebody else's intro does not even open.
        let (other_pending, _) = intro(identity(), t0());
        accepted.intro_id[0] ^= 1;
        let len = accepted.start_reply(&mut buf).unwrap().finish().unwrap();
        // A failed open leaves the buffer's contents unspecified: try a copy.
        let mut copy = buf;
        assert_eq!(
            other_pending.open_reply(&mut copy[..len]).map(|_| ()),
            Err(ReplyError::Open(OpenError::Authentication))
        );
        // The pending intro still accepts the genuine reply.
        assert!(pending.open_reply(&mut buf[..len]).is_ok());
    }

    #[test]
    fn a_full_replay_cache_evicts_the_oldest_and_refuses_it_and_anything_older() {
        let mut guard = ReplayGuard::new(Duration::from_secs(10), 2);
        let now = 1_000_000;
        guard.admit([1; 16], now, now).unwrap();
        guard.admit([2; 16], now + 1_000, now).unwrap();
        // Full: a newer intro is still accepted; the oldest is evicted.
        guard.admit([3; 16], now + 500, now).unwrap();
        assert_eq!(guard.len(), 2);
        // The evicted intro's replay is refused, and so is any intro not
        // newer than it, even though both are inside the window.
        assert!(matches!(
            guard.admit([1; 16], now, now),
            Err(AcceptError::StaleTimestamp { .. })
        ));
        assert!(matches!(
            guard.admit([4; 16], now - 1, now),
            Err(AcceptError::StaleTimestamp { .. })
        ));
        // The intros still remembered are refused as replays.
        assert_eq!(
            guard.admit([2; 16], now + 1_000, now),
            Err(AcceptError::Replayed { intro_id: [2; 16] })
        );
        assert_eq!(
            guard.admit([3; 16], now + 500, now),
            Err(AcceptError::Replayed { intro_id: [3; 16] })
        );
    }

    #[test]
    fn intros_that_left_the_window_are_forgotten_and_their_replays_stay_refused() {
        let mut guard = ReplayGuard::new(Duration::from_secs(10), 2);
        let now = 1_000_000;
        guard.admit([1; 16], now, now).unwrap();
        guard.admit([2; 16], now + 1_000, now).unwrap();
        // 10.001 s later the first intro's timestamp is out of the window:
        // it is forgotten, making room without raising the floor.
        let later = now + 10_001;
        guard.admit([3; 16], later - 5_000, later).unwrap();
        assert_eq!(guard.len(), 2);
        assert!(matches!(
            guard.admit([1; 16], now, later),
            Err(AcceptError::StaleTimestamp { .. })
        ));
        assert_eq!(
            guard.admit([2; 16], now + 1_000, later),
            Err(AcceptError::Replayed { intro_id: [2; 16] })
        );
    }

    /// `count` distinct intro ids from an attacker.
    fn flood_ids(count: u32) -> impl Iterator<Item = IntroId> {
        (0..count).map(|i| {
            let mut id = [0xaa; 16];
            id[..4].copy_from_slice(&i.to_be_bytes());
            id
        })
    }

    #[test]
    fn a_flood_of_current_intros_does_not_lock_out_initiators_whose_clocks_move_on() {
        let mut guard = ReplayGuard::new(Duration::from_secs(30), 64);
        let now = 1_000_000;
        // Once the cache is full the flood's own later intros are refused.
        let admitted = flood_ids(1_000)
            .filter(|id| guard.admit(*id, now, now).is_ok())
            .count();
        assert_eq!(admitted, 65);
        assert_eq!(guard.len(), 64);
        for step in 1..=10 {
            guard.admit([step; 16], now + u64::from(step), now).unwrap();
        }
    }

    #[test]
    fn a_flood_from_the_future_locks_out_only_until_the_clock_passes_it() {
        let mut guard = ReplayGuard::new(Duration::from_secs(30), 64);
        let now = 1_000_000;
        let edge = now + 30_000;
        // The first 65 fill the cache and raise the floor to `edge`; the
        // rest are refused.
        let admitted = flood_ids(1_000)
            .filter(|id| guard.admit(*id, edge, now).is_ok())
            .count();
        assert_eq!(admitted, 65);
        assert!(matches!(
            guard.admit([1; 16], now, now),
            Err(AcceptError::StaleTimestamp { .. })
        ));
        guard.admit([1; 16], edge + 1, edge + 1).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn the_replay_guard_stays_bounded_and_never_admits_an_intro_twice(
            capacity in 0usize..8,
            intros in proptest::collection::vec((0u8..12, 0u64..40, 0u64..60), 1..80),
        ) {
            // Timestamps and clock readings in seconds, window 10 s; ids
            // drawn from a small set so replays are frequent.
            let mut guard = ReplayGuard::new(Duration::from_secs(10), capacity);
            let mut admitted = HashSet::new();
            let mut now_s = 0;
            for (id, timestamp_s, advance_s) in intros {
                now_s += advance_s % 3;
                let intro = ([id; 16], timestamp_s * 1_000);
                if guard.admit(intro.0, intro.1, now_s * 1_000).is_ok() {
                    prop_assert!(admitted.insert(intro), "{intro:?} admitted twice");
                }
                prop_assert!(guard.len() <= capacity);
            }
        }
    }

    #[test]
    fn identity_keys_survive_pkcs8_and_spki_in_der_and_pem() {
        let key = identity();
        let der = key.to_pkcs8_der().unwrap();
        let pem = key.to_pkcs8_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(
            IdentityKey::from_pkcs8_der(&der).unwrap().public(),
            key.public()
        );
        assert_eq!(
            IdentityKey::from_pkcs8_pem(&pem).unwrap().public(),
            key.public()
        );

        let public = key.public();
        let spki_der = public.to_spki_der().unwrap();
        let spki_pem = public.to_spki_pem().unwrap();
        assert!(spki_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(PublicIdentity::from_spki_der(&spki_der).unwrap(), public);
        assert_eq!(PublicIdentity::from_spki_pem(&spki_pem).unwrap(), public);

        // A key loaded from PEM is usable for intros.
        let loaded = IdentityKey::from_pkcs8_pem(&pem).unwrap();
        let (_, intro_bytes) = intro(identity(), t0());
        assert!(
            responder(&loaded)
                .accept(&intro_bytes, t0(), &mut OsRng)
                .is_ok()
        );
    }

    #[test]
    fn garbage_and_wrong_size_keys_are_refused() {
        assert!(matches!(
            IdentityKey::from_pkcs8_der(b"not a key"),
            Err(KeyError::Pkcs8(_))
        ));
        assert!(matches!(
            IdentityKey::from_pkcs8_pem("-----BEGIN"),
            Err(KeyError::Pkcs8(_))
        ));
        assert!(matches!(
            PublicIdentity::from_spki_der(&[0x30, 0x00]),
            Err(KeyError::Spki(_))
        ));
        let small = RsaPrivateKey::new(&mut OsRng, 1024).unwrap();
        let der = small.to_pkcs8_der().unwrap();
        assert!(matches!(
            IdentityKey::from_pkcs8_der(der.as_bytes()),
            Err(KeyError::WrongSize(1024))
        ));
        let spki = small.to_public_key().to_public_key_der().unwrap();
        assert!(matches!(
            PublicIdentity::from_spki_der(spki.as_bytes()),
            Err(KeyError::WrongSize(1024))
        ));
    }

    #[test]
    fn a_short_buffer_or_pre_epoch_clock_is_refused_when_writing_an_intro() {
        let public = identity().public();
        let mut short = [0u8; INTRO_LEN - 1];
        assert!(matches!(
            PendingIntro::write(&public, t0(), &mut OsRng, &mut short),
            Err(IntroError::BufferTooSmall {
                needed: INTRO_LEN,
                ..
            })
        ));
        let mut buf = [0u8; INTRO_LEN];
        assert!(matches!(
            PendingIntro::write(
                &public,
                UNIX_EPOCH - Duration::from_secs(1),
                &mut OsRng,
                &mut buf
            ),
            Err(IntroError::ClockBeforeEpoch)
        ));
    }

    proptest! {
        // Each case costs an RSA decryption: few cases.
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn arbitrary_intro_sized_datagrams_never_panic_and_are_refused(body in proptest::collection::vec(any::<u8>(), RSA_CIPHERTEXT_LEN)) {
            let mut datagram = vec![PacketType::Intro as u8];
            datagram.extend(body);
            let mut responder = responder(identity());
            prop_assert!(responder.accept(&datagram, t0(), &mut OsRng).is_err());
        }
    }
}
