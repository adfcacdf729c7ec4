//! The application's unreliable datagrams: the calls that queue them (the
//! queue is [`DatagramQueue`](super::datagram_queue::DatagramQueue)) and
//! take those that arrived.

use bytes::Bytes;

#[cfg(doc)]
use super::Event;
use super::{Connection, SendError, small_message_limit};

impl Connection {
    /// Queues an unreliable datagram: sent once if it fits a packet, never
    /// re-sent. When `datagram_send_queue` are already waiting, the oldest
    /// is dropped (and counted) for it.
    pub fn send_datagram(&mut self, datagram: Bytes) -> Result<(), SendError> {
        if !self.is_open_for_data() {
            return Err(SendError::Closed);
        }
        if datagram.len() > small_message_limit() {
            self.stats.rare().datagrams_dropped += 1;
            return Err(SendError::TooLarge(datagram.len()));
        }
        if self.datagrams_out.push(datagram) {
            self.stats.rare().datagrams_dropped += 1;
            self.stats.rare().datagrams_send_queue_dropped += 1;
        }
        Ok(())
    }

    /// Queues an unreliable datagram like [`send_datagram`](Self::send_datagram),
    /// but gives it back (as [`SendError::Blocked`]) rather than drop the
    /// oldest when `datagram_send_queue` are already waiting;
    /// [`Event::DatagramsWritable`] follows once one has left.
    pub fn try_send_datagram(&mut self, datagram: Bytes) -> Result<(), SendError> {
        if self.is_open_for_data() && self.datagrams_out.is_full() {
            self.datagrams_out.want_room();
            return Err(SendError::Blocked(datagram));
        }
        self.send_datagram(datagram)
    }

    /// How many datagrams [`send_datagram`](Self::send_datagram) queues
    /// now without dropping the oldest (none once the connection no longer
    /// sends).
    pub fn datagram_send_room(&self) -> usize {
        if !self.is_open_for_data() {
            return 0;
        }
        self.datagrams_out.room()
    }

    /// The largest datagram [`send_datagram`](Self::send_datagram) takes:
    /// what one packet carries on any path (its 1 200-byte minimum).
    pub fn max_datagram_size(&self) -> usize {
        small_message_limit()
    }

    /// The next unreliable datagram, if one arrived.
    pub fn recv_datagram(&mut self) -> Option<Bytes> {
        self.datagrams_in.pop()
    }
}
