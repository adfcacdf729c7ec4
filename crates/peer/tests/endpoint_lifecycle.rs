//! An endpoint's life on real loopback sockets (issue #27): what is sent
//! before the last handle goes still arrives, a closed endpoint takes no
//! new connections, and no call waits forever.

mod support;

use std::time::Duration;

use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use support::net::{client, localhost, numbered, pair, server, server_with};
use tern_peer::driver::{Driver, DriverConfig};
use tern_peer::proto::{EndpointConfig, Instant, Node, Transmit, TransmitLimits};
use tern_peer::{
    Backend, Bytes, Config, ConnectError, Connection, ConnectionError, ConnectionLost, Endpoint,
    StopCause, WriteError,
};

/// Longer than anything below should take, shorter than the idle timeout
/// (30 s) that would end a connection whose peer vanished.
const PATIENCE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn dropping_every_handle_still_delivers_what_was_sent_and_the_close() {
    let (server, client) = (server(None), client(None));
    let (a, b) = pair(&server, &client).await;
    // More than the driver sends in one turn, and than the socket holds.
    let message = numbered(1, 8 << 20);
    a.send(message.clone()).await.expect("queued");
    drop(a);
    drop(client);
    let received = tokio::time::timeout(PATIENCE, b.recv())
        .await
        .expect("the message arrives")
        .expect("a message");
    assert!(received == message, "the message arrives whole");
    assert_closed_by_peer(&b, 0).await;
}

#[tokio::test]
async fn a_closed_endpoint_refuses_intros_and_accepts_nothing() {
    let server = server(None);
    let public = server.public().expect("accepts").clone();
    let client = Endpoint::bind(
        localhost(),
        Config::default().handshake_timeout(Duration::from_millis(500)),
    )
    .expect("binds");
    server.close(0);
    let connected = client.connect(server.local_addr(), &public).await;
    assert!(
        matches!(connected, Err(ConnectError::HandshakeTimedOut)),
        "{connected:?}"
    );
    assert!(server.accept().await.is_none());
    let stats = server.stats().protocol;
    assert_eq!(stats.intros_accepted, 0);
    assert!(stats.intros_declined >= 1, "{stats:?}");
}

#[tokio::test]
async fn connections_waiting_to_be_accepted_are_closed_with_the_endpoint() {
    let (server, client) = (server(None), client(None));
    let public = server.public().expect("accepts").clone();
    // The handshake completes without `accept`: the connection waits there.
    let connection = client
        .connect(server.local_addr(), &public)
        .await
        .expect("connects");
    server.close(3);
    assert!(server.accept().await.is_none(), "nothing to accept");
    assert_closed_by_peer(&connection, 3).await;
}

#[tokio::test]
async fn a_graceful_close_to_a_peer_that_stops_reading_ends_after_the_drain_timeout() {
    const DRAIN: Duration = Duration::from_secs(1);
    const WRITTEN: usize = 1 << 20;
    // The server grants 64 KiB of the stream and never reads: the rest of
    // what the client wrote can never leave.
    let server = server_with(Config::default().receive_windows(64 << 10, 128 << 10));
    let mut protocol = EndpointConfig::default();
    protocol.connection.close_drain_timeout = Some(DRAIN);
    let client = Endpoint::bind(localhost(), Config::default().protocol(protocol)).expect("binds");
    let (a, b) = pair(&server, &client).await;
    let (mut upload, _) = a.open_bi().await.expect("opens");
    // The writer waits for room that the peer never gives.
    let writer = tokio::spawn(async move { upload.write_all(&numbered(1, WRITTEN)).await });
    let (_, mut download) = tokio::time::timeout(PATIENCE, b.accept_bi())
        .await
        .expect("the stream arrives")
        .expect("a stream");
    let started = std::time::Instant::now();
    tokio::time::timeout(PATIENCE, a.close(5, Bytes::new()))
        .await
        .expect("close gives up on the rest and returns");
    let took = started.elapsed();
    let written = tokio::time::timeout(PATIENCE, writer)
        .await
        .expect("the waiting writer is told")
        .expect("the writer ends");
    assert!(
        matches!(written, Err(WriteError::ConnectionLost(_))),
        "{written:?}"
    );
    // It waited for progress as long as it was told, and not much longer.
    assert!(
        (DRAIN..DRAIN + Duration::from_secs(5)).contains(&took),
        "closed after {took:?}"
    );
    assert_closed_by_peer(&b, 5).await;
    // What the window let through can still be read; the rest was given up.
    let mut buf = vec![0u8; 64 << 10];
    let mut read = 0;
    let rest = tokio::time::timeout(PATIENCE, async {
        while let Ok(Some(n)) = download.read(&mut buf).await {
            read += n;
        }
    });
    rest.await.expect("the reads end with the connection");
    assert!(
        read < WRITTEN,
        "all {read} bytes arrived: nothing was given up"
    );
}

