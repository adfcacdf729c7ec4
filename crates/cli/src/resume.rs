//! What a receiver keeps of an interrupted transfer, so that the next
//! `tern send` of the same file continues where it stopped.
//!
//! Beside the target `NAME` the receiver keeps the bytes received so far in
//! `.NAME.tern-partial` and, in the side-car `.NAME.tern-resume` (JSON), a
//! [`Checkpoint`]: how many of those bytes were synced to disk and their
//! SHA-256. The final name only ever holds a whole file whose SHA-256 the
//! sender confirmed.
//!
//! A restarted receiver offers every byte of its partial file, not only
//! the checkpointed ones: a killed receiver loses nothing it wrote (the
//! system keeps it), and a checkpoint comes only every few MiB. It re-reads
//! the checkpointed prefix, checks it against the side-car (a file changed
//! or cut short under it is not used at all), reads on to the file's end,
//! and tells the sender both lengths. The sender hashes the same ranges of
//! its own file and sends both hashes; the receiver resumes after the
//! whole partial file if the first is equal to its own, else after the
//! checkpoint if that one is (what a crash of the machine can leave past
//! the last sync need not be what was written), else from the start. The
//! receiver's hashes stay with it: any sender may offer a file of the same
//! name, and one that does not hold the same bytes learns nothing of them
//! (and its offer starts the partial file over). The sender reads those
//! bytes anyway for the whole-file digest, so this costs no extra pass over
//! the file (announcing the sender's whole-file hash up front would cost a
//! full read before the first byte is sent, on every send). A file that
//! changed after the prefix still resumes correctly, and the whole-file
//! SHA-256 checked at the end covers the prefix too.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::disk::hash_next;
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

/// A prefix of the partial file: its length, SHA-256 and hash state.
#[derive(Clone, Debug)]
pub(crate) struct Prefix {
    /// Its length in bytes.
    pub(crate) len: u64,
    /// Its SHA-256 (hex).
    pub(crate) sha256: String,
    /// The hash state after it, to go on with the rest of the file.
    pub(crate) hasher: Sha256,
}

impl Prefix {
    fn new(len: u64, hasher: Sha256) -> Self {
        Self {
            len,
            sha256: hex::encode(hasher.clone().finalize()),
            hasher,
        }
    }
}

/// What the receiver holds of an earlier transfer, offered to the sender.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    /// The whole partial file, as far as the offered size.
    pub(crate) all: Prefix,
    /// Its checkpointed prefix (empty without a side-car), which matched
    /// the side-car.
    pub(crate) synced: Prefix,
}

impl Held {
    /// The checkpoint's length when a fallback to it is worth offering:
    /// bytes follow it, and it holds some.
    pub(crate) fn fallback(&self) -> Option<u64> {
        (0 < self.synced.len && self.synced.len < self.all.len).then_some(self.synced.len)
    }

    /// The longest prefix whose hash the sender matched: `sha256` for the
    /// whole partial file, `synced_sha256` for the checkpoint. `None`:
    /// start over.
    pub(crate) fn matching(
        self,
        sha256: Option<&str>,
        synced_sha256: Option<&str>,
    ) -> Option<Prefix> {
        if sha256 == Some(self.all.sha256.as_str()) {
            Some(self.all)
        } else if self.fallback().is_some() && synced_sha256 == Some(self.synced.sha256.as_str()) {
            Some(self.synced)
        } else {
            None
        }
    }
}

/// Why a side-car is not used.
#[derive(Debug)]
enum Unusable {
    /// There is none: nothing was synced.
    Missing,
    /// It cannot be read or is not a checkpoint.
    Unreadable,
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
    /// bytes. With `resume`, what it holds is returned when its checkpoint
    /// checks out (the file is positioned by [`keep`](Self::keep) once the
    /// sender said which prefix it shares); otherwise (or when nothing is
    /// held) the file is emptied.
    pub(crate) fn open(
        dir: &Path,
        name: &str,
        size: u64,
        resume: bool,
    ) -> Result<(Self, File, Option<Held>), CliError> {
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
        let held = if resume {
            partial.held(&mut file)
        } else {
            None
        };
        if held.is_none() {
            partial.start_over(&mut file)?;
        }
        Ok((partial, file, held))
    }

