//! Punches: the packets that open the NATs of two introduced peers toward
//! each other (wire format §5.14). The asker sends one of small TTL as its
//! introduction arrives; the side asked for punches on a schedule, toward
//! the asker's observed address and each of its local candidates; a punch
//! that arrives from an address the asker did not know names the other
//! side's mapping toward it, and starts one more connect there.

use std::net::SocketAddr;
use std::time::Duration;

use quanta::Instant;
use tern_wire::{PUNCH_LEN, write_punch};

use super::{MAX_ATTEMPTS, PUNCH_SCHEDULE, Role};
use crate::Transmit;
use crate::endpoint::Endpoint;

impl Endpoint {
    /// A punch from `from`: for an introduction this side asked for, the
    /// other side's address toward this one, which may be new.
    pub(in crate::endpoint) fn on_punch(&mut self, now: Instant, from: SocketAddr, nonce: [u8; 8]) {
        self.rendezvous.latest = Some(now);
        let Some(intro) = self.rendezvous.introductions.get_mut(&nonce) else {
            self.stats.punches_unknown += 1;
            return;
        };
        self.stats.punches_received += 1;
        // A punch got through: the other side's NAT is open toward this
        // one, so the intro goes now rather than at the start it was given.
        if let Role::Initiator {
            start_at: start_at @ Some(_),
            ..
        } = &mut intro.role
        {
            *start_at = Some(now);
            self.handle_rendezvous_timeout(now);
        }
        let Some(intro) = self.rendezvous.introductions.get_mut(&nonce) else {
            return;
        };
        let Role::Initiator {
            key,
            start_at: None,
            attempts,
            won: false,
            ..
        } = &mut intro.role
        else {
            return;
        };
        if attempts.len() >= MAX_ATTEMPTS || attempts.iter().any(|(to, _)| *to == from) {
            return;
        }
        let key = key.clone();
        self.start_attempt(now, nonce, from, &key);
    }

    /// The next punch due, written into `buf`: the asker's one of small
    /// TTL as soon as its introduction arrived, the other side's on their
    /// schedule.
    pub(in crate::endpoint) fn poll_punch(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let dst = buf.get_mut(..PUNCH_LEN)?;
        let punch_ttl = self.config.punch_ttl;
        let (nonce, to, ttl) =
            self.rendezvous
                .introductions
                .iter_mut()
                .find_map(|(nonce, intro)| match &mut intro.role {
                    role @ Role::Target { .. } => {
                        let (offset, to) = role.next_punch()?;
                        let Role::Target { start, sent, .. } = role else {
                            return None;
                        };
                        (*start + offset <= now).then(|| {
                            *sent += 1;
                            (*nonce, to, None)
                        })
                    }
                    Role::Initiator {
                        address, opened, ..
                    } => (!*opened).then(|| {
                        *opened = true;
                        (*nonce, *address, punch_ttl)
                    }),
                })?;
        dst.copy_from_slice(&write_punch(&nonce));
        self.stats.punches_sent += 1;
        Some(Transmit {
            destination: to,
            len: PUNCH_LEN,
            segment_size: None,
            ttl,
        })
    }
}

impl Role {
    /// The side asked for's next punch: when after its start, and where
    /// to; `None` once all were sent.
    pub(super) fn next_punch(&self) -> Option<(Duration, SocketAddr)> {
        let Self::Target {
            to,
            candidates,
            sent,
            ..
        } = self
        else {
            return None;
        };
        let each = 1 + candidates.len();
        let at = *PUNCH_SCHEDULE.get(sent / each)?;
        let to = match sent % each {
            0 => *to,
            n => candidates.iter().nth(n - 1)?,
        };
        Some((at, to))
    }
}
