//! Files on one-way streams: the client sends each file named on its
//! command line on a one-way stream of its own, all at once; the server
//! reads each stream to its end and answers with a message naming the
//! stream and its length.
//!
//! ```text
//! cargo run --release -p tern-peer --example uni_client -- serve 127.0.0.1:7001 server.pub
//! cargo run --release -p tern-peer --example uni_client -- 127.0.0.1:7001 server.pub a.bin b.bin
//! ```
//! The server makes a fresh X25519 identity at start and writes its public
//! key (PEM) to the file named second, where the client reads it.

use std::error::Error;
use std::net::SocketAddr;

use bytes::Bytes;
use rand_core::OsRng;
use tern_peer::{Config, Connection, Endpoint, IdentityKey, PublicIdentity, WriteError};
use tokio::task::JoinSet;

/// The most the server keeps of one stream.
const LIMIT: usize = 64 << 20;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("serve") {
        args.next();
        let addr: SocketAddr = args.next().unwrap_or("127.0.0.1:7001".into()).parse()?;
        let public_file = args.next().unwrap_or("server.pub".into());
        return serve(addr, &public_file).await;
    }
    let server: SocketAddr = args.next().unwrap_or("127.0.0.1:7001".into()).parse()?;
    let public_file = args.next().unwrap_or("server.pub".into());
    let public = PublicIdentity::from_spki_pem(&std::fs::read_to_string(public_file)?)?;

    let endpoint = Endpoint::bind("0.0.0.0:0".parse()?, Config::default())?;
    let connection = endpoint.connect(server, &public).await?;
    let mut uploads = JoinSet::new();
    for path in args {
        let contents = std::fs::read(&path)?;
        let connection = connection.clone();
        uploads.spawn(async move { (path, upload(&connection, &contents).await) });
    }
    let mut sent = 0;
    while let Some(done) = uploads.join_next().await {
        match done? {
            (path, Ok(())) => {
                println!("{path}: sent");
                sent += 1;
            }
            // The typed error says why: the server stopped reading (with
            // its code), or the connection ended.
            (path, Err(e)) => println!("{path}: not sent: {e}"),
        }
    }
    for _ in 0..sent {
        let answer = connection.recv().await?;
        println!("server: {}", String::from_utf8_lossy(&answer));
    }
    connection.close(0, Bytes::from_static(b"bye")).await;
    endpoint.wait_idle().await;
    Ok(())
}

/// Sends `contents` on a one-way stream and waits until the server has
/// them all (or stopped the stream).
async fn upload(connection: &Connection, contents: &[u8]) -> Result<(), WriteError> {
    let mut stream = connection.open_uni().await?;
    stream.write_all(contents).await?;
    // Nothing more will be written; the stream ends after these bytes.
    let _ = stream.finish();
    match stream.stopped().await? {
        None => Ok(()),
        Some(code) => Err(WriteError::Stopped(code)),
    }
}

async fn serve(addr: SocketAddr, public_file: &str) -> Result<(), Box<dyn Error>> {
    let identity = IdentityKey::generate_x25519(&mut OsRng);
    std::fs::write(public_file, identity.public().to_spki_pem()?)?;
    let endpoint = Endpoint::bind(addr, Config::default().identity(identity))?;
    println!(
        "reading one-way streams on {}; public key in {public_file}",
        endpoint.local_addr()
    );
    while let Some(connection) = endpoint.accept_connection().await {
        tokio::spawn(async move {
            while let Ok(mut stream) = connection.accept_uni().await {
                let connection = connection.clone();
                tokio::spawn(async move {
                    let answer = match stream.read_to_end(LIMIT).await {
                        Ok(bytes) => format!("stream {}: {} bytes", stream.id().0, bytes.len()),
                        Err(e) => format!("stream {}: {e}", stream.id().0),
                    };
                    let _ = connection.send(Bytes::from(answer)).await;
                });
            }
        });
    }
    Ok(())
}
