//! The version 2 handshake: one round trip from nothing to a protected
//! connection whose keys both sides helped make.
//!
//! The initiator knows the responder's RSA-2048 public key (its identity).
//! Its intro carries, RSA-OAEP(SHA-256) encrypted to that key, the protocol
//! version, its wall-clock time, a fresh 32-byte secret, a fresh X25519
//! public key and the index it chose for the connection. The responder
//! decrypts, checks, draws its own X25519 key and answers with an intro reply
//! whose header carries that key and the responder's index, and whose
//! frames are already sealed with the new keys:
//!
//! ```text
//! initiator                                          responder
//!   Intro { RSA-OAEP(version, time, secret, X25519 key, index) } ->
//!                          <- IntroReply { X25519 key, index | AEAD(frames...) }
//!   Data { AEAD(frames...) }                        <-> Data { AEAD(frames...) }
//! ```
//!
//! Both sides then derive, with HKDF-SHA256 (RFC 5869):
//!
//! ```text
//! transcript = SHA-256(intro datagram || intro reply header)
//! prk        = HKDF-Extract(salt = initiator secret, ikm = X25519 shared secret)
//! initiator → responder secret = HKDF-Expand(prk, "tern v2 i2r" || transcript, 32)
//! responder → initiator secret = HKDF-Expand(prk, "tern v2 r2i" || transcript, 32)
//! ```
//!
//! So a replayed intro, to any responder, after any restart or clock step,
//! gets a reply with a fresh X25519 key and a session nobody else can
//! derive; a recorded session stays secret if the RSA key leaks later (the
//! X25519 private keys are gone); and only the holder of the RSA private key
//! learns the initiator's secret and can make a reply that authenticates.
//!
//! Everything is consumed by value: a [`PendingIntro`] becomes one
//! [`Established`] and an [`Accepted`] one reply, each with exactly one
//! [`ConnectionKeys`], and the compiler refuses a second:
//!
//! ```compile_fail
//! # fn twice(pending: tern_wire::PendingIntro, reply: &mut [u8], repeat: &mut [u8]) {
//! let first = pending.open_reply(reply);
//! let second = pending.open_reply(repeat); // error: `pending` was moved
//! # }
//! ```
//!
//! This crate never reads a clock or an entropy source: the current time and
//! a cryptographic RNG are arguments.
//!
//! What the endpoint must do around [`Responder::accept`]: every intro of the
//! right length costs an RSA-2048 decryption (about a millisecond), and
//! anyone who knows the public key can make fresh valid intros for the price
//! of an RSA public-key operation. A repeated intro has the same
//! [`intro_id`], computable without RSA, so an endpoint can answer an
//! initiator's retransmission with the reply it stored; otherwise it must
//! rate-limit intros per source address and globally, below what its cores
//! can decrypt, and size the [`ReplayGuard`] for that rate. The source
//! address is not verified, so a reply is at most [`MAX_REPLY_LEN`], three
//! times the intro (RFC 9000 §8.1's anti-amplification limit), by
//! construction.
//!
//! The `rsa` crate's decryption is not constant-time (the "Marvin" timing
//! side channel, RUSTSEC-2023-0071, has no fixed release yet). Decryption is
//! blinded with fresh randomness and the endpoint's intro rate limit bounds
//! how many timing measurements an attacker can collect.

use core::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hkdf::Hkdf;
use rand_core::CryptoRngCore;
use rsa::Oaep;
use sha2::{Digest, Sha256};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{AcceptError, IntroError, ReplyBuildError, ReplyError};
use crate::frame::Frame;
use crate::header::{Header, PacketNumber, PacketType, X25519_KEY_LEN};
use crate::identity::{IdentityKey, PublicIdentity, RSA_BITS};
use crate::keys::{KeyConfig, SECRET_LEN, TrafficSecret};
use crate::packet::{OpenedPacket, PacketOpener, PacketSealer};
use crate::replay::{INTRO_ID_LEN, IntroId, ReplayGuard};

/// The protocol version this crate speaks; an intro with another is refused.
pub const PROTOCOL_VERSION: u32 = 2;
/// RSA ciphertext size: the modulus size in bytes.
const RSA_CIPHERTEXT_LEN: usize = RSA_BITS / 8;
/// Length of an intro packet: type byte and RSA ciphertext.
pub const INTRO_LEN: usize = 1 + RSA_CIPHERTEXT_LEN;
/// The longest intro reply: three times the intro (anti-amplification).
pub const MAX_REPLY_LEN: usize = 3 * INTRO_LEN;
/// Length of the intro's plaintext: version (4), timestamp (8), secret (32),
/// X25519 public key (32), initiator index (4).
const INTRO_BODY_LEN: usize = 4 + 8 + SECRET_LEN + X25519_KEY_LEN + 4;

