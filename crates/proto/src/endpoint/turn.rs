//! An endpoint's turn: which connections were touched since the last
//! look, what a look does with each (its events, its freeing, its timer),
//! and the heap of the connections' deadlines.

use std::cmp::Reverse;

use quanta::Instant;

use super::{ConnectionHandle, Endpoint};
use crate::StreamId;
use crate::connection::{ConnectionError, Event};

impl Endpoint {
    /// Marks a connection as touched: it may have events, a new deadline,
    /// or something to send.
    pub(super) fn touch(&mut self, index: u32) {
        if self.is_dirty.insert(index) {
            self.dirty.push(index);
        }
        if self.is_sending.insert(index) {
            self.sending.push_back(index);
        }
    }

    /// Looks at every touched connection: takes its events, frees it if it
    /// is over, and re-arms its timer.
    pub(super) fn flush(&mut self) {
        self.settle_lent();
        let mut closed = 0;
        // Rare (introductions, freed connections): handled after the loop,
        // which holds a connection.
        let (mut outcomes, mut gone) = (Vec::new(), Vec::new());
        // Taken for the loop and put back empty, so its buffer is reused.
        let mut dirty = std::mem::take(&mut self.dirty);
        for index in dirty.drain(..) {
            self.is_dirty.remove(&index);
            let Some(connection) = self.connections.get_mut(index) else {
                self.armed.remove(&index);
                continue;
            };
            while let Some(event) = connection.poll_event() {
                match event {
                    Event::Closed(ConnectionError::Protocol(_)) => {
                        self.stats.protocol_violations += 1;
                    }
                    Event::Closed(ConnectionError::IdentityNotProven) => {
                        self.stats.identities_unproven += 1;
                    }
                    _ => {}
                }
                if self.rendezvous.is_attempt(index)
                    && matches!(event, Event::Connected | Event::Closed(_))
                {
                    outcomes.push((index, event == Event::Connected));
                }
                if event == Event::Connected {
                    self.connecting.retain(|_, i| *i != index);
                    self.replies.retain(|_, i| *i != index);
                    if !self.outgoing.contains(&index) {
                        self.incoming.push_back(ConnectionHandle(index));
                    }
                }
                let fresh = event_key(&event).is_none_or(|key| self.queued.insert((index, key)));
                if fresh {
                    self.events.push_back((ConnectionHandle(index), event));
                }
            }
            if connection.is_done() {
                self.connections.remove(index);
                self.budget.remove(index);
                self.admission.release(index);
                self.armed.remove(&index);
                self.freed.push(index);
                gone.push(index);
                closed += 1;
                continue;
            }
            self.budget.look(index, connection);
            let deadline = connection.poll_timeout();
            if deadline != self.armed.get(&index).copied() {
                match deadline {
                    Some(at) => {
                        self.armed.insert(index, at);
                        self.push_timer(at, index);
                    }
                    None => {
                        self.armed.remove(&index);
                    }
                }
            }
        }
        self.dirty = dirty;
        for (index, connected) in outcomes {
            self.on_attempt_outcome(index, connected);
        }
        for index in gone {
            self.forget_in_rendezvous(index);
        }
        self.keep_to_budget();
        if closed > 0 {
            self.stats.connections_closed += closed;
            let live = |i: &u32| self.connections.get(*i).is_some();
            self.replies.retain(|_, i| live(i));
            self.connecting.retain(|_, i| live(i));
            self.outgoing.retain(|i| live(i));
        }
    }

    /// Adds a deadline to the heap. A deadline moved earlier leaves its old
    /// entry behind, later than the new one, where pruning the top will not
    /// reach it for a while (an idle timeout is half a minute away): when
    /// stale entries outnumber live ones, the heap is rebuilt from `armed`,
    /// in place, so it stays within twice the connections.
    fn push_timer(&mut self, at: Instant, index: u32) {
        let limit = 2 * self.armed.len() + 16;
        if self.timers.len() >= limit {
            self.timers.clear();
            self.timers
                .extend(self.armed.iter().map(|(&index, &at)| Reverse((at, index))));
        } else {
            // Room for the most it will hold: allocates when connections
            // are added, not per deadline.
            self.timers.reserve(limit - self.timers.len());
            self.timers.push(Reverse((at, index)));
        }
    }

    /// Drops timer entries that no longer match their connection's deadline,
    /// so the heap's top is the earliest live one.
    pub(super) fn prune_timers(&mut self) {
        while let Some(&Reverse((at, index))) = self.timers.peek() {
            if self.armed.get(&index) == Some(&at) {
                break;
            }
            self.timers.pop();
        }
    }
}

/// An event without its payload, for telling repeats apart: its kind, and
/// the stream it names. `Closed` has none: it comes once.
pub(super) type EventKey = (std::mem::Discriminant<Event>, Option<StreamId>);

pub(super) fn event_key(event: &Event) -> Option<EventKey> {
    let stream = match event {
        // Once each: never merged.
        Event::Closed(_) | Event::Introduced { .. } | Event::IntroductionFailed { .. } => {
            return None;
        }
        Event::StreamReadable(id) | Event::StreamWritable(id) => Some(*id),
        _ => None,
    };
    Some((std::mem::discriminant(event), stream))
}
