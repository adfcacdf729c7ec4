//! Path MTU discovery in the manner of RFC 8899 (DPLPMTUD): a connection
//! starts at 1200 bytes of UDP payload, which every path carries, and
//! probes upward with padded, ack-eliciting packets; an acknowledged probe
//! raises the size, a probe lost [`MAX_PROBES`] times marks its size as too
//! large. No ICMP is needed or trusted.
//!
//! The search probes the configured maximum first: most paths carry it, so
//! the connection reaches it in one round trip; otherwise it bisects between
//! the largest size acknowledged and the smallest that failed, to within
//! [`PathMtuConfig::granularity`]. After the search it re-probes the
//! maximum every [`PathMtuConfig::raise_interval`] (RFC 8899's
//! PMTU_RAISE_TIMER), since routes change. Losing many full-size packets in
//! a row, with none acknowledged between them, looks like a black hole (a
//! route whose MTU shrank, with no ICMP to say so): the size falls back to
//! the base and the search starts again below the size that failed.
//!
//! A probe's loss says nothing about congestion (RFC 8899 §4.4): the
//! connection does not report it to its congestion controller.

use std::time::Duration;

use quanta::Instant;

/// RFC 8899's MAX_PROBES: losses of one probe size before it counts as too large.
pub(crate) const MAX_PROBES: u8 = 3;

/// Limits of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct PathMtuConfig {
    /// Bytes of UDP payload every path carries: where a connection starts.
    pub base: usize,
    /// The largest UDP payload to probe for, in bytes.
    pub max: usize,
    /// The search stops when the largest acknowledged size and the smallest
    /// failed one are this many bytes apart or fewer.
    pub granularity: usize,
    /// How long after a finished search the maximum is probed again.
    pub raise_interval: Duration,
    /// Consecutive losses of packets larger than `base`, with none of them
    /// acknowledged between, that count as a black hole.
    pub black_hole_losses: u32,
}

impl Default for PathMtuConfig {
    fn default() -> Self {
        Self {
            base: 1200,
            max: 1452,
            granularity: 16,
            raise_interval: Duration::from_secs(600),
            black_hole_losses: 8,
        }
    }
}

/// Where the search stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Probing; sizes of `too_large` bytes and more failed.
    Searching { too_large: usize },
    /// Done; the maximum is tried again at `raise_at`.
    Complete { raise_at: Instant },
}

/// One path's maximum UDP payload and its probing.
#[derive(Debug, Clone)]
pub(crate) struct PathMtu {
    config: PathMtuConfig,
    /// The largest payload known to cross the path, in bytes.
    current: usize,
    phase: Phase,
    /// The size of the probe in flight, if any.
    in_flight: Option<usize>,
    /// Losses of the probe size being tried.
    failures: u8,
    /// Full-size losses since a full-size packet was last acknowledged.
    suspicious_losses: u32,
    /// Times a black hole was detected.
    black_holes: u64,
}

impl PathMtu {
    /// A path at `config.base` that starts searching at once. A maximum
    /// below the base is raised to it.
    pub(crate) fn new(config: PathMtuConfig) -> Self {
        let config = PathMtuConfig {
            max: config.max.max(config.base),
            granularity: config.granularity.max(1),
            ..config
        };
        Self {
            current: config.base,
            phase: Phase::Searching {
                too_large: config.max + 1,
            },
            config,
            in_flight: None,
            failures: 0,
            suspicious_losses: 0,
            black_holes: 0,
        }
    }

    /// The largest UDP payload to send now, in bytes.
    pub(crate) fn current(&self) -> usize {
        self.current
    }

    /// Black holes detected so far.
    #[cfg(test)]
    pub(crate) fn black_holes(&self) -> u64 {
        self.black_holes
    }

    /// Whether the search is over (until the raise timer).
    #[cfg(test)]
    pub(crate) fn is_complete(&self) -> bool {
        matches!(self.phase, Phase::Complete { .. })
    }

