//! What the simulation tests share: identity keys made once, a
//! two-endpoint set-up in tern-sim, and transfers to drive over it.
#![allow(dead_code, unreachable_pub)]

pub mod attacker;
pub mod direct;
pub mod greedy;
pub mod matrix;
mod on_sim;
pub mod rendezvous;

pub use on_sim::OnSim;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use tern_proto::{
    Connection, ConnectionHandle, Endpoint, EndpointConfig, Event, ReadOutcome, SendError, StreamId,
};
use tern_sim::{LinkConfig, NodeId, Sim, SimConfig};
use tern_wire::{IdentityKey, PublicIdentity};

/// An RSA-2048 identity, generated once per test binary (about 250 ms)
/// from a fixed seed. The key must be the same in every run: the
/// responder's blinded RSA decryption draws from the endpoint's seeded RNG
/// a number of times that depends on the key, and every later draw (a
/// connection's skipped packet numbers among them) follows from it.
pub fn identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    seeded_identity(&DER, 1)
}

/// A second identity, for the wrong-key cases.
pub fn other_identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    seeded_identity(&DER, 2)
}

/// A third identity: a key nobody in a test holds but one side names.
pub fn third_identity() -> IdentityKey {
    static DER: OnceLock<Vec<u8>> = OnceLock::new();
    seeded_identity(&DER, 3)
}

/// An X25519 identity (cheap: made afresh from its seed each time).
pub fn x25519_identity() -> IdentityKey {
    IdentityKey::generate_x25519(&mut ChaCha20Rng::seed_from_u64(25519))
}

/// A second X25519 identity.
pub fn other_x25519_identity() -> IdentityKey {
    IdentityKey::generate_x25519(&mut ChaCha20Rng::seed_from_u64(25520))
}

/// The identity made from `seed`, generated once into `cell`.
fn seeded_identity(cell: &'static OnceLock<Vec<u8>>, seed: u64) -> IdentityKey {
    let der = cell.get_or_init(|| {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let key = IdentityKey::generate(&mut rng).expect("RSA key generation");
        key.to_pkcs8_der().expect("encodes").to_vec()
    });
    IdentityKey::from_pkcs8_der(der).expect("decodes")
}

/// The wall-clock time every simulated endpoint starts at: fixed, so runs
/// reproduce.
pub fn wall_start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

pub type EndpointSim = Sim<OnSim<Endpoint>>;

/// A client endpoint and a server endpoint (which has the identity) on one
/// simulated network.
pub struct Pair {
    pub sim: EndpointSim,
    pub client: NodeId,
    pub server: NodeId,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
}

impl Pair {
    pub fn new(seed: u64, link: LinkConfig, config: EndpointConfig) -> Self {
        Self::with_configs(seed, link, config, config)
    }

    pub fn with_configs(
        seed: u64,
        link: LinkConfig,
        client_config: EndpointConfig,
        server_config: EndpointConfig,
    ) -> Self {
        Self::build(seed, link, client_config, server_config, None)
    }

    /// Both endpoints accept connections (the client has an identity too).
    pub fn symmetric(seed: u64, link: LinkConfig) -> Self {
        let config = EndpointConfig::default();
        Self::build(seed, link, config, config, Some(other_identity()))
    }

    /// [`with_configs`](Self::with_configs), the client with an identity
    /// of its own ([`other_identity`]) to prove.
    pub fn with_client_identity(
        seed: u64,
        link: LinkConfig,
        client_config: EndpointConfig,
        server_config: EndpointConfig,
    ) -> Self {
        Self::build(
            seed,
            link,
            client_config,
            server_config,
            Some(other_identity()),
        )
    }

    fn build(
        seed: u64,
        link: LinkConfig,
        client_config: EndpointConfig,
        server_config: EndpointConfig,
        client_identity: Option<IdentityKey>,
    ) -> Self {
        Self::with_identities(
            seed,
            link,
            (client_config, client_identity),
            (server_config, identity()),
        )
    }

