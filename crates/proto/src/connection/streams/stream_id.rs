//! Stream numbers and how many each side may open.
//!
//! A stream id carries who opened it and what kind of stream it is, in its
//! low bits (as in RFC 9000 §2.1), so both peers open streams at once
//! without ever picking the same number: bit 0 is the opener (0: the
//! connection's initiator, 1: its responder), bit 1 the direction (0: both
//! ways, 1: one way, from the opener). A one-way stream's bit 2 says whose
//! it is (0: it carries one large message, 1: the application's), so the
//! two kinds keep apart and are counted apart; its index is above that
//! bit. Each side tells the other how many streams of each kind it may
//! open ([`StreamLimits`]); a frame for a stream beyond that, or flowing
//! the wrong way, is a protocol error.

/// Which side of the connection an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// It sent the intro.
    Initiator,
    /// It answered the intro.
    Responder,
}

/// Whether a stream flows both ways or only from its opener, and whose
/// one-way stream it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Both ways: an application stream.
    Bi,
    /// From the opener to the other side only, carrying one message too
    /// large for a packet.
    Uni,
    /// From the opener to the other side only: an application stream.
    OneWay,
}

impl Direction {
    /// Whether the application reads and writes it (a message's stream is
    /// the protocol's own).
    pub fn is_application(self) -> bool {
        self != Self::Uni
    }
}

/// A stream's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The `index`-th stream of its kind opened by `side`.
    pub fn new(side: Side, direction: Direction, index: u64) -> Self {
        let opener = u64::from(side == Side::Responder);
        Self(match direction {
            Direction::Bi => index << 2 | opener,
            Direction::Uni => index << 3 | 0b010 | opener,
            Direction::OneWay => index << 3 | 0b110 | opener,
        })
    }

    /// Who opened it.
    pub fn opener(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Initiator
        } else {
            Side::Responder
        }
    }

    /// Which way it flows, and whose one-way stream it is.
    pub fn direction(self) -> Direction {
        if self.0 & 0b010 == 0 {
            Direction::Bi
        } else if self.0 & 0b100 == 0 {
            Direction::Uni
        } else {
            Direction::OneWay
        }
    }

    /// Its position among the streams of its kind and opener.
    pub fn index(self) -> u64 {
        match self.direction() {
            Direction::Bi => self.0 >> 2,
            Direction::Uni | Direction::OneWay => self.0 >> 3,
        }
    }
}

/// A peer used a stream it may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamIdError {
    /// Beyond the number of streams it was allowed to open.
    #[error("stream {0:?} is beyond the peer's stream limit")]
    Limit(StreamId),
    /// Data on a one-way stream of ours, which only we send on.
    #[error("stream {0:?} is one-way from this side")]
    WrongDirection(StreamId),
}

/// Streams opened and allowed, for one direction, on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// Streams this side opened.
    opened_local: u64,
    /// Streams the peer lets this side open.
    allowed_local: u64,
    /// Streams this side lets the peer open (advertised).
    allowed_remote: u64,
}

/// Both sides' stream counts of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamLimits {
    side: Side,
    bi: Counts,
    uni: Counts,
    one_way: Counts,
}

impl StreamLimits {
    /// This side is `side`; it lets the peer open `allowed` streams of
    /// each kind (bidirectional, message, one-way), and may open
    /// `peer_allows` until the peer says more.
    pub(crate) fn new(side: Side, allowed: [u64; 3], peer_allows: [u64; 3]) -> Self {
        let counts = |i: usize| Counts {
            opened_local: 0,
            allowed_local: peer_allows[i],
            allowed_remote: allowed[i],
        };
        Self {
            side,
            bi: counts(0),
            uni: counts(1),
            one_way: counts(2),
        }
    }

    fn counts(&mut self, direction: Direction) -> &mut Counts {
        match direction {
            Direction::Bi => &mut self.bi,
            Direction::Uni => &mut self.uni,
            Direction::OneWay => &mut self.one_way,
        }
    }

    /// Opens the next local stream of `direction`, if the peer allows one more.
    pub(crate) fn open(&mut self, direction: Direction) -> Option<StreamId> {
        let side = self.side;
        let counts = self.counts(direction);
        if counts.opened_local >= counts.allowed_local {
            return None;
        }
        counts.opened_local += 1;
        Some(StreamId::new(side, direction, counts.opened_local - 1))
    }

    /// How many streams of `direction` this side has opened, and how many
    /// the peer lets it open, in all.
    pub(crate) fn local(&self, direction: Direction) -> (u64, u64) {
        let counts = match direction {
            Direction::Bi => &self.bi,
            Direction::Uni => &self.uni,
            Direction::OneWay => &self.one_way,
        };
        (counts.opened_local, counts.allowed_local)
    }

    /// How many streams of `direction` this side lets the peer open, in
    /// all.
    pub(crate) fn remote_allowed(&self, direction: Direction) -> u64 {
        match direction {
            Direction::Bi => self.bi.allowed_remote,
            Direction::Uni => self.uni.allowed_remote,
            Direction::OneWay => self.one_way.allowed_remote,
        }
    }

