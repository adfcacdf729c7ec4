//! The control exchange: small JSON messages, each one Tern message, that
//! set up a perf run or a file transfer and report how it ended. The data
//! itself travels on streams beside them.
//!
//! Perf: the client sends [`Control::PerfStart`], the server answers
//! [`Control::PerfReady`] (the client's time to first byte ends there); both
//! ends move data on streams, then each sends [`Control::PerfReport`] with its own counts, so
//! both ends can print and compare them.
//!
//! Transfer: the sender sends [`Control::Offer`]; the receiver answers
//! [`Control::Accept`] or [`Control::Refuse`], or, when it holds a verified
//! prefix of an earlier transfer of that name and the sender asked to
//! resume, [`Control::Partial`] with the length of its partial file and
//! of the synced prefix within it. The sender answers [`Control::Prefix`]
//! with the SHA-256 of its own file's first bytes of each length, and the
//! receiver [`Control::Start`]: the longer length whose two hashes are
//! equal, else 0. The receiver's hashes never leave it, so a sender learns
//! nothing of another's partial file but whether its own bytes are the
//! same. The file follows on one stream from there, then
//! [`Control::Digest`] with the whole file's SHA-256; the receiver answers
//! [`Control::Stored`] once the file is under its final name, or
//! [`Control::Refuse`].

use serde::{Deserialize, Serialize};

use bytes::Bytes;
use tern_peer::Connection;

use crate::error::CliError;

/// Control messages longer than this are refused unread: every message
/// here is a few hundred bytes, and a peer is not trusted to be honest.
pub(crate) const MAX_CONTROL_LEN: usize = 16 << 10;

/// Most streams a perf client may ask for.
pub(crate) const MAX_STREAMS: u32 = 64;

/// Largest write a perf client may ask for.
pub(crate) const MAX_WRITE_SIZE: u64 = 16 << 20;

/// Longest perf run a client may ask for, in milliseconds (one hour).
pub(crate) const MAX_PERF_MILLIS: u64 = 3_600_000;

/// One control message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Control {
    /// Client to server: the parameters of a perf run.
    PerfStart(PerfParams),
    /// Server to client: the parameters are taken and the data phase starts.
    /// The first byte from the server the client sees, which is how the
    /// client measures its time to first byte through whatever path it took.
    PerfReady,
    /// Either end, after its data phase: what it counted.
    PerfReport(SideReport),
    /// Sender to receiver: a file of `size` bytes called `name`; with
    /// `resume`, the sender would continue an interrupted transfer of it.
    Offer {
        name: String,
        size: u64,
        #[serde(default)]
        resume: bool,
    },
    /// Receiver to sender: send it, from its start.
    Accept,
    /// Receiver to sender: it holds the first `len` bytes of an earlier
    /// transfer of that name, of which the first `synced` (when fewer, and
    /// some) were synced to disk: those survive a crash of its machine,
    /// the others may not be what was written.
    Partial {
        len: u64,
        #[serde(default)]
        synced: Option<u64>,
    },
    /// Sender to receiver, after [`Control::Partial`]: the SHA-256 (hex) of
    /// its own file's first `len` bytes, or `None` to start over (asked
    /// not to resume, or its file is shorter); and of its first `synced`
    /// bytes, when asked.
    Prefix {
        sha256: Option<String>,
        #[serde(default)]
        synced_sha256: Option<String>,
    },
    /// Receiver to sender, after [`Control::Prefix`]: the stream carries
    /// the file from byte `offset`: `len` if those hashes are equal, else
    /// `synced` if those are, else 0.
    Start { offset: u64 },
    /// Receiver to sender: not stored, and why.
    Refuse { reason: String },
    /// Sender to receiver, after the stream: the file's SHA-256 (hex).
    Digest { sha256: String },
    /// Receiver to sender: verified and stored under its final name.
    Stored { sha256: String },
}

