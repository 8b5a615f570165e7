//! What an MCP server is, as the session was told: a name and how to reach
//! it. Built from configuration or from the client's `mcpServers` entries
//! (`crate::acp::mcp_spec`).

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use super::relay::Relay;
use crate::tools::sandbox::Confinement;
use crate::util::glob_matches;

/// One MCP server to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// Unique within a session; prefixes its tools' names.
    pub name: String,
    pub transport: McpTransport,
    /// Whether the server's `readOnlyHint` may spare the user the question
    /// (`trust_read_only_hints` in the config; true for the editor's servers).
    pub trust_read_only_hints: bool,
    /// Which of its tools are offered and under what names.
    pub tools: ToolSelection,
    /// How long one call may take, when not the options' `call_timeout`.
    pub call_timeout: Option<Duration>,
}

/// Whether a server's `readOnlyHint`s may spare the user the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnlyHints {
    Trusted,
    Ignored,
}

/// Whether a stdio server gets the agent's whole environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvInheritance {
    /// The base of [`crate::tools::environment::CORE_VARIABLES`] and its own.
    Base,
    /// The agent's whole environment and its own.
    Whole,
}

/// Whether a stdio server runs in the command sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StdioSandbox {
    #[default]
    Off,
    /// Asked for (`sandbox = true`), not yet settled by a session: the
    /// server does not start so.
    Wanted,
    /// Writes only in the session's roots and temp; network as configured.
    Confined(Confinement),
    /// Asked for, but not available here (why): the server does not start.
    Unavailable(String),
}

/// Crucible's `prefix`, `allowed_tools` and `blocked_tools` for a server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSelection {
    /// Tools are named `{prefix}{tool}` instead of `{server}__{tool}`.
    pub prefix: Option<String>,
    /// Globs (`*` = any characters); when not empty a tool must match one.
    pub allowed: Vec<String>,
    /// Globs; a tool matching one is never offered, even if allowed.
    pub blocked: Vec<String>,
}

impl ToolSelection {
    /// Whether the tool named `tool` (its MCP name) is offered.
    pub fn offers(&self, tool: &str) -> bool {
        let matches = |patterns: &[String]| patterns.iter().any(|p| glob_matches(p, tool));
        !matches(&self.blocked) && (self.allowed.is_empty() || matches(&self.allowed))
    }
}

/// How to reach an MCP server. `Debug` shows variable and header names but
/// never their values, which often hold tokens ([`NamedSecrets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        command: PathBuf,
        args: Vec<String>,
        /// Added to the base environment (or to the agent's own, when
        /// `inherit_env`).
        env: NamedSecrets,
        /// Whether the server gets the agent's whole environment instead of
        /// the base of [`crate::tools::environment::CORE_VARIABLES`].
        inherit_env: bool,
        /// The working directory; the agent's own when None.
        cwd: Option<PathBuf>,
        /// Whether it runs in the command sandbox (`sandbox = true`).
        sandbox: StdioSandbox,
    },
    /// Streamable HTTP (MCP 2025-03-26 and later).
    Http { url: String, headers: NamedSecrets },
    /// The legacy HTTP+SSE transport (MCP 2024-11-05).
    Sse { url: String, headers: NamedSecrets },
    /// Served by the editor over the ACP connection (unstable MCP-over-ACP):
    /// `server_id` is the editor's name for it.
    Acp { server_id: String, relay: Relay },
}

/// Names and values where a value may hold a token (a stdio server's
/// variables, an HTTP server's headers): `Debug` shows the names only, so
/// the values never reach a log.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NamedSecrets(Vec<(String, String)>);

impl NamedSecrets {
    pub fn push(&mut self, name: String, value: String) {
        self.0.push((name, value));
    }
}

impl std::ops::Deref for NamedSecrets {
    type Target = [(String, String)];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<'a> IntoIterator for &'a NamedSecrets {
    type Item = &'a (String, String);
    type IntoIter = std::slice::Iter<'a, (String, String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl std::fmt::Debug for NamedSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = self.0.iter().map(|(name, _)| format!("{name}=***"));
        f.debug_list().entries(names).finish()
    }
}

/// Why a server description cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("an MCP server has an empty name")]
    EmptyName,
    #[error("MCP server `{name}` has an empty command")]
    EmptyCommand { name: String },
    #[error("MCP server `{name}` has an invalid URL `{url}`: {reason}")]
    InvalidUrl {
        name: String,
        url: String,
        reason: String,
    },
    #[error("MCP server `{name}` has an invalid HTTP header `{header}`")]
    InvalidHeader { name: String, header: String },
    #[error("MCP server `{name}` uses a transport this agent does not support")]
    UnsupportedTransport { name: String },
    #[error("MCP server `{name}` has an empty serverId")]
    EmptyServerId { name: String },
}

