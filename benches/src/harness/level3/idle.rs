//! Idle connections: what one held connection costs its server endpoint in
//! resident memory.
//!
//! The server endpoint runs in a process of its own (this binary, started
//! again with [`CHILD_ENV`] set), so its resident set holds the server's
//! state only: the endpoint, its connections, the runtime, the allocator's
//! slack. This process connects to it from eight client endpoints, 32
//! connects in flight (the server's intro limits raised, as for every
//! level-3 server), and holds every connection open and idle. The server
//! reads its resident set (`/proc/self/statm`) once its first connection is
//! accepted (so one-time costs such as first-use tables are not counted)
//! and again two seconds after the last ([`SETTLE`]); the difference divided by the
//! connections after the first is the figure. It includes what the tables
//! of the endpoint grew by to hold them, and whatever the allocator keeps
//! for itself.
//!
//! Quick mode holds 500 connections (`level3/idle/`), normal mode 10 000
//! (`level3/idle10k/`) and full mode 100 000 (`level3/idle100k/`), one
//! sample each. The server has an X25519 identity, Tern's default: with
//! RSA-2048 every connect cost the server an RSA decryption (about 1.4 ms
//! of its CPU), and 100 000 took 17.5 minutes on the shared two-core
//! machine, so long that keep-alives waited behind the intros and idle
//! timeouts closed connections before the server measured. What an idle
//! connection holds does not depend on the kind of the server's key.

use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand_core::OsRng;
use tern_peer::{Connection, Endpoint, IdentityKey, PublicIdentity};

use super::rss::resident_bytes;
use super::servers::{client_config, other, server_config};
use crate::cli::{Args, Mode};
use crate::report::{Better, median};

/// Set to a number of connections, it makes this binary the server of this
/// workload instead of the harness.
const CHILD_ENV: &str = "TERN_HARNESS_IDLE_SERVER";
const CLIENT_ENDPOINTS: usize = 8;
const IN_FLIGHT: usize = 32;
/// The longest the server waits for its next connection: a connection the
/// harness saw and this side never did (its handshake lost, the client's
/// connect made again) must not hang the run; past it, what is held is
/// measured.
const ACCEPT_STALL: Duration = Duration::from_secs(20);

/// How long the server waits after its last connection before it reads
/// its resident set again: past the second (and a probe timeout) after
/// which a quiet connection gives back what only traffic needs, so every
/// connection is measured idle, as it then stays.
const SETTLE: Duration = Duration::from_secs(2);

/// The workload's metric prefix in `mode`.
fn prefix(mode: Mode) -> &'static str {
    match mode {
        Mode::Quick => "level3/idle/",
        Mode::Normal => "level3/idle10k/",
        Mode::Full => "level3/idle100k/",
    }
}

pub(super) fn names(mode: Mode) -> Vec<String> {
    vec![
        format!("{}bytes_per_connection", prefix(mode)),
        format!("{}heap_bytes_per_connection", prefix(mode)),
    ]
}

fn connections(mode: Mode) -> usize {
    match mode {
        Mode::Quick => 500,
        Mode::Normal => 10_000,
        Mode::Full => 100_000,
    }
}

pub(super) fn run(args: &Args) {
    let prefix = prefix(args.mode);
    let count = connections(args.mode);
    // One sample in every mode: the figure is stable within 0.5 % from
    // run to run, and each costs the server an RSA decryption per
    // connection.
    let (mut per_connection, mut heap_per_connection) = (Vec::new(), Vec::new());
    match sample(count) {
        Ok(Figures { resident, heap }) => {
            per_connection.push(resident);
            heap_per_connection.push(heap);
        }
        Err(e) => eprintln!("   {prefix}: sample failed: {e}"),
    }
    eprintln!(
        "   {prefix}: {:.0} bytes ({:.1} KiB) of the server's resident memory per idle connection, {count} held; its allocations hold {:.0} bytes of them",
        median(&per_connection),
        median(&per_connection) / 1024.0,
        median(&heap_per_connection),
    );
    super::emit_metric(
        args,
        format!("{prefix}bytes_per_connection"),
        "B",
        Better::Lower,
        per_connection,
        None,
    );
    super::emit_metric(
        args,
        format!("{prefix}heap_bytes_per_connection"),
        "B",
        Better::Lower,
        heap_per_connection,
        None,
    );
}

/// What one idle connection costs the server: its resident set's growth,
/// and what its allocations hold (the same less what the allocator keeps
/// of freed memory, and less the runtime's and the kernel's own pages).
struct Figures {
    resident: f64,
    heap: f64,
}

/// One sample: the server's bytes per connection.
fn sample(count: usize) -> io::Result<Figures> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, count.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let result = connect_all(&mut child, count);
    if result.is_err() {
        let _ = child.kill();
    }
    // Closing its standard input ends the server.
    drop(child.stdin.take());
    child.wait()?;
    result
}