/// HKDF label of the initiator-to-responder secret.
const LABEL_I2R: &[u8] = b"tern v2 i2r";
/// HKDF label of the responder-to-initiator secret.
const LABEL_R2I: &[u8] = b"tern v2 r2i";

/// The id of an intro datagram: the first 16 bytes of its SHA-256. Needs no
/// key, so an endpoint can recognise a repeated intro before decrypting it.
#[must_use]
pub fn intro_id(datagram: &[u8]) -> IntroId {
    let digest = Sha256::digest(datagram);
    let mut id = [0u8; INTRO_ID_LEN];
    id.copy_from_slice(&digest[..INTRO_ID_LEN]);
    id
}

/// One side's packet protection for a connection.
#[derive(Debug)]
pub struct ConnectionKeys {
    /// Seals what this side sends.
    pub sealer: PacketSealer,
    /// Opens what the peer sends.
    pub opener: PacketOpener,
}

/// Milliseconds since the UNIX epoch, the intro's timestamp unit.
fn unix_millis(now: SystemTime) -> Option<u64> {
    let since = now.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// The decrypted contents of an intro; the secret is wiped on drop.
struct IntroBody {
    version: u32,
    timestamp_ms: u64,
    secret: Zeroizing<[u8; SECRET_LEN]>,
    ephemeral: [u8; X25519_KEY_LEN],
    initiator_index: u32,
}

impl IntroBody {
    fn to_bytes(&self) -> Zeroizing<[u8; INTRO_BODY_LEN]> {
        let mut out = Zeroizing::new([0u8; INTRO_BODY_LEN]);
        let parts: [&[u8]; 5] = [
            &self.version.to_be_bytes(),
            &self.timestamp_ms.to_be_bytes(),
            &self.secret[..],
            &self.ephemeral,
            &self.initiator_index.to_be_bytes(),
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
        let (secret, rest) = rest.split_first_chunk::<SECRET_LEN>()?;
        let (ephemeral, rest) = rest.split_first_chunk::<X25519_KEY_LEN>()?;
        let index: &[u8; 4] = rest.try_into().ok()?;
        Some(Self {
            version: u32::from_be_bytes(*version),
            timestamp_ms: u64::from_be_bytes(*timestamp),
            secret: Zeroizing::new(*secret),
            ephemeral: *ephemeral,
            initiator_index: u32::from_be_bytes(*index),
        })
    }
}

/// The session secrets of both directions, from the handshake's inputs.
/// Refuses a non-contributory X25519 result and identical directions.
fn derive_secrets(
    initiator_secret: &[u8; SECRET_LEN],
    shared: &[u8; X25519_KEY_LEN],
    transcript: &[u8; 32],
) -> Option<(TrafficSecret, TrafficSecret)> {
    if shared.iter().all(|&b| b == 0) {
        return None;
    }
    let hkdf = Hkdf::<Sha256>::new(Some(initiator_secret), shared);
    let mut i2r = [0u8; SECRET_LEN];
    let mut r2i = [0u8; SECRET_LEN];
    let mut info = [0u8; 11 + 32];
    for (label, out) in [(LABEL_I2R, &mut i2r), (LABEL_R2I, &mut r2i)] {
        info[..label.len()].copy_from_slice(label);
        info[label.len()..].copy_from_slice(transcript);
        hkdf.expand(&info, out).ok()?;
    }
    let distinct = i2r != r2i;
    let secrets = (
        TrafficSecret::from_bytes(i2r),
        TrafficSecret::from_bytes(r2i),
    );
    i2r.zeroize();
    r2i.zeroize();
    distinct.then_some(secrets)
}

/// SHA-256 of the intro datagram and the reply header.
fn transcript(intro: &Sha256, reply_header: &[u8]) -> [u8; 32] {
    intro.clone().chain_update(reply_header).finalize().into()
}

/// An intro that was sent and awaits its reply.
///
/// If the reply does not come, resend the same intro bytes: the responder
/// recognises the repeat ([`AcceptError::Replayed`], or [`intro_id`] before
/// decrypting) and resends its reply.
pub struct PendingIntro {
    intro: Sha256,
    id: IntroId,
    secret: Zeroizing<[u8; SECRET_LEN]>,
    ephemeral: StaticSecret,
    index: u32,
    config: KeyConfig,
}

impl fmt::Debug for PendingIntro {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingIntro")
            .field("id", &self.id)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// A datagram that was not the reply to a pending intro; the intro is
/// given back, still pending, so the caller keeps waiting for the real one.
#[derive(Debug)]
pub struct RefusedReply {
    /// The intro, still waiting for its reply.
    pub pending: PendingIntro,
    /// Why the datagram was refused.
    pub error: ReplyError,
}

/// The initiator's side of a finished handshake.
#[derive(Debug)]
pub struct Established<'b> {
    /// This side's sealer (to the responder's index) and opener.
    pub keys: ConnectionKeys,
    /// Recognises repeats of the reply.
    pub transcript: Transcript,
    /// The reply's frames.
    pub reply: OpenedPacket<'b>,
}

/// The transcript hash of a finished handshake.
#[derive(Clone)]
pub struct Transcript {
    intro: Sha256,
    hash: [u8; 32],
}

impl fmt::Debug for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Transcript").field(&self.hash).finish()
    }
}

