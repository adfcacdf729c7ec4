//! Reads of what the driver moved into a waiting reader's delivery buffer
//! (see `state/delivery.rs`), on real loopback sockets: they return
//! while the driver holds the endpoint's lock, in order, with the stream's
//! end or reset only after the bytes moved before it.

use std::time::Duration;

use bytes::Bytes;

use super::error::ConnectionLost;
use super::hand_off_tests::{PATIENCE, connected, open_announced, pattern, while_locked};
use super::{Config, Connection, Endpoint, ReadError, RecvStream, SendStream, WriteError};
use crate::proto::ConnectionError;

/// How long the datagrams sent while a test holds the receiver's lock take
/// to reach its socket.
const IN_FLIGHT: Duration = Duration::from_millis(200);

/// Both ends of a stream from the client to the server, and what keeps
/// them open.
struct Ends {
    upload: SendStream,
    download: RecvStream,
    server: Endpoint,
    _client: Endpoint,
    _connections: (Connection, Connection),
}

/// A stream from the client to the server whose reader waits (it read the
/// first two bytes, then asked for `want` more); then `write` runs on the
/// writer while the server's lock is held, so that what it sent waits in
/// the server's socket, and the driver moves it for the reader as it
/// comes in. What the reader's read gave, and the stream's ends.
async fn moved_for_a_waiting_reader(
    want: usize,
    write: impl FnOnce(&mut SendStream) + Send + 'static,
) -> (Vec<u8>, Ends) {
    let (server, client, a, b) = connected(Config::default(), Config::default()).await;
    let (upload, mut download) = open_announced(&a, &b).await;
    let mut first = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        got += download
            .read(&mut first[got..])
            .await
            .expect("reads")
            .expect("bytes");
    }
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; want];
        let n = download
            .read(&mut buf)
            .await
            .expect("reads")
            .expect("bytes");
        buf.truncate(n);
        (buf, download)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ran = sent_while_locked(&server, move || {
        let mut upload = upload;
        write(&mut upload);
        upload
    });
    let upload = ran.expect("the writer does not need the reader's lock");
    let (read, download) = tokio::time::timeout(PATIENCE, reader)
        .await
        .expect("the reader is woken")
        .expect("the reader runs");
    let ends = Ends {
        upload,
        download,
        server,
        _client: client,
        _connections: (a, b),
    };
    (read, ends)
}

/// Runs `f` (which sends to `endpoint`) on a thread of its own while this
/// thread holds `endpoint`'s lock, and keeps it until what `f` sent has
/// reached the socket, so that one driver turn takes it all in: what `f`
/// returned, `None` if it did not within a second.
fn sent_while_locked<R: Send + 'static>(
    endpoint: &Endpoint,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    endpoint
        .driver()
        .with_node_unwoken(|_| {
            std::thread::spawn(move || {
                let _ = tx.send(f());
            });
            let ran = rx.recv_timeout(Duration::from_secs(1)).ok();
            std::thread::sleep(IN_FLIGHT);
            ran
        })
        .expect("the driver runs")
}

