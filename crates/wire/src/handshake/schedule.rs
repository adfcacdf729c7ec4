//! The key schedule: the transcript hash and the session secrets of both
//! directions, derived from it with HKDF-SHA256 (RFC 5869).

use core::fmt;

use hkdf::Hkdf;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::crypto::x25519::SecretKey;
use crate::header::{Header, X25519_KEY_LEN};
use crate::keys::{SECRET_LEN, TrafficSecret};
use crate::ticket::ResumptionSecret;

/// HKDF label of the initiator-to-responder secret.
const LABEL_I2R: &[u8] = b"tern v2 i2r";
/// HKDF label of the responder-to-initiator secret.
const LABEL_R2I: &[u8] = b"tern v2 r2i";
/// HKDF label of the resumption secret.
const LABEL_RESUME: &[u8] = b"tern v2 resume";

/// A session's secrets: both directions' and the resumption secret a
/// ticket issued in it carries.
pub(super) struct Secrets {
    pub(super) i2r: TrafficSecret,
    pub(super) r2i: TrafficSecret,
    pub(super) resumption: ResumptionSecret,
}

/// The session secrets of both directions and the resumption secret, from
/// the handshake's inputs. Refuses a non-contributory X25519 result and
/// identical directions.
pub(super) fn derive_secrets(
    initiator_secret: &[u8; SECRET_LEN],
    shared: &[u8; X25519_KEY_LEN],
    transcript: &[u8; 32],
) -> Option<Secrets> {
    if shared.iter().all(|&b| b == 0) {
        return None;
    }
    let hkdf = Hkdf::<Sha256>::new(Some(initiator_secret), shared);
    let mut i2r = Zeroizing::new([0u8; SECRET_LEN]);
    let mut r2i = Zeroizing::new([0u8; SECRET_LEN]);
    let mut resumption = Zeroizing::new([0u8; SECRET_LEN]);
    let mut info = [0u8; 14 + 32];
    for (label, out) in [
        (LABEL_I2R, &mut i2r),
        (LABEL_R2I, &mut r2i),
        (LABEL_RESUME, &mut resumption),
    ] {
        let info = &mut info[..label.len() + transcript.len()];
        info[..label.len()].copy_from_slice(label);
        info[label.len()..].copy_from_slice(transcript);
        hkdf.expand(info, &mut out[..]).ok()?;
    }
    (*i2r != *r2i).then(|| Secrets {
        i2r: TrafficSecret::from_bytes(*i2r),
        r2i: TrafficSecret::from_bytes(*r2i),
        resumption: ResumptionSecret(resumption),
    })
}

/// SHA-256 of the intro datagram and the reply header.
pub(super) fn transcript(intro: &Sha256, reply_header: &[u8]) -> [u8; 32] {
    intro.clone().chain_update(reply_header).finalize().into()
}

/// The transcript hash of a finished handshake.
#[derive(Clone)]
pub struct Transcript {
    /// The initiator's hash of its intro, which recognises a repeat of the
    /// reply; `None` on the responder, which gets no reply (boxed: a
    /// hasher's state is 112 bytes, and every responder's connection keeps
    /// its transcript while an identity proof may still come).
    pub(super) intro: Option<Box<Sha256>>,
    pub(super) hash: [u8; 32],
    /// What an X25519 identity's proof is made with (wire format §5.10).
    pub(crate) exchange: Option<ProofExchange>,
}

/// The half of the exchange an X25519 identity's proof is keyed with that
/// each side holds: the initiator the responder's ephemeral public key,
/// the responder its ephemeral private key (kept only while a proof may
/// still come).
#[derive(Clone)]
pub(crate) enum ProofExchange {
    /// The initiator's: the responder's ephemeral public key.
    Initiator([u8; X25519_KEY_LEN]),
    /// The responder's: its ephemeral private key (as large as the
    /// initiator's half, so not boxed).
    Responder(SecretKey),
}

impl fmt::Debug for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Transcript").field(&self.hash).finish()
    }
}

impl Transcript {
    /// SHA-256 of the intro datagram and the reply header.
    #[must_use]
    pub const fn hash(&self) -> [u8; 32] {
        self.hash
    }

    /// Whether `datagram` is a repeat of the reply that established this
    /// connection (the responder resends it when the intro is repeated).
    /// No key is derived: a repeat is to be dropped. Always `false` for the
    /// responder's transcript.
    #[must_use]
    pub fn is_repeated_reply(&self, datagram: &[u8]) -> bool {
        match (&self.intro, Header::parse(datagram)) {
            (Some(intro), Ok((Header::IntroReply { .. }, len))) => {
                transcript(intro, &datagram[..len]) == self.hash
            }
            _ => false,
        }
    }
}
