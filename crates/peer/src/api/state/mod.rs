//! [`EndpointState`]: the protocol endpoint as the driver runs it, plus
//! who in the application waits for what.
//!
//! The driver runs it as its [`Node`]; application handles reach it under
//! the same lock through [`DriverHandle`](crate::driver::DriverHandle). At
//! the end of each driver turn it takes the protocol's events and wakes
//! exactly the tasks they concern, so that a waiting task costs nothing
//! until there is something for it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use super::connection::ended;
use super::error::ConnectionLost;
use super::published::{Published, PublishedEndpoint, WATCH_FOR};
use crate::proto::{
    Connection as ProtoConnection, ConnectionError, ConnectionHandle, Endpoint, Event, Instant,
    KeyFingerprint, Node, PublicIdentity, RefusalReason, SendRefused, StreamId, Transmit,
    TransmitLimits,
};
pub(crate) use accepts::Accepts;
pub(crate) use credit::Credit;
pub(crate) use delivery::{
    DatagramDelivery, MessageDelivery, Reader, StreamDelivery, StreamEnd, Taken,
};
use hand_off::Deferred;
pub(crate) use sends::SendCredits;
use sends::Sends;
pub(crate) use stream_accepts::StreamAccepts;
pub(crate) use stream_opens::StreamOpens;
use stream_table::StreamTable;
pub(crate) use stream_table::StreamWaiters;
pub(crate) use wakers::Wakers;

/// What the application side knows of one connection.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The protocol's handle, while the protocol holds the connection.
    pub(crate) handle: Option<ConnectionHandle>,
    /// Why it ended, once it has (out of line: 48 bytes a connection,
    /// of which an idle one uses none).
    pub(crate) closed: Option<Box<ConnectionError>>,
    /// The handshake finished.
    pub(crate) connected: bool,
    /// Every application handle is gone.
    released: bool,
    /// What waits for bytes parked for its streams and its parked
    /// messages to be sent.
    deferred: Option<Box<Deferred>>,
    /// What the lock's side keeps of messages and datagrams sent without
    /// it, once a handle sent one.
    sends: Option<Box<Sends>>,
    /// The messages the driver moved for `recv`, once it took the lock.
    delivered: Option<Arc<MessageDelivery>>,
    /// The datagrams the driver moved for `recv_datagram`, once it took
    /// the lock.
    datagrams_delivered: Option<Arc<DatagramDelivery>>,
    /// What the connection's handles read without the endpoint's lock.
    pub(crate) published: Arc<Published>,
    /// When a handle last read what was published (as the driver saw it).
    read_at: Instant,
    pub(crate) connect: Wakers,
    pub(crate) recv: Wakers,
    pub(crate) send: Wakers,
    pub(crate) datagrams: Wakers,
    /// Senders waiting for room in the datagram send queue.
    pub(crate) datagram_room: Wakers,
    /// The streams the driver accepted for `accept_bi` and `accept_uni`,
    /// once a handle asked.
    stream_accepts: Option<Arc<StreamAccepts>>,
    /// The ids of the streams `open_bi` and `open_uni` open without the
    /// lock, once a handle opened one.
    stream_opens: Option<Arc<StreamOpens>>,
    /// Openers waiting for the peer to allow more streams.
    pub(crate) open_stream: Wakers,
    pub(crate) streams: StreamTable,
    /// The connection's tracing span, when a subscriber wants it (out of
    /// line: 40 bytes a connection even when disabled).
    span: Option<Box<tracing::Span>>,
}

impl Slot {
    fn new(
        handle: ConnectionHandle,
        remote: SocketAddr,
        span: tracing::Span,
        now: Instant,
    ) -> Self {
        Self {
            span: (!span.is_disabled()).then(|| Box::new(span)),
            handle: Some(handle),
            closed: None,
            connected: false,
            released: false,
            deferred: None,
            sends: None,
            delivered: None,
            datagrams_delivered: None,
            published: Arc::new(Published::new(remote)),
            read_at: now,
            connect: Wakers::default(),
            recv: Wakers::default(),
            send: Wakers::default(),
            datagrams: Wakers::default(),
            datagram_room: Wakers::default(),
            stream_accepts: None,
            stream_opens: None,
            open_stream: Wakers::default(),
            streams: StreamTable::default(),
        }
    }

    /// Runs `f` in the connection's span, if a subscriber wanted one.
    fn in_span(&self, f: impl FnOnce()) {
        match &self.span {
            Some(span) => span.in_scope(f),
            None => f(),
        }
    }

