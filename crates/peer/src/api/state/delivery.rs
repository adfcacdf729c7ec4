//! Delivery buffers: what the driver took out of the protocol, at the end
//! of a turn, for a reader that once found nothing and waited, so that its
//! next reads copy it without the endpoint's lock.
//!
//! The driver takes the bytes or messages as the application would (the
//! peer's window opens as if they were read), within a small fixed bound:
//! such a reader holds at most [`STREAM_DELIVERY_BYTES`] of its stream,
//! or [`MESSAGE_DELIVERY_BYTES`] of its connection's messages, beyond the
//! window; they no longer count in the endpoint's memory budget, which
//! counts what the protocol holds. A reader takes from its buffer first and reaches the protocol
//! (under the endpoint's lock) only once it is empty; the driver fills it
//! only under that lock, so what a reader takes comes in order, and the
//! stream's end (its last byte read, or its reset) only after every byte
//! moved before it. The first read after a move wakes the driver, which
//! then announces the window the move opened, as a read of the protocol
//! does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Context;

use bytes::Bytes;

use super::{Slot, StreamWaiters};

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
    /// taken since the driver moved more: the window the move opened is
    /// announced once the driver is woken.
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
    /// The driver moved bytes no read has taken from yet.
    fresh: bool,
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
            fresh,
        } = &mut *buffer;
        let left = &bytes[*head..*tail];
        if left.is_empty() {
            return end.map_or(Taken::Empty, Taken::End);
        }
        let n = left.len().min(out.len());
        out[..n].copy_from_slice(&left[..n]);
        *head += n;
        Taken::Read(n, std::mem::take(fresh))
    }

    /// Moves what stream `id` of `connection` has readable, up to the
    /// bound, and its end if that comes next. Under the endpoint's lock.
    pub(crate) fn fill(&self, connection: &mut ProtoConnection, id: StreamId) {
        let mut buffer = self.lock();
        let StreamBuffer {
            bytes,
            head,
            tail,
            end,
            fresh,
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
        let start = *tail;
        while *tail < bytes.len() {
            match connection.read(id, &mut bytes[*tail..]) {
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
        *fresh |= *tail > start;
    }
}

/// A connection's delivery buffer of whole messages, shared by its
/// `Connection` handles and the lock's side.
#[derive(Debug, Default)]
pub(crate) struct MessageDelivery(Mutex<MessageBuffer>);

#[derive(Debug, Default)]
struct MessageBuffer {
    messages: VecDeque<Bytes>,
    bytes: usize,
    /// The driver moved messages no `recv` has taken from yet.
    fresh: bool,
}

impl MessageDelivery {
    fn lock(&self) -> MutexGuard<'_, MessageBuffer> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next message moved, if any, and whether it is the first taken
    /// since the driver moved more (see [`Taken::Read`]).
    pub(crate) fn take(&self) -> Option<(Bytes, bool)> {
        let mut buffer = self.lock();
        let message = buffer.messages.pop_front()?;
        buffer.bytes -= message.len();
        Some((message, std::mem::take(&mut buffer.fresh)))
    }

    /// Moves the whole messages `connection` delivered, as many as fit the
    /// bound. Under the endpoint's lock.
    pub(crate) fn fill(&self, connection: &mut ProtoConnection) {
        let mut buffer = self.lock();
        let before = buffer.messages.len();
        while buffer.messages.len() < MESSAGE_DELIVERY_COUNT
            && connection
                .next_message_len()
                .is_some_and(|len| buffer.bytes + len <= MESSAGE_DELIVERY_BYTES)
            && let Some(message) = connection.recv_message()
        {
            buffer.bytes += message.len();
            buffer.messages.push_back(message);
        }
        buffer.fresh |= buffer.messages.len() > before;
    }
}

impl StreamWaiters {
    /// The reader of `cx` waits for bytes: it is woken when some arrive,
    /// and the driver moves them into its delivery buffer, which this
    /// returns.
    pub(crate) fn wait_to_read(&mut self, cx: &Context<'_>) -> Arc<StreamDelivery> {
        self.read.register(cx);
        Arc::clone(self.delivery.get_or_insert_default())
    }

    /// The next bytes the driver moved, if any.
    pub(crate) fn take_delivered(&self, out: &mut [u8]) -> Taken {
        self.delivery
            .as_ref()
            .map_or(Taken::Empty, |delivery| delivery.take(out))
    }
}

impl Slot {
    /// `recv` of `cx` waits for a message: it is woken when one arrives,
    /// and the driver moves messages into the delivery buffer this returns.
    pub(crate) fn wait_to_recv(&mut self, cx: &Context<'_>) -> Arc<MessageDelivery> {
        self.recv.register(cx);
        Arc::clone(self.delivered.get_or_insert_default())
    }

    /// The next message the driver moved, if any.
    pub(crate) fn take_delivered(&self) -> Option<(Bytes, bool)> {
        self.delivered.as_ref().and_then(|d| d.take())
    }

    /// Moves what the connection delivered for `recv`, once one waited.
    pub(super) fn deliver_messages(&self, connection: Option<&mut ProtoConnection>) {
        if let (Some(delivered), Some(connection)) = (&self.delivered, connection) {
            delivered.fill(connection);
        }
    }

    /// Moves what stream `id` delivered for its reader, once it waited.
    pub(super) fn deliver_stream(&self, id: StreamId, connection: Option<&mut ProtoConnection>) {
        if let (Some(delivery), Some(connection)) = (
            self.streams.get(&id).and_then(|w| w.delivery.as_ref()),
            connection,
        ) {
            delivery.fill(connection, id);
        }
    }
}
