//! Rendezvous signals: the Register, ConnectVia, Introduce,
//! IntroductionRefused and relay frames a connection carries for its
//! endpoint, which acts on them (`endpoint::rendezvous`, `endpoint::relay`). The connection only carries them
//! reliably: each goes until acknowledged, and again if its packet is lost.
//! A frame received is queued for the endpoint, which takes it right after
//! the datagram that brought it.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use tern_wire::{
    ConnectVia, Frame, Introduce, IntroductionRefused, Register, RelayGrant, RelayRefused,
    RelayRequest,
};

use super::lazy::Lazy;

/// Signals held unacknowledged, at most: past it the oldest is given up.
/// The endpoint sends few (one per introduction), so this is never reached
/// by an honest exchange.
const MAX_HELD: usize = 64;

/// Signals received and not yet taken, at most: the endpoint takes them
/// after every datagram, so this bounds what one packet can queue.
const MAX_RECEIVED: usize = 16;

/// One rendezvous frame, owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Register(Register),
    ConnectVia(ConnectVia),
    Introduce(Introduce),
    Refused(IntroductionRefused),
    RelayRequest(RelayRequest),
    RelayGrant(RelayGrant),
    RelayRefused(RelayRefused),
}

impl Signal {
    /// The signal a frame carries, if it is one.
    pub(crate) fn of(frame: &Frame<'_>) -> Option<Self> {
        Some(match *frame {
            Frame::Register(r) => Self::Register(r),
            Frame::ConnectVia(c) => Self::ConnectVia(c),
            Frame::Introduce(i) => Self::Introduce(i),
            Frame::IntroductionRefused(r) => Self::Refused(r),
            Frame::RelayRequest(r) => Self::RelayRequest(r),
            Frame::RelayGrant(g) => Self::RelayGrant(g),
            Frame::RelayRefused(r) => Self::RelayRefused(r),
            _ => return None,
        })
    }

    pub(crate) fn frame(&self) -> Frame<'static> {
        match *self {
            Self::Register(r) => Frame::Register(r),
            Self::ConnectVia(c) => Frame::ConnectVia(c),
            Self::Introduce(i) => Frame::Introduce(i),
            Self::Refused(r) => Frame::IntroductionRefused(r),
            Self::RelayRequest(r) => Frame::RelayRequest(r),
            Self::RelayGrant(g) => Frame::RelayGrant(g),
            Self::RelayRefused(r) => Frame::RelayRefused(r),
        }
    }
}

/// The signals one connection sends and receives: nothing until the first
/// one (most connections never carry any), so an idle connection pays a
/// pointer for them. Never released: the ids of signals in packets still
/// in flight must not be given to new ones.
#[derive(Debug, Default)]
pub(crate) struct Signals(Lazy<State>);

impl Signals {
    /// Queues `signal` to send.
    pub(crate) fn send(&mut self, signal: Signal) {
        self.0.get_or_default().send(signal);
    }

    /// The next signal to send, with its id; it leaves the queue.
    pub(crate) fn next_due(&mut self) -> Option<(u64, Signal)> {
        self.0.get_mut()?.next_due()
    }

    /// A signal taken by `next_due` did not fit: it goes first next time.
    pub(crate) fn put_back(&mut self, id: u64) {
        if let Some(state) = self.0.get_mut() {
            state.due.push_front(id);
        }
    }

    pub(crate) fn has_due(&self) -> bool {
        self.0.get().is_some_and(|state| !state.due.is_empty())
    }

    pub(crate) fn on_acked(&mut self, id: u64) {
        if let Some(state) = self.0.get_mut() {
            state.held.remove(&id);
        }
    }

    pub(crate) fn on_lost(&mut self, id: u64) {
        if let Some(state) = self.0.get_mut() {
            state.on_lost(id);
        }
    }

    pub(crate) fn on_received(&mut self, signal: Signal) {
        self.0.get_or_default().on_received(signal);
    }

    pub(crate) fn poll_received(&mut self) -> Option<Signal> {
        self.0.get_mut()?.received.pop_front()
    }
}

/// What [`Signals`] holds once a connection carries one.
#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// To send, by id, oldest first.
    due: VecDeque<u64>,
    /// Every signal not yet acknowledged, by id.
    held: FxHashMap<u64, Signal>,
    received: VecDeque<Signal>,
    /// Received signals dropped because the queue was full.
    dropped: u64,
}

impl State {
    fn send(&mut self, signal: Signal) {
        if self.held.len() >= MAX_HELD
            && let Some(&oldest) = self.held.keys().min()
        {
            self.held.remove(&oldest);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.held.insert(id, signal);
        self.due.push_back(id);
    }

    fn next_due(&mut self) -> Option<(u64, Signal)> {
        while let Some(id) = self.due.pop_front() {
            if let Some(&signal) = self.held.get(&id) {
                return Some((id, signal));
            }
        }
        None
    }

    fn on_lost(&mut self, id: u64) {
        if self.held.contains_key(&id) && !self.due.contains(&id) {
            self.due.push_back(id);
        }
    }

    fn on_received(&mut self, signal: Signal) {
        if self.received.len() >= MAX_RECEIVED {
            self.dropped += 1;
            return;
        }
        self.received.push_back(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_without_signals_holds_nothing_for_them() {
        let mut signals = Signals::default();
        assert!(signals.next_due().is_none() && !signals.has_due());
        signals.on_lost(0);
        assert!(!signals.0.holds_memory());
        assert_eq!(size_of::<Signals>(), size_of::<usize>());
    }

    #[test]
    fn a_signal_goes_until_acknowledged_and_again_when_lost() {
        let mut signals = Signals::default();
        signals.send(Signal::Register(Register::default()));
        let (id, signal) = signals.next_due().expect("due");
        assert_eq!(signal, Signal::Register(Register::default()));
        assert!(signals.next_due().is_none());
        signals.on_lost(id);
        assert_eq!(signals.next_due().map(|(i, _)| i), Some(id));
        signals.on_acked(id);
        signals.on_lost(id);
        assert!(signals.next_due().is_none(), "acknowledged: not resent");
    }

    #[test]
    fn what_is_held_and_received_is_bounded() {
        let mut signals = State::default();
        for _ in 0..MAX_HELD + 10 {
            signals.send(Signal::Register(Register::default()));
        }
        assert_eq!(signals.held.len(), MAX_HELD);
        let sent = std::iter::from_fn(|| signals.next_due()).count();
        assert_eq!(sent, MAX_HELD, "the oldest were given up");
        for _ in 0..MAX_RECEIVED + 3 {
            signals.on_received(Signal::Register(Register::default()));
        }
        assert_eq!(signals.dropped, 3);
        assert_eq!(
            std::iter::from_fn(|| signals.received.pop_front()).count(),
            MAX_RECEIVED
        );
    }
}
