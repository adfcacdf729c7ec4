//! `tern send` and `tern recv`: one file over one stream, streamed from
//! disk to disk (never whole in memory), its SHA-256 checked by the
//! receiver, and stored under its final name only once complete and
//! verified.
//!
//! The receiver writes to a hidden temporary name beside the target
//! (`.NAME.tern-partial`, see [`crate::resume`]); the final name appears
//! by a hard link (which never replaces an existing file) or, with
//! `--force`, by a rename. An interrupted transfer leaves the temporary
//! file and its side-car in place, and the next send of the same file
//! continues after the bytes the receiver holds and the sender's file
//! begins with (unless the sender runs with `--restart`; see
//! [`start`]).

mod start;

use std::collections::HashSet;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use clap::Args;
use sha2::{Digest, Sha256};
use tern_peer::Connection;
use tokio::task::JoinSet;

use self::start::{agree_on_prefix, agree_on_start};

use crate::control::{self, Control};
use crate::disk::{CHUNK, ReadAhead, WriteBehind};
use crate::error::{CliError, printable, read_error, write_error};
use crate::net::{self, NetOptions};
use crate::progress::Progress;
use crate::rendezvous::{self, PathOptions, RendezvousOptions};
use crate::{keys, names, units};

/// How long a receiver waits for a new sender to offer its file.
const OFFER_TIMEOUT: Duration = Duration::from_secs(10);

/// Close code when the receiver gives up on a transfer.
const RECEIVER_FAILED: u64 = 1;

/// `tern send`.
#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    /// The file to send.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The receiver's address, HOST:PORT (omitted with --rendezvous: the
    /// receiver is found there by its --key).
    #[arg(value_name = "ADDR", required_unless_present = "rendezvous")]
    addr: Option<String>,
    /// The receiver's public key: its tern.pub file, or the line `tern pubkey`
    /// printed (`tern-x25519:…`, or `tern-pub:…` for RSA).
    #[arg(long, value_name = "PUBLIC_KEY_FILE")]
    key: String,
    /// Cap the sending rate, in Mbit/s.
    #[arg(long, value_name = "MBIT")]
    rate: Option<f64>,
    /// How long to wait for the receiver's answer to the handshake.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = units::parse_duration)]
    connect_timeout: Duration,
    /// Continue an interrupted transfer after the bytes the receiver wrote
    /// before it stopped, once their SHA-256 matches this file's (the
    /// default).
    #[arg(long, overrides_with = "restart")]
    resume: bool,
    /// Send the whole file, even if the receiver holds part of it.
    #[arg(long, overrides_with = "resume")]
    restart: bool,
    #[command(flatten)]
    rendezvous: RendezvousOptions,
    #[command(flatten)]
    paths: PathOptions,
    #[command(flatten)]
    net: NetOptions,
}

/// `tern recv`.
#[derive(Debug, Args)]
pub(crate) struct RecvArgs {
    /// Address and UDP port to listen on.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The receiver's private key (tern.key).
    #[arg(long, value_name = "PRIVATE_KEY_FILE")]
    key: PathBuf,
    /// Directory the files go to (created if missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Receive one file, then exit (non-zero if it failed).
    #[arg(long)]
    once: bool,
    /// Replace a file that exists already.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    rendezvous: RendezvousOptions,
    #[command(flatten)]
    net: NetOptions,
}

/// `tern send`.
pub(crate) async fn send(args: SendArgs) -> Result<(), CliError> {
    let public = keys::read_public(&args.key)?;
    let path = &args.file;
    let file = std::fs::File::open(path).map_err(|e| CliError::io(path, e))?;
    let metadata = file.metadata().map_err(|e| CliError::io(path, e))?;
    if !metadata.is_file() {
        return Err(CliError::io(
            path,
            std::io::Error::other("not a regular file"),
        ));
    }
    let size = metadata.len();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| CliError::Usage(format!("{} names no file", path.display())))?;
    let mut net_options = args.net.clone();
    net_options.rate_limit = match args.rate {
        None => None,
        Some(mbit) if mbit.is_finite() && mbit > 0.0 => Some((mbit * 1e6 / 8.0) as u64),
        Some(_) => return Err(CliError::Usage("--rate must be above zero".to_owned())),
    };
    let connecting = Instant::now();
    let (_endpoint, _rendezvous, connection) = rendezvous::reach(
        &args.rendezvous,
        &args.paths,
        args.addr.as_deref(),
        &public,
        &net_options,
        args.connect_timeout,
    )
    .await?;
    let addr = connection.remote_address();
    // `--resume` and `--restart` override each other: the last one counts.
    let resume = args.resume || !args.restart;
    let file = FileToSend {
        path,
        file,
        name,
        size,
    };
    let sent = send_file(&connection, addr, file, resume, connecting).await;
    net::close_on_error(&connection, sent).await
}

