//! Seatbelt, the macOS sandbox: the command runs under
//! `/usr/bin/sandbox-exec` with a profile generated for it
//! ([`super::seatbelt_profile`]), as codex-rs does. Everything the command
//! starts inherits the profile.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

use super::seatbelt_profile::profile;
use super::{Confinement, Confiner, SandboxError, Support};
use crate::platform::CommandLine;

/// Where macOS keeps it (absolute: PATH must not pick another).
const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

pub(super) struct Seatbelt;

impl Confiner for Seatbelt {
    /// Runs `true` under the most permissive profile once: that fails where
    /// sandbox-exec is missing or cannot apply a profile (the agent itself
    /// already in a sandbox, which cannot be nested).
    fn probe() -> Support {
        static PROBED: OnceLock<Support> = OnceLock::new();
        PROBED
            .get_or_init(|| {
                let status = std::process::Command::new(SANDBOX_EXEC)
                    .args(["-p", "(version 1)(allow default)", "/usr/bin/true"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                match status {
                    Ok(status) if status.success() => Support::Available {
                        mechanism: "Seatbelt (sandbox-exec)".into(),
                        network_gap: None,
                    },
                    Ok(status) => Support::Unavailable(format!(
                        "{SANDBOX_EXEC} cannot apply a profile here ({status}); is the agent itself in a sandbox?"
                    )),
                    Err(err) => Support::Unavailable(format!("{SANDBOX_EXEC} cannot run: {err}")),
                }
            })
            .clone()
    }

    fn command(
        confinement: &Confinement,
        line: &CommandLine,
    ) -> Result<tokio::process::Command, SandboxError> {
        // Seatbelt matches real paths (/private/tmp for /tmp); a directory
        // that does not exist is skipped, as with Landlock.
        let writable: Vec<PathBuf> = (confinement.writable.iter())
            .filter_map(|dir| std::fs::canonicalize(dir).ok())
            .collect();
        let profile = profile(&writable, confinement.network);
        let mut command = tokio::process::Command::new(SANDBOX_EXEC);
        command
            .args(profile.args())
            .arg("--")
            .arg(&line.program)
            .args(&line.args);
        Ok(command)
    }
}
