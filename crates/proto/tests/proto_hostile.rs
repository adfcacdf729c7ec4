//! A peer that lies (issue #23): the other end of an authenticated
//! connection is not trusted. An attacker finishes a real handshake with
//! an endpoint, then sends frames no honest Tern peer sends; each is
//! refused as a protocol violation, or its effect is bounded.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::attacker::Attacker;
use tern_proto::{ConnectionError, EndpointConfig, ProtocolError, StreamId};
use tern_wire::{Ack, AckFrameRanges, Datagram, Frame, ResetStream, Stream};

/// The largest datagram an honest sender sends: what one packet at the
/// minimum UDP payload carries.
fn max_datagram() -> usize {
    tern_wire::MaxUdpPayload::new(tern_wire::MIN_UDP_PAYLOAD)
        .expect("a valid payload size")
        .guaranteed_message_capacity()
}

/// Checks the connection was closed for `violation`: the error, the Close
/// the attacker got, the endpoint's count.
fn assert_refused(attacker: &mut Attacker, violation: impl Fn(&ProtocolError) -> bool) {
    match attacker.error() {
        Some(ConnectionError::Protocol(e)) => assert!(violation(&e), "closed for {e}"),
        other => panic!("not closed for a violation: {other:?}"),
    }
    attacker.turn();
    assert!(attacker.sent_transport_close(), "the peer is told why");
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
    assert_eq!(attacker.error(), None, "a repeat of the same reset");
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

#[test]
fn a_key_update_before_the_last_was_acknowledged_is_a_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    pings_acknowledged(&mut attacker);
    // Honest updates: each after the endpoint acknowledged the phase before.
    for _ in 0..3 {
        assert!(attacker.force_key_update());
        pings_acknowledged(&mut attacker);
        assert_eq!(attacker.error(), None, "an acknowledged phase");
    }
    // Then one on every packet.
    assert!(attacker.force_key_update());
    attacker.send(&[Frame::Ping]);
    assert!(attacker.force_key_update());
    attacker.send(&[Frame::Ping]);
    assert_refused(&mut attacker, |e| *e == ProtocolError::KeyUpdateTooSoon);
}

#[test]
fn a_close_to_a_forged_address_is_held_to_the_amplification_limit_and_once_per_pto() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    pings_acknowledged(&mut attacker);
    let victim: SocketAddr = "203.0.113.99:443".parse().expect("address");
    // An ACK of a packet never sent, from the victim's address: the
    // connection moves there, and closes.
    let absurd = [1_000_000..=1_000_000];
    attacker.send_from(
        victim,
        &[Frame::Ack(Ack {
            ranges: AckFrameRanges::new(&absurd).expect("ranges"),
            ack_delay: Duration::ZERO,
            receive_time: Duration::ZERO,
        })],
    );
    assert!(matches!(
        attacker.error(),
        Some(ConnectionError::Protocol(ProtocolError::Ack(_)))
    ));
    // Then small packets from the attacker's own address, as fast as it likes,
    // until the connection is gone.
    let before = attacker.sent_to.values().map(|t| t.datagrams).sum::<u64>();
    let mut rounds = 0;
    while attacker.connection().is_some() {
        for _ in 0..10 {
            attacker.send(&[Frame::Ping]);
        }
        attacker.turn();
        attacker.advance(Duration::from_millis(1));
        while attacker.endpoint.poll_event().is_some() {}
        rounds += 1;
        assert!(rounds < 100_000, "the closing connection never ended");
    }
    let sent = attacker.sent_to.values().map(|t| t.datagrams).sum::<u64>() - before;
    let to_victim = attacker.sent_to.get(&victim).copied().unwrap_or_default();
    let from_victim = attacker.received_from[&victim];
    assert!(
        to_victim.bytes <= 3 * from_victim.bytes,
        "{to_victim:?} sent to the victim for {from_victim:?} received from it"
    );
    // The Close goes when the connection closes and once a probe timeout
    // for three of them, whatever arrives: 10 packets a millisecond here.
    assert!(
        sent <= 4,
        "{sent} datagrams in {rounds} ms of closing, for {} packets",
        rounds * 10
    );
    assert!(rounds > 10, "the closing period lasted {rounds} ms");
}

/// An ACK frame for `range` alone.
fn ack_of(range: &[std::ops::RangeInclusive<u64>]) -> Frame<'_> {
    Frame::Ack(Ack {
        ranges: AckFrameRanges::new(range).expect("ranges"),
        ack_delay: Duration::ZERO,
        receive_time: Duration::ZERO,
    })
}