/// The file `tern send` sends, opened.
struct FileToSend<'a> {
    path: &'a Path,
    file: File,
    name: String,
    size: u64,
}

/// Offers the file, streams it (from where the receiver's verified copy
/// ends, with `resume`), waits for the receiver's verdict. The time to
/// first byte runs from `connecting` (the start of the connect) to the
/// receiver's answer to the offer.
async fn send_file(
    connection: &Connection,
    addr: SocketAddr,
    file: FileToSend<'_>,
    resume: bool,
    connecting: Instant,
) -> Result<(), CliError> {
    let FileToSend {
        path,
        file,
        name,
        size,
    } = file;
    control::send(
        connection,
        &Control::Offer {
            name: name.clone(),
            size,
            resume,
        },
    )
    .await?;
    let (file, hasher, offset) = match control::recv(connection).await? {
        Control::Accept => (file, Sha256::new(), 0),
        Control::Partial { len, synced } => {
            let len = if resume && len <= size { len } else { 0 };
            let (file, hasher, offset) =
                agree_on_prefix(connection, addr, path, file, len, synced).await?;
            if offset > 0 {
                println!(
                    "resuming {name} at byte {offset} of {size}: the receiver holds the bytes before it, verified"
                );
            } else if resume {
                println!(
                    "the receiver's partial copy of {name} is not a prefix of this file; sending it whole"
                );
            }
            (file, hasher, offset)
        }
        Control::Refuse { reason } => {
            return Err(CliError::Refused {
                name,
                reason: printable(&reason),
            });
        }
        other => return Err(unexpected(addr, "an answer to the offer", &other)),
    };
    let first_byte = connecting.elapsed();
    let started = Instant::now();
    // The receiver sends nothing back on it.
    let (mut stream, _) = connection
        .open_bi()
        .await
        .map_err(|e| CliError::connection(connection, &e))?;
    let mut progress = Progress::new(&name, size - offset);
    let mut chunks = ReadAhead::start(file, hasher, offset);
    let mut sent = 0u64;
    let streamed: Result<(), CliError> = async {
        while let Some(chunk) = chunks.next().await {
            if let Err(e) = stream.write_all(&chunk).await {
                return Err(stream_failed(connection, Some(addr), &name, write_error(&e)).await);
            }
            sent += chunk.len() as u64;
            progress.advance(chunk.len() as u64);
        }
        Ok(())
    }
    .await;
    progress.finish();
    streamed?;
    let read = chunks.finish().await.map_err(|e| CliError::io(path, e))?;
    if read.bytes != size {
        return Err(CliError::io(
            path,
            std::io::Error::other(format!(
                "the file changed while it was sent ({size} bytes before, {} read)",
                read.bytes
            )),
        ));
    }
    if let Err(e) = stream.finish() {
        return Err(stream_failed(connection, Some(addr), &name, e.to_string()).await);
    }
    let sha256 = read.sha256;
    tracing::info!(%name, size, %sha256, "file streamed; waiting for the receiver's verdict");
    control::send(
        connection,
        &Control::Digest {
            sha256: sha256.clone(),
        },
    )
    .await
    .map_err(|e| in_transfer(&name, e))?;
    match control::recv(connection)
        .await
        .map_err(|e| in_transfer(&name, e))?
    {
        Control::Stored { sha256: theirs } if theirs == sha256 => {}
        Control::Refuse { reason } => {
            return Err(CliError::Refused {
                name,
                reason: printable(&reason),
            });
        }
        other => return Err(unexpected(addr, "the receiver's verdict", &other)),
    }
    let elapsed = started.elapsed();
    let congestion = connection
        .stats()
        .map_or("unknown", |stats| stats.congestion.name());
    let route = rendezvous::path_of(connection);
    connection.close(0, Bytes::from_static(b"done")).await;
    println!(
        "sent {name} ({}) to {addr} in {:.2} s ({}, congestion {congestion}); {sent} bytes sent from byte {offset}; SHA-256 {sha256} verified by the receiver; path: {route}, first byte after {}",
        units::bytes(size),
        elapsed.as_secs_f64(),
        units::rate(sent, elapsed),
        units::millis(first_byte),
    );
    Ok(())
}

/// A stream that failed mid-transfer (the stream's own account of it is
/// `failure`): when the connection ends too, its end says why better.
async fn stream_failed(
    connection: &Connection,
    peer: Option<SocketAddr>,
    name: &str,
    failure: String,
) -> CliError {
    let reason = match tokio::time::timeout(Duration::from_millis(200), connection.closed()).await {
        Ok(ended) => crate::error::describe(&ended),
        Err(_) => failure,
    };
    CliError::Connection {
        peer,
        reason: format!("transfer of {name} interrupted: {reason}"),
    }
}