/// What a peer that never completes a handshake does with the intro.
#[derive(Clone, Copy, Debug)]
enum Sink {
    /// Reads nothing, answers nothing.
    Swallows,
    /// Answers every datagram with one as long of garbage.
    AnswersGarbage,
    /// Sends every datagram back where it came from.
    Echoes,
}

/// A socket on loopback that treats every datagram as `sink` says.
async fn sink(kind: Sink) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let socket = tokio::net::UdpSocket::bind(localhost())
        .await
        .expect("binds");
    let addr = socket.local_addr().expect("bound");
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        let mut garbage = 0x9e37_79b9_u32;
        loop {
            if matches!(kind, Sink::Swallows) {
                // Held open, never read: the kernel queues and drops.
                std::future::pending::<()>().await;
            }
            let Ok((len, from)) = socket.recv_from(&mut buf).await else {
                return;
            };
            if matches!(kind, Sink::AnswersGarbage) {
                for byte in &mut buf[..len] {
                    garbage ^= garbage << 13;
                    garbage ^= garbage >> 17;
                    garbage ^= garbage << 5;
                    *byte = garbage as u8;
                }
            }
            let _ = socket.send_to(&buf[..len], from).await;
        }
    });
    (addr, task)
}

#[tokio::test]
async fn a_connect_that_can_never_complete_ends_with_a_typed_error_within_the_handshake_timeout() {
    const HANDSHAKE: Duration = Duration::from_millis(500);
    // What `connect` promises: the protocol's deadline, or its own
    // fallback half a second later.
    const PROMISED: Duration = Duration::from_millis(1_000);
    let client =
        Endpoint::bind(localhost(), Config::default().handshake_timeout(HANDSHAKE)).expect("binds");
    let public = support::identity().public();
    for kind in [Sink::Swallows, Sink::AnswersGarbage, Sink::Echoes] {
        let (addr, task) = sink(kind).await;
        let started = std::time::Instant::now();
        let connected = tokio::time::timeout(PATIENCE, client.connect(addr, &public))
            .await
            .expect("connect ends by itself");
        let took = started.elapsed();
        task.abort();
        assert!(
            matches!(connected, Err(ConnectError::HandshakeTimedOut)),
            "{kind:?}: {connected:?}"
        );
        // Forged or replayed answers neither complete the handshake nor
        // end it early, and nothing keeps it past the promise.
        assert!(
            (HANDSHAKE..=PROMISED).contains(&took),
            "{kind:?}: ended after {took:?}"
        );
    }
    assert_eq!(client.stats().connections, 0, "every attempt freed");
}

#[tokio::test]
async fn connecting_to_itself_ends_within_the_handshake_timeout_with_a_working_connection() {
    let endpoint = Endpoint::bind(
        localhost(),
        Config::default()
            .identity(support::identity())
            .handshake_timeout(Duration::from_secs(1)),
    )
    .expect("binds");
    let public = endpoint.public().expect("accepts").clone();
    let connected =
        tokio::time::timeout(PATIENCE, endpoint.connect(endpoint.local_addr(), &public))
            .await
            .expect("connect ends");
    // Its own intro reaches it as a peer's would, and never takes the place
    // of its own connect: the endpoint accepts it as an incoming
    // connection, whose reply proves the key the connect named (its own).
    let outgoing = connected.expect("the endpoint holds the key it named");
    let incoming = tokio::time::timeout(PATIENCE, endpoint.accept_connection())
        .await
        .expect("accept ends")
        .expect("the other half");
    outgoing.send(&b"to myself"[..]).await.expect("sent");
    let received = tokio::time::timeout(PATIENCE, incoming.recv())
        .await
        .expect("recv ends")
        .expect("a message");
    assert_eq!(&received[..], b"to myself");
}

