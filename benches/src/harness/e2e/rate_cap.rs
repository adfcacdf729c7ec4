//! Rate caps: what one connection achieves under `Config::rate_limit` (the
//! token bucket) at 10, 100 and 1 000 Mbit/s, as a share of what was
//! configured. One stream, one way, over loopback, for a fixed time after a
//! short warm-up (so the bucket's initial burst is not counted).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand_core::OsRng;
use tern_peer::{Config, Endpoint, IdentityKey};

use crate::cli::Args;
use crate::report::{Better, Metric, emit, median};

const RATES_MBIT: [u64; 3] = [10, 100, 1_000];

struct RateCaps;

pub(super) fn group() -> Box<dyn crate::Group> {
    Box::new(RateCaps)
}

fn name(mbit: u64) -> String {
    format!("e2e/tern/ratecap/{mbit}mbit/achieved_share")
}

impl crate::Group for RateCaps {
    fn name(&self) -> &str {
        "e2e/tern/ratecap"
    }

    fn level(&self) -> u8 {
        2
    }

    fn selected(&self, args: &Args) -> bool {
        RATES_MBIT.iter().any(|&m| args.wants(&name(m)))
    }

    fn run(&self, args: &Args) {
        let identity = match IdentityKey::generate(&mut OsRng) {
            Ok(k) => k,
            Err(e) => {
                eprintln!("   e2e/tern/ratecap: no key: {e}");
                return;
            }
        };
        for mbit in RATES_MBIT {
            if !args.wants(&name(mbit)) {
                continue;
            }
            let mut shares = Vec::new();
            for _ in 0..args.mode.samples() {
                let length = args.mode.sample_time() * 8;
                match sample(&identity, mbit, length) {
                    Ok(share) => shares.push(share),
                    Err(e) => eprintln!("   {}: sample failed: {e}", name(mbit)),
                }
            }
            eprintln!(
                "   e2e/tern/ratecap/{mbit}mbit: {:.1} % of the configured rate",
                median(&shares) * 100.0
            );
            if !shares.is_empty() {
                emit(&Metric {
                    name: name(mbit),
                    level: 2,
                    unit: "ratio",
                    better: Better::Higher,
                    samples: shares,
                    ceiling: None,
                });
            }
        }
    }
}

/// One run: the achieved rate over `length` after a warm-up, as a share of
/// `mbit`.
fn sample(identity: &IdentityKey, mbit: u64, length: Duration) -> io::Result<f64> {
    let runtime = crate::sockio_matrix::runtime()?;
    runtime.block_on(async {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let server = Endpoint::bind(loopback, Config::default().identity(identity.clone()))?;
        let config = Config::default().rate_limit(Some(mbit * 1_000_000 / 8));
        let client = Endpoint::bind(loopback, config)?;
        let public = identity.public();
        let (connected, accepted) = tokio::join!(
            client.connect(server.local_addr(), &public),
            server.accept_connection()
        );
        let connection = connected.map_err(io::Error::other)?;
        let accepted = accepted.ok_or_else(|| io::Error::other("not accepted"))?;
        let (mut stream, _) = connection.open_bi().await.map_err(io::Error::other)?;
        let reader = tokio::spawn(async move {
            let (_, mut stream) = accepted.accept_bi().await.map_err(io::Error::other)?;
            let mut buf = vec![0u8; 64 * 1024];
            let warm_up = Duration::from_millis(300);
            let begin = Instant::now();
            let (mut measured_from, mut bytes) = (None, 0u64);
            loop {
                let Some(n) = stream.read(&mut buf).await? else {
                    break;
                };
                match measured_from {
                    None if begin.elapsed() >= warm_up => measured_from = Some(Instant::now()),
                    Some(_) => bytes += n as u64,
                    None => {}
                }
                if measured_from.is_some_and(|t| t.elapsed() >= length) {
                    break;
                }
            }
            let elapsed = measured_from.map_or(Duration::ZERO, |t| t.elapsed());
            io::Result::Ok(bytes as f64 * 8.0 / elapsed.as_secs_f64().max(1e-9))
        });
        // Write until the reader has measured enough (it then lets go of
        // its connection, which ends the writes). Only the stream's content
        // is irrelevant here, so an interrupted write is simply restarted.
        let chunk = vec![0x5a_u8; 64 * 1024];
        while !reader.is_finished() {
            tokio::select! {
                written = stream.write_all(&chunk) => if written.is_err() { break },
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let achieved = reader.await.map_err(io::Error::other)??;
        connection.abort(0, Bytes::new());
        Ok(achieved / (mbit as f64 * 1e6))
    })
}
