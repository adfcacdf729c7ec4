//! The Linux-only cases: io_uring's failure paths, GSO tried again after
//! a refusal, and a network namespace with a small MTU.

use super::*;

/// Binds a socket that must run on io_uring: the tests of its failures are
/// ignored by default and fail, rather than pass untested, where the kernel
/// (or a seccomp filter) refuses io_uring.
fn bind_ring() -> UdpSocket {
    let socket = bind(Backend::IoUring, v4());
    assert_eq!(
        socket.backend(),
        Backend::IoUring,
        "this kernel gives no io_uring: the test cannot run here"
    );
    socket
}

/// Sends 30 datagrams from a ring socket whose next `io_uring_enter` fails as
/// `inject` arranges; every datagram must arrive exactly once, and the socket
/// must have fallen back by one step.
async fn ring_send_failure_loses_and_repeats_nothing(inject: fn(&mut UdpSocket)) {
    let mut rx = bind(Backend::Offload, v4());
    let mut tx = bind_ring();
    let to = rx.local_addr().expect("address");
    let datagrams: Vec<Vec<u8>> = (0..30).map(|i| payload(i, 900)).collect();
    let batch: Vec<Transmit<'_>> = datagrams.iter().map(|d| Transmit::new(to, d)).collect();
    inject(&mut tx);
    tx.send_all(&batch).await.expect("send");
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, 30).await, sorted(datagrams));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv(&mut bufs))
            .await
            .is_err()
    );
    assert_eq!(tx.backend(), tx.capabilities().at_most(Backend::Offload));
    assert_eq!(tx.counters().fallbacks, 1);
    assert_eq!(tx.counters().datagrams_sent, 30);
}

#[tokio::test]
#[ignore = "needs io_uring in the kernel; run with --ignored"]
async fn a_refused_ring_falls_back_to_the_next_backend_and_resends_the_batch() {
    ring_send_failure_loses_and_repeats_nothing(UdpSocket::inject_ring_refusal).await;
}

#[tokio::test]
#[ignore = "needs io_uring in the kernel; run with --ignored"]
async fn a_ring_failing_with_sends_in_flight_drains_them_and_the_fallback_sends_the_rest_once() {
    ring_send_failure_loses_and_repeats_nothing(UdpSocket::inject_ring_failure_in_flight).await;
}

#[tokio::test]
#[ignore = "needs io_uring in the kernel; run with --ignored"]
async fn a_ring_failing_with_receives_in_flight_keeps_what_arrived_and_falls_back() {
    let mut rx = bind_ring();
    let mut tx = bind(Backend::Offload, v4());
    let to = rx.local_addr().expect("address");
    let datagrams: Vec<Vec<u8>> = (0..30).map(|i| payload(i, 900)).collect();
    let batch: Vec<Transmit<'_>> = datagrams.iter().map(|d| Transmit::new(to, d)).collect();
    tx.send_all(&batch).await.expect("send");
    rx.inject_ring_failure_in_flight();
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, 30).await, sorted(datagrams));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv(&mut bufs))
            .await
            .is_err()
    );
    assert_eq!(rx.backend(), rx.capabilities().at_most(Backend::Offload));
    assert_eq!(rx.counters().fallbacks, 1);
    assert_eq!(rx.counters().datagrams_received, 30);
}

#[tokio::test]
#[ignore = "needs io_uring in the kernel; run with --ignored"]
async fn a_reply_sent_after_a_drained_receive_arrives_and_nothing_is_lost() {
    let mut rx = bind_ring();
    let mut tx = bind(Backend::Offload, v4());
    let (to_rx, to_tx) = (
        rx.local_addr().expect("address"),
        tx.local_addr().expect("address"),
    );
    let datagrams: Vec<Vec<u8>> = (0..30).map(|i| payload(i, 900)).collect();
    let batch: Vec<Transmit<'_>> = datagrams.iter().map(|d| Transmit::new(to_rx, d)).collect();
    tx.send_all(&batch).await.expect("send");
    rx.inject_ring_failure_in_flight();
    let mut bufs = rx.new_recv_buffers();
    let mut got: Vec<Vec<u8>> = Vec::new();
    tokio::time::timeout(WAIT, rx.recv(&mut bufs))
        .await
        .expect("first receive in time")
        .expect("receive");
    got.extend(bufs.datagrams().map(|(_, d)| d.to_vec()));
    let reply = payload(99, 100);
    rx.send_all(&[Transmit::new(to_tx, &reply)])
        .await
        .expect("reply");
    assert_eq!(rx.backend(), rx.capabilities().at_most(Backend::Offload));
    let mut tx_bufs = tx.new_recv_buffers();
    assert_eq!(collect(&mut tx, &mut tx_bufs, 1).await, [reply]);
    got.extend(collect(&mut rx, &mut bufs, 30 - got.len()).await);
    assert_eq!(sorted(got), sorted(datagrams));
}

