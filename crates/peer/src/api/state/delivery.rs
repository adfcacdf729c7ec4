//! Delivery buffers: what the driver took out of the protocol, at the end
//! of a turn, for a reader that once read under the endpoint's lock (its
//! first read, or one that found its buffer empty), so that its next
//! reads copy it without that lock.
//!
//! The driver takes the bytes or messages out *without consuming them*
//! ([`take_stream`](crate::proto::Connection::take_stream),
//! [`take_message`](crate::proto::Connection::take_message)), within a
//! small fixed bound ([`STREAM_DELIVERY_BYTES`] of a stream,
//! [`MESSAGE_DELIVERY_BYTES`] of a connection's messages): they still
//! count against the stream's and the connection's windows, and in the
//! endpoint's memory budget, as if they had stayed in the protocol. A
//! buffer counts what its reader took since the lock's side last looked;
//! the first read that finds that count at zero hands off a command that
//! reports it consumed at the driver's next turn (and wakes the driver),
//! which is when the window opens, as a read of the protocol would have
//! opened it. A read under the lock, and each fill, report at once.
//! Bytes a reader never takes (it stopped, or was dropped; the connection's
//! handles all went) are reported consumed as they are dropped.
//!
//! A reader takes from its buffer first and reaches the protocol (under
//! the endpoint's lock) only once it is empty; the driver fills it only
//! under that lock, so what a reader takes comes in order, and the
//! stream's end (its last byte read, or its reset) only after every byte
//! moved before it.
//!
//! Datagrams take the same way, once a `recv_datagram` took the lock: the
//! driver moves every datagram that arrives
//! ([`take_datagrams`](crate::proto::Connection::take_datagrams)), the
//! oldest dropped and counted past the connection's
//! `datagram_receive_queue`, and they stay charged to the endpoint's
//! budget until reported consumed. Nothing waits on that report but the
//! budget.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use super::{EndpointState, Slot, SlotId, StreamWaiters};

use crate::proto::{Connection as ProtoConnection, ReadError, ReadOutcome, StreamId};

/// Most bytes of one stream the driver moves for its waiting reader.
pub(crate) const STREAM_DELIVERY_BYTES: usize = 64 * 1024;

/// What a stream's buffer holds at first; it doubles up to the bound
/// while the driver keeps filling more than half of it.
const STREAM_DELIVERY_START: usize = 4 * 1024;

/// Most bytes of whole messages the driver moves for a connection's
/// waiting `recv`.
pub(crate) const MESSAGE_DELIVERY_BYTES: usize = 64 * 1024;

/// Most messages moved at once (each costs a queue entry, even empty).
const MESSAGE_DELIVERY_COUNT: usize = 1024;

/// How a stream ended, as the driver found it behind the bytes it moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    Finished,
    Reset(u64),
}

/// What one read took of a stream's delivery buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// This many bytes (more than 0), and whether they are the first
    /// taken since the lock's side last looked: the reader then hands off
    /// the report that they were consumed.
    Read(usize, bool),
    /// Nothing is left but the stream's end.
    End(StreamEnd),
    /// Nothing: read from the protocol.
    Empty,
}

/// One stream's delivery buffer, shared by its `RecvStream` and the
/// lock's side.
#[derive(Debug, Default)]
pub(crate) struct StreamDelivery(Mutex<StreamBuffer>);

#[derive(Debug, Default)]
struct StreamBuffer {
    /// Bytes `head..tail` were moved and not taken yet.
    bytes: Box<[u8]>,
    head: usize,
    tail: usize,
    end: Option<StreamEnd>,
    /// Bytes the reader took that the protocol does not know consumed.
    taken: u64,
}

impl StreamDelivery {
    fn lock(&self) -> MutexGuard<'_, StreamBuffer> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Copies the next bytes into `out` (not empty), or says the end.
    pub(crate) fn take(&self, out: &mut [u8]) -> Taken {
        let mut buffer = self.lock();
        let StreamBuffer {
            bytes,
            head,
            tail,
            end,
            taken,
        } = &mut *buffer;
        let left = &bytes[*head..*tail];
        if left.is_empty() {
            return end.map_or(Taken::Empty, Taken::End);
        }
        let n = left.len().min(out.len());
        out[..n].copy_from_slice(&left[..n]);
        *head += n;
        let first = *taken == 0;
        *taken += n as u64;
        Taken::Read(n, first)
    }

