//! Compiles the known-answer test of `docs/wire-format.md`
//! (`src/wire_format_doc.rs`) only where that document is: in the
//! repository, not in the published package, which carries neither.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(wire_format_doc)");
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/wire-format.md");
    println!("cargo::rerun-if-changed={}", doc.display());
    if doc.is_file() {
        println!("cargo::rustc-cfg=wire_format_doc");
    }
}
