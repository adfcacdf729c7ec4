//! What a receiver keeps of an interrupted transfer, so that the next
//! `tern send` of the same file continues where it stopped.
//!
//! Beside the target `NAME` the receiver keeps the bytes received so far in
//! `.NAME.tern-partial` and, in the side-car `.NAME.tern-resume` (JSON), a
//! [`Checkpoint`]: how many of those bytes were synced to disk and their
//! SHA-256. The final name only ever holds a whole file whose SHA-256 the
//! sender confirmed.
//!
//! Whether a later send is the same file is decided by the bytes
//! themselves: the receiver re-reads its verified prefix, checks it against
//! the side-car, and tells the sender its length; the sender hashes the
//! same range of its own file and sends that hash, and the receiver resumes
//! only when the two are equal. The receiver's hash stays with it: any
//! sender may offer a file of the same name, and one that does not hold
//! the same bytes learns nothing of them (and its offer starts the partial
//! file over). The sender reads those bytes anyway for the whole-file
//! digest, so this costs no extra pass over the file (announcing the
//! sender's whole-file hash up front would cost a full read before the
//! first byte is sent, on every send). A file that changed after the
//! prefix still resumes correctly, and the whole-file SHA-256 checked at
//! the end covers the prefix too.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::CliError;

/// Largest side-car read: a checkpoint is well under a hundred bytes.
const MAX_SIDECAR_LEN: u64 = 4 << 10;

/// The side-car's content: the first `verified` bytes of the partial file
/// are on disk (synced) and hash to `sha256` (hex).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    /// Bytes from the start of the file synced to disk.
    pub(crate) verified: u64,
    /// SHA-256 (hex) of those bytes.
    pub(crate) sha256: String,
}

/// Records checkpoints of one partial file in its side-car.
#[derive(Clone, Debug)]
pub(crate) struct Journal {
    sidecar: PathBuf,
}

impl Journal {
    /// Records that the first `verified` bytes, hashed by `hasher`, are
    /// synced. The side-car is replaced by a rename, so a crash leaves the
    /// old checkpoint or the new one, never a mix.
    pub(crate) fn record(&self, verified: u64, hasher: &Sha256) -> io::Result<()> {
        let checkpoint = Checkpoint {
            verified,
            sha256: hex::encode(hasher.clone().finalize()),
        };
        let mut fresh = self.sidecar.clone().into_os_string();
        fresh.push(".new");
        let json = serde_json::to_vec(&checkpoint).map_err(io::Error::other)?;
        std::fs::write(&fresh, json)?;
        std::fs::rename(&fresh, &self.sidecar)
    }
}

/// The receiver's verified prefix, offered to the sender.
#[derive(Clone, Debug)]
pub(crate) struct Prefix {
    /// Its length in bytes.
    pub(crate) len: u64,
    /// Its SHA-256 (hex).
    pub(crate) sha256: String,
    /// The hash state after it, to go on with the rest of the file.
    pub(crate) hasher: Sha256,
}

/// A file being received under its temporary name, with its side-car.
/// Dropped, both stay (an interrupted transfer resumes from them);
/// [`commit`](Self::commit) puts a verified file in place and
/// [`discard`](Self::discard) removes data that must not be resumed.
#[derive(Debug)]
pub(crate) struct Partial {
    pub(crate) path: PathBuf,
    sidecar: PathBuf,
    size: u64,
}

impl Partial {
    /// Opens the partial file of `name` in `dir` for a file of `size`
    /// bytes. With `resume`, a verified prefix found there is kept and
    /// returned, the file positioned after it; otherwise (or when none
    /// checks out) the file is emptied.
    pub(crate) fn open(
        dir: &Path,
        name: &str,
        size: u64,
        resume: bool,
    ) -> Result<(Self, File, Option<Prefix>), CliError> {
        let partial = Self {
            path: dir.join(format!(".{name}.tern-partial")),
            sidecar: dir.join(format!(".{name}.tern-resume")),
            size,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&partial.path)
            .map_err(|e| CliError::io(&partial.path, e))?;
        let prefix = if resume {
            partial.verified_prefix(&mut file)
        } else {
            None
        };
        match &prefix {
            Some(prefix) => partial.truncate(&mut file, prefix.len)?,
            None => partial.start_over(&mut file)?,
        }
        Ok((partial, file, prefix))
    }