impl Transcript {
    /// SHA-256 of the intro datagram and the reply header.
    #[must_use]
    pub const fn hash(&self) -> [u8; 32] {
        self.hash
    }

    /// Whether `datagram` is a repeat of the reply that established this
    /// connection (the responder resends it when the intro is repeated).
    /// No key is derived: a repeat is to be dropped.
    #[must_use]
    pub fn is_repeated_reply(&self, datagram: &[u8]) -> bool {
        match Header::parse(datagram) {
            Ok((Header::IntroReply { .. }, len)) => {
                transcript(&self.intro, &datagram[..len]) == self.hash
            }
            _ => false,
        }
    }
}

impl PendingIntro {
    /// Writes an intro to `responder` into `buf[..INTRO_LEN]` with a fresh
    /// secret and X25519 key from `rng`, `now` as its timestamp, and
    /// `index` as the index the responder's packets will carry.
    pub fn write(
        responder: &PublicIdentity,
        index: u32,
        config: KeyConfig,
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
        let ephemeral = StaticSecret::random_from_rng(&mut *rng);
        let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
        rng.fill_bytes(&mut secret[..]);
        let body = IntroBody {
            version: PROTOCOL_VERSION,
            timestamp_ms,
            secret,
            ephemeral: PublicKey::from(&ephemeral).to_bytes(),
            initiator_index: index,
        };
        let ciphertext = responder
            .0
            .encrypt(rng, Oaep::new::<Sha256>(), &body.to_bytes()[..])
            .map_err(IntroError::Encryption)?;
        // OAEP output is always exactly the modulus size, which the key's
        // size check fixed.
        let ciphertext: &[u8; RSA_CIPHERTEXT_LEN] = ciphertext
            .as_slice()
            .try_into()
            .map_err(|_| IntroError::Encryption(rsa::Error::Internal))?;
        dst[0] = PacketType::Intro as u8;
        dst[1..].copy_from_slice(ciphertext);
        Ok(Self {
            intro: Sha256::new_with_prefix(&dst[..]),
            id: intro_id(dst),
            secret: body.secret,
            ephemeral,
            index,
            config,
        })
    }

    /// The intro's id.
    #[must_use]
    pub const fn id(&self) -> IntroId {
        self.id
    }

    /// Opens a datagram that should be the responder's reply and, if it is,
    /// turns the pending intro into the connection's keys and the reply's
    /// frames. A forged or unrelated datagram gives the intro back, still
    /// pending, with the reason.
    #[expect(
        clippy::result_large_err,
        reason = "once per connection; the pending intro comes back by value so it stays one-shot"
    )]
    pub fn open_reply(self, datagram: &mut [u8]) -> Result<Established<'_>, RefusedReply> {
        let refuse = |pending, error| RefusedReply { pending, error };
        let (header, header_len) = match Header::parse(datagram) {
            Ok(parsed) => parsed,
            Err(e) => return Err(refuse(self, ReplyError::Open(e.into()))),
        };
        let Header::IntroReply {
            receiver_index,
            ephemeral,
            sender_index,
            ..
        } = header
        else {
            let error = ReplyError::Open(crate::OpenError::WrongType(header.packet_type()));
            return Err(refuse(self, error));
        };
        if receiver_index != self.index {
            let error = ReplyError::Open(crate::OpenError::WrongReceiverIndex(receiver_index));
            return Err(refuse(self, error));
        }
        let hash = transcript(&self.intro, &datagram[..header_len]);
        let shared = self.ephemeral.diffie_hellman(&PublicKey::from(ephemeral));
        let Some((i2r, r2i)) = derive_secrets(&self.secret, shared.as_bytes(), &hash) else {
            return Err(refuse(self, ReplyError::DegenerateKey));
        };
        let mut opener = PacketOpener::new(r2i, self.index, self.config);
        let reply = match opener.open_typed(datagram, PacketType::IntroReply) {
            Ok(reply) => reply,
            Err(e) => return Err(refuse(self, ReplyError::Open(e))),
        };
        Ok(Established {
            keys: ConnectionKeys {
                sealer: PacketSealer::new(i2r, sender_index, self.config),
                opener,
            },
            transcript: Transcript {
                intro: self.intro.clone(),
                hash,
            },
            reply,
        })
    }
}