    /// The peer's address and proven identity: the protocol's while it
    /// holds the `connection`, else the last seen. The slot keeps them
    /// in what it publishes for the handles only (72 bytes a connection
    /// twice otherwise).
    pub(crate) fn refresh(
        &self,
        connection: Option<&ProtoConnection>,
    ) -> (SocketAddr, Option<PublicIdentity>) {
        self.published.publish_peer(connection);
        self.published.peer()
    }

    /// Publishes who is at the other end of the `connection` for the
    /// handles: all a new connection publishes until a handle reads it.
    fn publish_peer(&self, connection: Option<&ProtoConnection>) {
        self.published.publish_peer(connection);
    }

    /// Publishes the `connection` (`None`: freed) for the handles.
    pub(crate) fn publish(&self, connection: Option<&ProtoConnection>) {
        self.published.publish(connection);
    }

    /// Publishes the `connection` if a handle watches it: after a handle
    /// call changed it, so that the caller reads what its call did.
    pub(crate) fn publish_if_watched(&mut self, connection: Option<&ProtoConnection>) {
        if self.published.is_watched() {
            self.publish(connection);
        }
    }

    /// Wakes the reader or the writer of stream `id`; whether one waited.
    fn wake_stream(&mut self, id: StreamId, read: bool) -> bool {
        self.streams.get_mut(&id).is_some_and(|waiters| {
            if read {
                waiters.read.wake_all()
            } else {
                waiters.write.wake_all()
            }
        })
    }

    /// The application took a half of stream `id`.
    pub(crate) fn hold_stream(&mut self, id: StreamId) {
        self.streams.entry(id).or_default().halves += 1;
    }

    /// The application let a half of stream `id` go: its waiters go, and
    /// the stream's record once no half is held.
    pub(crate) fn release_stream(&mut self, id: StreamId, read: bool) {
        if let Some(waiters) = self.streams.get_mut(&id) {
            if read {
                waiters.read = Wakers::default();
            } else {
                waiters.write = Wakers::default();
            }
            waiters.halves = waiters.halves.saturating_sub(1);
        }
        self.forget_stream_if_done(id);
    }

    /// Drops the record of stream `id` once the application holds no half
    /// of it and no bytes of it are parked.
    fn forget_stream_if_done(&mut self, id: StreamId) {
        if self.streams.get(&id).is_some_and(|w| w.halves == 0) && !self.has_parked(id) {
            self.streams.remove(&id);
        }
    }

    fn wake_everyone(&mut self) {
        self.connect.wake_all();
        self.recv.wake_all();
        self.send.wake_all();
        self.datagrams.wake_all();
        self.datagram_room.wake_all();
        self.open_stream.wake_all();
        for waiters in self.streams.values_mut() {
            waiters.read.wake_all();
            waiters.write.wake_all();
        }
        self.published.wake_end_waiters();
    }
}

/// Who is at the other end of a connection, as an accepted or introduced
/// connection's handle is made.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) remote: SocketAddr,
    pub(crate) identity: Option<PublicIdentity>,
    pub(crate) published: Arc<Published>,
}

/// A slot's key: unique for the endpoint's lifetime, unlike the protocol's
/// handle, which a later connection may reuse once the first is freed.
pub(crate) type SlotId = u64;

/// The protocol endpoint and the application's waiters; the driver's node.
#[derive(Debug)]
pub(crate) struct EndpointState {
    pub(crate) proto: Endpoint,
    /// Boxed, so that the table's room for the slots it may still take
    /// (it grows by doubling) costs a pointer each rather than a whole
    /// slot.
    slots: HashMap<SlotId, Box<Slot>>,
    /// The slot of each connection the protocol still holds.
    by_handle: HashMap<ConnectionHandle, SlotId>,
    next_slot: SlotId,
    /// Connections peers opened, not yet taken by `accept`.
    pub(crate) accepts: Arc<Accepts>,
    /// Waiters for the endpoint to hold no connection.
    pub(crate) idle: Wakers,
    /// No more `accept`, and new connections are refused: the endpoint is
    /// shutting down, and closes with this code a connection whose
    /// handshake was under way.
    pub(crate) closing: Option<u64>,
    /// Introductions' outcomes by rendezvous connection and peer, until
    /// the `connect_via` that asked takes them: the peer's connection, or
    /// the refusal (`None`: no connect completed).
    pub(crate) introductions:
        HashMap<(SlotId, KeyFingerprint), Result<SlotId, Option<RefusalReason>>>,
    pub(crate) introduced: Wakers,
    /// Slots whose connection is published at the end of every turn.
    watched: Vec<SlotId>,
    /// The endpoint's figures, as [`Endpoint::stats`](crate::Endpoint::stats)
    /// reads them.
    pub(crate) figures: Arc<PublishedEndpoint>,
}

