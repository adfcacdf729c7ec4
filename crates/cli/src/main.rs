//! `tern`: try Tern between two machines, measure a path, move a file.
//!
//! ```text
//! tern keygen --out keys/            # keys/tern.key (0600) and keys/tern.pub
//! tern pubkey --key keys/tern.pub    # one line to paste on the other machine
//! tern perf server --listen 0.0.0.0:5201 --key keys/tern.key
//! tern perf client server.example:5201 --key tern-x25519:6WkBIbPP... --time 10s
//! tern recv --listen 0.0.0.0:5202 --key keys/tern.key --out incoming/
//! tern send big.iso server.example:5202 --key keys/tern.pub
//! ```
//!
//! Errors are one line on standard error and a non-zero exit; logs go
//! through `tracing` and are quiet unless `RUST_LOG` asks for them.

#![forbid(unsafe_code)]

mod control;
mod disk;
mod error;
mod keys;
mod names;
mod net;
mod perf;
mod progress;
mod rendezvous;
mod resume;
mod transfer;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rand_core::OsRng;
use tern_wire::{IdentityKey, IdentityKind};

use crate::error::CliError;

/// Tern: an encrypted, reliable, congestion-controlled transport over UDP.
#[derive(Debug, Parser)]
#[command(
    name = "tern",
    version,
    about,
    propagate_version = true,
    after_help = "Try it between two machines:\n  \
        server$ tern keygen --out ~/.tern && tern pubkey --key ~/.tern/tern.pub\n  \
        server$ tern perf server --listen 0.0.0.0:5201 --key ~/.tern/tern.key\n  \
        client$ tern perf client SERVER:5201 --key tern-x25519:...   # the line pubkey printed\n\n\
        Logs: RUST_LOG=info (quiet by default)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The kinds of identity `tern keygen` makes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum KeyKind {
    /// X25519: connects cost the server tens of microseconds.
    X25519,
    /// RSA-2048: connects cost the server about a millisecond.
    Rsa,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make an identity: DIR/tern.key (private, mode 0600) and DIR/tern.pub.
    #[command(
        after_help = "Examples:\n  tern keygen --out ~/.tern\n  tern keygen --out ~/.tern --kind rsa\n\n\
        x25519 (the default) costs the server tens of microseconds per connect and\n\
        prints a short key (tern-x25519:...); rsa (RSA-2048, tern-pub:...) costs it\n\
        about a millisecond per connect, for peers that know only RSA keys."
    )]
    Keygen {
        /// Directory for the two files (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The kind of key.
        #[arg(long, value_enum, default_value_t = KeyKind::X25519)]
        kind: KeyKind,
        /// Replace existing key files.
        #[arg(long)]
        force: bool,
    },
    /// Print a public key on one line, ready to paste into another machine's command line.
    #[command(
        after_help = "Examples:\n  tern pubkey --key ~/.tern/tern.pub\n  tern pubkey --key ~/.tern/tern.key"
    )]
    Pubkey {
        /// A public key file (tern.pub) or a private key file (tern.key).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
    },
    /// Measure a path: throughput, RTT, window, losses, between a client and a server.
    #[command(subcommand)]
    Perf(PerfCommand),
    /// Receive files sent with `tern send`.
    #[command(after_help = "Examples:\n  \
        tern recv --listen 0.0.0.0:5202 --key ~/.tern/tern.key --out incoming/\n  \
        tern recv --listen [::]:5202 --key ~/.tern/tern.key --once --force")]
    Recv(transfer::RecvArgs),
    /// Send a file to a `tern recv`.
    #[command(after_help = "Examples:\n  \
        tern send big.iso 192.0.2.7:5202 --key their.pub\n  \
        tern send big.iso host.example:5202 --key tern-x25519:6WkBIbPP... --rate 100\n  \
        tern send big.iso 192.0.2.7:5202 --key their.pub --congestion cubic   # foreground")]
    Send(transfer::SendArgs),
    /// Run a rendezvous: peers register under their key, others find them there.
    #[command(after_help = "Examples:\n  \
        tern relay --listen 0.0.0.0:7000 --key ~/.tern/tern.key\n  \
        tern perf server --listen 0.0.0.0:5201 --key ~/.tern/tern.key \\\n      \
        --rendezvous 203.0.113.10:7000 --rendezvous-key relay.pub\n  \
        tern perf client --key their.pub --rendezvous 203.0.113.10:7000 --rendezvous-key relay.pub")]
    Relay(rendezvous::RelayArgs),
}