/// Which way the data of a perf run goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Direction {
    /// Client to server.
    Upload,
    /// Server to client (`--reverse`).
    Download,
    /// Both at once (`--bidir`).
    Both,
}

/// When a perf run's senders stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Limit {
    /// After this many milliseconds.
    Millis(u64),
    /// After this many bytes per direction, split over the streams.
    Bytes(u64),
}

/// What a perf client asks the server for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PerfParams {
    /// Streams per direction.
    pub(crate) streams: u32,
    pub(crate) direction: Direction,
    pub(crate) limit: Limit,
    /// Bytes per write.
    pub(crate) write_size: u64,
    /// A cap on each direction's rate, in bits per second.
    pub(crate) rate_bits: Option<u64>,
}

impl PerfParams {
    /// Refuses what a server should not do for a stranger.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return Err(format!("streams must be 1 to {MAX_STREAMS}"));
        }
        if !(1..=MAX_WRITE_SIZE).contains(&self.write_size) {
            return Err(format!("write size must be 1 to {MAX_WRITE_SIZE} bytes"));
        }
        if let Limit::Millis(ms) = self.limit
            && ms > MAX_PERF_MILLIS
        {
            return Err("a run lasts at most one hour".to_owned());
        }
        if let Limit::Bytes(bytes) = self.limit
            && bytes < u64::from(self.streams)
        {
            return Err("at least one byte per stream".to_owned());
        }
        if self.rate_bits == Some(0) {
            return Err("a rate cap must be above zero".to_owned());
        }
        Ok(())
    }
}

/// One end's counts at the end of a perf run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SideReport {
    /// The congestion controller of what this end sent (`ledbat`,
    /// `cubic`); empty from an end too old to say.
    #[serde(default)]
    pub(crate) congestion: String,
    /// Application bytes this end wrote to its streams.
    pub(crate) bytes_sent: u64,
    /// Application bytes this end read from the peer's streams.
    pub(crate) bytes_received: u64,
    /// From the start of the run to the end of this end's data phase.
    pub(crate) seconds: f64,
    /// Smoothed round-trip time at the end, in milliseconds.
    pub(crate) rtt_ms: f64,
    /// Congestion window at the end, in bytes.
    pub(crate) window: u64,
    /// Packets this end declared lost (and re-sent what they carried).
    pub(crate) lost_packets: u64,
    /// Of those, the losses later proven spurious: the packet had arrived,
    /// held back by reordering. 0 from an end too old to say.
    #[serde(default)]
    pub(crate) spurious_losses: u64,
    /// Packets this end sent.
    pub(crate) sent_packets: u64,
    /// The path's largest UDP payload at the end.
    pub(crate) path_mtu: usize,
    /// Key updates this end made.
    pub(crate) key_updates: u64,
    /// Datagrams per send system call over the run.
    pub(crate) datagrams_per_send_call: f64,
    /// Datagrams per receive system call over the run.
    pub(crate) datagrams_per_recv_call: f64,
}

impl Control {
    /// The message's wire form.
    pub(crate) fn encode(&self) -> Bytes {
        // Serialising these plain structs cannot fail.
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Reads a message from the peer, refusing what is too long or malformed.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_CONTROL_LEN {
            return Err(format!("a control message of {} bytes", bytes.len()));
        }
        serde_json::from_slice(bytes).map_err(|e| format!("a malformed control message ({e})"))
    }
}

/// Sends `message` on `connection`.
pub(crate) async fn send(connection: &Connection, message: &Control) -> Result<(), CliError> {
    connection
        .send(message.encode())
        .await
        .map_err(|e| CliError::send(connection, &e))
}

