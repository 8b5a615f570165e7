//! One reader for an MCP server table, in either spelling the file may use:
//! ours (`[mcp_servers.NAME]`, see [`super::mcp`]) and Crucible's
//! (`[[mcp.servers]]`, see [`super::upstream`]). Each spelling maps its keys
//! onto a [`StdioServer`] or a [`RemoteServer`]; this reads the values
//! (required ones present, variables expanded) and builds the spec, with
//! one wording for each error.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;

use super::error::{ConfigError, invalid};
use crate::mcp::{EnvInheritance, McpServerSpec, StdioSandbox};
use crate::providers::settings::expand_env;

/// One server's table in the file at `path`.
pub(super) struct ServerTable<'a> {
    /// The table's own key: `mcp_servers.NAME` or `mcp.servers[INDEX]`.
    key: String,
    path: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// The first secret whose variable was not set, if any.
    unset_secret: Cell<Option<UnsetSecret>>,
}

/// A secret (a token in `env`, a URL, a header) that names an unset variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UnsetSecret {
    /// The whole key, e.g. `mcp.servers[0].transport.env.GITHUB_TOKEN`.
    pub key: String,
    pub variable: String,
}

/// A server the agent runs as a child process, as its table gives it.
pub(super) struct StdioServer {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub environment: EnvInheritance,
    pub cwd: Option<String>,
    pub sandbox: StdioSandbox,
}

/// A server reached over HTTP, as its table gives it.
pub(super) struct RemoteServer {
    pub protocol: Protocol,
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// How a remote server speaks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    /// Streamable HTTP (`type = "http"`).
    StreamableHttp,
    /// The legacy HTTP+SSE transport (`type = "sse"`).
    LegacySse,
}

/// `inherit_env` as written (off when not).
pub(super) fn inheritance(inherit_env: Option<bool>) -> EnvInheritance {
    if inherit_env == Some(true) {
        EnvInheritance::Whole
    } else {
        EnvInheritance::Base
    }
}

/// `sandbox` as written (off when not).
pub(super) fn sandboxing(sandbox: Option<bool>) -> StdioSandbox {
    if sandbox == Some(true) {
        StdioSandbox::Wanted
    } else {
        StdioSandbox::Off
    }
}

impl StdioServer {
    pub(super) fn into_spec(self, name: &str) -> McpServerSpec {
        let spec = McpServerSpec::stdio(name, self.command).with_args(self.args);
        let mut spec = self.env.into_iter().fold(spec, |spec, (variable, value)| {
            spec.with_env(variable, value)
        });
        if let Some(cwd) = self.cwd {
            spec = spec.with_cwd(cwd);
        }
        spec.with_environment(self.environment)
            .with_sandbox(self.sandbox)
    }
}

impl RemoteServer {
    pub(super) fn into_spec(self, name: &str) -> McpServerSpec {
        let spec = match self.protocol {
            Protocol::StreamableHttp => McpServerSpec::http(name, self.url),
            Protocol::LegacySse => McpServerSpec::sse(name, self.url),
        };
        self.headers
            .into_iter()
            .fold(spec, |spec, (header, value)| {
                spec.with_header(header, value)
            })
    }
}

impl<'a> ServerTable<'a> {
    pub(super) fn new(
        key: String,
        path: &'a Path,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Self {
        Self {
            key,
            path,
            env,
            unset_secret: Cell::new(None),
        }
    }

    /// The file the table is in.
    pub(super) fn path(&self) -> &Path {
        self.path
    }

    /// The whole key of `field` of this table.
    pub(super) fn key(&self, field: &str) -> String {
        format!("{}.{field}", self.key)
    }

    /// The error for `field` of this table.
    pub(super) fn invalid(
        &self,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> ConfigError {
        invalid(self.path, self.key(field), problem, fix)
    }

    pub(super) fn required<T>(
        &self,
        value: Option<T>,
        field: &str,
        fix: &str,
    ) -> Result<T, ConfigError> {
        value.ok_or_else(|| self.invalid(field, "is missing", fix))
    }

    /// `value` with its `${VAR}` and `{env:VAR}` replaced from the environment.
    pub(super) fn expand(&self, field: &str, value: &str) -> Result<String, ConfigError> {
        expand_env(value, self.env).map_err(|variable| self.unset(field, &variable.name))
    }

    /// Like [`expand`](Self::expand), for a value that holds a token: an
    /// unset variable is also kept, so a caller may leave the server out
    /// rather than stop (see [`unset_secret`](Self::unset_secret)).
    pub(super) fn expand_secret(&self, field: &str, value: &str) -> Result<String, ConfigError> {
        expand_env(value, self.env).map_err(|variable| {
            self.unset_secret.set(Some(UnsetSecret {
                key: self.key(field),
                variable: variable.name.clone(),
            }));
            self.unset(field, &variable.name)
        })
    }

    /// The secret whose variable was not set, when that stopped the reading.
    pub(super) fn unset_secret(&self) -> Option<UnsetSecret> {
        self.unset_secret.take()
    }

    fn unset(&self, field: &str, variable: &str) -> ConfigError {
        self.invalid(
            field,
            format!("refers to the variable {variable}, which is not set"),
            format!(
                "Export {variable} in the environment the editor starts the agent from, or take the key out."
            ),
        )
    }

    /// Every `NAME = "value"` of the table `field` (`env`, `headers`), its
    /// values expanded as secrets.
    pub(super) fn secrets(
        &self,
        field: &str,
        values: Option<BTreeMap<String, String>>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        values
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| {
                let value = self.expand_secret(&format!("{field}.{name}"), &value)?;
                Ok((name, value))
            })
            .collect()
    }

    /// `spec`, once what can be checked without starting it holds.
    pub(super) fn checked(&self, spec: McpServerSpec) -> Result<McpServerSpec, ConfigError> {
        spec.validate().map_err(|err| {
            invalid(
                self.path,
                &self.key,
                err.to_string(),
                "Fix the server's settings.",
            )
        })?;
        Ok(spec)
    }
}
