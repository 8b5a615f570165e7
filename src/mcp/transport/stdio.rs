//! A stdio server's process: spawned in a process tree of its own (a
//! process group; a Job Object on Windows), so stopping it also stops what
//! it started (e.g. `npx` → `node`), watched until it exits, its stderr
//! logged and its last lines kept for error messages.

use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;

use crate::mcp::error::StartError;
use crate::mcp::spec::StdioSandbox;
use crate::platform::{self, CommandLine, ProcessTree};
use crate::util::lock;

/// How long a closed server gets to exit before SIGTERM, and again before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);
/// Stderr lines kept for error messages.
const STDERR_TAIL_LINES: usize = 5;
/// Longer stderr lines are cut (a server printing without newlines must not
/// grow memory).
const MAX_STDERR_LINE: usize = 4096;

/// The last lines a server wrote to stderr. Cheap to clone (shared).
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// Forgets the lines of an earlier process.
    pub(crate) fn clear(&self) {
        lock(&self.0).clear();
    }

    fn push(&self, line: String) {
        let mut tail = lock(&self.0);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }

    /// "; its last output: a | b" to append to an error message, or nothing.
    pub(crate) fn describe(&self) -> String {
        let tail = lock(&self.0);
        if tail.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            format!("; its last output: {}", lines.join(" | "))
        }
    }
}

/// What a server's process is given, besides its own variables.
pub(crate) enum Environment<'a> {
    /// The agent's core variables ([`crate::tools::environment::CORE_VARIABLES`])
    /// and these.
    Base(&'a [(String, String)]),
    /// The agent's whole environment and these.
    Inherited(&'a [(String, String)]),
}

/// A stdio server process, in its own process tree so that stopping it
/// also stops what it started (e.g. `npx` → `node`).
pub(crate) struct ChildProcess {
    pub(crate) pid: Option<u32>,
    /// Killed when dropped: no orphans, also without an orderly stop (and
    /// without a runtime).
    tree: platform::Tree,
    /// Set to how it ended, once it has.
    pub(crate) exit: watch::Receiver<Option<String>>,
}

impl ChildProcess {
    pub(crate) fn spawn(
        name: &str,
        command: &Path,
        args: &[String],
        env: Environment<'_>,
        cwd: Option<&Path>,
        sandbox: &StdioSandbox,
        stderr_tail: StderrTail,
    ) -> Result<(Self, ChildStdout, ChildStdin), StartError> {
        if let Some(dir) = cwd
            && !dir.is_dir()
        {
            return Err(StartError::MissingCwd(dir.to_path_buf()));
        }
        // A relative path with a directory part means "from the server's
        // directory"; std leaves that case unspecified.
        let program = match cwd {
            Some(dir) if command.is_relative() && command.components().count() > 1 => {
                dir.join(command)
            }
            _ => command.to_path_buf(),
        };
        let line = CommandLine::new(program, args);
        let mut cmd = match sandbox {
            StdioSandbox::Off => line.command(),
            StdioSandbox::Confined(confinement) => confinement
                .command(&line)
                .map_err(|err| StartError::Sandbox(err.to_string()))?,
            StdioSandbox::Wanted => {
                return Err(StartError::Sandbox("no session set the sandbox up".into()));
            }
            StdioSandbox::Unavailable(reason) => {
                return Err(StartError::Sandbox(reason.clone()));
            }
        };
        let own = match env {
            Environment::Inherited(own) => own,
            Environment::Base(own) => {
                cmd.env_clear()
                    .envs(crate::tools::environment::core_environment());
                own
            }
        };
        cmd.envs(own.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let shown = command.display().to_string();
        let (mut child, tree) =
            platform::spawn_tree(&mut cmd).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => StartError::CommandNotFound {
                    command: shown.clone(),
                },
                _ => StartError::Spawn {
                    command: shown.clone(),
                    source,
                },
            })?;
        let pid = child.id();
        let mut process = Self {
            pid,
            tree,
            exit: watch::channel(None).1,
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Cannot happen with piped stdio; `process` kills the child on drop.
            return Err(StartError::Spawn {
                command: shown,
                source: std::io::Error::other("its standard streams were not captured"),
            });
        };
        let pump = tokio::spawn(pump_stderr(name.to_string(), stderr, stderr_tail));
        let (exit_tx, exit_rx) = watch::channel(None);
        let server = name.to_string();
        // The waiter owns the child (and reaps it); kill_on_drop covers a
        // runtime shutting down under it.
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(status) => describe_exit(status),
                Err(err) => format!("ended ({err})"),
            };
            // Its last words first, so messages about the exit can quote them
            // (bounded: something it started may hold stderr open).
            let _ = tokio::time::timeout(Duration::from_millis(500), pump).await;
            tracing::debug!(%server, %status, "MCP server process ended");
            let _ = exit_tx.send(Some(status));
        });
        process.exit = exit_rx;
        Ok((process, stdout, stdin))
    }

    /// How the process ended, if it does within `within`.
    pub(crate) async fn wait_exit(&mut self, within: Duration) -> Option<String> {
        tokio::time::timeout(within, wait_exited(&mut self.exit))
            .await
            .ok()
    }

    /// The MCP stdio shutdown: stdin is already closed; then SIGTERM, then
    /// SIGKILL (on Windows, the end of its Job Object). Whatever else is
    /// left in its tree goes too.
    pub(crate) async fn stop(&mut self) {
        if self.wait_exit(STOP_GRACE).await.is_none() {
            self.tree.terminate();
            if self.wait_exit(STOP_GRACE).await.is_none() {
                self.tree.kill();
                let _ = self.wait_exit(STOP_GRACE).await;
            }
        }
        self.tree.kill();
    }
}

/// Resolves once the process has ended, with how; never for HTTP servers
/// (whose sender is dropped at once, keeping the value None).
pub(crate) async fn wait_exited(exit: &mut watch::Receiver<Option<String>>) -> String {
    let status = exit
        .wait_for(Option::is_some)
        .await
        .map(|status| status.clone().unwrap_or_default());
    match status {
        Ok(status) => status,
        Err(_) => std::future::pending().await,
    }
}

fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), platform::exit_signal(status)) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".to_string(),
    }
}

/// Logs each stderr line at debug and keeps the last few.
async fn pump_stderr(name: String, stderr: ChildStderr, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line_capped(&mut reader, &mut line, MAX_STDERR_LINE).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // Decoded per whole line, so a character split across reads survives.
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        tracing::debug!(server = %name, "MCP server stderr: {text}");
        tail.push(crate::tools::shorten(text, 300));
    }
}

/// Reads up to and including a newline; keeps at most `cap` bytes of it but
/// consumes all of it. Returns the bytes consumed (0 at the end).
async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (len, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buf.len(), false),
        };
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&buf[..len.min(room)]);
        reader.consume(len);
        consumed += len;
        if done {
            return Ok(consumed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_stderr_lines_are_capped_but_consumed() {
        let input = format!("{}\nnext\n", "x".repeat(10_000));
        let mut reader = BufReader::new(input.as_bytes());
        let mut line = Vec::new();
        let consumed = read_line_capped(&mut reader, &mut line, 100).await.unwrap();
        assert_eq!(consumed, 10_001);
        assert_eq!(line.len(), 100);
        line.clear();
        read_line_capped(&mut reader, &mut line, 100).await.unwrap();
        assert_eq!(line, b"next\n");
        line.clear();
        assert_eq!(
            read_line_capped(&mut reader, &mut line, 100).await.unwrap(),
            0
        );
    }
}
