//! The largest message a peer accepts, on real loopback sockets: a server
//! with a limit of its own tells its clients, whose `send` then refuses a
//! larger message with the limit and keeps the connection.

mod support;

use std::time::Duration;

use support::net::{client, pair, server, server_with};
use tern_peer::proto::DEFAULT_MAX_MESSAGE_SIZE;
use tern_peer::{Config, Connection, SendError};

/// A generous bound on what must happen on loopback: a hang guard, not a
/// timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

const LIMIT: u64 = 100_000;

/// Waits until the peer's announcement has arrived.
async fn learned_limit(connection: &Connection, limit: u64) {
    tokio::time::timeout(PATIENCE, async {
        while connection.max_message_size() != Some(limit) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the peer's limit arrives");
}

#[tokio::test]
async fn a_message_above_the_servers_limit_is_refused_with_it_and_the_connection_lives() {
    let server = server_with(Config::default().max_message_size(LIMIT));
    let client = client(None);
    let (to_server, from_client) = pair(&server, &client).await;
    learned_limit(&to_server, LIMIT).await;

    let over = vec![1u8; LIMIT as usize + 1];
    assert_eq!(
        to_server.send(over).await,
        Err(SendError::TooLarge {
            size: LIMIT + 1,
            limit: LIMIT
        })
    );
    // The connection lives: a message at the limit still arrives whole.
    to_server
        .send(vec![2u8; LIMIT as usize])
        .await
        .expect("a message at the limit is sent");
    let got = tokio::time::timeout(PATIENCE, from_client.recv())
        .await
        .expect("arrives on loopback")
        .expect("the connection lives");
    assert_eq!(got.len(), LIMIT as usize);
    // The server's own view of the client: the default, never announced.
    assert_eq!(
        from_client.max_message_size(),
        Some(DEFAULT_MAX_MESSAGE_SIZE)
    );
}

#[tokio::test]
async fn without_a_limit_of_its_own_each_side_sees_the_default() {
    let (server, client) = (server(None), client(None));
    let (a, b) = pair(&server, &client).await;
    a.send(vec![3u8; 300_000]).await.expect("sent");
    let got = tokio::time::timeout(PATIENCE, b.recv())
        .await
        .expect("arrives on loopback")
        .expect("open");
    assert_eq!(got.len(), 300_000);
    assert_eq!(a.max_message_size(), Some(DEFAULT_MAX_MESSAGE_SIZE));
    assert_eq!(b.max_message_size(), Some(DEFAULT_MAX_MESSAGE_SIZE));
}
