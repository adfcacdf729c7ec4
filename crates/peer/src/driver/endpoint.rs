//! [`Driver`]: the one task per endpoint that owns the socket and runs a
//! [`Node`]; [`DriverHandle`]: how the application reaches the node.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};

use crossbeam_queue::SegQueue;
use tern_sockio::{Backend, CounterSnapshot, CountersHandle, RecvBuffers, UdpSocket};
use tokio::sync::Notify;

use crate::driver::config::DriverConfig;
use crate::driver::send_arena::{Filled, SendArena};
use crate::driver::stats::{DriverStats, Stats, bump};
use crate::driver::stopped::{DriverStopped, StopCause, Stopped};
use crate::proto::{Instant, Node};

mod timer;
mod wait;

use timer::Timer;
use wait::{AnswerWait, Spin, Woken};

/// The most payload bytes of one GSO message (the largest UDP payload over
/// IPv4): runs are kept within it so that each leaves as one message.
const MAX_GSO_BYTES: usize = 65_507;

/// Runs one [`Node`] over one UDP socket: the endpoint's only task.
///
/// Each loop turn reads the clock once and then, holding the node's lock:
/// hands the node up to [`DriverConfig::recv_batches_per_turn`] receive
/// batches, datagram by datagram, in place in the receive buffers; calls
/// `handle_timeout` if its deadline has passed; gathers its transmits into
/// the send arena (up to [`DriverConfig::send_datagrams_per_turn`]
/// datagrams, same-destination equal-size datagrams coalesced into GSO runs);
/// and asks for its next deadline. Then, without the lock, it sends the
/// batch. It sleeps until the socket is readable, the timer expires, the
/// socket is writable (only while a send is pending), or a
/// [`DriverHandle`] wakes it; a turn that stopped at one of its bounds yields
/// to the runtime and runs again at once.
///
/// Per packet there is no task, channel, lock, copy or allocation: buffers
/// are allocated here once, and the node's lock is taken once per turn
/// (handles take it for as long as their closure runs), twice when the
/// arrivals woke tasks ([`Node::wake_receivers`]): the driver lets it go
/// and yields before its transmits, so that they act first.
pub struct Driver<N> {
    socket: UdpSocket,
    shared: Arc<Shared<N>>,
    recv: RecvBuffers,
    arena: SendArena,
    config: DriverConfig,
    local: SocketAddr,
}

/// A command handed off to whoever takes the node's lock next.
type HandedOff<N> = Box<dyn FnOnce(&mut N) + Send>;

/// What the driver and its handles share.
struct Shared<N> {
    /// The node; `None` once the driver has ended (and given it back, or
    /// dropped it).
    node: Mutex<Option<N>>,
    /// Commands handles handed off while the lock was held
    /// ([`DriverHandle::hand_off`]): whoever takes the lock runs them
    /// first, in the order they came.
    handed_off: SegQueue<HandedOff<N>>,
    /// Why the driver ended, once it has.
    cause: OnceLock<StopCause>,
    wake: Notify,
    /// [`DriverHandle::stop`] was called: stop after this turn.
    stop: AtomicBool,
    /// Every handle is gone: run until the node is idle or the drain
    /// timeout passed.
    released: AtomicBool,
    stats: Stats,
    /// The socket the driver runs on now, as its handles see it.
    socket: Mutex<SocketInfo>,
    /// A socket to move to, set by [`DriverHandle::replace_socket`]: the
    /// driver takes it between two turns.
    replacement: Mutex<Option<UdpSocket>>,
}

/// What handles read of the driver's socket.
#[derive(Clone)]
struct SocketInfo {
    local: SocketAddr,
    backend: Backend,
    counters: CountersHandle,
}

impl SocketInfo {
    fn of(socket: &UdpSocket, local: SocketAddr) -> Self {
        Self {
            local,
            backend: socket.backend(),
            counters: socket.counters_handle(),
        }
    }
}

