//! What a sent packet carried, kept with it in the sent-packet tracker
//! until it is acknowledged or declared lost: enough to send the same
//! information again in new frames, never the packet itself.
//!
//! A record is a fixed-size value (no allocation per packet): up to
//! [`CARRIED_MAX`] retransmittable items. A packet that would carry more
//! ends there, and the rest goes in the next packet.

use crate::{Direction, StreamId};

/// Items one packet record holds.
pub(crate) const CARRIED_MAX: usize = 6;

/// One piece of retransmittable information a packet carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carried {
    /// Stream bytes `offset..offset + len`, and the fin if set.
    Stream {
        /// The stream.
        id: StreamId,
        /// First byte's offset.
        offset: u64,
        /// Bytes carried.
        len: u32,
        /// Whether the stream's end came with them.
        fin: bool,
    },
    /// A whole message, by number.
    Message(u64),
    /// The connection's flow-control limit (resent as its current value).
    MaxData,
    /// A stream's flow-control limit (resent as its current value).
    MaxStreamData(StreamId),
    /// How many streams of a direction the peer may open.
    MaxStreams(Direction),
    /// A stream's abandonment, with its final size.
    ResetStream(StreamId),
    /// A request that the peer stop sending on a stream.
    StopSending(StreamId),
    /// The request for how often the peer acknowledges (resent as the
    /// current request).
    AckFrequency,
    /// A path MTU probe of this many bytes: its loss is no congestion.
    MtuProbe(u32),
    /// A path challenge (a lost one is not resent: the path's own timer
    /// sends a fresh one).
    PathChallenge,
    /// A ping: nothing to resend.
    Ping,
    /// The initiator's proof of identity (resent as the same proof).
    Identity,
    /// A report of the peer's address, by sequence (resent while current).
    ObservedAddress(u64),
    /// This side's message limit (resent as the same limit).
    MaxMessageSize,
    /// A rendezvous frame, by its id in `signals` (resent as the same frame).
    Signal(u64),
}

impl Carried {
    /// Whether losing it calls for sending something again.
    pub(crate) fn is_retransmittable(&self) -> bool {
        !matches!(
            self,
            Carried::MtuProbe(_) | Carried::PathChallenge | Carried::Ping
        )
    }
}

/// Everything retransmittable one packet carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CarriedRecord {
    items: [Option<Carried>; CARRIED_MAX],
    len: u8,
    /// The largest packet number an ACK frame in the packet acknowledged:
    /// once the packet is acknowledged, the peer knows of them all.
    pub(crate) ack_largest: Option<u64>,
}

impl CarriedRecord {
    /// Nothing carried yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds `item`; false when the record is full (the packet ends there).
    pub(crate) fn push(&mut self, item: Carried) -> bool {
        let Some(slot) = self.items.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = Some(item);
        self.len += 1;
        true
    }

    /// Whether another item fits.
    pub(crate) fn is_full(&self) -> bool {
        usize::from(self.len) == CARRIED_MAX
    }

    /// Whether nothing was carried.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The items, in the order they were added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Carried> + '_ {
        self.items.iter().flatten().copied()
    }

    /// The probe size, if the packet was an MTU probe.
    pub(crate) fn mtu_probe(&self) -> Option<u32> {
        self.iter().find_map(|c| match c {
            Carried::MtuProbe(size) => Some(size),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_small_fixed_and_refuses_past_its_capacity() {
        // Kept per packet in flight: 10 000 in flight cost well under 2 MiB.
        assert!(
            size_of::<CarriedRecord>() <= 200,
            "{}",
            size_of::<CarriedRecord>()
        );
        let mut record = CarriedRecord::new();
        assert!(record.is_empty());
        for i in 0..CARRIED_MAX as u64 {
            assert!(record.push(Carried::Message(i)));
        }
        assert!(record.is_full());
        assert!(!record.push(Carried::Ping));
        assert_eq!(record.iter().count(), CARRIED_MAX);
        let mut probe = CarriedRecord::new();
        probe.push(Carried::MtuProbe(1452));
        assert_eq!(probe.mtu_probe(), Some(1452));
        assert!(!Carried::MtuProbe(1452).is_retransmittable());
        assert!(Carried::MaxData.is_retransmittable());
    }
}
