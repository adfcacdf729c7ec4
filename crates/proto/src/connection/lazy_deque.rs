//! A queue that costs a connection one pointer until it is first used.
//!
//! An empty `VecDeque` is 32 bytes of header in every connection; an idle
//! connection has a dozen queues for messages, datagrams, events and
//! senders waiting their turn, all empty. [`LazyDeque`] holds its
//! `VecDeque` in a box made at the first push and given back by
//! [`LazyDeque::release_if_empty`], which the connection calls when it has
//! been quiet (with its other scratch memory): a connection that carries
//! data keeps the box, and allocates nothing more for it in its steady
//! state.

use std::collections::VecDeque;

/// A `VecDeque` behind a pointer, allocated at the first push.
#[derive(Debug)]
#[expect(
    clippy::box_collection,
    reason = "the box is the point: 8 bytes inline rather than 32 while unused"
)]
pub(crate) struct LazyDeque<T>(Option<Box<VecDeque<T>>>);

impl<T> Default for LazyDeque<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LazyDeque<T> {
    /// An empty queue, holding no memory.
    pub(crate) const fn new() -> Self {
        Self(None)
    }

    /// The queue to add to, made if this is the first push since a release.
    #[inline]
    fn queue(&mut self) -> &mut VecDeque<T> {
        self.0.get_or_insert_with(Box::default)
    }

    #[inline]
    pub(crate) fn push_back(&mut self, item: T) {
        self.queue().push_back(item);
    }

    #[inline]
    pub(crate) fn push_front(&mut self, item: T) {
        self.queue().push_front(item);
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        self.0.as_mut()?.pop_front()
    }

    #[inline]
    pub(crate) fn front(&self) -> Option<&T> {
        self.0.as_ref()?.front()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.0.as_mut()?.get_mut(index)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |queue| queue.len())
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the queue; it keeps its memory until a release.
    pub(crate) fn clear(&mut self) {
        if let Some(queue) = self.0.as_mut() {
            queue.clear();
        }
    }

    pub(crate) fn contains(&self, item: &T) -> bool
    where
        T: PartialEq,
    {
        self.0.as_ref().is_some_and(|queue| queue.contains(item))
    }

    /// Gives the memory back while the queue is empty.
    pub(crate) fn release_if_empty(&mut self) {
        if self.is_empty() {
            self.0 = None;
        }
    }

    /// Whether it holds memory (a box, empty or not).
    #[cfg(test)]
    pub(crate) fn holds_memory(&self) -> bool {
        self.0.is_some()
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
