//! One endpoint per core on one port (`SO_REUSEPORT`), each with its own
//! driver on its own current-thread runtime: the kernel keeps each peer on
//! one of them, so connections spread over the cores without any lock
//! between them.
//!
//! ```text
//! cargo run --release -p tern-peer --example per_core -- 0.0.0.0:7000
//! ```

use std::error::Error;
use std::net::SocketAddr;

use rand_core::OsRng;
use tern_peer::{Config, Endpoint, IdentityKey};

fn main() -> Result<(), Box<dyn Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or("127.0.0.1:7000".into())
        .parse()?;
    let cores = std::thread::available_parallelism()?.get();
    // Every endpoint answers with the same identity.
    let identity = IdentityKey::generate_x25519(&mut OsRng);
    println!("{}", identity.public().to_spki_pem()?);

    let workers: Vec<_> = (0..cores)
        .map(|core| {
            let config = Config::default()
                .identity(identity.clone())
                .reuse_port(true);
            std::thread::spawn(move || -> std::io::Result<()> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let endpoint = Endpoint::bind(addr, config)?;
                    println!("core {core}: listening on {}", endpoint.local_addr());
                    while let Some(connection) = endpoint.accept_connection().await {
                        tokio::spawn(async move {
                            while let Ok(message) = connection.recv().await {
                                let _ = connection.send(message).await;
                            }
                        });
                    }
                    Ok(())
                })
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a worker panicked")??;
    }
    Ok(())
}