    /// What the file holds, as far as the offered size, if its side-car
    /// (when there is one) reads well, fits that size, and still matches
    /// the file's first bytes. No side-car: nothing was synced yet, and
    /// every byte is offered for the sender to vouch for.
    fn held(&self, file: &mut File) -> Option<Held> {
        let checkpoint = match self.checkpoint() {
            Ok(checkpoint) => checkpoint,
            Err(Unusable::Missing) => Checkpoint {
                verified: 0,
                sha256: hex::encode(Sha256::digest(b"")),
            },
            Err(Unusable::Unreadable) => {
                tracing::warn!(path = %self.sidecar.display(), "an unreadable side-car; starting over");
                return None;
            }
        };
        let on_disk = file.metadata().ok()?.len().min(self.size);
        if checkpoint.verified > on_disk {
            tracing::warn!(path = %self.path.display(), "a partial file shorter than its side-car says, or than the offer; starting over");
            return None;
        }
        file.seek(SeekFrom::Start(0)).ok()?;
        let synced = Prefix::new(
            checkpoint.verified,
            hash_next(file, Sha256::new(), checkpoint.verified).ok()?,
        );
        if synced.sha256 != checkpoint.sha256 {
            tracing::warn!(path = %self.path.display(), "a partial file no longer matches its side-car; starting over");
            return None;
        }
        let tail = on_disk - synced.len;
        let all = Prefix::new(on_disk, hash_next(file, synced.hasher.clone(), tail).ok()?);
        (all.len > 0).then_some(Held { all, synced })
    }

