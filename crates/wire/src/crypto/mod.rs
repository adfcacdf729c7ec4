//! The intro's asymmetric cryptography behind one crate-private API: X25519
//! keys and exchanges, RSA-OAEP and RSA-PSS. The default build uses the
//! pure-Rust x25519-dalek and `rsa` crates; the cargo feature `aws-lc` puts
//! aws-lc-rs's assembly arithmetic behind the same calls. The bytes on the
//! wire and the keys' text forms are the same either way.

pub(crate) mod rsa_keys;
pub(crate) mod x25519;