#[derive(Debug, Subcommand)]
enum PerfCommand {
    /// Serve perf clients until interrupted, printing one summary per client.
    #[command(
        after_help = "Example:\n  tern perf server --listen 0.0.0.0:5201 --key ~/.tern/tern.key"
    )]
    Server(perf::ServerArgs),
    /// Run a test against a perf server: one line per interval, then both ends' summaries.
    #[command(after_help = "Examples:\n  \
        tern perf client 192.0.2.7:5201 --key their.pub                 # 10 s upload\n  \
        tern perf client 192.0.2.7:5201 --key their.pub --reverse --time 30s\n  \
        tern perf client 192.0.2.7:5201 --key their.pub --bytes 1G --streams 4\n  \
        tern perf client 192.0.2.7:5201 --key their.pub --bidir --rate 100 --json\n  \
        tern perf client 192.0.2.7:5201 --key their.pub --congestion cubic\n\n\
        Sizes take K, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti; durations take ms, s, m, h.")]
    Client(perf::ClientArgs),
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs through tracing-subscriber, filtered by `RUST_LOG`; warnings only by default.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Perf(PerfCommand::Server(args)) => runtime()?.block_on(perf::server(args)),
        Command::Perf(PerfCommand::Client(args)) => runtime()?.block_on(perf::client(args)),
        Command::Recv(args) => runtime()?.block_on(transfer::recv(args)),
        Command::Send(args) => runtime()?.block_on(transfer::send(args)),
        Command::Relay(args) => runtime()?.block_on(rendezvous::relay(args)),
        Command::Keygen { out, kind, force } => {
            let kind = match kind {
                KeyKind::X25519 => IdentityKind::X25519,
                KeyKind::Rsa => IdentityKind::Rsa,
            };
            let key = IdentityKey::generate_kind(kind, &mut OsRng)
                .map_err(|e| CliError::KeyGeneration(e.to_string()))?;
            let files = keys::write_identity(&key, &out, force)?;
            println!("private key: {}", files.private.display());
            println!("public key:  {}", files.public.display());
            println!("{}", keys::paste_form(&key.public())?);
            Ok(())
        }
        Command::Pubkey { key } => {
            let public = match keys::read_public(&key.to_string_lossy()) {
                Ok(public) => public,
                Err(public_error) => match keys::read_private(&key) {
                    Ok(private) => private.public(),
                    Err(_) => return Err(public_error),
                },
            };
            println!("{}", keys::paste_form(&public)?);
            Ok(())
        }
    }
}

/// The runtime the network commands run on: one thread, as Tern
/// recommends for an endpoint (its driver and the tasks it wakes stay on
/// one core, no wake crosses threads); file I/O and hashing run on
/// tokio's blocking threads beside it.
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start the runtime: {e}")))
}

/// Watches for Ctrl-C (SIGINT) and, on Unix, SIGTERM from now on (a
/// signal that comes before the returned future is polled still counts):
/// the servers stop cleanly on either, and `tern recv` removes its
/// unfinished files.
#[cfg(unix)]
fn interrupted() -> impl Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    async fn next(signal: Option<Signal>) {
        match signal {
            Some(mut signal) => {
                signal.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    async move {
        tokio::select! {
            () = next(interrupt) => {}
            () = next(terminate) => {}
        }
    }
}

/// Watches for Ctrl-C; never resolves if it cannot be watched.
#[cfg(not(unix))]
fn interrupted() -> impl Future<Output = ()> {
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
