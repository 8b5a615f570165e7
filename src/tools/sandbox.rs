//! The sandbox for commands the model runs (`shell`, and MCP stdio servers
//! that opt in): a command may read everywhere but write only in the
//! session's roots and the temp directories (or only in temp), and opens no
//! network connection unless the network is allowed. The agent itself stays
//! unconfined; each command is confined as it starts, by the platform's
//! [`Confiner`]: Landlock on Linux (`landlock.rs`), Seatbelt on macOS
//! (`seatbelt.rs`), none elsewhere (`none.rs`: commands run unconfined and
//! `auto` asks first). A denied action is explained to the model
//! ([`denial`]); the user may let one blocked command run outside
//! ([`Escalation`]). See the README, "Sandbox".

mod denial;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod none;
#[cfg(target_os = "macos")]
mod seatbelt;
#[cfg(any(target_os = "macos", test))]
mod seatbelt_profile;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use futures::future::BoxFuture;

use crate::events::ToolCallInfo;
use crate::platform::CommandLine;
use crate::util::lock;

/// What a platform's sandbox does: tell whether it works here, and start a
/// command confined.
trait Confiner {
    /// Whether commands can be confined on this machine.
    fn probe() -> Support;
    /// A process running `line` within `confinement`, not started yet.
    fn command(
        confinement: &Confinement,
        line: &CommandLine,
    ) -> Result<tokio::process::Command, SandboxError>;
}

#[cfg(target_os = "linux")]
type Os = landlock::Landlock;
#[cfg(target_os = "macos")]
type Os = seatbelt::Seatbelt;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
type Os = none::NoSandbox;

/// Set to anything but "" or "0" to make the sandbox look unavailable, as
/// on a kernel without Landlock (a test hook: the agent then behaves as it
/// would there).
pub const UNAVAILABLE_VAR: &str = "CRUCIBLE_AGENT_SANDBOX_UNAVAILABLE";

/// Whether commands can be confined on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Available {
        /// What confines them, for the user ("Landlock ABI 6", "Seatbelt").
        mechanism: String,
        /// Why the network cannot be turned off for commands, if it cannot.
        network_gap: Option<String>,
    },
    /// Why not, for the user.
    Unavailable(String),
}

impl Support {
    /// Asks the platform (honouring [`UNAVAILABLE_VAR`]).
    pub fn probe() -> Self {
        if std::env::var(UNAVAILABLE_VAR).is_ok_and(|value| !value.is_empty() && value != "0") {
            return Self::Unavailable(format!("disabled by {UNAVAILABLE_VAR}"));
        }
        Os::probe()
    }

    pub fn is_available(&self) -> bool {
        matches!(self, Self::Available { .. })
    }

    /// Whether network connections can be denied.
    pub fn controls_network(&self) -> bool {
        matches!(
            self,
            Self::Available {
                network_gap: None,
                ..
            }
        )
    }
}

/// How far commands are confined (`[sandbox] mode`, and the session's
/// `sandbox` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Commands read everywhere and write only in temp directories.
    ReadOnly,
    /// Commands write only in the session's roots and temp directories.
    #[default]
    WorkspaceWrite,
    /// Commands run with the user's full rights.
    Off,
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [Self::ReadOnly, Self::WorkspaceWrite, Self::Off];

    /// The name the config and the session option use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::Off => "off",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == text)
    }

    /// What the mode means, for the client's selector.
    pub fn description(self) -> &'static str {
        match self {
            Self::ReadOnly => "Commands may read anything and write only in temp directories",
            Self::WorkspaceWrite => {
                "Commands may write only in the project and temp directories; no network unless allowed"
            }
            Self::Off => "Commands run with your full rights",
        }
    }
}

/// `[sandbox]`: the defaults every session starts with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// Commands may open TCP connections and listen.
    pub network: bool,
    /// More directories commands may write to in `workspace-write` (caches
    /// such as `~/.cargo`), absolute.
    pub writable: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("could not set up the sandbox: {0}")]
    Ruleset(String),
}

/// What one command may do; built before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    pub mode: SandboxMode,
    /// Where it may write (temp directories included).
    pub writable: Vec<PathBuf>,
    pub network: Network,
}

/// Whether a confined command may open network connections and listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    Allowed,
    Denied,
}

/// The temp directories every confined command may write to: /tmp,
/// /var/tmp, /dev/shm and the command's TMPDIR.
pub(super) fn temp_dirs(env: &[(String, String)]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if let Some((_, tmpdir)) = env.iter().find(|(name, _)| name == "TMPDIR")
        && Path::new(tmpdir).is_absolute()
    {
        dirs.push(PathBuf::from(tmpdir));
    }
    dirs
}

impl Confinement {
    /// What a command in `mode` gets; None when `mode` is off. `roots`: the
    /// session's directories; `env`: the command's environment (its TMPDIR).
    pub fn new(
        mode: SandboxMode,
        settings: &SandboxSettings,
        roots: &[PathBuf],
        env: &[(String, String)],
    ) -> Option<Self> {
        let mut writable = match mode {
            SandboxMode::Off => return None,
            SandboxMode::ReadOnly => Vec::new(),
            SandboxMode::WorkspaceWrite => roots
                .iter()
                .chain(settings.writable.iter())
                .cloned()
                .collect(),
        };
        for dir in temp_dirs(env) {
            if !writable.contains(&dir) {
                writable.push(dir);
            }
        }
        Some(Self {
            mode,
            writable,
            network: if settings.network {
                Network::Allowed
            } else {
                Network::Denied
            },
        })
    }

    /// A process running `line` confined, not started yet.
    pub fn command(&self, line: &CommandLine) -> Result<tokio::process::Command, SandboxError> {
        Os::command(self, line)
    }

