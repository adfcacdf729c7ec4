//! One direction's current packet key, kept as its key and IV bytes and
//! expanded into an AES-GCM key only while packets use it.
//!
//! An expanded key (AES-128's round keys and GHASH's tables) is 336 bytes
//! with RustCrypto's backend and more with ring's; its material is 28. A
//! connection holds one current key per direction for its whole life, but
//! an idle one seals and opens a packet only every keep-alive period, so
//! it gives the expansion back ([`LazyKey::release`]) once quiet and
//! expands again, in well under a microsecond, for its next packet. The
//! expansion is a pure function of the material: the key that seals a
//! packet is the same before and after a release, and the packet number
//! (the nonce) is counted by the sealer, which a release does not touch.

use core::fmt;

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::aead::{Backend, IV_LEN, KEY_LEN, PacketKey};

/// A packet key's raw key and IV, wiped from memory when dropped.
#[derive(Zeroize, ZeroizeOnDrop)]
pub(crate) struct KeyMaterial {
    key: [u8; KEY_LEN],
    iv: [u8; IV_LEN],
}

impl KeyMaterial {
    pub(crate) const fn new(key: [u8; KEY_LEN], iv: [u8; IV_LEN]) -> Self {
        Self { key, iv }
    }

    /// The key and IV, for the key schedule to fill in.
    pub(crate) const fn parts_mut(&mut self) -> (&mut [u8; KEY_LEN], &mut [u8; IV_LEN]) {
        (&mut self.key, &mut self.iv)
    }

    /// The AES-GCM key this material makes with `backend`.
    pub(crate) fn expand(&self, backend: Backend) -> PacketKey {
        PacketKey::with_backend(backend, &self.key, &self.iv)
    }
}

/// A packet key whose expansion comes and goes (see the module docs).
pub(crate) struct LazyKey {
    material: KeyMaterial,
    expanded: Option<Box<PacketKey>>,
}

impl fmt::Debug for LazyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyKey")
            .field("expanded", &self.is_expanded())
            .finish_non_exhaustive()
    }
}

impl LazyKey {
    /// A key not expanded yet.
    pub(crate) const fn new(material: KeyMaterial) -> Self {
        Self {
            material,
            expanded: None,
        }
    }

    /// A key already expanded (`expanded` must be `material`'s).
    pub(crate) const fn with_expanded(material: KeyMaterial, expanded: Box<PacketKey>) -> Self {
        Self {
            material,
            expanded: Some(expanded),
        }
    }

    /// The expanded key, expanded now if it was not.
    #[inline]
    pub(crate) fn get(&mut self, backend: Backend) -> &PacketKey {
        let material = &self.material;
        self.expanded
            .get_or_insert_with(|| Box::new(material.expand(backend)))
    }

    /// Moves to `material` (a key update): expanded at once, in the same
    /// box, if the old key was expanded, so that a connection sending
    /// through its updates allocates nothing for them.
    pub(crate) fn replace(&mut self, material: KeyMaterial, backend: Backend) {
        if let Some(expanded) = self.expanded.as_mut() {
            **expanded = material.expand(backend);
        }
        self.material = material;
    }

    /// Whether the expansion is held.
    pub(crate) const fn is_expanded(&self) -> bool {
        self.expanded.is_some()
    }

    /// Gives the expansion back; the next [`get`](Self::get) makes it again.
    pub(crate) fn release(&mut self) {
        self.expanded = None;
    }

    /// The expanded key, expanded now if it was not, without the material.
    pub(crate) fn into_expanded(mut self, backend: Backend) -> Box<PacketKey> {
        match self.expanded.take() {
            Some(expanded) => expanded,
            None => Box::new(self.material.expand(backend)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn material() -> KeyMaterial {
        KeyMaterial::new([3; KEY_LEN], [4; IV_LEN])
    }

    #[test]
    fn a_released_key_expands_again_into_the_same_key() {
        let mut key = LazyKey::new(material());
        assert!(!key.is_expanded());
        let mut buf = *b"lazy key";
        let tag = key
            .get(Backend::default())
            .seal_in_place(9, b"h", &mut buf)
            .expect("seals");
        assert!(key.is_expanded());
        key.release();
        assert!(!key.is_expanded());
        key.get(Backend::default())
            .open_in_place(9, b"h", &mut buf, &tag)
            .expect("the same key after a release");
        assert_eq!(&buf, b"lazy key");
    }

    #[test]
    fn every_backend_expands_the_material_alike() {
        let mut buf = *b"material";
        let tag = material()
            .expand(Backend::default())
            .seal_in_place(1, b"", &mut buf)
            .expect("seals");
        for &backend in Backend::ALL {
            let mut copy = buf;
            LazyKey::new(material())
                .into_expanded(backend)
                .open_in_place(1, b"", &mut copy, &tag)
                .expect("opens");
            assert_eq!(&copy, b"material");
        }
    }
}
