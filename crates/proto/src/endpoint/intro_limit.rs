//! How many handshake intros an endpoint processes: each costs an RSA-2048
//! decryption (about 1.8 ms of CPU here), so an unlimited flood of intros,
//! forged or replayed, would take the endpoint's CPU away from the
//! connections it serves.
//!
//! The total bucket is the budget of RSA operations: the defaults admit
//! 200 intros per second in total — 0.36 CPU-seconds per second at worst,
//! so a flood takes at most about a third of one core. Every decrypted
//! intro is charged to it.
//!
//! Intros whose source address is not validated (they carry no valid
//! token, wire format §6.4) pass two more buckets first: one per source,
//! 10 per second (bursts of 5), and one for all unvalidated sources
//! together, half the total budget. What they are refused is not dropped
//! but answered with a Retry, so an honest initiator comes back validated:
//! validated intros pass the total bucket alone, so neither a flood spoofed
//! from many addresses nor one spoofed from an honest peer's own address
//! keeps it out, and many initiators behind one address are limited only by
//! the budget. The unvalidated half leaves the other half of the budget to
//! validated intros whatever a spoofed flood does.
//!
//! Sources are IPv4 addresses and IPv6 /64 prefixes (one host usually holds
//! a whole /64), kept in a table of bounded size: a flood from more sources
//! than it holds evicts the sources that were idle longest, which is
//! harmless because an idle source's bucket is full anyway, and the total
//! limit holds whatever happens to the table.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::IpAddr;

use quanta::Instant;
use tern_congestion::{Take, TokenBucket, take_all};

/// The limits, in intros per second and intros of burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct IntroLimiterConfig {
    /// Intros per second the endpoint processes in total.
    pub total_rate: u64,
    /// Intros the endpoint processes at once after a quiet period.
    pub total_burst: u64,
    /// Intros per second processed from one source.
    pub per_source_rate: u64,
    /// Intros processed at once from one source after a quiet period.
    pub per_source_burst: u64,
    /// Sources tracked at once (memory: about 80 bytes each).
    pub sources: usize,
}

impl Default for IntroLimiterConfig {
    fn default() -> Self {
        Self {
            total_rate: 200,
            total_burst: 50,
            per_source_rate: 10,
            per_source_burst: 5,
            sources: 4096,
        }
    }
}

/// Why an intro was not processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IntroRefused {
    /// Its source sent more than its share.
    #[error("intro refused: its source exceeds its intro rate")]
    Source,
    /// Unvalidated sources together sent more than their share.
    #[error("intro refused: unvalidated sources exceed their intro rate")]
    Unvalidated,
    /// The endpoint as a whole is at its intro rate.
    #[error("intro refused: the endpoint is at its intro rate")]
    Total,
}

/// Slots a source may occupy: its hash picks a set of this many.
const WAYS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Source {
    V4([u8; 4]),
    /// The /64 prefix.
    V6([u8; 8]),
}

impl From<IpAddr> for Source {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(v4.octets()),
                None => {
                    let mut prefix = [0; 8];
                    prefix.copy_from_slice(&v6.octets()[..8]);
                    Self::V6(prefix)
                }
            },
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    source: Source,
    bucket: TokenBucket,
    /// When it last asked: the eviction order.
    last_seen: Instant,
}

/// The intro gate of one endpoint.
#[derive(Debug)]
pub struct IntroLimiter {
    config: IntroLimiterConfig,
    total: TokenBucket,
    /// Half the total: what intros from unvalidated sources may take.
    unvalidated: TokenBucket,
    table: Vec<Option<Entry>>,
    /// Keys the table's hash, so an attacker cannot aim many sources at
    /// one set without knowing it.
    hash_key: u64,
}

/// A bucket for `rate` per second and `burst`, both at least 1.
fn bucket(rate: u64, burst: u64) -> TokenBucket {
    match TokenBucket::new(rate.max(1), burst.max(1)) {
        Ok(bucket) => bucket,
        Err(_) => unreachable!("rate and burst are at least 1"),
    }
}

