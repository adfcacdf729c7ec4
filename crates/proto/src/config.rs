//! What a connection and an endpoint may be tuned with, and the defaults.

use std::time::Duration;

use tern_congestion::{
    AnyController, Cubic, CubicConfig, CubicConfigError, Ledbat, LedbatConfig, LedbatConfigError,
    Reno, RenoConfig, RenoConfigError,
};
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
///
/// What a connection holds to send is bounded by this side alone, whatever
/// streams and credit the peer grants: stream bytes until acknowledged by
/// `send_buffer` (grown with the congestion window to at most four times
/// its value), messages until acknowledged by `message_send_buffer` (one
/// message larger than it is taken alone), datagrams not yet sent by
/// `datagram_send_queue`. By default that is at most 16 + 16 MiB and
/// 1 024 datagrams (about 1.1 MiB), plus one message beyond the bound.
/// A write then takes less, and `send_message` refuses, until the peer
/// acknowledges; the queued datagrams are let go, oldest first.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// The largest UDP payload to probe for (default 1 452 bytes: a
    /// 1 500-byte Ethernet path under IPv6). Every connection starts at
    /// 1 200, which crosses any path, and probes upward.
    pub max_udp_payload: usize,
    /// Bytes of one stream the peer may send ahead of what the application
    /// has read (default 16 MiB: a 1 GB/s path with 16 ms of round trip).
    /// Two-way and one-way streams are granted it whole when they open; the
    /// stream of a large message starts at [`INITIAL_STREAM_WINDOW`] and
    /// grows to it as [`receive_window`](Self::receive_window) does.
    pub stream_receive_window: u64,
    /// Bytes of all streams and messages together the peer may send ahead
    /// of what the application has taken (default 32 MiB). The window
    /// starts at [`INITIAL_CONNECTION_WINDOW`] and doubles each time the
    /// application has taken half of the window in force (or when large
    /// messages under assembly hold more than half of it), up to this: a
    /// connection that carries little promises its peer little.
    pub receive_window: u64,
    /// Bytes a stream holds until the peer acknowledges them (default 4 MiB);
    /// a write takes what fits. While the congestion window is larger than
    /// half of it, the stream may hold twice the window, up to four times
    /// this value: the bytes sent after a lost packet wait for its repair,
    /// and a buffer of one window would stop the sender until it came.
    pub stream_send_buffer: usize,
    /// Bytes all streams of the connection hold together until the peer
    /// acknowledges them (default 4 MiB: one stream alone may fill its
    /// buffer, while several share the same memory, each entitled to an
    /// equal part). Fewer bytes to copy from keeps the copies into packets
    /// in cache. It follows the congestion window as `stream_send_buffer`
    /// does, up to four times this value. Messages, even those on streams
    /// of their own, count against `message_send_buffer` instead.
    pub send_buffer: usize,
    /// Bytes of messages held until acknowledged before `send_message`
    /// refuses more (default 16 MiB: a 1 GB/s path with 16 ms of round
    /// trip). A large message (one that travels on a one-way stream of its
    /// own) counts whole until its bytes are acknowledged; one larger than
    /// this bound is taken when no other message is held. The peer's limit
    /// on concurrent one-way streams can refuse a large message sooner.
    pub message_send_buffer: usize,
    /// Unreliable datagrams queued to send before the oldest is dropped
    /// (default 1 024): when the congestion window or a peer that
    /// acknowledges nothing keeps them from going out, newer ones win.
    pub datagram_send_queue: usize,
    /// The largest message accepted from the peer (default 1 GiB,
    /// [`tern_wire::DEFAULT_MAX_MESSAGE_SIZE`]); a larger one is a
    /// protocol violation that ends the connection. A limit other than the
    /// default is told to the peer in this side's first packet (a
    /// responder's in its reply, so an initiator knows it once connected),
    /// and from then on the peer's `send_message` refuses a larger message
    /// and its connection lives. Until it is told, the peer assumes the
    /// default: an initiator with a smaller limit should expect the
    /// responder's messages of the first round trip to be sent regardless
    /// ([`Connection::peer_max_message_size`](crate::Connection::peer_max_message_size)).
    pub max_message_size: u64,
    /// Application streams of each kind (bidirectional, one-way) the peer
    /// may have open at once (default 100).
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
    /// Keep it below the mapping timeout of the NATs on the way, commonly
    /// 30 s for UDP: a NAT refreshes a mapping only with what goes out
    /// through it (RFC 4787 REQ-6), so a peer behind one that sends nothing
    /// becomes unreachable once the mapping lapses.
    pub keep_alive: Option<Duration>,
    /// How long without any packet from the peer before the connection is
    /// given up (default 30 s); never less than three probe timeouts of
    /// the path (RFC 9000 §10.1), so a path longer than this does not
    /// close a busy connection between round trips.
    pub idle_timeout: Duration,
    /// How long a handshake may take before `connect` fails (default 10 s).
    pub handshake_timeout: Duration,
    /// How long a graceful close waits for the peer to acknowledge more of
    /// what was sent, from the close and again from each acknowledgement
    /// that freed data, before it gives up on the rest and sends its Close
    /// anyway: a peer that stops reading or acknowledging cannot hold a
    /// closing connection open. Default `None`: four probe timeouts
    /// (without back-off) as they stand at that moment.
    pub close_drain_timeout: Option<Duration>,
    /// The round-trip time assumed before the first sample (default 333 ms,
    /// RFC 9002 §6.2.2); the intro is first re-sent after three times it.
    pub initial_rtt: Duration,
    /// The longest this side delays an ACK (default 25 ms).
    pub max_ack_delay: Duration,
    /// The congestion controller and its parameters (default LEDBAT; the
    /// datagram size is set from `max_udp_payload`). Every connection of an
    /// endpoint runs the controller of its [`EndpointConfig::connection`],
    /// except an outgoing one started with
    /// [`Endpoint::connect_with`](crate::Endpoint::connect_with), which
    /// names its own.
    pub congestion: CongestionConfig,
    /// A cap on this connection's sending rate in bytes per second
    /// (token bucket; default none).
    pub rate_limit: Option<u64>,
    /// Whether this side, as the initiator, proves its own identity to the
    /// responder (default on). It applies only when the endpoint has an
    /// identity: an endpoint that accepts connections is a peer that others
    /// know by its key, and the responder learns who connected at the cost
    /// of one RSA signature here (about a millisecond, once per connect)
    /// and 555 bytes in the first packet. An endpoint without an identity
    /// stays anonymous whatever this says.
    pub prove_identity: bool,
    /// Whether this side, as the responder, requires the initiator to prove
    /// its identity (default off). Until the proof verifies, a packet that
    /// carries application data is dropped unacknowledged (the initiator
    /// sends it again, so nothing is lost and nothing is buffered for an
    /// unknown peer) and the application is not told of the connection; a
    /// connection without a valid proof within `handshake_timeout` is
    /// closed ([`ConnectionError::IdentityNotProven`](crate::ConnectionError::IdentityNotProven)),
    /// and an invalid proof is a protocol violation.
    pub require_identity: bool,
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
            datagram_send_queue: 1024,
            max_message_size: tern_wire::DEFAULT_MAX_MESSAGE_SIZE,
            max_concurrent_streams: 100,
            max_concurrent_messages: 64,
            datagram_receive_queue: 1024,
            keep_alive: Some(Duration::from_secs(10)),
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            close_drain_timeout: None,
            initial_rtt: tern_reliability::DEFAULT_INITIAL_RTT,
            max_ack_delay: Duration::from_millis(25),
            congestion: CongestionConfig::default(),
            rate_limit: None,
            prove_identity: true,
            require_identity: false,
        }
    }
}

