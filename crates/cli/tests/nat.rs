//! `tern perf` out through Linux's own NATs: clients in two private
//! networks, one behind a port-preserving `masquerade` (a cone NAT), one
//! behind `masquerade random,fully-random` (symmetric), reach a server on
//! the public side built by `scripts/nat-netns.sh`. Needs root, `ip` and
//! nftables (the script installs nftables when missing), so it is ignored
//! unless asked for (`cargo test -p tern-cli --test nat -- --ignored`, which
//! CI runs as root); asked for where they are missing, it fails and says why.
//! Two peers behind two such cone NATs find each other through `tern relay`
//! on the public side and connect directly; a pair with a symmetric NAT
//! (cone and symmetric, or two symmetric) goes through the relay.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use support::{Server, keys, path};

/// The script's namespaces, under a name of this run, removed when dropped.
/// One set at a time: the tests of this file take turns.
struct Nats {
    prefix: String,
    _turn: std::sync::MutexGuard<'static, ()>,
}

static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Nats {
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/nat-netns.sh")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("bash")
            .arg(Self::script())
            .args(args)
            .env("TERN_NAT_PREFIX", &self.prefix)
            .output()
            .expect("runs the script")
    }

    fn up(nat1: &str, nat2: &str) -> Self {
        let nats = Self {
            prefix: format!("tern-nat{}", std::process::id() % 100_000),
            _turn: TURN
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
        let output = nats.run(&["up", nat1, nat2]);
        assert!(output.status.success(), "the script failed: {output:?}");
        nats
    }

    /// `tern` inside the namespace `name` (a, b, pub).
    fn tern_in(&self, name: &str) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &format!("{}-{name}", self.prefix)])
            .arg(env!("CARGO_BIN_EXE_tern"))
            .env_remove("RUST_LOG")
            .env_remove("TERN_SOCKIO_BACKEND");
        command
    }

    /// Packets the NAT `nat1` or `nat2` translated on the way out.
    fn masqueraded(&self, nat: &str) -> u64 {
        let output = self.run(&[
            "exec",
            nat,
            "nft",
            "list",
            "chain",
            "ip",
            "nat",
            "postrouting",
        ]);
        let text = String::from_utf8_lossy(&output.stdout);
        text.split("counter packets ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no counter in {text}"))
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

#[test]
#[ignore = "needs root with ip and nftables (network namespaces); run with --ignored"]
fn clients_behind_a_cone_and_a_symmetric_linux_nat_reach_a_public_server() {
    if let Err(why) = support::root_with(&["ip", "bash"]) {
        panic!("network namespaces need root with ip: {why}");
    }
    let nats = Nats::up("cone", "symmetric");
    let keys = keys();
    let server = Server::start_command(
        nats.tern_in("pub"),
        &[
            "perf",
            "server",
            "--listen",
            "203.0.113.10:0",
            "--key",
            path(&keys.private),
        ],
    );
    for (host, nat) in [("a", "nat1"), ("b", "nat2")] {
        let output = nats
            .tern_in(host)
            .args([
                "perf",
                "client",
                &server.addr,
                "--key",
                path(&keys.public),
                "--time",
                "2s",
                "--json",
            ])
            .output()
            .expect("runs the client");
        assert!(output.status.success(), "{host}: {output:?}");
        let report: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("one JSON document");
        assert_eq!(report["bytes_agree"], true, "{host}");
        assert!(
            report["server"]["bytes_received"].as_f64().expect("bytes") > 0.0,
            "{host}"
        );
        assert!(
            nats.masqueraded(nat) > 0,
            "{host}'s packets went through {nat}"
        );
    }
    // The public side has no route into either private network.
    let unreachable = nats
        .tern_in("pub")
        .args([
            "perf",
            "client",
            "192.0.2.2:9",
            "--key",
            path(&keys.public),
            "--time",
            "1s",
        ])
        .output()
        .expect("runs the client");
    assert!(!unreachable.status.success());
}

/// A `tern relay` on the public side, and its public key file.
fn relay_on(nats: &Nats, dir: &std::path::Path) -> (Server, PathBuf) {
    let made = support::run(&["keygen", "--out", path(dir)]);
    assert!(made.status.success(), "{made:?}");
    let relay = Server::start_command(
        nats.tern_in("pub"),
        &[
            "relay",
            "--listen",
            "203.0.113.10:0",
            "--key",
            path(&dir.join("tern.key")),
        ],
    );
    (relay, dir.join("tern.pub"))
}

