//! Fixtures shared by the crate's unit tests.
//!
//! RSA-2048 key generation takes about a quarter of a second even optimised,
//! so the identities are generated once per test binary and shared.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand_core::OsRng;

use crate::identity::IdentityKey;

/// The responder identity most tests use.
pub(crate) fn identity() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate(&mut OsRng).expect("RSA key generation"))
}

/// A second identity, for "wrong key" tests.
pub(crate) fn other_identity() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate(&mut OsRng).expect("RSA key generation"))
}

/// A fixed wall-clock instant, so tests never depend on the machine's clock.
pub(crate) fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

/// An X25519 responder identity (cheap to make, shared for symmetry).
pub(crate) fn x25519_identity() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate_x25519(&mut OsRng))
}

/// A second X25519 identity, for "wrong key" tests and initiators.
pub(crate) fn other_x25519_identity() -> &'static IdentityKey {
    static KEY: OnceLock<IdentityKey> = OnceLock::new();
    KEY.get_or_init(|| IdentityKey::generate_x25519(&mut OsRng))
}

/// A packet `sender` seals opens with `receiver`'s keys: the two ends of a
/// handshake agree.
pub(crate) fn assert_keys_agree(
    sender: &mut crate::ConnectionKeys,
    receiver: &mut crate::ConnectionKeys,
) {
    let mut buf = [0u8; 100];
    let packet = sender.sealer.start(&mut buf).expect("a key to seal with");
    let (sent, _) = packet.finish().expect("a sealed packet");
    assert!(receiver.opener.open(&mut buf[..sent]).is_ok());
}
