//! One loopback suite, run against every backend.
//!
//! Every test sends in rounds small enough to fit the receive buffer even at
//! the kernel's default `rmem_max` (a round is at most 64 KiB of payload), and
//! reads each round before the next, so exact delivery is a valid assertion on
//! a loaded machine; every wait is bounded by a timeout.
//!
//! The tests whose subject needs root (a network namespace), io_uring or UDP
//! GSO are ignored unless asked for (`cargo test -p tern-sockio -- --ignored`,
//! which CI runs as root), and asked for where the machine lacks it, they fail
//! and say why: none passes without having run.

use std::net::SocketAddr;
use std::time::Duration;

use crate::{Backend, GRO_SLOT_LEN, RecvBuffers, RefusalReason, SocketConfig, Transmit, UdpSocket};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod ttl;

const WAIT: Duration = Duration::from_secs(5);

fn v4() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn config(backend: Backend) -> SocketConfig {
    SocketConfig {
        backend: Some(backend),
        batch_size: 32,
        max_datagram_size: 9000,
        ..SocketConfig::default()
    }
}

fn bind(backend: Backend, addr: SocketAddr) -> UdpSocket {
    UdpSocket::bind(addr, config(backend)).expect("bind on loopback")
}

/// A datagram whose bytes all depend on `tag`, so a swapped, truncated or
/// stale datagram never compares equal to the expected one.
fn payload(tag: u32, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len)
        .map(|i| (tag as usize).wrapping_mul(131).wrapping_add(i * 7) as u8)
        .collect();
    let head = tag.to_be_bytes();
    let n = head.len().min(len);
    bytes[..n].copy_from_slice(&head[..n]);
    bytes
}

/// Datagrams of `sizes` concatenated: the contents of one segmented transmit.
fn run_of(first_tag: u32, sizes: &[usize]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let datagrams: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, len)| payload(first_tag + i as u32, *len))
        .collect();
    (datagrams.concat(), datagrams)
}

/// Receives until `expected` datagrams arrived (or the wait runs out) and
/// returns them, sorted.
async fn collect(rx: &mut UdpSocket, bufs: &mut RecvBuffers, expected: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while got.len() < expected {
        match tokio::time::timeout(WAIT, rx.recv(bufs)).await {
            Ok(result) => {
                result.expect("receive");
                got.extend(bufs.datagrams().map(|(_, d)| d.to_vec()));
            }
            Err(_) => break,
        }
    }
    got.sort();
    got
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

async fn every_datagram_arrives_intact(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let mut bufs = rx.new_recv_buffers();
    for round in 0..5u32 {
        let datagrams: Vec<Vec<u8>> = (0..40u32)
            .map(|i| {
                payload(
                    round * 1000 + i,
                    1 + (i as usize * 37 + round as usize * 101) % 1452,
                )
            })
            .collect();
        let batch: Vec<Transmit<'_>> = datagrams.iter().map(|d| Transmit::new(to, d)).collect();
        tx.send_all(&batch).await.expect("send");
        assert_eq!(
            collect(&mut rx, &mut bufs, 40).await,
            sorted(datagrams),
            "round {round}"
        );
    }
}

async fn mixed_destinations_and_segment_sizes_in_one_batch(backend: Backend) {
    let mut a = bind(backend, v4());
    let mut b = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let (to_a, to_b) = (a.local_addr().expect("a"), b.local_addr().expect("b"));
    let (run_a, seg_a) = run_of(100, &[100; 5]);
    let (run_b, seg_b) = run_of(200, &[200, 200, 200, 77]);
    let single = payload(300, 999);
    let (run_c, seg_c) = run_of(400, &[50, 50, 50]);
    let batch = [
        Transmit::new(to_a, &run_a).with_segment_size(100),
        Transmit::new(to_b, &run_b).with_segment_size(200),
        Transmit::new(to_a, &single),
        Transmit::new(to_b, &run_c).with_segment_size(50),
    ];
    tx.send_all(&batch).await.expect("send");
    let mut bufs_a = a.new_recv_buffers();
    let mut bufs_b = b.new_recv_buffers();
    let expect_a = sorted([seg_a, vec![single.clone()]].concat());
    let expect_b = sorted([seg_b, seg_c].concat());
    assert_eq!(collect(&mut a, &mut bufs_a, expect_a.len()).await, expect_a);
    assert_eq!(collect(&mut b, &mut bufs_b, expect_b.len()).await, expect_b);
    assert_eq!(tx.counters().datagrams_sent, 13);
}

async fn a_short_last_segment_arrives_short(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let mut sizes = vec![1000; 10];
    sizes.push(123);
    let (run, datagrams) = run_of(7, &sizes);
    tx.send_all(&[Transmit::new(to, &run).with_segment_size(1000)])
        .await
        .expect("send");
    let mut bufs = rx.new_recv_buffers();
    let got = collect(&mut rx, &mut bufs, 11).await;
    assert_eq!(got, sorted(datagrams));
    assert_eq!(got.iter().filter(|d| d.len() == 123).count(), 1);
}

async fn a_gro_receiver_splits_coalesced_messages_by_stride(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let mut sizes = vec![1200; 39];
    sizes.push(500);
    let (run, datagrams) = run_of(5000, &sizes);
    tx.send_all(&[Transmit::new(to, &run).with_segment_size(1200)])
        .await
        .expect("send");
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, 40).await, sorted(datagrams));
    let (sent, got) = (tx.counters(), rx.counters());
    assert_eq!(got.datagrams_received, 40);
    if tx.max_transmit_segments() > 1 {
        assert_eq!(sent.gso_sends, 1, "one super-datagram of 40 segments");
        assert_eq!(sent.send_syscalls, 1);
    }
    if rx.gro_enabled() && tx.max_transmit_segments() > 1 {
        // Over loopback a GSO super-datagram reaches a GRO socket whole.
        assert_eq!(got.gro_receives, 1);
    }
}