impl McpServerSpec {
    pub fn stdio(name: impl Into<String>, command: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: NamedSecrets::default(),
                inherit_env: false,
                cwd: None,
                sandbox: StdioSandbox::Off,
            },
            trust_read_only_hints: true,
            tools: ToolSelection::default(),
            call_timeout: None,
        }
    }

    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Http {
                url: url.into(),
                headers: NamedSecrets::default(),
            },
            trust_read_only_hints: true,
            tools: ToolSelection::default(),
            call_timeout: None,
        }
    }

    pub fn sse(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Sse {
                url: url.into(),
                headers: NamedSecrets::default(),
            },
            trust_read_only_hints: true,
            tools: ToolSelection::default(),
            call_timeout: None,
        }
    }

    /// A server the editor serves over the ACP connection, through `relay`.
    pub fn acp(name: impl Into<String>, server_id: impl Into<String>, relay: Relay) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Acp {
                server_id: server_id.into(),
                relay,
            },
            trust_read_only_hints: true,
            tools: ToolSelection::default(),
            call_timeout: None,
        }
    }

    /// Appends arguments (stdio only; ignored otherwise).
    pub fn with_args<I, S>(mut self, new_args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let McpTransport::Stdio { args, .. } = &mut self.transport {
            args.extend(new_args.into_iter().map(Into::into));
        }
        self
    }

    /// Adds an environment variable (stdio only; ignored otherwise).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.push(key.into(), value.into());
        }
        self
    }

    /// Gives the server the agent's whole environment, or only the base
    /// (stdio only; ignored otherwise).
    pub fn with_environment(mut self, inheritance: EnvInheritance) -> Self {
        if let McpTransport::Stdio { inherit_env, .. } = &mut self.transport {
            *inherit_env = inheritance == EnvInheritance::Whole;
        }
        self
    }

    /// Sets the working directory (stdio only; ignored otherwise).
    pub fn with_cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let McpTransport::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }

    /// Asks for the command sandbox, [`StdioSandbox::Wanted`], or not
    /// (stdio only; ignored otherwise); the session decides how
    /// ([`Self::confine`]).
    pub fn with_sandbox(mut self, wanted: StdioSandbox) -> Self {
        if let McpTransport::Stdio { sandbox, .. } = &mut self.transport {
            *sandbox = wanted;
        }
        self
    }

    /// Settles a wanted sandbox: `confinement` is what the session's
    /// sandbox gives (None: it gives none); `unavailable` says why, when the
    /// sandbox is wanted but cannot be had (then the server does not start).
    pub fn confine(&mut self, confinement: Option<Confinement>, unavailable: Option<String>) {
        if let McpTransport::Stdio { sandbox, .. } = &mut self.transport
            && *sandbox == StdioSandbox::Wanted
        {
            *sandbox = match (confinement, unavailable) {
                (Some(confinement), _) => StdioSandbox::Confined(confinement),
                (None, Some(reason)) => StdioSandbox::Unavailable(reason),
                // The session's sandbox is off: so is the server's.
                (None, None) => StdioSandbox::Off,
            };
        }
    }

    /// Names and filters its tools.
    pub fn with_tool_selection(mut self, tools: ToolSelection) -> Self {
        self.tools = tools;
        self
    }

    /// Its own call timeout.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Whether to believe the server's `readOnlyHint`s.
    pub fn with_read_only_hints(mut self, hints: ReadOnlyHints) -> Self {
        self.trust_read_only_hints = hints == ReadOnlyHints::Trusted;
        self
    }

    /// Whether the server's `readOnlyHint`s are believed.
    pub fn read_only_hints(&self) -> ReadOnlyHints {
        if self.trust_read_only_hints {
            ReadOnlyHints::Trusted
        } else {
            ReadOnlyHints::Ignored
        }
    }

    /// Adds an HTTP header (http and sse only; ignored otherwise).
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } | McpTransport::Sse { headers, .. } =
            &mut self.transport
        {
            headers.push(key.into(), value.into());
        }
        self
    }

    /// Checks what can be checked without starting anything.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.name.trim().is_empty() {
            return Err(SpecError::EmptyName);
        }
        let name = || self.name.clone();
        match &self.transport {
            McpTransport::Stdio { command, .. } => {
                if command.as_os_str().is_empty() {
                    return Err(SpecError::EmptyCommand { name: name() });
                }
            }
            McpTransport::Acp { server_id, .. } => {
                if server_id.trim().is_empty() {
                    return Err(SpecError::EmptyServerId { name: name() });
                }
            }
            McpTransport::Http { url, headers } | McpTransport::Sse { url, headers } => {
                let parsed = reqwest::Url::parse(url).map_err(|err| SpecError::InvalidUrl {
                    name: name(),
                    url: url.clone(),
                    reason: err.to_string(),
                })?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(SpecError::InvalidUrl {
                        name: name(),
                        url: url.clone(),
                        reason: "only http and https are supported".into(),
                    });
                }
                for (key, value) in headers {
                    let valid = reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_ok()
                        && reqwest::header::HeaderValue::from_str(value).is_ok();
                    if !valid {
                        return Err(SpecError::InvalidHeader {
                            name: name(),
                            header: key.clone(),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// A short description for logs: the command or the URL.
    pub fn target(&self) -> String {
        match &self.transport {
            McpTransport::Stdio { command, .. } => command.display().to_string(),
            McpTransport::Http { url, .. } | McpTransport::Sse { url, .. } => url.clone(),
            McpTransport::Acp { server_id, .. } => format!("acp:{server_id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_tools_win_over_allowed_ones() {
        let selection = ToolSelection {
            prefix: None,
            allowed: vec!["search_*".into(), "get_*".into()],
            blocked: vec!["*_dangerous".into()],
        };
        assert!(selection.offers("search_code"));
        assert!(selection.offers("get_repo"));
        assert!(!selection.offers("delete_repo"));
        assert!(!selection.offers("search_dangerous"));
        assert!(ToolSelection::default().offers("anything"));
    }
}
