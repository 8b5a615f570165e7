//! What differs between operating systems, behind one trait ([`Platform`])
//! with one implementation per platform: `platform/unix.rs` (Linux and
//! macOS) and `platform/windows.rs`. The rest of the crate names no
//! platform; it calls the functions here. The command sandbox has its own
//! per-platform files (`tools/sandbox/{landlock,seatbelt,none}.rs`). The
//! README's "Platforms" table lists every difference and how it is handled.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;

use tokio::process::{Child, Command};

#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

#[cfg(unix)]
type Current = unix::Unix;
#[cfg(windows)]
type Current = windows::Windows;

/// What each operating system provides.
pub trait Platform {
    /// A started process and everything it starts, held so they end together.
    type Tree: ProcessTree;
    /// The signal a kill ends a process with, where processes have signals.
    const KILL_SIGNAL: Option<i32>;
    /// The variables a program needs to run normally.
    const CORE_VARIABLES: &'static [&'static str];
    /// Whether variable names are compared without regard to case.
    const ENV_NAMES_IGNORE_CASE: bool;
    /// The interpreter for the model's command lines (looked up once).
    fn interpreter() -> Interpreter;
    /// A process for `line`, not started yet.
    fn command(line: &CommandLine) -> Command;
    /// Starts `command` as the root of a [`ProcessTree`].
    fn spawn_tree(command: &mut Command) -> io::Result<(Child, Self::Tree)>;
    /// The signal that ended a process, if one did.
    fn exit_signal(status: ExitStatus) -> Option<i32>;
    /// Resolves when the client closes its end of stdout, even while
    /// nothing is written; never where that cannot be watched (a write
    /// then finds out).
    fn stdout_closed() -> impl Future<Output = ()> + Send;
    /// Resolves when the system asks the agent to stop; never where it
    /// cannot be told.
    fn stop_requested() -> impl Future<Output = ()> + Send;
    /// Makes a rename inside `dir` durable, where a directory can be synced.
    fn sync_dir(dir: &Path) -> io::Result<()>;
}

/// A process tree [`spawn_tree`] started. Dropping it kills whatever
/// still runs in it.
pub trait ProcessTree: Send {
    /// Asks every process in it to end (SIGTERM); where a process cannot
    /// be asked (Windows), ends them.
    fn terminate(&mut self);
    /// Ends every process in it at once.
    fn kill(&mut self);
    /// Lets what still runs in it run on, as a terminal would; a kill or
    /// a drop afterwards does nothing.
    fn release(&mut self);
}

/// The process tree type of this platform.
pub type Tree = <Current as Platform>::Tree;

/// See [`Platform::KILL_SIGNAL`].
pub const KILL_SIGNAL: Option<i32> = <Current as Platform>::KILL_SIGNAL;

/// See [`Platform::CORE_VARIABLES`].
pub const CORE_VARIABLES: &[&str] = <Current as Platform>::CORE_VARIABLES;

/// Whether two variable names name the same variable here.
pub fn same_variable(a: &str, b: &str) -> bool {
    if <Current as Platform>::ENV_NAMES_IGNORE_CASE {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// The interpreter for the model's command lines.
pub fn interpreter() -> &'static Interpreter {
    static FOUND: OnceLock<Interpreter> = OnceLock::new();
    FOUND.get_or_init(Current::interpreter)
}

/// See [`Platform::spawn_tree`].
pub fn spawn_tree(command: &mut Command) -> io::Result<(Child, Tree)> {
    Current::spawn_tree(command)
}

/// See [`Platform::exit_signal`].
pub fn exit_signal(status: ExitStatus) -> Option<i32> {
    Current::exit_signal(status)
}

/// See [`Platform::stdout_closed`].
pub async fn stdout_closed() {
    Current::stdout_closed().await;
}

/// See [`Platform::stop_requested`].
pub async fn stop_requested() {
    Current::stop_requested().await;
}

/// See [`Platform::sync_dir`].
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    Current::sync_dir(dir)
}

