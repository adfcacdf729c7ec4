//! Tern's wire format.
