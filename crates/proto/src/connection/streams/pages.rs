//! Where a receive stream's bytes wait: fixed-size pages, taken only where
//! bytes land and given back as the reader passes them.
//!
//! A receiver cannot size a buffer by the highest offset it was sent: one
//! byte near the end of a 16 MiB window would hold 16 MiB. Pages make what
//! a stream holds follow where its bytes are, a page at most for each
//! run of them, and never more than the pages its flow-control window
//! spans. Bytes are still copied once in and once out.
//!
//! Freed pages go back to the connection's [`PagePool`], which keeps them
//! for the next bytes (a stream in steady state takes the page the reader
//! just left, still in the CPU's cache, and never calls the allocator), up
//! to as many pages as the connection's window spans: what the peer may
//! make it hold at any time anyway. It keeps a few emptied lists of pages
//! too ([`SPARE_LISTS`]): a stream that is opened, written once and reset,
//! over and over (a peer's cheapest way to make a receiver work), then
//! takes the list the last one left rather than allocating its own.

use std::collections::VecDeque;

/// Bytes in a page: a few packets' worth, so a packet lands in one or two.
pub(crate) const PAGE: usize = 4096;

type Page = Box<[u8]>;

/// One stream's pages, by page number.
type PageList = VecDeque<(u64, Page)>;

/// Emptied lists of pages the pool keeps for the next streams: enough for
/// streams that come and go one after another, a few hundred bytes at most.
const SPARE_LISTS: usize = 4;

/// The pages of one connection not in use, kept to be used again.
#[derive(Debug)]
pub struct PagePool {
    free: Vec<Page>,
    /// Emptied lists of pages, their room kept (at most [`SPARE_LISTS`]).
    lists: Vec<PageList>,
    /// Pages handed out and not given back.
    live: usize,
    /// Pages held at most, live and free together, before a freed one is
    /// returned to the allocator.
    cap: usize,
}

impl PagePool {
    /// A pool that keeps freed pages while it holds at most `max_bytes`
    /// (rounded up to whole pages).
    pub fn new(max_bytes: u64) -> Self {
        let cap = usize::try_from(max_bytes.div_ceil(PAGE as u64)).unwrap_or(usize::MAX);
        Self {
            free: Vec::new(),
            lists: Vec::new(),
            live: 0,
            cap,
        }
    }

    fn take(&mut self) -> Page {
        self.live += 1;
        self.free
            .pop()
            .unwrap_or_else(|| vec![0; PAGE].into_boxed_slice())
    }

    fn give(&mut self, page: Page) {
        self.live -= 1;
        if self.live + self.free.len() < self.cap {
            self.free.push(page);
        }
    }

    /// An empty list of pages: one kept, or a new one.
    fn take_list(&mut self) -> PageList {
        self.lists.pop().unwrap_or_default()
    }

    /// Keeps `list`, emptied, for the next stream, if fewer than
    /// [`SPARE_LISTS`] are kept and it has room.
    fn give_list(&mut self, list: PageList) {
        debug_assert!(list.is_empty());
        if self.lists.len() < SPARE_LISTS && list.capacity() > 0 {
            self.lists.push(list);
        }
    }

    /// Returns the pages and lists kept for reuse to the allocator.
    pub fn trim(&mut self) {
        self.free = Vec::new();
        self.lists = Vec::new();
    }

    /// Bytes of every page the pool handed out or keeps.
    pub fn memory(&self) -> usize {
        (self.live + self.free.len()) * PAGE
    }

    /// Bytes of the pages in use.
    #[cfg(test)]
    pub(crate) fn live_memory(&self) -> usize {
        self.live * PAGE
    }
}

/// Pages by number (offset / [`PAGE`]), sorted, only where bytes landed.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    pages: PageList,
}

impl Pages {
    /// No page.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Pages held.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// The index in `pages` of page `number`, taken from `pool` if absent.
    /// Bytes arriving in order land in the last page or a new one after it.
    fn page(&mut self, pool: &mut PagePool, number: u64) -> usize {
        if self.pages.capacity() == 0 {
            self.pages = pool.take_list();
        }
        match self.pages.back() {
            Some(&(last, _)) if last == number => return self.pages.len() - 1,
            Some(&(last, _)) if last > number => {}
            _ => {
                self.pages.push_back((number, pool.take()));
                return self.pages.len() - 1;
            }
        }
        match self.pages.binary_search_by_key(&number, |(n, _)| *n) {
            Ok(i) => i,
            Err(i) => {
                self.pages.insert(i, (number, pool.take()));
                i
            }
        }
    }

