//! [`DriverConfig`]: how an endpoint driver sets up its socket and bounds its work.

use std::time::Duration;

use tern_sockio::{Backend, SocketConfig};

/// The default of [`DriverConfig::answer_wait`]: a few loopback round trips
/// with their work (a 32 KiB message and its answer take some 40 µs when
/// neither thread parks), and shorter than any network path's round trip.
const DEFAULT_ANSWER_WAIT: Duration = Duration::from_micros(100);

/// How a [`Driver`](crate::driver::Driver) sets up its socket and how much
/// work it does per loop turn. Builder style; `Default` gives the values
/// documented on each method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    backend: Option<Backend>,
    max_udp_payload: usize,
    send_buffer_size: usize,
    recv_buffer_size: usize,
    batch_size: usize,
    send_datagrams_per_turn: usize,
    recv_batches_per_turn: usize,
    reuse_port: bool,
    busy_poll: Duration,
    answer_wait: Duration,
    drain_timeout: Duration,
}

impl Default for DriverConfig {
    fn default() -> Self {
        let socket = SocketConfig::default();
        Self {
            backend: None,
            max_udp_payload: 1452,
            send_buffer_size: socket.send_buffer_size,
            recv_buffer_size: socket.recv_buffer_size,
            batch_size: socket.batch_size,
            send_datagrams_per_turn: 256,
            recv_batches_per_turn: 4,
            reuse_port: false,
            busy_poll: Duration::ZERO,
            answer_wait: DEFAULT_ANSWER_WAIT,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

impl DriverConfig {
    /// Forces a tern-sockio backend. Default `None` (Auto): the backend named
    /// by [`tern_sockio::BACKEND_ENV`] if set, else the best the kernel has.
    pub fn backend(mut self, backend: Option<Backend>) -> Self {
        self.backend = backend;
        self
    }

    /// Largest UDP payload in bytes the node may write per datagram, and the
    /// receive slot size without GRO. Default 1452 (what an Ethernet path
    /// carries over IPv6 with room for tunnels); at least 1.
    pub fn max_udp_payload(mut self, bytes: usize) -> Self {
        self.max_udp_payload = bytes.max(1);
        self
    }

    /// Requested `SO_SNDBUF` in bytes. Default 4 MiB.
    pub fn send_buffer_size(mut self, bytes: usize) -> Self {
        self.send_buffer_size = bytes;
        self
    }

    /// Requested `SO_RCVBUF` in bytes. Default 8 MiB: a deep queue is what
    /// keeps bursts from being dropped while the driver is busy.
    pub fn recv_buffer_size(mut self, bytes: usize) -> Self {
        self.recv_buffer_size = bytes;
        self
    }

    /// Messages per batching system call (receive slots, and messages per
    /// `sendmmsg`), 1..=1024. Default 64.
    pub fn batch_size(mut self, messages: usize) -> Self {
        self.batch_size = messages.clamp(1, 1024);
        self
    }

    /// Most datagrams the driver gathers from the node per loop turn: the send
    /// buffer holds this many datagrams of [`max_udp_payload`](Self::max_udp_payload)
    /// bytes. Default 256 (372 KiB at 1452 B); at least 1.
    pub fn send_datagrams_per_turn(mut self, datagrams: usize) -> Self {
        self.send_datagrams_per_turn = datagrams.max(1);
        self
    }

    /// Most receive batches handed to the node per loop turn before the
    /// driver looks at its timer and sends. Default 4; at least 1.
    pub fn recv_batches_per_turn(mut self, batches: usize) -> Self {
        self.recv_batches_per_turn = batches.max(1);
        self
    }

    /// Sets `SO_REUSEPORT`, so that several endpoints, one per core, each with
    /// its own driver, can bind the same port (the kernel keeps each peer on
    /// one of them). Default off.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.reuse_port = on;
        self
    }

    /// Busy polling: after a turn that received datagrams or was woken by a
    /// handle, the driver keeps polling the socket, its handles and its
    /// timer for this long instead of parking the thread, yielding to the
    /// runtime's other tasks between polls. Default zero (off).
    ///
    /// This trades CPU for latency: each side of a one-at-a-time exchange
    /// no longer waits for the kernel to wake a sleeping thread (on a
    /// virtual machine, a halted virtual CPU), which is most of a quiet
    /// round trip over loopback. While traffic keeps coming, the driver's
    /// thread stays fully busy; once it stops, the driver parks after
    /// `time`. Meant for a current-thread runtime per endpoint, where the
    /// yield runs the application's tasks on the same thread, pinned to a
    /// CPU of its own. Any datagram renews the time, one the node drops
    /// too: under a flood the driver's thread stays busy, as it would be
    /// handling the flood anyway.
    pub fn busy_poll(mut self, time: Duration) -> Self {
        self.busy_poll = time;
        self
    }

    /// Waiting for a quick answer: after a turn that sent packets whose
    /// acknowledgement is expected within this time (the sending
    /// connection's smoothed round trip is shorter), the driver polls the
    /// socket, its handles and its timer for this long instead of parking
    /// the thread, giving its CPU to any other thread that wants it
    /// between polls (`sched_yield`). Default 100 µs; zero turns it off.
    ///
    /// Only paths as short as loopback or a host's own bridge answer that
    /// quickly, and there a parked thread is most of the round trip: on a
    /// virtual machine each wake-up of a halted virtual CPU costs tens of
    /// microseconds, on each side of every exchange. The answer to an
    /// exchange opened from quiet (application data sent with nothing else
    /// in flight; control frames alone, such as a receiver's flow-control
    /// updates, open none) and expected later (any network path) is woken
    /// for early instead, where the driver has a precise timer (Linux): the
    /// driver parks, its timer wakes it this long before the answer is
    /// due, and it polls the same way until the answer arrives or half this
    /// long after it was due. A connection that sends behind packets in flight
    /// (a bulk transfer) is never woken early, and datagrams that arrive
    /// before the wake-up cancel it. What it costs is CPU while it waits:
    /// at most this long after each turn that sent a quick exchange (a
    /// loaded machine, whose round trips stretch past the window, stops it
    /// by itself), and at most one and a half times this long per exchange
    /// opened otherwise.
    pub fn answer_wait(mut self, time: Duration) -> Self {
        self.answer_wait = time;
        self
    }

    /// Once every handle is dropped, how long the driver may keep running
    /// the node until it is idle ([`Node::is_idle`](crate::proto::Node::is_idle):
    /// for an endpoint, its connections closed and drained) before it stops
    /// anyway. Default 10 s; the protocol's own deadlines (a graceful
    /// close's drain timeout, the closing period) normally end it sooner.
    pub fn drain_timeout(mut self, time: Duration) -> Self {
        self.drain_timeout = time;
        self
    }

    /// The configured drain timeout.
    pub fn drain_time(&self) -> Duration {
        self.drain_timeout
    }

    /// The configured busy-polling time (zero: off).
    pub fn busy_poll_time(&self) -> Duration {
        self.busy_poll
    }

    /// The configured time to wait for a quick answer (zero: off).
    pub fn answer_wait_time(&self) -> Duration {
        self.answer_wait
    }

    /// The configured largest UDP payload in bytes.
    pub fn udp_payload(&self) -> usize {
        self.max_udp_payload
    }

    /// The configured most datagrams gathered per turn.
    pub fn datagrams_per_turn(&self) -> usize {
        self.send_datagrams_per_turn
    }

    /// The configured most receive batches per turn.
    pub fn recv_batches(&self) -> usize {
        self.recv_batches_per_turn
    }

    /// The tern-sockio configuration of the driver's socket.
    pub fn socket_config(&self) -> SocketConfig {
        let mut socket = SocketConfig::default();
        socket.backend = self.backend;
        socket.batch_size = self.batch_size;
        socket.send_buffer_size = self.send_buffer_size;
        socket.recv_buffer_size = self.recv_buffer_size;
        socket.max_datagram_size = self.max_udp_payload;
        socket.reuse_port = self.reuse_port;
        socket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_reaches_the_socket_configuration_and_clamps_its_limits() {
        let config = DriverConfig::default()
            .backend(Some(Backend::Portable))
            .max_udp_payload(1200)
            .batch_size(5000)
            .send_datagrams_per_turn(0)
            .recv_batches_per_turn(0)
            .reuse_port(true)
            .busy_poll(Duration::from_micros(50));
        let socket = config.socket_config();
        assert_eq!(socket.backend, Some(Backend::Portable));
        assert_eq!(socket.max_datagram_size, 1200);
        assert_eq!(socket.batch_size, 1024);
        assert!(socket.reuse_port);
        assert_eq!((config.datagrams_per_turn(), config.recv_batches()), (1, 1));
        assert_eq!(config.busy_poll_time(), Duration::from_micros(50));
        assert_eq!(DriverConfig::default().busy_poll_time(), Duration::ZERO);
        assert_eq!(DriverConfig::default().udp_payload(), 1452);
    }
}
