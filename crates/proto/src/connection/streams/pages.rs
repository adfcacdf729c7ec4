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
//! make it hold at any time anyway. A stream holding one page holds it
//! alone; the list of its pages is made when it holds two, and the pool
//! keeps a few emptied lists ([`SPARE_LISTS`]) for the next streams that
//! do, rather than each allocating its own.
//!
//! A stream's first bytes, when they are few and the pool keeps no page,
//! land in a short page sized to them ([`SHORT_PAGE_MAX`] at most) rather
//! than in a whole one: a request of a few bytes on a stream of its own
//! (a peer's everyday use of streams) then costs a small allocation, not
//! a zeroed 4 KiB, and holds what it carries. A short page that more
//! bytes reach is exchanged for a whole one, once. The pool keeps one
//! short page while it keeps no whole one.

use std::collections::VecDeque;

/// Bytes in a page: a few packets' worth, so a packet lands in one or two.
pub(crate) const PAGE: usize = 4096;

/// The most bytes a short page holds, from the start of its page: a
/// stream's first bytes up to this take a short page, past it a whole one.
const SHORT_PAGE_MAX: usize = PAGE / 4;

/// Short pages are sized in steps of this many bytes.
const SHORT_PAGE_STEP: usize = 64;

/// A page's bytes from its start: [`PAGE`] of them, or fewer for a short
/// page.
type Page = Box<[u8]>;

/// One stream's pages, by page number.
type PageList = VecDeque<(u64, Page)>;

/// Emptied lists of pages the pool keeps for the next streams: enough for
/// streams that come and go one after another, a few hundred bytes at most.
const SPARE_LISTS: usize = 4;

/// The pages of one connection not in use, kept to be used again.
#[derive(Debug)]
pub struct PagePool {
    /// Pages kept for the next bytes: whole ones, or one short page alone.
    free: Vec<Page>,
    /// Emptied lists of pages, their room kept (at most [`SPARE_LISTS`]).
    lists: Vec<PageList>,
    /// Bytes of the pages handed out and not given back.
    live: usize,
    /// Bytes of pages held at most, live and free together, before a
    /// freed one is returned to the allocator.
    cap: usize,
}

impl PagePool {
    /// A pool that keeps freed pages while it holds at most `max_bytes`
    /// (rounded up to whole pages).
    pub fn new(max_bytes: u64) -> Self {
        let pages = usize::try_from(max_bytes.div_ceil(PAGE as u64)).unwrap_or(usize::MAX);
        let cap = pages.saturating_mul(PAGE);
        Self {
            free: Vec::new(),
            lists: Vec::new(),
            live: 0,
            cap,
        }
    }

    /// A whole page: one kept, or a new one (a kept short page goes).
    fn take(&mut self) -> Page {
        self.live += PAGE;
        match self.free.pop() {
            Some(page) if page.len() == PAGE => page,
            _ => vec![0; PAGE].into_boxed_slice(),
        }
    }

    /// A stream's only page, for the first `needed` bytes of it and
    /// perhaps more: a whole one kept if there is one (no allocation), else
    /// a short page if they are few (the one kept if it holds them), else a
    /// new whole one.
    fn take_short(&mut self, needed: usize) -> Page {
        let whole_kept = self.free.last().is_some_and(|page| page.len() == PAGE);
        if needed > SHORT_PAGE_MAX || whole_kept {
            return self.take();
        }
        let page = match self.free.pop() {
            Some(page) if page.len() >= needed => page,
            _ => vec![0; needed.next_multiple_of(SHORT_PAGE_STEP)].into_boxed_slice(),
        };
        self.live += page.len();
        page
    }

    /// Takes `page` back: a whole page is kept for the next bytes while
    /// the pool holds no more than its cap; a short one only while the
    /// pool keeps nothing else (streams opened, written a few bytes and
    /// reset, one after another, then take the same one), and a whole one
    /// given back takes its place.
    fn give(&mut self, page: Page) {
        self.live -= page.len();
        if page.len() < PAGE {
            if self.free.is_empty() && self.live + page.len() <= self.cap {
                self.free.push(page);
            }
            return;
        }
        if self.free.last().is_some_and(|kept| kept.len() < PAGE) {
            self.free.pop();
        }
        if self.live + (self.free.len() + 1) * PAGE <= self.cap {
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
        // The pages kept are whole, or one short page alone.
        let kept = self
            .free
            .last()
            .map_or(0, |last| (self.free.len() - 1) * PAGE + last.len());
        self.live + kept
    }

    /// Bytes of the pages in use.
    #[cfg(test)]
    pub(crate) fn live_memory(&self) -> usize {
        self.live
    }
}

/// Pages by number (offset / [`PAGE`]), sorted, only where bytes landed.
/// A stream that holds one page (a request of a few bytes, a reader that
/// keeps up) holds it alone, with no list allocated: the list is made
/// when a second page is.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    /// The only page, while the stream holds no more (`list` is empty).
    only: Option<(u64, Page)>,
    /// Every page, once the stream held two (`only` is `None`).
    list: PageList,
}