impl EndpointState {
    pub(crate) fn new(proto: Endpoint) -> Self {
        Self {
            proto,
            slots: HashMap::new(),
            by_handle: HashMap::new(),
            next_slot: 0,
            accepts: Arc::default(),
            idle: Wakers::default(),
            closing: None,
            introductions: HashMap::new(),
            introduced: Wakers::default(),
            watched: Vec::new(),
            figures: Arc::default(),
        }
    }

    /// Publishes the endpoint's figures: at the end of every turn, and
    /// after an endpoint-level call changed them.
    pub(crate) fn publish_figures(&self) {
        self.figures.publish(&self.proto);
    }

    /// Gives a new protocol connection, with the peer at `remote`, its
    /// slot.
    pub(crate) fn add(
        &mut self,
        now: Instant,
        handle: ConnectionHandle,
        remote: SocketAddr,
    ) -> SlotId {
        let id = self.next_slot;
        self.next_slot += 1;
        let connection = self.proto.connection(handle);
        let span = match &connection {
            Some(c) => tracing::debug_span!(
                "tern_connection",
                remote = %c.remote(),
                side = ?c.side(),
                index = handle.0
            ),
            None => tracing::Span::none(),
        };
        let slot = Slot::new(handle, remote, span, now);
        slot.publish_peer(connection.as_deref());
        self.slots.insert(id, Box::new(slot));
        if let Some(stale) = self.by_handle.insert(handle, id) {
            // The protocol freed a connection and gave its handle to this
            // one within the turn, before `forget_freed` saw it go.
            self.detach(stale);
        }
        self.publish_figures();
        id
    }

    /// The peer's address and proven identity of the connection of `id`,
    /// and what its handles read of it.
    pub(crate) fn peer(&mut self, id: SlotId) -> Option<Peer> {
        let (slot, connection) = self.connection(id)?;
        let (remote, identity) = slot.refresh(connection.as_deref());
        Some(Peer {
            remote,
            identity,
            published: Arc::clone(&slot.published),
        })
    }

    /// What the handles of `id` read of it.
    pub(crate) fn published(&self, id: SlotId) -> Option<Arc<Published>> {
        self.slots.get(&id).map(|slot| Arc::clone(&slot.published))
    }

