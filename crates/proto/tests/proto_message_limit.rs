//! Each side's largest message (`max_message_size`): a limit other than
//! the default is told to the peer, which then refuses to send a larger
//! message and keeps the connection; the announcement survives loss.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::{Pair, drive, exchange};
use tern_proto::{DEFAULT_MAX_MESSAGE_SIZE, EndpointConfig, SendError};
use tern_sim::{LinkConfig, Seed};

const SERVER_LIMIT: u64 = 64 << 10;
const CLIENT_LIMIT: u64 = 10_000;

fn with_limit(limit: u64) -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config.connection.max_message_size = limit;
    config
}

#[test]
fn each_side_learns_the_others_limit_over_a_lossy_path_and_a_larger_message_is_refused_not_fatal() {
    for value in 0..4 {
        let seed = Seed::from_env_or(140 + value);
        let lossy = LinkConfig {
            delay: Duration::from_millis(10),
            loss: 0.2,
            reorder: 0.05,
            ..LinkConfig::default()
        };
        let mut pair = Pair::with_configs(
            seed.value(),
            lossy,
            with_limit(CLIENT_LIMIT),
            with_limit(SERVER_LIMIT),
        );
        let (client, server) = exchange(&mut pair, &[100], Duration::from_secs(30));
        let (client_node, server_node) = (pair.client, pair.server);
        drive(&mut pair.sim, Duration::from_secs(60), |sim| {
            let client_knows = sim.node_mut(client_node).0.connection(client);
            let client_knows =
                client_knows.is_some_and(|c| c.peer_max_message_size() == SERVER_LIMIT);
            let server_knows = sim.node_mut(server_node).0.connection(server);
            let server_knows =
                server_knows.is_some_and(|c| c.peer_max_message_size() == CLIENT_LIMIT);
            client_knows && server_knows
        });

        let to_server = pair.client().connection(client).expect("open");
        let over = Bytes::from(vec![1; SERVER_LIMIT as usize + 1]);
        assert_eq!(
            to_server.send_message(over),
            Err(SendError::MessageTooLarge {
                size: SERVER_LIMIT + 1,
                limit: SERVER_LIMIT
            })
        );
        to_server
            .send_message(Bytes::from(vec![2; SERVER_LIMIT as usize]))
            .expect("a message at the limit is taken");
        let to_client = pair.server().connection(server).expect("open");
        let over = Bytes::from(vec![3; CLIENT_LIMIT as usize + 1]);
        assert!(matches!(
            to_client.send_message(over),
            Err(SendError::MessageTooLarge { .. })
        ));

        let mut arrived = None;
        drive(&mut pair.sim, Duration::from_secs(120), |sim| {
            let connection = sim.node_mut(server_node).0.connection(server);
            arrived = connection.expect("still open").recv_message();
            arrived.is_some()
        });
        assert_eq!(arrived.map(|m| m.len()), Some(SERVER_LIMIT as usize));
        assert!(
            pair.client()
                .connection(client)
                .is_some_and(|c| c.is_established())
        );
    }
}

#[test]
fn peers_with_the_default_limit_assume_it_of_each_other_and_announce_nothing() {
    let seed = Seed::from_env_or(145);
    let link = LinkConfig {
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    };
    let mut pair = Pair::new(seed.value(), link, EndpointConfig::default());
    let (client, server) = exchange(&mut pair, &[100, 70_000], Duration::from_secs(30));
    let client_side = pair.client().connection(client).expect("open");
    assert_eq!(
        client_side.peer_max_message_size(),
        DEFAULT_MAX_MESSAGE_SIZE
    );
    let server_side = pair.server().connection(server).expect("open");
    assert_eq!(
        server_side.peer_max_message_size(),
        DEFAULT_MAX_MESSAGE_SIZE
    );
}

#[test]
fn the_initiator_knows_the_responders_limit_when_it_connects() {
    let seed = Seed::from_env_or(150);
    let link = LinkConfig {
        delay: Duration::from_millis(10),
        ..LinkConfig::default()
    };
    let mut pair = Pair::with_configs(
        seed.value(),
        link,
        EndpointConfig::default(),
        with_limit(SERVER_LIMIT),
    );
    let now = pair.sim.now();
    let (server_addr, key) = (pair.server_addr, pair.server().public().expect("identity"));
    let client = pair
        .client()
        .connect(now, server_addr, &key)
        .expect("connect");
    let client_node = pair.client;
    let mut limit_at_connect = None;
    drive(&mut pair.sim, Duration::from_secs(5), |sim| {
        let endpoint = &mut sim.node_mut(client_node).0;
        while let Some((handle, event)) = endpoint.poll_event() {
            if handle == client && event == tern_proto::Event::Connected {
                limit_at_connect = endpoint
                    .connection(client)
                    .map(|c| c.peer_max_message_size());
            }
        }
        limit_at_connect.is_some()
    });
    // In the reply itself: before the initiator sent a single packet.
    assert_eq!(limit_at_connect, Some(SERVER_LIMIT));
}