    /// Each side's configuration and identity: the server's key's kind
    /// decides the intro the client sends.
    pub fn with_identities(
        seed: u64,
        link: LinkConfig,
        (client_config, client_identity): (EndpointConfig, Option<IdentityKey>),
        (server_config, server_identity): (EndpointConfig, IdentityKey),
    ) -> Self {
        let mut sim = Sim::new(SimConfig::seeded(seed).with_default_link(link));
        let client_addr: SocketAddr = "10.0.0.1:4000".parse().expect("address");
        let server_addr: SocketAddr = "10.0.0.2:5000".parse().expect("address");
        let now = sim.now();
        let client_endpoint = Endpoint::new(
            client_config,
            client_identity,
            seed_bytes(seed, 1),
            now,
            wall_start(),
        )
        .expect("valid config");
        let server_endpoint = Endpoint::new(
            server_config,
            Some(server_identity),
            seed_bytes(seed, 2),
            now,
            wall_start(),
        )
        .expect("valid config");
        let client = sim
            .add_node(OnSim(client_endpoint), &[client_addr])
            .expect("address");
        let server = sim
            .add_node(OnSim(server_endpoint), &[server_addr])
            .expect("address");
        Self {
            sim,
            client,
            server,
            client_addr,
            server_addr,
        }
    }

    pub fn client(&mut self) -> &mut Endpoint {
        &mut self.sim.node_mut(self.client).0
    }

    pub fn server(&mut self) -> &mut Endpoint {
        &mut self.sim.node_mut(self.server).0
    }

    /// A simultaneous open of a [`symmetric`](Self::symmetric) pair: each
    /// side connects to the other, naming the other's key, at the same
    /// moment. Returns the client's connect and the server's.
    pub fn open_both_ways(&mut self) -> (ConnectionHandle, ConnectionHandle) {
        let now = self.sim.now();
        let (client_addr, server_addr) = (self.client_addr, self.server_addr);
        let server_key = self.server().public().expect("identity");
        let client_key = self.client().public().expect("identity");
        let a = self
            .client()
            .connect(now, server_addr, &server_key)
            .expect("connect");
        let b = self
            .server()
            .connect(now, client_addr, &client_key)
            .expect("connect");
        (a, b)
    }
}

/// A one-way stream transfer from the client to the server of a [`Pair`],
/// driven a turn at a time between steps of the sim.
pub struct StreamTransfer {
    pub client: ConnectionHandle,
    pub server: ConnectionHandle,
    pub stream: StreamId,
    chunk: Vec<u8>,
    buf: Vec<u8>,
}

impl StreamTransfer {
    /// Connects (a first exchange of messages, within `deadline`) and opens
    /// the stream on the client.
    pub fn start(pair: &mut Pair, deadline: Duration) -> Self {
        let (client, server) = exchange(pair, &[10], deadline);
        let stream = pair
            .client()
            .connection(client)
            .and_then(|c| c.open_stream())
            .expect("a stream");
        Self {
            client,
            server,
            stream,
            chunk: vec![0x5a; 64 * 1024],
            buf: vec![0; 64 * 1024],
        }
    }

    /// One turn: the client writes for as long as the stream takes bytes,
    /// the server accepts the stream and reads all that has arrived.
    /// Returns the bytes the server read.
    pub fn turn(&mut self, pair: &mut Pair) -> u64 {
        let connection = pair.client().connection(self.client).expect("open");
        while connection.writable(self.stream) > 0 {
            if connection.write(self.stream, &self.chunk).expect("open") == 0 {
                break;
            }
        }
        self.read(pair)
    }

    /// The server's half of a [`turn`](Self::turn): it accepts the stream
    /// and reads all that has arrived. Returns the bytes read.
    pub fn read(&mut self, pair: &mut Pair) -> u64 {
        let connection = pair.server().connection(self.server).expect("open");
        if let Some(id) = connection.accept_stream() {
            assert_eq!(id, self.stream, "the one stream the client opened");
        }
        let mut read = 0;
        while let Ok(ReadOutcome::Read(n)) = connection.read(self.stream, &mut self.buf) {
            if n == 0 {
                break;
            }
            read += n as u64;
        }
        read
    }
}

