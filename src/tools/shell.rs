//! Commands behind a small trait: this machine's interpreter (`sh -c`;
//! PowerShell or `cmd /C` on Windows, see [`crate::platform::interpreter`]),
//! or an editor terminal (ACP `terminal/*`, see [`super::ClientTerminal`]).

use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStderr, ChildStdout};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::sandbox::Confinement;
use super::{ToolContent, ToolError};
use crate::platform::{self, ProcessTree};

/// How a command ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutput {
    /// None when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did (SIGKILL after a timeout).
    pub signal: Option<i32>,
    /// stdout and stderr interleaved as they arrived, within the cap.
    pub output: String,
    /// Killed for running longer than the timeout.
    pub timed_out: bool,
    /// Bytes left out of `output` to keep within the cap.
    pub omitted_bytes: u64,
    /// The editor terminal it ran in, if it ran in one (shown in the result).
    pub terminal_id: Option<String>,
}

impl ShellOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// One command to run and the limits it runs within.
#[derive(Debug, Clone, Copy)]
pub struct ShellRun<'a> {
    /// The command line, given to the interpreter (`sh -c`).
    pub command: &'a str,
    pub cwd: &'a Path,
    /// The command's whole environment, as the session's
    /// [`super::environment::EnvironmentPolicy`] built it.
    pub env: &'a [(String, String)],
    /// Past it the command is killed and the output so far returned with `timed_out`.
    pub timeout: Duration,
    /// The most bytes of output kept.
    pub output_cap: usize,
    /// On a cancel the command is killed and the answer is [`ToolError::Cancelled`].
    pub cancel: &'a CancellationToken,
    /// May show the command while it runs.
    pub progress: &'a Progress,
    /// The sandbox it runs in; None runs it with the user's full rights.
    /// Only a shell that [`Shell::can_confine`] accepts one.
    pub confinement: Option<&'a Confinement>,
}

/// Runs a command line.
pub trait Shell: Send + Sync {
    fn run<'a>(&'a self, run: ShellRun<'a>) -> BoxFuture<'a, Result<ShellOutput, ToolError>>;

    /// Whether it can run a command in the sandbox (an editor's terminal
    /// cannot: the editor starts the process).
    fn can_confine(&self) -> bool {
        false
    }
}

/// The interpreter on this machine, the command in a process tree of its
/// own (a process group; a Job Object on Windows) so a timeout or a cancel
/// kills everything the command started.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalShell;

/// After the command exits, how long to wait for the rest of its output
/// (a background process it left may hold the pipes open for good).
const OUTPUT_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for the output and the exit after a kill.
const AFTER_KILL: Duration = Duration::from_secs(2);
/// How often a running command's output so far is shown (a command done
/// sooner shows only its result).
const SHOW_EVERY: Duration = Duration::from_millis(500);

impl Shell for LocalShell {
    fn run<'a>(&'a self, run: ShellRun<'a>) -> BoxFuture<'a, Result<ShellOutput, ToolError>> {
        Box::pin(run_local(run))
    }

    fn can_confine(&self) -> bool {
        true
    }
}