impl ConnectionConfig {
    /// Checks the bounds on what a connection holds to send: none may be
    /// zero (nothing could be sent).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let bounds = [
            ("stream_send_buffer", self.stream_send_buffer),
            ("send_buffer", self.send_buffer),
            ("message_send_buffer", self.message_send_buffer),
            ("datagram_send_queue", self.datagram_send_queue),
        ];
        match bounds.into_iter().find(|(_, bound)| *bound == 0) {
            Some((name, _)) => Err(ConfigError::ZeroSendBound(name)),
            None => Ok(()),
        }
    }

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

/// Which congestion controller a connection runs, with its parameters.
///
/// Each controller governs only what this side sends; the peer's choice
/// governs the other direction.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // held once per configuration, copied rarely
pub enum CongestionConfig {
    /// LEDBAT (RFC 6817 with the LEDBAT++ remedies), the default: a
    /// background transfer that yields to every other flow on the path.
    Ledbat(LedbatConfig),
    /// CUBIC with HyStart++ (RFC 9438, RFC 9406): a foreground transfer,
    /// for a user waiting on it, that takes its share beside TCP.
    Cubic(CubicConfig),
    /// Reno-style AIMD (RFC 9002 §7): loss-based, for paths where one-way
    /// delay cannot be measured.
    Reno(RenoConfig),
}

