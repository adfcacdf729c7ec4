//! A value that costs a connection one pointer until it is first changed.
//!
//! An idle connection has a dozen parts that are empty almost always: the
//! queues of messages, datagrams and events, the senders waiting their
//! turn, the rendezvous signals. Each, empty, is tens of bytes of headers
//! in every connection. [`Lazy`] holds one in a box made at the first
//! change, reads as absent before, and gives the box back in
//! [`Lazy::release_if_empty`], which the connection calls when it has been
//! quiet (with its other scratch memory): a connection that carries data
//! keeps the box, and allocates nothing more for it in its steady state.

use std::collections::VecDeque;

/// What [`Lazy::release_if_empty`] asks before it gives the memory back:
/// whether the value holds nothing that must be kept.
pub(crate) trait IsEmpty {
    fn is_empty(&self) -> bool;
}

impl<T> IsEmpty for VecDeque<T> {
    #[inline]
    fn is_empty(&self) -> bool {
        VecDeque::is_empty(self)
    }
}

/// A `T` behind a pointer, allocated at the first change.
#[derive(Debug)]
pub(crate) struct Lazy<T>(Option<Box<T>>);

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Lazy<T> {
    /// Nothing, holding no memory.
    pub(crate) const fn new() -> Self {
        Self(None)
    }

    /// The value, if it was made since the last release.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    /// The value to change, if it was made since the last release: for
    /// what only takes from it or updates what it holds (which an absent
    /// value never needs).
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        self.0.as_deref_mut()
    }

    /// The value to add to, made if this is the first change since a
    /// release.
    #[inline]
    pub(crate) fn get_or_default(&mut self) -> &mut T
    where
        T: Default,
    {
        self.0.get_or_insert_with(Box::default)
    }

    /// Drops the value and its memory, whatever it holds.
    pub(crate) fn release(&mut self) {
        self.0 = None;
    }

    /// Whether it holds memory (a box, empty or not).
    #[cfg(test)]
    pub(crate) fn holds_memory(&self) -> bool {
        self.0.is_some()
    }
}

impl<T: IsEmpty> Lazy<T> {
    /// Whether it holds nothing: never made, or made and empty.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.get().is_none_or(T::is_empty)
    }

    /// Gives the memory back while the value is empty.
    pub(crate) fn release_if_empty(&mut self) {
        if self.is_empty() {
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::Lazy;

    #[test]
    fn a_value_is_made_at_its_first_change_and_released_only_when_empty() {
        let mut lazy: Lazy<VecDeque<u8>> = Lazy::new();
        assert_eq!(size_of_val(&lazy), size_of::<usize>());
        assert!(lazy.get().is_none() && lazy.get_mut().is_none() && lazy.is_empty());
        lazy.release_if_empty();
        assert!(!lazy.holds_memory(), "reading allocates nothing");
        lazy.get_or_default().push_back(1);
        lazy.release_if_empty();
        assert!(lazy.holds_memory(), "kept while it holds something");
        assert_eq!(lazy.get_mut().and_then(VecDeque::pop_front), Some(1));
        assert!(lazy.is_empty() && lazy.holds_memory());
        lazy.release_if_empty();
        assert!(!lazy.holds_memory());
        lazy.get_or_default().push_back(2);
        lazy.release();
        assert!(!lazy.holds_memory(), "a release drops what it holds");
    }
}
