//! Running a child process while reading what it prints as it prints it.
//!
//! Benchmarks take seconds each; the progress line must follow them, so
//! output is handed on line by line (and the unfinished last line too:
//! divan flushes a benchmark's name before measuring it).

use std::io::{self, BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};

/// A piece of the child's standard output.
#[derive(Debug)]
pub(crate) enum Stdout<'a> {
    /// A complete line, without its line break.
    Line(&'a str),
    /// The text after the last line break so far; it may grow later.
    Partial(&'a str),
}

/// How the child ended, with everything it wrote to standard error.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The child's exit status.
    pub(crate) status: ExitStatus,
    /// Its standard error, line by line, for reporting a failure.
    pub(crate) stderr: Vec<String>,
}

impl Finished {
    /// The last `n` lines of standard error, indented, for an error message.
    pub(crate) fn stderr_tail(&self, n: usize) -> String {
        let skip = self.stderr.len().saturating_sub(n);
        self.stderr[skip..]
            .iter()
            .map(|line| format!("    {line}\n"))
            .collect()
    }
}

/// Runs `command` to its end, passing its standard output to `on_stdout`
/// and each line of its standard error to `on_stderr` as they arrive.
pub(crate) fn stream(
    command: &mut Command,
    on_stdout: &mut dyn FnMut(Stdout<'_>),
    on_stderr: &(dyn Fn(&str) + Sync),
) -> io::Result<Finished> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (Some(mut stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io::Error::other("child process without pipes"));
    };
    let stderr_lines = std::thread::scope(|scope| -> io::Result<Vec<String>> {
        let reader = scope.spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stderr).lines() {
                let line = line?;
                on_stderr(&line);
                lines.push(line);
            }
            Ok::<_, io::Error>(lines)
        });
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let read = stdout.read(&mut chunk)?;
            if read == 0 {
                break;
            }
            pending.extend_from_slice(&chunk[..read]);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                on_stdout(Stdout::Line(
                    String::from_utf8_lossy(&line[..end]).trim_end_matches('\r'),
                ));
            }
            if !pending.is_empty() {
                on_stdout(Stdout::Partial(&String::from_utf8_lossy(&pending)));
            }
        }
        if !pending.is_empty() {
            on_stdout(Stdout::Line(&String::from_utf8_lossy(&pending)));
        }
        reader
            .join()
            .map_err(|_| io::Error::other("the standard error reader panicked"))?
    })?;
    let status = child.wait()?;
    Ok(Finished {
        status,
        stderr: stderr_lines,
    })
}

/// Runs `command` to its end and returns its standard output as text;
/// standard error is kept for the error message.
pub(crate) fn capture(command: &mut Command) -> io::Result<(Finished, String)> {
    let mut out = String::new();
    let finished = stream(
        command,
        &mut |piece| {
            if let Stdout::Line(line) = piece {
                out.push_str(line);
                out.push('\n');
            }
        },
        &|_| {},
    )?;
    Ok((finished, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn lines_partials_and_stderr_all_arrive() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "printf 'one\\ntwo\\nthr'; sleep 0.2; printf 'ee\\n'; echo oops >&2; exit 3",
        ]);
        let mut lines = Vec::new();
        let mut partials = Vec::new();
        let errors = Mutex::new(Vec::new());
        let finished = stream(
            &mut command,
            &mut |piece| match piece {
                Stdout::Line(l) => lines.push(l.to_owned()),
                Stdout::Partial(p) => partials.push(p.to_owned()),
            },
            &|line| errors.lock().expect("lock").push(line.to_owned()),
        )
        .expect("sh runs");
        assert_eq!(lines, ["one", "two", "three"]);
        assert!(partials.contains(&"thr".to_owned()), "{partials:?}");
        assert_eq!(finished.status.code(), Some(3));
        assert_eq!(finished.stderr, ["oops"]);
        assert_eq!(*errors.lock().expect("lock"), ["oops"]);
        assert_eq!(finished.stderr_tail(5), "    oops\n");
    }

    #[test]
    fn capture_collects_stdout_text() {
        let (finished, out) =
            capture(Command::new("sh").args(["-c", "echo a; echo b"])).expect("sh runs");
        assert!(finished.status.success());
        assert_eq!(out, "a\nb\n");
    }
}
