//! Goodput through the harness's relay, the real stack with its sockets and
//! timers (tern-sim measures the same on models: `proto_goodput.rs`,
//! `proto_reordering.rs`). One stream from a client endpoint to a server
//! endpoint, written as fast as it takes bytes; stream bytes the server
//! read per second, and their share of what halving on loss allows, the
//! Mathis bound MSS/RTT × 1.22/√p, with the connection's own smoothed round
//! trip.
//!
//! Two paths:
//! - `loss1pct`: 1 ms each way, 1 % of datagrams dropped each way (seeded).
//! - `relaypath`: the bad path issue #26 names, as `proto_reordering.rs`
//!   models it: 5 ms each way plus up to 2 ms of jitter, 3 % dropped, 2 %
//!   arriving twice, 5 % held back a further 6 ms, both ways; for LEDBAT
//!   and CUBIC, also the losses the sender declared over the datagrams the
//!   relay dropped on their way to the server (reordering read as loss
//!   shows as a ratio above 1).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tern_peer::{CongestionConfig, Endpoint, IdentityKey};

use super::servers::{client_config, other, server_config};
use crate::cli::Args;
use crate::relay::{Impairment, Relay};
use crate::report::{Better, median};
use crate::sockio_matrix::runtime;

const LOSS1PCT: &str = "level3/loss1pct";
const RELAYPATH: &str = "level3/relaypath";
/// Stream bytes per full datagram (the Mathis bound's MSS).
const MSS: f64 = 1_400.0;
const WRITE_LEN: usize = 64 * 1024;

/// The relay path's controllers, by the name their figures carry.
const CONTROLLERS: [&str; 2] = ["ledbat", "cubic"];

pub(super) fn names() -> Vec<String> {
    let mut names = vec![
        format!("{LOSS1PCT}/goodput_bytes_per_s"),
        format!("{LOSS1PCT}/share_of_mathis"),
    ];
    for controller in CONTROLLERS {
        for figure in [
            "goodput_bytes_per_s",
            "share_of_mathis",
            "declared_over_dropped",
        ] {
            names.push(format!("{RELAYPATH}/{controller}/{figure}"));
        }
    }
    names
}

/// The Mathis bound in bytes per second.
fn mathis(rtt: Duration, loss: f64) -> f64 {
    MSS / rtt.as_secs_f64().max(1e-9) * 1.22 / loss.sqrt()
}

/// The 1 % path, with `seed`.
fn one_percent(seed: u64) -> Impairment {
    Impairment {
        loss: 0.01,
        seed,
        ..Impairment::delay(Duration::from_millis(1))
    }
}

/// The relay path of issue #26, with `seed`.
fn relay_path(seed: u64) -> Impairment {
    Impairment {
        jitter: Duration::from_millis(2),
        reorder: 0.05,
        loss: 0.03,
        duplicate: 0.02,
        seed,
        ..Impairment::delay(Duration::from_millis(5))
    }
}

struct Sample {
    goodput: f64,
    rtt: Duration,
    /// Packets the client declared lost.
    declared: u64,
    /// Datagrams the relay dropped on their way to the server.
    dropped: u64,
}

/// The figures of one path and controller over the mode's samples.
#[derive(Default)]
struct Figures {
    goodput: Vec<f64>,
    share: Vec<f64>,
    rtts: Vec<f64>,
    declared_over_dropped: Vec<f64>,
}

impl Figures {
    fn take(
        prefix: &str,
        args: &Args,
        identity: &IdentityKey,
        congestion: CongestionConfig,
        path: fn(u64) -> Impairment,
    ) -> Self {
        let length = args.mode.sample_time() * 4;
        let mut figures = Self::default();
        for seed in 0..args.mode.samples() as u64 {
            let impairment = path(seed);
            match sample(identity, congestion, impairment, length) {
                Ok(s) => {
                    figures.goodput.push(s.goodput);
                    figures
                        .share
                        .push(s.goodput / mathis(s.rtt, impairment.loss));
                    figures.rtts.push(s.rtt.as_secs_f64() * 1e3);
                    figures
                        .declared_over_dropped
                        .push(s.declared as f64 / s.dropped.max(1) as f64);
                }
                Err(e) => eprintln!("   {prefix}: sample failed: {e}"),
            }
        }
        eprintln!(
            "   {prefix}: {:.2} MB/s of stream, RTT {:.2} ms: {:.0} % of the Mathis bound; declared lost {:.2}x what the relay dropped",
            median(&figures.goodput) / 1e6,
            median(&figures.rtts),
            100.0 * median(&figures.share),
            median(&figures.declared_over_dropped),
        );
        figures
    }

    fn emit(self, args: &Args, prefix: &str, with_ratio: bool) {
        let metric = |name: &str, unit, better, samples| {
            super::emit_metric(
                args,
                format!("{prefix}/{name}"),
                unit,
                better,
                samples,
                None,
            );
        };
        metric("goodput_bytes_per_s", "B/s", Better::Higher, self.goodput);
        metric("share_of_mathis", "x", Better::Higher, self.share);
        if with_ratio {
            metric(
                "declared_over_dropped",
                "x",
                Better::Lower,
                self.declared_over_dropped,
            );
        }
    }
}

/// Whether any figure under `prefix` is asked for.
fn wanted(args: &Args, prefix: &str) -> bool {
    names()
        .iter()
        .any(|name| name.starts_with(prefix) && args.wants(name))
}

pub(super) fn run(args: &Args, identity: &IdentityKey) {
    if wanted(args, LOSS1PCT) {
        Figures::take(
            LOSS1PCT,
            args,
            identity,
            CongestionConfig::default(),
            one_percent,
        )
        .emit(args, LOSS1PCT, false);
    }
    for controller in CONTROLLERS {
        let prefix = format!("{RELAYPATH}/{controller}");
        if !wanted(args, &prefix) {
            continue;
        }
        let congestion = match controller {
            "cubic" => CongestionConfig::cubic(),
            _ => CongestionConfig::default(),
        };
        Figures::take(&prefix, args, identity, congestion, relay_path).emit(args, &prefix, true);
    }
}

/// One stream for `length`, written as fast as it takes bytes.
fn sample(
    identity: &IdentityKey,
    congestion: CongestionConfig,
    impairment: Impairment,
    length: Duration,
) -> io::Result<Sample> {
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
    let relay = Relay::start(server_addr, impairment)?;
    let result = runtime()?.block_on(async {
        let endpoint = Endpoint::bind(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            client_config().congestion(congestion),
        )?;
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
        let stats = connection
            .stats()
            .ok_or_else(|| other("the connection ended early"))?;
        connection.close(0, Bytes::new()).await;
        Ok(Sample {
            goodput: written as f64 / elapsed.as_secs_f64().max(1e-9),
            rtt: stats.rtt,
            declared: stats.lost_packets,
            dropped: relay.counts().dropped_to_server,
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
