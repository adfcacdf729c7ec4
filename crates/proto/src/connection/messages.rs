//! The application's messages: the calls that queue them (small ones as
//! frames, large ones on one-way streams of their own) and take those that
//! arrived whole.

use bytes::Bytes;

use super::streams::Turn;
use super::streams::messages::MESSAGE_CHARGE;
use super::streams::scheduler::Urgency;
use super::{Connection, SendError, small_message_limit};

impl Connection {
    /// Queues a message of any size, delivered whole and exactly once. One
    /// that fits a packet travels in one frame; a larger one on a one-way
    /// stream of its own. Refused (and given back) while the messages held
    /// until acknowledged would exceed `message_send_buffer`, whatever the
    /// peer grants, or the peer allows no more large ones.
    pub fn send_message(&mut self, message: Bytes) -> Result<(), SendError> {
        if !self.is_open_for_data() {
            return Err(SendError::Closed);
        }
        let len = message.len();
        let limit = self.peer_max_message_size();
        if len as u64 > limit {
            return Err(SendError::MessageTooLarge {
                size: len as u64,
                limit,
            });
        }
        let held = self.messages_held + self.streams.message_bytes();
        if held > 0 && held.saturating_add(len) > self.config.message_send_buffer {
            return Err(SendError::Blocked(message));
        }
        if len > small_message_limit() {
            // A stream of its own: its bytes are the caller's, referenced,
            // and copied into the stream's bounded buffer as it drains.
            return self
                .streams
                .send_message(message)
                .map_err(SendError::Blocked);
        }
        self.messages_out.push(message);
        self.streams.schedule(Turn::Messages, Urgency::New);
        self.messages_held += len;
        Ok(())
    }

    /// Bytes of messages [`send_message`](Self::send_message) takes now
    /// without refusing one for want of room: what `message_send_buffer`
    /// has left (none once the connection no longer sends).
    pub fn message_send_room(&self) -> usize {
        if !self.is_open_for_data() {
            return 0;
        }
        let held = self.messages_held + self.streams.message_bytes();
        self.config.message_send_buffer.saturating_sub(held)
    }

    /// The next whole message, if one arrived.
    pub fn recv_message(&mut self) -> Option<Bytes> {
        let (message, large) = self.inbox.pop_front()?;
        if let Some(held) = large {
            self.streams.on_large_message_taken(held);
        } else {
            self.streams
                .on_consumed(message.len() as u64 + MESSAGE_CHARGE);
        }
        Some(message)
    }
}
