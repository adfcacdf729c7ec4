//! The endpoint's memory budget (issue #23): one bound on the memory all
//! its connections hold together, whatever their peers do.
//!
//! Each connection is charged what it holds to send and received, plus
//! the connection credit it granted its peer and the peer has not used
//! yet: a promise, since the peer may send that much without asking. So
//! received data lands in memory already charged, and the charge is taken
//! before the allocation, when the credit is granted. Before each of a
//! connection's turns the endpoint lends it the room left below the high
//! water mark (seven eighths of the budget); an update of its window that
//! does not fit is not granted, so its peer is refused by flow control,
//! not by dropping. The last eighth absorbs what is not charged ahead:
//! page and record overheads, datagrams, and what the application writes.
//!
//! What a connection holds is summed once per turn in which it was touched
//! (`flush`), never per packet; the total follows by deltas. When the
//! total passes the budget, or a connection whose application reads waits
//! for credit that does not fit, the connection charged the most (more
//! than the one waiting) is closed and what it holds dropped
//! ([`ConnectionError::MemoryBudget`](crate::ConnectionError::MemoryBudget)),
//! until the total is back under and the waiting credit fits. Finding it
//! looks at every connection, but only when one is closed.
//!
//! The total also holds what the endpoint holds as a relay (`relay`):
//! the packets it forwards, charged as they arrive and taken only into
//! the room below the high water, past each pair's smallest backlog,
//! which is charged from the moment the pair is granted. A relay packet
//! that does not fit is dropped, so the relay never closes a connection.

use quanta::Instant;
use rustc_hash::FxHashMap;

use super::Endpoint;
use crate::connection::Connection;

/// What one connection is charged, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Charge {
    /// Memory it holds, to send and received.
    held: u64,
    /// Credit granted to its peer and not used yet.
    credit: u64,
}

impl Charge {
    fn sum(self) -> u64 {
        self.held + self.credit
    }
}

/// What the endpoint's connections are charged, in total and each.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: u64,
    total: u64,
    charged: FxHashMap<u32, Charge>,
    /// What the relay holds (see `relay`): in the total, never closed.
    relay: u64,
    /// Connections whose window update waits for room.
    wanting: Vec<u32>,
    /// The connection the application was handed last: what it grants
    /// is charged at the endpoint's next step.
    lent: Option<u32>,
    /// The latest time the endpoint was given, for the closes it decides
    /// when it looks at its connections.
    now: Option<Instant>,
}

impl MemoryBudget {
    pub(crate) fn new(limit: u64) -> Self {
        Self {
            limit,
            total: 0,
            charged: FxHashMap::default(),
            relay: 0,
            wanting: Vec::new(),
            lent: None,
            now: None,
        }
    }

    /// Where credit stops being granted: seven eighths of the budget.
    fn high_water(&self) -> u64 {
        self.limit - self.limit / 8
    }

    /// Credit a connection may grant now.
    pub(crate) fn room(&self) -> u64 {
        self.high_water().saturating_sub(self.total)
    }

    /// What all connections are charged together.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Connection `index` granted `bytes` more credit.
    fn add(&mut self, index: u32, bytes: u64) {
        if bytes > 0 {
            self.charged.entry(index).or_default().credit += bytes;
            self.total += bytes;
        }
    }

    /// Connection `index` holds `held` bytes and granted `credit` its peer
    /// has not used, from now on.
    fn set(&mut self, index: u32, (held, credit): (u64, u64)) {
        let charge = Charge { held, credit };
        let old = self.charged.insert(index, charge).unwrap_or_default();
        self.total = self.total - old.sum() + charge.sum();
    }

    /// The relay holds `bytes`, from now on.
    pub(crate) fn set_relay(&mut self, bytes: u64) {
        self.total = self.total - self.relay + bytes;
        self.relay = bytes;
    }

    /// Connection `index` is gone.
    pub(crate) fn remove(&mut self, index: u32) {
        self.total -= self.charged.remove(&index).unwrap_or_default().sum();
    }

    /// The memory connection `index` holds.
    fn held(&self, index: u32) -> u64 {
        self.charged.get(&index).map_or(0, |c| c.held)
    }

    /// The connection that holds the most memory (the credit it was
    /// promised is not yet the peer's doing), if it holds more than `than`
    /// and `may_close` lets it go.
    fn greediest(&self, than: u64, may_close: impl Fn(u32) -> bool) -> Option<u32> {
        self.charged
            .iter()
            .filter(|&(&index, charge)| charge.held > than && may_close(index))
            .max_by_key(|&(&index, charge)| (charge.held, index))
            .map(|(&index, _)| index)
    }

    /// Lends `connection` the room left before its turn.
    pub(crate) fn lend(&mut self, connection: &mut Connection) {
        connection.lend_credit_room(self.room());
    }

    /// Charges what `connection` (number `index`) granted in its turn.
    pub(crate) fn settle(&mut self, index: u32, connection: &mut Connection) {
        self.add(index, connection.take_granted());
    }

    /// The application was handed connection `index`, lent the room left.
    pub(crate) fn lend_to_application(&mut self, index: u32, connection: &mut Connection) {
        self.lend(connection);
        self.lent = Some(index);
    }

    /// The endpoint was given the time.
    pub(crate) fn saw(&mut self, now: Instant) {
        self.now = Some(now);
    }

