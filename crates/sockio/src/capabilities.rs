//! What the kernel offers, probed once per process.
//!
//! Probing is cheap but not free (io_uring sets up a ring), and the answers
//! cannot change while the process runs, so they are cached. A refusal at run
//! time on one socket (a device without checksum offload refusing GSO, say)
//! is handled by that socket's fallback, not here.

use std::sync::OnceLock;

use crate::config::Backend;

/// Kernel features found at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// `UDP_SEGMENT` (generic segmentation offload) is accepted.
    pub gso: bool,
    /// Most segments one GSO message may carry (the kernel's `UDP_MAX_SEGMENTS`); 1 without GSO.
    pub max_gso_segments: usize,
    /// `UDP_GRO` (generic receive offload) is accepted.
    pub gro: bool,
    /// `sendmmsg`/`recvmmsg` exist.
    pub mmsg: bool,
    /// An io_uring can be set up and supports `SENDMSG`/`RECVMSG` (not denied by
    /// `io_uring_disabled`, seccomp or a container policy).
    pub io_uring: bool,
}

/// `UDP_MAX_SEGMENTS` in the kernels Tern targets: 64 since GSO for UDP appeared in 4.18.
#[cfg(target_os = "linux")]
const UDP_MAX_SEGMENTS: usize = 64;

impl Capabilities {
    /// The kernel's features, probed on first use.
    pub fn get() -> Self {
        static PROBED: OnceLock<Capabilities> = OnceLock::new();
        *PROBED.get_or_init(Self::probe)
    }

    #[cfg(target_os = "linux")]
    fn probe() -> Self {
        use nix::sys::socket::sockopt;
        let gso = probe_udp_option(sockopt::UdpGsoSegment, &1200);
        let caps = Self {
            gso,
            max_gso_segments: if gso { UDP_MAX_SEGMENTS } else { 1 },
            gro: probe_udp_option(sockopt::UdpGroSegment, &true),
            mmsg: true,
            io_uring: crate::backend::uring::probe(),
        };
        tracing::debug!(?caps, "sockio capabilities probed");
        caps
    }

    #[cfg(not(target_os = "linux"))]
    fn probe() -> Self {
        Self {
            gso: false,
            max_gso_segments: 1,
            gro: false,
            mmsg: false,
            io_uring: false,
        }
    }

    /// Whether this kernel can run `backend`.
    pub fn supports(&self, backend: Backend) -> bool {
        match backend {
            Backend::Portable => true,
            Backend::Mmsg => self.mmsg,
            Backend::Offload => self.mmsg && self.gso,
            Backend::IoUring => self.io_uring,
        }
    }

    /// What Auto takes: Offload where GSO works, else Mmsg, else Portable.
    ///
    /// IoUring is never taken automatically: with every operation completing
    /// inline (UDP sockets never block in the kernel), a ring saves no more
    /// system calls than sendmmsg and GSO already do, and its per-operation
    /// bookkeeping costs more; the level-2 benchmark shows the figures.
    pub fn best(&self) -> Backend {
        if self.supports(Backend::Offload) {
            Backend::Offload
        } else if self.supports(Backend::Mmsg) {
            Backend::Mmsg
        } else {
            Backend::Portable
        }
    }

    /// The best backend at or below `wanted` that this kernel supports: what a
    /// forced backend becomes when the kernel refuses it.
    pub fn at_most(&self, wanted: Backend) -> Backend {
        let order = [
            Backend::IoUring,
            Backend::Offload,
            Backend::Mmsg,
            Backend::Portable,
        ];
        let start = order.iter().position(|b| *b == wanted).unwrap_or(0);
        order[start..]
            .iter()
            .copied()
            .find(|b| self.supports(*b))
            .unwrap_or(Backend::Portable)
    }
}

/// Whether a fresh UDP socket accepts `option` = `value`.
#[cfg(target_os = "linux")]
fn probe_udp_option<O: nix::sys::socket::SetSockOpt>(option: O, value: &O::Val) -> bool {
    let Ok(socket) = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    ) else {
        return false;
    };
    nix::sys::socket::setsockopt(&socket, option, value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_backend_falls_to_the_next_one_the_kernel_has() {
        let bare = Capabilities {
            gso: false,
            max_gso_segments: 1,
            gro: false,
            mmsg: true,
            io_uring: false,
        };
        assert_eq!(bare.at_most(Backend::IoUring), Backend::Mmsg);
        assert_eq!(bare.at_most(Backend::Offload), Backend::Mmsg);
        assert_eq!(bare.at_most(Backend::Portable), Backend::Portable);
        assert_eq!(bare.best(), Backend::Mmsg);
    }
}
