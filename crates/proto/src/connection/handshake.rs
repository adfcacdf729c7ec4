//! The handshake as the connection sees it: the initiator's intro, resent
//! until the reply arrives; the responder's reply to an accepted intro,
//! kept to answer a repeated intro until the initiator's first packet
//! confirms the handshake. (The reply itself is received with the other
//! datagrams, in `recv`.)

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use quanta::Instant;

use rand_core::CryptoRngCore;
use tern_wire::{
    Accepted, EphemeralKey, Frame, INTRO_LEN, IdentityKey, IdentityKind, KeyConfig, PendingIntro,
    PublicIdentity,
};

use super::carried::{Carried, CarriedRecord};
use super::identity::PeerIdentity;
use super::path::Path;
use super::resumption::ReceivedTicket;
use super::{Connecting, Connection, Start, State};
use crate::Side;

/// The longest wait between an intro's resends. A lost reply is only
/// answered by the next intro, and the way back may lose several replies
/// in a row (a burst): kept short, the handshake timeout (10 s by default)
/// holds ten tries rather than six at a 2 s cap.
pub(super) const MAX_INTRO_BACKOFF: Duration = Duration::from_secs(1);

/// Copies of the stored reply sent for each repeated intro, within the
/// amplification limit (two of an RSA or X25519 reply fit in three times
/// the intro's bytes). A repeated intro says the reply was most likely
/// lost; the second copy gives a lossy way back a second chance in the
/// same round trip.
const REPLIES_PER_REPEATED_INTRO: usize = 2;