    /// The peer raised how many streams of `direction` this side may open
    /// (frames may arrive out of order: only a raise counts). Whether the
    /// limit rose.
    pub(crate) fn on_max_streams(&mut self, direction: Direction, count: u64) -> bool {
        let counts = self.counts(direction);
        let raised = count > counts.allowed_local;
        counts.allowed_local = counts.allowed_local.max(count);
        raised
    }

    /// This side lets the peer open `count` streams of `direction` in all.
    pub(crate) fn allow_remote(&mut self, direction: Direction, count: u64) {
        let counts = self.counts(direction);
        counts.allowed_remote = counts.allowed_remote.max(count);
    }

    /// Checks a stream a frame from the peer names: one the peer may have
    /// opened, or one of ours it may send on. `sends_data` is whether the
    /// frame carries data toward this side (a stream frame) rather than
    /// about our sending (stop-sending, flow control).
    #[inline]
    pub(crate) fn check_remote(&self, id: StreamId, sends_data: bool) -> Result<(), StreamIdError> {
        let counts = match id.direction() {
            Direction::Bi => &self.bi,
            Direction::Uni => &self.uni,
            Direction::OneWay => &self.one_way,
        };
        if id.opener() == self.side {
            // One of ours: it must exist, and data may come back only on bi.
            if id.index() >= counts.opened_local {
                return Err(StreamIdError::Limit(id));
            }
            if sends_data && id.direction() != Direction::Bi {
                return Err(StreamIdError::WrongDirection(id));
            }
            return Ok(());
        }
        if id.index() >= counts.allowed_remote {
            return Err(StreamIdError::Limit(id));
        }
        if !sends_data && id.direction() != Direction::Bi {
            // The peer's one-way stream: we never send on it.
            return Err(StreamIdError::WrongDirection(id));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_opener_direction_and_index_without_collisions() {
        let mut seen = std::collections::HashSet::new();
        for side in [Side::Initiator, Side::Responder] {
            for direction in [Direction::Bi, Direction::Uni, Direction::OneWay] {
                for index in 0..50 {
                    let id = StreamId::new(side, direction, index);
                    assert_eq!(
                        (id.opener(), id.direction(), id.index()),
                        (side, direction, index)
                    );
                    assert!(seen.insert(id));
                }
            }
        }
    }

    #[test]
    fn opening_stops_at_the_peers_limit_until_it_raises_it() {
        let mut limits = StreamLimits::new(Side::Initiator, [10; 3], [2, 1, 1]);
        assert_eq!(limits.open(Direction::Bi), Some(StreamId(0)));
        assert_eq!(limits.open(Direction::Bi), Some(StreamId(4)));
        assert_eq!(limits.open(Direction::Bi), None);
        assert!(!limits.on_max_streams(Direction::Bi, 1));
        assert_eq!(
            limits.open(Direction::Bi),
            None,
            "a lower limit is no limit"
        );
        assert!(limits.on_max_streams(Direction::Bi, 3));
        assert_eq!(limits.open(Direction::Bi), Some(StreamId(8)));
        assert_eq!(limits.open(Direction::Uni), Some(StreamId(2)));
        assert_eq!(limits.open(Direction::Uni), None);
        // The application's one-way streams are counted apart.
        assert_eq!(limits.open(Direction::OneWay), Some(StreamId(6)));
        assert_eq!(limits.open(Direction::OneWay), None);
    }

    #[test]
    fn a_peer_is_held_to_its_limit_and_to_each_streams_direction() {
        let mut me = StreamLimits::new(Side::Responder, [2, 1, 1], [5; 3]);
        let peer_bi = |i| StreamId::new(Side::Initiator, Direction::Bi, i);
        let peer_uni = |i| StreamId::new(Side::Initiator, Direction::Uni, i);
        assert_eq!(me.check_remote(peer_bi(1), true), Ok(()));
        assert_eq!(
            me.check_remote(peer_bi(2), true),
            Err(StreamIdError::Limit(peer_bi(2)))
        );
        assert_eq!(me.check_remote(peer_uni(0), true), Ok(()));
        assert_eq!(
            me.check_remote(peer_uni(0), false),
            Err(StreamIdError::WrongDirection(peer_uni(0)))
        );
        me.allow_remote(Direction::Bi, 3);
        assert_eq!(me.check_remote(peer_bi(2), true), Ok(()));
        // Our own streams: only those opened, and no data back on one-way ones.
        let ours = me.open(Direction::Uni).expect("allowed");
        assert_eq!(
            me.check_remote(ours, true),
            Err(StreamIdError::WrongDirection(ours))
        );
        assert_eq!(me.check_remote(ours, false), Ok(()));
        let never_opened = StreamId::new(Side::Responder, Direction::Bi, 0);
        assert_eq!(
            me.check_remote(never_opened, true),
            Err(StreamIdError::Limit(never_opened))
        );
    }
}
