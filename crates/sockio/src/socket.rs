//! [`UdpSocket`]: one bound UDP socket, its backend, readiness and counters.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;
use tokio::net::UdpSocket as TokioUdp;

use crate::backend::{State, Stop};
use crate::capabilities::Capabilities;
use crate::config::{BACKEND_ENV, Backend, GRO_SLOT_LEN, MtuDiscovery, SocketConfig, parse_choice};
use crate::counters::{CounterSnapshot, Counters, CountersHandle, bump};
use crate::cursor::Cursor;
use crate::recv::RecvBuffers;
use crate::transmit::{Refusals, SendRefusal, Sent, Transmit};

/// A UDP socket that sends and receives in batches through the best backend
/// the kernel allows.
///
/// Readiness comes from tokio: the socket is registered with the runtime's
/// reactor (epoll on Linux) as a `tokio::net::UdpSocket`, and every backend's
/// system calls run inside `try_io`, so a full or empty socket parks the task
/// until the kernel says otherwise. Methods take `&mut self`: one driver task
/// owns the socket, and the scratch space for a batch is part of it.
pub struct UdpSocket {
    io: TokioUdp,
    engine: Engine,
    max_datagram_size: usize,
}

/// The backend and what it needs to fall back, apart from the tokio socket
/// so that both can be borrowed inside `try_io`.
struct Engine {
    state: State,
    counters: Arc<Counters>,
    caps: Capabilities,
    batch: usize,
    v6: bool,
    /// `UDP_GRO` is on for this socket: receive slots must hold 64 KiB.
    gro: bool,
    /// What the last send call skipped, and why.
    refusals: Refusals,
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local_addr", &self.io.local_addr().ok())
            .field("backend", &self.engine.state.kind())
            .field("gro", &self.engine.gro)
            .finish_non_exhaustive()
    }
}

impl UdpSocket {
    /// Binds a socket to `addr` with `config`. Must be called inside a tokio
    /// runtime with I/O enabled.
    ///
    /// The backend is `config.backend`, else the one named by
    /// [`BACKEND_ENV`](crate::BACKEND_ENV), else the best the probe found. A
    /// backend the kernel cannot give becomes the best one below it that it
    /// can (counted in `fallbacks`).
    pub fn bind(addr: SocketAddr, config: SocketConfig) -> io::Result<Self> {
        let socket = open(addr, &config)?;
        Self::with_socket(socket, addr.is_ipv6(), &config)
    }

    /// Takes over a socket the caller bound (or received from elsewhere),
    /// with `config`'s backend, batch size, datagram size and buffer sizes;
    /// its address and `SO_REUSEPORT` are the caller's. The socket is made
    /// non-blocking. Must be called inside a tokio runtime with I/O enabled.
    pub fn from_std(socket: std::net::UdpSocket, config: SocketConfig) -> io::Result<Self> {
        let v6 = socket.local_addr()?.is_ipv6();
        let socket = Socket::from(socket);
        configure(&socket, v6, &config)?;
        Self::with_socket(socket, v6, &config)
    }