#[test]
fn an_ack_of_a_packet_number_never_sent_is_a_violation() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    // The endpoint sends datagrams; the attacker acknowledges exactly what
    // it received, until it sees a number the endpoint skipped.
    let mut acked_from = None;
    let mut received = std::collections::BTreeSet::new();
    for _ in 0..500 {
        let connection = attacker.connection().expect("open");
        assert_eq!(connection.error(), None, "honest ACKs are fine");
        for _ in 0..20 {
            connection
                .send_datagram(tern_proto::Bytes::from(vec![0; 1000]))
                .expect("queued");
        }
        attacker.turn();
        for mut datagram in std::mem::take(&mut attacker.inbox) {
            let (pn, _) = attacker.open(&mut datagram).expect("opens");
            received.insert(pn);
        }
        let (Some(&first), Some(&largest)) = (received.first(), received.last()) else {
            attacker.advance(Duration::from_millis(10));
            continue;
        };
        let from = *acked_from.get_or_insert(first);
        let skipped = (from..largest).find(|pn| !received.contains(pn));
        if let Some(skipped) = skipped {
            // An optimistic ACK: everything up to the largest, as if
            // nothing was missing.
            attacker.send(&[ack_of(&[from..=largest])]);
            assert_refused(&mut attacker, |e| {
                *e == ProtocolError::Ack(tern_reliability::AckError::UnsentPacket {
                    packet_number: skipped,
                })
            });
            return;
        }
        attacker.send(&[ack_of(&[from..=largest])]);
        acked_from = Some(largest + 1);
        received.clear();
        attacker.advance(Duration::from_millis(10));
    }
    panic!("no packet number skipped");
}

#[test]
fn ack_ranges_the_peer_knows_of_are_not_reported_again() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    // Gaps in the attacker's numbers, as skipped numbers leave.
    for _ in 0..4 {
        attacker.send(&[Frame::Ping]);
        attacker.sealer().skip_packet_number().expect("a number");
    }
    attacker.send(&[Frame::Ping]);
    attacker.run_for(Duration::from_millis(100), Duration::from_millis(5));
    let mut acks = Vec::new();
    for mut datagram in std::mem::take(&mut attacker.inbox) {
        acks.extend(attacker.open_ack(&mut datagram));
    }
    let &(pn, ranges) = acks.last().expect("the endpoint acknowledged");
    assert_eq!(ranges, 5, "one range per run between gaps");
    // The attacker acknowledges the packet that carried that ACK.
    attacker.send(&[ack_of(&[pn..=pn]), Frame::Ping]);
    attacker.run_for(Duration::from_millis(100), Duration::from_millis(5));
    let mut acks = Vec::new();
    for mut datagram in std::mem::take(&mut attacker.inbox) {
        acks.extend(attacker.open_ack(&mut datagram));
    }
    let &(_, ranges) = acks.last().expect("the endpoint acknowledged");
    assert_eq!(ranges, 1, "only what the peer has not seen acknowledged");
}

#[test]
fn a_close_the_forged_path_has_no_room_for_goes_to_the_path_the_peer_left() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    pings_acknowledged(&mut attacker);
    // A packet from a victim's address: the connection moves there, and
    // spends all that allows on its challenge and on stream data its
    // application writes.
    let victim: SocketAddr = "203.0.113.99:443".parse().expect("address");
    attacker.send_from(victim, &[Frame::Ping]);
    let connection = attacker.connection().expect("open");
    let id = connection.open_stream().expect("a stream");
    connection.write(id, &[1; 20_000]).expect("open");
    attacker.run_for(Duration::from_millis(50), Duration::from_millis(5));
    attacker.inbox.clear();
    let before = attacker.sent_to.get(&victim).copied().unwrap_or_default();
    // Then a violation from the attacker's own address (the validated
    // path it left): the connection closes.
    let too_large = vec![7; max_datagram() + 1];
    attacker.send(&[Frame::Datagram(Datagram { data: &too_large })]);
    assert!(matches!(
        attacker.error(),
        Some(ConnectionError::Protocol(ProtocolError::DatagramTooLarge))
    ));
    attacker.turn();
    let to_victim = attacker.sent_to.get(&victim).copied().unwrap_or_default();
    let from_victim = attacker.received_from[&victim];
    assert_eq!(to_victim, before, "nothing more to the victim");
    assert!(to_victim.bytes <= 3 * from_victim.bytes);
    assert!(
        attacker.sent_transport_close(),
        "the Close went to the validated path the peer left"
    );
}