impl<N> Shared<N> {
    fn lock(&self) -> MutexGuard<'_, Option<N>> {
        // A handle's closure that panicked leaves the node as it was; the
        // driver carries on with it rather than spreading the panic.
        self.node.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node's lock, with the commands handed off before it run.
    fn lock_drained(&self) -> MutexGuard<'_, Option<N>> {
        let mut guard = self.lock();
        self.drain(&mut guard);
        guard
    }

    /// The node's lock if nobody holds it, with the commands handed off
    /// before it run.
    fn try_lock_drained(&self) -> Option<MutexGuard<'_, Option<N>>> {
        let mut guard = match self.node.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.drain(&mut guard);
        Some(guard)
    }

    /// Runs the commands handed off so far on the node (under its lock);
    /// once the node is gone they are dropped, which tells their callers.
    fn drain(&self, guard: &mut MutexGuard<'_, Option<N>>) {
        while let Some(command) = self.handed_off.pop() {
            if let Some(node) = guard.as_mut() {
                command(node);
            }
        }
    }

    fn socket_info(&self) -> MutexGuard<'_, SocketInfo> {
        self.socket.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_replacement(&self) -> Option<UdpSocket> {
        let mut replacement = self
            .replacement
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        replacement.take()
    }
}

impl<N: Node> Driver<N> {
    /// Binds a socket to `addr` as `config` says and puts `node` behind it.
    /// Must be called inside a tokio runtime with I/O and time enabled.
    pub fn bind(
        addr: SocketAddr,
        node: N,
        config: &DriverConfig,
    ) -> io::Result<(Self, DriverHandle<N>)> {
        let socket = UdpSocket::bind(addr, config.socket_config())?;
        Self::new(socket, node, config)
    }

    /// Puts `node` behind an already bound `socket`. `config` gives the
    /// per-turn bounds and the largest datagram; its socket settings are not
    /// applied again.
    pub fn new(
        socket: UdpSocket,
        node: N,
        config: &DriverConfig,
    ) -> io::Result<(Self, DriverHandle<N>)> {
        let local = socket.local_addr()?;
        let shared = Arc::new(Shared {
            node: Mutex::new(Some(node)),
            handed_off: SegQueue::new(),
            cause: OnceLock::new(),
            wake: Notify::new(),
            stop: AtomicBool::new(false),
            released: AtomicBool::new(false),
            stats: Stats::default(),
            socket: Mutex::new(SocketInfo::of(&socket, local)),
            replacement: Mutex::new(None),
        });
        let recv = socket.new_recv_buffers();
        let arena = SendArena::new(config.datagrams_per_turn(), config.udp_payload());
        let handle = DriverHandle {
            guard: Arc::new(HandleGuard(Arc::clone(&shared))),
        };
        let driver = Self {
            socket,
            shared,
            recv,
            arena,
            config: config.clone(),
            local,
        };
        Ok((driver, handle))
    }

    /// Runs until a handle calls [`DriverHandle::stop`], or, once every
    /// handle is dropped, until the node is idle ([`Node::is_idle`]: what
    /// it queued on the way out has left) or [`DriverConfig::drain_timeout`]
    /// passed; then sends what it had already taken from the node and gives
    /// back the node and the socket. An error of the socket itself (not of
    /// one datagram, which the socket skips and counts) ends it early and
    /// is returned. However it ends (a panic, or the future dropped,
    /// included), every handle's call from then on returns
    /// [`DriverStopped`] with the [`StopCause`], and a node not given back
    /// is dropped.
    ///
    /// A future to spawn (`tokio::spawn(driver.run())`) or to run on a thread
    /// of its own (`runtime.block_on(driver.run())`).
    pub async fn run(self) -> io::Result<Stopped<N>> {
        let exit = Exit(Arc::clone(&self.shared));
        let result = self.run_loop().await;
        let cause = match &result {
            Ok(_) => StopCause::Stopped,
            Err(e) => StopCause::socket(e),
        };
        let _ = exit.0.cause.set(cause);
        result
    }

