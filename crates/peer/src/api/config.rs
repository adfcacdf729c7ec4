//! [`Config`]: everything an [`Endpoint`](crate::Endpoint) is built from,
//! in one builder.

use std::time::Duration;

use tern_sockio::Backend;
use tern_wire::IdentityKey;

use crate::driver::DriverConfig;
use crate::proto::{CongestionConfig, EndpointConfig, LedbatConfig};

/// How an endpoint is set up: its socket, its identity, and how its
/// connections behave. Builder style; every setting has the default its
/// method documents.
///
/// ```
/// use std::time::Duration;
/// use tern_peer::Config;
///
/// let config = Config::default()
///     .max_udp_payload(1452)
///     .idle_timeout(Duration::from_secs(60))
///     .rate_limit(Some(100_000_000 / 8)); // 100 Mbit/s per connection
/// # let _ = config;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub(crate) driver: DriverConfig,
    pub(crate) endpoint: EndpointConfig,
    pub(crate) identity: Option<IdentityKey>,
}

impl Config {
    /// The RSA identity peers connect to. Without one (the default) the
    /// endpoint only connects out; with one it also accepts.
    pub fn identity(mut self, key: IdentityKey) -> Self {
        self.identity = Some(key);
        self
    }

    /// Forces a tern-sockio backend. Default `None`: the one named by the
    /// `TERN_SOCKIO_BACKEND` environment variable if set, else the best the
    /// kernel offers.
    pub fn backend(mut self, backend: Option<Backend>) -> Self {
        self.driver = self.driver.backend(backend);
        self
    }

    /// The largest UDP payload Tern sends (default 1 452 bytes). Every
    /// connection starts at 1 200, which crosses any path, and probes up to
    /// this.
    pub fn max_udp_payload(mut self, bytes: usize) -> Self {
        let bytes = bytes.clamp(tern_wire::MIN_UDP_PAYLOAD, tern_wire::MAX_UDP_PAYLOAD);
        self.driver = self.driver.max_udp_payload(bytes);
        self.endpoint.connection.max_udp_payload = bytes;
        self
    }

    /// Requested `SO_SNDBUF` and `SO_RCVBUF` in bytes (defaults 4 MiB and
    /// 8 MiB; the kernel may cap them).
    pub fn socket_buffers(mut self, send: usize, receive: usize) -> Self {
        self.driver = self.driver.send_buffer_size(send).recv_buffer_size(receive);
        self
    }

