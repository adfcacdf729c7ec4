//! A queue that costs a connection one pointer until it is first used.
//!
//! An empty `VecDeque` is 32 bytes of header in every connection; an idle
//! connection has a dozen queues for messages, datagrams, events and
//! senders waiting their turn, all empty. [`LazyDeque`] is a `VecDeque`
//! in a [`Lazy`] box: made at the first push and given back by
//! [`LazyDeque::release_if_empty`] when the connection has been quiet.

use std::collections::VecDeque;

use super::lazy::Lazy;

/// A `VecDeque` behind a pointer, allocated at the first push.
#[derive(Debug)]
pub(crate) struct LazyDeque<T>(Lazy<VecDeque<T>>);

impl<T> Default for LazyDeque<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LazyDeque<T> {
    /// An empty queue, holding no memory.
    pub(crate) const fn new() -> Self {
        Self(Lazy::new())
    }

    #[inline]
    pub(crate) fn push_back(&mut self, item: T) {
        self.0.get_or_default().push_back(item);
    }

    #[inline]
    pub(crate) fn push_front(&mut self, item: T) {
        self.0.get_or_default().push_front(item);
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        self.0.get_mut()?.pop_front()
    }

    #[inline]
    pub(crate) fn front(&self) -> Option<&T> {
        self.0.get()?.front()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.0.get_mut()?.get_mut(index)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.0.get().map_or(0, VecDeque::len)
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Empties the queue; it keeps its memory until a release.
    pub(crate) fn clear(&mut self) {
        if let Some(queue) = self.0.get_mut() {
            queue.clear();
        }
    }

    pub(crate) fn contains(&self, item: &T) -> bool
    where
        T: PartialEq,
    {
        self.0.get().is_some_and(|queue| queue.contains(item))
    }

    /// Gives the memory back while the queue is empty.
    pub(crate) fn release_if_empty(&mut self) {
        self.0.release_if_empty();
    }

    /// Whether it holds memory (a box, empty or not).
    #[cfg(test)]
    pub(crate) fn holds_memory(&self) -> bool {
        self.0.holds_memory()
    }
}

#[cfg(test)]
mod tests {
    use super::LazyDeque;

    #[test]
    fn a_queue_allocates_at_its_first_push_and_releases_only_when_empty() {
        let mut queue = LazyDeque::new();
        assert!(queue.is_empty() && !queue.holds_memory());
        assert_eq!(queue.pop_front(), None);
        queue.clear();
        queue.release_if_empty();
        assert!(
            !queue.holds_memory(),
            "reading and clearing allocate nothing"
        );
        queue.push_back(2);
        queue.push_front(1);
        queue.push_back(3);
        assert!(queue.holds_memory());
        assert_eq!((queue.len(), queue.front()), (3, Some(&1)));
        assert!(queue.contains(&2));
        if let Some(item) = queue.get_mut(1) {
            *item = 4;
        }
        queue.release_if_empty();
        assert!(queue.holds_memory(), "kept while it holds items");
        assert_eq!(queue.pop_front(), Some(1));
        assert_eq!(queue.pop_front(), Some(4));
        assert_eq!(queue.pop_front(), Some(3));
        assert_eq!(queue.pop_front(), None);
        queue.release_if_empty();
        assert!(!queue.holds_memory());
        queue.push_back(5);
        assert_eq!(queue.pop_front(), Some(5), "usable again after a release");
    }
}
