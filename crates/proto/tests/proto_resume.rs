//! Resumption (wire format §6.6) between two endpoints, datagram by
//! datagram: a ticket from the first connect makes the next one a resumed
//! intro with no asymmetric work; a replayed, expired, forged or mutated
//! ticket is refused (never a panic), and a restarted responder refuses old
//! tickets while its initiator falls back to a full intro.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use proptest::prelude::*;
use quanta::{Clock, Instant, Mock};
use std::sync::Arc;
use support::{identity, other_x25519_identity, seed_bytes, wall_start, x25519_identity};
use tern_proto::{ConnectionHandle, Endpoint, EndpointConfig, Event, Node, TransmitLimits};
use tern_wire::{IdentityKey, PacketType, TicketPolicy};

fn client_addr() -> SocketAddr {
    "10.0.0.1:4000".parse().expect("address")
}

fn server_addr() -> SocketAddr {
    "10.0.0.2:5000".parse().expect("address")
}

struct Two {
    clock: Clock,
    mock: Arc<Mock>,
    client: Endpoint,
    server: Endpoint,
    key: IdentityKey,
    /// Every datagram the client sent, in order.
    sent: Vec<Vec<u8>>,
    /// The server's connections, as accepted.
    accepted: Vec<ConnectionHandle>,
}

impl Two {
    fn new(key: IdentityKey, client_key: Option<IdentityKey>, server: EndpointConfig) -> Self {
        let (clock, mock) = Clock::mock();
        let now = clock.now();
        let client = Endpoint::new(
            EndpointConfig::default(),
            client_key,
            seed_bytes(11, 1),
            now,
            wall_start(),
        )
        .expect("config");
        let server = Self::server(&key, server, 0, now);
        Self {
            clock,
            mock,
            client,
            server,
            key,
            sent: Vec::new(),
            accepted: Vec::new(),
        }
    }

