//! [`SendStream`]: the sending half of a stream.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

use super::connection::{Connection, Step, ended};
use super::error::{ClosedStream, ConnectionLost, WriteError};
use crate::proto::{self, StreamId};

/// The sending half of a stream: ordered bytes to the peer, for data that
/// should not sit in memory whole (`tokio::io::copy` works on it, through
/// `AsyncWrite`). Bytes are copied once into the stream's send buffer; a
/// write waits while the buffer is full (the stream's own, or its share of
/// the send buffer its connection's streams share:
/// [`Config::send_buffer`](crate::Config::send_buffer)) or while 256 KiB
/// written are still unsent (so bytes leave while still in the CPU's
/// cache).
///
/// [`finish`](Self::finish) (or `shutdown`, or dropping it) ends the
/// stream after what was written: the peer reads to its end.
/// [`reset`](Self::reset) abandons it instead.
#[derive(Debug)]
pub struct SendStream {
    connection: Connection,
    id: StreamId,
    /// Finished or reset here: nothing more goes on it.
    closed: bool,
}

impl SendStream {
    pub(crate) fn new(connection: Connection, id: StreamId) -> Self {
        let _ = connection.with_slot(|slot, _| slot.hold_stream(id));
        Self {
            connection,
            id,
            closed: false,
        }
    }

    /// The stream's id on its connection.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The connection it belongs to.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Writes what fits of `data`, waiting while nothing does; how many
    /// bytes were taken. What fits is the least of the room in the
    /// stream's and the connection's send buffers and the credit the peer
    /// has granted the stream: a peer that stops reading holds the writer
    /// once the stream's window is full, whatever room the buffers have.
    pub async fn write(&mut self, data: &[u8]) -> Result<usize, WriteError> {
        poll_fn(|cx| self.poll_write_bytes(cx, data)).await
    }

    /// Writes all of `data`, waiting for room as often as needed.
    pub async fn write_all(&mut self, mut data: &[u8]) -> Result<(), WriteError> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Ends the stream after what was written. Returns at once: the bytes
    /// are on their way; [`stopped`](Self::stopped) says when they all
    /// arrived.
    pub fn finish(&mut self) -> Result<(), ClosedStream> {
        self.close_with(|connection, id| connection.finish(id))
    }

    /// Abandons sending: what was written and not yet acknowledged is let
    /// go, and the peer's reads fail with
    /// [`ReadError::Reset`](crate::ReadError::Reset) and `code`.
    pub fn reset(&mut self, code: u64) -> Result<(), ClosedStream> {
        self.close_with(|connection, id| connection.reset_stream(id, code))
    }

    fn close_with(
        &mut self,
        f: impl FnOnce(&mut proto::Connection, StreamId) -> Result<(), proto::WriteError>,
    ) -> Result<(), ClosedStream> {
        if std::mem::replace(&mut self.closed, true) {
            return Err(ClosedStream);
        }
        let id = self.id;
        let done = self
            .connection
            .with_slot(|_, connection| connection.map(|c| f(c, id).is_ok()));
        if !matches!(done, Ok(Some(true))) {
            return Err(ClosedStream);
        }
        self.connection.wake_driver();
        Ok(())
    }

    /// Waits until the stream is done with: `Some(code)` once the peer
    /// asks this side to stop sending (with its code), `None` once the
    /// peer has acknowledged every byte (after [`finish`](Self::finish)) or
    /// the reset (after [`reset`](Self::reset)).
    pub async fn stopped(&self) -> Result<Option<u64>, ConnectionLost> {
        let id = self.id;
        poll_fn(|cx| {
            self.connection.poll_step(|slot, connection| {
                if let Some(code) = slot.streams.get(&id).and_then(|w| w.stopped) {
                    return Step::ready(Ok(Some(code)), false);
                }
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                match connection.stopped(id) {
                    Ok(Some(code)) => Step::ready(Ok(Some(code)), false),
                    Err(_) => Step::ready(Ok(None), false),
                    Ok(None) if slot.closed.is_some() || connection.is_closed() => {
                        Step::ready(Err(ended(slot, Some(connection))), false)
                    }
                    Ok(None) => {
                        slot.streams.entry(id).or_default().write.register(cx);
                        Step::pending()
                    }
                }
            })
        })
        .await
    }

    fn poll_write_bytes(
        &mut self,
        cx: &Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, WriteError>> {
        if self.closed {
            return Poll::Ready(Err(WriteError::ClosedStream));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let id = self.id;
        self.connection.poll_step(|slot, connection| {
            let Some(connection) = connection else {
                return Step::ready(Err(ended(slot, None).into()), false);
            };
            match connection.write(id, buf) {
                Ok(0) => {
                    slot.streams.entry(id).or_default().write.register(cx);
                    Step::pending()
                }
                Ok(n) => Step::ready(Ok(n), true),
                Err(proto::WriteError::Stopped(code)) => {
                    Step::ready(Err(WriteError::Stopped(code)), false)
                }
                Err(proto::WriteError::Closed) => {
                    Step::ready(Err(ended(slot, Some(connection)).into()), false)
                }
                // The protocol let go of a stream the peer stopped.
                Err(_) => match slot.streams.get(&id).and_then(|w| w.stopped) {
                    Some(code) => Step::ready(Err(WriteError::Stopped(code)), false),
                    None => Step::ready(Err(WriteError::ClosedStream), false),
                },
            }
        })
    }
}

impl AsyncWrite for SendStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_bytes(cx, buf)
            .map_err(io::Error::from)
    }

    /// Bytes written are in Tern's send buffer, on their way: nothing to
    /// flush.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Ends the stream after what was written (once: a second shutdown
    /// does nothing).
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closed {
            this.finish()
                .map_err(|_| io::Error::from(WriteError::ClosedStream))?;
        }
        Poll::Ready(Ok(()))
    }
}

/// Dropping the half finishes the stream, unless it was finished or reset.
impl Drop for SendStream {
    fn drop(&mut self) {
        let (id, closed) = (self.id, self.closed);
        let finished = self.connection.with_slot(|slot, connection| {
            slot.release_stream(id, false);
            match connection {
                Some(connection) if !closed => connection.finish(id).is_ok(),
                _ => false,
            }
        });
        if matches!(finished, Ok(true)) {
            self.connection.wake_driver();
        }
    }
}
