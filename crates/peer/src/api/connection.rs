//! [`Connection`]: the application's handle on one connection.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::error::Error;
use super::state::{EndpointState, Slot, SlotId};
use super::stream::Stream;
use crate::driver::{DriverHandle, DriverStopped, StopCause};
use crate::proto::{Connection as ProtoConnection, ConnectionStats, SendError};

/// One connection: whole messages of any size, unreliable datagrams, and
/// streams. Clones share it; when the last clone (and every [`Stream`] of
/// it) is dropped, the connection is closed gracefully with code 0.
///
/// Each call takes the endpoint's lock for a few microseconds and wakes the
/// driver only when it changed something the driver must act on.
#[derive(Clone, Debug)]
pub struct Connection {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    driver: DriverHandle<EndpointState>,
    slot: SlotId,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let now = self.driver.now();
        let slot = self.slot;
        let _ = self.driver.with_node(|state| state.release(now, slot, 0));
    }
}

/// Why an operation on a connection that is over failed.
pub(crate) fn ended(slot: &Slot, connection: Option<&ProtoConnection>) -> Error {
    match (&slot.closed, connection.and_then(ProtoConnection::error)) {
        (Some(error), _) | (None, Some(error)) => Error::Connection(error.clone()),
        (None, None) if connection.is_some() => Error::Closing,
        (None, None) => Error::Abandoned,
    }
}

/// What one poll of an operation decided: its outcome, and whether the
/// driver must take a turn (data queued, or a window to advertise).
pub(crate) struct Step<R> {
    pub(crate) poll: Poll<R>,
    pub(crate) wake: bool,
}

impl<R> Step<R> {
    pub(crate) fn ready(value: R, wake: bool) -> Self {
        Self {
            poll: Poll::Ready(value),
            wake,
        }
    }

    pub(crate) fn pending() -> Self {
        Self {
            poll: Poll::Pending,
            wake: false,
        }
    }
}

impl Connection {
    pub(crate) fn new(driver: DriverHandle<EndpointState>, slot: SlotId) -> Self {
        Self {
            inner: Arc::new(Inner { driver, slot }),
        }
    }

    /// Runs `f` on this connection's slot and protocol state (the latter
    /// `None` once the protocol freed it), without waking the driver.
    pub(crate) fn with_slot<R>(
        &self,
        f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> R,
    ) -> Result<R, DriverStopped> {
        let slot = self.inner.slot;
        self.inner
            .driver
            .with_node_unwoken(|state| state.connection(slot).map(|(s, c)| f(s, c)))?
            .ok_or(DriverStopped::new(StopCause::Stopped))
    }

    /// One poll of an operation: `f` decides, and the driver is woken if it
    /// asks for it. A stopped endpoint ends the operation.
    pub(crate) fn poll_step<R>(
        &self,
        f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> Step<Result<R, Error>>,
    ) -> Poll<Result<R, Error>> {
        match self.with_slot(f) {
            Ok(step) => {
                if step.wake {
                    self.inner.driver.wake();
                }
                step.poll
            }
            Err(stopped) => Poll::Ready(Err(stopped.into())),
        }
    }

    /// Sends a message of any size, delivered to the peer whole and exactly
    /// once. Waits only while there is no room for it: the messages held
    /// until the peer acknowledges them fill
    /// [`Config::message_send_buffer`](crate::Config::message_send_buffer)
    /// (whatever the peer grants) or, for a message larger than a packet
    /// (which travels on a one-way stream of its own), the peer allows no
    /// more such streams.
    /// Any `Into<Bytes>` will do (`Vec<u8>`, `String`, a `&'static [u8]`);
    /// a `Bytes` is sent without a copy.
    pub async fn send(&self, message: impl Into<Bytes>) -> Result<(), Error> {
        let mut message = Some(message.into());
        poll_fn(|cx| {
            self.poll_step(|slot, connection| {
                let Some(taken) = message.take() else {
                    return Step::ready(Ok(()), false);
                };
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                match connection.send_message(taken) {
                    Ok(()) => Step::ready(Ok(()), true),
                    Err(SendError::Blocked(back)) => {
                        message = Some(back);
                        slot.send.register(cx);
                        Step::pending()
                    }
                    Err(SendError::TooLarge(len)) => {
                        Step::ready(Err(Error::DatagramTooLarge(len)), false)
                    }
                    Err(_) => Step::ready(Err(ended(slot, Some(connection))), false),
                }
            })
        })
        .await
    }

    /// The next whole message from the peer. Messages delivered before the
    /// peer closed are all returned before the error that says it closed.
    pub async fn recv(&self) -> Result<Bytes, Error> {
        poll_fn(|cx| {
            self.poll_step(|slot, connection| {
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                if let Some(message) = connection.recv_message() {
                    return Step::ready(Ok(message), true);
                }
                if slot.closed.is_some() || connection.is_closed() {
                    return Step::ready(Err(ended(slot, Some(connection))), false);
                }
                slot.recv.register(cx);
                Step::pending()
            })
        })
        .await
    }

