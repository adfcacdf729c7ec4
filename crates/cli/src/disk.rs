//! File I/O and SHA-256 on a thread of their own, beside the network: the
//! sender's file is read and hashed ahead of the stream, the receiver's is
//! hashed and written behind it, through a short channel of chunks, so
//! disk, hash and network overlap and memory stays bounded.

use std::fs::File;
use std::io::{self, Read, Write};

use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Bytes per chunk read from the file.
pub(crate) const CHUNK: usize = 256 << 10;

/// Chunks in flight between the disk thread and the network (4 MiB).
const DEPTH: usize = 16;

/// What the disk thread found once the file is through: bytes and SHA-256
/// (hex).
#[derive(Debug)]
pub(crate) struct Hashed {
    pub(crate) bytes: u64,
    pub(crate) sha256: String,
}

/// The sending side: chunks of a file, read and hashed ahead.
#[derive(Debug)]
pub(crate) struct ReadAhead {
    chunks: mpsc::Receiver<Bytes>,
    reader: JoinHandle<io::Result<Hashed>>,
}

impl ReadAhead {
    /// Starts reading `file` from its start.
    pub(crate) fn start(mut file: File) -> Self {
        let (tx, chunks) = mpsc::channel(DEPTH);
        let reader = tokio::task::spawn_blocking(move || {
            let mut hasher = Sha256::new();
            let mut bytes = 0u64;
            loop {
                let mut chunk = BytesMut::zeroed(CHUNK);
                let n = match file.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                chunk.truncate(n);
                hasher.update(&chunk);
                bytes += n as u64;
                if tx.blocking_send(chunk.freeze()).is_err() {
                    // The network side gave up; its error is the one told.
                    break;
                }
            }
            Ok(Hashed {
                bytes,
                sha256: hex::encode(hasher.finalize()),
            })
        });
        Self { chunks, reader }
    }

    /// The next chunk; `None` at the end of the file or after a read
    /// error, which [`finish`](Self::finish) then returns.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        self.chunks.recv().await
    }

    /// The byte count and digest, once every chunk was taken.
    pub(crate) async fn finish(self) -> io::Result<Hashed> {
        drop(self.chunks);
        self.reader.await.map_err(io::Error::other)?
    }
}

/// The receiving side: chunks hashed and written behind the network.
#[derive(Debug)]
pub(crate) struct WriteBehind {
    chunks: mpsc::Sender<Bytes>,
    writer: JoinHandle<io::Result<Hashed>>,
}

impl WriteBehind {
    /// Starts writing to `file`; it is synced before
    /// [`finish`](Self::finish) returns.
    pub(crate) fn start(mut file: File) -> Self {
        let (chunks, mut rx) = mpsc::channel::<Bytes>(DEPTH);
        let writer = tokio::task::spawn_blocking(move || {
            let mut hasher = Sha256::new();
            let mut bytes = 0u64;
            while let Some(chunk) = rx.blocking_recv() {
                hasher.update(&chunk);
                file.write_all(&chunk)?;
                bytes += chunk.len() as u64;
            }
            file.sync_all()?;
            Ok(Hashed {
                bytes,
                sha256: hex::encode(hasher.finalize()),
            })
        });
        Self { chunks, writer }
    }

    /// Queues `chunk`; fails with the write error once writing failed.
    pub(crate) async fn write(&mut self, chunk: Bytes) -> io::Result<()> {
        if self.chunks.send(chunk).await.is_ok() {
            return Ok(());
        }
        // The writer ended early: it returned its error (and this value
        // is not used again).
        match (&mut self.writer).await {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => Err(io::Error::other("the file writer stopped")),
            Err(e) => Err(io::Error::other(e)),
        }
    }

    /// Waits for every chunk to be written and the file synced.
    pub(crate) async fn finish(self) -> io::Result<Hashed> {
        drop(self.chunks);
        self.writer.await.map_err(io::Error::other)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_is_read_ahead_and_written_behind_is_the_file_and_its_digest() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let source = dir.path().join("source");
        let content: Vec<u8> = (0..(3 * CHUNK + 123))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&source, &content).expect("writes");
        let copy = dir.path().join("copy");

        let mut reader = ReadAhead::start(File::open(&source).expect("opens"));
        let mut writer = WriteBehind::start(File::create(&copy).expect("creates"));
        while let Some(chunk) = reader.next().await {
            writer.write(chunk).await.expect("writes");
        }
        let read = reader.finish().await.expect("reads");
        let written = writer.finish().await.expect("writes");
        let expected = hex::encode(Sha256::digest(&content));
        assert_eq!(read.bytes, content.len() as u64);
        assert_eq!(read.sha256, expected);
        assert_eq!(written.bytes, content.len() as u64);
        assert_eq!(written.sha256, expected);
        assert_eq!(std::fs::read(&copy).expect("reads"), content);
    }

    #[tokio::test]
    async fn a_write_error_is_returned_to_the_network_side() {
        // A file opened read-only refuses writes.
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("read-only");
        std::fs::write(&path, b"x").expect("writes");
        let mut writer = WriteBehind::start(File::open(&path).expect("opens"));
        let mut failed = None;
        for _ in 0..(DEPTH + 2) {
            if let Err(e) = writer.write(Bytes::from_static(b"data")).await {
                failed = Some(e);
                break;
            }
        }
        assert!(failed.is_some(), "the error reached the writer's caller");
    }
}
