//! This side's local candidates (wire format §5.14): the addresses a peer
//! behind the same NAT can reach it at, sent when it registers with a
//! rendezvous. A socket bound to one address names that one; one bound to
//! the unspecified address names its interfaces' addresses of its family,
//! with its port, loopback and link-local ones only if there are no others.

use std::net::{IpAddr, SocketAddr};

use tern_proto::Candidates;

/// The candidates of a socket bound to `bound`.
pub(super) fn local_candidates(bound: SocketAddr) -> Candidates {
    if bound.ip().is_unspecified() {
        pick(bound, tern_sockio::interface_addresses())
    } else {
        let mut candidates = Candidates::default();
        candidates.push(bound);
        candidates
    }
}

/// Whether `ip` is reachable only from this host or its link.
fn is_local_only(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_loopback() || ip.is_link_local(),
        IpAddr::V6(ip) => ip.is_loopback() || ip.is_unicast_link_local(),
    }
}

/// Up to the list's room of `interfaces` of `bound`'s family, with its
/// port: the others first, loopback and link-local ones only if none.
fn pick(bound: SocketAddr, interfaces: impl IntoIterator<Item = IpAddr>) -> Candidates {
    let same_family: Vec<IpAddr> = interfaces
        .into_iter()
        .filter(|ip| ip.is_ipv4() == bound.is_ipv4())
        .collect();
    let wide = same_family.iter().any(|&ip| !is_local_only(ip));
    let mut candidates = Candidates::default();
    for ip in same_family {
        if !wide || !is_local_only(ip) {
            candidates.push(SocketAddr::new(ip, bound.port()));
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().expect("an ip")).collect()
    }

    fn addresses(candidates: Candidates) -> Vec<String> {
        candidates.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_bound_address_is_its_own_candidate() {
        let bound: SocketAddr = "192.168.1.2:4000".parse().expect("an address");
        assert_eq!(addresses(local_candidates(bound)), ["192.168.1.2:4000"]);
    }

    #[test]
    fn the_unspecified_address_names_the_interfaces_of_its_family_loopback_last_resort() {
        let any4: SocketAddr = "0.0.0.0:4000".parse().expect("an address");
        let host = ips(&[
            "127.0.0.1",
            "::1",
            "169.254.3.4",
            "192.168.1.2",
            "fd00::2",
            "10.0.0.2",
        ]);
        assert_eq!(
            addresses(pick(any4, host.clone())),
            ["192.168.1.2:4000", "10.0.0.2:4000"]
        );
        let any6: SocketAddr = "[::]:4000".parse().expect("an address");
        assert_eq!(addresses(pick(any6, host)), ["[fd00::2]:4000"]);
        let lonely = ips(&["127.0.0.1", "fe80::1"]);
        assert_eq!(addresses(pick(any4, lonely.clone())), ["127.0.0.1:4000"]);
        assert_eq!(addresses(pick(any6, lonely)), ["[fe80::1]:4000"]);
        let many = ips(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]);
        assert_eq!(pick(any4, many).len(), 4);
    }

    #[test]
    fn this_hosts_interfaces_give_some_candidate() {
        let any4: SocketAddr = "0.0.0.0:4000".parse().expect("an address");
        // Every host has at least a loopback interface up.
        assert!(!local_candidates(any4).is_empty());
    }
}
