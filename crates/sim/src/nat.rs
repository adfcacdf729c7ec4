//! A NAT between a private side and the public side of the simulated
//! network, with the behaviours RFC 4787 names.
//!
//! The NAT rewrites addresses of opaque datagrams: on the way out it gives
//! the private source a public address (a mapping), on the way in it decides
//! from the mapping and its filtering rule whether a datagram may pass and to
//! which private address. It knows nothing of what the datagrams carry.
//!
//! RFC 4787 §4.3: "the NAT UDP mapping timer MUST NOT expire in less than
//! two minutes" — yet home routers commonly forget a UDP mapping after 30 s,
//! and that is what a transport behind them has to survive, so the model's
//! default is 30 s (configurable). Only outbound datagrams refresh a mapping
//! (RFC 4787 REQ-6: "The NAT mapping Refresh Direction MUST have a 'NAT
//! Outbound refresh behavior' of 'True'"; inbound refresh is optional and
//! left out, the harder case for a keep-alive).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::time::Duration;

use quanta::Instant;
use rand_core_010::Rng;
use rand_pcg::Pcg64Mcg;

/// When a NAT reuses a mapping (RFC 4787 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// "The NAT reuses the port mapping for subsequent packets sent from the
    /// same internal IP address and port (X:x) to any external IP address
    /// and port."
    EndpointIndependent,
    /// "The NAT reuses the port mapping for subsequent packets sent from the
    /// same internal IP address and port (X:x) to the same external IP
    /// address, regardless of the external port."
    AddressDependent,
    /// "The NAT reuses the port mapping for subsequent packets sent from the
    /// same internal IP address and port (X:x) to the same external IP
    /// address and port while the mapping is still active." With random
    /// ports this is the "symmetric" NAT.
    AddressAndPortDependent,
}

/// Which external endpoints may send through a mapping (RFC 4787 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Filtering {
    /// "The NAT filters out only packets not destined to the internal
    /// address and port X:x, regardless of the external IP address and port
    /// source (Z:z)." ("Full cone".)
    EndpointIndependent,
    /// "The NAT filters out packets not destined to the internal address
    /// X:x. Additionally, the NAT will filter out packets from Y:y destined
    /// for the internal endpoint X:x if X:x has not sent packets to Y:any
    /// previously." ("Restricted cone".)
    AddressDependent,
    /// "This is similar to the previous behavior, except that the external
    /// port is also relevant." ("Port-restricted cone".)
    AddressAndPortDependent,
}

/// How a NAT picks the public port of a new mapping (RFC 4787 §4.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortAllocation {
    /// Keeps the private port when it is free in the range (as Linux's
    /// `masquerade` does), else the next free one.
    Preserving,
    /// The next free port of the range after the last one given.
    Sequential,
    /// A free port of the range drawn at random (seeded by the simulation).
    Random,
}

/// How a NAT behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NatConfig {
    /// When a mapping is reused.
    pub mapping: Mapping,
    /// Which external endpoints may use a mapping.
    pub filtering: Filtering,
    /// How long a mapping, and each external endpoint's permission through
    /// it, lasts after the last outbound datagram that used it.
    pub mapping_timeout: Duration,
    /// How new public ports are chosen.
    pub ports: PortAllocation,
    /// The public ports the NAT gives out.
    pub port_range: RangeInclusive<u16>,
    /// Whether a private host can reach another through the NAT's public
    /// address (RFC 4787 §6). Off by default: many NATs lack it.
    pub hairpinning: bool,
}

/// The mapping timeout of the presets: a common home router's.
pub const DEFAULT_MAPPING_TIMEOUT: Duration = Duration::from_secs(30);

impl NatConfig {
    /// A NAT with these behaviours, sequential ports from 1024, a 30 s
    /// mapping timeout and no hairpinning.
    pub fn new(mapping: Mapping, filtering: Filtering) -> Self {
        Self {
            mapping,
            filtering,
            mapping_timeout: DEFAULT_MAPPING_TIMEOUT,
            ports: PortAllocation::Sequential,
            port_range: 1024..=65535,
            hairpinning: false,
        }
    }

    /// Endpoint-independent mapping and filtering.
    pub fn full_cone() -> Self {
        Self::new(Mapping::EndpointIndependent, Filtering::EndpointIndependent)
    }

