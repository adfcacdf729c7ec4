//! The handshake's front door: what an endpoint does with an intro, the
//! only packet without a receiver index. A repeated intro is answered with
//! the stored reply, twice within the amplification limit; the caps per address and network (`admission`), the
//! token an intro carries, the rate limits and the room in the table are
//! checked before any RSA work, and an intro the rate limits refuse is
//! answered with a Retry if its source is not validated; an accepted intro
//! becomes a connection, which the application may still refuse once it
//! knows who opened it. The initiator's side of a Retry is here too.

use std::net::SocketAddr;

use bytes::Bytes;
use quanta::Instant;
use std::time::{Duration, SystemTime};
use tern_wire::replay::IntroId;

use rand_core::CryptoRngCore;
use tern_wire::{
    PacketType, RELAY_HEADER_LEN, RESUME_REFUSED_LEN, RETRY_LEN, Responder, Ticket, intro_id,
    parse_resume_refused, parse_retry, split_intro, write_relay_header, write_resume_refused,
    write_retry,
};

use super::admission::Refusal;
use super::{ConnectionHandle, Endpoint};
use crate::Transmit;
use crate::connection::Connection;
#[cfg(doc)]
use crate::{ConnectionError, EndpointStats};

/// Retries waiting to be sent, at most: under a flood the driver may fall
/// behind, and what is past this is not answered (its initiator resends).
pub(super) const MAX_QUEUED_RETRIES: usize = 1024;

impl Endpoint {
    /// An intro from `from`; `slot` the relay slot of this side that
    /// carried it, if one did, from the rendezvous that vouches for its
    /// sender (so the address caps, which would count every relayed peer
    /// as one, and Retries, which would go to the rendezvous, do not
    /// apply; a ResumeRefused goes back on the slot). Returns the
    /// connection it made.
    pub(super) fn handle_intro(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        slot: Option<u32>,
    ) -> Option<u32> {
        let relayed = slot.is_some();
        let Some((intro, token)) = split_intro(datagram) else {
            self.stats.dropped_unroutable += 1;
            return None;
        };
        let id = intro_id(intro);
        if let Some(&index) = self.replies.get(&id) {
            if let Some(connection) = self.connections.get_mut(index) {
                let copies = connection.replies_for_repeated_intro(now, datagram.len());
                if copies > 0 {
                    self.stats.intros_repeated += 1;
                }
                for _ in 0..copies {
                    self.stored_replies.push_back((from, index));
                }
            }
            return None;
        }
        if self.responder.is_none() {
            self.stats.intros_refused += 1;
            return None;
        }
        match self.admission.check(from.ip()) {
            _ if relayed => {}
            Ok(()) => {}
            Err(Refusal::Address) => {
                self.stats.intros_address_capped += 1;
                return None;
            }
            Err(Refusal::Prefix) => {
                self.stats.intros_prefix_capped += 1;
                return None;
            }
        }
        let validated = relayed
            || token.is_some_and(|token| {
                let checked = self.tokens.check(now, &token, &id, from);
                match checked {
                    Ok(()) => self.stats.tokens_accepted += 1,
                    Err(_) => self.stats.tokens_refused += 1,
                }
                checked.is_ok()
            });
        let admitted = if validated {
            self.limiter.admit_validated(now)
        } else {
            self.limiter.admit(from.ip(), now)
        };
        if admitted.is_err() {
            self.stats.intros_rate_limited += 1;
            if !validated {
                self.queue_retry(now, from, &id);
            }
            return None;
        }
        let Ok(evict) = self.room(now) else {
            return None;
        };
        let responder = self.responder.as_mut()?;
        let wall = {
            let (epoch, wall) = self.wall_epoch;
            wall + now.saturating_duration_since(epoch)
        };
        let resumed = intro.first() == Some(&(PacketType::IntroResume as u8));
        self.stats.intros_decrypted += u64::from(!resumed);
        let accepted = match responder.accept(intro, wall, &mut self.rng) {
            Ok(accepted) => accepted,
            Err(e) if e.is_ticket_refusal() => {
                self.stats.resumptions_refused += 1;
                if self.refusals.len() < MAX_QUEUED_RETRIES {
                    self.refusals
                        .push_back((from, slot, write_resume_refused(&id)));
                }
                return None;
            }
            Err(_) => {
                self.stats.intros_refused += 1;
                return None;
            }
        };
        self.stats.resumptions_accepted += u64::from(resumed);
        if let Some(index) = evict {
            self.evict(now, index);
        }
        // Always a connection of its own, even while this side connects to
        // the same address (a simultaneous open): whoever sent this intro
        // proved nothing about the key that connect names, so it must not
        // take the connect's place. Each side's connect is answered by the
        // other's responder, and each side also accepts the other's.
        let Ok(vacant) = self.connections.vacant(&mut self.rng) else {
            self.stats.intros_refused += 1;
            return None;
        };
        let index = vacant.index();
        let Ok(connection) = Connection::accept(
            self.start.for_connection(index, now),
            accepted,
            datagram.len(),
            from,
            &mut self.rng,
        ) else {
            self.stats.intros_refused += 1;
            return None;
        };
        vacant.insert(Box::new(connection));
        if !relayed {
            self.admission.count(index, from.ip());
        }
        self.touch(index);
        self.stats.intros_accepted += 1;
        self.replies.insert(id, index);
        self.stored_replies.push_back((from, index));
        Some(index)
    }