async fn ipv6_loopback_round_trip(backend: Backend) {
    let any6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0));
    let mut rx = bind(backend, any6);
    let mut tx = bind(backend, any6);
    let to = rx.local_addr().expect("address");
    let (run, mut datagrams) = run_of(60, &[1400, 1400, 1400, 10]);
    let single = payload(70, 1452);
    datagrams.push(single.clone());
    tx.send_all(&[
        Transmit::new(to, &run).with_segment_size(1400),
        Transmit::new(to, &single),
    ])
    .await
    .expect("send");
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, 5).await, sorted(datagrams));
    let source = bufs.messages().next().map(|(m, _)| m.source);
    assert_eq!(source, Some(tx.local_addr().expect("address")));
}

async fn a_dual_stack_socket_reaches_an_ipv4_peer(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(
        backend,
        SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
    );
    let to = rx.local_addr().expect("address");
    let (run, datagrams) = run_of(80, &[600, 600, 600]);
    tx.send_all(&[Transmit::new(to, &run).with_segment_size(600)])
        .await
        .expect("send");
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, 3).await, sorted(datagrams));
    let source = bufs.messages().next().map(|(m, _)| m.source.ip());
    assert_eq!(source, Some(std::net::IpAddr::from([127, 0, 0, 1])));
}

async fn a_refused_gso_send_falls_back_without_losing_or_repeating(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let first = payload(1, 700);
    let (run_a, seg_a) = run_of(10, &[600; 8]);
    let (run_b, seg_b) = run_of(30, &[300, 300, 300, 40]);
    let gso_before = tx.max_transmit_segments();
    tx.inject_gso_refusal();
    tx.send_all(&[
        Transmit::new(to, &first),
        Transmit::new(to, &run_a).with_segment_size(600),
        Transmit::new(to, &run_b).with_segment_size(300),
    ])
    .await
    .expect("send");
    let expected = sorted([vec![first.clone()], seg_a, seg_b].concat());
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, expected.len()).await, expected);
    // Nothing arrives twice: after the expected datagrams the queue is empty.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv(&mut bufs))
            .await
            .is_err()
    );
    let c = tx.counters();
    assert_eq!(c.datagrams_sent, 13);
    if gso_before > 1 {
        assert_eq!(c.fallbacks, 1);
        assert_eq!(tx.max_transmit_segments(), 1);
    }
}