    /// Reports to the protocol what the reader of stream `id` took since
    /// the last report. Under the endpoint's lock.
    fn report(&self, connection: &mut ProtoConnection, id: StreamId) {
        report_stream(&mut self.lock(), connection, id);
    }

    /// Moves what stream `id` of `connection` has readable, up to the
    /// bound, and its end if that comes next, after reporting what the
    /// reader took. Under the endpoint's lock.
    fn fill(&self, connection: &mut ProtoConnection, id: StreamId) {
        let mut buffer = self.lock();
        report_stream(&mut buffer, connection, id);
        let StreamBuffer {
            bytes,
            head,
            tail,
            end,
            ..
        } = &mut *buffer;
        if end.is_some() {
            return;
        }
        // What is left goes to the front, so the rest is free.
        bytes.copy_within(*head..*tail, 0);
        *tail -= *head;
        *head = 0;
        if bytes.len() - *tail <= bytes.len() / 2 && bytes.len() < STREAM_DELIVERY_BYTES {
            // Grown as the stream keeps it full, so that a reader of a few
            // bytes holds a small buffer.
            let len = (bytes.len() * 2).clamp(STREAM_DELIVERY_START, STREAM_DELIVERY_BYTES);
            let mut grown = vec![0; len].into_boxed_slice();
            grown[..*tail].copy_from_slice(&bytes[..*tail]);
            *bytes = grown;
        }
        while *tail < bytes.len() {
            match connection.take_stream(id, &mut bytes[*tail..]) {
                Ok(ReadOutcome::Read(0)) => break,
                Ok(ReadOutcome::Read(n)) => *tail += n,
                Ok(ReadOutcome::Finished) => {
                    *end = Some(StreamEnd::Finished);
                    break;
                }
                Err(ReadError::Reset(code)) => {
                    *end = Some(StreamEnd::Reset(code));
                    break;
                }
                // The reader learns it under the lock.
                Err(_) => break,
            }
        }
    }

    /// Drops what the buffer holds: with what the reader took, the
    /// protocol counts it consumed. Under the endpoint's lock.
    fn discard(&self, connection: Option<&mut ProtoConnection>, id: StreamId) {
        let mut buffer = self.lock();
        buffer.taken += (buffer.tail - buffer.head) as u64;
        (buffer.head, buffer.tail) = (0, 0);
        buffer.bytes = Box::default();
        if let Some(connection) = connection {
            report_stream(&mut buffer, connection, id);
        }
    }
}

/// Reports what the reader of stream `id` took since the last report.
fn report_stream(buffer: &mut StreamBuffer, connection: &mut ProtoConnection, id: StreamId) {
    let taken = std::mem::take(&mut buffer.taken);
    if taken > 0 {
        connection.stream_consumed(id, taken);
    }
}

/// A connection's delivery buffer of whole messages, shared by its
/// `Connection` handles and the lock's side.
#[derive(Debug, Default)]
pub(crate) struct MessageDelivery(Mutex<MessageBuffer>);

#[derive(Debug, Default)]
struct MessageBuffer {
    /// Each message, and what the protocol charged it.
    messages: VecDeque<(Bytes, u64)>,
    /// The bytes of `messages`.
    bytes: usize,
    /// What the messages taken since the last report were charged.
    taken: u64,
}

impl MessageDelivery {
    fn lock(&self) -> MutexGuard<'_, MessageBuffer> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next message moved, if any, and whether it is the first taken
    /// since the lock's side last looked (see [`Taken::Read`]).
    pub(crate) fn take(&self) -> Option<(Bytes, bool)> {
        let mut buffer = self.lock();
        let (message, charge) = buffer.messages.pop_front()?;
        buffer.bytes -= message.len();
        let first = buffer.taken == 0;
        buffer.taken += charge;
        Some((message, first))
    }

    /// Reports to the protocol what the messages taken since the last
    /// report were charged. Under the endpoint's lock.
    fn report(&self, connection: &mut ProtoConnection) {
        report_messages(&mut self.lock(), connection);
    }

    /// Moves the whole messages `connection` delivered, as many as fit the
    /// bound, after reporting those taken. Under the endpoint's lock.
    fn fill(&self, connection: &mut ProtoConnection) {
        let mut buffer = self.lock();
        report_messages(&mut buffer, connection);
        while buffer.messages.len() < MESSAGE_DELIVERY_COUNT
            && let Some((message, charge)) =
                connection.take_message(MESSAGE_DELIVERY_BYTES - buffer.bytes)
        {
            buffer.bytes += message.len();
            buffer.messages.push_back((message, charge));
        }
    }

