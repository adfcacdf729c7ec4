//! A peer that lies (issue #23): the other end of an authenticated
//! connection is not trusted. An attacker finishes a real handshake with
//! an endpoint, then sends frames no honest Tern peer sends; each is
//! refused as a protocol violation, or its effect is bounded.

mod support;

use support::attacker::Attacker;
use tern_proto::EndpointConfig;
use tern_wire::{Datagram, Frame};

#[test]
fn the_attacker_is_an_authenticated_peer() {
    let mut attacker = Attacker::connect(EndpointConfig::default());
    attacker.send(&[Frame::Datagram(Datagram { data: b"hello" })]);
    attacker.turn();
    let connection = attacker.connection().expect("open");
    assert_eq!(connection.recv_datagram().as_deref(), Some(&b"hello"[..]));
    assert_eq!(connection.error(), None);
}
