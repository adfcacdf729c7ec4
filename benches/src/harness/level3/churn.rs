//! Connection churn: four tasks on one client endpoint each connect cold
//! (RSA-2048 intro, X25519, one round trip), send one 64-byte message, wait
//! for its echo, close gracefully (until the connection is over), and start
//! again, for the sample's length. Connections completed per second; the
//! server's RSA decryption bounds it.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tern_peer::{Endpoint, IdentityKey, PublicIdentity};

use super::servers::{Reply, Servers, client_config, message, other};
use crate::cli::Args;
use crate::report::{Better, median};

const PREFIX: &str = "level3/churn";
/// Connections in progress at once.
const PARALLEL: usize = 4;

pub(super) fn names() -> Vec<String> {
    vec![format!("{PREFIX}/connections_per_s")]
}

pub(super) fn run(args: &Args, identity: &IdentityKey) {
    let length = args.mode.sample_time() * 4;
    let (mut rate, mut server_cpu) = (Vec::new(), Vec::new());
    for _ in 0..args.mode.samples() {
        match sample(identity, length) {
            Ok(Sample { done, elapsed, cpu }) => {
                rate.push(done as f64 / elapsed.as_secs_f64().max(1e-9));
                server_cpu.extend(cpu.map(|cpu| cpu.as_secs_f64() / done.max(1) as f64));
            }
            Err(e) => eprintln!("   {PREFIX}: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {PREFIX}: {:.0} connections/s (connect, one 64 B message and its echo, close; {PARALLEL} at once), {:.2} ms of the server thread's CPU each",
        median(&rate),
        median(&server_cpu) * 1e3
    );
    super::emit_metric(
        args,
        format!("{PREFIX}/connections_per_s"),
        "connections/s",
        Better::Higher,
        rate,
        None,
    );
}

/// What one sample measured.
struct Sample {
    /// Connections completed.
    done: u64,
    /// In how long (the last ones end after the sample's length).
    elapsed: Duration,
    /// CPU time the server's thread used meanwhile (none without thread
    /// clocks).
    cpu: Option<Duration>,
}

fn sample(identity: &IdentityKey, length: Duration) -> io::Result<Sample> {
    let servers = Servers::start(identity, 1, false, Reply::Echo)?;
    let cpu = servers.cpu_time();
    let (done, elapsed) = crate::sockio_matrix::runtime()?.block_on(async {
        let endpoint = Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), client_config())?;
        let start = Instant::now();
        let deadline = start + length;
        let tasks: Vec<_> = (0..PARALLEL)
            .map(|_| {
                let (endpoint, public) = (endpoint.clone(), servers.public.clone());
                tokio::spawn(churn(endpoint, servers.addr, public, deadline))
            })
            .collect();
        let mut done = 0;
        for task in tasks {
            done += task.await.map_err(other)??;
        }
        io::Result::Ok((done, start.elapsed()))
    })?;
    let cpu = cpu
        .zip(servers.cpu_time())
        .map(|(before, after)| after.saturating_sub(before));
    Ok(Sample { done, elapsed, cpu })
}

/// Connects, exchanges one message, closes, until `deadline`; returns how
/// many times.
async fn churn(
    endpoint: Endpoint,
    to: SocketAddr,
    public: PublicIdentity,
    deadline: Instant,
) -> io::Result<u64> {
    let mut done = 0;
    while Instant::now() < deadline {
        let connection = endpoint.connect(to, &public).await.map_err(other)?;
        connection.send(message()).await.map_err(other)?;
        let echo = connection.recv().await.map_err(other)?;
        if echo != message() {
            return Err(other("wrong echo"));
        }
        connection.close(0, Bytes::new()).await;
        done += 1;
    }
    Ok(done)
}
