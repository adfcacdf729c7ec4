//! [`Published`]: what a connection's handles read of it (figures, the
//! peer's address, identity and limits), copied out by the driver so that
//! reading it never waits for the endpoint's lock; [`PublishedEndpoint`],
//! the endpoint's own figures likewise.
//!
//! The endpoint's lock is held by the driver for a whole turn, and under
//! bulk load a thread preempted while it holds it makes a handle wait for
//! milliseconds (docs/benchmarks.md, "The endpoint lock under load"). A
//! connection that a handle reads is *watched*: the driver publishes it at
//! the end of every turn, and every handle call that changes the
//! connection under the endpoint's lock publishes it too, so a read sees
//! what the caller's own earlier calls did. This lock is held only for a
//! copy. A connection nobody read for [`WATCH_FOR`] is no longer
//! published each turn (a turn costs nothing for connections nobody
//! looks at); the next read takes the endpoint's lock once, publishes,
//! and watches it again. How the connection ended is published as it
//! ends, with the tasks that wait for it, so that `closed()` never takes
//! the endpoint's lock either.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use super::error::ConnectionLost;
use super::state::{SendCredits, Wakers};

use crate::proto::{
    Connection as ProtoConnection, ConnectionStats, Endpoint as ProtoEndpoint, EndpointStats,
    PublicIdentity,
};

/// How long a connection stays watched after the last read of what was
/// published of it.
pub(crate) const WATCH_FOR: Duration = Duration::from_secs(1);

/// What was published of one connection, as one copy.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// The live connection's figures: `None` once the protocol freed the
    /// connection, and until a handle first reads them. Boxed, so that
    /// the connections nobody looks at (most, on a busy server) do not
    /// carry them.
    pub(crate) live: Option<Box<Live>>,
    /// The peer's address, the last seen once the connection is freed.
    pub(crate) remote: SocketAddr,
    /// The identity the peer proved, kept likewise.
    pub(crate) identity: Option<PublicIdentity>,
}

/// What is published of a connection the protocol still holds.
#[derive(Clone, Debug)]
pub(crate) struct Live {
    pub(crate) stats: ConnectionStats,
    pub(crate) max_message_size: u64,
    pub(crate) max_datagram_size: usize,
    pub(crate) observed_address: Option<SocketAddr>,
}

impl Live {
    fn of(connection: &ProtoConnection) -> Self {
        Self {
            stats: connection.stats(),
            max_message_size: connection.peer_max_message_size(),
            max_datagram_size: connection.max_datagram_size(),
            observed_address: connection.observed_address(),
        }
    }
}

impl Snapshot {
    /// The `connection`'s peer address, and the identity it proved once
    /// it has (an identity seen is kept).
    fn see_peer(&mut self, connection: &ProtoConnection) {
        self.remote = connection.remote();
        if let Some(identity) = connection.peer_identity()
            && self.identity.as_ref() != Some(identity)
        {
            self.identity = Some(identity.clone());
        }
    }

    fn new(remote: SocketAddr) -> Self {
        Self {
            live: None,
            remote,
            identity: None,
        }
    }
}

/// One connection's published state, shared by its slot (the driver's
/// side) and its handles.
#[derive(Debug)]
pub(crate) struct Published {
    snapshot: Mutex<Snapshot>,
    /// The driver publishes the connection at the end of every turn.
    watched: AtomicBool,
    /// A handle read it since the driver's last look.
    read: AtomicBool,
    /// How the connection ended, once it has, and the tasks waiting for
    /// it to end (boxed: 8 bytes on a connection that lives).
    ended: Mutex<(Option<Box<ConnectionLost>>, Wakers)>,
    /// How far the handles may hand off messages and datagrams while the
    /// driver's turn holds the endpoint's lock (here rather than in an
    /// allocation of their own: every connection has both).
    credits: SendCredits,
}

