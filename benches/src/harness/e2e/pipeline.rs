//! The raw pipeline: what one connection could move if the protocol cost
//! nothing. A sender thread seals full datagrams (one Stream frame each,
//! with tern-wire's sealer and the default AEAD of this build) into a
//! batch and sends it with tern-sockio (the backend Auto picks, GSO runs as
//! the driver makes them); a receiver thread receives and opens each
//! datagram in place and counts the stream bytes. No ACKs, no loss
//! recovery, no flow or congestion control, no streams: the ceiling the
//! bulk workload is measured against.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand_core::OsRng;
use tern_sockio::{Capabilities, SocketConfig, Transmit, UdpSocket};
use tern_wire::{Frame, KeyConfig, PacketSealer, Stream};

use super::PAYLOAD;
use crate::sockio_matrix::{IDLE, RECV_SLOTS, gso_segments, receiver_done, runtime};

const INDEX: u32 = 7;
/// Datagrams sealed and sent per batch: what the driver gathers per turn.
const BATCH: usize = 256;

/// The most stream bytes one sealed datagram of `PAYLOAD` bytes carries.
fn stream_capacity(sealer: &mut PacketSealer) -> usize {
    let mut buf = [0u8; PAYLOAD];
    let data = [0u8; PAYLOAD];
    (1..PAYLOAD)
        .rev()
        .find(|&n| {
            let Ok(mut packet) = sealer.start(&mut buf) else {
                return false;
            };
            let stream = Frame::Stream(Stream {
                id: 0,
                offset: 1 << 30,
                fin: false,
                data: &data[..n],
            });
            packet.push(&stream).is_ok()
        })
        .unwrap_or(0)
}

/// One sample: stream bytes delivered per second.
pub(super) fn run(duration: Duration) -> io::Result<f64> {
    let backend = Capabilities::get().best();
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let barrier = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let (mut sealer, mut opener) =
        PacketSealer::with_opener(&mut OsRng, INDEX, KeyConfig::default());
    let receiver = {
        let (barrier, done) = (Arc::clone(&barrier), Arc::clone(&done));
        std::thread::spawn(move || -> io::Result<(u64, Duration)> {
            runtime()?.block_on(async {
                let mut config = SocketConfig::default();
                config.backend = Some(backend);
                config.batch_size = RECV_SLOTS;
                config.max_datagram_size = PAYLOAD;
                let bound = UdpSocket::bind(loopback, config);
                let _ = addr_tx.send(match &bound {
                    Ok(rx) => rx.local_addr()?,
                    Err(_) => loopback,
                });
                barrier.wait();
                let mut rx = bound?;
                let mut bufs = rx.new_recv_buffers();
                let start = Instant::now();
                let mut last = start;
                let mut bytes = 0u64;
                loop {
                    let received = match rx.try_recv(&mut bufs) {
                        Ok(_) => true,
                        Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                        Err(_) => match tokio::time::timeout(IDLE, rx.recv(&mut bufs)).await {
                            Ok(result) => result.map(|_| true)?,
                            Err(_) if receiver_done(&done, start) => break,
                            Err(_) => false,
                        },
                    };
                    if !received {
                        continue;
                    }
                    last = Instant::now();
                    for (_, datagram) in bufs.datagrams_mut() {
                        let Ok(opened) = opener.open(datagram) else {
                            continue;
                        };
                        for frame in opened.frames() {
                            if let Ok(Frame::Stream(s)) = frame {
                                bytes += s.data.len() as u64;
                            }
                        }
                    }
                }
                Ok((bytes, last - start))
            })
        })
    };
    let to = addr_rx
        .recv()
        .map_err(|_| io::Error::other("receiver did not start"))?;
    let sent = runtime().and_then(|rt| {
        rt.block_on(async {
            let mut config = SocketConfig::default();
            config.backend = Some(backend);
            config.batch_size = BATCH;
            let bound = UdpSocket::bind(loopback, config);
            barrier.wait();
            let mut tx = bound?;
            // Offsets from 2^30 on all take the same eight-byte varint.
            let mut offset = 1u64 << 30;
            // Seals one packet of `data` into `slot`: its length.
            let seal = |sealer: &mut PacketSealer, slot: &mut [u8], offset: u64, data: &[u8]| {
                let mut packet = sealer.start(slot).map_err(io::Error::other)?;
                packet
                    .push(&Frame::Stream(Stream {
                        id: 0,
                        offset,
                        fin: false,
                        data,
                    }))
                    .map_err(io::Error::other)?;
                let (len, number) = packet.finish().map_err(io::Error::other)?;
                // As if the peer acknowledged everything a batch ago.
                sealer.on_ack(number.saturating_sub(BATCH as u64));
                io::Result::Ok(len)
            };
            // Warm up until packet numbers have their steady-state length,
            // then fill the datagram: every datagram of a batch is then the
            // same size, as GSO needs.
            let mut scratch = [0u8; PAYLOAD];
            for _ in 0..2 * BATCH {
                seal(&mut sealer, &mut scratch, offset, &[0x5a; 100])?;
                offset += 100;
            }
            let capacity = stream_capacity(&mut sealer);
            let data = vec![0x5a_u8; capacity];
            let len = seal(&mut sealer, &mut scratch, offset, &data)?;
            offset += capacity as u64;
            // Each packet is sealed at its place in the batch; the sealer
            // wants a little room past a packet's end while it writes, which
            // the next packet then overwrites.
            const SLACK: usize = 16;
            let mut buf = vec![0u8; len * BATCH + SLACK];
            let per_transmit = tx.max_transmit_segments().min(gso_segments(PAYLOAD));
            let end = Instant::now() + duration;
            while Instant::now() < end {
                for at in (0..BATCH).map(|i| i * len) {
                    let written = seal(&mut sealer, &mut buf[at..at + len + SLACK], offset, &data)?;
                    if written != len {
                        return Err(io::Error::other("a packet changed size"));
                    }
                    offset += capacity as u64;
                }
                let transmits: Vec<Transmit<'_>> = buf[..len * BATCH]
                    .chunks(len * per_transmit)
                    .map(|c| Transmit::new(to, c).with_segment_size(len))
                    .collect();
                tx.send_all(&transmits).await?;
            }
            Ok::<_, io::Error>(())
        })
    });
    done.store(true, Ordering::Release);
    let (bytes, elapsed) = receiver
        .join()
        .map_err(|_| io::Error::other("receiver thread panicked"))??;
    sent?;
    Ok(bytes as f64 / elapsed.as_secs_f64().max(1e-9))
}
