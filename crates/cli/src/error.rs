//! What can go wrong, each case one line for the user.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tern_peer::{Connection, ConnectionError, ConnectionLost, ReadError, SendError, WriteError};

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
    /// An argument that parsed but cannot be used.
    #[error("{0}")]
    Usage(String),
    /// A host name that does not resolve.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// What was given.
        host: String,
        /// Why it failed.
        reason: String,
    },
    /// The UDP socket could not be opened (port in use, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Nobody answered the handshake: an unreachable peer and a wrong
    /// key look the same from here, on purpose (a server does not answer
    /// intros sealed to another key).
    #[error("no answer from {addr} within {}s: wrong address, or wrong key", timeout.as_secs_f64())]
    NoAnswer {
        /// The address connected to.
        addr: SocketAddr,
        /// The handshake timeout.
        timeout: Duration,
    },
    /// The connection failed or ended during the exchange.
    #[error("{}: {reason}", peer_name(*peer))]
    Connection {
        /// The peer, if still known.
        peer: Option<SocketAddr>,
        /// What happened, for a person.
        reason: String,
    },
    /// The peer sent something this side does not accept.
    #[error("{}: {reason}", peer_name(*peer))]
    Protocol {
        /// The peer, if still known.
        peer: Option<SocketAddr>,
        /// What was wrong.
        reason: String,
    },
    /// The receiver refused the file.
    #[error("the receiver refused {name}: {reason}")]
    Refused {
        /// The file offered.
        name: String,
        /// The receiver's reason.
        reason: String,
    },
    /// Both ends' counts or hashes differ.
    #[error("{0}")]
    Mismatch(String),
    /// Interrupted by a signal while transfers were under way.
    #[error(
        "interrupted with {0} transfer(s) unfinished; their partial files were kept for a resumed send"
    )]
    Interrupted(usize),
}

fn peer_name(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "the peer".to_owned(), |addr| addr.to_string())
}

impl CliError {
    /// An I/O error about `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// An operation on `connection` failed because the connection is
    /// over: said in words (an idle timeout means the peer went away, a
    /// peer's close carries its reason).
    pub(crate) fn connection(connection: &Connection, lost: &ConnectionLost) -> Self {
        Self::Connection {
            peer: Some(connection.remote_address()),
            reason: describe(lost),
        }
    }

    /// A message to the peer could not be sent.
    pub(crate) fn send(connection: &Connection, error: &SendError) -> Self {
        match error {
            SendError::ConnectionLost(lost) => Self::connection(connection, lost),
            other => Self::Connection {
                peer: Some(connection.remote_address()),
                reason: other.to_string(),
            },
        }
    }
}

/// Why a connection ended, in words a user can act on.
pub(crate) fn describe(lost: &ConnectionLost) -> String {
    match lost {
        ConnectionLost::Connection(ConnectionError::TimedOut) => {
            "the peer stopped answering (it went away, or the path broke)".to_owned()
        }
        ConnectionLost::Connection(ConnectionError::PeerClosed { code, reason, .. }) => {
            if *code == crate::net::STOPPED && reason.is_empty() {
                "the peer was stopped by its user".to_owned()
            } else if reason.is_empty() {
                format!("the peer closed the connection (code {code})")
            } else {
                format!(
                    "the peer closed the connection: {}",
                    printable(&String::from_utf8_lossy(reason))
                )
            }
        }
        other => other.to_string(),
    }
}

/// Why a write on a stream failed, in words.
pub(crate) fn write_error(error: &WriteError) -> String {
    match error {
        WriteError::ConnectionLost(lost) => describe(lost),
        WriteError::Stopped(code) => format!("the peer stopped reading (code {code})"),
        other => other.to_string(),
    }
}

/// Why a read on a stream failed, in words.
pub(crate) fn read_error(error: &ReadError) -> String {
    match error {
        ReadError::ConnectionLost(lost) => describe(lost),
        ReadError::Reset(code) => format!("the peer abandoned the stream (code {code})"),
        other => other.to_string(),
    }
}

/// Text from the peer as it may be printed: no control characters (no
/// terminal escapes), at most 200 characters.
pub(crate) fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_peer_loses_its_escapes_and_is_cut_short() {
        assert_eq!(printable("disk \u{1b}[2Jfull\n"), "disk [2Jfull");
        assert_eq!(printable(&"x".repeat(1000)).len(), 200);
    }
}
