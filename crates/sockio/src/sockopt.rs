//! Socket options that socket2 does not cover, set with `setsockopt` directly.

#[cfg(target_os = "linux")]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;

/// Sets an `int` socket option.
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
        let clamp = |n: usize| libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX);
        if set_int(socket, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, clamp(send)).is_err() {
            let _ = socket.set_send_buffer_size(send);
        }
        if set_int(socket, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, clamp(recv)).is_err() {
            let _ = socket.set_recv_buffer_size(recv);
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket.set_send_buffer_size(send);
        let _ = socket.set_recv_buffer_size(recv);
    }
}
