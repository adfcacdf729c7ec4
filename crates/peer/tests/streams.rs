//! Streams in halves and the typed errors of each operation, opening
//! streams against the peer's limit, and the datagram send queue's
//! limits, on real loopback sockets.

mod support;

use std::time::Duration;

use support::net::{connected, localhost, pair, pattern, server_with};
use tern_peer::proto::{Direction, EndpointConfig, INITIAL_MAX_STREAMS, StreamId};
use tern_peer::{
    ClosedStream, Config, Connection, ConnectionError, ConnectionLost, Endpoint, ReadError,
    ReadToEndError, RecvStream, SendDatagramError, SendStream, WriteError,
};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

/// A generous bound on what must happen on loopback: a hang guard, not a
/// timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// Opens a two-way stream from `a`, writes `bytes` on it, and has `b`
/// accept it: `a`'s writer and `b`'s reader.
async fn stream_with(a: &Connection, b: &Connection, bytes: &[u8]) -> (SendStream, RecvStream) {
    let (mut send, _) = a.open_bi().await.expect("opens");
    send.write_all(bytes).await.expect("writes");
    let (_, recv) = b.accept_bi().await.expect("accepts");
    (send, recv)
}

/// `send`'s reader stopped it with `code`: the stop arrives, and a write
/// fails with that code.
async fn assert_stopped(send: &mut SendStream, code: u64) {
    let stopped = tokio::time::timeout(PATIENCE, send.stopped())
        .await
        .expect("the stop arrives");
    assert_eq!(stopped, Ok(Some(code)));
    assert_eq!(send.write(b"more").await, Err(WriteError::Stopped(code)));
}

#[tokio::test]
async fn the_halves_of_a_stream_work_from_two_tasks_each_way() {
    let (_server, _client, a, b) = connected().await;
    let (mut a_send, mut a_recv) = a.open_bi().await.expect("opens");
    a_send.write_all(b"ping").await.expect("writes");
    let (mut b_send, mut b_recv) = b.accept_bi().await.expect("accepts");
    assert_eq!(a_send.id(), b_recv.id());
    // The peer echoes from one task while another reads.
    let echo = tokio::spawn(async move {
        let got = b_recv.read_to_end(1 << 20).await.expect("reads");
        b_send.write_all(&got).await.expect("echoes");
        b_send.finish().expect("finishes");
        b_send
    });
    let reader = tokio::spawn(async move { a_recv.read_to_end(1 << 20).await });
    a_send
        .write_all(&pattern(0, 100_000))
        .await
        .expect("writes");
    a_send.finish().expect("finishes");
    let echoed = tokio::time::timeout(PATIENCE, reader)
        .await
        .expect("the echo ends")
        .expect("the reader ends")
        .expect("reads the echo");
    let mut sent = b"ping".to_vec();
    sent.extend(pattern(0, 100_000));
    assert!(echoed == sent, "the echo differs");
    let b_send = echo.await.expect("the echo task ends");
    // Every byte of both halves arrived: stopped() says so with no code.
    assert_eq!(a_send.stopped().await, Ok(None));
    assert_eq!(b_send.stopped().await, Ok(None));
    assert_eq!(a_send.finish(), Err(ClosedStream), "finished already");
    assert_eq!(
        a_send.write(b"late").await,
        Err(WriteError::ClosedStream),
        "nothing goes on a finished stream"
    );
}

#[tokio::test]
async fn a_stopped_stream_fails_its_writer_with_the_peers_code() {
    let (_server, _client, a, b) = connected().await;
    let (mut send, mut recv) = stream_with(&a, &b, b"first bytes").await;
    recv.stop(42).expect("stops");
    assert_eq!(recv.stop(43), Err(ClosedStream), "stopped once");
    assert_stopped(&mut send, 42).await;
    // Writes fail with the code, typed, and inside the io::Error of
    // AsyncWrite too.
    let error = AsyncWriteExt::write(&mut send, b"more")
        .await
        .expect_err("stopped");
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
    let inner = error.get_ref().and_then(|e| e.downcast_ref::<WriteError>());
    assert_eq!(inner, Some(&WriteError::Stopped(42)));
}