    /// Connection `index` was looked at: it is charged what it holds now,
    /// and noted if it waits for credit.
    pub(crate) fn look(&mut self, index: u32, connection: &Connection) {
        self.set(index, connection.memory_charge());
        if connection.credit_wanted() {
            self.wanting.push(index);
        }
    }
}

impl Endpoint {
    /// Charges what the connection the application was handed last
    /// granted.
    pub(super) fn settle_lent(&mut self) {
        if let Some(index) = self.budget.lent.take()
            && let Some(connection) = self.connections.get_mut(index)
        {
            self.budget.settle(index, connection);
        }
    }

    /// After the touched connections were charged: closes the greediest
    /// connection while the total is over the budget, then grants the
    /// credit reading connections wait for, closing greedier connections
    /// while it does not fit.
    pub(super) fn keep_to_budget(&mut self) {
        let Some(now) = self.budget.now else {
            return;
        };
        while self.budget.total > self.budget.limit && self.close_greediest(now, 0, None) {}
        if self.budget.wanting.is_empty() {
            return;
        }
        let mut wanting = std::mem::take(&mut self.budget.wanting);
        wanting.sort_unstable();
        wanting.dedup();
        wanting.retain(|&index| self.grant_waiting(now, index));
        self.budget.wanting = wanting;
    }

    /// Grants connection `index` the credit it waits for, closing greedier
    /// connections to make room; whether it still waits.
    fn grant_waiting(&mut self, now: Instant, index: u32) -> bool {
        loop {
            let Some(connection) = self.connections.get_mut(index) else {
                return false;
            };
            self.budget.lend(connection);
            self.budget.settle(index, connection);
            if !connection.credit_wanted() {
                // Its window update goes out with its next packet.
                self.touch(index);
                return false;
            }
            let own = self.budget.held(index);
            if !self.close_greediest(now, own, Some(index)) {
                return true;
            }
        }
    }

    /// Closes the open connection charged the most, if it is charged more
    /// than `than` and is not `spared`; false if there is none.
    fn close_greediest(&mut self, now: Instant, than: u64, spared: Option<u32>) -> bool {
        let connections = &self.connections;
        let open = |index| {
            Some(index) != spared && connections.get(index).is_some_and(|c| c.error().is_none())
        };
        let Some(index) = self.budget.greediest(than, open) else {
            return false;
        };
        let Some(connection) = self.connections.get_mut(index) else {
            return false;
        };
        connection.close_for_memory(now);
        // Closed at once, it holds next to nothing: what it held to send
        // is abandoned with what it received.
        self.budget.set(index, connection.memory_charge());
        self.stats.memory_budget_closes += 1;
        self.touch(index);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_follows_each_connections_charge_by_deltas() {
        let mut budget = MemoryBudget::new(8 << 20);
        budget.set(1, (1000, 256 * 1024));
        budget.set(2, (0, 256 * 1024));
        assert_eq!(budget.total(), 1000 + 512 * 1024);
        // A grant is charged at once, before the peer sends into it.
        budget.add(2, 4096);
        assert_eq!(budget.total(), 1000 + 512 * 1024 + 4096);
        budget.add(2, 0);
        assert_eq!(budget.total(), 1000 + 512 * 1024 + 4096);
        // Looked at again, the connection is charged what it holds now.
        budget.set(2, (4096, 256 * 1024));
        assert_eq!(budget.total(), 1000 + 4096 + 512 * 1024);
        budget.remove(1);
        budget.remove(1);
        assert_eq!(budget.total(), 4096 + 256 * 1024);
        budget.remove(2);
        assert_eq!(budget.total(), 0);
    }

    #[test]
    fn what_the_relay_holds_is_in_the_total_and_takes_the_room() {
        let mut budget = MemoryBudget::new(8 << 20);
        budget.set(1, (1 << 20, 0));
        budget.set_relay(2 << 20);
        assert_eq!(budget.total(), 3 << 20);
        assert_eq!(budget.room(), 4 << 20);
        budget.set_relay(64 * 1024);
        assert_eq!(budget.total(), (1 << 20) + 64 * 1024);
        // Never a connection to close.
        assert_eq!(budget.greediest(0, |_| true), Some(1));
        budget.remove(1);
        budget.set_relay(0);
        assert_eq!(budget.total(), 0);
    }

    #[test]
    fn credit_is_lent_up_to_seven_eighths_of_the_budget() {
        let mut budget = MemoryBudget::new(8 << 20);
        assert_eq!(budget.room(), 7 << 20);
        budget.set(1, (3 << 20, 1 << 20));
        assert_eq!(budget.room(), 3 << 20);
        budget.set(2, (4 << 20, 0));
        assert_eq!(budget.room(), 0);
        budget.set(2, (5 << 20, 0));
        assert_eq!(budget.room(), 0, "past the high water, nothing");
    }

    #[test]
    fn the_greediest_is_the_one_holding_the_most_not_the_most_promised() {
        let mut budget = MemoryBudget::new(8 << 20);
        budget.set(1, (100, 4 << 20));
        budget.set(2, (300, 0));
        budget.set(3, (200, 0));
        assert_eq!(budget.greediest(0, |_| true), Some(2));
        assert_eq!(budget.greediest(0, |i| i != 2), Some(3));
        // Only one holding more than the asker.
        assert_eq!(budget.greediest(300, |_| true), None);
        assert_eq!(budget.greediest(250, |_| true), Some(2));
        assert_eq!(budget.held(2), 300);
        assert_eq!(budget.held(9), 0);
    }
}
