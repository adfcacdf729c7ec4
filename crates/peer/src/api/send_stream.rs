//! [`SendStream`]: the sending half of a stream.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::connection::{Connection, Step, ended};
use super::error::{ClosedStream, ConnectionLost, WriteError};
use super::state::{Credit, Slot};
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
///
/// A write, finish or reset never waits for the endpoint's lock while the
/// driver holds it for a turn: the write copies what the stream had room
/// for at the driver's last look and hands it off, and whoever takes the
/// lock next gives it to the stream, in the order the calls were made
/// (see [`DriverHandle::hand_off`](crate::driver::DriverHandle::hand_off)).
/// An error that a handed-off write met (the peer stopped the stream, the
/// connection ended) is returned by the next call.
#[derive(Debug)]
pub struct SendStream {
    connection: Connection,
    id: StreamId,
    /// Finished or reset here: nothing more goes on it.
    closed: bool,
    /// How far this writer may hand off without the endpoint's lock.
    credit: Arc<Credit>,
}

impl SendStream {
    /// The half of a stream the lock's side holds with `credit` (the
    /// driver accepted it, or an open holds it), or will hold before any
    /// other call on it runs (an open handed off): made without the
    /// endpoint's lock.
    pub(crate) fn held(connection: Connection, id: StreamId, credit: Arc<Credit>) -> Self {
        Self {
            connection,
            id,
            closed: false,
            credit,
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
        self.close_with(finish)
    }

    /// Abandons sending: what was written and not yet acknowledged is let
    /// go, and the peer's reads fail with
    /// [`ReadError::Reset`](crate::ReadError::Reset) and `code`.
    pub fn reset(&mut self, code: u64) -> Result<(), ClosedStream> {
        self.close_with(move |slot, connection, id| {
            slot.drop_parked(id);
            connection.reset_stream(id, code)
        })
    }

    /// Ends the stream with `f`, at once if the endpoint's lock is free,
    /// else handed off (its outcome then unknown here: `Ok`).
    fn close_with(
        &mut self,
        f: impl FnOnce(&mut Slot, &mut proto::Connection, StreamId) -> Result<(), proto::WriteError>
        + Send
        + 'static,
    ) -> Result<(), ClosedStream> {
        if std::mem::replace(&mut self.closed, true) {
            return Err(ClosedStream);
        }
        let id = self.id;
        let mut f = Some(f);
        let done = self.connection.try_with_slot(|slot, connection| {
            let f = f.take()?;
            connection.map(|c| f(slot, c, id).is_ok())
        });
        match (done, f) {
            (Ok(Some(Some(true))), _) => {}
            // The lock was held: whoever takes it next ends the stream.
            (Ok(None), Some(f)) => {
                let slot = self.connection.slot();
                self.connection.hand_off(move |state| {
                    if let Some((slot, Some(connection))) = state.connection(slot) {
                        let _ = f(slot, connection, id);
                    }
                });
                return Ok(());
            }
            _ => return Err(ClosedStream),
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
        let locked = |slot: &mut Slot, connection: Option<&mut proto::Connection>| {
            write(cx, slot, connection, id, buf)
        };
        if let Some(written) = self.connection.try_poll_step(locked) {
            return written;
        }
        // The driver's turn holds the lock: hand off what the stream had
        // room for, or wait for the lock if none.
        let n = self.credit.take(buf.len() as u64, true) as usize;
        if n == 0 {
            return self.connection.poll_step(locked);
        }
        let bytes = Bytes::copy_from_slice(&buf[..n]);
        let slot = self.connection.slot();
        self.connection
            .hand_off(move |state| state.write_handed_off(slot, id, bytes));
        Poll::Ready(Ok(n))
    }
}

/// Ends stream `id` after what was written (once the bytes parked for it
/// are).
fn finish(
    slot: &mut Slot,
    connection: &mut proto::Connection,
    id: StreamId,
) -> Result<(), proto::WriteError> {
    if slot.finish_after_parked(id) {
        return Ok(());
    }
    connection.finish(id)
}

/// One write of `buf` on stream `id` under the endpoint's lock: behind the
/// bytes parked for the stream, if any (handed-off writes the protocol
/// had no room for).
fn write(
    cx: &Context<'_>,
    slot: &mut Slot,
    connection: Option<&mut proto::Connection>,
    id: StreamId,
    buf: &[u8],
) -> Step<Result<usize, WriteError>> {
    let Some(connection) = connection else {
        return Step::ready(Err(ended(slot, None).into()), false);
    };
    if slot.has_parked(id) {
        // They go first; the stream's room wakes this writer.
        slot.streams.entry(id).or_default().write.register(cx);
        return Step::pending();
    }
    match connection.write(id, buf) {
        Ok(0) => {
            slot.streams.entry(id).or_default().write.register(cx);
            Step::pending()
        }
        Ok(n) => {
            slot.wrote(connection, id);
            Step::ready(Ok(n), true)
        }
        Err(proto::WriteError::Stopped(code)) => Step::ready(Err(WriteError::Stopped(code)), false),
        Err(proto::WriteError::Closed) => {
            Step::ready(Err(ended(slot, Some(connection)).into()), false)
        }
        // The protocol let go of a stream the peer stopped.
        Err(_) => match slot.streams.get(&id).and_then(|w| w.stopped) {
            Some(code) => Step::ready(Err(WriteError::Stopped(code)), false),
            None => Step::ready(Err(WriteError::ClosedStream), false),
        },
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

/// Dropping the half finishes the stream, unless it was finished or reset:
/// at once if the endpoint's lock is free, else handed off (after the
/// writes handed off before it).
impl Drop for SendStream {
    fn drop(&mut self) {
        let (id, closed, slot) = (self.id, self.closed, self.connection.slot());
        self.connection.run_or_hand_off(move |state| {
            let Some((slot, connection)) = state.connection(slot) else {
                return false;
            };
            let finished = match connection {
                Some(connection) if !closed => finish(slot, connection, id).is_ok(),
                _ => false,
            };
            slot.release_stream(id, false);
            finished
        });
    }
}
