//! Commands in the editor's terminal (ACP `terminal/*`) when the client
//! offers one: the user watches the command live in the tool call (its
//! content embeds the terminal), and the model still gets the output and
//! the exit status. The terminal is always released, also after a kill, an
//! error or a dropped call.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::shell::CappedOutput;
use super::{Shell, ShellOutput, ShellRun, ToolError};
use crate::client::{
    ClientError, ClientFuture, ClientSink, CreateTerminal, TerminalExit, TerminalId, TerminalOutput,
};
use crate::events::ToolContent;
use crate::model::SessionId;

/// How long the editor gets to answer a kill, an output or a release
/// request after the command was stopped (a hung editor must not hang the turn).
const AFTER_KILL: Duration = Duration::from_secs(5);

/// Runs commands with this machine's interpreter (`sh -c COMMAND`; see
/// [`crate::platform::interpreter`]) in a terminal the editor creates.
pub struct ClientTerminal {
    pub session_id: SessionId,
    pub sink: Arc<dyn ClientSink>,
}

impl Shell for ClientTerminal {
    fn run<'a>(&'a self, run: ShellRun<'a>) -> BoxFuture<'a, Result<ShellOutput, ToolError>> {
        Box::pin(self.run_in_terminal(run))
    }
}

enum Ending {
    Exited(Result<TerminalExit, ClientError>),
    TimedOut,
    Cancelled,
}

impl ClientTerminal {
    async fn run_in_terminal(&self, run: ShellRun<'_>) -> Result<ShellOutput, ToolError> {
        if run.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if run.confinement.is_some() {
            return Err(ToolError::Failed(
                "a command in the editor's terminal cannot be confined to the sandbox".into(),
            ));
        }
        let line = crate::platform::interpreter().command_line(run.command);
        let request = CreateTerminal {
            session_id: self.session_id.clone(),
            command: line.program.to_string_lossy().into_owned(),
            args: (line.args.iter())
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect(),
            // The editor's terminal may add its own environment to this.
            env: run.env.to_vec(),
            cwd: Some(run.cwd.to_path_buf()),
            output_byte_limit: u64::try_from(run.output_cap).ok(),
        };
        // Not raced with cancel: a terminal the editor made must be released.
        let id = self.sink.create_terminal(request).await.map_err(|err| {
            ToolError::Failed(format!(
                "the editor could not start the command in a terminal: {err}"
            ))
        })?;
        let terminal = Terminal {
            sink: Arc::clone(&self.sink),
            id,
        };
        let mut guard = ReleaseOnDrop {
            terminal: Some(terminal.clone()),
        };
        run.progress.report(vec![ToolContent::Terminal {
            terminal_id: terminal.id.terminal_id.clone(),
        }]);
        let result = terminal
            .follow(run.timeout, run.output_cap, run.cancel)
            .await;
        guard.terminal = None;
        terminal.release().await;
        result.map(|mut output| {
            output.terminal_id = Some(terminal.id.terminal_id);
            output
        })
    }
}

/// One created terminal and the client that has it.
#[derive(Clone)]
struct Terminal {
    sink: Arc<dyn ClientSink>,
    id: TerminalId,
}

impl Terminal {
    /// A request after the command has stopped, bounded in time.
    async fn briefly<T>(&self, what: &str, request: ClientFuture<'_, T>) -> Option<T> {
        match tokio::time::timeout(AFTER_KILL, request).await {
            Ok(Ok(answer)) => Some(answer),
            Ok(Err(err)) => {
                tracing::debug!(what, %err, "terminal request failed");
                None
            }
            Err(_) => {
                tracing::debug!(what, "terminal request not answered in time");
                None
            }
        }
    }

    async fn kill(&self) {
        self.briefly("kill", self.sink.kill_terminal(&self.id))
            .await;
    }

    async fn release(&self) {
        self.briefly("release", self.sink.release_terminal(&self.id))
            .await;
    }

    /// Waits for the exit (or the timeout, or a cancel), then reads the output.
    async fn follow(
        &self,
        timeout: Duration,
        output_cap: usize,
        cancel: &CancellationToken,
    ) -> Result<ShellOutput, ToolError> {
        let ending = tokio::select! {
            biased;
            () = cancel.cancelled() => Ending::Cancelled,
            () = tokio::time::sleep(timeout) => Ending::TimedOut,
            exit = self.sink.wait_for_terminal_exit(&self.id) => Ending::Exited(exit),
        };
        match ending {
            Ending::Exited(Err(err)) => Err(ToolError::Failed(format!(
                "the editor's terminal failed while waiting for the command: {err}"
            ))),
            Ending::Exited(Ok(exit)) => {
                let answer = self.sink.terminal_output(&self.id).await.map_err(|err| {
                    ToolError::Failed(format!(
                        "the command ended, but the editor did not give its output: {err}"
                    ))
                })?;
                let (output, omitted_bytes) = capped_output(&answer, output_cap);
                Ok(ShellOutput {
                    exit_code: exit.exit_code.and_then(|code| i32::try_from(code).ok()),
                    signal: exit.signal.as_deref().and_then(signal_number),
                    output,
                    timed_out: false,
                    omitted_bytes,
                    terminal_id: None,
                })
            }
            Ending::Cancelled => {
                self.kill().await;
                Err(ToolError::Killed(
                    "the user cancelled the turn, so it was stopped".into(),
                ))
            }
            Ending::TimedOut => {
                self.kill().await;
                // What it printed before the kill is part of the answer.
                let request = self.sink.terminal_output(&self.id);
                let (output, omitted_bytes) = match self.briefly("output", request).await {
                    Some(answer) => capped_output(&answer, output_cap),
                    None => (String::new(), 0),
                };
                Ok(ShellOutput {
                    exit_code: None,
                    signal: crate::platform::KILL_SIGNAL,
                    output,
                    timed_out: true,
                    omitted_bytes,
                    terminal_id: None,
                })
            }
        }
    }
}

