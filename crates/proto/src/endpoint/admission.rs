//! Admission: who may take a place in the connection table.
//!
//! Authenticated peers can still be hostile: a few hosts that complete
//! handshakes and then sit idle would fill the table, and every honest
//! connect after them would be refused. So incoming connections are
//! counted by source address and by network (a /24 for IPv4, a /48 for
//! IPv6), and an intro past either cap is refused before any RSA work.
//! And a full table makes room for a new peer: the incoming connection
//! that carried no application data for the longest is evicted, if that
//! was long enough ago (`EndpointConfig::evict_idle_after`); one carrying
//! traffic, or one this side opened, never is.
//!
//! The cost stays off the data path: a connection notes when application
//! data last went (one store per packet that carries some), and the
//! idlest is looked for only when an intro, already past the rate limits,
//! finds the table full — a scan of the table, at most as often as the
//! intro budget allows RSA operations, each of which costs more.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use quanta::Instant;
use rustc_hash::FxHashMap;
use tern_wire::MIN_UDP_PAYLOAD;

use super::Endpoint;
use super::turn::event_key;
use crate::config::EndpointConfig;
use crate::connection::ConnectionError;
use crate::{ConnectionHandle, Transmit, TransmitLimits};

/// Closes of evicted connections waiting to be sent, at most (evictions
/// follow admitted intros, which the rate limits bound).
const MAX_QUEUED_CLOSES: usize = 1024;

/// Incoming connections by where they came from, and the closes of the
/// evicted ones.
#[derive(Debug)]
pub(super) struct Admission {
    // Addresses are the network's choice: std's keyed hasher.
    per_address: HashMap<IpAddr, usize>,
    per_prefix: HashMap<IpAddr, usize>,
    /// Each counted connection, by index, with the address it was counted
    /// under (its peer may move later; the count stays where it began).
    counted: FxHashMap<u32, IpAddr>,
    max_per_address: usize,
    max_per_prefix: usize,
    /// Close datagrams of evicted connections: destination and bytes.
    closes: VecDeque<(SocketAddr, Vec<u8>)>,
}

/// Why an intro may not become a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Its source address holds its cap of connections.
    Address,
    /// Its source network holds its cap of connections.
    Prefix,
}

impl Admission {
    pub(super) fn new(config: &EndpointConfig) -> Self {
        Self {
            per_address: HashMap::new(),
            per_prefix: HashMap::new(),
            counted: FxHashMap::default(),
            max_per_address: config.max_connections_per_address,
            max_per_prefix: config.max_connections_per_prefix,
            closes: VecDeque::new(),
        }
    }

    /// Whether one more connection from `ip` is within the caps.
    pub(super) fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        let held = |map: &HashMap<IpAddr, usize>, key| map.get(&key).copied().unwrap_or(0);
        if held(&self.per_address, ip) >= self.max_per_address {
            return Err(Refusal::Address);
        }
        if held(&self.per_prefix, prefix(ip)) >= self.max_per_prefix {
            return Err(Refusal::Prefix);
        }
        Ok(())
    }

    /// Counts the incoming connection `index`, from `ip`.
    pub(super) fn count(&mut self, index: u32, ip: IpAddr) {
        if self.counted.insert(index, ip).is_none() {
            *self.per_address.entry(ip).or_default() += 1;
            *self.per_prefix.entry(prefix(ip)).or_default() += 1;
        }
    }

    /// The connection `index` is gone: it no longer counts.
    pub(super) fn release(&mut self, index: u32) {
        let Some(ip) = self.counted.remove(&index) else {
            return;
        };
        for (map, key) in [
            (&mut self.per_address, ip),
            (&mut self.per_prefix, prefix(ip)),
        ] {
            if let Some(held) = map.get_mut(&key) {
                *held -= 1;
                if *held == 0 {
                    map.remove(&key);
                }
            }
        }
    }
}

/// The network an address belongs to for the caps: its /24 (IPv4) or /48
/// (IPv6). An IPv4-mapped IPv6 address counts as the IPv4 one.
fn prefix(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(v4.to_bits() & !0xff)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !((1u128 << 80) - 1))),
    }
}

