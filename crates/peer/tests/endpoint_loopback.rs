//! The async API on real loopback sockets, with the `Portable` backend and
//! with the best the kernel has (`Auto`).

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::net::{
    BACKENDS, client, localhost, number_of, numbered, pair, pattern, server, server_with,
};
use tern_peer::{
    Config, CongestionConfig, CongestionKind, ConnectError, Connection, ConnectionLost, Endpoint,
};

#[tokio::test]
async fn messages_of_every_size_arrive_whole_and_once_both_ways() {
    for backend in BACKENDS {
        let (server, client) = (server(backend), client(backend));
        let (a, b) = pair(&server, &client).await;
        let sizes = [
            0usize,
            1,
            1000,
            1163,
            1164,
            4096,
            16 << 10,
            64 << 10,
            1 << 20,
        ];
        let sender = {
            let a = a.clone();
            tokio::spawn(async move {
                for (i, &len) in sizes.iter().enumerate() {
                    a.send(Bytes::from(pattern(i as u64, len)))
                        .await
                        .expect("sends");
                }
            })
        };
        // Messages may complete in any order: each size is sent once.
        let mut pending: Vec<usize> = sizes.to_vec();
        for _ in sizes {
            let got = b.recv().await.expect("receives");
            let i = sizes
                .iter()
                .position(|&l| l == got.len())
                .expect("a sent size");
            assert!(
                got[..] == pattern(i as u64, got.len())[..],
                "message {i} corrupted ({backend:?})"
            );
            let at = pending
                .iter()
                .position(|&l| l == got.len())
                .expect("not seen before");
            pending.swap_remove(at);
        }
        sender.await.expect("the sender finishes");
        // And back.
        b.send(Bytes::from_static(b"thanks")).await.expect("sends");
        assert_eq!(&a.recv().await.expect("receives")[..], b"thanks");
    }
}

#[tokio::test]
async fn a_stream_carries_a_megabyte_in_order_to_its_end() {
    for backend in BACKENDS {
        let (server, client) = (server(backend), client(backend));
        let (a, b) = pair(&server, &client).await;
        stream_across(a, &b, 1 << 20).await;
    }
}

/// Opens a stream from `a`, writes `len` patterned bytes and finishes it,
/// while `b` reads it to its end; checks every byte and gives `a` back.
async fn stream_across(a: Connection, b: &Connection, len: usize) -> Connection {
    let writer = tokio::spawn(async move {
        let (mut stream, _) = a.open_bi().await.expect("opens");
        stream.write_all(&pattern(0, len)).await.expect("writes");
        stream.finish().expect("finishes");
        a
    });
    let (_, mut stream) = b.accept_bi().await.expect("accepts");
    let got = stream
        .read_to_end(usize::MAX)
        .await
        .expect("reads to the end");
    assert_eq!(got.len(), len);
    assert!(got == pattern(0, len), "the stream's bytes differ");
    writer.await.expect("the writer finishes")
}

/// The congestion controller is the endpoint's choice: with CUBIC on both
/// ends a stream crosses, and each side's stats name the controller that
/// paced what it sent.
#[tokio::test]
async fn endpoints_that_choose_cubic_transfer_with_it() {
    let cubic = || Config::default().congestion(CongestionConfig::cubic());
    let server = server_with(cubic());
    let client = Endpoint::bind(localhost(), cubic()).expect("binds");
    let (a, b) = pair(&server, &client).await;
    const LEN: usize = 4 << 20;
    let a = stream_across(a, &b, LEN).await;
    for connection in [&a, &b] {
        let stats = connection.stats().expect("still held");
        assert_eq!(stats.congestion, CongestionKind::Cubic);
        assert!(stats.window > 0);
    }
    assert!(a.stats().expect("still held").sent_bytes > LEN as u64);
}

/// A connection can choose its own controller: CUBIC for this one, on an
/// endpoint whose others keep LEDBAT. The server answers with its own
/// (LEDBAT): each side's controller governs what it sends.
#[tokio::test]
async fn a_connection_chooses_its_own_controller_beside_the_endpoints() {
    let (server, client) = (server(None), client(None));
    let public = server.public().expect("identity").clone();
    let (foreground, accepted) = tokio::join!(
        client.connect_with(server.local_addr(), &public, CongestionConfig::cubic()),
        server.accept_connection()
    );
    let (foreground, b) = (foreground.expect("connects"), accepted.expect("accepts"));
    let (background, _held) = pair(&server, &client).await;
    const LEN: usize = 1 << 20;
    let foreground = stream_across(foreground, &b, LEN).await;
    let kind = |c: &Connection| c.stats().expect("still held").congestion;
    assert_eq!(kind(&foreground), CongestionKind::Cubic);
    assert_eq!(kind(&background), CongestionKind::Ledbat);
    assert_eq!(kind(&b), CongestionKind::Ledbat);
}