    /// Sends an unreliable datagram: once, never re-sent, dropped by the
    /// network or the peer's full queue without notice.
    pub fn send_datagram(&self, datagram: impl Into<Bytes>) -> Result<(), Error> {
        let datagram = datagram.into();
        match self.poll_step(|slot, connection| {
            let Some(connection) = connection else {
                return Step::ready(Err(ended(slot, None)), false);
            };
            match connection.send_datagram(datagram) {
                Ok(()) => Step::ready(Ok(()), true),
                Err(SendError::TooLarge(len)) => {
                    Step::ready(Err(Error::DatagramTooLarge(len)), false)
                }
                Err(_) => Step::ready(Err(ended(slot, Some(connection))), false),
            }
        }) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(Error::Closing),
        }
    }

    /// The next unreliable datagram from the peer.
    pub async fn recv_datagram(&self) -> Result<Bytes, Error> {
        poll_fn(|cx| {
            self.poll_step(|slot, connection| {
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                if let Some(datagram) = connection.recv_datagram() {
                    return Step::ready(Ok(datagram), false);
                }
                if slot.closed.is_some() || connection.is_closed() {
                    return Step::ready(Err(ended(slot, Some(connection))), false);
                }
                slot.datagrams.register(cx);
                Step::pending()
            })
        })
        .await
    }

    /// Opens a bidirectional stream, waiting while the peer allows no more.
    pub async fn open_stream(&self) -> Result<Stream, Error> {
        let id = poll_fn(|cx| {
            self.poll_step(|slot, connection| {
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                if let Some(id) = connection.open_stream() {
                    return Step::ready(Ok(id), false);
                }
                if slot.closed.is_some() || connection.is_closed() {
                    return Step::ready(Err(ended(slot, Some(connection))), false);
                }
                slot.open_stream.register(cx);
                Step::pending()
            })
        })
        .await?;
        Ok(Stream::new(self.clone(), id))
    }

    /// The next stream the peer opened.
    pub async fn accept_stream(&self) -> Result<Stream, Error> {
        let id = poll_fn(|cx| {
            self.poll_step(|slot, connection| {
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                if let Some(id) = connection.accept_stream() {
                    return Step::ready(Ok(id), false);
                }
                if slot.closed.is_some() || connection.is_closed() {
                    return Step::ready(Err(ended(slot, Some(connection))), false);
                }
                slot.accept_stream.register(cx);
                Step::pending()
            })
        })
        .await?;
        Ok(Stream::new(self.clone(), id))
    }

    /// Closes gracefully: what was sent is delivered first, then the peer
    /// is told `code` and `reason`.
    ///
    /// Returns when [`closed`](Self::closed) does: once the peer has
    /// acknowledged every message and stream byte sent and the Close is
    /// queued for the driver to send (not once it is sent or received), or
    /// once the peer acknowledged nothing more for the drain timeout
    /// ([`ConnectionConfig::close_drain_timeout`](crate::proto::ConnectionConfig::close_drain_timeout):
    /// the rest is abandoned and the Close queued), or sooner if the
    /// connection ends otherwise (the peer closes it, it times out, the
    /// endpoint stops). A connection still in its handshake ends at once,
    /// without a Close. The endpoint then holds the connection for its
    /// closing period (three probe timeouts), repeating the Close to a
    /// peer that still sends, and its driver sends it even if every handle
    /// is dropped; [`Endpoint::wait_idle`](crate::Endpoint::wait_idle)
    /// waits for that.
    pub async fn close(&self, code: u64, reason: impl Into<Bytes>) {
        let reason = reason.into();
        let now = self.inner.driver.now();
        let _ = self.poll_step(|_, connection| match connection {
            Some(connection) => {
                connection.close(now, code, reason);
                Step::ready(Ok(()), true)
            }
            None => Step::ready(Ok(()), false),
        });
        self.closed().await;
    }

    /// Closes at once: unsent and unacknowledged data is abandoned.
    pub fn abort(&self, code: u64, reason: impl Into<Bytes>) {
        let reason = reason.into();
        let now = self.inner.driver.now();
        let _ = self.poll_step(|_, connection| match connection {
            Some(connection) => {
                connection.abort(now, code, reason);
                Step::ready(Ok(()), true)
            }
            None => Step::ready(Ok(()), false),
        });
    }

    /// Waits until the connection has ended for this side, and says why:
    /// closed by the peer, timed out, its endpoint stopped, or closed here
    /// (after a graceful [`close`](Self::close), once everything sent was
    /// acknowledged and the Close is queued; after an [`abort`](Self::abort),
    /// at the driver's next turn). No more data is sent or delivered on it
    /// then, but what a peer delivered before it closed can still be read.
    pub async fn closed(&self) -> Error {
        poll_fn(|cx| self.poll_closed(cx)).await
    }

    fn poll_closed(&self, cx: &Context<'_>) -> Poll<Error> {
        match self.poll_step(|slot, connection| {
            if slot.closed.is_some() {
                return Step::ready(Err(ended(slot, connection.as_deref())), false);
            }
            slot.connect.register(cx);
            Step::<Result<(), Error>>::pending()
        }) {
            Poll::Ready(Err(error)) => Poll::Ready(error),
            Poll::Ready(Ok(())) | Poll::Pending => Poll::Pending,
        }
    }

    /// The peer's address now (it may change when the peer roams).
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.with_slot(|_, connection| connection.map(|c| c.remote()))
            .ok()
            .flatten()
    }

    /// Figures about the connection: RTT, window, bytes, losses, path MTU,
    /// key updates (`None` once the endpoint freed it). Datagrams per
    /// system call are the endpoint's: see [`Endpoint::stats`](crate::Endpoint::stats).
    pub fn stats(&self) -> Option<ConnectionStats> {
        self.with_slot(|_, connection| connection.map(|c| c.stats()))
            .ok()
            .flatten()
    }
}
