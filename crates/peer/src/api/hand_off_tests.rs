//! Stream writes, finishes, stops and closes, messages and datagrams, and
//! the drops of stream halves and of a connection's last handle, handed off
//! while the driver holds the endpoint's lock (see
//! `DriverHandle::hand_off`), on real loopback sockets: they return
//! without the lock, keep their order with the calls that take it, stay
//! within the room the protocol had, and end with the endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rand_core::OsRng;

use super::error::ConnectionLost;
use super::state::EndpointState;
use super::{Config, Connection, Endpoint, RecvStream, SendStream, WriteError};

/// Long enough for anything that does not hang.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);

/// A server and a client endpoint on loopback (each made with `server`
/// and `client` configurations), and a connection between them: the
/// client's and the server's.
pub(super) async fn connected(
    server: Config,
    client: Config,
) -> (Endpoint, Endpoint, Connection, Connection) {
    let localhost = "127.0.0.1:0".parse().expect("an address");
    let key = tern_wire::IdentityKey::generate_x25519(&mut OsRng);
    let public = key.public();
    let server = Endpoint::bind(localhost, server.identity(key)).expect("binds");
    let client = Endpoint::bind(localhost, client).expect("binds");
    let (connection, accepted) = tokio::join!(
        client.connect(server.local_addr(), &public),
        server.accept_connection()
    );
    let (connection, accepted) = (connection.expect("connects"), accepted.expect("accepts"));
    (server, client, connection, accepted)
}

/// `len` bytes numbered from `start`, so that a byte out of place shows.
pub(super) fn pattern(start: usize, len: usize) -> Vec<u8> {
    (start..start + len).map(|i| (i % 251) as u8).collect()
}

/// Runs `f` on a thread of its own while this thread holds `endpoint`'s
/// lock (as a driver turn would), and gives what it returned: `None` if it
/// did not return within a second, i.e. it waited for the lock.
pub(super) fn while_locked<R: Send + 'static>(
    endpoint: &Endpoint,
    f: impl FnOnce() -> R + Send + 'static,
) -> (Option<R>, mpsc::Receiver<R>) {
    while_locked_after(endpoint, |_| {}, f)
}

/// Like [`while_locked`], having first run `before` under the lock (as a
/// call that took the lock would have).
pub(super) fn while_locked_after<R: Send + 'static>(
    endpoint: &Endpoint,
    before: impl FnOnce(&mut EndpointState),
    f: impl FnOnce() -> R + Send + 'static,
) -> (Option<R>, mpsc::Receiver<R>) {
    let (ran, (), rx) = locked_for_a_second(endpoint, before, f, || ());
    (ran, rx)
}

/// Like [`while_locked`], with what `count` was as the lock was let go:
/// what `f` counted while the lock was held.
fn while_locked_counting<R: Send + 'static>(
    endpoint: &Endpoint,
    count: &AtomicUsize,
    f: impl FnOnce() -> R + Send + 'static,
) -> (usize, mpsc::Receiver<R>) {
    let last = || count.load(Ordering::SeqCst);
    let (_, counted, rx) = locked_for_a_second(endpoint, |_| {}, f, last);
    (counted, rx)
}

/// Holds `endpoint`'s lock, runs `before` under it, then `f` on a thread
/// of its own for up to a second, and `last` before letting the lock go:
/// what `f` returned if it did, what `last` returned, and where `f`'s
/// result comes if it returns later.
fn locked_for_a_second<R: Send + 'static, S>(
    endpoint: &Endpoint,
    before: impl FnOnce(&mut EndpointState),
    f: impl FnOnce() -> R + Send + 'static,
    last: impl FnOnce() -> S,
) -> (Option<R>, S, mpsc::Receiver<R>) {
    let (tx, rx) = mpsc::channel();
    let (ran, lasted) = endpoint
        .driver()
        .with_node_unwoken(|state| {
            before(state);
            std::thread::spawn(move || {
                let _ = tx.send(f());
            });
            let ran = rx.recv_timeout(Duration::from_secs(1)).ok();
            (ran, last())
        })
        .expect("the driver runs");
    (ran, lasted, rx)
}

