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
//! can decrypt, and size the [`ReplayGuard`](crate::ReplayGuard) for that rate. The source
//! address is not verified, so a reply is at most [`MAX_REPLY_LEN`], three
//! times the intro (RFC 9000 §8.1's anti-amplification limit), by
//! construction.
//!
//! The `rsa` crate's decryption is not constant-time (the "Marvin" timing
//! side channel, RUSTSEC-2023-0071, has no fixed release yet). Decryption is
//! blinded with fresh randomness and the endpoint's intro rate limit bounds
//! how many timing measurements an attacker can collect.

mod body;
mod ephemeral;
mod initiator;
mod responder;
mod resume_intro;
#[cfg(test)]
mod resume_tests;
mod rsa_intro;
mod schedule;
#[cfg(test)]
mod tests;
mod x25519_intro;
#[cfg(test)]
mod x25519_tests;

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::packet::{PacketOpener, PacketSealer};
use crate::replay::{INTRO_ID_LEN, IntroId};
use crate::ticket::ResumptionSecret;

pub use ephemeral::{EphemeralKey, EphemeralKeys};
pub use initiator::{Established, PendingIntro, RefusedReply};
pub use responder::{Accepted, Responder, TicketPolicy};
pub use resume_intro::{RESUME_REFUSED_LEN, parse_resume_refused, write_resume_refused};
pub(crate) use schedule::ProofExchange;
pub use schedule::Transcript;

/// The protocol version this crate speaks; an intro with another is refused.
pub const PROTOCOL_VERSION: u32 = 2;
/// Length of an intro packet: type byte and RSA ciphertext.
pub const INTRO_LEN: usize = 1 + rsa_intro::RSA_CIPHERTEXT_LEN;

/// The first [`INTRO_LEN`] bytes of `buf`, where an intro of any kind is
/// written.
fn intro_room(buf: &mut [u8]) -> Result<&mut [u8; INTRO_LEN], crate::IntroError> {
    let available = buf.len();
    buf.get_mut(..INTRO_LEN)
        .and_then(|dst| <&mut [u8; INTRO_LEN]>::try_from(dst).ok())
        .ok_or(crate::IntroError::BufferTooSmall {
            needed: INTRO_LEN,
            available,
        })
}
/// The longest intro reply: three times the intro (anti-amplification).
pub const MAX_REPLY_LEN: usize = 3 * INTRO_LEN;

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
    /// The session's resumption secret: what a ticket issued in it
    /// carries (responder), and what the intro that resumes it is sealed
    /// with (initiator).
    pub resumption: ResumptionSecret,
}

impl ConnectionKeys {
    /// Gives back the expanded AES-GCM keys of both directions, for a
    /// connection gone quiet: the next packet sealed or opened expands
    /// its key again (see [`PacketSealer::release_key`] and
    /// [`PacketOpener::release_keys`]).
    pub fn release_expanded(&mut self) {
        self.sealer.release_key();
        self.opener.release_keys();
    }

    /// Whether either direction holds an expansion
    /// [`Self::release_expanded`] would give back.
    #[must_use]
    pub const fn holds_expanded(&self) -> bool {
        self.sealer.key_expanded() || self.opener.keys_expanded()
    }
}

/// Milliseconds since the UNIX epoch, the intro's timestamp unit.
fn unix_millis(now: SystemTime) -> Option<u64> {
    let since = now.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// The X25519 intro an anonymous initiator with the fixed `ephemeral`
/// private key writes to the responder whose private key is `responder`:
/// the wire format's example, which needs no RNG.
#[cfg(test)]
pub(crate) fn example_x25519_intro(
    responder: [u8; 32],
    ephemeral: [u8; 32],
    timestamp_ms: u64,
    initiator_index: u32,
) -> [u8; INTRO_LEN] {
    let responder = crate::crypto::x25519::SecretKey::from_bytes(responder).public_key();
    let fields = x25519_intro::Fields {
        version: PROTOCOL_VERSION,
        timestamp_ms,
        initiator_index,
    };
    let mut intro = [0u8; INTRO_LEN];
    let ephemeral = ephemeral::EphemeralKey::from_secret(
        crate::crypto::x25519::SecretKey::from_bytes(ephemeral),
    );
    let written = x25519_intro::write(&responder, None, &ephemeral, fields, &mut intro);
    assert!(written.is_ok(), "the example keys are not degenerate");
    intro
}
