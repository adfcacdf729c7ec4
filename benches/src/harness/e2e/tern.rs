//! Tern in the end-to-end workloads, configured as a user would: one
//! [`Endpoint`] per side, each on its own thread's current-thread runtime
//! (what Tern recommends), the best tern-sockio backend the kernel has,
//! maximum UDP payload 1 452 bytes, the default AEAD backend of this build.
//!
//! - `bulk`: one bidirectional stream; the client writes the bytes in
//!   64 KiB writes and finishes, the server reads to the end and answers
//!   with 64 bytes on the same stream.
//! - requests: Tern's idiom is the message. The client sends 64-byte
//!   messages carrying a request number, up to `in_flight` at once, and the
//!   server answers each with a 64-byte message carrying the same number,
//!   so every round trip is timed exactly.
//! - `connect`: a cold connect (RSA-2048 intro, X25519, one round trip)
//!   until the connection is usable. The server's intro rate limits are
//!   raised for the benchmark (all connects come from 127.0.0.1, which the
//!   defaults allow 10 per second).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use rand_core::OsRng;
use tern_peer::proto::EndpointConfig;
use tern_peer::{Config, Connection, Endpoint, IdentityKey, PublicIdentity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{REQUEST_LEN, WRITE_LEN, Workloads};

/// A Tern server on its own thread and a client endpoint on this one.
pub(crate) struct Tern {
    client: tokio::runtime::Runtime,
    endpoint: Endpoint,
    server_addr: SocketAddr,
    public: PublicIdentity,
    /// Dropping it stops the server's runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn config() -> Config {
    Config::default().max_udp_payload(1452)
}

impl Tern {
    pub(crate) fn start() -> io::Result<Self> {
        let identity = IdentityKey::generate(&mut OsRng).map_err(other)?;
        let public = identity.public();
        let mut protocol = EndpointConfig::default();
        protocol.intro_limits.per_source_rate = 100_000;
        protocol.intro_limits.per_source_burst = 1_000;
        protocol.intro_limits.total_rate = 100_000;
        protocol.intro_limits.total_burst = 1_000;
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("tern-server".to_owned())
            .spawn(move || {
                let runtime = match crate::sockio_matrix::runtime() {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = addr_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
                    let server_config = config().protocol(protocol).identity(identity);
                    let endpoint = match Endpoint::bind(loopback, server_config) {
                        Ok(e) => e,
                        Err(e) => {
                            let _ = addr_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = addr_tx.send(Ok(endpoint.local_addr()));
                    tokio::select! {
                        () = serve(&endpoint) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        let server_addr = addr_rx.recv().map_err(other)??;
        let client = crate::sockio_matrix::runtime()?;
        let endpoint = client
            .block_on(async { Endpoint::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config()) })?;
        Ok(Self {
            client,
            endpoint,
            server_addr,
            public,
            _stop: stop,
        })
    }

    async fn connect(&self) -> io::Result<Connection> {
        self.endpoint
            .connect(self.server_addr, &self.public)
            .await
            .map_err(other)
    }
}

/// Accepts connections; answers every message with one of the same number,
/// and every stream, once read to its end, with 64 bytes.
async fn serve(endpoint: &Endpoint) {
    while let Some(connection) = endpoint.accept().await {
        let streams = connection.clone();
        tokio::spawn(async move {
            while let Ok(mut stream) = streams.accept_stream().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; WRITE_LEN];
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                    if stream.write_all(&[0x5a; REQUEST_LEN]).await.is_ok() {
                        let _ = stream.shutdown().await;
                    }
                });
            }
        });
        tokio::spawn(async move {
            while let Ok(request) = connection.recv().await {
                if connection.send(request).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// A 64-byte request carrying its number.
fn request(number: u64) -> Bytes {
    let mut bytes = [0xa5u8; REQUEST_LEN];
    bytes[..8].copy_from_slice(&number.to_le_bytes());
    Bytes::copy_from_slice(&bytes)
}

fn number(answer: &[u8]) -> io::Result<u64> {
    let head = answer.get(..8).ok_or_else(|| other("short answer"))?;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(head);
    Ok(u64::from_le_bytes(bytes))
}

impl Workloads for Tern {
    fn bulk(&mut self, bytes: u64) -> io::Result<Duration> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let chunk = vec![0xa5u8; WRITE_LEN];
            let start = Instant::now();
            let mut stream = connection.open_stream().await.map_err(other)?;
            let mut left = bytes;
            while left > 0 {
                let n = left.min(WRITE_LEN as u64) as usize;
                stream.write_all(&chunk[..n]).await?;
                left -= n as u64;
            }
            stream.shutdown().await?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await?;
            let elapsed = start.elapsed();
            if answer.len() != REQUEST_LEN {
                return Err(other("no answer"));
            }
            drop(stream);
            connection.close(0, Bytes::new()).await;
            Ok(elapsed)
        })
    }

    fn requests(
        &mut self,
        in_flight: usize,
        duration: Duration,
        latencies: &mut Histogram<u64>,
    ) -> io::Result<(u64, Duration)> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let start = Instant::now();
            let deadline = start + duration;
            // One request in flight per slot; a request carries its slot's
            // number, and so does its answer.
            let mut sent_at = vec![start; in_flight];
            for (slot, at) in sent_at.iter_mut().enumerate() {
                *at = Instant::now();
                connection.send(request(slot as u64)).await.map_err(other)?;
            }
            let (mut done, mut outstanding) = (0u64, in_flight);
            while outstanding > 0 {
                let answer = connection.recv().await.map_err(other)?;
                let slot = usize::try_from(number(&answer)?)
                    .ok()
                    .filter(|&s| s < in_flight)
                    .ok_or_else(|| other("answer to no request"))?;
                let now = Instant::now();
                latencies.saturating_record(super::nanos(now - sent_at[slot]));
                done += 1;
                outstanding -= 1;
                if now < deadline {
                    sent_at[slot] = Instant::now();
                    connection.send(request(slot as u64)).await.map_err(other)?;
                    outstanding += 1;
                }
            }
            let elapsed = start.elapsed();
            connection.close(0, Bytes::new()).await;
            Ok((done, elapsed))
        })
    }

    fn connects(&mut self, count: usize, latencies: &mut Histogram<u64>) -> io::Result<()> {
        self.client.block_on(async {
            for _ in 0..count {
                let start = Instant::now();
                let connection = self.connect().await?;
                latencies.saturating_record(super::nanos(start.elapsed()));
                connection.close(0, Bytes::new()).await;
            }
            Ok(())
        })
    }
}
