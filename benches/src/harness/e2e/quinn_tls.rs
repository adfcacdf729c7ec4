//! The TLS side of quinn as the comparison transport configures it (see
//! the end-to-end harness's `quinn` module): rustls 0.23 with ring's
//! crypto, TLS 1.3 with the single cipher suite `TLS13_AES_128_GCM_SHA256`
//! (the AEAD Tern uses), a self-signed ECDSA P-256 certificate (rcgen's
//! default) that the client trusts as its only root, and session
//! resumption off on the client, so every connect is a full handshake.
//! Shared with the level 1 benchmark of quinn-proto under attack.

use std::io;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

/// The name the certificate is made for and the client connects to.
pub(crate) const SERVER_NAME: &str = "localhost";

/// An I/O error carrying `e`'s message.
pub(crate) fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// TLS configurations for both sides, limited to AES-128-GCM.
pub(crate) fn tls() -> io::Result<(rustls::ServerConfig, rustls::ClientConfig)> {
    let certified =
        rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()]).map_err(other)?;
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256],
        ..rustls::crypto::ring::default_provider()
    });
    let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(other)?
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key.into())
        .map_err(other)?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).map_err(other)?;
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.resumption = rustls::client::Resumption::disabled();
    Ok((server, client))
}
