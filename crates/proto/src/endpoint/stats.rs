//! [`EndpointStats`]: what an endpoint counted, above all what its door
//! turned away and why.

#[cfg(doc)]
use super::Endpoint;

/// Figures about the endpoint as a whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointStats {
    /// Datagrams that reached no connection: unknown or stale receiver
    /// index, unknown type, wrong size.
    pub dropped_unroutable: u64,
    /// Intros decrypted and accepted.
    pub intros_accepted: u64,
    /// Intros refused by the rate limits before any decryption.
    pub intros_rate_limited: u64,
    /// Intros decrypted: the RSA operations intros cost.
    pub intros_decrypted: u64,
    /// Retries sent: unvalidated intros the rate limits refused, answered
    /// with an address-validation token.
    pub intros_retried: u64,
    /// Intros that carried a valid token.
    pub tokens_accepted: u64,
    /// Intros that carried a token that was forged, expired, or made for
    /// another address or intro.
    pub tokens_refused: u64,
    /// Retries this side took for one of its connects.
    pub retries_received: u64,
    /// Intros that failed decryption or checks (forged, replayed, stale).
    pub intros_refused: u64,
    /// Repeated intros answered with the stored reply.
    pub intros_repeated: u64,
    /// Intros dropped unread because the endpoint refuses new connections
    /// ([`Endpoint::refuse_connections`]).
    pub intros_declined: u64,
    /// Intros refused before any RSA work because their source address
    /// holds `max_connections_per_address` connections.
    pub intros_address_capped: u64,
    /// Intros refused before any RSA work because their source network
    /// (/24, /48) holds `max_connections_per_prefix` connections.
    pub intros_prefix_capped: u64,
    /// Intros refused before any RSA work because the table was full and
    /// no connection was idle long enough to make room.
    pub intros_table_full: u64,
    /// Resumption tickets this side issued as a responder.
    pub tickets_issued: u64,
    /// Resumption tickets this side received (and kept) as an initiator.
    pub tickets_received: u64,
    /// Connects that went out with a resumed intro (a ticket this side
    /// held for the key).
    pub connects_resumed: u64,
    /// Resumed intros this side accepted as a responder.
    pub resumptions_accepted: u64,
    /// Resumed intros this side refused, answered with ResumeRefused: the
    /// ticket did not open (forged, or issued before a restart), expired
    /// or was used before.
    pub resumptions_refused: u64,
    /// ResumeRefused packets this side took for one of its connects, each
    /// followed by a full intro.
    pub resume_fallbacks: u64,
    /// Connections freed.
    pub connections_closed: u64,
    /// Idle connections closed to make room for a new peer in a full
    /// table (counted in `connections_closed` too).
    pub connections_evicted: u64,
    /// Connections the application refused after seeing who opened them
    /// ([`Endpoint::refuse`]).
    pub connections_refused: u64,
    /// Connections closed because the peer did not prove its identity
    /// within the handshake, where this side requires it
    /// ([`ConnectionConfig::require_identity`](crate::ConnectionConfig::require_identity)).
    pub identities_unproven: u64,
    /// Connections closed because the peer broke the protocol.
    pub protocol_violations: u64,
    /// Connections closed to keep the endpoint within its memory budget
    /// (the greediest first).
    pub memory_budget_closes: u64,
    /// Bytes charged against the memory budget: what the connections hold
    /// (when the endpoint last looked) plus the credit granted to their
    /// peers and not used yet, and, as a relay, the packets it holds to
    /// forward (at least each pair's smallest backlog).
    pub memory_charged: u64,
    /// As a rendezvous: introductions made (an Introduce to each side).
    pub introductions_made: u64,
    /// As a rendezvous: introductions refused (unknown key, asked too
    /// often, no identity proved).
    pub introductions_refused: u64,
    /// Punches sent toward peers this side was introduced to.
    pub punches_sent: u64,
    /// Punches received for an introduction this side knows.
    pub punches_received: u64,
    /// Punches received that named no introduction (dropped).
    pub punches_unknown: u64,
    /// Local candidates an Introduce named that this side will not try:
    /// a loopback address, or one it names twice (dropped).
    pub candidates_refused: u64,
    /// Rendezvous frames dropped: an Introduce, grant or refusal nobody
    /// asked for, or one past the introductions held.
    pub signals_unexpected: u64,
    /// As a relay: pairs granted a relay (a RelayGrant to each side).
    pub relay_pairs_made: u64,
    /// As a relay: pairs relayed now.
    pub relay_pairs: u64,
    /// As a relay: pairs forgotten after forwarding nothing for the idle
    /// timeout.
    pub relay_pairs_expired: u64,
    /// As a relay: relay requests refused (unknown key, asked too often,
    /// no identity proved, as many pairs relayed as allowed, or no room in
    /// the memory budget for a new pair's smallest backlog).
    pub relay_refused: u64,
    /// As a relay: packets forwarded.
    pub relay_packets_forwarded: u64,
    /// As a relay: bytes of the packets forwarded.
    pub relay_bytes_forwarded: u64,
    /// As a relay: packets dropped over their pair's rate, or while the
    /// queue of packets to forward was full.
    pub relay_dropped_over_cap: u64,
    /// As a relay: packets dropped because the memory budget had no room
    /// for them past their pair's smallest backlog.
    pub relay_dropped_over_budget: u64,
    /// As a relay: relay packets dropped for naming no live slot (forged,
    /// or for a pair forgotten).
    pub relay_dropped_unknown_slot: u64,
    /// As a relay: relay packets dropped for coming from another address
    /// than the connection their slot was granted on.
    pub relay_dropped_not_owner: u64,
    /// As a peer: relay packets refused (a slot not granted here, another
    /// source than its rendezvous, a datagram for another connection than
    /// the slot's).
    pub relayed_dropped: u64,
    /// As a peer: probes of a direct path started by connections a relay
    /// carries.
    pub direct_probes: u64,
    /// As a peer: connections a relay carried that moved to a direct path.
    pub relayed_went_direct: u64,
}
