//! Data leaves in runs of equal datagrams (one GSO send each): every
//! datagram of a run but the last is the run's stride long, so a packet
//! that its data left a byte short of the stride ends the run. Stream
//! frames reckon their room for the largest offset, so each data packet
//! used to come out a byte or two short of the one before: a 16 KiB
//! message went out as six runs of two datagrams, each a system call and a
//! receive of its own, and bulk transfers were cut the same way.
//!
//! The two endpoints are wired to each other directly, datagram by
//! datagram, with a mock clock: every figure here is deterministic.

mod support;

use std::time::Duration;
use support::direct::{DirectPair, PAYLOAD, Run, SEGMENTS};
use support::message;
use tern_proto::{ConnectionHandle, ReadOutcome, StreamId};

/// A client and a server wired directly, connected and settled.
struct Wire {
    pair: DirectPair,
    handle: ConnectionHandle,
    /// The server's side, once accepted, and its stream, once opened.
    accepted: Option<(ConnectionHandle, Option<StreamId>)>,
    buf: Vec<u8>,
    /// How long a round lasts: about the round trip the client measures.
    round: Duration,
}

impl Wire {
    /// The handshake, and a few small messages from the client, so that
    /// both sides settle (the path's datagram size probed, the first ACKs
    /// exchanged).
    fn settled() -> Self {
        Self::settled_in(Duration::from_millis(1))
    }

    /// [`settled`](Self::settled), with rounds of `round`.
    fn settled_in(round: Duration) -> Self {
        let mut pair = DirectPair::new(11);
        let handle = pair.connect();
        let mut wire = Self {
            pair,
            handle,
            accepted: None,
            buf: vec![0; SEGMENTS * PAYLOAD],
            round,
        };
        for round in 0..20 {
            if round >= 5 {
                wire.connection()
                    .send_message(message(round, 64))
                    .expect("send");
            }
            wire.round();
        }
        wire
    }

    fn connection(&mut self) -> &mut tern_proto::Connection {
        self.pair.client.connection(self.handle).expect("connected")
    }

    /// A round later, every run the client sends then, and the server's
    /// answers half a round after.
    fn round(&mut self) -> Vec<Run> {
        self.pair.mock.increment(self.round / 2);
        self.pair.client_timer();
        let mut sent = Vec::new();
        self.pair.client_sends(|run| sent.push(run));
        // What the client sent reaches the server at once; the server's
        // answer takes the other half of the round.
        self.pair.mock.increment(self.round / 2);
        self.pair.server_timer();
        self.pair.server_sends(|_| {});
        let pair = &mut self.pair;
        while pair.server.poll_event().is_some() {}
        while pair.client.poll_event().is_some() {}
        if let Some(handle) = pair.server.accept() {
            self.accepted = Some((handle, None));
        }
        if let Some((handle, stream)) = self.accepted.as_mut() {
            let connection = pair.server.connection(*handle).expect("accepted");
            while connection.recv_message().is_some() {}
            if let Some(id) = connection.accept_stream() {
                *stream = Some(id);
            }
            if let Some(id) = *stream {
                while let Ok(ReadOutcome::Read(1..)) = connection.read(id, &mut self.buf) {}
            }
        }
        sent
    }
}

#[test]
fn a_16_kib_message_leaves_as_one_run_of_full_datagrams() {
    let mut wire = Wire::settled();
    let len = 16 * 1024;
    wire.connection()
        .send_message(message(99, len))
        .expect("send");
    let sent = wire.round();
    assert_eq!(sent.len(), 1, "one run: {sent:?}");
    let run = sent[0];
    assert!(run.len > len, "the whole message in the run: {run:?}");
    assert_eq!(run.stride, PAYLOAD, "full datagrams: {run:?}");
    // 16 KiB and a packet's overhead each: 12 datagrams.
    assert_eq!(run.datagrams(), 12, "{run:?}");
}

#[test]
fn a_message_sent_from_quiet_leaves_in_one_run_as_far_as_the_initial_window() {
    // A round trip of 3 ms: the pacer's burst is one millisecond's worth
    // of two windows over it, 25 KB, less than a 32 KiB message.
    let mut wire = Wire::settled_in(Duration::from_millis(6));
    // The last small message's ACK.
    for _ in 0..3 {
        wire.round();
    }
    let stats = wire.connection().stats();
    assert_eq!(stats.bytes_in_flight, 0, "quiet");
    assert!(stats.rtt >= Duration::from_millis(2), "{stats:?}");
    let len = 32 * 1024;
    wire.connection()
        .send_message(message(99, len))
        .expect("send");
    let sent = wire.round();
    assert_eq!(sent.len(), 1, "one run: {sent:?}");
    assert!(sent[0].len > len, "the whole message in the run: {sent:?}");
    assert_eq!(sent[0].stride, PAYLOAD, "full datagrams: {sent:?}");
}

#[test]
fn a_bulk_stream_leaves_in_runs_of_full_datagrams() {
    let mut wire = Wire::settled();
    let stream = wire.connection().open_stream().expect("a stream");
    let chunk = vec![0x5a; 64 * 1024];
    let mut runs = 0;
    let mut datagrams = 0;
    for _ in 0..50 {
        let connection = wire.connection();
        while connection.write(stream, &chunk).expect("open") > 0 {}
        let sent = wire.round();
        // The last run of a round ends where the written data does.
        let Some((_, before_last)) = sent.split_last() else {
            continue;
        };
        let cut: Vec<&Run> = before_last.iter().filter(|run| !run.is_full()).collect();
        assert!(cut.is_empty(), "runs cut short {cut:?} in {sent:?}");
        runs += sent.len();
        datagrams += sent.iter().map(|run| run.datagrams()).sum::<usize>();
    }
    // Each round sends what the send buffer holds (256 KiB): two runs of
    // the 64 datagrams a transmit may carry and one of the rest.
    assert!(
        datagrams >= SEGMENTS / 2 * runs,
        "{datagrams} datagrams in {runs} runs"
    );
}