/// Whether a program file starts with `header` of a Wine builtin: Wine
/// writes "Wine builtin DLL" after the DOS header of the programs it ships
/// in its own `system32`.
pub fn is_wine_builtin(header: &[u8]) -> bool {
    header
        .get(0x40..0x50)
        .is_some_and(|mark| mark == b"Wine builtin DLL")
}

/// A program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// The arguments go onto the Windows command line as they are, not
    /// quoted (cmd.exe has quoting rules of its own). Never set elsewhere.
    pub verbatim: bool,
}

impl CommandLine {
    pub fn new(program: impl Into<OsString>, args: &[impl AsRef<std::ffi::OsStr>]) -> Self {
        Self {
            program: program.into(),
            args: args.iter().map(|arg| arg.as_ref().to_os_string()).collect(),
            verbatim: false,
        }
    }

    /// A process for it, not started yet.
    pub fn command(&self) -> Command {
        Current::command(self)
    }
}

/// Which interpreter runs command lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterpreterKind {
    /// `sh -c`.
    Sh,
    /// PowerShell (`pwsh`, or Windows PowerShell) with `-Command`.
    PowerShell,
    /// `cmd /C`.
    Cmd,
}

/// The interpreter the model's command lines run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    pub kind: InterpreterKind,
    pub program: PathBuf,
}

impl Interpreter {
    /// The first present of PowerShell 7 (`pwsh`), Windows PowerShell and
    /// `cmd`: what Windows runs command lines with. `find` looks a program
    /// up on PATH; `comspec` is the ComSpec variable, cmd's own path;
    /// `stub` tells a program that only stands in for PowerShell: Wine's
    /// own `powershell.exe` ignores its command and exits 0, so every
    /// command would "succeed" with no output (Wine's `cmd` is real).
    pub fn windows(
        find: impl Fn(&str) -> Option<PathBuf>,
        comspec: Option<PathBuf>,
        stub: impl Fn(&Path) -> bool,
    ) -> Self {
        for name in ["pwsh", "powershell"] {
            if let Some(program) = find(name).filter(|program| !stub(program)) {
                return Self {
                    kind: InterpreterKind::PowerShell,
                    program,
                };
            }
        }
        Self {
            kind: InterpreterKind::Cmd,
            program: find("cmd")
                .or(comspec)
                .unwrap_or_else(|| PathBuf::from("cmd.exe")),
        }
    }

    /// How `line` is run.
    pub fn command_line(&self, line: &str) -> CommandLine {
        let program = self.program.clone().into_os_string();
        match self.kind {
            InterpreterKind::Sh => CommandLine::new(program, &["-c", line]),
            InterpreterKind::PowerShell => CommandLine::new(
                program,
                &["-NoLogo", "-NoProfile", "-NonInteractive", "-Command", line],
            ),
            // As Node.js runs a shell command on Windows: no AutoRun
            // commands (/D), and everything between the outer quotes taken
            // as it is (/S).
            InterpreterKind::Cmd => CommandLine {
                program,
                args: ["/D", "/S", "/C"]
                    .into_iter()
                    .map(OsString::from)
                    .chain([OsString::from(format!("\"{line}\""))])
                    .collect(),
                verbatim: true,
            },
        }
    }

    /// How the shell tool names it to the model.
    pub fn describe(&self) -> String {
        let name = self
            .program
            .file_stem()
            .map_or_else(String::new, |stem| stem.to_string_lossy().into_owned());
        match self.kind {
            InterpreterKind::Sh => "`sh -c`".to_string(),
            InterpreterKind::PowerShell => {
                format!("PowerShell (`{name} -Command`; PowerShell syntax, not POSIX sh)")
            }
            InterpreterKind::Cmd => {
                "`cmd /C` (Windows cmd.exe syntax, not POSIX sh; no PowerShell here)".to_string()
            }
        }
    }