    /// Drops the messages the buffer holds: with those taken, the
    /// protocol counts them consumed. Under the endpoint's lock.
    fn discard(&self, connection: Option<&mut ProtoConnection>) {
        let mut buffer = self.lock();
        let left: u64 = buffer.messages.drain(..).map(|(_, charge)| charge).sum();
        buffer.taken += left;
        buffer.bytes = 0;
        if let Some(connection) = connection {
            report_messages(&mut buffer, connection);
        }
    }
}

/// Reports what the messages taken since the last report were charged.
fn report_messages(buffer: &mut MessageBuffer, connection: &mut ProtoConnection) {
    let taken = std::mem::take(&mut buffer.taken);
    if taken > 0 {
        connection.messages_consumed(taken);
    }
}

/// A connection's delivery buffer of datagrams, shared by its
/// `Connection` handles and the lock's side.
#[derive(Debug, Default)]
pub(crate) struct DatagramDelivery(Mutex<DatagramBuffer>);

#[derive(Debug, Default)]
struct DatagramBuffer {
    /// Moved and not taken, oldest first.
    datagrams: VecDeque<Bytes>,
    /// The bytes of those taken since the last report.
    taken: usize,
}

impl DatagramDelivery {
    fn lock(&self) -> MutexGuard<'_, DatagramBuffer> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next datagram moved, if any, and whether it is the first (not
    /// empty) taken since the lock's side last looked: the reader then
    /// hands off the report.
    pub(crate) fn take(&self) -> Option<(Bytes, bool)> {
        let mut buffer = self.lock();
        let datagram = buffer.datagrams.pop_front()?;
        let first = buffer.taken == 0 && !datagram.is_empty();
        buffer.taken += datagram.len();
        Some((datagram, first))
    }

    /// Reports the bytes of the datagrams taken since the last report.
    /// Under the endpoint's lock.
    fn report(&self, connection: &mut ProtoConnection) {
        report_datagrams(&mut self.lock(), connection);
    }

    /// Moves every datagram `connection` received, after reporting those
    /// taken. Under the endpoint's lock.
    fn fill(&self, connection: &mut ProtoConnection) {
        let mut buffer = self.lock();
        report_datagrams(&mut buffer, connection);
        connection.take_datagrams(&mut buffer.datagrams);
    }

    /// Drops the datagrams the buffer holds: with those taken, the
    /// protocol counts them consumed. Under the endpoint's lock.
    fn discard(&self, connection: Option<&mut ProtoConnection>) {
        let mut buffer = self.lock();
        let left: usize = buffer.datagrams.iter().map(Bytes::len).sum();
        buffer.taken += left;
        buffer.datagrams = VecDeque::new();
        if let Some(connection) = connection {
            report_datagrams(&mut buffer, connection);
        }
    }
}

/// Reports the bytes of the datagrams taken since the last report.
fn report_datagrams(buffer: &mut DatagramBuffer, connection: &mut ProtoConnection) {
    let taken = std::mem::take(&mut buffer.taken);
    if taken > 0 {
        connection.datagrams_consumed(taken);
    }
}

/// Whose delivery buffer a report of what was taken without the lock is
/// about.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reader {
    /// A stream's reader.
    Stream(StreamId),
    /// The connection's `recv`.
    Messages,
    /// The connection's `recv_datagram`.
    Datagrams,
}

impl StreamWaiters {
    /// The reader's delivery buffer, made on its first read under the
    /// lock: from then on the driver moves what arrives into it.
    pub(crate) fn delivery(&mut self) -> Arc<StreamDelivery> {
        Arc::clone(self.delivery.get_or_insert_default())
    }
}

impl Slot {
    /// The delivery buffer of the connection's messages, made on the first
    /// `recv` under the lock: from then on the driver moves what arrives
    /// into it.
    pub(crate) fn message_delivery(&mut self) -> Arc<MessageDelivery> {
        Arc::clone(self.delivered.get_or_insert_default())
    }

