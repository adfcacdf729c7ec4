//! `tern perf` end to end: a server and clients as separate processes on
//! loopback.

mod support;

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use support::{Server, keys, path, run, stderr, stdout};

fn perf_server() -> Server {
    perf_server_with(&[])
}

/// A perf server with `extra` options after the usual ones.
fn perf_server_with(extra: &[&str]) -> Server {
    let keys = keys();
    let mut args = vec![
        "perf",
        "server",
        "--listen",
        "127.0.0.1:0",
        "--key",
        path(&keys.private),
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// Runs a perf client against `server` with `extra` arguments.
fn client(server: &Server, extra: &[&str]) -> std::process::Output {
    let keys = keys();
    let mut args = vec![
        "perf",
        "client",
        server.addr.as_str(),
        "--key",
        path(&keys.public),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// The `(sent, received)` of an agreement line such as
/// "client to server: 123 bytes sent, 123 received: they agree".
/// (the server's lines begin with the client's address).
fn agreed(line: &str) -> (u64, u64) {
    let counts = line
        .split_once("client to server:")
        .or_else(|| line.split_once("server to client:"))
        .map_or(line, |(_, counts)| counts);
    let numbers: Vec<u64> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 2, "{line}");
    (numbers[0], numbers[1])
}

fn json(output: &std::process::Output) -> serde_json::Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("--json prints one JSON document")
}

#[test]
fn a_two_second_upload_is_reported_by_both_ends_with_the_same_byte_counts() {
    let server = perf_server();
    let output = client(&server, &["--time", "2s", "--interval", "500ms"]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines.iter().filter(|l| l.starts_with('[')).count() >= 2,
        "{printed}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("client: sent")),
        "{printed}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("server: sent")),
        "{printed}"
    );
    let client_line = lines
        .iter()
        .find(|l| l.starts_with("client to server:"))
        .expect("the client compares the counts");
    assert!(client_line.ends_with("they agree"), "{client_line}");
    let (sent, received) = agreed(client_line);
    assert_eq!(sent, received);
    assert!(sent > 0);

    // The server's own summary, with the same counts.
    let server_lines = server.lines_until("client to server:");
    let server_line = server_lines.last().expect("a line");
    assert_eq!(agreed(server_line), (sent, received));
    assert!(
        server_lines
            .iter()
            .any(|l| l.contains("server: sent 0 B, received"))
    );
}

#[test]
fn reverse_with_four_streams_and_json_output_parse_and_agree() {
    let server = perf_server();
    let output = client(
        &server,
        &[
            "--time",
            "1s",
            "--reverse",
            "--streams",
            "4",
            "--interval",
            "250ms",
            "--json",
        ],
    );
    let report = json(&output);
    assert_eq!(report["params"]["streams"], 4);
    assert_eq!(report["params"]["direction"], "download");
    assert_eq!(report["bytes_agree"], true);
    let sent = report["server"]["bytes_sent"].as_u64().expect("a count");
    assert!(sent > 0);
    assert_eq!(report["client"]["bytes_received"].as_u64(), Some(sent));
    assert_eq!(report["client"]["bytes_sent"].as_u64(), Some(0));
    let intervals = report["intervals"].as_array().expect("intervals");
    assert!(!intervals.is_empty());
    for interval in intervals {
        for field in ["bits_per_second", "rtt_ms", "retransmits", "window"] {
            assert!(interval[field].is_number(), "{interval}");
        }
    }
}

#[test]
fn a_bidirectional_run_of_a_fixed_size_moves_exactly_that_each_way() {
    let server = perf_server();
    let output = client(
        &server,
        &["--bytes", "20M", "--bidir", "--streams", "3", "--json"],
    );
    let report = json(&output);
    for (end, field) in [
        ("client", "bytes_sent"),
        ("client", "bytes_received"),
        ("server", "bytes_sent"),
        ("server", "bytes_received"),
    ] {
        assert_eq!(
            report[end][field].as_u64(),
            Some(20_000_000),
            "{end} {field}"
        );
    }
}

#[test]
fn a_wrong_key_and_a_dead_address_end_with_a_clear_message() {
    let keys = keys();
    let server = perf_server();
    let wrong = support::run(&[
        "perf",
        "client",
        &server.addr,
        "--key",
        path(&keys.other_public),
        "--connect-timeout",
        "1s",
    ]);
    assert!(!wrong.status.success());
    assert_eq!(
        stderr(&wrong).trim(),
        format!(
            "tern: no answer from {} within 1s: wrong address, or wrong key",
            server.addr
        )
    );

    // A port where a socket is bound but nothing answers.
    let silent = UdpSocket::bind("127.0.0.1:0").expect("binds");
    let dead = silent.local_addr().expect("address").to_string();
    let unanswered = client_to(&dead, &["--connect-timeout", "1s"]);
    assert!(!unanswered.status.success());
    assert_eq!(
        stderr(&unanswered).trim(),
        format!("tern: no answer from {dead} within 1s: wrong address, or wrong key")
    );

    // The server was not disturbed.
    assert!(client(&server, &["--time", "500ms"]).status.success());
}

fn client_to(addr: &str, extra: &[&str]) -> std::process::Output {
    let keys = keys();
    let mut args = vec!["perf", "client", addr, "--key", path(&keys.public)];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn a_port_in_use_is_refused_with_a_clear_message() {
    let keys = keys();
    let taken = UdpSocket::bind("127.0.0.1:0").expect("binds");
    let addr = taken.local_addr().expect("address").to_string();
    let output = run(&[
        "perf",
        "server",
        "--listen",
        &addr,
        "--key",
        path(&keys.private),
    ]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!("tern: cannot listen on {addr}: "))
            && message.lines().count() == 1,
        "{message}"
    );
}

#[test]
fn garbage_at_the_servers_port_neither_stops_a_run_nor_the_next_client() {
    let server = perf_server();
    let target: std::net::SocketAddr = server.addr.parse().expect("an address");
    let stop = Arc::new(AtomicBool::new(false));
    let thrown = Arc::new(AtomicU64::new(0));
    let thrower = {
        let (stop, thrown) = (Arc::clone(&stop), Arc::clone(&thrown));
        std::thread::spawn(move || {
            let socket = UdpSocket::bind("127.0.0.1:0").expect("binds");
            let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut datagram = [0u8; 1500];
            while !stop.load(Ordering::Relaxed) {
                // xorshift: sizes from 0 to 1499, bytes of every value.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let len = (state % 1500) as usize;
                for (i, byte) in datagram[..len].iter_mut().enumerate() {
                    *byte = (state >> (i % 57)) as u8 ^ i as u8;
                }
                let _ = socket.send_to(&datagram[..len], target);
                thrown.fetch_add(1, Ordering::Relaxed);
                if thrown.load(Ordering::Relaxed) % 64 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        })
    };
    let during = client(&server, &["--time", "2s"]);
    stop.store(true, Ordering::Relaxed);
    thrower.join().expect("the thrower ends");
    assert!(during.status.success(), "{during:?}");
    assert!(stdout(&during).contains("they agree"));
    assert!(thrown.load(Ordering::Relaxed) > 1000);

    let after = client(&server, &["--time", "500ms"]);
    assert!(after.status.success(), "{after:?}");
    assert!(server.errors_so_far().is_empty());
    // The server saw the garbage, and dropped it.
    let lines = server.lines_until("endpoint so far:");
    let lines = [lines, server.lines_until("endpoint so far:")].concat();
    let dropped: u64 = lines
        .last()
        .and_then(|l| l.split("so far: ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a count of dropped datagrams");
    assert!(dropped > 0, "{lines:?}");
}

#[test]
fn a_pasted_key_a_forced_backend_and_a_payload_cap_are_honoured() {
    let keys = keys();
    let server = perf_server();
    let pasted = stdout(&run(&["pubkey", "--key", path(&keys.public)]))
        .trim()
        .to_owned();
    let output = client_to(
        &server.addr,
        &[
            "--time",
            "500ms",
            "--backend",
            "portable",
            "--mtu",
            "1300",
            "--json",
        ],
    );
    let report = json(&output);
    assert_eq!(report["backend"], "portable");
    // Probing starts at 1200 and may not have reached the cap yet; it
    // never passes it (the default would be 1452).
    let mtu = report["client"]["path_mtu"].as_u64().expect("a number");
    assert!((1200..=1300).contains(&mtu), "{mtu}");
    assert_eq!(report["bytes_agree"], true);
    let output = run(&[
        "perf",
        "client",
        &server.addr,
        "--key",
        &pasted,
        "--bytes",
        "1M",
        "--json",
    ]);
    assert_eq!(json(&output)["server"]["bytes_received"], 1_000_000);
}

#[test]
fn each_end_runs_the_congestion_controller_it_was_given_and_says_which() {
    let server = perf_server_with(&["--congestion", "cubic"]);
    for (flag, expected) in [(Some("cubic"), "cubic"), (None, "ledbat")] {
        let mut extra = vec!["--bytes", "2M", "--bidir", "--json"];
        extra.extend(flag.iter().flat_map(|f| ["--congestion", f]));
        let report = json(&client(&server, &extra));
        assert_eq!(report["client"]["congestion"], expected);
        assert_eq!(report["server"]["congestion"], "cubic");
        assert_eq!(report["bytes_agree"], true);
    }
    let output = client(&server, &["--bytes", "1M", "--congestion", "cubic"]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed
            .lines()
            .next()
            .is_some_and(|l| l.ends_with("congestion cubic")),
        "{printed}"
    );
    assert!(
        printed
            .lines()
            .any(|l| l.starts_with("client: sent") && l.contains("congestion cubic")),
        "{printed}"
    );
    let refused = client(&server, &["--bytes", "1M", "--congestion", "vegas"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("ledbat"), "{}", stderr(&refused));
}
