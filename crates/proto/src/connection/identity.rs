//! Who is at the other end: the identity each side proved.
//!
//! The handshake proves the responder's key to the initiator: only its
//! holder can answer the intro. An initiator with an X25519 identity that
//! connects to an X25519 responder proves its key in the intro itself
//! (tern-wire's X25519 intro: only the key's holder can seal its body), so
//! the responder knows it before it answers. Otherwise the initiator
//! proves its own key only if it chooses to ([`ConnectionConfig::prove_identity`], on by default
//! when its endpoint has an identity): once the reply authenticated, it
//! proves it for the session's transcript (an RSA identity signs it; an
//! X25519 identity, which cannot sign, derives a key from its exchange with
//! the responder's ephemeral key) and sends the proof (tern-wire's
//! Identity frame) first in its next packet, again if that packet is lost,
//! until the responder acknowledges it.
//!
//! The responder checks a proof that comes within the handshake timeout,
//! once per connection (after that it lets go of the transcript a proof is
//! checked against, so an anonymous initiator's connection does not hold
//! it for life):
//! it reports the proven key ([`Connection::peer_identity`]), and one that
//! does not verify is a protocol violation. When it requires a proof
//! ([`ConnectionConfig::require_identity`]), it tells the application of
//! the connection only once the proof verified; until then a packet that
//! carries application data is dropped without an acknowledgement (the
//! initiator sends the data again; nothing from an unproven peer is
//! buffered), and the connection is closed if no proof came within the
//! handshake timeout.
//!
//! The check is an RSA public-key operation (118.6 µs with the key's
//! parsing, against 1.22 ms for accepting the intro: docs/benchmarks.md,
//! level 0). It is not
//! charged to the intro limiter separately: it happens at most once per
//! connection (a failed check closes it, later proofs after a valid one
//! are not checked), and every connection's intro was charged to the
//! limiter before the endpoint made it, so the intro budget bounds the
//! checks too.

use quanta::Instant;
use rand_core::CryptoRngCore;
use tern_wire::{Frame, Identity, IdentityKey, IdentityProof, PublicIdentity};

#[cfg(doc)]
use crate::ConnectionConfig;

use super::error::ProtocolError;
use super::event::Event;
use super::{Connection, State};
use crate::Side;

/// What a connection knows and owes about identities.
#[derive(Debug, Default)]
pub(super) struct PeerIdentity {
    /// The peer's key: on the initiator the one it connected to, on the
    /// responder the one a proof verified for. Boxed: a connection without
    /// one (an anonymous initiator's) pays a pointer, not a key.
    key: Option<Box<PublicIdentity>>,
    /// Whether `key` is proven (the initiator's becomes so with the reply).
    proven: bool,
    /// Responder: the proof is required before data and announcement.
    required: bool,
    /// Responder: the handshake was confirmed while the proof was still
    /// missing; `Connected` waits for it.
    announce_pending: bool,
    /// Initiator: signs once the reply arrives (the endpoint holds the key).
    wants_to_prove: bool,
    /// Initiator: this side's proof, kept until the responder acknowledged
    /// it.
    proof: Option<Box<IdentityProof>>,
    /// Initiator: the proof goes in the next packet.
    proof_due: bool,
}

impl PeerIdentity {
    /// The initiator's: `responder` is the key it connects to, proven by
    /// the reply; it proves its own key if `prove`.
    pub(super) fn initiator(responder: &PublicIdentity, prove: bool) -> Self {
        Self {
            key: Some(Box::new(responder.clone())),
            wants_to_prove: prove,
            ..Self::default()
        }
    }

    /// The responder's: nothing known until a proof verifies.
    pub(super) fn responder(required: bool) -> Self {
        Self {
            required,
            ..Self::default()
        }
    }

    /// The responder's, when the initiator proved `key` in the intro (an
    /// X25519 identity, wire format §6.5).
    pub(super) fn proven_in_intro(key: &PublicIdentity, required: bool) -> Self {
        Self {
            key: Some(Box::new(key.clone())),
            proven: true,
            required,
            ..Self::default()
        }
    }

    /// Initiator: the responder's key it connects to.
    pub(super) fn responder_key(&self) -> Option<&PublicIdentity> {
        self.key.as_deref()
    }

    /// The proof to put first in the next packet, if one is due.
    pub(super) fn due_proof(&self) -> Option<Frame<'_>> {
        self.proof
            .as_deref()
            .filter(|_| self.proof_due)
            .map(IdentityProof::frame)
    }

    /// The proof went out in a packet.
    pub(super) fn on_proof_sent(&mut self) {
        self.proof_due = false;
    }

    /// Whether the application may hear of the connection and its data.
    fn is_satisfied(&self) -> bool {
        !self.required || self.proven
    }
}

impl Connection {
    /// The peer's proven identity: on the initiator the key it connected
    /// to, once the reply proved it; on the responder the key the
    /// initiator's proof verified for, or `None` (an anonymous initiator,
    /// or no proof yet).
    pub fn peer_identity(&self) -> Option<&PublicIdentity> {
        let identity = &self.identity;
        identity.key.as_deref().filter(|_| identity.proven)
    }

