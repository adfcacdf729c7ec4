//! The responder's side: it checks an intro and answers it.

use core::fmt;
use core::num::NonZeroUsize;
use core::time::Duration;
use std::time::SystemTime;

use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::ephemeral::{EphemeralKey, EphemeralKeys};
use super::schedule::{ProofExchange, Transcript, derive_secrets, transcript};
use super::{
    ConnectionKeys, INTRO_LEN, PROTOCOL_VERSION, intro_id, resume_intro, rsa_intro, unix_millis,
    x25519_intro,
};
use crate::crypto::rsa_keys::RsaPrivate;
use crate::crypto::x25519::{SecretKey, SharedSecret};
use crate::error::{AcceptError, ReplyBuildError};
use crate::frame::Frame;
use crate::header::{Header, PacketNumber, PacketType, X25519_KEY_LEN};
use crate::identity::{IdentityKey, KeyPair, PublicIdentity, PublicKind};
use crate::keys::{KeyConfig, SECRET_LEN};
use crate::packet::{PacketOpener, PacketSealer};
use crate::replay::{INTRO_ID_LEN, IntroId, ReplayGuard};
use crate::ticket::{ResumptionSecret, Ticket, TicketContents, TicketKey, ticket_id};

/// The responder's side of the intro: its identity key and its replay guard.
#[derive(Debug)]
pub struct Responder {
    identity: IdentityKey,
    /// The identity's public half, made once (an RSA key's is parsed out
    /// of the private key, an X25519 key's is a scalar multiplication).
    public: PublicIdentity,
    replay: ReplayGuard,
    config: KeyConfig,
    /// Resumption tickets, if this responder issues them.
    tickets: Option<Tickets>,
}

/// How a responder issues and checks resumption tickets (wire format §6.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketPolicy {
    /// How long a ticket may be used after it was issued.
    pub lifetime: Duration,
    /// The most used tickets remembered at once (each is single-use until
    /// it expires). When full, the oldest is forgotten: it could then be
    /// presented again, but only inside the very intro that used it, which
    /// the intro's own timestamp and replay guard refuse (only the ticket's
    /// holder can seal another).
    pub capacity: NonZeroUsize,
}

impl Default for TicketPolicy {
    /// Ten minutes (a peer that reconnects "soon"), and 16 384 tickets
    /// used in that time (27 a second; about 1 MiB).
    fn default() -> Self {
        Self {
            lifetime: Duration::from_secs(600),
            capacity: NonZeroUsize::new(16_384).unwrap_or(NonZeroUsize::MIN),
        }
    }
}