impl Published {
    pub(crate) fn new(remote: SocketAddr) -> Self {
        Self {
            snapshot: Mutex::new(Snapshot::new(remote)),
            watched: AtomicBool::new(false),
            read: AtomicBool::new(false),
            ended: Mutex::default(),
            credits: SendCredits::default(),
        }
    }

    /// How far the handles may hand off sends without the endpoint's lock.
    pub(crate) fn credits(&self) -> &SendCredits {
        &self.credits
    }

    /// Publishes how the connection ended (the first word stays) and wakes
    /// the tasks waiting for it.
    pub(crate) fn publish_ended(&self, lost: ConnectionLost) {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        ended.0.get_or_insert_with(|| Box::new(lost));
        ended.1.wake_all();
    }

    /// Wakes the tasks waiting for the connection to end, without a word:
    /// the endpoint stopped, and they find it so.
    pub(crate) fn wake_end_waiters(&self) {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        ended.1.wake_all();
    }

    /// How the connection ended, or `Pending` with the task of `cx`
    /// registered to be woken when it does.
    pub(crate) fn poll_ended(&self, cx: &Context<'_>) -> Poll<ConnectionLost> {
        let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        match &ended.0 {
            Some(lost) => Poll::Ready(ConnectionLost::clone(lost)),
            None => {
                ended.1.register(cx);
                Poll::Pending
            }
        }
    }

    /// Whether the driver publishes it every turn: what was published is
    /// then as fresh as the last turn or the last handle call.
    pub(crate) fn is_watched(&self) -> bool {
        self.watched.load(Ordering::Acquire)
    }

    pub(crate) fn set_watched(&self, watched: bool) {
        self.watched.store(watched, Ordering::Release);
    }

    /// Whether a handle read it since the last call (which forgets it).
    pub(crate) fn take_read(&self) -> bool {
        self.read.swap(false, Ordering::AcqRel)
    }

    /// Runs `f` on what was last published (under this lock only, held
    /// for `f`: keep it a copy).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        self.read.store(true, Ordering::Release);
        f(&self.snapshot.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The peer's address and the identity it proved, as last published:
    /// the driver's copy too (a slot keeps none of its own), so reading
    /// it does not count as a handle's read.
    pub(crate) fn peer(&self) -> (SocketAddr, Option<PublicIdentity>) {
        let snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
        (snapshot.remote, snapshot.identity.clone())
    }

    /// Publishes who is at the other end of the `connection` alone (the
    /// peer's address and the identity it proved): what a connection
    /// nobody reads yet needs, so that the handles still say it once the
    /// endpoint has stopped. `None` (freed) keeps the last published.
    pub(crate) fn publish_peer(&self, connection: Option<&ProtoConnection>) {
        if let Some(connection) = connection {
            let mut snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
            snapshot.see_peer(connection);
        }
    }

    /// Publishes the `connection` (`None`: freed; its peer stays as last
    /// published).
    pub(crate) fn publish(&self, connection: Option<&ProtoConnection>) {
        let live = connection.map(Live::of);
        let mut snapshot = self.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
        match (live, &mut snapshot.live) {
            (Some(live), Some(held)) => **held = live,
            (live, held) => *held = live.map(Box::new),
        }
        if let Some(connection) = connection {
            snapshot.see_peer(connection);
        }
    }
}

/// The endpoint's figures (the protocol's counters and the connections it
/// holds), published by the driver at the end of every turn and by every
/// endpoint-level call that changes them, so that
/// [`Endpoint::stats`](crate::Endpoint::stats) never waits for the
/// endpoint's lock. This lock is held only for a copy.
#[derive(Debug, Default)]
pub(crate) struct PublishedEndpoint(Mutex<(EndpointStats, usize)>);

impl PublishedEndpoint {
    /// Publishes the figures of `endpoint`.
    pub(crate) fn publish(&self, endpoint: &ProtoEndpoint) {
        let figures = (endpoint.stats(), endpoint.len());
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = figures;
    }

    /// What was last published: the protocol's counters and the number of
    /// connections held.
    pub(crate) fn read(&self) -> (EndpointStats, usize) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