    /// The next bytes the driver moved for stream `id`'s reader, if any,
    /// reported consumed at once. Under the endpoint's lock.
    pub(crate) fn take_delivered_bytes(
        &self,
        connection: Option<&mut ProtoConnection>,
        id: StreamId,
        out: &mut [u8],
    ) -> Taken {
        let Some(delivery) = self.streams.get(&id).and_then(|w| w.delivery.as_ref()) else {
            return Taken::Empty;
        };
        let taken = delivery.take(out);
        if let (Taken::Read(..), Some(connection)) = (&taken, connection) {
            delivery.report(connection, id);
        }
        taken
    }

    /// The next message the driver moved, if any, reported consumed at
    /// once. Under the endpoint's lock.
    pub(crate) fn take_delivered_message(
        &self,
        connection: Option<&mut ProtoConnection>,
    ) -> Option<Bytes> {
        let delivered = self.delivered.as_ref()?;
        let (message, _) = delivered.take()?;
        if let Some(connection) = connection {
            delivered.report(connection);
        }
        Some(message)
    }

    /// The delivery buffer of the connection's datagrams, made on the first
    /// `recv_datagram` under the lock: from then on the driver moves what
    /// arrives into it.
    pub(crate) fn datagram_delivery(&mut self) -> Arc<DatagramDelivery> {
        Arc::clone(self.datagrams_delivered.get_or_insert_default())
    }

    /// The next datagram the driver moved, if any, reported consumed at
    /// once. Under the endpoint's lock.
    pub(crate) fn take_delivered_datagram(
        &self,
        connection: Option<&mut ProtoConnection>,
    ) -> Option<Bytes> {
        let delivered = self.datagrams_delivered.as_ref()?;
        let (datagram, _) = delivered.take()?;
        if let Some(connection) = connection {
            delivered.report(connection);
        }
        Some(datagram)
    }

    /// Drops stream `id`'s delivery buffer (its reader stopped, or went):
    /// what it holds is consumed.
    pub(crate) fn discard_delivered_bytes(
        &mut self,
        connection: Option<&mut ProtoConnection>,
        id: StreamId,
    ) {
        if let Some(delivery) = self.streams.get_mut(&id).and_then(|w| w.delivery.take()) {
            delivery.discard(connection, id);
        }
    }

    /// Moves what the connection delivered for `recv`, once one took the lock.
    pub(super) fn deliver_messages(&self, connection: Option<&mut ProtoConnection>) {
        if let (Some(delivered), Some(connection)) = (&self.delivered, connection) {
            delivered.fill(connection);
        }
    }

    /// Moves the datagrams the connection received for `recv_datagram`,
    /// once one took the lock.
    pub(super) fn deliver_datagrams(&self, connection: Option<&mut ProtoConnection>) {
        if let (Some(delivered), Some(connection)) = (&self.datagrams_delivered, connection) {
            delivered.fill(connection);
        }
    }

    /// Moves what stream `id` delivered for its reader, once it took the lock.
    pub(super) fn deliver_stream(&self, id: StreamId, connection: Option<&mut ProtoConnection>) {
        if let (Some(delivery), Some(connection)) = (
            self.streams.get(&id).and_then(|w| w.delivery.as_ref()),
            connection,
        ) {
            delivery.fill(connection, id);
        }
    }
}

impl EndpointState {
    /// Reports what was taken without the lock from connection `id`'s
    /// delivery buffer of `reader`: the command a reader hands off after
    /// its first take since the last report.
    pub(crate) fn report_taken(&mut self, id: SlotId, reader: Reader) {
        let Some((slot, Some(connection))) = self.connection(id) else {
            return;
        };
        match reader {
            Reader::Stream(stream) => {
                if let Some(delivery) = slot.streams.get(&stream).and_then(|w| w.delivery.as_ref())
                {
                    delivery.report(connection, stream);
                }
            }
            Reader::Messages => {
                if let Some(delivered) = &slot.delivered {
                    delivered.report(connection);
                }
            }
            Reader::Datagrams => {
                if let Some(delivered) = &slot.datagrams_delivered {
                    delivered.report(connection);
                }
            }
        }
    }

    /// Drops connection `id`'s delivery buffers of messages and datagrams
    /// (its handles are all gone): what they hold is consumed.
    pub(super) fn discard_delivered(&mut self, id: SlotId) {
        let Some((slot, mut connection)) = self.connection(id) else {
            return;
        };
        if let Some(delivered) = slot.delivered.take() {
            delivered.discard(connection.as_deref_mut());
        }
        if let Some(delivered) = slot.datagrams_delivered.take() {
            delivered.discard(connection);
        }
    }
}
