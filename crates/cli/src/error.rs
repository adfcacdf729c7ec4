//! What can go wrong, each case one line for the user.

use std::path::PathBuf;

/// An error of the `tern` command, printed as one line before a non-zero exit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CliError {
    /// A file or directory could not be read, written or created.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Writing would replace an existing file without `--force`.
    #[error("{0} exists already (use --force to replace it)")]
    Exists(PathBuf),
    /// A key file or pasted key is not a key of the kind expected.
    #[error("{what} is not {expected}: {reason}")]
    BadKey {
        /// The file or argument that was read.
        what: String,
        /// The kind of key wanted.
        expected: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// Making or encoding a key failed.
    #[error("key generation failed: {0}")]
    KeyGeneration(String),
}

impl CliError {
    /// An I/O error about `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
