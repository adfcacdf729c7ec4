//! Tern socket I/O.
