//! A crowd at the door: many `tern send` processes at once, from one
//! address, into one `tern recv`. Every sender shares the receiver's
//! address-validation and intro budget with the others, so this is where
//! a door that turns honest initiators away shows (before the Retry
//! tokens, 32 of 50 senders failed with "no answer within 5s").

mod support;

use std::process::{Child, Stdio};

use support::{Server, keys, names, path, random_file, receiver, sha256, tern, wait_for};

/// Senders started at once.
const SENDERS: usize = 50;

/// Starts `tern send FILE ADDR` with the default connect timeout.
fn spawn_sender(file: &std::path::Path, to: &Server) -> Child {
    tern()
        .args(["send", path(file), &to.addr, "--key", path(&keys().public)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts a sender")
}

#[test]
fn fifty_senders_at_once_into_one_receiver_all_deliver_their_files_intact() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &[]);
    // Small files (64 to 256 KiB) of different sizes: the cost is the
    // handshakes, not the bytes.
    let files: Vec<_> = (0..SENDERS)
        .map(|i| {
            let len = 64 * 1024 + i * (192 * 1024) / SENDERS + i;
            random_file(dir.path(), &format!("file-{i:02}.bin"), len)
        })
        .collect();
    let mut senders: Vec<Child> = files
        .iter()
        .map(|file| spawn_sender(file, &receiver))
        .collect();

    let mut failed = Vec::new();
    for (file, sender) in files.iter().zip(&mut senders) {
        let status = wait_for(sender);
        if !status.success() {
            let mut error = String::new();
            if let Some(mut pipe) = sender.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut error);
            }
            failed.push(format!("{}: {}", file.display(), error.trim()));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {SENDERS} senders failed: {failed:#?}",
        failed.len()
    );

    let expected: Vec<String> = (0..SENDERS).map(|i| format!("file-{i:02}.bin")).collect();
    let mut received = Vec::new();
    for line in (0..SENDERS).flat_map(|_| receiver.lines_until("received ")) {
        received.extend(
            expected
                .iter()
                .filter(|name| line.contains(&format!("received {name}")))
                .cloned(),
        );
    }
    received.sort();
    assert_eq!(received, expected, "the receiver reports every file once");
    assert_eq!(names(&out), expected, "no partial file is left behind");
    for (file, name) in files.iter().zip(&expected) {
        assert_eq!(sha256(&out.join(name)), sha256(file), "{name}");
    }
    receiver.signal("INT");
    assert!(receiver.wait().success());
}
