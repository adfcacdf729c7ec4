//! The initiator's optional proof of its own identity, after the reply:
//! an RSA identity's signature, or an X25519 identity's exchange with the
//! responder's ephemeral key (wire format §5.10).
//!
//! The handshake authenticates the responder only: the initiator must know
//! its public key, and only its holder can complete the handshake. When the
//! connection's configuration asks for it, the initiator also proves who it
//! is: in its first Data packet it sends an [`Identity`] frame carrying its
//! RSA-2048 public key (SubjectPublicKeyInfo DER) and an RSASSA-PSS
//! signature (SHA-256, MGF1-SHA-256, 32-byte salt; RFC 8017 §8.1) whose
//! message is
//!
//! ```text
//! "tern v2 initiator identity" || transcript hash
//! ```
//!
//! The transcript hash (SHA-256 of the intro datagram and the reply header,
//! [`Transcript::hash`]) covers the initiator's fresh secret and X25519 key,
//! RSA-encrypted to this responder, and the responder's fresh X25519 key.
//! So a proof holds for one session only: replayed into any other session,
//! with the same responder or another, it does not verify. The frame
//! travels under the session's packet protection, so nobody without the
//! session keys can send it; and the initiator signs only after the reply
//! authenticated, so it never signs a transcript a third party chose. The
//! label keeps the signature from meaning anything outside this use.
//!
//! It costs no round trip: the frame (555 bytes with the usual exponent
//! 65537) rides beside data in the first packet, which at the 1200-byte
//! minimum still has room for 617 bytes of stream data. What a responder
//! that requires a proof does with data that arrives before it is the
//! connection's policy: hold it back until the proof verifies, and close
//! the connection if it does not.

use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};

use crate::crypto::rsa_keys::{PssCheck, sign_pss};
use crate::crypto::x25519::SharedSecret;
use crate::error::ProofError;
use crate::frame::{Frame, Identity};
use crate::handshake::{ProofExchange, Transcript};
use crate::identity::{IdentityKey, PublicIdentity};
use hkdf::Hkdf;

/// Prefixed to the transcript hash in the signed message.
const PROOF_LABEL: &[u8] = b"tern v2 initiator identity";

/// The message the PSS signature covers (its SHA-256 digest is what is
/// signed): the label and the transcript hash.
fn signed_message(transcript: &Transcript) -> [u8; PROOF_LABEL.len() + 32] {
    let mut message = [0u8; PROOF_LABEL.len() + 32];
    let (label, hash) = message.split_at_mut(PROOF_LABEL.len());
    label.copy_from_slice(PROOF_LABEL);
    hash.copy_from_slice(&transcript.hash());
    message
}

impl Transcript {
    /// Signs this session's transcript with the initiator's `key` (an RSA
    /// private-key operation, blinded with `rng`, about a millisecond) and
    /// returns the proof to send in an [`Identity`] frame.
    ///
    /// An X25519 identity cannot sign: its proof is a key only the holder
    /// of its private key and the responder can derive, from the exchange
    /// of that key with the responder's ephemeral key; no asymmetric operation
    /// but that exchange.
    pub fn prove(
        &self,
        key: &IdentityKey,
        rng: &mut impl CryptoRngCore,
    ) -> Result<IdentityProof, ProofError> {
        let public_key = key.public().to_spki_der().map_err(ProofError::Key)?;
        if let Some(secret) = key.x25519() {
            let Some(ProofExchange::Initiator(ephemeral)) = &self.exchange else {
                return Err(ProofError::NoExchange);
            };
            let shared = secret.diffie_hellman(ephemeral);
            let tag = x25519_proof(self, &shared).ok_or(ProofError::Signature)?;
            return Ok(IdentityProof {
                public_key,
                signature: tag.to_vec(),
            });
        }
        let key = key.rsa().ok_or(ProofError::NotRsa)?;
        let signature =
            sign_pss(key.key(), &signed_message(self), rng).map_err(ProofError::Signing)?;
        Ok(IdentityProof {
            public_key,
            signature,
        })
    }
}

