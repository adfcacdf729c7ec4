//! The endpoint driver on real loopback sockets, with toy nodes, each test
//! once with the Portable backend and once with Auto (the best the kernel
//! has, or what `TERN_SOCKIO_BACKEND` names).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

mod driver_support;

use driver_support::{BACKENDS, PATIENCE, config, datagram, loopback, stop};
use quanta::Instant;
use tern_peer::driver::{Driver, DriverHandle};
use tern_peer::proto::{Node, SendRefused, Transmit, TransmitLimits};
use tern_sockio::Backend;

const PAYLOAD: usize = 1200;

/// The byte at `i` of datagram `seq`: every datagram's contents are a
/// function of its sequence number, so corruption and mix-ups show.
fn pattern(seq: u64, i: usize) -> u8 {
    (seq as usize).wrapping_mul(31).wrapping_add(i) as u8
}

/// Sends `total` numbered datagrams to `to`, in GSO runs as large as the
/// driver allows, with at most `window` not yet credited by the sink
/// (unlimited when `None`).
struct Blaster {
    to: SocketAddr,
    total: u64,
    next: u64,
    credited: u64,
    window: Option<u64>,
}

impl Blaster {
    fn new(to: SocketAddr, total: u64, window: Option<u64>) -> Self {
        Self {
            to,
            total,
            next: 0,
            credited: 0,
            window,
        }
    }
}

