//! Resumption as the connection sees it (wire format §6.6): the
//! responder's ticket, sent once the handshake is confirmed; the
//! initiator's, received and handed to its endpoint; and the initiator's
//! fallback to a full intro when the responder will not resume.
//!
//! A ticket goes once, in the responder's next packet, and is not resent
//! if that packet is lost: a lost ticket costs the initiator's next
//! connect a full intro, nothing more, and the connection holds nothing
//! for it after.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use quanta::Instant;
use rand_core::CryptoRngCore;
use tern_wire::replay::IntroId;
use tern_wire::{
    EphemeralKey, Frame, IdentityKey, KeyConfig, NewTicket, PendingIntro, ResumptionSecret, Ticket,
};

use super::{Connection, State};
use crate::Side;

/// A ticket: the responder's to send, or the initiator's, received.
#[derive(Debug)]
pub(super) struct TicketSlot {
    ticket: Ticket,
    lifetime: Duration,
}

impl TicketSlot {
    /// The frame that carries it.
    pub(super) fn frame(&self) -> Frame<'_> {
        Frame::NewTicket(NewTicket {
            lifetime_s: self.lifetime.as_secs(),
            ticket: &self.ticket,
        })
    }
}

/// A ticket the initiator received, with what resumes with it.
#[derive(Debug)]
pub(crate) struct ReceivedTicket {
    /// The ticket, opaque to this side.
    pub(crate) ticket: Ticket,
    /// The secret the resumed intro is sealed with.
    pub(crate) secret: ResumptionSecret,
    /// How long the responder takes it, from now.
    pub(crate) lifetime: Duration,
}

impl Connection {
    /// Responder: the handshake is confirmed and no ticket was issued yet
    /// (the endpoint holds the key that seals one).
    pub(crate) fn wants_ticket(&self) -> bool {
        self.side == Side::Responder
            && !self.ticket_issued
            && self.reply.is_none()
            && self.keys.is_some()
            && matches!(self.state, State::Established)
    }

    /// The session's resumption secret, once it has keys.
    pub(crate) fn resumption_secret(&self) -> Option<&ResumptionSecret> {
        self.keys.as_ref().map(|keys| &keys.resumption)
    }

    /// Responder: `ticket`, valid for `lifetime`, goes in the next packet
    /// (`None`: this side issues none; it is not asked again).
    pub(crate) fn send_ticket(&mut self, ticket: Option<(Ticket, Duration)>) {
        self.ticket_issued = true;
        self.ticket = ticket.map(|(ticket, lifetime)| Box::new(TicketSlot { ticket, lifetime }));
    }

    /// Initiator: the responder sent a ticket; the last one is kept until
    /// the endpoint takes it. A responder that sends one is a protocol
    /// violation nowhere: an initiator ignores what it cannot use.
    pub(super) fn on_ticket_frame(&mut self, frame: &NewTicket<'_>) {
        if self.side != Side::Initiator || frame.lifetime_s == 0 {
            return;
        }
        self.ticket = Some(Box::new(TicketSlot {
            ticket: *frame.ticket,
            lifetime: Duration::from_secs(frame.lifetime_s),
        }));
    }

    /// Initiator: the ticket received since the last call, with the
    /// session's resumption secret.
    pub(crate) fn take_ticket(&mut self) -> Option<ReceivedTicket> {
        // Asked after every datagram: nothing is copied unless a ticket came.
        if self.side != Side::Initiator || self.ticket.is_none() {
            return None;
        }
        let secret = self.resumption_secret()?.clone();
        let slot = self.ticket.take()?;
        Some(ReceivedTicket {
            ticket: slot.ticket,
            secret,
            lifetime: slot.lifetime,
        })
    }

    /// Initiator: the responder at `from` will not resume the intro `id`
    /// (ResumeRefused): if that is this side's pending resumed intro, a
    /// full intro to the same key replaces it and goes at once. Returns
    /// the new intro's id. A forged refusal costs a full intro, no more.
    #[expect(clippy::too_many_arguments, reason = "what a fresh intro needs")]
    pub(crate) fn on_resume_refused(
        &mut self,
        now: Instant,
        from: SocketAddr,
        id: &IntroId,
        prover: Option<&IdentityKey>,
        keys: KeyConfig,
        wall: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Option<IntroId> {
        if from != self.path.remote() {
            return None;
        }
        let responder = self.identity.responder_key()?.clone();
        let local_index = self.local_index;
        let State::Connecting(c) = &mut self.state else {
            return None;
        };
        let pending = c.pending.as_ref()?;
        if !c.resumed || pending.id() != *id {
            return None;
        }
        let in_intro = Self::proven_in_intro(prover, &responder);
        let ephemeral = EphemeralKey::random(rng);
        let pending = PendingIntro::write_as(
            in_intro,
            ephemeral,
            &responder,
            local_index,
            keys,
            wall,
            rng,
            &mut c.intro,
        )
        .ok()?;
        let new_id = pending.id();
        c.pending = Some(pending);
        c.resumed = false;
        c.token = None;
        c.resend_at = now;
        Some(new_id)
    }
}