    /// Sets up the backend for an open, bound socket.
    fn with_socket(socket: Socket, v6: bool, config: &SocketConfig) -> io::Result<Self> {
        let caps = Capabilities::get();
        let wanted = match config.backend {
            Some(backend) => backend,
            None => match std::env::var(BACKEND_ENV) {
                Ok(name) => parse_choice(&name)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
                    .unwrap_or_else(|| caps.best()),
                Err(_) => caps.best(),
            },
        };
        let counters = Arc::new(Counters::default());
        let batch = config.batch();
        let gso_segments = caps.max_gso_segments;
        let mut backend = caps.at_most(wanted);
        let state = loop {
            match State::new(backend, batch, v6, gso_segments) {
                Ok(state) => break state,
                Err(e) if backend != Backend::Portable => {
                    tracing::warn!(error = %e, %backend, "sockio: backend could not be set up; falling back");
                    backend = caps.at_most(lower(backend));
                }
                Err(e) => return Err(e),
            }
        };
        if state.kind() != wanted {
            tracing::warn!(%wanted, got = %state.kind(), "sockio: forced backend unavailable here");
            bump(&counters.fallbacks, 1);
        }
        let gro = config.gro && caps.gro && state.reads_gro_stride() && set_gro(&socket, true);
        let io = TokioUdp::from_std(socket.into())?;
        Ok(Self {
            io,
            engine: Engine {
                state,
                counters,
                caps,
                batch,
                v6,
                gro,
                refusals: Refusals::with_capacity(batch),
            },
            max_datagram_size: config.max_datagram_size.max(1),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The backend in use now (it changes only by falling back).
    pub fn backend(&self) -> Backend {
        self.engine.state.kind()
    }

    /// What the kernel offered at start-up.
    pub fn capabilities(&self) -> Capabilities {
        self.engine.caps
    }

    /// The most segments a [`Transmit`] should carry for one super-datagram
    /// now: the GSO limit, or 1 without GSO. Larger transmits still work:
    /// they are cut into several messages.
    pub fn max_transmit_segments(&self) -> usize {
        self.engine.state.max_segments()
    }

    /// Whether `UDP_GRO` is on (receive slots must then be [`GRO_SLOT_LEN`] bytes).
    pub fn gro_enabled(&self) -> bool {
        self.engine.gro
    }

    /// Receive buffers sized for this socket: one slot per batch message, each
    /// [`GRO_SLOT_LEN`] bytes with GRO, else the configured datagram size.
    pub fn new_recv_buffers(&self) -> RecvBuffers {
        let slot = if self.engine.gro {
            GRO_SLOT_LEN
        } else {
            self.max_datagram_size
        };
        RecvBuffers::new(self.engine.batch, slot)
    }

    /// The counters now.
    pub fn counters(&self) -> CounterSnapshot {
        self.engine.counters.snapshot()
    }

    /// A handle to read the counters from elsewhere.
    pub fn counters_handle(&self) -> CountersHandle {
        CountersHandle(Arc::clone(&self.engine.counters))
    }

    /// Sends as much of the batch as the socket takes now, without waiting.
    ///
    /// Returns how far it got; `WouldBlock` if nothing went out. A datagram
    /// the kernel refuses for its destination alone (ICMP unreachable, too
    /// big for the path) is skipped and counted in `send_errors`, so one bad
    /// peer never stalls the others. A refused feature (GSO, the backend
    /// itself) makes the socket fall back and send the same bytes again the
    /// simpler way: nothing is lost or sent twice.
    ///
    /// Like tokio's own `try_*` methods it answers `WouldBlock` until the
    /// reactor has seen the socket writable once; drivers use
    /// [`poll_send`](Self::poll_send), which waits for that.
    pub fn try_send(&mut self, transmits: &[Transmit<'_>]) -> io::Result<Sent> {
        if transmits
            .iter()
            .any(|t| t.segment_size == Some(0) && !t.contents.is_empty())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a transmit's segment size must not be zero",
            ));
        }
        let mut cursor = Cursor::default();
        let Self { io, engine, .. } = self;
        engine.refusals.clear();
        let result = io.try_io(Interest::WRITABLE, || {
            loop {
                match engine.state.send(
                    io,
                    transmits,
                    &mut cursor,
                    &engine.counters,
                    &mut engine.refusals,
                ) {
                    Ok(()) => return Ok(()),
                    // What went out is reported; a lasting error shows again on the next call.
                    Err(Stop::WouldBlock | Stop::Failed(_)) if !cursor.at_start() => return Ok(()),
                    Err(Stop::WouldBlock) => return Err(io::ErrorKind::WouldBlock.into()),
                    Err(Stop::Failed(e)) => return Err(e),
                    Err(Stop::Refused(e) | Stop::GsoRefused(e)) => engine.fall_back(io, &e)?,
                }
            }
        });
        if !cursor.at_start() {
            bump(&engine.counters.send_batches, 1);
        }
        result.map(|()| cursor.sent(transmits))
    }

    /// The transmits the last send call skipped because the kernel refused
    /// them for their destination or size (also counted in `send_errors`),
    /// by their index in the batch handed to that call. At most one batch
    /// of them is listed.
    pub fn refusals(&self) -> &[SendRefusal] {
        self.engine.refusals.as_slice()
    }

    /// Sends as much of the batch as the socket takes, waiting for room if
    /// none is left.
    pub fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        transmits: &[Transmit<'_>],
    ) -> Poll<io::Result<Sent>> {
        loop {
            ready!(self.io.poll_send_ready(cx))?;
            match self.try_send(transmits) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return Poll::Ready(other),
            }
        }
    }

