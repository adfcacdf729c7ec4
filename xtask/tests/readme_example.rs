//! The README examples are the one tern-peer's lib.rs runs as a doc test.
//!
//! Markdown cannot hide the lines a doc test needs around an example (an
//! async `main`, its `Ok(())`), so the READMEs are not doc tests of their
//! own: they repeat lib.rs's example, and this test holds them to it, so an
//! API change that breaks them fails the doc test first.

/// The lines of the first `# Example` doc test in `lib_rs`, as rustdoc
/// shows them (the hidden `# ` lines left out).
fn doc_example(lib_rs: &str) -> String {
    let doc = lib_rs
        .lines()
        .map_while(|line| line.strip_prefix("//!"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line));
    let body = doc
        .skip_while(|line| *line != "# Example")
        .skip_while(|line| !line.starts_with("```"))
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .filter(|line| !(line.starts_with("# ") || *line == "#"));
    body.map(|line| format!("{line}\n")).collect()
}

/// The contents of the first ```` ```rust ```` block of a Markdown text.
fn first_rust_block(markdown: &str) -> String {
    let body = markdown
        .lines()
        .skip_while(|line| *line != "```rust")
        .skip(1)
        .take_while(|line| !line.starts_with("```"));
    body.map(|line| format!("{line}\n")).collect()
}

#[test]
fn both_readmes_show_the_example_lib_rs_runs() {
    let example = doc_example(include_str!("../../crates/peer/src/lib.rs"));
    assert!(
        example.contains("Endpoint::bind") && example.contains(".await"),
        "the doc example was not found in lib.rs:\n{example}"
    );
    for (name, readme) in [
        ("README.md", include_str!("../../README.md")),
        (
            "crates/peer/README.md",
            include_str!("../../crates/peer/README.md"),
        ),
    ] {
        assert_eq!(
            first_rust_block(readme),
            example,
            "{name}'s example differs from crates/peer/src/lib.rs's doc test"
        );
    }
}
