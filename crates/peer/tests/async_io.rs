//! A stream's halves through tokio's `AsyncRead` and `AsyncWrite`, as code
//! written against those traits (`tokio::io::copy`, `read_to_end`,
//! `shutdown`) drives them, on real loopback sockets: the bytes, the end,
//! and the typed errors inside the `io::Error`s.

mod support;

use std::io::ErrorKind;
use std::time::Duration;

use support::net::{client, pair, pattern, server};
use tern_peer::{ReadError, WriteError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A generous bound on what must happen on loopback: a hang guard, not a
/// timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// More than twice the 256 KiB a connection's receive window starts at:
/// the copy runs across window updates.
const LEN: usize = 600_000;

#[tokio::test]
async fn a_stream_copied_through_async_write_and_read_arrives_whole_and_ends() {
    let (server, client) = (server(None), client(None));
    let (a, b) = pair(&server, &client).await;
    let data = pattern(0, LEN);
    let writer = tokio::spawn(async move {
        let (mut send, _) = a.open_bi().await.expect("opens");
        let copied = tokio::io::copy(&mut &pattern(0, LEN)[..], &mut send)
            .await
            .expect("copies");
        // Shutting down finishes the stream, once: a second does nothing.
        send.shutdown().await.expect("shuts down");
        send.shutdown()
            .await
            .expect("a second shutdown does nothing");
        (copied, send)
    });
    let (_, mut recv) = b.accept_bi().await.expect("accepts");
    let mut got = Vec::new();
    let n = tokio::time::timeout(PATIENCE, AsyncReadExt::read_to_end(&mut recv, &mut got))
        .await
        .expect("the end arrives")
        .expect("reads");
    assert_eq!(n, LEN);
    assert!(got == data, "the stream's bytes differ");
    // At its end the stream reads as empty, however often it is read.
    let mut more = [0u8; 16];
    assert_eq!(AsyncReadExt::read(&mut recv, &mut more).await.ok(), Some(0));
    assert_eq!(AsyncReadExt::read(&mut recv, &mut more).await.ok(), Some(0));

    let (copied, mut send) = writer.await.expect("the writer finishes");
    assert_eq!(copied, LEN as u64);
    assert_eq!(
        tokio::time::timeout(PATIENCE, send.stopped()).await,
        Ok(Ok(None)),
        "every byte acknowledged"
    );
    // A write after the shutdown fails: the stream was finished.
    let error = AsyncWriteExt::write(&mut send, b"late")
        .await
        .expect_err("finished");
    assert_eq!(error.kind(), ErrorKind::BrokenPipe);
    let inner = error.get_ref().and_then(|e| e.downcast_ref::<WriteError>());
    assert_eq!(inner, Some(&WriteError::ClosedStream));
}

#[tokio::test]
async fn a_reset_reaches_async_read_as_a_connection_reset_carrying_its_code() {
    let (server, client) = (server(None), client(None));
    let (a, b) = pair(&server, &client).await;
    let (mut send, _) = a.open_bi().await.expect("opens");
    send.write_all(&pattern(0, 10_000)).await.expect("writes");
    let (_, mut recv) = b.accept_bi().await.expect("accepts");
    send.reset(7).expect("resets");
    let error = tokio::time::timeout(PATIENCE, async {
        let mut buf = vec![0u8; 4096];
        loop {
            match AsyncReadExt::read(&mut recv, &mut buf).await {
                Ok(0) => panic!("a reset stream read as ended"),
                Ok(_) => continue,
                Err(e) => break e,
            }
        }
    })
    .await
    .expect("the reset arrives");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset);
    let inner = error.get_ref().and_then(|e| e.downcast_ref::<ReadError>());
    assert_eq!(inner, Some(&ReadError::Reset(7)));
}
