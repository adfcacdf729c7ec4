//! The async API against a hostile or failing network, on real loopback
//! sockets: garbage and replayed intros during a transfer, a peer that
//! dies, and loss, delay and reordering through an impairing relay.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::net::{BACKENDS, byte_at, client, localhost, number_of, numbered, server_with};
use support::relay::{self, Impairment};
use tern_peer::{
    Config, ConnectionError, ConnectionLost, Endpoint, ReadError, RecvStream, SendStream,
};

/// Reads a stream to its end, checking each byte against the pattern.
async fn read_pattern(mut stream: RecvStream) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        let Some(n) = stream.read(&mut buf).await.expect("reads") else {
            return offset;
        };
        for (k, &b) in buf[..n].iter().enumerate() {
            assert_eq!(b, byte_at(offset + k as u64), "byte {}", offset + k as u64);
        }
        offset += n as u64;
    }
}

async fn write_pattern(mut stream: SendStream, len: u64) {
    let mut offset = 0u64;
    while offset < len {
        let take = (len - offset).min(64 * 1024) as usize;
        let chunk = support::net::pattern(offset, take);
        stream.write_all(&chunk).await.expect("writes");
        offset += take as u64;
    }
    stream.finish().expect("finishes");
}

#[tokio::test]
async fn garbage_and_replayed_intros_during_a_transfer_are_counted_and_change_nothing() {
    for backend in BACKENDS {
        let server = server_with(Config::default().backend(backend));
        let impairment = Impairment {
            loss: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            seed: 1,
        };
        // Through a relay only to capture the client's intro for replay.
        let relay = relay::start(server.local_addr(), impairment).await;
        let client = client(backend);
        let public = server.public().expect("accepts").clone();
        let (connected, accepted) = tokio::join!(
            client.connect(relay.addr, &public),
            server.accept_connection()
        );
        let (a, b) = (connected.expect("connects"), accepted.expect("accepts"));
        let intro = relay
            .first
            .lock()
            .expect("not poisoned")
            .clone()
            .expect("seen");

        const LEN: u64 = 8 << 20;
        let writer = tokio::spawn(async move {
            write_pattern(a.open_bi().await.expect("opens").0, LEN).await;
            a
        });
        let attacker = tokio::net::UdpSocket::bind(localhost())
            .await
            .expect("binds");
        let target = server.local_addr();
        let attack = tokio::spawn(async move {
            let mut garbage = [0u8; 1200];
            for round in 0u32..400 {
                for (k, b) in garbage.iter_mut().enumerate() {
                    *b = (round as usize * 131 + k * 17) as u8;
                }
                let len = 1 + (round as usize * 37) % garbage.len();
                let _ = attacker.send_to(&garbage[..len], target).await;
                let _ = attacker.send_to(&intro, target).await;
                if round % 20 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
        let got = read_pattern(b.accept_bi().await.expect("accepts").1).await;
        assert_eq!(got, LEN);
        attack.await.expect("the attack ran");
        let a = writer.await.expect("the writer finishes");
        // Still usable afterwards.
        a.send(numbered(9, 100)).await.expect("sends");
        assert_eq!(number_of(&b.recv().await.expect("receives")), 9);
        let stats = server.stats().protocol;
        assert!(stats.dropped_unroutable > 0, "{stats:?}");
        assert!(
            stats.intros_repeated + stats.intros_refused + stats.intros_rate_limited > 0,
            "{stats:?}"
        );
        assert_eq!(
            stats.intros_accepted, 1,
            "a replayed intro made a connection"
        );
        assert_eq!(server.stats().connections, 1);
    }
}

#[tokio::test]
async fn a_peer_that_dies_mid_transfer_ends_in_a_timeout_and_frees_everything() {
    for backend in BACKENDS {
        let server = server_with(
            Config::default()
                .backend(backend)
                .idle_timeout(Duration::from_secs(1))
                .keep_alive(Some(Duration::from_millis(300))),
        );
        let public = server.public().expect("accepts").clone();
        let addr = server.local_addr();
        // The peer runs on a runtime of its own, which is then dropped with
        // everything on it: its socket closes and it never says goodbye.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let peer = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let endpoint = client(backend);
                let connection = endpoint.connect(addr, &public).await.expect("connects");
                let (mut stream, _) = connection.open_bi().await.expect("opens");
                stream.write_all(&[7u8; 256 * 1024]).await.expect("writes");
                ready_tx.send(()).expect("the test waits");
                // Keep writing until the runtime goes.
                tokio::time::sleep(Duration::from_millis(100)).await;
                (endpoint, connection, stream)
            });
            drop(runtime);
        });
        let connection = server.accept_connection().await.expect("accepts");
        let (_, mut stream) = connection.accept_bi().await.expect("accepts a stream");
        ready_rx.recv().expect("the peer started");
        peer.join().expect("the peer thread ends");
        let mut buf = vec![0u8; 64 * 1024];
        let outcome = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(None) => break Ok(()),
                    Ok(Some(_)) => continue,
                    Err(e) => break Err(e),
                }
            }
        })
        .await
        .expect("the read ends within the idle timeout, not never");
        assert_eq!(
            outcome.expect_err("the stream cannot end cleanly"),
            ReadError::ConnectionLost(ConnectionLost::Connection(ConnectionError::TimedOut))
        );
        assert!(matches!(
            connection.recv().await,
            Err(ConnectionLost::Connection(ConnectionError::TimedOut))
        ));
        drop((stream, connection));
        tokio::time::timeout(Duration::from_secs(5), server.wait_idle())
            .await
            .expect("the connection is freed");
        assert_eq!(server.stats().connections, 0);
    }
}

#[tokio::test]
async fn messages_and_a_stream_cross_a_lossy_reordering_relay_intact() {
    let impairment = Impairment {
        loss: 0.03,
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(3),
        seed: 7,
    };
    let server = server_with(Config::default());
    let relay = relay::start(server.local_addr(), impairment).await;
    let client = Endpoint::bind(localhost(), Config::default()).expect("binds");
    let public = server.public().expect("accepts").clone();
    let (connected, accepted) = tokio::join!(
        client.connect(relay.addr, &public),
        server.accept_connection()
    );
    let (a, b) = (connected.expect("connects"), accepted.expect("accepts"));

    const LEN: u64 = 4 << 20;
    let writer = {
        let a = a.clone();
        tokio::spawn(async move {
            for i in 0..200u64 {
                a.send(numbered(i, 8 + (i as usize * 997) % 20_000))
                    .await
                    .expect("sends");
            }
            write_pattern(a.open_bi().await.expect("opens").0, LEN).await;
        })
    };
    let reader = {
        let b = b.clone();
        tokio::spawn(async move { read_pattern(b.accept_bi().await.expect("accepts").1).await })
    };
    let mut seen = [false; 200];
    for _ in 0..200 {
        let i = number_of(&b.recv().await.expect("receives")) as usize;
        assert!(!std::mem::replace(&mut seen[i], true), "message {i} twice");
    }
    assert_eq!(reader.await.expect("reads"), LEN);
    writer.await.expect("writes");
    let stats = a.stats().expect("open");
    assert!(
        stats.lost_packets > 0,
        "the relay dropped nothing? {stats:?}"
    );
    a.close(0, Bytes::new()).await;
    let end = b.recv().await;
    assert!(
        matches!(
            end,
            Err(ConnectionLost::Connection(
                ConnectionError::PeerClosed { .. }
            ))
        ),
        "{end:?}"
    );
}
