//! quinn as the comparison transport, configured so anyone can check it:
//!
//! - quinn 0.11 with rustls 0.23 and ring's crypto, TLS 1.3 with the single
//!   cipher suite `TLS13_AES_128_GCM_SHA256` (the AEAD Tern uses);
//! - a self-signed ECDSA P-256 certificate (rcgen's default) that the client
//!   trusts as its only root, so every handshake verifies a real chain;
//! - session resumption off on the client, so every connect is a full
//!   handshake, as Tern's are;
//! - quinn's defaults otherwise: GSO and GRO on where the kernel has them,
//!   initial MTU 1200 probing up to 1452 bytes of UDP payload, its default
//!   flow-control windows and congestion controller (Cubic).
//!
//! Each request is a bidirectional stream (quinn's idiom): the client writes
//! 64 bytes and finishes, the server reads to the end and answers with up to
//! 64 bytes. `bulk` is the same exchange with a large request, so the server
//! answers once it has read everything; on several streams, one task per
//! stream.
//!
//! quinn has no messages, so a message is one stream, its idiom for them:
//! in `messages` a bidirectional stream, exchanged like a request; in
//! `message_flood` a unidirectional stream per 1 KiB message, which the
//! server counts once read to its end, and a last bidirectional stream
//! that the server answers once it has counted them all. `bidirectional`
//! is one bidirectional stream the server echoes chunk by chunk; `clients`
//! is one `quinn::Endpoint` per client (its own socket), configured as
//! above.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::quinn_tls::{SERVER_NAME, other, tls};
use super::{ClientsSample, REQUEST_LEN, WARM_UP, WRITE_LEN, Workloads, ask};

/// A quinn server on its own thread and a client endpoint on this one.
pub(crate) struct Quinn {
    client: tokio::runtime::Runtime,
    endpoint: quinn::Endpoint,
    /// For the endpoints of `clients`.
    client_config: quinn::ClientConfig,
    server_addr: SocketAddr,
    /// Dropping it stops the server's runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Quinn {
    pub(crate) fn start() -> io::Result<Self> {
        let (server_tls, client_tls) = tls()?;
        let server_config = quinn::ServerConfig::with_crypto(Arc::new(
            QuicServerConfig::try_from(server_tls).map_err(other)?,
        ));
        let client_config = quinn::ClientConfig::new(Arc::new(
            QuicClientConfig::try_from(client_tls).map_err(other)?,
        ));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("quinn-server".to_owned())
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
                    let endpoint = match quinn::Endpoint::server(server_config, loopback) {
                        Ok(e) => e,
                        Err(e) => {
                            let _ = addr_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = addr_tx.send(endpoint.local_addr());
                    tokio::select! {
                        () = serve(&endpoint) => {}
                        _ = stopped => {}
                    }
                    endpoint.close(0u32.into(), b"done");
                });
            })?;
        let server_addr = addr_rx.recv().map_err(other)??;
        let client = crate::sockio_matrix::runtime()?;
        let endpoint = client.block_on(async {
            let mut endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0)))?;
            endpoint.set_default_client_config(client_config.clone());
            io::Result::Ok(endpoint)
        })?;
        Ok(Self {
            client,
            endpoint,
            client_config,
            server_addr,
            _stop: stop,
        })
    }

    async fn connect(&self) -> io::Result<quinn::Connection> {
        self.endpoint
            .connect(self.server_addr, SERVER_NAME)
            .map_err(other)?
            .await
            .map_err(other)
    }
}

/// Accepts connections and serves every stream on them.
async fn serve(endpoint: &quinn::Endpoint) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let Ok(connection) = incoming.await else {
                return;
            };
            // Unidirectional streams read to their end, for `TALLY`.
            let counted = Arc::new(watch::Sender::new(0u64));
            let uni = connection.clone();
            let counter = Arc::clone(&counted);
            tokio::spawn(async move {
                while let Ok(recv) = uni.accept_uni().await {
                    let counter = Arc::clone(&counter);
                    tokio::spawn(async move {
                        if drain(recv).await.is_some() {
                            counter.send_modify(|c| *c += 1);
                        }
                    });
                }
            });
            while let Ok((send, recv)) = connection.accept_bi().await {
                tokio::spawn(answer(send, recv, counted.subscribe()));
            }
        });
    }
}

/// Reads a stream to its end; returns how many bytes it held (`None` if
/// it was reset).
async fn drain(mut recv: quinn::RecvStream) -> Option<usize> {
    let mut received = 0;
    loop {
        match recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => received += chunk.bytes.len(),
            Ok(None) => return Some(received),
            Err(_) => return None,
        }
    }
}