    /// Endpoint-independent mapping, address-dependent filtering.
    pub fn restricted_cone() -> Self {
        Self::new(Mapping::EndpointIndependent, Filtering::AddressDependent)
    }

    /// Endpoint-independent mapping, address-and-port-dependent filtering.
    pub fn port_restricted_cone() -> Self {
        Self::new(
            Mapping::EndpointIndependent,
            Filtering::AddressAndPortDependent,
        )
    }

    /// Address-and-port-dependent mapping and filtering with random ports:
    /// a new public port for every destination.
    pub fn symmetric() -> Self {
        Self::new(
            Mapping::AddressAndPortDependent,
            Filtering::AddressAndPortDependent,
        )
        .with_ports(PortAllocation::Random)
    }

    /// The same with this mapping timeout.
    pub fn with_mapping_timeout(self, mapping_timeout: Duration) -> Self {
        Self {
            mapping_timeout,
            ..self
        }
    }

    /// The same with this port allocation.
    pub fn with_ports(self, ports: PortAllocation) -> Self {
        Self { ports, ..self }
    }

    /// The same with public ports from this range only.
    pub fn with_port_range(self, port_range: RangeInclusive<u16>) -> Self {
        Self { port_range, ..self }
    }

    /// The same with hairpinning on or off.
    pub fn with_hairpinning(self, hairpinning: bool) -> Self {
        Self {
            hairpinning,
            ..self
        }
    }
}

/// What a NAT did, counted since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NatStats {
    /// Mappings made.
    pub mappings_created: u64,
    /// Mappings forgotten after their timeout.
    pub mappings_expired: u64,
    /// Datagrams translated on the way out.
    pub outbound: u64,
    /// Datagrams let in to the private side.
    pub inbound: u64,
    /// Datagrams refused on the way in: no mapping, or the filter said no.
    pub filtered: u64,
    /// Datagrams dropped because every port of the range was in use.
    pub ports_exhausted: u64,
}

/// The part of a destination a mapping is reused for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Destination {
    Any,
    Ip(IpAddr),
    Endpoint(SocketAddr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    private: SocketAddr,
    destination: Destination,
}

#[derive(Debug)]
struct Entry {
    port: u16,
    /// External endpoint the private side sent to → when that permission
    /// lapses. The mapping lives while any permission does.
    permissions: HashMap<SocketAddr, Instant>,
}

/// One NAT's state: its mappings and the ports they hold.
#[derive(Debug)]
pub struct Nat {
    config: NatConfig,
    public_ip: IpAddr,
    rng: Pcg64Mcg,
    /// Where sequential allocation looks next, as an offset in the range.
    next_offset: u32,
    mappings: HashMap<Key, Entry>,
    by_port: HashMap<u16, Key>,
    /// The earliest moment a permission may lapse: nothing to sweep before.
    next_expiry: Option<Instant>,
    stats: NatStats,
}

impl Nat {
    /// A NAT whose public side has the address `public_ip`; `rng` draws
    /// its random ports.
    pub fn new(config: NatConfig, public_ip: IpAddr, rng: Pcg64Mcg) -> Self {
        Self {
            config,
            public_ip,
            rng,
            next_offset: 0,
            mappings: HashMap::new(),
            by_port: HashMap::new(),
            next_expiry: None,
            stats: NatStats::default(),
        }
    }

    /// The NAT's public address.
    pub fn public_ip(&self) -> IpAddr {
        self.public_ip
    }

    /// How it behaves.
    pub fn config(&self) -> &NatConfig {
        &self.config
    }

    /// What it did so far.
    pub fn stats(&self) -> NatStats {
        self.stats
    }

    /// Mappings alive at `now`.
    pub fn mapping_count(&mut self, now: Instant) -> usize {
        self.expire(now);
        self.mappings.len()
    }

    /// The public address a datagram from `private` to `remote` would leave
    /// from at `now`, if a mapping for it is alive.
    pub fn mapped(
        &mut self,
        now: Instant,
        private: SocketAddr,
        remote: SocketAddr,
    ) -> Option<SocketAddr> {
        self.expire(now);
        let entry = self.mappings.get(&self.key(private, remote))?;
        Some(SocketAddr::new(self.public_ip, entry.port))
    }

