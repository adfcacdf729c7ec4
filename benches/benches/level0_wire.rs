//! Level 0 benchmarks.

fn main() {
    divan::main();
}
