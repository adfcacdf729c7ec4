//! A capture of delivered datagrams as a pcap file (raw IP link type), so a
//! run opens in Wireshark: each datagram gets the IPv4 or IPv6 and UDP
//! headers its addresses imply, stamped with its virtual arrival time.

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

/// Writes delivered datagrams to a pcap file.
pub(crate) struct Capture {
    writer: PcapWriter<BufWriter<File>>,
    /// The packet being assembled: headers and payload, reused.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").finish_non_exhaustive()
    }
}

fn to_io(e: pcap_file::PcapError) -> io::Error {
    io::Error::other(e.to_string())
}

/// The Internet checksum (RFC 1071) of `words`, folded.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for pair in &mut chunks {
            sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u32::from(*last) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Capture {
    pub(crate) fn create(path: &Path) -> io::Result<Self> {
        let file = BufWriter::new(File::create(path)?);
        let header = PcapHeader {
            datalink: DataLink::RAW,
            ..PcapHeader::default()
        };
        Ok(Self {
            writer: PcapWriter::with_header(file, header).map_err(to_io)?,
            scratch: Vec::new(),
        })
    }

    /// Records `payload` sent from `from` to `to`, arriving at `at`.
    pub(crate) fn record(
        &mut self,
        at: Duration,
        from: SocketAddr,
        to: SocketAddr,
        payload: &[u8],
    ) -> io::Result<()> {
        let udp_len = (8 + payload.len()).min(usize::from(u16::MAX)) as u16;
        let mut udp = [0u8; 8];
        udp[0..2].copy_from_slice(&from.port().to_be_bytes());
        udp[2..4].copy_from_slice(&to.port().to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        self.scratch.clear();
        match (from, to) {
            (SocketAddr::V6(f), SocketAddr::V6(t)) => {
                let (src, dst) = (f.ip().octets(), t.ip().octets());
                let mut pseudo = [0u8; 8];
                pseudo[2..4].copy_from_slice(&udp_len.to_be_bytes());
                pseudo[7] = 17;
                let sum = checksum(&[&src, &dst, &pseudo, &udp, payload]);
                udp[6..8].copy_from_slice(&sum.max(1).to_be_bytes());
                self.scratch.extend_from_slice(&[0x60, 0, 0, 0]);
                self.scratch.extend_from_slice(&udp_len.to_be_bytes());
                self.scratch.extend_from_slice(&[17, 64]);
                self.scratch.extend_from_slice(&src);
                self.scratch.extend_from_slice(&dst);
            }
            _ => {
                let v4 = |a: SocketAddr| match a {
                    SocketAddr::V4(a) => a.ip().octets(),
                    SocketAddr::V6(a) => a.ip().to_ipv4_mapped().map_or([0; 4], |ip| ip.octets()),
                };
                let total = (20 + usize::from(udp_len)).min(usize::from(u16::MAX)) as u16;
                let mut ip = [0u8; 20];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[6] = 0x40; // don't fragment
                ip[8] = 64;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&v4(from));
                ip[16..20].copy_from_slice(&v4(to));
                let sum = checksum(&[&ip]);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                self.scratch.extend_from_slice(&ip);
            }
        }
        self.scratch.extend_from_slice(&udp);
        self.scratch.extend_from_slice(payload);
        let len = u32::try_from(self.scratch.len()).unwrap_or(u32::MAX);
        self.writer
            .write_packet(&PcapPacket::new(at, len, &self.scratch))
            .map_err(to_io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_of_rfc_1071s_example() {
        // RFC 1071 §3: 0001 f203 f4f5 f6f7 sums to ddf2, complement 220d.
        assert_eq!(
            checksum(&[&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]]),
            0x220d
        );
    }
}
