//! An impairing relay between two real sockets, since this kernel has no
//! netem: it forwards each datagram after a delay, with random loss and
//! jitter (which reorders), seeded so a failure reproduces.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What the relay does to every datagram, in both directions.
#[derive(Clone, Copy, Debug)]
pub struct Impairment {
    /// Chance of dropping a datagram.
    pub loss: f64,
    /// One-way delay.
    pub delay: Duration,
    /// Extra delay, uniform in `0..jitter`: datagrams overtake each other.
    pub jitter: Duration,
    pub seed: u64,
}

/// A running relay: peers send to [`addr`](Self::addr) to reach the server.
pub struct Relay {
    pub addr: SocketAddr,
    /// The first datagram the client sent (its intro), for replay attacks.
    pub first: Arc<Mutex<Option<Vec<u8>>>>,
    /// Set to have the relay move to a new socket on the server's side
    /// before it forwards the next datagram: the server sees its client's
    /// address change, as after a NAT rebinding.
    rebind: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Relay {
    /// The relay forwards from a new address from its next datagram on.
    pub fn rebind(&self) {
        self.rebind.store(true, Ordering::Relaxed);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One datagram waiting for its time.
struct Due {
    at: Instant,
    seq: u64,
    to_server: bool,
    bytes: Vec<u8>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Starts a relay in front of `server` (one client at a time).
pub async fn start(server: SocketAddr, impairment: Impairment) -> Relay {
    let front = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
    let mut back = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
    let addr = front.local_addr().expect("bound");
    let first = Arc::new(Mutex::new(None));
    let seen_first = Arc::clone(&first);
    let rebind = Arc::new(AtomicBool::new(false));
    let rebind_asked = Arc::clone(&rebind);
    let task = tokio::spawn(async move {
        let mut rng = ChaCha8Rng::seed_from_u64(impairment.seed);
        let mut chance = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut queue: BinaryHeap<Reverse<Due>> = BinaryHeap::new();
        let mut client: Option<SocketAddr> = None;
        let mut seq = 0u64;
        let (mut a, mut b) = (vec![0u8; 65_536], vec![0u8; 65_536]);
        loop {
            let next = queue.peek().map(|Reverse(d)| d.at);
            let arrived = tokio::select! {
                r = front.recv_from(&mut a) => r.ok().map(|(n, from)| {
                    client = Some(from);
                    let mut first = seen_first.lock().expect("not poisoned");
                    if first.is_none() {
                        *first = Some(a[..n].to_vec());
                    }
                    (true, a[..n].to_vec())
                }),
                r = back.recv_from(&mut b) => r.ok().map(|(n, _)| (false, b[..n].to_vec())),
                () = async {
                    match next {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => None,
            };
            if let Some((to_server, bytes)) = arrived
                && chance() >= impairment.loss
            {
                let jitter = impairment.jitter.mul_f64(chance());
                seq += 1;
                queue.push(Reverse(Due {
                    at: Instant::now() + impairment.delay + jitter,
                    seq,
                    to_server,
                    bytes,
                }));
            }
            if rebind_asked.swap(false, Ordering::Relaxed) {
                back = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
            }
            let now = Instant::now();
            while queue.peek().is_some_and(|Reverse(d)| d.at <= now) {
                let Some(Reverse(due)) = queue.pop() else {
                    break;
                };
                if due.to_server {
                    let _ = back.send_to(&due.bytes, server).await;
                } else if let Some(client) = client {
                    let _ = front.send_to(&due.bytes, client).await;
                }
            }
        }
    });
    Relay {
        addr,
        first,
        rebind,
        task,
    }
}
