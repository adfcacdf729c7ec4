//! Introductions on real loopback sockets: a peer registers with a
//! rendezvous, another finds it there by its key alone and connects to it
//! directly, or through the rendezvous's relay; a key nobody registered is
//! refused by type.

mod support;

use std::time::Duration;

use rand_core::OsRng;
use support::net::localhost;
use tern_peer::proto::{ConnectionPath, PathPolicy, RefusalReason};
use tern_peer::{Config, ConnectError, Connection, Endpoint, IdentityKey, Incoming};

/// Longer than anything below should take, shorter than the idle timeout.
const PATIENCE: Duration = Duration::from_secs(20);

fn endpoint() -> (Endpoint, IdentityKey) {
    let key = IdentityKey::generate_x25519(&mut OsRng);
    let endpoint =
        Endpoint::bind(localhost(), Config::default().identity(key.clone())).expect("binds");
    (endpoint, key)
}

/// A connection from `from` to `to`, and its other end (which must live:
/// dropping it closes the connection).
async fn connect(from: &Endpoint, to: &Endpoint, key: &IdentityKey) -> (Connection, Connection) {
    let public = key.public();
    let (connected, incoming) = tokio::time::timeout(PATIENCE, async {
        tokio::join!(from.connect(to.local_addr(), &public), to.accept())
    })
    .await
    .expect("the handshake ends");
    let accepted = incoming.expect("a connection comes").accept();
    (connected.expect("connects"), accepted)
}

/// A rendezvous, an asker and a target registered with it (each
/// connection's other end kept alive), and the target's connection found
/// through it by `policy`, with the target's end as it arrives.
struct Introduced {
    rendezvous: Endpoint,
    _asker: Endpoint,
    asker_key: IdentityKey,
    target: Endpoint,
    target_key: IdentityKey,
    connected: Result<Connection, ConnectError>,
    incoming: Option<Incoming>,
    _links: [(Connection, Connection); 2],
}

async fn introduce(policy: PathPolicy) -> Introduced {
    let (rendezvous, rendezvous_key) = endpoint();
    let (asker, asker_key) = endpoint();
    let (target, target_key) = endpoint();
    let target_link = connect(&target, &rendezvous, &rendezvous_key).await;
    target.register(&target_link.0).expect("registered");
    let asker_link = connect(&asker, &rendezvous, &rendezvous_key).await;
    // Registration travels on its own; give it a moment over loopback.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let target_public = target_key.public();
    let (connected, incoming) = tokio::time::timeout(PATIENCE, async {
        tokio::join!(
            asker.connect_via_with(&asker_link.0, &target_public, policy),
            target.accept()
        )
    })
    .await
    .expect("the introduction ends");
    Introduced {
        rendezvous,
        _asker: asker,
        asker_key,
        target,
        target_key,
        connected,
        incoming,
        _links: [target_link, asker_link],
    }
}

#[tokio::test]
async fn a_registered_peer_is_found_by_its_key_and_reached_directly() {
    // Bound whole, so that every endpoint and link lives to the end.
    let introduced = introduce(PathPolicy::default()).await;
    let target = &introduced.target;
    let to_target = introduced
        .connected
        .expect("connected through the introduction");
    assert_eq!(
        to_target.peer_identity(),
        Some(introduced.target_key.public())
    );
    assert_eq!(to_target.remote_address(), target.local_addr(), "direct");
    assert_eq!(
        to_target.path(),
        Some(ConnectionPath::Direct(target.local_addr()))
    );
    let incoming = introduced.incoming.expect("the asker arrives");
    assert_eq!(incoming.identity(), Some(&introduced.asker_key.public()));
    let from_asker = incoming.accept();
    to_target.send(&b"found you"[..]).await.expect("sent");
    let received = tokio::time::timeout(PATIENCE, from_asker.recv())
        .await
        .expect("recv ends")
        .expect("a message");
    assert_eq!(&received[..], b"found you");
}

#[tokio::test]
async fn a_key_nobody_registered_is_refused_by_type() {
    let (rendezvous, rendezvous_key) = endpoint();
    let (asker, _) = endpoint();
    let (asker_to_r, _r_to_asker) = connect(&asker, &rendezvous, &rendezvous_key).await;
    let nobody = IdentityKey::generate_x25519(&mut OsRng).public();
    let outcome = tokio::time::timeout(PATIENCE, asker.connect_via(&asker_to_r, &nobody))
        .await
        .expect("the introduction ends");
    assert!(
        matches!(
            outcome,
            Err(ConnectError::IntroductionRefused(
                RefusalReason::UnknownPeer
            ))
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn relay_only_carries_the_connection_through_the_rendezvous_both_ways() {
    let introduced = introduce(PathPolicy::RelayOnly).await;
    let to_target = introduced.connected.expect("connected through the relay");
    let via = introduced.rendezvous.local_addr();
    assert_eq!(to_target.path(), Some(ConnectionPath::Relayed { via }));
    let from_asker = introduced.incoming.expect("the asker arrives").accept();
    assert_eq!(from_asker.path(), Some(ConnectionPath::Relayed { via }));
    to_target.send(&b"relayed"[..]).await.expect("sent");
    let received = tokio::time::timeout(PATIENCE, from_asker.recv())
        .await
        .expect("recv ends")
        .expect("a message");
    assert_eq!(&received[..], b"relayed");
    from_asker.send(&b"and back"[..]).await.expect("sent");
    let back = tokio::time::timeout(PATIENCE, to_target.recv())
        .await
        .expect("recv ends")
        .expect("a message");
    assert_eq!(&back[..], b"and back");
    let stats = introduced.rendezvous.stats().protocol;
    assert_eq!(stats.relay_pairs_made, 1);
    assert!(stats.relay_packets_forwarded >= 4, "{stats:?}");
    // Relay only: no direct address to probe, so it stays relayed.
    assert_eq!(to_target.went_direct_after(), None);
    assert_eq!(to_target.path(), Some(ConnectionPath::Relayed { via }));
}