    fn server(key: &IdentityKey, config: EndpointConfig, salt: u64, now: Instant) -> Endpoint {
        Endpoint::new(
            config,
            Some(key.clone()),
            seed_bytes(11, 2 + salt),
            now,
            wall_start(),
        )
        .expect("config")
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Delivers every datagram either side has to send, and fires due
    /// timers, until both are quiet for 50 ms of mock time.
    fn settle(&mut self) {
        let mut buf = vec![0u8; 2048];
        let limits = TransmitLimits::new(1, 1452);
        for _ in 0..200 {
            let now = self.now();
            self.client.handle_timeout(now);
            self.server.handle_timeout(now);
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit(now, limits, &mut buf) {
                self.sent.push(buf[..t.len].to_vec());
                self.server
                    .handle_datagram(now, server_addr(), client_addr(), &mut buf[..t.len]);
                moved = true;
            }
            while let Some(t) = self.server.poll_transmit(now, limits, &mut buf) {
                self.client
                    .handle_datagram(now, client_addr(), server_addr(), &mut buf[..t.len]);
                moved = true;
            }
            if !moved {
                self.mock.increment(Duration::from_millis(5));
            }
        }
    }

    /// Connects and waits for both sides; returns the client's handle.
    fn connect(&mut self) -> ConnectionHandle {
        let now = self.now();
        let handle = self
            .client
            .connect(now, server_addr(), &self.key.public())
            .expect("connect");
        self.settle();
        let mut connected = false;
        while let Some((h, event)) = self.client.poll_event() {
            connected |= h == handle && event == Event::Connected;
        }
        assert!(connected, "the client connected");
        let accepted = self.server.accept().expect("the server accepted");
        self.accepted.push(accepted);
        while self.server.poll_event().is_some() {}
        handle
    }

    /// The client's last intro of any kind.
    fn last_intro(&self, kind: PacketType) -> Vec<u8> {
        self.sent
            .iter()
            .rev()
            .find(|d| d[0] == kind as u8)
            .expect("an intro of that kind")
            .clone()
    }

    /// Hands `datagram` to the server as if from the client, and returns
    /// what the server answers right away.
    fn inject(&mut self, datagram: &[u8]) -> Vec<Vec<u8>> {
        let now = self.now();
        let mut bytes = datagram.to_vec();
        self.server
            .handle_datagram(now, server_addr(), client_addr(), &mut bytes);
        let mut buf = vec![0u8; 2048];
        let mut out = Vec::new();
        while let Some(t) = self
            .server
            .poll_transmit(now, TransmitLimits::new(1, 1452), &mut buf)
        {
            out.push(buf[..t.len].to_vec());
        }
        out
    }
}

#[test]
fn a_second_connect_resumes_without_an_asymmetric_operation() {
    for (key, client_key) in [
        (x25519_identity(), None),
        (x25519_identity(), Some(other_x25519_identity())),
        (identity(), None),
    ] {
        let mut two = Two::new(key, client_key.clone(), EndpointConfig::default());
        two.connect();
        assert_eq!(two.server.stats().tickets_issued, 1);
        assert_eq!(two.client.stats().tickets_received, 1);
        let handle = two.connect();
        let (client, server) = (two.client.stats(), two.server.stats());
        assert_eq!(client.connects_resumed, 1);
        assert_eq!(server.resumptions_accepted, 1);
        assert_eq!(server.intros_decrypted, 1, "only the first intro");
        assert_eq!(two.last_intro(PacketType::IntroResume).len(), 257);
        // The resumed connection got a ticket of its own, for the next.
        assert_eq!(client.tickets_received, 2);
        // An X25519 client's identity carries over in the ticket.
        let server_handle = *two.accepted.last().expect("a connection");
        let accepted = two.server.connection(server_handle).expect("open");
        assert_eq!(
            accepted.peer_identity(),
            client_key.map(|k| k.public()).as_ref()
        );
        let connection = two.client.connection(handle).expect("open");
        assert_eq!(connection.peer_identity(), Some(&two.key.public()));
    }
}

#[test]
fn a_used_ticket_replayed_is_refused_and_its_sender_told() {
    let mut two = Two::new(x25519_identity(), None, EndpointConfig::default());
    two.connect();
    two.connect();
    let resumed = two.last_intro(PacketType::IntroResume);
    // The connection is confirmed: the replay is no repeat to answer with
    // the stored reply, and the ticket was spent.
    let answers = two.inject(&resumed);
    assert_eq!(answers.len(), 1);
    assert_eq!(
        tern_wire::parse_resume_refused(&answers[0]),
        Some(tern_wire::intro_id(&resumed))
    );
    let stats = two.server.stats();
    assert_eq!(stats.resumptions_refused, 1);
    assert_eq!(stats.resumptions_accepted, 1);
    assert_eq!(two.server.len(), 2, "no connection for the replay");
}

#[test]
fn an_expired_ticket_is_refused_and_the_connect_falls_back_to_a_full_intro() {
    let mut config = EndpointConfig::default();
    config.tickets = Some(TicketPolicy {
        lifetime: Duration::from_secs(3),
        ..TicketPolicy::default()
    });
    let mut two = Two::new(x25519_identity(), None, config);
    two.connect();
    let resumed_before = two.client.stats().connects_resumed;
    // Within its lifetime (the client's cache keeps it for the lifetime
    // less a second; `settle` let about a second pass) it resumes.
    two.mock.increment(Duration::from_millis(500));
    two.connect();
    assert_eq!(two.client.stats().connects_resumed, resumed_before + 1);
    assert_eq!(two.server.stats().resumptions_accepted, 1);
    // Well past the lifetime the client keeps nothing and connects in full.
    two.mock.increment(Duration::from_secs(10));
    two.connect();
    assert_eq!(two.client.stats().connects_resumed, resumed_before + 1);
    assert_eq!(two.server.stats().intros_decrypted, 2);
    // A server-side expiry: the resumed intro of the second connect, now
    // past the ticket's lifetime (and the intro's window), is refused.
    let old = two.last_intro(PacketType::IntroResume);
    let answers = two.inject(&old);
    assert_eq!(answers.len(), 1, "a ResumeRefused");
    assert_eq!(two.server.stats().resumptions_refused, 1);
}

#[test]
fn a_restarted_responder_refuses_old_tickets_and_the_initiator_falls_back() {
    let mut two = Two::new(x25519_identity(), None, EndpointConfig::default());
    two.connect();
    // The same identity, a new process: a new ticket key.
    let now = two.now();
    two.server = Two::server(&two.key, EndpointConfig::default(), 1, now);
    two.connect();
    let (client, server) = (two.client.stats(), two.server.stats());
    assert_eq!(client.connects_resumed, 1);
    assert_eq!(client.resume_fallbacks, 1);
    assert_eq!(server.resumptions_refused, 1);
    assert_eq!(server.intros_accepted, 1, "the full intro that followed");
    assert_eq!(server.tickets_issued, 1, "and a ticket under the new key");
}

#[test]
fn a_responder_without_tickets_refuses_resumption() {
    let mut config = EndpointConfig::default();
    config.tickets = None;
    let mut two = Two::new(x25519_identity(), None, EndpointConfig::default());
    two.connect();
    let now = two.now();
    two.server = Two::server(&two.key, config, 1, now);
    two.connect();
    assert_eq!(two.client.stats().resume_fallbacks, 1);
    assert_eq!(two.server.stats().tickets_issued, 0);
    assert_eq!(two.client.stats().tickets_received, 1, "only the first");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A resumed intro with any byte changed is dropped or refused, never
    /// a panic and never a connection; the genuine one still resumes.
    #[test]
    fn a_mutated_resumed_intro_is_refused(at in 0usize..257, flip in 1u8..=255) {
        let mut two = Two::new(x25519_identity(), None, EndpointConfig::default());
        two.connect();
        // Take the client's ticket by making the resumed intro, but hold
        // it back from the server.
        let now = two.now();
        let key = two.key.public();
        two.client.connect(now, server_addr(), &key).expect("connect");
        let mut buf = vec![0u8; 2048];
        let t = two.client.poll_transmit(now, TransmitLimits::new(1, 1452), &mut buf)
            .expect("the intro");
        let intro = buf[..t.len].to_vec();
        prop_assert_eq!(intro[0], PacketType::IntroResume as u8);
        let mut mutated = intro.clone();
        mutated[at] ^= flip;
        let held = two.server.len();
        two.inject(&mutated);
        prop_assert_eq!(two.server.len(), held);
        prop_assert_eq!(two.server.stats().resumptions_accepted, 0);
        two.inject(&intro);
        prop_assert_eq!(two.server.stats().resumptions_accepted, 1);
    }
}