#[tokio::test]
async fn a_reset_stream_fails_its_reader_with_the_peers_code() {
    let (_server, _client, a, b) = connected().await;
    let (mut send, mut recv) = stream_with(&a, &b, &pattern(0, 10_000)).await;
    send.reset(7).expect("resets");
    assert_eq!(send.reset(8), Err(ClosedStream), "reset once");
    let outcome = tokio::time::timeout(PATIENCE, async {
        let mut buf = vec![0; 4096];
        loop {
            match recv.read(&mut buf).await {
                Ok(Some(_)) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("the reset arrives");
    assert_eq!(outcome, Err(ReadError::Reset(7)));
}

#[tokio::test]
async fn read_to_end_refuses_a_stream_over_its_limit() {
    let (_server, _client, a, b) = connected().await;
    let (mut send, _) = a.open_bi().await.expect("opens");
    send.write_all(&pattern(0, 200_000)).await.expect("writes");
    send.finish().expect("finishes");
    let (_, mut recv) = b.accept_bi().await.expect("accepts");
    assert_eq!(
        recv.read_to_end(100_000).await,
        Err(ReadToEndError::TooLong { limit: 100_000 })
    );
}

#[tokio::test]
async fn stream_operations_on_a_closed_connection_name_its_end() {
    let (_server, _client, a, b) = connected().await;
    let (mut send, mut recv) = stream_with(&a, &b, b"x").await;
    let mut buf = [0u8; 8];
    assert_eq!(recv.read(&mut buf).await, Ok(Some(1)));
    a.close(9, "bye").await;
    let read = tokio::time::timeout(PATIENCE, recv.read(&mut buf))
        .await
        .expect("the close arrives");
    assert!(
        matches!(
            read,
            Err(ReadError::ConnectionLost(ConnectionLost::Connection(
                ConnectionError::PeerClosed { code: 9, .. }
            )))
        ),
        "{read:?}"
    );
    let write = send.write(b"y").await;
    assert!(
        matches!(
            write,
            Err(WriteError::ConnectionLost(ConnectionLost::Connection(
                ConnectionError::LocallyClosed { code: 9, .. }
            )))
        ),
        "{write:?}"
    );
}

/// An endpoint whose connections queue at most `queue` datagrams to send.
fn with_datagram_queue(queue: usize) -> Config {
    let mut protocol = EndpointConfig::default();
    protocol.connection.datagram_send_queue = queue;
    Config::default().protocol(protocol)
}

#[tokio::test]
async fn an_oversized_datagram_is_refused_with_the_limit_and_the_connection_lives() {
    let (_server, _client, a, b) = connected().await;
    let max = a.max_datagram_size().expect("open");
    assert!(max >= 1000, "a packet carries at least {max} bytes");
    assert_eq!(
        a.send_datagram(vec![0u8; max + 1]),
        Err(SendDatagramError::TooLarge { size: max + 1, max })
    );
    a.send_datagram(vec![1u8; max]).expect("the largest fits");
    let got = tokio::time::timeout(PATIENCE, b.recv_datagram())
        .await
        .expect("arrives on loopback")
        .expect("open");
    assert_eq!(got.len(), max);
}

#[tokio::test]
async fn a_full_datagram_queue_drops_its_oldest_but_send_datagram_wait_waits() {
    const QUEUE: usize = 4;
    const SENT: u64 = 200;
    let server = server_with(with_datagram_queue(QUEUE));
    let client = tern_peer::Endpoint::bind(support::net::localhost(), with_datagram_queue(QUEUE))
        .expect("binds");
    let (a, _b) = pair(&server, &client).await;
    // Without a pause the driver cannot send between them: all but the
    // last few are pushed out of the queue, and counted.
    for i in 0..SENT {
        a.send_datagram(i.to_le_bytes().to_vec()).expect("queued");
    }
    let stats = a.stats().expect("open");
    let dropped = stats.datagrams_dropped;
    assert_eq!(dropped, SENT - QUEUE as u64);
    assert_eq!(stats.datagrams_send_queue_dropped, dropped);
    // One too large is dropped too, counted apart from the queue's.
    let too_large = vec![0u8; a.max_datagram_size().expect("open") + 1];
    assert!(a.send_datagram(too_large).is_err());
    let stats = a.stats().expect("open");
    assert_eq!(stats.datagrams_dropped, dropped + 1);
    assert_eq!(stats.datagrams_send_queue_dropped, dropped);
    let dropped = stats.datagrams_dropped;
    // Waiting for room instead loses none before they leave.
    tokio::time::timeout(PATIENCE, async {
        for i in 0..SENT {
            a.send_datagram_wait(i.to_le_bytes().to_vec())
                .await
                .expect("queued");
        }
    })
    .await
    .expect("the queue drains");
    assert_eq!(a.stats().expect("open").datagrams_dropped, dropped);
}

#[tokio::test]
async fn one_way_streams_are_accepted_apart_from_bidirectional_ones() {
    let (_server, _client, a, b) = connected().await;
    let mut one_way = a.open_uni().await.expect("opens");
    one_way
        .write_all(&pattern(0, 50_000))
        .await
        .expect("writes");
    one_way.finish().expect("finishes");
    let (mut both, _) = a.open_bi().await.expect("opens");
    both.write_all(b"two-way").await.expect("writes");
    both.finish().expect("finishes");
    let (_, mut from_both) = tokio::time::timeout(PATIENCE, b.accept_bi())
        .await
        .expect("arrives")
        .expect("accepts");
    let mut from_one_way = tokio::time::timeout(PATIENCE, b.accept_uni())
        .await
        .expect("arrives")
        .expect("accepts");
    assert_eq!(
        (from_both.id(), from_one_way.id()),
        (both.id(), one_way.id())
    );
    assert!(from_one_way.read_to_end(1 << 20).await.expect("reads") == pattern(0, 50_000));
    assert_eq!(
        from_both.read_to_end(1 << 20).await.expect("reads"),
        b"two-way"
    );
    assert_eq!(one_way.stopped().await, Ok(None), "every byte arrived");
}

#[tokio::test]
async fn a_one_way_stream_stopped_by_its_reader_fails_the_writer() {
    let (_server, _client, a, b) = connected().await;
    let mut send = a.open_uni().await.expect("opens");
    send.write_all(b"unwanted").await.expect("writes");
    let mut recv = b.accept_uni().await.expect("accepts");
    recv.stop(11).expect("stops");
    assert_stopped(&mut send, 11).await;
}

#[tokio::test]
async fn a_stop_is_still_reported_after_the_protocol_let_the_stream_go() {
    let (_server, _client, a, b) = connected().await;
    let (mut send, mut recv) = stream_with(&a, &b, b"first bytes").await;
    recv.stop(42).expect("stops");
    // Round trips after the stop: the reset that answers it is sent and
    // acknowledged, and the protocol forgets the stream's sending half.
    for i in 0..5u8 {
        b.send(vec![i; 10]).await.expect("sends");
        assert_eq!(a.recv().await.expect("receives")[0], i);
        a.send(vec![i; 10]).await.expect("sends");
        assert_eq!(b.recv().await.expect("receives")[0], i);
    }
    assert_stopped(&mut send, 42).await;
}

/// Endpoints whose peers may each have `streams` streams of each kind
/// open at once.
fn with_stream_limit(streams: u64) -> Config {
    let mut protocol = EndpointConfig::default();
    protocol.connection.max_concurrent_streams = streams;
    Config::default().protocol(protocol)
}

#[tokio::test]
async fn streams_accepted_and_dropped_unread_return_their_credit() {
    const LIMIT: u64 = 4;
    let server = server_with(with_stream_limit(LIMIT));
    let client = Endpoint::bind(localhost(), with_stream_limit(LIMIT)).expect("binds");
    let (a, b) = pair(&server, &client).await;
    // Three times the limit of each kind: each stream is opened with a
    // byte and finished, and its peer drops both halves unread (the
    // opener drops its receiving half at once), as an application that
    // did not want it would.
    for round in 0..3 * LIMIT {
        let (mut send, _) = tokio::time::timeout(PATIENCE, a.open_bi())
            .await
            .unwrap_or_else(|_| panic!("open_bi waits forever in round {round}"))
            .expect("opens");
        let mut one_way = tokio::time::timeout(PATIENCE, a.open_uni())
            .await
            .unwrap_or_else(|_| panic!("open_uni waits forever in round {round}"))
            .expect("opens");
        for stream in [&mut send, &mut one_way] {
            stream.write_all(b"x").await.expect("writes");
            stream.finish().expect("finishes");
        }
        drop((send, one_way));
        let accepted = tokio::time::timeout(PATIENCE, b.accept_bi())
            .await
            .expect("the stream arrives")
            .expect("accepts");
        drop(accepted);
        let accepted = tokio::time::timeout(PATIENCE, b.accept_uni())
            .await
            .expect("the stream arrives")
            .expect("accepts");
        drop(accepted);
    }
}

#[tokio::test]
async fn a_waiting_accept_ends_with_the_connection() {
    let (_server, _client, a, b) = connected().await;
    let (mut send, _) = a.open_bi().await.expect("opens");
    send.write_all(b"x").await.expect("writes");
    // The first accept has the driver accept streams from now on.
    let _ = b.accept_bi().await.expect("accepts");
    let waiting =
        tokio::spawn(async move { (b.accept_bi().await.err(), b.accept_uni().await.err()) });
    a.close(9, "bye").await;
    let (two_way, one_way) = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the close ends the waits")
        .expect("the task ends");
    for lost in [two_way, one_way] {
        assert_closed_by_the_peer_with_9(lost);
    }
}

/// What a wait ended with: the peer closed the connection with code 9.
fn assert_closed_by_the_peer_with_9(lost: Option<ConnectionLost>) {
    assert!(
        matches!(
            lost,
            Some(ConnectionLost::Connection(ConnectionError::PeerClosed {
                code: 9,
                ..
            }))
        ),
        "{lost:?}"
    );
}

/// A pair whose peers each allow `streams` streams of each kind at once.
async fn pair_with_stream_limit(streams: u64) -> (Endpoint, Endpoint, Connection, Connection) {
    let server = server_with(with_stream_limit(streams));
    let client = Endpoint::bind(localhost(), with_stream_limit(streams)).expect("binds");
    let (a, b) = pair(&server, &client).await;
    (server, client, a, b)
}

/// Accepts every stream `b` is opened, of both kinds, reads each to its
/// end and sends what it read (`(stream id, bytes)`) to the channel.
fn read_every_stream(b: &Connection) -> mpsc::UnboundedReceiver<(StreamId, Vec<u8>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    for two_way in [true, false] {
        let (b, tx) = (b.clone(), tx.clone());
        tokio::spawn(async move {
            loop {
                let recv = if two_way {
                    b.accept_bi().await.map(|(_, recv)| recv)
                } else {
                    b.accept_uni().await
                };
                let Ok(mut recv) = recv else { break };
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Ok(read) = recv.read_to_end(1024).await {
                        let _ = tx.send((recv.id(), read));
                    }
                });
            }
        });
    }
    rx
}

#[tokio::test]
async fn an_open_past_the_peers_limit_waits_and_its_credit_wakes_it() {
    let (_server, _client, a, b) = pair_with_stream_limit(INITIAL_MAX_STREAMS).await;
    let mut read = read_every_stream(&b);
    for open_bi in [true, false] {
        let open = || async {
            if open_bi {
                a.open_bi().await.map(|(send, _)| send)
            } else {
                a.open_uni().await
            }
        };
        let mut held = Vec::new();
        for _ in 0..INITIAL_MAX_STREAMS {
            held.push(open().await.expect("within the limit"));
        }
        let waiting = open();
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut waiting)
                .await
                .is_err(),
            "an open past the peer's limit returned"
        );
        // The first is written and finished; its reader reads it to its
        // end, which gives its credit back.
        let mut first = held.remove(0);
        first.write_all(b"first").await.expect("writes");
        first.finish().expect("finishes");
        loop {
            // (The last round's streams, finished as they were dropped,
            // may come first.)
            let (id, bytes) = read.recv().await.expect("read");
            if id == first.id() {
                assert_eq!(bytes, b"first");
                break;
            }
        }
        let next = tokio::time::timeout(PATIENCE, waiting)
            .await
            .expect("the credit woke the opener")
            .expect("opens");
        assert_eq!(next.id().index(), INITIAL_MAX_STREAMS, "the next id");
        drop((first, held, next));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_openers_get_every_id_once_each_in_order_and_every_stream_arrives() {
    const TASKS: u64 = 16;
    const EACH: u64 = 4;
    // Fewer at once than are opened in all: openers wait for credit too.
    let (_server, _client, a, b) = pair_with_stream_limit(INITIAL_MAX_STREAMS).await;
    let mut read = read_every_stream(&b);
    let openers: Vec<_> = (0..TASKS)
        .map(|task| {
            let a = a.clone();
            tokio::spawn(async move {
                let mut last: Option<StreamId> = None;
                for _ in 0..EACH {
                    let mut send = if task % 2 == 0 {
                        a.open_bi().await.expect("opens").0
                    } else {
                        a.open_uni().await.expect("opens")
                    };
                    let id = send.id();
                    assert!(last.is_none_or(|last| last < id), "{last:?} then {id:?}");
                    last = Some(id);
                    send.write_all(&id.0.to_le_bytes()).await.expect("writes");
                    send.finish().expect("finishes");
                }
            })
        })
        .collect();
    for opener in openers {
        tokio::time::timeout(PATIENCE, opener)
            .await
            .expect("no opener waits forever")
            .expect("the opener ends");
    }
    let mut indices = [Vec::new(), Vec::new()];
    for _ in 0..TASKS * EACH {
        let (id, bytes) = tokio::time::timeout(PATIENCE, read.recv())
            .await
            .expect("every stream arrives")
            .expect("read");
        assert_eq!(bytes, id.0.to_le_bytes(), "the bytes of its own stream");
        indices[usize::from(id.direction() != Direction::Bi)].push(id.index());
    }
    for mut kind in indices {
        kind.sort_unstable();
        assert_eq!(kind, (0..TASKS * EACH / 2).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn halves_dropped_unused_give_their_stream_credit_back() {
    let (_server, _client, a, b) = pair_with_stream_limit(INITIAL_MAX_STREAMS).await;
    let mut read = read_every_stream(&b);
    // Three times the limit of each kind, each dropped without a byte
    // (an empty stream, finished).
    for round in 0..3 * INITIAL_MAX_STREAMS {
        let halves = tokio::time::timeout(PATIENCE, a.open_bi())
            .await
            .unwrap_or_else(|_| panic!("open_bi waits forever in round {round}"))
            .expect("opens");
        let one_way = tokio::time::timeout(PATIENCE, a.open_uni())
            .await
            .unwrap_or_else(|_| panic!("open_uni waits forever in round {round}"))
            .expect("opens");
        drop((halves, one_way));
    }
    for _ in 0..2 * 3 * INITIAL_MAX_STREAMS {
        let (_, bytes) = tokio::time::timeout(PATIENCE, read.recv())
            .await
            .expect("every stream arrives")
            .expect("read");
        assert!(bytes.is_empty());
    }
}

#[tokio::test]
async fn an_open_waiting_for_credit_ends_with_the_connection() {
    let (_server, _client, a, b) = pair_with_stream_limit(INITIAL_MAX_STREAMS).await;
    let mut held = Vec::new();
    for _ in 0..INITIAL_MAX_STREAMS {
        held.push(a.open_bi().await.expect("within the limit"));
    }
    let waiting = tokio::spawn({
        let a = a.clone();
        async move { a.open_bi().await.err() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.close(9, "bye").await;
    let lost = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the close ends the wait")
        .expect("the task ends");
    assert_closed_by_the_peer_with_9(lost);
}
