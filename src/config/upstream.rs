//! `[[mcp.servers]]`: Crucible's upstream MCP servers, as the agent's own
//! servers. `prefix` names their tools (`gh_` → `gh_search_code`),
//! `allowed_tools` and `blocked_tools` choose which are offered (blocked
//! wins), `timeout_secs` bounds one call. `auto_reconnect` needs nothing:
//! a server that dies is always started again. Crucible's `sse` transport
//! is the legacy HTTP+SSE one; `auth_header` becomes `Authorization`.
//! The entry's keys are mapped here; [`super::server_table`] reads them.

use std::path::Path;
use std::time::Duration;

use super::error::ConfigError;
use super::non_zero;
use super::raw::{RawUpstreamServer, RawUpstreamTransport};
use super::server_table::{
    Protocol, RemoteServer, ServerTable, StdioServer, UnsetSecret, inheritance,
};
use crate::mcp::{McpServerSpec, StdioSandbox, ToolSelection};

pub(super) fn validate_upstream(
    servers: Vec<RawUpstreamServer>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<Vec<McpServerSpec>, ConfigError> {
    let mut specs: Vec<McpServerSpec> = Vec::new();
    for (index, server) in servers.into_iter().enumerate() {
        let table = ServerTable::new(format!("mcp.servers[{index}]"), path, env);
        let name = server.name.clone();
        let spec = match entry(&table, server) {
            Ok(spec) => spec,
            // A server whose token is not exported is left out, not the
            // agent: the TUI's users keep servers for which only some
            // shells have keys.
            Err(err) => match table.unset_secret() {
                Some(UnsetSecret { key, variable }) => {
                    warnings.push(format!(
                        "{}: key `{key}` refers to the variable {variable}, which is not set; server `{}` is left out until {variable} is exported",
                        path.display(),
                        name.as_deref().unwrap_or("?"),
                    ));
                    continue;
                }
                None => return Err(err),
            },
        };
        check_unique(&table, &spec, &specs)?;
        specs.push(spec);
    }
    Ok(specs)
}

/// Each server needs its own name and its own prefix.
fn check_unique(
    table: &ServerTable<'_>,
    spec: &McpServerSpec,
    earlier: &[McpServerSpec],
) -> Result<(), ConfigError> {
    if earlier.iter().any(|other| other.name == spec.name) {
        return Err(table.invalid(
            "name",
            format!("`{}` names two servers", spec.name),
            "Give each [[mcp.servers]] entry its own name.",
        ));
    }
    if let Some(prefix) = &spec.tools.prefix
        && earlier
            .iter()
            .any(|other| other.tools.prefix.as_ref() == Some(prefix))
    {
        return Err(table.invalid(
            "prefix",
            format!("`{prefix}` is the prefix of two servers"),
            "Give each server its own prefix, so their tools keep apart.",
        ));
    }
    Ok(())
}

/// One `[[mcp.servers]]` entry as a spec.
fn entry(table: &ServerTable<'_>, server: RawUpstreamServer) -> Result<McpServerSpec, ConfigError> {
    let name = table.required(
        server.name,
        "name",
        "Name the server, e.g. name = \"github\".",
    )?;
    let prefix = match server.prefix {
        Some(prefix) => Some(tool_prefix(table, prefix)?),
        None => None,
    };
    let transport = table.required(
        server.transport,
        "transport",
        "Add [mcp.servers.transport] with type = \"stdio\" and command (or type = \"sse\" and url).",
    )?;
    let spec = table.checked(transport_spec(table, &name, transport)?)?;
    let timeout = non_zero(
        server.timeout_secs,
        table.path(),
        table.key("timeout_secs"),
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
fn tool_prefix(table: &ServerTable<'_>, prefix: String) -> Result<String, ConfigError> {
    let valid = prefix.ends_with('_')
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(prefix)
    } else {
        Err(table.invalid(
            "prefix",
            format!("`{prefix}` is not a tool prefix"),
            "Use letters, digits and underscores, ending in an underscore, e.g. prefix = \"gh_\".",
        ))
    }
}

/// `[mcp.servers.transport]`. Tokens live in `env`, `url` and
/// `auth_header`: an unset variable there leaves the server out, while one
/// in the command or its arguments is a mistake.
fn transport_spec(
    table: &ServerTable<'_>,
    name: &str,
    transport: RawUpstreamTransport,
) -> Result<McpServerSpec, ConfigError> {
    match transport.kind.as_deref().unwrap_or("stdio") {
        "stdio" => {
            let command = table.required(
                transport.command,
                "transport.command",
                "Name the program that runs the server, e.g. command = \"npx\".",
            )?;
            let command = table.expand("transport.command", &command)?;
            let args = transport
                .args
                .unwrap_or_default()
                .iter()
                .map(|arg| table.expand("transport.args", arg))
                .collect::<Result<_, _>>()?;
            let server = StdioServer {
                command,
                args,
                env: table.secrets("transport.env", transport.env)?,
                environment: inheritance(transport.inherit_env),
                cwd: None,
                sandbox: StdioSandbox::Off,
            };
            Ok(server.into_spec(name))
        }
        "sse" => {
            let url = table.required(
                transport.url,
                "transport.url",
                "Give the server's URL, e.g. url = \"http://localhost:3000/sse\".",
            )?;
            let url = table.expand_secret("transport.url", &url)?;
            let headers = match transport.auth_header {
                Some(header) => vec![(
                    "Authorization".to_string(),
                    table.expand_secret("transport.auth_header", &header)?,
                )],
                None => Vec::new(),
            };
            let server = RemoteServer {
                protocol: Protocol::LegacySse,
                url,
                headers,
            };
            Ok(server.into_spec(name))
        }
        other => Err(table.invalid(
            "transport.type",
            format!("`{other}` is not an MCP transport"),
            "Use \"stdio\" (with command) or \"sse\" (with url).",
        )),
    }
}
