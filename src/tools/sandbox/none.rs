//! Platforms without a command sandbox the agent can use (Windows): the
//! session says so once, commands run with the user's full rights, and in
//! `auto` mode each command asks first, as on a Linux without Landlock.

use super::{Confinement, Confiner, SandboxError, Support};
use crate::platform::CommandLine;

pub(super) struct NoSandbox;

impl Confiner for NoSandbox {
    fn probe() -> Support {
        Support::Unavailable(format!(
            "the agent has no command sandbox on {}",
            std::env::consts::OS
        ))
    }

    /// Never asked: without support no command is confined.
    fn command(
        _confinement: &Confinement,
        _line: &CommandLine,
    ) -> Result<tokio::process::Command, SandboxError> {
        Err(SandboxError::Ruleset(format!(
            "there is no command sandbox on {}",
            std::env::consts::OS
        )))
    }
}
