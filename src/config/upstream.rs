//! `[[mcp.servers]]`: Crucible's upstream MCP servers, as the agent's own
//! servers. `prefix` names their tools (`gh_` → `gh_search_code`),
//! `allowed_tools` and `blocked_tools` choose which are offered (blocked
//! wins), `timeout_secs` bounds one call. `auto_reconnect` needs nothing:
//! a server that dies is always started again. Crucible's `sse` transport
//! is the legacy HTTP+SSE one; `auth_header` becomes `Authorization`.

use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

use super::error::{ConfigError, invalid};
use super::non_zero;
use super::raw::{RawUpstreamServer, RawUpstreamTransport};
use crate::mcp::{McpServerSpec, ToolSelection};
use crate::providers::settings::expand_env;

pub(super) fn validate_upstream(
    servers: Vec<RawUpstreamServer>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<McpServerSpec>, ConfigError> {
    let mut specs: Vec<McpServerSpec> = Vec::new();
    for (index, server) in servers.into_iter().enumerate() {
        let entry = Entry {
            index,
            path,
            env,
            unset: Cell::new(None),
        };
        let name = server.name.clone();
        let spec = match entry.spec(server) {
            Ok(spec) => spec,
            // A server whose token is not exported is left out, not the
            // agent: the TUI's users keep servers for which only some
            // shells have keys.
            Err(err) => match entry.unset.take() {
                Some((key, var)) => {
                    warnings.push(format!(
                        "{}: key `{key}` refers to the variable {var}, which is not set; server `{}` is left out until {var} is exported",
                        path.display(),
                        name.as_deref().unwrap_or("?"),
                    ));
                    continue;
                }
                None => return Err(err),
            },
        };
        if specs.iter().any(|other| other.name == spec.name) {
            return Err(invalid(
                path,
                entry.key("name"),
                format!("`{}` names two servers", spec.name),
                "Give each [[mcp.servers]] entry its own name.",
            ));
        }
        if let Some(prefix) = &spec.tools.prefix
            && specs
                .iter()
                .any(|other| other.tools.prefix.as_ref() == Some(prefix))
        {
            return Err(invalid(
                path,
                entry.key("prefix"),
                format!("`{prefix}` is the prefix of two servers"),
                "Give each server its own prefix, so their tools keep apart.",
            ));
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// The `index`th `[[mcp.servers]]` entry of the file at `path`.
struct Entry<'a> {
    index: usize,
    path: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// The key and variable of a token field (env, url, auth header) whose
    /// expansion failed for want of the variable: that leaves the server
    /// out rather than stopping the agent.
    unset: Cell<Option<(String, String)>>,
}

impl Entry<'_> {
    fn key(&self, field: &str) -> String {
        format!("mcp.servers[{}].{field}", self.index)
    }

    fn required<T>(&self, value: Option<T>, field: &str, fix: &str) -> Result<T, ConfigError> {
        value.ok_or_else(|| invalid(self.path, self.key(field), "is missing", fix))
    }

    fn expand(&self, field: &str, value: &str) -> Result<String, ConfigError> {
        expand_env(value, self.env).map_err(|var| {
            // Tokens live in these; an unset variable in the command is a mistake.
            let holds_tokens = field.starts_with("transport.env.")
                || matches!(field, "transport.url" | "transport.auth_header");
            if holds_tokens {
                self.unset.set(Some((self.key(field), var.name.clone())));
            }
            invalid(
                self.path,
                self.key(field),
                format!("refers to the variable {var}, which is not set"),
                format!("Export {var} in the environment the editor starts the agent from."),
            )
        })
    }

    fn spec(&self, server: RawUpstreamServer) -> Result<McpServerSpec, ConfigError> {
        let name = self.required(
            server.name,
            "name",
            "Name the server, e.g. name = \"github\".",
        )?;
        let prefix = match server.prefix {
            Some(prefix) => Some(self.prefix(prefix)?),
            None => None,
        };
        let transport = self.required(
            server.transport,
            "transport",
            "Add [mcp.servers.transport] with type = \"stdio\" and command (or type = \"sse\" and url).",
        )?;
        let spec = self.transport(&name, transport)?;
        let timeout = non_zero(
            server.timeout_secs,
            self.path,
            self.key("timeout_secs"),
            "is 0",
            "Use a number of seconds above 0 (Crucible's default is 30), or leave it out.",
        )?;
        let tools = ToolSelection {
            prefix,
            allowed: server.allowed_tools.unwrap_or_default(),
            blocked: server.blocked_tools.unwrap_or_default(),
        };
        let spec = spec.with_tool_selection(tools);
        Ok(match timeout {
            Some(secs) => spec.with_call_timeout(Duration::from_secs(secs)),
            None => spec,
        })
    }

    /// Crucible's rule: letters, digits and `_`, ending in `_`.
    fn prefix(&self, prefix: String) -> Result<String, ConfigError> {
        let valid = prefix.ends_with('_')
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            Ok(prefix)
        } else {
            Err(invalid(
                self.path,
                self.key("prefix"),
                format!("`{prefix}` is not a tool prefix"),
                "Use letters, digits and underscores, ending in an underscore, e.g. prefix = \"gh_\".",
            ))
        }
    }

    fn transport(
        &self,
        name: &str,
        transport: RawUpstreamTransport,
    ) -> Result<McpServerSpec, ConfigError> {
        let kind = transport.kind.as_deref().unwrap_or("stdio");
        let spec = match kind {
            "stdio" => {
                let command = self.required(
                    transport.command,
                    "transport.command",
                    "Name the program that runs the server, e.g. command = \"npx\".",
                )?;
                let mut spec =
                    McpServerSpec::stdio(name, self.expand("transport.command", &command)?);
                for arg in transport.args.unwrap_or_default() {
                    spec = spec.with_args([self.expand("transport.args", &arg)?]);
                }
                for (variable, value) in transport.env.unwrap_or_default() {
                    let value = self.expand(&format!("transport.env.{variable}"), &value)?;
                    spec = spec.with_env(variable, value);
                }
                spec.with_inherit_env(transport.inherit_env.unwrap_or(false))
            }
            "sse" => {
                let url = self.required(
                    transport.url,
                    "transport.url",
                    "Give the server's URL, e.g. url = \"http://localhost:3000/sse\".",
                )?;
                let mut spec = McpServerSpec::sse(name, self.expand("transport.url", &url)?);
                if let Some(header) = transport.auth_header {
                    let value = self.expand("transport.auth_header", &header)?;
                    spec = spec.with_header("Authorization", value);
                }
                spec
            }
            other => {
                return Err(invalid(
                    self.path,
                    self.key("transport.type"),
                    format!("`{other}` is not an MCP transport"),
                    "Use \"stdio\" (with command) or \"sse\" (with url).",
                ));
            }
        };
        spec.validate().map_err(|err| {
            invalid(
                self.path,
                format!("mcp.servers[{}]", self.index),
                err.to_string(),
                "Fix the server's settings.",
            )
        })?;
        Ok(spec)
    }
}
