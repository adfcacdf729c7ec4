//! Where the stream of a transfer starts: at 0, or, when the sender asks
//! to resume and the receiver holds part of the file from an earlier
//! transfer, after the longest prefix both hold (see [`crate::resume`]
//! for what the receiver keeps and why the hashes stay with it).

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use tern_peer::Connection;

use super::{RECEIVER_FAILED, Store, in_transfer, refuse, unexpected};
use crate::control::{self, Control};
use crate::disk;
use crate::error::CliError;
use crate::resume::Partial;

/// Tells the receiver, which holds `len` bytes of an earlier transfer, the
/// first `synced` of them synced, the hashes of this file's first `len`
/// and `synced` bytes (none when `len` is 0), and takes its answer: where
/// the stream starts. Returns the file positioned there, the hash state of
/// the bytes before it, and the offset.
pub(super) async fn agree_on_prefix(
    connection: &Connection,
    addr: SocketAddr,
    path: &Path,
    file: File,
    len: u64,
    synced: Option<u64>,
) -> Result<(File, Sha256, u64), CliError> {
    let synced = synced.filter(|&synced| 0 < synced && synced < len);
    // The hash state at each length asked for, shortest first, in one pass.
    let (mut file, hashed) = tokio::task::spawn_blocking(move || {
        let mut file = file;
        let mut hashed: Vec<(u64, Sha256)> = Vec::new();
        let mut hasher = Sha256::new();
        let mut at = 0;
        for end in synced.into_iter().chain((len > 0).then_some(len)) {
            hasher = disk::hash_next(&mut file, hasher, end - at)?;
            hashed.push((end, hasher.clone()));
            at = end;
        }
        Ok::<_, io::Error>((file, hashed))
    })
    .await
    .map_err(io::Error::other)
    .and_then(|hashed| hashed)
    .map_err(|e| CliError::io(path, e))?;
    let sha256_of = |len: u64| {
        hashed
            .iter()
            .find(|(end, _)| *end == len)
            .map(|(_, hasher)| hex::encode(hasher.clone().finalize()))
    };
    let prefix = Control::Prefix {
        sha256: sha256_of(len),
        synced_sha256: synced.and_then(sha256_of),
    };
    control::send(connection, &prefix).await?;
    match control::recv(connection).await? {
        Control::Start { offset: 0 } => {
            file.rewind().map_err(|e| CliError::io(path, e))?;
            Ok((file, Sha256::new(), 0))
        }
        Control::Start { offset } => {
            let Some((_, hasher)) = hashed.into_iter().find(|(end, _)| *end == offset) else {
                return Err(unexpected(
                    addr,
                    "where the stream starts",
                    &Control::Start { offset },
                ));
            };
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| CliError::io(path, e))?;
            Ok((file, hasher, offset))
        }
        other => Err(unexpected(addr, "where the stream starts", &other)),
    }
}

/// Opens the partial file of `name` and agrees with the sender where the
/// stream starts: at 0, or, when the sender asked to `resume`, after the
/// longest prefix of an earlier transfer (the whole partial file, or its
/// synced part) that the sender's file begins with. Returns the file positioned there, the hash state of
/// the bytes before it, and the offset.
pub(super) async fn agree_on_start(
    connection: &Connection,
    store: &Store,
    name: &str,
    size: u64,
    resume: bool,
) -> Result<(Partial, File, Sha256, u64), CliError> {
    let dir = store.dir.clone();
    let owned = name.to_owned();
    let opened = tokio::task::spawn_blocking(move || Partial::open(&dir, &owned, size, resume))
        .await
        .map_err(|e| CliError::io(&store.dir, io::Error::other(e)))
        .and_then(|opened| opened);
    let (partial, mut file, held) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            refuse(connection, format!("cannot create {name} on the receiver")).await;
            return Err(e);
        }
    };
    let Some(held) = held else {
        control::send(connection, &Control::Accept).await?;
        return Ok((partial, file, Sha256::new(), 0));
    };
    let offer = Control::Partial {
        len: held.all.len,
        synced: held.fallback(),
    };
    control::send(connection, &offer).await?;
    let answer = control::recv(connection)
        .await
        .map_err(|e| in_transfer(name, e))?;
    let Control::Prefix {
        sha256,
        synced_sha256,
    } = answer
    else {
        connection.abort(RECEIVER_FAILED, Bytes::from_static(b"expected a prefix"));
        return Err(CliError::Protocol {
            peer: Some(connection.remote_address()),
            reason: format!("expected the hash of the prefix of {name}, got {answer:?}"),
        });
    };
    match held.matching(sha256.as_deref(), synced_sha256.as_deref()) {
        Some(prefix) => {
            tracing::info!(%name, offset = prefix.len, "resuming after the prefix the sender shares");
            partial.keep(&mut file, prefix.len)?;
            control::send(connection, &Control::Start { offset: prefix.len }).await?;
            Ok((partial, file, prefix.hasher, prefix.len))
        }
        None => {
            partial.start_over(&mut file)?;
            control::send(connection, &Control::Start { offset: 0 }).await?;
            Ok((partial, file, Sha256::new(), 0))
        }
    }
}