/// Holds `count` connections to the server `child` until it has measured.
fn connect_all(child: &mut Child, count: usize) -> io::Result<Figures> {
    let mut lines = BufReader::new(child.stdout.take().ok_or_else(|| other("no pipe"))?);
    let line = read_line(&mut lines)?;
    let (addr, key) = line
        .split_once(' ')
        .ok_or_else(|| other("server said nothing"))?;
    let addr: SocketAddr = addr.parse().map_err(other)?;
    let der = unhex(key).ok_or_else(|| other("server key is not hex"))?;
    let public = PublicIdentity::from_spki_der(&der).map_err(other)?;
    crate::sockio_matrix::runtime()?.block_on(async {
        let endpoints = (0..CLIENT_ENDPOINTS)
            .map(|_| Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), client_config()))
            .collect::<io::Result<Vec<_>>>()?;
        let mut held: Vec<Connection> = Vec::with_capacity(count);
        let mut connecting = tokio::task::JoinSet::new();
        let (mut started, mut failed) = (0, 0);
        while held.len() < count {
            while started < count && connecting.len() < IN_FLIGHT {
                let (endpoint, public) = (
                    endpoints[started % CLIENT_ENDPOINTS].clone(),
                    public.clone(),
                );
                connecting.spawn(async move { endpoint.connect(addr, &public).await });
                started += 1;
            }
            match connecting.join_next().await {
                Some(connected) => match connected.map_err(other)? {
                    Ok(connection) => held.push(connection),
                    // A connect lost under load (its intros dropped in a
                    // full socket buffer until the handshake timeout) is
                    // made again, within a bound.
                    Err(e) if failed < count / 100 => {
                        failed += 1;
                        started -= 1;
                        eprintln!("   a connect failed ({e}); made again");
                    }
                    Err(e) => return Err(other(e)),
                },
                None => break,
            }
        }
        // The server measures once it holds them all; keep the client
        // endpoints running (they answer its keep-alives) meanwhile.
        let report = tokio::task::spawn_blocking(move || read_line(&mut lines))
            .await
            .map_err(other)??;
        for connection in &held {
            connection.abort(0, bytes::Bytes::new());
        }
        let figures: Vec<i64> = report
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(other)?;
        match figures[..] {
            [before, after, held, heap] if held > 1 => {
                // Fewer than were connected means some closed on the way
                // (an idle timeout while the server could not keep up):
                // their memory may stay resident, and the figure is per
                // connection still held.
                eprintln!("   the server holds {held} of the {count} connections made");
                let others = (held - 1) as f64;
                Ok(Figures {
                    resident: after.saturating_sub(before) as f64 / others,
                    heap: heap as f64 / others,
                })
            }
            _ => Err(other(format!("server reported {report:?}"))),
        }
    })
}

fn read_line(lines: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    if lines.read_line(&mut line)? == 0 {
        return Err(other("the server ended early"));
    }
    Ok(line.trim_end().to_owned())
}

/// Whether this process was started as the workload's server, and for how
/// many connections.
pub(crate) fn child_requested() -> Option<usize> {
    std::env::var(CHILD_ENV).ok()?.parse().ok()
}

/// The server process: binds, prints its address and key, accepts `count`
/// connections, prints its resident bytes after the first and after the
/// last and how many it holds, and ends when its standard input closes.
pub(crate) fn run_child(count: usize) -> io::Result<()> {
    // Whatever happens here, the harness closing the pipe ends this process.
    std::thread::spawn(|| {
        let _ = io::copy(&mut io::stdin(), &mut io::sink());
        std::process::exit(0);
    });
    let identity = IdentityKey::generate_x25519(&mut OsRng);
    let der = identity.public().to_spki_der().map_err(other)?;
    let mut out = io::stdout().lock();
    crate::sockio_matrix::runtime()?.block_on(async {
        let endpoint = Endpoint::bind(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            server_config(&identity),
        )?;
        writeln!(out, "{} {}", endpoint.local_addr(), hex(&der))?;
        out.flush()?;
        let mut held = Vec::with_capacity(count);
        let mut before = 0;
        let accepting = async {
            while held.len() < count {
                let Ok(Some(connection)) =
                    tokio::time::timeout(ACCEPT_STALL, endpoint.accept_connection()).await
                else {
                    break;
                };
                held.push(connection);
                if held.len() == 1 {
                    before = resident_bytes()?;
                    crate::alloc_count::start_weighing();
                }
            }
            io::Result::Ok(())
        };
        accepting.await?;
        tokio::time::sleep(SETTLE).await;
        let after = resident_bytes()?;
        let heap = crate::alloc_count::heap_held();
        writeln!(
            out,
            "{before} {after} {} {heap}",
            endpoint.stats().connections
        )?;
        out.flush()?;
        // Hold them until the harness lets go.
        std::future::pending::<()>().await;
        Ok(())
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_crosses_the_pipe_as_hex_and_back() {
        let bytes = [0x00, 0x7f, 0x80, 0xff, 0x30];
        assert_eq!(hex(&bytes), "007f80ff30");
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn quick_mode_names_the_metric_without_the_count_it_does_not_hold() {
        assert_eq!(prefix(Mode::Quick), "level3/idle/");
        assert_eq!(
            (prefix(Mode::Normal), connections(Mode::Normal)),
            ("level3/idle10k/", 10_000)
        );
        assert_eq!(
            (prefix(Mode::Full), connections(Mode::Full)),
            ("level3/idle100k/", 100_000)
        );
    }
}