#[tokio::test]
async fn every_waiter_and_every_later_call_learns_that_the_driver_ended_and_why() {
    // The client's driver runs on a runtime of its own, shut down below.
    let other = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let client = {
        let _inside = other.enter();
        client(None)
    };
    let server = server(None);
    let (a, _b) = pair(&server, &client).await;
    let waiting = tokio::spawn({
        let a = a.clone();
        async move { a.recv().await }
    });
    other.shutdown_background();
    let stopped = ConnectionLost::EndpointStopped(StopCause::Cancelled);
    let woken = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the waiter is woken")
        .expect("the waiter ends");
    assert_eq!(woken, Err(stopped.clone()));
    assert_eq!(a.send(numbered(1, 100)).await, Err(stopped.into()));
    let public = server.public().expect("accepts").clone();
    let connected = client.connect(server.local_addr(), &public).await;
    assert!(
        matches!(
            connected,
            Err(ConnectError::EndpointStopped(StopCause::Cancelled))
        ),
        "{connected:?}"
    );
    assert!(client.accept().await.is_none());
}

#[tokio::test]
async fn a_socket_that_fails_under_the_driver_stops_it_and_every_call_says_why() {
    // A backend that makes its system calls on the descriptor as it is
    // at each call (io_uring could keep the socket it registered).
    let socket = std::net::UdpSocket::bind(localhost()).expect("binds");
    let descriptor = socket.as_raw_fd();
    let client = Endpoint::from_socket(socket, Config::default().backend(Some(Backend::Mmsg)))
        .expect("starts");
    let server = server(None);
    let (a, _b) = pair(&server, &client).await;
    let waiting = tokio::spawn({
        let a = a.clone();
        async move { a.recv().await }
    });
    // The driver's descriptor now names /dev/null, which is no socket: the
    // driver's next system call on it fails with ENOTSOCK.
    let null = std::fs::File::open("/dev/null").expect("opens /dev/null");
    // SAFETY: dup2 takes two descriptors this process owns and touches no
    // memory; the socket it closes is the driver's, whose later calls on
    // the number then reach /dev/null (and the driver closes it in the end).
    let replaced = unsafe { libc::dup2(null.as_raw_fd(), descriptor) };
    assert_eq!(replaced, descriptor, "dup2");
    // Something to send makes the driver write.
    let _ = a.send(numbered(1, 100)).await;
    let woken = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the waiter is woken")
        .expect("the waiter ends");
    let Err(ConnectionLost::EndpointStopped(cause)) = woken else {
        panic!("the waiter learns that the endpoint stopped: {woken:?}");
    };
    assert!(
        matches!(&cause, StopCause::Socket { .. }),
        "stopped for its socket: {cause:?}"
    );
    let stopped = ConnectionLost::EndpointStopped(cause.clone());
    assert_eq!(a.send(numbered(2, 100)).await, Err(stopped.into()));
    let public = server.public().expect("accepts").clone();
    let connected = client.connect(server.local_addr(), &public).await;
    assert!(
        matches!(&connected, Err(ConnectError::EndpointStopped(c)) if *c == cause),
        "{connected:?}"
    );
    assert!(client.accept().await.is_none());
}

/// A node that panics on any datagram.
struct Fragile;

impl Node for Fragile {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &mut [u8]) {
        panic!("a bug in the node");
    }

    fn poll_transmit(&mut self, _: Instant, _: TransmitLimits, _: &mut [u8]) -> Option<Transmit> {
        None
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

#[tokio::test]
async fn a_driver_that_panicked_says_so_to_every_later_call() {
    let (driver, handle) =
        Driver::bind(localhost(), Fragile, &DriverConfig::default()).expect("binds");
    let task = tokio::spawn(driver.run());
    let socket = tokio::net::UdpSocket::bind(localhost())
        .await
        .expect("binds");
    socket
        .send_to(b"boom", handle.local_addr())
        .await
        .expect("sends");
    assert!(task.await.is_err(), "the driver panicked");
    let stopped = handle.with_node(|_| ()).expect_err("the node is gone");
    assert_eq!(stopped.cause, StopCause::Panicked);
}

/// `connection` ends because its peer closed it with `code` (not by a
/// timeout), within the test's patience.
async fn assert_closed_by_peer(connection: &Connection, code: u64) {
    let end = tokio::time::timeout(PATIENCE, connection.closed())
        .await
        .expect("the close arrives");
    assert!(
        matches!(
            end,
            ConnectionLost::Connection(ConnectionError::PeerClosed { code: c, .. }) if c == code
        ),
        "closed by the peer with code {code}, not timed out: {end:?}"
    );
}
