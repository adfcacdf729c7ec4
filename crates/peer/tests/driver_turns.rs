//! What the driver does around a turn's sends, with toy nodes on real
//! loopback sockets: it lets the tasks that arrivals woke act before it
//! transmits (and, when they woke nobody, keeps its lock throughout the
//! turn), and it waits awake for an answer the node expects soon.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

mod driver_support;

use driver_support::{BACKENDS, PATIENCE, config, datagram, loopback, stop};
use quanta::Instant;
use tern_peer::driver::{Driver, DriverConfig, DriverHandle};
use tern_peer::proto::{Node, Transmit, TransmitLimits};
use tokio::sync::Notify;

/// Answers every datagram with one byte: whether its application task had
/// acted on the arrival when the answer was built.
struct Answerer {
    arrivals: VecDeque<SocketAddr>,
    /// Woken by `wake_receivers` for each turn with arrivals.
    app: Arc<Notify>,
    /// Arrivals the application task acted on.
    acted: usize,
    answered: usize,
}

impl Node for Answerer {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, _: &mut [u8]) {
        self.arrivals.push_back(from);
    }

    fn wake_receivers(&mut self, _: Instant) -> bool {
        self.app.notify_one();
        true
    }

    fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, buf: &mut [u8]) -> Option<Transmit> {
        let to = self.arrivals.pop_front()?;
        self.answered += 1;
        buf[0] = u8::from(self.acted >= self.answered);
        datagram(to, 1)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

#[tokio::test(flavor = "current_thread")]
async fn tasks_woken_by_arrivals_act_before_the_turn_transmits() {
    const EXCHANGES: usize = 20;
    for backend in BACKENDS {
        let app = Arc::new(Notify::new());
        let node = Answerer {
            arrivals: VecDeque::new(),
            app: Arc::clone(&app),
            acted: 0,
            answered: 0,
        };
        let (driver, handle) = Driver::bind(loopback(), node, &config(backend)).expect("bind");
        let task = tokio::spawn(driver.run());
        // The application: on the same thread, it acts through a hand-off,
        // which the driver takes before its transmits only if it let the
        // task run first.
        let acting = tokio::spawn({
            let handle = handle.clone();
            async move {
                loop {
                    app.notified().await;
                    handle.hand_off(|node: &mut Answerer| node.acted = node.answered + 1);
                }
            }
        });
        let peer = tokio::net::UdpSocket::bind(loopback()).await.expect("bind");
        peer.connect(handle.local_addr()).await.expect("connect");
        for _ in 0..EXCHANGES {
            peer.send(b"ask").await.expect("send");
            let mut answer = [0u8; 8];
            let n = tokio::time::timeout(PATIENCE, peer.recv(&mut answer))
                .await
                .expect("the answer arrives")
                .expect("recv");
            assert_eq!(
                &answer[..n],
                [1],
                "{backend:?}: answered before the task acted"
            );
        }
        acting.abort();
        let stopped = stop(handle, task).await;
        assert_eq!(stopped.node.answered, EXCHANGES);
    }
}

/// Hands a command off through its own driver's handle for every
/// datagram (as an application call that found the lock held does), wakes
/// no receiver, and answers each datagram with one byte: whether the
/// command had run when the answer was built.
struct HandsOff {
    handle: Arc<OnceLock<DriverHandle<HandsOff>>>,
    arrivals: VecDeque<SocketAddr>,
    handed_off: usize,
    ran: usize,
}

impl Node for HandsOff {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, _: &mut [u8]) {
        self.arrivals.push_back(from);
        if let Some(handle) = self.handle.get() {
            handle.hand_off(|node: &mut HandsOff| node.ran += 1);
            self.handed_off += 1;
        }
    }

    fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, buf: &mut [u8]) -> Option<Transmit> {
        let to = self.arrivals.pop_front()?;
        buf[0] = u8::from(self.ran >= self.handed_off);
        datagram(to, 1)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

#[tokio::test(flavor = "current_thread")]
async fn a_turn_that_woke_no_receiver_keeps_the_lock_until_it_ends() {
    const EXCHANGES: usize = 20;
    for backend in BACKENDS {
        let handle_cell = Arc::new(OnceLock::new());
        let node = HandsOff {
            handle: Arc::clone(&handle_cell),
            arrivals: VecDeque::new(),
            handed_off: 0,
            ran: 0,
        };
        let (driver, handle) = Driver::bind(loopback(), node, &config(backend)).expect("bind");
        let _ = handle_cell.set(handle.clone());
        let task = tokio::spawn(driver.run());
        let peer = tokio::net::UdpSocket::bind(loopback()).await.expect("bind");
        peer.connect(handle.local_addr()).await.expect("connect");
        for _ in 0..EXCHANGES {
            peer.send(b"ask").await.expect("send");
            let mut answer = [0u8; 8];
            let n = tokio::time::timeout(PATIENCE, peer.recv(&mut answer))
                .await
                .expect("the answer arrives")
                .expect("recv");
            // A driver that let the lock go and took it again before its
            // transmits would have run the command then.
            assert_eq!(
                &answer[..n],
                [0],
                "{backend:?}: the lock was taken twice in a turn that woke nobody"
            );
        }
        let stopped = stop(handle, task).await;
        // Each ran by the end of its turn.
        let HandsOff {
            handed_off, ran, ..
        } = stopped.node;
        assert_eq!((handed_off, ran), (EXCHANGES, EXCHANGES));
    }
}

/// Echoes every datagram and, after each echo, expects an answer within
/// `expect_in`; to an exchange the echo opened (`opens`, a request sent
/// from quiet), or behind packets still in flight (a transfer's).
struct Expecting {
    queue: VecDeque<(SocketAddr, Vec<u8>)>,
    expect_in: Duration,
    opens: bool,
    sent_at: Option<Instant>,
}

impl Node for Expecting {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, from: SocketAddr, d: &mut [u8]) {
        self.queue.push_back((from, d.to_vec()));
    }

    fn poll_transmit(
        &mut self,
        now: Instant,
        _: TransmitLimits,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let (to, bytes) = self.queue.pop_front()?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        self.sent_at = Some(now);
        datagram(to, bytes.len())
    }

    fn take_answer_expected(&mut self) -> Option<Instant> {
        self.sent_at.map(|at| at + self.expect_in)
    }

    fn take_exchange_opened(&mut self) -> Option<Instant> {
        let expected = self.sent_at.take().map(|at| at + self.expect_in);
        expected.filter(|_| self.opens)
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

/// One echo through a driver whose node expects an answer `expect_in`
/// after each send (to an exchange it opened: `opens`); how often the
/// driver read its socket in the 10 ms after the echo, and from 50 to 80 ms
/// after it.
async fn socket_reads_after_an_echo(
    config: DriverConfig,
    expect_in: Duration,
    opens: bool,
) -> (u64, u64) {
    let node = Expecting {
        queue: VecDeque::new(),
        expect_in,
        opens,
        sent_at: None,
    };
    let (driver, handle) = Driver::bind(loopback(), node, &config).expect("bind");
    let task = tokio::spawn(driver.run());
    let peer = tokio::net::UdpSocket::bind(loopback()).await.expect("bind");
    peer.connect(handle.local_addr()).await.expect("connect");
    peer.send(b"echo").await.expect("send");
    let mut answer = [0u8; 8];
    tokio::time::timeout(PATIENCE, peer.recv(&mut answer))
        .await
        .expect("the echo arrives")
        .expect("recv");
    let reads = |handle: &DriverHandle<Expecting>| handle.socket_counters().recv_syscalls;
    let echoed = reads(&handle);
    // Sleeping lets the driver's thread run the driver meanwhile.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let early = reads(&handle) - echoed;
    tokio::time::sleep(Duration::from_millis(40)).await;
    let late_from = reads(&handle);
    tokio::time::sleep(Duration::from_millis(30)).await;
    let late = reads(&handle) - late_from;
    stop(handle, task).await;
    (early, late)
}

#[tokio::test(flavor = "current_thread")]
async fn an_answer_expected_within_the_wait_keeps_the_driver_reading_then_it_parks() {
    for backend in BACKENDS {
        let config = config(backend).answer_wait(Duration::from_millis(30));
        let (early, late) =
            socket_reads_after_an_echo(config, Duration::from_millis(1), false).await;
        assert!(
            early > 10,
            "{backend:?}: read its socket {early} times while waiting"
        );
        // The 30 ms are over: the driver parked, and nothing wakes it.
        assert_eq!(late, 0, "{backend:?}: still reading after the wait");
    }
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "current_thread")]
async fn an_exchange_opened_is_read_for_around_its_answer_s_time() {
    for backend in BACKENDS {
        // Due 60 ms after the echo, waited for with 10 ms: parked until
        // 50 ms, then reading the socket until 65 ms (the precise timer
        // wakes it; where there is none it only parks).
        let config = config(backend).answer_wait(Duration::from_millis(10));
        let (early, late) =
            socket_reads_after_an_echo(config, Duration::from_millis(60), true).await;
        assert!(
            early <= 2,
            "{backend:?}: read its socket {early} times long before the answer"
        );
        assert!(
            late > 10,
            "{backend:?}: read its socket {late} times around the answer"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn sending_behind_packets_in_flight_leaves_the_driver_parked() {
    for backend in BACKENDS {
        // The same answer, expected of a send that followed others still in
        // flight (a transfer's next packets): its acknowledgements wake
        // the driver, which does not wake ahead of them.
        let config = config(backend).answer_wait(Duration::from_millis(10));
        let (early, late) =
            socket_reads_after_an_echo(config, Duration::from_millis(60), false).await;
        assert!(
            early + late <= 2,
            "{backend:?}: read its socket {early} + {late} times"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn with_the_wait_off_the_driver_stays_parked() {
    for backend in BACKENDS {
        let config = config(backend).answer_wait(Duration::ZERO);
        for expect_in in [1, 60] {
            let (early, late) =
                socket_reads_after_an_echo(config.clone(), Duration::from_millis(expect_in), true)
                    .await;
            assert!(
                early + late <= 2,
                "{backend:?}, answer in {expect_in} ms: read its socket {early} + {late} times"
            );
        }
    }
}