/// The next two-way stream `b` accepts, within [`PATIENCE`].
pub(super) async fn accepted(b: &Connection) -> (SendStream, RecvStream) {
    tokio::time::timeout(PATIENCE, b.accept_bi())
        .await
        .expect("the stream arrives")
        .expect("a stream")
}

/// Reads `answer` to its end within [`PATIENCE`]: the peer answered
/// `back`.
pub(super) async fn assert_answered(answer: &mut RecvStream) {
    let back = tokio::time::timeout(PATIENCE, answer.read_to_end(64))
        .await
        .expect("the answer arrives")
        .expect("reads");
    assert_eq!(back, b"back");
}

/// The halves of one stream: `a`'s, then `b`'s.
type Halves = ((SendStream, RecvStream), (SendStream, RecvStream));

/// [`open_announced_halves`], for `a`'s writer and `b`'s reader only.
pub(super) async fn open_announced(a: &Connection, b: &Connection) -> (SendStream, RecvStream) {
    let ((upload, _), (_, download)) = open_announced_halves(a, b).await;
    (upload, download)
}

/// Opens a stream from `a` to `b` and writes its first two bytes
/// (`pattern(0, 2)`), the second once the peer announced its window: from
/// then on the writer may hand off.
async fn open_announced_halves(a: &Connection, b: &Connection) -> Halves {
    let (mut upload, download) = a.open_bi().await.expect("opens");
    upload.write_all(&pattern(0, 1)).await.expect("writes");
    let (answer, received) = accepted(b).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    upload.write_all(&pattern(1, 1)).await.expect("writes");
    ((upload, download), (answer, received))
}

/// Waits for `closing` (a task closing the connection with code 9), then
/// for its peer `b` to learn of that close.
async fn close_seen(closing: tokio::task::JoinHandle<()>, b: &Connection) {
    tokio::time::timeout(PATIENCE, closing)
        .await
        .expect("the close ends")
        .expect("the task ends");
    let closed = tokio::time::timeout(PATIENCE, b.closed())
        .await
        .expect("the peer closes");
    assert!(closed.to_string().contains('9'), "{closed}");
}

