//! One message at a time, each answered with 64 bytes (the benchmarks'
//! `message_<N>k` rows): what crosses the wire per message once the
//! connection has settled, counted turn by turn. A turn here is what a
//! driver does when datagrams come in or the application acts: hand the
//! node everything received, let the application tasks that woke take what
//! arrived (as tern-peer's driver does when `Node::wake_receivers` says it
//! woke some), then send everything it has.
//!
//! The two endpoints are wired to each other directly with a mock clock
//! that moves 20 µs per hop (a loopback round trip): every count here is
//! deterministic.

mod support;

use std::time::Duration;

use support::direct::{DirectPair, Run};
use support::message;
use tern_proto::{ConnectionHandle, Node};

/// Messages exchanged before counting: for its first 32 answers the
/// client repeats a flow-control update with its ACK, each a datagram of
/// its own (see `LIMIT_REPEATS` in the connection's send path).
const SETTLE: u32 = 60;

/// What went out in one turn: the datagram sizes, and the sends (GSO runs).
#[derive(Debug, Default, PartialEq, Eq)]
struct Turn {
    datagrams: Vec<usize>,
    runs: usize,
}

impl Turn {
    fn add(&mut self, run: Run) {
        self.datagrams.extend(run.datagram_lens());
        self.runs += 1;
    }

    /// Whether every datagram was too small to carry data: ACKs, or
    /// control frames alone.
    fn carries_no_data(&self) -> bool {
        self.datagrams.iter().all(|&len| len < 64)
    }
}

/// What crossed the wire for one message and its answer.
#[derive(Debug)]
struct Counts {
    /// The client's turn that sends the message.
    message: Turn,
    /// When, after that turn, the client expects the message acknowledged
    /// (`Node::take_answer_expected`), from the turn's time.
    answer_expected_in: Option<Duration>,
    /// The same, if the message opened an exchange
    /// (`Node::take_exchange_opened`): nothing was in flight before it.
    exchange_opened_in: Option<Duration>,
    /// The server's turn that receives it: what it sends once its
    /// application has taken the message and answered.
    server_answers: Turn,
    /// The client's turn that receives the answer.
    client_receives: Turn,
    /// Answers the client's application took after that turn.
    answers: usize,
}

/// A client and a server wired directly, one connection between them.
struct Exchange {
    pair: DirectPair,
    handle: ConnectionHandle,
    accepted: Option<ConnectionHandle>,
    sent: u32,
}

impl Exchange {
    fn connected() -> Self {
        let mut pair = DirectPair::new(28);
        let handle = pair.connect();
        let mut exchange = Self {
            pair,
            handle,
            accepted: None,
            sent: 0,
        };
        for _ in 0..5 {
            exchange.client_turn();
            exchange.hop();
            exchange.server_turn();
            exchange.hop();
        }
        exchange
    }

    fn hop(&mut self) {
        self.pair.mock.increment(Duration::from_micros(20));
    }

    /// The client's timers if due, then everything it has to send.
    fn client_turn(&mut self) -> Turn {
        self.pair.client_timer();
        let mut turn = Turn::default();
        self.pair.client_sends(|run| turn.add(run));
        turn
    }

    /// The server's timers if due, then everything it has to send.
    fn server_turn(&mut self) -> Turn {
        self.pair.server_timer();
        let mut turn = Turn::default();
        self.pair.server_sends(|run| turn.add(run));
        turn
    }

    /// The server's application: answers every message with its first 64
    /// bytes.
    fn server_answers(&mut self) {
        while self.pair.server.poll_event().is_some() {}
        if let Some(handle) = self.pair.server.accept() {
            self.accepted = Some(handle);
        }
        let Some(handle) = self.accepted else {
            return;
        };
        let connection = self.pair.server.connection(handle).expect("accepted");
        while let Some(message) = connection.recv_message() {
            let head = message.slice(..message.len().min(64));
            connection.send_message(head).expect("answer");
        }
    }

    /// One message of `len` bytes and its answer, hop by hop.
    fn round_trip(&mut self, len: usize) -> Counts {
        self.sent += 1;
        self.pair
            .client
            .connection(self.handle)
            .expect("connected")
            .send_message(message(self.sent, len))
            .expect("send");
        let message = self.client_turn();
        let now = self.pair.clock.now();
        let client = &mut self.pair.client;
        let answer_expected_in =
            Node::take_answer_expected(client).map(|at| at.saturating_duration_since(now));
        let exchange_opened_in =
            Node::take_exchange_opened(client).map(|at| at.saturating_duration_since(now));
        self.hop();
        self.pair.server_timer();
        self.server_answers();
        let server_answers = self.server_turn();
        self.hop();
        let client_receives = self.client_turn();
        while self.pair.client.poll_event().is_some() {}
        let connection = self.pair.client.connection(self.handle).expect("connected");
        let mut answers = 0;
        while connection.recv_message().is_some() {
            answers += 1;
        }
        self.hop();
        Counts {
            message,
            answer_expected_in,
            exchange_opened_in,
            server_answers,
            client_receives,
            answers,
        }
    }
}

