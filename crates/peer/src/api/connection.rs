//! [`Connection`]: the application's handle on one connection.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use super::error::{ConnectionLost, SendError};
use super::published::{Published, Snapshot};
use super::recv_stream::RecvStream;
use super::send_stream::SendStream;
use super::state::{
    Credit, DatagramDelivery, EndpointState, MessageDelivery, Reader, Slot, SlotId, StreamAccepts,
    StreamOpens,
};
use crate::driver::{DriverHandle, DriverStopped, StopCause};
use crate::proto::{
    self, Connection as ProtoConnection, ConnectionStats, Direction, PublicIdentity, StreamId,
};

/// One connection: whole messages of any size, unreliable datagrams, and
/// streams. Clones share it; when the last clone (and every [`SendStream`]
/// and [`RecvStream`] of it) is dropped, the connection is closed gracefully with code 0.
///
/// Each call that acts on the connection takes the endpoint's lock for a
/// few microseconds and wakes the driver only when it changed something
/// the driver must act on. While the driver's turn holds that lock,
/// [`send`](Self::send) and [`send_datagram`](Self::send_datagram) of what
/// fits a packet hand their message or datagram off instead, within the
/// room the protocol had at the lock's last look, and return at once
/// (whoever takes the lock next queues it, in order).
/// [`open_bi`](Self::open_bi) and [`open_uni`](Self::open_uni), after the
/// first, hand the opening off always, within the peer's stream limit as
/// the lock's side last saw it. What a call reads
/// of the connection (figures, the peer's address, identity and limits)
/// the driver publishes once per turn, so reading it never waits for the
/// lock the driver's turn holds.
#[derive(Clone, Debug)]
pub struct Connection {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    driver: DriverHandle<EndpointState>,
    slot: SlotId,
    /// What the driver published of the connection.
    published: Arc<Published>,
    /// The messages the driver moved for `recv`, once it took the lock.
    delivered: OnceLock<Arc<MessageDelivery>>,
    /// The datagrams the driver moved for `recv_datagram`, once it took
    /// the lock.
    datagrams: OnceLock<Arc<DatagramDelivery>>,
    /// The streams the driver accepted for `accept_bi` and `accept_uni`,
    /// once one took the lock.
    stream_accepts: OnceLock<Arc<StreamAccepts>>,
    /// The ids `open_bi` and `open_uni` allot, once one took the lock.
    stream_opens: OnceLock<Arc<StreamOpens>>,
}

impl Inner {
    /// Runs `f` under the endpoint's lock if it is free, else hands it off
    /// to whoever takes the lock next: for what must happen, in order with
    /// the calls before it, but need not be waited for (a handle or a half
    /// let go). The driver is woken if `f` asks for it, or was handed it.
    fn run_or_hand_off(&self, f: impl FnOnce(&mut EndpointState) -> bool + Send + 'static) {
        let mut f = Some(f);
        match self
            .driver
            .try_with_node_unwoken(|state| f.take().map(|f| f(state)))
        {
            Ok(Some(Some(true))) => self.driver.wake(),
            Ok(None) => {
                if let Some(f) = f {
                    self.driver.hand_off(move |state| {
                        f(state);
                    });
                }
            }
            _ => {}
        }
    }
}

/// The last handle gone: the connection is released, without waiting for
/// the driver's turn.
impl Drop for Inner {
    fn drop(&mut self) {
        let now = self.driver.now();
        let slot = self.slot;
        self.run_or_hand_off(move |state| {
            state.release(now, slot, 0);
            true
        });
    }
}

mod datagrams;

