//! Resumable `tern send`: a transfer interrupted by a killed receiver or a
//! killed sender continues, when sent again, after the bytes the receiver
//! had written to its disk, and not one of them is sent twice; bytes that
//! are not the sender's are not used, and the file still arrives whole
//! under the whole-file SHA-256. Separate processes on loopback, real
//! files.

mod support;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::{Server, keys, names, path, random_file, receiver, run, sha256, stdout};

/// The file sent: small enough for a CI disk, large enough for several
/// of the receiver's checkpoints (one per 4 MiB) before it is half-way.
const SIZE: u64 = 20_000_000;

/// Starts a rate-capped `tern send` of `file` that takes a few seconds.
fn slow_sender(file: &Path, to: &Server) -> Child {
    let keys = keys();
    support::tern()
        .args([
            "send",
            path(file),
            &to.addr,
            "--key",
            path(&keys.public),
            "--rate",
            "40",
            "--idle-timeout",
            "2s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts the sender")
}

fn send(file: &Path, to: &Server, extra: &[&str]) -> std::process::Output {
    let keys = keys();
    let mut args = vec!["send", path(file), &to.addr, "--key", path(&keys.public)];
    args.extend_from_slice(extra);
    run(&args)
}

fn partial_file(out: &Path) -> PathBuf {
    out.join(".big.bin.tern-partial")
}

/// Waits until the receiver has written half of the file (a hang guard
/// only, never a timing assertion).
fn wait_for_half(out: &Path) {
    let deadline = Instant::now() + support::PATIENCE;
    while fs::metadata(partial_file(out)).map_or(0, |m| m.len()) < SIZE / 2 {
        assert!(Instant::now() < deadline, "the transfer never got half-way");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The receiver's verified prefix, as its side-car records it.
fn verified(out: &Path) -> u64 {
    let json = fs::read(out.join(".big.bin.tern-resume")).expect("a side-car");
    let checkpoint: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
    checkpoint["verified"].as_u64().expect("a verified length")
}

/// Asserts that a send's output says it sent exactly the rest of the file
/// from byte `from`, resuming there when `from` is not 0.
fn assert_sent_the_rest(output: &std::process::Output, from: u64) {
    assert!(output.status.success(), "{output:?}");
    let said = stdout(output);
    if from > 0 {
        assert!(
            said.contains(&format!("resuming big.bin at byte {from} of {SIZE}")),
            "{said}"
        );
    }
    assert!(
        said.contains(&format!("; {} bytes sent from byte {from};", SIZE - from)),
        "{said}"
    );
}

/// A transfer of a fresh file that a killed sender left half-way at a
/// receiver that keeps running. Returns the directory, the file, the
/// receiver's directory and the receiver.
fn interrupted_by_a_killed_sender() -> (tempfile::TempDir, PathBuf, PathBuf, Server) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = random_file(dir.path(), "big.bin", SIZE as usize);
    let out = dir.path().join("out");
    let receiver = receiver(&out, &["--idle-timeout", "2s"]);
    let mut sender = slow_sender(&source, &receiver);
    wait_for_half(&out);
    sender.kill().expect("kills the sender");
    sender.wait().expect("the sender exits");
    // Progress lines come on the same stream before the error.
    let mut seen = Vec::new();
    while !seen
        .last()
        .is_some_and(|l: &String| l.contains("transfer of big.bin interrupted"))
    {
        assert!(seen.len() < 100, "{seen:?}");
        seen.push(receiver.next_error());
    }
    (dir, source, out, receiver)
}

#[test]
fn a_receiver_killed_half_way_and_restarted_gets_exactly_the_bytes_not_on_its_disk() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = random_file(dir.path(), "big.bin", SIZE as usize);
    let out = dir.path().join("out");
    let first = receiver(&out, &[]);
    let sender = slow_sender(&source, &first);
    wait_for_half(&out);
    first.signal("KILL");
    let interrupted = sender.wait_with_output().expect("the sender exits");
    assert!(!interrupted.status.success());
    drop(first);

    // Half the file was written, so at least two checkpoints were made
    // (one per 4 MiB, each a sync). What the receiver wrote after the last
    // one is in its file too: the system keeps what a killed process wrote.
    let verified = verified(&out);
    let written = fs::metadata(partial_file(&out)).expect("kept").len();
    assert!(
        verified >= 2 * (4 << 20) && verified <= written && written < SIZE,
        "{verified} of {written}"
    );

    // The restarted receiver offers every byte on its disk, and the sender
    // sends exactly the others.
    let mut second = receiver(&out, &["--once"]);
    let resumed = send(&source, &second, &[]);
    assert_sent_the_rest(&resumed, written);
    let said = stdout(&resumed);
    assert!(
        said.contains(&format!("SHA-256 {} verified", sha256(&source))),
        "{said}"
    );
    let lines = second.lines_until("received big.bin");
    assert!(
        lines.last().is_some_and(|l| l.contains(&format!(
            "{} bytes received from byte {written}",
            SIZE - written
        ))),
        "{lines:?}"
    );
    assert!(second.wait().success());
    assert_eq!(names(&out), ["big.bin"]);
    assert_eq!(sha256(&out.join("big.bin")), sha256(&source));
}

#[test]
fn a_sender_killed_half_way_and_run_again_sends_only_what_the_receiver_lacks() {
    let (_dir, source, out, receiver) = interrupted_by_a_killed_sender();
    // The receiver recorded every byte it had written when the sender
    // went away.
    let verified = verified(&out);
    assert_eq!(
        verified,
        fs::metadata(partial_file(&out)).expect("kept").len()
    );
    assert!((SIZE / 2..SIZE).contains(&verified), "{verified}");

    let resumed = send(&source, &receiver, &[]);
    assert_sent_the_rest(&resumed, verified);
    let lines = receiver.lines_until("received big.bin");
    assert!(
        lines.last().is_some_and(|l| l.contains(&format!(
            "{} bytes received from byte {verified}",
            SIZE - verified
        ))),
        "{lines:?}"
    );
    assert_eq!(names(&out), ["big.bin"]);
    assert_eq!(sha256(&out.join("big.bin")), sha256(&source));
}

#[test]
fn a_send_with_restart_sends_the_whole_file_despite_a_partial_copy() {
    let (_dir, source, out, receiver) = interrupted_by_a_killed_sender();
    assert!(verified(&out) > 0);
    let restarted = send(&source, &receiver, &["--restart"]);
    assert_sent_the_rest(&restarted, 0);
    assert!(!stdout(&restarted).contains("resuming"));
    receiver.lines_until("received big.bin");
    assert_eq!(names(&out), ["big.bin"]);
    assert_eq!(sha256(&out.join("big.bin")), sha256(&source));
}

#[test]
fn a_partial_copy_of_another_file_by_the_same_name_is_not_used() {
    let (_dir, source, out, receiver) = interrupted_by_a_killed_sender();
    assert!(verified(&out) > 0);
    // Same name and size, another first byte: the prefix no longer fits.
    let mut changed = fs::read(&source).expect("reads");
    changed[0] ^= 0xff;
    fs::write(&source, &changed).expect("writes");

    let sent = send(&source, &receiver, &[]);
    assert_sent_the_rest(&sent, 0);
    let said = stdout(&sent);
    assert!(
        said.contains("the receiver's partial copy of big.bin is not a prefix of this file"),
        "{said}"
    );
    receiver.lines_until("received big.bin");
    assert_eq!(names(&out), ["big.bin"]);
    assert_eq!(sha256(&out.join("big.bin")), sha256(&source));
}

#[test]
fn a_tail_past_the_checkpoint_that_is_not_the_senders_bytes_resumes_at_the_checkpoint() {
    let (_dir, source, out, receiver) = interrupted_by_a_killed_sender();
    let verified = verified(&out);
    // What a crash of the machine can leave behind the last sync: a file
    // longer than its checkpoint whose extra bytes are not those written.
    let mut partial = OpenOptions::new()
        .append(true)
        .open(partial_file(&out))
        .expect("opens");
    partial.write_all(&[0; 4096]).expect("writes");
    drop(partial);

    let resumed = send(&source, &receiver, &[]);
    assert_sent_the_rest(&resumed, verified);
    receiver.lines_until("received big.bin");
    assert_eq!(names(&out), ["big.bin"]);
    assert_eq!(sha256(&out.join("big.bin")), sha256(&source));
}

#[test]
fn a_partial_copy_changed_under_the_receiver_is_not_used() {
    let (_dir, source, out, receiver) = interrupted_by_a_killed_sender();
    // One byte of the checkpointed prefix changed: it no longer hashes to
    // its checkpoint, so none of it is trusted.
    let mut held = fs::read(partial_file(&out)).expect("reads");
    held[1000] ^= 0xff;
    fs::write(partial_file(&out), &held).expect("writes");

    let sent = send(&source, &receiver, &[]);
    assert_sent_the_rest(&sent, 0);
    assert!(!stdout(&sent).contains("resuming"));
    receiver.lines_until("received big.bin");
    assert_eq!(names(&out), ["big.bin"]);
    assert_eq!(sha256(&out.join("big.bin")), sha256(&source));
}