/// The receiver cannot write the file: the sender is told why at once.
fn write_failed(connection: &Connection, path: &Path, e: std::io::Error) -> CliError {
    let why = if e.kind() == std::io::ErrorKind::StorageFull {
        "disk full on the receiver"
    } else {
        "the receiver cannot write the file"
    };
    connection.abort(RECEIVER_FAILED, Bytes::from_static(why.as_bytes()));
    CliError::io(path, e)
}

/// A failure once the file is under way is an interrupted transfer.
fn in_transfer(name: &str, e: CliError) -> CliError {
    match e {
        CliError::Connection { peer, reason } => CliError::Connection {
            peer,
            reason: format!("transfer of {name} interrupted: {reason}"),
        },
        other => other,
    }
}

fn unexpected(addr: SocketAddr, wanted: &str, got: &Control) -> CliError {
    CliError::Protocol {
        peer: Some(addr),
        reason: format!("expected {wanted}, got {got:?}"),
    }
}

/// Where and how received files are stored.
#[derive(Debug)]
struct Store {
    dir: PathBuf,
    force: bool,
    /// Names being received now: each has one partial file, so one
    /// transfer at a time.
    busy: Mutex<HashSet<String>>,
}

impl Store {
    /// Claims `name` for one transfer; `None` while another holds it.
    fn claim(&self, name: &str) -> Option<Claim<'_>> {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        busy.insert(name.to_owned()).then(|| Claim {
            store: self,
            name: name.to_owned(),
        })
    }
}

/// A name claimed by one transfer, given back when dropped.
struct Claim<'a> {
    store: &'a Store,
    name: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut busy = self
            .store
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        busy.remove(&self.name);
    }
}

/// `tern recv`: receives files, several at once, until interrupted (or
/// one, with `--once`).
pub(crate) async fn recv(args: RecvArgs) -> Result<(), CliError> {
    let key = keys::read_private(&args.key)?;
    std::fs::create_dir_all(&args.out).map_err(|e| CliError::io(&args.out, e))?;
    let endpoint = net::listen(args.listen, key, &args.net)?;
    // Watched before the first line, which tells a script it may signal.
    let interrupted = crate::interrupted();
    tokio::pin!(interrupted);
    println!(
        "tern recv on {} (backend {}, congestion {}), files go to {}; Ctrl-C to stop",
        endpoint.local_addr(),
        endpoint.backend(),
        args.net.congestion.name(),
        args.out.display()
    );
    // After the first line, which a script reads for the address.
    if let Some((addr, key)) = args.rendezvous.target().await? {
        tokio::spawn(rendezvous::stay_registered(endpoint.clone(), addr, key));
    }
    let store = Arc::new(Store {
        dir: args.out,
        force: args.force,
        busy: Mutex::default(),
    });
    // Transfers under way; dropping the set ends them, and their
    // temporary files with them.
    let mut transfers = JoinSet::new();
    loop {
        tokio::select! {
            accepted = endpoint.accept_connection() => {
                let Some(connection) = accepted else { return Ok(()) };
                if args.once {
                    let received = receive(&connection, &store);
                    tokio::pin!(received);
                    let received = tokio::select! {
                        received = &mut received => received,
                        _ = &mut interrupted => {
                            net::shut_down(&endpoint).await;
                            Err(CliError::Interrupted(1))
                        }
                    };
                    println!("{}", received?);
                    return Ok(());
                }
                while transfers.try_join_next().is_some() {}
                let store = Arc::clone(&store);
                transfers.spawn(async move {
                    match receive(&connection, &store).await {
                        Ok(line) => println!("{line}"),
                        Err(e) => eprintln!("tern: {e}"),
                    }
                });
            }
            _ = &mut interrupted => {
                while transfers.try_join_next().is_some() {}
                net::shut_down(&endpoint).await;
                return match transfers.len() {
                    0 => Ok(()),
                    unfinished => Err(CliError::Interrupted(unfinished)),
                };
            }
        }
    }
}

/// Tells the sender the file is refused, and why.
/// (The connection is closed after it, by [`receive`].)
async fn refuse(connection: &Connection, reason: String) {
    let _ = control::send(connection, &Control::Refuse { reason }).await;
}

/// Receives one file on `connection`; returns the line to print. On an
/// error the connection is closed with it, so the sender learns at once.
async fn receive(connection: &Connection, store: &Store) -> Result<String, CliError> {
    let received = receive_file(connection, store).await;
    net::close_on_error(connection, received).await
}

