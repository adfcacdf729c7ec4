//! What the loopback tests of the async API share: endpoints on real
//! sockets with either backend, a connected pair, and checkable data.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tern_peer::{Config, Connection, Endpoint, Incoming, PublicIdentity};
use tern_sockio::Backend;

/// Each loopback test runs with both: one datagram per system call, and
/// the best the kernel has.
pub const BACKENDS: [Option<Backend>; 2] = [Some(Backend::Portable), None];

pub fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// An endpoint that accepts, with the shared identity.
pub fn server_with(config: Config) -> Endpoint {
    Endpoint::bind(localhost(), config.identity(super::identity())).expect("binds")
}

pub fn server(backend: Option<Backend>) -> Endpoint {
    server_with(Config::default().backend(backend))
}

pub fn client(backend: Option<Backend>) -> Endpoint {
    Endpoint::bind(localhost(), Config::default().backend(backend)).expect("binds")
}

/// A connected pair: the client's connection and the server's.
pub async fn pair(server: &Endpoint, client: &Endpoint) -> (Connection, Connection) {
    let public = server.public().expect("the server has an identity").clone();
    let (connected, accepted) = tokio::join!(
        client.connect(server.local_addr(), &public),
        server.accept_connection()
    );
    (
        connected.expect("connects"),
        accepted.expect("the server accepts"),
    )
}

/// A server and a client endpoint with the kernel's best backend, and a
/// connected pair between them, as [`pair`]: the endpoints are kept, as
/// their connections end with them.
pub async fn connected() -> (Endpoint, Endpoint, Connection, Connection) {
    let (server, client) = (server(None), client(None));
    let (a, b) = pair(&server, &client).await;
    (server, client, a, b)
}

/// `client` connects to `server` (whose key is `public`) while `server`
/// takes the attempt, within `patience`: the client's connection, and
/// what the server has to decide on.
pub async fn connect_and_take(
    client: &Endpoint,
    server: &Endpoint,
    public: &PublicIdentity,
    patience: Duration,
) -> (Connection, Incoming) {
    let (connected, incoming) = tokio::time::timeout(patience, async {
        tokio::join!(client.connect(server.local_addr(), public), server.accept())
    })
    .await
    .expect("the handshake ends");
    (
        connected.expect("connects"),
        incoming.expect("a connection comes"),
    )
}

/// The next message on `connection`, within `patience`.
pub async fn received(connection: &Connection, patience: Duration) -> Bytes {
    tokio::time::timeout(patience, connection.recv())
        .await
        .expect("recv ends")
        .expect("a message")
}

/// Byte `k` of a test transfer: depends on the position, so a reordered,
/// repeated or dropped chunk is caught.
pub fn byte_at(k: u64) -> u8 {
    (k.wrapping_mul(31) ^ (k >> 11)) as u8
}

pub fn pattern(start: u64, len: usize) -> Vec<u8> {
    (start..start + len as u64).map(byte_at).collect()
}

/// Message `i` of `len` (at least 8) bytes: its number, then the pattern.
pub fn numbered(i: u64, len: usize) -> Bytes {
    let mut bytes = pattern(i, len);
    bytes[..8].copy_from_slice(&i.to_le_bytes());
    Bytes::from(bytes)
}

/// The number of a message made by [`numbered`], every byte checked.
pub fn number_of(message: &[u8]) -> u64 {
    let i = u64::from_le_bytes(message[..8].try_into().expect("eight bytes"));
    assert!(
        message == &numbered(i, message.len())[..],
        "message {i} corrupted"
    );
    i
}