impl Endpoint {
    /// Before any RSA work: whether the table has room for a new
    /// connection, or the index of the connection a new one would evict.
    /// `Err` when neither (counted).
    pub(super) fn room(&mut self, now: Instant) -> Result<Option<u32>, ()> {
        if self.connections.len() < self.config.max_connections {
            return Ok(None);
        }
        match self.idlest(now) {
            Some(index) => Ok(Some(index)),
            None => {
                self.stats.intros_table_full += 1;
                Err(())
            }
        }
    }

    /// The incoming, established connection that carried no application
    /// data for the longest, if that was at least `evict_idle_after` ago.
    fn idlest(&self, now: Instant) -> Option<u32> {
        let after = self.config.evict_idle_after?;
        self.connections
            .iter()
            .filter(|(index, c)| c.is_established() && !self.outgoing.contains(index))
            .map(|(index, c)| (c.last_data(), index))
            .min()
            .filter(|&(at, _)| now.saturating_duration_since(at) >= after)
            .map(|(_, index)| index)
    }

    /// Closes the connection `index` to make room: its peer is told with
    /// a Close, the application with [`ConnectionError::Evicted`], and it
    /// is freed at once.
    pub(super) fn evict(&mut self, now: Instant, index: u32) {
        let Some(mut connection) = self.connections.remove(index) else {
            return;
        };
        connection.evict(now);
        let mut buf = [0u8; MIN_UDP_PAYLOAD];
        let limits = TransmitLimits::new(1, MIN_UDP_PAYLOAD);
        if let Some(close) = connection.poll_transmit(now, limits, &mut buf)
            && self.admission.closes.len() < MAX_QUEUED_CLOSES
        {
            let bytes = buf[..close.len].to_vec();
            self.admission.closes.push_back((close.destination, bytes));
        }
        while let Some(event) = connection.poll_event() {
            if event_key(&event).is_none_or(|key| self.queued.insert((index, key))) {
                self.events.push_back((ConnectionHandle(index), event));
            }
        }
        debug_assert_eq!(connection.error(), Some(&ConnectionError::Evicted));
        self.admission.release(index);
        self.armed.remove(&index);
        self.replies.retain(|_, i| *i != index);
        self.freed.push(index);
        self.stats.connections_closed += 1;
        self.stats.connections_evicted += 1;
    }

    /// The next queued Close of an evicted connection, written into `buf`.
    pub(super) fn poll_evicted(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let (destination, close) = self.admission.closes.front()?;
        let dst = buf.get_mut(..close.len())?;
        dst.copy_from_slice(close);
        let transmit = Transmit {
            destination: *destination,
            len: close.len(),
            segment_size: None,
            ttl: None,
        };
        self.admission.closes.pop_front();
        Some(transmit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    fn admission(per_address: usize, per_prefix: usize) -> Admission {
        Admission::new(&EndpointConfig {
            max_connections_per_address: per_address,
            max_connections_per_prefix: per_prefix,
            ..EndpointConfig::default()
        })
    }

    #[test]
    fn prefixes_are_a_slash_24_and_a_slash_48() {
        assert_eq!(prefix(ip("192.0.2.77")), ip("192.0.2.0"));
        assert_eq!(prefix(ip("2001:db8:1:2:3::4")), ip("2001:db8:1::"));
        assert_eq!(prefix(ip("::ffff:192.0.2.77")), ip("192.0.2.0"));
    }

    #[test]
    fn the_caps_refuse_past_their_count_and_release_gives_room_back() {
        let mut admission = admission(2, 3);
        admission.count(1, ip("192.0.2.1"));
        admission.count(2, ip("192.0.2.1"));
        assert_eq!(admission.check(ip("192.0.2.1")), Err(Refusal::Address));
        assert_eq!(admission.check(ip("192.0.2.2")), Ok(()));
        admission.count(3, ip("192.0.2.2"));
        assert_eq!(admission.check(ip("192.0.2.3")), Err(Refusal::Prefix));
        assert_eq!(admission.check(ip("192.0.3.1")), Ok(()));
        // Counting an index twice counts it once; releasing it twice, too.
        admission.count(3, ip("192.0.2.2"));
        admission.release(1);
        admission.release(1);
        assert_eq!(admission.check(ip("192.0.2.1")), Ok(()));
        admission.release(2);
        admission.release(3);
        assert!(admission.per_address.is_empty() && admission.per_prefix.is_empty());
    }
}
