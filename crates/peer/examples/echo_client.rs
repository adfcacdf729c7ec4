//! The echo server's client: sends each word of its command line as a
//! message and prints what comes back. See `echo_server.rs` for how to run
//! the two.
//!
//! With `TERN_IDENTITY=FILE` it connects with the identity in FILE (a
//! PKCS#8 PEM private key of either kind), made on the first run (X25519)
//! with its public key written beside it as `FILE.pub`; it proves it to
//! the server (`known_peers_server.rs` accepts only keys it knows).

use std::error::Error;
use std::net::SocketAddr;

use bytes::Bytes;
use rand_core::OsRng;
use tern_peer::{Config, Endpoint, IdentityKey, PublicIdentity};

/// The identity kept in `file`, made (and its public key written to
/// `file.pub`) if there is none yet.
fn identity(file: &str) -> Result<IdentityKey, Box<dyn Error>> {
    if let Ok(pem) = std::fs::read_to_string(file) {
        return Ok(IdentityKey::from_pkcs8_pem(&pem)?);
    }
    let key = IdentityKey::generate_x25519(&mut OsRng);
    std::fs::write(file, key.to_pkcs8_pem()?.as_bytes())?;
    std::fs::write(format!("{file}.pub"), key.public().to_spki_pem()?)?;
    Ok(key)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let server: SocketAddr = args.next().unwrap_or("127.0.0.1:7000".into()).parse()?;
    let public_file = args.next().unwrap_or("server.pub".into());
    let public = PublicIdentity::from_spki_pem(&std::fs::read_to_string(public_file)?)?;

    let mut config = Config::default();
    if let Ok(file) = std::env::var("TERN_IDENTITY") {
        config = config.identity(identity(&file)?);
    }
    let endpoint = Endpoint::bind("0.0.0.0:0".parse()?, config)?;
    let connection = endpoint.connect(server, &public).await?;
    for word in args {
        connection.send(Bytes::from(word)).await?;
        let echo = connection.recv().await?;
        println!("{}", String::from_utf8_lossy(&echo));
    }
    let stats = connection.stats();
    connection.close(0, Bytes::from_static(b"bye")).await;
    if let Some(stats) = stats {
        println!("rtt {:?}, {} packets sent", stats.rtt, stats.sent_packets);
    }
    // The Close is queued, perhaps not yet sent: it must leave before the
    // runtime ends, and the driver with it.
    endpoint.wait_idle().await;
    Ok(())
}
