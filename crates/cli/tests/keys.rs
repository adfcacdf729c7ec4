//! `tern keygen` and `tern pubkey` as a user runs them: real processes,
//! real files.

use std::path::Path;
use std::process::{Command, Output};

fn tern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run tern")
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn keygen_writes_an_owner_only_private_key_and_a_matching_public_key_and_never_replaces_them_unasked()
 {
    let dir = tempfile::tempdir().expect("temporary directory");
    let keys = dir.path().join("keys");
    let made = tern(&["keygen", "--out", path(&keys)]);
    assert!(made.status.success(), "{made:?}");
    let private = keys.join("tern.key");
    let public = keys.join("tern.pub");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&private)
            .expect("private key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let private_pem = std::fs::read_to_string(&private).expect("private key");
    assert!(private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    let public_pem = std::fs::read_to_string(&public).expect("public key");
    assert!(public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));

    // keygen prints the one-line form (an X25519 key by default); pubkey
    // gives the same from either file.
    let pasted = stdout_lines(&made).last().cloned().expect("a line");
    assert!(pasted.starts_with("tern-x25519:") && !pasted.contains(char::is_whitespace));
    assert_eq!(pasted.len(), "tern-x25519:".len() + 43);
    for file in [&public, &private] {
        let printed = tern(&["pubkey", "--key", path(file)]);
        assert!(printed.status.success(), "{printed:?}");
        assert_eq!(stdout_lines(&printed), std::slice::from_ref(&pasted));
    }

    // A second keygen refuses and leaves both files as they were.
    let again = tern(&["keygen", "--out", path(&keys)]);
    assert!(!again.status.success());
    let message = String::from_utf8_lossy(&again.stderr);
    assert!(
        message.contains("exists already") && message.contains("--force"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(&private).expect("kept"),
        private_pem
    );

    // With --force the identity is new.
    let forced = tern(&["keygen", "--out", path(&keys), "--force"]);
    assert!(forced.status.success(), "{forced:?}");
    assert_ne!(std::fs::read_to_string(&private).expect("new"), private_pem);
    assert_ne!(stdout_lines(&forced).last(), Some(&pasted));
}

#[test]
fn keygen_of_either_kind_prints_its_own_one_line_form_and_pubkey_agrees() {
    let dir = tempfile::tempdir().expect("temporary directory");
    for (kind, prefix) in [("rsa", "tern-pub:"), ("x25519", "tern-x25519:")] {
        let keys = dir.path().join(kind);
        let made = tern(&["keygen", "--out", path(&keys), "--kind", kind]);
        assert!(made.status.success(), "{made:?}");
        let pasted = stdout_lines(&made).last().cloned().expect("a line");
        assert!(pasted.starts_with(prefix), "{pasted}");
        for file in ["tern.pub", "tern.key"] {
            let printed = tern(&["pubkey", "--key", path(&keys.join(file))]);
            assert_eq!(stdout_lines(&printed), std::slice::from_ref(&pasted));
        }
    }
    let unknown = tern(&["keygen", "--out", path(dir.path()), "--kind", "dsa"]);
    assert!(!unknown.status.success());
}

#[test]
fn pubkey_of_a_missing_or_foreign_file_fails_with_one_clear_line() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let missing = dir.path().join("nothing-here.pub");
    let garbage = dir.path().join("garbage.pub");
    std::fs::write(&garbage, "not a key\n").expect("write");
    for (file, expected) in [
        (&missing, "No such file"),
        (&garbage, "is not a Tern public key"),
    ] {
        let output = tern(&["pubkey", "--key", path(file)]);
        assert!(!output.status.success());
        assert!(output.stdout.is_empty());
        let message = String::from_utf8_lossy(&output.stderr);
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(
            message.starts_with("tern: ") && message.contains(expected),
            "{message}"
        );
    }
}
