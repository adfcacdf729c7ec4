//! Endpoints as the commands need them: options shared by every command,
//! addresses resolved, and the two failures a user meets first (a port in
//! use, nobody answering) said plainly.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use clap::{Args, ValueEnum};
use tern_peer::{
    Config, CongestionConfig, ConnectError, Connection, Endpoint, IdentityKey, PublicIdentity,
};
use tern_sockio::Backend;

use crate::error::CliError;
use crate::units;

/// How datagrams move between Tern and the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum BackendChoice {
    /// The best the kernel offers (or `TERN_SOCKIO_BACKEND`).
    #[default]
    Auto,
    /// `sendmmsg` with UDP GSO, `recvmmsg` with GRO (Linux).
    Offload,
    /// `sendmmsg` / `recvmmsg` (Linux).
    Mmsg,
    /// io_uring (Linux).
    Uring,
    /// One datagram per system call; any OS.
    Portable,
}

impl BackendChoice {
    fn backend(self) -> Option<Backend> {
        match self {
            Self::Auto => None,
            Self::Offload => Some(Backend::Offload),
            Self::Mmsg => Some(Backend::Mmsg),
            Self::Uring => Some(Backend::IoUring),
            Self::Portable => Some(Backend::Portable),
        }
    }
}

/// The congestion controller of what this end sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum CongestionChoice {
    /// LEDBAT: background traffic, yields to every other flow on the path.
    #[default]
    Ledbat,
    /// CUBIC with HyStart++: foreground traffic, takes its share beside TCP.
    Cubic,
}

impl CongestionChoice {
    /// As the command line spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ledbat => "ledbat",
            Self::Cubic => "cubic",
        }
    }

    fn config(self) -> CongestionConfig {
        match self {
            Self::Ledbat => CongestionConfig::ledbat(),
            Self::Cubic => CongestionConfig::cubic(),
        }
    }
}

/// Options every command that opens an endpoint takes.
#[derive(Clone, Debug, Args)]
pub(crate) struct NetOptions {
    /// Socket backend.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub(crate) backend: BackendChoice,
    /// Congestion controller for what this end sends.
    #[arg(long, value_enum, default_value_t = CongestionChoice::Ledbat)]
    pub(crate) congestion: CongestionChoice,
    /// Largest UDP payload Tern may use (it starts at 1200 and probes up to this).
    #[arg(long, value_name = "BYTES")]
    pub(crate) mtu: Option<usize>,
    /// How long without a packet from the peer before the connection is given up.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = units::parse_duration)]
    pub(crate) idle_timeout: Duration,
    /// A cap on each connection's sending rate, in bytes per second.
    #[arg(skip)]
    pub(crate) rate_limit: Option<u64>,
}

impl NetOptions {
    /// The endpoint configuration these options ask for.
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::default()
            .backend(self.backend.backend())
            .idle_timeout(self.idle_timeout)
            // Keep-alives well inside the idle timeout, so a pause (a
            // receiver syncing a large file) is not mistaken for a dead peer.
            .keep_alive(Some(
                (self.idle_timeout / 3).max(Duration::from_millis(100)),
            ))
            .rate_limit(self.rate_limit)
            .congestion(self.congestion.config());
        if let Some(mtu) = self.mtu {
            config = config.max_udp_payload(mtu);
        }
        config
    }
}

/// Close code of a server or receiver stopped by its user (Ctrl-C).
pub(crate) const STOPPED: u64 = 2;

/// Closes every connection of `endpoint` with [`STOPPED`], so peers learn
/// at once rather than after their idle timeout, and waits a moment for
/// the closes to leave.
pub(crate) async fn shut_down(endpoint: &Endpoint) {
    endpoint.close(STOPPED);
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
}

/// Passes `result` on; on an error, first closes `connection` with code 1
/// and the error as the reason, so the peer learns at once what went
/// wrong instead of waiting for its idle timeout.
pub(crate) async fn close_on_error<T>(
    connection: &Connection,
    result: Result<T, CliError>,
) -> Result<T, CliError> {
    if let Err(e) = &result {
        let reason: String = e.to_string().chars().take(200).collect();
        let closing = connection.close(1, reason);
        let _ = tokio::time::timeout(Duration::from_secs(2), closing).await;
    }
    result
}

/// Resolves `HOST:PORT` (a name or an address) to its first address.
pub(crate) async fn resolve(given: &str) -> Result<SocketAddr, CliError> {
    if let Ok(addr) = given.parse() {
        return Ok(addr);
    }
    let resolve_error = |reason: String| CliError::Resolve {
        host: given.to_owned(),
        reason,
    };
    tokio::net::lookup_host(given)
        .await
        .map_err(|e| resolve_error(e.to_string()))?
        .next()
        .ok_or_else(|| resolve_error("no address".to_owned()))
}

/// An endpoint that accepts connections to `identity` on `listen`.
pub(crate) fn listen(
    listen: SocketAddr,
    identity: IdentityKey,
    options: &NetOptions,
) -> Result<Endpoint, CliError> {
    listen_with(listen, identity, options.config())
}

/// [`listen`] with a configuration of the caller's making.
pub(crate) fn listen_with(
    listen: SocketAddr,
    identity: IdentityKey,
    config: Config,
) -> Result<Endpoint, CliError> {
    Endpoint::bind(listen, config.identity(identity)).map_err(|source| CliError::Listen {
        addr: listen,
        source,
    })
}

/// Connects to `addr` as `identity`, on a fresh endpoint of the matching
/// address family.
pub(crate) async fn connect(
    addr: SocketAddr,
    identity: &PublicIdentity,
    options: &NetOptions,
    connect_timeout: Duration,
) -> Result<(Endpoint, Connection), CliError> {
    connect_as(None, addr, identity, options, connect_timeout).await
}

/// [`connect`], from an endpoint with an identity of its own (`own`),
/// which it proves to the peer.
pub(crate) async fn connect_as(
    own: Option<IdentityKey>,
    addr: SocketAddr,
    identity: &PublicIdentity,
    options: &NetOptions,
    connect_timeout: Duration,
) -> Result<(Endpoint, Connection), CliError> {
    let local = if addr.is_ipv4() {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
    };
    let mut config = options.config().handshake_timeout(connect_timeout);
    if let Some(own) = own {
        config = config.identity(own);
    }
    let endpoint = Endpoint::bind(local, config).map_err(|source| CliError::Listen {
        addr: local,
        source,
    })?;
    tracing::info!(%addr, backend = %endpoint.backend(), "connecting");
    match endpoint.connect(addr, identity).await {
        Ok(connection) => Ok((endpoint, connection)),
        Err(ConnectError::HandshakeTimedOut) => Err(CliError::NoAnswer {
            addr,
            timeout: connect_timeout,
        }),
        Err(e) => Err(CliError::Connection {
            peer: Some(addr),
            reason: e.to_string(),
        }),
    }
}
