//! A packet key's limit reached before the peer confirmed its update
//! (RFC 9001 §6: no new update until a packet of the current phase was
//! acknowledged; §6.6: past the confidentiality limit, stop using the
//! key). A lowered per-key limit makes both happen within a few packets.
//!
//! Honest peers never stall on it: past three quarters of a key not yet
//! confirmed only ACKs, probes and PINGs go, so two senders that both wait
//! for a confirmation still give each other the ACK each needs. A peer
//! that never confirms gets a transport Close (AEAD_LIMIT_REACHED) as soon
//! as the key is down to the packet kept for it, not an idle timeout.

mod support;

use std::time::Duration;

use support::attacker::Attacker;
use support::{Pair, StreamTransfer, exchange};
use tern_proto::{ConnectionError, EndpointConfig};
use tern_sim::{LinkConfig, Seed};
use tern_wire::{Frame, KeyConfig};

fn tiny_key_limit(key_limit: u64) -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.keys.key_limit = key_limit;
    config
}

fn link(delay_ms: u64, loss: f64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(delay_ms),
        loss,
        ..LinkConfig::default()
    }
}

/// Both sides send 4 MiB and a small message at once, each key good for
/// `key_limit` packets, over `link`: every key is used up within a round
/// trip or two, long before its update could be confirmed. Returns the
/// key updates of the client and of the server.
fn bulk_both_ways(seed: u64, key_limit: u64, link: LinkConfig) -> (u64, u64) {
    let mut pair = Pair::new(seed, link, tiny_key_limit(key_limit));
    let (client, server) = exchange(&mut pair, &[4 << 20, 1_000], Duration::from_secs(120));
    let client_updates = pair.client().connection(client).expect("open").stats();
    let server_updates = pair.server().connection(server).expect("open").stats();
    (client_updates.key_updates, server_updates.key_updates)
}

/// With 2 % loss each way, a side whose last PING or data under a key was
/// lost once stopped at the key's limit: it could seal neither the probe
/// that would have had its key confirmed nor the ACKs the peer waited
/// for, and the connection ended by idle timeout (seeds 46 and 48).
#[test]
fn bulk_both_ways_under_a_sixteen_packet_key_limit_with_loss_moves_every_byte() {
    let seed = Seed::from_env_or(46);
    let (client, server) = bulk_both_ways(seed.value(), 16, link(5, 0.02));
    assert!(
        client >= 300 && server >= 300,
        "key updates: client {client}, server {server}"
    );
}

/// Without loss, 8 packets a key: four of data, then the ACKs and PINGs
/// that confirm keys both ways, each round trip.
#[test]
fn bulk_both_ways_under_an_eight_packet_key_limit_moves_every_byte() {
    let seed = Seed::from_env_or(46);
    let (client, server) = bulk_both_ways(seed.value(), 8, link(5, 0.0));
    assert!(
        client >= 300 && server >= 300,
        "key updates: client {client}, server {server}"
    );
}

/// An upload through a lossy link, 16 packets a key: the receiver sends
/// only ACKs, and has its keys confirmed by PINGs. A lost PING once left
/// it at the limit, unable to acknowledge anything more, and the
/// connection ended by idle timeout.
#[test]
fn an_upload_under_a_sixteen_packet_key_limit_with_loss_finishes() {
    let seed = Seed::from_env_or(46);
    let mut pair = Pair::new(seed.value(), link(5, 0.02), tiny_key_limit(16));
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    let deadline = pair.sim.elapsed() + Duration::from_secs(120);
    let mut received = 0;
    while received < 4 << 20 {
        received += transfer.turn(&mut pair);
        let client = pair.client().connection(transfer.client).expect("open");
        assert_eq!(client.error(), None, "client, after {received} bytes");
        let server = pair.server().connection(transfer.server).expect("open");
        assert_eq!(server.error(), None, "server, after {received} bytes");
        assert!(pair.sim.elapsed() < deadline, "stalled at {received} bytes");
        assert!(pair.sim.step(), "quiet at {received} bytes");
    }
    let server = pair.server().connection(transfer.server).expect("open");
    assert!(server.stats().key_updates >= 20, "{:?}", server.stats());
}

/// A peer that keeps sending PINGs and never acknowledges anything: the
/// endpoint answers each with an ACK, and its key (8 packets) is never
/// confirmed. It once fell silent at the limit and, the PINGs keeping it
/// from the idle timeout, stayed open and mute for good.
#[test]
fn a_peer_that_never_acknowledges_gets_a_typed_close() {
    let mut attacker = Attacker::connect_with_keys(tiny_key_limit(8), KeyConfig::default());
    let start = attacker.now();
    while attacker.error().is_none() && attacker.now() < start + Duration::from_secs(5) {
        attacker.send(&[Frame::Ping]);
        attacker.run_for(Duration::from_millis(20), Duration::from_millis(5));
        // Only the endpoint's Close would be worth reading.
        if attacker.error().is_none() {
            attacker.inbox.clear();
        }
    }
    assert_eq!(attacker.error(), Some(ConnectionError::AeadLimitReached));
    assert!(
        attacker.now() < start + Duration::from_secs(1),
        "closed after {:?}",
        attacker.now() - start
    );
    assert!(attacker.sent_transport_close(), "the peer is told why");
}

/// A peer that goes silent after the handshake: the endpoint's probes
/// (one a probe timeout, backed off) use up its key (8 packets), and it
/// closes with the key's error before the idle timeout would have.
#[test]
fn a_silent_peer_gets_a_typed_close_before_the_idle_timeout() {
    let config = tiny_key_limit(8);
    let mut attacker = Attacker::connect_with_keys(config, KeyConfig::default());
    attacker
        .connection()
        .expect("open")
        .send_message(tern_proto::Bytes::from_static(b"unanswered"))
        .expect("room");
    let start = attacker.now();
    while attacker.error().is_none() && attacker.now() < start + Duration::from_secs(60) {
        attacker.run_for(Duration::from_millis(100), Duration::from_millis(10));
    }
    assert_eq!(attacker.error(), Some(ConnectionError::AeadLimitReached));
    let idle = config.connection.idle_timeout;
    assert!(
        attacker.now() - start < idle,
        "closed after {:?}",
        attacker.now() - start
    );
}
