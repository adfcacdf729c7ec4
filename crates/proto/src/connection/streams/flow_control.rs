//! Flow control (RFC 9000 §4), for a connection and for each stream: the
//! receiver advertises how many bytes it will buffer, the sender never goes
//! past it, and nothing accepted is ever dropped for lack of room.
//!
//! [`RecvWindow`] is the receiver's side: it refuses data past what it
//! advertised and, as the application reads, advertises more — once half
//! the window has been read, so updates stay rare. [`SendCredit`] is the
//! sender's side: what the peer allows, what was used, and one "blocked"
//! report per limit so the peer learns the sender waits on it.

/// The peer sent past the limit it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("flow control: {received} bytes received, {limit} allowed")]
pub struct FlowControlError {
    /// Bytes received, counted as the limit counts them.
    pub received: u64,
    /// The limit that was advertised.
    pub limit: u64,
}

/// What this side lets its peer send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvWindow {
    /// Bytes buffered for the application at most.
    window: u64,
    /// The offset advertised to the peer.
    limit: u64,
    /// Bytes received (the highest offset, or their sum over streams).
    received: u64,
    /// Bytes the application has taken.
    consumed: u64,
}

impl RecvWindow {
    /// A window of `window` bytes, advertised at once.
    pub(crate) fn new(window: u64) -> Self {
        Self {
            window,
            limit: window,
            received: 0,
            consumed: 0,
        }
    }

    /// A window of `window` bytes of which only `initial` are allowed until
    /// the first [`poll_update`](Self::poll_update): the peer starts at a
    /// limit both sides know before any frame was exchanged.
    pub(crate) fn with_initial_limit(window: u64, initial: u64) -> Self {
        Self {
            limit: initial.min(window),
            ..Self::new(window)
        }
    }

    /// The offset advertised to the peer.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// The highest offset received.
    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// `bytes` more arrived (the growth of the highest offset received).
    pub(crate) fn on_received(&mut self, bytes: u64) -> Result<(), FlowControlError> {
        let received = self.received.saturating_add(bytes);
        if received > self.limit {
            return Err(FlowControlError {
                received,
                limit: self.limit,
            });
        }
        self.received = received;
        Ok(())
    }

    /// The application took `bytes` (or a finished stream's bytes count as
    /// taken).
    pub(crate) fn on_consumed(&mut self, bytes: u64) {
        self.consumed = self.consumed.saturating_add(bytes).min(self.received);
    }

    /// A new limit to advertise, when half the window has been read since
    /// the last one.
    pub(crate) fn poll_update(&mut self) -> Option<u64> {
        let raise = self.raise_due()?;
        self.limit += raise;
        Some(self.limit)
    }

    /// How far the limit is to move, when half the window has been read
    /// since the last update: the credit the next update grants.
    pub(crate) fn raise_due(&self) -> Option<u64> {
        let raise = self
            .consumed
            .saturating_add(self.window)
            .saturating_sub(self.limit);
        (raise > 0 && raise >= self.window / 2).then_some(raise)
    }

    /// Credit granted and not used: what the peer may still send.
    pub(crate) fn unused(&self) -> u64 {
        self.limit - self.received
    }
}

/// What the peer lets this side send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendCredit {
    limit: u64,
    used: u64,
    /// The limit at which "blocked" was last reported.
    reported_blocked: Option<u64>,
}

impl SendCredit {
    /// The peer's initial limit.
    pub(crate) fn new(limit: u64) -> Self {
        Self {
            limit,
            used: 0,
            reported_blocked: None,
        }
    }

    /// Bytes that may still be sent.
    pub(crate) fn available(&self) -> u64 {
        self.limit - self.used
    }

    /// The peer's limit (an offset).
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// `bytes` of new data were sent (never more than [`available`](Self::available)).
    pub(crate) fn consume(&mut self, bytes: u64) {
        self.used = self.used.saturating_add(bytes).min(self.limit);
    }

    /// The peer raised its limit; a lower or repeated one changes nothing
    /// (limits only grow, and frames arrive out of order).
    pub(crate) fn raise(&mut self, limit: u64) {
        self.limit = self.limit.max(limit);
    }

    /// The limit to report as blocking, once per limit, when nothing is left.
    #[cfg(test)]
    pub(crate) fn poll_blocked(&mut self) -> Option<u64> {
        if self.available() == 0 && self.reported_blocked != Some(self.limit) {
            self.reported_blocked = Some(self.limit);
            return Some(self.limit);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_raise_due_is_what_the_update_grants_and_unused_credit_follows() {
        let mut window = RecvWindow::with_initial_limit(1000, 256);
        assert_eq!(window.unused(), 256);
        window.on_received(200).expect("within");
        assert_eq!(window.unused(), 56);
        // Nothing read: an update would raise the limit by 744 (past half
        // the window), to 1000.
        assert_eq!(window.raise_due(), Some(744));
        window.on_consumed(100);
        assert_eq!(window.raise_due(), Some(844));
        assert_eq!(window.poll_update(), Some(1100));
        assert_eq!(window.raise_due(), None);
        assert_eq!(window.unused(), 900);
    }

    #[test]
    fn the_window_slides_after_half_of_it_is_read() {
        let mut rx = RecvWindow::new(1000);
        rx.on_received(1000).expect("within the limit");
        assert_eq!(
            rx.on_received(1),
            Err(FlowControlError {
                received: 1001,
                limit: 1000
            })
        );
        rx.on_consumed(499);
        assert_eq!(rx.poll_update(), None);
        rx.on_consumed(1);
        assert_eq!(rx.poll_update(), Some(1500));
        assert_eq!(rx.poll_update(), None);
        rx.on_received(500).expect("the new limit");
    }

    #[test]
    fn the_sender_reports_blocked_once_per_limit() {
        let mut tx = SendCredit::new(100);
        tx.consume(100);
        assert_eq!(tx.poll_blocked(), Some(100));
        assert_eq!(tx.poll_blocked(), None);
        tx.raise(50);
        assert_eq!(tx.limit(), 100);
        tx.raise(300);
        assert_eq!(tx.available(), 200);
        tx.consume(200);
        assert_eq!(tx.poll_blocked(), Some(300));
    }

    proptest! {
        /// A sender that respects its credit and a receiver that reads at
        /// random never trip the receiver's check, and the receiver never
        /// buffers more than its window.
        #[test]
        fn a_well_behaved_pair_never_violates_and_never_over_buffers(
            window in 1u64..10_000,
            steps in proptest::collection::vec((any::<bool>(), 0u64..5000), 0..300),
        ) {
            let mut rx = RecvWindow::new(window);
            let mut tx = SendCredit::new(rx.limit());
            let (mut received, mut consumed) = (0u64, 0u64);
            for (send, n) in steps {
                if send {
                    let n = n.min(tx.available());
                    tx.consume(n);
                    prop_assert!(rx.on_received(n).is_ok());
                    received += n;
                } else {
                    let n = n.min(received - consumed);
                    rx.on_consumed(n);
                    consumed += n;
                    if let Some(limit) = rx.poll_update() {
                        tx.raise(limit);
                    }
                }
                prop_assert!(received - consumed <= window);
            }
        }
    }
}