/// The responder's side of the intro: its identity key and its replay guard.
#[derive(Debug)]
pub struct Responder {
    identity: IdentityKey,
    replay: ReplayGuard,
    config: KeyConfig,
}

impl Responder {
    /// A responder with the given identity, replay guard and packet protection.
    #[must_use]
    pub const fn new(identity: IdentityKey, replay: ReplayGuard, config: KeyConfig) -> Self {
        Self {
            identity,
            replay,
            config,
        }
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
    /// decryption against timing attacks and draws the responder's X25519 key.
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
        if body.secret.iter().all(|&b| b == 0) {
            return Err(AcceptError::DegenerateKey);
        }
        let ephemeral = StaticSecret::random_from_rng(&mut *rng);
        let shared = ephemeral.diffie_hellman(&PublicKey::from(body.ephemeral));
        if !shared.was_contributory() {
            return Err(AcceptError::DegenerateKey);
        }
        let id = intro_id(datagram);
        self.replay.admit(id, body.timestamp_ms, now_ms)?;
        Ok(Accepted {
            intro_id: id,
            initiator_index: body.initiator_index,
            intro: Sha256::new_with_prefix(datagram),
            intro_len: datagram.len(),
            secret: body.secret,
            ephemeral,
            shared: Zeroizing::new(*shared.as_bytes()),
            config: self.config,
        })
    }
}

/// An intro the responder accepted; [`Accepted::reply`] turns it into the
/// reply and the connection's keys.
pub struct Accepted {
    intro_id: IntroId,
    initiator_index: u32,
    intro: Sha256,
    intro_len: usize,
    secret: Zeroizing<[u8; SECRET_LEN]>,
    ephemeral: StaticSecret,
    shared: Zeroizing<[u8; X25519_KEY_LEN]>,
    config: KeyConfig,
}

impl fmt::Debug for Accepted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Accepted")
            .field("intro_id", &self.intro_id)
            .field("initiator_index", &self.initiator_index)
            .finish_non_exhaustive()
    }
}

impl Accepted {
    /// The intro's id (see [`intro_id`]).
    #[must_use]
    pub const fn intro_id(&self) -> IntroId {
        self.intro_id
    }

    /// The index the initiator chose: every packet to it carries it.
    #[must_use]
    pub const fn initiator_index(&self) -> u32 {
        self.initiator_index
    }

    /// The largest reply this intro allows: three times its size.
    #[must_use]
    pub const fn max_reply_len(&self) -> usize {
        3 * self.intro_len
    }

    /// The transcript of the handshake that [`Accepted::reply`] with the
    /// same `index` completes: the responder checks the initiator's
    /// [`crate::IdentityProof`] against it. The reply's header, and so the
    /// transcript, depends only on the intro, the responder's X25519 key and
    /// `index`; pass the index given to [`Accepted::reply`].
    pub fn transcript(&self, index: u32) -> Result<Transcript, ReplyBuildError> {
        Ok(Transcript {
            intro: self.intro.clone(),
            hash: self.transcript_hash(PublicKey::from(&self.ephemeral).to_bytes(), index)?,
        })
    }

    /// SHA-256 of the intro and the header of the reply carrying the
    /// responder's X25519 public key `ephemeral` and `index`.
    fn transcript_hash(
        &self,
        ephemeral: [u8; X25519_KEY_LEN],
        index: u32,
    ) -> Result<[u8; 32], ReplyBuildError> {
        let header = Header::IntroReply {
            receiver_index: self.initiator_index,
            packet_number: PacketNumber::encode(0, None).ok_or(ReplyBuildError::DegenerateKey)?,
            ephemeral,
            sender_index: index,
        };
        let mut header_bytes = [0u8; 64];
        let header_len = header
            .emit(&mut header_bytes)
            .map_err(ReplyBuildError::Encode)?;
        Ok(transcript(&self.intro, &header_bytes[..header_len]))
    }

