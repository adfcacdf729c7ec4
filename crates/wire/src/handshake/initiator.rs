//! The initiator's side: the intro it sends and the reply it opens.

use core::fmt;
use std::time::SystemTime;

use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::body::IntroBody;
use super::ephemeral::EphemeralKey;
use super::schedule::{ProofExchange, Transcript, derive_secrets, transcript};
use super::{
    ConnectionKeys, PROTOCOL_VERSION, intro_id, intro_room, resume_intro, rsa_intro, unix_millis,
    x25519_intro,
};
use crate::crypto::x25519::SecretKey;
use crate::error::{IntroError, ReplyError};
use crate::header::{Header, PacketType};
use crate::identity::{IdentityKey, PublicIdentity, PublicKind};
use crate::keys::{KeyConfig, SECRET_LEN};
use crate::packet::{OpenedPacket, PacketOpener, PacketSealer};
use crate::replay::IntroId;
use crate::ticket::{ResumptionSecret, Ticket};

/// An intro that was sent and awaits its reply.
///
/// If the reply does not come, resend the same intro bytes: the responder
/// recognises the repeat ([`AcceptError::Replayed`](crate::AcceptError::Replayed), or [`intro_id`] before
/// decrypting) and resends its reply.
pub struct PendingIntro {
    intro: Sha256,
    id: IntroId,
    /// The salt of the session secrets: the RSA intro's secret, or the
    /// X25519 intro's chaining key.
    salt: Zeroizing<[u8; SECRET_LEN]>,
    /// The X25519 identity this side proved in the intro: its exchange with
    /// the responder's ephemeral key joins the salt.
    initiator: Option<SecretKey>,
    ephemeral: SecretKey,
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

impl PendingIntro {
    /// Writes an intro to `responder` into `buf[..INTRO_LEN]` with a fresh
    /// secret and X25519 key from `rng`, `now` as its timestamp, and
    /// `index` as the index the responder's packets will carry. The
    /// responder's kind decides the intro: RSA-OAEP to an RSA identity,
    /// the X25519 intro to an X25519 one. The initiator stays anonymous.
    pub fn write(
        responder: &PublicIdentity,
        index: u32,
        config: KeyConfig,
        now: SystemTime,
        rng: &mut impl CryptoRngCore,
        buf: &mut [u8],
    ) -> Result<Self, IntroError> {
        let ephemeral = EphemeralKey::random(rng);
        Self::write_as(None, ephemeral, responder, index, config, now, rng, buf)
    }

    /// [`PendingIntro::write`] with the fresh X25519 key `ephemeral`
    /// (drawn ahead, perhaps: [`crate::EphemeralKeys`]), proving the
    /// initiator's `identity` in the intro if it is an X25519 key and the
    /// responder's is too (wire format §6.5). An RSA identity proves
    /// itself after the reply, with [`Transcript::prove`], to either kind
    /// of responder. `rng` draws the RSA intro's secret and padding.
    #[expect(clippy::too_many_arguments, reason = "what an intro needs")]
    pub fn write_as(
        identity: Option<&IdentityKey>,
        ephemeral: EphemeralKey,
        responder: &PublicIdentity,
        index: u32,
        config: KeyConfig,
        now: SystemTime,
        rng: &mut impl CryptoRngCore,
        buf: &mut [u8],
    ) -> Result<Self, IntroError> {
        let dst = intro_room(buf)?;
        let timestamp_ms = unix_millis(now).ok_or(IntroError::ClockBeforeEpoch)?;
        let (salt, initiator) = match &responder.0 {
            PublicKind::Rsa(key) => {
                let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
                rng.fill_bytes(&mut secret[..]);
                let body = IntroBody {
                    version: PROTOCOL_VERSION,
                    timestamp_ms,
                    secret,
                    ephemeral: *ephemeral.public(),
                    initiator_index: index,
                };
                rsa_intro::seal(key, &body, rng, dst)?;
                (body.secret, None)
            }
            PublicKind::X25519(key) => {
                let initiator = identity.and_then(IdentityKey::x25519);
                let fields = x25519_intro::Fields {
                    version: PROTOCOL_VERSION,
                    timestamp_ms,
                    initiator_index: index,
                };
                let chain = x25519_intro::write(key, initiator, &ephemeral, fields, dst)?;
                (chain, initiator.cloned())
            }
        };
        Ok(Self::sent(dst, salt, initiator, ephemeral, index, config))
    }

    /// An intro that resumes the session `ticket` was issued in (wire
    /// format §6.6), sealed with that session's resumption `secret`, with
    /// the fresh X25519 key `ephemeral`: one round trip and no operation
    /// but the exchange of the two sides' fresh keys. The identity this
    /// side proved in that session's intro, if any, carries over; an RSA
    /// identity proves itself again after the reply.
    pub fn write_resumed(
        ticket: &Ticket,
        secret: &ResumptionSecret,
        ephemeral: EphemeralKey,
        index: u32,
        config: KeyConfig,
        now: SystemTime,
        buf: &mut [u8],
    ) -> Result<Self, IntroError> {
        let dst = intro_room(buf)?;
        let fields = x25519_intro::Fields {
            version: PROTOCOL_VERSION,
            timestamp_ms: unix_millis(now).ok_or(IntroError::ClockBeforeEpoch)?,
            initiator_index: index,
        };
        let salt = resume_intro::write(secret, ticket, &ephemeral, fields, dst)?;
        Ok(Self::sent(dst, salt, None, ephemeral, index, config))
    }

    /// The intro `dst` holds, waiting for its reply.
    fn sent(
        dst: &[u8],
        salt: Zeroizing<[u8; SECRET_LEN]>,
        initiator: Option<SecretKey>,
        ephemeral: EphemeralKey,
        index: u32,
        config: KeyConfig,
    ) -> Self {
        Self {
            intro: Sha256::new_with_prefix(dst),
            id: intro_id(dst),
            salt,
            initiator,
            ephemeral: ephemeral.into_secret(),
            index,
            config,
        }
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
        let salt = match &self.initiator {
            Some(key) => x25519_intro::mix(&self.salt, &[], &key.diffie_hellman(&ephemeral)),
            None => Some(self.salt.clone()),
        };
        let shared = self.ephemeral.diffie_hellman(&ephemeral);
        let Some(secrets) = salt.and_then(|salt| derive_secrets(&salt, shared.as_bytes(), &hash))
        else {
            return Err(refuse(self, ReplyError::DegenerateKey));
        };
        let mut opener = PacketOpener::new(secrets.r2i, self.index, self.config);
        let reply = match opener.open_typed(datagram, PacketType::IntroReply) {
            Ok(reply) => reply,
            Err(e) => return Err(refuse(self, ReplyError::Open(e))),
        };
        Ok(Established {
            keys: ConnectionKeys {
                sealer: PacketSealer::new(secrets.i2r, sender_index, self.config),
                opener,
                resumption: secrets.resumption,
            },
            transcript: Transcript {
                intro: Some(Box::new(self.intro.clone())),
                hash,
                exchange: Some(ProofExchange::Initiator(ephemeral)),
            },
            reply,
        })
    }
}
