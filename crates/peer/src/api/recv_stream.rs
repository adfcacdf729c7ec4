//! [`RecvStream`]: the receiving half of a stream.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::connection::{Connection, Step, ended};
use super::error::{ClosedStream, ReadError, ReadToEndError};
use super::state::{Reader, Slot, StreamDelivery, StreamEnd, Taken};
use crate::proto::{self, Connection as ProtoConnection, ReadOutcome, StreamId};

/// The receiving half of a stream: the peer's bytes in order, to their end
/// (`AsyncRead` too). Bytes are copied once out of the stream's receive
/// buffer; a read waits while nothing arrived, and the peer's flow control
/// follows what is read. Once a read has taken the endpoint's lock, the
/// driver moves up to 64 KiB of what arrives into a buffer of this half's
/// at the end of its turn (counted against the peer's window until read),
/// which reads take without that lock, before the stream's end or reset.
///
/// [`stop`](Self::stop) (or dropping the half before its end) asks the
/// peer to stop sending.
#[derive(Debug)]
pub struct RecvStream {
    connection: Connection,
    id: StreamId,
    /// Read to its end, reset by the peer, or stopped here.
    done: bool,
    /// Read to its end: a read says so again.
    finished: bool,
    /// What the driver moved for this reader, once it took the lock.
    delivery: Option<Arc<StreamDelivery>>,
}

