//! A move to a new path: the packets sent on the old one stay tracked
//! (their frames are still re-sent when they are lost, and their ACKs
//! still resolve them) but stop counting toward bytes in flight.

use super::{SentPackets, Slot};

impl<T> SentPackets<T> {
    /// Takes every unacknowledged packet out of bytes in flight.
    ///
    /// RFC 9000 §9.4: "Packets sent on the old path MUST NOT contribute to
    /// congestion control or RTT estimation for the new path." The new
    /// path's congestion window starts again from its initial value; were
    /// the old path's packets still counted against it, a window's worth of
    /// them would hold it shut until each was acknowledged or declared lost.
    pub fn leave_flight(&mut self) {
        for slot in &mut self.slots {
            if let Slot::Unacked(packet) = slot {
                packet.in_flight = false;
            }
        }
        self.bytes_in_flight = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::super::SentPacket;
    use super::*;

    fn packet(time_sent: quanta::Instant, size: u32) -> SentPacket<()> {
        SentPacket {
            time_sent,
            size,
            ack_eliciting: true,
            in_flight: true,
            payload: (),
        }
    }

    #[test]
    fn packets_left_on_the_old_path_stay_tracked_but_leave_flight() {
        let (clock, _) = quanta::Clock::mock();
        let mut sent = SentPackets::new();
        for pn in 0..4 {
            sent.push(pn, packet(clock.now(), 1200)).expect("in order");
        }
        assert_eq!(sent.bytes_in_flight(), 4800);
        sent.leave_flight();
        assert_eq!(sent.bytes_in_flight(), 0);
        assert_eq!(sent.unacked_count(), 4, "still tracked for loss and ACKs");
        sent.invariants().expect("consistent");

        // A packet sent on the new path counts; an old one's ACK takes
        // nothing from it.
        sent.push(4, packet(clock.now(), 1000)).expect("in order");
        let mut acked = Vec::new();
        sent.ack_range(0..=1, |pn, _| acked.push(pn));
        assert_eq!(acked, [0, 1]);
        assert_eq!(sent.bytes_in_flight(), 1000);
        sent.invariants().expect("consistent");
    }
}
