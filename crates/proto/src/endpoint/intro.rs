//! The handshake's front door: what an endpoint does with an intro, the
//! only packet without a receiver index. A repeated intro is answered with
//! the stored reply; a simultaneous open is settled the same way on both
//! sides; the rate limits are applied before any RSA work; and an accepted
//! intro becomes a connection.

use std::net::SocketAddr;

use quanta::Instant;
use tern_wire::{INTRO_LEN, intro_id};

use super::Endpoint;
use crate::connection::Connection;

impl Endpoint {
    pub(super) fn handle_intro(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        if datagram.len() != INTRO_LEN {
            self.stats.dropped_unroutable += 1;
            return;
        }
        let id = intro_id(datagram);
        if let Some(&index) = self.replies.get(&id) {
            if let Some(connection) = self.connections.get_mut(index)
                && connection
                    .reply_for_repeated_intro(datagram.len())
                    .is_some()
            {
                self.stored_replies.push_back((from, index));
                self.stats.intros_repeated += 1;
            }
            return;
        }
        let Some(responder) = self.responder.as_mut() else {
            self.stats.intros_refused += 1;
            return;
        };
        // Simultaneous open: both sides sent an intro to each other. The
        // intro with the smaller id wins on both sides, so both keep the
        // same one connection.
        let superseded = self.connecting.get(&from).copied();
        if let Some(index) = superseded
            && let Some(own) = self
                .connections
                .get(index)
                .and_then(Connection::pending_intro_id)
            && own < id
        {
            self.stats.simultaneous_opens += 1;
            return;
        }
        if self.limiter.admit(from.ip(), now).is_err() {
            self.stats.intros_rate_limited += 1;
            return;
        }
        let wall = {
            let (epoch, wall) = self.wall_epoch;
            wall + now.saturating_duration_since(epoch)
        };
        let accepted = match responder.accept(datagram, wall, &mut self.rng) {
            Ok(accepted) => accepted,
            Err(_) => {
                self.stats.intros_refused += 1;
                return;
            }
        };
        // This side's own connect, if any, becomes the accepted connection
        // under the same handle; otherwise it gets a fresh one.
        let replaced = superseded.filter(|&index| self.connections.get(index).is_some());
        let mut vacant = None;
        if replaced.is_none() {
            let Ok(fresh) = self.connections.vacant(&mut self.rng) else {
                self.stats.intros_refused += 1;
                return;
            };
            vacant = Some(fresh);
        }
        let index = match (&vacant, replaced) {
            (Some(fresh), _) => fresh.index(),
            (None, Some(index)) => index,
            (None, None) => return,
        };
        let Ok(connection) = Connection::accept(
            Self::start(&self.config, &self.controller, index, now),
            accepted,
            datagram.len(),
            from,
            &mut self.rng,
        ) else {
            self.stats.intros_refused += 1;
            return;
        };
        match vacant {
            Some(fresh) => {
                fresh.insert(connection);
            }
            None => {
                if let Some(slot) = self.connections.get_mut(index) {
                    *slot = connection;
                }
                self.connecting.remove(&from);
            }
        }
        self.touch(index);
        self.stats.intros_accepted += 1;
        self.replies.insert(id, index);
        self.stored_replies.push_back((from, index));
    }
}