/// Why an operation on a connection that is over failed.
pub(crate) fn ended(slot: &Slot, connection: Option<&ProtoConnection>) -> ConnectionLost {
    match (
        slot.closed.as_deref(),
        connection.and_then(ProtoConnection::error),
    ) {
        (Some(error), _) | (None, Some(error)) => ConnectionLost::Connection(error.clone()),
        (None, None) if connection.is_some() => ConnectionLost::Closing,
        (None, None) => ConnectionLost::Abandoned,
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
    pub(crate) fn new(
        driver: DriverHandle<EndpointState>,
        slot: SlotId,
        published: Arc<Published>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                driver,
                slot,
                published,
                delivered: OnceLock::new(),
                datagrams: OnceLock::new(),
                stream_accepts: OnceLock::new(),
                stream_opens: OnceLock::new(),
            }),
        }
    }

    /// Runs `f` on this connection's slot and protocol state (the latter
    /// `None` once the protocol freed it), without waking the driver; what
    /// `f` changed is published if a handle reads it.
    pub(crate) fn with_slot<R>(
        &self,
        f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> R,
    ) -> Result<R, DriverStopped> {
        let slot = self.inner.slot;
        self.inner
            .driver
            .with_node_unwoken(|state| on_slot(state, slot, f))?
            .ok_or(DriverStopped::new(StopCause::Stopped))
    }

    /// Like [`with_slot`](Self::with_slot) if the endpoint's lock is free;
    /// `Ok(None)` without running `f` if it is held (by the driver's turn,
    /// most likely).
    pub(crate) fn try_with_slot<R>(
        &self,
        f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> R,
    ) -> Result<Option<R>, DriverStopped> {
        let slot = self.inner.slot;
        match self
            .inner
            .driver
            .try_with_node_unwoken(|state| on_slot(state, slot, f))?
        {
            Some(ran) => ran.ok_or(DriverStopped::new(StopCause::Stopped)).map(Some),
            None => Ok(None),
        }
    }

    /// Runs `f` on the endpoint's state at once if its lock is free, else
    /// hands it off; wakes the driver if `f` returns `true` (see
    /// [`Inner::run_or_hand_off`]).
    pub(crate) fn run_or_hand_off(
        &self,
        f: impl FnOnce(&mut EndpointState) -> bool + Send + 'static,
    ) {
        self.inner.run_or_hand_off(f);
    }

    /// Hands `f` off to whoever takes the endpoint's lock next (see
    /// [`DriverHandle::hand_off`]), and wakes the driver.
    pub(crate) fn hand_off(&self, f: impl FnOnce(&mut EndpointState) + Send + 'static) {
        self.inner.driver.hand_off(f);
    }

    /// Reads what the driver published of the connection, without the
    /// endpoint's lock while the connection is watched; otherwise takes
    /// the lock once, to publish it and have it watched (see
    /// [`Published`]). After the endpoint stopped, what was last published.
    fn read_published<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        let published = &self.inner.published;
        if !published.is_watched() {
            let now = self.inner.driver.now();
            let slot = self.inner.slot;
            let _ = self
                .inner
                .driver
                .with_node_unwoken(|state| state.watch(now, slot));
        }
        published.read(f)
    }

    /// Like [`read_published`](Self::read_published), but `None` once the
    /// endpoint stopped.
    fn read_live<R>(&self, f: impl FnOnce(&Snapshot) -> Option<R>) -> Option<R> {
        if self.inner.driver.is_stopped() {
            return None;
        }
        self.read_published(f)
    }

    /// The slot this handle refers to.
    pub(crate) fn slot(&self) -> SlotId {
        self.inner.slot
    }

    /// Wakes the driver: something was queued it must act on.
    pub(crate) fn wake_driver(&self) {
        self.inner.driver.wake();
    }

    /// One poll of an operation: `f` decides, and the driver is woken if it
    /// asks for it. A stopped endpoint ends the operation.
    pub(crate) fn poll_step<R, E: From<ConnectionLost>>(
        &self,
        f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> Step<Result<R, E>>,
    ) -> Poll<Result<R, E>> {
        self.stepped(self.with_slot(f))
    }

    /// Like [`poll_step`](Self::poll_step) if the endpoint's lock is free;
    /// `None` without running `f` if it is held.
    pub(crate) fn try_poll_step<R, E: From<ConnectionLost>>(
        &self,
        f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> Step<Result<R, E>>,
    ) -> Option<Poll<Result<R, E>>> {
        match self.try_with_slot(f) {
            Ok(Some(step)) => Some(self.stepped(Ok(step))),
            Ok(None) => None,
            Err(stopped) => Some(self.stepped(Err(stopped))),
        }
    }

    /// What a step that ran (or found the endpoint stopped) gives: the
    /// driver is woken if it asked for it.
    fn stepped<R, E: From<ConnectionLost>>(
        &self,
        step: Result<Step<Result<R, E>>, DriverStopped>,
    ) -> Poll<Result<R, E>> {
        match step {
            Ok(step) => {
                if step.wake {
                    self.inner.driver.wake();
                }
                step.poll
            }
            Err(stopped) => Poll::Ready(Err(ConnectionLost::from(stopped).into())),
        }
    }

    /// Sends a message of any size, delivered to the peer whole and exactly
    /// once. Waits only while there is no room for it: the messages held
    /// until the peer acknowledges them fill
    /// [`Config::message_send_buffer`](crate::Config::message_send_buffer)
    /// (whatever the peer grants) or, for a message larger than a packet
    /// (which travels on a one-way stream of its own), the peer allows no
    /// more such streams. A message larger than the peer accepts
    /// ([`max_message_size`](Self::max_message_size)) is refused at once
    /// with [`SendError::TooLarge`], and the connection lives.
    /// Any `Into<Bytes>` will do (`Vec<u8>`, `String`, a `&'static [u8]`);
    /// a `Bytes` is sent without a copy.
    pub async fn send(&self, message: impl Into<Bytes>) -> Result<(), SendError> {
        let mut message = Some(message.into());
        let credits = self.inner.published.credits();
        poll_fn(|cx| {
            if let Some(poll) = self.try_poll_step(|slot, c| send_locked(cx, slot, c, &mut message))
            {
                return poll;
            }
            // The driver's turn holds the lock: hand the message off if
            // the connection had room for it, or wait for the lock.
            if let Some(message) = message.take_if(|m| credits.take_message(m.len())) {
                let slot = self.inner.slot;
                self.hand_off(move |state| state.send_handed_off(slot, message));
                return Poll::Ready(Ok(()));
            }
            self.poll_step(|slot, c| send_locked(cx, slot, c, &mut message))
        })
        .await
    }

    /// The next whole message from the peer. Messages delivered before the
    /// peer closed are all returned before the error that says it closed.
    /// Once a `recv` has taken the endpoint's lock, the driver moves the
    /// messages that arrive into a buffer that later calls take from
    /// without that lock.
    pub async fn recv(&self) -> Result<Bytes, ConnectionLost> {
        poll_fn(|cx| {
            if let Some((message, first)) = self.inner.delivered.get().and_then(|d| d.take()) {
                if first {
                    // The window opens once the driver hears of it.
                    let slot = self.inner.slot;
                    self.hand_off(move |state| state.report_taken(slot, Reader::Messages));
                }
                return Poll::Ready(Ok(message));
            }
            self.poll_step(|slot, mut connection| {
                // From now on the driver moves what arrives for `recv`.
                self.inner.delivered.get_or_init(|| slot.message_delivery());
                if let Some(message) = slot.take_delivered_message(connection.as_deref_mut()) {
                    return Step::ready(Ok(message), true);
                }
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

    /// Opens a bidirectional stream, waiting while the peer allows no more:
    /// its sending half and its receiving half, which two tasks may own.
    /// The peer can accept it soon after (this side announces the window
    /// it receives in at once), or with the first bytes sent on it.
    /// Streams are numbered in the order the calls return. Once an
    /// `open_bi` or `open_uni` has taken the endpoint's lock, later calls
    /// take the next number the peer's limit allows without that lock,
    /// and hand the opening off (see
    /// [`DriverHandle::hand_off`](crate::driver::DriverHandle::hand_off));
    /// only a call that finds the limit reached takes the lock again, to
    /// wait for the peer's credit.
    pub async fn open_bi(&self) -> Result<(SendStream, RecvStream), ConnectionLost> {
        let (id, credit) = self.open(Direction::Bi).await?;
        Ok((
            SendStream::held(self.clone(), id, credit),
            RecvStream::held(self.clone(), id),
        ))
    }

    /// The next bidirectional stream the peer opened, as its two halves.
    /// Once an `accept_bi` or `accept_uni` has taken the endpoint's lock,
    /// the driver accepts the streams the peer opens into a queue that
    /// later calls take from without that lock.
    pub async fn accept_bi(&self) -> Result<(SendStream, RecvStream), ConnectionLost> {
        let (id, credit) =
            poll_fn(|cx| self.poll_accepted(cx, StreamAccepts::poll_two_way)).await?;
        Ok((
            SendStream::held(self.clone(), id, credit),
            RecvStream::held(self.clone(), id),
        ))
    }

    /// Opens a one-way stream to the peer, waiting while the peer allows no
    /// more: this side writes, the peer reads. The peer learns of it with
    /// the first bytes sent on it. Like [`open_bi`](Self::open_bi), it
    /// takes the endpoint's lock the first time only (and to wait for the
    /// peer's credit).
    pub async fn open_uni(&self) -> Result<SendStream, ConnectionLost> {
        let (id, credit) = self.open(Direction::OneWay).await?;
        Ok(SendStream::held(self.clone(), id, credit))
    }

    /// The next one-way stream the peer opened (taken as
    /// [`accept_bi`](Self::accept_bi)'s are).
    pub async fn accept_uni(&self) -> Result<RecvStream, ConnectionLost> {
        let id = poll_fn(|cx| self.poll_accepted(cx, StreamAccepts::poll_one_way)).await?;
        Ok(RecvStream::held(self.clone(), id))
    }

    /// One poll for the next stream the driver accepted, as `take` gives
    /// it from the queue; the first makes the queue under the endpoint's
    /// lock. Waits until one comes or the connection ends.
    fn poll_accepted<T>(
        &self,
        cx: &Context<'_>,
        take: fn(&StreamAccepts, &Context<'_>) -> Poll<T>,
    ) -> Poll<Result<T, ConnectionLost>> {
        let accepts = match self.inner.stream_accepts.get() {
            Some(accepts) => accepts,
            None => match self.with_slot(|slot, connection| slot.stream_accepts(connection)) {
                Ok(made) => self.inner.stream_accepts.get_or_init(|| made),
                Err(stopped) => return Poll::Ready(Err(stopped.into())),
            },
        };
        if let Poll::Ready(next) = take(accepts, cx) {
            return Poll::Ready(Ok(next));
        }
        // Registered for the next stream above, and for the end here.
        self.poll_closed(cx).map(Err)
    }

    /// Opens the next stream of `direction`, waiting while the peer allows
    /// no more: its id, and the credit its writer hands off within. An id
    /// allotted without the endpoint's lock (see [`StreamOpens`]) is
    /// opened by a command handed off, which runs before any later call
    /// on the stream; the first open, and one that finds no id left, take
    /// the lock, which reads the peer's limit afresh.
    async fn open(&self, direction: Direction) -> Result<(StreamId, Arc<Credit>), ConnectionLost> {
        poll_fn(|cx| {
            let opens = self.inner.stream_opens.get();
            if let Some(id) = opens.and_then(|opens| opens.next(direction)) {
                let credit = Arc::new(Credit::default());
                let (slot, held) = (self.inner.slot, Arc::clone(&credit));
                self.hand_off(move |state| state.open_handed_off(slot, id, held));
                return Poll::Ready(Ok((id, credit)));
            }
            self.poll_step(|slot, connection| {
                let Some(connection) = connection else {
                    return Step::ready(Err(ended(slot, None)), false);
                };
                let opens = slot.stream_opens(connection);
                let opens = self.inner.stream_opens.get_or_init(|| opens);
                if let Some(id) = opens.next(direction) {
                    let credit = Arc::new(Credit::default());
                    slot.open_allotted(Some(connection), id, Arc::clone(&credit));
                    return Step::ready(Ok((id, credit)), false);
                }
                if slot.closed.is_some() || connection.is_closed() {
                    return Step::ready(Err(ended(slot, Some(connection))), false);
                }
                slot.open_stream.register(cx);
                Step::pending()
            })
        })
        .await
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
        let slot = self.inner.slot;
        let _ = self
            .inner
            .driver
            .with_node(|state| state.close_gracefully(now, slot, code, reason));
        self.closed().await;
    }

    /// Closes at once: unsent and unacknowledged data is abandoned.
    pub fn abort(&self, code: u64, reason: impl Into<Bytes>) {
        let reason = reason.into();
        let now = self.inner.driver.now();
        let _ = self.poll_step(|_, connection| match connection {
            Some(connection) => {
                connection.abort(now, code, reason);
                Step::ready(Ok::<_, ConnectionLost>(()), true)
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
    pub async fn closed(&self) -> ConnectionLost {
        poll_fn(|cx| self.poll_closed(cx)).await
    }

    /// Without the endpoint's lock: the driver publishes how the
    /// connection ended as it ends (see [`Published`]).
    fn poll_closed(&self, cx: &Context<'_>) -> Poll<ConnectionLost> {
        if let Poll::Ready(lost) = self.inner.published.poll_ended(cx) {
            return Poll::Ready(lost);
        }
        // The driver's end wakes the task registered above.
        if self.inner.driver.is_stopped() {
            return Poll::Ready(self.inner.driver.stopped().into());
        }
        Poll::Pending
    }

    /// The peer's address: where the connection's current path goes (it
    /// changes when the peer roams and the new path is taken up), or the
    /// last one it went to once the connection is over.
    pub fn remote_address(&self) -> SocketAddr {
        self.read_published(|s| s.remote)
    }

    /// Which way this connection's packets go: straight to the peer, or
    /// through a rendezvous's relay ([`Endpoint::connect_via`](crate::Endpoint::connect_via)
    /// falls back to one when no direct path opens). `None` once the
    /// endpoint freed the connection.
    pub fn path(&self) -> Option<proto::ConnectionPath> {
        let slot = self.inner.slot;
        self.inner
            .driver
            .with_node_unwoken(|state| {
                let handle = state.connection(slot).and_then(|(slot, _)| slot.handle)?;
                state.proto.path(handle)
            })
            .ok()
            .flatten()
    }

    /// How long after it started this connection, first carried by a
    /// relay, moved to a direct path (the peers probe their direct
    /// addresses while relayed); `None` if it did not, or once the
    /// endpoint freed it.
    pub fn went_direct_after(&self) -> Option<Duration> {
        let slot = self.inner.slot;
        self.inner
            .driver
            .with_node_unwoken(|state| {
                let handle = state.connection(slot).and_then(|(slot, _)| slot.handle)?;
                state.proto.went_direct_after(handle)
            })
            .ok()
            .flatten()
    }

    /// This side's address as the peer sees it: behind a NAT, the public
    /// address and port of its mapping, which this side cannot learn by
    /// itself. `None` until the peer's first report arrives (one round trip
    /// after the handshake) and once the endpoint freed the connection.
    pub fn observed_address(&self) -> Option<SocketAddr> {
        self.read_live(|s| s.live.as_ref().and_then(|live| live.observed_address))
    }

    /// The identity the peer proved: on a connection from
    /// [`Endpoint::connect`](crate::Endpoint::connect) the key it was given
    /// (the handshake proved it, on a simultaneous open too); on one a
    /// peer opened, the key its proof verified for, or `None` for an
    /// anonymous initiator (see [`Incoming`](crate::Incoming)). Once
    /// proven, it stays reported after the connection is over.
    pub fn peer_identity(&self) -> Option<PublicIdentity> {
        self.read_published(|s| s.identity.clone())
    }

    /// Refuses a connection a peer opened (see [`Incoming::refuse`](crate::Incoming::refuse)).
    pub(crate) fn refuse(&self, code: u64) {
        let now = self.inner.driver.now();
        let slot = self.inner.slot;
        let _ = self
            .inner
            .driver
            .with_node(|state| state.refuse(now, slot, code));
    }

    /// Figures about the connection: RTT, window, bytes, losses, path MTU,
    /// key updates (`None` once the endpoint freed it). Datagrams per
    /// system call are the endpoint's: see [`Endpoint::stats`](crate::Endpoint::stats).
    pub fn stats(&self) -> Option<ConnectionStats> {
        self.read_live(|s| s.live.as_ref().map(|live| live.stats))
    }
}

/// Runs `f` on the slot of `slot` and its protocol connection (the latter
/// `None` once the protocol freed it), and publishes what `f` changed if a
/// handle reads it; `None` if the slot is gone.
fn on_slot<R>(
    state: &mut EndpointState,
    slot: SlotId,
    f: impl FnOnce(&mut Slot, Option<&mut ProtoConnection>) -> R,
) -> Option<R> {
    state.connection(slot).map(|(s, mut c)| {
        let result = f(s, c.as_deref_mut());
        s.publish_if_watched(c.as_deref());
        result
    })
}

/// One poll of `send` of `message` under the endpoint's lock: behind the
/// messages parked for the connection, if any (handed-off sends the
/// protocol had no room for).
fn send_locked(
    cx: &Context<'_>,
    slot: &mut Slot,
    connection: Option<&mut ProtoConnection>,
    message: &mut Option<Bytes>,
) -> Step<Result<(), SendError>> {
    let Some(taken) = message.take() else {
        return Step::ready(Ok(()), false);
    };
    let Some(connection) = connection else {
        return Step::ready(Err(ended(slot, None).into()), false);
    };
    if slot.has_parked_messages() {
        // They go first; room for them wakes this sender.
        *message = Some(taken);
        slot.send.register(cx);
        return Step::pending();
    }
    match connection.send_message(taken) {
        Ok(()) => {
            slot.sent(connection);
            Step::ready(Ok(()), true)
        }
        Err(proto::SendError::Blocked(back)) => {
            *message = Some(back);
            slot.send.register(cx);
            Step::pending()
        }
        Err(proto::SendError::MessageTooLarge { size, limit }) => {
            Step::ready(Err(SendError::TooLarge { size, limit }), false)
        }
        Err(_) => Step::ready(Err(ended(slot, Some(connection)).into()), false),
    }
}