    /// Whether the initiator waits for its endpoint's key to sign its
    /// proof: the reply arrived and no proof was made yet.
    pub(crate) fn wants_to_prove(&self) -> bool {
        self.identity.wants_to_prove && self.transcript.is_some()
    }

    /// Signs this session's transcript with `key` and sends the proof with
    /// the next packet. A signature that fails leaves the initiator
    /// anonymous (the responder decides what that means).
    pub(crate) fn prove(&mut self, key: &IdentityKey, rng: &mut impl CryptoRngCore) {
        self.identity.wants_to_prove = false;
        let Some(transcript) = &self.transcript else {
            return;
        };
        if let Ok(proof) = transcript.prove(key, rng) {
            self.identity.proof = Some(Box::new(proof));
            self.identity.proof_due = true;
        }
    }

    /// The initiator's reply authenticated: the responder's key is proven.
    pub(super) fn on_responder_proven(&mut self) {
        self.identity.proven = true;
    }

    /// The responder's handshake is confirmed: `Connected` now, or once the
    /// required proof verified.
    pub(super) fn announce_confirmed(&mut self) {
        if self.identity.is_satisfied() {
            self.notify(Event::Connected);
        } else {
            self.identity.announce_pending = true;
        }
    }

    /// When the responder stops waiting for a proof: a required one that
    /// has not come closes the connection then, and an optional one is no
    /// longer checked, so the transcript it would be checked against is
    /// let go (an anonymous initiator's connection would otherwise hold it
    /// for its whole life).
    pub(super) fn proof_deadline(&self) -> Option<Instant> {
        let waiting = !self.identity.is_satisfied()
            || (self.side == Side::Responder && self.transcript.is_some());
        waiting.then(|| self.epoch + self.config.handshake_timeout)
    }

    /// Closes the connection if a required proof is overdue, and forgets
    /// the transcript once no proof will be checked.
    pub(super) fn check_proof_deadline(&mut self, now: Instant) {
        if self.proof_deadline().is_none_or(|at| now < at) {
            return;
        }
        if self.identity.is_satisfied() {
            self.transcript = None;
        } else {
            self.close_unproven(now);
        }
    }

    /// Whether an authenticated packet with `frames` is dropped unread: it
    /// carries application data, or a report of this side's address (which
    /// the application hears of), before the required proof (which travels
    /// ahead of both in its packet, so a packet that brings the proof is
    /// read). A report alone reached the application of a responder whose
    /// initiator never proved itself once a probe could carry one again
    /// without the data it first went with.
    pub(super) fn holds_back(&self, frames: &tern_wire::Frames<'_>) -> bool {
        if self.identity.is_satisfied() {
            return false;
        }
        for frame in frames.clone() {
            match frame {
                Ok(Frame::Identity(_)) | Err(_) => return false,
                Ok(
                    Frame::Stream(_)
                    | Frame::Message(_)
                    | Frame::Datagram(_)
                    | Frame::ObservedAddress(_),
                ) => return true,
                Ok(_) => {}
            }
        }
        false
    }

    /// An Identity frame arrived. The responder checks the first (see the
    /// module documentation); the initiator is never asked for anything
    /// by one, and ignores it.
    pub(super) fn on_identity_frame(&mut self, proof: &Identity<'_>) -> Result<(), ProtocolError> {
        if self.side != Side::Responder || self.identity.proven {
            return Ok(());
        }
        let Some(transcript) = &self.transcript else {
            return Ok(());
        };
        let key = proof
            .verify(transcript)
            .map_err(|_| ProtocolError::IdentityProof)?;
        self.identity.key = Some(Box::new(key));
        self.identity.proven = true;
        // The transcript served only this check on the responder.
        self.transcript = None;
        if std::mem::take(&mut self.identity.announce_pending)
            && matches!(self.state, State::Established)
        {
            self.notify(Event::Connected);
        }
        Ok(())
    }

    /// The packet that carried the proof was acknowledged: it is kept no
    /// longer.
    pub(super) fn on_proof_acked(&mut self) {
        self.identity.proof = None;
        self.identity.proof_due = false;
    }

    /// The packet that carried the proof was lost: it goes again.
    pub(super) fn on_proof_lost(&mut self) {
        self.identity.proof_due = self.identity.proof.is_some();
    }

    /// A probe timeout passed: the proof goes again with the probes while
    /// it is unacknowledged. A responder that requires it drops every
    /// packet with data before it unread and unacknowledged, so once the
    /// proof's packet is lost, nothing later is acknowledged to declare it
    /// lost (RFC 9002 §6.2: a probe timeout declares nothing), and probes
    /// with data alone were dropped until the handshake timeout closed
    /// the connection (seen at 10 % loss, seed 86).
    pub(super) fn on_probe_timeout_for_proof(&mut self) {
        self.identity.proof_due = self.identity.proof.is_some();
    }

    /// Whether the proof waits to be sent.
    pub(super) fn proof_is_due(&self) -> bool {
        self.identity.proof_due
    }
}
