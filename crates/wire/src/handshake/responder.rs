//! The responder's side: it checks an intro and answers it.

use core::fmt;
use std::time::SystemTime;

use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use x25519_dalek::{PublicKey, SharedSecret, StaticSecret};
use zeroize::Zeroizing;

use super::schedule::{Transcript, derive_secrets, transcript};
use super::{
    ConnectionKeys, INTRO_LEN, PROTOCOL_VERSION, intro_id, rsa_intro, unix_millis, x25519_intro,
};
use crate::error::{AcceptError, ReplyBuildError};
use crate::frame::Frame;
use crate::header::{Header, PacketNumber, PacketType, X25519_KEY_LEN};
use crate::identity::{IdentityKey, KeyPair, PublicIdentity, PublicKind};
use crate::keys::{KeyConfig, SECRET_LEN};
use crate::packet::{PacketOpener, PacketSealer};
use crate::replay::{INTRO_ID_LEN, IntroId, ReplayGuard};

/// The responder's side of the intro: its identity key and its replay guard.
#[derive(Debug)]
pub struct Responder {
    identity: IdentityKey,
    /// The identity's public half, made once (an RSA key's is parsed out
    /// of the private key, an X25519 key's is a scalar multiplication).
    public: PublicIdentity,
    replay: ReplayGuard,
    config: KeyConfig,
}

impl Responder {
    /// A responder with the given identity, replay guard and packet protection.
    #[must_use]
    pub fn new(identity: IdentityKey, replay: ReplayGuard, config: KeyConfig) -> Self {
        Self {
            public: identity.public(),
            identity,
            replay,
            config,
        }
    }

    /// The responder's public identity.
    #[must_use]
    pub fn public(&self) -> PublicIdentity {
        self.public.clone()
    }

    /// The replay guard, e.g. to report its fill level.
    #[must_use]
    pub const fn replay_guard(&self) -> &ReplayGuard {
        &self.replay
    }

