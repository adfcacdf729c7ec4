//! A perf run across two network namespaces joined by a veth pair whose
//! sending side is shaped by a `tbf` qdisc: Tern's rate settles at the
//! limit. Needs root and `ip`/`tc`, so it is ignored unless asked for
//! (`cargo test -p tern-cli --test netns -- --ignored`, which CI runs as
//! root); asked for where they are missing, it fails and says why.

mod support;

use std::process::Command;

use support::{Server, keys, path};

/// The shaped rate, in Mbit/s.
const LIMIT_MBIT: f64 = 40.0;

/// Two namespaces and the veth pair between them, removed when dropped.
struct Link {
    client_ns: String,
    server_ns: String,
    server_ip: String,
}

impl Link {
    fn create() -> Result<Self, String> {
        let id = std::process::id() % 100_000;
        let link = Self {
            client_ns: format!("tern-c{id}"),
            server_ns: format!("tern-s{id}"),
            server_ip: "10.213.0.2".to_owned(),
        };
        let (c, s) = (link.client_ns.as_str(), link.server_ns.as_str());
        let (vc, vs) = (format!("tc{id}"), format!("ts{id}"));
        let limit = format!("{LIMIT_MBIT}mbit");
        let steps: Vec<Vec<&str>> = vec![
            vec!["ip", "netns", "add", c],
            vec!["ip", "netns", "add", s],
            vec![
                "ip", "link", "add", &vc, "netns", c, "type", "veth", "peer", "name", &vs, "netns",
                s,
            ],
            vec!["ip", "-n", c, "addr", "add", "10.213.0.1/24", "dev", &vc],
            vec!["ip", "-n", s, "addr", "add", "10.213.0.2/24", "dev", &vs],
            vec!["ip", "-n", c, "link", "set", &vc, "up"],
            vec!["ip", "-n", s, "link", "set", &vs, "up"],
            vec!["ip", "-n", c, "link", "set", "lo", "up"],
            vec!["ip", "-n", s, "link", "set", "lo", "up"],
            // The client's sending side: a token bucket at the limit, a
            // queue of at most 20 ms (below LEDBAT's 100 ms target, so
            // Tern fills it rather than yields).
            vec![
                "ip", "netns", "exec", c, "tc", "qdisc", "add", "dev", &vc, "root", "tbf", "rate",
                &limit, "burst", "32kbit", "latency", "20ms",
            ],
        ];
        for step in steps {
            let status = Command::new(step[0])
                .args(&step[1..])
                .status()
                .map_err(|e| format!("{step:?}: {e}"))?;
            if !status.success() {
                return Err(format!("{step:?} failed"));
            }
        }
        Ok(link)
    }

    /// `tern` inside namespace `ns`.
    fn tern_in(ns: &str) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_tern")])
            .env_remove("RUST_LOG")
            .env_remove("TERN_SOCKIO_BACKEND");
        command
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for ns in [&self.client_ns, &self.server_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[test]
#[ignore = "needs root with ip and tc (network namespaces); run with --ignored"]
fn across_namespaces_the_rate_settles_at_the_tbf_limit() {
    if let Err(why) = support::root_with(&["ip", "tc"]) {
        panic!("network namespaces need root with ip and tc: {why}");
    }
    let link = Link::create().unwrap_or_else(|why| panic!("cannot build the namespaces: {why}"));
    let keys = keys();
    let listen = format!("{}:0", link.server_ip);
    let server = Server::start_command(
        Link::tern_in(&link.server_ns),
        &[
            "perf",
            "server",
            "--listen",
            &listen,
            "--key",
            path(&keys.private),
        ],
    );
    let output = Link::tern_in(&link.client_ns)
        .args([
            "perf",
            "client",
            &server.addr,
            "--key",
            path(&keys.public),
            "--time",
            "4s",
            "--json",
        ])
        .output()
        .expect("runs the client");
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(report["bytes_agree"], true);
    let received = report["server"]["bytes_received"].as_f64().expect("bytes");
    let seconds = report["server"]["seconds"].as_f64().expect("seconds");
    let mbit = received * 8.0 / seconds / 1e6;
    println!("{mbit:.1} Mbit/s of application data through a {LIMIT_MBIT} Mbit/s tbf");
    // The limit counts whole frames (Ethernet, IP, UDP and Tern headers
    // on ~1450-byte payloads: ~6% overhead) and the first round trips
    // start slow, so the application rate is a little under it.
    assert!(
        (0.6 * LIMIT_MBIT..=1.02 * LIMIT_MBIT).contains(&mbit),
        "{mbit:.1} Mbit/s through a {LIMIT_MBIT} Mbit/s limit"
    );
}
