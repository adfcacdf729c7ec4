//! Flow control (RFC 9000 §4), for a connection and for each stream: the
//! receiver advertises how many bytes it will buffer, the sender never goes
//! past it, and nothing accepted is ever dropped for lack of room.
//!
//! [`RecvWindow`] is the receiver's side: it refuses data past what it
//! advertised and, as the application reads, advertises more — once half
//! the window has been read, so updates stay rare. A window that starts
//! small grows like an auto-tuned TCP receive window: it doubles each time
//! the application has taken half of it, up to the configured size. So a
//! connection that carried a few small messages promises its peer only the
//! initial window, and only the bytes the application really takes earn a
//! larger one (the window in force is at most four times what was taken,
//! or the initial window). Growth follows what was taken, not the time it took: a
//! rule on the round-trip time would need the clock and the RTT in every
//! read, and a slow reader's larger window is still bounded by the
//! configured size and charged to the endpoint's memory budget.
//! [`SendCredit`] is the
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
    /// Bytes buffered for the application at most: the configured size.
    window: u64,
    /// The window in force, at most `window`: it grows, doubling, as the
    /// application takes what it lets in.
    current: u64,
    /// The offset advertised to the peer.
    limit: u64,
    /// Bytes received (the highest offset, or their sum over streams).
    received: u64,
    /// Bytes the application has taken.
    consumed: u64,
    /// Bytes received that the application cannot take yet (the start of
    /// large messages, held until whole), as its owner last counted them.
    held_back: u64,
}

impl RecvWindow {
    /// A window of `window` bytes, advertised at once.
    pub(crate) fn new(window: u64) -> Self {
        Self {
            window,
            current: window,
            limit: window,
            received: 0,
            consumed: 0,
            held_back: 0,
        }
    }

    /// A window that starts at `initial` bytes (a limit both sides know
    /// before any frame was exchanged) and grows to `window` as the
    /// application takes the bytes it lets in.
    pub(crate) fn with_initial_limit(window: u64, initial: u64) -> Self {
        let initial = initial.min(window);
        Self {
            current: initial,
            limit: initial,
            ..Self::new(window)
        }
    }