/// A writer that writes `bytes` from a thread outside the runtime.
fn writing(bytes: Vec<u8>) -> impl FnOnce(&mut SendStream) + Send + 'static {
    let runtime = tokio::runtime::Handle::current();
    move |upload| {
        runtime
            .block_on(async { upload.write_all(&bytes).await })
            .expect("writes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_takes_moved_bytes_and_the_end_while_the_lock_is_held() {
    let data = pattern(2, 1000);
    let sent = data.clone();
    let runtime = tokio::runtime::Handle::current();
    let (read, ends) = moved_for_a_waiting_reader(10, move |up| {
        runtime.block_on(async {
            up.write_all(&sent).await.expect("writes");
            up.finish().expect("finishes");
        });
    })
    .await;
    assert_eq!(read, data[..10]);
    let Ends {
        mut download,
        server,
        ..
    } = ends;
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&server, move || {
        runtime.block_on(async {
            let mut rest = Vec::new();
            let mut buf = [0u8; 100];
            while let Some(n) = download.read(&mut buf).await.expect("reads") {
                rest.extend_from_slice(&buf[..n]);
            }
            // Dropping the half would take the lock.
            (rest, download)
        })
    });
    let (rest, _) = ran.expect("the moved bytes and the end were read without the lock");
    assert!(rest == data[10..], "bytes lost, duplicated or out of order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_bytes_are_read_before_the_reset_that_followed_them() {
    let data = pattern(2, 1000);
    let sent = data.clone();
    let (read, mut ends) = moved_for_a_waiting_reader(10, writing(sent)).await;
    assert_eq!(read, data[..10]);
    let (upload, download) = (&mut ends.upload, &mut ends.download);
    upload.reset(7).expect("resets");
    // The reset arrives; the protocol drops what it held unread, but the
    // bytes already moved are the reader's.
    tokio::time::sleep(IN_FLIGHT).await;
    let mut rest = Vec::new();
    let mut buf = [0u8; 100];
    let end = loop {
        match download.read(&mut buf).await {
            Ok(Some(n)) => rest.extend_from_slice(&buf[..n]),
            other => break other,
        }
    };
    assert!(rest == data[10..], "moved bytes lost or out of order");
    assert!(matches!(end, Err(ReadError::Reset(7))), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_reader_with_moved_bytes_stops_the_writer_and_frees_them() {
    let sent = pattern(2, 1000);
    let (_, ends) = moved_for_a_waiting_reader(10, writing(sent)).await;
    let Ends {
        mut upload,
        download,
        server,
        _connections,
        ..
    } = ends;
    let held = held_for(&server, &_connections.1);
    drop(download);
    // The 990 bytes left in the buffer are dropped as consumed: they no
    // longer count as received memory (nor against the windows).
    let freed = held.saturating_sub(held_for(&server, &_connections.1));
    assert!(freed >= 990, "{freed} bytes freed of {held}");
    let stopped = tokio::time::timeout(PATIENCE, async {
        loop {
            match upload.write_all(&[0; 1000]).await {
                Ok(()) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(e) => break e,
            }
        }
    })
    .await
    .expect("the writer learns the reader went");
    assert!(matches!(stopped, WriteError::Stopped(0)), "{stopped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recv_takes_moved_messages_while_the_lock_is_held() {
    let (server, _client, a, b) = connected(Config::default(), Config::default()).await;
    let messages: Vec<Bytes> = (0..5).map(|i| Bytes::from(pattern(i * 100, 100))).collect();
    let receiver = b.clone();
    let first = tokio::spawn(async move { receiver.recv().await.expect("a message") });
    let receiver = b.clone();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (sender, sent) = (a.clone(), messages.clone());
    let runtime = tokio::runtime::Handle::current();
    let ran = sent_while_locked(&server, move || {
        runtime.block_on(async {
            for message in sent {
                sender.send(message).await.expect("sends");
            }
        });
    });
    ran.expect("the sender does not need the receiver's lock");
    let first = tokio::time::timeout(PATIENCE, first)
        .await
        .expect("recv is woken")
        .expect("recv runs");
    assert_eq!(first, messages[0]);
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&server, move || {
        runtime.block_on(async {
            let mut rest = Vec::new();
            for _ in 1..5 {
                rest.push(receiver.recv().await.expect("a message"));
            }
            // The last handle would take the lock as it goes.
            (rest, receiver)
        })
    });
    let (rest, _) = ran.expect("the moved messages were taken without the lock");
    assert_eq!(rest, messages[1..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recv_datagram_takes_moved_datagrams_while_the_lock_is_held_and_they_stay_charged() {
    let (server, _client, a, b) = connected(Config::default(), Config::default()).await;
    let datagrams: Vec<Bytes> = (0..5).map(|i| Bytes::from(pattern(i * 100, 100))).collect();
    let receiver = b.clone();
    let first = tokio::spawn(async move { receiver.recv_datagram().await.expect("a datagram") });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (sender, sent) = (a.clone(), datagrams.clone());
    let ran = sent_while_locked(&server, move || {
        for datagram in sent {
            sender.send_datagram(datagram).expect("queued");
        }
    });
    ran.expect("the sender does not need the receiver's lock");
    let first = tokio::time::timeout(PATIENCE, first)
        .await
        .expect("recv_datagram is woken")
        .expect("recv_datagram runs");
    assert_eq!(first, datagrams[0]);
    // The four moved and not taken are still charged to the budget.
    let held_moved = held_for(&server, &b);
    let receiver = b.clone();
    let runtime = tokio::runtime::Handle::current();
    let (ran, _) = while_locked(&server, move || {
        runtime.block_on(async {
            let mut rest = Vec::new();
            for _ in 1..5 {
                rest.push(receiver.recv_datagram().await.expect("a datagram"));
            }
            rest
        })
    });
    let rest = ran.expect("the moved datagrams were taken without the lock");
    assert_eq!(rest, datagrams[1..]);
    // Taking the lock ran the report the reader handed off.
    assert_eq!(held_moved - held_for(&server, &b), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_transfer_through_the_delivery_buffer_arrives_intact() {
    const TOTAL: usize = 8 << 20;
    // A window smaller than the transfer, so that moved bytes must reopen it.
    let server = Config::default().receive_windows(128 << 10, 256 << 10);
    let (_server, _client, a, b) = connected(server, Config::default()).await;
    let (mut upload, download) = open_announced(&a, &b).await;
    let writer = tokio::spawn(async move {
        let data = pattern(2, TOTAL - 2);
        for chunk in data.chunks(50_000) {
            upload.write_all(chunk).await.expect("writes");
        }
        upload.finish().expect("finishes");
        upload
    });
    let read = tokio::time::timeout(PATIENCE * 3, read_in_odd_chunks(download))
        .await
        .expect("the stream ends");
    assert_eq!(read.len(), TOTAL);
    assert!(
        read == pattern(0, TOTAL),
        "bytes lost, duplicated or out of order"
    );
    writer.await.expect("the writer ends");
}

/// Reads `stream` to its end in reads of sizes that do not divide the
/// delivery buffer's bound.
async fn read_in_odd_chunks(mut stream: RecvStream) -> Vec<u8> {
    let mut read = Vec::new();
    let sizes = [7000, 1, 65_537, 333];
    let mut buf = vec![0u8; 65_537];
    for i in 0.. {
        let size = sizes[i % sizes.len()];
        match stream.read(&mut buf[..size]).await.expect("reads") {
            Some(n) => read.extend_from_slice(&buf[..n]),
            None => break,
        }
    }
    read
}

/// The memory the server's protocol counts as received on `connection`
/// (its end of it): what the endpoint's budget is charged for it.
fn held_for(server: &Endpoint, connection: &Connection) -> usize {
    let slot = connection.slot();
    server
        .driver()
        .with_node_unwoken(|state| {
            state
                .connection(slot)
                .and_then(|(_, connection)| connection)
                .map(|connection| connection.stats().receive_memory)
        })
        .expect("the driver runs")
        .expect("the connection is open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_in_a_delivery_buffer_keep_the_writer_within_the_window() {
    const WINDOW: usize = 64 * 1024;
    let server_config = Config::default().receive_windows(WINDOW as u64, 1 << 20);
    let (_server, client, a, b) = connected(server_config, Config::default()).await;
    let (mut upload, mut download) = open_announced(&a, &b).await;
    let mut received = vec![0u8; 2];
    let mut got = 0;
    while got < 2 {
        got += download
            .read(&mut received[got..])
            .await
            .expect("reads")
            .expect("bytes");
    }
    // The reader waits once, so that the driver moves what comes for it,
    // and then reads nothing while the writer sends far past the window.
    let reader = tokio::spawn(async move {
        let mut one = [0u8; 1];
        let n = download.read(&mut one).await.expect("reads");
        (n, one, download)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // In pieces a little apart, so that each lands in a turn of its own
    // and the driver moves it (the buffer grows as it is kept full); the
    // writer waits for the window once the window is spent.
    let _writer = tokio::spawn(async move {
        let data = pattern(2, 2 * WINDOW);
        for piece in data.chunks(4096) {
            if upload.write_all(piece).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        upload
    });
    let (n, one, mut download) = tokio::time::timeout(PATIENCE, reader)
        .await
        .expect("the reader is woken")
        .expect("the reader runs");
    assert_eq!((n, one), (Some(1), [2]));
    received.push(one[0]);
    // The writer sends all the window lets in; then it goes without a
    // word, so that what the reader finds is all it ever let in.
    tokio::time::sleep(Duration::from_millis(800)).await;
    client.driver().stop();
    let mut buf = vec![0u8; 4 * WINDOW];
    while let Ok(Ok(Some(n))) =
        tokio::time::timeout(Duration::from_millis(500), download.read(&mut buf)).await
    {
        received.extend_from_slice(&buf[..n]);
    }
    assert!(
        received == pattern(0, received.len()),
        "bytes lost, duplicated or out of order"
    );
    assert!(
        received.len() <= WINDOW,
        "{} bytes let in by a window of {WINDOW}",
        received.len()
    );
    assert!(received.len() > WINDOW / 2, "{} bytes", received.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_bytes_are_read_before_the_connection_loss_that_followed_them() {
    let data = pattern(2, 1000);
    let sent = data.clone();
    let (read, ends) = moved_for_a_waiting_reader(10, writing(sent)).await;
    assert_eq!(read, data[..10]);
    let Ends {
        mut download,
        _connections: (a, _b),
        ..
    } = ends;
    a.close(3, "gone").await;
    tokio::time::sleep(IN_FLIGHT).await;
    let mut rest = Vec::new();
    let mut buf = [0u8; 100];
    let end = loop {
        match tokio::time::timeout(PATIENCE, download.read(&mut buf))
            .await
            .expect("the read ends")
        {
            Ok(Some(n)) => rest.extend_from_slice(&buf[..n]),
            other => break other,
        }
    };
    assert!(rest == data[10..], "moved bytes lost or out of order");
    assert!(
        matches!(
            end,
            Err(ReadError::ConnectionLost(ConnectionLost::Connection(
                ConnectionError::PeerClosed { code: 3, .. }
            )))
        ),
        "{end:?}"
    );
}