    /// A datagram from `private` to `remote` leaves at `now`: the public
    /// address it leaves from, making or refreshing its mapping. `None`
    /// when a new mapping is needed and no port is free.
    pub fn outbound(
        &mut self,
        now: Instant,
        private: SocketAddr,
        remote: SocketAddr,
    ) -> Option<SocketAddr> {
        self.expire(now);
        let key = self.key(private, remote);
        let lapses = now + self.config.mapping_timeout;
        let port = match self.mappings.get_mut(&key) {
            Some(entry) => {
                entry.permissions.insert(remote, lapses);
                entry.port
            }
            None => {
                let Some(port) = self.allocate(private.port()) else {
                    self.stats.ports_exhausted += 1;
                    return None;
                };
                self.mappings.insert(
                    key,
                    Entry {
                        port,
                        permissions: HashMap::from([(remote, lapses)]),
                    },
                );
                self.by_port.insert(port, key);
                self.stats.mappings_created += 1;
                port
            }
        };
        self.next_expiry = Some(self.next_expiry.map_or(lapses, |t| t.min(lapses)));
        self.stats.outbound += 1;
        Some(SocketAddr::new(self.public_ip, port))
    }

    /// A datagram from `remote` to the NAT's public `port` arrives at
    /// `now`: the private address it goes on to, or `None` when no mapping
    /// holds the port or the filtering rule refuses `remote`.
    pub fn inbound(&mut self, now: Instant, port: u16, remote: SocketAddr) -> Option<SocketAddr> {
        self.expire(now);
        let allowed = self.by_port.get(&port).and_then(|key| {
            let entry = self.mappings.get(key)?;
            let permitted = match self.config.filtering {
                Filtering::EndpointIndependent => true,
                Filtering::AddressDependent => {
                    entry.permissions.keys().any(|r| r.ip() == remote.ip())
                }
                Filtering::AddressAndPortDependent => entry.permissions.contains_key(&remote),
            };
            permitted.then_some(key.private)
        });
        match allowed {
            Some(_) => self.stats.inbound += 1,
            None => self.stats.filtered += 1,
        }
        allowed
    }

    fn key(&self, private: SocketAddr, remote: SocketAddr) -> Key {
        let destination = match self.config.mapping {
            Mapping::EndpointIndependent => Destination::Any,
            Mapping::AddressDependent => Destination::Ip(remote.ip()),
            Mapping::AddressAndPortDependent => Destination::Endpoint(remote),
        };
        Key {
            private,
            destination,
        }
    }

    /// Forgets permissions that lapsed by `now`, and mappings left with none.
    fn expire(&mut self, now: Instant) {
        if self.next_expiry.is_none_or(|t| now < t) {
            return;
        }
        let mut next: Option<Instant> = None;
        let mut gone = Vec::new();
        for (key, entry) in &mut self.mappings {
            entry.permissions.retain(|_, lapses| *lapses > now);
            match entry.permissions.values().min() {
                None => gone.push((*key, entry.port)),
                Some(&soonest) => next = Some(next.map_or(soonest, |t| t.min(soonest))),
            }
        }
        for (key, port) in gone {
            self.mappings.remove(&key);
            self.by_port.remove(&port);
            self.stats.mappings_expired += 1;
        }
        self.next_expiry = next;
    }

    /// A free public port for a new mapping from private port `wanted`.
    fn allocate(&mut self, wanted: u16) -> Option<u16> {
        let range = self.config.port_range.clone();
        let (first, last) = (u32::from(*range.start()), u32::from(*range.end()));
        let size = last.checked_sub(first)? + 1;
        if self.by_port.len() as u32 >= size {
            return None;
        }
        let free = |port: u32| -> bool { !self.by_port.contains_key(&(port as u16)) };
        let start = match self.config.ports {
            PortAllocation::Preserving if range.contains(&wanted) && free(u32::from(wanted)) => {
                return Some(wanted);
            }
            PortAllocation::Preserving | PortAllocation::Sequential => self.next_offset % size,
            PortAllocation::Random => (self.rng.next_u64() % u64::from(size)) as u32,
        };
        // A free port exists (checked above): walk from `start` to it.
        let port = (0..size)
            .map(|step| first + (start + step) % size)
            .find(|&port| free(port))? as u16;
        if self.config.ports != PortAllocation::Random {
            self.next_offset = u32::from(port) - first + 1;
        }
        Some(port)
    }
}

#[cfg(test)]
mod tests;