    /// The window in force.
    pub(crate) fn current(&self) -> u64 {
        self.current
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

    /// Of the bytes received and not taken, `bytes` cannot be taken yet:
    /// see [`raise_due`](Self::raise_due).
    pub(crate) fn set_held_back(&mut self, bytes: u64) {
        self.held_back = bytes;
    }

    /// A new limit to advertise, when half the window in force has been
    /// read since the last one, or more than half of it is held back; the
    /// window doubles with it (up to its configured size).
    pub(crate) fn poll_update(&mut self) -> Option<u64> {
        let raise = self.raise_due()?;
        self.limit += raise;
        self.current = self.next_window();
        Some(self.limit)
    }

    /// How far the limit is to move, when half the window in force has
    /// been read since the last update, or more than half of it is held
    /// back: the credit the next update grants, which lets in the doubled
    /// window beyond what was read.
    ///
    /// The second case is for the bytes the application cannot take yet
    /// (see [`set_held_back`](Self::set_held_back)): when they fill more
    /// than half the window in force, nothing read would ever reach half
    /// of it, and the peer, with too little credit left to finish any of
    /// them, would wait for good. (Waiting until the peer used the last of
    /// its credit is not enough: it may stop short, with only a small
    /// message too large for what is left to send.) RFC 9000 §4.2: "a receiver MUST NOT wait for a
    /// STREAM_DATA_BLOCKED or DATA_BLOCKED frame before sending a
    /// MAX_STREAM_DATA or MAX_DATA frame; doing so could result in the
    /// sender being blocked for the rest of the connection". Bytes the
    /// application could take and does not earn nothing: a peer cannot
    /// grow the window with messages left untaken. The growth stays within
    /// the configured size, and within four times what was held back.
    pub(crate) fn raise_due(&self) -> Option<u64> {
        let read_since = self
            .consumed
            .saturating_add(self.current)
            .saturating_sub(self.limit);
        let read_half = read_since > 0 && read_since >= self.current / 2;
        let held_back = self.held_back > self.current / 2;
        if !read_half && !held_back {
            return None;
        }
        let raise = self
            .consumed
            .saturating_add(self.next_window())
            .saturating_sub(self.limit);
        (raise > 0).then_some(raise)
    }

    /// The window the next update puts in force.
    fn next_window(&self) -> u64 {
        self.current.saturating_mul(2).min(self.window)
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
        // Nothing read, or less than half the window in force: no update.
        assert_eq!(window.raise_due(), None);
        window.on_consumed(100);
        assert_eq!(window.raise_due(), None);
        // Half of 256 read: the update lets in the doubled window, 512
        // bytes beyond what was read.
        window.on_consumed(28);
        assert_eq!(window.raise_due(), Some(128 + 512 - 256));
        assert_eq!(window.poll_update(), Some(640));
        assert_eq!(window.raise_due(), None);
        assert_eq!(window.unused(), 440);
    }

    #[test]
    fn a_window_that_starts_small_doubles_as_it_is_read_up_to_its_size() {
        let mut rx = RecvWindow::with_initial_limit(1000, 100);
        let mut limits = Vec::new();
        for _ in 0..40 {
            rx.on_received(rx.unused()).expect("within the limit");
            rx.on_consumed(rx.received());
            limits.push(rx.poll_update().expect("everything was read"));
        }
        // Each limit lets in the window in force past what was read: 200,
        // 400, 800, then the configured 1000 for good.
        let windows: Vec<u64> = std::iter::once(100)
            .chain(limits.iter().copied())
            .collect::<Vec<_>>()
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .collect();
        assert_eq!(windows[..4], [200, 400, 800, 1000]);
        assert!(windows[4..].iter().all(|&w| w == 1000));
    }

    #[test]
    fn a_small_message_earns_no_larger_window() {
        let mut rx = RecvWindow::with_initial_limit(32 << 20, 256 << 10);
        rx.on_received(100).expect("within");
        rx.on_consumed(100);
        assert_eq!(rx.raise_due(), None);
        assert_eq!(rx.poll_update(), None);
        assert_eq!(rx.limit(), 256 << 10);
    }

    #[test]
    fn a_window_held_back_grows_once_more_than_half_is_held() {
        // The start of large messages, held until whole: nothing is taken.
        let mut rx = RecvWindow::with_initial_limit(1000, 100);
        rx.on_received(50).expect("within");
        rx.set_held_back(50);
        assert_eq!(rx.poll_update(), None, "half is held, not more");
        rx.on_received(1).expect("within");
        rx.set_held_back(51);
        assert_eq!(rx.poll_update(), Some(200));
        rx.on_received(50).expect("the new limit");
        rx.set_held_back(101);
        assert_eq!(rx.poll_update(), Some(400));
        rx.on_received(100).expect("the new limit");
        rx.set_held_back(201);
        assert_eq!(rx.poll_update(), Some(800));
        rx.on_received(200).expect("the new limit");
        rx.set_held_back(401);
        assert_eq!(rx.poll_update(), Some(1000));
        // The configured 1000 is in force, all of it held: the window
        // slides by what is read.
        rx.on_received(599).expect("the new limit");
        rx.set_held_back(1000);
        assert_eq!(rx.poll_update(), None, "nothing read");
        rx.on_consumed(10);
        rx.set_held_back(990);
        assert_eq!(rx.poll_update(), Some(1010));
    }

    #[test]
    fn bytes_left_untaken_earn_no_larger_window() {
        let mut rx = RecvWindow::with_initial_limit(1000, 100);
        rx.on_received(100).expect("within");
        rx.set_held_back(40);
        assert_eq!(rx.poll_update(), None, "60 bytes wait to be taken");
        rx.on_consumed(60);
        assert_eq!(rx.poll_update(), Some(260));
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
        /// random, some bytes held back for a while, never trip the
        /// receiver's check, the receiver never buffers more than its
        /// window, the window that starts small lets in no more than four
        /// times what was read or held back at once (or its start), and a
        /// sender without credit never waits on bytes held back alone
        /// unless they fill the whole configured window.
        #[test]
        fn a_well_behaved_pair_never_violates_and_never_over_buffers(
            window in 1u64..10_000,
            initial in 1u64..10_000,
            steps in proptest::collection::vec((0u8..4, 0u64..5000), 0..300),
        ) {
            let mut rx = RecvWindow::with_initial_limit(window, initial);
            let mut tx = SendCredit::new(rx.limit());
            let (mut received, mut consumed, mut held_back) = (0u64, 0u64, 0u64);
            let mut most_held_back = 0u64;
            for (step, n) in steps {
                match step {
                    0 => {
                        let n = n.min(tx.available());
                        tx.consume(n);
                        prop_assert!(rx.on_received(n).is_ok());
                        received += n;
                    }
                    1 => {
                        let n = n.min(received - consumed - held_back);
                        rx.on_consumed(n);
                        consumed += n;
                    }
                    2 => held_back = (held_back + n).min(received - consumed),
                    _ => held_back = held_back.saturating_sub(n),
                }
                most_held_back = most_held_back.max(held_back);
                rx.set_held_back(held_back);
                if let Some(limit) = rx.poll_update() {
                    tx.raise(limit);
                }
                prop_assert!(received - consumed <= window);
                prop_assert!(rx.limit() - consumed <= window);
                prop_assert!(
                    rx.limit() - consumed <= initial.max(4 * consumed).max(4 * most_held_back)
                );
                // A sender left without credit waits on bytes the
                // application can take (taking them earns an update), or
                // on a full window held back (the configured size must
                // leave room for what may be held back at once).
                if tx.available() == 0 {
                    prop_assert!(
                        received - consumed > held_back
                            || (rx.current == window && held_back == window)
                    );
                }
            }
        }
    }
}
