//! Tern reliability.
