//! How a socket is set up: which backend, how large its batches and buffers are.

use std::fmt;
use std::str::FromStr;

/// The environment variable that forces a backend when the configuration
/// leaves the choice to probing: `portable`, `mmsg`, `offload`, `uring` (or `auto`).
pub const BACKEND_ENV: &str = "TERN_SOCKIO_BACKEND";

/// Bytes a receive slot needs when GRO is on: the largest UDP payload, since
/// the kernel may coalesce up to 64 KiB into one message.
pub const GRO_SLOT_LEN: usize = 65_535;

/// The largest UDP payload over IPv4 (65 535 − 20 − 8); also used as the cap
/// of one GSO message for both families so one rule fits every path.
pub(crate) const MAX_UDP_PAYLOAD: usize = 65_507;

/// A way of moving datagrams between the process and the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// One datagram per system call; any OS.
    Portable,
    /// `sendmmsg`/`recvmmsg`: many datagrams per system call (Linux).
    Mmsg,
    /// `sendmmsg` of `UDP_SEGMENT` super-datagrams, `recvmmsg` with `UDP_GRO` (Linux).
    Offload,
    /// A batch of `sendmsg`/`recvmsg` operations per `io_uring_enter` (Linux),
    /// with GSO/GRO when the kernel has them.
    IoUring,
}

impl Backend {
    /// The name used by [`BACKEND_ENV`] and in benchmark names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Mmsg => "mmsg",
            Self::Offload => "offload",
            Self::IoUring => "uring",
        }
    }

    /// Every backend, cheapest to build first.
    pub const ALL: [Self; 4] = [Self::Portable, Self::Mmsg, Self::Offload, Self::IoUring];
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend name that [`Backend`] does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown sockio backend {0:?}: expected portable, mmsg, offload, uring or auto")]
#[non_exhaustive]
pub struct UnknownBackend(pub String);

/// Parses a backend name; `Ok(None)` means `auto`.
pub(crate) fn parse_choice(name: &str) -> Result<Option<Backend>, UnknownBackend> {
    match name.trim().to_ascii_lowercase().as_str() {
        "auto" | "" => Ok(None),
        other => other.parse().map(Some),
    }
}

impl FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" => Ok(Self::Portable),
            "mmsg" => Ok(Self::Mmsg),
            "offload" | "gso" => Ok(Self::Offload),
            "uring" | "io_uring" | "iouring" => Ok(Self::IoUring),
            _ => Err(UnknownBackend(s.to_owned())),
        }
    }
}

/// What the kernel does about fragmentation and path MTU for this socket
/// (`IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER` on Linux; ignored elsewhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MtuDiscovery {
    /// Leave the system's default.
    #[default]
    SystemDefault,
    /// Set don't-fragment and let the kernel track the path MTU: a datagram
    /// larger than the known path MTU fails with `EMSGSIZE` (counted and skipped).
    Do,
    /// Set don't-fragment but ignore the kernel's path MTU: for a transport
    /// that probes the path MTU itself.
    Probe,
}

/// How to set up a socket. `Default` gives Auto backend selection, batches of
/// 64, large kernel buffers and GRO on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketConfig {
    /// Force a backend; `None` reads [`BACKEND_ENV`], then probes and takes the best.
    /// A forced backend the kernel cannot give falls back to the best one it can
    /// (counted in `fallbacks`).
    pub backend: Option<Backend>,
    /// Messages per batching system call (sendmmsg/recvmmsg/io_uring), 1..=1024
    /// (the kernel's `UIO_MAXIOV`); scratch space for this many is allocated at bind.
    pub batch_size: usize,
    /// Requested `SO_SNDBUF` in bytes (`SO_SNDBUFFORCE` is tried first).
    pub send_buffer_size: usize,
    /// Requested `SO_RCVBUF` in bytes (`SO_RCVBUFFORCE` is tried first): a deep
    /// queue is what keeps loopback bursts from being dropped.
    pub recv_buffer_size: usize,
    /// Set `SO_REUSEPORT` so several endpoints (one per core) can share the port.
    pub reuse_port: bool,
    /// Don't-fragment / path MTU discovery behaviour.
    pub mtu_discovery: MtuDiscovery,
    /// Enable `UDP_GRO` on backends that read its stride (Offload, IoUring);
    /// receive slots must then be [`GRO_SLOT_LEN`] bytes.
    pub gro: bool,
    /// Receive slot size in bytes suggested by [`crate::UdpSocket::new_recv_buffers`] when GRO is off.
    pub max_datagram_size: usize,
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            backend: None,
            batch_size: 64,
            send_buffer_size: 4 << 20,
            recv_buffer_size: 8 << 20,
            reuse_port: false,
            mtu_discovery: MtuDiscovery::SystemDefault,
            gro: true,
            max_datagram_size: 2048,
        }
    }
}

impl SocketConfig {
    /// The batch size clamped to what one system call accepts.
    pub(crate) fn batch(&self) -> usize {
        self.batch_size.clamp(1, 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_round_trip_and_auto_means_probe() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>().ok(), Some(backend));
        }
        assert_eq!(parse_choice("AUTO").ok(), Some(None));
        assert!(parse_choice("carrier-pigeon").is_err());
    }
}
