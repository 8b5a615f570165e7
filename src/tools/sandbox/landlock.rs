//! Landlock: whether the kernel has it, and the ruleset a confined command
//! restricts itself with between fork and exec. The agent never restricts
//! itself; only the child does, so each command gets a fresh domain.

use std::io;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{Confinement, Confiner, Network, SandboxError, Support};
use crate::platform::CommandLine;

/// The Landlock ABI the rules are written for (vetted here: file access
/// with truncate and device ioctls, TCP connect and bind, abstract-socket
/// scoping). Older kernels enforce what they know of it.
const TARGET_ABI: ABI = ABI::V6;

/// The first ABI that controls TCP connect and bind.
const NETWORK_ABI: i32 = 4;

/// Landlock, the Linux sandbox.
pub(super) struct Landlock;

impl Confiner for Landlock {
    /// Asks the kernel for its Landlock ABI.
    fn probe() -> Support {
        // LANDLOCK_CREATE_RULESET_VERSION: the call returns the ABI version.
        const VERSION: libc::c_uint = 1;
        // SAFETY: with a null attribute pointer, size 0 and the VERSION
        // flag, the kernel reads no memory of ours and only returns a number.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                VERSION,
            )
        };
        if abi > 0 {
            let abi = i32::try_from(abi).unwrap_or(i32::MAX);
            return Support::Available {
                mechanism: format!("Landlock ABI {abi}"),
                network_gap: (abi < NETWORK_ABI).then(|| format!(
                    "this kernel (Landlock ABI {abi}) cannot turn the network off for commands (ABI {NETWORK_ABI}, Linux 6.7, is needed)"
                )),
            };
        }
        let reason = match io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into this kernel but not enabled at boot (add `landlock` to the `lsm=` kernel parameter)"
            }
            _ => {
                "this kernel has no Landlock (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK is needed)"
            }
        };
        Support::Unavailable(reason.to_string())
    }

    /// The command restricts itself between fork and exec.
    fn command(
        confinement: &Confinement,
        line: &CommandLine,
    ) -> Result<tokio::process::Command, SandboxError> {
        let mut command = line.command();
        let ruleset = ruleset(&confinement.writable, confinement.network)?;
        restrict_child(&mut command, ruleset);
        Ok(command)
    }
}

/// Character devices every program may write (and ioctl): writing to them
/// changes no file.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The ruleset of one command: reads and execution everywhere, writes only
/// beneath `writable` (and the harmless devices), TCP connect and bind
/// denied unless the network is allowed. Built before the fork, where
/// allocating is safe.
fn ruleset(writable: &[PathBuf], network: Network) -> Result<RulesetCreated, SandboxError> {
    let failed = |err: landlock::RulesetError| SandboxError::Ruleset(err.to_string());
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(failed)?;
    if network == Network::Denied {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(failed)?
            // Abstract UNIX sockets (D-Bus, X11, …) are a way out too.
            .scope(Scope::AbstractUnixSocket)
            .map_err(failed)?;
    }
    let mut created = ruleset
        .create()
        .map_err(failed)?
        .add_rule(PathBeneath::new(
            PathFd::new("/").map_err(|err| SandboxError::Ruleset(err.to_string()))?,
            AccessFs::from_read(TARGET_ABI),
        ))
        .map_err(failed)?;
    // Paths that do not exist (no /dev/shm, an unset TMPDIR) are skipped.
    for path in writable {
        if let Ok(fd) = PathFd::new(path) {
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_all(TARGET_ABI)))
                .map_err(failed)?;
        }
    }
    for device in DEVICES {
        if let Ok(fd) = PathFd::new(device) {
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_file(TARGET_ABI)))
                .map_err(failed)?;
        }
    }
    Ok(created)
}

/// Makes `command` restrict itself with `ruleset` in the child, after the
/// fork and before the exec.
fn restrict_child(command: &mut tokio::process::Command, ruleset: RulesetCreated) {
    let mut ruleset = Some(ruleset);
    let restrict = move || -> io::Result<()> {
        // Only system calls here: the child of a multi-threaded parent must
        // not allocate or lock. restrict_self sets no_new_privs, then
        // landlock_restrict_self; its errors carry the errno, no heap.
        let Some(ruleset) = ruleset.take() else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        match ruleset.restrict_self() {
            // Never run a command unconfined that was meant to be confined.
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
    };
    // SAFETY: the closure makes only system calls (see above) and touches
    // only memory it owns, as pre_exec requires.
    unsafe {
        command.pre_exec(restrict);
    }
}