/// 32 seed bytes for an endpoint's RNG from the test's seed.
pub fn seed_bytes(seed: u64, salt: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&salt.to_le_bytes());
    bytes
}

/// Steps `sim` until `done` (which may act on the nodes, as an application
/// would) returns true; panics if `deadline` of virtual time passes or the
/// simulation runs out of events first.
pub fn drive<N: tern_sim::Node>(
    sim: &mut Sim<N>,
    deadline: Duration,
    mut done: impl FnMut(&mut Sim<N>) -> bool,
) {
    loop {
        if done(sim) {
            return;
        }
        assert!(
            sim.elapsed() <= deadline,
            "not done after {:?} of virtual time",
            sim.elapsed()
        );
        assert!(sim.step(), "the simulation went quiet before it was done");
    }
}

/// Connection `handle` of the endpoint at `node`, which must still hold it.
pub fn connection_at(
    sim: &mut EndpointSim,
    node: NodeId,
    handle: ConnectionHandle,
) -> &mut Connection {
    sim.node_mut(node)
        .0
        .connection(handle)
        .expect("the connection lives")
}

/// Message `id` of `len` bytes: its number in the first four bytes (when
/// there is room), then bytes that depend on both.
pub fn message(id: u32, len: usize) -> Bytes {
    let mut bytes: Vec<u8> = (0..len)
        .map(|k| (id as usize * 31 + k * 7 + (k >> 8)) as u8)
        .collect();
    let head = len.min(4);
    bytes[..head].copy_from_slice(&id.to_le_bytes()[..head]);
    Bytes::from(bytes)
}

/// The number of a message made by [`message`], checking every byte.
pub fn check(received: &[u8], ids_by_len: &HashMap<usize, u32>) -> u32 {
    let id = if received.len() >= 4 {
        u32::from_le_bytes(received[..4].try_into().expect("four bytes"))
    } else {
        ids_by_len[&received.len()]
    };
    assert_eq!(
        received,
        &message(id, received.len())[..],
        "message {id} corrupted"
    );
    id
}

/// The client connects, then both sides send `sizes` (as messages numbered
/// in order) and each checks it got every one of the other's, whole and once.
/// Returns the client's and the server's handles of the connection.
pub fn exchange(
    pair: &mut Pair,
    sizes: &[usize],
    deadline: Duration,
) -> (ConnectionHandle, ConnectionHandle) {
    exchange_with(pair, sizes, deadline, &mut |_| {})
}

/// [`exchange`], calling `hook` before every step (to inject datagrams,
/// change links, ...).
pub fn exchange_with(
    pair: &mut Pair,
    sizes: &[usize],
    deadline: Duration,
    hook: &mut dyn FnMut(&mut EndpointSim),
) -> (ConnectionHandle, ConnectionHandle) {
    let public = pair.server().public().expect("server identity");
    let now = pair.sim.now();
    let server_addr = pair.server_addr;
    let client = pair
        .client()
        .connect(now, server_addr, &public)
        .expect("connect");
    let ids_by_len: HashMap<usize, u32> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| (len, i as u32))
        .collect();
    let mut server_conn = None;
    let mut client_sent = false;
    let (mut client_outbox, mut server_outbox) = (Outbox::default(), Outbox::default());
    let mut got = [vec![0u32; sizes.len()], vec![0u32; sizes.len()]];
    let (client_node, server_node) = (pair.client, pair.server);
    drive(&mut pair.sim, deadline, |sim| {
        hook(sim);
        let client_ep = &mut sim.node_mut(client_node).0;
        while let Some((handle, event)) = client_ep.poll_event() {
            assert_eq!(handle, client);
            if let Event::Closed(e) = event {
                panic!("client closed: {e}");
            }
        }
        let connection = client_ep.connection(client).expect("client connection");
        if connection.is_established() && !client_sent {
            for (i, &len) in sizes.iter().enumerate() {
                client_outbox.push(message(i as u32, len));
            }
            client_sent = true;
        }
        client_outbox.pump(connection);
        while let Some(m) = connection.recv_message() {
            got[0][check(&m, &ids_by_len) as usize] += 1;
        }
        let server_ep = &mut sim.node_mut(server_node).0;
        while let Some((_, event)) = server_ep.poll_event() {
            if let Event::Closed(e) = event {
                panic!("server closed: {e}");
            }
        }
        if let Some(accepted) = server_ep.accept() {
            assert!(server_conn.is_none(), "one connection");
            server_conn = Some(accepted);
            for (i, &len) in sizes.iter().enumerate() {
                server_outbox.push(message(i as u32, len));
            }
        }
        if let Some(handle) = server_conn {
            let connection = server_ep.connection(handle).expect("server connection");
            server_outbox.pump(connection);
            while let Some(m) = connection.recv_message() {
                got[1][check(&m, &ids_by_len) as usize] += 1;
            }
        }
        got.iter().all(|side| side.iter().all(|&n| n >= 1))
    });
    for side in &got {
        assert!(side.iter().all(|&n| n == 1), "delivered once: {side:?}");
    }
    (client, server_conn.expect("accepted"))
}