/// Reads `stream` to its end.
async fn read_to_end(mut stream: RecvStream) -> Vec<u8> {
    let mut read = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while let Some(n) = stream.read(&mut buf).await.expect("reads") {
        read.extend_from_slice(&buf[..n]);
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_handed_off_while_the_lock_is_held_arrive_in_order_before_those_after() {
    let (_server, client, a, b) = connected(Config::default(), Config::default()).await;
    let (mut upload, download) = open_announced(&a, &b).await;
    let (first, second) = (pattern(0, 48 << 10), pattern(48 << 10, 80 << 10));
    let first_handed = first[2..].to_vec();
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&client, move || {
        runtime.block_on(async {
            for chunk in first_handed.chunks(5000) {
                upload.write_all(chunk).await.expect("handed off");
            }
        });
        upload
    });
    let mut upload = ran.expect("the writes returned while the driver held the lock");
    // These take the lock, which runs the handed-off writes first.
    upload.write_all(&second).await.expect("writes");
    upload.finish().expect("finishes");
    let read = tokio::time::timeout(PATIENCE, read_to_end(download))
        .await
        .expect("the stream ends");
    assert_eq!(read.len(), first.len() + second.len());
    assert!(read == [first, second].concat(), "bytes out of order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_hands_off_no_more_than_the_room_its_stream_had() {
    const TOTAL: usize = 1 << 20;
    // A small window, known to the writer before the lock is taken.
    let server = Config::default().receive_windows(32 << 10, 64 << 10);
    let (_server, client, a, b) = connected(server, Config::default()).await;
    let (mut upload, download) = open_announced(&a, &b).await;
    let (stream, slot) = (upload.id(), a.slot());
    let room = client
        .driver()
        .with_node_unwoken(|state| {
            let (_, connection) = state.connection(slot).expect("a slot");
            connection.expect("open").writable(stream)
        })
        .expect("the driver runs");
    let written = Arc::new(AtomicUsize::new(2));
    let runtime = tokio::runtime::Handle::current();
    let counted = Arc::clone(&written);
    let (during, done) = while_locked_counting(&client, &written, move || {
        runtime.block_on(async {
            let data = pattern(2, TOTAL - 2);
            let mut rest = &data[..];
            while !rest.is_empty() {
                let n = upload.write(rest).await.expect("writes");
                counted.fetch_add(n, Ordering::SeqCst);
                rest = &rest[n..];
            }
            upload.finish().expect("finishes");
        })
    });
    // The lock was held for a second: what was handed off meanwhile is
    // within the room the stream had when it was taken.
    let during = during - 2;
    assert!(during > 0, "nothing was handed off");
    assert!(during <= room, "{during} bytes handed off, room for {room}");
    let read = tokio::time::timeout(PATIENCE, read_to_end(download))
        .await
        .expect("the stream ends");
    assert_eq!(read.len(), TOTAL);
    assert!(read == pattern(0, TOTAL), "bytes out of order");
    done.recv_timeout(PATIENCE).expect("the writer ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_parked_for_want_of_room_go_before_the_finish_and_the_close() {
    // Two streams share a small send buffer: each is granted all of it,
    // so the second's handed-off bytes find no room and are parked.
    const LEN: usize = 256 << 10;
    let client_config = Config::default()
        .send_buffer(32 << 10)
        .stream_send_buffer(1 << 20);
    let (_server, client, a, b) = connected(Config::default(), client_config).await;
    let (mut one, one_down) = open_announced(&a, &b).await;
    let (mut two, two_down) = open_announced(&a, &b).await;
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&client, move || {
        runtime.block_on(async {
            let one_n = 2 + one.write(&pattern(2, LEN)).await.expect("handed off");
            let two_n = 2 + two.write(&pattern(2, LEN)).await.expect("handed off");
            (one, two, one_n, two_n)
        })
    });
    let (mut one, mut two, one_n, two_n) =
        ran.expect("the writes returned while the lock was held");
    // The peer reads both streams as they come.
    let readers = [one_down, two_down].map(|s| tokio::spawn(read_to_end(s)));
    tokio::time::timeout(PATIENCE, async {
        one.write_all(&pattern(one_n, LEN + 2 - one_n))
            .await
            .expect("writes");
        two.write_all(&pattern(two_n, LEN + 2 - two_n))
            .await
            .expect("writes");
    })
    .await
    .expect("the writes end");
    one.finish().expect("finishes");
    two.finish().expect("finishes");
    drop((one, two));
    let closing = tokio::spawn(async move { a.close(9, "done").await });
    for reader in readers {
        let read = tokio::time::timeout(PATIENCE, reader)
            .await
            .expect("the stream ends")
            .expect("the reader ends");
        assert!(read == pattern(0, LEN + 2), "bytes out of order");
    }
    close_seen(closing, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_the_endpoint_stopped_with_writes_handed_off_fails() {
    let (_server, client, a, b) = connected(Config::default(), Config::default()).await;
    let (mut upload, _download) = open_announced(&a, &b).await;
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&client, move || {
        runtime.block_on(async {
            upload
                .write_all(&pattern(2, 4096))
                .await
                .expect("handed off");
        });
        upload
    });
    let mut upload = ran.expect("the write returned while the lock was held");
    client.driver().stop();
    let written = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Err(error) = upload.write(b"more").await {
                break error;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the write ends");
    assert!(
        matches!(written, WriteError::ConnectionLost(_)),
        "{written:?}"
    );
}

/// Message `i` of a run: its number, then `len - 8` bytes of it.
fn message(i: u64, len: usize) -> Vec<u8> {
    let mut message = i.to_le_bytes().to_vec();
    message.resize(len.max(8), i as u8);
    message
}

/// Receives `count` messages on `b` and checks they are `message(i, len)`
/// for `i` in `0..count`, in order.
async fn receive_in_order(b: &Connection, count: u64, len: usize) {
    tokio::time::timeout(PATIENCE, async {
        for i in 0..count {
            let received = b.recv().await.expect("a message");
            assert!(
                received[..] == message(i, len)[..],
                "message {i} out of order"
            );
        }
    })
    .await
    .expect("every message arrives");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_handed_off_while_the_lock_is_held_arrive_in_order_before_those_after() {
    const LEN: usize = 100;
    let (_server, client, a, b) = connected(Config::default(), Config::default()).await;
    // The first send takes the lock, and grants the connection's room.
    a.send(message(0, LEN)).await.expect("sends");
    let runtime = tokio::runtime::Handle::current();
    let handed = a.clone();
    let (ran, _) = while_locked(&client, move || {
        runtime.block_on(async {
            for i in 1..50 {
                handed.send(message(i, LEN)).await.expect("handed off");
            }
        });
    });
    ran.expect("the sends returned while the driver held the lock");
    // These take the lock, which runs the handed-off sends first.
    for i in 50..100 {
        a.send(message(i, LEN)).await.expect("sends");
    }
    receive_in_order(&b, 100, LEN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_hands_off_no_more_than_the_room_its_message_buffer_had() {
    const LEN: usize = 1000;
    const COUNT: u64 = 200;
    let client_config = Config::default().message_send_buffer(16 << 10);
    let (_server, client, a, b) = connected(Config::default(), client_config).await;
    a.send(message(0, LEN)).await.expect("sends");
    let slot = a.slot();
    let room = client
        .driver()
        .with_node_unwoken(|state| {
            let (_, connection) = state.connection(slot).expect("a slot");
            connection.expect("open").message_send_room()
        })
        .expect("the driver runs");
    let sent = Arc::new(AtomicUsize::new(0));
    let runtime = tokio::runtime::Handle::current();
    let (counted, handed) = (Arc::clone(&sent), a.clone());
    let (during, done) = while_locked_counting(&client, &sent, move || {
        runtime.block_on(async {
            for i in 1..COUNT {
                handed.send(message(i, LEN)).await.expect("sends");
                counted.fetch_add(LEN, Ordering::SeqCst);
            }
        });
    });
    // The lock was held for a second: what was handed off meanwhile is
    // within the room the buffer had when it was taken.
    assert!(during > 0, "nothing was handed off");
    assert!(during <= room, "{during} bytes handed off, room for {room}");
    receive_in_order(&b, COUNT, LEN).await;
    done.recv_timeout(PATIENCE).expect("the sender ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_parked_for_want_of_room_go_before_later_sends_and_the_close() {
    const LEN: usize = 1000;
    let client_config = Config::default().message_send_buffer(8 << 10);
    let (_server, client, a, b) = connected(Config::default(), client_config).await;
    a.send(message(0, LEN)).await.expect("sends");
    let slot = a.slot();
    // Under the lock, after the grant, sends fill the buffer (as another
    // handle's could have): the messages handed off then find no room.
    let next = Arc::new(AtomicU64::new(1));
    let filled = Arc::clone(&next);
    let fill = move |state: &mut EndpointState| {
        let (_, connection) = state.connection(slot).expect("a slot");
        let connection = connection.expect("open");
        while connection.message_send_room() >= LEN {
            let i = filled.fetch_add(1, Ordering::SeqCst);
            connection
                .send_message(message(i, LEN).into())
                .expect("room");
        }
    };
    let runtime = tokio::runtime::Handle::current();
    let (handed, first) = (a.clone(), Arc::clone(&next));
    let (ran, _) = while_locked_after(&client, fill, move || {
        let first = first.load(Ordering::SeqCst);
        runtime.block_on(async {
            for i in first..first + 3 {
                handed.send(message(i, LEN)).await.expect("handed off");
            }
        });
        first + 3
    });
    let last = ran.expect("the sends returned while the driver held the lock");
    assert!(last > 6, "the buffer had room for {} messages", last - 3);
    a.send(message(last, LEN)).await.expect("sends");
    let closing = tokio::spawn(async move { a.close(9, "done").await });
    receive_in_order(&b, last + 1, LEN).await;
    close_seen(closing, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_handed_off_stay_within_the_queue_and_push_none_out() {
    const QUEUE: usize = 8;
    let mut protocol = crate::proto::EndpointConfig::default();
    protocol.connection.datagram_send_queue = QUEUE;
    let config = Config::default().protocol(protocol);
    let (_server, client, a, b) = connected(config.clone(), config).await;
    // The first takes the lock, and grants the rest of the queue.
    a.send_datagram(message(0, 64)).expect("queued");
    let handed = a.clone();
    let (ran, _) = while_locked(&client, move || {
        for i in 1..QUEUE as u64 {
            handed.send_datagram(message(i, 64)).expect("handed off");
        }
    });
    ran.expect("the datagrams were handed off while the driver held the lock");
    // They pushed none out of the queue: a drop is only ever counted
    // under the lock, where `stats()` shows it at once.
    let stats = a.stats().expect("open");
    assert_eq!(stats.datagrams_send_queue_dropped, 0, "{stats:?}");
    let mut received = tokio::time::timeout(PATIENCE, async {
        let mut received = Vec::new();
        for _ in 0..QUEUE {
            received.push(b.recv_datagram().await.expect("a datagram"));
        }
        received
    })
    .await
    .expect("every datagram arrives");
    received.sort_by_key(|d| d[0]);
    for (i, datagram) in received.iter().enumerate() {
        assert!(datagram[..] == message(i as u64, 64)[..], "datagram {i}");
    }
    // No more than the queue's room is handed off: the rest waits for
    // the lock.
    let sent = Arc::new(AtomicUsize::new(0));
    let (counted, handed) = (Arc::clone(&sent), a.clone());
    let (during, done) = while_locked_counting(&client, &sent, move || {
        for i in 0..=QUEUE as u64 {
            handed.send_datagram(message(i, 64)).expect("queued");
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    assert!(during <= QUEUE, "{during} handed off, room for {QUEUE}");
    done.recv_timeout(PATIENCE).expect("the sender ends");
}

/// One poll of `connection.closed()`, with a waker that does nothing.
fn poll_closed(connection: &Connection) -> Poll<ConnectionLost> {
    let mut closed = std::pin::pin!(connection.closed());
    closed
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_waits_and_answers_without_the_lock() {
    let (server, _client, a, b) = connected(Config::default(), Config::default()).await;
    let open = b.clone();
    let (ran, _) = while_locked(&server, move || poll_closed(&open).is_pending());
    assert_eq!(ran, Some(true), "a poll of closed() waited for the lock");
    let waiting = b.clone();
    let waiter = tokio::spawn(async move { waiting.closed().await });
    a.abort(7, "gone");
    let lost = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("closed() is woken")
        .expect("the task runs");
    assert!(lost.to_string().contains('7'), "{lost}");
    // Once it is over, closed() answers at once, the lock held or not.
    let over = b.clone();
    let (ran, _) = while_locked(&server, move || poll_closed(&over));
    assert_eq!(ran, Some(Poll::Ready(lost)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_takes_a_queued_connection_without_the_lock() {
    let (server, client, _a, _b) = connected(Config::default(), Config::default()).await;
    let public = server.public().expect("an identity").clone();
    let _second = client
        .connect(server.local_addr(), &public)
        .await
        .expect("connects");
    // The server queued it in the turn that completed the handshake.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (accepting, runtime) = (server.clone(), tokio::runtime::Handle::current());
    // What it accepted is dropped (refused) once the lock is let go.
    let (ran, _) = while_locked(&server, move || runtime.block_on(accepting.accept()));
    let incoming = ran
        .expect("accept waited for the lock")
        .expect("a connection");
    assert_eq!(incoming.remote_address(), client.local_addr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_bi_and_accept_uni_take_streams_the_driver_accepted_without_the_lock() {
    let (server, _client, a, b) = connected(Config::default(), Config::default()).await;
    let (mut first, _) = a.open_bi().await.expect("opens");
    first.write_all(b"first").await.expect("writes");
    // The first accept takes the lock, and has the driver accept the next.
    let _ = accepted(&b).await;
    let (mut two_way, mut answer) = a.open_bi().await.expect("opens");
    let mut one_way = a.open_uni().await.expect("opens");
    for (stream, bytes) in [(&mut two_way, &b"two-way"[..]), (&mut one_way, b"one-way")] {
        stream.write_all(bytes).await.expect("writes");
        stream.finish().expect("finishes");
    }
    // The server's driver accepted both in the turn they arrived in.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (accepting, runtime) = (b.clone(), tokio::runtime::Handle::current());
    let (ran, _) = while_locked(&server, move || {
        runtime.block_on(async { (accepting.accept_bi().await, accepting.accept_uni().await) })
    });
    let (two_way_halves, one_way_half) = ran.expect("accept_bi or accept_uni waited for the lock");
    let ((mut send, mut recv), mut one_way_recv) = (
        two_way_halves.expect("accepts"),
        one_way_half.expect("accepts"),
    );
    assert_eq!((recv.id(), one_way_recv.id()), (two_way.id(), one_way.id()));
    // The halves work as ones made under the lock do.
    assert_eq!(recv.read_to_end(64).await.expect("reads"), b"two-way");
    assert_eq!(
        one_way_recv.read_to_end(64).await.expect("reads"),
        b"one-way"
    );
    send.write_all(b"back").await.expect("writes");
    send.finish().expect("finishes");
    assert_answered(&mut answer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halves_and_the_last_handle_dropped_while_the_lock_is_held_are_let_go_in_order() {
    let (_server, client, a, b) = connected(Config::default(), Config::default()).await;
    let ((mut upload, download), (answer, received)) = open_announced_halves(&a, &b).await;
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&client, move || {
        runtime.block_on(async {
            upload
                .write_all(&pattern(2, 4094))
                .await
                .expect("handed off");
        });
        // The finish follows the bytes handed off before it; the reader
        // asks the peer to stop.
        drop((upload, download));
    });
    ran.expect("a half's drop waited for the lock");
    let read = tokio::time::timeout(PATIENCE, read_to_end(received))
        .await
        .expect("the stream ends");
    assert!(read == pattern(0, 4096), "bytes lost or out of order");
    let stopped = tokio::time::timeout(PATIENCE, answer.stopped())
        .await
        .expect("the stop arrives");
    assert_eq!(stopped, Ok(Some(0)));
    // The last handle of the connection: it closes, with code 0.
    let (ran, _) = while_locked(&client, move || drop(a));
    ran.expect("the last handle's drop waited for the lock");
    let closed = tokio::time::timeout(PATIENCE, b.closed())
        .await
        .expect("the close arrives");
    assert!(
        matches!(
            closed,
            ConnectionLost::Connection(crate::proto::ConnectionError::PeerClosed { code: 0, .. })
        ),
        "{closed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_lock_is_held_returns_and_reaches_the_writer() {
    let (server, _client, a, b) = connected(Config::default(), Config::default()).await;
    let (mut upload, _download) = a.open_bi().await.expect("opens");
    upload.write_all(b"unwanted").await.expect("writes");
    let (_answer, mut received) = accepted(&b).await;
    let (ran, _) = while_locked(&server, move || (received.stop(5), received));
    let (stopped, mut received) = ran.expect("stop waited for the lock");
    assert_eq!(stopped, Ok(()));
    assert_eq!(received.stop(5), Err(super::ClosedStream), "once only");
    let stopped = tokio::time::timeout(PATIENCE, upload.stopped())
        .await
        .expect("the stop arrives");
    assert_eq!(stopped, Ok(Some(5)));
}
