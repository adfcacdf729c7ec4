//! A connection's unreliable datagrams: sent within a bounded queue, and
//! received through a buffer the driver fills, read without the
//! endpoint's lock.

use std::future::poll_fn;
use std::task::Poll;

use bytes::Bytes;

use super::{Connection, Step, ended};
use crate::api::error::{ConnectionLost, SendDatagramError};
use crate::api::state::{Reader, Slot};
use crate::proto::{self, Connection as ProtoConnection};

impl Connection {
    /// Queues an unreliable datagram: sent once, never re-sent, dropped by
    /// the network or the peer's full queue without notice. When
    /// [`ConnectionConfig::datagram_send_queue`](crate::proto::ConnectionConfig::datagram_send_queue)
    /// datagrams already wait to be sent (the congestion window is full,
    /// or the path is slower than the application), the oldest is dropped
    /// for it and counted in [`ConnectionStats::datagrams_dropped`](crate::ConnectionStats::datagrams_dropped):
    /// [`send_datagram_wait`](Self::send_datagram_wait) waits instead.
    pub fn send_datagram(&self, datagram: impl Into<Bytes>) -> Result<(), SendDatagramError> {
        let mut datagram = Some(datagram.into());
        let credits = self.inner.published.credits();
        let poll = match self.try_poll_step(|slot, c| queue_datagram(slot, c, &mut datagram)) {
            Some(poll) => poll,
            // The driver's turn holds the lock: hand the datagram off if
            // the queue had room for it, or wait for the lock.
            None => match datagram.take_if(|d| credits.take_datagram(d.len())) {
                Some(datagram) => {
                    let slot = self.inner.slot;
                    self.hand_off(move |state| state.send_datagram_handed_off(slot, datagram));
                    return Ok(());
                }
                None => self.poll_step(|slot, c| queue_datagram(slot, c, &mut datagram)),
            },
        };
        match poll {
            Poll::Ready(result) => result,
            Poll::Pending => Err(ConnectionLost::Closing.into()),
        }
    }

    /// Queues an unreliable datagram like [`send_datagram`](Self::send_datagram),
    /// but waits while the send queue is full rather than drop the oldest:
    /// for a sender that would rather slow down than lose datagrams before
    /// they leave (the network may still drop them).
    pub async fn send_datagram_wait(
        &self,
        datagram: impl Into<Bytes>,
    ) -> Result<(), SendDatagramError> {
        let mut datagram = Some(datagram.into());
        poll_fn(|cx| {
            self.poll_step(|slot, connection| {
                let Some(taken) = datagram.take() else {
                    return Step::ready(Ok(()), false);
                };
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None).into()), false);
                };
                match connection.try_send_datagram(taken) {
                    Err(proto::SendError::Blocked(back)) => {
                        datagram = Some(back);
                        slot.datagram_room.register(cx);
                        Step::pending()
                    }
                    queued => {
                        let queued = datagram_sent(slot, connection, queued);
                        let wake = queued.is_ok();
                        Step::ready(queued, wake)
                    }
                }
            })
        })
        .await
    }

    /// The largest datagram [`send_datagram`](Self::send_datagram) takes:
    /// what one packet carries on any path (`None` once the endpoint freed
    /// the connection).
    pub fn max_datagram_size(&self) -> Option<usize> {
        self.read_live(|s| s.live.as_ref().map(|live| live.max_datagram_size))
    }

    /// The largest message the peer accepts, in bytes: its
    /// `max_message_size` once it told it (in its first packet after the
    /// handshake), until then the default both ends assume,
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::proto::DEFAULT_MAX_MESSAGE_SIZE)
    /// (1 GiB). `None` once the endpoint freed the connection.
    pub fn max_message_size(&self) -> Option<u64> {
        self.read_live(|s| s.live.as_ref().map(|live| live.max_message_size))
    }

    /// The next unreliable datagram from the peer. Once a `recv_datagram`
    /// has taken the endpoint's lock, the driver moves the datagrams that
    /// arrive into a buffer (within
    /// [`ConnectionConfig::datagram_receive_queue`](crate::proto::ConnectionConfig::datagram_receive_queue),
    /// the oldest dropped and counted) that later calls take from without
    /// that lock.
    pub async fn recv_datagram(&self) -> Result<Bytes, ConnectionLost> {
        poll_fn(|cx| {
            if let Some((datagram, first)) = self.inner.datagrams.get().and_then(|d| d.take()) {
                if first {
                    // The endpoint's budget is told once the driver hears.
                    let slot = self.inner.slot;
                    self.hand_off(move |state| state.report_taken(slot, Reader::Datagrams));
                }
                return Poll::Ready(Ok(datagram));
            }
            self.poll_step(|slot, mut connection| {
                // From now on the driver moves what arrives for this call.
                self.inner
                    .datagrams
                    .get_or_init(|| slot.datagram_delivery());
                if let Some(datagram) = slot.take_delivered_datagram(connection.as_deref_mut()) {
                    return Step::ready(Ok(datagram), false);
                }
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
}

/// `send_datagram` of `datagram` under the endpoint's lock.
fn queue_datagram(
    slot: &mut Slot,
    connection: Option<&mut ProtoConnection>,
    datagram: &mut Option<Bytes>,
) -> Step<Result<(), SendDatagramError>> {
    let queued = match (connection, datagram.take()) {
        (Some(connection), Some(datagram)) => {
            let queued = connection.send_datagram(datagram);
            if queued.is_ok() {
                slot.sent(connection);
            }
            datagram_sent(slot, connection, queued)
        }
        (connection, _) => Err(ended(slot, connection.as_deref()).into()),
    };
    let wake = queued.is_ok();
    Step::ready(queued, wake)
}

/// What a datagram handed to the protocol became.
fn datagram_sent(
    slot: &Slot,
    connection: &ProtoConnection,
    queued: Result<(), proto::SendError>,
) -> Result<(), SendDatagramError> {
    match queued {
        Ok(()) => Ok(()),
        Err(proto::SendError::TooLarge(size)) => Err(SendDatagramError::TooLarge {
            size,
            max: connection.max_datagram_size(),
        }),
        Err(_) => Err(ended(slot, Some(connection)).into()),
    }
}
