//! `tern`: try Tern between two machines, measure a path, move a file.
//!
//! ```text
//! tern keygen --out keys/            # keys/tern.key (0600) and keys/tern.pub
//! tern pubkey --key keys/tern.pub    # one line to paste on the other machine
//! ```
//!
//! Errors are one line on standard error and a non-zero exit; logs go
//! through `tracing` and are quiet unless `RUST_LOG` asks for them.

mod error;
mod keys;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rand_core::OsRng;
use tern_wire::IdentityKey;

use crate::error::CliError;

/// Tern: an encrypted, reliable, congestion-controlled transport over UDP.
#[derive(Debug, Parser)]
#[command(name = "tern", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make an RSA-2048 identity: DIR/tern.key (private, mode 0600) and DIR/tern.pub.
    #[command(after_help = "Example:\n  tern keygen --out ~/.tern")]
    Keygen {
        /// Directory for the two files (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
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
        .init();
}

fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Keygen { out, force } => {
            let key = IdentityKey::generate(&mut OsRng)
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
