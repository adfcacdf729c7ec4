//! Running `tern` as a user does: real processes on loopback, keys made
//! once per test binary, servers whose address is read from their first
//! line of output.

#![allow(dead_code, unreachable_pub)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// Generous bound on waiting for a process's line or exit: a guard
/// against a hang, never a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// A `tern` command, quiet logs, ready for arguments.
pub fn tern() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tern"));
    command
        .env_remove("RUST_LOG")
        .env_remove("TERN_SOCKIO_BACKEND");
    command
}

/// Runs `tern` with `args` to its end.
pub fn run(args: &[&str]) -> Output {
    tern().args(args).output().expect("runs tern")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Two identities made once with `tern keygen`: the server's and another
/// (a wrong key).
pub struct Keys {
    _dir: tempfile::TempDir,
    pub private: PathBuf,
    pub public: PathBuf,
    pub other_public: PathBuf,
}

pub fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        for name in ["server", "other"] {
            let out = dir.path().join(name);
            let made = run(&["keygen", "--out", path(&out)]);
            assert!(made.status.success(), "{made:?}");
        }
        Keys {
            private: dir.path().join("server/tern.key"),
            public: dir.path().join("server/tern.pub"),
            other_public: dir.path().join("other/tern.pub"),
            _dir: dir,
        }
    })
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

/// A running `tern perf server` or `tern recv`: its address, and its
/// output lines as they come.
pub struct Server {
    pub child: Child,
    pub addr: String,
    lines: Receiver<String>,
    errors: Receiver<String>,
}

impl Server {
    /// Starts `tern` with `args` (which listen on port 0) and reads the
    /// address it bound from its first line ("... on ADDR (backend ...").
    pub fn start(args: &[&str]) -> Self {
        Self::start_command(tern(), args)
    }

    /// As [`start`](Self::start), with a command prepared by the caller
    /// (e.g. run inside a network namespace).
    pub fn start_command(mut command: Command, args: &[&str]) -> Self {
        let mut child = command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts tern");
        let lines = forward(child.stdout.take().expect("stdout"));
        let errors = forward(child.stderr.take().expect("stderr"));
        let first = match lines.recv_timeout(PATIENCE) {
            Ok(line) => line,
            Err(_) => {
                let errors: Vec<String> = errors.try_iter().collect();
                panic!("the server printed nothing: {errors:?}");
            }
        };
        let addr = first
            .split(" on ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        Self {
            child,
            addr,
            lines,
            errors,
        }
    }

    /// Output lines until one contains `needle` (panics after [`PATIENCE`]).
    pub fn lines_until(&self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) => {
                    let found = line.contains(needle);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let errors: Vec<String> = self.errors.try_iter().collect();
                    panic!("no line with {needle:?} in {seen:?}; errors: {errors:?}");
                }
            }
        }
    }

    /// The next error line (panics after [`PATIENCE`]).
    pub fn next_error(&self) -> String {
        self.errors
            .recv_timeout(PATIENCE)
            .expect("an error line from the server")
    }

    /// Error lines printed so far.
    pub fn errors_so_far(&self) -> Vec<String> {
        self.errors.try_iter().collect()
    }

    /// Waits for the process to exit (panics after [`PATIENCE`]).
    pub fn wait(&mut self) -> std::process::ExitStatus {
        wait_for(&mut self.child)
    }

    /// Sends `signal` (`kill -s`).
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args(["-s", signal, &self.child.id().to_string()])
            .status()
            .expect("runs kill");
        assert!(sent.success());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `child` to exit (panics after [`PATIENCE`]).
pub fn wait_for(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the process did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `pipe` line by line on a thread.
fn forward(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Whether this process is root and has each of `tools`: what the tests
/// that build network namespaces or mount a file system need.
pub fn root_with(tools: &[&str]) -> Result<(), String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    if uid != "0" {
        return Err(format!("not root (uid {uid:?})"));
    }
    for tool in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!("no `{tool}` command"));
        }
    }
    Ok(())
}

/// `tern recv` on a free loopback port with the test keys, writing into
/// `out`, with `extra` arguments.
pub fn receiver(out: &Path, extra: &[&str]) -> Server {
    let keys = keys();
    let mut args = vec![
        "recv",
        "--listen",
        "127.0.0.1:0",
        "--key",
        path(&keys.private),
        "--out",
        path(out),
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// A file of `len` pseudo-random bytes (xorshift), written in chunks.
pub fn random_file(dir: &Path, name: &str, len: usize) -> PathBuf {
    let file_path = dir.join(name);
    let mut file = std::io::BufWriter::new(fs::File::create(&file_path).expect("creates"));
    let mut state: u64 = 0x2545_f491_4f6c_dd1d ^ len as u64;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(chunk.len());
        file.write_all(&chunk[..n]).expect("writes");
        left -= n;
    }
    file.flush().expect("flushes");
    file_path
}

pub fn sha256(file: &Path) -> String {
    let mut hasher = Sha256::new();
    let mut file = fs::File::open(file).expect("opens");
    std::io::copy(&mut file, &mut hasher).expect("reads");
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The names in `dir`.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
