//! Tern project tasks.

fn main() {}
