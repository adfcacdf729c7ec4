//! The largest message each side accepts: this side's own limit
//! ([`ConnectionConfig::max_message_size`]), told to the peer, and the
//! peer's, learned from it.
//!
//! Both sides assume [`DEFAULT_MAX_MESSAGE_SIZE`] (1 GiB) of each other
//! until told otherwise, so a side whose limit is the default sends
//! nothing. Any other limit goes in a MaxMessageSize frame in the side's
//! first packet (the responder's reply, so the initiator knows it from
//! the start; the initiator's first packet after the reply), again if
//! that packet is lost. The limit never changes during a connection,
//! so every copy carries the same value and their order does not matter.
//!
//! `send_message` refuses a message above the peer's limit
//! ([`SendError::MessageTooLarge`](super::SendError::MessageTooLarge)) and
//! the connection lives; a message above this side's own limit that
//! arrives anyway is a protocol violation. The responder learns the
//! initiator's limit with its first packet after the reply: a message
//! above it that the responder sent before is still refused on arrival (see
//! [`ConnectionConfig::max_message_size`]).

use tern_wire::{DEFAULT_MAX_MESSAGE_SIZE, Frame, MaxMessageSize, VARINT_MAX};

#[cfg(doc)]
use crate::ConnectionConfig;

use super::Connection;

/// What a connection knows and owes about message limits.
#[derive(Debug)]
pub(super) struct MessageLimits {
    /// The largest message the peer accepts, as far as this side knows.
    peer: u64,
    /// This side's limit goes in the next packet that carries data.
    due: bool,
}

impl MessageLimits {
    /// A connection whose own limit is `own`: it owes the peer a frame if
    /// that is not the default.
    pub(super) fn new(own: u64) -> Self {
        Self {
            peer: DEFAULT_MAX_MESSAGE_SIZE,
            due: own != DEFAULT_MAX_MESSAGE_SIZE,
        }
    }

    /// The frame announcing `own`, if one is due.
    pub(super) fn due_frame(&self, own: u64) -> Option<Frame<'static>> {
        self.due.then_some(Frame::MaxMessageSize(MaxMessageSize {
            max: own.min(VARINT_MAX),
        }))
    }

    /// The announcement went out in a packet.
    pub(super) fn on_sent(&mut self) {
        self.due = false;
    }

    /// The packet that carried it was lost: it goes again.
    pub(super) fn on_lost(&mut self) {
        self.due = true;
    }

    /// The peer announced its limit.
    pub(super) fn on_frame(&mut self, frame: MaxMessageSize) {
        self.peer = frame.max;
    }
}

impl Connection {
    /// The largest message the peer accepts: its announced limit, or
    /// [`DEFAULT_MAX_MESSAGE_SIZE`] until it announced one.
    pub fn peer_max_message_size(&self) -> u64 {
        self.message_limits.peer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_limit_other_than_the_default_is_announced_and_a_lost_one_goes_again() {
        let quiet = MessageLimits::new(DEFAULT_MAX_MESSAGE_SIZE);
        assert_eq!(quiet.due_frame(DEFAULT_MAX_MESSAGE_SIZE), None);

        let mut small = MessageLimits::new(1 << 16);
        let frame = Frame::MaxMessageSize(MaxMessageSize { max: 1 << 16 });
        assert_eq!(small.due_frame(1 << 16), Some(frame));
        small.on_sent();
        assert_eq!(small.due_frame(1 << 16), None);
        small.on_lost();
        assert_eq!(small.due_frame(1 << 16), Some(frame));
        // A limit past what a varint carries is announced as the largest.
        let huge = MessageLimits::new(u64::MAX);
        let largest = Frame::MaxMessageSize(MaxMessageSize { max: VARINT_MAX });
        assert_eq!(huge.due_frame(u64::MAX), Some(largest));
    }

    #[test]
    fn the_peer_is_assumed_to_accept_the_default_until_it_says_otherwise() {
        let mut limits = MessageLimits::new(DEFAULT_MAX_MESSAGE_SIZE);
        assert_eq!(limits.peer, DEFAULT_MAX_MESSAGE_SIZE);
        limits.on_frame(MaxMessageSize { max: 5000 });
        assert_eq!(limits.peer, 5000);
    }
}
