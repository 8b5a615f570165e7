//! What an MCP server is, as the session was told: a name and how to reach
//! it. Built from ACP's `mcpServers` entries or from configuration.

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as acp;
use thiserror::Error;

/// One MCP server to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// Unique within a session; prefixes its tools' names.
    pub name: String,
    pub transport: McpTransport,
    /// Whether the server's `readOnlyHint` may spare the user the question
    /// (`trust_read_only_hints` in the config; true for the editor's servers).
    pub trust_read_only_hints: bool,
}

/// How to reach an MCP server. `Debug` shows variable and header names but
/// never their values, which often hold tokens.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        command: PathBuf,
        args: Vec<String>,
        /// Added to (or overriding) the agent's own environment.
        env: Vec<(String, String)>,
        /// The working directory; the agent's own when None.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP (MCP 2025-03-26 and later).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The legacy HTTP+SSE transport (MCP 2024-11-05).
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs
                .iter()
                .map(|(name, _)| format!("{name}=***"))
                .collect()
        };
        match self {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &names(env))
                .field("cwd", cwd)
                .finish(),
            McpTransport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
            McpTransport::Sse { url, headers } => f
                .debug_struct("Sse")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
        }
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
}

impl McpServerSpec {
    pub fn stdio(name: impl Into<String>, command: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
            },
            trust_read_only_hints: true,
        }
    }

    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Http {
                url: url.into(),
                headers: Vec::new(),
            },
            trust_read_only_hints: true,
        }
    }

    pub fn sse(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Sse {
                url: url.into(),
                headers: Vec::new(),
            },
            trust_read_only_hints: true,
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
            env.push((key.into(), value.into()));
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

    /// Adds an HTTP header (http and sse only; ignored otherwise).
    /// Whether to believe the server's `readOnlyHint`s.
    pub fn with_trust_read_only_hints(mut self, trust: bool) -> Self {
        self.trust_read_only_hints = trust;
        self
    }

    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } | McpTransport::Sse { headers, .. } =
            &mut self.transport
        {
            headers.push((key.into(), value.into()));
        }
        self
    }

    /// An ACP `mcpServers` entry, with stdio servers started in `cwd` (the
    /// session's directory: ACP gives them none of their own).
    pub fn from_acp(server: &acp::McpServer, cwd: &Path) -> Result<Self, SpecError> {
        let spec = Self::try_from(server)?;
        Ok(match spec.transport {
            McpTransport::Stdio { cwd: None, .. } => spec.with_cwd(cwd),
            _ => spec,
        })
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
        }
    }
}

impl TryFrom<&acp::McpServer> for McpServerSpec {
    type Error = SpecError;

    fn try_from(server: &acp::McpServer) -> Result<Self, SpecError> {
        let headers = |headers: &[acp::HttpHeader]| {
            headers
                .iter()
                .map(|header| (header.name.clone(), header.value.clone()))
                .collect::<Vec<_>>()
        };
        let spec = match server {
            acp::McpServer::Stdio(stdio) => Self {
                name: stdio.name.clone(),
                transport: McpTransport::Stdio {
                    command: stdio.command.clone(),
                    args: stdio.args.clone(),
                    env: stdio
                        .env
                        .iter()
                        .map(|var| (var.name.clone(), var.value.clone()))
                        .collect(),
                    cwd: None,
                },
                trust_read_only_hints: true,
            },
            acp::McpServer::Http(http) => Self {
                name: http.name.clone(),
                transport: McpTransport::Http {
                    url: http.url.clone(),
                    headers: headers(&http.headers),
                },
                trust_read_only_hints: true,
            },
            acp::McpServer::Sse(sse) => Self {
                name: sse.name.clone(),
                transport: McpTransport::Sse {
                    url: sse.url.clone(),
                    headers: headers(&sse.headers),
                },
                trust_read_only_hints: true,
            },
            // The enum is non-exhaustive (e.g. the unstable `acp` transport).
            #[allow(unreachable_patterns)]
            _ => {
                return Err(SpecError::UnsupportedTransport {
                    name: acp_name(server),
                });
            }
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// The name of an entry of a kind this code does not know, via its JSON.
fn acp_name(server: &acp::McpServer) -> String {
    serde_json::to_value(server)
        .ok()
        .and_then(|value| value.get("name")?.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: serde_json::Value) -> acp::McpServer {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn stdio_entries_take_the_session_cwd() {
        let server = parse(serde_json::json!({
            "name": "fs",
            "command": "/usr/bin/node",
            "args": ["server.js", "/tmp"],
            "env": [{"name": "TOKEN", "value": "x"}]
        }));
        let spec = McpServerSpec::from_acp(&server, Path::new("/work/project")).unwrap();
        assert_eq!(
            spec,
            McpServerSpec::stdio("fs", "/usr/bin/node")
                .with_args(["server.js", "/tmp"])
                .with_env("TOKEN", "x")
                .with_cwd("/work/project")
        );
    }

    #[test]
    fn http_and_sse_entries_keep_their_headers() {
        let http = parse(serde_json::json!({
            "type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer t"}]
        }));
        assert_eq!(
            McpServerSpec::try_from(&http).unwrap(),
            McpServerSpec::http("web", "http://127.0.0.1:1/mcp")
                .with_header("Authorization", "Bearer t")
        );
        let sse = parse(serde_json::json!({
            "type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []
        }));
        assert_eq!(
            McpServerSpec::from_acp(&sse, Path::new("/x")).unwrap(),
            McpServerSpec::sse("old", "https://example.com/sse")
        );
    }

    #[test]
    fn unusable_entries_say_why() {
        let bad_url = parse(
            serde_json::json!({"type": "http", "name": "w", "url": "not a url", "headers": []}),
        );
        let err = McpServerSpec::try_from(&bad_url).unwrap_err();
        assert!(err.to_string().contains("invalid URL `not a url`"), "{err}");

        let ftp = parse(
            serde_json::json!({"type": "http", "name": "w", "url": "ftp://x/", "headers": []}),
        );
        let err = McpServerSpec::try_from(&ftp).unwrap_err();
        assert!(err.to_string().contains("only http and https"), "{err}");

        let header = parse(serde_json::json!({
            "type": "http", "name": "w", "url": "http://x/", "headers": [{"name": "bad header", "value": "v"}]
        }));
        assert_eq!(
            McpServerSpec::try_from(&header).unwrap_err(),
            SpecError::InvalidHeader {
                name: "w".into(),
                header: "bad header".into()
            }
        );

        let unnamed =
            parse(serde_json::json!({"name": " ", "command": "x", "args": [], "env": []}));
        assert_eq!(
            McpServerSpec::try_from(&unnamed).unwrap_err(),
            SpecError::EmptyName
        );

        let no_command =
            parse(serde_json::json!({"name": "n", "command": "", "args": [], "env": []}));
        assert!(matches!(
            McpServerSpec::try_from(&no_command),
            Err(SpecError::EmptyCommand { .. })
        ));
    }
}