impl RecvStream {
    /// The half of a stream the lock's side holds (the driver accepted
    /// it, or an open holds it), or will hold before any other call on it
    /// runs (an open handed off): made without the endpoint's lock.
    pub(crate) fn held(connection: Connection, id: StreamId) -> Self {
        Self {
            connection,
            id,
            done: false,
            finished: false,
            delivery: None,
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

    /// Reads the next bytes into `buf`, waiting while none arrived: how
    /// many, or `None` at the stream's end (and at every read after it).
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
        poll_fn(|cx| self.poll_read_bytes(cx, buf)).await
    }

    /// Reads the stream to its end, refusing to hold more than `limit`
    /// bytes (the peer chooses how much it sends: the caller chooses how
    /// much it keeps).
    pub async fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, ReadToEndError> {
        let mut out = Vec::new();
        let mut chunk = vec![0; 64 * 1024];
        while let Some(n) = self.read(&mut chunk).await? {
            if out.len() + n > limit {
                // The rest is not wanted: the peer may stop sending it.
                let _ = self.stop(0);
                return Err(ReadToEndError::TooLong { limit });
            }
            out.extend_from_slice(&chunk[..n]);
        }
        Ok(out)
    }

    /// Asks the peer to stop sending, with `code` (its writes fail with
    /// [`WriteError::Stopped`](crate::WriteError::Stopped)); what arrives
    /// from now on is discarded. At once if the endpoint's lock is free,
    /// else handed off (its outcome then unknown here: `Ok`), as a
    /// [`SendStream::finish`](crate::SendStream::finish) is.
    pub fn stop(&mut self, code: u64) -> Result<(), ClosedStream> {
        if std::mem::replace(&mut self.done, true) {
            return Err(ClosedStream);
        }
        let id = self.id;
        let mut stop = Some(
            move |slot: &mut Slot, mut connection: Option<&mut ProtoConnection>| {
                // What was moved for this reader is not wanted either.
                slot.discard_delivered_bytes(connection.as_deref_mut(), id);
                connection.is_some_and(|c| c.stop_sending(id, code).is_ok())
            },
        );
        let stopped = self
            .connection
            .try_with_slot(|slot, connection| stop.take().map(|stop| stop(slot, connection)));
        match (stopped, stop) {
            (Ok(Some(Some(true))), _) => {}
            // The lock was held: whoever takes it next stops the stream.
            (Ok(None), Some(stop)) => {
                let slot = self.connection.slot();
                self.connection.hand_off(move |state| {
                    if let Some((slot, connection)) = state.connection(slot) {
                        stop(slot, connection);
                    }
                });
                return Ok(());
            }
            _ => return Err(ClosedStream),
        }
        self.connection.wake_driver();
        Ok(())
    }

    fn poll_read_bytes(
        &mut self,
        cx: &Context<'_>,
        buf: &mut [u8],
    ) -> Poll<Result<Option<usize>, ReadError>> {
        if self.finished {
            return Poll::Ready(Ok(None));
        }
        if self.done {
            return Poll::Ready(Err(ReadError::ClosedStream));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(Some(0)));
        }
        let taken = self
            .delivery
            .as_ref()
            .map_or(Taken::Empty, |delivery| delivery.take(buf));
        let id = self.id;
        let delivery = &mut self.delivery;
        let polled = match taken {
            Taken::Read(n, first) => {
                if first {
                    // The window opens once the driver hears of it.
                    let slot = self.connection.slot();
                    self.connection
                        .hand_off(move |state| state.report_taken(slot, Reader::Stream(id)));
                }
                Poll::Ready(Ok(Some(n)))
            }
            Taken::End(end) => Poll::Ready(delivered_end(end)),
            Taken::Empty => self
                .connection
                .poll_step(|slot, connection| read_locked(cx, slot, connection, id, buf, delivery)),
        };
        match polled {
            Poll::Ready(Ok(Some(n))) => Poll::Ready(Ok(Some(n))),
            Poll::Ready(done) => {
                // The end, or an error: the stream has nothing more.
                self.done = true;
                self.finished = matches!(done, Ok(None));
                Poll::Ready(done)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What the stream's end, found behind the bytes the driver moved, makes
/// of a read.
fn delivered_end(end: StreamEnd) -> Result<Option<usize>, ReadError> {
    match end {
        StreamEnd::Finished => Ok(None),
        StreamEnd::Reset(code) => Err(ReadError::Reset(code)),
    }
}

/// One poll of a read of stream `id` under the endpoint's lock: what the
/// driver moved first, then the protocol; a reader that finds nothing
/// waits. The reader learns its delivery buffer.
fn read_locked(
    cx: &Context<'_>,
    slot: &mut Slot,
    connection: Option<&mut ProtoConnection>,
    id: StreamId,
    buf: &mut [u8],
    delivery: &mut Option<Arc<StreamDelivery>>,
) -> Step<Result<Option<usize>, ReadError>> {
    if delivery.is_none() {
        // From now on the driver moves what arrives for this reader.
        *delivery = Some(slot.streams.entry(id).or_default().delivery());
    }
    let mut connection = connection;
    match slot.take_delivered_bytes(connection.as_deref_mut(), id, buf) {
        Taken::Read(n, _) => return Step::ready(Ok(Some(n)), true),
        Taken::End(end) => return Step::ready(delivered_end(end), false),
        Taken::Empty => {}
    }
    let Some(connection) = connection else {
        return Step::ready(Err(ended(slot, None).into()), false);
    };
    match connection.read(id, buf) {
        Ok(ReadOutcome::Read(0)) => {
            if slot.closed.is_some() || connection.error().is_some() {
                return Step::ready(Err(ended(slot, Some(connection)).into()), false);
            }
            slot.streams.entry(id).or_default().read.register(cx);
            Step::pending()
        }
        Ok(ReadOutcome::Read(n)) => Step::ready(Ok(Some(n)), true),
        Ok(ReadOutcome::Finished) => Step::ready(Ok(None), true),
        Err(proto::ReadError::Reset(code)) => Step::ready(Err(ReadError::Reset(code)), false),
        Err(proto::ReadError::Closed) => {
            Step::ready(Err(ended(slot, Some(connection)).into()), false)
        }
        Err(_) if slot.closed.is_some() => {
            Step::ready(Err(ended(slot, Some(connection)).into()), false)
        }
        Err(_) => Step::ready(Err(ReadError::ClosedStream), false),
    }
}

impl AsyncRead for RecvStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        match this.poll_read_bytes(cx, buf.initialize_unfilled()) {
            Poll::Ready(Ok(Some(n))) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(None)) => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Dropping the half before its end asks the peer to stop sending: at
/// once if the endpoint's lock is free, else handed off.
impl Drop for RecvStream {
    fn drop(&mut self) {
        let (id, done, slot) = (self.id, self.done, self.connection.slot());
        self.connection.run_or_hand_off(move |state| {
            let Some((slot, mut connection)) = state.connection(slot) else {
                return false;
            };
            slot.discard_delivered_bytes(connection.as_deref_mut(), id);
            slot.release_stream(id, true);
            match connection {
                Some(connection) if !done => connection.stop_sending(id, 0).is_ok(),
                _ => false,
            }
        });
    }
}
