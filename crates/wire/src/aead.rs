//! AES-128-GCM packet protection with counter nonces.
//!
//! A [`PacketKey`] is one direction's AES-128 key and 12-byte IV. The nonce
//! of a packet is the IV XOR the packet number, as in TLS 1.3 and QUIC, so
//! nothing random is drawn per packet and no nonce travels on the wire.
//! Each direction has its own key and IV, so the two peers never use the
//! same (key, nonce) pair. Packet numbers are one 62-bit sequence per
//! direction that outlives keys; how many packets one key seals is counted
//! by [`crate::PacketSealer`], which stops at [`PACKET_LIMIT`].
//!
//! Two interchangeable backends implement the cipher: RustCrypto's `aes-gcm`
//! (always built) and `ring` (cargo feature `ring`). Both pass the same
//! published known-answer vectors in this module's tests.

use core::fmt;

use aes_gcm::AesGcm;
use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::aes::Aes128Enc;

use crate::error::{OpenError, SealError};
use crate::header::MAX_PACKET_NUMBER;

/// AES-128 key length in bytes.
pub const KEY_LEN: usize = 16;
/// GCM IV (nonce) length in bytes.
pub const IV_LEN: usize = 12;
/// GCM authentication tag length in bytes.
pub const TAG_LEN: usize = 16;

/// The number of packets one key may seal.
///
/// RFC 9001 §6.6: "For AEAD_AES_128_GCM and AEAD_AES_256_GCM, the
/// confidentiality limit is 2^23 encrypted packets". Past it the sender
/// must update its key or close; [`crate::PacketSealer`] refuses.
pub const PACKET_LIMIT: u64 = 1 << 23;

/// Which AES-GCM implementation a [`PacketKey`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// RustCrypto's `aes-gcm` 0.11 (AES-NI and PCLMULQDQ when the CPU has them).
    #[cfg_attr(not(feature = "ring"), default)]
    RustCrypto,
    /// `ring`'s assembly AES-GCM (feature `ring`); the default when enabled.
    #[cfg(feature = "ring")]
    #[default]
    Ring,
}

impl Backend {
    /// Every backend built into this binary.
    #[cfg(not(feature = "ring"))]
    pub const ALL: &'static [Self] = &[Self::RustCrypto];
    /// Every backend built into this binary.
    #[cfg(feature = "ring")]
    pub const ALL: &'static [Self] = &[Self::RustCrypto, Self::Ring];
}

/// AES-128-GCM with the encryption key schedule only: GCM runs AES
/// forwards in both directions (counter mode), so the decryption schedule
/// of `aes_gcm::Aes128Gcm` (176 bytes per key, two keys per connection)
/// would never be used.
type Aes128Gcm = AesGcm<Aes128Enc, U12>;

#[allow(
    clippy::large_enum_variant,
    reason = "a key is the backend's own size; boxing ring's would cost a pointer per packet and save nothing where ring is the default"
)]
enum Cipher {
    RustCrypto(Aes128Gcm),
    #[cfg(feature = "ring")]
    Ring(ring::aead::LessSafeKey),
}

/// One direction's AES-128-GCM key and IV.
///
/// Sealing and opening work in place on the caller's buffer and never allocate.
/// With the default backend the expanded key and the IV are wiped from memory
/// when the key is dropped; ring keeps its key schedule to itself and does not
/// promise that.
pub struct PacketKey {
    cipher: Cipher,
    iv: [u8; IV_LEN],
}

impl Drop for PacketKey {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.iv);
    }
}