impl Pages {
    /// No page.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The pages held, in order.
    fn iter(&self) -> impl Iterator<Item = &(u64, Page)> {
        self.only.iter().chain(&self.list)
    }

    /// Pages held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.iter().count()
    }

    /// Bytes of the pages held.
    pub(crate) fn memory(&self) -> usize {
        self.iter().map(|(_, page)| page.len()).sum()
    }

    /// Page `number`, holding at least its first `needed` bytes, taken
    /// from `pool` if absent (short if the stream holds no other) or too
    /// short. Bytes arriving in order land in the last page or a new one
    /// after it.
    fn page(&mut self, pool: &mut PagePool, number: u64, needed: usize) -> &mut Page {
        if self.list.is_empty() && self.only.as_ref().is_none_or(|(n, _)| *n == number) {
            let (_, page) = self
                .only
                .get_or_insert_with(|| (number, pool.take_short(needed)));
            hold(pool, page, needed);
            return page;
        }
        if let Some(only) = self.only.take() {
            // A second page: the list holds them all from now on.
            if self.list.capacity() == 0 {
                self.list = pool.take_list();
            }
            self.list.push_back(only);
        }
        let i = match self.list.back() {
            Some(&(last, _)) if last == number => self.list.len() - 1,
            Some(&(last, _)) if last > number => {
                match self.list.binary_search_by_key(&number, |(n, _)| *n) {
                    Ok(i) => i,
                    Err(i) => {
                        self.list.insert(i, (number, pool.take()));
                        i
                    }
                }
            }
            _ => {
                self.list.push_back((number, pool.take()));
                self.list.len() - 1
            }
        };
        let page = &mut self.list[i].1;
        hold(pool, page, needed);
        page
    }

    /// Copies `data` to offsets `offset..offset + data.len()`.
    pub(crate) fn write(&mut self, pool: &mut PagePool, offset: u64, mut data: &[u8]) {
        let within = (offset % PAGE as u64) as usize;
        if let Some((last, page)) = self.only.as_mut().or_else(|| self.list.back_mut())
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
            let page = self.page(pool, at / PAGE as u64, within + n);
            page[within..within + n].copy_from_slice(&data[..n]);
            data = &data[n..];
            at += n as u64;
        }
    }

    /// Copies the bytes at `offset..offset + out.len()`, which were all
    /// written, into `out`.
    pub(crate) fn read(&self, offset: u64, out: &mut [u8]) {
        let first = self.iter().next().map_or(0, |(n, _)| *n);
        let mut at = offset;
        let mut done = 0;
        while done < out.len() {
            let within = (at % PAGE as u64) as usize;
            let n = (out.len() - done).min(PAGE - within);
            // Written bytes are contiguous from `offset`, so are their pages.
            let index = (at / PAGE as u64 - first) as usize;
            let page = match &self.only {
                Some((_, page)) => (index == 0).then_some(page),
                None => self.list.get(index).map(|(_, page)| page),
            };
            if let Some(page) = page {
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
        if self.only.as_ref().is_some_and(|(n, _)| *n < number)
            && let Some((_, page)) = self.only.take()
        {
            pool.give(page);
        }
        while self.list.front().is_some_and(|(n, _)| *n < number) {
            if let Some((_, page)) = self.list.pop_front() {
                pool.give(page);
            }
        }
    }

    /// Every page goes back to `pool`, and the emptied list with them.
    pub(crate) fn clear(&mut self, pool: &mut PagePool) {
        if let Some((_, page)) = self.only.take() {
            pool.give(page);
        }
        if self.list.capacity() == 0 {
            // Never held two pages: no list to give back.
            return;
        }
        while let Some((_, page)) = self.list.pop_front() {
            pool.give(page);
        }
        pool.give_list(std::mem::take(&mut self.list));
    }
}

/// Makes `page` hold at least its first `needed` bytes: a short page more
/// bytes reached is exchanged for a whole one from `pool`.
fn hold(pool: &mut PagePool, page: &mut Page, needed: usize) {
    if page.len() < needed {
        let mut whole = pool.take();
        whole[..page.len()].copy_from_slice(page);
        pool.give(std::mem::replace(page, whole));
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
    fn a_few_first_bytes_take_a_short_page_until_more_reach_it() {
        let mut pool = PagePool::new(1 << 20);
        let mut pages = Pages::new();
        pages.write(&mut pool, 0, &[7; 16]);
        assert_eq!((pool.live_memory(), pages.memory()), (64, 64));
        pages.write(&mut pool, 16, &[8; 100]);
        assert_eq!(pages.memory(), PAGE, "a whole page took its place");
        assert_eq!(pool.live_memory(), PAGE);
        let mut out = [0; 116];
        pages.read(0, &mut out);
        assert_eq!((&out[..16], &out[16..]), (&[7; 16][..], &[8; 100][..]));
        pages.clear(&mut pool);
        assert_eq!((pool.live_memory(), pool.memory()), (0, PAGE));
        let mut next = Pages::new();
        next.write(&mut pool, 3, b"abc");
        assert_eq!(next.memory(), PAGE, "the page kept serves first");
    }

    #[test]
    fn a_short_page_holds_a_later_page_written_before_it() {
        let mut pool = PagePool::new(1 << 20);
        let mut pages = Pages::new();
        pages.write(&mut pool, 100, b"xy");
        pages.write(&mut pool, 2 * PAGE as u64 + 5, b"far");
        assert_eq!(pages.memory(), 128 + PAGE);
        pages.write(&mut pool, 0, &[1; 100]);
        assert_eq!(pages.memory(), 128 + PAGE, "within the short page");
        pages.write(&mut pool, 102, &[2; 2000]);
        assert_eq!(pages.memory(), 2 * PAGE);
        let mut out = [0; 2102];
        pages.read(0, &mut out);
        assert_eq!(&out[98..104], &[1, 1, b'x', b'y', 2, 2]);
        pages.release_before(&mut pool, 2 * PAGE as u64);
        pages.clear(&mut pool);
        assert_eq!((pool.live_memory(), pool.memory()), (0, 2 * PAGE));
    }

    #[test]
    fn one_short_page_is_kept_while_no_whole_one_is() {
        let mut pool = PagePool::new(1 << 20);
        let mut pages = Pages::new();
        pages.write(&mut pool, 0, &[1; SHORT_PAGE_MAX]);
        assert_eq!(pages.memory(), SHORT_PAGE_MAX);
        pages.clear(&mut pool);
        assert_eq!(pool.memory(), SHORT_PAGE_MAX, "kept for the next stream");
        pages.write(&mut pool, 5, b"abc");
        assert_eq!(pages.memory(), SHORT_PAGE_MAX, "the kept one, taken");
        assert_eq!(pool.memory(), SHORT_PAGE_MAX);
        let mut out = [0; 3];
        pages.read(5, &mut out);
        assert_eq!(&out, b"abc");
        let mut whole = Pages::new();
        whole.write(&mut pool, 0, &[2; SHORT_PAGE_MAX + 1]);
        assert_eq!(whole.memory(), PAGE, "past the most a short page holds");
        whole.clear(&mut pool);
        pages.clear(&mut pool);
        assert_eq!(
            pool.memory(),
            PAGE,
            "a whole page kept, no short one beside it"
        );
        pool.trim();
        assert_eq!(pool.memory(), 0);
    }

    #[test]
    fn an_emptied_list_serves_the_next_stream() {
        let mut pool = PagePool::new(1 << 20);
        let mut streams: Vec<Pages> = (0..SPARE_LISTS + 2).map(|_| Pages::new()).collect();
        for (k, pages) in streams.iter_mut().enumerate() {
            pages.write(&mut pool, k as u64, b"x");
            pages.write(&mut pool, PAGE as u64 + k as u64, b"x");
        }
        for pages in &mut streams {
            pages.clear(&mut pool);
        }
        assert_eq!(pool.lists.len(), SPARE_LISTS, "no more lists kept");
        let mut next = Pages::new();
        next.write(&mut pool, PAGE as u64 + 7, b"yz");
        assert_eq!(pool.lists.len(), SPARE_LISTS, "one page needs no list");
        next.write(&mut pool, 2 * PAGE as u64 + 7, b"ab");
        assert_eq!(
            pool.lists.len(),
            SPARE_LISTS - 1,
            "the second page took one"
        );
        let mut out = [0; 2];
        next.read(PAGE as u64 + 7, &mut out);
        assert_eq!(&out, b"yz");
        next.read(2 * PAGE as u64 + 7, &mut out);
        assert_eq!(&out, b"ab");
        next.clear(&mut pool);
        assert_eq!(pool.lists.len(), SPARE_LISTS);
        assert_eq!(pool.live_memory(), 0);
        pool.trim();
        assert!(pool.lists.is_empty());
        assert_eq!(pool.memory(), 0);
    }
}
