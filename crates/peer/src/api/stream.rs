//! [`Stream`]: a bidirectional stream as tokio's `AsyncRead` and
//! `AsyncWrite`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::connection::{Connection, Step, ended};
use super::error::Error;
use crate::proto::{ReadError, ReadOutcome, StreamId, WriteError};

/// Ordered bytes in both directions, for data that should not sit in memory
/// whole (`tokio::io::copy` works on it). Bytes are copied once into the
/// stream's send buffer on write and once out of its receive buffer on
/// read; a write waits while the buffer is full (the stream's own, or its
/// share of the send buffer its connection's streams share:
/// [`Config::send_buffer`](crate::Config::send_buffer)) or while 256 KiB
/// written are still unsent (so bytes leave while still in the CPU's
/// cache), a read while
/// nothing arrived, and the peer's flow control follows what is read.
///
/// `shutdown` ends the sending half (the peer reads to its end); dropping
/// the stream ends it too, and asks the peer to stop sending if its half
/// was not read to the end. `tokio::io::split` gives the halves to two
/// tasks.
#[derive(Debug)]
pub struct Stream {
    connection: Connection,
    id: StreamId,
    /// The sending half was finished (or reset).
    write_done: bool,
    /// The receiving half reached its end (or was reset).
    read_done: bool,
}

impl Stream {
    pub(crate) fn new(connection: Connection, id: StreamId) -> Self {
        Self {
            connection,
            id,
            write_done: false,
            read_done: false,
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

    /// Abandons sending: the peer's reads fail with [`Error::Reset`] and
    /// `code`.
    pub fn reset(&mut self, code: u64) {
        let id = self.id;
        self.write_done = true;
        let _ = self.connection.poll_step(|_, connection| match connection {
            Some(connection) => Step::ready(
                connection.reset_stream(id, code).map_err(Error::from_write),
                true,
            ),
            None => Step::ready(Ok(()), false),
        });
    }

    /// Asks the peer to stop sending on this stream with `code`.
    pub fn stop(&mut self, code: u64) {
        let id = self.id;
        self.read_done = true;
        let _ = self.connection.poll_step(|_, connection| match connection {
            Some(connection) => Step::ready(
                connection.stop_sending(id, code).map_err(Error::from_read),
                true,
            ),
            None => Step::ready(Ok(()), false),
        });
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read_done || buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let id = this.id;
        let polled = this.connection.poll_step(|slot, connection| {
            let Some(connection) = connection else {
                return Step::ready(Err(ended(slot, None)), false);
            };
            match connection.read(id, buf.initialize_unfilled()) {
                Ok(ReadOutcome::Read(0)) => {
                    if let Some(error) = slot.closed.clone().or(connection.error().cloned()) {
                        return Step::ready(Err(Error::Connection(error)), false);
                    }
                    slot.streams.entry(id).or_default().read.register(cx);
                    Step::pending()
                }
                Ok(ReadOutcome::Read(n)) => Step::ready(Ok(Some(n)), true),
                Ok(ReadOutcome::Finished) => {
                    slot.streams.remove(&id);
                    Step::ready(Ok(None), true)
                }
                Err(ReadError::Closed) => match slot.closed.clone() {
                    Some(error) => Step::ready(Err(Error::Connection(error)), false),
                    None => Step::ready(Err(Error::UnknownStream), false),
                },
                Err(e) => Step::ready(Err(Error::from_read(e)), false),
            }
        });
        match polled {
            Poll::Ready(Ok(Some(n))) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(None)) => {
                this.read_done = true;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                this.read_done = true;
                Poll::Ready(Err(e.into()))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.write_done {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the stream's sending half is finished",
            )));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let id = this.id;
        this.connection
            .poll_step(|slot, connection| {
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                match connection.write(id, buf) {
                    Ok(0) => {
                        slot.streams.entry(id).or_default().write.register(cx);
                        Step::pending()
                    }
                    Ok(n) => Step::ready(Ok(n), true),
                    Err(WriteError::Closed) => Step::ready(
                        Err(slot
                            .closed
                            .clone()
                            .or(connection.error().cloned())
                            .map_or(Error::Closing, Error::Connection)),
                        false,
                    ),
                    Err(e) => Step::ready(Err(Error::from_write(e)), false),
                }
            })
            .map_err(io::Error::from)
    }

    /// Bytes written are in Tern's send buffer, on their way: nothing to
    /// flush.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Ends the sending half after what was written.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write_done {
            return Poll::Ready(Ok(()));
        }
        this.write_done = true;
        let id = this.id;
        this.connection
            .poll_step(|_, connection| match connection {
                Some(connection) => {
                    Step::ready(connection.finish(id).map_err(Error::from_write), true)
                }
                None => Step::ready(Err(Error::UnknownStream), false),
            })
            .map_err(io::Error::from)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let (id, write_done, read_done) = (self.id, self.write_done, self.read_done);
        let _ = self.connection.poll_step(|slot, connection| {
            slot.streams.remove(&id);
            let Some(connection) = connection else {
                return Step::ready(Ok::<(), Error>(()), false);
            };
            if !write_done {
                let _ = connection.finish(id);
            }
            if !read_done {
                let _ = connection.stop_sending(id, 0);
            }
            Step::ready(Ok(()), !(write_done && read_done))
        });
    }
}