    /// Writes the intro reply into `buf` with `frames` sealed in it, and
    /// returns its length and the connection's keys. `index` is the index
    /// the responder chose: the initiator's packets will carry it.
    ///
    /// The reply is at most [`Accepted::max_reply_len`] bytes whatever the
    /// size of `buf`: frames that do not fit are refused. Keep the reply's
    /// bytes to resend them if the intro is repeated; never build a second.
    pub fn reply(
        self,
        index: u32,
        frames: &[Frame<'_>],
        buf: &mut [u8],
    ) -> Result<(usize, ConnectionKeys), ReplyBuildError> {
        let max = buf.len().min(self.max_reply_len());
        let buf = &mut buf[..max];
        let ephemeral = PublicKey::from(&self.ephemeral).to_bytes();
        let hash = self.transcript_hash(ephemeral, index)?;
        let (i2r, r2i) = derive_secrets(&self.secret, &self.shared, &hash)
            .ok_or(ReplyBuildError::DegenerateKey)?;
        let mut sealer = PacketSealer::new(r2i, self.initiator_index, self.config);
        let mut reply = sealer
            .start_reply(ephemeral, index, buf)
            .map_err(ReplyBuildError::Seal)?;
        for frame in frames {
            reply.push(frame).map_err(ReplyBuildError::Encode)?;
        }
        let (len, _) = reply.finish().map_err(ReplyBuildError::Seal)?;
        let keys = ConnectionKeys {
            sealer,
            opener: PacketOpener::new(i2r, index, self.config),
        };
        Ok((len, keys))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use proptest::prelude::*;
    use rand_core::OsRng;

    use super::*;
    use crate::error::OpenError;
    use crate::frame::{Message, Padding};
    use crate::test_support::{identity, other_identity, t0};

    const INITIATOR_INDEX: u32 = 0x1111_1111;
    const RESPONDER_INDEX: u32 = 0x2222_2222;

    fn responder(identity: &IdentityKey) -> Responder {
        Responder::new(
            identity.clone(),
            ReplayGuard::default(),
            KeyConfig::default(),
        )
    }

    fn intro(to: &IdentityKey, now: SystemTime) -> (PendingIntro, [u8; INTRO_LEN]) {
        let mut buf = [0u8; INTRO_LEN];
        let pending = PendingIntro::write(
            &to.public(),
            INITIATOR_INDEX,
            KeyConfig::default(),
            now,
            &mut OsRng,
            &mut buf,
        )
        .unwrap();
        (pending, buf)
    }

    fn reply(accepted: Accepted, frames: &[Frame<'_>]) -> (Vec<u8>, ConnectionKeys) {
        let mut buf = vec![0u8; 1452];
        let (len, keys) = accepted.reply(RESPONDER_INDEX, frames, &mut buf).unwrap();
        buf.truncate(len);
        (buf, keys)
    }

    /// A data packet with one message, sealed by `keys`.
    fn data(keys: &mut ConnectionKeys, message: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 200];
        let mut packet = keys.sealer.start(&mut buf).unwrap();
        packet
            .push(&Frame::Message(Message {
                id: 0,
                data: message,
            }))
            .unwrap();
        let (len, _) = packet.finish().unwrap();
        buf.truncate(len);
        buf
    }

    /// A whole handshake: initiator's keys, responder's keys, reply bytes.
    fn handshake() -> (ConnectionKeys, ConnectionKeys, Vec<u8>, [u8; INTRO_LEN]) {
        let (pending, intro_bytes) = intro(identity(), t0());
        let accepted = responder(identity())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        let (reply_bytes, responder_keys) = reply(accepted, &[]);
        let mut copy = reply_bytes.clone();
        let established = pending.open_reply(&mut copy).unwrap();
        (established.keys, responder_keys, reply_bytes, intro_bytes)
    }

    #[test]
    fn intro_reply_and_data_round_trip_in_one_round_trip() {
        let (pending, intro_bytes) = intro(identity(), t0());
        assert_eq!(pending.id(), intro_id(&intro_bytes));
        let accepted = responder(identity())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        assert_eq!(accepted.intro_id(), pending.id());
        assert_eq!(accepted.initiator_index(), INITIATOR_INDEX);
        let (mut reply_bytes, mut responder_keys) = reply(
            accepted,
            &[Frame::Message(Message {
                id: 0,
                data: b"welcome",
            })],
        );
        let established = pending.open_reply(&mut reply_bytes).unwrap();
        let frames: Vec<_> = established
            .reply
            .frames()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            frames,
            [Frame::Message(Message {
                id: 0,
                data: b"welcome"
            })]
        );
        let mut initiator = established.keys;
        assert_eq!(initiator.sealer.peer_index(), RESPONDER_INDEX);

        // Both directions carry data; the reply used the responder's packet 0.
        let mut packet = data(&mut initiator, b"hi");
        let opened = responder_keys.opener.open(&mut packet).unwrap();
        assert_eq!(opened.packet_number(), 0);
        let mut packet = data(&mut responder_keys, b"hello");
        let opened = initiator.opener.open(&mut packet).unwrap();
        assert_eq!(opened.packet_number(), 1);
    }

    #[test]
    fn point_1_a_replayed_intro_to_a_restarted_responder_gets_keys_that_open_nothing_captured() {
        let (mut initiator, _, _, intro_bytes) = handshake();
        let captured = data(&mut initiator, b"secret");
        // The responder restarted (fresh guard) and its clock stepped back.
        for now in [t0(), t0() - Duration::from_secs(20)] {
            let accepted = responder(identity())
                .accept(&intro_bytes, now, &mut OsRng)
                .unwrap();
            let (_, mut replayed_session) = reply(accepted, &[]);
            assert_eq!(
                replayed_session
                    .opener
                    .open(&mut captured.clone())
                    .map(|_| ()),
                Err(OpenError::Authentication)
            );
        }
    }

    #[test]
    fn point_2_the_rsa_key_and_the_recording_do_not_open_the_session() {
        let (mut initiator, _, reply_bytes, intro_bytes) = handshake();
        let recorded = data(&mut initiator, b"recorded");
        // The attacker holds the RSA key: it decrypts the intro, runs the
        // responder's side on it and even sees the genuine reply header, but
        // lacks both X25519 private keys.
        let accepted = Responder::new(
            identity().clone(),
            ReplayGuard::default(),
            KeyConfig::default(),
        )
        .accept(&intro_bytes, t0(), &mut OsRng)
        .unwrap();
        let (attacker_reply, mut attacker) = reply(accepted, &[]);
        assert_ne!(attacker_reply[5..38], reply_bytes[5..38]);
        assert_eq!(
            attacker.opener.open(&mut recorded.clone()).map(|_| ()),
            Err(OpenError::Authentication)
        );
    }

    #[test]
    fn point_3_a_repeated_reply_is_recognised_and_yields_no_second_key_set() {
        let (pending, intro_bytes) = intro(identity(), t0());
        let accepted = responder(identity())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        let (reply_bytes, _) = reply(accepted, &[]);
        let mut copy = reply_bytes.clone();
        let established = pending.open_reply(&mut copy).unwrap();
        // `pending` is consumed; the only thing a repeat can do is be
        // recognised as one.
        assert!(established.transcript.is_repeated_reply(&reply_bytes));
        let mut other = reply_bytes.clone();
        other[10] ^= 1;
        assert!(!established.transcript.is_repeated_reply(&other));
        assert!(!established.transcript.is_repeated_reply(&[]));
    }

    #[test]
    fn a_forged_or_foreign_reply_leaves_the_intro_pending() {
        let (pending, intro_bytes) = intro(identity(), t0());
        let accepted = responder(identity())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        let (reply_bytes, mut responder_keys) = reply(accepted, &[]);
        let mut forged = reply_bytes.clone();
        let last = forged.len() - 1;
        forged[last] ^= 1;
        let refused = pending.open_reply(&mut forged).unwrap_err();
        assert_eq!(refused.error, ReplyError::Open(OpenError::Authentication));
        // A data packet is not a reply (point 5, handshake side).
        let mut packet = data(&mut responder_keys, b"x");
        let refused = refused.pending.open_reply(&mut packet).unwrap_err();
        assert_eq!(
            refused.error,
            ReplyError::Open(OpenError::WrongType(PacketType::Data))
        );
        // A reply to somebody else's intro does not open.
        let (other, other_intro) = intro(identity(), t0());
        let other_accepted = responder(identity())
            .accept(&other_intro, t0(), &mut OsRng)
            .unwrap();
        let (other_reply, _) = reply(other_accepted, &[]);
        let refused = refused
            .pending
            .open_reply(&mut other_reply.clone())
            .unwrap_err();
        assert!(other.open_reply(&mut other_reply.clone()).is_ok());
        // The pending intro still accepts the genuine reply.
        assert!(refused.pending.open_reply(&mut reply_bytes.clone()).is_ok());
    }

    #[test]
    fn point_4_degenerate_key_material_is_refused_and_reflection_does_not_open() {
        let body = |secret: [u8; 32], ephemeral: [u8; 32]| IntroBody {
            version: PROTOCOL_VERSION,
            timestamp_ms: unix_millis(t0()).unwrap(),
            secret: Zeroizing::new(secret),
            ephemeral,
            initiator_index: 1,
        };
        let good_ephemeral = PublicKey::from(&StaticSecret::random_from_rng(OsRng)).to_bytes();
        let mut responder = responder(identity());
        // All-zero initiator secret.
        let zero_secret = raw_intro(&body([0; 32], good_ephemeral).to_bytes()[..]);
        assert_eq!(
            responder.accept(&zero_secret, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::DegenerateKey)
        );
        // A low-order X25519 point: the shared secret would be all zeros.
        let zero_point = raw_intro(&body([7; 32], [0; 32]).to_bytes()[..]);
        assert_eq!(
            responder.accept(&zero_point, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::DegenerateKey)
        );
        assert!(derive_secrets(&[7; 32], &[0; 32], &[1; 32]).is_none());
        // The responder's own packets, reflected back to it, do not open:
        // the two directions' keys come from distinct labels.
        let (_, mut responder_keys, _, _) = handshake();
        let mut reflected = data(&mut responder_keys, b"mirror");
        reflected[1..5].copy_from_slice(&RESPONDER_INDEX.to_be_bytes());
        assert_eq!(
            responder_keys.opener.open(&mut reflected).map(|_| ()),
            Err(OpenError::Authentication)
        );
    }

    #[test]
    fn point_6_the_reply_is_bounded_by_three_times_the_intro() {
        let (_, intro_bytes) = intro(identity(), t0());
        let big = [0u8; 1400];
        let accepted = responder(identity())
            .accept(&intro_bytes, t0(), &mut OsRng)
            .unwrap();
        assert_eq!(accepted.max_reply_len(), 3 * INTRO_LEN);
        let mut buf = [0u8; 1452];
        assert!(matches!(
            accepted.reply(
                1,
                &[Frame::Message(Message { id: 0, data: &big })],
                &mut buf
            ),
            Err(ReplyBuildError::Encode(_))
        ));
        // Padding to the whole buffer stops at the bound.
        let accepted = responder(identity())
            .accept(&intro(identity(), t0()).1, t0(), &mut OsRng)
            .unwrap();
        let padding = Frame::Padding(Padding {
            len: MAX_REPLY_LEN - 1 - 4 - 1 - 32 - 4 - 16,
        });
        let (len, _) = accepted.reply(1, &[padding], &mut buf).unwrap();
        assert_eq!(len, MAX_REPLY_LEN);
    }

    #[test]
    fn point_8_packets_name_their_connection_by_the_receivers_index() {
        let (mut initiator, mut responder_keys, reply_bytes, _) = handshake();
        assert_eq!(
            crate::header::peek_receiver_index(&reply_bytes),
            Some(INITIATOR_INDEX)
        );
        // The responder's table maps its index to the connection; a packet
        // from any address finds it, and only opens if authentic.
        let table: HashMap<u32, usize> = HashMap::from([(RESPONDER_INDEX, 0), (9, 1)]);
        let mut packet = data(&mut initiator, b"after rebinding");
        let index = crate::header::peek_receiver_index(&packet).unwrap();
        assert_eq!(table.get(&index), Some(&0));
        assert!(responder_keys.opener.open(&mut packet).is_ok());
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
        assert_eq!(
            responder
                .accept(
                    &intro_bytes,
                    UNIX_EPOCH - Duration::from_secs(1),
                    &mut OsRng
                )
                .map(|_| ()),
            Err(AcceptError::ClockBeforeEpoch)
        );
        let mut wrong = Responder::new(
            other_identity().clone(),
            ReplayGuard::default(),
            KeyConfig::default(),
        );
        assert_eq!(
            wrong.accept(&intro_bytes, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Decryption)
        );
        assert!(wrong.replay_guard().is_empty());
    }

    #[test]
    fn a_repeated_intro_is_refused_as_a_replay_naming_its_id() {
        let (pending, intro_bytes) = intro(identity(), t0());
        let mut responder = responder(identity());
        responder.accept(&intro_bytes, t0(), &mut OsRng).unwrap();
        assert_eq!(
            responder
                .accept(&intro_bytes, t0() + Duration::from_secs(5), &mut OsRng)
                .map(|_| ()),
            Err(AcceptError::Replayed {
                intro_id: pending.id()
            })
        );
        let late = t0() + Duration::from_secs(31);
        assert!(matches!(
            responder.accept(&intro_bytes, late, &mut OsRng),
            Err(AcceptError::StaleTimestamp { skew_ms: 31_000 })
        ));
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
        let mut body = IntroBody {
            version: 1,
            timestamp_ms: unix_millis(t0()).unwrap(),
            secret: Zeroizing::new([3; 32]),
            ephemeral: [9; 32],
            initiator_index: 1,
        };
        let mut responder = responder(identity());
        let version_1 = raw_intro(&body.to_bytes()[..]);
        assert_eq!(
            responder.accept(&version_1, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::UnsupportedVersion(1))
        );
        body.version = PROTOCOL_VERSION;
        let short = raw_intro(&body.to_bytes()[..INTRO_BODY_LEN - 1]);
        assert_eq!(
            responder.accept(&short, t0(), &mut OsRng).map(|_| ()),
            Err(AcceptError::Malformed)
        );
    }

    #[test]
    fn a_short_buffer_or_pre_epoch_clock_is_refused_when_writing_an_intro() {
        let public = identity().public();
        let write = |now, buf: &mut [u8]| {
            PendingIntro::write(&public, 1, KeyConfig::default(), now, &mut OsRng, buf)
        };
        assert!(matches!(
            write(t0(), &mut [0u8; INTRO_LEN - 1]),
            Err(IntroError::BufferTooSmall {
                needed: INTRO_LEN,
                ..
            })
        ));
        assert!(matches!(
            write(UNIX_EPOCH - Duration::from_secs(1), &mut [0u8; INTRO_LEN]),
            Err(IntroError::ClockBeforeEpoch)
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The intro plaintext codec: decode ∘ encode = id, and every other
        /// length is refused.
        #[test]
        fn intro_bodies_round_trip_and_every_truncation_is_refused(
            version in any::<u32>(),
            timestamp_ms in any::<u64>(),
            secret in any::<[u8; 32]>(),
            ephemeral in any::<[u8; 32]>(),
            initiator_index in any::<u32>(),
        ) {
            let body = IntroBody { version, timestamp_ms, secret: Zeroizing::new(secret), ephemeral, initiator_index };
            let bytes = body.to_bytes();
            let back = IntroBody::from_bytes(&bytes[..]).unwrap();
            prop_assert_eq!(back.to_bytes()[..].to_vec(), bytes[..].to_vec());
            for cut in 0..INTRO_BODY_LEN {
                prop_assert!(IntroBody::from_bytes(&bytes[..cut]).is_none());
            }
        }
    }

    proptest! {
        // Each case costs an RSA decryption or an X25519 exchange: few cases.
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn arbitrary_intro_sized_datagrams_never_panic_and_are_refused(body in proptest::collection::vec(any::<u8>(), RSA_CIPHERTEXT_LEN)) {
            let mut datagram = vec![PacketType::Intro as u8];
            datagram.extend(body);
            let mut responder = responder(identity());
            prop_assert!(responder.accept(&datagram, t0(), &mut OsRng).is_err());
        }

        #[test]
        fn mutated_or_truncated_replies_never_panic_and_never_establish(
            mutations in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let (pending, intro_bytes) = intro(identity(), t0());
            let accepted = responder(identity()).accept(&intro_bytes, t0(), &mut OsRng).unwrap();
            let (reply_bytes, _) = reply(accepted, &[Frame::Ping]);
            let mut mutated = reply_bytes.clone();
            for (index, xor) in mutations {
                let i = index.index(mutated.len());
                mutated[i] ^= xor;
            }
            let refused = pending.open_reply(&mut mutated).unwrap_err();
            let cut = cut.index(reply_bytes.len());
            let refused = refused.pending.open_reply(&mut reply_bytes[..cut].to_vec()).unwrap_err();
            prop_assert!(refused.pending.open_reply(&mut reply_bytes.clone()).is_ok());
        }
    }
}
