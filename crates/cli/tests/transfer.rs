//! `tern send` and `tern recv` end to end: separate processes on loopback,
//! real files.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use support::{Server, keys, names, path, random_file, receiver, run, sha256, stderr, stdout};

fn send(file: &Path, to: &Server, extra: &[&str]) -> std::process::Output {
    let keys = keys();
    let mut args = vec!["send", path(file), &to.addr, "--key", path(&keys.public)];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn a_200_mb_random_file_arrives_whole_and_verified_under_its_name_only() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = random_file(dir.path(), "random.bin", 200_000_000);
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &["--once"]);
    let sent = send(&source, &receiver, &[]);
    assert!(sent.status.success(), "{sent:?}");
    let expected = sha256(&source);
    assert!(
        stdout(&sent).contains(&format!("SHA-256 {expected} verified by the receiver")),
        "{sent:?}"
    );
    let lines = receiver.lines_until("received random.bin");
    assert!(lines.last().is_some_and(|l| l.contains(&expected)));
    assert!(receiver.wait().success());
    assert_eq!(names(&out), ["random.bin"]);
    assert_eq!(sha256(&out.join("random.bin")), expected);
}

#[test]
fn a_sender_given_cubic_sends_with_it_and_says_so() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = random_file(dir.path(), "small.bin", 2_000_000);
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &["--once", "--congestion", "cubic"]);
    let sent = send(&source, &receiver, &["--congestion", "cubic"]);
    assert!(sent.status.success(), "{sent:?}");
    assert!(stdout(&sent).contains("congestion cubic"), "{sent:?}");
    receiver.lines_until("received small.bin");
    assert!(receiver.wait().success());
    assert_eq!(sha256(&out.join("small.bin")), sha256(&source));
}

#[test]
fn an_existing_file_is_kept_unless_the_receiver_runs_with_force() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = random_file(dir.path(), "data.bin", 100_000);
    let out = dir.path().join("out");
    fs::create_dir(&out).expect("creates");
    fs::write(out.join("data.bin"), b"precious").expect("writes");

    let mut refusing = receiver(&out, &["--once"]);
    let refused = send(&source, &refusing, &[]);
    assert!(!refused.status.success());
    assert_eq!(
        stderr(&refused).trim(),
        "tern: the receiver refused data.bin: data.bin exists on the receiver (it can be run with --force)"
    );
    assert!(!refusing.wait().success());
    assert!(
        refusing
            .next_error()
            .contains("exists already (use --force to replace it)")
    );
    assert_eq!(fs::read(out.join("data.bin")).expect("reads"), b"precious");
    assert_eq!(names(&out), ["data.bin"]);

    let mut forced = receiver(&out, &["--once", "--force"]);
    let replaced = send(&source, &forced, &[]);
    assert!(replaced.status.success(), "{replaced:?}");
    assert!(forced.wait().success());
    assert_eq!(sha256(&out.join("data.bin")), sha256(&source));
    assert_eq!(names(&out), ["data.bin"]);
}

#[test]
fn a_missing_file_or_a_directory_is_refused_before_connecting() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let keys = keys();
    let missing = dir.path().join("missing.bin");
    // Nothing listens at the address: the file is checked first.
    let output = run(&[
        "send",
        path(&missing),
        "127.0.0.1:9",
        "--key",
        path(&keys.public),
    ]);
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output).trim(),
        format!(
            "tern: {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
    let output = run(&[
        "send",
        path(dir.path()),
        "127.0.0.1:9",
        "--key",
        path(&keys.public),
    ]);
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output).trim(),
        format!("tern: {}: not a regular file", dir.path().display())
    );
}

/// Starts a rate-capped transfer of a 50 MB file, waits until the
/// receiver has part of it, then signals the receiver with `signal`.
/// Returns the sender's output and the receiver's directory.
fn interrupt_receiver(signal: &str) -> (std::process::Output, tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = random_file(dir.path(), "big.bin", 50_000_000);
    let out = dir.path().join("out");
    let receiver = receiver(&out, &[]);
    let keys = keys();
    let sender = support::tern()
        .args([
            "send",
            path(&source),
            &receiver.addr,
            "--key",
            path(&keys.public),
            "--rate",
            "100",
            "--idle-timeout",
            "2s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts the sender");
    // Wait for the temporary file to hold something (a hang guard only).
    let deadline = std::time::Instant::now() + support::PATIENCE;
    loop {
        let partial = fs::read_dir(&out).ok().and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .find(|e| e.file_name().to_string_lossy().ends_with(".tern-partial"))
        });
        if partial.is_some_and(|e| e.metadata().is_ok_and(|m| m.len() > 0)) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no partial file");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    receiver.signal(signal);
    let output = sender.wait_with_output().expect("the sender exits");
    (output, dir, receiver)
}

#[test]
fn a_killed_receiver_leaves_no_file_under_the_final_name_and_the_sender_says_why() {
    let (output, dir, mut receiver) = interrupt_receiver("KILL");
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!(
            "tern: {}: transfer of big.bin interrupted: ",
            receiver.addr
        )) && message.lines().count() == 1,
        "{message}"
    );
    assert!(!receiver.wait().success());
    let left = names(&dir.path().join("out"));
    assert!(!left.iter().any(|n| n == "big.bin"), "{left:?}");
}

#[test]
fn a_stopped_receiver_keeps_its_partial_file_for_a_resumed_send_and_tells_the_sender() {
    let (output, dir, mut receiver) = interrupt_receiver("TERM");
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output).trim(),
        format!(
            "tern: {}: transfer of big.bin interrupted: the peer was stopped by its user",
            receiver.addr
        )
    );
    assert!(!receiver.wait().success());
    let errors = [vec![receiver.next_error()], receiver.errors_so_far()].concat();
    assert!(
        errors.iter().any(|e| e
            == "tern: interrupted with 1 transfer(s) unfinished; their partial files were kept for a resumed send"),
        "{errors:?}"
    );
    assert_eq!(
        names(&dir.path().join("out")),
        [".big.bin.tern-partial", ".big.bin.tern-resume"]
    );
}

#[test]
fn an_idle_receiver_stops_cleanly_on_a_signal() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut receiver = receiver(dir.path(), &[]);
    receiver.signal("INT");
    assert!(receiver.wait().success());
    assert!(receiver.errors_so_far().is_empty());
}

#[test]
#[ignore = "needs root to mount a small tmpfs; run with --ignored"]
fn a_full_disk_on_the_receiver_is_reported_at_both_ends() {
    if let Err(why) = support::root_with(&["mount", "umount"]) {
        panic!("a small tmpfs needs root with mount and umount: {why}");
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("small");
    fs::create_dir(&out).expect("creates");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs", path(&out)])
        .status()
        .expect("runs mount");
    assert!(mounted.success(), "cannot mount a tmpfs here");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(out.clone());
    let source = random_file(dir.path(), "large.bin", 8_000_000);
    let mut receiver = receiver(&out, &["--once"]);
    let output = send(&source, &receiver, &[]);
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output).trim(),
        format!(
            "tern: {}: transfer of large.bin interrupted: the peer closed the connection: disk full on the receiver",
            receiver.addr
        )
    );
    assert!(!receiver.wait().success());
    assert!(receiver.next_error().contains("No space left on device"));
    assert!(names(&out).is_empty());
}
