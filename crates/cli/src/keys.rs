//! Identities on disk: the private key as PKCS#8 PEM readable by its owner
//! only, the public key as SPKI PEM, and a one-line form of the public key
//! that pastes into a command line: `tern-x25519:` and the 32 key bytes of
//! an X25519 key, `tern-pub:` and the SPKI DER of an RSA-2048 key (either
//! prefix is read with either kind's SPKI DER, so older forms keep
//! working).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tern_wire::{IdentityKey, PublicIdentity};

use crate::error::CliError;

/// File name of the private key inside a key directory.
pub(crate) const PRIVATE_FILE: &str = "tern.key";
/// File name of the public key inside a key directory.
pub(crate) const PUBLIC_FILE: &str = "tern.pub";
/// Prefix of the one-line form of an RSA public key (its SPKI DER).
pub(crate) const PASTE_PREFIX: &str = "tern-pub:";
/// Prefix of the one-line form of an X25519 public key (its 32 bytes).
pub(crate) const X25519_PREFIX: &str = "tern-x25519:";

/// Where [`write_identity`] put the two files.
#[derive(Debug)]
pub(crate) struct IdentityFiles {
    pub(crate) private: PathBuf,
    pub(crate) public: PathBuf,
}

/// Writes `key` into `dir` (created if missing) as `tern.key` (mode 0600)
/// and `tern.pub`. Existing files are replaced only with `force`.
pub(crate) fn write_identity(
    key: &IdentityKey,
    dir: &Path,
    force: bool,
) -> Result<IdentityFiles, CliError> {
    fs::create_dir_all(dir).map_err(|e| CliError::io(dir, e))?;
    let files = IdentityFiles {
        private: dir.join(PRIVATE_FILE),
        public: dir.join(PUBLIC_FILE),
    };
    if !force {
        for path in [&files.private, &files.public] {
            if path.exists() {
                return Err(CliError::Exists(path.clone()));
            }
        }
    }
    let private_pem = key
        .to_pkcs8_pem()
        .map_err(|e| CliError::KeyGeneration(e.to_string()))?;
    let public_pem = key
        .public()
        .to_spki_pem()
        .map_err(|e| CliError::KeyGeneration(e.to_string()))?;
    write_file(&files.private, private_pem.as_bytes(), 0o600)?;
    write_file(&files.public, public_pem.as_bytes(), 0o644)?;
    Ok(files)
}

/// Creates `path` afresh with `mode` (on Unix) and writes `bytes`: a file
/// replaced with `--force` is removed first, so the private key never sits
/// in a file that had wider permissions.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CliError> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(CliError::io(path, e)),
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(|e| CliError::io(path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::io(path, e))
}

/// Reads a private key (PKCS#8 PEM) from `path`.
pub(crate) fn read_private(path: &Path) -> Result<IdentityKey, CliError> {
    let pem = fs::read_to_string(path).map_err(|e| CliError::io(path, e))?;
    IdentityKey::from_pkcs8_pem(&pem).map_err(|e| CliError::BadKey {
        what: path.display().to_string(),
        expected: "a Tern private key (PKCS#8 PEM, X25519 or RSA-2048)",
        reason: e.to_string(),
    })
}

/// Reads a public key given as the one-line form [`paste_form`] prints, or
/// as the path of a file holding the SPKI PEM (`tern.pub`).
pub(crate) fn read_public(given: &str) -> Result<PublicIdentity, CliError> {
    let pasted = given.starts_with(PASTE_PREFIX) || given.starts_with(X25519_PREFIX);
    let bad = |reason: String| CliError::BadKey {
        what: if pasted {
            "the pasted public key".to_owned()
        } else {
            given.to_owned()
        },
        expected: "a Tern public key",
        reason,
    };
    if let Some(encoded) = given.strip_prefix(X25519_PREFIX) {
        let bytes = URL_SAFE_NO_PAD
            .decode(encoded.trim())
            .map_err(|e| bad(e.to_string()))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| bad(format!("{} bytes, an X25519 key has 32", b.len())))?;
        return Ok(PublicIdentity::from_x25519_bytes(key));
    }
    if let Some(encoded) = given.strip_prefix(PASTE_PREFIX) {
        let der = URL_SAFE_NO_PAD
            .decode(encoded.trim())
            .map_err(|e| bad(e.to_string()))?;
        return PublicIdentity::from_spki_der(&der).map_err(|e| bad(e.to_string()));
    }
    let path = Path::new(given);
    let pem = fs::read_to_string(path).map_err(|e| CliError::io(path, e))?;
    PublicIdentity::from_spki_pem(&pem).map_err(|e| bad(e.to_string()))
}

/// The public key on one line, so it pastes into a shell without quoting:
/// `tern-x25519:` and its 32 bytes, or `tern-pub:` and its SPKI DER, in
/// URL-safe base64.
pub(crate) fn paste_form(public: &PublicIdentity) -> Result<String, CliError> {
    if let Some(key) = public.x25519_bytes() {
        return Ok(format!("{X25519_PREFIX}{}", URL_SAFE_NO_PAD.encode(key)));
    }
    let der = public
        .to_spki_der()
        .map_err(|e| CliError::KeyGeneration(e.to_string()))?;
    Ok(format!("{PASTE_PREFIX}{}", URL_SAFE_NO_PAD.encode(der)))
}
