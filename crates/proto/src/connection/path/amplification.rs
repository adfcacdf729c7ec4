//! The anti-amplification limit: before an address has shown that it
//! receives what is sent to it, an endpoint sends it at most three times
//! the bytes it received from it (RFC 9000 §8), so a forged source address
//! cannot turn a Tern endpoint into an amplifier aimed at a victim.

/// How many bytes may go to an unvalidated address per byte received from it.
pub(crate) const AMPLIFICATION_FACTOR: u64 = 3;

/// Bytes received from and sent to one address while it is unvalidated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AmplificationLimit {
    received: u64,
    sent: u64,
    validated: bool,
}

impl AmplificationLimit {
    /// An address nothing has been received from yet: nothing may be sent.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An address that needs no limit, such as the one an initiator chose
    /// to send its intro to.
    pub(crate) fn validated() -> Self {
        Self {
            validated: true,
            ..Self::default()
        }
    }

    /// `bytes` arrived from the address (whole UDP payloads, whether they
    /// authenticated or not: they crossed the path either way).
    pub(crate) fn on_received(&mut self, bytes: usize) {
        self.received = self.received.saturating_add(bytes as u64);
    }

    /// `bytes` were sent to the address.
    pub(crate) fn on_sent(&mut self, bytes: usize) {
        self.sent = self.sent.saturating_add(bytes as u64);
    }

    /// The address answered something only a receiver of our packets could
    /// (a packet under the session's keys, a path response): no more limit.
    pub(crate) fn validate(&mut self) {
        self.validated = true;
    }

    /// Whether the address has been validated.
    pub(crate) fn is_validated(&self) -> bool {
        self.validated
    }

    /// Bytes that may still be sent now (`u64::MAX` once validated).
    pub(crate) fn allowance(&self) -> u64 {
        if self.validated {
            u64::MAX
        } else {
            self.received
                .saturating_mul(AMPLIFICATION_FACTOR)
                .saturating_sub(self.sent)
        }
    }

    /// Whether a datagram of `bytes` may be sent now.
    pub(crate) fn can_send(&self, bytes: usize) -> bool {
        bytes as u64 <= self.allowance()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_unvalidated_address_gets_three_times_what_it_sent() {
        let mut limit = AmplificationLimit::new();
        assert!(!limit.can_send(1));
        limit.on_received(257);
        assert_eq!(limit.allowance(), 771);
        assert!(limit.can_send(771) && !limit.can_send(772));
        limit.on_sent(700);
        assert_eq!(limit.allowance(), 71);
        limit.validate();
        assert!(limit.can_send(usize::MAX));
        assert!(AmplificationLimit::validated().can_send(65_507));
    }

    proptest! {
        /// Whatever the sequence, while unvalidated the bytes sent through
        /// `can_send` never exceed three times the bytes received.
        #[test]
        fn sending_only_what_is_allowed_never_amplifies_more_than_three_times(
            events in proptest::collection::vec((any::<bool>(), 0usize..70_000), 0..200)
        ) {
            let mut limit = AmplificationLimit::new();
            let (mut received, mut sent) = (0u64, 0u64);
            for (incoming, bytes) in events {
                if incoming {
                    limit.on_received(bytes);
                    received += bytes as u64;
                } else if limit.can_send(bytes) {
                    limit.on_sent(bytes);
                    sent += bytes as u64;
                }
                prop_assert!(sent <= received * AMPLIFICATION_FACTOR);
                prop_assert_eq!(limit.allowance(), received * AMPLIFICATION_FACTOR - sent);
            }
        }
    }
}
