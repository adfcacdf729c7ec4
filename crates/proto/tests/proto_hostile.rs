//! A peer that lies (issue #23): the other end of an authenticated
//! connection is not trusted. An attacker finishes a real handshake with
//! an endpoint, then sends frames no honest Tern peer sends; each is
//! refused as a protocol violation, or its effect is bounded.

mod support;

use std::time::Duration;

use support::attacker::Attacker;
use tern_proto::{ConnectionError, EndpointConfig, ProtocolError, StreamId};
use tern_wire::{Datagram, Frame, FrameType, ResetStream, Stream};

/// The largest datagram an honest sender sends: what one packet at the
/// minimum UDP payload carries.
fn max_datagram() -> usize {
    tern_wire::MaxUdpPayload::new(tern_wire::MIN_UDP_PAYLOAD)
        .expect("a valid payload size")
        .guaranteed_message_capacity()
}

/// The connection's end, once it closed.
fn error(attacker: &mut Attacker) -> Option<ConnectionError> {
    attacker.connection().and_then(|c| c.error().cloned())
}

/// Whether the endpoint sent the attacker a transport Close.
fn sent_transport_close(attacker: &mut Attacker) -> bool {
    let inbox = std::mem::take(&mut attacker.inbox);
    inbox.into_iter().any(|mut datagram| {
        attacker
            .open(&mut datagram)
            .is_some_and(|(_, types)| types.contains(&FrameType::TransportClose))
    })
}

/// Checks the connection was closed for `violation`: the error, the Close
/// the attacker got, the endpoint's count.
fn assert_refused(attacker: &mut Attacker, violation: impl Fn(&ProtocolError) -> bool) {
    match error(attacker) {
        Some(ConnectionError::Protocol(e)) => assert!(violation(&e), "closed for {e}"),
        other => panic!("not closed for a violation: {other:?}"),
    }
    attacker.turn();
    assert!(sent_transport_close(attacker), "the peer is told why");
    while attacker.endpoint.poll_event().is_some() {}
    assert_eq!(attacker.endpoint.stats().protocol_violations, 1);
}

#[test]
fn the_attacker_is_an_authenticated_peer() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    attacker.send(&[Frame::Datagram(Datagram { data: b"hello" })]);
    attacker.turn();
    let connection = attacker.connection().expect("open");
    assert_eq!(connection.recv_datagram().as_deref(), Some(&b"hello"[..]));
    assert_eq!(connection.error(), None);
}

#[test]
fn a_datagram_above_the_maximum_is_a_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let largest = vec![7; max_datagram()];
    attacker.send(&[Frame::Datagram(Datagram { data: &largest })]);
    let connection = attacker.connection().expect("open");
    assert_eq!(
        connection.recv_datagram().map(|d| d.len()),
        Some(largest.len())
    );
    assert_eq!(connection.error(), None, "the maximum itself is fine");

    let too_large = vec![7; max_datagram() + 1];
    attacker.send(&[Frame::Datagram(Datagram { data: &too_large })]);
    let refused = attacker.connection().and_then(|c| c.recv_datagram());
    assert_eq!(refused.map(|d| d.len()), None);
    assert_refused(&mut attacker, |e| *e == ProtocolError::DatagramTooLarge);
}

#[test]
fn a_second_reset_with_another_final_size_is_a_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let id = StreamId(0);
    attacker.send(&[Frame::Stream(Stream {
        id: id.0,
        offset: 0,
        fin: false,
        data: &[1; 100],
    })]);
    let reset = |final_size| {
        Frame::ResetStream(ResetStream {
            id: id.0,
            error_code: 9,
            final_size,
        })
    };
    attacker.send(&[reset(1000)]);
    attacker.send(&[reset(1000)]);
    assert_eq!(error(&mut attacker), None, "a repeat of the same reset");
    attacker.send(&[reset(5000)]);
    assert_refused(&mut attacker, |e| {
        matches!(e, ProtocolError::StreamData(_)) && e.to_string().contains("final size")
    });
}

/// Ack-eliciting packets from the attacker, and time for the endpoint to
/// acknowledge them.
fn pings_acknowledged(attacker: &mut Attacker) {
    attacker.send(&[Frame::Ping]);
    attacker.send(&[Frame::Ping]);
    attacker.run_for(Duration::from_millis(200), Duration::from_millis(5));
    attacker.inbox.clear();
}

/// The attacker's sealer moves to its next key whether or not the endpoint
/// acknowledged anything under the current one (it fakes the ACK an
/// honest sealer waits for).
fn update_key(attacker: &mut Attacker) {
    let sealer = attacker.sealer();
    let last = sealer.next_packet_number() - 1;
    sealer.on_ack(last);
    sealer.update_key().expect("key update");
}

#[test]
fn a_key_update_before_the_last_was_acknowledged_is_a_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    pings_acknowledged(&mut attacker);
    // Honest updates: each after the endpoint acknowledged the phase before.
    for _ in 0..3 {
        update_key(&mut attacker);
        pings_acknowledged(&mut attacker);
        assert_eq!(error(&mut attacker), None, "an acknowledged phase");
    }
    // Then one on every packet.
    update_key(&mut attacker);
    attacker.send(&[Frame::Ping]);
    update_key(&mut attacker);
    attacker.send(&[Frame::Ping]);
    assert_refused(&mut attacker, |e| *e == ProtocolError::KeyUpdateTooSoon);
}
