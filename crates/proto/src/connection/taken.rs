//! Reads that take the peer's data out of the connection without
//! consuming it, for an application side that holds it in buffers of its
//! own until the application reads it (the endpoint's driver does, for a
//! reader that waits): the bytes and messages taken still count against
//! the stream's and the connection's windows, and as received memory in
//! the endpoint's budget, until the application's side reports them
//! consumed. So the peer may send no more than it could if they had stayed
//! here, and no byte escapes the budget. Datagrams taken out likewise stay
//! in the budget, and within `datagram_receive_queue`, until reported.

use std::collections::VecDeque;

use bytes::Bytes;

use super::streams::messages::MESSAGE_CHARGE;
use super::{Connection, ReadError, ReadOutcome};
use crate::StreamId;

impl Connection {
    /// Takes the stream's next bytes, in order, into `out`, like
    /// [`read`](Self::read), but leaves them unconsumed: the windows stay
    /// where they were until [`stream_consumed`](Self::stream_consumed)
    /// reports them.
    pub fn take_stream(&mut self, id: StreamId, out: &mut [u8]) -> Result<ReadOutcome, ReadError> {
        let taken = self.streams.take(id, out);
        self.closed_if_forgotten(taken)
    }

    /// The application has (or dropped) `bytes` of stream `id` that
    /// [`take_stream`](Self::take_stream) took: the stream's window (while
    /// the stream is still received) and the connection's move on. Bytes
    /// beyond what was taken are ignored.
    pub fn stream_consumed(&mut self, id: StreamId, bytes: u64) {
        self.streams.consume_taken(Some(id), bytes);
    }

    /// Takes the next whole message if it is at most `max_len` bytes, like
    /// [`recv_message`](Self::recv_message), but leaves it unconsumed:
    /// the message and what it is charged (the second value) still count
    /// until [`messages_consumed`](Self::messages_consumed) reports that
    /// charge. A message that arrived on a stream of its own is left for
    /// `recv_message`.
    pub fn take_message(&mut self, max_len: usize) -> Option<(Bytes, u64)> {
        let (message, large) = self.inbox.front()?;
        if large.is_some() || message.len() > max_len {
            return None;
        }
        let (message, _) = self.inbox.pop_front()?;
        let charge = message.len() as u64 + MESSAGE_CHARGE;
        self.streams.on_message_taken_out(charge);
        Some((message, charge))
    }

    /// The application has (or dropped) messages that
    /// [`take_message`](Self::take_message) took, charged `charge` in all:
    /// the connection window moves on.
    pub fn messages_consumed(&mut self, charge: u64) {
        self.streams.consume_taken(None, charge);
    }

    /// Moves every datagram that arrived to the back of `out`, in order,
    /// like [`recv_datagram`](Self::recv_datagram), but leaves their bytes
    /// charged as received memory until
    /// [`datagrams_consumed`](Self::datagrams_consumed) reports them; the
    /// oldest in `out` are dropped (no longer charged, and counted in
    /// `datagrams_dropped` as a full queue's are) while it holds more than
    /// `datagram_receive_queue`.
    pub fn take_datagrams(&mut self, out: &mut VecDeque<Bytes>) {
        while let Some(datagram) = self.datagrams_in.pop() {
            if out.len() >= self.config.datagram_receive_queue
                && let Some(oldest) = out.pop_front()
            {
                self.datagrams_taken = self.datagrams_taken.saturating_sub(oldest.len());
                self.stats.rare().datagrams_dropped += 1;
            }
            self.datagrams_taken += datagram.len();
            out.push_back(datagram);
        }
    }

    /// The application has (or dropped) datagrams that
    /// [`take_datagrams`](Self::take_datagrams) took, of `bytes` in all:
    /// they are no longer charged. Bytes beyond what was taken are ignored.
    pub fn datagrams_consumed(&mut self, bytes: usize) {
        self.datagrams_taken = self.datagrams_taken.saturating_sub(bytes);
    }

    /// A stream's read on a connection that ended, whose stream records
    /// are gone: the connection is closed, not the stream unknown.
    pub(super) fn closed_if_forgotten(
        &self,
        read: Result<ReadOutcome, ReadError>,
    ) -> Result<ReadOutcome, ReadError> {
        match read {
            Err(ReadError::UnknownStream(_)) if self.error.is_some() => Err(ReadError::Closed),
            other => other,
        }
    }
}
