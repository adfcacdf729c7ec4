//! Observed addresses: each side tells the other the address it sees the
//! other's packets come from (the ObservedAddress frame), so a peer behind
//! a NAT learns its public address and port — the candidate it needs before
//! any rendezvous can introduce it to another peer.
//!
//! The report goes once the handshake is done and again whenever the
//! peer's address changes (a NAT rebinding, a new mapping after the old one
//! expired), each new address under a sequence one higher. A lost report is
//! sent again only while it still reports the current address; a report
//! that arrives with a sequence no higher than the last one kept is an old
//! one, overtaken, and ignored.

use std::net::SocketAddr;

use tern_wire::ObservedAddress;

/// What this side told the peer, and what the peer told it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObservedAddresses {
    /// The peer's address as last reported to it, and that report's sequence.
    told: Option<(u64, SocketAddr)>,
    /// Whether the report in `told` is still to be sent (new, or lost).
    due: bool,
    /// The newest report of this side's own address, from the peer.
    mine: Option<(u64, SocketAddr)>,
}

impl ObservedAddresses {
    /// The peer's packets come from `remote` now: a new address is due to
    /// be reported, under the next sequence.
    pub(crate) fn on_peer_address(&mut self, remote: SocketAddr) {
        if self.told.is_some_and(|(_, told)| told == remote) {
            return;
        }
        let sequence = self.told.map_or(1, |(sequence, _)| sequence + 1);
        self.told = Some((sequence, remote));
        self.due = true;
    }

    /// The report to send, if one is due.
    pub(crate) fn due(&self) -> Option<ObservedAddress> {
        let (sequence, address) = self.told.filter(|_| self.due)?;
        Some(ObservedAddress { sequence, address })
    }

    /// The due report went out in a packet.
    pub(crate) fn on_sent(&mut self) {
        self.due = false;
    }

    /// The packet carrying report `sequence` was lost: it goes again if it
    /// still reports the current address.
    pub(crate) fn on_lost(&mut self, sequence: u64) {
        if self.told.is_some_and(|(current, _)| current == sequence) {
            self.due = true;
        }
    }

    /// The peer reported this side's address; true when it is news (a
    /// newer report of another address).
    pub(crate) fn on_report(&mut self, report: &ObservedAddress) -> bool {
        if self
            .mine
            .is_some_and(|(sequence, _)| report.sequence <= sequence)
        {
            return false;
        }
        let changed = self
            .mine
            .is_none_or(|(_, address)| address != report.address);
        self.mine = Some((report.sequence, report.address));
        changed
    }

    /// This side's address as the peer last reported it.
    pub(crate) fn mine(&self) -> Option<SocketAddr> {
        self.mine.map(|(_, address)| address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn a_report_is_due_once_per_new_address_with_a_growing_sequence() {
        let mut observed = ObservedAddresses::default();
        assert_eq!(observed.due(), None);
        observed.on_peer_address(addr("203.0.113.7:4000"));
        let first = observed.due().expect("due");
        assert_eq!(
            (first.sequence, first.address),
            (1, addr("203.0.113.7:4000"))
        );
        observed.on_sent();
        observed.on_peer_address(addr("203.0.113.7:4000"));
        assert_eq!(
            observed.due(),
            None,
            "the same address is not reported again"
        );
        observed.on_peer_address(addr("203.0.113.7:4001"));
        let second = observed.due().expect("due");
        assert_eq!(
            (second.sequence, second.address),
            (2, addr("203.0.113.7:4001"))
        );
    }

    #[test]
    fn a_lost_report_goes_again_only_while_it_is_current() {
        let mut observed = ObservedAddresses::default();
        observed.on_peer_address(addr("203.0.113.7:4000"));
        observed.on_sent();
        observed.on_lost(1);
        assert_eq!(observed.due().map(|r| r.sequence), Some(1));
        observed.on_sent();
        observed.on_peer_address(addr("203.0.113.7:4001"));
        observed.on_sent();
        observed.on_lost(1);
        assert_eq!(observed.due(), None, "report 1 is out of date");
    }

    #[test]
    fn an_older_or_repeated_report_is_ignored() {
        let mut observed = ObservedAddresses::default();
        let report = |sequence, address: &str| ObservedAddress {
            sequence,
            address: addr(address),
        };
        assert!(observed.on_report(&report(2, "203.0.113.7:4001")));
        assert!(!observed.on_report(&report(1, "203.0.113.7:4000")));
        assert!(!observed.on_report(&report(2, "203.0.113.7:4001")));
        assert_eq!(observed.mine(), Some(addr("203.0.113.7:4001")));
        assert!(
            !observed.on_report(&report(3, "203.0.113.7:4001")),
            "newer, but no news"
        );
        assert!(observed.on_report(&report(4, "203.0.113.7:4002")));
        assert_eq!(observed.mine(), Some(addr("203.0.113.7:4002")));
    }
}