/// A responder's ticket key and the tickets already used.
#[derive(Debug)]
struct Tickets {
    key: TicketKey,
    used: ReplayGuard,
    lifetime: Duration,
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
            tickets: None,
        }
    }

    /// This responder issues resumption tickets under `policy`, sealed with
    /// a fresh key from `rng` that lives only as long as the responder: a
    /// restarted one refuses every ticket issued before.
    #[must_use]
    pub fn with_tickets(mut self, policy: TicketPolicy, rng: &mut impl CryptoRngCore) -> Self {
        self.tickets = Some(Tickets {
            key: TicketKey::random(&self.public, rng),
            used: ReplayGuard::new(policy.lifetime, policy.capacity),
            lifetime: policy.lifetime,
        });
        self
    }

    /// How long the tickets this responder issues may be used; `None` if
    /// it issues none.
    #[must_use]
    pub fn ticket_lifetime(&self) -> Option<Duration> {
        self.tickets.as_ref().map(|t| t.lifetime)
    }

    /// A ticket for the session whose keys hold `secret`, whose initiator
    /// proved `initiator` (an X25519 identity proven in the intro is
    /// carried over; any other kind is not, and proves itself again),
    /// issued `now`. `None` if this responder issues no tickets.
    pub fn issue_ticket(
        &self,
        secret: &ResumptionSecret,
        initiator: Option<&PublicIdentity>,
        now: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Option<Ticket> {
        let tickets = self.tickets.as_ref()?;
        let contents = TicketContents {
            secret: secret.clone(),
            issued_ms: unix_millis(now)?,
            initiator: initiator.and_then(PublicIdentity::x25519_bytes).copied(),
        };
        Some(tickets.key.seal(&contents, rng))
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
        self.accept_from(datagram, now, &mut EphemeralKeys::new(0), rng)
    }

    /// [`Responder::accept`], with the responder's X25519 key from `keys`
    /// (drawn ahead, so its reply waits for no key generation; from `rng`
    /// if `keys` has none left). A key is taken only once the intro has
    /// opened, so a forged intro spends none.
    pub fn accept_from(
        &mut self,
        datagram: &[u8],
        now: SystemTime,
        keys: &mut EphemeralKeys,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Accepted, AcceptError> {
        let packet_type = match datagram.first() {
            Some(&byte) if byte == PacketType::Intro as u8 => PacketType::Intro,
            Some(&byte) if byte == PacketType::IntroX25519 as u8 => PacketType::IntroX25519,
            Some(&byte) if byte == PacketType::IntroResume as u8 => PacketType::IntroResume,
            _ => return Err(AcceptError::NotAnIntro),
        };
        let datagram: &[u8; INTRO_LEN] = datagram
            .try_into()
            .map_err(|_| AcceptError::WrongLength(datagram.len()))?;
        let now_ms = unix_millis(now).ok_or(AcceptError::ClockBeforeEpoch)?;
        let (keys, timestamp_ms) = match (&self.identity.0, &self.public.0, packet_type) {
            _ if packet_type == PacketType::IntroResume => {
                self.open_resumed(datagram, now_ms, keys, rng)?
            }
            (KeyPair::Rsa(key), _, PacketType::Intro) => Self::open_rsa(key, datagram, keys, rng)?,
            (KeyPair::X25519(key), PublicKind::X25519(public), PacketType::IntroX25519) => {
                Self::open_x25519(key, public, datagram, keys, rng)?
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

    /// The resumed intro: its ticket must open, be unexpired and unused,
    /// and its body open with the ticket's secret; the chaining key is the
    /// salt, and the ticket's initiator identity carries over.
    fn open_resumed(
        &mut self,
        datagram: &[u8; INTRO_LEN],
        now_ms: u64,
        keys: &mut EphemeralKeys,
        rng: &mut impl CryptoRngCore,
    ) -> Result<(Accepted, u64), AcceptError> {
        let tickets = self.tickets.as_mut().ok_or(AcceptError::TicketRefused)?;
        let ticket = resume_intro::ticket(datagram);
        let contents = tickets
            .key
            .open(&ticket)
            .ok_or(AcceptError::TicketRefused)?;
        let opened = resume_intro::open_body(&contents.secret, datagram)?;
        let fields = opened.fields;
        if fields.version != PROTOCOL_VERSION {
            return Err(AcceptError::UnsupportedVersion(fields.version));
        }
        // Only once the body proved the secret, and its timestamp will
        // pass, is the ticket spent.
        self.replay.check_window(fields.timestamp_ms, now_ms)?;
        tickets
            .used
            .admit(ticket_id(&ticket), contents.issued_ms, now_ms)
            .map_err(|e| match e {
                AcceptError::StaleTimestamp { .. } => AcceptError::TicketExpired,
                _ => AcceptError::TicketReused,
            })?;
        let ephemeral = keys.take(rng);
        let shared = ephemeral.secret().diffie_hellman(&opened.ephemeral);
        if !shared.was_contributory() {
            return Err(AcceptError::DegenerateKey);
        }
        let initiator = contents.initiator.map(PublicIdentity::from_x25519_bytes);
        let keys = Accepted::keys(
            fields.initiator_index,
            opened.chain,
            &ephemeral,
            &shared,
            initiator,
        );
        Ok((keys, fields.timestamp_ms))
    }

    /// The RSA intro: the initiator's secret is the salt. (The responder's
    /// ephemeral key is drawn after the decryption's blinding, so a seeded
    /// endpoint draws in the same order as before X25519 intros existed; the
    /// aws-lc backend blinds with its own generator but draws from `rng`
    /// what the rsa crate's blinding would.)
    fn open_rsa(
        key: &RsaPrivate,
        datagram: &[u8],
        keys: &mut EphemeralKeys,
        rng: &mut impl CryptoRngCore,
    ) -> Result<(Accepted, u64), AcceptError> {
        let body = rsa_intro::open(key, datagram, rng)?;
        if body.version != PROTOCOL_VERSION {
            return Err(AcceptError::UnsupportedVersion(body.version));
        }
        if body.secret.iter().all(|&b| b == 0) {
            return Err(AcceptError::DegenerateKey);
        }
        let ephemeral = keys.take(rng);
        let shared = ephemeral.secret().diffie_hellman(&body.ephemeral);
        if !shared.was_contributory() {
            return Err(AcceptError::DegenerateKey);
        }
        let keys = Accepted::keys(body.initiator_index, body.secret, &ephemeral, &shared, None);
        Ok((keys, body.timestamp_ms))
    }

    /// The X25519 intro: the chaining key, with `se` if the initiator
    /// proved a static key, is the salt.
    fn open_x25519(
        key: &SecretKey,
        public: &[u8; X25519_KEY_LEN],
        datagram: &[u8],
        keys: &mut EphemeralKeys,
        rng: &mut impl CryptoRngCore,
    ) -> Result<(Accepted, u64), AcceptError> {
        let opened = x25519_intro::accept(key, public, datagram)?;
        let fields = opened.fields;
        if fields.version != PROTOCOL_VERSION {
            return Err(AcceptError::UnsupportedVersion(fields.version));
        }
        let ephemeral = keys.take(rng);
        let salt = match &opened.initiator {
            Some(initiator) => {
                let se = ephemeral.secret().diffie_hellman(initiator);
                x25519_intro::mix(&opened.chain, &[], &se).ok_or(AcceptError::DegenerateKey)?
            }
            None => opened.chain,
        };
        let shared = ephemeral.secret().diffie_hellman(&opened.ephemeral);
        if !shared.was_contributory() {
            return Err(AcceptError::DegenerateKey);
        }
        let initiator = opened.initiator.map(PublicIdentity::from_x25519_bytes);
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
    /// Its private half, while the initiator is anonymous: an X25519
    /// identity may still prove itself with it (wire format §5.10).
    ephemeral_secret: Option<SecretKey>,
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
        ephemeral: &EphemeralKey,
        shared: &SharedSecret,
        initiator: Option<PublicIdentity>,
    ) -> Self {
        Self {
            intro_id: [0; INTRO_ID_LEN],
            initiator_index,
            intro: Sha256::new(),
            intro_len: 0,
            salt,
            ephemeral: *ephemeral.public(),
            ephemeral_secret: initiator.is_none().then(|| ephemeral.secret().clone()),
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
            intro: None,
            hash: self.transcript_hash(self.ephemeral, index)?,
            exchange: self
                .ephemeral_secret
                .as_ref()
                .map(|secret| ProofExchange::Responder(secret.clone())),
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
        let secrets = derive_secrets(&self.salt, &self.shared, &hash)
            .ok_or(ReplyBuildError::DegenerateKey)?;
        let mut sealer = PacketSealer::new(secrets.r2i, self.initiator_index, self.config);
        let mut reply = sealer
            .start_reply(ephemeral, index, buf)
            .map_err(ReplyBuildError::Seal)?;
        for frame in frames {
            reply.push(frame).map_err(ReplyBuildError::Encode)?;
        }
        let (len, _) = reply.finish().map_err(ReplyBuildError::Seal)?;
        let keys = ConnectionKeys {
            sealer,
            opener: PacketOpener::new(secrets.i2r, index, self.config),
            resumption: secrets.resumption,
        };
        Ok((len, keys))
    }
}
