//! An endpoint's turn: which connections were touched since the last
//! look, what a look does with each (its events, its freeing, its timer),
//! and the heap of the connections' deadlines.

use std::cmp::Reverse;

use quanta::Instant;

use super::{ConnectionHandle, Endpoint};
use crate::StreamId;
use crate::connection::{ConnectionError, Event};

/// The mark (in the connection table) of a connection on the endpoint's
/// list of touched connections, `dirty`.
pub(super) const DIRTY: u8 = 1;
/// The mark of a connection on the list of those that may send, `sending`.
pub(super) const SENDING: u8 = 2;

impl Endpoint {
    /// Marks a connection as touched: it may have events, a new deadline,
    /// or something to send.
    pub(super) fn touch(&mut self, index: u32) {
        let fresh = self.connections.mark(index, DIRTY | SENDING);
        if fresh & DIRTY != 0 {
            self.dirty.push(index);
        }
        if fresh & SENDING != 0 {
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
        for entry in dirty.drain(..) {
            self.connections.unmark(entry, DIRTY);
            // The connection its slot holds now (see `ReceiverIndex::mark`).
            let Some((index, connection)) = self.connections.occupant_mut(entry) else {
                self.armed.remove(&entry);
                continue;
            };
            while let Some(event) = connection.poll_event_queued() {
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
        self.shrink_timers();
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
        let limit = self.timer_room();
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

    /// The most entries the heap holds before it is rebuilt: twice the
    /// armed connections (one live entry each, and as many stale).
    fn timer_room(&self) -> usize {
        2 * self.armed.len() + 16
    }

    /// Gives back the heap's room once the connections it was sized for
    /// are gone: a burst of handshakes leaves it with the capacity they
    /// reached. Run at the end of a flush, when every touched connection
    /// is armed again (in a timeout's loop the armed connections are
    /// briefly fewer). It shrinks to the room the armed connections need
    /// only when it has more than four times that, so that it is not
    /// shrunk again before that many connections have gone: a shrink's
    /// copy is paid for by the closes before it, and a new connection's
    /// growth doubles it to no more than twice the room.
    fn shrink_timers(&mut self) {
        let room = self.timer_room().max(MIN_TIMER_CAPACITY);
        if self.timers.capacity() > 4 * room {
            self.timers.shrink_to(room);
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

/// The heap keeps at least this much room (entries) when it shrinks: a
/// few connections' comings and goings never reallocate it.
const MIN_TIMER_CAPACITY: usize = 256;

/// An event without its payload, for telling repeats apart: its kind, and
/// the stream it names. `Closed` has none: it comes once; nor has a
/// stream's readable event, which its stream remembers is queued until the
/// application takes it (see `Connection::poll_event_queued`): a peer
/// that opens and resets streams makes the endpoint keep nothing per
/// stream but the event itself.
pub(super) type EventKey = (std::mem::Discriminant<Event>, Option<StreamId>);

pub(super) fn event_key(event: &Event) -> Option<EventKey> {
    let stream = match event {
        // Once each: never merged.
        Event::Closed(_)
        | Event::Introduced { .. }
        | Event::IntroductionFailed { .. }
        | Event::StreamReadable(_) => return None,
        Event::StreamWritable(id) => Some(*id),
        _ => None,
    };
    Some((std::mem::discriminant(event), stream))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::EndpointConfig;

    #[test]
    fn the_timer_heap_gives_back_the_room_of_connections_gone() {
        let now = Instant::now();
        let config = EndpointConfig::default();
        let mut endpoint =
            Endpoint::new(config, None, [7; 32], now, SystemTime::now()).expect("valid config");
        let deadline = now + Duration::from_secs(30);
        // A burst: 10 000 connections armed at once.
        for index in 0..10_000 {
            endpoint.armed.insert(index, deadline);
            endpoint.push_timer(deadline, index);
        }
        endpoint.flush();
        let burst = endpoint.timers.capacity();
        assert!(burst >= 20_016, "room for twice the armed: {burst}");
        // All but 100 go: their entries are stale and pruned away.
        endpoint.armed.retain(|&index, _| index < 100);
        endpoint.timers.retain(|Reverse((_, index))| *index < 100);
        endpoint.flush();
        assert_eq!(endpoint.timers.capacity(), MIN_TIMER_CAPACITY);
        assert_eq!(endpoint.timers.len(), 100);
        // Connections come back one at a time: the heap grows by doubling
        // and is not shrunk again while it holds no more than four times
        // the room they need.
        let mut shrinks = 0;
        let mut capacity = endpoint.timers.capacity();
        for index in 100..5_000 {
            endpoint.armed.insert(index, deadline);
            endpoint.push_timer(deadline, index);
            endpoint.flush();
            shrinks += usize::from(endpoint.timers.capacity() < capacity);
            capacity = endpoint.timers.capacity();
        }
        assert_eq!(shrinks, 0);
        assert!(capacity <= 4 * endpoint.timer_room(), "{capacity}");
        assert_eq!(endpoint.timers.len(), 5_000);
    }
}
