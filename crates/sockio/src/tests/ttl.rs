//! A datagram's own time to live: every backend sends it with the TTL (IPv6
//! hop limit) asked for, on it alone, and leaves the socket's for the rest,
//! also inside a segmented run. The receiver reads the TTL each datagram
//! arrived with (`IP_RECVTTL` / `IPV6_RECVHOPLIMIT`).

use std::os::fd::AsRawFd;

use super::*;

/// A plain blocking socket that reports the TTL of each datagram it reads.
struct TtlReceiver(std::net::UdpSocket);

impl TtlReceiver {
    fn bind(addr: SocketAddr) -> Self {
        let socket = std::net::UdpSocket::bind(addr).expect("bind on loopback");
        socket.set_read_timeout(Some(WAIT)).expect("a read timeout");
        let (level, name) = if addr.is_ipv4() {
            (libc::IPPROTO_IP, libc::IP_RECVTTL)
        } else {
            (libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT)
        };
        crate::sockopt::set_int(&socket, level, name, 1).expect("ask for the TTL of each datagram");
        Self(socket)
    }

    fn addr(&self) -> SocketAddr {
        self.0.local_addr().expect("address")
    }

    /// The next datagram and the TTL it arrived with.
    fn recv(&self) -> (Vec<u8>, i32) {
        let mut buf = [0u8; 2048];
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is valid; the pointers set below live
        // for the call, and the kernel writes at most the lengths given.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control);
        // SAFETY: as above.
        let len = unsafe { libc::recvmsg(self.0.as_raw_fd(), &raw mut msg, 0) };
        assert!(len >= 0, "receive: {}", std::io::Error::last_os_error());
        let mut ttl = None;
        // SAFETY: the kernel wrote msg_controllen bytes of control messages;
        // CMSG_FIRSTHDR/CMSG_NXTHDR stay inside them.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            while !cmsg.is_null() {
                if matches!(
                    ((*cmsg).cmsg_level, (*cmsg).cmsg_type),
                    (libc::IPPROTO_IP, libc::IP_TTL) | (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT)
                ) {
                    ttl = Some(std::ptr::read_unaligned(
                        libc::CMSG_DATA(cmsg).cast::<libc::c_int>(),
                    ));
                }
                cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
            }
        }
        (
            buf[..len as usize].to_vec(),
            ttl.expect("the kernel reports the TTL"),
        )
    }
}

/// Sends, through `backend` bound at `local`, to a receiver at `remote`, a
/// plain datagram, one with TTL 3, a run of three with TTL 5 and a plain
/// one, and checks the TTL each arrived with: the plain ones keep the
/// socket's own.
async fn each_datagram_arrives_with_its_own_ttl(
    backend: Backend,
    local: SocketAddr,
    remote: SocketAddr,
) {
    let rx = TtlReceiver::bind(remote);
    let mut tx = bind(backend, local);
    let to = rx.addr();
    let usual = socket2::SockRef::from(&rx.0);
    let usual = if to.is_ipv4() {
        usual.ttl_v4()
    } else {
        usual.unicast_hops_v6()
    }
    .expect("the socket's TTL");
    let (plain, low) = (payload(1, 50), payload(2, 60));
    let (run, run_datagrams) = run_of(10, &[100, 100, 40]);
    let last = payload(3, 70);
    let batch = [
        Transmit::new(to, &plain),
        Transmit::new(to, &low).with_ttl(3),
        Transmit::new(to, &run).with_segment_size(100).with_ttl(5),
        Transmit::new(to, &last),
    ];
    tx.send_all(&batch).await.expect("send");
    let mut expected: Vec<(Vec<u8>, i32)> = vec![(plain, usual as i32), (low, 3)];
    expected.extend(run_datagrams.into_iter().map(|d| (d, 5)));
    expected.push((last, usual as i32));
    let receiving = tokio::task::spawn_blocking(move || {
        let mut got: Vec<(Vec<u8>, i32)> = (0..6).map(|_| rx.recv()).collect();
        got.sort();
        got
    });
    expected.sort();
    assert_eq!(
        receiving.await.expect("receiver"),
        expected,
        "{backend:?} from {local} to {to}"
    );
    assert_eq!(tx.counters().datagrams_sent, 6);
}

#[tokio::test]
async fn every_backend_sends_a_datagrams_own_ttl_and_only_on_it() {
    for backend in Backend::ALL {
        each_datagram_arrives_with_its_own_ttl(backend, v4(), v4()).await;
    }
}

#[tokio::test]
async fn every_backend_sends_a_datagrams_own_hop_limit_over_ipv6() {
    let loopback = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0));
    if std::net::UdpSocket::bind(loopback).is_err() {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    }
    for backend in Backend::ALL {
        each_datagram_arrives_with_its_own_ttl(backend, loopback, loopback).await;
    }
}

#[tokio::test]
async fn a_dual_stack_socket_sends_an_ipv4_datagrams_own_ttl() {
    let any = SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0));
    if std::net::UdpSocket::bind(any).is_err() {
        eprintln!("skipped: no IPv6 here");
        return;
    }
    for backend in Backend::ALL {
        each_datagram_arrives_with_its_own_ttl(backend, any, v4()).await;
    }
}
