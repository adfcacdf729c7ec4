//! A rate-limited connection sends no more than its token bucket holds,
//! however many datagrams one transmit may carry: a run of datagrams stops
//! where the tokens do, rather than going out whole on one datagram's
//! tokens and leaving the connection silent while the debt is repaid.

mod support;

use std::time::Duration;

use support::{Pair, StreamTransfer};
use tern_proto::{EndpointConfig, Node, TransmitLimits};
use tern_sim::LinkConfig;

/// 100 kB/s: the bucket, not the congestion window, bounds the sender.
const RATE: u64 = 100_000;

#[test]
fn a_batch_takes_no_more_than_the_tokens_the_bucket_holds() {
    let mut client_config = EndpointConfig::default();
    client_config.connection.rate_limit = Some(RATE);
    let link = LinkConfig {
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let mut pair = Pair::with_configs(11, link, client_config, EndpointConfig::default());
    let mut transfer = StreamTransfer::start(&mut pair, Duration::from_secs(10));
    // A second of sending at the cap: the window opens, the bucket is spent.
    let start = pair.sim.elapsed();
    while pair.sim.elapsed() < start + Duration::from_secs(1) {
        transfer.turn(&mut pair);
        assert!(pair.sim.step(), "the transfer went quiet");
    }
    let limits = TransmitLimits::new(64, 1452);
    let mut datagram = vec![0u8; 64 * 1452];
    let now = pair.sim.now();
    let endpoint = pair.client();
    let _ = endpoint.poll_timeout();
    endpoint.handle_timeout(now);
    while endpoint.poll_transmit(now, limits, &mut datagram).is_some() {}
    // 30 ms later the bucket holds 3 000 bytes: that much may go, and the
    // datagram that crosses it.
    let later = now + Duration::from_millis(30);
    let _ = endpoint.poll_timeout();
    endpoint.handle_timeout(later);
    let mut sent = 0;
    while let Some(transmit) = endpoint.poll_transmit(later, limits, &mut datagram) {
        sent += transmit.len;
    }
    assert!(sent > 0, "nothing went once tokens were back");
    assert!(
        sent <= 3_000 + 1_452,
        "{sent} bytes on 3 000 bytes of tokens"
    );
}
