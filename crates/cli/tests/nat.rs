//! `tern perf` out through Linux's own NATs: clients in two private
//! networks, one behind a port-preserving `masquerade` (a cone NAT), one
//! behind `masquerade random,fully-random` (symmetric), reach a server on
//! the public side built by `scripts/nat-netns.sh`. Needs root, `ip` and
//! nftables (the script installs nftables when missing), so it is ignored
//! unless asked for (`cargo test -p tern-cli --test nat -- --ignored`, which
//! CI runs as root); asked for where they are missing, it fails and says why.
//! Two peers behind two such cone NATs find each other through `tern relay`
//! on the public side and connect directly.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use support::{Server, keys, path, run};

/// The script's namespaces, under a name of this run, removed when dropped.
struct Nats {
    prefix: String,
}

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
        // One set of namespaces per test: the tests of this file run at once.
        static SETS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let set = SETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nats = Self {
            prefix: format!("tern-nat{}-{set}", std::process::id() % 100_000),
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

#[test]
#[ignore = "needs root with ip and nftables (network namespaces); run with --ignored"]
fn peers_behind_two_cone_linux_nats_connect_directly_through_a_rendezvous() {
    if let Err(why) = support::root_with(&["ip", "bash"]) {
        panic!("network namespaces need root with ip: {why}");
    }
    let nats = Nats::up("cone", "cone");
    let keys = keys();
    let relay_dir = tempfile::tempdir().expect("temporary directory");
    let made = run(&["keygen", "--out", path(relay_dir.path())]);
    assert!(made.status.success(), "{made:?}");
    let relay_pub = relay_dir.path().join("tern.pub");
    let relay = Server::start_command(
        nats.tern_in("pub"),
        &[
            "relay",
            "--listen",
            "203.0.113.10:0",
            "--key",
            path(&relay_dir.path().join("tern.key")),
        ],
    );
    let rendezvous = [
        "--rendezvous",
        relay.addr.as_str(),
        "--rendezvous-key",
        path(&relay_pub),
    ];
    let mut server_args = vec![
        "perf",
        "server",
        "--listen",
        "198.51.100.2:5201",
        "--key",
        path(&keys.private),
    ];
    server_args.extend_from_slice(&rendezvous);
    let server = Server::start_command(nats.tern_in("b"), &server_args);
    server.lines_until("registered with the rendezvous");
    let mut client_args = vec![
        "perf",
        "client",
        "--key",
        path(&keys.public),
        "--bytes",
        "100M",
        "--json",
    ];
    client_args.extend_from_slice(&rendezvous);
    let output = nats
        .tern_in("a")
        .args(&client_args)
        .output()
        .expect("runs the client");
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["bytes_agree"], true);
    // Direct: to the server's NAT, not through the rendezvous.
    let address = report["address"].as_str().unwrap_or_default();
    assert!(address.starts_with("203.0.113.2:"), "{report}");
    assert!(nats.masqueraded("nat1") > 0 && nats.masqueraded("nat2") > 0);
    relay.lines_until("introduction made");
}