async fn receives_write_only_into_the_buffers_they_are_given(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let (to_rx, to_tx) = (
        rx.local_addr().expect("address"),
        tx.local_addr().expect("address"),
    );
    // An earlier receive fills `earlier`: its slots were handed to the kernel.
    let first = payload(1, 500);
    tx.send_all(&[Transmit::new(to_rx, &first)])
        .await
        .expect("send");
    let mut earlier = rx.new_recv_buffers();
    assert_eq!(
        collect(&mut rx, &mut earlier, 1).await,
        std::slice::from_ref(&first)
    );
    // A send lends the socket `outgoing` as `&[u8]` only.
    let outgoing = payload(2, 700);
    rx.send_all(&[Transmit::new(to_tx, &outgoing)])
        .await
        .expect("send");
    let queued: Vec<Vec<u8>> = (0..3).map(|i| payload(10 + i, 600)).collect();
    let batch: Vec<Transmit<'_>> = queued.iter().map(|d| Transmit::new(to_rx, d)).collect();
    tx.send_all(&batch).await.expect("send");
    // A size whose product wraps must never become buffers that claim
    // slots they do not have (the kernel would reuse the earlier pointers).
    if let Ok(mut wrapped) = std::panic::catch_unwind(|| RecvBuffers::new(2, 1usize << 63)) {
        let _ = rx.try_recv(&mut wrapped);
    }
    let mut one = RecvBuffers::new(1, GRO_SLOT_LEN);
    assert_eq!(collect(&mut rx, &mut one, 3).await, sorted(queued));
    assert_eq!(
        earlier
            .datagrams()
            .map(|(_, d)| d.to_vec())
            .collect::<Vec<_>>(),
        [first]
    );
    assert_eq!(outgoing, payload(2, 700));
}

async fn a_bad_destination_fails_alone_and_keeps_gso(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let invalid = SocketAddr::from(([127, 0, 0, 1], 0));
    let gso_before = tx.max_transmit_segments();
    let (run_a, seg_a) = run_of(10, &[500; 3]);
    let (bad, _) = run_of(20, &[500; 3]);
    let (run_c, seg_c) = run_of(30, &[500; 3]);
    let batch = [
        Transmit::new(to, &run_a).with_segment_size(500),
        Transmit::new(invalid, &bad).with_segment_size(500),
        Transmit::new(to, &run_c).with_segment_size(500),
    ];
    let sent = tx.send(&batch).await.expect("send");
    assert_eq!(sent.transmits, 3);
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(
        collect(&mut rx, &mut bufs, 6).await,
        sorted([seg_a, seg_c].concat())
    );
    // With GSO the bad run is one message, refused once; without it each of
    // its three datagrams is refused on its own.
    let refused = if gso_before > 1 { 1 } else { 3 };
    let refusals: Vec<_> = tx
        .refusals()
        .iter()
        .map(|r| (r.transmit, r.reason))
        .collect();
    assert_eq!(
        refusals,
        vec![(1, RefusalReason::InvalidDestination); refused]
    );
    let c = tx.counters();
    assert_eq!((c.send_errors, c.fallbacks), (refused as u64, 0));
    assert_eq!(tx.max_transmit_segments(), gso_before);
    if gso_before > 1 {
        assert_eq!(c.gso_sends, 2);
        // A following run to a good peer still leaves in one system call.
        let (run, segments) = run_of(40, &[500; 3]);
        tx.send_all(&[Transmit::new(to, &run).with_segment_size(500)])
            .await
            .expect("send");
        assert_eq!(tx.counters().send_syscalls - c.send_syscalls, 1);
        assert_eq!(collect(&mut rx, &mut bufs, 3).await, segments);
    }
}

async fn a_closed_port_inside_a_batch_does_not_stall_the_rest(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let closed = {
        let gone = std::net::UdpSocket::bind(v4()).expect("bind");
        gone.local_addr().expect("address")
    };
    // Port 0 is refused by the kernel at once (EINVAL): the skip path.
    let invalid = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut expected = Vec::new();
    let mut refused = 0;
    for round in 0..3u32 {
        let good: Vec<Vec<u8>> = (0..6).map(|i| payload(round * 100 + i, 300)).collect();
        let junk = payload(9999, 300);
        let mut batch = Vec::new();
        for (i, d) in good.iter().enumerate() {
            batch.push(Transmit::new(to, d));
            if i % 2 == 0 {
                batch.push(Transmit::new(closed, &junk));
            } else {
                batch.push(Transmit::new(invalid, &junk));
                refused += 1;
            }
        }
        tx.send_all(&batch).await.expect("send");
        expected.extend(good);
    }
    let expected = sorted(expected);
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, expected.len()).await, expected);
    assert_eq!(tx.counters().send_errors, refused);
}

