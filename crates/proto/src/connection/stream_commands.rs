//! The application's commands on streams: open, accept, write, finish,
//! reset, stop and read, each checked against the connection's state and
//! followed by the events it raised.

use super::{Connection, ReadError, ReadOutcome, StreamId, WriteError};

impl Connection {
    /// Opens a bidirectional stream; `None` while the peer allows no more
    /// (it raises the limit as its streams finish) or before the handshake.
    pub fn open_stream(&mut self) -> Option<StreamId> {
        if !self.is_open_for_data() {
            return None;
        }
        self.streams.open()
    }

    /// The next stream the peer opened.
    pub fn accept_stream(&mut self) -> Option<StreamId> {
        self.streams.accept()
    }

    /// Opens a one-way stream to the peer (this side writes, the peer
    /// reads); `None` while the peer allows no more (it raises the limit as
    /// its streams finish:
    /// [`Event::StreamsAvailable`](crate::Event::StreamsAvailable)) or
    /// before the handshake.
    pub fn open_uni(&mut self) -> Option<StreamId> {
        if !self.is_open_for_data() {
            return None;
        }
        self.streams.open_one_way()
    }

    /// The next one-way stream the peer opened
    /// ([`Event::StreamOpened`](crate::Event::StreamOpened)).
    pub fn accept_uni(&mut self) -> Option<StreamId> {
        self.streams.accept_one_way()
    }

    /// Copies what fits of `data` into the stream's send buffer: no more
    /// than [`writable`](Self::writable). When it takes less than it was
    /// given, [`Event::StreamWritable`](crate::Event::StreamWritable)
    /// follows once the stream has room again.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        if !self.is_open_for_data() {
            return Err(WriteError::Closed);
        }
        let written = self.streams.write(id, data);
        self.flush_readable();
        written
    }

    /// Bytes `write` would take on `id` now: the least of the room in the
    /// stream's own buffer (`stream_send_buffer`), in the connection's
    /// (`send_buffer`, shared equally by the streams that want room) and
    /// under the peer's flow-control limit for the stream.
    pub fn writable(&self, id: StreamId) -> usize {
        self.streams.writable(id)
    }

    /// Whether the peer has announced its flow-control limit for stream
    /// `id`: until it has, [`writable`](Self::writable) is bounded by this
    /// side's buffers alone, and falls when the limit arrives.
    pub fn send_credit_announced(&self, id: StreamId) -> bool {
        self.streams.credit_announced(id)
    }

    /// Bytes all streams hold until the peer acknowledges them, together
    /// (never more than the configured `send_buffer`).
    pub fn stream_send_buffered(&self) -> usize {
        self.streams.send_buffered()
    }

    /// Ends the stream after what was written.
    pub fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        if self.error.is_some() {
            return Err(WriteError::Closed);
        }
        let finished = self.streams.finish(id);
        self.flush_readable();
        finished
    }

    /// Abandons sending on the stream with an application code; its
    /// buffered bytes are let go at once.
    pub fn reset_stream(&mut self, id: StreamId, code: u64) -> Result<(), WriteError> {
        if self.error.is_some() {
            return Err(WriteError::Closed);
        }
        let reset = self.streams.reset(id, code);
        self.flush_readable();
        reset
    }

    /// The code the peer gave when it asked this side to stop sending on
    /// the stream, `None` while it has not; [`WriteError::UnknownStream`]
    /// once the sending half is done with (every byte, or its reset,
    /// acknowledged: [`Event::StreamWritable`](crate::Event::StreamWritable)
    /// says when).
    pub fn stopped(&self, id: StreamId) -> Result<Option<u64>, WriteError> {
        self.streams.stop_code(id)
    }

    /// Asks the peer to stop sending on the stream.
    pub fn stop_sending(&mut self, id: StreamId, code: u64) -> Result<(), ReadError> {
        if self.error.is_some() {
            return Err(ReadError::Closed);
        }
        self.streams.stop_sending(id, code)
    }

    /// Reads the stream's next bytes, in order, into `out`.
    pub fn read(&mut self, id: StreamId, out: &mut [u8]) -> Result<ReadOutcome, ReadError> {
        let read = self.streams.read(id, out);
        self.closed_if_forgotten(read)
    }
}
