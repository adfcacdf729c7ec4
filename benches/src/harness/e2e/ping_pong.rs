//! The ceiling of one-at-a-time requests: a 64-byte UDP datagram echoed
//! between two threads, each with a current-thread tokio runtime as the
//! transports' endpoints have, over loopback — no protocol, no encryption,
//! only the two cross-thread hand-overs and four system calls every round
//! trip also costs a transport. Each side waits for the next datagram as a
//! Tern driver does by default after it sent: awake for its answer wait
//! ([`DriverConfig::answer_wait`]), giving its CPU away between polls, then
//! parked. With busy polling there are no wake-ups to pay: [`run_spinning`]
//! is the same echo on two threads that never park.

use std::io;
use std::net::{SocketAddr, UdpSocket as StdUdpSocket};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tern_peer::driver::DriverConfig;
use tokio::net::UdpSocket;

use super::{REQUEST_LEN, nanos};
use crate::sockio_matrix::runtime;

/// Round trips for `duration`, each recorded (ns) in `latencies`; returns
/// how many and in how long.
pub(super) fn run(
    duration: Duration,
    latencies: &mut Histogram<u64>,
) -> io::Result<(u64, Duration)> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let echo = std::thread::spawn(move || -> io::Result<()> {
        runtime()?.block_on(async {
            let (socket, raw) = bind(loopback)?;
            let _ = addr_tx.send(socket.local_addr());
            let mut buf = [0u8; 2048];
            loop {
                let (n, from) = match awake(|| raw.recv_from(&mut buf)) {
                    Some(received) => received?,
                    None => socket.recv_from(&mut buf).await?,
                };
                // An empty datagram ends the echo.
                if n == 0 {
                    return Ok(());
                }
                socket.send_to(&buf[..n], from).await?;
            }
        })
    });
    let server = addr_rx
        .recv()
        .map_err(|e| io::Error::other(e.to_string()))??;
    let result = runtime()?.block_on(async {
        let (socket, raw) = bind(loopback)?;
        socket.connect(server).await?;
        let request = [0xa5u8; REQUEST_LEN];
        let mut answer = [0u8; 2048];
        let start = Instant::now();
        let mut done = 0;
        while start.elapsed() < duration {
            let sent = Instant::now();
            socket.send(&request).await?;
            let n = match awake(|| raw.recv(&mut answer)) {
                Some(received) => received?,
                None => socket.recv(&mut answer).await?,
            };
            if n != REQUEST_LEN {
                return Err(io::Error::other("a short echo"));
            }
            latencies.saturating_record(nanos(sent.elapsed()));
            done += 1;
        }
        let elapsed = start.elapsed();
        socket.send(&[]).await?;
        Ok((done, elapsed))
    });
    echo.join()
        .map_err(|_| io::Error::other("the echo thread panicked"))??;
    result
}

/// A tokio socket bound to `addr`, and the same socket for receive
/// system calls made whatever the reactor last reported.
fn bind(addr: SocketAddr) -> io::Result<(UdpSocket, StdUdpSocket)> {
    let socket = StdUdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    let raw = socket.try_clone()?;
    Ok((UdpSocket::from_std(socket)?, raw))
}

/// Calls `io` until it answers something other than `WouldBlock`, for at
/// most a Tern driver's default answer wait, yielding the CPU between
/// calls; `None` once the wait is over.
fn awake<T>(mut io: impl FnMut() -> io::Result<T>) -> Option<io::Result<T>> {
    let until = Instant::now() + DriverConfig::default().answer_wait_time();
    while Instant::now() < until {
        match io() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            other => return Some(other),
        }
    }
    None
}

/// The echo of [`run`] on two threads that spin on non-blocking sockets
/// instead of parking: the ceiling of a transport that busy-polls. The echo
/// runs on the busy-polling workloads' server CPU, the caller is expected on
/// their client CPU.
pub(super) fn run_spinning(
    duration: Duration,
    latencies: &mut Histogram<u64>,
) -> io::Result<(u64, Duration)> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = StdUdpSocket::bind(loopback)?;
    let client = StdUdpSocket::bind(loopback)?;
    for socket in [&server, &client] {
        socket.set_nonblocking(true)?;
    }
    client.connect(server.local_addr()?)?;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        let _pinned = crate::affinity::pin_current_thread(super::busy_poll::SERVER_CPU)?;
        let mut buf = [0u8; 2048];
        loop {
            let (n, from) = spin(|| server.recv_from(&mut buf))?;
            // An empty datagram ends the echo.
            if n == 0 {
                return Ok(());
            }
            server.send_to(&buf[..n], from)?;
        }
    });
    let request = [0xa5u8; REQUEST_LEN];
    let mut answer = [0u8; 2048];
    let mut round_trips = || -> io::Result<(u64, Duration)> {
        let start = Instant::now();
        let mut done = 0;
        while start.elapsed() < duration {
            let sent = Instant::now();
            client.send(&request)?;
            // The echo thread ends early only on an error: stop waiting then.
            let echoed = spin(|| match client.recv(&mut answer) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && echo.is_finished() => {
                    Err(io::Error::other("the echo thread stopped"))
                }
                other => other,
            })?;
            if echoed != REQUEST_LEN {
                return Err(io::Error::other("a short echo"));
            }
            latencies.saturating_record(nanos(sent.elapsed()));
            done += 1;
        }
        Ok((done, start.elapsed()))
    };
    let result = round_trips();
    // Ends the echo whatever happened above (a refused send: it has
    // already stopped).
    let _ = client.send(&[]);
    echo.join()
        .map_err(|_| io::Error::other("the echo thread panicked"))??;
    result
}

/// Calls `io` until it does not answer `WouldBlock`.
fn spin<T>(mut io: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match io() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            other => return other,
        }
    }
}
