//! Goodput at 1 % loss: one stream from a client endpoint to a server
//! endpoint through the harness's relay, which holds every datagram 1 ms
//! each way and drops 1 % of them in each direction (seeded). Stream bytes
//! the server read per second, and their share of what halving on loss
//! allows, the Mathis bound MSS/RTT × 1.22/√p, with the connection's own
//! smoothed round trip. tern-sim measures the same on a model
//! (`crates/proto/tests/proto_goodput.rs`); this is the real stack, sockets
//! and timers included.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tern_peer::{Endpoint, IdentityKey};

use super::servers::{client_config, other, server_config};
use crate::cli::Args;
use crate::relay::{Impairment, Relay};
use crate::report::{Better, median};
use crate::sockio_matrix::runtime;

const PREFIX: &str = "level3/loss1pct";
const LOSS: f64 = 0.01;
const ONE_WAY: Duration = Duration::from_millis(1);
/// Stream bytes per full datagram (the Mathis bound's MSS).
const MSS: f64 = 1_400.0;
const WRITE_LEN: usize = 64 * 1024;

pub(super) fn names() -> Vec<String> {
    vec![
        format!("{PREFIX}/goodput_bytes_per_s"),
        format!("{PREFIX}/share_of_mathis"),
    ]
}

/// The Mathis bound in bytes per second.
fn mathis(rtt: Duration, loss: f64) -> f64 {
    MSS / rtt.as_secs_f64().max(1e-9) * 1.22 / loss.sqrt()
}

struct Sample {
    goodput: f64,
    rtt: Duration,
}

pub(super) fn run(args: &Args, identity: &IdentityKey) {
    let length = args.mode.sample_time() * 4;
    let (mut goodput, mut share) = (Vec::new(), Vec::new());
    let mut rtts = Vec::new();
    for seed in 0..args.mode.samples() as u64 {
        match sample(identity, length, seed) {
            Ok(s) => {
                goodput.push(s.goodput);
                share.push(s.goodput / mathis(s.rtt, LOSS));
                rtts.push(s.rtt.as_secs_f64() * 1e3);
            }
            Err(e) => eprintln!("   {PREFIX}: sample failed: {e}"),
        }
    }
    eprintln!(
        "   {PREFIX}: {:.2} MB/s of stream through a relay dropping 1 % each way, RTT {:.2} ms: {:.0} % of the Mathis bound",
        median(&goodput) / 1e6,
        median(&rtts),
        100.0 * median(&share)
    );
    super::emit_metric(
        args,
        format!("{PREFIX}/goodput_bytes_per_s"),
        "B/s",
        Better::Higher,
        goodput,
        None,
    );
    super::emit_metric(
        args,
        format!("{PREFIX}/share_of_mathis"),
        "x",
        Better::Higher,
        share,
        None,
    );
}

/// One stream for `length`, written as fast as it takes bytes.
fn sample(identity: &IdentityKey, length: Duration, seed: u64) -> io::Result<Sample> {
    let public = identity.public();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = server_config(identity);
    let server = std::thread::spawn(move || -> io::Result<()> {
        runtime()?.block_on(async move {
            let endpoint = Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config)?;
            let _ = addr_tx.send(endpoint.local_addr());
            tokio::select! {
                () = read_streams(&endpoint) => {}
                _ = stopped => {}
            }
            Ok(())
        })
    });
    let server_addr = addr_rx.recv().map_err(other)?;
    let relay = Relay::start(
        server_addr,
        Impairment {
            delay: ONE_WAY,
            loss: LOSS,
            seed,
        },
    )?;
    let result = runtime()?.block_on(async {
        let endpoint = Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), client_config())?;
        let connection = endpoint
            .connect(relay.addr(), &public)
            .await
            .map_err(other)?;
        let (mut stream, mut answers) = connection.open_bi().await.map_err(other)?;
        let chunk = vec![0xa5u8; WRITE_LEN];
        let start = Instant::now();
        let mut written = 0u64;
        while start.elapsed() < length {
            stream.write_all(&chunk).await?;
            written += WRITE_LEN as u64;
        }
        stream.finish().map_err(other)?;
        let answer: [u8; 8] = answers
            .read_to_end(8)
            .await
            .map_err(other)?
            .try_into()
            .map_err(|_| other("a short count"))?;
        let elapsed = start.elapsed();
        if u64::from_le_bytes(answer) != written {
            return Err(other("the server read a different count"));
        }
        let rtt = connection
            .stats()
            .map(|s| s.rtt)
            .ok_or_else(|| other("the connection ended early"))?;
        connection.close(0, Bytes::new()).await;
        Ok(Sample {
            goodput: written as f64 / elapsed.as_secs_f64().max(1e-9),
            rtt,
        })
    });
    drop(stop);
    server.join().map_err(|_| other("the server panicked"))??;
    result
}

/// Reads every stream to its end and answers with the count, little-endian.
async fn read_streams(endpoint: &Endpoint) {
    while let Some(connection) = endpoint.accept_connection().await {
        tokio::spawn(async move {
            while let Ok((mut send, mut recv)) = connection.accept_bi().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; WRITE_LEN];
                    let mut read = 0u64;
                    while let Ok(Some(n)) = recv.read(&mut buf).await {
                        read += n as u64;
                    }
                    if send.write_all(&read.to_le_bytes()).await.is_ok() {
                        let _ = send.finish();
                    }
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mathis_bound_follows_rtt_and_loss() {
        // 1 400 B / 2 ms × 1.22 / 0.1 = 8.54 MB/s.
        let bound = mathis(Duration::from_millis(2), 0.01);
        assert!((bound - 8_540_000.0).abs() < 1.0, "{bound}");
        assert!(mathis(Duration::from_millis(4), 0.01) < bound);
        assert!(mathis(Duration::from_millis(2), 0.04) < bound);
    }
}