impl fmt::Debug for PacketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketKey")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl PacketKey {
    /// A key using the default [`Backend`].
    #[must_use]
    pub fn new(key: &[u8; KEY_LEN], iv: &[u8; IV_LEN]) -> Self {
        Self::with_backend(Backend::default(), key, iv)
    }

    /// A key using the given backend.
    #[must_use]
    pub fn with_backend(backend: Backend, key: &[u8; KEY_LEN], iv: &[u8; IV_LEN]) -> Self {
        let cipher = match backend {
            Backend::RustCrypto => Cipher::RustCrypto(Aes128Gcm::new(&(*key).into())),
            #[cfg(feature = "ring")]
            Backend::Ring => {
                // Cannot fail: the key has exactly AES-128's length.
                let unbound = ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, key)
                    .expect("a 16-byte key is a valid AES-128-GCM key");
                Cipher::Ring(ring::aead::LessSafeKey::new(unbound))
            }
        };
        Self { cipher, iv: *iv }
    }

    /// The backend this key uses.
    #[must_use]
    pub const fn backend(&self) -> Backend {
        match self.cipher {
            Cipher::RustCrypto(_) => Backend::RustCrypto,
            #[cfg(feature = "ring")]
            Cipher::Ring(_) => Backend::Ring,
        }
    }

    /// The nonce for `packet_number`.
    ///
    /// RFC 9001 §5.3: "The 62 bits of the reconstructed QUIC packet number in
    /// network byte order are left-padded with zeros to the size of the IV.
    /// The exclusive OR of the padded packet number and the IV forms the AEAD
    /// nonce."
    #[must_use]
    #[inline]
    pub fn nonce(&self, packet_number: u64) -> [u8; IV_LEN] {
        let mut nonce = self.iv;
        for (n, p) in nonce[IV_LEN - 8..]
            .iter_mut()
            .zip(packet_number.to_be_bytes())
        {
            *n ^= p;
        }
        nonce
    }

    /// Encrypts `payload` in place and returns the tag; `aad` (the packet
    /// header) is authenticated but not encrypted.
    ///
    /// Refuses packet numbers above [`MAX_PACKET_NUMBER`]. The caller must
    /// never seal two packets with the same number under one key;
    /// [`crate::PacketSealer`] guarantees it by owning the counter.
    #[inline]
    pub fn seal_in_place(
        &self,
        packet_number: u64,
        aad: &[u8],
        payload: &mut [u8],
    ) -> Result<[u8; TAG_LEN], SealError> {
        if packet_number > MAX_PACKET_NUMBER {
            return Err(SealError::PacketNumbersExhausted);
        }
        let nonce = self.nonce(packet_number);
        match &self.cipher {
            Cipher::RustCrypto(cipher) => cipher
                .encrypt_inout_detached(&nonce.into(), aad, payload.into())
                .map(Into::into)
                .map_err(|_| SealError::Cipher),
            #[cfg(feature = "ring")]
            Cipher::Ring(key) => {
                let nonce = ring::aead::Nonce::assume_unique_for_key(nonce);
                let tag = key
                    .seal_in_place_separate_tag(nonce, ring::aead::Aad::from(aad), payload)
                    .map_err(|_| SealError::Cipher)?;
                let mut out = [0u8; TAG_LEN];
                out.copy_from_slice(tag.as_ref());
                Ok(out)
            }
        }
    }

    /// Checks `tag` over `aad` and `payload` and decrypts `payload` in place.
    ///
    /// On failure the contents of `payload` are unspecified and must not be used.
    #[inline]
    pub fn open_in_place(
        &self,
        packet_number: u64,
        aad: &[u8],
        payload: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        if packet_number > MAX_PACKET_NUMBER {
            return Err(OpenError::Authentication);
        }
        let nonce = self.nonce(packet_number);
        match &self.cipher {
            Cipher::RustCrypto(cipher) => cipher
                .decrypt_inout_detached(&nonce.into(), aad, payload.into(), &(*tag).into())
                .map_err(|_| OpenError::Authentication),
            #[cfg(feature = "ring")]
            Cipher::Ring(key) => {
                let nonce = ring::aead::Nonce::assume_unique_for_key(nonce);
                let tag = ring::aead::Tag::from(*tag);
                key.open_in_place_separate_tag(nonce, ring::aead::Aad::from(aad), tag, payload, 0..)
                    .map(|_| ())
                    .map_err(|_| OpenError::Authentication)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published AES-128-GCM known-answer vectors.
    struct Vector {
        key: &'static str,
        iv: &'static str,
        plaintext: &'static str,
        aad: &'static str,
        ciphertext: &'static str,
        tag: &'static str,
    }

    const VECTORS: &[Vector] = &[
        // McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)", test case 1.
        Vector {
            key: "00000000000000000000000000000000",
            iv: "000000000000000000000000",
            plaintext: "",
            aad: "",
            ciphertext: "",
            tag: "58e2fccefa7e3061367f1d57a4e7455a",
        },
        // Test case 2.
        Vector {
            key: "00000000000000000000000000000000",
            iv: "000000000000000000000000",
            plaintext: "00000000000000000000000000000000",
            aad: "",
            ciphertext: "0388dace60b6a392f328c2b971b2fe78",
            tag: "ab6e47d42cec13bdf53a67b21257bddf",
        },
        // Test case 3.
        Vector {
            key: "feffe9928665731c6d6a8f9467308308",
            iv: "cafebabefacedbaddecaf888",
            plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
            aad: "",
            ciphertext: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
            tag: "4d5c2af327cd64a62cf35abd2ba6fab4",
        },
        // Test case 4 (with associated data).
        Vector {
            key: "feffe9928665731c6d6a8f9467308308",
            iv: "cafebabefacedbaddecaf888",
            plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
            aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
            ciphertext: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
            tag: "5bc94fbc3221a5db94fae95ae7121a47",
        },
        // NIST CAVP gcmEncryptExtIV128.rsp, Keylen 128, IVlen 96, PTlen 128, AADlen 128, Count 0.
        Vector {
            key: "c939cc13397c1d37de6ae0e1cb7c423c",
            iv: "b3d8cc017cbb89b39e0f67e2",
            plaintext: "c3b3c41f113a31b73d9a5cd432103069",
            aad: "24825602bd12a984e0092d3e448eda5f",
            ciphertext: "93fe7d9e9bfd10348a5606e5cafa7354",
            tag: "0032a1dc85f1c9786925a2e71d8272dd",
        },
    ];

    fn backends() -> Vec<Backend> {
        Backend::ALL.to_vec()
    }

    fn array<const N: usize>(hex_text: &str) -> [u8; N] {
        hex::decode(hex_text).unwrap().try_into().unwrap()
    }

    /// The IV that makes `packet_number`'s nonce equal `nonce`.
    fn iv_for(nonce: [u8; IV_LEN], packet_number: u64) -> [u8; IV_LEN] {
        let zero_iv_key = PacketKey::new(&[0; KEY_LEN], &[0; IV_LEN]);
        let mask = zero_iv_key.nonce(packet_number);
        core::array::from_fn(|i| nonce[i] ^ mask[i])
    }

    #[test]
    fn every_backend_reproduces_the_published_vectors_at_several_packet_numbers() {
        for backend in backends() {
            for (index, v) in VECTORS.iter().enumerate() {
                for packet_number in [0, 1, 0x1234, PACKET_LIMIT - 1, MAX_PACKET_NUMBER] {
                    let key = PacketKey::with_backend(
                        backend,
                        &array(v.key),
                        &iv_for(array(v.iv), packet_number),
                    );
                    let aad = hex::decode(v.aad).unwrap();
                    let mut buf = hex::decode(v.plaintext).unwrap();
                    let tag = key.seal_in_place(packet_number, &aad, &mut buf).unwrap();
                    assert_eq!(
                        hex::encode(&buf),
                        v.ciphertext,
                        "{backend:?} vector {index}"
                    );
                    assert_eq!(hex::encode(tag), v.tag, "{backend:?} vector {index}");
                    key.open_in_place(packet_number, &aad, &mut buf, &tag)
                        .unwrap();
                    assert_eq!(hex::encode(&buf), v.plaintext, "{backend:?} vector {index}");
                }
            }
        }
    }

    #[test]
    fn every_backend_refuses_a_flipped_bit_in_aad_ciphertext_or_tag() {
        let v = &VECTORS[3];
        for backend in backends() {
            let key = PacketKey::with_backend(backend, &array(v.key), &array(v.iv));
            let aad: Vec<u8> = hex::decode(v.aad).unwrap();
            let ciphertext: Vec<u8> = hex::decode(v.ciphertext).unwrap();
            let tag: [u8; TAG_LEN] = array(v.tag);
            for bit in 0..(aad.len() + ciphertext.len() + TAG_LEN) * 8 {
                let (mut a, mut c, mut t) = (aad.clone(), ciphertext.clone(), tag);
                let byte = bit / 8;
                let flip = 1u8 << (bit % 8);
                if byte < a.len() {
                    a[byte] ^= flip;
                } else if byte < a.len() + c.len() {
                    c[byte - a.len()] ^= flip;
                } else {
                    t[byte - a.len() - c.len()] ^= flip;
                }
                assert_eq!(
                    key.open_in_place(0, &a, &mut c, &t),
                    Err(OpenError::Authentication)
                );
            }
        }
    }

    #[test]
    fn backends_are_interchangeable_on_the_wire() {
        let all = backends();
        for sealer in &all {
            for opener in &all {
                let seal = PacketKey::with_backend(*sealer, &[7; KEY_LEN], &[9; IV_LEN]);
                let open = PacketKey::with_backend(*opener, &[7; KEY_LEN], &[9; IV_LEN]);
                let mut buf = *b"interchangeable";
                let tag = seal.seal_in_place(42, b"hdr", &mut buf).unwrap();
                open.open_in_place(42, b"hdr", &mut buf, &tag).unwrap();
                assert_eq!(&buf, b"interchangeable");
            }
        }
    }

    #[test]
    fn sealing_past_the_62_bit_packet_numbers_is_refused() {
        let key = PacketKey::new(&[1; KEY_LEN], &[2; IV_LEN]);
        let mut buf = [0u8; 8];
        assert!(key.seal_in_place(MAX_PACKET_NUMBER, &[], &mut buf).is_ok());
        for pn in [MAX_PACKET_NUMBER + 1, u64::MAX] {
            assert_eq!(
                key.seal_in_place(pn, &[], &mut buf),
                Err(SealError::PacketNumbersExhausted)
            );
        }
    }

    #[test]
    fn a_packet_sealed_under_one_number_does_not_open_under_another() {
        let key = PacketKey::new(&[1; KEY_LEN], &[2; IV_LEN]);
        let mut buf = *b"payload";
        let tag = key.seal_in_place(5, b"h", &mut buf).unwrap();
        let mut copy = buf;
        assert_eq!(
            key.open_in_place(6, b"h", &mut copy, &tag),
            Err(OpenError::Authentication)
        );
        assert!(key.open_in_place(5, b"h", &mut buf, &tag).is_ok());
    }
}
