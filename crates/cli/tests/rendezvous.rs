//! `tern relay` as a rendezvous, end to end on loopback: a perf server or
//! a receiver registers with it under its key, a perf client or a sender
//! finds it there by that key alone and works over a direct connection,
//! or through the relay with `--relay-only`.

mod support;

use std::path::PathBuf;

use support::{Server, keys, path, random_file, receiver, run, sha256, stdout};

/// A running `tern relay`, its key files, and their directory.
fn relay() -> (Server, PathBuf, tempfile::TempDir) {
    relay_with(&[])
}

/// [`relay`], with `extra` arguments.
fn relay_with(extra: &[&str]) -> (Server, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let made = run(&["keygen", "--out", path(dir.path())]);
    assert!(made.status.success(), "{made:?}");
    let key = dir.path().join("tern.key");
    let mut args = vec!["relay", "--listen", "127.0.0.1:0", "--key", path(&key)];
    args.extend_from_slice(extra);
    let relay = Server::start(&args);
    (relay, dir.path().join("tern.pub"), dir)
}

#[test]
fn a_perf_client_finds_a_registered_server_by_its_key_through_the_relay() {
    let (relay, relay_pub, _dir) = relay();
    let keys = keys();
    let server = Server::start(&[
        "perf",
        "server",
        "--listen",
        "127.0.0.1:0",
        "--key",
        path(&keys.private),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ]);
    server.lines_until("registered with the rendezvous");
    relay.lines_until("connected");

    let output = run(&[
        "perf",
        "client",
        "--key",
        path(&keys.public),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
        "--bytes",
        "10M",
    ]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!("path: direct {}", server.addr)),
        "the client reached the server's own address: {printed}"
    );
    assert!(printed.contains("they agree"), "{printed}");
    relay.lines_until("introduction made");

    // A key nobody registered: refused by the rendezvous, said plainly.
    let output = run(&[
        "perf",
        "client",
        "--key",
        path(&keys.other_public),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("UnknownPeer"), "{said}");
}

#[test]
fn a_file_is_sent_to_a_receiver_found_through_the_relay() {
    let (relay, relay_pub, _dir) = relay();
    let out = tempfile::tempdir().expect("temporary directory");
    let receiver = receiver(
        out.path(),
        &[
            "--rendezvous",
            &relay.addr,
            "--rendezvous-key",
            path(&relay_pub),
        ],
    );
    receiver.lines_until("registered with the rendezvous");
    let files = tempfile::tempdir().expect("temporary directory");
    let file = random_file(files.path(), "found.bin", 3 << 20);
    let output = run(&[
        "send",
        path(&file),
        "--key",
        path(&keys().public),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains(&receiver.addr), "sent directly");
    receiver.lines_until("found.bin");
    assert_eq!(sha256(&out.path().join("found.bin")), sha256(&file));
}

#[test]
fn with_relay_only_the_data_goes_through_the_relay_and_arrives_intact() {
    let (relay, relay_pub, _dir) = relay_with(&["--pair-rate", "200"]);
    let keys = keys();
    let server = Server::start(&[
        "perf",
        "server",
        "--listen",
        "127.0.0.1:0",
        "--key",
        path(&keys.private),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ]);
    server.lines_until("registered with the rendezvous");
    let output = run(&[
        "perf",
        "client",
        "--key",
        path(&keys.public),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
        "--relay-only",
        "--bytes",
        "4M",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_eq!(report["path"], format!("relayed via {}", relay.addr));
    assert_eq!(report["bytes_agree"], true);
    relay.lines_until("relaying a pair");

    // A file, relayed too.
    let out = tempfile::tempdir().expect("temporary directory");
    let receiver = receiver(
        out.path(),
        &[
            "--rendezvous",
            &relay.addr,
            "--rendezvous-key",
            path(&relay_pub),
        ],
    );
    receiver.lines_until("registered with the rendezvous");
    let files = tempfile::tempdir().expect("temporary directory");
    let file = random_file(files.path(), "relayed.bin", 2 << 20);
    let output = run(&[
        "send",
        path(&file),
        "--key",
        path(&keys.public),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
        "--relay-only",
    ]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!("path: relayed via {}", relay.addr)),
        "{printed}"
    );
    receiver.lines_until("relayed.bin");
    assert_eq!(sha256(&out.path().join("relayed.bin")), sha256(&file));
}

#[test]
fn a_relay_allowed_no_pairs_refuses_relay_only_by_type() {
    let (relay, relay_pub, _dir) = relay_with(&["--max-pairs", "0"]);
    let keys = keys();
    let server = Server::start(&[
        "perf",
        "server",
        "--listen",
        "127.0.0.1:0",
        "--key",
        path(&keys.private),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ]);
    server.lines_until("registered with the rendezvous");
    let output = run(&[
        "perf",
        "client",
        "--key",
        path(&keys.public),
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
        "--relay-only",
    ]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("RelayFull"), "{said}");
    relay.lines_until("relay refused");
}