    async fn run_loop(mut self) -> io::Result<Stopped<N>> {
        let shared = Arc::clone(&self.shared);
        // The node's deadlines, on tokio's millisecond timer; the wake-up
        // ahead of an expected answer, to the microsecond (`timer.rs`).
        let mut timer = Timer::coarse();
        let mut answer_timer = Timer::new();
        let mut received = false;
        let mut fired = false;
        let busy_poll = self.config.busy_poll_time();
        let mut answer = AnswerWait::new(self.config.answer_wait_time());
        // Until when the driver polls instead of parking (see
        // `DriverConfig::busy_poll`); renewed by every turn that was not
        // only its timer's.
        let mut spin_until = None;
        // A run is one GSO message: at most 64 segments and 65 507 bytes.
        let max_segments_cap = (MAX_GSO_BYTES / self.config.udp_payload()).max(1);
        // Set once every handle is gone: until when the node may drain.
        let mut drain_until: Option<Instant> = None;
        loop {
            if shared.stop.load(Ordering::Acquire) {
                break;
            }
            let now = Instant::now();
            if drain_until.is_none() && shared.released.load(Ordering::Acquire) {
                drain_until = Some(now + self.config.drain_time());
            }
            let more_queued;
            let arrived;
            // The turn's end, if it came under the lock the turn began
            // with (`None`: it is let go for the tasks the arrivals woke).
            let ended = {
                let mut guard = shared.lock_drained();
                let Some(node) = guard.as_mut() else {
                    break;
                };
                // 1. Datagrams, a bounded number of batches.
                let mut batches = 0;
                let mut datagrams = 0;
                if std::mem::take(&mut received) {
                    datagrams += self.deliver(node, now);
                    batches += 1;
                }
                let mut queued = false;
                while batches < self.config.recv_batches() {
                    match self.socket.try_recv(&mut self.recv) {
                        Ok(_) => datagrams += self.deliver(node, now),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                    batches += 1;
                    queued = batches == self.config.recv_batches();
                }
                more_queued = queued;
                arrived = datagrams;
                bump(&shared.stats.datagrams_in, datagrams);
                let mut refusals = 0;
                for (destination, reason) in self.arena.take_refused() {
                    node.handle_send_refused(now, destination, reason);
                    refusals += 1;
                }
                bump(&shared.stats.refusals, refusals);
                // 2. The timer, if its deadline (asked again after the
                //    datagrams, which may have moved it) has passed.
                if node.poll_timeout().is_some_and(|d| d <= now) {
                    node.handle_timeout(now);
                    bump(&shared.stats.timeouts, 1);
                }
                if datagrams > 0 && node.wake_receivers(now) {
                    None
                } else {
                    // A turn that woke nobody keeps the lock.
                    Some(self.end_turn(&mut guard, now, max_segments_cap, drain_until))
                }
            };
            let ended = match ended {
                Some(ended) => ended,
                None => {
                    // The tasks the datagrams woke run first, without the
                    // lock: what they hand over at once (an answer, a read
                    // that opens the window) leaves with this turn's ACKs.
                    tokio::task::yield_now().await;
                    let mut guard = shared.lock_drained();
                    self.end_turn(&mut guard, now, max_segments_cap, drain_until)
                }
            };
            let Some(TurnEnd {
                mut deadline,
                answer_expected,
                exchange_opened,
                idle,
                more_to_send,
            }) = ended
            else {
                break;
            };
            let busy = more_queued || more_to_send;
            bump(&shared.stats.turns, 1);
            let all_sent = self.arena.try_send(&mut self.socket)?;
            if !all_sent {
                bump(&shared.stats.send_waits, 1);
            }
            if let Some(until) = drain_until {
                if idle || now >= until {
                    break;
                }
                deadline = Some(deadline.map_or(until, |d| d.min(until)));
            }
            answer.after_turn(now, arrived > 0, answer_expected, exchange_opened);
            if busy && all_sent {
                // More work is waiting: let the runtime's other tasks run,
                // then take the next turn without sleeping.
                tokio::task::yield_now().await;
                continue;
            }
            // Only a precise timer can wake the driver ahead of an answer; a
            // millisecond one would wake it late.
            timer.set(deadline);
            answer_timer.set(answer.wake_at().filter(|_| answer_timer.is_precise()));
            if !fired && !busy_poll.is_zero() {
                spin_until = Some(now + busy_poll);
            }

            if let Some(socket) = shared.take_replacement() {
                self.move_to(socket);
            }
            let notified = pin!(shared.wake.notified());
            let spin = Spin::at(now, spin_until, answer.until(), deadline);
            let woken = self
                .wait(notified, [&mut timer, &mut answer_timer], spin)
                .await?;
            fired = false;
            match woken {
                Woken::Received => received = true,
                Woken::Wake => bump(&shared.stats.wakes, 1),
                Woken::Sent => {}
                Woken::Timer => fired = true,
            }
        }
        self.finish().await
    }

    /// Steps 3 and 4 of a turn, under the node's lock: transmits (unless
    /// earlier ones still wait for room), what handles handed off during
    /// the turn, then the next deadline and the end of the turn. `None`
    /// once the node is gone.
    fn end_turn(
        &mut self,
        guard: &mut MutexGuard<'_, Option<N>>,
        now: Instant,
        max_segments_cap: usize,
        drain_until: Option<Instant>,
    ) -> Option<TurnEnd> {
        let shared = &self.shared;
        let node = guard.as_mut()?;
        let mut more_to_send = false;
        if self.arena.is_empty() {
            let segments = self.socket.max_transmit_segments().min(max_segments_cap);
            let (filled, datagrams) = self.arena.fill(node, now, segments);
            bump(&shared.stats.datagrams_out, datagrams as u64);
            more_to_send = filled == Filled::Full;
        }
        shared.drain(guard);
        let node = guard.as_mut()?;
        let deadline = node.poll_timeout();
        let answer_expected = node.take_answer_expected();
        let exchange_opened = node.take_exchange_opened();
        node.end_turn(now);
        Some(TurnEnd {
            deadline,
            answer_expected,
            exchange_opened,
            idle: drain_until.is_some() && node.is_idle(),
            more_to_send,
        })
    }

    /// Runs on `socket` from now on. Called between turns, when every
    /// datagram received was handed to the node; what waits to be sent
    /// leaves from the new socket, and what the old one had not read yet
    /// is lost with it (the protocol sends it again).
    fn move_to(&mut self, socket: UdpSocket) {
        let local = self.shared.socket_info().local;
        self.recv = socket.new_recv_buffers();
        self.socket = socket;
        self.local = local;
    }

    /// Hands every datagram of the last receive to the node; how many.
    fn deliver(&mut self, node: &mut N, now: Instant) -> u64 {
        let mut count = 0;
        for (from, datagram) in self.recv.datagrams_mut() {
            node.handle_datagram(now, self.local, from, datagram);
            count += 1;
        }
        count
    }

    /// Sends what was taken from the node, then gives back node and socket.
    async fn finish(mut self) -> io::Result<Stopped<N>> {
        while !self.arena.is_empty() {
            let Self { socket, arena, .. } = &mut self;
            poll_fn(|cx| arena.poll_send(socket, cx)).await?;
        }
        let node = self
            .shared
            .lock()
            .take()
            .ok_or(io::Error::other(DriverStopped::new(StopCause::Stopped)))?;
        Ok(Stopped {
            node,
            socket: self.socket,
        })
    }
}

/// What the end of a turn found (see [`Driver::end_turn`]).
struct TurnEnd {
    /// The node's next deadline.
    deadline: Option<Instant>,
    /// When the node expects an answer to what it sent.
    answer_expected: Option<Instant>,
    /// When it expects an answer to an exchange it opened.
    exchange_opened: Option<Instant>,
    /// The node is idle while it drains.
    idle: bool,
    /// The send arena filled up: more waits to be sent.
    more_to_send: bool,
}

/// Ends a driver however [`Driver::run`] ends (returned, failed, panicked,
/// dropped): the cause is recorded if `run` did not record one, and a node
/// it did not give back is dropped outside the lock, so that every
/// application call from then on fails with [`DriverStopped`] (a node that
/// holds waiters wakes them when dropped).
struct Exit<N>(Arc<Shared<N>>);

impl<N> Drop for Exit<N> {
    fn drop(&mut self) {
        let cause = if std::thread::panicking() {
            StopCause::Panicked
        } else {
            StopCause::Cancelled
        };
        let _ = self.0.cause.set(cause);
        let node = self.0.lock().take();
        drop(node);
        // Commands handed off since are dropped, which tells their callers.
        drop(self.0.lock_drained());
    }
}

/// Tells the driver when the last handle goes: it drains the node, then
/// stops.
struct HandleGuard<N>(Arc<Shared<N>>);

impl<N> Drop for HandleGuard<N> {
    fn drop(&mut self) {
        self.0.released.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

/// The application's side of a [`Driver`]: reach the node, wake the driver,
/// read counters, stop it. Cheap to clone; when the last clone is dropped
/// the driver runs until the node is idle (or its drain timeout passed),
/// then stops.
pub struct DriverHandle<N> {
    guard: Arc<HandleGuard<N>>,
}

impl<N> Clone for DriverHandle<N> {
    fn clone(&self) -> Self {
        Self {
            guard: Arc::clone(&self.guard),
        }
    }
}

impl<N> std::fmt::Debug for DriverHandle<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverHandle")
            .field("local_addr", &self.local_addr())
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl<N> DriverHandle<N> {
    fn shared(&self) -> &Shared<N> {
        &self.guard.0
    }

    /// Runs `f` on the node under its lock, then wakes the driver so that it
    /// sees what `f` changed (new data to send, a timer moved). The driver
    /// waits for the lock while `f` runs: keep `f` short.
    pub fn with_node<R>(&self, f: impl FnOnce(&mut N) -> R) -> Result<R, DriverStopped> {
        let result = self.with_node_unwoken(f)?;
        self.wake();
        Ok(result)
    }

    /// Runs `f` on the node under its lock without waking the driver: for
    /// a closure that only looks, or that decides itself whether to
    /// [`wake`](Self::wake) it.
    pub fn with_node_unwoken<R>(&self, f: impl FnOnce(&mut N) -> R) -> Result<R, DriverStopped> {
        let mut guard = self.shared().lock_drained();
        let Some(node) = guard.as_mut() else {
            return Err(self.stopped());
        };
        Ok(f(node))
    }

    /// Runs `f` on the node like [`with_node_unwoken`](Self::with_node_unwoken)
    /// if nobody holds its lock; `Ok(None)` without running it if somebody
    /// (the driver's turn, most likely) does. A call that must not wait
    /// for the driver's turn then [`hand_off`](Self::hand_off)s instead.
    pub fn try_with_node_unwoken<R>(
        &self,
        f: impl FnOnce(&mut N) -> R,
    ) -> Result<Option<R>, DriverStopped> {
        let Some(mut guard) = self.shared().try_lock_drained() else {
            return Ok(None);
        };
        match guard.as_mut() {
            Some(node) => Ok(Some(f(node))),
            None => Err(self.stopped()),
        }
    }

    /// Hands `f` off to whoever takes the node's lock next (the driver,
    /// at the start of its next turn or before it ends the one it is in,
    /// or a handle), without waiting for the lock, and wakes the driver.
    /// Commands handed off run in the order they were handed off, and
    /// before whatever takes the lock after them: a handle's commands
    /// keep their order whether they ran at once or were handed off. A
    /// command handed off once the driver has ended is dropped unrun.
    pub fn hand_off(&self, f: impl FnOnce(&mut N) + Send + 'static) {
        self.shared().handed_off.push(Box::new(f));
        self.wake();
    }

    /// Whether the driver has ended (its cause is recorded), without
    /// taking the node's lock.
    pub fn is_stopped(&self) -> bool {
        self.shared().cause.get().is_some()
    }

    /// Why the driver ended ([`StopCause::Stopped`] until it records
    /// another).
    pub(crate) fn stopped(&self) -> DriverStopped {
        let cause = self.shared().cause.get().cloned();
        DriverStopped::new(cause.unwrap_or(StopCause::Stopped))
    }

    /// The time on the clock the driver passes to the node, the protocol's
    /// [`Instant`] (quanta's global clock): what the application passes to
    /// the node's commands that take a time. Only this level, where the
    /// node's own calls take it, shows the protocol's clock; the async API
    /// above it takes and gives `std::time::Duration` alone.
    pub fn now(&self) -> Instant {
        Instant::now()
    }

    /// Wakes the driver for a turn. Wakes that arrive while it is busy are
    /// remembered (one is enough) and never lost.
    pub fn wake(&self) {
        self.shared().wake.notify_one();
    }

    /// Asks the driver to stop after the turn it is in, drained or not; its
    /// [`run`](Driver::run) then returns the node and the socket.
    pub fn stop(&self) {
        self.shared().stop.store(true, Ordering::Release);
        self.wake();
    }

    /// Moves the driver to `socket` (bound, say, to another address) for
    /// its next turn, its node and state kept; the old socket is closed
    /// then. [`local_addr`](Self::local_addr), the backend and the
    /// socket's counters are the new socket's from now on. The node hears
    /// of the new local address with the next datagram; the peers of an
    /// endpoint learn it from the next packet each connection sends (the
    /// protocol validates the new path, as after a NAT rebinding).
    pub fn replace_socket(&self, socket: UdpSocket) -> io::Result<()> {
        let local = socket.local_addr()?;
        if self
            .shared()
            .node
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
        {
            return Err(io::Error::other(self.stopped()));
        }
        *self.shared().socket_info() = SocketInfo::of(&socket, local);
        *self
            .shared()
            .replacement
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(socket);
        self.wake();
        Ok(())
    }

    /// The address the driver's socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared().socket_info().local
    }

    /// The tern-sockio backend of the socket (the new one after
    /// [`replace_socket`](Self::replace_socket)).
    pub fn backend(&self) -> Backend {
        self.shared().socket_info().backend
    }

    /// The driver's counters now.
    pub fn stats(&self) -> DriverStats {
        self.shared().stats.snapshot()
    }

    /// The socket's counters now (system calls, datagrams, drops).
    pub fn socket_counters(&self) -> CounterSnapshot {
        self.shared().socket_info().counters.snapshot()
    }
}
