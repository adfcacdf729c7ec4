//! What an endpoint sends next: its own replies and control datagrams
//! first, then each connection's packets in turn.

use quanta::Instant;
use tern_congestion::Take;

use super::turn::{DIRTY, SENDING};
use super::{Endpoint, relayed};
use crate::{Transmit, TransmitLimits};

impl Endpoint {
    /// The next datagram: replies, Retries, refusals, closes, punches and
    /// relayed packets first, then the connections in turn.
    pub(super) fn poll_transmit_any(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        while let Some((to, index)) = self.stored_replies.pop_front() {
            let carrier = self.carrier(index);
            let Some(connection) = self.connections.get_mut(index) else {
                continue;
            };
            let Some(reply) = connection.stored_reply() else {
                continue;
            };
            let copy = |_, dst: &mut [u8]| {
                dst.get_mut(..reply.len())?.copy_from_slice(reply);
                Some(Transmit {
                    destination: to,
                    len: reply.len(),
                    segment_size: None,
                    ttl: None,
                })
            };
            let transmit = match carrier {
                Some(carrier) => relayed::wrapped(carrier, limits, buf, copy),
                None => copy(limits, buf),
            };
            if transmit.is_some() {
                return transmit;
            }
        }
        if let Some(retry) = self.poll_retry(buf) {
            return Some(retry);
        }
        if let Some(refusal) = self.poll_refusal(buf) {
            return Some(refusal);
        }
        if let Some(close) = self.poll_evicted(buf) {
            return Some(close);
        }
        if let Some(punch) = self.poll_punch(now, buf) {
            return Some(punch);
        }
        if let Some(forward) = self.poll_forward(now, buf) {
            return Some(forward);
        }
        self.rate_wait = None;
        if let Some(bucket) = self.rate_limit.as_mut()
            && let Take::WaitUntil(at) = bucket.ready_at(limits.max_datagram_size as u64, now)
        {
            self.rate_wait = Some(at);
            return None;
        }
        for _ in 0..self.sending.len() {
            let entry = self.sending.pop_front()?;
            // The connection its slot holds now (see `ReceiverIndex::mark`).
            let Some((index, _)) = self.connections.occupant_mut(entry) else {
                self.connections.unmark(entry, SENDING);
                continue;
            };
            let carrier = self.carrier(index);
            let Some(connection) = self.connections.get_mut(index) else {
                // As above: off the list, so unmarked (one left marked
                // would never be put on the list again).
                self.connections.unmark(entry, SENDING);
                continue;
            };
            // Nothing in flight before this packet: if it carries data, it
            // opens an exchange.
            let quiet = connection.answer_expected(now).is_none();
            let transmit = match carrier {
                Some(carrier) => relayed::wrapped(carrier, limits, buf, |limits, inner| {
                    connection.poll_transmit(now, limits, inner)
                }),
                None => connection.poll_transmit(now, limits, buf),
            };
            if transmit.is_some()
                && let Some(at) = connection.answer_expected(now)
            {
                let soonest = |expected: Option<Instant>| Some(expected.map_or(at, |e| e.min(at)));
                self.answer_expected = soonest(self.answer_expected);
                if quiet && connection.sent_data() {
                    self.exchange_opened = soonest(self.exchange_opened);
                }
            }
            // Sending moves its timers either way (loss detection, pacing).
            if self.connections.mark(index, DIRTY) != 0 {
                self.dirty.push(index);
            }
            let Some(transmit) = transmit else {
                // Nothing now: back in line when something touches it.
                self.connections.unmark(index, SENDING);
                continue;
            };
            if let Some(bucket) = self.rate_limit.as_mut() {
                bucket.consume(transmit.len as u64, now);
            }
            // It goes first again only after every other had its turn.
            self.sending.push_back(index);
            return Some(transmit);
        }
        None
    }
}