impl Default for CongestionConfig {
    fn default() -> Self {
        Self::Ledbat(LedbatConfig::default())
    }
}

impl CongestionConfig {
    /// LEDBAT with its default parameters.
    pub fn ledbat() -> Self {
        Self::Ledbat(LedbatConfig::default())
    }

    /// CUBIC with its default parameters (HyStart++ on).
    pub fn cubic() -> Self {
        Self::Cubic(CubicConfig::default())
    }

    /// Reno with its default parameters.
    pub fn reno() -> Self {
        Self::Reno(RenoConfig::default())
    }

    /// Which controller this is.
    pub fn kind(&self) -> CongestionKind {
        match self {
            Self::Ledbat(_) => CongestionKind::Ledbat,
            Self::Cubic(_) => CongestionKind::Cubic,
            Self::Reno(_) => CongestionKind::Reno,
        }
    }

    /// A fresh controller for packets of up to `max_datagram_size` bytes
    /// (what the configuration says of the datagram size is replaced).
    pub(crate) fn controller(&self, max_datagram_size: u64) -> Result<AnyController, ConfigError> {
        Ok(match *self {
            Self::Ledbat(mut config) => {
                config.max_datagram_size = max_datagram_size;
                AnyController::from(Ledbat::new(config)?)
            }
            Self::Cubic(mut config) => {
                config.max_datagram_size = max_datagram_size;
                AnyController::from(Cubic::new(config)?)
            }
            Self::Reno(mut config) => {
                config.max_datagram_size = max_datagram_size;
                AnyController::from(Reno::new(config)?)
            }
        })
    }
}

/// Which congestion controller a connection runs, without its parameters
/// (what [`ConnectionStats`](crate::ConnectionStats) reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CongestionKind {
    /// LEDBAT, the default.
    #[default]
    Ledbat,
    /// CUBIC with HyStart++.
    Cubic,
    /// Reno-style AIMD.
    Reno,
}

impl CongestionKind {
    /// The controller's name in lower case: `ledbat`, `cubic` or `reno`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ledbat => "ledbat",
            Self::Cubic => "cubic",
            Self::Reno => "reno",
        }
    }
}