/// The editor's output cut like local output (start and end kept).
fn capped_output(answer: &TerminalOutput, output_cap: usize) -> (String, u64) {
    let mut capped = CappedOutput::new(output_cap);
    capped.push(answer.output.as_bytes());
    let (output, omitted) = capped.finish();
    if answer.truncated {
        // The editor kept only the end: say so, as the local cap does.
        (
            format!("[earlier output truncated by the editor]\n{output}"),
            omitted,
        )
    } else {
        (output, omitted)
    }
}

/// A signal name as the editor reports it ("SIGKILL", "KILL", "9"). The
/// numbers are POSIX's, the same on Linux and macOS (Windows has none).
fn signal_number(name: &str) -> Option<i32> {
    if let Ok(number) = name.parse() {
        return Some(number);
    }
    let name = name.strip_prefix("SIG").unwrap_or(name);
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ABRT" => 6,
        "KILL" => 9,
        "SEGV" => 11,
        "PIPE" => 13,
        "TERM" => 15,
        _ => return None,
    })
}

/// Kills and releases the terminal if the call is dropped half-way (the
/// turn's task ended); a normal end releases it itself.
struct ReleaseOnDrop {
    terminal: Option<Terminal>,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let Some(terminal) = self.terminal.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                terminal.kill().await;
                terminal.release().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::tools::Progress;

    /// An editor whose commands print "hi" and exit 3, or never exit.
    fn terminal(hang: bool) -> (Arc<RecordingClient>, ClientTerminal) {
        let editor = Arc::new(if hang {
            RecordingClient::hanging()
        } else {
            RecordingClient::default()
        });
        let terminal = ClientTerminal {
            session_id: "s".into(),
            sink: editor.clone(),
        };
        (editor, terminal)
    }

    /// Runs `command` in /tmp, keeping 1000 bytes of output; also answers
    /// what the call showed while it ran.
    async fn run(
        terminal: &ClientTerminal,
        command: &str,
        timeout: Duration,
        cancel: CancellationToken,
    ) -> (Result<ShellOutput, ToolError>, Vec<Vec<ToolContent>>) {
        let (progress, mut reports) = Progress::channel();
        let run = ShellRun {
            command,
            cwd: Path::new("/tmp"),
            env: &[],
            timeout,
            output_cap: 1000,
            cancel: &cancel,
            progress: &progress,
            confinement: None,
        };
        let result = terminal.run(run).await;
        let mut shown = Vec::new();
        while let Ok(report) = reports.try_recv() {
            shown.push(report);
        }
        (result, shown)
    }

    #[tokio::test]
    async fn a_command_runs_reports_its_terminal_and_is_released() {
        let (editor, terminal) = terminal(false);
        let never = CancellationToken::new();
        let (result, shown) = run(&terminal, "echo hi", Duration::from_secs(5), never).await;
        let out = result.unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.output, "hi\n");
        assert_eq!(out.terminal_id.as_deref(), Some("t1"));
        assert_eq!(
            shown,
            [vec![ToolContent::Terminal {
                terminal_id: "t1".into()
            }]]
        );
        assert_eq!(
            editor.requests(),
            [
                "create_terminal",
                "wait_for_terminal_exit",
                "terminal_output",
                "release_terminal"
            ]
        );
    }

    #[tokio::test]
    async fn a_timeout_kills_reads_and_releases() {
        let (editor, terminal) = terminal(true);
        let timeout = Duration::from_millis(50);
        let (result, _) = run(&terminal, "sleep 100", timeout, CancellationToken::new()).await;
        let out = result.unwrap();
        assert!(out.timed_out);
        assert_eq!(out.output, "hi\n");
        assert_eq!(
            editor.requests(),
            [
                "create_terminal",
                "wait_for_terminal_exit",
                "kill_terminal",
                "terminal_output",
                "release_terminal"
            ]
        );
    }

    #[tokio::test]
    async fn a_cancel_kills_and_releases() {
        let (editor, terminal) = terminal(true);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            trigger.cancel();
        });
        let (result, _) = run(&terminal, "sleep 100", Duration::from_secs(60), cancel).await;
        let err = result.unwrap_err();
        assert!(err.to_string().contains("killed"), "{err}");
        let calls = editor.requests();
        assert_eq!(&calls[2..], ["kill_terminal", "release_terminal"]);
    }

    #[test]
    fn signals_are_read_by_name_or_number() {
        assert_eq!(signal_number("SIGKILL"), Some(9));
        assert_eq!(signal_number("TERM"), Some(15));
        assert_eq!(signal_number("2"), Some(2));
        assert_eq!(signal_number("SIGWHAT"), None);
    }

    #[test]
    fn editor_output_is_capped_and_its_own_truncation_noted() {
        let answer = TerminalOutput {
            output: "x".repeat(500),
            truncated: true,
            exit: None,
        };
        let (text, omitted) = capped_output(&answer, 100);
        assert!(text.starts_with("[earlier output truncated by the editor]\n"));
        assert_eq!(omitted, 400);
    }
}
