//! Windows: PowerShell or `cmd /C`, a Job Object per command (it ends the
//! whole tree on a kill, and by itself when the agent exits however it
//! exits: kill-on-close), no signals, no stdout watch, console close.

use std::ffi::c_void;
use std::fs::File;
use std::future::Future;
use std::io;
use std::io::Read;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use tokio::process::{Child, Command};
use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NO_WINDOW, CREATE_SUSPENDED, OpenThread, ResumeThread, THREAD_SUSPEND_RESUME,
};

use super::{CommandLine, Interpreter, Platform, ProcessTree};

pub struct Windows;

impl Platform for Windows {
    type Tree = Job;
    const KILL_SIGNAL: Option<i32> = None;
    const CORE_VARIABLES: &'static [&'static str] = &[
        "PATH",
        "PATHEXT",
        "SystemRoot",
        "SystemDrive",
        "windir",
        "ComSpec",
        "TEMP",
        "TMP",
        "USERPROFILE",
        "USERNAME",
        "HOMEDRIVE",
        "HOMEPATH",
        "APPDATA",
        "LOCALAPPDATA",
        "ProgramData",
        "ProgramFiles",
        "ProgramFiles(x86)",
        "CommonProgramFiles",
        "PROCESSOR_ARCHITECTURE",
        "NUMBER_OF_PROCESSORS",
        "OS",
    ];
    const ENV_NAMES_IGNORE_CASE: bool = true;

    fn interpreter() -> Interpreter {
        Interpreter::windows(
            |name| which::which(name).ok(),
            std::env::var_os("ComSpec").map(PathBuf::from),
            wine_builtin,
        )
    }

    fn command(line: &CommandLine) -> Command {
        // std looks for `name.exe` only; `npx` is `npx.cmd`: PATHEXT decides.
        let program = which::which(&line.program).map_or_else(|_| line.program.clone(), Into::into);
        let mut command = Command::new(program);
        if line.verbatim {
            for arg in &line.args {
                command.raw_arg(arg);
            }
        } else {
            command.args(&line.args);
        }
        command
    }

    /// Started suspended, put in a new job, then let run: nothing it
    /// starts can escape the job before it is in it.
    fn spawn_tree(command: &mut Command) -> io::Result<(Child, Job)> {
        let job = Job::new()?;
        // No console window pops up for each command when the agent has none.
        command.creation_flags(CREATE_SUSPENDED | CREATE_NO_WINDOW);
        let mut child = command.spawn()?;
        let started = child
            .raw_handle()
            .ok_or_else(|| io::Error::other("the started process has no handle"))
            .and_then(|process| job.assign(process))
            .and_then(|()| resume(child.id()));
        match started {
            Ok(()) => Ok((child, job)),
            Err(err) => {
                let _ = child.start_kill();
                Err(err)
            }
        }
    }

    fn exit_signal(_status: ExitStatus) -> Option<i32> {
        None
    }

    /// An anonymous pipe cannot be watched for its reader going away; the
    /// writer finds out at its next write (README, "Platforms").
    fn stdout_closed() -> impl Future<Output = ()> + Send {
        std::future::pending()
    }

    fn stop_requested() -> impl Future<Output = ()> + Send {
        console_closed()
    }

    /// A directory cannot be opened as a file here (`File::open` is
    /// refused), and NTFS journals a rename itself: nothing to do.
    fn sync_dir(_dir: &Path) -> io::Result<()> {
        Ok(())
    }
}

/// Whether `program` is one of the programs Wine ships in its own
/// `system32` (see [`super::is_wine_builtin`]).
fn wine_builtin(program: &Path) -> bool {
    let mut header = [0u8; 0x50];
    File::open(program)
        .and_then(|mut file| file.read_exact(&mut header))
        .is_ok_and(|()| super::is_wine_builtin(&header))
}

/// A Job Object holding one command's process tree, set to kill every
/// process in it when its last handle closes (also when the agent dies).
pub struct Job {
    /// None once killed or released.
    handle: Option<OwnedHandle>,
}

fn check(ok: i32) -> io::Result<()> {
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Job {
    fn new() -> io::Result<Self> {
        // SAFETY: null attributes and name: an unnamed job, not inheritable.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a handle just returned to us, owned by nobody else.
        let handle = unsafe { OwnedHandle::from_raw_handle(raw) };
        let job = Self {
            handle: Some(handle),
        };
        job.set_limits(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)?;
        Ok(job)
    }

    fn raw(&self) -> Option<HANDLE> {
        self.handle.as_ref().map(|handle| handle.as_raw_handle())
    }

    fn set_limits(&self, flags: u32) -> io::Result<()> {
        let Some(job) = self.raw() else {
            return Ok(());
        };
        let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        limits.BasicLimitInformation.LimitFlags = flags;
        // SAFETY: a valid job handle and a struct of the size given, alive
        // for the call.
        check(unsafe {
            SetInformationJobObject(
                job,
                JobObjectExtendedLimitInformation,
                std::ptr::from_ref(&limits).cast::<c_void>(),
                u32::try_from(size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>()).unwrap_or(0),
            )
        })
    }

    fn assign(&self, process: std::os::windows::io::RawHandle) -> io::Result<()> {
        let Some(job) = self.raw() else {
            return Err(io::Error::other("the job is closed"));
        };
        // SAFETY: both handles are valid for the call.
        check(unsafe { AssignProcessToJobObject(job, process) })
    }
}

impl ProcessTree for Job {
    fn terminate(&mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(job) = self.raw() {
            // SAFETY: a valid job handle.
            unsafe {
                TerminateJobObject(job, 1);
            }
        }
        self.handle = None;
    }

    fn release(&mut self) {
        // Closing the handle would kill what is left: lift that first.
        if self.set_limits(0).is_ok() {
            self.handle = None;
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Resumes every thread of the suspended process `pid` (a new process has
/// one). std gives no handle to it, so the threads are found by a snapshot.
fn resume(pid: Option<u32>) -> io::Result<()> {
    let pid = pid.ok_or_else(|| io::Error::other("the started process has no id"))?;
    // SAFETY: a snapshot of all threads; closed below.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == INVALID_HANDLE_VALUE || snapshot.is_null() {
        return Err(io::Error::last_os_error());
    }
    let mut entry = THREADENTRY32 {
        dwSize: u32::try_from(size_of::<THREADENTRY32>()).unwrap_or(0),
        ..THREADENTRY32::default()
    };
    let mut resumed = 0;
    // SAFETY: a valid snapshot and an entry whose dwSize is set.
    let mut more = unsafe { Thread32First(snapshot, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: opens one thread of our own child; closed below.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if !thread.is_null() {
                // SAFETY: a valid thread handle, closed right after.
                unsafe {
                    if ResumeThread(thread) != u32::MAX {
                        resumed += 1;
                    }
                    CloseHandle(thread);
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot, &mut entry) } != 0;
    }
    // SAFETY: the snapshot handle from above.
    unsafe {
        CloseHandle(snapshot);
    }
    if resumed == 0 {
        return Err(io::Error::other("could not resume the started process"));
    }
    Ok(())
}

/// Resolves when the console window is closed (the closest Windows has to
/// SIGTERM for a console program); never when that cannot be watched.
async fn console_closed() {
    match tokio::signal::windows::ctrl_close() {
        Ok(mut closed) => {
            closed.recv().await;
        }
        Err(err) => {
            tracing::debug!(%err, "cannot watch for the console closing");
            std::future::pending::<()>().await;
        }
    }
}