impl std::fmt::Display for CongestionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An [`EndpointConfig`] value out of range: the chosen congestion
/// controller's parameters, or a bound on what a connection holds to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// LEDBAT's parameters.
    #[error("LEDBAT: {0}")]
    Ledbat(#[from] LedbatConfigError),
    /// CUBIC's parameters.
    #[error("CUBIC: {0}")]
    Cubic(#[from] CubicConfigError),
    /// Reno's parameters.
    #[error("Reno: {0}")]
    Reno(#[from] RenoConfigError),
    /// A bound on what a connection holds to send is zero (the field named).
    #[error("ConnectionConfig::{0} is zero: nothing could be sent")]
    ZeroSendBound(&'static str),
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
    /// Connections held at once (default 16 384). When the table is full,
    /// a new peer takes the place of the incoming connection that carried
    /// no application data for the longest, if that was at least
    /// `evict_idle_after` ago; otherwise its intro is refused.
    pub max_connections: usize,
    /// Incoming connections held at once from one source IP address
    /// (default 1 024): enough for a large NAT's clients, a sixteenth of
    /// the table. An intro past it is refused before any RSA work.
    pub max_connections_per_address: usize,
    /// Incoming connections held at once from one network: a /24 for IPv4,
    /// a /48 for IPv6 (default 4 096, a quarter of the table), so that a
    /// few hosts cannot take the table by using many addresses of their
    /// own network. An intro past it is refused before any RSA work.
    pub max_connections_per_prefix: usize,
    /// How long an incoming connection must have carried no application
    /// data (stream bytes, messages, datagrams; keep-alives do not count)
    /// before a new peer may take its place in a full table (default
    /// 10 s; `None`: never, a full table refuses every intro). A connection
    /// carrying traffic is never evicted, nor one this side opened.
    pub evict_idle_after: Option<Duration>,
    /// Packet protection limits (the key update interval).
    pub keys: KeyConfig,
    /// A cap on the whole endpoint's sending rate in bytes per second
    /// (token bucket; default none).
    pub rate_limit: Option<u64>,
    /// Bytes all connections may hold together, counting the flow-control
    /// credit granted to peers and not used yet, and, as a relay, the
    /// packets it holds to forward (see
    /// [`EndpointStats::memory_charged`](crate::EndpointStats::memory_charged)).
    /// Past seven eighths of it no connection grants more credit; past it,
    /// the connections charged the most are closed. The default,
    /// [`DEFAULT_MEMORY_BUDGET`] (6 GiB), holds the 256 KiB every
    /// connection grants at its start for `max_connections` connections
    /// (4 GiB), and beyond that 64 connections' full receive windows
    /// (32 MiB each). Less holds fewer: give it at least a few times
    /// `receive_window`, or no connection gets its full window.
    pub memory_budget: u64,
    /// As a rendezvous: introductions one connection may ask for per
    /// second (default 8); past it they are refused
    /// ([`RefusalReason::RateLimited`](tern_wire::RefusalReason)).
    pub introductions_per_second: u32,
    /// As the side asking for an introduction: the IP time to live of the
    /// one punch it sends toward the other side as the introduction
    /// arrives, before the other side punches back (default 2; `None`: no
    /// such punch). It opens this side's NAT toward the other side and
    /// expires at a router past it, before the other side's NAT: arriving
    /// there, it would leave state that moves that NAT's mapping for the
    /// other side's punches (Linux conntrack does), as a punch of the other
    /// side arriving first would move this side's. 2 passes one NAT; give
    /// 3 behind two (a carrier-grade NAT behind the home one).
    pub punch_ttl: Option<u8>,
    /// This side's local addresses (its interfaces' addresses and the
    /// port it listens on), sent when it registers with a rendezvous
    /// (wire format §5.14) so that a peer behind the same NAT can reach it
    /// without going out through the NAT (default: none). See
    /// [`Endpoint::set_local_candidates`](crate::Endpoint::set_local_candidates).
    pub local_candidates: tern_wire::Candidates,
    /// Resumption tickets this side issues as a responder (wire format
    /// §6.6; default: ten minutes' lifetime, 16 384 used tickets
    /// remembered); `None`: it issues none and refuses every resumed
    /// intro, whose initiator falls back to a full one.
    pub tickets: Option<tern_wire::TicketPolicy>,
    /// Tickets this side keeps as an initiator, one per responder key,
    /// the least recently received dropped first (default 256; 0: it
    /// keeps none and every connect makes a full intro). A connect to a
    /// key it holds a live ticket for uses it, once.
    pub ticket_cache: usize,
    /// The relay: what this side grants as a rendezvous, and when it asks
    /// for one as a peer.
    pub relay: RelayConfig,
}

/// The relay fallback (wire format §5.15): a rendezvous forwards the
/// packets of two of its peers that found no direct path, seeing only
/// ciphertext.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayConfig {
    /// As a rendezvous: pairs relayed at once (default 64; 0: it relays
    /// nobody). A request past it is refused (`RelayFull`).
    pub max_pairs: usize,
    /// As a rendezvous: bytes per second forwarded for one pair, both
    /// directions together, counting what the relay sends (default
    /// 4 000 000, 32 Mbit/s). What comes faster waits in the pair's queue,
    /// up to 100 ms of this rate (at least 64 KiB); a packet past that is
    /// dropped and counted, and the pair's congestion control slows down.
    /// Past its smallest backlog (64 KiB, kept for it in the endpoint's
    /// `memory_budget`), a pair's packet also needs room in the budget.
    pub bytes_per_second: u64,
    /// As a rendezvous: a pair that forwarded nothing for this long is
    /// forgotten (default 60 s, twice the default idle timeout: a live
    /// connection's keep-alives hold its pair).
    pub idle_timeout: Duration,
    /// As a peer: how long after an introduction's connects start, with
    /// none completed, the peer asks the rendezvous to relay (default 2 s).
    pub fallback_after: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            max_pairs: 64,
            bytes_per_second: 4_000_000,
            idle_timeout: Duration::from_secs(60),
            fallback_after: Duration::from_secs(2),
        }
    }
}