/// The next control message from the peer.
pub(crate) async fn recv(connection: &Connection) -> Result<Control, CliError> {
    let bytes = connection
        .recv()
        .await
        .map_err(|e| CliError::connection(connection, &e))?;
    Control::decode(&bytes).map_err(|reason| CliError::Protocol {
        peer: Some(connection.remote_address()),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> impl Strategy<Value = PerfParams> {
        (
            0u32..100,
            prop_oneof![
                Just(Direction::Upload),
                Just(Direction::Download),
                Just(Direction::Both)
            ],
            prop_oneof![
                any::<u64>().prop_map(Limit::Millis),
                any::<u64>().prop_map(Limit::Bytes)
            ],
            any::<u64>(),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(
                |(streams, direction, limit, write_size, rate_bits)| PerfParams {
                    streams,
                    direction,
                    limit,
                    write_size,
                    rate_bits,
                },
            )
    }

    fn message() -> impl Strategy<Value = Control> {
        prop_oneof![
            params().prop_map(Control::PerfStart),
            Just(Control::PerfReady),
            (
                any::<u64>(),
                any::<u64>(),
                0.0f64..1e6,
                "[a-z]{0,8}",
                any::<u64>()
            )
                .prop_map(|(s, r, seconds, congestion, spurious_losses)| {
                    Control::PerfReport(SideReport {
                        congestion,
                        bytes_sent: s,
                        bytes_received: r,
                        seconds,
                        spurious_losses,
                        ..SideReport::default()
                    })
                }),
            (".{0,64}", any::<u64>(), any::<bool>())
                .prop_map(|(name, size, resume)| Control::Offer { name, size, resume }),
            Just(Control::Accept),
            (any::<u64>(), proptest::option::of(any::<u64>()))
                .prop_map(|(len, synced)| Control::Partial { len, synced }),
            (
                proptest::option::of("[0-9a-f]{64}"),
                proptest::option::of("[0-9a-f]{64}")
            )
                .prop_map(|(sha256, synced_sha256)| Control::Prefix {
                    sha256,
                    synced_sha256
                }),
            any::<u64>().prop_map(|offset| Control::Start { offset }),
            ".{0,64}".prop_map(|reason| Control::Refuse { reason }),
            "[0-9a-f]{64}".prop_map(|sha256| Control::Digest { sha256 }),
            "[0-9a-f]{64}".prop_map(|sha256| Control::Stored { sha256 }),
        ]
    }

    proptest! {
        #[test]
        fn every_message_decodes_to_itself(message in message()) {
            prop_assert_eq!(Control::decode(&message.encode()), Ok(message));
        }

        #[test]
        fn hostile_bytes_are_refused_or_decoded_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Control::decode(&bytes);
        }

        #[test]
        fn a_truncated_message_is_refused(message in message(), cut in 1usize..8) {
            let encoded = message.encode();
            let cut = encoded.len().saturating_sub(cut);
            prop_assert!(Control::decode(&encoded[..cut]).is_err());
        }

        #[test]
        fn validated_params_stay_within_the_server_limits(params in params()) {
            if params.validate().is_ok() {
                prop_assert!((1..=MAX_STREAMS).contains(&params.streams));
                prop_assert!((1..=MAX_WRITE_SIZE).contains(&params.write_size));
                prop_assert!(params.rate_bits != Some(0));
            }
        }
    }

    #[test]
    fn an_offer_without_the_resume_field_asks_for_the_whole_file() {
        let old = br#"{"type":"offer","name":"a","size":3}"#;
        assert_eq!(
            Control::decode(old),
            Ok(Control::Offer {
                name: "a".to_owned(),
                size: 3,
                resume: false
            })
        );
    }

    #[test]
    fn resume_messages_without_the_synced_fields_offer_no_fallback() {
        assert_eq!(
            Control::decode(br#"{"type":"partial","len":7}"#),
            Ok(Control::Partial {
                len: 7,
                synced: None
            })
        );
        assert_eq!(
            Control::decode(br#"{"type":"prefix","sha256":null}"#),
            Ok(Control::Prefix {
                sha256: None,
                synced_sha256: None
            })
        );
    }

    #[test]
    fn an_oversized_message_is_refused_unread() {
        let long = vec![b' '; MAX_CONTROL_LEN + 1];
        assert!(Control::decode(&long).is_err());
    }
}