    /// The checkpoint's prefix, if the side-car reads well, fits a file of
    /// the offered size, and the partial file still holds those bytes.
    fn verified_prefix(&self, file: &mut File) -> Option<Prefix> {
        let sidecar = File::open(&self.sidecar).ok()?;
        let mut json = Vec::new();
        sidecar.take(MAX_SIDECAR_LEN).read_to_end(&mut json).ok()?;
        let checkpoint: Checkpoint = serde_json::from_slice(&json).ok()?;
        let on_disk = file.metadata().ok()?.len();
        if checkpoint.verified == 0
            || checkpoint.verified > self.size
            || checkpoint.verified > on_disk
        {
            return None;
        }
        file.seek(SeekFrom::Start(0)).ok()?;
        let hasher = crate::disk::hash_prefix(file, checkpoint.verified).ok()?;
        let sha256 = hex::encode(hasher.clone().finalize());
        if sha256 != checkpoint.sha256 {
            tracing::warn!(path = %self.path.display(), "a partial file no longer matches its side-car; starting over");
            return None;
        }
        Some(Prefix {
            len: checkpoint.verified,
            sha256,
            hasher,
        })
    }

    /// Keeps the first `len` bytes and positions the file after them.
    fn truncate(&self, file: &mut File, len: u64) -> Result<(), CliError> {
        file.set_len(len)
            .and_then(|()| file.seek(SeekFrom::Start(len)))
            .map(drop)
            .map_err(|e| CliError::io(&self.path, e))
    }

    /// Empties the file and forgets its checkpoint.
    pub(crate) fn start_over(&self, file: &mut File) -> Result<(), CliError> {
        remove(&self.sidecar).map_err(|e| CliError::io(&self.sidecar, e))?;
        self.truncate(file, 0)
    }

    /// Where the writer records checkpoints.
    pub(crate) fn journal(&self) -> Journal {
        Journal {
            sidecar: self.sidecar.clone(),
        }
    }

    /// Gives the (written and synced) file its final name `target`,
    /// replacing an existing file only with `force`, and drops the
    /// side-car.
    pub(crate) fn commit(self, target: &Path, force: bool) -> Result<(), CliError> {
        let placed = if force {
            std::fs::rename(&self.path, target)
        } else {
            std::fs::hard_link(&self.path, target).and_then(|()| std::fs::remove_file(&self.path))
        };
        match placed {
            Ok(()) => {
                let _ = remove(&self.sidecar);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(CliError::Exists(target.to_owned()))
            }
            Err(e) => Err(CliError::io(target, e)),
        }
    }

    /// Removes the file and its side-car: what they hold is wrong (a
    /// digest mismatch, more bytes than offered) or could not be written.
    pub(crate) fn discard(self) {
        let _ = remove(&self.sidecar);
        let _ = remove(&self.path);
    }
}

/// Removes `path`; one already gone is no error.
fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write_partial(dir: &Path, name: &str, content: &[u8], resume: bool) -> Option<Prefix> {
        let (partial, mut file, prefix) = Partial::open(dir, name, 1000, resume).expect("opens");
        file.write_all(content).expect("writes");
        let hasher = Sha256::new_with_prefix(content);
        partial
            .journal()
            .record(content.len() as u64, &hasher)
            .expect("records");
        prefix
    }

    #[test]
    fn a_checkpointed_prefix_is_offered_again_and_the_unsynced_tail_cut() {
        let dir = tempfile::tempdir().expect("temporary directory");
        assert!(write_partial(dir.path(), "f", b"hello", true).is_none());
        // Bytes written after the last checkpoint are not trusted.
        let tail = dir.path().join(".f.tern-partial");
        let mut file = OpenOptions::new().append(true).open(&tail).expect("opens");
        file.write_all(b" unsynced").expect("writes");

        let (_, mut file, prefix) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        let prefix = prefix.expect("a prefix");
        assert_eq!(prefix.len, 5);
        assert_eq!(prefix.sha256, hex::encode(Sha256::digest(b"hello")));
        assert_eq!(file.stream_position().expect("position"), 5);
        assert_eq!(std::fs::read(&tail).expect("reads"), b"hello");
    }

    #[test]
    fn a_prefix_changed_on_disk_or_longer_than_the_offer_is_not_used() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello", true);
        std::fs::write(dir.path().join(".f.tern-partial"), b"jello").expect("writes");
        let (_, _, prefix) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        assert!(prefix.is_none());
        assert_eq!(
            std::fs::read(dir.path().join(".f.tern-partial")).expect("reads"),
            b""
        );

        write_partial(dir.path(), "g", b"hello", true);
        let (_, _, prefix) = Partial::open(dir.path(), "g", 4, true).expect("opens");
        assert!(prefix.is_none());
    }

    #[test]
    fn without_resume_the_partial_and_its_side_car_start_over() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello", true);
        let (_, _, prefix) = Partial::open(dir.path(), "f", 1000, false).expect("opens");
        assert!(prefix.is_none());
        assert!(!dir.path().join(".f.tern-resume").exists());
        assert_eq!(
            std::fs::read(dir.path().join(".f.tern-partial")).expect("reads"),
            b""
        );
    }

    #[test]
    fn a_malformed_side_car_is_ignored() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello", true);
        std::fs::write(dir.path().join(".f.tern-resume"), b"{\"verified\":").expect("writes");
        let (_, _, prefix) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        assert!(prefix.is_none());
    }
}