/// The default [`EndpointConfig::memory_budget`]: 6 GiB (see there).
pub const DEFAULT_MEMORY_BUDGET: u64 = 6 << 30;

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            connection: ConnectionConfig::default(),
            intro_limits: IntroLimiterConfig::default(),
            max_connections: 16_384,
            max_connections_per_address: 1_024,
            max_connections_per_prefix: 4_096,
            evict_idle_after: Some(Duration::from_secs(10)),
            keys: KeyConfig::default(),
            rate_limit: None,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            introductions_per_second: 8,
            punch_ttl: Some(2),
            local_candidates: tern_wire::Candidates::default(),
            tickets: Some(tern_wire::TicketPolicy::default()),
            ticket_cache: 256,
            relay: RelayConfig::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_congestion::Controller;

    #[test]
    fn ledbat_is_the_default_controller() {
        let config = ConnectionConfig::default();
        assert_eq!(config.congestion, CongestionConfig::ledbat());
        assert_eq!(config.congestion.kind(), CongestionKind::Ledbat);
        assert_eq!(CongestionKind::default(), CongestionKind::Ledbat);
    }

    #[test]
    fn each_choice_builds_its_controller_at_the_given_datagram_size() {
        // Each controller's initial window is a number of packets of the
        // size it was given: 26 for LEDBAT, 10 for CUBIC and Reno.
        let cases = [
            (CongestionConfig::ledbat(), "ledbat", 26),
            (CongestionConfig::cubic(), "cubic", 10),
            (CongestionConfig::reno(), "reno", 10),
        ];
        for (config, name, packets) in cases {
            let controller = config.controller(1_200).expect("the defaults are valid");
            assert_eq!(config.kind().to_string(), name);
            assert_eq!(controller.window(), packets * 1_200, "{name}");
            let built = match controller {
                AnyController::Ledbat(_) => "ledbat",
                AnyController::Cubic(_) => "cubic",
                AnyController::Reno(_) => "reno",
                _ => "other",
            };
            assert_eq!(built, name);
        }
    }

    #[test]
    fn a_send_bound_of_zero_is_refused_by_name() {
        assert_eq!(ConnectionConfig::default().validate(), Ok(()));
        let no_messages = ConnectionConfig {
            message_send_buffer: 0,
            ..ConnectionConfig::default()
        };
        assert_eq!(
            no_messages.validate(),
            Err(ConfigError::ZeroSendBound("message_send_buffer"))
        );
        let no_datagrams = ConnectionConfig {
            datagram_send_queue: 0,
            ..ConnectionConfig::default()
        };
        assert_eq!(
            no_datagrams.validate(),
            Err(ConfigError::ZeroSendBound("datagram_send_queue"))
        );
    }

    #[test]
    fn a_parameter_out_of_range_is_refused_with_its_controllers_error() {
        let mut ledbat = LedbatConfig::default();
        ledbat.target = Duration::ZERO;
        let mut cubic = CubicConfig::default();
        cubic.beta = 1.5;
        let mut reno = RenoConfig::default();
        reno.min_window_packets = 0;
        let errors = [
            CongestionConfig::Ledbat(ledbat).controller(1_452).err(),
            CongestionConfig::Cubic(cubic).controller(1_452).err(),
            CongestionConfig::Reno(reno).controller(1_452).err(),
            CongestionConfig::cubic().controller(0).err(),
        ];
        assert_eq!(
            errors,
            [
                Some(ConfigError::Ledbat(LedbatConfigError::Target)),
                Some(ConfigError::Cubic(CubicConfigError::Beta)),
                Some(ConfigError::Reno(RenoConfigError::Window)),
                Some(ConfigError::Cubic(CubicConfigError::MaxDatagramSize)),
            ]
        );
    }
}