/// Echoes an `ECHO` stream; answers a `TALLY` once `counted` reaches its
/// count; reads any other stream to its end, then answers with up to 64
/// bytes.
async fn answer(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut counted: watch::Receiver<u64>,
) {
    let first = match recv.read_chunk(usize::MAX, true).await {
        Ok(Some(chunk)) => chunk.bytes,
        Ok(None) => Bytes::new(),
        Err(_) => return,
    };
    let reply = match first.first() {
        Some(&ask::ECHO) => {
            let mut chunk = first;
            loop {
                if send.write_chunk(chunk).await.is_err() {
                    return;
                }
                chunk = match recv.read_chunk(usize::MAX, true).await {
                    Ok(Some(chunk)) => chunk.bytes,
                    Ok(None) => break,
                    Err(_) => return,
                };
            }
            None
        }
        Some(&ask::TALLY) => {
            let Some(count) = super::tally_count(&first) else {
                return;
            };
            if drain(recv).await.is_none() || counted.wait_for(|c| *c >= count).await.is_err() {
                return;
            }
            Some(first.slice(..first.len().min(REQUEST_LEN)))
        }
        _ => {
            let Some(rest) = drain(recv).await else {
                return;
            };
            let received = first.len() + rest;
            Some(Bytes::from_static(&[0x5a; REQUEST_LEN]).slice(..received.min(REQUEST_LEN)))
        }
    };
    if let Some(reply) = reply
        && send.write_chunk(reply).await.is_err()
    {
        return;
    }
    let _ = send.finish();
    let _ = send.stopped().await;
}

/// Writes `bytes` on a new bidirectional stream, finishes it and waits for
/// the server's answer.
async fn send_stream(connection: quinn::Connection, bytes: u64) -> io::Result<()> {
    let chunk = Bytes::from(vec![0xa5; WRITE_LEN]);
    let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(WRITE_LEN as u64) as usize;
        send.write_chunk(chunk.slice(..n)).await.map_err(other)?;
        left -= n as u64;
    }
    send.finish().map_err(other)?;
    recv.read_to_end(REQUEST_LEN).await.map_err(other)?;
    Ok(())
}

/// Writes on a new bidirectional stream until `deadline`, finishes it and
/// waits for the server's answer; returns the bytes written.
async fn send_until(connection: quinn::Connection, deadline: Instant) -> io::Result<u64> {
    let chunk = Bytes::from(vec![0xa5; WRITE_LEN]);
    let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
    let mut written = 0;
    while Instant::now() < deadline {
        send.write_chunk(chunk.clone()).await.map_err(other)?;
        written += WRITE_LEN as u64;
    }
    send.finish().map_err(other)?;
    recv.read_to_end(REQUEST_LEN).await.map_err(other)?;
    Ok(written)
}

/// One exchange: sends `request` (as chunks), finishes, reads the answer.
async fn exchange(connection: &quinn::Connection, request: &mut [Bytes]) -> io::Result<()> {
    let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
    send.write_all_chunks(request).await.map_err(other)?;
    send.finish().map_err(other)?;
    let answer = recv.read_to_end(REQUEST_LEN).await.map_err(other)?;
    if answer.is_empty() {
        return Err(other("empty answer"));
    }
    Ok(())
}

impl Workloads for Quinn {
    fn server_addr(&self) -> SocketAddr {
        self.server_addr
    }