    /// The side-car's checkpoint.
    fn checkpoint(&self) -> Result<Checkpoint, Unusable> {
        let sidecar = File::open(&self.sidecar).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Unusable::Missing,
            _ => Unusable::Unreadable,
        })?;
        let mut json = Vec::new();
        sidecar
            .take(MAX_SIDECAR_LEN)
            .read_to_end(&mut json)
            .map_err(|_| Unusable::Unreadable)?;
        serde_json::from_slice(&json).map_err(|_| Unusable::Unreadable)
    }

    /// Keeps the first `len` bytes and positions the file after them.
    pub(crate) fn keep(&self, file: &mut File, len: u64) -> Result<(), CliError> {
        file.set_len(len)
            .and_then(|()| file.seek(SeekFrom::Start(len)))
            .map(drop)
            .map_err(|e| CliError::io(&self.path, e))
    }

    /// Empties the file and forgets its checkpoint (in that order: a crash
    /// between the two leaves a checkpoint longer than the file, which is
    /// not used).
    pub(crate) fn start_over(&self, file: &mut File) -> Result<(), CliError> {
        self.keep(file, 0)?;
        remove(&self.sidecar).map_err(|e| CliError::io(&self.sidecar, e))
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
    /// The file goes first: a partial file without its side-car would be
    /// offered whole.
    pub(crate) fn discard(self) {
        let _ = remove(&self.path);
        let _ = remove(&self.sidecar);
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

    /// Writes `content` to a fresh partial file of `name` and records it
    /// in a checkpoint.
    fn write_partial(dir: &Path, name: &str, content: &[u8]) {
        let (partial, mut file, held) = Partial::open(dir, name, 1000, true).expect("opens");
        assert!(held.is_none());
        file.write_all(content).expect("writes");
        let hasher = Sha256::new_with_prefix(content);
        partial
            .journal()
            .record(content.len() as u64, &hasher)
            .expect("records");
    }

    fn append(dir: &Path, name: &str, bytes: &[u8]) {
        let path = dir.join(format!(".{name}.tern-partial"));
        let mut file = OpenOptions::new().append(true).open(path).expect("opens");
        file.write_all(bytes).expect("writes");
    }

    fn content(dir: &Path, name: &str) -> Vec<u8> {
        std::fs::read(dir.join(format!(".{name}.tern-partial"))).expect("reads")
    }

    fn sha256(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn bytes_past_the_checkpoint_are_offered_with_the_checkpoint_as_a_fallback() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello");
        append(dir.path(), "f", b" world");

        let (_, _, held) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        let held = held.expect("something held");
        assert_eq!(
            (held.all.len, held.all.sha256.as_str()),
            (11, &*sha256(b"hello world"))
        );
        assert_eq!(
            (held.synced.len, held.synced.sha256.as_str()),
            (5, &*sha256(b"hello"))
        );
        assert_eq!(held.fallback(), Some(5));
        // Nothing is cut before the sender says which prefix it shares.
        assert_eq!(content(dir.path(), "f"), b"hello world");
    }

    #[test]
    fn the_sender_s_hashes_pick_the_longest_shared_prefix() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello");
        append(dir.path(), "f", b" world");
        let (partial, mut file, held) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        let held = held.expect("something held");
        let all = sha256(b"hello world");
        let synced = sha256(b"hello");

        let both = held.clone().matching(Some(&all), Some(&synced));
        assert_eq!(both.map(|p| p.len), Some(11));
        let tail_differs = held
            .clone()
            .matching(Some(&sha256(b"hello there")), Some(&synced));
        let tail_differs = tail_differs.expect("the checkpoint");
        assert_eq!(tail_differs.len, 5);
        assert_eq!(
            tail_differs.hasher.finalize().to_vec(),
            Sha256::digest(b"hello").to_vec()
        );
        assert!(
            held.clone()
                .matching(Some(&sha256(b"jello world")), Some(&sha256(b"jello")))
                .is_none()
        );
        // A sender that hashes only the whole length (an older one) gets
        // no fallback.
        assert!(held.matching(Some(&sha256(b"hello there")), None).is_none());

        partial.keep(&mut file, 5).expect("keeps");
        assert_eq!(file.stream_position().expect("position"), 5);
        assert_eq!(content(dir.path(), "f"), b"hello");
    }

    #[test]
    fn without_a_side_car_every_byte_is_offered_and_none_is_a_fallback() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello");
        std::fs::remove_file(dir.path().join(".f.tern-resume")).expect("removes");
        let (_, _, held) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        let held = held.expect("something held");
        assert_eq!(
            (held.all.len, held.synced.len, held.fallback()),
            (5, 0, None)
        );
        assert_eq!(held.all.sha256, sha256(b"hello"));
    }

    #[test]
    fn bytes_past_the_offered_size_are_not_offered() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello");
        append(dir.path(), "f", b" world");
        let (_, _, held) = Partial::open(dir.path(), "f", 8, true).expect("opens");
        let held = held.expect("something held");
        assert_eq!((held.all.len, held.all.sha256), (8, sha256(b"hello wo")));

        // A checkpoint past the offered size: another file.
        let (_, _, held) = Partial::open(dir.path(), "f", 4, true).expect("opens");
        assert!(held.is_none());
        assert_eq!(content(dir.path(), "f"), b"");
    }

    #[test]
    fn a_partial_file_changed_or_cut_under_its_checkpoint_is_not_used() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello");
        std::fs::write(dir.path().join(".f.tern-partial"), b"jello").expect("writes");
        let (_, _, held) = Partial::open(dir.path(), "f", 1000, true).expect("opens");
        assert!(held.is_none());
        assert_eq!(content(dir.path(), "f"), b"");
        assert!(!dir.path().join(".f.tern-resume").exists());

        write_partial(dir.path(), "g", b"hello");
        std::fs::write(dir.path().join(".g.tern-partial"), b"hell").expect("writes");
        let (_, _, held) = Partial::open(dir.path(), "g", 1000, true).expect("opens");
        assert!(held.is_none());
        assert_eq!(content(dir.path(), "g"), b"");
    }

    #[test]
    fn without_resume_the_partial_and_its_side_car_start_over() {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_partial(dir.path(), "f", b"hello");
        let (_, _, held) = Partial::open(dir.path(), "f", 1000, false).expect("opens");
        assert!(held.is_none());
        assert!(!dir.path().join(".f.tern-resume").exists());
        assert_eq!(content(dir.path(), "f"), b"");
    }

    #[test]
    fn a_side_car_that_is_not_a_checkpoint_is_refused_and_the_file_started_over() {
        let dir = tempfile::tempdir().expect("temporary directory");
        for (name, sidecar) in [
            ("f", &b"{\"verified\":"[..]),
            ("g", b"{\"synced\":5,\"sha256\":\"00\"}"),
            ("h", b"\xff\xfe"),
        ] {
            write_partial(dir.path(), name, b"hello");
            std::fs::write(dir.path().join(format!(".{name}.tern-resume")), sidecar)
                .expect("writes");
            let (_, _, held) = Partial::open(dir.path(), name, 1000, true).expect("opens");
            assert!(held.is_none(), "{name}");
            assert_eq!(content(dir.path(), name), b"", "{name}");
        }
    }
}
