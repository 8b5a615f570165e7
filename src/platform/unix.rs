//! Linux and macOS: `sh -c`, a process group per command (killed with one
//! `kill(-pgid)`), signals, `poll` on stdout for a closed pipe, SIGTERM.

use std::future::Future;
use std::io;
use std::path::Path;
use std::process::ExitStatus;

use tokio::process::{Child, Command};

use super::{CommandLine, Interpreter, InterpreterKind, Platform, ProcessTree};

pub struct Unix;

impl Platform for Unix {
    type Tree = ProcessGroup;
    const KILL_SIGNAL: Option<i32> = Some(libc::SIGKILL);
    const CORE_VARIABLES: &'static [&'static str] = &[
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR",
    ];
    const ENV_NAMES_IGNORE_CASE: bool = false;

    fn interpreter() -> Interpreter {
        Interpreter {
            kind: InterpreterKind::Sh,
            program: "sh".into(),
        }
    }

    fn command(line: &CommandLine) -> Command {
        let mut command = Command::new(&line.program);
        command.args(&line.args);
        command
    }

    fn spawn_tree(command: &mut Command) -> io::Result<(Child, ProcessGroup)> {
        let child = command.process_group(0).spawn()?;
        let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
        Ok((child, ProcessGroup { pgid }))
    }

    fn exit_signal(status: ExitStatus) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }

    fn stdout_closed() -> impl Future<Output = ()> + Send {
        stdout_closed()
    }

    fn stop_requested() -> impl Future<Output = ()> + Send {
        terminate_signal()
    }

    fn sync_dir(dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }
}

/// The command's process group (its id is the command's pid).
pub struct ProcessGroup {
    /// None once killed or released.
    pgid: Option<libc::pid_t>,
}

impl ProcessGroup {
    fn signal(&self, signal: libc::c_int) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals that process
            // group; it touches no memory of ours.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

impl ProcessTree for ProcessGroup {
    fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        self.pgid = None;
    }

    fn release(&mut self) {
        self.pgid = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A write finds a closed stdout only at the next message, and a turn
/// waiting on a long command may write nothing for minutes; the pipe
/// reports it at once (`POLLERR` on a pipe whose reader is gone). Never
/// resolves for a file, `/dev/null`, or a terminal that stays open.
async fn stdout_closed() {
    let (closed, told) = tokio::sync::oneshot::channel();
    let watching = std::thread::Builder::new()
        .name("stdout-watch".into())
        .spawn(move || {
            loop {
                // No events asked for: only errors and hang-ups are reported.
                let mut stdout = libc::pollfd {
                    fd: libc::STDOUT_FILENO,
                    events: 0,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, alive for the whole call.
                let ready = unsafe { libc::poll(&mut stdout, 1, -1) };
                if ready < 0 {
                    if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return; // cannot watch: the writer still finds out on its next write
                }
                if stdout.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                    let _ = closed.send(());
                    return;
                }
            }
        });
    if watching.is_err() || told.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves on SIGTERM; never when the handler cannot be installed (the
/// default action, exiting at once, then stays).
async fn terminate_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            terminate.recv().await;
        }
        Err(err) => {
            tracing::warn!(%err, "cannot handle SIGTERM");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn alive(pid: libc::pid_t) -> bool {
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) == 0 }
    }

    /// The pid a command printed on its first line.
    async fn first_pid(child: &mut Child) -> libc::pid_t {
        use tokio::io::AsyncBufReadExt;
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        lines
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[tokio::test]
    async fn a_kill_ends_the_whole_group_and_a_release_leaves_it() {
        let line = Unix::interpreter().command_line("sleep 30 & echo $!; wait");
        let mut command = line.command();
        command.stdout(std::process::Stdio::piped());
        let (mut child, mut tree) = spawn_tree(&mut command).unwrap();
        let grandchild = first_pid(&mut child).await;
        assert!(alive(grandchild));
        tree.kill();
        let _ = child.wait().await;
        let mut gone = false;
        for _ in 0..50 {
            // Reaped by init once killed; a zombie's kill(0) still succeeds briefly.
            if !alive(grandchild) || is_zombie(grandchild) {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(gone, "the background sleep survived the kill");

        let mut command = Unix::interpreter()
            .command_line("sleep 30 & echo $!")
            .command();
        command.stdout(std::process::Stdio::piped());
        let (mut child, mut tree) = spawn_tree(&mut command).unwrap();
        let left = first_pid(&mut child).await;
        let _ = child.wait().await;
        tree.release();
        drop(tree);
        assert!(alive(left), "a released group keeps running");
        // SAFETY: ends the test's own background sleep.
        unsafe {
            libc::kill(left, libc::SIGKILL);
        }
    }

    fn spawn_tree(command: &mut Command) -> io::Result<(Child, ProcessGroup)> {
        Unix::spawn_tree(command)
    }

    fn is_zombie(pid: libc::pid_t) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    }
}