impl Identity<'_> {
    /// Checks the proof against this session's `transcript` and returns the
    /// initiator's identity if it holds. Refuses a key that is not RSA-2048
    /// SPKI DER, a signature that is not below the key's modulus, and one
    /// that does not verify under the key.
    pub fn verify(&self, transcript: &Transcript) -> Result<PublicIdentity, ProofError> {
        let identity = PublicIdentity::from_spki_der(self.public_key).map_err(ProofError::Key)?;
        if let Some(key) = identity.x25519_bytes() {
            let Some(ProofExchange::Responder(ephemeral)) = &transcript.exchange else {
                return Err(ProofError::NoExchange);
            };
            let shared = ephemeral.diffie_hellman(key);
            let expected = x25519_proof(transcript, &shared).ok_or(ProofError::Signature)?;
            // Compared through a hash, so the time a mismatch takes says
            // nothing useful about the expected tag.
            if Sha256::digest(expected) != Sha256::digest(self.signature) {
                return Err(ProofError::Signature);
            }
            return Ok(identity);
        }
        let key = identity.rsa().ok_or(ProofError::NotRsa)?;
        // A signature not below the modulus is refused before it is
        // verified (RFC 8017 §5.2.2 step 1; see `RsaPublic::verify_pss`).
        match key.verify_pss(&signed_message(transcript), self.signature) {
            PssCheck::Valid => Ok(identity),
            PssCheck::OutOfRange => Err(ProofError::SignatureOutOfRange),
            PssCheck::Invalid => Err(ProofError::Signature),
        }
    }
}

/// The proof of an X25519 identity for the session of `transcript`, from
/// the exchange of that identity with the responder's ephemeral key
/// (`None` if it is all zeros, a low-order key):
///
/// ```text
/// HKDF-Expand(HKDF-Extract(salt = transcript hash, IKM = X25519(s_i, E_r)),
///             "tern v2 initiator identity", 32)
/// ```
///
/// Only the holders of the identity's private key and of the responder's
/// ephemeral key can derive it, and it holds for this session only.
fn x25519_proof(transcript: &Transcript, shared: &SharedSecret) -> Option<[u8; 32]> {
    if !shared.was_contributory() {
        return None;
    }
    let hkdf = Hkdf::<Sha256>::new(Some(&transcript.hash()), shared.as_bytes());
    let mut tag = [0u8; 32];
    hkdf.expand(PROOF_LABEL, &mut tag).ok()?;
    Some(tag)
}

/// An initiator's identity proof for one session, made by
/// [`Transcript::prove`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityProof {
    public_key: Vec<u8>,
    signature: Vec<u8>,
}