/// A perf server behind the second NAT, listening on `listen` and
/// registered with the rendezvous `via` names, and the JSON report of a
/// perf client behind the first NAT that found it there by key, with the
/// `client` options added.
fn perf_via(
    nats: &Nats,
    via: [&str; 4],
    listen: &str,
    client: &[&str],
) -> (Server, serde_json::Value) {
    let keys = keys();
    let mut args = vec!["perf", "server", "--listen", listen];
    args.extend(["--key", path(&keys.private)]);
    args.extend(via);
    let server = Server::start_command(nats.tern_in("b"), &args);
    server.lines_until("registered with the rendezvous");
    let output = nats
        .tern_in("a")
        .args(["perf", "client", "--key", path(&keys.public), "--json"])
        .args(via)
        .args(client)
        .output()
        .expect("runs the client");
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["bytes_agree"], true);
    (server, report)
}

#[test]
#[ignore = "needs root with ip and nftables (network namespaces); run with --ignored"]
fn behind_a_cone_and_a_symmetric_linux_nat_perf_and_send_go_through_the_relay() {
    perf_and_send_through_the_relay("cone", "symmetric", "20M");
}

#[test]
#[ignore = "needs root with ip and nftables (network namespaces); run with --ignored"]
fn behind_two_symmetric_linux_nats_perf_and_send_go_through_the_relay() {
    perf_and_send_through_the_relay("symmetric", "symmetric", "100M");
}

/// Peers behind `nat1` and `nat2` (a pair with a symmetric NAT: no direct
/// path), found through `tern relay`: `tern perf` moves `bytes` intact
/// through the relay, and `tern send` a file of 8 MiB. Both stay relayed
/// (they probe the direct way while relayed, and find none).
fn perf_and_send_through_the_relay(nat1: &str, nat2: &str, bytes: &str) {
    if let Err(why) = support::root_with(&["ip", "bash"]) {
        panic!("network namespaces need root with ip: {why}");
    }
    let nats = Nats::up(nat1, nat2);
    let keys = keys();
    let dir = tempfile::tempdir().expect("temporary directory");
    let (relay, relay_pub) = relay_on(&nats, dir.path());
    let via = [
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ];
    let (server, report) = perf_via(&nats, via, "198.51.100.2:0", &["--bytes", bytes]);
    assert_eq!(report["path"], format!("relayed via {}", relay.addr));
    assert_eq!(report["went_direct_ms"], serde_json::Value::Null);
    let first_byte = report["first_byte_ms"]
        .as_f64()
        .expect("a time to first byte");
    let connect = report["connect_ms"].as_f64().expect("a connect time");
    assert!(
        first_byte > connect,
        "{first_byte} ms after a {connect} ms connect"
    );
    println!("{nat1}/{nat2}, relayed: {}", report["server"]);
    relay.lines_until("relaying a pair");
    assert!(nats.masqueraded("nat1") > 0 && nats.masqueraded("nat2") > 0);
    drop(server);
    // A file, to a receiver behind the second NAT.
    let out = tempfile::tempdir().expect("temporary directory");
    let mut args = vec![
        "recv",
        "--listen",
        "198.51.100.2:0",
        "--out",
        path(out.path()),
    ];
    args.extend(["--key", path(&keys.private)]);
    args.extend(via);
    let receiver = Server::start_command(nats.tern_in("b"), &args);
    receiver.lines_until("registered with the rendezvous");
    let file = support::random_file(dir.path(), "through.bin", 8 << 20);
    let output = nats
        .tern_in("a")
        .args(["send", path(&file), "--key", path(&keys.public)])
        .args(via)
        .output()
        .expect("runs the sender");
    assert!(output.status.success(), "{output:?}");
    let printed = support::stdout(&output);
    assert!(
        printed.contains(&format!("path: relayed via {}", relay.addr)),
        "{printed}"
    );
    receiver.lines_until("through.bin");
    assert_eq!(
        support::sha256(&out.path().join("through.bin")),
        support::sha256(&file)
    );
}

#[test]
#[ignore = "needs root with ip and nftables (network namespaces); run with --ignored"]
fn peers_behind_two_cone_linux_nats_connect_directly_through_a_rendezvous() {
    if let Err(why) = support::root_with(&["ip", "bash"]) {
        panic!("network namespaces need root with ip: {why}");
    }
    let nats = Nats::up("cone", "cone");
    let dir = tempfile::tempdir().expect("temporary directory");
    let (relay, relay_pub) = relay_on(&nats, dir.path());
    let via = [
        "--rendezvous",
        &relay.addr,
        "--rendezvous-key",
        path(&relay_pub),
    ];
    let (_server, report) = perf_via(
        &nats,
        via,
        "198.51.100.2:5201",
        &["--bytes", "100M", "--no-relay"],
    );
    // Direct: to the server's NAT, not through the rendezvous.
    let path_taken = report["path"].as_str().unwrap_or_default();
    assert!(path_taken.starts_with("direct 203.0.113.2:"), "{report}");
    assert!(nats.masqueraded("nat1") > 0 && nats.masqueraded("nat2") > 0);
    relay.lines_until("introduction made");
}
