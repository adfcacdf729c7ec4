//! Who is at the other end, on real loopback sockets (issue #27): the
//! server learns the client's address and proven identity before it takes
//! the connection, accepts or refuses it, may require a proof, and each
//! side reports the other's proven key and current address.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use support::net::{connect_and_take, localhost, received, server_with};
use support::relay::{self, Impairment};
use support::{identity, other_identity};
use tern_peer::proto::CloseKind;
use tern_peer::{Config, ConnectionError, ConnectionLost, Endpoint};

/// Longer than anything below should take, shorter than the idle timeout.
const PATIENCE: Duration = Duration::from_secs(20);

/// A client endpoint with the second shared identity, which it proves.
fn known_client() -> Endpoint {
    Endpoint::bind(localhost(), Config::default().identity(other_identity())).expect("binds")
}

fn anonymous_client(config: Config) -> Endpoint {
    Endpoint::bind(localhost(), config).expect("binds")
}

#[tokio::test]
async fn the_server_sees_who_connected_before_it_accepts_and_both_sides_report_the_other_and_their_addresses()
 {
    let server = server_with(Config::default());
    let client = known_client();
    let public = identity().public();
    let (to_server, incoming) = connect_and_take(&client, &server, &public, PATIENCE).await;
    assert_eq!(incoming.identity(), Some(&other_identity().public()));
    assert_eq!(incoming.remote_address(), client.local_addr());
    let from_client = incoming.accept();
    assert_eq!(from_client.peer_identity(), Some(other_identity().public()));
    assert_eq!(from_client.remote_address(), client.local_addr());
    assert_eq!(to_server.peer_identity(), Some(public));
    assert_eq!(to_server.remote_address(), server.local_addr());
    to_server.send(&b"hello"[..]).await.expect("sent");
    assert_eq!(&received(&from_client, PATIENCE).await[..], b"hello");
    // The server tells the client the address its packets come from.
    let observed = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(address) = to_server.observed_address() {
                break address;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the server's report arrives");
    assert_eq!(observed, client.local_addr());
}

#[tokio::test]
async fn an_anonymous_client_comes_without_an_identity() {
    let server = server_with(Config::default());
    let client = anonymous_client(Config::default());
    let public = identity().public();
    let (_, incoming) = connect_and_take(&client, &server, &public, PATIENCE).await;
    assert_eq!(incoming.identity(), None);
    assert_eq!(incoming.accept().peer_identity(), None);
}

#[tokio::test]
async fn a_refused_connection_is_closed_with_the_code_and_counted_and_so_is_one_dropped_undecided()
{
    let server = server_with(Config::default());
    let public = identity().public();
    for (refuse, code) in [(true, 7), (false, 0)] {
        let client = known_client();
        let (to_server, incoming) = connect_and_take(&client, &server, &public, PATIENCE).await;
        if refuse {
            incoming.refuse(code);
        } else {
            drop(incoming);
        }
        let end = tokio::time::timeout(PATIENCE, to_server.closed())
            .await
            .expect("the refusal arrives");
        match end {
            ConnectionLost::Connection(ConnectionError::PeerClosed {
                kind, code: got, ..
            }) => {
                assert_eq!((kind, got), (CloseKind::Application, code));
            }
            other => panic!("refused, not {other:?}"),
        }
    }
    assert_eq!(server.stats().protocol.connections_refused, 2);
}

#[tokio::test]
async fn a_server_that_requires_identity_never_yields_an_anonymous_client() {
    let server = server_with(
        Config::default()
            .require_identity(true)
            .handshake_timeout(Duration::from_secs(1)),
    );
    let public = identity().public();
    // Every connection the server yields, counted by a task of its own.
    let yielded = Arc::new(AtomicUsize::new(0));
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let acceptor = {
        let server = server.clone();
        let yielded = Arc::clone(&yielded);
        tokio::spawn(async move {
            let mut first_tx = Some(first_tx);
            let mut accepted = Vec::new();
            while let Some(incoming) = server.accept().await {
                yielded.fetch_add(1, Ordering::SeqCst);
                if let Some(tx) = first_tx.take() {
                    let _ = tx.send(incoming.identity().cloned());
                }
                accepted.push(incoming.accept());
            }
        })
    };
    let anonymous = anonymous_client(Config::default());
    let to_server = anonymous
        .connect(server.local_addr(), &public)
        .await
        .expect("the handshake itself succeeds");
    to_server
        .send(&b"before any proof"[..])
        .await
        .expect("queued");
    let end = tokio::time::timeout(PATIENCE, to_server.closed())
        .await
        .expect("the server closes it after its handshake timeout");
    match end {
        ConnectionLost::Connection(ConnectionError::PeerClosed { kind, code, .. }) => {
            assert_eq!((kind, code), (CloseKind::Transport, 4));
        }
        other => panic!("closed for its missing proof, not {other:?}"),
    }
    assert_eq!(yielded.load(Ordering::SeqCst), 0, "never yielded");
    assert_eq!(server.stats().protocol.identities_unproven, 1);
    // A client that proves its identity gets in: the first connection the
    // server yields is it.
    let known = known_client();
    let to_server = known
        .connect(server.local_addr(), &public)
        .await
        .expect("connects");
    let first = tokio::time::timeout(PATIENCE, first_rx)
        .await
        .expect("yielded")
        .expect("the acceptor runs");
    assert_eq!(first, Some(other_identity().public()));
    assert_eq!(to_server.peer_identity(), Some(public));
    acceptor.abort();
}

#[tokio::test]
async fn remote_address_follows_a_migration_and_stays_after_the_close() {
    let server = server_with(Config::default());
    let impairment = Impairment {
        loss: 0.0,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        seed: 1,
    };
    let relay = relay::start(server.local_addr(), impairment).await;
    let client = known_client();
    let public = identity().public();
    let (connected, incoming) = tokio::join!(client.connect(relay.addr, &public), server.accept());
    let to_server = connected.expect("connects");
    let from_client = incoming.expect("a connection comes").accept();
    to_server.send(&b"one"[..]).await.expect("sent");
    from_client.recv().await.expect("a message");
    let before = from_client.remote_address();
    relay.rebind();
    // Messages both ways until the server has moved to the new address
    // (the relay's new socket) and validated it.
    let moved = tokio::time::timeout(PATIENCE, async {
        loop {
            to_server.send(&b"more"[..]).await.expect("sent");
            from_client.recv().await.expect("a message");
            from_client.send(&b"back"[..]).await.expect("sent");
            to_server.recv().await.expect("a message");
            let stats = from_client.stats().expect("held");
            if from_client.remote_address() != before && stats.migrations > 0 {
                return from_client.remote_address();
            }
        }
    })
    .await
    .expect("the server follows the client");
    assert_ne!(moved, before);
    assert_eq!(moved.ip(), before.ip());
    to_server.close(0, &b"bye"[..]).await;
    from_client.closed().await;
    drop(to_server);
    tokio::time::timeout(PATIENCE, server.wait_idle())
        .await
        .expect("freed");
    assert_eq!(server.stats().connections, 0);
    assert_eq!(
        from_client.remote_address(),
        moved,
        "the last address, once the connection is freed"
    );
    assert_eq!(from_client.peer_identity(), Some(other_identity().public()));
}

#[tokio::test]
async fn a_simultaneous_open_reports_the_key_proven_on_each_connection() {
    // An endpoint that connects to itself opens both ways at once: its
    // connect is answered by its own responder, and its intro also comes
    // in as a peer's.
    let endpoint = server_with(Config::default());
    let public = identity().public();
    let (outgoing, incoming) = connect_and_take(&endpoint, &endpoint, &public, PATIENCE).await;
    // The connect proved the key it named; the incoming half, the key its
    // initiator proved: the same endpoint's.
    assert_eq!(outgoing.peer_identity(), Some(public.clone()));
    assert_eq!(incoming.identity(), Some(&public));
    assert_eq!(incoming.remote_address(), endpoint.local_addr());
}
