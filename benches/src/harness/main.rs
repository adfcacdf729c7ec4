//! Tern's end-to-end benchmark harness (levels 2 and 3).

fn main() {}
