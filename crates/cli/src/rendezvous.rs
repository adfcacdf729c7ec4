//! Rendezvous for the commands: `tern relay` introduces peers that
//! registered with it, and relays the connection of those whose NATs let
//! no direct path through (it sees ciphertext only); servers register
//! (`--rendezvous`) and stay registered; clients find a server through it
//! by its key alone, directly where they can, relayed otherwise
//! (`--no-relay`, `--relay-only`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use rand_core::OsRng;
use tern_peer::proto::{ConnectionPath, PathPolicy, RelayConfig};
use tern_peer::{ConnectError, Connection, Endpoint, IdentityKey, PublicIdentity};

use crate::error::CliError;
use crate::keys;
use crate::net::{self, NetOptions};
use crate::units;

/// Where to register, or to find the peer.
#[derive(Clone, Debug, Args)]
pub(crate) struct RendezvousOptions {
    /// A rendezvous (`tern relay`), HOST:PORT: a server registers there
    /// under its key; a client finds the server there by its `--key`.
    #[arg(long, value_name = "ADDR", requires = "rendezvous_key")]
    pub(crate) rendezvous: Option<String>,
    /// The rendezvous's public key: its tern.pub file, or the pasted line.
    #[arg(long, value_name = "PUBLIC_KEY", requires = "rendezvous")]
    pub(crate) rendezvous_key: Option<String>,
}

impl RendezvousOptions {
    /// The rendezvous's address and key, if one was given.
    pub(crate) async fn target(&self) -> Result<Option<(SocketAddr, PublicIdentity)>, CliError> {
        let (Some(addr), Some(key)) = (&self.rendezvous, &self.rendezvous_key) else {
            return Ok(None);
        };
        Ok(Some((net::resolve(addr).await?, keys::read_public(key)?)))
    }
}

/// Which paths a client may take to a peer it finds through a rendezvous.
#[derive(Clone, Debug, Args)]
pub(crate) struct PathOptions {
    /// Fail rather than relay: only a direct path through the NATs.
    #[arg(long, requires = "rendezvous", conflicts_with = "relay_only")]
    no_relay: bool,
    /// Go through the rendezvous's relay at once, without hole punching.
    #[arg(long, requires = "rendezvous")]
    relay_only: bool,
}

impl PathOptions {
    fn policy(&self) -> PathPolicy {
        match (self.no_relay, self.relay_only) {
            (true, _) => PathPolicy::DirectOnly,
            (_, true) => PathPolicy::RelayOnly,
            _ => PathPolicy::DirectThenRelay,
        }
    }
}

/// Which way `connection`'s packets go, as the summaries say it:
/// `direct ADDR`, `relayed via ADDR`, or `direct ADDR, went direct after
/// N ms` for a connection that started relayed and moved.
pub(crate) fn path_of(connection: &Connection) -> String {
    let path = match connection.path() {
        Some(ConnectionPath::Relayed { via }) => format!("relayed via {via}"),
        Some(ConnectionPath::Direct(addr)) => format!("direct {addr}"),
        _ => format!("direct {}", connection.remote_address()),
    };
    match connection.went_direct_after() {
        Some(after) => format!("{path}, went direct after {}", units::millis(after)),
        None => path,
    }
}