impl IntroLimiter {
    /// A limiter with `config`; `hash_key` should be random (the endpoint
    /// draws it from its RNG).
    pub fn new(config: IntroLimiterConfig, hash_key: u64) -> Self {
        let sets = config.sources.div_ceil(WAYS).max(1);
        Self {
            config,
            total: bucket(config.total_rate, config.total_burst),
            unvalidated: bucket(config.total_rate / 2, config.total_burst / 2),
            table: vec![None; sets * WAYS],
            hash_key,
        }
    }

    /// The limits in force.
    pub fn config(&self) -> IntroLimiterConfig {
        self.config
    }

    /// Whether an intro from a validated source (it carried a valid token)
    /// may be processed at `now`; if so, it is counted against the total.
    pub fn admit_validated(&mut self, now: Instant) -> Result<(), IntroRefused> {
        match self.total.take(1, now) {
            Take::Now => Ok(()),
            Take::WaitUntil(_) => Err(IntroRefused::Total),
        }
    }

    /// Whether an intro from `ip`, not validated, may be processed at
    /// `now`; if so, it is counted against every limit.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Result<(), IntroRefused> {
        let source = Source::from(ip);
        let set = self.set_of(&source);
        let (per_source_rate, per_source_burst) =
            (self.config.per_source_rate, self.config.per_source_burst);
        let entries = &mut self.table[set * WAYS..(set + 1) * WAYS];
        let way = match entries
            .iter()
            .position(|e| e.as_ref().is_some_and(|e| e.source == source))
        {
            Some(way) => way,
            None => {
                // A free way, else the one idle longest.
                let victim = entries
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, e)| e.as_ref().map(|e| e.last_seen))
                    .map_or(0, |(i, _)| i);
                entries[victim] = None;
                victim
            }
        };
        let entry = entries[way].get_or_insert_with(|| Entry {
            source,
            bucket: bucket(per_source_rate, per_source_burst),
            last_seen: now,
        });
        entry.last_seen = now;
        if entry.bucket.ready_at(1, now) != Take::Now {
            return Err(IntroRefused::Source);
        }
        if self.unvalidated.ready_at(1, now) != Take::Now {
            return Err(IntroRefused::Unvalidated);
        }
        if take_all(&mut [&mut self.total, &mut self.unvalidated], 1, now) != Take::Now {
            return Err(IntroRefused::Total);
        }
        entry.bucket.consume(1, now);
        Ok(())
    }

    fn set_of(&self, source: &Source) -> usize {
        let mut hasher = DefaultHasher::new();
        self.hash_key.hash(&mut hasher);
        source.hash(&mut hasher);
        (hasher.finish() % (self.table.len() / WAYS) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::time::Duration;

    fn clock() -> (quanta::Clock, std::sync::Arc<quanta::Mock>) {
        quanta::Clock::mock()
    }

    #[test]
    fn one_source_gets_its_burst_then_its_rate() {
        let (clock, mock) = clock();
        let mut limiter = IntroLimiter::new(IntroLimiterConfig::default(), 42);
        let ip = IpAddr::from(Ipv4Addr::new(192, 0, 2, 1));
        let burst = (0..20)
            .filter(|_| limiter.admit(ip, clock.now()).is_ok())
            .count();
        assert_eq!(burst, 5);
        assert_eq!(limiter.admit(ip, clock.now()), Err(IntroRefused::Source));
        // Over ten seconds, ten per second.
        let mut admitted = 0;
        for _ in 0..1000 {
            mock.increment(Duration::from_millis(10));
            admitted += usize::from(limiter.admit(ip, clock.now()).is_ok());
        }
        assert!((99..=101).contains(&admitted), "{admitted}");
    }

    #[test]
    fn every_port_and_every_host_of_a_v6_prefix_is_one_source() {
        let (clock, _) = clock();
        let mut limiter = IntroLimiter::new(IntroLimiterConfig::default(), 7);
        let admitted = (0..50u16)
            .filter(|i| {
                let ip = IpAddr::from(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, *i, 0, 0, 1));
                limiter.admit(ip, clock.now()).is_ok()
            })
            .count();
        assert_eq!(admitted, 5);
        let mapped = IpAddr::from(Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped());
        let plain = IpAddr::from(Ipv4Addr::new(198, 51, 100, 7));
        let both = (0..10)
            .map(|i| if i % 2 == 0 { mapped } else { plain })
            .filter(|ip| limiter.admit(*ip, clock.now()).is_ok())
            .count();
        assert_eq!(both, 5);
    }

    #[test]
    fn a_flood_from_a_million_sources_stays_within_the_total_rate() {
        let (clock, mock) = clock();
        let config = IntroLimiterConfig::default();
        let mut limiter = IntroLimiter::new(config, 99);
        let mut admitted = 0u64;
        // 100 000 intros per second from ever-new sources, for 10 seconds.
        for i in 0..1_000_000u32 {
            mock.increment(Duration::from_micros(10));
            let ip = IpAddr::from(Ipv4Addr::from(0x0a00_0000 | i));
            admitted += u64::from(limiter.admit(ip, clock.now()).is_ok());
        }
        // Unvalidated, they get half the budget.
        let ceiling = config.total_rate / 2 * 10 + config.total_burst / 2;
        assert!(admitted <= ceiling, "{admitted} > {ceiling}");
        assert!(admitted >= config.total_rate / 2 * 10 - 10, "{admitted}");
        assert_eq!(limiter.table.len(), 4096);
    }

    #[test]
    fn a_refused_source_does_not_spend_the_total() {
        let (clock, _) = clock();
        let config = IntroLimiterConfig {
            total_burst: 12,
            ..IntroLimiterConfig::default()
        };
        let mut limiter = IntroLimiter::new(config, 3);
        let greedy = IpAddr::from(Ipv4Addr::new(203, 0, 113, 1));
        for _ in 0..100 {
            let _ = limiter.admit(greedy, clock.now());
        }
        let honest = IpAddr::from(Ipv4Addr::new(203, 0, 113, 2));
        assert_eq!(limiter.admit(honest, clock.now()), Ok(()));
    }

    #[test]
    fn a_spoofed_flood_leaves_validated_intros_half_the_budget() {
        let (clock, mock) = clock();
        let config = IntroLimiterConfig::default();
        let mut limiter = IntroLimiter::new(config, 5);
        let (mut spoofed, mut validated) = (0u64, 0u64);
        // Each millisecond for 10 s: ten spoofed intros from new sources,
        // and one validated intro.
        for ms in 0..10_000u32 {
            mock.increment(Duration::from_millis(1));
            for k in 0..10 {
                let ip = IpAddr::from(Ipv4Addr::from(0x0a00_0000 | (ms * 10 + k)));
                spoofed += u64::from(limiter.admit(ip, clock.now()).is_ok());
            }
            validated += u64::from(limiter.admit_validated(clock.now()).is_ok());
        }
        let total = spoofed + validated;
        assert!(
            total <= config.total_rate * 10 + config.total_burst,
            "{total}"
        );
        assert!(spoofed <= config.total_rate / 2 * 10 + config.total_burst / 2);
        assert!(validated >= config.total_rate / 2 * 10 - 10, "{validated}");
    }

    #[test]
    fn validated_intros_from_one_address_pass_its_source_limit() {
        let (clock, _) = clock();
        let mut limiter = IntroLimiter::new(IntroLimiterConfig::default(), 1);
        let ip = IpAddr::from(Ipv4Addr::new(192, 0, 2, 9));
        while limiter.admit(ip, clock.now()).is_ok() {}
        assert_eq!(limiter.admit(ip, clock.now()), Err(IntroRefused::Source));
        let validated = (0..100)
            .filter(|_| limiter.admit_validated(clock.now()).is_ok())
            .count();
        assert_eq!(validated, 50 - 5, "the total burst, less the source's five");
    }
}
