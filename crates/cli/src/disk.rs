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

use crate::resume::Journal;

/// Bytes per chunk read from the file.
pub(crate) const CHUNK: usize = 256 << 10;

/// Chunks in flight between the disk thread and the network (4 MiB).
const DEPTH: usize = 16;

/// Bytes the receiver writes between two checkpoints of a resumable file
/// (each one a sync): what a crash of the machine can make it receive
/// twice. A killed receiver loses none of what it wrote (the system keeps
/// it), and its next run offers all of it.
const CHECKPOINT_EVERY: u64 = 4 << 20;

/// Reads the next `len` bytes of `file` into `hasher` (blocking); fails
/// if the file ends before them.
pub(crate) fn hash_next(file: &mut File, mut hasher: Sha256, len: u64) -> io::Result<Sha256> {
    let copied = io::copy(&mut Read::by_ref(file).take(len), &mut hasher)?;
    if copied != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the file ends after {copied} of {len} bytes"),
        ));
    }
    Ok(hasher)
}

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
    /// Starts reading `file` from where it stands, `bytes` into it, with
    /// `hasher` holding the digest of what came before.
    pub(crate) fn start(mut file: File, mut hasher: Sha256, mut bytes: u64) -> Self {
        let (tx, chunks) = mpsc::channel(DEPTH);
        let reader = tokio::task::spawn_blocking(move || {
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
    /// `None` once [`write`](Self::write) returned the writer's error.
    writer: Option<JoinHandle<io::Result<Hashed>>>,
}

impl WriteBehind {
    /// Starts writing to `file` where it stands, `bytes` into it, with
    /// `hasher` holding the digest of what came before. The file is synced
    /// before [`finish`](Self::finish) returns, and with a `journal`, every
    /// [`CHECKPOINT_EVERY`] bytes and at the end (when the chunks stop
    /// coming for any reason) a checkpoint records the synced prefix.
    pub(crate) fn start(
        mut file: File,
        mut hasher: Sha256,
        mut bytes: u64,
        journal: Option<Journal>,
    ) -> Self {
        let (chunks, mut rx) = mpsc::channel::<Bytes>(DEPTH);
        let writer = tokio::task::spawn_blocking(move || {
            let mut recorded = bytes;
            while let Some(chunk) = rx.blocking_recv() {
                hasher.update(&chunk);
                file.write_all(&chunk)?;
                bytes += chunk.len() as u64;
                if let Some(journal) = &journal
                    && bytes - recorded >= CHECKPOINT_EVERY
                {
                    file.sync_data()?;
                    journal.record(bytes, &hasher)?;
                    recorded = bytes;
                }
            }
            file.sync_all()?;
            if let Some(journal) = &journal {
                journal.record(bytes, &hasher)?;
            }
            Ok(Hashed {
                bytes,
                sha256: hex::encode(hasher.finalize()),
            })
        });
        Self {
            chunks,
            writer: Some(writer),
        }
    }

    /// Queues `chunk`; fails with the write error once writing failed.
    pub(crate) async fn write(&mut self, chunk: Bytes) -> io::Result<()> {
        if self.chunks.send(chunk).await.is_ok() {
            return Ok(());
        }
        // The writer ended early: it returned its error.
        match self.writer.take() {
            Some(writer) => match writer.await {
                Ok(Err(e)) => Err(e),
                Ok(Ok(_)) => Err(stopped()),
                Err(e) => Err(io::Error::other(e)),
            },
            None => Err(stopped()),
        }
    }

    /// Waits for every chunk to be written and the file synced.
    pub(crate) async fn finish(self) -> io::Result<Hashed> {
        drop(self.chunks);
        match self.writer {
            Some(writer) => writer.await.map_err(io::Error::other)?,
            None => Err(stopped()),
        }
    }
}

/// The writer's error once it was told already.
fn stopped() -> io::Error {
    io::Error::other("the file writer stopped")
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

        let mut reader = ReadAhead::start(File::open(&source).expect("opens"), Sha256::new(), 0);
        let mut writer = WriteBehind::start(
            File::create(&copy).expect("creates"),
            Sha256::new(),
            0,
            None,
        );
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
    async fn a_copy_resumed_mid_file_has_the_whole_digest_and_its_checkpoint_says_so() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let source = dir.path().join("source");
        let content: Vec<u8> = (0..(CHECKPOINT_EVERY as usize + 3 * CHUNK + 5))
            .map(|i| (i * 13 % 251) as u8)
            .collect();
        std::fs::write(&source, &content).expect("writes");
        // The receiver holds the first 1000 bytes already.
        let (partial, mut copy, _) =
            crate::resume::Partial::open(dir.path(), "copy", content.len() as u64, true)
                .expect("opens");
        copy.write_all(&content[..1000]).expect("writes");
        let held = Sha256::new_with_prefix(&content[..1000]);

        let mut file = File::open(&source).expect("opens");
        let skipped = hash_next(&mut file, Sha256::new(), 1000).expect("hashes");
        assert_eq!(skipped.clone().finalize(), held.clone().finalize());
        let mut reader = ReadAhead::start(file, skipped, 1000);
        let mut writer = WriteBehind::start(copy, held, 1000, Some(partial.journal()));
        let mut sent = 0;
        while let Some(chunk) = reader.next().await {
            sent += chunk.len();
            writer.write(chunk).await.expect("writes");
        }
        let read = reader.finish().await.expect("reads");
        let written = writer.finish().await.expect("writes");
        let expected = hex::encode(Sha256::digest(&content));
        assert_eq!(sent, content.len() - 1000);
        assert_eq!(
            (read.bytes, &read.sha256),
            (content.len() as u64, &expected)
        );
        assert_eq!(
            (written.bytes, &written.sha256),
            (content.len() as u64, &expected)
        );
        assert_eq!(std::fs::read(&partial.path).expect("reads"), content);
        let checkpoint: crate::resume::Checkpoint = serde_json::from_slice(
            &std::fs::read(dir.path().join(".copy.tern-resume")).expect("a side-car"),
        )
        .expect("JSON");
        assert_eq!(checkpoint.verified, content.len() as u64);
        assert_eq!(checkpoint.sha256, expected);
        assert!(
            hash_next(
                &mut File::open(&source).expect("opens"),
                Sha256::new(),
                1 << 30
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn a_write_error_is_returned_to_the_network_side() {
        // A file opened read-only refuses writes.
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("read-only");
        std::fs::write(&path, b"x").expect("writes");
        let mut writer =
            WriteBehind::start(File::open(&path).expect("opens"), Sha256::new(), 0, None);
        let mut failed = None;
        for _ in 0..(DEPTH + 2) {
            if let Err(e) = writer.write(Bytes::from_static(b"data")).await {
                failed = Some(e);
                break;
            }
        }
        assert!(failed.is_some(), "the error reached the writer's caller");
        assert!(writer.write(Bytes::from_static(b"more")).await.is_err());
        assert!(writer.finish().await.is_err(), "and finishing fails too");
    }
}
