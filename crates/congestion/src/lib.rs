//! Tern congestion control.
