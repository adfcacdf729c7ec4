//! An endpoint on a socket the application bound, and one that moves to
//! another socket with its connections kept, on real loopback sockets.

mod support;

use std::time::Duration;

use support::net::{BACKENDS, client, localhost, number_of, numbered, pair, pattern, server};
use tern_peer::{Config, Endpoint};

/// A generous bound on what must happen on loopback: a hang guard, not a
/// timing assertion.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn an_endpoint_runs_on_a_socket_the_application_bound() {
    let socket = std::net::UdpSocket::bind(localhost()).expect("binds");
    let address = socket.local_addr().expect("bound");
    let server = server(None);
    let client = Endpoint::from_socket(socket, Config::default()).expect("takes the socket");
    assert_eq!(client.local_addr(), address);
    let (to_server, from_client) = pair(&server, &client).await;
    assert_eq!(from_client.remote_address(), address);
    to_server.send(numbered(7, 50_000)).await.expect("sent");
    let got = tokio::time::timeout(PATIENCE, from_client.recv())
        .await
        .expect("arrives on loopback")
        .expect("open");
    assert_eq!(number_of(&got), 7);
}

#[tokio::test]
async fn a_transfer_running_across_a_rebind_arrives_whole_both_ways() {
    const LEN: usize = 8 << 20;
    for backend in BACKENDS {
        let (server, client) = (server(backend), client(backend));
        let (to_server, from_client) = pair(&server, &client).await;
        let old = client.local_addr();

        // The client uploads on a stream; the server reads from a task.
        let (mut upload, _) = to_server.open_bi().await.expect("opens");
        let reader = tokio::spawn(async move {
            let (_, mut download) = from_client.accept_bi().await.expect("accepts");
            let got = download.read_to_end(LEN + 1).await.expect("reads");
            (from_client, got)
        });
        let data = pattern(0, LEN);
        upload.write_all(&data[..LEN / 4]).await.expect("writes");
        client.rebind(localhost()).expect("rebinds");
        let new = client.local_addr();
        assert_ne!(new, old, "a new socket");
        upload.write_all(&data[LEN / 4..]).await.expect("writes");
        upload.finish().expect("finishes");
        let (from_client, got) = tokio::time::timeout(PATIENCE, reader)
            .await
            .expect("the upload ends")
            .expect("the reader ends");
        assert!(got == data, "the upload arrived whole and in order");

        // The server follows the client to its new address, and what it
        // sends now reaches it there.
        assert_eq!(from_client.remote_address(), new);
        assert_eq!(from_client.stats().expect("open").migrations, 1);
        from_client.send(numbered(3, 1 << 20)).await.expect("sent");
        let back = tokio::time::timeout(PATIENCE, to_server.recv())
            .await
            .expect("arrives at the new address")
            .expect("open");
        assert_eq!(number_of(&back), 3);
    }
}

#[tokio::test]
async fn an_idle_connection_shows_its_new_address_at_once_after_a_rebind() {
    let server = server(None);
    // No keep-alive: only the rebind itself sends a packet.
    let client = Endpoint::bind(localhost(), Config::default().keep_alive(None)).expect("binds");
    let (to_server, from_client) = pair(&server, &client).await;
    let socket = std::net::UdpSocket::bind(localhost()).expect("binds");
    let new = socket.local_addr().expect("bound");
    client.rebind_socket(socket).expect("rebinds");
    // Nothing is sent by the application: the rebind's own packet shows
    // the server the new path.
    tokio::time::timeout(PATIENCE, async {
        while from_client.remote_address() != new {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the server moves to the new address");
    from_client.send(numbered(1, 100)).await.expect("sent");
    let got = tokio::time::timeout(PATIENCE, to_server.recv())
        .await
        .expect("arrives")
        .expect("open");
    assert_eq!(number_of(&got), 1);
}