    /// [`poll_send`](Self::poll_send) as a future.
    pub async fn send(&mut self, transmits: &[Transmit<'_>]) -> io::Result<Sent> {
        poll_fn(|cx| self.poll_send(cx, transmits)).await
    }

    /// Sends the whole batch, waiting for room as often as needed.
    pub async fn send_all(&mut self, transmits: &[Transmit<'_>]) -> io::Result<()> {
        let mut rest = transmits;
        while !rest.is_empty() {
            let sent = self.send(rest).await?;
            rest = &rest[sent.transmits..];
            if sent.segments > 0
                && let Some(first) = rest.first()
            {
                let mut tail = [first.skip_segments(sent.segments)];
                loop {
                    let more = self.send(&tail).await?;
                    if more.transmits == 1 {
                        break;
                    }
                    tail[0] = tail[0].skip_segments(more.segments);
                }
                rest = &rest[1..];
            }
        }
        Ok(())
    }

    /// Receives what is queued, up to one batch, into `bufs` without waiting.
    ///
    /// Returns the number of datagrams (GRO messages count for each datagram
    /// they hold); `WouldBlock` if none are queued. The messages are in
    /// [`RecvBuffers::messages`] and [`RecvBuffers::datagrams`] until the next receive.
    pub fn try_recv(&mut self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        bufs.set_filled(0);
        self.check_recv_slots(bufs)?;
        let Self { io, engine, .. } = self;
        io.try_io(Interest::READABLE, || engine.recv(io, bufs))
    }

    /// Like [`try_recv`](Self::try_recv), but makes the system call whatever
    /// the reactor last reported: for a driver that busy-polls the socket
    /// instead of parking until epoll says it is readable. A `WouldBlock`
    /// here leaves the reactor's readiness as it was, so a task that later
    /// waits in [`poll_recv`](Self::poll_recv) still wakes for new datagrams.
    ///
    /// Every empty poll is one system call and is counted as one. The
    /// portable backend receives through tokio's socket, which answers from
    /// the reactor's readiness: with it this is [`try_recv`](Self::try_recv).
    pub fn try_recv_now(&mut self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        bufs.set_filled(0);
        self.check_recv_slots(bufs)?;
        let Self { io, engine, .. } = self;
        engine.recv(io, bufs)
    }

    /// Refuses receive slots too small for GRO's 64 KiB messages while GRO is on.
    fn check_recv_slots(&self, bufs: &RecvBuffers) -> io::Result<()> {
        if self.engine.gro && bufs.slot_len() < GRO_SLOT_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "GRO is on: receive slots must be at least GRO_SLOT_LEN bytes",
            ));
        }
        Ok(())
    }

    /// Receives up to one batch, waiting until something arrives.
    pub fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut RecvBuffers,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.io.poll_recv_ready(cx))?;
            match self.try_recv(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return Poll::Ready(other),
            }
        }
    }

    /// [`poll_recv`](Self::poll_recv) as a future.
    pub async fn recv(&mut self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        poll_fn(|cx| self.poll_recv(cx, bufs)).await
    }

    /// Test hook: the kernel refuses the next GSO message with `EIO`.
    #[cfg(test)]
    pub(crate) fn inject_gso_refusal(&mut self) {
        match &mut self.engine.state {
            #[cfg(target_os = "linux")]
            State::Offload(b) => b.scratch.fail_next_gso = true,
            #[cfg(target_os = "linux")]
            State::IoUring(b) => b.scratch.fail_next_gso = true,
            _ => {}
        }
    }

    /// Test hook: the socket buffer fills after `messages` more messages (Mmsg, Offload).
    #[cfg(test)]
    pub(crate) fn inject_full_buffer_after(&mut self, messages: usize) {
        match &mut self.engine.state {
            #[cfg(target_os = "linux")]
            State::Mmsg(b) => b.scratch.would_block_after = Some(messages),
            #[cfg(target_os = "linux")]
            State::Offload(b) => b.scratch.would_block_after = Some(messages),
            _ => {}
        }
    }

    /// Test hook: the next `io_uring_enter` is refused with `EPERM`.
    #[cfg(test)]
    pub(crate) fn inject_ring_refusal(&mut self) {
        #[cfg(target_os = "linux")]
        if let State::IoUring(b) = &mut self.engine.state {
            b.fail_next_enter = true;
        }
    }

    /// Test hook: the next `io_uring_enter` submits its batch, then fails
    /// before waiting, leaving the operations in flight.
    #[cfg(test)]
    pub(crate) fn inject_ring_failure_in_flight(&mut self) {
        #[cfg(target_os = "linux")]
        if let State::IoUring(b) = &mut self.engine.state {
            b.fail_next_wait = true;
        }
    }
}