/// How a running command came to an end.
enum Ending {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

async fn run_local(run: ShellRun<'_>) -> Result<ShellOutput, ToolError> {
    if run.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let mut running = Running::start(&run)?;
    match running.wait_for_ending(&run).await {
        Ending::Exited(status) => running.exited(status),
        Ending::Cancelled => running.cancelled().await,
        Ending::TimedOut => Ok(running.timed_out().await),
    }
}

/// A started command: its process, the tree of what it starts, its pipes
/// and the output kept so far.
struct Running {
    child: Child,
    tree: platform::Tree,
    pipes: Pipes,
    output: CappedOutput,
}

impl Running {
    /// Starts the command in a process tree of its own, with only the
    /// given environment and no stdin.
    fn start(run: &ShellRun<'_>) -> Result<Self, ToolError> {
        let interpreter = platform::interpreter();
        let line = interpreter.command_line(run.command);
        let mut command = match run.confinement {
            Some(confinement) => confinement
                .command(&line)
                .map_err(|err| ToolError::Failed(err.to_string()))?,
            None => line.command(),
        };
        command
            .env_clear()
            .envs(run.env.iter().map(|(name, value)| (name, value)))
            .current_dir(run.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Killed whole on a timeout, a cancel, or when the run is dropped
        // half-way (kill_on_drop alone would reach only the interpreter).
        let (mut child, tree) = platform::spawn_tree(&mut command).map_err(|err| {
            ToolError::Failed(format!(
                "could not start `{}` in {}: {err}",
                interpreter.name(),
                run.cwd.display()
            ))
        })?;
        let pipes = Pipes {
            stdout: Pipe::new(child.stdout.take()),
            stderr: Pipe::new(child.stderr.take()),
        };
        Ok(Self {
            child,
            tree,
            pipes,
            output: CappedOutput::new(run.output_cap),
        })
    }

    /// Reads the output, showing it every [`SHOW_EVERY`] while the command
    /// runs, until the command exits and its pipes close (or the grace after
    /// the exit passes), the timeout passes or the call is cancelled.
    async fn wait_for_ending(&mut self, run: &ShellRun<'_>) -> Ending {
        let deadline = Instant::now() + run.timeout;
        let mut status = None;
        let mut grace_until = None;
        let mut show_at = Instant::now() + SHOW_EVERY;
        // Output came that was not shown yet.
        let mut unshown = false;
        loop {
            if self.pipes.closed()
                && let Some(status) = status.take()
            {
                return Ending::Exited(status);
            }
            tokio::select! {
                // Biased: a cancel or timeout wins even over a flood of output,
                // and output already there is read before the exit is noticed.
                biased;
                () = run.cancel.cancelled() => return Ending::Cancelled,
                () = tokio::time::sleep_until(deadline) => return Ending::TimedOut,
                () = self.pipes.read_into(&mut self.output) => unshown = run.progress.is_live(),
                () = tokio::time::sleep_until(show_at), if unshown => {
                    unshown = false;
                    show_at = Instant::now() + SHOW_EVERY;
                    run.progress.report(vec![ToolContent::Text(self.output.preview())]);
                }
                exit = self.child.wait(), if status.is_none() && grace_until.is_none() => {
                    status = Some(exit);
                    grace_until = Some(Instant::now() + OUTPUT_GRACE);
                }
                () = sleep_until_some(grace_until) => {
                    if let Some(status) = status.take() {
                        return Ending::Exited(status);
                    }
                }
            }
        }
    }

    fn exited(mut self, status: std::io::Result<ExitStatus>) -> Result<ShellOutput, ToolError> {
        // Processes it left in the background keep running, as in a terminal.
        self.tree.release();
        let status = status
            .map_err(|err| ToolError::Failed(format!("could not wait for the command: {err}")))?;
        let (output, omitted_bytes) = self.output.finish();
        Ok(ShellOutput {
            exit_code: status.code(),
            signal: platform::exit_signal(status),
            output,
            timed_out: false,
            omitted_bytes,
            terminal_id: None,
        })
    }

    async fn cancelled(mut self) -> Result<ShellOutput, ToolError> {
        self.tree.kill();
        let _ = tokio::time::timeout(AFTER_KILL, self.child.wait()).await;
        Err(ToolError::Cancelled)
    }

    /// Kills the command; what was already in the pipes is part of the answer.
    async fn timed_out(mut self) -> ShellOutput {
        self.tree.kill();
        let drain = async {
            while !self.pipes.closed() {
                self.pipes.read_into(&mut self.output).await;
            }
        };
        let _ = tokio::time::timeout(AFTER_KILL, drain).await;
        let status = tokio::time::timeout(AFTER_KILL, self.child.wait()).await;
        let signal = match status {
            Ok(Ok(status)) => platform::exit_signal(status),
            _ => platform::KILL_SIGNAL,
        };
        let (output, omitted_bytes) = self.output.finish();
        ShellOutput {
            exit_code: None,
            signal,
            output,
            timed_out: true,
            omitted_bytes,
            terminal_id: None,
        }
    }
}

/// The command's stdout and stderr, interleaved as their bytes come.
struct Pipes {
    stdout: Pipe<ChildStdout>,
    stderr: Pipe<ChildStderr>,
}

impl Pipes {
    fn closed(&self) -> bool {
        self.stdout.reader.is_none() && self.stderr.reader.is_none()
    }

    /// Adds what either pipe has next to `output`. Once both are closed it
    /// never answers.
    async fn read_into(&mut self, output: &mut CappedOutput) {
        let bytes = tokio::select! {
            biased;
            bytes = self.stdout.next() => bytes,
            bytes = self.stderr.next() => bytes,
        };
        output.push(bytes);
    }
}

struct Pipe<R> {
    reader: Option<R>,
    buf: [u8; 8192],
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    fn new(reader: Option<R>) -> Self {
        Self {
            reader,
            buf: [0; 8192],
        }
    }

