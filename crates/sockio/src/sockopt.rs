//! Socket options that socket2 does not cover: nix's typed options where nix
//! has them, `setsockopt` directly for the one it lacks (`IP_MTU_DISCOVER`).

#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;

/// Sets an `int` socket option that nix has no typed option for.
#[cfg(target_os = "linux")]
pub(crate) fn set_int(
    socket: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live c_int for the whole call,
    // and the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks for a large kernel buffer: the `FORCE` variant passes `rmem_max`/`wmem_max`
/// when the process has `CAP_NET_ADMIN`; without it the plain option is capped
/// by those sysctls, which is the quiet fallback.
pub(crate) fn set_buffer_sizes(socket: &socket2::Socket, send: usize, recv: usize) {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::socket::{setsockopt, sockopt};
        // The kernel reads an int: larger requests are capped, not wrapped.
        let clamp = |n: usize| n.min(libc::c_int::MAX as usize);
        if setsockopt(socket, sockopt::SndBufForce, &clamp(send)).is_err() {
            let _ = socket.set_send_buffer_size(send);
        }
        if setsockopt(socket, sockopt::RcvBufForce, &clamp(recv)).is_err() {
            let _ = socket.set_recv_buffer_size(recv);
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket.set_send_buffer_size(send);
        let _ = socket.set_recv_buffer_size(recv);
    }
}
