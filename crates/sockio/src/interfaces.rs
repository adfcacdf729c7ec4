//! The addresses of this host's interfaces, for a socket bound to the
//! unspecified address to name where a peer on the same network can reach
//! it. Reading them is a system call on the network stack (a netlink
//! socket under glibc), so it lives here with the other socket calls.

use std::net::IpAddr;

/// The addresses of this host's interfaces that are up; none if they
/// cannot be read (or on a platform where Tern does not read them).
#[must_use]
pub fn interface_addresses() -> Vec<IpAddr> {
    read()
}

#[cfg(unix)]
fn read() -> Vec<IpAddr> {
    use nix::net::if_::InterfaceFlags;
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    interfaces
        .filter(|interface| interface.flags.contains(InterfaceFlags::IFF_UP))
        .filter_map(|interface| {
            let address = interface.address?;
            if let Some(v4) = address.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                address.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect()
}

#[cfg(not(unix))]
fn read() -> Vec<IpAddr> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_has_an_interface_up() {
        // At least the loopback interface.
        assert!(interface_addresses().iter().any(|ip| ip.is_loopback()));
    }
}
