//! What a connection and an endpoint may be tuned with, and the defaults.

use std::time::Duration;

use tern_congestion::LedbatConfig;
use tern_wire::KeyConfig;

use crate::connection::path::mtu::PathMtuConfig;
use crate::endpoint::intro_limit::IntroLimiterConfig;

/// The flow-control window of a stream before its receiver's first
/// MaxStreamData: a constant, so neither side needs the other's
/// configuration before the first packet.
pub const INITIAL_STREAM_WINDOW: u64 = 64 * 1024;
/// The connection's flow-control window before its receiver's first MaxData.
pub const INITIAL_CONNECTION_WINDOW: u64 = 256 * 1024;
/// Streams of each direction a peer may open before it hears MaxStreams.
pub const INITIAL_MAX_STREAMS: u64 = 8;

/// How one connection behaves. Every field has a documented default.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// The largest UDP payload to probe for (default 1 452 bytes: a
    /// 1 500-byte Ethernet path under IPv6). Every connection starts at
    /// 1 200, which crosses any path, and probes upward.
    pub max_udp_payload: usize,
    /// Bytes of one stream the peer may send ahead of what the application
    /// has read (default 16 MiB: a 1 GB/s path with 16 ms of round trip).
    pub stream_receive_window: u64,
    /// Bytes of all streams and messages together the peer may send ahead
    /// of what the application has taken (default 32 MiB).
    pub receive_window: u64,
    /// Bytes a stream holds until the peer acknowledges them (default 4 MiB);
    /// a write takes what fits.
    pub stream_send_buffer: usize,
    /// Bytes all streams of the connection hold together until the peer
    /// acknowledges them (default 4 MiB: one stream alone may fill its
    /// buffer, while several share the same memory, each entitled to an
    /// equal part). Fewer bytes to copy from keeps the copies into packets
    /// in cache; large messages are not counted (each holds at most
    /// `stream_send_buffer`, and their number is bounded by the peer).
    pub send_buffer: usize,
    /// Bytes of small messages (those that fit one packet) held until
    /// acknowledged before `send_message` refuses more (default 16 MiB).
    /// Larger messages are bounded by the peer's limit on concurrent
    /// one-way streams instead.
    pub message_send_buffer: usize,
    /// The largest message accepted from the peer (default 1 GiB).
    pub max_message_size: u64,
    /// Bidirectional streams the peer may have open at once (default 100).
    pub max_concurrent_streams: u64,
    /// Large messages (each travels on a one-way stream of its own) the peer
    /// may have in flight, or delivered and not yet taken, at once
    /// (default 64).
    pub max_concurrent_messages: u64,
    /// Unreliable datagrams kept for the application before the oldest is
    /// dropped (default 1 024).
    pub datagram_receive_queue: usize,
    /// How long without a packet in either direction before a Ping keeps
    /// the path (and NAT mappings) alive (default 10 s; `None`: never).
    pub keep_alive: Option<Duration>,
    /// How long without any packet from the peer before the connection is
    /// given up (default 30 s).
    pub idle_timeout: Duration,
    /// How long a handshake may take before `connect` fails (default 10 s).
    pub handshake_timeout: Duration,
    /// The round-trip time assumed before the first sample (default 333 ms,
    /// RFC 9002 §6.2.2); the intro is first re-sent after three times it.
    pub initial_rtt: Duration,
    /// The longest this side delays an ACK (default 25 ms).
    pub max_ack_delay: Duration,
    /// LEDBAT's parameters (the datagram size is set from
    /// `max_udp_payload`).
    pub ledbat: LedbatConfig,
    /// A cap on this connection's sending rate in bytes per second
    /// (token bucket; default none).
    pub rate_limit: Option<u64>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            max_udp_payload: tern_wire::DEFAULT_UDP_PAYLOAD,
            stream_receive_window: 16 << 20,
            receive_window: 32 << 20,
            stream_send_buffer: 4 << 20,
            send_buffer: 4 << 20,
            message_send_buffer: 16 << 20,
            max_message_size: 1 << 30,
            max_concurrent_streams: 100,
            max_concurrent_messages: 64,
            datagram_receive_queue: 1024,
            keep_alive: Some(Duration::from_secs(10)),
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            initial_rtt: tern_reliability::DEFAULT_INITIAL_RTT,
            max_ack_delay: Duration::from_millis(25),
            ledbat: LedbatConfig::default(),
            rate_limit: None,
        }
    }
}

impl ConnectionConfig {
    /// The path MTU search this configuration asks for.
    pub(crate) fn path_mtu(&self) -> PathMtuConfig {
        PathMtuConfig {
            max: self
                .max_udp_payload
                .clamp(tern_wire::MIN_UDP_PAYLOAD, tern_wire::MAX_UDP_PAYLOAD),
            ..PathMtuConfig::default()
        }
    }
}

/// How an endpoint behaves.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct EndpointConfig {
    /// Every connection's configuration.
    pub connection: ConnectionConfig,
    /// How many intros (each an RSA decryption) are processed, per source
    /// and in total.
    pub intro_limits: IntroLimiterConfig,
    /// Connections held at once (default 16 384).
    pub max_connections: usize,
    /// Packet protection limits (the key update interval).
    pub keys: KeyConfig,
    /// A cap on the whole endpoint's sending rate in bytes per second
    /// (token bucket; default none).
    pub rate_limit: Option<u64>,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            connection: ConnectionConfig::default(),
            intro_limits: IntroLimiterConfig::default(),
            max_connections: 16_384,
            keys: KeyConfig::default(),
            rate_limit: None,
        }
    }
}