    /// Whether `datagram` repeats an intro that made a connection.
    pub(super) fn is_repeated_intro(&self, datagram: &[u8]) -> bool {
        split_intro(datagram).is_some_and(|(intro, _)| self.replies.contains_key(&intro_id(intro)))
    }

    /// Refuses a connection a peer opened, after looking at who it is
    /// ([`Connection::remote`], [`Connection::peer_identity`]): it is
    /// closed at once with the application's `code` (the peer reads it in
    /// its [`ConnectionError::PeerClosed`]), what it holds is dropped, and
    /// it is counted in [`EndpointStats::connections_refused`].
    pub fn refuse(&mut self, now: Instant, handle: ConnectionHandle, code: u64) {
        if let Some(connection) = self.connections.get_mut(handle.0) {
            connection.abort(now, code, Bytes::from_static(b"refused"));
            connection.release(now, code);
            self.stats.connections_refused += 1;
            self.touch(handle.0);
        }
    }

    /// Answers the intro `id` from `from` with a Retry (sent before any
    /// connection's packets), if the queue has room.
    fn queue_retry(&mut self, now: Instant, from: SocketAddr, id: &IntroId) {
        if self.retries.len() >= MAX_QUEUED_RETRIES {
            return;
        }
        let token = self.tokens.issue(now, id, from, &mut self.rng);
        self.retries.push_back((from, write_retry(id, &token)));
        self.stats.intros_retried += 1;
    }

    /// A ticket for `connection`, whose handshake is confirmed, from the
    /// endpoint's `responder` (`None` if it issues none), valid for the
    /// responder's ticket lifetime.
    pub(super) fn issue_ticket(
        responder: Option<&Responder>,
        connection: &Connection,
        wall: SystemTime,
        rng: &mut impl CryptoRngCore,
    ) -> Option<(Ticket, Duration)> {
        let responder = responder?;
        let lifetime = responder.ticket_lifetime()?;
        let secret = connection.resumption_secret()?;
        let ticket = responder.issue_ticket(secret, connection.peer_identity(), wall, rng)?;
        Some((ticket, lifetime))
    }

    /// The next queued ResumeRefused, written into `buf`
    /// (through the relay, on the slot the intro came on, if it did).
    pub(super) fn poll_refusal(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let header = match self.refusals.front()? {
            (_, Some(_), _) => RELAY_HEADER_LEN,
            (_, None, _) => 0,
        };
        let dst = buf.get_mut(header..header + RESUME_REFUSED_LEN)?;
        let (destination, slot, refusal) = self.refusals.pop_front()?;
        dst.copy_from_slice(&refusal);
        if let Some(slot) = slot {
            write_relay_header(buf, slot)?;
        }
        Some(Transmit {
            destination,
            len: header + RESUME_REFUSED_LEN,
            segment_size: None,
            ttl: None,
        })
    }

    /// A ResumeRefused, on the initiator's side: the connect whose resumed
    /// intro it names sends a full intro instead, if it came from the
    /// address that connect goes to.
    pub(super) fn handle_resume_refused(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) {
        let wall = self.wall_time(now);
        let found =
            parse_resume_refused(datagram).and_then(|id| Some((id, *self.connecting.get(&id)?)));
        let fallback = found.and_then(|(id, index)| {
            let connection = self.connections.get_mut(index)?;
            let new_id = connection.on_resume_refused(
                now,
                from,
                &id,
                self.prover.as_ref(),
                self.config.keys,
                wall,
                &mut self.rng,
            )?;
            Some((id, new_id, index))
        });
        match fallback {
            Some((id, new_id, index)) => {
                self.connecting.remove(&id);
                self.connecting.insert(new_id, index);
                self.touch(index);
                self.stats.resume_fallbacks += 1;
            }
            None => self.stats.dropped_unroutable += 1,
        }
    }

    /// The next queued Retry, written into `buf`.
    pub(super) fn poll_retry(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let dst = buf.get_mut(..RETRY_LEN)?;
        let (destination, retry) = self.retries.pop_front()?;
        dst.copy_from_slice(&retry);
        Some(Transmit {
            destination,
            len: RETRY_LEN,
            segment_size: None,
            ttl: None,
        })
    }

    /// A Retry, on the initiator's side: it goes to the connect whose
    /// intro it names, if it came from the address that connect goes to.
    pub(super) fn handle_retry(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let retry = parse_retry(datagram).ok();
        let index = retry.and_then(|(id, _)| self.connecting.get(&id).copied());
        let taken = match (retry, index) {
            (Some((id, token)), Some(index)) => self
                .connections
                .get_mut(index)
                .is_some_and(|connection| connection.on_retry(now, from, &id, token)),
            _ => false,
        };
        match index {
            Some(index) if taken => {
                self.touch(index);
                self.stats.retries_received += 1;
            }
            _ => self.stats.dropped_unroutable += 1,
        }
    }
}