#[tokio::test]
async fn a_full_socket_mid_batch_reports_progress_and_the_caller_resumes_exactly() {
    // Mmsg sends a segmented transmit one datagram per message, so it can stop
    // inside it; Offload sends it as one message, so it stops between transmits.
    for (backend, after, expected) in [
        (
            Backend::Mmsg,
            3,
            crate::Sent {
                transmits: 1,
                segments: 2,
            },
        ),
        (
            Backend::Offload,
            2,
            crate::Sent {
                transmits: 2,
                segments: 0,
            },
        ),
    ] {
        let mut rx = bind(backend, v4());
        let mut tx = bind(backend, v4());
        let to = rx.local_addr().expect("address");
        let (first, last) = (payload(1, 800), payload(2, 801));
        let (run, segments) = run_of(10, &[500, 500, 500, 500, 100]);
        let batch = [
            Transmit::new(to, &first),
            Transmit::new(to, &run).with_segment_size(500),
            Transmit::new(to, &last),
        ];
        tx.inject_full_buffer_after(after);
        let sent = tx.send(&batch).await.expect("send");
        assert_eq!(sent, expected, "{backend}");
        let rest = &batch[sent.transmits..];
        let mut resumed = vec![rest[0].skip_segments(sent.segments)];
        resumed.extend_from_slice(&rest[1..]);
        tx.send_all(&resumed).await.expect("send the rest");
        let expected = sorted([vec![first.clone(), last.clone()], segments].concat());
        let mut bufs = rx.new_recv_buffers();
        assert_eq!(collect(&mut rx, &mut bufs, 7).await, expected, "{backend}");
        assert!(
            tokio::time::timeout(Duration::from_millis(200), rx.recv(&mut bufs))
                .await
                .is_err()
        );
        assert_eq!(tx.counters().datagrams_sent, 7);
    }
}

#[tokio::test]
#[ignore = "needs UDP GSO in the kernel; run with --ignored"]
async fn gso_is_tried_again_a_while_after_the_kernel_refused_it() {
    for backend in [Backend::Offload, Backend::IoUring] {
        let mut rx = bind(backend, v4());
        let mut tx = bind(backend, v4());
        let to = rx.local_addr().expect("address");
        let gso = tx.max_transmit_segments();
        assert!(
            gso > 1,
            "{backend}: no UDP GSO on this kernel: the test cannot run here"
        );
        let (run, segments) = run_of(1, &[400; 3]);
        let segmented = [Transmit::new(to, &run).with_segment_size(400)];
        tx.inject_gso_refusal();
        tx.send_all(&segmented).await.expect("send");
        assert_eq!(tx.max_transmit_segments(), 1, "{backend}");
        let mut bufs = rx.new_recv_buffers();
        assert_eq!(collect(&mut rx, &mut bufs, 3).await, segments.clone());
        let tiny = [Transmit::new(to, b"x")];
        for _ in 0..crate::backend::msg::GSO_RETRY_FIRST {
            tx.send_all(&tiny).await.expect("send");
            while rx.try_recv(&mut bufs).is_ok() {}
        }
        assert_eq!(tx.max_transmit_segments(), gso, "{backend}");
        let before = tx.counters().gso_sends;
        tx.send_all(&segmented).await.expect("send");
        assert_eq!(tx.counters().gso_sends, before + 1, "{backend}");
        assert_eq!(tx.counters().fallbacks, 1, "{backend}");
    }
}

/// Runs `test` on a thread of its own in a fresh network namespace whose
/// loopback is up with an MTU of `mtu`. Panics where this process may not
/// create one (it needs root, or `CAP_SYS_ADMIN`).
fn in_network_namespace(mtu: i32, test: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        // SAFETY: unshare only changes this thread's network namespace;
        // every socket the test opens is opened from this thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            panic!(
                "cannot create a network namespace: {}",
                std::io::Error::last_os_error()
            );
        }
        loopback_up_with_mtu(mtu);
        test();
    })
    .join()
    .expect("test thread");
}

/// Brings `lo` up with `mtu` through the interface ioctls.
fn loopback_up_with_mtu(mtu: i32) {
    let control = std::net::UdpSocket::bind("0.0.0.0:0");
    // Binding needs no interface up: any address works for the ioctls.
    let control = control.expect("control socket");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&control);
    // SAFETY: ifreq is a plain C struct; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    req.ifr_ifru.ifru_mtu = mtu;
    // SAFETY: fd is a live socket and req a valid ifreq naming `lo`.
    assert_eq!(
        unsafe { libc::ioctl(fd, libc::SIOCSIFMTU, &raw mut req) },
        0
    );
    req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_LOOPBACK) as libc::c_short;
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &raw mut req) },
        0
    );
}

#[test]
#[ignore = "needs root for a network namespace of its own; run with --ignored"]
fn a_dual_stack_socket_refuses_what_exceeds_the_path_to_an_ipv4_peer() {
    in_network_namespace(1400, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            for backend in Backend::ALL {
                let df = SocketConfig {
                    mtu_discovery: crate::MtuDiscovery::Do,
                    ..config(backend)
                };
                let mut rx = bind(backend, v4());
                let any6 = SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0));
                let mut tx = UdpSocket::bind(any6, df).expect("bind dual-stack");
                let to = rx.local_addr().expect("address");
                let (big, fits) = (payload(1, 1452), payload(2, 1000));
                let batch = [Transmit::new(to, &big), Transmit::new(to, &fits)];
                let sent = tx.send(&batch).await.expect("send");
                assert_eq!(sent.transmits, 2, "{backend}");
                let refusals: Vec<_> = tx
                    .refusals()
                    .iter()
                    .map(|r| (r.transmit, r.reason))
                    .collect();
                assert_eq!(refusals, [(0, RefusalReason::TooLarge)], "{backend}");
                assert_eq!(tx.counters().send_errors, 1, "{backend}");
                let mut bufs = rx.new_recv_buffers();
                assert_eq!(collect(&mut rx, &mut bufs, 1).await, [fits], "{backend}");
                assert!(
                    tokio::time::timeout(Duration::from_millis(200), rx.recv(&mut bufs))
                        .await
                        .is_err(),
                    "{backend}: the oversized datagram arrived fragmented"
                );
            }
        });
    });
}