#[test]
fn a_32_kib_message_costs_one_run_out_and_one_datagram_back() {
    let mut exchange = Exchange::connected();
    for _ in 0..SETTLE {
        exchange.round_trip(32 * 1024);
    }
    for _ in 0..50 {
        let counts = exchange.round_trip(32 * 1024);
        // The message: one GSO run of 24 datagrams.
        assert_eq!(counts.message.runs, 1, "{counts:?}");
        assert_eq!(counts.message.datagrams.len(), 24, "{counts:?}");
        // Its 24 packets make an ACK due at once, but the application
        // answers first: the ACK rides on the answer, one datagram.
        assert_eq!(counts.server_answers.datagrams.len(), 1, "{counts:?}");
        assert!(!counts.server_answers.carries_no_data(), "{counts:?}");
        // The client takes the answer in the turn it arrives, and sends
        // nothing: its ACK rides on the next message.
        assert_eq!(counts.answers, 1, "{counts:?}");
        assert_eq!(counts.client_receives, Turn::default(), "{counts:?}");
        // The ACK is expected a smoothed round trip after the message left
        // (on this wire some tens of microseconds: a driver waits for it
        // awake), and taking that leaves nothing expected.
        let expected = counts.answer_expected_in.expect("an answer is expected");
        assert!(
            (Duration::from_micros(10)..=Duration::from_micros(60)).contains(&expected),
            "{counts:?}"
        );
        assert_eq!(Node::take_answer_expected(&mut exchange.pair.client), None);
        // The answer acknowledged the message before: nothing was in
        // flight, so the message opened an exchange.
        assert_eq!(counts.exchange_opened_in, Some(expected), "{counts:?}");
    }
}

#[test]
fn a_message_sent_behind_one_in_flight_opens_no_exchange() {
    let mut exchange = Exchange::connected();
    for _ in 0..SETTLE {
        exchange.round_trip(1024);
    }
    // Two messages, the second sent before the first is answered: its
    // packet follows one in flight, as a transfer's next packets do.
    for turn in 0..2 {
        exchange.sent += 1;
        let message = message(exchange.sent, 1024);
        let connection = exchange.pair.client.connection(exchange.handle);
        connection
            .expect("connected")
            .send_message(message)
            .expect("send");
        exchange.client_turn();
        let client = &mut exchange.pair.client;
        let expected = Node::take_answer_expected(client);
        let opened = Node::take_exchange_opened(client);
        assert!(expected.is_some(), "message {turn}");
        assert_eq!(opened, expected.filter(|_| turn == 0), "message {turn}");
        exchange.hop();
    }
}

#[test]
fn a_flow_control_update_sent_from_quiet_opens_no_exchange() {
    let mut exchange = Exchange::connected();
    let mut updates = 0;
    for _ in 0..SETTLE {
        let counts = exchange.round_trip(1024);
        // The answer acknowledged the message: nothing is in flight when
        // the client's turn that takes it sends its flow-control update
        // (see `SETTLE`). The update asks for an acknowledgement, but it
        // carries no data, so it opens no exchange.
        let client = &mut exchange.pair.client;
        let expected = Node::take_answer_expected(client);
        let opened = Node::take_exchange_opened(client);
        assert_eq!(opened, None, "{counts:?}");
        if counts.client_receives != Turn::default() {
            assert!(counts.client_receives.carries_no_data(), "{counts:?}");
            assert!(expected.is_some(), "{counts:?}");
            updates += 1;
        }
    }
    assert!(updates >= 16, "{updates} updates from quiet");
}

#[test]
fn a_1_kib_message_costs_one_datagram_each_way() {
    let mut exchange = Exchange::connected();
    for _ in 0..SETTLE {
        exchange.round_trip(1024);
    }
    for _ in 0..100 {
        let counts = exchange.round_trip(1024);
        assert_eq!(counts.message.datagrams.len(), 1, "{counts:?}");
        assert_eq!(counts.server_answers.datagrams.len(), 1, "{counts:?}");
        assert_eq!(counts.answers, 1, "{counts:?}");
        assert_eq!(counts.client_receives, Turn::default(), "{counts:?}");
    }
}
