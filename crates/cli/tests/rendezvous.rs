//! `tern relay` as a rendezvous, end to end on loopback: a perf server or
//! a receiver registers with it under its key, a perf client or a sender
//! finds it there by that key alone and works over a direct connection,
//! or through the relay with `--relay-only`.

mod support;

use std::path::PathBuf;
use std::process::Output;

use support::{Server, keys, path, random_file, receiver, run, sha256, stdout};

/// A running `tern relay` and its public key file.
struct Relay {
    server: Server,
    public: PathBuf,
    _dir: tempfile::TempDir,
}

impl Relay {
    /// A relay started with `extra` arguments.
    fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let made = run(&["keygen", "--out", path(dir.path())]);
        assert!(made.status.success(), "{made:?}");
        let key = dir.path().join("tern.key");
        let mut args = vec!["relay", "--listen", "127.0.0.1:0", "--key", path(&key)];
        args.extend_from_slice(extra);
        Self {
            server: Server::start(&args),
            public: dir.path().join("tern.pub"),
            _dir: dir,
        }
    }

    fn addr(&self) -> &str {
        &self.server.addr
    }

    /// The options that name this relay as the rendezvous.
    fn via(&self) -> [&str; 4] {
        [
            "--rendezvous",
            self.addr(),
            "--rendezvous-key",
            path(&self.public),
        ]
    }

    /// Runs `tern` with `args`, then this relay as the rendezvous.
    fn run(&self, args: &[&str]) -> Output {
        let mut args = args.to_vec();
        args.extend(self.via());
        run(&args)
    }

    /// A perf server registered with this relay under the test key.
    fn perf_server(&self) -> Server {
        let mut args = vec!["perf", "server", "--listen", "127.0.0.1:0"];
        args.extend(["--key", path(&keys().private)]);
        args.extend(self.via());
        let server = Server::start(&args);
        server.lines_until("registered with the rendezvous");
        server
    }

    /// A receiver registered with this relay, writing into `out`.
    fn receiver(&self, out: &std::path::Path) -> Server {
        let receiver = receiver(out, &self.via());
        receiver.lines_until("registered with the rendezvous");
        receiver
    }
}

#[test]
fn a_perf_client_finds_a_registered_server_by_its_key_through_the_relay() {
    let relay = Relay::start(&[]);
    let keys = keys();
    let server = relay.perf_server();
    relay.server.lines_until("connected");

    let output = relay.run(&[
        "perf",
        "client",
        "--key",
        path(&keys.public),
        "--bytes",
        "10M",
    ]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!("path: direct {}", server.addr)),
        "the client reached the server's own address: {printed}"
    );
    assert!(printed.contains(", first byte after "), "{printed}");
    assert!(printed.contains("they agree"), "{printed}");
    relay.server.lines_until("introduction made");

    // A key nobody registered: refused by the rendezvous, said plainly.
    let output = relay.run(&["perf", "client", "--key", path(&keys.other_public)]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("UnknownPeer"), "{said}");
}

#[test]
fn a_file_is_sent_to_a_receiver_found_through_the_relay() {
    let relay = Relay::start(&[]);
    let out = tempfile::tempdir().expect("temporary directory");
    let receiver = relay.receiver(out.path());
    let files = tempfile::tempdir().expect("temporary directory");
    let file = random_file(files.path(), "found.bin", 3 << 20);
    let output = relay.run(&["send", path(&file), "--key", path(&keys().public)]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains(&receiver.addr), "sent directly");
    receiver.lines_until("found.bin");
    assert_eq!(sha256(&out.path().join("found.bin")), sha256(&file));
}

#[test]
fn with_relay_only_the_data_goes_through_the_relay_and_arrives_intact() {
    let relay = Relay::start(&["--pair-rate", "200"]);
    let keys = keys();
    let _server = relay.perf_server();
    let output = relay.run(&[
        "perf",
        "client",
        "--key",
        path(&keys.public),
        "--relay-only",
        "--bytes",
        "4M",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_eq!(report["path"], format!("relayed via {}", relay.addr()));
    assert_eq!(report["bytes_agree"], true);
    relay.server.lines_until("relaying a pair");

    // A file, relayed too.
    let out = tempfile::tempdir().expect("temporary directory");
    let receiver = relay.receiver(out.path());
    let files = tempfile::tempdir().expect("temporary directory");
    let file = random_file(files.path(), "relayed.bin", 2 << 20);
    let output = relay.run(&[
        "send",
        path(&file),
        "--key",
        path(&keys.public),
        "--relay-only",
    ]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!("path: relayed via {}", relay.addr())),
        "{printed}"
    );
    assert!(printed.contains(", first byte after "), "{printed}");
    receiver.lines_until("relayed.bin");
    assert_eq!(sha256(&out.path().join("relayed.bin")), sha256(&file));
}

#[test]
fn a_relay_allowed_no_pairs_refuses_relay_only_by_type() {
    let relay = Relay::start(&["--max-pairs", "0"]);
    let _server = relay.perf_server();
    let output = relay.run(&[
        "perf",
        "client",
        "--key",
        path(&keys().public),
        "--relay-only",
    ]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("RelayFull"), "{said}");
    relay.server.lines_until("relay refused");
}
