//! A peer that lies about what it can take (issue #23): it grants streams
//! and flow-control credit without end and acknowledges nothing, or little.
//! What this side holds to send is bounded by its own configuration
//! whatever the peer grants: a send that would exceed it is refused (a
//! large one given back, a datagram dropped), and the room comes back when
//! the peer acknowledges.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::attacker::Attacker;
use tern_proto::{ConnectionConfig, EndpointConfig, Event, SendError};
use tern_wire::{Ack, AckFrameRanges, Frame};

const MIB: usize = 1 << 20;

/// Everything the endpoint may hold to send with `config`: the streams'
/// budget, the messages' (and one message beyond, which is taken alone),
/// and the datagrams not yet sent.
fn send_bound(config: &ConnectionConfig, largest_message: usize) -> usize {
    config.send_buffer
        + config.message_send_buffer
        + largest_message
        + config.datagram_send_queue * 1200
}

#[test]
fn large_messages_wait_for_acknowledgements_not_for_the_peers_credit() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    attacker.grant_everything();
    let config = ConnectionConfig::default();
    let message = Bytes::from(vec![0x5a; MIB]);
    let mut accepted = 0usize;
    for _ in 0..160 {
        let connection = attacker.connection().expect("open");
        match connection.send_message(message.clone()) {
            Ok(()) => accepted += 1,
            Err(SendError::Blocked(back)) => assert_eq!(back.len(), MIB),
            Err(e) => panic!("{e:?}"),
        }
        // The endpoint sends what its window allows; nothing is acknowledged.
        attacker.advance(Duration::from_millis(5));
        attacker.turn();
    }
    let held = accepted * MIB;
    assert!(
        held <= config.message_send_buffer + MIB,
        "{accepted} messages of 1 MiB taken, none acknowledged"
    );
    let stats = attacker.connection().expect("open").stats();
    assert!(stats.send_memory >= held, "{} < {held}", stats.send_memory);
    assert!(stats.send_memory <= send_bound(&config, MIB));
}

#[test]
fn stream_writes_messages_and_datagrams_together_stay_under_the_bound() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    attacker.grant_everything();
    let config = ConnectionConfig::default();
    let large = Bytes::from(vec![1; 256 << 10]);
    let small = Bytes::from(vec![2; 1000]);
    let chunk = vec![3u8; 64 << 10];
    let mut streams = Vec::new();
    for round in 0..400 {
        let connection = attacker.connection().expect("open");
        if round % 4 == 0
            && let Some(id) = connection.open_stream()
        {
            streams.push(id);
        }
        for &id in &streams {
            connection.write(id, &chunk).expect("open stream");
        }
        for _ in 0..64 {
            let _ = connection.send_message(small.clone());
            let _ = connection.send_datagram(small.clone());
        }
        let _ = connection.send_message(large.clone());
        let held = connection.buffered_bytes();
        assert!(
            held <= send_bound(&config, large.len()),
            "{held} bytes held at round {round}"
        );
        attacker.advance(Duration::from_millis(2));
        attacker.turn();
    }
    assert!(streams.len() > 50, "the peer's grant was used");
}

#[test]
fn datagrams_beyond_the_queue_are_dropped_and_counted() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    let config = ConnectionConfig::default();
    let datagram = Bytes::from(vec![9; 1000]);
    let connection = attacker.connection().expect("open");
    for _ in 0..100_000 {
        connection.send_datagram(datagram.clone()).expect("taken");
    }
    let queued = config.datagram_send_queue;
    assert_eq!(connection.buffered_bytes(), queued * datagram.len());
    let stats = connection.stats();
    assert_eq!(stats.send_memory, queued * datagram.len());
    assert_eq!(stats.datagrams_dropped, (100_000 - queued) as u64);
    assert_eq!(stats.datagrams_send_queue_dropped, stats.datagrams_dropped);
    // One too large for a packet is dropped too, but not from the queue.
    let connection = attacker.connection().expect("open");
    let too_large = Bytes::from(vec![9; connection.max_datagram_size() + 1]);
    assert!(connection.send_datagram(too_large).is_err());
    let stats = connection.stats();
    assert_eq!(stats.datagrams_dropped, (100_000 - queued + 1) as u64);
    assert_eq!(
        stats.datagrams_send_queue_dropped,
        (100_000 - queued) as u64
    );
}

#[test]
fn a_refused_message_is_taken_once_the_peer_acknowledges() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    attacker.grant_everything();
    let message = Bytes::from(vec![0x5a; MIB]);
    let mut refused = None;
    for _ in 0..160 {
        let connection = attacker.connection().expect("open");
        if let Err(SendError::Blocked(back)) = connection.send_message(message.clone()) {
            refused = Some(back);
            break;
        }
        attacker.advance(Duration::from_millis(5));
        attacker.turn();
    }
    let mut refused = refused.expect("refused before 160 MiB were held");
    while attacker.connection().expect("open").poll_event().is_some() {}
    let mut acknowledged = 0;
    for _ in 0..2000 {
        let ranges = attacker.received_ranges();
        for ranges in ranges.chunks(32) {
            attacker.send(&[Frame::Ack(Ack {
                ranges: AckFrameRanges::new(ranges).expect("ranges"),
                ack_delay: Duration::ZERO,
                receive_time: Duration::ZERO,
            })]);
            acknowledged += 1;
        }
        let connection = attacker.connection().expect("open");
        assert_eq!(connection.error(), None);
        // The event says bytes were released; the message is taken once
        // enough of them were.
        if std::iter::from_fn(|| connection.poll_event()).any(|e| e == Event::MessagesWritable) {
            match connection.send_message(refused) {
                Ok(()) => return,
                Err(SendError::Blocked(back)) => refused = back,
                Err(e) => panic!("{e:?}"),
            }
        }
        attacker.advance(Duration::from_millis(5));
        attacker.turn();
    }
    panic!("no MessagesWritable after {acknowledged} ACKs");
}