/// Pause before connecting to the rendezvous again after losing it.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// Keeps `endpoint` registered with the rendezvous at `addr`: connects,
/// registers, and does both again whenever the connection is lost. The
/// connection itself survives a NAT mapping change (it is routed by
/// index), so the rendezvous keeps seeing the current address. Runs until
/// the endpoint stops.
pub(crate) async fn stay_registered(endpoint: Endpoint, addr: SocketAddr, key: PublicIdentity) {
    loop {
        match endpoint.connect(addr, &key).await {
            Ok(connection) => {
                if endpoint.register(&connection).is_ok() {
                    println!("registered with the rendezvous {addr}");
                    let lost = connection.closed().await;
                    eprintln!("tern: rendezvous {addr} lost ({lost}); registering again");
                }
            }
            Err(ConnectError::EndpointStopped(_)) => return,
            Err(e) => eprintln!("tern: rendezvous {addr}: {e}; trying again"),
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// Connects to the peer holding `peer` through the rendezvous at `addr`
/// (key `key`), on a fresh endpoint. Returns the endpoint, the connection
/// to the rendezvous (kept open for the run) and the one to the peer.
pub(crate) async fn connect_via(
    (addr, key): (SocketAddr, PublicIdentity),
    peer: &PublicIdentity,
    policy: PathPolicy,
    options: &NetOptions,
    connect_timeout: Duration,
) -> Result<(Endpoint, Connection, Connection), CliError> {
    // A rendezvous introduces only peers that proved who they are: a key
    // of the moment does (an X25519 key costs microseconds).
    let own = IdentityKey::generate_x25519(&mut OsRng);
    let (endpoint, rendezvous) =
        net::connect_as(Some(own), addr, &key, options, connect_timeout).await?;
    tracing::info!(%addr, "asking the rendezvous for the peer");
    match endpoint.connect_via_with(&rendezvous, peer, policy).await {
        Ok(connection) => Ok((endpoint, rendezvous, connection)),
        Err(e) => Err(CliError::Connection {
            peer: Some(addr),
            reason: format!("through the rendezvous: {e}"),
        }),
    }
}

/// What a client command opened to reach its peer: the endpoint, the
/// connection to the rendezvous if it went through one (kept open for the
/// run), and the connection to the peer.
pub(crate) type Reached = (Endpoint, Option<Connection>, Connection);

/// Reaches the peer holding `peer`: through the rendezvous when one is
/// given (on the paths `paths` allows), at `addr` otherwise.
pub(crate) async fn reach(
    rendezvous: &RendezvousOptions,
    paths: &PathOptions,
    addr: Option<&str>,
    peer: &PublicIdentity,
    options: &NetOptions,
    connect_timeout: Duration,
) -> Result<Reached, CliError> {
    match (rendezvous.target().await?, addr) {
        (Some(rendezvous), _) => {
            let (endpoint, rendezvous, connection) =
                connect_via(rendezvous, peer, paths.policy(), options, connect_timeout).await?;
            Ok((endpoint, Some(rendezvous), connection))
        }
        (None, Some(addr)) => {
            let addr = net::resolve(addr).await?;
            let (endpoint, connection) = net::connect(addr, peer, options, connect_timeout).await?;
            Ok((endpoint, None, connection))
        }
        (None, None) => Err(CliError::Usage(
            "give the peer's ADDR, or --rendezvous".to_owned(),
        )),
    }
}

/// `tern relay`.
#[derive(Debug, Args)]
pub(crate) struct RelayArgs {
    /// Address and UDP port to listen on.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The rendezvous's private key (tern.key).
    #[arg(long, value_name = "PRIVATE_KEY_FILE")]
    key: PathBuf,
    /// Cap on what the relay forwards for one pair, both directions, in
    /// Mbit/s (default 32).
    #[arg(long, value_name = "MBIT")]
    pair_rate: Option<f64>,
    /// Pairs relayed at once (default 64; 0: introductions only).
    #[arg(long, value_name = "N")]
    max_pairs: Option<usize>,
    #[command(flatten)]
    net: NetOptions,
}

/// How often the rendezvous looks at its counters to report introductions
/// and relayed pairs.
const REPORT_EVERY: Duration = Duration::from_millis(100);

/// Runs a rendezvous until interrupted: accepts every peer, introduces
/// those that ask, relays those that find no direct path, and prints a
/// line per peer, per introduction and per relayed pair.
pub(crate) async fn relay(args: RelayArgs) -> Result<(), CliError> {
    let key = keys::read_private(&args.key)?;
    let mut relay = RelayConfig::default();
    match args.pair_rate {
        None => {}
        Some(mbit) if mbit.is_finite() && mbit > 0.0 => {
            relay.bytes_per_second = (mbit * 1e6 / 8.0) as u64;
        }
        Some(_) => return Err(CliError::Usage("--pair-rate must be above zero".to_owned())),
    }
    relay.max_pairs = args.max_pairs.unwrap_or(relay.max_pairs);
    let endpoint = net::listen_with(args.listen, key, args.net.config().relay(relay))?;
    let interrupted = crate::interrupted();
    tokio::pin!(interrupted);
    println!(
        "tern relay on {} (rendezvous and relay: at most {} pairs, {} each); Ctrl-C to stop",
        endpoint.local_addr(),
        relay.max_pairs,
        crate::units::rate(relay.bytes_per_second, Duration::from_secs(1)),
    );
    let mut peers = Vec::new();
    let mut reported = (0, 0, 0, 0);
    let mut tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tokio::select! {
            accepted = endpoint.accept_connection() => {
                let Some(connection) = accepted else { break };
                println!("peer {} connected", connection.remote_address());
                peers.push(connection);
            }
            _ = tick.tick() => {
                peers.retain(|c: &Connection| c.stats().is_some());
                let stats = endpoint.stats().protocol;
                let now = (
                    stats.introductions_made,
                    stats.introductions_refused,
                    stats.relay_pairs_made,
                    stats.relay_refused,
                );
                for _ in reported.0..now.0 {
                    println!("introduction made ({} peers)", peers.len());
                }
                for _ in reported.1..now.1 {
                    println!("introduction refused");
                }
                for _ in reported.2..now.2 {
                    println!(
                        "relaying a pair ({} relayed now; {} packets, {} forwarded so far)",
                        stats.relay_pairs,
                        stats.relay_packets_forwarded,
                        crate::units::bytes(stats.relay_bytes_forwarded),
                    );
                }
                for _ in reported.3..now.3 {
                    println!("relay refused");
                }
                reported = now;
            }
            _ = &mut interrupted => {
                net::shut_down(&endpoint).await;
                break;
            }
        }
    }
    Ok(())
}
