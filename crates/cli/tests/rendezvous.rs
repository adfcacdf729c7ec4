//! `tern relay` as a rendezvous, end to end on loopback: a perf server
//! registers with it under its key, a perf client finds the server there
//! by that key alone and runs its test over a direct connection.

mod support;

use support::{Server, keys, path, run, stdout};

#[test]
fn a_perf_client_finds_a_registered_server_by_its_key_through_the_relay() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let relay_dir = dir.path().join("relay");
    let made = run(&["keygen", "--out", path(&relay_dir)]);
    assert!(made.status.success(), "{made:?}");
    let (relay_key, relay_pub) = (relay_dir.join("tern.key"), relay_dir.join("tern.pub"));
    let relay = Server::start(&[
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--key",
        path(&relay_key),
    ]);
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
        printed.contains(&server.addr),
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
