//! An echo server that serves only peers it knows: it accepts a connection
//! whose initiator proved an identity listed in a directory of public keys,
//! prints who connected, and refuses everyone else.
//!
//! ```text
//! mkdir known
//! cargo run --release -p tern-peer --example known_peers_server -- 127.0.0.1:7000 server.pub known
//! # Alice makes her key (alice.key, alice.key.pub) on her first run: refused.
//! TERN_IDENTITY=alice.key cargo run --release -p tern-peer --example echo_client -- 127.0.0.1:7000 server.pub hello
//! cp alice.key.pub known/alice.pub
//! # Now she is known: accepted, and the server prints "alice".
//! TERN_IDENTITY=alice.key cargo run --release -p tern-peer --example echo_client -- 127.0.0.1:7000 server.pub hello
//! ```
//! Each `NAME.pub` in the directory (a public key in PEM, as the client
//! writes it) is a known peer called NAME; the directory is read again for
//! every connection, so a key copied there counts at once. The server
//! requires every initiator to prove its identity
//! ([`Config::require_identity`]), so an anonymous client is closed after
//! the handshake timeout without ever being yielded by `accept`.

use std::error::Error;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use rand_core::OsRng;
use tern_peer::{Config, Endpoint, IdentityKey, PublicIdentity};

/// The close code a refused peer reads.
const UNKNOWN_PEER: u64 = 403;

/// The name of `identity` among the keys in `dir`, if it is there.
fn known_as(dir: &Path, identity: &PublicIdentity) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.filter_map(Result::ok).find_map(|entry| {
        let path = entry.path();
        if path.extension()? != "pub" {
            return None;
        }
        let key = PublicIdentity::from_spki_pem(&std::fs::read_to_string(&path).ok()?).ok()?;
        let name = path.file_stem()?.to_string_lossy().into_owned();
        (key == *identity).then_some(name)
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args.next().unwrap_or("127.0.0.1:7000".into()).parse()?;
    let public_file = args.next().unwrap_or("server.pub".into());
    let known = PathBuf::from(args.next().unwrap_or("known".into()));

    let identity = IdentityKey::generate_x25519(&mut OsRng);
    std::fs::write(&public_file, identity.public().to_spki_pem()?)?;
    let config = Config::default().identity(identity).require_identity(true);
    let endpoint = Endpoint::bind(addr, config)?;
    println!(
        "serving the peers in {} on {}; public key in {public_file}",
        known.display(),
        endpoint.local_addr()
    );

    while let Some(incoming) = endpoint.accept().await {
        let from = incoming.remote_address();
        let name = incoming.identity().and_then(|id| known_as(&known, id));
        let Some(name) = name else {
            println!("{from}: refused, not a known identity");
            incoming.refuse(UNKNOWN_PEER);
            continue;
        };
        println!("{name} connected from {from}");
        let connection = incoming.accept();
        tokio::spawn(async move {
            while let Ok(message) = connection.recv().await {
                if connection.send(message).await.is_err() {
                    break;
                }
            }
            println!("{name}: {}", connection.closed().await);
        });
    }
    Ok(())
}