/// Four writers on one connection whose streams share a send budget much
/// smaller than what they write: each write that finds no room waits for
/// its stream's writable event, so every writer must be woken as room
/// frees up, or the transfer never ends.
#[tokio::test]
async fn four_writers_sharing_a_small_send_budget_all_finish() {
    for backend in BACKENDS {
        let server = server(backend);
        let client = Endpoint::bind(
            localhost(),
            Config::default()
                .backend(backend)
                .stream_send_buffer(64 << 10)
                .send_buffer(96 << 10),
        )
        .expect("binds");
        let (a, b) = pair(&server, &client).await;
        const LEN: usize = 1 << 20;
        // Where each writer's pattern starts: far enough apart that no two
        // streams carry the same bytes.
        const START_APART: u64 = 7_777;
        let mut writers = Vec::new();
        for i in 0..4u64 {
            let a = a.clone();
            writers.push(tokio::spawn(async move {
                let (mut stream, _) = a.open_bi().await.expect("opens");
                stream
                    .write_all(&pattern(i * START_APART, LEN))
                    .await
                    .expect("writes");
                stream.finish().expect("finishes");
                stream
            }));
        }
        let readers = (0..4).map(|_| {
            let b = b.clone();
            tokio::spawn(async move {
                let (_, mut stream) = b.accept_bi().await.expect("accepts");
                stream
                    .read_to_end(usize::MAX)
                    .await
                    .expect("reads to the end")
            })
        });
        let readers: Vec<_> = readers.collect();
        let mut starts = Vec::new();
        for reader in readers {
            let got = tokio::time::timeout(Duration::from_secs(60), reader)
                .await
                .expect("no writer waits forever")
                .expect("the reader finishes");
            assert_eq!(got.len(), LEN, "{backend:?}");
            let start = (0..4u64)
                .map(|i| i * START_APART)
                .find(|&start| got == pattern(start, LEN))
                .expect("one writer's bytes, in order");
            starts.push(start);
        }
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts.len(), 4, "each stream once");
        for writer in writers {
            writer.await.expect("the writer finishes");
        }
    }
}

#[tokio::test]
async fn connecting_where_nothing_listens_fails_within_the_handshake_timeout() {
    for backend in BACKENDS {
        let config = Config::default()
            .backend(backend)
            .handshake_timeout(Duration::from_millis(500));
        let client = Endpoint::bind(localhost(), config).expect("binds");
        let nobody = std::net::UdpSocket::bind(localhost()).expect("binds");
        let public = support::identity().public();
        let result = tokio::time::timeout(
            Duration::from_secs(10),
            client.connect(nobody.local_addr().expect("bound"), &public),
        )
        .await
        .expect("connect ends by itself");
        assert!(
            matches!(result, Err(ConnectError::HandshakeTimedOut)),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn connecting_with_the_wrong_key_fails_cleanly() {
    for backend in BACKENDS {
        let server = server(backend);
        let config = Config::default()
            .backend(backend)
            .handshake_timeout(Duration::from_millis(500));
        let client = Endpoint::bind(localhost(), config).expect("binds");
        let wrong = support::other_identity().public();
        let result = client.connect(server.local_addr(), &wrong).await;
        assert!(
            matches!(result, Err(ConnectError::HandshakeTimedOut)),
            "{result:?}"
        );
        assert!(server.stats().protocol.intros_refused >= 1);
    }
}

#[tokio::test]
async fn messages_sent_before_a_close_are_all_read_after_it() {
    let (server, client) = (server(None), client(None));
    let (a, b) = pair(&server, &client).await;
    for i in 0..50u64 {
        a.send(numbered(i, 4000)).await.expect("sends");
    }
    a.close(7, Bytes::from_static(b"done")).await;
    // Messages are independent (none waits behind another), so they may
    // complete in any order; each arrives once.
    let mut seen = [false; 50];
    for _ in 0..50 {
        let got = b.recv().await.expect("delivered before the close");
        let i = number_of(&got) as usize;
        assert!(!std::mem::replace(&mut seen[i], true), "message {i} twice");
    }
    match b.recv().await {
        Err(ConnectionLost::Connection(tern_peer::ConnectionError::PeerClosed {
            code: 7, ..
        })) => {}
        other => panic!("expected the peer's close, got {other:?}"),
    }
}

#[tokio::test]
async fn send_waits_for_acknowledgements_and_resumes_when_room_frees() {
    const BOUND: usize = 256 << 10;
    const LEN: usize = 100 << 10;
    const COUNT: u64 = 40;
    for backend in BACKENDS {
        let server = server(backend);
        let client = Endpoint::bind(
            localhost(),
            Config::default()
                .backend(backend)
                .message_send_buffer(BOUND),
        )
        .expect("binds");
        let (a, b) = pair(&server, &client).await;
        // Large messages (each on a one-way stream of its own), four
        // megabytes of them: the peer allows 64 such streams at once, so
        // only the local bound makes `send` wait.
        let sender = tokio::spawn(async move {
            let mut most = 0;
            for i in 0..COUNT {
                a.send(numbered(i, LEN)).await.expect("sends");
                let held = a.stats().expect("open").send_memory;
                most = most.max(held);
            }
            most
        });
        let mut seen = [false; COUNT as usize];
        for _ in 0..COUNT {
            let got = tokio::time::timeout(Duration::from_secs(60), b.recv())
                .await
                .expect("the sender resumes")
                .expect("receives");
            let i = number_of(&got) as usize;
            assert!(!std::mem::replace(&mut seen[i], true), "message {i} twice");
        }
        let most = sender.await.expect("the sender finishes");
        assert!(
            most <= BOUND,
            "{most} bytes held to send, above the {BOUND} bound ({backend:?})"
        );
    }
}