    /// Some bytes, or none at the pipe's end (or on a read error), after
    /// which the pipe is closed. A closed pipe never answers.
    async fn next(&mut self) -> &[u8] {
        let Some(reader) = &mut self.reader else {
            return std::future::pending().await;
        };
        match reader.read(&mut self.buf).await {
            Ok(0) | Err(_) => {
                self.reader = None;
                &[]
            }
            Ok(bytes) => &self.buf[..bytes],
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Keeps the first and the last half of the cap and counts what falls
/// between: the start shows what ran, the end how it finished.
pub(super) struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    omitted: u64,
}

impl CappedOutput {
    pub(super) fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            omitted: 0,
        }
    }

    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > self.tail_cap {
            let excess = self.tail.len() - self.tail_cap;
            self.tail.drain(..excess);
            self.omitted += excess as u64;
        }
    }

    /// The text so far, for showing while the command runs.
    fn preview(&self) -> String {
        let mut bytes = self.head.clone();
        if self.omitted > 0 {
            bytes.extend_from_slice(b"\n[...]\n");
        }
        bytes.extend(self.tail.iter());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The text, and how many bytes were left out.
    pub(super) fn finish(self) -> (String, u64) {
        let mut head = self.head;
        let mut tail: Vec<u8> = self.tail.into();
        if self.omitted == 0 {
            head.extend_from_slice(&tail);
            return (String::from_utf8_lossy(&head).into_owned(), 0);
        }
        // Cut on character boundaries, counting the cut bytes as omitted.
        let mut omitted = self.omitted;
        if let Err(err) = std::str::from_utf8(&head)
            && err.error_len().is_none()
        {
            omitted += (head.len() - err.valid_up_to()) as u64;
            head.truncate(err.valid_up_to());
        }
        let continuation = tail
            .iter()
            .take(3)
            .take_while(|byte| (**byte & 0xC0) == 0x80)
            .count();
        tail.drain(..continuation);
        omitted += continuation as u64;
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[output truncated: {omitted} bytes omitted]\n"));
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, omitted)
    }
}

// The tests speak `sh`.
#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    /// Runs `command` in an empty directory, keeping 1000 bytes of output.
    async fn run(command: &str, timeout: Duration) -> Result<ShellOutput, ToolError> {
        let dir = tempfile::tempdir().unwrap();
        run_in(dir.path(), command, timeout, &CancellationToken::new()).await
    }

