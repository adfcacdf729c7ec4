//! `tern recv` against a hand-made sender that lies: a name that climbs
//! out of the directory, more bytes than offered, a wrong digest, a first
//! message that is not an offer. Nothing lands outside the directory and
//! nothing unverified lands under a final name.

mod support;

use std::fs;
use std::path::Path;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use support::{Server, keys, receiver};
use tern_peer::{Config, Connection, Endpoint, PublicIdentity};

/// A connection to `receiver` from a sender this test writes by hand.
async fn connect(receiver: &Server) -> (Endpoint, Connection) {
    let pem = fs::read_to_string(&keys().public).expect("reads the public key");
    let public = PublicIdentity::from_spki_pem(&pem).expect("a public key");
    let endpoint =
        Endpoint::bind("127.0.0.1:0".parse().expect("address"), Config::default()).expect("binds");
    let addr = receiver.addr.parse().expect("an address");
    let connection = endpoint.connect(addr, &public).await.expect("connects");
    (endpoint, connection)
}

async fn send_json(connection: &Connection, json: serde_json::Value) {
    let bytes = serde_json::to_vec(&json).expect("encodes");
    connection.send(Bytes::from(bytes)).await.expect("sends");
}

async fn recv_json(connection: &Connection) -> Option<serde_json::Value> {
    let bytes = connection.recv().await.ok()?;
    Some(serde_json::from_slice(&bytes).expect("the receiver speaks JSON"))
}

/// Offers `content` as `name` claiming `size` bytes, with `digest` after
/// it; returns the receiver's last answer (`None`: it closed).
async fn offer(
    receiver: &Server,
    name: &str,
    size: u64,
    content: &[u8],
    digest: &str,
) -> Option<serde_json::Value> {
    let (_endpoint, connection) = connect(receiver).await;
    send_json(
        &connection,
        serde_json::json!({"type": "offer", "name": name, "size": size}),
    )
    .await;
    let answer = recv_json(&connection).await?;
    if answer["type"] != "accept" {
        return Some(answer);
    }
    let (mut stream, _) = connection.open_bi().await.ok()?;
    stream.write_all(content).await.ok()?;
    stream.finish().ok()?;
    send_json(
        &connection,
        serde_json::json!({"type": "digest", "sha256": digest}),
    )
    .await;
    let verdict = recv_json(&connection).await;
    connection.close(0, Bytes::new()).await;
    verdict
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "current_thread")]
async fn a_name_that_climbs_out_of_the_directory_is_stored_inside_it() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("a/out");
    let mut receiver = receiver(&out, &["--once"]);
    let content = b"hello";
    let verdict = offer(
        &receiver,
        "../../escape.txt",
        5,
        content,
        &sha256_hex(content),
    )
    .await
    .expect("a verdict");
    assert_eq!(verdict["type"], "stored", "{verdict}");
    assert!(receiver.wait().success());
    assert_eq!(entries(&out), ["escape.txt"]);
    assert_eq!(fs::read(out.join("escape.txt")).expect("reads"), content);
    assert_eq!(entries(dir.path()), ["a"]);
    assert_eq!(entries(&dir.path().join("a")), ["out"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_name_with_nothing_usable_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &["--once"]);
    let answer = offer(&receiver, "../..", 1, b"x", &sha256_hex(b"x"))
        .await
        .expect("an answer");
    assert_eq!(answer["type"], "refuse", "{answer}");
    assert!(!receiver.wait().success());
    assert!(entries(&out).is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn more_bytes_than_offered_are_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &["--once"]);
    let content = vec![7u8; 100_000];
    let verdict = offer(&receiver, "short.bin", 10, &content, &sha256_hex(&content)).await;
    assert!(
        verdict.as_ref().is_none_or(|v| v["type"] != "stored"),
        "{verdict:?}"
    );
    assert!(!receiver.wait().success());
    assert!(
        receiver
            .next_error()
            .contains("more than the 10 bytes offered")
    );
    assert!(entries(&out).is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_wrong_digest_is_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &["--once"]);
    let verdict = offer(&receiver, "forged.bin", 5, b"hello", &sha256_hex(b"HELLO"))
        .await
        .expect("a verdict");
    assert_eq!(verdict["type"], "refuse", "{verdict}");
    assert!(!receiver.wait().success());
    assert!(receiver.next_error().contains("SHA-256 mismatch"));
    assert!(entries(&out).is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_first_message_that_is_not_an_offer_ends_the_connection() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let mut receiver = receiver(&out, &["--once"]);
    let (_endpoint, connection) = connect(&receiver).await;
    connection
        .send(Bytes::from_static(b"\xff\x00 not json"))
        .await
        .expect("sends");
    assert!(recv_json(&connection).await.is_none());
    assert!(!receiver.wait().success());
    assert!(receiver.next_error().contains("malformed control message"));
    assert!(entries(&out).is_empty());
}
