//! Level 1: the stream data plane without a network — what a connection's
//! streams cost per byte: 1 MiB written in 64 KiB writes, cut into
//! 1400-byte chunks, reassembled, read out and acknowledged (two copies:
//! in and out); and per message: 64-byte and 1 KiB messages sent, received
//! once and acknowledged; and a message lost while many wait behind it.

#![forbid(unsafe_code)]

use bytes::Bytes;
use divan::counter::{BytesCount, ItemsCount};
use divan::{Bencher, black_box};
use tern_proto::internals::{MessageReceiver, MessageSender, PagePool, RecvStream, SendStream};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const MIB: usize = 1 << 20;
const WRITE: usize = 64 * 1024;
const CHUNK: usize = 1400;

/// One MiB through a send half and a receive half; the buffers are warm
/// (reused across iterations), so steady state allocates nothing.
#[divan::bench]
fn stream_1mib(bencher: Bencher) {
    let data = vec![0x5a_u8; WRITE];
    let mut out = vec![0u8; WRITE];
    let mut tx = SendStream::new(4 * MIB);
    let mut rx = RecvStream::new(u64::MAX);
    let mut pool = PagePool::new(4 * MIB as u64);
    bencher.counter(BytesCount::new(MIB)).bench_local(|| {
        let mut written = 0;
        while written < MIB {
            written += tx.write(&data[..WRITE.min(MIB - written)]);
            while let Some(chunk) = tx.poll_chunk(CHUNK, u64::MAX, false) {
                let (offset, len) = (chunk.offset, chunk.data.len() as u64);
                let _ = rx.insert(&mut pool, offset, chunk.data, false);
                tx.on_acked(offset, len, false);
            }
            while rx.read(&mut pool, &mut out) > 0 {}
        }
        black_box(rx.read_offset())
    });
}

fn messages(bencher: Bencher, size: usize) {
    let message = Bytes::from(vec![7u8; size]);
    let mut tx = MessageSender::new();
    let mut rx = MessageReceiver::new();
    bencher.counter(ItemsCount::new(1u32)).bench_local(|| {
        tx.push(message.clone());
        let (id, len) = tx
            .poll(|_, _| true)
            .map(|(id, m)| (id, black_box(m).len()))
            .expect("queued");
        let fresh = rx.on_message(id).unwrap_or(false);
        tx.on_acked(id);
        black_box((fresh, len))
    });
}

/// A 64-byte message sent, delivered once and acknowledged.
#[divan::bench]
fn message_64b(bencher: Bencher) {
    messages(bencher, 64);
}

/// A 1 KiB message sent, delivered once and acknowledged.
#[divan::bench]
fn message_1kib(bencher: Bencher) {
    messages(bencher, 1024);
}

/// A message lost while `depth` others wait to be sent (a peer that
/// acknowledges little, or a window that is full): it goes back first in
/// line and out again. Its cost should not grow with the queue behind it.
#[divan::bench(args = [1_000, 200_000])]
fn message_lost_in_queue(bencher: Bencher, depth: usize) {
    let message = Bytes::from(vec![7u8; 64]);
    let mut tx = MessageSender::new();
    for _ in 0..depth {
        tx.push(message.clone());
    }
    bencher.counter(ItemsCount::new(1u32)).bench_local(|| {
        let id = tx.poll(|_, _| true).map(|(id, _)| id).expect("queued");
        tx.on_lost(black_box(id));
    });
}
