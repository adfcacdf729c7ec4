//! A global allocator that counts heap allocations while a measurement asks
//! it to, for the cost accounting of the end-to-end runs.
//!
//! Counting is off unless [`counting`] runs: the timed samples pay one
//! relaxed load of a flag per allocation, not a contended increment, so the
//! transports are timed as they run without it.
//!
//! The workspace's tests count with the `allocation_counter` crate, which
//! fits them and not this: it counts only the thread that measures, and
//! counts always. A run's cost is that of every thread it wakes (the
//! server's own thread, the client's runtime), and a counter that is always
//! on would slow the timed samples (it also turns every reallocation into a
//! copy).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// The system allocator, counting allocations and reallocations (a grown
/// block is a new one) of every thread while [`ON`] is set, and while
/// [`WEIGHING`] is set the bytes they hold and the most they held.
pub(crate) struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);
static WEIGHING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated less bytes freed since weighing began (blocks from
/// before it freed meanwhile make it lower, never a peak higher).
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

fn count() {
    if ON.load(Ordering::Relaxed) {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

fn weigh(change: i64) {
    if WEIGHING.load(Ordering::Relaxed) {
        let live = LIVE.fetch_add(change, Ordering::Relaxed) + change;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

fn size(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

// SAFETY: every call goes to the system allocator unchanged; the counter is
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        weigh(size(layout.size()));
        // SAFETY: the caller's layout goes to the system allocator as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        weigh(-size(layout.size()));
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        weigh(size(new_size) - size(layout.size()));
        // SAFETY: as for `dealloc` and `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns what it returned and how many allocations every
/// thread of the process made meanwhile.
pub(crate) fn counting<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = COUNT.load(Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
    let result = f();
    ON.store(false, Ordering::Relaxed);
    (result, COUNT.load(Ordering::Relaxed) - before)
}

/// Runs `f` and returns what it returned and the most heap, in bytes, that
/// every thread of the process held meanwhile beyond what it held when `f`
/// began. One weighing at a time.
pub(crate) fn heap_peak<R>(f: impl FnOnce() -> R) -> (R, u64) {
    start_weighing();
    let result = f();
    WEIGHING.store(false, Ordering::Relaxed);
    let peak = u64::try_from(PEAK.load(Ordering::Relaxed)).unwrap_or(0);
    (result, peak)
}

/// Weighs the heap from now on, from zero: what every thread allocates
/// less what it frees ([`heap_held`]). One weighing at a time.
pub(crate) fn start_weighing() {
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    WEIGHING.store(true, Ordering::Relaxed);
}

/// The bytes allocated less the bytes freed since [`start_weighing`]: what
/// the process's own allocations hold, whatever the allocator keeps
/// besides.
pub(crate) fn heap_held() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_counted_only_inside_counting() {
        drop(std::hint::black_box(vec![1u8; 64]));
        let ((), made) = counting(|| {
            for n in 1..=10 {
                drop(std::hint::black_box(vec![0u8; n * 100]));
            }
        });
        assert!(made >= 10, "{made}");
        let outside = COUNT.load(Ordering::Relaxed);
        drop(std::hint::black_box(vec![0u8; 4096]));
        assert_eq!(COUNT.load(Ordering::Relaxed), outside);
    }

    #[test]
    fn the_heap_peak_is_what_was_held_at_once() {
        let (held, peak) = heap_peak(|| {
            let a = std::hint::black_box(vec![0u8; 10_000_000]);
            let b = std::hint::black_box(vec![0u8; 5_000_000]);
            drop(a);
            let c = std::hint::black_box(vec![0u8; 2_000_000]);
            b.len() + c.len()
        });
        assert_eq!(held, 7_000_000);
        // Other tests' threads allocate and free meanwhile (what they free
        // was allocated before the weighing, and counts against it): the
        // 15 MB held at once, less at most a megabyte of theirs.
        assert!(peak >= 14_000_000, "{peak}");
    }
}