async fn a_datagram_larger_than_its_slot_arrives_cut_to_the_slot(backend: Backend) {
    let small = SocketConfig {
        gro: false,
        max_datagram_size: 100,
        ..config(backend)
    };
    let mut rx = UdpSocket::bind(v4(), small).expect("bind on loopback");
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let (big, short) = (payload(1, 300), payload(2, 50));
    tx.send_all(&[Transmit::new(to, &big), Transmit::new(to, &short)])
        .await
        .expect("send");
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(bufs.slot_len(), 100);
    let got = collect(&mut rx, &mut bufs, 2).await;
    assert_eq!(got, sorted(vec![big[..100].to_vec(), short]));
    // Portable's recv_from cannot tell a cut datagram from a whole one.
    let truncated = u64::from(backend != Backend::Portable);
    assert_eq!(rx.counters().recv_truncated, truncated);
}

async fn receive_buffers_are_reused_across_batches(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let mut bufs = rx.new_recv_buffers();
    for round in 0..10u32 {
        // Shrinking sizes: a stale tail from a longer earlier datagram would show.
        let len = 1400 - round as usize * 100;
        let datagrams: Vec<Vec<u8>> = (0..8).map(|i| payload(round * 10 + i, len)).collect();
        let batch: Vec<Transmit<'_>> = datagrams.iter().map(|d| Transmit::new(to, d)).collect();
        tx.send_all(&batch).await.expect("send");
        assert_eq!(
            collect(&mut rx, &mut bufs, 8).await,
            sorted(datagrams),
            "round {round}"
        );
    }
}

async fn counters_match_what_was_sent(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let singles: Vec<Vec<u8>> = (0..20).map(|i| payload(i, 1000)).collect();
    let (run, _) = run_of(50, &[1000; 20]);
    let mut batch: Vec<Transmit<'_>> = singles.iter().map(|d| Transmit::new(to, d)).collect();
    batch.push(Transmit::new(to, &run).with_segment_size(1000));
    tx.send_all(&batch).await.expect("send");
    let mut bufs = rx.new_recv_buffers();
    assert_eq!(collect(&mut rx, &mut bufs, 40).await.len(), 40);
    let (s, r) = (tx.counters(), rx.counters());
    assert_eq!((s.datagrams_sent, s.bytes_sent), (40, 40_000));
    assert_eq!((r.datagrams_received, r.bytes_received), (40, 40_000));
    assert_eq!((s.send_errors, s.fallbacks, r.kernel_drops), (0, 0, 0));
    assert!(s.send_batches >= 1);
    match tx.backend() {
        // One datagram per call.
        Backend::Portable => assert_eq!(s.send_syscalls, 40),
        // 40 plain messages in batches of 32.
        Backend::Mmsg => assert_eq!(s.send_syscalls, 2),
        // 20 plain messages and one 20-segment super-datagram: 21 messages, one call.
        _ if tx.max_transmit_segments() > 1 => {
            assert_eq!((s.send_syscalls, s.gso_sends), (1, 1));
        }
        _ => assert_eq!(s.send_syscalls, 2),
    }
    assert!(r.recv_syscalls >= 1 && r.recv_batches >= 1);
}