    /// Publishes the connection of `id` now, and at the end of every turn
    /// from now on until nobody read it for [`WATCH_FOR`].
    pub(crate) fn watch(&mut self, now: Instant, id: SlotId) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        let connection = slot.handle.and_then(|h| self.proto.connection_ref(h));
        slot.publish(connection);
        slot.read_at = now;
        if !slot.published.is_watched() {
            slot.published.set_watched(true);
            // A freed connection's last publication is final.
            if slot.handle.is_some() {
                self.watched.push(id);
            }
        }
    }

    /// Publishes every watched connection, and stops watching those
    /// nobody read for [`WATCH_FOR`] and those the protocol freed (whose
    /// last publication says so).
    fn publish_watched(&mut self, now: Instant) {
        let Self {
            watched,
            slots,
            proto,
            ..
        } = self;
        watched.retain(|id| {
            let Some(slot) = slots.get_mut(id) else {
                return false;
            };
            if slot.published.take_read() {
                slot.read_at = now;
            } else if now.saturating_duration_since(slot.read_at) > WATCH_FOR {
                slot.published.set_watched(false);
                return false;
            }
            let connection = slot.handle.and_then(|h| proto.connection_ref(h));
            slot.publish(connection);
            slot.handle.is_some()
        });
    }

    /// Refuses the connection a peer opened that `id` names: closed at
    /// once with `code`, counted, its slot gone when it is over.
    pub(crate) fn refuse(&mut self, now: Instant, id: SlotId, code: u64) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        slot.released = true;
        match slot.handle {
            Some(handle) => self.proto.refuse(now, handle, code),
            None => {
                self.slots.remove(&id);
            }
        }
        self.publish_figures();
    }

    /// Unties a slot from the protocol connection its handle named, which
    /// has been freed, and drops the slot if no application handle refers
    /// to it any more.
    fn detach(&mut self, id: SlotId) {
        if let Some(slot) = self.slots.get_mut(&id) {
            slot.handle = None;
            slot.end_writes();
            slot.end_sends();
            slot.refresh_opens(None);
            slot.publish(None);
            // Whoever waits learns that it is gone, with or without the
            // event that should have said so.
            let lost = ended(slot, None);
            slot.published.publish_ended(lost);
            slot.wake_everyone();
            if slot.released {
                self.slots.remove(&id);
            }
        }
    }

    /// The slot and, while the protocol holds it, the connection.
    pub(crate) fn connection(
        &mut self,
        id: SlotId,
    ) -> Option<(&mut Slot, Option<&mut ProtoConnection>)> {
        let slot = self.slots.get_mut(&id)?;
        let connection = slot.handle.and_then(|h| self.proto.connection(h));
        Some((slot, connection))
    }

    /// Every application handle of `id` is gone: the connection closes
    /// gracefully (if it is still open) and its slot goes when it is over.
    pub(crate) fn release(&mut self, now: Instant, id: SlotId, code: u64) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        slot.released = true;
        let handle = slot.handle;
        self.discard_delivered(id);
        match handle {
            Some(_) if self.defer_release(id, code) => {}
            Some(handle) => self.proto.release(now, handle, code),
            None => {
                self.slots.remove(&id);
            }
        }
        self.publish_figures();
    }

    /// Refuses new connections, and closes with `code` those that wait to
    /// be accepted: nobody will take them. `accept` returns `None` from now
    /// on.
    pub(crate) fn refuse_connections(&mut self, now: Instant, code: u64) {
        self.closing = Some(code);
        self.proto.refuse_connections();
        for id in self.accepts.close() {
            self.release(now, id, code);
        }
    }

    /// Closes every connection gracefully and refuses new ones.
    pub(crate) fn close_all(&mut self, now: Instant, code: u64) {
        self.refuse_connections(now, code);
        let ids: Vec<SlotId> = self.by_handle.values().copied().collect();
        for id in ids {
            self.close_gracefully(now, id, code, Bytes::new());
        }
        self.publish_figures();
    }

    /// Has every connection send a packet soon: the endpoint moved to
    /// another socket, and its peers learn the new address from it.
    pub(crate) fn ping_all(&mut self) {
        for &handle in self.by_handle.keys() {
            if let Some(connection) = self.proto.connection(handle) {
                connection.ping();
            }
        }
    }

    /// Unties every slot from its connection as if the protocol had freed
    /// them all without a word: what the application sees when the
    /// protocol gives a connection up without an event.
    #[cfg(test)]
    pub(crate) fn forget_every_connection(&mut self) {
        let ids: Vec<SlotId> = self.by_handle.drain().map(|(_, id)| id).collect();
        for id in ids {
            self.detach(id);
        }
    }

    /// Takes the protocol's events and wakes whoever they concern, then
    /// publishes what handles read.
    fn dispatch(&mut self, now: Instant) {
        self.wake_for_events(now);
        self.forget_freed();
        self.publish_watched(now);
        self.publish_figures();
        if self.proto.is_empty() {
            self.idle.wake_all();
        }
    }

    /// Takes the protocol's events and wakes whoever they concern; whether
    /// a task waiting to receive (a message, a datagram, stream bytes) was
    /// woken.
    fn wake_for_events(&mut self, now: Instant) -> bool {
        let mut woke_receiver = false;
        while let Some((handle, event)) = self.proto.poll_event() {
            if let Some((peer, outcome)) = match &event {
                Event::Introduced { peer, connection } => {
                    Some((*peer, self.by_handle.get(connection).copied().ok_or(None)))
                }
                Event::IntroductionFailed { peer, reason } => Some((*peer, Err(*reason))),
                _ => None,
            } {
                if let Some(&rendezvous) = self.by_handle.get(&handle) {
                    self.introductions.insert((rendezvous, peer), outcome);
                }
                self.introduced.wake_all();
                continue;
            }
            let id = match self.by_handle.get(&handle) {
                Some(&id) => id,
                // A connection a peer opened: its first event is `Connected`.
                None if event == Event::Connected => {
                    match self.proto.connection(handle).map(|c| c.remote()) {
                        Some(remote) => self.add(now, handle, remote),
                        None => continue,
                    }
                }
                // One that ended before it was announced (its identity
                // proof never came, or did not verify): nobody knew of it.
                None => continue,
            };
            let Some(slot) = self.slots.get_mut(&id) else {
                continue;
            };
            match event {
                Event::Connected => {
                    slot.in_span(|| tracing::debug!("connected"));
                    slot.connected = true;
                    slot.connect.wake_all();
                    slot.open_stream.wake_all();
                }
                Event::MessageReceived => {
                    slot.deliver_messages(self.proto.connection(handle));
                    woke_receiver |= slot.recv.wake_all();
                }
                Event::DatagramReceived => {
                    slot.deliver_datagrams(self.proto.connection(handle));
                    woke_receiver |= slot.datagrams.wake_all();
                }
                Event::StreamOpened => slot.accept_streams(self.proto.connection(handle)),
                Event::StreamReadable(stream) => {
                    slot.deliver_stream(stream, self.proto.connection(handle));
                    woke_receiver |= slot.wake_stream(stream, true);
                }
                Event::StreamWritable(stream) => {
                    // A stop is recorded while the protocol still knows it.
                    if let Some(waiters) = slot.streams.get_mut(&stream)
                        && waiters.stopped.is_none()
                        && let Some(connection) = self.proto.connection(handle)
                        && let Ok(Some(code)) = connection.stopped(stream)
                    {
                        waiters.stopped = Some(code);
                    }
                    let _ = slot.wake_stream(stream, false);
                    self.on_stream_writable(now, handle, id, stream);
                }
                Event::MessagesWritable => {
                    slot.send.wake_all();
                    self.on_messages_writable(now, handle, id);
                }
                Event::DatagramsWritable => {
                    slot.datagram_room.wake_all();
                }
                Event::StreamsAvailable => {
                    slot.refresh_opens(self.proto.connection_ref(handle));
                    slot.open_stream.wake_all();
                }
                // Read when asked (`Connection::observed_address`): nobody waits on it.
                Event::ObservedAddressChanged => {}
                Event::Closed(error) => {
                    slot.in_span(|| tracing::debug!(%error, "closed"));
                    let lost = ConnectionLost::Connection(error.clone());
                    slot.published.publish_ended(lost);
                    slot.closed = Some(Box::new(error));
                    slot.end_writes();
                    slot.end_sends();
                    slot.refresh_opens(self.proto.connection_ref(handle));
                    slot.wake_everyone();
                }
                // An event newer than this driver: every waiter looks again,
                // so none sleeps through what it announces.
                _ => slot.wake_everyone(),
            }
        }
        while let Some(handle) = self.proto.accept() {
            if let Some(&id) = self.by_handle.get(&handle) {
                if let Some(code) = self.closing {
                    // Its handshake began before the endpoint closed.
                    self.release(now, id, code);
                    continue;
                }
                if let Some(peer) = self.peer(id) {
                    self.accepts.push(id, peer);
                }
            }
        }
        woke_receiver
    }

    /// Drops the handles of the connections the protocol has freed since
    /// the last turn (so that a later connection given the same handle is
    /// never mistaken for them), and the slots no application handle refers
    /// to any more. Only the freed are looked at: a closed connection the
    /// protocol still holds (closing, or keeping unread data) costs no turn
    /// anything.
    fn forget_freed(&mut self) {
        while let Some(handle) = self.proto.poll_freed() {
            // A handle the protocol has already given to a new connection
            // names that one now (`add` detached the old record).
            if self.proto.holds(handle) {
                continue;
            }
            if let Some(id) = self.by_handle.remove(&handle) {
                self.detach(id);
            }
        }
    }
}

