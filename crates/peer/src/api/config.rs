//! [`Config`]: everything an [`Endpoint`](crate::Endpoint) is built from,
//! in one builder.

use std::time::Duration;

use tern_sockio::Backend;
use tern_wire::IdentityKey;

use crate::driver::DriverConfig;
use crate::proto::{CongestionConfig, EndpointConfig, LedbatConfig, RelayConfig};
use tern_wire::TicketPolicy;

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
    /// The identity peers connect to (RSA-2048 or X25519, see
    /// [`IdentityKey`]). Without one (the default) the endpoint only
    /// connects out; with one it also accepts.
    pub fn identity(mut self, key: IdentityKey) -> Self {
        self.identity = Some(key);
        self
    }

    /// Whether this endpoint, when it connects, proves its identity to the
    /// peer (default on; only with an [`identity`](Self::identity)). An
    /// RSA identity costs one signature per connect (about a millisecond)
    /// and 555 bytes in the first packet; an X25519 identity is proven
    /// inside the intro (two more key exchanges, some 0.1 ms of the
    /// responder's CPU, no extra bytes). The peer learns who connected
    /// ([`Incoming::identity`](crate::Incoming::identity)). See
    /// [`ConnectionConfig::prove_identity`](crate::proto::ConnectionConfig::prove_identity).
    pub fn prove_identity(mut self, on: bool) -> Self {
        self.endpoint.connection.prove_identity = on;
        self
    }

    /// Whether this endpoint accepts only peers that prove their identity
    /// (default off). [`Endpoint::accept`](crate::Endpoint::accept) then
    /// yields a connection only once its proof verified; data sent before
    /// the proof is not delivered (the peer sends it again), and a peer
    /// that proves nothing within the handshake timeout is closed. See
    /// [`ConnectionConfig::require_identity`](crate::proto::ConnectionConfig::require_identity).
    pub fn require_identity(mut self, on: bool) -> Self {
        self.endpoint.connection.require_identity = on;
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

    /// How long the endpoint's driver polls for an answer expected within
    /// that time instead of parking (default 100 µs; zero: off). See
    /// [`DriverConfig::answer_wait`].
    pub fn answer_wait(mut self, time: Duration) -> Self {
        self.driver = self.driver.answer_wait(time);
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
    /// with [`ConnectionError::TimedOut`](crate::ConnectionError) (default 30 s;
    /// never less than three probe timeouts of the path).
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

    /// The largest message accepted from a peer, in bytes (default 1 GiB,
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::proto::DEFAULT_MAX_MESSAGE_SIZE)).
    /// A larger one ends the connection as a protocol violation. Another
    /// limit is told to the peer in its first packet after the handshake,
    /// and from then on the peer's `send` refuses a larger message
    /// ([`SendError::TooLarge`](crate::SendError::TooLarge)); until then
    /// the peer assumes the default, so a server with a smaller limit
    /// should expect clients to check
    /// [`Connection::max_message_size`](crate::Connection::max_message_size)
    /// before their first large message.
    pub fn max_message_size(mut self, bytes: u64) -> Self {
        self.endpoint.connection.max_message_size = bytes;
        self
    }

    /// Connections held at once (default 16 384).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.endpoint.max_connections = connections;
        self
    }

    /// Incoming connections held at once from one source IP address
    /// (default 1 024: a large NAT's clients, a sixteenth of the default
    /// table). An intro past it is refused before any RSA work, and its
    /// initiator's `connect` times out; connections this endpoint opened
    /// do not count.
    pub fn max_connections_per_address(mut self, connections: usize) -> Self {
        self.endpoint.max_connections_per_address = connections;
        self
    }

    /// Incoming connections held at once from one network, a /24 for IPv4
    /// or a /48 for IPv6 (default 4 096, a quarter of the default table),
    /// so that a few hosts cannot take the table with many addresses of
    /// their own network. An intro past it is refused before any RSA work.
    pub fn max_connections_per_prefix(mut self, connections: usize) -> Self {
        self.endpoint.max_connections_per_prefix = connections;
        self
    }

    /// How long an incoming connection must have carried no application
    /// data before a new peer may take its place in a full table (default
    /// 10 s). `None`: never; a full table then refuses every new peer.
    /// A connection carrying traffic is never evicted, nor one this
    /// endpoint opened; an evicted one fails with
    /// [`ConnectionError::Evicted`](crate::ConnectionError).
    pub fn evict_idle_after(mut self, idle: Option<Duration>) -> Self {
        self.endpoint.evict_idle_after = idle;
        self
    }

    /// The intro budget: how many intros per second the endpoint decrypts
    /// at most, each an RSA operation of about 1-2 ms of CPU, and how many
    /// at once after a quiet period (defaults 200 per second and 50; zero
    /// counts as one). Under a flood, intros past it are answered with a
    /// Retry (a stateless token, no RSA), so honest initiators come back
    /// with a validated address and need no more than their share of it;
    /// sources not validated get half of it at most. It bounds what an
    /// intro flood costs, and how many new peers per second get in.
    /// The limits per unvalidated source are in
    /// [`IntroLimiterConfig`](crate::proto::IntroLimiterConfig), through
    /// [`protocol`](Self::protocol).
    pub fn intro_budget(mut self, per_second: u64, burst: u64) -> Self {
        self.endpoint.intro_limits.total_rate = per_second;
        self.endpoint.intro_limits.total_burst = burst;
        self
    }

    /// The resumption tickets this endpoint issues as a server (default:
    /// ten minutes' lifetime; `None`: none, and every resumed intro is
    /// refused, its client falling back to a full intro). A client that
    /// holds a ticket reconnects with no operation on a static key.
    pub fn tickets(mut self, policy: Option<TicketPolicy>) -> Self {
        self.endpoint.tickets = policy;
        self
    }

    /// How many servers' tickets this endpoint keeps as a client, one per
    /// server key (default 256; 0: none). `connect` to a key it holds a
    /// live ticket for uses it, once, and counts it in
    /// [`EndpointStats::connects_resumed`](crate::proto::EndpointStats::connects_resumed).
    pub fn ticket_cache(mut self, servers: usize) -> Self {
        self.endpoint.ticket_cache = servers;
        self
    }

    /// What this endpoint relays as a rendezvous (pairs at once, bytes per
    /// second per pair, idle timeout) and how long its `connect_via`
    /// tries direct paths before asking for a relay (default:
    /// [`RelayConfig::default`]).
    pub fn relay(mut self, relay: RelayConfig) -> Self {
        self.endpoint.relay = relay;
        self
    }

    /// Every protocol setting at once, for what the builder does not name.
    /// It replaces what the protocol setters before it chose: call it
    /// first.
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

    #[test]
    fn the_door_setters_reach_the_protocol_and_default_to_its_defaults() {
        let defaults = EndpointConfig::default();
        let config = Config::default().endpoint;
        assert_eq!(config.max_connections_per_address, 1_024);
        assert_eq!(config.max_connections_per_prefix, 4_096);
        assert_eq!(config.evict_idle_after, Some(Duration::from_secs(10)));
        assert_eq!(config.intro_limits, defaults.intro_limits);
        assert_eq!(
            (
                config.intro_limits.total_rate,
                config.intro_limits.total_burst
            ),
            (200, 50)
        );

        let config = Config::default()
            .max_connections_per_address(3)
            .max_connections_per_prefix(7)
            .evict_idle_after(None)
            .intro_budget(40, 8)
            .endpoint;
        assert_eq!(config.max_connections_per_address, 3);
        assert_eq!(config.max_connections_per_prefix, 7);
        assert_eq!(config.evict_idle_after, None);
        assert_eq!(config.intro_limits.total_rate, 40);
        assert_eq!(config.intro_limits.total_burst, 8);
        assert_eq!(
            config.intro_limits.per_source_rate, defaults.intro_limits.per_source_rate,
            "the budget leaves the limits per source alone"
        );
    }

    #[test]
    fn a_server_capped_at_one_connection_per_address_refuses_a_second_before_any_rsa() {
        use crate::{ConnectError, Endpoint};
        use rand_core::OsRng;
        use std::net::SocketAddr;

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let localhost = SocketAddr::from(([127, 0, 0, 1], 0));
            let key = IdentityKey::generate(&mut OsRng).expect("RSA key generation");
            let server = Endpoint::bind(
                localhost,
                Config::default()
                    .identity(key)
                    .max_connections_per_address(1),
            )
            .expect("binds");
            let public = server.public().expect("an identity").clone();
            // A short handshake timeout: the refused connect is expected
            // to end with it (a bound on the test, not a measurement).
            let client = || {
                let config = Config::default().handshake_timeout(Duration::from_millis(500));
                Endpoint::bind(localhost, config).expect("binds")
            };
            let (first, second) = (client(), client());
            let (held, accepted) =
                tokio::join!(first.connect(server.local_addr(), &public), server.accept());
            let (held, _accepted) = (held.expect("connects"), accepted.expect("accepted"));
            let refused = second.connect(server.local_addr(), &public).await;
            assert!(
                matches!(refused, Err(ConnectError::HandshakeTimedOut)),
                "{refused:?}"
            );
            let stats = server.stats().protocol;
            assert!(stats.intros_address_capped >= 1, "{stats:?}");
            assert_eq!(stats.intros_decrypted, 1, "the refused intros cost no RSA");
            assert_eq!(stats.intros_accepted, 1);
            drop(held);
        });
    }
}