/// The next simpler backend.
fn lower(backend: Backend) -> Backend {
    match backend {
        Backend::IoUring => Backend::Offload,
        Backend::Offload => Backend::Mmsg,
        _ => Backend::Portable,
    }
}

impl Engine {
    /// One receive through the backend, falling back as often as the kernel
    /// refuses one.
    fn recv(&mut self, io: &TokioUdp, bufs: &mut RecvBuffers) -> io::Result<usize> {
        loop {
            match self.state.recv(io, bufs, &self.counters) {
                Ok(n) => return Ok(n),
                Err(Stop::WouldBlock) => return Err(io::ErrorKind::WouldBlock.into()),
                Err(Stop::Failed(e)) => return Err(e),
                Err(Stop::Refused(e) | Stop::GsoRefused(e)) => self.fall_back(io, &e)?,
            }
        }
    }

    /// Replaces a refused backend with the next one the kernel supports
    /// (dropping the old one, io_uring ring included) and turns GRO off if
    /// the new one cannot read its stride.
    fn fall_back(&mut self, io: &TokioUdp, why: &io::Error) -> io::Result<()> {
        let from = self.state.kind();
        if from == Backend::Portable {
            return Err(io::Error::new(
                why.kind(),
                format!("portable backend refused: {why}"),
            ));
        }
        let caps = self.caps;
        let mut to = caps.at_most(lower(from));
        self.state = loop {
            match State::new(to, self.batch, self.v6, caps.max_gso_segments) {
                Ok(s) => break s,
                Err(_) if to != Backend::Portable => to = caps.at_most(lower(to)),
                Err(e) => return Err(e),
            }
        };
        tracing::warn!(error = %why, %from, %to, "sockio: backend refused at run time; falling back");
        bump(&self.counters.fallbacks, 1);
        if self.gro && !self.state.reads_gro_stride() {
            self.gro = !set_gro(&socket2::SockRef::from(io), false);
        }
        Ok(())
    }
}

/// Creates, configures and binds the socket (non-blocking, for tokio).
fn open(addr: SocketAddr, config: &SocketConfig) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    #[cfg(all(
        unix,
        not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
    ))]
    if config.reuse_port {
        socket.set_reuse_port(true)?;
    }
    configure(&socket, addr.is_ipv6(), config)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// What every socket gets, bound here or by the caller: non-blocking,
/// the buffer sizes, the drop count, path MTU discovery.
fn configure(socket: &Socket, v6: bool, config: &SocketConfig) -> io::Result<()> {
    socket.set_nonblocking(true)?;
    crate::sockopt::set_buffer_sizes(socket, config.send_buffer_size, config.recv_buffer_size);
    #[cfg(target_os = "linux")]
    {
        use crate::sockopt::set_int;
        // SO_RXQ_OVFL attaches the socket's drop count to every receive; a
        // kernel without it only loses the count.
        let _ = nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::RxqOvfl, &1);
        let pmtu = match config.mtu_discovery {
            MtuDiscovery::SystemDefault => None,
            MtuDiscovery::Do => Some((libc::IP_PMTUDISC_DO, libc::IPV6_PMTUDISC_DO)),
            MtuDiscovery::Probe => Some((libc::IP_PMTUDISC_PROBE, libc::IPV6_PMTUDISC_PROBE)),
        };
        if let Some((for_v4, for_v6)) = pmtu {
            if v6 {
                set_int(socket, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, for_v6)?;
                // A dual-stack socket sends to IPv4 peers under the IPv4
                // option: without it those datagrams would be fragmented
                // instead of refused, and a path MTU probe would "succeed".
                if !socket.only_v6()? {
                    set_int(socket, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, for_v4)?;
                }
            } else {
                set_int(socket, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, for_v4)?;
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (config.mtu_discovery, v6);
    Ok(())
}

/// Turns `UDP_GRO` on or off; whether the kernel took it.
fn set_gro(socket: &Socket, on: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::UdpGroSegment, &on).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (socket, on);
        false
    }
}