impl Connection {
    /// An outgoing connection: writes the intro to `responder` (sent by the
    /// first `poll_transmit`) with `local_index` for the responder's packets
    /// to carry. `wall` is the wall-clock time for the intro's timestamp.
    /// The intro's kind follows the responder's key. `prover` is this
    /// side's identity if it proves it: an X25519 identity to an X25519
    /// responder is proven in the intro itself, any other with an Identity
    /// frame after the reply (an RSA signature, or an X25519 identity's
    /// exchange with the responder's ephemeral key).
    ///
    /// `ephemeral` is the intro's fresh X25519 key, which the endpoint
    /// draws.
    ///
    /// With a `resume` ticket from this responder the intro is the resumed
    /// one (wire format §6.6); if the responder refuses it, a full intro
    /// follows (`on_resume_refused`).
    #[expect(clippy::too_many_arguments, reason = "what an intro needs")]
    pub(crate) fn connect(
        start: Start,
        ephemeral: EphemeralKey,
        keys: KeyConfig,
        remote: SocketAddr,
        responder: &PublicIdentity,
        prover: Option<&IdentityKey>,
        resume: Option<&ReceivedTicket>,
        wall: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Self, tern_wire::IntroError> {
        let Start {
            ref config,
            local_index,
            now,
            ..
        } = start;
        let mut intro = vec![0u8; INTRO_LEN].into_boxed_slice();
        let in_intro = Self::proven_in_intro(prover, responder);
        let pending = match resume {
            Some(resume) => PendingIntro::write_resumed(
                &resume.ticket,
                &resume.secret,
                ephemeral,
                local_index,
                keys,
                wall,
                &mut intro,
            )?,
            None => PendingIntro::write_as(
                in_intro,
                ephemeral,
                responder,
                local_index,
                keys,
                wall,
                rng,
                &mut intro,
            )?,
        };
        let backoff = config.initial_rtt * 3;
        let connecting = Connecting {
            pending: Some(pending),
            intro,
            token: None,
            resumed: resume.is_some(),
            resend_at: now,
            backoff,
            deadline: now + config.handshake_timeout,
        };
        let path = Path::validated(remote, config.path_mtu());
        let identity =
            PeerIdentity::initiator(responder, config.prove_identity && in_intro.is_none());
        let mut connection = Self::new(
            Side::Initiator,
            State::Connecting(Box::new(connecting)),
            path,
            start,
            rng,
        );
        connection.identity = identity;
        Ok(connection)
    }

    /// The identity an initiator proves in the intro itself: an X25519
    /// identity to an X25519 responder (a resumed intro carries the same
    /// proof in its ticket). Any other proves itself with an Identity frame
    /// after the reply.
    pub(super) fn proven_in_intro<'k>(
        prover: Option<&'k IdentityKey>,
        responder: &PublicIdentity,
    ) -> Option<&'k IdentityKey> {
        prover.filter(|key| {
            key.kind() == IdentityKind::X25519 && responder.kind() == IdentityKind::X25519
        })
    }

    /// An incoming connection from an accepted intro of `intro_len` bytes
    /// from `remote`: builds the reply (kept to resend if the intro comes
    /// again) with the first flow-control frames in it.
    pub(crate) fn accept(
        start: Start,
        accepted: Accepted,
        intro_len: usize,
        remote: SocketAddr,
        rng: &mut impl CryptoRngCore,
    ) -> Result<Self, tern_wire::ReplyBuildError> {
        let local_index = start.local_index;
        let mut path = Path::unconfirmed(remote, start.config.path_mtu());
        path.on_received(intro_len);
        let mut connection = Self::new(Side::Responder, State::Established, path, start, rng);
        let required = connection.config.require_identity;
        match accepted.initiator_identity() {
            // Proven in the intro (an X25519 identity): nothing to wait for.
            Some(initiator) => {
                connection.identity = PeerIdentity::proven_in_intro(initiator, required);
            }
            None => {
                connection.identity = PeerIdentity::responder(required);
                // What the initiator's proof of identity, if one comes, is
                // checked against.
                connection.transcript = Some(Box::new(accepted.transcript(local_index)?));
            }
        }
        let mut buf = vec![0u8; accepted.max_reply_len()];
        // This side's message limit goes in the reply, so the initiator
        // knows it from its first packet on rather than assuming 1 GiB for
        // a round trip.
        let limit = connection
            .message_limits
            .due_frame(connection.config.max_message_size);
        let mut frames = vec![Frame::Ping];
        frames.extend(limit);
        let (len, keys) = accepted.reply(local_index, &frames, &mut buf)?;
        buf.truncate(len);
        // The reply is packet 0 of this side: the initiator acknowledges it.
        let mut record = CarriedRecord::new();
        record.push(Carried::Ping);
        if limit.is_some() {
            connection.message_limits.on_sent();
            record.push(Carried::MaxMessageSize);
        }
        let now = connection.epoch;
        connection.on_sent(now, 0, len, true, true, record);
        connection.keys = Some(keys);
        connection.reply = Some(buf.into_boxed_slice());
        connection.confirm_deadline = Some(connection.epoch + connection.config.handshake_timeout);
        connection.ping_due = false;
        Ok(connection)
    }

    /// How many copies of the reply to resend for a repeated intro of
    /// `intro_len` bytes, until the handshake is confirmed: up to
    /// [`REPLIES_PER_REPEATED_INTRO`], as many as the path's amplification
    /// limit allows. The reply keeps its packet number, so its
    /// acknowledgement gives no RTT sample from then on
    /// (`LossDetector::on_resent`).
    pub(crate) fn replies_for_repeated_intro(&mut self, now: Instant, intro_len: usize) -> usize {
        self.path.on_received(intro_len);
        let Some(len) = self.reply.as_deref().map(<[u8]>::len) else {
            return 0;
        };
        let mut copies = 0;
        while copies < REPLIES_PER_REPEATED_INTRO && self.path.can_send(len) {
            self.path.on_sent(len);
            copies += 1;
        }
        if copies > 0 {
            self.loss.on_resent(now);
        }
        copies
    }

    /// The reply as first built (sent once when the intro is accepted).
    pub(crate) fn stored_reply(&self) -> Option<&[u8]> {
        self.reply.as_deref()
    }

    /// A Retry from the responder's address: if it answers this side's
    /// pending intro, the intro goes again at once with `token`, and keeps
    /// it on later resends (which go on backing off until the handshake
    /// deadline). Returns whether it was taken.
    pub(crate) fn on_retry(
        &mut self,
        now: Instant,
        from: SocketAddr,
        intro: &tern_wire::replay::IntroId,
        token: tern_wire::Token,
    ) -> bool {
        let State::Connecting(c) = &mut self.state else {
            return false;
        };
        let answers = c.pending.as_ref().is_some_and(|p| p.id() == *intro);
        if !answers || from != self.path.remote() {
            return false;
        }
        // A second Retry (the first token expired, say) replaces the token
        // but does not hasten the back-off again: answering every Retry at
        // once would let a forger of Retries pace this side's intros.
        if c.token.replace(token).is_none() {
            c.resend_at = now;
        }
        true
    }

    /// The intro's id while this side still waits for its reply: what a
    /// Retry for this connect names.
    pub(crate) fn pending_intro_id(&self) -> Option<tern_wire::replay::IntroId> {
        match &self.state {
            State::Connecting(c) => c.pending.as_ref().map(PendingIntro::id),
            _ => None,
        }
    }
}
