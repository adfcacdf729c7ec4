//! What the loopback tests of the async API share: identity keys made
//! once, endpoints on real sockets ([`net`]) and an impairing relay
//! ([`relay`]).
#![allow(dead_code, unreachable_pub)]

pub mod net;
pub mod relay;

use std::sync::OnceLock;

use rand_core::OsRng;
use tern_peer::IdentityKey;

/// An RSA-2048 identity, generated once per test binary (about 250 ms).
pub fn identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    let der = DER.get_or_init(|| {
        let key = IdentityKey::generate(&mut OsRng).expect("RSA key generation");
        key.to_pkcs8_der().expect("encodes").to_vec()
    });
    IdentityKey::from_pkcs8_der(der).expect("decodes")
}

/// A second identity, for the wrong-key cases.
pub fn other_identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    let der = DER.get_or_init(|| {
        let key = IdentityKey::generate(&mut OsRng).expect("RSA key generation");
        key.to_pkcs8_der().expect("encodes").to_vec()
    });
    IdentityKey::from_pkcs8_der(der).expect("decodes")
}
