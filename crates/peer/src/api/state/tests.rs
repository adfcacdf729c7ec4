use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use rand_core::OsRng;
use tern_wire::IdentityKey;

use super::*;
use crate::proto::EndpointConfig;

const CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 1000);
const SERVER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 2000);
const CONNECTIONS: usize = 20;

/// An RSA-2048 identity, generated once for these tests (about 250 ms).
fn identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    let der = DER.get_or_init(|| {
        let key = IdentityKey::generate(&mut OsRng).expect("RSA key generation");
        key.to_pkcs8_der().expect("encodes").to_vec()
    });
    IdentityKey::from_pkcs8_der(der).expect("decodes")
}

/// A client's state and a server's protocol endpoint, joined by
/// [`shuttle`].
fn pair(now: Instant) -> (EndpointState, Endpoint) {
    let identity = identity();
    let mut config = EndpointConfig::default();
    config.intro_limits.per_source_burst = 1_000;
    let wall = SystemTime::now();
    let server = Endpoint::new(config, Some(identity), [1; 32], now, wall).expect("server");
    let client = Endpoint::new(config, None, [2; 32], now, wall).expect("client");
    (EndpointState::new(client), server)
}

/// Hands every datagram either side sends straight to the other, each
/// side's turn ending as the driver ends it, until neither sends.
fn shuttle(client: &mut EndpointState, server: &mut Endpoint, now: Instant) {
    let limits = TransmitLimits::new(1, 1452);
    let mut buf = vec![0u8; 1452];
    loop {
        let mut moved = false;
        while let Some(t) = client.poll_transmit(now, limits, &mut buf) {
            server.handle_datagram(now, SERVER, CLIENT, &mut buf[..t.len]);
            moved = true;
        }
        while let Some(t) = server.poll_transmit(now, limits, &mut buf) {
            client.handle_datagram(now, CLIENT, SERVER, &mut buf[..t.len]);
            moved = true;
        }
        client.poll_timeout();
        client.end_turn(now);
        while server.poll_event().is_some() {}
        while server.accept().is_some() {}
        if !moved {
            return;
        }
    }
}

/// `CONNECTIONS` connections the client opened, then closed and
/// released: the protocol holds them through their closing period.
fn closing(now: Instant) -> (EndpointState, Endpoint) {
    let (mut client, mut server) = pair(now);
    let public = server.public().expect("identity");
    let slots: Vec<SlotId> = (0..CONNECTIONS)
        .map(|_| {
            let handle = client.proto.connect(now, SERVER, &public).expect("connect");
            client.add(now, handle, SERVER)
        })
        .collect();
    shuttle(&mut client, &mut server, now);
    for &id in &slots {
        assert!(client.slots[&id].connected, "the handshake finished");
        client.release(now, id, 0);
    }
    shuttle(&mut client, &mut server, now);
    (client, server)
}

#[test]
fn closed_connections_the_protocol_still_holds_are_not_touched_by_a_turn() {
    let now = Instant::now();
    let (mut client, _server) = closing(now);
    assert_eq!(client.proto.len(), CONNECTIONS, "still closing");
    // A turn with nothing to do: the driver's last look, then the end
    // of the turn. Neither may visit the closing connections (or
    // every later turn would pay for each of them).
    client.poll_timeout();
    client.end_turn(now);
    assert_eq!(client.proto.touched(), 0);
}

#[test]
fn a_connection_nobody_reads_is_published_no_more() {
    let now = Instant::now();
    let (mut client, mut server) = pair(now);
    let public = server.public().expect("identity");
    let handle = client.proto.connect(now, SERVER, &public).expect("connect");
    let id = client.add(now, handle, SERVER);
    shuttle(&mut client, &mut server, now);
    let published = client.published(id).expect("a slot");
    client.watch(now, id);
    assert!(published.is_watched());
    assert!(published.read(|s| s.live.is_some()));
    // Read within the time: still published every turn.
    let later = now + WATCH_FOR / 2;
    client.end_turn(later);
    assert!(published.is_watched());
    // Nobody read since: no longer.
    client.end_turn(later + WATCH_FOR + Duration::from_millis(1));
    assert!(!published.is_watched());
    assert!(client.watched.is_empty());
}

/// Runs `client`'s timers a second past its closing period's end; that
/// moment.
fn past_closing(client: &mut EndpointState) -> Instant {
    let over = client
        .proto
        .poll_timeout()
        .expect("the closing period ends")
        + Duration::from_secs(1);
    client.handle_timeout(over);
    over
}

#[test]
fn a_freed_connection_leaves_neither_handle_nor_slot() {
    let now = Instant::now();
    let (mut client, _server) = closing(now);
    let over = past_closing(&mut client);
    client.poll_timeout();
    client.end_turn(over);
    assert!(client.proto.is_empty());
    assert!(client.by_handle.is_empty());
    assert!(client.slots.is_empty());
}

#[test]
fn a_handle_given_again_before_the_turn_ends_leaves_the_old_record_behind() {
    let now = Instant::now();
    let (mut client, _server) = closing(now);
    past_closing(&mut client);
    // The protocol frees them at its next look; the turn has not ended.
    client.proto.poll_timeout();
    assert!(client.proto.is_empty());
    // The protocol may hand a freed connection's index to a new
    // connection before the turn ends; the new record takes the handle.
    let (&reused, &old) = client.by_handle.iter().next().expect("not yet forgotten");
    let new = client.add(now, reused, SERVER);
    assert_eq!(client.by_handle[&reused], new);
    assert!(
        !client.slots.contains_key(&old),
        "the released old record is gone"
    );
    assert_eq!(client.slots[&new].handle, Some(reused));
}