    /// Copies `data` to offsets `offset..offset + data.len()`.
    pub(crate) fn write(&mut self, pool: &mut PagePool, offset: u64, mut data: &[u8]) {
        let within = (offset % PAGE as u64) as usize;
        if let Some((last, page)) = self.pages.back_mut()
            && *last == offset / PAGE as u64
            && let Some(to) = page.get_mut(within..within + data.len())
        {
            // Within the last page (bytes in order, in small pieces).
            to.copy_from_slice(data);
            return;
        }
        let mut at = offset;
        while !data.is_empty() {
            let within = (at % PAGE as u64) as usize;
            let n = data.len().min(PAGE - within);
            let i = self.page(pool, at / PAGE as u64);
            self.pages[i].1[within..within + n].copy_from_slice(&data[..n]);
            data = &data[n..];
            at += n as u64;
        }
    }

    /// Copies the bytes at `offset..offset + out.len()`, which were all
    /// written, into `out`.
    pub(crate) fn read(&self, offset: u64, out: &mut [u8]) {
        let first = self.pages.front().map_or(0, |(n, _)| *n);
        let mut at = offset;
        let mut done = 0;
        while done < out.len() {
            let within = (at % PAGE as u64) as usize;
            let n = (out.len() - done).min(PAGE - within);
            // Written bytes are contiguous from `offset`, so are their pages.
            let index = (at / PAGE as u64 - first) as usize;
            if let Some((_, page)) = self.pages.get(index) {
                out[done..done + n].copy_from_slice(&page[within..within + n]);
            }
            done += n;
            at += n as u64;
        }
    }

    /// The reader reached `offset`: the pages wholly before it go back to
    /// `pool`.
    pub(crate) fn release_before(&mut self, pool: &mut PagePool, offset: u64) {
        let number = offset / PAGE as u64;
        while self.pages.front().is_some_and(|(n, _)| *n < number) {
            if let Some((_, page)) = self.pages.pop_front() {
                pool.give(page);
            }
        }
    }

    /// Every page goes back to `pool`, and the emptied list with them.
    pub(crate) fn clear(&mut self, pool: &mut PagePool) {
        while let Some((_, page)) = self.pages.pop_front() {
            pool.give(page);
        }
        pool.give_list(std::mem::take(&mut self.pages));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_far_ahead_takes_one_page() {
        let mut pool = PagePool::new(1 << 20);
        let mut pages = Pages::new();
        pages.write(&mut pool, (16 << 20) - 1, b"x");
        assert_eq!((pages.len(), pool.memory()), (1, PAGE));
        pages.write(&mut pool, 10, b"abc");
        pages.write(&mut pool, PAGE as u64 - 1, b"yz");
        assert_eq!(pages.len(), 3);
        let mut out = [0; 2];
        pages.read(PAGE as u64 - 1, &mut out);
        assert_eq!(&out, b"yz");
        pages.release_before(&mut pool, PAGE as u64 + 1);
        assert_eq!(pages.len(), 2, "the page before the reader is released");
        pages.clear(&mut pool);
        assert_eq!((pool.live_memory(), pool.memory()), (0, 3 * PAGE));
    }

    #[test]
    fn the_pool_keeps_no_more_than_its_cap() {
        let mut pool = PagePool::new(2 * PAGE as u64);
        let mut pages = Pages::new();
        pages.write(&mut pool, 0, &[1; 3 * PAGE]);
        assert_eq!(pool.memory(), 3 * PAGE, "in use is never refused");
        pages.clear(&mut pool);
        assert_eq!(pool.memory(), 2 * PAGE);
        pages.write(&mut pool, 0, &[1; PAGE]);
        assert_eq!(pool.memory(), 2 * PAGE, "a kept page is used again");
    }

    #[test]
    fn an_emptied_list_serves_the_next_stream() {
        let mut pool = PagePool::new(1 << 20);
        let mut streams: Vec<Pages> = (0..SPARE_LISTS + 2).map(|_| Pages::new()).collect();
        for (k, pages) in streams.iter_mut().enumerate() {
            pages.write(&mut pool, k as u64, b"x");
        }
        for pages in &mut streams {
            pages.clear(&mut pool);
        }
        assert_eq!(pool.lists.len(), SPARE_LISTS, "no more lists kept");
        let mut next = Pages::new();
        next.write(&mut pool, PAGE as u64 + 7, b"yz");
        assert_eq!(pool.lists.len(), SPARE_LISTS - 1, "the new stream took one");
        let mut out = [0; 2];
        next.read(PAGE as u64 + 7, &mut out);
        assert_eq!(&out, b"yz");
        next.clear(&mut pool);
        assert_eq!(pool.lists.len(), SPARE_LISTS);
        assert_eq!(pool.live_memory(), 0);
        pool.trim();
        assert!(pool.lists.is_empty());
        assert_eq!(pool.memory(), 0);
    }
}