impl IdentityProof {
    /// The proof as the frame's fields.
    #[must_use]
    pub fn identity(&self) -> Identity<'_> {
        Identity {
            public_key: &self.public_key,
            signature: &self.signature,
        }
    }

    /// The frame to send in the initiator's first Data packet.
    #[must_use]
    pub fn frame(&self) -> Frame<'_> {
        Frame::Identity(self.identity())
    }

    /// Checks the proof against `transcript` (see [`Identity::verify`]).
    pub fn verify(&self, transcript: &Transcript) -> Result<PublicIdentity, ProofError> {
        self.identity().verify(transcript)
    }
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use rand_core::OsRng;
    use rsa::traits::PublicKeyParts;
    use rsa::{BigUint, Pss};

    use super::*;
    use crate::frame::{Frame, Stream};
    use crate::handshake::{ConnectionKeys, INTRO_LEN, PendingIntro, Responder};
    use crate::identity::RSA_BITS;
    use crate::keys::KeyConfig;
    use crate::replay::ReplayGuard;
    use crate::size::MIN_UDP_PAYLOAD;
    use crate::test_support::{identity, other_identity, t0};

    const RESPONDER_INDEX: u32 = 0x2222_2222;

    /// One session between an initiator and the responder `identity()`,
    /// seen from both sides.
    struct Session {
        initiator: ConnectionKeys,
        initiator_transcript: Transcript,
        responder: ConnectionKeys,
        responder_transcript: Transcript,
    }

    fn session() -> Session {
        let mut intro = [0u8; INTRO_LEN];
        let pending = PendingIntro::write(
            &identity().public(),
            0x1111_1111,
            KeyConfig::default(),
            t0(),
            &mut OsRng,
            &mut intro,
        )
        .unwrap();
        let mut responder = Responder::new(
            identity().clone(),
            ReplayGuard::default(),
            KeyConfig::default(),
        );
        let accepted = responder.accept(&intro, t0(), &mut OsRng).unwrap();
        let responder_transcript = accepted.transcript(RESPONDER_INDEX).unwrap();
        let mut reply = vec![0u8; 1452];
        let (len, responder_keys) = accepted.reply(RESPONDER_INDEX, &[], &mut reply).unwrap();
        let established = pending.open_reply(&mut reply[..len]).unwrap();
        Session {
            initiator: established.keys,
            initiator_transcript: established.transcript,
            responder: responder_keys,
            responder_transcript,
        }
    }

    /// The initiator's proof, made with `other_identity()`.
    fn proof(transcript: &Transcript) -> IdentityProof {
        transcript.prove(other_identity(), &mut OsRng).unwrap()
    }

    #[test]
    fn both_sides_hold_the_same_transcript_and_a_proof_verifies_for_its_session() {
        let session = session();
        assert_eq!(
            session.initiator_transcript.hash(),
            session.responder_transcript.hash()
        );
        let proof = proof(&session.initiator_transcript);
        assert_eq!(
            proof.verify(&session.responder_transcript).unwrap(),
            other_identity().public()
        );
    }

    #[test]
    fn an_x25519_identity_proves_itself_to_an_rsa_responder_for_its_session_only() {
        let me = crate::test_support::other_x25519_identity();
        let other = session();
        let session = session();
        let proof = session.initiator_transcript.prove(me, &mut OsRng).unwrap();
        assert_eq!(proof.identity().signature.len(), 32);
        assert_eq!(
            proof.verify(&session.responder_transcript).unwrap(),
            me.public()
        );
        // Another session, a changed bit, another key claimed, or the
        // initiator's own transcript (no ephemeral private key): refused.
        assert!(matches!(
            proof.verify(&other.responder_transcript),
            Err(ProofError::Signature)
        ));
        let mut forged = proof.clone();
        forged.signature[7] ^= 1;
        assert!(matches!(
            forged.verify(&session.responder_transcript),
            Err(ProofError::Signature)
        ));
        let mut claimed = proof.clone();
        claimed.public_key = crate::test_support::x25519_identity()
            .public()
            .to_spki_der()
            .unwrap();
        assert!(matches!(
            claimed.verify(&session.responder_transcript),
            Err(ProofError::Signature)
        ));
        assert!(matches!(
            proof.verify(&session.initiator_transcript),
            Err(ProofError::NoExchange)
        ));
        assert!(matches!(
            session.responder_transcript.prove(me, &mut OsRng),
            Err(ProofError::NoExchange)
        ));
    }

    #[test]
    fn a_proof_travels_in_the_first_data_packet_of_1200_bytes_beside_data() {
        let mut session = session();
        let proof = proof(&session.initiator_transcript);
        let mut buf = [0u8; MIN_UDP_PAYLOAD];
        let mut packet = session.initiator.sealer.start(&mut buf).unwrap();
        // Type, 2-byte length, 294-byte SPKI (exponent 65537), 2-byte
        // length, 256-byte signature.
        assert_eq!(proof.frame().encoded_len(), 555);
        packet.push(&proof.frame()).unwrap();
        // 1200 - 7 (header) - 16 (tag) - 555 - 6 (Stream frame fields).
        let room = packet.stream_capacity(0, 0);
        assert_eq!(room, 616);
        let data = vec![0x5a; room];
        let stream = Frame::Stream(Stream {
            id: 0,
            offset: 0,
            fin: false,
            data: &data,
        });
        packet.push(&stream).unwrap();
        let (len, _) = packet.finish().unwrap();
        assert!(len <= MIN_UDP_PAYLOAD);

        let opened = session.responder.opener.open(&mut buf[..len]).unwrap();
        let frames: Vec<_> = opened.frames().collect::<Result<_, _>>().unwrap();
        let Frame::Identity(received) = frames[0] else {
            panic!("no identity frame first: {frames:?}")
        };
        assert_eq!(
            received.verify(&session.responder_transcript).unwrap(),
            other_identity().public()
        );
        assert_eq!(frames[1], stream);
    }

    #[test]
    fn an_rsa_signature_claimed_for_an_x25519_key_is_refused() {
        let session = session();
        let x25519 = crate::test_support::x25519_identity();
        let spki = x25519.public().to_spki_der().unwrap();
        let signature = proof(&session.initiator_transcript);
        let claim = Identity {
            public_key: &spki,
            ..signature.identity()
        };
        assert!(matches!(
            claim.verify(&session.responder_transcript),
            Err(ProofError::Signature)
        ));
    }

    #[test]
    fn a_proof_replayed_into_another_session_is_refused() {
        let first = session();
        let second = session();
        assert_ne!(
            first.initiator_transcript.hash(),
            second.initiator_transcript.hash()
        );
        let proof = proof(&first.initiator_transcript);
        assert!(matches!(
            proof.verify(&second.responder_transcript),
            Err(ProofError::Signature)
        ));
    }

    #[test]
    fn a_tampered_key_or_signature_is_refused() {
        let session = session();
        let transcript = &session.responder_transcript;
        let proof = proof(&session.initiator_transcript);
        let genuine = proof.identity();

        // Another valid RSA-2048 key with the genuine signature.
        let someone_else = identity().public().to_spki_der().unwrap();
        let swapped = Identity {
            public_key: &someone_else,
            ..genuine
        };
        // Refused as a bad signature, or before that as a value not below
        // the other key's modulus: which one depends on the two keys.
        let refused = |r| {
            matches!(
                r,
                Err(ProofError::Signature | ProofError::SignatureOutOfRange)
            )
        };
        assert!(refused(swapped.verify(transcript)));

        // Every single-bit flip of the signature, sampled across it (a flip
        // high enough may put it above the modulus).
        for bit in (0..genuine.signature.len() * 8).step_by(97) {
            let mut signature = genuine.signature.to_vec();
            signature[bit / 8] ^= 1 << (bit % 8);
            let tampered = Identity {
                signature: &signature,
                ..genuine
            };
            assert!(refused(tampered.verify(transcript)), "bit {bit}");
        }
        let short = Identity {
            signature: &genuine.signature[1..],
            ..genuine
        };
        assert!(matches!(
            short.verify(transcript),
            Err(ProofError::Signature)
        ));

        // A key that is not SPKI DER, or the genuine key with a byte flipped.
        let mut bent = genuine.public_key.to_vec();
        let middle = bent.len() / 2;
        bent[middle] ^= 0x01;
        let bent = Identity {
            public_key: &bent,
            ..genuine
        };
        assert!(bent.verify(transcript).is_err());
        let garbage = Identity {
            public_key: b"not a key",
            ..genuine
        };
        assert!(matches!(
            garbage.verify(transcript),
            Err(ProofError::Key(_))
        ));
    }

    /// The RSA key of a test identity.
    fn rsa(key: &IdentityKey) -> &rsa::RsaPrivateKey {
        key.rsa().expect("an RSA identity").key()
    }

    /// An identity whose modulus n leaves room below 2^2048 for at least
    /// one valid signature s in 16 to have s + n fit the signature's 256
    /// bytes: the test key if it does, else the first fresh key that does.
    fn identity_with_room() -> &'static IdentityKey {
        static KEY: std::sync::OnceLock<IdentityKey> = std::sync::OnceLock::new();
        KEY.get_or_init(|| {
            let limit = BigUint::from(1u8) << RSA_BITS;
            std::iter::once(other_identity().clone())
                .chain(std::iter::repeat_with(|| {
                    IdentityKey::generate(&mut OsRng).expect("RSA key generation")
                }))
                .find(|key| (&limit - rsa(key).n()) * 16u8 >= *rsa(key).n())
                .expect("keys never run out")
        })
    }

    #[test]
    fn a_signature_plus_the_modulus_is_refused_though_rsa_arithmetic_alone_accepts_it() {
        let session = session();
        let key = identity_with_room();
        let n = rsa(key).n();
        let limit = BigUint::from(1u8) << RSA_BITS;
        let (proof, forged) = (0..1_000)
            .find_map(|_| {
                let proof = session.initiator_transcript.prove(key, &mut OsRng).ok()?;
                let forged = BigUint::from_bytes_be(&proof.signature) + n;
                (forged < limit).then_some((proof, forged.to_bytes_be()))
            })
            .expect("one signature in 16 leaves room for s + n");
        // n has its top bit set, so s + n takes all 256 bytes.
        assert_eq!(forged.len(), RSA_BITS / 8);
        let transcript = &session.responder_transcript;
        // The RSA arithmetic reduces s + n mod n and takes it for s.
        rsa(key)
            .to_public_key()
            .verify(
                Pss::new::<Sha256>(),
                &Sha256::digest(signed_message(transcript)),
                &forged,
            )
            .expect("the forged signature passes the RSA arithmetic");
        let forgery = Identity {
            signature: &forged,
            ..proof.identity()
        };
        assert!(matches!(
            forgery.verify(transcript),
            Err(ProofError::SignatureOutOfRange)
        ));
        assert_eq!(proof.verify(transcript).unwrap(), key.public());

        // n itself and the largest 256-byte value are refused the same way.
        for signature in [n.to_bytes_be(), vec![0xff; RSA_BITS / 8]] {
            let forgery = Identity {
                signature: &signature,
                ..proof.identity()
            };
            assert!(matches!(
                forgery.verify(transcript),
                Err(ProofError::SignatureOutOfRange)
            ));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Malformed Identity frames, from arbitrary bytes or mutations of a
        /// genuine one, decode to an error or to a frame that does not
        /// verify, and never panic.
        #[test]
        fn malformed_identity_frames_never_panic_and_never_verify(
            mutations in vec((any::<prop::sample::Index>(), 1u8..), 1..4),
            cut in any::<prop::sample::Index>(),
            noise in vec(any::<u8>(), 0..600),
        ) {
            let (transcript, encoded) = genuine_frame();
            let mut mutated = encoded.clone();
            for (index, xor) in mutations {
                let i = index.index(mutated.len() - 1) + 1;
                mutated[i] ^= xor;
            }
            // Two flips of one byte may cancel out.
            prop_assume!(mutated != *encoded);
            let cut = cut.index(encoded.len());
            let mut random = vec![0x12];
            random.extend_from_slice(&noise);
            for bytes in [&mutated[..], &encoded[..cut], &random[..]] {
                if let Ok(Frame::Identity(frame)) = Frame::decode_exact(bytes) {
                    prop_assert!(frame.verify(transcript).is_err());
                }
            }
        }
    }

    /// A genuine Identity frame, encoded, and its session's transcript:
    /// made once for all cases.
    fn genuine_frame() -> &'static (Transcript, Vec<u8>) {
        static GENUINE: std::sync::OnceLock<(Transcript, Vec<u8>)> = std::sync::OnceLock::new();
        GENUINE.get_or_init(|| {
            let session = session();
            let proof = proof(&session.initiator_transcript);
            let frame = proof.frame();
            let mut encoded = vec![0u8; frame.encoded_len()];
            frame.encode(&mut encoded).unwrap();
            (session.responder_transcript, encoded)
        })
    }
}
