//! An echo server: every message a client sends comes back to it.
//!
//! ```text
//! cargo run --release -p tern-peer --example echo_server -- 127.0.0.1:7000 server.pub
//! cargo run --release -p tern-peer --example echo_client -- 127.0.0.1:7000 server.pub hello
//! ```
//! The server makes a fresh X25519 identity at start (Tern's default kind:
//! an intro to it costs the server tens of microseconds, to an RSA-2048 key
//! about a millisecond) and writes its public key (PEM) to the file named
//! second, where the client reads it.

use std::error::Error;
use std::net::SocketAddr;

use rand_core::OsRng;
use tern_peer::{Config, Endpoint, IdentityKey};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args.next().unwrap_or("127.0.0.1:7000".into()).parse()?;
    let public_file = args.next().unwrap_or("server.pub".into());

    let identity = IdentityKey::generate_x25519(&mut OsRng);
    std::fs::write(&public_file, identity.public().to_spki_pem()?)?;
    let endpoint = Endpoint::bind(addr, Config::default().identity(identity))?;
    println!(
        "echoing on {} ({:?} backend); public key in {public_file}",
        endpoint.local_addr(),
        endpoint.backend()
    );

    while let Some(connection) = endpoint.accept_connection().await {
        tokio::spawn(async move {
            let peer = connection.remote_address();
            while let Ok(message) = connection.recv().await {
                if connection.send(message).await.is_err() {
                    break;
                }
            }
            println!("{peer}: {}", connection.closed().await);
        });
    }
    Ok(())
}
