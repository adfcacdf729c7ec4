//! The echo server's client: sends each word of its command line as a
//! message and prints what comes back. See `echo_server.rs` for how to run
//! the two.

use std::error::Error;
use std::net::SocketAddr;

use bytes::Bytes;
use tern_peer::{Config, Endpoint, PublicIdentity};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let server: SocketAddr = args.next().unwrap_or("127.0.0.1:7000".into()).parse()?;
    let public_file = args.next().unwrap_or("server.pub".into());
    let public = PublicIdentity::from_spki_pem(&std::fs::read_to_string(public_file)?)?;

    let endpoint = Endpoint::bind("0.0.0.0:0".parse()?, Config::default())?;
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
    Ok(())
}
