//! Resumption on real loopback sockets: a client's second connect to a
//! server it reached before goes out with the server's ticket and needs no
//! operation on a static key; a server that issues no tickets sends
//! nothing for the client to resume with.

mod support;

use std::time::Duration;

use rand_core::OsRng;
use support::identity;
use support::net::localhost;
use tern_peer::{Config, Connection, Endpoint, IdentityKey, PublicIdentity};

/// Longer than anything below should take, shorter than the idle timeout.
const PATIENCE: Duration = Duration::from_secs(20);

/// Connects, and checks that a message goes each way.
async fn connect_and_talk(
    client: &Endpoint,
    server: &Endpoint,
    key: &PublicIdentity,
) -> Connection {
    let (connected, incoming) = tokio::time::timeout(PATIENCE, async {
        tokio::join!(client.connect(server.local_addr(), key), server.accept())
    })
    .await
    .expect("the handshake ends");
    let to_server = connected.expect("connects");
    let from_client = incoming.expect("a connection comes").accept();
    to_server.send(&b"ping"[..]).await.expect("sent");
    let got = tokio::time::timeout(PATIENCE, from_client.recv())
        .await
        .expect("recv ends")
        .expect("a message");
    assert_eq!(&got[..], b"ping");
    from_client.send(&b"pong"[..]).await.expect("sent");
    let got = tokio::time::timeout(PATIENCE, to_server.recv())
        .await
        .expect("recv ends")
        .expect("a message");
    assert_eq!(&got[..], b"pong");
    to_server
}

/// Waits until the client holds `tickets` tickets received.
async fn tickets_received(client: &Endpoint, tickets: u64) {
    tokio::time::timeout(PATIENCE, async {
        while client.stats().protocol.tickets_received < tickets {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the ticket arrives");
}

#[tokio::test]
async fn a_second_connect_resumes_with_the_servers_ticket() {
    for server_key in [IdentityKey::generate_x25519(&mut OsRng), identity()] {
        let public = server_key.public();
        let server =
            Endpoint::bind(localhost(), Config::default().identity(server_key)).expect("binds");
        let client = Endpoint::bind(localhost(), Config::default()).expect("binds");
        let first = connect_and_talk(&client, &server, &public).await;
        tickets_received(&client, 1).await;
        drop(first);
        let second = connect_and_talk(&client, &server, &public).await;
        assert_eq!(second.peer_identity(), Some(public.clone()));
        let (client_stats, server_stats) = (client.stats().protocol, server.stats().protocol);
        assert_eq!(client_stats.connects_resumed, 1);
        assert_eq!(server_stats.resumptions_accepted, 1);
        assert_eq!(server_stats.intros_decrypted, 1, "only the first intro");
    }
}

#[tokio::test]
async fn a_server_without_tickets_gives_nothing_to_resume_with() {
    let server_key = IdentityKey::generate_x25519(&mut OsRng);
    let public = server_key.public();
    let server = Endpoint::bind(
        localhost(),
        Config::default().identity(server_key).tickets(None),
    )
    .expect("binds");
    let client = Endpoint::bind(localhost(), Config::default()).expect("binds");
    for _ in 0..2 {
        connect_and_talk(&client, &server, &public).await;
    }
    let (client_stats, server_stats) = (client.stats().protocol, server.stats().protocol);
    assert_eq!(client_stats.tickets_received, 0);
    assert_eq!(client_stats.connects_resumed, 0);
    assert_eq!(server_stats.intros_decrypted, 2);
}