    /// `SO_REUSEPORT`, for one endpoint per core on one port (default off).
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.driver = self.driver.reuse_port(on);
        self
    }

    /// Busy polling in the endpoint's driver (default zero: off): lower
    /// latency for CPU. See [`DriverConfig::busy_poll`].
    pub fn busy_poll(mut self, time: Duration) -> Self {
        self.driver = self.driver.busy_poll(time);
        self
    }

    /// Once the last handle of the endpoint is dropped, how long its
    /// driver may run on for its connections to drain and close (default
    /// 10 s). See [`DriverConfig::drain_timeout`].
    pub fn drain_timeout(mut self, time: Duration) -> Self {
        self.driver = self.driver.drain_timeout(time);
        self
    }

    /// A cap on each connection's sending rate, in bytes per second (token
    /// bucket; default none).
    pub fn rate_limit(mut self, bytes_per_second: Option<u64>) -> Self {
        self.endpoint.connection.rate_limit = bytes_per_second;
        self
    }

    /// A cap on the whole endpoint's sending rate, in bytes per second
    /// (token bucket; default none).
    pub fn endpoint_rate_limit(mut self, bytes_per_second: Option<u64>) -> Self {
        self.endpoint.rate_limit = bytes_per_second;
        self
    }

    /// The congestion controller of every connection of the endpoint
    /// (default [`CongestionConfig::Ledbat`]): LEDBAT for background
    /// transfers that yield to other traffic, [`CongestionConfig::cubic`]
    /// for a transfer someone waits on, which takes its share beside TCP.
    /// It governs what this endpoint sends; the peer's own choice governs
    /// what it sends back.
    ///
    /// ```
    /// use tern_peer::{CongestionConfig, Config};
    ///
    /// let config = Config::default().congestion(CongestionConfig::cubic());
    /// # let _ = config;
    /// ```
    pub fn congestion(mut self, congestion: CongestionConfig) -> Self {
        self.endpoint.connection.congestion = congestion;
        self
    }

    /// Chooses LEDBAT with this target queuing delay (default 100 ms,
    /// RFC 6817): how much delay Tern adds to a shared bottleneck before it
    /// yields. LEDBAT's other parameters are kept if it was already the
    /// choice, and are the defaults otherwise.
    pub fn ledbat_target(self, target: Duration) -> Self {
        let mut ledbat = match self.endpoint.connection.congestion {
            CongestionConfig::Ledbat(ledbat) => ledbat,
            _ => LedbatConfig::default(),
        };
        ledbat.target = target;
        self.congestion(CongestionConfig::Ledbat(ledbat))
    }

    /// How long without traffic before a keep-alive (default 10 s; `None`:
    /// never).
    pub fn keep_alive(mut self, interval: Option<Duration>) -> Self {
        self.endpoint.connection.keep_alive = interval;
        self
    }

    /// How long without a packet from the peer before a connection fails
    /// with [`ConnectionError::TimedOut`](crate::ConnectionError) (default 30 s).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.endpoint.connection.idle_timeout = timeout;
        self
    }

    /// How long `connect` may take (default 10 s).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.endpoint.connection.handshake_timeout = timeout;
        self
    }

    /// Flow-control windows: bytes of one stream, and of a whole
    /// connection, the peer may send ahead of what the application has
    /// read (defaults 16 MiB and 32 MiB).
    pub fn receive_windows(mut self, stream: u64, connection: u64) -> Self {
        self.endpoint.connection.stream_receive_window = stream;
        self.endpoint.connection.receive_window = connection;
        self
    }

    /// Bytes a stream holds until the peer acknowledges them (default 4 MiB).
    pub fn stream_send_buffer(mut self, bytes: usize) -> Self {
        self.endpoint.connection.stream_send_buffer = bytes;
        self
    }

    /// Bytes all streams of a connection hold together until the peer
    /// acknowledges them (default 4 MiB). One stream alone may use all of
    /// it (up to [`stream_send_buffer`](Self::stream_send_buffer)); several
    /// busy streams share it equally, so their writes take less each and
    /// the bytes copied into packets stay in cache. Messages count against
    /// [`message_send_buffer`](Self::message_send_buffer) instead.
    pub fn send_buffer(mut self, bytes: usize) -> Self {
        self.endpoint.connection.send_buffer = bytes;
        self
    }

    /// Bytes of messages a connection holds until the peer acknowledges
    /// them (default 16 MiB), large ones included: `send` waits while they
    /// are held, whatever the peer allows. A message larger than this is
    /// sent alone.
    pub fn message_send_buffer(mut self, bytes: usize) -> Self {
        self.endpoint.connection.message_send_buffer = bytes;
        self
    }

    /// Connections held at once (default 16 384).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.endpoint.max_connections = connections;
        self
    }

    /// Every protocol setting at once, for what the builder does not name.
    pub fn protocol(mut self, endpoint: EndpointConfig) -> Self {
        self.endpoint = endpoint;
        self.driver = self
            .driver
            .max_udp_payload(endpoint.connection.max_udp_payload);
        self
    }

    /// Every driver setting at once (per-turn bounds, batch size).
    pub fn driver(mut self, driver: DriverConfig) -> Self {
        self.driver = driver;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_size_reaches_both_the_socket_and_the_protocol_within_bounds() {
        let config = Config::default().max_udp_payload(100_000);
        assert_eq!(config.driver.udp_payload(), tern_wire::MAX_UDP_PAYLOAD);
        assert_eq!(
            config.endpoint.connection.max_udp_payload,
            tern_wire::MAX_UDP_PAYLOAD
        );
        let config = Config::default().max_udp_payload(1300);
        assert_eq!(config.driver.udp_payload(), 1300);
        assert_eq!(config.endpoint.connection.max_udp_payload, 1300);
    }

    #[test]
    fn ledbat_is_the_default_and_a_target_chooses_it_again() {
        let default = Config::default().endpoint.connection.congestion;
        assert_eq!(default, CongestionConfig::ledbat());
        let cubic = Config::default().congestion(CongestionConfig::cubic());
        assert_eq!(
            cubic.endpoint.connection.congestion,
            CongestionConfig::cubic()
        );
        let target = Duration::from_millis(25);
        let config = cubic.ledbat_target(target);
        let CongestionConfig::Ledbat(ledbat) = config.endpoint.connection.congestion else {
            panic!("ledbat_target chooses LEDBAT");
        };
        assert_eq!(ledbat.target, target);
    }
}
