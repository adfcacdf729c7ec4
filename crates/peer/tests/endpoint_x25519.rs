//! Connects to X25519 identities on real loopback sockets: the intro's kind
//! follows the key given to `connect`, one client reaches an RSA server and
//! an X25519 server, and a client's X25519 identity reaches either server
//! proven, before it accepts.

mod support;

use std::time::Duration;

use rand_core::OsRng;
use support::identity;
use support::net::{connect_and_take, localhost, received};
use tern_peer::{Config, Endpoint, IdentityKey};

/// Longer than anything below should take, shorter than the idle timeout.
const PATIENCE: Duration = Duration::from_secs(20);

fn endpoint(identity: Option<IdentityKey>) -> Endpoint {
    let config = match identity {
        Some(key) => Config::default().identity(key),
        None => Config::default(),
    };
    Endpoint::bind(localhost(), config).expect("binds")
}

#[tokio::test]
async fn a_client_with_an_x25519_identity_reaches_rsa_and_x25519_servers() {
    let client_key = IdentityKey::generate_x25519(&mut OsRng);
    let client = endpoint(Some(client_key.clone()));
    for server_key in [IdentityKey::generate_x25519(&mut OsRng), identity()] {
        let kind = server_key.kind();
        let public = server_key.public();
        let server = endpoint(Some(server_key));
        let (to_server, incoming) = connect_and_take(&client, &server, &public, PATIENCE).await;
        // An X25519 identity is proven in the intro to an X25519 server,
        // and with an Identity frame (its exchange with the server's
        // ephemeral key) to an RSA server.
        assert_eq!(incoming.identity(), Some(&client_key.public()), "{kind}");
        let from_client = incoming.accept();
        assert_eq!(to_server.peer_identity(), Some(public));
        to_server.send(&b"hello"[..]).await.expect("sent");
        assert_eq!(&received(&from_client, PATIENCE).await[..], b"hello");
        from_client.send(&b"back"[..]).await.expect("sent");
        assert_eq!(&received(&to_server, PATIENCE).await[..], b"back");
    }
}

#[tokio::test]
async fn an_anonymous_client_reaches_an_x25519_server_and_an_rsa_client_proves_itself_to_it() {
    let server_key = IdentityKey::generate_x25519(&mut OsRng);
    let public = server_key.public();
    let server = endpoint(Some(server_key));
    for client_key in [None, Some(identity())] {
        let client = endpoint(client_key.clone());
        let (_, incoming) = connect_and_take(&client, &server, &public, PATIENCE).await;
        let expected = client_key.map(|key| key.public());
        assert_eq!(incoming.identity(), expected.as_ref());
    }
}
