//! Large messages put together whole from one-way streams, held to the
//! connection's flow-control window.
//!
//! Every byte of a large message counts against the connection window from
//! its arrival until the application takes the message, so the messages a
//! peer has in flight, or delivered and not taken, hold no more than the
//! window. One message at a time is let past it (the exempt one): its
//! bytes are credited back as they are put together, so a message larger
//! than the window still arrives. It stays exempt until the application
//! takes it; only then may another message grow past the window. What
//! large messages hold is thus at most the receive window plus one
//! message (`max_message_size`).
//!
//! So that the exempt message always finds room in the window, the others
//! never ask for more than the 64 KiB every stream starts with: they wait
//! at most there for their turn, which comes when the exempt message is
//! taken. (Letting them grow while the window looked half empty was tried:
//! the window is announced anew only once half of it was taken, so others
//! holding half of it starve the exempt one and nothing moves.) The
//! configured window must hold those first 64 KiB of every message the
//! peer may send at once (`max_concurrent_messages`) and leave room
//! besides, which the defaults do eightfold. The window in force starts
//! smaller (256 KiB, four such starts): when messages under assembly fill
//! more than half of it, it doubles without waiting for the application
//! (see [`RecvWindow::raise_due`]), up to the configured size.
//!
//! [`RecvWindow::raise_due`]: super::flow_control::RecvWindow::raise_due

use super::{Delivered, Held, StreamId, Streams};
use crate::config::INITIAL_STREAM_WINDOW;

/// Which large message is let past the connection window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exempt {
    /// None: the next message to receive bytes becomes exempt.
    Free,
    /// This stream's message, being put together.
    Assembling(StreamId),
    /// A message delivered and not yet taken.
    Delivered,
}

impl Streams {
    /// Bytes of message stream `id` arrived: what is now in order joins
    /// the message. Returns the message once whole.
    pub(super) fn on_message_data(&mut self, id: StreamId) -> Option<Delivered> {
        if self.exempt == Exempt::Free {
            self.exempt = Exempt::Assembling(id);
        }
        let exempt = self.exempt == Exempt::Assembling(id);
        let tables = self.tables.get_mut();
        let inc = tables.incoming.get_mut(&id)?;
        let assembly = inc.message.as_mut()?;
        let ready = inc.data.readable() as usize;
        if ready > 0 {
            let (data, pages) = (&mut inc.data, &mut self.pages);
            assembly.append(ready, |out| data.read(pages, out));
            inc.window.on_consumed(ready as u64);
            inc.charged += ready as u64;
            // A message's stream asks for more room only once the message
            // has taken half the limit every stream starts with: most
            // messages fit in it, and an update would be one more
            // ack-eliciting packet, and its ACK, in the middle of each.
            if inc.window.received() > INITIAL_STREAM_WINDOW / 2
                && exempt
                && inc.window.poll_update().is_some()
            {
                inc.data.set_limit(inc.window.limit());
                tables.max_stream_data_due.push(id);
            }
        }
        let finished = inc.data.is_finished();
        if exempt {
            let charged = std::mem::take(&mut inc.charged);
            self.on_consumed(charged);
        }
        if !finished {
            return None;
        }
        let inc = self.tables.get_mut().incoming.get_mut(&id)?;
        let held = Held {
            charge: inc.charged,
            exempt,
        };
        let message = inc.message.as_mut()?.finish();
        self.remove_incoming(id);
        if exempt {
            self.exempt = Exempt::Delivered;
        }
        Some(Delivered { message, held })
    }

    /// The application took a large message: its stream's slot is free,
    /// the window it held is credited, and if it was the exempt one,
    /// another message may be.
    pub(in crate::connection) fn on_large_message_taken(&mut self, held: Held) {
        self.on_message_taken();
        self.on_consumed(held.charge);
        if held.exempt {
            self.exempt = Exempt::Free;
        }
        self.pass_exemption();
    }

    /// Message stream `id` was reset: if it was exempt, another may be.
    pub(super) fn on_message_gone(&mut self, id: StreamId) {
        if self.exempt == Exempt::Assembling(id) {
            self.exempt = Exempt::Free;
        }
        self.pass_exemption();
    }

    /// Gives a free exemption to a message being put together: its bytes
    /// are credited at once, and its stream asks for more room.
    fn pass_exemption(&mut self) {
        if self.exempt != Exempt::Free {
            return;
        }
        let Some(id) = self
            .tables
            .get()
            .incoming
            .iter()
            .filter(|(_, inc)| inc.message.is_some())
            .map(|(id, _)| *id)
            .min_by_key(|id| id.0)
        else {
            return;
        };
        self.exempt = Exempt::Assembling(id);
        let Some(inc) = self.tables.get_mut().incoming.get_mut(&id) else {
            return;
        };
        let charged = std::mem::take(&mut inc.charged);
        if inc.window.received() > INITIAL_STREAM_WINDOW / 2 && inc.window.poll_update().is_some() {
            inc.data.set_limit(inc.window.limit());
            self.tables.get_mut().max_stream_data_due.push(id);
        }
        self.on_consumed(charged);
    }
}
