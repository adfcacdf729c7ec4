//! The responder's side: it checks an intro and answers it.

use core::fmt;
use std::time::SystemTime;

use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use super::schedule::{Transcript, derive_secrets, transcript};
use super::{ConnectionKeys, INTRO_LEN, PROTOCOL_VERSION, intro_id, rsa_intro, unix_millis};
use crate::error::{AcceptError, ReplyBuildError};
use crate::frame::Frame;
use crate::header::{Header, PacketNumber, PacketType, X25519_KEY_LEN};
use crate::identity::{IdentityKey, PublicIdentity};
use crate::keys::{KeyConfig, SECRET_LEN};
use crate::packet::{PacketOpener, PacketSealer};
use crate::replay::{IntroId, ReplayGuard};

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
        let body = rsa_intro::open(&self.identity, datagram, rng)?;
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