    /// Runs `command`, which must be over in five seconds (killed, or done
    /// though it left something running).
    async fn run_briefly(command: &str, timeout: Duration) -> ShellOutput {
        let started = std::time::Instant::now();
        let out = run(command, timeout).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "{command}");
        out
    }

    async fn run_in(
        cwd: &Path,
        command: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ShellOutput, ToolError> {
        let progress = Progress::default();
        let env: Vec<(String, String)> = std::env::vars().collect();
        let run = ShellRun {
            command,
            cwd,
            env: &env,
            timeout,
            output_cap: 1000,
            cancel,
            progress: &progress,
            confinement: None,
        };
        LocalShell.run(run).await
    }

    fn process_is_gone(pid: i32) -> bool {
        // A zombie has exited; only its parent's reaping is pending.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
            Err(_) => true,
        }
    }

    async fn wait_until_gone(pid: i32) -> bool {
        for _ in 0..50 {
            if process_is_gone(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    #[tokio::test]
    async fn reports_exit_codes_and_both_streams() {
        let ok = run("echo out; echo err >&2", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(ok.exit_code, Some(0));
        assert!(ok.success());
        assert!(ok.output.contains("out\n"), "{:?}", ok.output);
        assert!(ok.output.contains("err\n"), "{:?}", ok.output);
        assert!(!ok.timed_out);

        let failed = run("exit 3", Duration::from_secs(10)).await.unwrap();
        assert_eq!(failed.exit_code, Some(3));
        assert!(!failed.success());

        let killed = run("kill -TERM $$", Duration::from_secs(10)).await.unwrap();
        assert_eq!(killed.exit_code, None);
        assert_eq!(killed.signal, Some(libc::SIGTERM));
    }

    #[tokio::test]
    async fn runs_in_the_given_directory_with_no_stdin() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker"), "").unwrap();
        let cancel = CancellationToken::new();
        let out = run_in(
            dir.path(),
            "ls; cat; echo done",
            Duration::from_secs(10),
            &cancel,
        )
        .await
        .unwrap();
        assert_eq!(out.output, "marker\ndone\n");
    }

    #[tokio::test]
    async fn caps_output_keeping_the_start_and_the_end() {
        let out = run("seq 1 100000", Duration::from_secs(10)).await.unwrap();
        assert!(out.output.starts_with("1\n2\n3\n"), "{}", out.output);
        assert!(out.output.ends_with("99999\n100000\n"), "{}", out.output);
        assert!(out.output.contains("[output truncated: "), "{}", out.output);
        assert!(out.omitted_bytes > 500_000);
        assert!(out.output.len() < 1100, "{}", out.output.len());
        let total: u64 = (1..=100_000u64)
            .map(|n| n.to_string().len() as u64 + 1)
            .sum();
        assert_eq!(total, 1000 + out.omitted_bytes);
    }

    #[test]
    fn capping_cuts_on_character_boundaries() {
        let mut capped = CappedOutput::new(8);
        capped.push("ééééééééé".as_bytes());
        let (text, omitted) = capped.finish();
        assert!(!text.contains('\u{FFFD}'), "{text}");
        assert_eq!(text, "éé\n[output truncated: 10 bytes omitted]\néé");
        assert_eq!(omitted, 10);
    }

    #[tokio::test]
    async fn a_timeout_kills_the_command_and_keeps_its_output() {
        let out = run_briefly("echo started; sleep 30", Duration::from_secs(1)).await;
        assert!(out.timed_out);
        assert_eq!(out.exit_code, None);
        assert_eq!(out.signal, Some(libc::SIGKILL));
        assert_eq!(out.output, "started\n");
    }

    #[tokio::test]
    async fn cancel_kills_the_whole_process_tree() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        let pid_file = dir.path().join("pid");
        let started = std::time::Instant::now();
        let command = "sleep 30 & echo $! > pid; wait";
        let run = run_in(dir.path(), command, Duration::from_secs(60), &cancel);
        let cancel_soon = async {
            for _ in 0..50 {
                if std::fs::read_to_string(&pid_file).is_ok_and(|pid| pid.ends_with('\n')) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            canceller.cancel();
        };
        let (result, ()) = tokio::join!(run, cancel_soon);
        assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            wait_until_gone(pid).await,
            "sleep {pid} survived the cancel"
        );
    }

    #[tokio::test]
    async fn an_already_cancelled_token_runs_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let result = run_in(dir.path(), "touch ran", Duration::from_secs(5), &cancel).await;
        assert!(matches!(result, Err(ToolError::Cancelled)));
        assert!(!dir.path().join("ran").exists());
    }

    #[tokio::test]
    async fn background_processes_holding_the_output_do_not_block() {
        let out = run_briefly("sleep 30 & echo $!", Duration::from_secs(20)).await;
        assert_eq!(out.exit_code, Some(0));
        let pid: i32 = out.output.trim().parse().unwrap();
        // SAFETY: signals the test's own background sleep.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    #[tokio::test]
    async fn output_is_shown_while_the_command_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (cancel, (progress, mut reports)) = (CancellationToken::new(), Progress::channel());
        let run = ShellRun {
            command: "echo begun; sleep 2; echo ended",
            cwd: dir.path(),
            env: &[],
            timeout: Duration::from_secs(10),
            output_cap: 1000,
            cancel: &cancel,
            progress: &progress,
            confinement: None,
        };
        let shown = tokio::spawn(async move {
            let first = reports.recv().await;
            (first, std::time::Instant::now())
        });
        let out = LocalShell.run(run).await.unwrap();
        let ended = std::time::Instant::now();
        let (first, shown_at) = shown.await.unwrap();
        assert_eq!(first, Some(vec![ToolContent::Text("begun\n".into())]));
        assert!(shown_at < ended, "shown before the end");
        assert_eq!(out.output, "begun\nended\n");
    }

    #[tokio::test]
    async fn a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let cancel = CancellationToken::new();
        let err = run_in(&missing, "true", Duration::from_secs(5), &cancel)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("could not start"), "{err}");
    }
}

/// Commands run in the sandbox (where this machine has one).
#[cfg(test)]
#[cfg(unix)]
mod confined_tests {
    use std::path::PathBuf;

    use super::*;
    use crate::tools::sandbox::{Confinement, SandboxMode, SandboxSettings, Support, temp_dirs};

