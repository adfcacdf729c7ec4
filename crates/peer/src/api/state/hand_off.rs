//! The lock's side of a stream write handed off
//! ([`DriverHandle::hand_off`](crate::driver::DriverHandle::hand_off)):
//! a `write` that finds the endpoint's lock held copies its bytes into a
//! command and returns, within the credit the lock's side last granted
//! the stream; whoever takes the lock next gives them to the protocol.
//!
//! The [`Credit`] is what the protocol would take of the stream
//! ([`writable`](crate::proto::Connection::writable)) when it was last
//! granted (none until the peer announced its flow-control limit for the
//! stream, which the room falls to when it arrives), so that the writer
//! never hands off more than that room whatever its commands still
//! waiting: a writer that the peer does not read is held by the
//! protocol's own limits, as on the lock's path. The room can still
//! shrink before a command runs (streams of one connection share its send
//! buffer): the bytes the protocol did not take are *parked* in order,
//! written when the stream has room again (its `StreamWritable`), and the
//! stream gets no credit meanwhile, so that the writer's next calls take
//! the lock and wait behind them; a `finish` waits behind them too, and
//! so do a graceful close of the connection and its release (every handle
//! gone). Parked bytes were within the peer's flow-control credit when
//! they were handed off: only this side's send buffers, which the peer's
//! acknowledgements free whether or not its application reads, hold them,
//! so they leave while the peer lives (and the connection's end, a
//! timeout too, lets them go).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::credit::Credit;
use super::{EndpointState, Slot, SlotId};
use crate::proto::{
    Connection as ProtoConnection, ConnectionHandle, Endpoint, Instant, StreamId, WriteError,
};

/// What the lock's side keeps of a stream this side writes.
#[derive(Debug)]
pub(crate) struct Writes {
    credit: Arc<Credit>,
    /// Bytes of the writer's handed-off commands the lock's side took in
    /// all: given to the protocol, parked, or lost to an error the writer
    /// learns next.
    taken: u64,
    /// Bytes the protocol had no room for when their command ran, in order.
    parked: VecDeque<Bytes>,
    /// Finish the stream once the parked bytes are written.
    finish: bool,
    /// A handed-off write failed: no more credit, so that the writer's
    /// next call takes the lock and learns why.
    failed: bool,
}

impl Writes {
    fn new(credit: Arc<Credit>) -> Self {
        Self {
            credit,
            taken: 0,
            parked: VecDeque::new(),
            finish: false,
            failed: false,
        }
    }

    /// Grants the credit the protocol's room allows now: none while bytes
    /// are parked or the connection is gone.
    fn regrant(&self, connection: Option<&ProtoConnection>, id: StreamId) {
        match connection {
            Some(connection)
                if self.parked.is_empty()
                    && !self.failed
                    && connection.send_credit_announced(id) =>
            {
                self.credit
                    .grant(self.taken + connection.writable(id) as u64);
            }
            _ => self.credit.revoke(),
        }
    }

    /// Writes the parked bytes while the protocol takes them; then the
    /// finish that waited for them.
    fn flush(&mut self, connection: &mut ProtoConnection, id: StreamId) {
        while let Some(front) = self.parked.front_mut() {
            match connection.write(id, front) {
                Ok(n) if n == front.len() => {
                    self.parked.pop_front();
                }
                Ok(n) => {
                    let _ = front.split_to(n);
                    return;
                }
                // The stream is over: the writer learns why at its next call.
                Err(_) => {
                    self.parked.clear();
                    self.failed = true;
                }
            }
        }
        if std::mem::take(&mut self.finish) {
            let _ = connection.finish(id);
        }
    }
}

/// What waits for a connection's parked bytes and messages to be sent.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    /// A graceful close, with its code and reason.
    close: Option<(u64, Bytes)>,
    /// The release of the connection (every handle gone), with its code.
    release: Option<u64>,
}

impl Slot {
    /// The application took the sending half of stream `id`, which hands
    /// off within `credit`.
    pub(crate) fn hold_send_stream(
        &mut self,
        connection: Option<&ProtoConnection>,
        id: StreamId,
        credit: Arc<Credit>,
    ) {
        self.hold_stream(id);
        let waiters = self.streams.entry(id).or_default();
        let writes = waiters.writes.insert(Box::new(Writes::new(credit)));
        writes.regrant(connection, id);
    }

    /// Whether bytes of stream `id` wait for room: a write or finish on
    /// the lock's path waits behind them.
    pub(crate) fn has_parked(&self, id: StreamId) -> bool {
        self.writes(id).is_some_and(|w| !w.parked.is_empty())
    }

    /// Whether any stream of the connection has bytes parked, or the
    /// connection messages.
    pub(crate) fn any_parked(&self) -> bool {
        self.has_parked_messages()
            || self
                .streams
                .values()
                .any(|w| w.writes.as_ref().is_some_and(|w| !w.parked.is_empty()))
    }

    fn writes(&self, id: StreamId) -> Option<&Writes> {
        self.streams.get(&id)?.writes.as_deref()
    }

    fn writes_mut(&mut self, id: StreamId) -> Option<&mut Writes> {
        self.streams.get_mut(&id)?.writes.as_deref_mut()
    }

    /// The lock's path wrote to stream `id`: its writer is granted the
    /// room left.
    pub(crate) fn wrote(&self, connection: &ProtoConnection, id: StreamId) {
        if let Some(writes) = self.writes(id) {
            writes.regrant(Some(connection), id);
        }
    }

