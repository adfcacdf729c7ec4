//! The initiator's resumption tickets: one per responder key, the last
//! one received, in a cache of bounded size; a connect takes its key's
//! ticket (a ticket is single-use) if it has not expired.

use std::collections::VecDeque;
use std::time::Duration;

use quanta::Instant;
use tern_wire::PublicIdentity;

use crate::connection::ReceivedTicket;

/// Tickets by responder key, oldest first.
#[derive(Debug)]
pub(super) struct TicketCache {
    capacity: usize,
    /// A handful to a few hundred entries: a scan is cheaper than hashing
    /// an RSA key, and it happens once per connect.
    entries: VecDeque<(PublicIdentity, Instant, ReceivedTicket)>,
}

impl TicketCache {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: VecDeque::new(),
        }
    }

    /// Keeps `ticket` for `responder`, received at `now`, in place of the
    /// one it had; drops the oldest when full.
    pub(super) fn insert(
        &mut self,
        now: Instant,
        responder: &PublicIdentity,
        ticket: ReceivedTicket,
    ) {
        if self.capacity == 0 {
            return;
        }
        self.entries.retain(|(key, ..)| key != responder);
        if self.entries.len() >= self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back((responder.clone(), now, ticket));
    }

    /// The live ticket for `responder`, taken out; expired ones are dropped.
    pub(super) fn take(
        &mut self,
        now: Instant,
        responder: &PublicIdentity,
    ) -> Option<ReceivedTicket> {
        let at = self.entries.iter().position(|(key, ..)| key == responder)?;
        let (_, received, ticket) = self.entries.remove(at)?;
        // A margin for the trip to the responder and the clocks' drift.
        let lifetime = ticket.lifetime.saturating_sub(Duration::from_secs(1));
        (now.saturating_duration_since(received) < lifetime).then_some(ticket)
    }

    /// Tickets held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use rand_core::OsRng;
    use tern_wire::{IdentityKey, ResumptionSecret};

    use super::*;

    fn ticket(byte: u8, lifetime: Duration) -> ReceivedTicket {
        ReceivedTicket {
            ticket: [byte; tern_wire::TICKET_LEN],
            secret: ResumptionSecret::from_bytes([byte; 32]),
            lifetime,
        }
    }

    fn key() -> PublicIdentity {
        IdentityKey::generate_x25519(&mut OsRng).public()
    }

    #[test]
    fn one_ticket_per_key_bounded_single_use_and_expiring() {
        let (clock, mock) = quanta::Clock::mock();
        let now = clock.now();
        let mut cache = TicketCache::new(2);
        let (a, b, c) = (key(), key(), key());
        let minute = Duration::from_secs(60);
        cache.insert(now, &a, ticket(1, minute));
        cache.insert(now, &a, ticket(2, minute));
        assert_eq!(cache.len(), 1, "the newer ticket replaces the older");
        cache.insert(now, &b, ticket(3, minute));
        cache.insert(now, &c, ticket(4, minute));
        assert_eq!(cache.len(), 2);
        assert!(cache.take(now, &a).is_none(), "the oldest was dropped");
        assert_eq!(cache.take(now, &b).map(|t| t.ticket[0]), Some(3));
        assert!(cache.take(now, &b).is_none(), "taken once");
        mock.increment(minute);
        assert!(cache.take(clock.now(), &c).is_none(), "expired");
        let mut none = TicketCache::new(0);
        none.insert(now, &a, ticket(5, minute));
        assert!(none.take(now, &a).is_none());
    }
}
