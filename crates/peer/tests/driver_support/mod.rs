//! What the driver tests share: the backends they run on, their patience,
//! and how a driver is bound and stopped.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

use tern_peer::driver::{DriverConfig, DriverHandle, Stopped};
use tern_peer::proto::{Node, Transmit};
use tern_sockio::Backend;

/// Each test runs once with the Portable backend and once with Auto (the
/// best the kernel has, or what `TERN_SOCKIO_BACKEND` names).
pub const BACKENDS: [Option<Backend>; 2] = [Some(Backend::Portable), None];

/// Every wait in these tests ends by this, so a bug fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

pub fn config(backend: Option<Backend>) -> DriverConfig {
    DriverConfig::default().backend(backend)
}

pub async fn stop<N: Node + Send + 'static>(
    handle: DriverHandle<N>,
    task: tokio::task::JoinHandle<std::io::Result<Stopped<N>>>,
) -> Stopped<N> {
    handle.stop();
    tokio::time::timeout(PATIENCE, task)
        .await
        .expect("driver stops")
        .expect("driver task")
        .expect("driver ran")
}

/// One datagram of `len` bytes to `destination`, as a toy node's
/// `poll_transmit` answers.
pub fn datagram(destination: SocketAddr, len: usize) -> Option<Transmit> {
    Some(Transmit {
        destination,
        len,
        segment_size: None,
        ttl: None,
    })
}