    /// What the sandbox probably blocked, judging by a failed command's
    /// output ("writing /etc/hosts …"), or None when nothing in it points
    /// at the sandbox.
    pub fn explain(&self, output: &str, cwd: &Path) -> Option<String> {
        denial::explain(self, output, cwd)
    }

    /// The directories it may write to, for messages.
    fn writable_list(&self) -> String {
        self.writable
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The answer to "Run outside the sandbox?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Escalated {
    /// Run it once more, unconfined.
    Granted,
    /// Not allowed; the reason is what the model reads.
    Refused(String),
    /// The user cancelled the turn while being asked.
    Cancelled,
}

/// Who decides whether a command the sandbox blocked may run once outside
/// it (the session's permissions: a rule, or the user).
pub trait Escalation: Send + Sync {
    /// `call`: the blocked call; `blocked`: what the sandbox blocked.
    fn escalate<'a>(&'a self, call: &'a ToolCallInfo, blocked: &'a str)
    -> BoxFuture<'a, Escalated>;
}

/// A session's sandbox: the mode (which the client may change), the
/// config's settings, what the kernel supports, and who answers escalations.
pub struct SessionSandbox {
    mode: Mutex<SandboxMode>,
    settings: SandboxSettings,
    support: Support,
    /// Whether the session was given the [`Self::notice`].
    told: AtomicBool,
    /// Weak: the session's permissions, which answer, hold the sandbox.
    escalation: OnceLock<Weak<dyn Escalation>>,
}

impl std::fmt::Debug for SessionSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSandbox")
            .field("mode", &self.mode())
            .field("settings", &self.settings)
            .field("support", &self.support)
            .finish_non_exhaustive()
    }
}

impl SessionSandbox {
    pub fn new(settings: SandboxSettings, support: Support) -> Self {
        Self {
            mode: Mutex::new(settings.mode),
            settings,
            support,
            told: AtomicBool::new(false),
            escalation: OnceLock::new(),
        }
    }

    /// No sandbox: commands run unconfined (tools used outside a session).
    pub fn off() -> Self {
        let settings = SandboxSettings {
            mode: SandboxMode::Off,
            ..SandboxSettings::default()
        };
        Self::new(settings, Support::Unavailable("not a session".into()))
    }

    pub fn mode(&self) -> SandboxMode {
        *lock(&self.mode)
    }

    pub fn set_mode(&self, mode: SandboxMode) {
        *lock(&self.mode) = mode;
    }

    pub fn support(&self) -> &Support {
        &self.support
    }

    /// The sandbox is wanted but the kernel cannot give it: commands run
    /// unconfined, so `auto` asks before each.
    pub fn wanted_but_unavailable(&self) -> bool {
        self.mode() != SandboxMode::Off && !self.support.is_available()
    }

    /// Why commands cannot be confined although the sandbox is wanted.
    pub fn unavailable_reason(&self) -> Option<String> {
        match &self.support {
            Support::Unavailable(reason) if self.mode() != SandboxMode::Off => Some(reason.clone()),
            _ => None,
        }
    }

    /// What a command gets now, or None when it runs unconfined (mode off,
    /// or no sandbox here).
    pub fn confinement(&self, roots: &[PathBuf], env: &[(String, String)]) -> Option<Confinement> {
        if !self.support.is_available() {
            return None;
        }
        Confinement::new(self.mode(), &self.settings, roots, env)
    }

    /// What the session is told once, the first time it matters: that the
    /// sandbox is missing, or that this kernel cannot turn the network off.
    pub fn notice(&self) -> Option<String> {
        let text = match &self.support {
            Support::Unavailable(reason) if self.wanted_but_unavailable() => format!(
                "The command sandbox is not available: {reason}. Commands run with the user's full rights, so in auto mode each command asks first.\n"
            ),
            Support::Available {
                network_gap: Some(gap),
                ..
            } if self.mode() != SandboxMode::Off && !self.settings.network => {
                format!("The command sandbox confines writes, but {gap}.\n")
            }
            _ => return None,
        };
        (!self.told.swap(true, Ordering::Relaxed)).then_some(text)
    }

    /// Who answers "Run outside the sandbox?" (set once, by the session).
    pub fn set_escalation(&self, escalation: Weak<dyn Escalation>) {
        if self.escalation.set(escalation).is_err() {
            tracing::warn!("the sandbox already has an escalation handler");
        }
    }

    pub fn escalation(&self) -> Option<Arc<dyn Escalation>> {
        self.escalation.get()?.upgrade()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_is_told_once_what_the_sandbox_cannot_do_here() {
        let missing = SessionSandbox::new(
            SandboxSettings::default(),
            Support::Unavailable("no".into()),
        );
        assert!(
            missing
                .notice()
                .is_some_and(|text| text.contains("not available: no"))
        );
        assert_eq!(missing.notice(), None, "once");
        let old_kernel = SessionSandbox::new(
            SandboxSettings::default(),
            Support::Available {
                mechanism: "Landlock ABI 3".into(),
                network_gap: Some("this kernel cannot turn the network off".into()),
            },
        );
        assert!(
            old_kernel
                .notice()
                .is_some_and(|text| text.contains("cannot turn the network off"))
        );
        let off = SandboxSettings {
            mode: SandboxMode::Off,
            ..SandboxSettings::default()
        };
        assert_eq!(
            SessionSandbox::new(off, Support::Unavailable("no".into())).notice(),
            None
        );
        let fine = SessionSandbox::new(
            SandboxSettings::default(),
            Support::Available {
                mechanism: "Landlock ABI 7".into(),
                network_gap: None,
            },
        );
        assert_eq!(fine.notice(), None);
    }
}