    /// Finishes stream `id` once its parked bytes are written, if it has
    /// any: whether it will.
    pub(crate) fn finish_after_parked(&mut self, id: StreamId) -> bool {
        match self.writes_mut(id) {
            Some(writes) if !writes.parked.is_empty() => {
                writes.finish = true;
                true
            }
            _ => false,
        }
    }

    /// Lets the parked bytes of stream `id` go: it is reset.
    pub(crate) fn drop_parked(&mut self, id: StreamId) {
        if let Some(writes) = self.writes_mut(id) {
            writes.parked.clear();
            writes.finish = false;
        }
    }

    /// The connection is over: nothing parked will be written, and no
    /// writer is granted credit any more.
    pub(crate) fn end_writes(&mut self) {
        for writes in self
            .streams
            .values_mut()
            .filter_map(|w| w.writes.as_deref_mut())
        {
            writes.parked.clear();
            writes.failed = true;
            writes.credit.revoke();
        }
    }

    /// The close or release that waits for the parked bytes, once none
    /// are left.
    fn take_deferred_if_flushed(&mut self) -> Option<Box<Deferred>> {
        if self.deferred.is_none() || self.any_parked() {
            return None;
        }
        self.deferred.take()
    }

    /// Stream `id` has room again: its parked bytes are written, and its
    /// writer is granted what room is left. A record no half holds any
    /// more goes once nothing is parked.
    pub(crate) fn on_writable(&mut self, connection: Option<&mut ProtoConnection>, id: StreamId) {
        let Some(waiters) = self.streams.get_mut(&id) else {
            return;
        };
        if let Some(writes) = waiters.writes.as_deref_mut() {
            if let Some(connection) = connection {
                writes.flush(connection, id);
                writes.regrant(Some(connection), id);
            } else {
                writes.parked.clear();
                writes.regrant(None, id);
            }
        }
        self.forget_stream_if_done(id);
    }
}

impl EndpointState {
    /// Closes the connection of `id` gracefully with `code` and `reason`:
    /// at once, or once the bytes parked for its streams are written.
    /// Whether it closed now.
    pub(crate) fn close_gracefully(
        &mut self,
        now: Instant,
        id: SlotId,
        code: u64,
        reason: Bytes,
    ) -> bool {
        let Some((slot, connection)) = self.connection(id) else {
            return false;
        };
        let Some(connection) = connection else {
            return false;
        };
        if slot.any_parked() {
            slot.deferred.get_or_insert_default().close = Some((code, reason));
            return false;
        }
        connection.close(now, code, reason);
        // No more streams are opened on it.
        slot.refresh_opens(Some(connection));
        true
    }

    /// Whether the release of the connection of `id` with `code` waits
    /// for its parked bytes (and is recorded to follow them).
    pub(crate) fn defer_release(&mut self, id: SlotId, code: u64) -> bool {
        match self.slots.get_mut(&id) {
            Some(slot) if slot.handle.is_some() && slot.any_parked() => {
                slot.deferred.get_or_insert_default().release = Some(code);
                true
            }
            _ => false,
        }
    }

    /// Stream `stream` of the connection of `handle` (slot `id`) has room
    /// again: its parked bytes go, and what waited for them follows.
    pub(crate) fn on_stream_writable(
        &mut self,
        now: Instant,
        handle: ConnectionHandle,
        id: SlotId,
        stream: StreamId,
    ) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        slot.on_writable(self.proto.connection(handle), stream);
        self.run_deferred_if_flushed(now, handle, id);
    }

    /// Runs what waited for the parked bytes and messages of the
    /// connection of `handle` (slot `id`), once none are left.
    pub(crate) fn run_deferred_if_flushed(
        &mut self,
        now: Instant,
        handle: ConnectionHandle,
        id: SlotId,
    ) {
        if let Some(slot) = self.slots.get_mut(&id)
            && let Some(deferred) = slot.take_deferred_if_flushed()
        {
            run_deferred(&mut self.proto, now, handle, *deferred);
        }
    }

    /// Runs a write of `bytes` on stream `id` of the connection of `slot`
    /// that a handle handed off: the protocol takes what it has room for,
    /// the rest is parked (see the module's doc).
    pub(crate) fn write_handed_off(&mut self, slot: SlotId, id: StreamId, bytes: Bytes) {
        let Some((slot, mut connection)) = self.connection(slot) else {
            return;
        };
        let Some(writes) = slot.writes_mut(id) else {
            return;
        };
        writes.taken += bytes.len() as u64;
        match connection.as_deref_mut() {
            Some(connection) if writes.parked.is_empty() => {
                match connection.write(id, &bytes) {
                    Ok(n) if n < bytes.len() => writes.parked.push_back(bytes.slice(n..)),
                    Ok(_) => {}
                    // The writer's next call takes the lock and learns why.
                    Err(error) => {
                        writes.failed = true;
                        if let WriteError::Stopped(code) = error
                            && let Some(waiters) = slot.streams.get_mut(&id)
                        {
                            waiters.stopped = Some(code);
                        }
                    }
                }
            }
            Some(_) => writes.parked.push_back(bytes),
            None => {}
        }
        if let Some(writes) = slot.writes(id) {
            writes.regrant(connection.as_deref(), id);
        }
        slot.publish_if_watched(connection.as_deref());
    }
}

/// Runs what waited for the connection of `handle`'s parked bytes.
fn run_deferred(proto: &mut Endpoint, now: Instant, handle: ConnectionHandle, deferred: Deferred) {
    if let Some((code, reason)) = deferred.close
        && let Some(connection) = proto.connection(handle)
    {
        connection.close(now, code, reason);
    }
    if let Some(code) = deferred.release {
        proto.release(now, handle, code);
    }
}