    /// The program's name, for messages.
    pub fn name(&self) -> String {
        Path::new(&self.program)
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_path(present: &'static [&'static str]) -> impl Fn(&str) -> Option<PathBuf> {
        move |name| {
            present
                .contains(&name)
                .then(|| PathBuf::from(format!("C:\\bin\\{name}.exe")))
        }
    }

    #[test]
    fn windows_prefers_powershell_7_then_windows_powershell_then_cmd() {
        let table: [(&[&str], InterpreterKind, &str); 4] = [
            (
                &["pwsh", "powershell", "cmd"],
                InterpreterKind::PowerShell,
                "pwsh",
            ),
            (
                &["powershell", "cmd"],
                InterpreterKind::PowerShell,
                "powershell",
            ),
            (&["cmd"], InterpreterKind::Cmd, "cmd"),
            (&[], InterpreterKind::Cmd, "comspec"),
        ];
        for (present, kind, program) in table {
            let chosen = Interpreter::windows(
                on_path(present),
                Some(PathBuf::from("C:\\bin\\comspec.exe")),
                |_| false,
            );
            assert_eq!(chosen.kind, kind, "{present:?}");
            assert!(
                chosen.program.to_string_lossy().contains(program),
                "{present:?}: {chosen:?}"
            );
        }
        let bare = Interpreter::windows(on_path(&[]), None, |_| false);
        assert_eq!(bare.program, PathBuf::from("cmd.exe"));
    }

    #[test]
    fn a_stub_powershell_is_passed_over_for_the_next() {
        let all = on_path(&["pwsh", "powershell", "cmd"]);
        let named = |path: &Path, name: &str| path.to_string_lossy().ends_with(name);
        let no_pwsh = Interpreter::windows(&all, None, |p| named(p, "pwsh.exe"));
        assert_eq!(no_pwsh.kind, InterpreterKind::PowerShell);
        assert!(named(&no_pwsh.program, "powershell.exe"), "{no_pwsh:?}");
        let only_cmd = Interpreter::windows(&all, None, |p| !named(p, "cmd.exe"));
        assert_eq!(only_cmd.kind, InterpreterKind::Cmd);
        assert!(named(&only_cmd.program, "cmd.exe"), "{only_cmd:?}");
    }

    #[test]
    fn wine_builtins_are_told_by_their_mark() {
        let mut header = vec![0u8; 0x40];
        header[..2].copy_from_slice(b"MZ");
        assert!(!is_wine_builtin(&header), "too short");
        header.extend_from_slice(b"Wine builtin DLL");
        assert!(is_wine_builtin(&header));
        header[0x40] = b'X';
        assert!(!is_wine_builtin(&header), "a program Windows ships");
    }

    #[test]
    fn each_interpreter_gets_the_line_as_it_parses_it() {
        let line = r#"echo "a b" && exit 3"#;
        let sh = Interpreter {
            kind: InterpreterKind::Sh,
            program: "sh".into(),
        };
        assert_eq!(sh.command_line(line), CommandLine::new("sh", &["-c", line]));
        let ps = Interpreter {
            kind: InterpreterKind::PowerShell,
            program: "pwsh".into(),
        };
        let ps_line = ps.command_line(line);
        assert_eq!(ps_line.args.last(), Some(&OsString::from(line)));
        assert!(!ps_line.verbatim);
        assert!(ps.describe().contains("PowerShell (`pwsh -Command`"));
        let cmd = Interpreter {
            kind: InterpreterKind::Cmd,
            program: "cmd.exe".into(),
        };
        let cmd_line = cmd.command_line(line);
        assert!(
            cmd_line.verbatim,
            "cmd.exe does not unquote as other programs do"
        );
        let args: Vec<_> = cmd_line.args.iter().map(|a| a.to_string_lossy()).collect();
        assert_eq!(args, ["/D", "/S", "/C", r#""echo "a b" && exit 3""#]);
        assert!(cmd.describe().contains("cmd /C"));
    }

    #[test]
    fn variable_names_compare_as_this_platform_does() {
        assert!(same_variable("PATH", "PATH"));
        assert_eq!(same_variable("Path", "PATH"), cfg!(windows));
    }
}