    fn bulk(&mut self, streams: usize, bytes: u64) -> io::Result<Duration> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let start = Instant::now();
            let mut senders = JoinSet::new();
            for _ in 0..streams {
                senders.spawn(send_stream(connection.clone(), bytes));
            }
            while let Some(sent) = senders.join_next().await {
                sent.map_err(other)??;
            }
            let elapsed = start.elapsed();
            connection.close(0u32.into(), b"done");
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
            let request = Bytes::from_static(&[0xa5; REQUEST_LEN]);
            let start = Instant::now();
            let deadline = start + duration;
            let mut workers = tokio::task::JoinSet::new();
            for _ in 0..in_flight {
                let connection = connection.clone();
                let request = request.clone();
                workers.spawn(async move {
                    let mut times = Vec::new();
                    while Instant::now() < deadline {
                        let start = Instant::now();
                        exchange(&connection, &mut [request.clone()]).await?;
                        times.push(start.elapsed());
                    }
                    io::Result::Ok(times)
                });
            }
            let mut done = 0;
            while let Some(result) = workers.join_next().await {
                for t in result.map_err(other)?? {
                    latencies.saturating_record(super::nanos(t));
                    done += 1;
                }
            }
            let elapsed = start.elapsed();
            connection.close(0u32.into(), b"done");
            Ok((done, elapsed))
        })
    }

    fn connects(&mut self, count: usize, latencies: &mut Histogram<u64>) -> io::Result<()> {
        self.client.block_on(async {
            for _ in 0..count {
                let start = Instant::now();
                let connection = self.connect().await?;
                latencies.saturating_record(super::nanos(start.elapsed()));
                connection.close(0u32.into(), b"done");
            }
            Ok(())
        })
    }

    fn messages(
        &mut self,
        to: SocketAddr,
        len: usize,
        count: usize,
        latencies: &mut Histogram<u64>,
    ) -> io::Result<()> {
        self.client.block_on(async {
            let connection = self
                .endpoint
                .connect(to, SERVER_NAME)
                .map_err(other)?
                .await
                .map_err(other)?;
            let message = Bytes::from(vec![0xa5; len]);
            for i in 0..WARM_UP + count {
                let start = Instant::now();
                exchange(&connection, &mut [message.clone()]).await?;
                if i >= WARM_UP {
                    latencies.saturating_record(super::nanos(start.elapsed()));
                }
            }
            connection.close(0u32.into(), b"done");
            Ok(())
        })
    }

    fn message_flood(&mut self, len: usize, duration: Duration) -> io::Result<(u64, Duration)> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let mut message = vec![0xa5; len];
            if let Some(first) = message.first_mut() {
                *first = ask::COUNT;
            }
            let message = Bytes::from(message);
            let start = Instant::now();
            let deadline = start + duration;
            let mut sent = 0u64;
            while Instant::now() < deadline {
                let mut send = connection.open_uni().await.map_err(other)?;
                send.write_chunk(message.clone()).await.map_err(other)?;
                send.finish().map_err(other)?;
                sent += 1;
            }
            let tally = super::tally(sent);
            let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
            send.write_all(&tally).await.map_err(other)?;
            send.finish().map_err(other)?;
            let answer = recv.read_to_end(REQUEST_LEN).await.map_err(other)?;
            let elapsed = start.elapsed();
            if answer != tally {
                return Err(other("wrong tally"));
            }
            connection.close(0u32.into(), b"done");
            Ok((sent, elapsed))
        })
    }

    fn bidirectional(&mut self, bytes: u64) -> io::Result<Duration> {
        self.client.block_on(async {
            let connection = self.connect().await?;
            let mut chunk = vec![0xa5; WRITE_LEN];
            chunk[0] = ask::ECHO;
            let chunk = Bytes::from(chunk);
            let start = Instant::now();
            let (mut send, mut recv) = connection.open_bi().await.map_err(other)?;
            let write = async {
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(WRITE_LEN as u64) as usize;
                    send.write_chunk(chunk.slice(..n)).await.map_err(other)?;
                    left -= n as u64;
                }
                send.finish().map_err(other)
            };
            let read = async {
                let mut echoed = 0u64;
                while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.map_err(other)? {
                    echoed += chunk.bytes.len() as u64;
                }
                io::Result::Ok(echoed)
            };
            let (written, echoed) = tokio::join!(write, read);
            written?;
            let elapsed = start.elapsed();
            if echoed? != bytes {
                return Err(other("short echo"));
            }
            connection.close(0u32.into(), b"done");
            Ok(elapsed)
        })
    }

    fn clients(&mut self, clients: usize, duration: Duration) -> io::Result<ClientsSample> {
        self.client.block_on(async {
            let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
            let mut connections = Vec::with_capacity(clients);
            for _ in 0..clients {
                let mut endpoint = quinn::Endpoint::client(loopback)?;
                endpoint.set_default_client_config(self.client_config.clone());
                let connection = endpoint
                    .connect(self.server_addr, SERVER_NAME)
                    .map_err(other)?
                    .await
                    .map_err(other)?;
                connections.push((endpoint, connection));
            }
            let start = Instant::now();
            let deadline = start + duration;
            let mut senders = JoinSet::new();
            for (_, connection) in &connections {
                senders.spawn(send_until(connection.clone(), deadline));
            }
            let mut bytes = 0;
            while let Some(sent) = senders.join_next().await {
                bytes += sent.map_err(other)??;
            }
            let elapsed = start.elapsed();
            // All closed first, so they drain at once.
            for (_, connection) in &connections {
                connection.close(0u32.into(), b"done");
            }
            for (endpoint, _) in connections {
                endpoint.wait_idle().await;
            }
            Ok(ClientsSample {
                bytes,
                elapsed,
                datagrams_per_recv_call: None,
            })
        })
    }
}