impl Node for Blaster {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, d: &mut [u8]) {
        if let Ok(bytes) = <[u8; 8]>::try_from(&*d) {
            self.credited = self.credited.max(u64::from_le_bytes(bytes));
        }
    }

    fn poll_transmit(
        &mut self,
        _: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let allowed = match self.window {
            Some(w) => (self.credited + w).min(self.total),
            None => self.total,
        };
        let size = PAYLOAD.min(limits.max_datagram_size);
        let fit = (buf.len() / size).min(limits.max_segments) as u64;
        let count = allowed.saturating_sub(self.next).min(fit);
        if count == 0 {
            return None;
        }
        for (k, datagram) in buf.chunks_mut(size).take(count as usize).enumerate() {
            let seq = self.next + k as u64;
            datagram[..8].copy_from_slice(&seq.to_le_bytes());
            for (i, b) in datagram.iter_mut().enumerate().skip(8) {
                *b = pattern(seq, i);
            }
        }
        self.next += count;
        Some(Transmit {
            destination: self.to,
            len: size * count as usize,
            segment_size: (count > 1).then_some(size),
            ttl: None,
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

/// Counts numbered datagrams, checks their contents and that none comes
/// twice; credits the sender every 64 and at the end.
#[derive(Default)]
struct Sink {
    seen: Vec<bool>,
    received: u64,
    duplicates: u64,
    corrupt: u64,
    credit_to: Option<SocketAddr>,
    credit_due: bool,
    credit: bool,
}

impl Sink {
    fn new(total: u64, credit: bool) -> Self {
        Self {
            seen: vec![false; total as usize],
            credit,
            ..Self::default()
        }
    }
}

impl Node for Sink {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, d: &mut [u8]) {
        let Some(seq) = d.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
            self.corrupt += 1;
            return;
        };
        let seq = u64::from_le_bytes(seq);
        let intact = d.len() == PAYLOAD
            && d.iter()
                .enumerate()
                .skip(8)
                .all(|(i, b)| *b == pattern(seq, i));
        match self.seen.get_mut(seq as usize) {
            Some(seen) if intact => {
                if *seen {
                    self.duplicates += 1;
                } else {
                    *seen = true;
                    self.received += 1;
                }
            }
            _ => self.corrupt += 1,
        }
        self.credit_to = Some(from);
        if self.credit
            && (self.received.is_multiple_of(64) || self.received == self.seen.len() as u64)
        {
            self.credit_due = true;
        }
    }

    fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, buf: &mut [u8]) -> Option<Transmit> {
        let to = self.credit_to.filter(|_| self.credit_due)?;
        self.credit_due = false;
        buf[..8].copy_from_slice(&self.received.to_le_bytes());
        datagram(to, 8)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

/// Waits until `done` holds for the node behind `handle`.
async fn until<N>(handle: &DriverHandle<N>, what: &str, done: impl Fn(&N) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if handle.with_node(|n| done(n)).expect("driver running") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_100_000_datagram_transfer_arrives_exactly_once_and_intact() {
    const TOTAL: u64 = 100_000;
    for backend in BACKENDS {
        let (sink, sink_handle) =
            Driver::bind(loopback(), Sink::new(TOTAL, true), &config(backend)).expect("bind");
        let to = sink_handle.local_addr();
        let (blaster, blaster_handle) = Driver::bind(
            loopback(),
            Blaster::new(to, TOTAL, Some(512)),
            &config(backend),
        )
        .expect("bind");
        let sink_task = tokio::spawn(sink.run());
        let blaster_task = tokio::spawn(blaster.run());
        until(&sink_handle, "every datagram", |s| s.received == TOTAL).await;
        let sink = stop(sink_handle, sink_task).await;
        let blaster = stop(blaster_handle, blaster_task).await;
        assert!(sink.node.seen.iter().all(|s| *s), "{backend:?}");
        assert_eq!(
            (sink.node.duplicates, sink.node.corrupt),
            (0, 0),
            "{backend:?}"
        );
        assert_eq!(blaster.node.next, TOTAL);
        let sent = blaster.socket.counters();
        assert_eq!(sent.datagrams_sent, TOTAL, "{backend:?}");
        if backend == Some(Backend::Portable) {
            assert_eq!(sent.send_syscalls, TOTAL);
        } else if blaster.socket.max_transmit_segments() > 1 {
            assert!(sent.gso_sends > 0, "Auto with GSO sent runs: {sent:?}");
        }
    }
}

/// Timers armed through the handle; a datagram "cancel" cancels the second.
struct Timers {
    pending: Vec<Instant>,
    fired: Vec<(Instant, Instant)>,
    cancelled: Option<Instant>,
}

impl Node for Timers {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, d: &mut [u8]) {
        if d == b"cancel"
            && let Some(victim) = self.cancelled
        {
            self.pending.retain(|t| *t != victim);
        }
    }

    fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, _: &mut [u8]) -> Option<Transmit> {
        None
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.pending.iter().min().copied()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.pending.sort();
        let due = self.pending.iter().take_while(|t| **t <= now).count();
        for deadline in self.pending.drain(..due) {
            self.fired.push((deadline, now));
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn timers_fire_in_order_never_early_and_a_cancelled_one_never() {
    for backend in BACKENDS {
        let node = Timers {
            pending: Vec::new(),
            fired: Vec::new(),
            cancelled: None,
        };
        let (driver, handle) = Driver::bind(loopback(), node, &config(backend)).expect("bind");
        let task = tokio::spawn(driver.run());
        let now = quanta::Clock::new().now();
        let ms = |n: u64| now + Duration::from_millis(n);
        let (first, cancelled, second, last) = (ms(20), ms(200), ms(40), ms(300));
        handle
            .with_node(|n| {
                n.pending = vec![last, cancelled, first, second];
                n.cancelled = Some(cancelled);
            })
            .expect("running");
        let poker = std::net::UdpSocket::bind(loopback()).expect("bind");
        poker.send_to(b"cancel", handle.local_addr()).expect("send");
        until(&handle, "the last timer", |n| n.pending.is_empty()).await;
        let stopped = stop(handle.clone(), task).await;
        let fired = &stopped.node.fired;
        let deadlines: Vec<Instant> = fired.iter().map(|(d, _)| *d).collect();
        assert_eq!(deadlines, [first, second, last], "{backend:?}");
        for (deadline, at) in fired {
            assert!(at >= deadline, "{backend:?}: fired before its deadline");
        }
        assert!(fired.windows(2).all(|w| w[0].1 <= w[1].1));
        let stats = handle.stats();
        assert!((1..=3).contains(&stats.timeouts), "{backend:?}: {stats:?}");
        // Every turn had a cause: the first, a wake from the handle, the
        // datagram, or one of the four deadlines (at most two turns each,
        // the second when tokio's timer fires a hair before the node's
        // clock reaches the deadline). A timer that fired at once, turn
        // after turn, would show here.
        assert!(
            stats.turns <= 1 + stats.wakes + stats.datagrams_in + 2 * 4,
            "{backend:?}: {stats:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_faster_than_its_receiver_loses_nothing_inside_the_driver_and_never_spins() {
    const TOTAL: u64 = 200_000;
    for backend in BACKENDS {
        let (sink, sink_handle) =
            Driver::bind(loopback(), Sink::new(TOTAL, false), &config(backend)).expect("bind");
        let to = sink_handle.local_addr();
        let (blaster, blaster_handle) =
            Driver::bind(loopback(), Blaster::new(to, TOTAL, None), &config(backend))
                .expect("bind");
        let sink_task = tokio::spawn(sink.run());
        let blaster_task = tokio::spawn(blaster.run());
        until(&blaster_handle, "the blaster to finish", |b| {
            b.next == TOTAL
        })
        .await;
        // Everything the node produced is in the socket's counters once the
        // driver has sent what it gathered; then it goes idle.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while blaster_handle.socket_counters().datagrams_sent < TOTAL {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{backend:?}: sends stuck"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let idle_from = blaster_handle.stats();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let idle_to = blaster_handle.stats();
        // Idle: no datagram comes, no timer is set, nobody wakes it.
        assert!(
            idle_to.turns - idle_from.turns <= 2,
            "{backend:?}: {idle_from:?} -> {idle_to:?}"
        );
        let stats = blaster_handle.stats();
        let blaster = stop(blaster_handle, blaster_task).await;
        let sink = stop(sink_handle, sink_task).await;
        let sent = blaster.socket.counters();
        assert_eq!(stats.datagrams_out, TOTAL);
        assert_eq!(
            sent.datagrams_sent + sent.send_errors,
            TOTAL,
            "{backend:?}: {sent:?}"
        );
        // A full socket costs one failed call per wait, never a loop of them.
        assert!(
            sent.send_syscalls <= sent.datagrams_sent + 2 * stats.turns,
            "{backend:?}: {sent:?} {stats:?}"
        );
        let got = sink.socket.counters();
        assert!(sink.node.received <= TOTAL);
        assert_eq!((sink.node.duplicates, sink.node.corrupt), (0, 0));
        assert_eq!(sink.node.received, got.datagrams_received, "{backend:?}");
        eprintln!(
            "{backend:?}: {} of {TOTAL} arrived, {} dropped by the receiver's kernel queue, {} send waits",
            sink.node.received, got.kernel_drops, stats.send_waits
        );
    }
}

/// Echoes every datagram back to its source, and counts what it saw.
#[derive(Default)]
struct Echo {
    queue: VecDeque<(SocketAddr, Vec<u8>)>,
    seen: u64,
    dropped_by: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Echo {
    fn drop(&mut self) {
        if let Some(tx) = self.dropped_by.take() {
            let _ = tx.send(());
        }
    }
}

impl Node for Echo {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, d: &mut [u8]) {
        self.seen += 1;
        self.queue.push_back((from, d.to_vec()));
    }

    fn poll_transmit(
        &mut self,
        _: Instant,
        limits: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let (to, bytes) = self.queue.pop_front()?;
        let len = bytes.len().min(limits.max_datagram_size);
        buf[..len].copy_from_slice(&bytes[..len]);
        datagram(to, len)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_last_handle_ends_the_task_and_releases_node_and_socket() {
    for backend in BACKENDS {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut node = Echo::default();
        node.dropped_by = Some(tx);
        let (driver, handle) = Driver::bind(loopback(), node, &config(backend)).expect("bind");
        let addr = handle.local_addr();
        let task = tokio::spawn(driver.run());
        let other = handle.clone();
        drop(handle);
        tokio::task::yield_now().await;
        assert!(!task.is_finished(), "a clone still holds the driver");
        drop(other);
        let stopped = tokio::time::timeout(PATIENCE, task)
            .await
            .expect("the task ends")
            .expect("no panic")
            .expect("no error");
        assert_eq!(stopped.socket.local_addr().expect("addr"), addr);
        drop(stopped);
        rx.await
            .expect("the node was dropped with the task's output");
        // The port is free again.
        std::net::UdpSocket::bind(addr).expect("rebind the driver's port");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_busy_polling_driver_answers_beside_other_tasks_and_parks_once_traffic_stops() {
    const EXCHANGES: u64 = 20;
    for backend in BACKENDS {
        let config = config(backend).busy_poll(Duration::from_millis(20));
        let (driver, handle) = Driver::bind(loopback(), Echo::default(), &config).expect("bind");
        let task = tokio::spawn(driver.run());
        // A task on the same thread: it only runs if the spinning driver yields.
        let peer = tokio::net::UdpSocket::bind(loopback()).await.expect("bind");
        peer.connect(handle.local_addr()).await.expect("connect");
        let mut answer = [0u8; 64];
        for i in 0..EXCHANGES {
            let request = i.to_be_bytes();
            peer.send(&request).await.expect("send");
            let n = tokio::time::timeout(PATIENCE, peer.recv(&mut answer))
                .await
                .expect("the echo arrives")
                .expect("recv");
            assert_eq!(&answer[..n], request, "{backend:?}");
            // A pause within the busy-poll time: a parked driver would not
            // read the socket meanwhile, a spinning one keeps reading it.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let polled = handle.socket_counters().recv_syscalls;
        assert!(
            polled > 10 * EXCHANGES,
            "{backend:?}: the driver read its socket only {polled} times"
        );
        // Traffic has stopped: after its busy-poll time the driver parks, and
        // nothing (no timer, no datagram, no handle) wakes it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let parked = handle.socket_counters().recv_syscalls;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            handle.socket_counters().recv_syscalls,
            parked,
            "{backend:?}: still polling"
        );
        let stopped = stop(handle, task).await;
        assert_eq!(stopped.node.seen, EXCHANGES);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn garbage_from_a_third_socket_reaches_the_node_and_is_echoed_without_a_panic() {
    for backend in BACKENDS {
        let (driver, handle) =
            Driver::bind(loopback(), Echo::default(), &config(backend)).expect("bind");
        let task = tokio::spawn(driver.run());
        let to = handle.local_addr();
        // A tern-sockio socket for its deep receive queue: the echoes wait
        // there until every garbage datagram has gone out.
        let mut stranger =
            tern_sockio::UdpSocket::bind(loopback(), tern_sockio::SocketConfig::default())
                .expect("bind");
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut sizes = Vec::new();
        for i in 0..200usize {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = match i {
                0 => 0,
                1 => 2000,
                _ => (state % 1600) as usize,
            };
            let bytes: Vec<u8> = (0..len).map(|k| (state >> (k % 56)) as u8).collect();
            stranger
                .send_all(&[tern_sockio::Transmit::new(to, &bytes)])
                .await
                .expect("send");
            sizes.push(len);
        }
        until(&handle, "every garbage datagram", |e| e.seen == 200).await;
        let mut bufs = stranger.new_recv_buffers();
        let mut echoed = Vec::new();
        while echoed.len() < 200 {
            tokio::time::timeout(PATIENCE, stranger.recv(&mut bufs))
                .await
                .expect("echo arrives")
                .expect("recv");
            for (from, datagram) in bufs.datagrams() {
                assert_eq!(from, to);
                echoed.push(datagram.len());
            }
        }
        // Longer than the largest payload: cut to it, on receive or on echo.
        let expected: Vec<usize> = sizes.iter().map(|len| (*len).min(1452)).collect();
        assert_eq!(echoed, expected, "{backend:?}");
        let stopped = stop(handle, task).await;
        assert_eq!(stopped.node.seen, 200);
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_sharing_a_port_with_reuse_port_together_receive_from_every_peer() {
    for backend in BACKENDS {
        let config = config(backend).reuse_port(true);
        let (first, first_handle) =
            Driver::bind(loopback(), Echo::default(), &config).expect("bind");
        let port = first_handle.local_addr();
        let (second, second_handle) =
            Driver::bind(port, Echo::default(), &config).expect("bind the same port");
        let tasks = [tokio::spawn(first.run()), tokio::spawn(second.run())];
        let peers: Vec<std::net::UdpSocket> = (0..64)
            .map(|_| std::net::UdpSocket::bind(loopback()).expect("bind"))
            .collect();
        for peer in &peers {
            peer.send_to(b"hi", port).expect("send");
        }
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let seen = |h: &DriverHandle<Echo>| h.with_node(|e| e.seen).expect("running");
        while seen(&first_handle) + seen(&second_handle) < 64 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{backend:?}: datagrams missing"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(seen(&first_handle) + seen(&second_handle), 64);
        let [a, b] = tasks;
        stop(first_handle, a).await;
        stop(second_handle, b).await;
    }
}

/// Sends one datagram to each address in turn; notes the refusals.
struct Refused {
    to: Vec<SocketAddr>,
    refused: Vec<(SocketAddr, SendRefused)>,
}

impl Node for Refused {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {}

    fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, buf: &mut [u8]) -> Option<Transmit> {
        let destination = self.to.pop()?;
        buf[..4].copy_from_slice(b"ping");
        datagram(destination, 4)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}

    fn handle_send_refused(&mut self, _: Instant, destination: SocketAddr, reason: SendRefused) {
        self.refused.push((destination, reason));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_datagram_the_kernel_refuses_is_reported_to_the_node_and_the_others_go_out() {
    for backend in BACKENDS {
        let peer = std::net::UdpSocket::bind(loopback()).expect("bind");
        let good = peer.local_addr().expect("addr");
        let nowhere = SocketAddr::from(([127, 0, 0, 1], 0));
        let node = Refused {
            to: vec![good, nowhere, good],
            refused: Vec::new(),
        };
        let (driver, handle) = Driver::bind(loopback(), node, &config(backend)).expect("bind");
        let task = tokio::spawn(driver.run());
        until(&handle, "the refusal", |n| !n.refused.is_empty()).await;
        let stopped = stop(handle, task).await;
        assert_eq!(
            stopped.node.refused,
            [(nowhere, SendRefused::Invalid)],
            "{backend:?}"
        );
        let counters = stopped.socket.counters();
        assert_eq!(
            (counters.datagrams_sent, counters.send_errors),
            (2, 1),
            "{backend:?}"
        );
        peer.set_nonblocking(true).expect("nonblocking");
        let mut buf = [0u8; 16];
        for _ in 0..2 {
            let (len, _) = peer
                .recv_from(&mut buf)
                .expect("both good datagrams arrived");
            assert_eq!(&buf[..len], b"ping");
        }
    }
}