    /// The size of the next probe to send at `now`, if one is due; it is
    /// then in flight until [`on_probe_acked`](Self::on_probe_acked) or
    /// [`on_probe_lost`](Self::on_probe_lost). Call it only when a packet
    /// can be sent.
    pub(crate) fn poll_probe(&mut self, now: Instant) -> Option<usize> {
        if self.in_flight.is_some() {
            return None;
        }
        if let Phase::Complete { raise_at } = self.phase {
            if now < raise_at || self.current >= self.config.max {
                return None;
            }
            self.phase = Phase::Searching {
                too_large: self.config.max + 1,
            };
            self.failures = 0;
        }
        let Phase::Searching { too_large } = self.phase else {
            return None;
        };
        let candidate = if too_large > self.config.max {
            self.config.max
        } else {
            self.current + too_large.saturating_sub(self.current) / 2
        };
        if too_large.saturating_sub(self.current) <= self.config.granularity
            || candidate <= self.current
        {
            self.phase = Phase::Complete {
                raise_at: now + self.config.raise_interval,
            };
            return None;
        }
        self.in_flight = Some(candidate);
        Some(candidate)
    }

    /// When the raise timer fires, if the search is over.
    #[cfg(test)]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Complete { raise_at } if self.current < self.config.max => Some(raise_at),
            _ => None,
        }
    }

    /// The probe of `size` bytes was acknowledged: the path carries it.
    pub(crate) fn on_probe_acked(&mut self, size: usize) {
        if self.in_flight == Some(size) {
            self.in_flight = None;
        }
        self.failures = 0;
        self.suspicious_losses = 0;
        if size > self.current && size <= self.config.max {
            self.current = size;
            // A late acknowledgement can prove a size that was given up on:
            // the path carries it, so the failed bound moves above it.
            if let Phase::Searching { too_large } = &mut self.phase
                && *too_large <= size
            {
                *too_large = size + 1;
            }
        }
    }

    /// The probe of `size` bytes was declared lost.
    pub(crate) fn on_probe_lost(&mut self, size: usize) {
        if self.in_flight != Some(size) {
            return;
        }
        self.in_flight = None;
        self.failures += 1;
        if self.failures >= MAX_PROBES {
            self.failures = 0;
            if let Phase::Searching { too_large } = &mut self.phase {
                *too_large = (*too_large).min(size);
            }
        }
    }

    /// A packet of `size` bytes (not a probe) was acknowledged.
    pub(crate) fn on_packet_acked(&mut self, size: usize) {
        if size > self.config.base {
            self.suspicious_losses = 0;
        }
    }

    /// A packet of `size` bytes (not a probe) was declared lost. Returns
    /// whether this made it a black hole, so the connection re-sends at the
    /// base size.
    pub(crate) fn on_packet_lost(&mut self, size: usize) -> bool {
        if size <= self.config.base {
            return false;
        }
        self.suspicious_losses += 1;
        if self.suspicious_losses < self.config.black_hole_losses {
            return false;
        }
        self.black_holes += 1;
        self.suspicious_losses = 0;
        self.failures = 0;
        self.in_flight = None;
        let failed = self.current.min(size);
        self.current = self.config.base;
        self.phase = Phase::Searching { too_large: failed };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs the search on a path that carries `path_mtu` bytes, answering
    /// every probe at once; returns the size reached and the probes sent.
    fn search(config: PathMtuConfig, path_mtu: usize) -> (usize, usize) {
        let (clock, _) = quanta::Clock::mock();
        let mut pmtu = PathMtu::new(config);
        let mut probes = 0;
        while let Some(size) = pmtu.poll_probe(clock.now()) {
            probes += 1;
            assert!(probes < 100, "the search does not end");
            if size <= path_mtu {
                pmtu.on_probe_acked(size);
            } else {
                pmtu.on_probe_lost(size);
            }
        }
        assert!(pmtu.is_complete());
        (pmtu.current(), probes)
    }

    #[test]
    fn a_path_that_carries_the_maximum_gets_it_with_one_probe() {
        assert_eq!(search(PathMtuConfig::default(), 1500), (1452, 1));
    }

    #[test]
    fn a_smaller_path_is_found_by_bisection_within_the_granularity() {
        let config = PathMtuConfig::default();
        let (size, probes) = search(config, 1400);
        assert!(size <= 1400 && 1400 - size <= config.granularity, "{size}");
        // 3 losses at the maximum, then about log2(252 / 16) rounds.
        assert!(probes <= 3 + 5 * MAX_PROBES as usize, "{probes}");
    }

    #[test]
    fn the_maximum_is_tried_again_after_the_raise_interval() {
        let (clock, mock) = quanta::Clock::mock();
        let config = PathMtuConfig::default();
        let mut pmtu = PathMtu::new(config);
        while let Some(size) = pmtu.poll_probe(clock.now()) {
            pmtu.on_probe_lost(size);
        }
        assert_eq!(pmtu.current(), config.base);
        let raise_at = pmtu.poll_timeout().expect("raise timer");
        mock.increment(config.raise_interval - Duration::from_secs(1));
        assert_eq!(pmtu.poll_probe(clock.now()), None);
        mock.increment(Duration::from_secs(1));
        assert_eq!(clock.now(), raise_at);
        assert_eq!(pmtu.poll_probe(clock.now()), Some(config.max));
        pmtu.on_probe_acked(config.max);
        assert_eq!(pmtu.current(), config.max);
    }

    #[test]
    fn a_black_hole_falls_back_to_the_base_and_searches_below_the_failed_size() {
        let (clock, _) = quanta::Clock::mock();
        let config = PathMtuConfig::default();
        let mut pmtu = PathMtu::new(config);
        let size = pmtu.poll_probe(clock.now()).expect("probe");
        pmtu.on_probe_acked(size);
        assert_eq!(pmtu.current(), 1452);
        // Losses interrupted by an acknowledgement are congestion, not a hole.
        for _ in 0..config.black_hole_losses - 1 {
            assert!(!pmtu.on_packet_lost(1452));
        }
        pmtu.on_packet_acked(1452);
        for _ in 0..config.black_hole_losses - 1 {
            assert!(!pmtu.on_packet_lost(1452));
        }
        assert!(pmtu.on_packet_lost(1452));
        assert_eq!((pmtu.current(), pmtu.black_holes()), (config.base, 1));
        let next = pmtu.poll_probe(clock.now()).expect("a new search");
        assert!(next < 1452 && next > config.base, "{next}");
    }

    #[test]
    fn a_late_ack_for_a_size_given_up_on_raises_the_bound_without_underflow() {
        let (clock, _) = quanta::Clock::mock();
        let mut pmtu = PathMtu::new(PathMtuConfig::default());
        // 1452 lost three times, then the next candidate three times.
        let mut sizes = Vec::new();
        for _ in 0..2 * MAX_PROBES {
            let size = pmtu.poll_probe(clock.now()).expect("a probe");
            sizes.push(size);
            pmtu.on_probe_lost(size);
        }
        assert_eq!(sizes[0], 1452);
        assert!(sizes[MAX_PROBES as usize] < 1452);
        // The first 1452 probe's acknowledgement arrives after all.
        pmtu.on_probe_acked(1452);
        assert_eq!(pmtu.current(), 1452);
        assert_eq!(pmtu.poll_probe(clock.now()), None);
        assert!(pmtu.is_complete());
    }

    proptest! {
        /// On any path, with any configuration, the search ends with a size
        /// the path carries, never above the maximum, and never more than
        /// the granularity short of what it could have found.
        #[test]
        fn the_search_ends_at_a_size_the_path_carries(
            base in 1200usize..1300,
            extra in 0usize..9000,
            granularity in 1usize..64,
            path_mtu in 1200usize..10_000,
        ) {
            let config = PathMtuConfig {
                base,
                max: base + extra,
                granularity,
                ..PathMtuConfig::default()
            };
            let (size, _) = search(config, path_mtu.max(base));
            let reachable = config.max.min(path_mtu.max(base));
            prop_assert!(size <= reachable);
            prop_assert!(reachable - size <= granularity);
        }
    }
}