/// A busy poll reads what the reactor has not reported yet (except on the
/// portable backend, which only reads through the reactor), and an empty
/// one leaves the reactor able to wake a waiting receive.
async fn a_busy_poll_reads_past_the_reactor_and_leaves_waiting_working(backend: Backend) {
    let mut rx = bind(backend, v4());
    let mut tx = bind(backend, v4());
    let to = rx.local_addr().expect("address");
    let mut bufs = rx.new_recv_buffers();
    let first = payload(1, 200);
    tx.send_all(&[Transmit::new(to, &first)])
        .await
        .expect("send");
    assert_eq!(collect(&mut rx, &mut bufs, 1).await, [first]);
    // Drained through the reactor: its readiness is now cleared.
    while rx.try_recv(&mut bufs).is_ok() {}

    let second = payload(2, 300);
    tx.send_all(&[Transmit::new(to, &second)])
        .await
        .expect("send");
    if rx.backend() == Backend::Portable {
        let arrived = tokio::time::timeout(WAIT, async {
            while rx.try_recv_now(&mut bufs).is_err() {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(arrived.is_ok(), "the busy poll never read the datagram");
    } else {
        // No await since the drain: the reactor has not seen the datagram.
        let reactor = rx
            .try_recv(&mut bufs)
            .expect_err("the reactor cannot know yet");
        assert_eq!(reactor.kind(), std::io::ErrorKind::WouldBlock);
        assert_eq!(rx.try_recv_now(&mut bufs).expect("busy poll"), 1);
    }
    let got: Vec<Vec<u8>> = bufs.datagrams().map(|(_, d)| d.to_vec()).collect();
    assert_eq!(got, [second]);
    let empty = rx.try_recv_now(&mut bufs).expect_err("nothing queued");
    assert_eq!(empty.kind(), std::io::ErrorKind::WouldBlock);

    let third = payload(3, 400);
    tx.send_all(&[Transmit::new(to, &third)])
        .await
        .expect("send");
    assert_eq!(collect(&mut rx, &mut bufs, 1).await, [third]);
}

macro_rules! every_backend {
    ($($test:ident),* $(,)?) => {
        mod portable { $(#[tokio::test] async fn $test() { super::$test(crate::Backend::Portable).await } )* }
        #[cfg(target_os = "linux")]
        mod mmsg { $(#[tokio::test] async fn $test() { super::$test(crate::Backend::Mmsg).await } )* }
        #[cfg(target_os = "linux")]
        mod offload { $(#[tokio::test] async fn $test() { super::$test(crate::Backend::Offload).await } )* }
        #[cfg(target_os = "linux")]
        mod io_uring { $(#[tokio::test] async fn $test() { super::$test(crate::Backend::IoUring).await } )* }
    };
}

every_backend!(
    every_datagram_arrives_intact,
    mixed_destinations_and_segment_sizes_in_one_batch,
    a_short_last_segment_arrives_short,
    a_gro_receiver_splits_coalesced_messages_by_stride,
    ipv6_loopback_round_trip,
    a_dual_stack_socket_reaches_an_ipv4_peer,
    a_refused_gso_send_falls_back_without_losing_or_repeating,
    a_closed_port_inside_a_batch_does_not_stall_the_rest,
    receives_write_only_into_the_buffers_they_are_given,
    a_bad_destination_fails_alone_and_keeps_gso,
    a_datagram_larger_than_its_slot_arrives_cut_to_the_slot,
    receive_buffers_are_reused_across_batches,
    counters_match_what_was_sent,
    a_busy_poll_reads_past_the_reactor_and_leaves_waiting_working,
);

#[tokio::test]
async fn a_forced_backend_is_the_one_in_use_when_the_kernel_has_it() {
    for backend in Backend::ALL {
        let socket = bind(backend, v4());
        if socket.capabilities().supports(backend) {
            assert_eq!(socket.backend(), backend);
            assert_eq!(socket.counters().fallbacks, 0);
        } else {
            assert_eq!(socket.counters().fallbacks, 1);
        }
    }
}

#[tokio::test]
async fn reuse_port_lets_two_sockets_share_a_port_and_its_absence_does_not() {
    let shared = SocketConfig {
        reuse_port: true,
        mtu_discovery: crate::MtuDiscovery::Do,
        ..SocketConfig::default()
    };
    let first = UdpSocket::bind(v4(), shared.clone()).expect("bind");
    let addr = first.local_addr().expect("address");
    assert!(UdpSocket::bind(addr, shared).is_ok());
    let lone = UdpSocket::bind(v4(), SocketConfig::default()).expect("bind");
    let taken = lone.local_addr().expect("address");
    assert!(UdpSocket::bind(taken, SocketConfig::default()).is_err());
}

/// `allocation_counter` installs a counting global allocator in this test
/// binary and counts per thread: the current-thread runtime polls sockets,
/// timers and the test on this thread, and only what it does is counted.
#[test]
fn a_batch_allocates_nothing_after_start_up() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _context = runtime.enter();
    for backend in Backend::ALL {
        let mut rx = bind(backend, v4());
        let mut tx = bind(backend, v4());
        let to = rx.local_addr().expect("address");
        let mut bufs = rx.new_recv_buffers();
        let (run, _) = run_of(1, &[1000; 8]);
        let singles: Vec<Vec<u8>> = (0..8).map(|i| payload(i, 500)).collect();
        let mut batch: Vec<Transmit<'_>> = singles.iter().map(|d| Transmit::new(to, d)).collect();
        batch.push(Transmit::new(to, &run).with_segment_size(1000));
        for round in 0..3 {
            let mut received = 0;
            let allocations = allocation_counter::measure(|| {
                runtime.block_on(async {
                    tx.send_all(&batch).await.expect("send");
                    while received < 16 {
                        let wait = tokio::time::timeout(WAIT, rx.recv(&mut bufs));
                        received += wait.await.expect("datagrams in time").expect("receive");
                    }
                });
            })
            .count_total;
            assert_eq!(received, 16, "{backend}");
            // The first round may set up what later rounds reuse.
            if round > 0 {
                assert_eq!(allocations, 0, "{backend} round {round}");
            }
        }
    }
}