/// The driver drops the state when it ends: whoever still waits is woken
/// and finds the endpoint stopped.
impl Drop for EndpointState {
    fn drop(&mut self) {
        self.accepts.wake();
        self.idle.wake_all();
        for slot in self.slots.values_mut() {
            slot.wake_everyone();
        }
    }
}

impl Node for EndpointState {
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        from: SocketAddr,
        datagram: &mut [u8],
    ) {
        self.proto.handle_datagram(now, local, from, datagram);
    }

    fn poll_transmit(
        &mut self,
        now: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        self.proto.poll_transmit(now, limits, buf)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.proto.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.proto.handle_timeout(now);
    }

    fn handle_send_refused(&mut self, now: Instant, destination: SocketAddr, reason: SendRefused) {
        self.proto.handle_send_refused(now, destination, reason);
    }

    fn take_answer_expected(&mut self) -> Option<Instant> {
        self.proto.take_answer_expected()
    }

    fn take_exchange_opened(&mut self) -> Option<Instant> {
        self.proto.take_exchange_opened()
    }

    fn wake_receivers(&mut self, now: Instant) -> bool {
        self.wake_for_events(now)
    }

    fn end_turn(&mut self, now: Instant) {
        self.dispatch(now);
    }

    fn is_idle(&mut self) -> bool {
        self.proto.is_empty()
    }
}

mod accepts;
mod credit;
mod delivery;
mod hand_off;
mod sends;
mod stream_accepts;
mod stream_opens;
mod stream_table;
#[cfg(test)]
mod tests;
mod wakers;