async fn receive_file(connection: &Connection, store: &Store) -> Result<String, CliError> {
    let peer = Some(connection.remote_address());
    let who = connection.remote_address().to_string();
    let offer = tokio::time::timeout(OFFER_TIMEOUT, control::recv(connection))
        .await
        .map_err(|_| CliError::Protocol {
            peer,
            reason: "no file offered within 10 s".to_owned(),
        })??;
    let Control::Offer {
        name: offered,
        size,
        resume,
    } = offer
    else {
        connection.abort(RECEIVER_FAILED, Bytes::from_static(b"expected an offer"));
        return Err(CliError::Protocol {
            peer,
            reason: "the first message was not a file offer".to_owned(),
        });
    };
    let name = match names::sanitize(&offered) {
        Ok(name) => name,
        Err(reason) => {
            refuse(connection, reason.clone()).await;
            return Err(CliError::Protocol { peer, reason });
        }
    };
    tracing::info!(?peer, offered = %printable(&offered), %name, size, "file offered");
    let target = store.dir.join(&name);
    if !store.force && target.symlink_metadata().is_ok() {
        refuse(
            connection,
            format!("{name} exists on the receiver (it can be run with --force)"),
        )
        .await;
        return Err(CliError::Exists(target));
    }
    let Some(_claim) = store.claim(&name) else {
        let reason = format!("{name} is being received from another sender");
        refuse(connection, reason.clone()).await;
        return Err(CliError::Protocol { peer, reason });
    };
    let (partial, file, hasher, offset) =
        agree_on_start(connection, store, &name, size, resume).await?;
    let started = Instant::now();
    let (_, mut stream) = connection
        .accept_bi()
        .await
        .map_err(|e| in_transfer(&name, CliError::connection(connection, &e)))?;
    let mut writer = WriteBehind::start(file, hasher, offset, Some(partial.journal()));
    let mut received = offset;
    let mut progress = Progress::new(&format!("{name} from {who}"), size - offset);
    let mut buf = BytesMut::new();
    let streamed: Result<(), CliError> = async {
        loop {
            // Each read fills the spare room of one allocation; a chunk
            // handed to the writer is split off it, never copied.
            if buf.capacity() < CHUNK / 4 {
                buf.reserve(CHUNK);
            }
            buf.resize(buf.capacity(), 0);
            let n = match stream.read(&mut buf).await {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(()),
                Err(e) => {
                    return Err(stream_failed(connection, peer, &name, read_error(&e)).await);
                }
            };
            buf.truncate(n);
            received += n as u64;
            if received > size {
                connection.abort(
                    RECEIVER_FAILED,
                    Bytes::from_static(b"more bytes than offered"),
                );
                return Err(CliError::Protocol {
                    peer,
                    reason: format!("{name}: more than the {size} bytes offered"),
                });
            }
            if let Err(e) = writer.write(buf.split().freeze()).await {
                return Err(write_failed(connection, &partial.path, e));
            }
            progress.advance(n as u64);
        }
    }
    .await;
    progress.finish();
    if let Err(e) = streamed {
        // What was written is recorded for a resumed send, unless it
        // cannot be trusted (a peer breaking the offer) or written.
        let recorded = writer.finish().await;
        if recorded.is_err() || matches!(e, CliError::Protocol { .. }) {
            partial.discard();
        }
        return Err(e);
    }
    let written = match writer.finish().await {
        Ok(written) => written,
        Err(e) => {
            let failed = write_failed(connection, &partial.path, e);
            partial.discard();
            return Err(failed);
        }
    };
    if received != size {
        return Err(CliError::Connection {
            peer,
            reason: format!(
                "transfer of {name} interrupted: the stream ended after {received} of {size} bytes"
            ),
        });
    }
    let sha256 = written.sha256;
    tracing::info!(?peer, %name, size, %sha256, "file written and synced");
    match control::recv(connection)
        .await
        .map_err(|e| in_transfer(&name, e))?
    {
        Control::Digest { sha256: theirs } if theirs == sha256 => {}
        Control::Digest { .. } => {
            partial.discard();
            refuse(
                connection,
                "SHA-256 mismatch: the file was not stored".to_owned(),
            )
            .await;
            return Err(CliError::Mismatch(format!(
                "{name} from {who}: SHA-256 mismatch, not stored"
            )));
        }
        other => {
            return Err(CliError::Protocol {
                peer,
                reason: format!("expected the file's SHA-256, got {other:?}"),
            });
        }
    }
    if let Err(e) = partial.commit(&target, store.force) {
        refuse(connection, format!("{name} could not be stored: {e}")).await;
        return Err(e);
    }
    let elapsed = started.elapsed();
    control::send(
        connection,
        &Control::Stored {
            sha256: sha256.clone(),
        },
    )
    .await?;
    let _ = tokio::time::timeout(OFFER_TIMEOUT, connection.closed()).await;
    Ok(format!(
        "received {name} ({}) from {who} in {:.2} s ({}); {} bytes received from byte {offset}; SHA-256 {sha256} verified; stored as {}",
        units::bytes(size),
        elapsed.as_secs_f64(),
        units::rate(received - offset, elapsed),
        received - offset,
        target.display()
    ))
}
