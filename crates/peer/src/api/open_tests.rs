//! `open_bi` and `open_uni` while the driver holds the endpoint's lock, on
//! real loopback sockets: once one open has taken the lock, they allot
//! the next stream ids without it, and the streams open (in order) when
//! the handed-off command runs; an id allotted as the connection ends is
//! never opened, and its halves say why.

use super::error::ConnectionLost;
use super::hand_off_tests::{
    PATIENCE, accepted, assert_answered, connected, while_locked, while_locked_after,
};
use super::{Config, WriteError};
use crate::proto::{Direction, Side, StreamId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_bi_and_open_uni_take_ids_without_the_lock_once_one_took_it() {
    let (_server, client, a, b) = connected(Config::default(), Config::default()).await;
    // The first open takes the lock, and has the ids allotted from now on.
    let (mut first, _first_recv) = a.open_bi().await.expect("opens");
    let (opening, runtime) = (a.clone(), tokio::runtime::Handle::current());
    let (ran, _) = while_locked(&client, move || {
        runtime.block_on(async {
            // (Dropping a half takes the lock: they are kept.)
            let (second, second_recv) = opening.open_bi().await.expect("opens");
            let (third, answer) = opening.open_bi().await.expect("opens");
            let one_way = opening.open_uni().await.expect("opens");
            (second, second_recv, third, answer, one_way)
        })
    });
    let (mut second, _second_recv, mut third, mut answer, mut one_way) =
        ran.expect("open_bi or open_uni waited for the lock");
    // Numbered in the order the calls returned, each kind from its first.
    let two_way = |i| StreamId::new(Side::Initiator, Direction::Bi, i);
    assert_eq!(
        [first.id(), second.id(), third.id(), answer.id()],
        [two_way(0), two_way(1), two_way(2), two_way(2)]
    );
    assert_eq!(
        one_way.id(),
        StreamId::new(Side::Initiator, Direction::OneWay, 0)
    );
    // They work as streams opened under the lock do. The third is written
    // first: the peer still accepts them in order.
    for (stream, bytes) in [
        (&mut third, &b"third"[..]),
        (&mut one_way, b"one-way"),
        (&mut second, b"second"),
        (&mut first, b"first"),
    ] {
        stream.write_all(bytes).await.expect("writes");
        stream.finish().expect("finishes");
    }
    let mut read = Vec::new();
    for _ in 0..3 {
        let (mut send, mut recv) = accepted(&b).await;
        read.push((recv.id(), recv.read_to_end(64).await.expect("reads")));
        send.write_all(b"back").await.expect("writes");
        send.finish().expect("finishes");
    }
    assert_eq!(
        read,
        [
            (two_way(0), b"first".to_vec()),
            (two_way(1), b"second".to_vec()),
            (two_way(2), b"third".to_vec()),
        ]
    );
    let mut one_way_recv = tokio::time::timeout(PATIENCE, b.accept_uni())
        .await
        .expect("arrives")
        .expect("accepts");
    assert_eq!(one_way_recv.id(), one_way.id());
    assert_eq!(
        one_way_recv.read_to_end(64).await.expect("reads"),
        b"one-way"
    );
    assert_answered(&mut answer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_allotted_as_the_connection_ends_is_never_opened_and_says_why() {
    let (_server, client, a, b) = connected(Config::default(), Config::default()).await;
    let _first = a.open_bi().await.expect("opens");
    // Under the lock, the connection is aborted before the driver's turn
    // has told the handles; an open meanwhile takes an id still.
    let (slot, now) = (a.slot(), client.driver().now());
    let abort = move |state: &mut super::state::EndpointState| {
        if let Some((_, Some(connection))) = state.connection(slot) {
            connection.abort(now, 7, bytes::Bytes::new());
        }
    };
    let (opening, runtime) = (a.clone(), tokio::runtime::Handle::current());
    let (ran, _) = while_locked_after(&client, abort, move || {
        runtime.block_on(async { opening.open_bi().await.expect("an id was left") })
    });
    let (mut send, mut recv) = ran.expect("open_bi waited for the lock");
    let written = send.write(b"late").await;
    assert!(
        matches!(written, Err(WriteError::ConnectionLost(_))),
        "{written:?}"
    );
    assert!(recv.read(&mut [0; 8]).await.is_err());
    drop((send, recv));
    // Nothing of it reached the peer, which learns of the abort (and of
    // the first stream, whose window was announced) alone.
    let closed = tokio::time::timeout(PATIENCE, b.closed())
        .await
        .expect("the peer learns of the close");
    assert!(
        matches!(closed, ConnectionLost::Connection(_)),
        "{closed:?}"
    );
    let mut accepted = Vec::new();
    while let Ok((_, recv)) = tokio::time::timeout(PATIENCE, b.accept_bi())
        .await
        .expect("accept ends")
    {
        accepted.push(recv.id());
    }
    let second = StreamId::new(Side::Initiator, Direction::Bi, 1);
    assert!(!accepted.contains(&second), "{accepted:?}");
}
