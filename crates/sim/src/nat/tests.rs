use std::sync::Arc;

use proptest::prelude::*;
use quanta::{Clock, Mock};
use rand_core_010::SeedableRng;

use super::*;

const PUBLIC: &str = "203.0.113.1";

struct Fixture {
    clock: Clock,
    mock: Arc<Mock>,
    nat: Nat,
}

impl Fixture {
    fn new(config: NatConfig) -> Self {
        let (clock, mock) = Clock::mock();
        mock.increment(Duration::from_secs(1));
        let nat = Nat::new(config, ip(PUBLIC), Pcg64Mcg::seed_from_u64(7));
        Self { clock, mock, nat }
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn wait(&self, length: Duration) {
        self.mock.increment(length);
    }

    fn out(&mut self, private: &str, remote: &str) -> SocketAddr {
        let now = self.now();
        self.nat
            .outbound(now, addr(private), addr(remote))
            .expect("a free port")
    }

    fn arrive(&mut self, public: SocketAddr, remote: &str) -> Option<SocketAddr> {
        let now = self.now();
        self.nat.inbound(now, public.port(), addr(remote))
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

const HOST: &str = "10.0.0.2:5000";
const SERVER: &str = "198.51.100.7:443";
const SERVER_OTHER_PORT: &str = "198.51.100.7:8443";
const STRANGER: &str = "192.0.2.9:443";

#[test]
fn endpoint_independent_mapping_reuses_one_public_address_for_every_destination() {
    let mut f = Fixture::new(NatConfig::port_restricted_cone());
    let first = f.out(HOST, SERVER);
    assert_eq!(first.ip(), ip(PUBLIC));
    assert_eq!(f.out(HOST, SERVER_OTHER_PORT), first);
    assert_eq!(f.out(HOST, STRANGER), first);
    assert_eq!(f.nat.stats().mappings_created, 1);
    assert_ne!(
        f.out("10.0.0.3:5000", SERVER),
        first,
        "another host gets its own port"
    );
}

#[test]
fn address_dependent_mapping_reuses_a_mapping_only_toward_the_same_address() {
    let mut f = Fixture::new(NatConfig::new(
        Mapping::AddressDependent,
        Filtering::AddressDependent,
    ));
    let first = f.out(HOST, SERVER);
    assert_eq!(f.out(HOST, SERVER_OTHER_PORT), first);
    assert_ne!(f.out(HOST, STRANGER), first);
    assert_eq!(f.nat.stats().mappings_created, 2);
}

#[test]
fn a_symmetric_nat_gives_every_destination_its_own_random_port() {
    let mut f = Fixture::new(NatConfig::symmetric());
    let first = f.out(HOST, SERVER);
    let second = f.out(HOST, SERVER_OTHER_PORT);
    let third = f.out(HOST, STRANGER);
    assert_ne!(first, second);
    assert_ne!(second, third);
    assert_ne!(first, third);
    assert_eq!(
        f.out(HOST, SERVER),
        first,
        "reused toward the same endpoint"
    );
    assert_eq!(f.nat.stats().mappings_created, 3);
    let spread = second
        .port()
        .abs_diff(first.port())
        .max(third.port().abs_diff(second.port()));
    assert!(
        spread > 3,
        "random, not sequential: {first} {second} {third}"
    );
}

#[test]
fn the_same_seed_draws_the_same_random_ports() {
    let ports = || {
        let mut f = Fixture::new(NatConfig::symmetric());
        [SERVER, SERVER_OTHER_PORT, STRANGER].map(|remote| f.out(HOST, remote))
    };
    assert_eq!(ports(), ports());
}

#[test]
fn full_cone_filtering_lets_anyone_in_through_a_mapping() {
    let mut f = Fixture::new(NatConfig::full_cone());
    let public = f.out(HOST, SERVER);
    assert_eq!(f.arrive(public, STRANGER), Some(addr(HOST)));
    assert_eq!(f.arrive(public, SERVER), Some(addr(HOST)));
}

#[test]
fn restricted_cone_filtering_admits_any_port_of_a_contacted_address_only() {
    let mut f = Fixture::new(NatConfig::restricted_cone());
    let public = f.out(HOST, SERVER);
    assert_eq!(f.arrive(public, SERVER_OTHER_PORT), Some(addr(HOST)));
    assert_eq!(f.arrive(public, STRANGER), None);
    assert_eq!(f.nat.stats().filtered, 1);
}

#[test]
fn port_restricted_filtering_admits_only_the_contacted_endpoint() {
    let mut f = Fixture::new(NatConfig::port_restricted_cone());
    let public = f.out(HOST, SERVER);
    assert_eq!(f.arrive(public, SERVER), Some(addr(HOST)));
    assert_eq!(f.arrive(public, SERVER_OTHER_PORT), None);
    assert_eq!(f.arrive(public, STRANGER), None);
    f.out(HOST, STRANGER);
    assert_eq!(
        f.arrive(public, STRANGER),
        Some(addr(HOST)),
        "after the host sent to it"
    );
}

#[test]
fn nothing_comes_in_on_a_port_without_a_mapping() {
    let mut f = Fixture::new(NatConfig::full_cone());
    let public = f.out(HOST, SERVER);
    let other = SocketAddr::new(public.ip(), public.port().wrapping_add(1));
    assert_eq!(f.arrive(other, SERVER), None);
}

#[test]
fn a_mapping_expires_after_its_timeout_without_outbound_traffic() {
    let timeout = Duration::from_secs(30);
    let mut f = Fixture::new(NatConfig::full_cone().with_mapping_timeout(timeout));
    let public = f.out(HOST, SERVER);
    f.wait(timeout - Duration::from_millis(1));
    assert_eq!(f.arrive(public, SERVER), Some(addr(HOST)));
    f.wait(Duration::from_millis(1));
    assert_eq!(
        f.arrive(public, SERVER),
        None,
        "inbound traffic did not refresh it"
    );
    assert_eq!(f.nat.stats().mappings_expired, 1);
    assert_eq!(f.nat.mapping_count(f.now()), 0);
}

#[test]
fn outbound_traffic_keeps_a_mapping_alive_past_its_timeout() {
    let mut f = Fixture::new(NatConfig::port_restricted_cone());
    let public = f.out(HOST, SERVER);
    for _ in 0..10 {
        f.wait(Duration::from_secs(20));
        assert_eq!(f.out(HOST, SERVER), public);
    }
    assert_eq!(f.arrive(public, SERVER), Some(addr(HOST)));
    assert_eq!(f.nat.stats().mappings_created, 1);
}

#[test]
fn a_permission_lapses_on_its_own_while_the_mapping_lives_on() {
    let mut f = Fixture::new(NatConfig::port_restricted_cone());
    let public = f.out(HOST, STRANGER);
    for _ in 0..3 {
        f.wait(Duration::from_secs(20));
        f.out(HOST, SERVER);
    }
    assert_eq!(f.arrive(public, SERVER), Some(addr(HOST)));
    assert_eq!(f.arrive(public, STRANGER), None, "not sent to for 60 s");
}

#[test]
fn after_expiry_the_host_gets_a_new_public_port() {
    let mut f = Fixture::new(NatConfig::port_restricted_cone());
    let before = f.out(HOST, SERVER);
    f.wait(DEFAULT_MAPPING_TIMEOUT);
    let after = f.out(HOST, SERVER);
    assert_ne!(before, after);
    assert_eq!(f.arrive(before, SERVER), None);
    assert_eq!(f.arrive(after, SERVER), Some(addr(HOST)));
}

#[test]
fn sequential_allocation_counts_up_from_the_start_of_the_range_and_wraps() {
    let mut f = Fixture::new(
        NatConfig::symmetric()
            .with_ports(PortAllocation::Sequential)
            .with_port_range(2000..=2002),
    );
    let ports: Vec<u16> = [SERVER, SERVER_OTHER_PORT, STRANGER]
        .map(|remote| f.out(HOST, remote).port())
        .into();
    assert_eq!(ports, [2000, 2001, 2002]);
    f.wait(DEFAULT_MAPPING_TIMEOUT);
    assert_eq!(f.out(HOST, SERVER).port(), 2000, "wraps to the freed start");
}

#[test]
fn preserving_allocation_keeps_the_private_port_while_it_is_free() {
    let mut f =
        Fixture::new(NatConfig::port_restricted_cone().with_ports(PortAllocation::Preserving));
    assert_eq!(f.out(HOST, SERVER).port(), 5000);
    let other = f.out("10.0.0.3:5000", SERVER);
    assert_ne!(other.port(), 5000, "taken by the first host");
}

#[test]
fn a_nat_out_of_ports_drops_new_flows_and_counts_them() {
    let mut f = Fixture::new(NatConfig::symmetric().with_port_range(3000..=3001));
    f.out(HOST, SERVER);
    f.out(HOST, SERVER_OTHER_PORT);
    let now = f.now();
    assert_eq!(f.nat.outbound(now, addr(HOST), addr(STRANGER)), None);
    assert_eq!(f.nat.stats().ports_exhausted, 1);
    assert!(
        f.nat.outbound(now, addr(HOST), addr(SERVER)).is_some(),
        "old flows go on"
    );
}

/// One step of a NAT's life in the property test.
#[derive(Debug, Clone)]
enum Op {
    Out { host: u8, remote: (u8, u16) },
    In { port_pick: u8, remote: (u8, u16) },
    Wait { secs: u8 },
}

fn remote_addr((host, port): (u8, u16)) -> SocketAddr {
    SocketAddr::new(IpAddr::from([198, 51, 100, host % 3]), 1000 + port % 3)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u8>(), any::<(u8, u16)>()).prop_map(|(host, remote)| Op::Out { host, remote }),
        (any::<u8>(), any::<(u8, u16)>())
            .prop_map(|(port_pick, remote)| Op::In { port_pick, remote }),
        (0u8..40).prop_map(|secs| Op::Wait { secs }),
    ]
}

fn behaviour() -> impl Strategy<Value = NatConfig> {
    let mapping = prop_oneof![
        Just(Mapping::EndpointIndependent),
        Just(Mapping::AddressDependent),
        Just(Mapping::AddressAndPortDependent),
    ];
    let filtering = prop_oneof![
        Just(Filtering::EndpointIndependent),
        Just(Filtering::AddressDependent),
        Just(Filtering::AddressAndPortDependent),
    ];
    let ports = prop_oneof![
        Just(PortAllocation::Preserving),
        Just(PortAllocation::Sequential),
        Just(PortAllocation::Random),
    ];
    (mapping, filtering, ports).prop_map(|(m, f, p)| {
        NatConfig::new(m, f)
            .with_ports(p)
            .with_port_range(4000..=4007)
            .with_mapping_timeout(Duration::from_secs(30))
    })
}

proptest! {
    /// Whatever the traffic, a datagram reaches private host X only if X
    /// sent, within the mapping timeout, a datagram that left from the very
    /// public address it came in on, to an endpoint the filtering rule
    /// matches with its sender.
    #[test]
    fn a_nat_never_lets_in_what_its_filter_refuses(config in behaviour(), ops in prop::collection::vec(op(), 1..120)) {
        let mut f = Fixture::new(config.clone());
        // (when, private, public address it left from, remote) of every outbound.
        let mut sent: Vec<(Instant, SocketAddr, SocketAddr, SocketAddr)> = Vec::new();
        let mut ports_seen: Vec<u16> = Vec::new();
        for op in ops {
            match op {
                Op::Wait { secs } => f.wait(Duration::from_secs(u64::from(secs))),
                Op::Out { host, remote } => {
                    let private = SocketAddr::new(IpAddr::from([10, 0, 0, host % 3]), 5000);
                    let remote = remote_addr(remote);
                    let now = f.now();
                    if let Some(public) = f.nat.outbound(now, private, remote) {
                        sent.push((now, private, public, remote));
                        ports_seen.push(public.port());
                    }
                }
                Op::In { port_pick, remote } => {
                    let remote = remote_addr(remote);
                    let port = 4000 + u16::from(port_pick % 9);
                    let now = f.now();
                    if let Some(private) = f.nat.inbound(now, port, remote) {
                        let justified = sent.iter().any(|&(at, from, public, to)| {
                            from == private
                                && public.port() == port
                                && now.saturating_duration_since(at) < config.mapping_timeout
                                && match config.filtering {
                                    Filtering::EndpointIndependent => true,
                                    Filtering::AddressDependent => to.ip() == remote.ip(),
                                    Filtering::AddressAndPortDependent => to == remote,
                                }
                        });
                        prop_assert!(justified, "{remote} reached {private} on port {port} at {now:?}");
                    }
                }
            }
        }
        prop_assert!(ports_seen.iter().all(|p| config.port_range.contains(p)));
    }
}