    /// Checks an intro datagram at time `now`: an RSA intro if this
    /// responder's identity is RSA, an X25519 intro if it is X25519. `rng`
    /// blinds the RSA decryption against timing attacks and draws the
    /// responder's X25519 key.
    pub fn accept(
        &mut self,
        datagram: &[u8],
        now: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Accepted, AcceptError> {
        let packet_type = match datagram.first() {
            Some(&byte) if byte == PacketType::Intro as u8 => PacketType::Intro,
            Some(&byte) if byte == PacketType::IntroX25519 as u8 => PacketType::IntroX25519,
            _ => return Err(AcceptError::NotAnIntro),
        };
        if datagram.len() != INTRO_LEN {
            return Err(AcceptError::WrongLength(datagram.len()));
        }
        let now_ms = unix_millis(now).ok_or(AcceptError::ClockBeforeEpoch)?;
        let (keys, timestamp_ms) = match (&self.identity.0, &self.public.0, packet_type) {
            (KeyPair::Rsa(key), _, PacketType::Intro) => Self::open_rsa(key, datagram, rng)?,
            (KeyPair::X25519(key), PublicKind::X25519(public), PacketType::IntroX25519) => {
                Self::open_x25519(key, public, datagram, rng)?
            }
            _ => return Err(AcceptError::WrongKind),
        };
        let id = intro_id(datagram);
        self.replay.admit(id, timestamp_ms, now_ms)?;
        Ok(Accepted {
            intro_id: id,
            intro: Sha256::new_with_prefix(datagram),
            intro_len: datagram.len(),
            config: self.config,
            ..keys
        })
    }

    /// The RSA intro: the initiator's secret is the salt. (The responder's
    /// ephemeral key is drawn after the decryption's blinding, so a seeded
    /// endpoint draws in the same order as before X25519 intros existed.)
    fn open_rsa(
        key: &rsa::RsaPrivateKey,
        datagram: &[u8],
        rng: &mut impl CryptoRngCore,
    ) -> Result<(Accepted, u64), AcceptError> {
        let body = rsa_intro::open(key, datagram, rng)?;
        if body.version != PROTOCOL_VERSION {
            return Err(AcceptError::UnsupportedVersion(body.version));
        }
        if body.secret.iter().all(|&b| b == 0) {
            return Err(AcceptError::DegenerateKey);
        }
        let ephemeral = StaticSecret::random_from_rng(rng);
        let shared = ephemeral.diffie_hellman(&PublicKey::from(body.ephemeral));
        if !shared.was_contributory() {
            return Err(AcceptError::DegenerateKey);
        }
        let keys = Accepted::keys(body.initiator_index, body.secret, &ephemeral, &shared, None);
        Ok((keys, body.timestamp_ms))
    }

    /// The X25519 intro: the chaining key, with `se` if the initiator
    /// proved a static key, is the salt.
    fn open_x25519(
        key: &StaticSecret,
        public: &[u8; X25519_KEY_LEN],
        datagram: &[u8],
        rng: &mut impl CryptoRngCore,
    ) -> Result<(Accepted, u64), AcceptError> {
        let opened = x25519_intro::accept(key, public, datagram)?;
        let fields = opened.fields;
        if fields.version != PROTOCOL_VERSION {
            return Err(AcceptError::UnsupportedVersion(fields.version));
        }
        let ephemeral = StaticSecret::random_from_rng(rng);
        let salt = match &opened.initiator {
            Some(initiator) => {
                let se = ephemeral.diffie_hellman(initiator);
                x25519_intro::mix(&opened.chain, &[], &se).ok_or(AcceptError::DegenerateKey)?
            }
            None => opened.chain,
        };
        let shared = ephemeral.diffie_hellman(&opened.ephemeral);
        if !shared.was_contributory() {
            return Err(AcceptError::DegenerateKey);
        }
        let initiator = opened
            .initiator
            .map(|key| PublicIdentity::from_x25519_bytes(key.to_bytes()));
        let keys = Accepted::keys(fields.initiator_index, salt, &ephemeral, &shared, initiator);
        Ok((keys, fields.timestamp_ms))
    }
}

/// An intro the responder accepted; [`Accepted::reply`] turns it into the
/// reply and the connection's keys.
pub struct Accepted {
    intro_id: IntroId,
    initiator_index: u32,
    intro: Sha256,
    intro_len: usize,
    /// The salt of the session secrets (see [`PendingIntro`]'s).
    salt: Zeroizing<[u8; SECRET_LEN]>,
    /// The responder's ephemeral public key, which the reply carries.
    ephemeral: [u8; X25519_KEY_LEN],
    /// The exchange of the two ephemeral keys.
    shared: Zeroizing<[u8; X25519_KEY_LEN]>,
    /// The initiator's identity, proven in the X25519 intro.
    initiator: Option<PublicIdentity>,
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
    /// The key material of an accepted intro; the rest is filled in by
    /// [`Responder::accept`].
    fn keys(
        initiator_index: u32,
        salt: Zeroizing<[u8; SECRET_LEN]>,
        ephemeral: &StaticSecret,
        shared: &SharedSecret,
        initiator: Option<PublicIdentity>,
    ) -> Self {
        Self {
            intro_id: [0; INTRO_ID_LEN],
            initiator_index,
            intro: Sha256::new(),
            intro_len: 0,
            salt,
            ephemeral: PublicKey::from(ephemeral).to_bytes(),
            shared: Zeroizing::new(*shared.as_bytes()),
            initiator,
            config: KeyConfig::default(),
        }
    }

    /// The initiator's X25519 identity, if it proved one in the intro:
    /// only the holder of its private key could have sealed the intro's
    /// body (wire format §6.5). An RSA identity is proven later, with an
    /// Identity frame.
    #[must_use]
    pub const fn initiator_identity(&self) -> Option<&PublicIdentity> {
        self.initiator.as_ref()
    }

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
            hash: self.transcript_hash(self.ephemeral, index)?,
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
        let ephemeral = self.ephemeral;
        let hash = self.transcript_hash(ephemeral, index)?;
        let (i2r, r2i) = derive_secrets(&self.salt, &self.shared, &hash)
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
