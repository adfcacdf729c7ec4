use super::*;

#[test]
fn socket_addresses_survive_the_c_round_trip() {
    let mut storage = unsafe { std::mem::zeroed() };
    for addr in ["127.0.0.1:4433", "[::1]:9", "[fe80::1%3]:80"] {
        let addr: SocketAddr = addr.parse().expect("address");
        let len = encode_addr(addr, addr.is_ipv6(), &mut storage);
        assert_eq!(decode_addr(&storage, len), Some(addr));
    }
    let v4: SocketAddr = "10.0.0.1:53".parse().expect("address");
    let len = encode_addr(v4, true, &mut storage);
    assert_eq!(
        decode_addr(&storage, len),
        Some("[::ffff:10.0.0.1]:53".parse().expect("address"))
    );
}

/// Receive header 0 as the kernel would leave it: `len` bytes arrived
/// with one `SOL_UDP`/`UDP_GRO` control message of `data_len` bytes
/// holding `stride`.
fn gro_message(scratch: &mut MsgScratch, slot: &mut [u8], stride: i32, data_len: u32) {
    scratch.fill_recv(0, slot);
    let msg = &mut scratch.hdrs[0].msg_hdr;
    // SAFETY: msg_control points at CONTROL_LEN bytes aligned for cmsghdr,
    // room for one header and an int; the length is set before reading it.
    unsafe {
        msg.msg_controllen = cmsg_space(size_of::<libc::c_int>());
        let cmsg = libc::CMSG_FIRSTHDR(msg);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_GRO;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
        ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), stride);
    }
}

#[test]
fn a_hostile_gro_stride_never_splits_past_the_message() {
    let counters = Counters::default();
    let mut scratch = MsgScratch::new(1, false);
    let mut slot = [0u8; 64];
    let four = size_of::<libc::c_int>() as u32;
    // (stride the kernel wrote, bytes of cmsg data) -> stride used for 50 bytes
    for (stride, data_len, expected) in [
        (20, four, 20),
        (0, four, 50),
        (-5, four, 50),
        (10_000, four, 50),
        (20, 2, 50),
    ] {
        gro_message(&mut scratch, &mut slot, stride, data_len);
        let meta = scratch.parse_recv(0, 50, &counters);
        assert_eq!(meta.stride, expected, "stride {stride}, data {data_len}");
        assert!((1..=50).contains(&meta.datagrams()));
    }
}

#[test]
fn no_pointer_into_a_callers_buffer_outlives_the_call() {
    use std::os::fd::AsRawFd;
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    rx.set_nonblocking(true).expect("non-blocking");
    let to = rx.local_addr().expect("address");
    let counters = Counters::default();
    let mut refusals = Refusals::with_capacity(4);
    let mut scratch = MsgScratch::new(4, false);
    let stale = |scratch: &MsgScratch| scratch.iovs.iter().any(|iov| !iov.iov_base.is_null());

    let contents = [[7u8; 100], [8; 100]];
    let batch: Vec<Transmit<'_>> = contents.iter().map(|c| Transmit::new(to, c)).collect();
    let mut cursor = Cursor::default();
    send_batch(
        tx.as_raw_fd(),
        &mut scratch,
        &batch,
        &mut cursor,
        1,
        &counters,
        &mut refusals,
    )
    .expect("send");
    assert_eq!(cursor.transmit, 2);
    assert!(!stale(&scratch));

    let mut bufs = RecvBuffers::new(4, 200);
    let mut received = 0;
    // Bounded: 2 s at most for two loopback datagrams.
    for _ in 0..2000 {
        match recv_batch(rx.as_raw_fd(), &mut scratch, &mut bufs, &counters) {
            Ok(n) => received += n,
            Err(Stop::WouldBlock) => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(other) => panic!("receive: {other:?}"),
        }
        assert!(!stale(&scratch));
        if received == 2 {
            break;
        }
    }
    assert_eq!(received, 2);
}

#[test]
fn a_short_or_foreign_sender_address_is_no_address() {
    let mut storage = unsafe { std::mem::zeroed() };
    let v6: SocketAddr = "[::1]:9".parse().expect("address");
    let len = encode_addr(v6, true, &mut storage);
    // A stale IPv6 address in the storage is not read past a short length.
    assert_eq!(decode_addr(&storage, 0), None);
    assert_eq!(decode_addr(&storage, len - 1), None);
    storage.ss_family = libc::AF_UNIX as libc::sa_family_t;
    assert_eq!(decode_addr(&storage, len), None);
}

#[test]
fn gso_refusals_downgrade_while_destination_errors_only_skip() {
    assert_eq!(classify_send(libc::EIO, true), SendErrno::GsoRefused);
    assert_eq!(classify_send(libc::EINVAL, true), SendErrno::GsoRefused);
    assert_eq!(
        classify_send(libc::ECONNREFUSED, true),
        SendErrno::Skip(RefusalReason::Unreachable)
    );
    assert_eq!(
        classify_send(libc::EINVAL, false),
        SendErrno::Skip(RefusalReason::InvalidDestination)
    );
    assert_eq!(
        classify_send(libc::EMSGSIZE, true),
        SendErrno::Skip(RefusalReason::TooLarge)
    );
    assert_eq!(classify_send(libc::EAGAIN, false), SendErrno::WouldBlock);
    assert_eq!(classify_send(libc::ENOSYS, false), SendErrno::Unsupported);
    assert_eq!(classify_send(libc::EBADF, false), SendErrno::Fail);
}