    /// A fresh directory that is not under any temp directory (which every
    /// confined command may write to): under `target/`, or under HOME when
    /// the checkout itself lives in a temp directory (as CI's clone may).
    fn outside_temp_dirs() -> tempfile::TempDir {
        let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target"));
        let temps = temp_dirs(&std::env::vars().collect::<Vec<_>>());
        let base = if temps.iter().any(|temp| target.starts_with(temp)) {
            let home =
                std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
            home.join(".cache/crucible-agent-sandbox-tests")
        } else {
            target
        };
        std::fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(base).unwrap()
    }

    fn available() -> bool {
        let support = Support::probe();
        if !support.is_available() {
            eprintln!("skipped: no Landlock here ({support:?})");
        }
        support.is_available()
    }

    async fn confined(cwd: &Path, command: &str, confinement: &Confinement) -> ShellOutput {
        let (cancel, progress) = (CancellationToken::new(), Progress::default());
        let env: Vec<(String, String)> = std::env::vars().collect();
        let run = ShellRun {
            command,
            cwd,
            env: &env,
            timeout: Duration::from_secs(20),
            output_cap: 10_000,
            cancel: &cancel,
            progress: &progress,
            confinement: Some(confinement),
        };
        LocalShell.run(run).await.unwrap()
    }

    #[tokio::test]
    async fn writes_only_inside_the_roots_and_temp() {
        if !available() {
            return;
        }
        // Neither under /tmp, which every confined command may write to.
        let cwd = outside_temp_dirs();
        let outside = outside_temp_dirs();
        let settings = SandboxSettings::default();
        let roots = [cwd.path().to_path_buf()];
        let confinement =
            Confinement::new(SandboxMode::WorkspaceWrite, &settings, &roots, &[]).unwrap();
        let inside = confined(cwd.path(), "echo hi > inside && cat inside", &confinement).await;
        assert_eq!(inside.output, "hi\n");
        let target = outside.path().join("f");
        let command = format!("echo x > {}", target.display());
        let blocked = confined(cwd.path(), &command, &confinement).await;
        assert!(!blocked.success(), "{}", blocked.output);
        assert!(!target.exists());
        let explained = confinement.explain(&blocked.output, cwd.path()).unwrap();
        assert!(
            explained.contains(&target.display().to_string()),
            "{explained}"
        );
        let read_only = Confinement::new(SandboxMode::ReadOnly, &settings, &roots, &[]).unwrap();
        let refused = confined(cwd.path(), "touch mine", &read_only).await;
        assert!(!refused.success());
        assert!(!cwd.path().join("mine").exists());
    }

    /// The attacks of docs/sandbox-attacks.md that the sandbox stops.
    #[tokio::test]
    async fn the_listed_attacks_are_blocked() {
        if !available() {
            return;
        }
        let (cwd, outside) = (outside_temp_dirs(), outside_temp_dirs());
        let o = outside.path().display();
        std::fs::write(outside.path().join("victim"), "v\n").unwrap();
        std::fs::create_dir(outside.path().join("dir")).unwrap();
        let roots = [cwd.path().to_path_buf()];
        let settings = SandboxSettings::default();
        let c = Confinement::new(SandboxMode::WorkspaceWrite, &settings, &roots, &[]).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let failing = [
            format!("rm -rf {o}/dir"),
            format!("mv {o}/victim ./stolen"),
            format!("ln {o}/victim ./hard && echo x >> ./hard"),
            format!("ln -s {o}/victim ./soft && echo x >> ./soft"),
            format!("echo x >> /proc/self/root{o}/victim"),
            format!("truncate -s 0 {o}/victim"),
            format!("mkfifo {o}/fifo"),
            format!("unshare -m sh -c 'mount -t tmpfs none {o}/dir && touch {o}/dir/x'"),
            format!("cd / && touch {o}/abs"),
            format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'"),
            "/usr/bin/python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0))\""
                .to_string(),
        ];
        for attack in &failing {
            let out = confined(cwd.path(), attack, &c).await;
            assert!(!out.success(), "{attack}: {}", out.output);
        }
        // Something left running keeps the sandbox.
        let late = format!("(sleep 0.2; touch {o}/late) & sleep 0.5");
        confined(cwd.path(), &late, &c).await;
        let victim = std::fs::read_to_string(outside.path().join("victim")).unwrap();
        assert_eq!(victim, "v\n");
        assert!(outside.path().join("dir").is_dir());
        for made in ["late", "abs", "fifo", "dir/x"] {
            assert!(!outside.path().join(made).exists(), "{made}");
        }
    }
}