/// Messages an application has yet to hand over: offered again whenever the
/// connection's send buffer or stream limit refused them.
#[derive(Default)]
pub struct Outbox {
    queue: VecDeque<Bytes>,
}

impl Outbox {
    pub fn push(&mut self, message: Bytes) {
        self.queue.push_back(message);
    }

    /// Hands over what the connection takes now.
    pub fn pump(&mut self, connection: &mut Connection) {
        while let Some(message) = self.queue.pop_front() {
            match connection.send_message(message) {
                Ok(()) => {}
                Err(SendError::Blocked(message)) => {
                    self.queue.push_front(message);
                    return;
                }
                Err(e) => panic!("send_message: {e:?}"),
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// The server of the tests with one server and many clients.
pub const MANY_CLIENTS_SERVER: &str = "10.0.0.2:5000";

/// A simulation with 5 ms links holding one server endpoint (the test
/// identity, `config`) at [`MANY_CLIENTS_SERVER`]; returns it, the server's
/// node and its public key.
pub fn server_on_sim(seed: u64, config: EndpointConfig) -> (EndpointSim, NodeId, PublicIdentity) {
    server_on_sim_with(seed, config, identity())
}

/// [`server_on_sim`] with the server's identity `key` (of either kind).
pub fn server_on_sim_with(
    seed: u64,
    config: EndpointConfig,
    key: IdentityKey,
) -> (EndpointSim, NodeId, PublicIdentity) {
    let link = LinkConfig {
        delay: Duration::from_millis(5),
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(SimConfig::seeded(seed).with_default_link(link));
    let endpoint = Endpoint::new(
        config,
        Some(key),
        seed_bytes(seed, 2),
        sim.now(),
        wall_start(),
    )
    .expect("config");
    let public = endpoint.public().expect("identity");
    let server = sim
        .add_node(OnSim(endpoint), &[many_clients_server()])
        .expect("address");
    (sim, server, public)
}

/// The address of [`MANY_CLIENTS_SERVER`].
pub fn many_clients_server() -> SocketAddr {
    MANY_CLIENTS_SERVER.parse().expect("address")
}

/// A new client endpoint (`config`, RNG seeded from `salt`) at `addr` in
/// `sim`, connecting now to the server of [`server_on_sim`] with key
/// `public`; returns its node and the connection's handle.
pub fn client_connecting(
    sim: &mut EndpointSim,
    addr: SocketAddr,
    salt: u64,
    config: EndpointConfig,
    public: &PublicIdentity,
) -> (NodeId, ConnectionHandle) {
    let now = sim.now();
    let mut endpoint =
        Endpoint::new(config, None, seed_bytes(salt, salt), now, wall_start()).expect("config");
    let handle = endpoint
        .connect(now, many_clients_server(), public)
        .expect("connect");
    let node = sim.add_node(OnSim(endpoint), &[addr]).expect("address");
    (node, handle)
}
